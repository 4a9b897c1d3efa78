//! Building the tokens of every grant: access tokens (JWT per RFC 9068, or opaque and sealed)
//! and ID tokens, with the claims SPEC.md 2.5 assigns to each.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::OAuthError;
use super::scope::Scopes;
use crate::app::AppState;
use crate::domain::settings::OidcSettings;
use crate::oidc::claims::{self, Subject};
use crate::store::Source;
use crate::store::user::User;

/// The claims of an access token; the same for JWT and opaque tokens.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AccessClaims {
    pub iss: String,
    pub sub: String,
    pub aud: Vec<String>,
    pub exp: i64,
    pub iat: i64,
    pub nbf: i64,
    pub jti: String,
    pub client_id: String,
    pub scope: String,
    /// The browser session the token came from (ended sessions end their tokens).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sid: Option<String>,
    /// The grant (code and refresh chain) the token belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_time: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amr: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub act: Option<Value>,
    /// Role and organization claims (JWT access tokens only).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// What a token is issued for.
#[derive(Debug, Clone)]
pub struct Grant {
    pub client_id: String,
    /// The client's project (its id joins the audience).
    pub project_id: String,
    pub subject: Subject,
    pub scopes: Scopes,
    pub audience: Vec<String>,
    pub auth_time: Option<i64>,
    pub amr: Vec<String>,
    pub session_id: Option<String>,
    pub grant_id: Option<String>,
    pub nonce: Option<String>,
    pub act: Option<Value>,
    /// When the subject was last checked, if from a copy of the replica's cache
    /// (`User::read_at`, raised by what the grant rests on: see [`checked_at`]); None: read for
    /// this request. The tokens are dated no later (`iat`, and a new grant's start), so that
    /// tokens issued from a copy read before a cut-off this replica has not seen yet end with
    /// the cut-off like those issued before it.
    pub checked_at: Option<i64>,
}

/// [`Grant::checked_at`] of a grant for `u`: when its copy was read, or `since` if that is
/// later: the time the grant was last known good by a fresh check (a sign-in, a refresh
/// grant's start, an earlier token's `iat`), after which the copy may be older without
/// counting against it.
pub fn checked_at(u: &User, since: Option<i64>) -> Option<i64> {
    u.read_at.map(|r| since.map_or(r, |s| r.max(s)))
}

impl Grant {
    /// The date of tokens issued now: `now`, or earlier when the subject was checked earlier.
    pub fn issued_at(&self, now: i64) -> i64 {
        self.checked_at.map_or(now, |t| t.min(now))
    }
}

/// Per-client choices that shape the tokens.
#[derive(Debug, Clone, Copy, Default)]
pub struct Shape {
    pub jwt_access_token: bool,
    pub id_token_userinfo_assertion: bool,
    pub access_token_role_assertion: bool,
    pub id_token_role_assertion: bool,
    /// The project asserts its roles always.
    pub project_role_assertion: bool,
}

/// The audience: the client, its project, and the projects named by audience scopes.
pub fn audience(client_id: &str, project_id: &str, scopes: &Scopes) -> Vec<String> {
    let mut aud = vec![client_id.to_string()];
    for p in std::iter::once(project_id.to_string()).chain(scopes.audience_projects()) {
        if !p.is_empty() && !aud.contains(&p) {
            aud.push(p);
        }
    }
    aud
}

pub async fn lifetimes(state: &AppState, c: &mut impl Source) -> Result<OidcSettings, OAuthError> {
    Ok(state.cache.oidc_settings(c).await?)
}

/// Until when a revocation written now must be kept: past every token signed so far and every
/// token the lifetimes allow from now, and past every authorization code issued so far (a code
/// redeemed after a logout is refused only while the session's entry lasts, and codes may live
/// longer than tokens). The lifetimes are read from the store, not the cache: another replica
/// may have lengthened them within the last second and be issuing tokens that live that long.
pub async fn revocation_until(c: &mut impl Source, now: i64) -> crate::store::Result<i64> {
    let settings =
        crate::store::setting::load::<OidcSettings>(c.conn().await?, crate::store::setting::INSTANCE).await?;
    // The longest code lifetime any replica may be configured with, not this one's: during a
    // rolling change another replica may issue codes that live longer.
    Ok(settings.value.revocation_until(now).max(now + crate::config::MAX_CODE_LIFETIME + 60))
}

/// Issues an access token; returns it with its claims.
pub async fn access_token(
    state: &AppState,
    c: &mut impl Source,
    g: &Grant,
    shape: Shape,
    lifetime: i64,
) -> Result<(String, AccessClaims), OAuthError> {
    let claims = access_claims(state, c, g, shape, lifetime).await?;
    Ok((seal_access(state, &claims, shape)?, claims))
}

