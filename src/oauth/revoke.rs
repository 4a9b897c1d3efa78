//! `POST /oauth/v2/revoke` (RFC 7009). Revoking an access token revokes only it; revoking a
//! refresh token revokes its whole rotation chain and the access tokens issued from it. A
//! client may revoke only its own tokens; unknown or already revoked tokens get HTTP 200. The
//! client is an application, or a machine user (its user name and secret) revoking the access
//! tokens of its client_credentials grants.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use super::access;
use super::client_auth::{self, Method};
use super::error::{ErrorCode, OAuthError, OAuthResult, no_store};
use super::form::Form;
use super::token::revoke_grant;
use crate::app::AppState;
use crate::crypto::secret;
use crate::paths;
use crate::store::{refresh, revocation};

const ALL: [Method; 4] = [Method::Basic, Method::Post, Method::None, Method::PrivateKeyJwt];

pub async fn handler(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    match revoke(&state, &headers, &body).await {
        Ok(()) => {
            let mut r = StatusCode::OK.into_response();
            no_store(&mut r);
            r
        }
        Err(e) => e.into_response(),
    }
}

async fn revoke(state: &AppState, headers: &HeaderMap, body: &[u8]) -> OAuthResult<()> {
    let form = Form::parse(headers, body)?;
    let presented = client_auth::presented(headers, &form)?
        .ok_or_else(|| OAuthError::invalid_client("client authentication is required"))?;
    let token = form.require("token")?;
    // RFC 7009 2.2: a hint latch does not know is ignored and does not change the answer.
    let hint = form.get("token_type_hint")?;
    let now = state.clock.now();
    let mut c = state.db.conn().await?;
    let issuer = &state.settings.issuer;
    let endpoint = format!("{issuer}{}", paths::REVOKE);
    // A client assertion names the issuer, this endpoint or, as OIDC Core 9 has every client
    // assertion name it, the token endpoint.
    let token_endpoint = format!("{issuer}{}", paths::TOKEN);
    // An application, or a machine user revoking the tokens of its client_credentials grants
    // (their client_id is its user name).
    let caller_id =
        match client_auth::any_app(&state.cache, &mut c, &presented, &ALL, &[issuer, &endpoint, &token_endpoint], now)
            .await
        {
            Ok(app) => app.client_id,
            Err(e) => match super::token::client_credentials::authenticated_machine(state, &mut c, &presented).await? {
                Some(u) => u.username,
                None => return Err(e),
            },
        };
    state.limits.client_as(&caller_id, presented.method)?;
    let not_yours = || OAuthError::new(ErrorCode::UnauthorizedClient, "the token was issued to another client");
    // The hint decides the order of the search, not its outcome.
    let refresh_first = hint != Some("access_token");
    for attempt in 0..2 {
        if (attempt == 0) == refresh_first {
            if let Some(row) = refresh::get(&mut c, &secret::digest(token)).await? {
                if row.client_id != caller_id {
                    return Err(not_yours());
                }
                if row.revoked_at.is_none() {
                    revoke_grant(state, &mut c, &row.grant_id).await?;
                }
                return Ok(());
            }
        } else if let Some(claims) = access::decode_learning(state, token).await {
            if claims.client_id != caller_id {
                return Err(not_yours());
            }
            // Kept a minute past the token's expiry, as other revocations (clock skew between
            // replicas: one ahead must not skip or sweep it while one behind takes the token).
            let until = claims.exp.saturating_add(60);
            if until > now {
                state.revocations.revoke(&mut c, &revocation::token_key(&claims.jti), now, until).await?;
            }
            return Ok(());
        }
    }
    Ok(())
}
