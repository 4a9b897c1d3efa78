//! The strings of the login pages and e-mails, in English and German. A missing translation is a
//! compile error: both languages fill the same struct.

use axum::http::HeaderMap;
use axum::http::header::ACCEPT_LANGUAGE;

pub struct Texts {
    pub lang: &'static str,
    pub sign_in: &'static str,
    pub continue_to: &'static str,
    pub login_name: &'static str,
    pub login_name_hint: &'static str,
    pub next: &'static str,
    pub password: &'static str,
    pub enter_password: &'static str,
    pub another_account: &'static str,
    pub choose_account: &'static str,
    pub signed_in: &'static str,
    pub register: &'static str,
    pub register_link: &'static str,
    pub have_account: &'static str,
    pub email: &'static str,
    pub first_name: &'static str,
    pub last_name: &'static str,
    pub user_name_optional: &'static str,
    pub password_repeat: &'static str,
    pub change_password: &'static str,
    pub change_password_text: &'static str,
    pub new_password: &'static str,
    pub save: &'static str,
    pub verify_email: &'static str,
    pub verify_email_text: &'static str,
    pub code: &'static str,
    pub verify: &'static str,
    pub resend: &'static str,
    pub skip: &'static str,
    pub code_sent: &'static str,
    pub init_password: &'static str,
    pub init_password_text: &'static str,
    pub totp: &'static str,
    pub totp_text: &'static str,
    pub totp_enrol: &'static str,
    pub totp_enrol_text: &'static str,
    pub totp_required_text: &'static str,
    pub totp_secret: &'static str,
    pub totp_open_app: &'static str,
    pub activate: &'static str,
    pub totp_enrolled: &'static str,
    pub totp_current_code: &'static str,
    pub err_no_session: &'static str,
    pub signed_out: &'static str,
    pub sign_out: &'static str,
    pub sign_out_question: &'static str,
    pub signed_out_text: &'static str,
    pub error_heading: &'static str,
    pub error_request_id: &'static str,
    pub form_post_text: &'static str,
    pub form_post_button: &'static str,
    pub err_credentials: &'static str,
    pub err_locked: &'static str,
    pub err_inactive: &'static str,
    pub err_mismatch: &'static str,
    pub err_policy: &'static str,
    pub err_code_wrong: &'static str,
    pub err_code_gone: &'static str,
    pub err_init_code: &'static str,
    pub no_password_yet: &'static str,
    pub forgot_password: &'static str,
    pub err_expired: &'static str,
    pub err_form: &'static str,
    pub err_request_too_long: &'static str,
    pub err_register_disabled: &'static str,
    pub err_user_taken: &'static str,
    pub err_email_invalid: &'static str,
    pub err_required: &'static str,
    pub err_unavailable: &'static str,
    /// A failure on latch's side (its detail goes to the log, not the page).
    pub err_internal: &'static str,
    pub err_no_org: &'static str,
    pub err_no_page: &'static str,
    pub err_wrong_method: &'static str,
    /// Rate limit reached; `{}` is replaced by the seconds to wait.
    pub err_too_many: &'static str,
    pub err_too_large: &'static str,
    pub err_client_missing: &'static str,
    pub err_client_unknown: &'static str,
    pub err_redirect_missing: &'static str,
    pub err_redirect_unknown: &'static str,
    /// `{}` is the parameter's name.
    pub err_param_repeated: &'static str,
    pub err_param_too_long: &'static str,
    pub err_param_invalid: &'static str,
    pub err_hint_invalid: &'static str,
    pub err_name_controls: &'static str,
    pub err_hint_other_client: &'static str,
    pub err_post_logout_unknown: &'static str,
    pub pw_too_short: &'static str,
    pub pw_upper: &'static str,
    pub pw_lower: &'static str,
    pub pw_number: &'static str,
    pub pw_symbol: &'static str,
    pub mail_verify_subject: &'static str,
    pub mail_verify_body: &'static str,
    pub mail_init_subject: &'static str,
    pub mail_init_body: &'static str,
    pub mail_reset_subject: &'static str,
    pub mail_reset_body: &'static str,
}

