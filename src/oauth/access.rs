//! Reading an access token presented to latch (introspection, userinfo, revocation, the
//! management API): a JWT access token, an opaque (sealed) one, or a personal access token.
//! A token counts only while it is unexpired, not revoked (by itself, its session or its grant),
//! not older than its user's cut-off (`User::tokens_valid_from`), its user is active and the
//! party it was issued to is still there (an active application of an active project, or the
//! machine user itself).

use super::issue::AccessClaims;
use crate::app::AppState;
use crate::crypto::secret;
use crate::domain::roles::{IAM_IMPERSONATOR, ORG_IMPERSONATOR};
use crate::domain::settings::SecurityPolicy;
use crate::store::user::User;
use crate::store::{Conn, Result, Source, key, member, revocation, setting, user};

/// A valid access token and its user.
#[derive(Debug, Clone)]
pub struct Access {
    pub claims: AccessClaims,
    pub user: User,
    /// A personal access token (no client, no audience of its own).
    pub is_pat: bool,
}

/// The longest access token latch reads (and so issues).
pub const MAX_TOKEN_LEN: usize = 16 * 1024;

/// The claims of a token latch issued, if it is one, whatever its state.
pub fn decode(state: &AppState, token: &str) -> Option<AccessClaims> {
    if token.len() > MAX_TOKEN_LEN {
        return None;
    }
    if token.contains('.') { state.tokens.verify_typed(token, "at+jwt") } else { state.tokens.open(token) }
}

/// [`decode`], learning first the key of a JWT signed by a key this replica has not loaded yet
/// (one another replica activated since this one's last reload).
pub async fn decode_learning(state: &AppState, token: &str) -> Option<AccessClaims> {
    match decode(state, token) {
        None if token.len() <= MAX_TOKEN_LEN && state.tokens.learn_signer(token).await => decode(state, token),
        decoded => decoded,
    }
}

/// Resolves a presented token; `None` for anything that does not count.
pub async fn resolve(state: &AppState, c: &mut impl Source, token: &str) -> Result<Option<Access>> {
    let now = state.clock.now();
    let (claims, is_pat) = match decode_learning(state, token).await {
        Some(claims) => (claims, false),
        None => {
            if token.is_empty() || token.len() > 512 {
                return Ok(None);
            }
            let Some(pat) = key::find_pat(c.conn().await?, &secret::digest(token)).await? else { return Ok(None) };
            let claims = AccessClaims {
                iss: state.settings.issuer.clone(),
                sub: pat.user_id.clone(),
                aud: Vec::new(),
                exp: pat.expires_at.unwrap_or(i64::MAX),
                iat: pat.created_at,
                nbf: pat.created_at,
                jti: pat.pat_id.clone(),
                client_id: String::new(),
                scope: pat.scopes.join(" "),
                sid: None,
                gid: None,
                auth_time: None,
                amr: None,
                act: None,
                extra: Default::default(),
            };
            (claims, true)
        }
    };
    if claims.exp <= now || claims.nbf > now + 60 || claims.iss != state.settings.issuer {
        return Ok(None);
    }
    // The token, its session and its grant may have been revoked (a PAT is revoked by deleting
    // it). The replica's mirror of revocations and its user cache usually answer; when the
    // mirror is not fresh, the store does, user and revocation in one round trip.
    let mut keys = Vec::new();
    if !is_pat {
        keys.push(revocation::token_key(&claims.jti));
        if let Some(sid) = &claims.sid {
            keys.push(revocation::session_key(sid));
        }
        if let Some(gid) = &claims.gid {
            keys.push(revocation::grant_key(gid));
        }
    }
    let found = match state.revocations.check(&keys) {
        Some(true) => return Ok(None),
        Some(false) => state.cache.user(c, &claims.sub).await?.map(|u| (u, false)),
        None => user::get_checking_revocation(c.conn().await?, &claims.sub, &keys).await?,
    };
    let Some((u, revoked)) = found else { return Ok(None) };
    // Tokens issued before the user's cut-off (a lock, a deactivation, a password set by an
    // administrator, or an earlier account with the same id) count no more; a personal access
    // token is a credential, not an issued token, and is removed by deleting it.
    if revoked || !u.is_active() || (!is_pat && claims.iat < u.tokens_valid_from) {
        return Ok(None);
    }
    if !is_pat && !issued_to_live_party(state, c, &claims, &u).await? {
        return Ok(None);
    }
    if !actor_still_acts(c, claims.act.as_ref(), claims.iat, &u).await? {
        return Ok(None);
    }
    Ok(Some(Access { claims, user: u, is_pat }))
}

