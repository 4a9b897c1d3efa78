//! The sign-in flow of one pending authorization request: loading it (bound to this browser),
//! working out the next step from what the user has done, showing that step's page, and
//! finishing with a session and the answer to the client.

use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::{Deserialize, Serialize};

use super::cookie::{self, Browser};
use super::i18n::{self, Texts};
use super::pages;
use crate::app::AppState;
use crate::domain::enums::UserState;
use crate::domain::settings::LoginPolicy;
use crate::oauth::authorize::request::{AuthParams, ResponseType};
use crate::oauth::authorize::{self, IssuedCode, browser_sessions, request_id, response};
use crate::oauth::client::{self, OidcClient};
use crate::store::auth_request::AuthRequestRow;
use crate::store::signin::{self, Finished};
use crate::store::user::User;
use crate::store::{Conn, StoreError, auth_request, code, from_json, session, to_json, user};

/// Where the flow begins.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Start {
    #[default]
    Login,
    Select,
    Create,
}

/// What the user has done so far in this request.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Progress {
    pub start: Start,
    /// The login name as typed; when it matched no user the flow goes on as if it had, to
    /// tell nothing.
    pub login_name: Option<String>,
    pub password_at: Option<i64>,
    /// When the second factor (TOTP) was checked.
    #[serde(default)]
    pub otp_at: Option<i64>,
    pub amr: Vec<String>,
    pub email_checked: bool,
    pub email_code_sent: bool,
    pub init_code_sent: bool,
    /// The person said they have no password yet (a link on the password page): the next step
    /// is the initial password by e-mailed code, for every login name alike (a code is sent
    /// only to a user who has no password), so that the pages tell nobody which accounts exist
    /// or lack a password.
    #[serde(default)]
    pub init_requested: bool,
    /// An existing session chosen on the account page (no new authentication needed).
    pub sso_session: Option<String>,
    /// The login policy asked for a second factor (`forceMfa`) when the password was checked:
    /// a user without one sets one up before the sign-in ends.
    #[serde(default)]
    pub mfa_setup: bool,
    /// The TOTP key offered for that set-up, sealed to this request (shown again until used).
    #[serde(default)]
    pub totp_pending: Option<String>,
}