pub static EN: Texts = Texts {
    lang: "en",
    sign_in: "Sign in",
    continue_to: "to continue to",
    login_name: "Login name",
    login_name_hint: "Your user name or e-mail address",
    next: "Next",
    password: "Password",
    enter_password: "Enter your password",
    another_account: "Use another account",
    choose_account: "Choose an account",
    signed_in: "signed in",
    register: "Create an account",
    register_link: "No account yet? Register",
    have_account: "Already have an account? Sign in",
    email: "E-mail address",
    first_name: "First name",
    last_name: "Last name",
    user_name_optional: "User name (optional, defaults to the e-mail address)",
    password_repeat: "Repeat the password",
    change_password: "Change your password",
    change_password_text: "Your password must be changed before you continue.",
    new_password: "New password",
    save: "Save",
    verify_email: "Verify your e-mail address",
    verify_email_text: "We sent a code to",
    code: "Code",
    verify: "Verify",
    resend: "Send a new code",
    skip: "Later",
    code_sent: "A new code is on its way.",
    init_password: "Set your password",
    init_password_text: "If this account can set its password here, we sent a code to its e-mail address. Enter it and choose a new password.",
    totp: "Two-factor authentication",
    totp_text: "Enter the code your authenticator app shows.",
    totp_enrol: "Set up two-factor authentication",
    totp_enrol_text: "Add this key to your authenticator app, then enter the code it shows.",
    totp_required_text: "Two-factor authentication is required here. Add this key to your authenticator app, then enter the code it shows.",
    totp_secret: "Key",
    totp_open_app: "Open in an authenticator app",
    activate: "Activate",
    totp_enrolled: "Two-factor authentication is on. From now on you will be asked for a code after your password.",
    totp_current_code: "Code from your current authenticator app",
    err_no_session: "You are not signed in. Sign in through an application first, then come back.",
    signed_out: "You are signed out",
    sign_out: "Sign out",
    sign_out_question: "Do you want to sign out? Every account signed in in this browser will be signed out.",
    signed_out_text: "You have been signed out. You can close this window.",
    error_heading: "Something went wrong",
    error_request_id: "Request id",
    form_post_text: "Your browser does not run scripts. Press the button to continue.",
    form_post_button: "Continue",
    err_credentials: "The login name or the password is wrong.",
    err_locked: "This account is locked. Ask your administrator to unlock it.",
    err_inactive: "This account is deactivated.",
    err_mismatch: "The passwords do not match.",
    err_policy: "The password does not meet the policy:",
    err_code_wrong: "The code is wrong.",
    err_code_gone: "The code has expired. Ask for a new one.",
    err_init_code: "The code is wrong or no longer valid. You can ask for a new one.",
    no_password_yet: "No password yet? Get a code by e-mail",
    forgot_password: "Forgot your password, or have none yet? Get a code by e-mail",
    err_expired: "This sign-in has expired. Go back to the application and start again.",
    err_form: "The form could not be accepted. Reload the page and try again.",
    err_request_too_long: "The application's sign-in request is too long. Go back to the application and try again.",
    err_register_disabled: "Registration is not allowed.",
    err_user_taken: "This user name is taken.",
    err_email_invalid: "This e-mail address is not valid.",
    err_required: "Please fill in every required field.",
    err_unavailable: "The service is temporarily unavailable. Please try again.",
    err_internal: "Something went wrong on our side. Please try again later.",
    err_no_org: "This account belongs to no organization and cannot sign in.",
    err_no_page: "There is no such page.",
    err_wrong_method: "This page cannot be opened this way. Go back to the application and sign in again.",
    err_too_many: "Too many attempts. Please wait {} seconds and try again.",
    err_too_large: "The form sent was too large.",
    err_client_missing: "The application did not say who it is: client_id is missing.",
    err_client_unknown: "The application is unknown or inactive.",
    err_redirect_missing: "The application did not say where to return: redirect_uri is missing.",
    err_redirect_unknown: "The return address (redirect_uri) is not registered for this application.",
    err_param_repeated: "The parameter {} is repeated.",
    err_param_too_long: "The parameter {} is too long.",
    err_param_invalid: "The parameter {} contains an invalid character.",
    err_hint_invalid: "The id_token_hint is not an ID token of this issuer.",
    err_name_controls: "Names must not contain line breaks or other control characters.",
    err_hint_other_client: "client_id and the id_token_hint name different applications.",
    err_post_logout_unknown: "The return address (post_logout_redirect_uri) is not registered for this application.",
    pw_too_short: "it is too short",
    pw_upper: "it needs an uppercase letter",
    pw_lower: "it needs a lowercase letter",
    pw_number: "it needs a number",
    pw_symbol: "it needs a symbol",
    mail_verify_subject: "Verify your e-mail address",
    mail_verify_body: "Hello {name},\n\nyour verification code is: {code}\n\nIt is valid for one hour. If you did not ask for it, ignore this message.\n",
    mail_init_subject: "Set your password",
    mail_init_body: "Hello {name},\n\nan account was created for you. Sign in with your login name and this code to set your password: {code}\n\nThe code is valid for 72 hours.\n",
    mail_reset_subject: "Reset your password",
    mail_reset_body: "Hello {name},\n\nsomeone asked to reset the password of your account. To choose a new one, sign in with your login name, choose \"Forgot your password?\" on the password page and enter this code: {code}\n\nThe code is valid for one hour. A new password ends your other sessions. If you did not ask for this, ignore this message: your password stays as it is.\n",
};

