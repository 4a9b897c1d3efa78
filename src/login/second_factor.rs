//! The second factor (TOTP) at sign-in: its code after the password, and its set-up when the
//! login policy asks for one (`forceMfa`).

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::flow::{Flow, Step, fail, not_signing_in, show, store_fail};
use super::forms::{TotpForm, begin, reload_user, too_many};
use crate::app::AppState;
use crate::domain::enums::UserState;
use crate::store::{Conn, StoreError, credentials};

/// The offered key is sealed to the request and its user: a user chosen later on the same
/// request (another name typed) opens no key offered to the one before.
fn pending_aad(f: &Flow) -> Vec<u8> {
    let user = f.user.as_ref().map(|u| u.user_id.as_str()).unwrap_or_default();
    format!("pending-totp-login:{}:{user}", f.row.auth_request_id).into_bytes()
}

/// The TOTP key offered to the flow's user at the set-up the login policy asks for, with its
/// `otpauth://` address: made when the step is first shown and kept, sealed, in the request, so
/// that a wrong code does not change the key the person has added to their app. `None` when the
/// request has no human user.
pub async fn totp_offer(state: &AppState, c: &mut Conn, f: &mut Flow) -> Result<Option<(String, String)>, StoreError> {
    let Some(u) = f.user.as_ref().filter(|u| u.human().is_some()) else { return Ok(None) };
    let login = u.login_name();
    let secret = match offered_secret(state, f) {
        Some(secret) => secret,
        None => {
            let secret = crate::crypto::totp::generate_secret();
            let sealed = state
                .otp_cipher
                .seal(&pending_aad(f), secret.as_bytes())
                .map_err(|e| StoreError::Corrupt(e.to_string()))?;
            f.progress.totp_pending = Some(URL_SAFE_NO_PAD.encode(sealed));
            f.save(c).await?;
            secret
        }
    };
    let uri = crate::crypto::totp::otpauth_uri(&state.settings.external_host(), &login, &secret);
    Ok(Some((secret, uri)))
}

fn offered_secret(state: &AppState, f: &Flow) -> Option<String> {
    let sealed = URL_SAFE_NO_PAD.decode(f.progress.totp_pending.as_deref()?).ok()?;
    state.otp_cipher.open(&pending_aad(f), &sealed).ok().and_then(|b| String::from_utf8(b).ok())
}

/// The set-up of a second factor the login policy asks for (`forceMfa`): a code of the offered
/// key makes it the user's factor and counts as this sign-in's second factor.
pub async fn totp_setup(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (mut c, mut f, form) = match begin::<TotpForm>(&state, &id, &headers, &body).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let t = f.t;
    let (Some(u), Some(secret)) = (f.user.clone(), offered_secret(&state, &f)) else {
        return fail(t, &headers, StatusCode::BAD_REQUEST, t.err_form);
    };
    if f.next_step(false) != Step::TotpSetup {
        return fail(t, &headers, StatusCode::BAD_REQUEST, t.err_form);
    }
    if let Some(msg) = not_signing_in(t, &u) {
        return show(&state, &mut c, f, &headers, Some(msg.to_string()), None).await;
    }
    if let Err(wait) = state.limits.login_name(&format!("otp:{}", u.user_id)) {
        return too_many(&state, &mut c, f, &headers, wait).await;
    }
    let now = state.clock.now();
    let Some(step) = crate::crypto::totp::verify(&secret, form.code.trim(), now, None) else {
        return show(&state, &mut c, f, &headers, Some(t.err_code_wrong.to_string()), None).await;
    };
    let sealed = match state.seal_otp(&u.user_id, &secret) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "a second factor's secret could not be sealed");
            return fail(t, &headers, StatusCode::INTERNAL_SERVER_ERROR, t.err_internal);
        }
    };
    // Only while the user has no factor: one enrolled meanwhile elsewhere is not replaced
    // without a code of it.
    match credentials::set_first_otp(&mut c, &u.user_id, sealed, now).await {
        Ok(true) => {}
        Ok(false) => return fail(t, &headers, StatusCode::CONFLICT, t.err_form),
        Err(e) => return store_fail(t, &headers, e),
    }
    if let Err(e) = credentials::otp_used(&mut c, &u.user_id, step).await {
        return store_fail(t, &headers, e);
    }
    tracing::info!(user_id = %u.user_id, "TOTP set up at sign-in (the login policy asks for a second factor)");
    f.progress.totp_pending = None;
    f.progress.otp_at = Some(now);
    f.progress.amr = vec!["pwd".into(), "otp".into(), "mfa".into()];
    if let Err(e) = reload_user(&mut c, &mut f).await.and(f.save(&mut c).await) {
        return store_fail(t, &headers, e);
    }
    show(&state, &mut c, f, &headers, None, None).await
}

