//! `POST /oauth/v2/token`: the grant type selects the behaviour (SPEC.md 4.3).

pub(crate) mod client_credentials;
mod code;
mod exchange;
mod jwt_bearer;
mod refresh;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::error::{ErrorCode, OAuthError, OAuthResult, no_store};
use super::form::Form;
use super::issue::{self, Grant, Shape};
use crate::app::AppState;
use crate::crypto::secret;
use crate::paths;
use crate::store::refresh::RefreshRow;
use crate::store::{Conn, Source, refresh as refresh_store, revocation, to_json};

pub const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
pub const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";

#[derive(Debug, Serialize)]
pub struct TokenResponse {
    pub access_token: String,
    pub token_type: &'static str,
    pub expires_in: i64,
    pub scope: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id_token: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issued_token_type: Option<&'static str>,
}

/// What a refresh token carries besides its columns.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RefreshData {
    pub scopes: Vec<String>,
    pub auth_time: Option<i64>,
    pub amr: Vec<String>,
    /// The acting party of a token exchange (impersonation, delegation): every token the
    /// refresh token gives carries it again (RFC 8693 4.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub act: Option<serde_json::Value>,
    /// When the grant began (its first refresh token was issued); rotation keeps it. Tokens of
    /// a grant older than the user's cut-off (`User::tokens_valid_from`) are refused. Absent in
    /// tokens stored before it was recorded: their authentication time, else their own
    /// creation, stands in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub granted_at: Option<i64>,
    /// The audience and access token type a token exchange chose (its `audience`, else the
    /// subject token's, and its `requested_token_type`): the tokens a refresh gives keep them,
    /// as OIDC Core 12.2 asks of a refreshed ID token's `aud`. Absent for the other grants,
    /// whose refresh takes the audience from the client and the scopes and the type from the
    /// client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwt_access_token: Option<bool>,
}

pub async fn handler(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let result = async {
        let form = Form::parse(&headers, &body)?;
        let grant = form
            .get("grant_type")?
            .ok_or_else(|| OAuthError::invalid_request("the parameter grant_type is missing"))?;
        match grant {
            "authorization_code" => code::grant(&state, &headers, &form).await,
            "refresh_token" => refresh::grant(&state, &headers, &form).await,
            "client_credentials" => client_credentials::grant(&state, &headers, &form).await,
            JWT_BEARER => jwt_bearer::grant(&state, &form).await,
            TOKEN_EXCHANGE => exchange::grant(&state, &headers, &form).await,
            other => Err(OAuthError::new(
                ErrorCode::UnsupportedGrantType,
                format!("the grant type '{other}' is not supported"),
            )),
        }
    }
    .await;
    match result {
        Ok(body) => {
            let mut r = Json(body).into_response();
            no_store(&mut r);
            r
        }
        Err(e) => e.into_response(),
    }
}

/// The audiences a client or grant assertion may name: the issuer and the token endpoint.
pub fn assertion_audiences(state: &AppState) -> [String; 2] {
    [state.settings.issuer.clone(), format!("{}{}", state.settings.issuer, paths::TOKEN)]
}

/// Revokes everything issued under a grant (code reuse, refresh token reuse).
pub async fn revoke_grant(state: &AppState, c: &mut Conn, grant_id: &str) -> OAuthResult<()> {
    let now = state.clock.now();
    let until = issue::revocation_until(c, now).await?;
    state.revocations.revoke(c, &revocation::grant_key(grant_id), now, until).await?;
    let n = refresh_store::revoke_grant(c, grant_id, now).await?;
    tracing::warn!(grant_id, refresh_tokens = n, "grant revoked after a reused code or refresh token");
    Ok(())
}

/// Issues access token, ID token (with `openid`) and, when asked, a refresh token of `grant`.
/// The connection goes back to the pool before the tokens are signed: a request waiting for a
/// connection waits for every request holding one, and signing is the slowest step left.
pub async fn issue_tokens(
    state: &AppState,
    mut c: impl Source,
    g: &Grant,
    shape: Shape,
    refresh: Option<RefreshPlan>,
) -> OAuthResult<TokenResponse> {
    let life = issue::lifetimes(state, &mut c).await?;
    let access = issue::access_claims(state, &mut c, g, shape, life.access_token_lifetime).await?;
    let id = match g.scopes.has("openid") {
        true => Some(issue::id_claims(state, &mut c, g, shape, life.id_token_lifetime, true).await?),
        false => None,
    };
    let refresh_token = match refresh {
        Some(RefreshPlan { stored: Some(token), .. }) => Some(token),
        Some(plan) => {
            let now = state.clock.now();
            let token = secret::new_secret();
            let absolute = plan.expires_at.unwrap_or(now + life.refresh_token_expiration);
            let data = RefreshData {
                scopes: plan.original_scopes.clone(),
                auth_time: g.auth_time,
                amr: g.amr.clone(),
                act: g.act.clone(),
                granted_at: Some(g.issued_at(now)),
                audience: plan.audience.clone(),
                jwt_access_token: plan.jwt_access_token,
            };
            refresh_store::insert(
                c.conn().await?,
                &RefreshRow {
                    token_hash: secret::digest(&token),
                    grant_id: plan.grant_id.clone(),
                    client_id: g.client_id.clone(),
                    user_id: g.subject.user.user_id.clone(),
                    session_id: g.session_id.clone(),
                    data: to_json(&data),
                    created_at: now,
                    idle_expires_at: (now + life.refresh_token_idle_expiration).min(absolute),
                    expires_at: absolute,
                    rotated_at: None,
                    revoked_at: None,
                },
            )
            .await?;
            Some(token)
        }
        None => None,
    };
    drop(c);
    let access_token = issue::seal_access(state, &access, shape)?;
    let id_token = id.map(|claims| issue::sign_id(state, claims, Some(&access_token), None)).transpose()?;
    Ok(TokenResponse {
        access_token,
        token_type: "Bearer",
        expires_in: life.access_token_lifetime,
        scope: g.scopes.join(),
        id_token,
        refresh_token,
        issued_token_type: None,
    })
}

/// A refresh token to issue: its grant, the scope it may be used for, its absolute expiry (kept
/// across rotations).
pub struct RefreshPlan {
    pub grant_id: String,
    pub original_scopes: Vec<String>,
    pub expires_at: Option<i64>,
    /// The token, when the rotation already stored it (the refresh grant's fast path).
    pub stored: Option<String>,
    /// A token exchange's audience and access token type, kept for the refreshes (see
    /// [`RefreshData::audience`]).
    pub audience: Option<Vec<String>>,
    pub jwt_access_token: Option<bool>,
}