pub static DE: Texts = Texts {
    lang: "de",
    sign_in: "Anmelden",
    continue_to: "um fortzufahren zu",
    login_name: "Anmeldename",
    login_name_hint: "Ihr Benutzername oder Ihre E-Mail-Adresse",
    next: "Weiter",
    password: "Passwort",
    enter_password: "Geben Sie Ihr Passwort ein",
    another_account: "Anderes Konto verwenden",
    choose_account: "Konto auswählen",
    signed_in: "angemeldet",
    register: "Konto erstellen",
    register_link: "Noch kein Konto? Registrieren",
    have_account: "Bereits ein Konto? Anmelden",
    email: "E-Mail-Adresse",
    first_name: "Vorname",
    last_name: "Nachname",
    user_name_optional: "Benutzername (optional, sonst die E-Mail-Adresse)",
    password_repeat: "Passwort wiederholen",
    change_password: "Passwort ändern",
    change_password_text: "Sie müssen Ihr Passwort ändern, bevor Sie fortfahren.",
    new_password: "Neues Passwort",
    save: "Speichern",
    verify_email: "E-Mail-Adresse bestätigen",
    verify_email_text: "Wir haben einen Code gesendet an",
    code: "Code",
    verify: "Bestätigen",
    resend: "Neuen Code senden",
    skip: "Später",
    code_sent: "Ein neuer Code ist unterwegs.",
    init_password: "Passwort festlegen",
    init_password_text: "Wenn für dieses Konto hier ein Passwort festgelegt werden kann, haben wir einen Code an seine E-Mail-Adresse gesendet. Geben Sie ihn ein und wählen Sie ein neues Passwort.",
    totp: "Zwei-Faktor-Authentifizierung",
    totp_text: "Geben Sie den Code aus Ihrer Authenticator-App ein.",
    totp_enrol: "Zwei-Faktor-Authentifizierung einrichten",
    totp_enrol_text: "Fügen Sie diesen Schlüssel Ihrer Authenticator-App hinzu und geben Sie dann den angezeigten Code ein.",
    totp_required_text: "Hier ist die Zwei-Faktor-Authentifizierung vorgeschrieben. Fügen Sie diesen Schlüssel Ihrer Authenticator-App hinzu und geben Sie dann den angezeigten Code ein.",
    totp_secret: "Schlüssel",
    totp_open_app: "In einer Authenticator-App öffnen",
    activate: "Aktivieren",
    totp_enrolled: "Die Zwei-Faktor-Authentifizierung ist aktiv. Ab jetzt werden Sie nach dem Passwort nach einem Code gefragt.",
    totp_current_code: "Code aus Ihrer bisherigen Authenticator-App",
    err_no_session: "Sie sind nicht angemeldet. Melden Sie sich zuerst über eine Anwendung an und kommen Sie dann zurück.",
    signed_out: "Sie sind abgemeldet",
    sign_out: "Abmelden",
    sign_out_question: "Möchten Sie sich abmelden? Alle in diesem Browser angemeldeten Konten werden abgemeldet.",
    signed_out_text: "Sie wurden abgemeldet. Sie können dieses Fenster schließen.",
    error_heading: "Etwas ist schiefgelaufen",
    error_request_id: "Anfrage-ID",
    form_post_text: "Ihr Browser führt keine Skripte aus. Drücken Sie die Schaltfläche, um fortzufahren.",
    form_post_button: "Weiter",
    err_credentials: "Der Anmeldename oder das Passwort ist falsch.",
    err_locked: "Dieses Konto ist gesperrt. Wenden Sie sich an Ihre Administration.",
    err_inactive: "Dieses Konto ist deaktiviert.",
    err_mismatch: "Die Passwörter stimmen nicht überein.",
    err_policy: "Das Passwort erfüllt die Richtlinie nicht:",
    err_code_wrong: "Der Code ist falsch.",
    err_code_gone: "Der Code ist abgelaufen. Fordern Sie einen neuen an.",
    err_init_code: "Der Code ist falsch oder nicht mehr gültig. Sie können einen neuen anfordern.",
    no_password_yet: "Noch kein Passwort? Code per E-Mail anfordern",
    forgot_password: "Passwort vergessen oder noch keines? Code per E-Mail anfordern",
    err_expired: "Diese Anmeldung ist abgelaufen. Kehren Sie zur Anwendung zurück und beginnen Sie neu.",
    err_form: "Das Formular konnte nicht angenommen werden. Laden Sie die Seite neu und versuchen Sie es erneut.",
    err_request_too_long: "Die Anmeldeanfrage der Anwendung ist zu lang. Kehren Sie zur Anwendung zurück und versuchen Sie es erneut.",
    err_register_disabled: "Die Registrierung ist nicht erlaubt.",
    err_user_taken: "Dieser Benutzername ist vergeben.",
    err_email_invalid: "Diese E-Mail-Adresse ist ungültig.",
    err_required: "Bitte füllen Sie alle Pflichtfelder aus.",
    err_unavailable: "Der Dienst ist vorübergehend nicht verfügbar. Bitte versuchen Sie es später erneut.",
    err_internal: "Bei uns ist etwas schiefgegangen. Bitte versuchen Sie es später erneut.",
    err_no_org: "Dieses Konto gehört zu keiner Organisation und kann sich nicht anmelden.",
    err_no_page: "Diese Seite gibt es nicht.",
    err_wrong_method: "Diese Seite lässt sich so nicht öffnen. Kehren Sie zur Anwendung zurück und melden Sie sich erneut an.",
    err_too_many: "Zu viele Versuche. Bitte warten Sie {} Sekunden und versuchen Sie es erneut.",
    err_too_large: "Das gesendete Formular war zu groß.",
    err_client_missing: "Die Anwendung hat sich nicht ausgewiesen: client_id fehlt.",
    err_client_unknown: "Die Anwendung ist unbekannt oder deaktiviert.",
    err_redirect_missing: "Die Anwendung hat keine Rücksprungadresse angegeben: redirect_uri fehlt.",
    err_redirect_unknown: "Die Rücksprungadresse (redirect_uri) ist für diese Anwendung nicht registriert.",
    err_param_repeated: "Der Parameter {} kommt mehrfach vor.",
    err_param_too_long: "Der Parameter {} ist zu lang.",
    err_param_invalid: "Der Parameter {} enthält ein ungültiges Zeichen.",
    err_hint_invalid: "Der id_token_hint ist kein ID-Token dieses Ausstellers.",
    err_name_controls: "Namen dürfen keine Zeilenumbrüche oder anderen Steuerzeichen enthalten.",
    err_hint_other_client: "client_id und der id_token_hint nennen verschiedene Anwendungen.",
    err_post_logout_unknown: "Die Rücksprungadresse (post_logout_redirect_uri) ist für diese Anwendung nicht registriert.",
    pw_too_short: "es ist zu kurz",
    pw_upper: "es braucht einen Großbuchstaben",
    pw_lower: "es braucht einen Kleinbuchstaben",
    pw_number: "es braucht eine Ziffer",
    pw_symbol: "es braucht ein Sonderzeichen",
    mail_verify_subject: "Bestätigen Sie Ihre E-Mail-Adresse",
    mail_verify_body: "Hallo {name},\n\nIhr Bestätigungscode lautet: {code}\n\nEr ist eine Stunde gültig. Falls Sie ihn nicht angefordert haben, ignorieren Sie diese Nachricht.\n",
    mail_init_subject: "Legen Sie Ihr Passwort fest",
    mail_init_body: "Hallo {name},\n\nfür Sie wurde ein Konto erstellt. Melden Sie sich mit Ihrem Anmeldenamen und diesem Code an, um Ihr Passwort festzulegen: {code}\n\nDer Code ist 72 Stunden gültig.\n",
    mail_reset_subject: "Setzen Sie Ihr Passwort zurück",
    mail_reset_body: "Hallo {name},\n\njemand hat angefordert, das Passwort Ihres Kontos zurückzusetzen. Um ein neues zu wählen, melden Sie sich mit Ihrem Anmeldenamen an, wählen Sie auf der Passwortseite \"Passwort vergessen?\" und geben Sie diesen Code ein: {code}\n\nDer Code ist eine Stunde gültig. Ein neues Passwort beendet Ihre anderen Sitzungen. Falls Sie das nicht angefordert haben, ignorieren Sie diese Nachricht: Ihr Passwort bleibt unverändert.\n",
};