pub async fn totp(State(state): State<AppState>, Path(id): Path<String>, headers: HeaderMap, body: Bytes) -> Response {
    let (mut c, mut f, form) = match begin::<TotpForm>(&state, &id, &headers, &body).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let t = f.t;
    let (Some(u), Some(_)) = (f.user.clone(), f.progress.password_at) else {
        return fail(t, &headers, StatusCode::BAD_REQUEST, t.err_form);
    };
    if let Some(msg) = not_signing_in(t, &u) {
        return show(&state, &mut c, f, &headers, Some(msg.to_string()), None).await;
    }
    // Six digits fall to guessing without a budget (the lockout policy's OTP attempts are off by
    // default): the same per-name budget as the password, drawn per user.
    if let Err(wait) = state.limits.login_name(&format!("otp:{}", u.user_id)) {
        return too_many(&state, &mut c, f, &headers, wait).await;
    }
    let Some(secret) = u.human().and_then(|h| h.otp_secret.as_ref()).and_then(|s| state.open_otp(&u.user_id, s)) else {
        return fail(t, &headers, StatusCode::BAD_REQUEST, t.err_form);
    };
    let now = state.clock.now();
    // ... and the pace kept in the store, which all replicas share.
    match credentials::otp_claim(&mut c, &u.user_id, now).await {
        Ok(None) => {}
        Ok(Some(wait)) => {
            return too_many(&state, &mut c, f, &headers, std::time::Duration::from_secs(wait.unsigned_abs())).await;
        }
        Err(e) => return store_fail(t, &headers, e),
    }
    let last = u.human().and_then(|h| h.otp_last_step);
    let used = match crate::crypto::totp::verify(&secret, form.code.trim(), now, last) {
        Some(step) => credentials::otp_used(&mut c, &u.user_id, step).await,
        None => Ok(false),
    };
    match used {
        Ok(true) => {}
        Ok(false) => {
            let max = match state.cache.lockout_policy_of(&mut c, &u.org_id).await {
                Ok(p) => p.max_otp_attempts,
                Err(e) => return store_fail(t, &headers, e),
            };
            if let Err(e) = credentials::otp_failed(&mut c, &u.user_id, max, now).await {
                return store_fail(t, &headers, e);
            }
            if let Err(e) = reload_user(&mut c, &mut f).await {
                return store_fail(t, &headers, e);
            }
            let locked = f.user.as_ref().is_some_and(|u| u.state == UserState::Locked);
            let msg = if locked { t.err_locked } else { t.err_code_wrong };
            return show(&state, &mut c, f, &headers, Some(msg.to_string()), None).await;
        }
        Err(e) => return store_fail(t, &headers, e),
    }
    f.progress.otp_at = Some(now);
    f.progress.amr = vec!["pwd".into(), "otp".into(), "mfa".into()];
    if let Err(e) = reload_user(&mut c, &mut f).await.and(f.save(&mut c).await) {
        return store_fail(t, &headers, e);
    }
    show(&state, &mut c, f, &headers, None, None).await
}