/// The claims of an access token (the role claim may need the store).
pub async fn access_claims(
    state: &AppState,
    c: &mut impl Source,
    g: &Grant,
    shape: Shape,
    lifetime: i64,
) -> Result<AccessClaims, OAuthError> {
    let now = state.clock.now();
    let mut extra = Map::new();
    if shape.jwt_access_token {
        if let Some(roles) = claims::role_claim(
            c,
            &g.subject.user.user_id,
            &g.project_id,
            &g.scopes,
            shape.access_token_role_assertion || shape.project_role_assertion,
        )
        .await?
        {
            super::scope::insert_role_claims(&mut extra, &g.project_id, roles);
        }
        claims::org_claims(&g.subject, &g.scopes, &mut extra);
    }
    Ok(AccessClaims {
        iss: state.settings.issuer.clone(),
        sub: g.subject.user.user_id.clone(),
        aud: g.audience.clone(),
        exp: now + lifetime,
        iat: g.issued_at(now),
        nbf: g.issued_at(now),
        jti: crate::crypto::secret::random_id(),
        client_id: g.client_id.clone(),
        scope: g.scopes.join(),
        sid: g.session_id.clone(),
        gid: g.grant_id.clone(),
        auth_time: g.auth_time,
        amr: (!g.amr.is_empty()).then(|| g.amr.clone()),
        act: g.act.clone(),
        extra,
    })
}

/// Signs (JWT) or seals (opaque) an access token. On the request's own task: an RSA-2048
/// signature takes about 0.3 ms here, less than handing it to the blocking pool and back costs
/// on two cores.
pub fn seal_access(state: &AppState, claims: &AccessClaims, shape: Shape) -> Result<String, OAuthError> {
    if shape.jwt_access_token {
        return state.tokens.sign(Some("at+jwt"), claims).map_err(OAuthError::server_error);
    }
    let token = state.tokens.seal(claims).map_err(OAuthError::server_error)?;
    // No opaque token is issued that latch would not open: its size is the scope's (hundreds of
    // long role or project scopes), which the client can shorten. (A JWT's also grows with the
    // roles an administrator grants, and a resource server may verify it by itself.)
    if token.len() > super::tokens::MAX_OPAQUE_LEN {
        return Err(OAuthError::invalid_scope("the scope asks for more than an access token can carry"));
    }
    Ok(token)
}

/// Issues an ID token. Profile, e-mail and phone claims go in only when no access token comes
/// along or the client asks for them (`idTokenUserinfoAssertion`), as SPEC.md 2.5 says.
pub async fn id_token(
    state: &AppState,
    c: &mut impl Source,
    g: &Grant,
    shape: Shape,
    lifetime: i64,
    access_token: Option<&str>,
    code: Option<&str>,
) -> Result<String, OAuthError> {
    let claims = id_claims(state, c, g, shape, lifetime, access_token.is_some()).await?;
    sign_id(state, claims, access_token, code)
}

/// The claims of an ID token, but for the hashes of the access token and code that come along
/// with it ([`sign_id`] adds them); `with_access_token` decides where the profile claims go.
pub async fn id_claims(
    state: &AppState,
    c: &mut impl Source,
    g: &Grant,
    shape: Shape,
    lifetime: i64,
    with_access_token: bool,
) -> Result<Map<String, Value>, OAuthError> {
    let now = state.clock.now();
    let mut m = Map::new();
    m.insert("iss".into(), state.settings.issuer.clone().into());
    m.insert("sub".into(), g.subject.user.user_id.clone().into());
    // OIDC Core 2: the audience contains the client the ID token was issued to, whatever other
    // audience a grant (token exchange) narrowed the tokens to.
    let mut aud = g.audience.clone();
    if !g.client_id.is_empty() && !aud.contains(&g.client_id) {
        aud.insert(0, g.client_id.clone());
    }
    m.insert("aud".into(), Value::from(aud));
    m.insert("exp".into(), (now + lifetime).into());
    m.insert("iat".into(), g.issued_at(now).into());
    if let Some(t) = g.auth_time {
        m.insert("auth_time".into(), t.into());
    }
    if let Some(n) = &g.nonce {
        m.insert("nonce".into(), n.clone().into());
    }
    if !g.amr.is_empty() {
        m.insert("amr".into(), Value::from(g.amr.clone()));
    }
    m.insert("azp".into(), g.client_id.clone().into());
    m.insert("client_id".into(), g.client_id.clone().into());
    if let Some(sid) = &g.session_id {
        m.insert("sid".into(), sid.clone().into());
    }
    // The grant, as in access tokens: a token exchange that takes this ID token joins it, so
    // that revoking the grant (a reused code or refresh token) ends what the exchange issued.
    if let Some(gid) = &g.grant_id {
        m.insert("gid".into(), gid.clone().into());
    }
    if !with_access_token || shape.id_token_userinfo_assertion {
        claims::profile_claims(&g.subject, &g.scopes, "preferred_username", &mut m);
    }
    claims::org_claims(&g.subject, &g.scopes, &mut m);
    if let Some(roles) = claims::role_claim(
        c,
        &g.subject.user.user_id,
        &g.project_id,
        &g.scopes,
        shape.id_token_role_assertion || shape.project_role_assertion,
    )
    .await?
    {
        super::scope::insert_role_claims(&mut m, &g.project_id, roles);
    }
    if let Some(act) = &g.act {
        m.insert("act".into(), act.clone());
    }
    Ok(m)
}

/// Signs an ID token, with the hashes of the access token and code that come along (hashed
/// for the algorithm of the key that signs it).
pub fn sign_id(
    state: &AppState,
    claims: Map<String, Value>,
    access_token: Option<&str>,
    code: Option<&str>,
) -> Result<String, OAuthError> {
    state.tokens.sign_id_token(claims, access_token, code).map_err(OAuthError::server_error)
}
