//! Pages for one's own account: enrolling a TOTP second factor (`/ui/account/totp`). The
//! account is the browser's signed-in session (the one named by `?session=` when there are
//! several). The key offered is sealed into the form, bound to that session, so the form cannot
//! be forged for another account; the cookie is `SameSite=Lax`, so another site cannot post it.
//! Replacing a factor the account has needs a code of that factor, counted toward the lockout
//! policy like the sign-in's: a session alone (a borrowed browser) cannot swap it.

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Deserialize;

use super::cookie;
use super::flow::{fail, store_fail};
use super::i18n::{self, Texts};
use super::pages;
use crate::app::AppState;
use crate::crypto::totp;
use crate::oauth::authorize::browser_sessions;
use crate::store::credentials;
use crate::store::session::Session;
use crate::store::user::User;

#[derive(Deserialize, Default)]
pub struct Which {
    #[serde(default)]
    session: Option<String>,
}

#[derive(Deserialize)]
pub struct EnrolForm {
    session: String,
    pending: String,
    code: String,
    /// A code of the factor the account has, when it has one.
    #[serde(default)]
    current: String,
}

fn aad(session_id: &str) -> Vec<u8> {
    format!("pending-totp:{session_id}").into_bytes()
}

/// The browser's session to act on, with its user.
async fn account(
    state: &AppState,
    headers: &HeaderMap,
    t: &Texts,
    which: Option<&str>,
) -> Result<(Session, User), Response> {
    let Some(browser) = cookie::existing(headers, state.settings.secure_cookies) else {
        return Err(fail(t, headers, StatusCode::UNAUTHORIZED, t.err_no_session));
    };
    let mut c = state.db.conn().await.map_err(|e| store_fail(t, headers, e))?;
    let sessions =
        browser_sessions(&mut c, &browser, state.clock.now()).await.map_err(|e| store_fail(t, headers, e))?;
    let chosen = match which {
        Some(id) => sessions.into_iter().find(|(s, _)| s.session_id == id),
        None if sessions.len() == 1 => sessions.into_iter().next(),
        None => None,
    };
    chosen
        .filter(|(_, u)| u.human().is_some())
        .ok_or_else(|| fail(t, headers, StatusCode::UNAUTHORIZED, t.err_no_session))
}

fn page(state: &AppState, t: &Texts, s: &Session, u: &User, error: Option<String>) -> Response {
    let secret = totp::generate_secret();
    let pending = match state.otp_cipher.seal(&aad(&s.session_id), secret.as_bytes()) {
        Ok(p) => URL_SAFE_NO_PAD.encode(p),
        Err(e) => {
            tracing::error!(error = %e, "a pending second factor could not be sealed");
            return pages::error_page(t, StatusCode::INTERNAL_SERVER_ERROR, t.err_internal, "");
        }
    };
    let uri = totp::otpauth_uri(&state.settings.external_host(), &u.login_name(), &secret);
    let view = pages::TotpEnrol {
        t,
        error,
        info: None,
        session: &s.session_id,
        pending: &pending,
        secret: &secret,
        uri: &uri,
        done: false,
        has_factor: u.human().is_some_and(|h| h.otp_secret.is_some()),
    };
    pages::render(t, StatusCode::OK, &view, None)
}

pub async fn enrol_page(State(state): State<AppState>, headers: HeaderMap, Query(which): Query<Which>) -> Response {
    let t = i18n::choose(&[], &headers);
    match account(&state, &headers, t, which.session.as_deref()).await {
        Ok((s, u)) => page(&state, t, &s, &u, None),
        Err(r) => r,
    }
}

