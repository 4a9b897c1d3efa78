//! The refresh_token grant: rotation on every use, reuse detection that revokes the whole
//! chain, narrowing (never widening) of the scope, idle and absolute expiry.

use axum::http::HeaderMap;

use super::{RefreshData, RefreshPlan, TokenResponse, assertion_audiences, issue_tokens, revoke_grant};
use crate::app::AppState;
use crate::crypto::secret;
use crate::domain::enums::OidcGrantType;
use crate::oauth::access;
use crate::oauth::authorize::{shape, subject};
use crate::oauth::client_auth::{self, Method};
use crate::oauth::error::{ErrorCode, OAuthError, OAuthResult};
use crate::oauth::form::Form;
use crate::oauth::issue::{self, Grant};
use crate::oauth::scope::Scopes;
use crate::store::{from_json, refresh, revocation, user};

const ALL: [Method; 4] = [Method::Basic, Method::Post, Method::None, Method::PrivateKeyJwt];

pub async fn grant(state: &AppState, headers: &HeaderMap, form: &Form) -> OAuthResult<TokenResponse> {
    let now = state.clock.now();
    let successor = secret::new_secret();
    let mut rotated = false;
    let result = refresh(state, headers, form, now, &successor, &mut rotated).await;
    // The token was rotated but the request failed on latch's side (a store that went away, a
    // key that could not sign): its successor was never handed out, so the rotation is taken
    // back and the client's retry with the same token is no reuse. Best effort: when the store
    // is still gone the token stays used up, as before. With a reuse interval a retry within
    // it is served anyway, and the rotation is left alone: it may be a second one, after a first
    // whose successor was handed out in the same second, which an undo would take back too.
    if let Err(e) = &result
        && rotated
        && matches!(e.code, ErrorCode::ServerError | ErrorCode::TemporarilyUnavailable)
        && state.settings.refresh_reuse_interval == 0
        && let Ok(Some(token)) = form.get("refresh_token")
    {
        let undone = match state.db.conn().await {
            Ok(mut c) => refresh::unrotate(&mut c, &secret::digest(token), &secret::digest(&successor), now)
                .await
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match undone {
            Ok(true) => tracing::info!("a refresh that failed on the server's side left its token usable"),
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, "a refresh that failed on the server's side used up its token"),
        }
    }
    result
}