/// Whether the party a token was issued to (its `client_id`) is still there: the machine user
/// itself (client_credentials tokens name it by its user name, jwt-bearer tokens by its id), or
/// an application that is active, in a project that is active. A deactivated or removed
/// application's tokens (or its project's) count no more, as Keycloak's introspection refuses
/// the tokens of a disabled client; reactivating it brings back those not yet expired. Both
/// answers come from the replica's one-second cache, so no query on the hot paths.
async fn issued_to_live_party(state: &AppState, c: &mut impl Source, claims: &AccessClaims, u: &User) -> Result<bool> {
    // Only a machine user's: a human's name or id is no client id (one named like an
    // application's client id would keep that application's tokens alive).
    if u.machine().is_some() && (claims.client_id == u.user_id || claims.client_id == u.username) {
        return Ok(true);
    }
    state.cache.app_is_live(c, &claims.client_id).await
}

/// Whether `actor_id` may impersonate users of `org_id`: an impersonator role of the instance or
/// of that organization (the owners' roles hold it too, as in ZITADEL).
pub async fn may_impersonate(c: &mut Conn, actor_id: &str, org_id: &str) -> Result<bool> {
    let (iam, org) = member::roles_of(c, actor_id, org_id).await?;
    Ok(iam.iter().any(|r| r == IAM_IMPERSONATOR || r == "IAM_OWNER")
        || org.iter().any(|r| r == ORG_IMPERSONATOR || r == "ORG_OWNER"))
}

/// Whether what an impersonation issued (`act` names the actor) still stands: the security
/// policy still allows impersonation, the actor still may impersonate users of the subject's
/// organization, the subject is still an end user (no membership anywhere: one given since
/// would carry its powers to the actor, as an exchange for an administrator would), and the
/// actor was not locked, deactivated or cut off after `issued_at`, as that ends the actor's own
/// tokens. A nested `act` (an earlier version issued them: someone being impersonated became an
/// impersonator and acted with that token) stands for nothing: its middle user would need an
/// impersonator role, and a user holding any role ends what an impersonation of him issued.
/// Anything without `act` stands.
pub async fn actor_still_acts(
    c: &mut impl Source,
    act: Option<&serde_json::Value>,
    issued_at: i64,
    subject: &User,
) -> Result<bool> {
    let Some(act) = act.filter(|a| !a.is_null()) else { return Ok(true) };
    let Some(actor_id) = act.get("sub").and_then(|s| s.as_str()) else { return Ok(false) };
    if act.get("act").is_some_and(|n| !n.is_null()) {
        return Ok(false);
    }
    let policy = setting::load::<SecurityPolicy>(c.conn().await?, setting::INSTANCE).await?.value;
    if !policy.enable_impersonation || !may_impersonate(c.conn().await?, actor_id, &subject.org_id).await? {
        return Ok(false);
    }
    if member::held(c.conn().await?, &subject.user_id).await?.any() {
        return Ok(false);
    }
    // Read fresh, not from the replica's cache: what is issued from this check (a refresh of
    // the impersonation) must not outlive a cut-off another replica just wrote.
    let actor = user::get(c.conn().await?, actor_id).await?;
    Ok(actor.is_some_and(|u| u.is_active() && issued_at >= u.tokens_valid_from))
}