impl Progress {
    /// Forgets the checks (password, second factor) made before `cut_off`, the user's
    /// `tokens_valid_from`: a lock, a deactivation, or a password set by an administrator or by
    /// e-mailed code since then ends what the old password gave, a sign-in left half-way
    /// included. Else whoever had stopped at a later step (a required password change, the
    /// e-mail code, a second factor to set up) could come back and finish, or set the password.
    fn forget_checks_before(&mut self, cut_off: i64) {
        if self.password_at.is_some_and(|t| t < cut_off) || self.otp_at.is_some_and(|t| t < cut_off) {
            self.password_at = None;
            self.otp_at = None;
            self.amr.clear();
            self.mfa_setup = false;
            self.totp_pending = None;
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    LoginName,
    Select,
    Register,
    Password,
    InitPassword,
    Totp,
    TotpSetup,
    ChangePassword,
    VerifyEmail,
    Done,
}

/// A pending request loaded for this browser.
pub struct Flow {
    pub row: AuthRequestRow,
    pub params: AuthParams,
    pub client: OidcClient,
    pub progress: Progress,
    pub browser: Browser,
    pub t: &'static Texts,
    pub request_id: String,
    pub user: Option<User>,
    /// When the request and its user were read: a password checked against the hash read then
    /// is dated then (an administrator's new password written while it was verified, and its
    /// cut-off, come after it).
    pub loaded_at: i64,
}

/// A response that ends the handler (an error page).
pub type Halt = Response;

pub fn fail(t: &Texts, headers: &HeaderMap, status: StatusCode, msg: &str) -> Halt {
    pages::error_page(t, status, msg, &request_id(headers))
}

pub fn store_fail(t: &Texts, headers: &HeaderMap, e: StoreError) -> Halt {
    if let StoreError::InvalidInput(_) = e {
        return fail(t, headers, StatusCode::BAD_REQUEST, t.err_form);
    }
    tracing::warn!(error = %e, "login flow failed on the store");
    fail(t, headers, StatusCode::SERVICE_UNAVAILABLE, t.err_unavailable)
}

impl Flow {
    /// Loads request `id`; it must be live and belong to this browser.
    pub async fn load(state: &AppState, c: &mut Conn, id: &str, headers: &HeaderMap) -> Result<Flow, Halt> {
        let t0 = i18n::choose(&[], headers);
        // The user is read fresh (sign-in never trusts the cache), and remembered for the token
        // paths: the code exchange that follows a sign-in finds it there.
        let since = state.cache.generation();
        let read_at = state.clock.now();
        let found = auth_request::get_with_user(c, id).await.map_err(|e| store_fail(t0, headers, e))?;
        let (row, user) = match found {
            Some(f) if f.0.expires_at > state.clock.now() => f,
            // An expired request is said so in the language it asked for (until the sweep).
            Some((expired, _)) => {
                let t = from_json::<AuthParams>("auth_request.params", &expired.params)
                    .map_or(t0, |p| i18n::choose(&p.ui_locales, headers));
                return Err(fail(t, headers, StatusCode::BAD_REQUEST, t.err_expired));
            }
            None => return Err(fail(t0, headers, StatusCode::BAD_REQUEST, t0.err_expired)),
        };
        let params: AuthParams =
            from_json("auth_request.params", &row.params).map_err(|e| store_fail(t0, headers, e))?;
        let t = i18n::choose(&params.ui_locales, headers);
        let browser = cookie::existing(headers, state.settings.secure_cookies)
            .filter(|b| aws_lc_rs::constant_time::verify_slices_are_equal(&b.key, &row.ua_key).is_ok())
            .ok_or_else(|| fail(t, headers, StatusCode::FORBIDDEN, t.err_form))?;
        let mut progress: Progress =
            from_json("auth_request.progress", &row.progress).map_err(|e| store_fail(t, headers, e))?;
        if let Some(u) = &user {
            progress.forget_checks_before(u.tokens_valid_from);
        }
        let client = client::load(&state.cache, c, &params.client_id)
            .await
            .map_err(|e| store_fail(t, headers, e))?
            .ok_or_else(|| fail(t, headers, StatusCode::BAD_REQUEST, t.err_client_unknown))?;
        // The redirect URI was checked when the request came; one the application no longer
        // registers (an administrator removed it, say as compromised) receives nothing from a
        // sign-in that ends after that, as from a request that starts after it.
        if !client.redirect_allowed(&params.redirect_uri) {
            return Err(fail(t, headers, StatusCode::BAD_REQUEST, t.err_redirect_unknown));
        }
        if let Some(u) = &user {
            state.cache.remember_user(since, read_at, u);
        }
        // What the sign-in issues is dated no later than this read (as for a cached copy): a
        // cut-off (a lock, a password set by an administrator) that lands while the password is
        // being checked then ends the implicit flow's tokens too, as it ends all issued before.
        let user = user.map(|mut u| {
            u.read_at = Some(read_at);
            u
        });
        Ok(Flow {
            row,
            params,
            client,
            progress,
            browser,
            t,
            request_id: request_id(headers),
            user,
            loaded_at: read_at,
        })
    }

    /// Checks the form's CSRF token against the request's.
    pub fn check_csrf(&self, given: &str, headers: &HeaderMap) -> Result<(), Halt> {
        if aws_lc_rs::constant_time::verify_slices_are_equal(given.as_bytes(), self.row.csrf_token.as_bytes()).is_ok() {
            Ok(())
        } else {
            Err(fail(self.t, headers, StatusCode::FORBIDDEN, self.t.err_form))
        }
    }

    pub async fn save(&self, c: &mut Conn) -> crate::store::Result<()> {
        auth_request::update(
            c,
            &self.row.auth_request_id,
            self.user.as_ref().map(|u| u.user_id.as_str()),
            &to_json(&self.progress),
        )
        .await?;
        Ok(())
    }

    /// Records the login name typed and the user it means (a user name, `name@domain` of the
    /// user's organization, or an e-mail address only one human user has; none otherwise): one
    /// round trip for a user name without '@', the form's usual case.
    /// `by_email`: whether an e-mail address may name its human (the login policy's
    /// `disableLoginWithEmail` off).
    pub async fn name_login(&mut self, c: &mut Conn, name: &str, by_email: bool) -> crate::store::Result<()> {
        self.progress.login_name = Some(name.to_string());
        let progress = to_json(&self.progress);
        self.user = auth_request::name_user(c, &self.row.auth_request_id, name, &progress).await?;
        if name.contains('@') {
            // Also when the name is someone's user name (a self-registered user is named by the
            // e-mail address): a name with '@' takes the same steps whether or not it means
            // someone, and whichever lookup finds them.
            let other = user::find_by_domain_or_email(c, name, by_email).await?;
            if self.user.is_none() {
                self.user = other;
            }
            self.save(c).await?;
        }
        Ok(())
    }

    /// Records that a password was just verified. The progress is written only when a step is
    /// left: a request with nothing left is finished (and deleted) right away by [`show`].
    /// `force_mfa`: the login policy's `forceMfa`.
    pub async fn password_verified(&mut self, c: &mut Conn, now: i64, force_mfa: bool) -> crate::store::Result<()> {
        self.progress.password_at = Some(now);
        self.progress.mfa_setup = force_mfa;
        self.progress.amr = vec!["pwd".into()];
        if self.next_step(false) != Step::Done {
            self.save(c).await?;
        }
        Ok(())
    }

    /// Whether [`next_step`](Self::next_step) may answer [`Step::Select`] (only then does it
    /// look at `has_sessions`).
    pub fn may_select(&self) -> bool {
        self.user.is_none() && self.progress.login_name.is_none() && self.progress.start == Start::Select
    }

    pub fn next_step(&self, has_sessions: bool) -> Step {
        let p = &self.progress;
        let Some(u) = &self.user else {
            if p.login_name.is_some() {
                return if p.init_requested { Step::InitPassword } else { Step::Password };
            }
            return match p.start {
                Start::Create => Step::Register,
                Start::Select if has_sessions => Step::Select,
                _ => Step::LoginName,
            };
        };
        let authenticated = p.password_at.is_some() || p.sso_session.is_some();
        if !authenticated {
            return if p.init_requested { Step::InitPassword } else { Step::Password };
        }
        let Some(h) = u.human() else {
            return Step::Password;
        };
        if p.sso_session.is_none() && h.otp_secret.is_some() && p.otp_at.is_none() {
            return Step::Totp;
        }
        if p.sso_session.is_none() && p.mfa_setup && h.otp_secret.is_none() && p.otp_at.is_none() {
            return Step::TotpSetup;
        }
        if p.sso_session.is_none() && h.password_change_required {
            return Step::ChangePassword;
        }
        if p.sso_session.is_none() && !h.email_verified && !p.email_checked {
            return Step::VerifyEmail;
        }
        Step::Done
    }

    /// The origin of the client's redirect URI, allowed as a form target in the CSP.
    pub fn redirect_origin(&self) -> Option<String> {
        url::Url::parse(&self.params.redirect_uri).ok().map(|u| pages::form_target(&u))
    }

    /// The flow's user when a password may be set for it by e-mailed code, with the code's
    /// purpose: a human without a password (its initial password) or one who has one (a reset,
    /// which its organization's login policy may hide: the callers check that only after the
    /// answer or the code, so that it takes no longer for a known name than for another).
    pub fn code_user(&self) -> Option<(&User, &'static str)> {
        let u = self.user.as_ref()?;
        match u.human()?.password_hash {
            None => Some((u, super::codes::INIT)),
            Some(_) => Some((u, super::codes::RESET)),
        }
    }

    pub fn app_name(&self) -> &str {
        &self.client.app.name
    }

    /// The login name the pages show: what the person typed, as it was typed, whether or not
    /// such a user exists (the stored login name would tell that one does); the stored one for
    /// a user chosen from this browser's sessions; else the application's hint.
    pub fn login_name(&self) -> String {
        self.progress
            .login_name
            .clone()
            .or_else(|| self.user.as_ref().map(|u| u.login_name()))
            .or_else(|| self.params.login_hint.clone())
            .unwrap_or_default()
    }
}

/// Shows the page of the next step, or finishes when nothing is left.
pub async fn show(
    state: &AppState,
    c: &mut Conn,
    mut f: Flow,
    headers: &HeaderMap,
    error: Option<String>,
    info: Option<String>,
) -> Response {
    // The browser's sessions matter only where the account choice may be the next step.
    let sessions = if f.may_select() {
        match browser_sessions(c, &f.browser, state.clock.now()).await {
            Ok(s) => s,
            Err(e) => return store_fail(f.t, headers, e),
        }
    } else {
        Vec::new()
    };
    // The instance's policy for what the pages show before the user is known (and for the
    // password page's wording, shown for any name); the user's organization's for the user's
    // own steps; the default organization's for registration.
    let policy = match state.cache.login_policy(c).await {
        Ok(p) => p,
        Err(e) => return store_fail(f.t, headers, e),
    };
    // A second factor asked for since the password was checked (the policy changed meanwhile)
    // is asked for too.
    if f.progress.password_at.is_some() {
        match policy_for(state, c, f.user.as_ref()).await {
            Ok(p) if p.requires_mfa() => f.progress.mfa_setup = true,
            Ok(_) => {}
            Err(e) => return store_fail(f.t, headers, e),
        }
    }
    let step = f.next_step(!sessions.is_empty());
    // Only the login-name page (its link) and registration ask.
    let can_register = match step {
        Step::LoginName | Step::Register => match registration_policy(state, c).await {
            Ok(p) => p.allow_register,
            Err(e) => return store_fail(f.t, headers, e),
        },
        _ => false,
    };
    let (t, id, csrf) = (f.t, f.row.auth_request_id.clone(), f.row.csrf_token.clone());
    let origin = f.redirect_origin();
    let form_action = origin.as_deref();
    let login_name = f.login_name();
    match step {
        Step::Done => finish(state, c, f, headers).await,
        Step::LoginName => pages::render(
            t,
            StatusCode::OK,
            &pages::LoginName {
                t,
                id: &id,
                csrf: &csrf,
                app_name: f.app_name(),
                error,
                info,
                login_name: &login_name,
                can_register,
            },
            form_action,
        ),
        Step::Password => pages::render(
            t,
            StatusCode::OK,
            &pages::Password {
                t,
                id: &id,
                csrf: &csrf,
                error,
                info,
                login_name: &login_name,
                reset: !policy.hide_password_reset,
            },
            form_action,
        ),
        Step::Select => {
            // The application's login_hint preselects its account: listed first, with the focus.
            let hint = f.params.login_hint.as_deref().map(str::trim).unwrap_or_default();
            let hinted = |u: &User| {
                !hint.is_empty()
                    && (u.login_name().eq_ignore_ascii_case(hint)
                        || u.username.eq_ignore_ascii_case(hint)
                        || (!policy.disable_login_with_email
                            && u.human().is_some_and(|h| h.email.eq_ignore_ascii_case(hint))))
            };
            let mut accounts: Vec<pages::Account> = sessions
                .iter()
                .map(|(s, u)| pages::Account {
                    session_id: s.session_id.clone(),
                    login_name: u.login_name(),
                    display_name: u.human().map(|h| h.display_name.clone()).unwrap_or_else(|| u.username.clone()),
                    hinted: hinted(u),
                })
                .collect();
            if let Some(i) = accounts.iter().position(|a| a.hinted) {
                let first = accounts.remove(i);
                accounts.iter_mut().for_each(|a| a.hinted = false);
                accounts.insert(0, first);
            }
            pages::render(
                t,
                StatusCode::OK,
                &pages::SelectAccount { t, id: &id, csrf: &csrf, app_name: f.app_name(), error, info, accounts },
                form_action,
            )
        }
        Step::Register => {
            if !can_register {
                f.progress.start = Start::Login;
                if let Err(e) = f.save(c).await {
                    return store_fail(t, headers, e);
                }
                let page = pages::LoginName {
                    t,
                    id: &id,
                    csrf: &csrf,
                    app_name: f.app_name(),
                    error: Some(t.err_register_disabled.to_string()),
                    info,
                    login_name: &login_name,
                    can_register: false,
                };
                return pages::render(t, StatusCode::OK, &page, form_action);
            }
            let page = pages::Register {
                t,
                id: &id,
                csrf: &csrf,
                error,
                info,
                email: "",
                first_name: "",
                last_name: "",
                user_name: "",
            };
            pages::render(t, StatusCode::OK, &page, form_action)
        }
        Step::Totp => {
            pages::render(t, StatusCode::OK, &pages::Totp { t, id: &id, csrf: &csrf, error, info }, form_action)
        }
        Step::TotpSetup => {
            let (secret, uri) = match super::second_factor::totp_offer(state, c, &mut f).await {
                Ok(Some(v)) => v,
                Ok(None) => return fail(t, headers, StatusCode::BAD_REQUEST, t.err_form),
                Err(e) => return store_fail(t, headers, e),
            };
            let page = pages::TotpSetup { t, id: &id, csrf: &csrf, error, info, secret: &secret, uri: &uri };
            pages::render(t, StatusCode::OK, &page, form_action)
        }
        Step::ChangePassword => pages::render(
            t,
            StatusCode::OK,
            &pages::ChangePassword { t, id: &id, csrf: &csrf, error, info },
            form_action,
        ),
        Step::VerifyEmail => {
            let info = match super::forms::send_code_once(state, c, &mut f, super::forms::VERIFY).await {
                Ok(()) => info,
                Err(e) => return store_fail(t, headers, e),
            };
            let email = f.user.as_ref().and_then(|u| u.human()).map(|h| h.email.clone()).unwrap_or_default();
            pages::render(
                t,
                StatusCode::OK,
                &pages::VerifyEmail { t, id: &id, csrf: &csrf, error, info, email: &email, can_skip: true },
                form_action,
            )
        }
        Step::InitPassword => {
            if let Err(e) = super::forms::send_code_once(state, c, &mut f, super::forms::INIT).await {
                return store_fail(t, headers, e);
            }
            pages::render(
                t,
                StatusCode::OK,
                &pages::InitPassword { t, id: &id, csrf: &csrf, error, info, login_name: &login_name },
                form_action,
            )
        }
    }
}

/// The login policy that governs user `u`: its organization's own, else the instance's; the
/// instance's when no user is known yet (what the pages show before then must not depend on who
/// the typed name is).
pub async fn policy_for(state: &AppState, c: &mut Conn, u: Option<&User>) -> Result<LoginPolicy, StoreError> {
    state.cache.login_policy_of(c, u.map_or("", |u| u.org_id.as_str())).await
}

/// The login policy of registration: the default organization's, where new users go.
pub async fn registration_policy(state: &AppState, c: &mut Conn) -> Result<LoginPolicy, StoreError> {
    let org = state.cache.default_org(c).await?.unwrap_or_default();
    state.cache.login_policy_of(c, &org).await
}

/// Why user `u` may not sign in now (locked, inactive, its organization deactivated, ...), or
/// None when they may.
pub fn not_signing_in(t: &'static Texts, u: &User) -> Option<&'static str> {
    match u.state {
        UserState::Active | UserState::Initial if u.org_active => None,
        UserState::Locked => Some(t.err_locked),
        _ => Some(t.err_inactive),
    }
}

/// Every step is done: create or renew the session, retire the request, answer the client.
/// After a new authentication the browser gets a new cookie, and its sessions and pending
/// requests move to it: a cookie value that someone else knows (planted in the browser, or taken
/// from an authorization request they started and then had the person finish) names no session
/// afterwards. The new cookie goes on the answer once the move is done.
pub async fn finish(state: &AppState, c: &mut Conn, f: Flow, headers: &HeaderMap) -> Response {
    let (mut r, renewed) = finish_as(state, c, f, headers).await;
    if let Some(b) = renewed {
        b.set_on(r.headers_mut(), state.settings.secure_cookies);
    }
    r
}

/// [`finish`]; answers the browser's new cookie when the browser moved to it (a new
/// authentication: everything the browser held moved from the request's key, which is the
/// cookie the browser brought, to the new one).
async fn finish_as(state: &AppState, c: &mut Conn, f: Flow, headers: &HeaderMap) -> (Response, Option<Browser>) {
    let t = f.t;
    let Some(u) = f.user.clone() else {
        return (fail(t, headers, StatusCode::BAD_REQUEST, t.err_form), None);
    };
    // The user as read by this request: one locked or deactivated since an earlier step (too
    // many wrong second-factor codes, or through the API) gets no session and nothing issued.
    if let Some(msg) = not_signing_in(t, &u) {
        return (fail(t, headers, StatusCode::FORBIDDEN, msg), None);
    }
    if let Some(r) = turned_away(state, c, &f, &u, headers).await {
        return (r, None);
    }
    let now = state.clock.now();
    let (sess, renewed) = match &f.progress.sso_session {
        Some(sid) => match session::get(c, sid).await {
            Ok(Some(s)) if s.user_id == u.user_id && s.expires_at > now && s.auth_time >= u.tokens_valid_from => {
                (s, None)
            }
            Ok(_) => return (fail(t, headers, StatusCode::BAD_REQUEST, t.err_expired), None),
            Err(e) => return (store_fail(t, headers, e), None),
        },
        None => {
            let auth_time = f.progress.password_at.unwrap_or(now);
            // The session serves single sign-on while its password check is within the login
            // policy's passwordCheckLifetime and, when a second factor was checked, that check
            // within secondFactorCheckLifetime (then both are asked again).
            let expires_at = match policy_for(state, c, Some(&u)).await {
                Ok(p) => {
                    let by_password = auth_time.saturating_add(p.password_check_lifetime);
                    match f.progress.otp_at {
                        Some(otp_at) => by_password.min(otp_at.saturating_add(p.second_factor_check_lifetime)),
                        None => by_password,
                    }
                }
                Err(e) => return (store_fail(t, headers, e), None),
            };
            let amr = if f.progress.amr.is_empty() { vec!["pwd".to_string()] } else { f.progress.amr.clone() };
            let renewed = cookie::fresh();
            let new = session::NewSession {
                session_id: crate::id::new_id(),
                ua_key: renewed.key.clone(),
                user_id: u.user_id.clone(),
                auth_time,
                amr,
                now,
                expires_at,
            };
            if f.params.response_type == ResponseType::Code {
                let (r, moved) = finish_with_code(state, c, &f, u, new, headers).await;
                return (r, moved.then_some(renewed));
            }
            match session::move_browser(c, &f.row.auth_request_id, &f.row.ua_key, &new.ua_key).await {
                Ok(true) => {}
                Ok(false) => return (fail(t, headers, StatusCode::BAD_REQUEST, t.err_expired), None),
                Err(e) => return (store_fail(t, headers, e), None),
            }
            match session::upsert(c, &new).await {
                Ok(s) => (s, Some(renewed)),
                Err(e) => return (store_fail(t, headers, e), Some(renewed)),
            }
        }
    };
    match auth_request::delete(c, &f.row.auth_request_id).await {
        Ok(true) => {}
        Ok(false) => return (fail(t, headers, StatusCode::BAD_REQUEST, t.err_expired), renewed),
        Err(e) => return (store_fail(t, headers, e), renewed),
    }
    match authorize::complete(state, c, t, &f.params, &f.client, u, &sess).await {
        Ok(r) => (r, renewed),
        Err(e) => (store_fail(t, headers, e), renewed),
    }
}

/// The answer when the project of the flow's client turns `u` away ([`authorize::refusal`]),
/// before anything of the sign-in is stored: the request retired, the client told
/// `access_denied`; no session, no code, no new cookie, whatever the response type.
async fn turned_away(state: &AppState, c: &mut Conn, f: &Flow, u: &User, headers: &HeaderMap) -> Option<Response> {
    let t = f.t;
    // A user without an organization is answered where the subject is made for the tokens.
    let subject = match authorize::subject(state, c, u.clone()).await {
        Ok(s) => s?,
        Err(e) => return Some(store_fail(t, headers, e)),
    };
    let e = match authorize::org_scope_refusal(&f.params, &subject.org) {
        Some(e) => e,
        None => match authorize::refusal(c, &f.client, &subject).await {
            Ok(refused) => refused?,
            Err(e) => return Some(store_fail(t, headers, e)),
        },
    };
    Some(match auth_request::delete(c, &f.row.auth_request_id).await {
        Ok(true) => {
            let p = &f.params;
            response::error(t, &state.settings.issuer, &p.redirect_uri, p.response_mode, p.state.as_deref(), &e)
        }
        Ok(false) => fail(t, headers, StatusCode::BAD_REQUEST, t.err_expired),
        Err(e) => store_fail(t, headers, e),
    })
}

/// A new authentication answered with a code: the request retired, the session stored and the
/// code stored in one round trip ([`signin::finish`]); a second one only when the browser
/// already had a session of this user (its id, kept, goes into the code).
async fn finish_with_code(
    state: &AppState,
    c: &mut Conn,
    f: &Flow,
    u: User,
    new: session::NewSession,
    headers: &HeaderMap,
) -> (Response, bool) {
    let t = f.t;
    let subject = match authorize::subject(state, c, u).await {
        Ok(Some(s)) => s,
        Ok(None) => {
            return (pages::error_page(t, StatusCode::BAD_REQUEST, t.err_no_org, ""), false);
        }
        Err(e) => return (store_fail(t, headers, e), false),
    };
    let scopes = match authorize::granted_scopes(state, c, &f.params, &f.client, &subject).await {
        Ok(s) => s,
        Err(e) => return (store_fail(t, headers, e), false),
    };
    let user_id = subject.user.user_id.as_str();
    let code = IssuedCode::new(state, &f.params, &f.client, user_id, &scopes, &new.as_new());
    let (session, code) = match signin::finish(c, &f.row.auth_request_id, &f.row.ua_key, &new, &code.row()).await {
        Ok(Finished::RequestGone) => return (fail(t, headers, StatusCode::BAD_REQUEST, t.err_expired), false),
        Ok(Finished::Done { session, code_stored: true }) => (session, code),
        Ok(Finished::Done { session, code_stored: false }) => {
            let code = IssuedCode::new(state, &f.params, &f.client, user_id, &scopes, &session);
            if let Err(e) = code::insert(c, &code.row()).await {
                return (store_fail(t, headers, e), true);
            }
            (session, code)
        }
        Err(e) => return (store_fail(t, headers, e), false),
    };
    if let Err(e) = crate::oidc::backchannel::note(c, &f.client, &session).await {
        return (store_fail(t, headers, e), true);
    }
    (authorize::code_response(state, t, &f.params, code.value), true)
}