/// The grant; `rotated` is set once the token is rotated (its successor, `successor`, stored).
async fn refresh(
    state: &AppState,
    headers: &HeaderMap,
    form: &Form,
    now: i64,
    successor: &str,
    rotated: &mut bool,
) -> OAuthResult<TokenResponse> {
    let presented = client_auth::presented(headers, form)?
        .ok_or_else(|| OAuthError::invalid_client("client authentication is required"))?;
    let token = form.require("refresh_token")?;
    let requested = match form.get("scope")? {
        Some(s) => Some(Scopes::parse(s).ok_or_else(|| OAuthError::invalid_scope("the scope is malformed"))?),
        None => None,
    };
    let mut c = state.db.conn().await?;
    let auds = assertion_audiences(state);
    let client = client_auth::oidc_client(&state.cache, &mut c, &presented, &ALL, &[&auds[0], &auds[1]], now).await?;
    state.limits.client_as(&client.app.client_id, presented.method)?;
    if !client.config.grant_types.contains(&OidcGrantType::RefreshToken) {
        return Err(OAuthError::unauthorized_client("the client may not use the refresh_token grant"));
    }
    let hash = secret::digest(token);
    let reuse_after = refresh::reuse_after(now, state.settings.refresh_reuse_interval);
    // Without a narrower scope nothing below can refuse a live token for a reason that should
    // leave it usable, so it is rotated first and its successor stored, in the same round trip
    // that reads it; what is not live is read afterwards to say why. (Should a check below
    // fail, the stored successor was never handed out and expires unused; see [`grant`] for a
    // failure on latch's side.)
    let renewed = match requested {
        None => {
            let idle = issue::lifetimes(state, &mut c).await?.refresh_token_idle_expiration;
            let (client_id, next) = (&client.app.client_id, secret::digest(successor));
            refresh::rotate_live(&mut c, &hash, client_id, &next, now, idle, reuse_after).await?
        }
        Some(_) => None,
    };
    let was_rotated_here = renewed.is_some();
    *rotated = was_rotated_here;
    let row = match renewed {
        Some(row) => row,
        None => refresh::get(&mut c, &hash)
            .await?
            .ok_or_else(|| OAuthError::invalid_grant("the refresh token is invalid"))?,
    };
    if !was_rotated_here {
        if row.client_id != client.app.client_id {
            return Err(OAuthError::invalid_grant("the refresh token was issued to another client"));
        }
        if row.revoked_at.is_some() {
            return Err(OAuthError::invalid_grant("the refresh token is revoked"));
        }
        // Within the reuse interval a rotated token is served again (rotated below).
        if row.rotated_at.is_some_and(|t| t <= reuse_after) {
            revoke_grant(state, &mut c, &row.grant_id).await?;
            return Err(OAuthError::invalid_grant("the refresh token was used before; its chain is revoked"));
        }
        if row.expires_at <= now || row.idle_expires_at <= now {
            return Err(OAuthError::invalid_grant("the refresh token has expired"));
        }
    }
    let mut keys = vec![revocation::grant_key(&row.grant_id)];
    if let Some(sid) = &row.session_id {
        keys.push(revocation::session_key(sid));
    }
    let found = match state.revocations.check(&keys) {
        Some(revoked) => state.cache.user(&mut c, &row.user_id).await?.map(|u| (u, revoked)),
        None => user::get_checking_revocation(&mut c, &row.user_id, &keys).await?,
    };
    let (u, revoked) = found.ok_or_else(|| OAuthError::invalid_grant("the user is not active"))?;
    if revoked {
        return Err(OAuthError::invalid_grant("the refresh token is revoked"));
    }
    let data: RefreshData = from_json("refresh_token.data", &row.data)?;
    let original = Scopes(data.scopes.clone());
    let scopes = match requested {
        Some(r) if !r.subset_of(&original) => {
            return Err(OAuthError::invalid_scope("the scope exceeds what was granted"));
        }
        Some(r) => r,
        None => original.clone(),
    };
    if !u.is_active() {
        return Err(OAuthError::invalid_grant("the user is not active"));
    }
    let granted = data.granted_at.or(data.auth_time).unwrap_or(row.created_at);
    if granted < u.tokens_valid_from || !access::actor_still_acts(&mut c, data.act.as_ref(), granted, &u).await? {
        return Err(OAuthError::invalid_grant("the refresh token is revoked"));
    }
    let subject =
        subject(state, &mut c, u).await?.ok_or_else(|| OAuthError::invalid_grant("the user has no organization"))?;
    // Audiences as a sign-in would give them now (a grant from before that rule, or the
    // default organization changed since).
    let asker = crate::oauth::audience::Asker { org_id: &client.project.org_id, is_subject: false };
    let scopes = crate::oauth::audience::allowed(state, &mut c, asker, &subject, scopes).await?;
    // A narrower scope was checked before anything was written (an invalid_scope leaves the
    // token usable); now the token is rotated and its successor stored, atomically as above,
    // so that a reuse of the token revokes the successor with the rest of the chain.
    let rotated_now = was_rotated_here || {
        let idle = issue::lifetimes(state, &mut c).await?.refresh_token_idle_expiration;
        let next = secret::digest(successor);
        refresh::rotate_live(&mut c, &hash, &client.app.client_id, &next, now, idle, reuse_after).await?.is_some()
    };
    *rotated = rotated_now;
    if !rotated_now {
        // Another request rotated it a moment ago: treat as reuse.
        revoke_grant(state, &mut c, &row.grant_id).await?;
        return Err(OAuthError::invalid_grant("the refresh token was used before; its chain is revoked"));
    }
    let checked_at = issue::checked_at(&subject.user, Some(granted));
    // A token exchange's audience stays, as far as a sign-in to this client would give it now.
    let kept = match data.audience.clone() {
        Some(a) => {
            let asker = crate::oauth::audience::Asker { org_id: &client.project.org_id, is_subject: false };
            crate::oauth::audience::allowed_ids(state, &mut c, asker, &subject, a).await?
        }
        None => Vec::new(),
    };
    let audience = if kept.is_empty() {
        issue::audience(&client.app.client_id, &client.project.project_id, &scopes)
    } else {
        kept
    };
    let g = Grant {
        client_id: client.app.client_id.clone(),
        project_id: client.project.project_id.clone(),
        audience,
        subject,
        scopes,
        auth_time: data.auth_time,
        amr: data.amr.clone(),
        session_id: row.session_id.clone(),
        grant_id: Some(row.grant_id.clone()),
        // A refreshed ID token carries no nonce.
        nonce: None,
        act: data.act.clone(),
        checked_at,
    };
    let mut sh = shape(&client);
    if let Some(jwt) = data.jwt_access_token {
        sh.jwt_access_token = jwt;
    }
    let plan = RefreshPlan {
        grant_id: row.grant_id.clone(),
        original_scopes: data.scopes,
        expires_at: Some(row.expires_at),
        stored: Some(successor.to_string()),
        audience: data.audience,
        jwt_access_token: data.jwt_access_token,
    };
    issue_tokens(state, c, &g, sh, Some(plan)).await
}
