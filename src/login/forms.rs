//! The forms of the login pages. Every form carries the CSRF token of its pending request and
//! must come from the browser that started it; a refused form changes nothing.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::flow::{Flow, Start, Step, fail, not_signing_in, show, store_fail};
use super::i18n::Texts;
use crate::app::AppState;
use crate::crypto::password::PasswordError;
use crate::domain::enums::UserState;
use crate::management::passwords::complexity_policy;
use crate::oauth::authorize::browser_sessions;
use crate::oauth::authorize::request::Prompt;
use crate::store::{Conn, StoreError, credentials, user, user_code};

pub use super::codes::{INIT, RESET, VERIFY};

fn parse<T: DeserializeOwned>(body: &[u8]) -> Option<T> {
    if body.len() > 16 * 1024 {
        return None;
    }
    serde_urlencoded::from_bytes(body).ok()
}

/// A new password that could not be hashed: no memory for the hash is a "try again" (503),
/// anything else a server error.
pub(super) fn hash_fail(t: &Texts, headers: &HeaderMap, e: PasswordError) -> Response {
    tracing::warn!(error = %e, "a new password could not be hashed");
    match e {
        PasswordError::Memory(_) | PasswordError::Busy => {
            fail(t, headers, StatusCode::SERVICE_UNAVAILABLE, t.err_unavailable)
        }
        _ => fail(t, headers, StatusCode::INTERNAL_SERVER_ERROR, t.err_internal),
    }
}

