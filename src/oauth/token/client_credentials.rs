//! The client_credentials grant for machine users: the client id is the machine user's name,
//! the secret the one `PUT /management/v1/users/{id}/secret` made. Only an access token comes
//! back; its type follows the machine user's `accessTokenType`.

use axum::http::HeaderMap;

use super::TokenResponse;
use crate::app::AppState;
use crate::crypto::secret;
use crate::domain::enums::AccessTokenType;
use crate::oauth::authorize::subject;
use crate::oauth::client_auth::{self, Method};
use crate::oauth::error::{OAuthError, OAuthResult};
use crate::oauth::form::Form;
use crate::oauth::issue::{self, Grant, Shape};
use crate::oauth::scope::Scopes;
use crate::oidc::claims;
use crate::store::user::User;

/// Whether `secret` is machine user `u`'s secret (compared by digest in constant time).
fn machine_secret_matches(u: &User, secret: Option<&str>) -> bool {
    match (u.machine().and_then(|m| m.secret_digest.as_ref()), secret) {
        (Some(d), Some(s)) => secret::matches(d, s),
        _ => false,
    }
}

/// The active machine user `p` authenticates as (its user name and secret, basic or post), if
/// it does: the caller of the revocation endpoint when it is no application.
pub async fn authenticated_machine(
    state: &AppState,
    c: &mut impl crate::store::Source,
    p: &client_auth::Presented,
) -> OAuthResult<Option<User>> {
    if !matches!(p.method, Method::Basic | Method::Post) {
        return Ok(None);
    }
    let u = state.cache.user_by_name(c, &p.client_id).await?.filter(|u| u.machine().is_some());
    Ok(u.filter(|u| machine_secret_matches(u, p.secret()) && u.is_active()))
}

pub async fn grant(state: &AppState, headers: &HeaderMap, form: &Form) -> OAuthResult<TokenResponse> {
    let p = client_auth::presented(headers, form)?
        .ok_or_else(|| OAuthError::invalid_client("client authentication is required"))?;
    if !matches!(p.method, Method::Basic | Method::Post) {
        return Err(p.fail("client_credentials accepts client_secret_basic and client_secret_post only"));
    }
    let scopes = Scopes::parse(form.get("scope")?.unwrap_or(""))
        .ok_or_else(|| OAuthError::invalid_scope("the scope is malformed"))?;
    // Usually answered from the replica's caches without touching the store.
    let mut c = state.db.lazy();
    let Some(u) = state.cache.user_by_name(&mut c, &p.client_id).await?.filter(|u| u.machine().is_some()) else {
        if state.cache.app(&mut c, &p.client_id).await?.is_some() {
            // Only an application that authenticated learns that this grant is not for it.
            let auds = super::assertion_audiences(state);
            let methods = [Method::Basic, Method::Post];
            client_auth::any_app(&state.cache, &mut c, &p, &methods, &[&auds[0], &auds[1]], state.clock.now()).await?;
            return Err(OAuthError::unauthorized_client("the client_credentials grant is for machine users"));
        }
        // Spend the time of a comparison so unknown names answer like wrong secrets.
        let _ = secret::matches(&[0u8; 32], "");
        return Err(p.fail("client authentication failed"));
    };
    if !machine_secret_matches(&u, p.secret()) || !u.is_active() {
        return Err(p.fail("client authentication failed"));
    }
    let m = u.machine().cloned().unwrap_or_default();
    state.limits.client(&u.username)?;
    let username = u.username.clone();
    let subject =
        subject(state, &mut c, u).await?.ok_or_else(|| OAuthError::invalid_grant("the user has no organization"))?;
    // Its own organization's scopes and audiences only (the client is the subject).
    let asker = crate::oauth::audience::Asker { org_id: &subject.org.org_id, is_subject: true };
    // No refresh token comes with client_credentials (RFC 6749 4.4.3), so no offline_access
    // in the scope it reports either, as the jwt-bearer grant drops it.
    let scopes = claims::filter_org_scopes(&subject, &scopes.known().without("offline_access"));
    let scopes = crate::oauth::audience::allowed(state, &mut c, asker, &subject, scopes).await?;
    let checked_at = issue::checked_at(&subject.user, None);
    let g = Grant {
        audience: issue::audience(&username, "", &scopes),
        client_id: username,
        project_id: String::new(),
        subject,
        scopes: scopes.clone(),
        auth_time: None,
        amr: Vec::new(),
        session_id: None,
        grant_id: None,
        nonce: None,
        act: None,
        checked_at,
    };
    let shape = Shape { jwt_access_token: m.access_token_type == AccessTokenType::Jwt, ..Shape::default() };
    let life = issue::lifetimes(state, &mut c).await?;
    let (access_token, _) = issue::access_token(state, &mut c, &g, shape, life.access_token_lifetime).await?;
    Ok(TokenResponse {
        access_token,
        token_type: "Bearer",
        expires_in: life.access_token_lifetime,
        scope: scopes.join(),
        id_token: None,
        refresh_token: None,
        issued_token_type: None,
    })
}