/// The languages latch speaks, in order of preference when nothing matches.
pub const SUPPORTED: [&str; 2] = ["en", "de"];

fn by_tag(tag: &str) -> Option<&'static Texts> {
    let base = tag.trim().split(['-', '_']).next()?.to_ascii_lowercase();
    match base.as_str() {
        "en" => Some(&EN),
        "de" => Some(&DE),
        _ => None,
    }
}

/// The texts for a user's preferred language (English when latch does not speak it).
pub fn for_language(lang: &str) -> &'static Texts {
    by_tag(lang).unwrap_or(&EN)
}

/// `ui_locales` first, then `Accept-Language` (by its q-values), then English.
pub fn choose(ui_locales: &[String], headers: &HeaderMap) -> &'static Texts {
    for l in ui_locales {
        if let Some(t) = by_tag(l) {
            return t;
        }
    }
    if let Some(accept) = headers.get(ACCEPT_LANGUAGE).and_then(|v| v.to_str().ok()) {
        let mut langs: Vec<(f32, &str)> = accept
            .split(',')
            .filter_map(|part| {
                let mut it = part.trim().split(';');
                let tag = it.next()?.trim();
                // A weight that is no number, or 0 ("not acceptable"), drops the entry.
                // The parameter's name is case-insensitive, with optional blanks around "="
                // (RFC 9110 12.4.2, 5.6.6).
                let q = match it.find_map(|p| {
                    let (name, value) = p.split_once('=')?;
                    name.trim().eq_ignore_ascii_case("q").then(|| value.trim())
                }) {
                    None => 1.0,
                    Some(q) => q.parse::<f32>().ok().filter(|q| q.is_finite() && *q > 0.0)?,
                };
                Some((q, tag))
            })
            .collect();
        // total_cmp: a total order even for q=NaN (sort_by may panic on a comparator that is not).
        langs.sort_by(|a, b| b.0.total_cmp(&a.0));
        for (_, tag) in langs {
            if let Some(t) = by_tag(tag) {
                return t;
            }
        }
    }
    &EN
}

