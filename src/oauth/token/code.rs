//! The authorization_code grant (RFC 6749 4.1.3, RFC 7636): single-use codes bound to the
//! client, the redirect URI and the PKCE challenge; a second use revokes what the first issued.

use axum::http::HeaderMap;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

use super::{RefreshPlan, TokenResponse, assertion_audiences, issue_tokens, revoke_grant};
use crate::app::AppState;
use crate::crypto::secret;
use crate::domain::enums::OidcGrantType;
use crate::oauth::authorize::{CodeData, shape, subject};
use crate::oauth::client_auth::{self, Method};
use crate::oauth::error::{OAuthError, OAuthResult};
use crate::oauth::form::Form;
use crate::oauth::issue::{self, Grant};
use crate::oauth::scope::Scopes;
use crate::store::code::{self, Redeemed};
use crate::store::from_json;
use crate::store::revocation;

const ALL: [Method; 4] = [Method::Basic, Method::Post, Method::None, Method::PrivateKeyJwt];

fn valid_verifier(v: &str) -> bool {
    (43..=128).contains(&v.len())
        && v.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
}

pub async fn grant(state: &AppState, headers: &HeaderMap, form: &Form) -> OAuthResult<TokenResponse> {
    let now = state.clock.now();
    let presented = client_auth::presented(headers, form)?
        .ok_or_else(|| OAuthError::invalid_client("client authentication is required"))?;
    let code_value = form.require("code")?;
    let redirect_uri = form.require("redirect_uri")?;
    let verifier = form.get("code_verifier")?;
    let mut c = state.db.conn().await?;
    let auds = assertion_audiences(state);
    let client = client_auth::oidc_client(&state.cache, &mut c, &presented, &ALL, &[&auds[0], &auds[1]], now).await?;
    state.limits.client_as(&client.app.client_id, presented.method)?;
    if !client.config.grant_types.contains(&OidcGrantType::AuthorizationCode) {
        return Err(OAuthError::unauthorized_client("the client may not use the authorization_code grant"));
    }
    // The first refresh token is offered to the redemption, which stores it in the same
    // round trip when the code grants offline_access.
    let may_refresh = client.config.grant_types.contains(&OidcGrantType::RefreshToken);
    let life = issue::lifetimes(state, &mut c).await?;
    let successor = may_refresh.then(|| {
        let token = secret::new_secret();
        let hash = secret::digest(&token);
        (token, hash)
    });
    let absolute = now + life.refresh_token_expiration;
    let offer = successor.as_ref().map(|(_, hash)| code::Successor {
        token_hash: hash,
        idle_expires_at: (now + life.refresh_token_idle_expiration).min(absolute),
        expires_at: absolute,
    });
    let (grant_id, data, expires_at, refresh_stored) =
        match code::redeem(&mut c, &secret::digest(code_value), &client.app.client_id, now, offer).await? {
            Redeemed::Fresh { grant_id, data, expires_at, refresh_stored } => {
                (grant_id, data, expires_at, refresh_stored)
            }
            Redeemed::Reused { grant_id } => {
                revoke_grant(state, &mut c, &grant_id).await?;
                return Err(OAuthError::invalid_grant(
                    "the code was used before; the tokens issued for it are revoked",
                ));
            }
            Redeemed::OtherClient => return Err(OAuthError::invalid_grant("the code was issued to another client")),
            Redeemed::Unknown => return Err(OAuthError::invalid_grant("the code is invalid")),
        };
    if expires_at <= now {
        return Err(OAuthError::invalid_grant("the code has expired"));
    }
    let data: CodeData = from_json("auth_code.data", &data)?;
    if data.redirect_uri != redirect_uri {
        return Err(OAuthError::invalid_grant("redirect_uri differs from the authorization request's"));
    }
    match (&data.code_challenge, verifier) {
        (Some(challenge), Some(v)) => {
            if !valid_verifier(v) {
                return Err(OAuthError::invalid_grant("the code_verifier is malformed"));
            }
            let computed = URL_SAFE_NO_PAD.encode(Sha256::digest(v.as_bytes()));
            if aws_lc_rs::constant_time::verify_slices_are_equal(computed.as_bytes(), challenge.as_bytes()).is_err() {
                return Err(OAuthError::invalid_grant("the code_verifier does not match the code_challenge"));
            }
        }
        (Some(_), None) => return Err(OAuthError::invalid_grant("the code_verifier is missing")),
        // RFC 9700 2.1.1: a verifier without a challenge is a downgrade attempt.
        (None, Some(_)) => return Err(OAuthError::invalid_grant("a code_verifier was sent but no code_challenge was")),
        (None, None) => {}
    }
    let u = state.cache.user(&mut c, &data.user_id).await?.filter(|u| u.is_active());
    let u = u.ok_or_else(|| OAuthError::invalid_grant("the user is not active"))?;
    if data.auth_time < u.tokens_valid_from {
        return Err(OAuthError::invalid_grant("the sign-in of this code was ended"));
    }
    // A logout between the sign-in and the exchange: the refresh token stored with the
    // redemption would outlive the session's revocation entry (kept only as long as signed
    // tokens live), so the grant is revoked with it. With a refresh token stored (by the
    // redemption; a code of a replica from before the stored seed stores it later and keeps
    // the mirror's answer), the store is asked even when the replica's mirror knows of no logout: one on another replica within the
    // mirror's last poll revoked the refresh tokens it found, not this one. A logout writes its
    // entry before it revokes the session's refresh tokens, so either it finds this token or
    // this read (after the redemption's commit) finds its entry.
    let session_ended = [revocation::session_key(&data.session_id)];
    let ended = match state.revocations.check(&session_ended) {
        Some(true) => true,
        Some(false) if !refresh_stored => false,
        _ => revocation::any_revoked(&mut c, &session_ended).await?,
    };
    if ended {
        revoke_grant(state, &mut c, &grant_id).await?;
        return Err(OAuthError::invalid_grant("the sign-in of this code was ended"));
    }
    let subject =
        subject(state, &mut c, u).await?.ok_or_else(|| OAuthError::invalid_grant("the user has no organization"))?;
    let mut scopes = Scopes(data.scopes.clone());
    if !may_refresh {
        scopes = scopes.without("offline_access");
    }
    // The sign-in checked the user fresh.
    let checked_at = issue::checked_at(&subject.user, Some(data.auth_time));
    let g = Grant {
        client_id: client.app.client_id.clone(),
        project_id: client.project.project_id.clone(),
        audience: issue::audience(&client.app.client_id, &client.project.project_id, &scopes),
        subject,
        scopes: scopes.clone(),
        auth_time: Some(data.auth_time),
        amr: data.amr.clone(),
        session_id: Some(data.session_id.clone()),
        grant_id: Some(grant_id.clone()),
        nonce: data.nonce.clone(),
        act: None,
        checked_at,
    };
    let refresh = (may_refresh && scopes.has("offline_access")).then(|| RefreshPlan {
        grant_id: grant_id.clone(),
        original_scopes: scopes.0.clone(),
        expires_at: Some(absolute),
        // A code minted before its table carried the seed, or by an older replica: the token
        // is stored on its own.
        stored: successor.filter(|_| refresh_stored).map(|(token, _)| token),
        audience: None,
        jwt_access_token: None,
    });
    issue_tokens(state, c, &g, shape(&client), refresh).await
}