/// Checks a code of the account's current factor: `None` when it is right (and used up), else
/// what to tell the person; a wrong code counts toward the lockout policy.
async fn current_factor(
    state: &AppState,
    u: &User,
    sealed: &[u8],
    code: &str,
    now: i64,
) -> crate::store::Result<Option<fn(&Texts) -> &'static str>> {
    let mut c = state.db.conn().await?;
    let last = u.human().and_then(|h| h.otp_last_step);
    let right = match state.open_otp(&u.user_id, sealed).and_then(|secret| totp::verify(&secret, code, now, last)) {
        Some(step) => credentials::otp_used(&mut c, &u.user_id, step).await?,
        None => false,
    };
    if right {
        return Ok(None);
    }
    let max = state.cache.lockout_policy_of(&mut c, &u.org_id).await?.max_otp_attempts;
    let locked = credentials::otp_failed(&mut c, &u.user_id, max, now).await?;
    Ok(Some(if locked { |t: &Texts| t.err_locked } else { |t: &Texts| t.err_code_wrong }))
}

pub async fn enrol(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let t = i18n::choose(&[], &headers);
    let Ok(form) = serde_urlencoded::from_bytes::<EnrolForm>(&body) else {
        return fail(t, &headers, StatusCode::BAD_REQUEST, t.err_form);
    };
    let (s, u) = match account(&state, &headers, t, Some(&form.session)).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let secret = URL_SAFE_NO_PAD
        .decode(form.pending.as_bytes())
        .ok()
        .and_then(|sealed| state.otp_cipher.open(&aad(&s.session_id), &sealed).ok())
        .and_then(|b| String::from_utf8(b).ok());
    let Some(secret) = secret else { return fail(t, &headers, StatusCode::FORBIDDEN, t.err_form) };
    let now = state.clock.now();
    if let Some(sealed) = u.human().and_then(|h| h.otp_secret.as_ref()) {
        // The sign-in's per-user budget for second-factor codes: a borrowed browser guesses the
        // current factor's code no faster here than at sign-in.
        if let Err(wait) = state.limits.login_name(&format!("otp:{}", u.user_id)) {
            metrics::counter!("latch_rate_limited_total", "budget" => "login_per_name").increment(1);
            let msg = t.err_too_many.replace("{}", &crate::limits::retry_after_secs(wait).to_string());
            return crate::limits::too_many(page(&state, t, &s, &u, Some(msg)), wait);
        }
        // ... and the pace kept in the store, which all replicas share.
        let claimed = async { credentials::otp_claim(&mut *state.db.conn().await?, &u.user_id, now).await }.await;
        match claimed {
            Ok(None) => {}
            Ok(Some(wait)) => {
                let wait = std::time::Duration::from_secs(wait.unsigned_abs());
                let msg = t.err_too_many.replace("{}", &crate::limits::retry_after_secs(wait).to_string());
                return crate::limits::too_many(page(&state, t, &s, &u, Some(msg)), wait);
            }
            Err(e) => return store_fail(t, &headers, e),
        }
        match current_factor(&state, &u, sealed, form.current.trim(), now).await {
            Ok(None) => {}
            Ok(Some(msg)) => return page(&state, t, &s, &u, Some(msg(t).to_string())),
            Err(e) => return store_fail(t, &headers, e),
        }
    }
    let Some(step) = totp::verify(&secret, form.code.trim(), now, None) else {
        // A new key: the person starts over with a fresh one.
        return page(&state, t, &s, &u, Some(t.err_code_wrong.to_string()));
    };
    let result = async {
        let mut c = state.db.conn().await?;
        let sealed =
            state.seal_otp(&u.user_id, &secret).map_err(|e| crate::store::StoreError::Corrupt(e.to_string()))?;
        credentials::set_otp(&mut c, &u.user_id, Some(sealed), now).await?;
        credentials::otp_used(&mut c, &u.user_id, step).await
    }
    .await;
    if let Err(e) = result {
        return store_fail(t, &headers, e);
    }
    tracing::info!(user_id = %u.user_id, "TOTP enrolled");
    let view = pages::TotpEnrol {
        t,
        error: None,
        info: Some(t.totp_enrolled.to_string()),
        session: "",
        pending: "",
        secret: "",
        uri: "",
        done: true,
        has_factor: true,
    };
    pages::render(t, StatusCode::OK, &view, None)
}
