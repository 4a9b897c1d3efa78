//! The jwt-bearer grant (RFC 7523 2.1): a machine user signs an assertion with the key from its
//! key file (`kid` = key id, `iss` = `sub` = user id, `aud` naming latch). No client
//! authentication: the assertion is the credential. An ID token with `openid`, no refresh token.

use super::{TokenResponse, assertion_audiences};
use crate::app::AppState;
use crate::domain::enums::AccessTokenType;
use crate::oauth::assertion;
use crate::oauth::authorize::subject;
use crate::oauth::error::{OAuthError, OAuthResult};
use crate::oauth::form::Form;
use crate::oauth::issue::{self, Grant, Shape};
use crate::oauth::scope::Scopes;
use crate::oidc::claims;
use crate::store::{Source, key};

pub async fn grant(state: &AppState, form: &Form) -> OAuthResult<TokenResponse> {
    let now = state.clock.now();
    let token = form.require("assertion")?;
    let scopes = Scopes::parse(form.get("scope")?.unwrap_or(""))
        .ok_or_else(|| OAuthError::invalid_scope("the scope is malformed"))?;
    let user_id =
        assertion::peek_issuer(token).ok_or_else(|| OAuthError::invalid_grant("the assertion is malformed"))?;
    let key_id = assertion::peek_key_id(token).ok_or_else(|| OAuthError::invalid_grant("the assertion has no kid"))?;
    // Usually the user and its key come from the replica's cache, and the one statement is the
    // record of the assertion's id.
    let mut c = state.db.lazy();
    let found = state.cache.user_with_key(&mut c, &user_id, &key_id).await?;
    let (u, key) = found
        .filter(|(u, _)| u.is_active() && u.machine().is_some())
        .ok_or_else(|| OAuthError::invalid_grant("the assertion's issuer is not an active machine user"))?;
    let auds = assertion_audiences(state);
    let claims =
        assertion::verify(token, key.as_slice(), &[&auds[0], &auds[1]], now).map_err(OAuthError::invalid_grant)?;
    if claims.sub != u.user_id {
        return Err(OAuthError::invalid_grant("the assertion's subject is not its issuer"));
    }
    state.limits.client(&u.user_id)?;
    if let Some(jti) = &claims.jti
        && !key::remember_jti(c.conn().await?, &format!("user:{}:{jti}", u.user_id), claims.replay_window_end()).await?
    {
        return Err(OAuthError::invalid_grant("the assertion was used before"));
    }
    let jwt = u.machine().is_some_and(|m| m.access_token_type == AccessTokenType::Jwt);
    let client_id = u.user_id.clone();
    let subject =
        subject(state, &mut c, u).await?.ok_or_else(|| OAuthError::invalid_grant("the user has no organization"))?;
    let asker = crate::oauth::audience::Asker { org_id: &subject.org.org_id, is_subject: true };
    let scopes = claims::filter_org_scopes(&subject, &scopes.known().without("offline_access"));
    let scopes = crate::oauth::audience::allowed(state, &mut c, asker, &subject, scopes).await?;
    let checked_at = issue::checked_at(&subject.user, None);
    let g = Grant {
        audience: issue::audience(&client_id, "", &scopes),
        client_id,
        project_id: String::new(),
        subject,
        scopes: scopes.clone(),
        auth_time: Some(now),
        amr: vec!["private_key".into()],
        session_id: None,
        grant_id: None,
        nonce: None,
        act: None,
        checked_at,
    };
    let shape = Shape { jwt_access_token: jwt, ..Shape::default() };
    super::issue_tokens(state, c, &g, shape, None).await
}