impl Texts {
    /// Translates a phrase of the password complexity policy.
    pub fn policy_phrase(&self, english: &str) -> &'static str {
        match english {
            "is too short" => self.pw_too_short,
            "needs an uppercase letter" => self.pw_upper,
            "needs a lowercase letter" => self.pw_lower,
            "needs a number" => self.pw_number,
            _ => self.pw_symbol,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn negotiation() {
        let mut h = HeaderMap::new();
        assert_eq!(choose(&[], &h).lang, "en");
        h.insert(ACCEPT_LANGUAGE, HeaderValue::from_static("fr-CH, de;q=0.8, en;q=0.5"));
        assert_eq!(choose(&[], &h).lang, "de");
        assert_eq!(choose(&["en-GB".into()], &h).lang, "en", "ui_locales wins");
        assert_eq!(choose(&["xx".into(), "de-CH".into()], &HeaderMap::new()).lang, "de");
    }

    #[test]
    fn odd_weights_neither_panic_nor_win() {
        // Over 20 entries (where the standard sort may detect a comparator that is no order)
        // with weights that are not numbers.
        let mut v: Vec<String> = (0..30).map(|i| format!("x{i};q=NaN, y{i};q=0.{}", i % 10)).collect();
        v.extend(["en;q=NaN".into(), "en;q=inf".into(), "en;q=0".into(), "de;q=0.95".into()]);
        let mut h = HeaderMap::new();
        h.insert(ACCEPT_LANGUAGE, HeaderValue::from_str(&v.join(", ")).unwrap());
        assert_eq!(choose(&[], &h).lang, "de");
    }

    #[test]
    fn a_weight_is_read_whatever_its_case_and_blanks() {
        for header in ["en;Q=0.1, de", "en; q = 0.1, de", "en ;Q= 0.1 , de;q=0.5"] {
            let mut h = HeaderMap::new();
            h.insert(ACCEPT_LANGUAGE, HeaderValue::from_static(header));
            assert_eq!(choose(&[], &h).lang, "de", "{header}");
        }
    }
}