/// Opens the connection, loads the flow, parses the form and checks its CSRF token.
pub(super) async fn begin<T: DeserializeOwned + HasCsrf>(
    state: &AppState,
    id: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(crate::store::Pooled, Flow, T), Response> {
    let t0 = super::i18n::choose(&[], headers);
    let mut c = state.db.conn().await.map_err(|e| store_fail(t0, headers, e))?;
    let f = Flow::load(state, &mut c, id, headers).await?;
    let form: T = parse(body).ok_or_else(|| fail(f.t, headers, StatusCode::BAD_REQUEST, f.t.err_form))?;
    f.check_csrf(form.csrf(), headers)?;
    Ok((c, f, form))
}

pub trait HasCsrf {
    fn csrf(&self) -> &str;
}

macro_rules! form {
    ($name:ident { $($field:ident),* }) => {
        #[derive(Deserialize)]
        pub struct $name {
            csrf: String,
            $(#[serde(default)] pub(super) $field: String,)*
        }
        impl HasCsrf for $name {
            fn csrf(&self) -> &str { &self.csrf }
        }
    };
}

form!(CsrfOnly {});
form!(LoginNameForm { loginname });
form!(PasswordForm { password });
form!(SelectForm { session });
form!(RegisterForm { email, first_name, last_name, user_name, password, password_repeat });
form!(NewPasswordForm { password, password_repeat });
form!(CodeForm { code });
form!(InitForm { code, password, password_repeat });
form!(TotpForm { code });

/// The page again with "too many attempts", answered 429 with `Retry-After`: a per-name or
/// per-user budget of the sign-in is spent.
pub(super) async fn too_many(
    state: &AppState,
    c: &mut Conn,
    f: Flow,
    headers: &HeaderMap,
    wait: std::time::Duration,
) -> Response {
    metrics::counter!("latch_rate_limited_total", "budget" => "login_per_name").increment(1);
    let msg = f.t.err_too_many.replace("{}", &crate::limits::retry_after_secs(wait).to_string());
    let r = show(state, c, f, headers, Some(msg), None).await;
    crate::limits::too_many(r, wait)
}

fn policy_message(t: &Texts, problems: &[&str]) -> String {
    let parts: Vec<&str> = problems.iter().map(|p| t.policy_phrase(p)).collect();
    format!("{} {}", t.err_policy, parts.join(", "))
}

/// Checks a new password (twice typed) against the policy of the user's organization.
pub(super) async fn check_new_password(
    c: &mut Conn,
    t: &Texts,
    org_id: &str,
    pw: &str,
    repeat: &str,
) -> Result<Result<(), String>, StoreError> {
    if pw != repeat {
        return Ok(Err(t.err_mismatch.to_string()));
    }
    if pw.is_empty() || pw.chars().count() > crate::management::passwords::MAX_PASSWORD {
        return Ok(Err(t.err_required.to_string()));
    }
    let policy = complexity_policy(c, org_id).await.map_err(|e| StoreError::Corrupt(e.message))?;
    let problems = policy.violations(pw);
    Ok(if problems.is_empty() { Ok(()) } else { Err(policy_message(t, &problems)) })
}

/// Sends a new code of `purpose` to the flow's user. The code of the password step ([`INIT`]:
/// an initial password for a human who has none or, when the login policy offers reset, a new
/// one for a human who has one, see [`Flow::code_user`]) is stored and mailed in a task of its
/// own, after the answer: the step is shown for any login name (see `Progress::init_requested`),
/// and waiting for the store and the mail server only for some of them would tell which by the
/// time it takes; nothing is sent to a user who could not sign in with it (locked, deactivated).
/// `first`: the step is shown for the first time, and a usable code sent before stays
/// ([`super::codes::send_unless_usable`]); else the person asked for a new one (paced).
pub async fn send_code(state: &AppState, c: &mut Conn, f: &Flow, purpose: &str, first: bool) -> Result<(), StoreError> {
    if purpose != INIT {
        return match &f.user {
            Some(u) if first => super::codes::send_unless_usable(state, c, u, purpose, f.t).await,
            Some(u) => super::codes::send_paced(state, c, u, purpose, f.t).await,
            None => Ok(()),
        };
    }
    if let Some((u, purpose)) = f.code_user().filter(|(u, _)| not_signing_in(f.t, u).is_none()) {
        let (state, t, u) = (state.clone(), f.t, u.clone());
        state.clone().background.spawn(async move {
            // Whether the user's organization offers reset is read here too, after the answer:
            // reading its policy before would take longer for a known name than for another.
            let sent = match state.db.conn().await {
                Ok(mut c) => match super::flow::policy_for(&state, &mut c, Some(&u)).await {
                    Ok(p) if purpose == RESET && p.hide_password_reset => Ok(()),
                    Ok(_) if first => super::codes::send_unless_usable(&state, &mut c, &u, purpose, t).await,
                    Ok(_) => super::codes::send_paced(&state, &mut c, &u, purpose, t).await,
                    Err(e) => Err(e),
                },
                Err(e) => Err(e),
            };
            if let Err(e) = sent {
                tracing::error!(error = %e, user_id = %u.user_id, purpose, "storing a password code failed");
            }
        });
    }
    Ok(())
}

/// Sends the step's code the first time the step is shown.
pub async fn send_code_once(state: &AppState, c: &mut Conn, f: &mut Flow, purpose: &str) -> Result<(), StoreError> {
    let sent = if purpose == INIT { &mut f.progress.init_code_sent } else { &mut f.progress.email_code_sent };
    if *sent {
        return Ok(());
    }
    *sent = true;
    f.save(c).await?;
    send_code(state, c, f, purpose, true).await
}

pub(super) async fn reload_user(c: &mut Conn, f: &mut Flow) -> Result<(), StoreError> {
    if let Some(u) = &f.user {
        f.user = user::get(c, &u.user_id).await?;
    }
    Ok(())
}

pub(super) fn reset(f: &mut Flow) {
    f.user = None;
    f.progress.login_name = None;
    f.progress.password_at = None;
    f.progress.otp_at = None;
    f.progress.sso_session = None;
    f.progress.mfa_setup = false;
    f.progress.totp_pending = None;
    f.progress.amr.clear();
    f.progress.email_code_sent = false;
    f.progress.init_code_sent = false;
    f.progress.init_requested = false;
    f.progress.email_checked = false;
}

pub async fn page(State(state): State<AppState>, Path(id): Path<String>, headers: HeaderMap) -> Response {
    let t0 = super::i18n::choose(&[], &headers);
    let mut c = match state.db.conn().await {
        Ok(c) => c,
        Err(e) => return store_fail(t0, &headers, e),
    };
    match Flow::load(&state, &mut c, &id, &headers).await {
        Ok(f) => show(&state, &mut c, f, &headers, None, None).await,
        Err(r) => r,
    }
}

pub async fn login_name(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (mut c, mut f, form) = match begin::<LoginNameForm>(&state, &id, &headers, &body).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let name = form.loginname.trim();
    if name.is_empty() || name.len() > 320 {
        let msg = f.t.err_required.to_string();
        return show(&state, &mut c, f, &headers, Some(msg), None).await;
    }
    reset(&mut f);
    f.progress.start = Start::Login;
    // Kept as typed for the pages whether or not the user exists (Flow::login_name).
    let by_email = match state.cache.login_policy(&mut c).await {
        Ok(p) => !p.disable_login_with_email,
        Err(e) => return store_fail(f.t, &headers, e),
    };
    if let Err(e) = f.name_login(&mut c, name, by_email).await {
        return store_fail(f.t, &headers, e);
    }
    show(&state, &mut c, f, &headers, None, None).await
}

/// A login name as the lookup reads it ([`user::find_by_domain_or_email`] trims the part before
/// the `@` on its own), the key of its rate budget.
fn lookup_key(name: &str) -> String {
    let key = crate::store::fold(name);
    match key.rsplit_once('@') {
        Some((local, domain)) => format!("{}@{}", local.trim(), domain.trim()),
        None => key,
    }
}

pub async fn password(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (mut c, mut f, form) = match begin::<PasswordForm>(&state, &id, &headers, &body).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let t = f.t;
    // Two budgets on top of the lockout policy, drawn before any hash is computed, so guessing
    // stays slow even where lockout is off. The login name's, keyed by the name as the lookup
    // reads it (case and spaces make no new name) whether or not it names someone, answers 429.
    // The user's, drawn when the typed name means someone, bounds the guesses at one account
    // over all its names (user name, address, user name at each domain); once it is spent the
    // page answers as a wrong password does, checking nothing, so that no answer tells that two
    // names are one account. A flow that chose its user from the browser's sessions has no
    // typed name: it draws on the user's budget (with a 429).
    let name = match (&f.progress.login_name, &f.user) {
        (Some(n), _) => format!("name:{}", lookup_key(n)),
        (None, Some(u)) => format!("user:{}", u.user_id),
        (None, None) => String::new(),
    };
    if let Err(wait) = state.limits.login_name(&name) {
        return too_many(&state, &mut c, f, &headers, wait).await;
    }
    let user_spent = match (&f.progress.login_name, &f.user) {
        (Some(_), Some(u)) => state.limits.login_name(&format!("user:{}", u.user_id)).is_err(),
        _ => false,
    };
    if user_spent {
        metrics::counter!("latch_rate_limited_total", "budget" => "login_per_user").increment(1);
    }
    // No answer changes with the password for an account that cannot sign in (were it so, the
    // page would tell a guesser when the password is right, and lockout would not stop guessing).
    // A deactivated account says so whatever the password, as ZITADEL and Keycloak do (only
    // administrators deactivate accounts). A locked one answers as an unknown one does, as
    // Keycloak answers for the accounts its brute-force detection locked: anyone can lock an
    // account, so telling the lock would tell that the account exists.
    if let Some(u) = &f.user
        && !matches!(u.state, UserState::Locked)
        && let Some(msg) = not_signing_in(t, u)
    {
        return show(&state, &mut c, f, &headers, Some(msg.to_string()), None).await;
    }
    let credentials = Some(t.err_credentials.to_string());
    let signing_in = f.user.clone().filter(|u| not_signing_in(t, u).is_none() && !user_spent);
    let stored = signing_in.as_ref().and_then(|u| u.human()).and_then(|h| h.password_hash.clone());
    // The hash may wait in the queue of the hashing threads: it does not hold a database
    // connection meanwhile, so a login storm does not starve every other request of them.
    drop(c);
    let reconnect = |state: &AppState| {
        let state = state.clone();
        async move { state.db.conn().await }
    };
    let (Some(u), Some(hash)) = (signing_in, stored) else {
        // Unknown or locked user, a user whose budget is spent, machine user or no password:
        // spend the same time, say the same thing.
        if state.hasher.verify_nobody(&form.password).await.is_err() {
            // The queue of hashes is full, or no memory for the hash: as for a real user, "try
            // again".
            return fail(t, &headers, StatusCode::SERVICE_UNAVAILABLE, t.err_unavailable);
        }
        let mut c = match reconnect(&state).await {
            Ok(c) => c,
            Err(e) => return store_fail(t, &headers, e),
        };
        return show(&state, &mut c, f, &headers, credentials, None).await;
    };
    let ok = match state.hasher.verify(&form.password, &hash).await {
        Ok(ok) => ok,
        // Not checked either way: no failed attempt is counted, the person may try again.
        Err(e @ (PasswordError::Memory(_) | PasswordError::Busy)) => {
            tracing::warn!(user_id = %u.user_id, error = %e, "password not checked");
            return fail(t, &headers, StatusCode::SERVICE_UNAVAILABLE, t.err_unavailable);
        }
        Err(e) => {
            tracing::warn!(user_id = %u.user_id, error = %e, "stored password hash could not be verified");
            false
        }
    };
    let mut c = match reconnect(&state).await {
        Ok(c) => c,
        Err(e) => return store_fail(t, &headers, e),
    };
    let now = state.clock.now();
    if !ok {
        if u.state == UserState::Active {
            let max = match state.cache.lockout_policy_of(&mut c, &u.org_id).await {
                Ok(p) => p.max_password_attempts,
                Err(e) => return store_fail(t, &headers, e),
            };
            match credentials::password_failed(&mut c, &u.user_id, max, now).await {
                Ok(true) => {
                    tracing::warn!(user_id = %u.user_id, "user locked after too many wrong passwords")
                }
                Ok(false) => {}
                Err(e) => return store_fail(t, &headers, e),
            }
        }
        return show(&state, &mut c, f, &headers, credentials, None).await;
    }
    if let Some(msg) = not_signing_in(t, &u) {
        return show(&state, &mut c, f, &headers, Some(msg.to_string()), None).await;
    }
    if u.human().is_some_and(|h| h.failed_password_attempts > 0)
        && let Err(e) = credentials::password_ok(&mut c, &u.user_id).await
    {
        return store_fail(t, &headers, e);
    }
    if state.hasher.needs_rehash(&hash) {
        drop(c);
        let new = state.hasher.hash(&form.password).await;
        c = match reconnect(&state).await {
            Ok(c) => c,
            Err(e) => return store_fail(t, &headers, e),
        };
        match new {
            Ok(new) => {
                if let Err(e) = credentials::rehash(&mut c, &u.user_id, &hash, &new).await {
                    tracing::warn!(error = %e, "re-hashing a password failed");
                }
            }
            Err(e) => tracing::warn!(error = %e, "re-hashing a password failed"),
        }
    }
    let force_mfa = match super::flow::policy_for(&state, &mut c, Some(&u)).await {
        Ok(p) => p.requires_mfa(),
        Err(e) => return store_fail(t, &headers, e),
    };
    // Dated when the hash it matched was read, not after the hashing: see `Flow::loaded_at`.
    let checked_at = f.loaded_at;
    if let Err(e) = f.password_verified(&mut c, checked_at, force_mfa).await {
        return store_fail(t, &headers, e);
    }
    show(&state, &mut c, f, &headers, None, None).await
}

pub async fn select(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (mut c, mut f, form) = match begin::<SelectForm>(&state, &id, &headers, &body).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let now = state.clock.now();
    let sessions = match browser_sessions(&mut c, &f.browser, now).await {
        Ok(s) => s,
        Err(e) => return store_fail(f.t, &headers, e),
    };
    let Some((s, u)) = sessions.into_iter().find(|(s, _)| s.session_id == form.session) else {
        return fail(f.t, &headers, StatusCode::BAD_REQUEST, f.t.err_form);
    };
    reset(&mut f);
    let mfa = match super::flow::policy_for(&state, &mut c, Some(&u)).await {
        Ok(p) => p.requires_mfa(),
        Err(e) => return store_fail(f.t, &headers, e),
    };
    let fresh = crate::oauth::authorize::serves(&s, f.params.max_age, mfa, now);
    if fresh && !f.params.has_prompt(Prompt::Login) {
        f.progress.sso_session = Some(s.session_id.clone());
    }
    f.user = Some(u);
    if let Err(e) = f.save(&mut c).await {
        return store_fail(f.t, &headers, e);
    }
    show(&state, &mut c, f, &headers, None, None).await
}

pub async fn other(State(state): State<AppState>, Path(id): Path<String>, headers: HeaderMap, body: Bytes) -> Response {
    let (mut c, mut f, _) = match begin::<CsrfOnly>(&state, &id, &headers, &body).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    reset(&mut f);
    f.progress.start = Start::Login;
    if let Err(e) = f.save(&mut c).await {
        return store_fail(f.t, &headers, e);
    }
    show(&state, &mut c, f, &headers, None, None).await
}

/// "No password yet?" on the password page: the initial password by e-mailed code comes next,
/// whatever the login name (only a human without a password is sent a code).
pub async fn request_init(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (mut c, mut f, _) = match begin::<CsrfOnly>(&state, &id, &headers, &body).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    if f.next_step(false) != Step::Password {
        return fail(f.t, &headers, StatusCode::BAD_REQUEST, f.t.err_form);
    }
    f.progress.init_requested = true;
    if let Err(e) = f.save(&mut c).await {
        return store_fail(f.t, &headers, e);
    }
    show(&state, &mut c, f, &headers, None, None).await
}

pub async fn change_password(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (mut c, mut f, form) = match begin::<NewPasswordForm>(&state, &id, &headers, &body).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let t = f.t;
    // Only as the step the flow is at: after every factor, when a change is required.
    let (Some(u), Some(checked_at)) =
        (f.user.clone().filter(|_| f.next_step(false) == Step::ChangePassword), f.progress.password_at)
    else {
        return fail(t, &headers, StatusCode::BAD_REQUEST, t.err_form);
    };
    if let Some(msg) = not_signing_in(t, &u) {
        return fail(t, &headers, StatusCode::FORBIDDEN, msg);
    }
    match check_new_password(&mut c, t, &u.org_id, &form.password, &form.password_repeat).await {
        Ok(Ok(())) => {}
        Ok(Err(msg)) => return show(&state, &mut c, f, &headers, Some(msg), None).await,
        Err(e) => return store_fail(t, &headers, e),
    }
    let hash = match state.hasher.hash(&form.password).await {
        Ok(h) => h,
        Err(e) => return hash_fail(t, &headers, e),
    };
    // Only while the password checked still counts: the user may have been cut off while the
    // new one was hashed.
    match credentials::change_password_at_sign_in(&mut c, &u.user_id, &hash, checked_at, state.clock.now()).await {
        Ok(true) => {}
        Ok(false) => return fail(t, &headers, StatusCode::BAD_REQUEST, t.err_expired),
        Err(e) => return store_fail(t, &headers, e),
    }
    if let Err(e) = reload_user(&mut c, &mut f).await {
        return store_fail(t, &headers, e);
    }
    show(&state, &mut c, f, &headers, None, None).await
}

async fn check_code(
    state: &AppState,
    c: &mut Conn,
    f: &Flow,
    purpose: &str,
    code: &str,
) -> Result<Result<(), String>, StoreError> {
    let Some(u) = &f.user else { return Ok(Err(f.t.err_form.to_string())) };
    Ok(match super::codes::check(state, c, &u.user_id, purpose, code).await? {
        user_code::CodeCheck::Valid => Ok(()),
        user_code::CodeCheck::Wrong => Err(f.t.err_code_wrong.to_string()),
        user_code::CodeCheck::Gone => Err(f.t.err_code_gone.to_string()),
    })
}

pub async fn verify_email(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (mut c, mut f, form) = match begin::<CodeForm>(&state, &id, &headers, &body).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let t = f.t;
    // Only at that step (after the password): else anyone who typed a login name could spend
    // the attempts of the code its owner was sent.
    if f.next_step(false) != Step::VerifyEmail {
        return fail(t, &headers, StatusCode::BAD_REQUEST, t.err_form);
    }
    if let Some(msg) = f.user.as_ref().and_then(|u| not_signing_in(t, u)) {
        return fail(t, &headers, StatusCode::FORBIDDEN, msg);
    }
    match check_code(&state, &mut c, &f, VERIFY, &form.code).await {
        Ok(Ok(())) => {}
        Ok(Err(msg)) => return show(&state, &mut c, f, &headers, Some(msg), None).await,
        Err(e) => return store_fail(t, &headers, e),
    }
    if let Some(u) = &f.user
        && let Some(h) = u.human()
        && let Err(e) = user::set_email_verified(&mut c, &u.user_id, &h.email, state.clock.now()).await
    {
        return store_fail(t, &headers, e);
    }
    f.progress.email_checked = true;
    if let Err(e) = reload_user(&mut c, &mut f).await.and(f.save(&mut c).await) {
        return store_fail(t, &headers, e);
    }
    show(&state, &mut c, f, &headers, None, None).await
}

pub async fn resend(
    State(state): State<AppState>,
    Path((id, purpose)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (mut c, f, _) = match begin::<CsrfOnly>(&state, &id, &headers, &body).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let purpose = if purpose == INIT { INIT } else { VERIFY };
    // A code only for the step the flow is at: an initial password for a user who has none,
    // a verification for an address the signed-in user has not verified.
    let step = if purpose == INIT { Step::InitPassword } else { Step::VerifyEmail };
    if f.next_step(false) != step {
        return fail(f.t, &headers, StatusCode::BAD_REQUEST, f.t.err_form);
    }
    if let Err(e) = send_code(&state, &mut c, &f, purpose, false).await {
        return store_fail(f.t, &headers, e);
    }
    let info = Some(f.t.code_sent.to_string());
    show(&state, &mut c, f, &headers, None, info).await
}

pub async fn skip_verification(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (mut c, mut f, _) = match begin::<CsrfOnly>(&state, &id, &headers, &body).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    if f.progress.password_at.is_none() {
        return fail(f.t, &headers, StatusCode::BAD_REQUEST, f.t.err_form);
    }
    if let Some(msg) = f.user.as_ref().and_then(|u| not_signing_in(f.t, u)) {
        return fail(f.t, &headers, StatusCode::FORBIDDEN, msg);
    }
    f.progress.email_checked = true;
    if let Err(e) = f.save(&mut c).await {
        return store_fail(f.t, &headers, e);
    }
    show(&state, &mut c, f, &headers, None, None).await
}

pub async fn init_password(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (mut c, mut f, form) = match begin::<InitForm>(&state, &id, &headers, &body).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let t = f.t;
    if f.next_step(false) != Step::InitPassword {
        return fail(t, &headers, StatusCode::BAD_REQUEST, t.err_form);
    }
    // Every login name gets the same answer until a right code has been given, whether its
    // user exists, has a password or not: the code first (one statement for anyone, see
    // user_code::verify; no user holds the empty id), one message for a code that is wrong or
    // gone. Only then the user's organization's password rules and state, which would tell
    // who exists; the code is consumed once the new password is taken.
    let (u, purpose) = match f.code_user() {
        Some((u, purpose)) => (Some(u.clone()), purpose),
        None => (None, INIT),
    };
    let holder = u.as_ref().map_or("", |u| u.user_id.as_str());
    // What is wrong whoever the user is (the two passwords differ, none given, too long) is said
    // before the code is looked at: it tells nothing of the user, and the code's tries (each
    // look counts one, a right code too) are not spent on a typo.
    if form.password != form.password_repeat {
        return show(&state, &mut c, f, &headers, Some(t.err_mismatch.to_string()), None).await;
    }
    if form.password.is_empty() || form.password.chars().count() > crate::management::passwords::MAX_PASSWORD {
        return show(&state, &mut c, f, &headers, Some(t.err_required.to_string()), None).await;
    }
    match super::codes::verify(&state, &mut c, holder, purpose, &form.code).await {
        Ok(user_code::CodeCheck::Valid) if u.is_some() => {}
        Ok(_) => return show(&state, &mut c, f, &headers, Some(t.err_init_code.to_string()), None).await,
        Err(e) => return store_fail(t, &headers, e),
    }
    let Some(u) = u else { return fail(t, &headers, StatusCode::BAD_REQUEST, t.err_form) };
    // A reset code of a user whose organization hides reset (sent before its policy changed)
    // counts as a wrong one. Read only now, after the code: before, it would take longer for a
    // known name than for another.
    if purpose == RESET {
        match super::flow::policy_for(&state, &mut c, Some(&u)).await {
            Ok(p) if p.hide_password_reset => {
                return show(&state, &mut c, f, &headers, Some(t.err_init_code.to_string()), None).await;
            }
            Ok(_) => {}
            Err(e) => return store_fail(t, &headers, e),
        }
    }
    if let Some(msg) = not_signing_in(t, &u) {
        return show(&state, &mut c, f, &headers, Some(msg.to_string()), None).await;
    }
    match check_new_password(&mut c, t, &u.org_id, &form.password, &form.password_repeat).await {
        Ok(Ok(())) => {}
        Ok(Err(msg)) => return show(&state, &mut c, f, &headers, Some(msg), None).await,
        Err(e) => return store_fail(t, &headers, e),
    }
    // Hashed before the code is consumed: a hash that cannot run now ("try again") leaves the
    // code usable for the retry. No connection is held while it runs.
    drop(c);
    let hash = match state.hasher.hash(&form.password).await {
        Ok(h) => h,
        Err(e) => return hash_fail(t, &headers, e),
    };
    let mut c = match state.db.conn().await {
        Ok(c) => c,
        Err(e) => return store_fail(t, &headers, e),
    };
    match super::codes::consume(&state, &mut c, &u.user_id, purpose, &form.code).await {
        Ok(true) => {}
        Ok(false) => return show(&state, &mut c, f, &headers, Some(t.err_init_code.to_string()), None).await,
        Err(e) => return store_fail(t, &headers, e),
    }
    let now = state.clock.now();
    // The code arrived by e-mail, which proves the address. A reset also ends the sessions and
    // tokens of whoever knew the old password, as a password set by an administrator does.
    let is_reset = purpose == RESET;
    match credentials::set_password_by_code(&mut c, &u.user_id, &hash, is_reset, now).await {
        Ok(true) => {}
        // The user is gone (or no longer a human) since the code was checked: nothing was set.
        Ok(false) => return show(&state, &mut c, f, &headers, Some(t.err_init_code.to_string()), None).await,
        Err(e) => return store_fail(t, &headers, e),
    }
    f.progress.password_at = Some(now);
    f.progress.amr = vec!["pwd".into()];
    f.progress.mfa_setup = match super::flow::policy_for(&state, &mut c, Some(&u)).await {
        Ok(p) => p.requires_mfa(),
        Err(e) => return store_fail(t, &headers, e),
    };
    if let Err(e) = reload_user(&mut c, &mut f).await.and(f.save(&mut c).await) {
        return store_fail(t, &headers, e);
    }
    show(&state, &mut c, f, &headers, None, None).await
}
