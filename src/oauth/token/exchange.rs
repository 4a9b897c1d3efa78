//! The token-exchange grant (RFC 8693), off until the instance feature `oidcTokenExchange` is
//! on and allowed only for applications with the token-exchange grant type. A subject token
//! (access token, ID token, a JWT signed by the client, or a user id) becomes an access token
//! (opaque or JWT) or an ID token, for a subset of the subject's and actor's audiences. A
//! different actor impersonates the subject: that needs the security policy's
//! `enableImpersonation` and an impersonator role, and the result names the actor in `act`.

use axum::http::HeaderMap;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{RefreshPlan, TokenResponse, assertion_audiences, issue_tokens, revoke_grant};
use crate::app::AppState;
use crate::domain::enums::OidcGrantType;
use crate::domain::settings::{Features, SecurityPolicy};
use crate::oauth::access;
use crate::oauth::assertion;
use crate::oauth::authorize::{shape, subject};
use crate::oauth::client_auth::{self, Method};
use crate::oauth::error::{ErrorCode, OAuthError, OAuthResult};
use crate::oauth::form::Form;
use crate::oauth::issue::{self, Grant};
use crate::oauth::scope::Scopes;
use crate::store::user::User;
use crate::store::{Conn, key, member, revocation, setting, user};

pub const ACCESS_TOKEN: &str = "urn:ietf:params:oauth:token-type:access_token";
pub const REFRESH_TOKEN: &str = "urn:ietf:params:oauth:token-type:refresh_token";
pub const ID_TOKEN: &str = "urn:ietf:params:oauth:token-type:id_token";
pub const JWT: &str = "urn:ietf:params:oauth:token-type:jwt";
pub const USER_ID: &str = "urn:service:params:oauth:token-type:user_id";

const METHODS: [Method; 4] = [Method::Basic, Method::Post, Method::None, Method::PrivateKeyJwt];

/// A party of the exchange: its user, audience, scopes, and the `act` it already carries.
struct Party {
    user: User,
    audience: Vec<String>,
    scopes: Scopes,
    /// An ID token stands for an OpenID sign-in: `openid` may be asked for with it (and no
    /// other scope; by default it brings none).
    id_token: bool,
    act: Option<Value>,
    auth_time: Option<i64>,
    amr: Vec<String>,
    /// The browser session and the grant the token belongs to: what the exchange issues belongs
    /// to the session too, so that a logout reaches it, and to the grant when the same client
    /// asks, so that a revoked grant (a reused code or refresh token) does.
    session_id: Option<String>,
    grant_id: Option<String>,
    /// The client the token was issued to (`client_id`; an ID token's `azp`).
    client_id: Option<String>,
    /// The token's `iat`.
    iat: i64,
}

#[derive(Deserialize)]
struct IdClaims {
    iss: String,
    sub: String,
    exp: i64,
    #[serde(default)]
    iat: i64,
    #[serde(default)]
    sid: Option<String>,
    #[serde(default)]
    gid: Option<String>,
    #[serde(default)]
    azp: Option<String>,
    #[serde(default)]
    aud: Value,
    #[serde(default)]
    act: Option<Value>,
    #[serde(default)]
    auth_time: Option<i64>,
    #[serde(default)]
    amr: Vec<String>,
}

fn audience_of(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect(),
        _ => Vec::new(),
    }
}

async fn active_user(c: &mut Conn, id: &str) -> OAuthResult<User> {
    user::get(c, id)
        .await?
        .filter(|u| u.is_active())
        .ok_or_else(|| OAuthError::invalid_grant("the token's user is not active"))
}

/// Reads an access token or an ID token (the types both subject and actor may use), which must
/// have been issued for the requesting client (as Keycloak's standard token exchange asks): an
/// access token's audience names the client or the client's project (the API it may call), an
/// ID token was issued to the client itself (`azp`; every ID token of a project also names the
/// project, so the project would let the project's other clients in). An ID token travels in
/// URLs (`id_token_hint`) and is no credential, and a token meant for one client is not
/// another's to trade in: without this, any client with the grant type could turn a user's ID
/// token for application A into an access token that A's API takes.
async fn token_party(
    state: &AppState,
    c: &mut Conn,
    token: &str,
    kind: &str,
    role: &str,
    client: [&str; 2],
) -> OAuthResult<Party> {
    let party = read_token(state, c, token, kind, role).await?;
    let issued_here = if party.id_token {
        party.client_id.as_deref() == Some(client[0])
    } else {
        party.audience.iter().any(|a| client.contains(&a.as_str()))
    };
    if !issued_here {
        return Err(OAuthError::invalid_grant(format!("the {role} token was not issued to this client")));
    }
    Ok(party)
}

async fn read_token(state: &AppState, c: &mut Conn, token: &str, kind: &str, role: &str) -> OAuthResult<Party> {
    match kind {
        ACCESS_TOKEN => {
            let a = access::resolve(state, c, token)
                .await?
                .ok_or_else(|| OAuthError::invalid_grant(format!("the {role} token is not active")))?;
            Ok(Party {
                audience: a.claims.aud.clone(),
                scopes: Scopes::parse(&a.claims.scope).unwrap_or_default(),
                id_token: false,
                act: a.claims.act.clone(),
                auth_time: a.claims.auth_time,
                amr: a.claims.amr.clone().unwrap_or_default(),
                session_id: a.claims.sid.clone(),
                grant_id: a.claims.gid.clone(),
                client_id: Some(a.claims.client_id.clone()),
                iat: a.claims.iat,
                user: a.user,
            })
        }
        ID_TOKEN => {
            let verified = match state.tokens.verify_id_token::<IdClaims>(token) {
                None if state.tokens.learn_signer(token).await => state.tokens.verify_id_token(token),
                verified => verified,
            };
            let claims = verified
                .filter(|c| c.iss == state.settings.issuer)
                .ok_or_else(|| OAuthError::invalid_grant(format!("the {role} token is not an ID token of latch")))?;
            if claims.exp <= state.clock.now() {
                return Err(OAuthError::invalid_grant(format!("the {role} token has expired")));
            }
            // An ID token of a session that has ended (logout) or of a grant that was revoked (a
            // reused code or refresh token) counts no more, as their access tokens do not.
            let mut keys: Vec<String> = claims.sid.iter().map(|sid| revocation::session_key(sid)).collect();
            keys.extend(claims.gid.iter().map(|gid| revocation::grant_key(gid)));
            let user = match user::get_checking_revocation(c, &claims.sub, &keys).await? {
                Some((u, false))
                    if u.is_active()
                        && claims.iat >= u.tokens_valid_from
                        && access::actor_still_acts(c, claims.act.as_ref(), claims.iat, &u).await? =>
                {
                    u
                }
                Some((u, revoked)) if revoked || claims.iat < u.tokens_valid_from => {
                    return Err(OAuthError::invalid_grant(format!("the {role} token's session or grant has ended")));
                }
                _ => return Err(OAuthError::invalid_grant("the token's user or one of its actors is not active")),
            };
            Ok(Party {
                user,
                audience: audience_of(&claims.aud),
                scopes: Scopes::default(),
                id_token: true,
                act: claims.act,
                auth_time: claims.auth_time,
                amr: claims.amr,
                session_id: claims.sid,
                grant_id: claims.gid,
                client_id: claims.azp,
                iat: claims.iat,
            })
        }
        REFRESH_TOKEN => Err(OAuthError::invalid_request(format!("a refresh token cannot be the {role} token"))),
        other => Err(OAuthError::invalid_request(format!("the {role}_token_type '{other}' is not supported here"))),
    }
}

/// The token exchange grant. RFC 8693 2.2.2: a subject or actor token that is invalid for any
/// reason, or unacceptable by policy (an impersonation the security policy or the actor's roles
/// do not allow, an administrator as subject, a user the client's project turns away), is
/// answered `invalid_request`, as ZITADEL answers it. The checks below refuse with
/// `invalid_grant` and `access_denied`, the codes the other grants give for their own grants;
/// here they become `invalid_request`, with their descriptions.
pub async fn grant(state: &AppState, headers: &HeaderMap, form: &Form) -> OAuthResult<TokenResponse> {
    exchange(state, headers, form).await.map_err(|mut e| {
        if matches!(e.code, ErrorCode::InvalidGrant | ErrorCode::AccessDenied) {
            e.code = ErrorCode::InvalidRequest;
        }
        e
    })
}

async fn exchange(state: &AppState, headers: &HeaderMap, form: &Form) -> OAuthResult<TokenResponse> {
    let now = state.clock.now();
    let mut c = state.db.conn().await?;
    let features = setting::load::<Features>(&mut c, setting::INSTANCE).await?.value;
    if features.oidc_token_exchange != Some(true) {
        return Err(OAuthError::new(ErrorCode::UnsupportedGrantType, "token exchange is not enabled on this instance"));
    }
    let presented = client_auth::presented(headers, form)?
        .ok_or_else(|| OAuthError::invalid_client("client authentication is required"))?;
    let auds = assertion_audiences(state);
    let client =
        client_auth::oidc_client(&state.cache, &mut c, &presented, &METHODS, &[&auds[0], &auds[1]], now).await?;
    state.limits.client_as(&client.app.client_id, presented.method)?;
    if !client.config.grant_types.contains(&OidcGrantType::TokenExchange) {
        return Err(OAuthError::unauthorized_client("the client may not use token exchange"));
    }
    if form.get("resource")?.is_some() {
        return Err(OAuthError::new(ErrorCode::InvalidTarget, "the resource parameter is not supported; use audience"));
    }
    let subject_token = form.require("subject_token")?;
    let subject_type = form.require("subject_token_type")?;
    let actor_token = form.get("actor_token")?;
    let actor_type = form.get("actor_token_type")?;
    if actor_token.is_some() != actor_type.is_some() {
        return Err(OAuthError::invalid_request("actor_token and actor_token_type go together"));
    }
    let requested_type = form.get("requested_token_type")?.unwrap_or(ACCESS_TOKEN);
    if !matches!(requested_type, ACCESS_TOKEN | JWT | ID_TOKEN) {
        return Err(OAuthError::invalid_request(format!(
            "the requested_token_type '{requested_type}' is not supported"
        )));
    }
    let this_client = [client.app.client_id.as_str(), client.project.project_id.as_str()];
    let actor = match (actor_token, actor_type) {
        (Some(t), Some(kind)) if kind == ACCESS_TOKEN || kind == ID_TOKEN => {
            Some(token_party(state, &mut c, t, kind, "actor", this_client).await?)
        }
        (Some(_), Some(kind)) => {
            return Err(OAuthError::invalid_request(format!("the actor_token_type '{kind}' is not supported")));
        }
        _ => None,
    };
    let subject = match subject_type {
        USER_ID | JWT => {
            let Some(actor) = &actor else {
                return Err(OAuthError::invalid_request("this subject_token_type needs an actor_token"));
            };
            let user_id = if subject_type == USER_ID {
                subject_token.to_string()
            } else {
                let keys = key::keys_of_client(&mut c, &client.app.client_id).await?;
                assertion::verify(subject_token, &keys, &[&auds[0], &auds[1]], now)
                    .map_err(OAuthError::invalid_grant)?
                    .sub
            };
            let user = active_user(&mut c, &user_id).await?;
            Party {
                user,
                audience: actor.audience.clone(),
                scopes: actor.scopes.clone(),
                id_token: actor.id_token,
                act: None,
                auth_time: actor.auth_time,
                amr: actor.amr.clone(),
                session_id: actor.session_id.clone(),
                grant_id: actor.grant_id.clone(),
                client_id: actor.client_id.clone(),
                // Read fresh: named now.
                iat: now,
            }
        }
        kind => token_party(state, &mut c, subject_token, kind, "subject", this_client).await?,
    };
    // Impersonation: an actor acting as someone else.
    let act = match &actor {
        Some(a) if a.user.user_id != subject.user.user_id => {
            let policy = setting::load::<SecurityPolicy>(&mut c, setting::INSTANCE).await?.value;
            if !policy.enable_impersonation {
                return Err(OAuthError::new(
                    ErrorCode::AccessDenied,
                    "impersonation is disabled by the security policy",
                ));
            }
            if !access::may_impersonate(&mut c, &a.user.user_id, &subject.user.org_id).await? {
                return Err(OAuthError::new(ErrorCode::AccessDenied, "the actor may not impersonate this user"));
            }
            // End users only: an administrator's token would carry its powers to the actor. Any
            // membership counts, in any organization or project: the management API takes the
            // organization from a header, and members need not belong to it.
            if member::held(&mut c, &subject.user.user_id).await?.any() {
                return Err(OAuthError::new(ErrorCode::AccessDenied, "administrators cannot be impersonated"));
            }
            // Impersonations do not nest (see access::actor_still_acts): an actor acting under an
            // impersonation of himself is refused rather than given a token no use would take.
            if a.act.as_ref().is_some_and(|p| !p.is_null()) {
                return Err(OAuthError::new(ErrorCode::AccessDenied, "impersonations do not nest"));
            }
            Some(json!({"iss": state.settings.issuer, "sub": a.user.user_id}))
        }
        // No new impersonation: the result keeps the `act` either token carries (an actor token
        // that is itself an impersonation's token names its actor; dropping it would free the
        // result from that actor's end).
        _ => subject.act.clone().or_else(|| actor.as_ref().and_then(|a| a.act.clone())),
    };
    // Audience: a subset of the subject's and actor's; by default the subject's.
    let mut allowed_aud = subject.audience.clone();
    if let Some(a) = &actor {
        allowed_aud.extend(a.audience.iter().cloned());
    }
    let requested_aud = form.all("audience");
    let audience: Vec<String> = if requested_aud.is_empty() {
        if subject.audience.is_empty() { allowed_aud.clone() } else { subject.audience.clone() }
    } else {
        if let Some(bad) = requested_aud.iter().find(|a| !allowed_aud.iter().any(|x| x == **a)) {
            return Err(OAuthError::new(
                ErrorCode::InvalidTarget,
                format!("the audience '{bad}' is not one of the tokens' audiences"),
            ));
        }
        requested_aud.iter().map(|s| s.to_string()).collect()
    };
    // Scope: a subset of what the subject (and actor) hold.
    let mut allowed_scopes = subject.scopes.clone();
    if let Some(a) = &actor {
        for s in &a.scopes.0 {
            if !allowed_scopes.has(s) {
                allowed_scopes.0.push(s.clone());
            }
        }
    }
    let default_scopes = allowed_scopes.clone();
    if (subject.id_token || actor.as_ref().is_some_and(|a| a.id_token)) && !allowed_scopes.has("openid") {
        allowed_scopes.0.push("openid".into());
    }
    let scopes = match form.get("scope")? {
        Some(raw) => {
            let s = Scopes::parse(raw).ok_or_else(|| OAuthError::invalid_scope("the scope is malformed"))?.known();
            if !s.subset_of(&allowed_scopes) {
                return Err(OAuthError::invalid_scope("the scope exceeds the tokens' scopes"));
            }
            s
        }
        None => default_scopes,
    };
    // The session and grant of the one acting: the actor's when there is one (an impersonation
    // ends with the actor's session), else the subject token's.
    // The grant only when this client holds it: another client's refresh token under it would
    // let that client revoke the first one's chain (revocation and reuse detection end a grant).
    let from = actor.as_ref().unwrap_or(&subject);
    let session_id = from.session_id.clone();
    // The authentication the result tells of is the impersonator's: the actor's for a new
    // impersonation, the subject token's when the result keeps the subject's `act` (that
    // token already tells its actor's), else the actor's or the subject's (one user). Never a
    // sign-in the impersonator did not make (a second factor it never gave).
    let auth_from = match &actor {
        Some(a) if a.user.user_id != subject.user.user_id => a,
        Some(_) if subject.act.is_some() => &subject,
        Some(a) => a,
        None => &subject,
    };
    let (auth_time, amr) = (auth_from.auth_time, auth_from.amr.clone());
    let grant_id = from.grant_id.clone().filter(|_| from.client_id.as_deref() == Some(client.app.client_id.as_str()));
    let grant_id_kept = grant_id.clone();
    // Each token was good when issued (its `iat`); a party read from the cache since counts
    // from then.
    let checked_at = [Some(&subject), actor.as_ref()]
        .into_iter()
        .flatten()
        .filter_map(|p| issue::checked_at(&p.user, Some(p.iat)))
        .min();
    let subj = subject_of(state, &mut c, subject.user).await?;
    // The client's project turns away whom a sign-in to it would turn away.
    if let Some(e) = crate::oauth::authorize::refusal(&mut c, &client, &subj).await? {
        return Err(OAuthError::invalid_grant(e.description));
    }
    // Organization scopes only of the subject's organization (an actor's would stay otherwise),
    // and audiences only as a sign-in to this client would give them.
    let scopes = crate::oidc::claims::filter_org_scopes(&subj, &scopes);
    let asker = || crate::oauth::audience::Asker { org_id: &client.project.org_id, is_subject: false };
    let scopes = crate::oauth::audience::allowed(state, &mut c, asker(), &subj, scopes).await?;
    // A refresh token only for a client allowed the refresh_token grant (its `offline_access`
    // is dropped, as the code exchange drops it), and none with an ID token as the result.
    let may_refresh = client.config.grant_types.contains(&OidcGrantType::RefreshToken) && requested_type != ID_TOKEN;
    // A refresh token's absolute expiry: under a grant the client already holds, that grant's
    // (as rotation keeps it), and in any case no later than the refresh token lifetime after the
    // sign-in the tokens rest on (a grant whose rows were swept after their expiry, or one that
    // had none, is not started anew by exchanging its access tokens). Past it, none is issued.
    let expires_at = if may_refresh && scopes.has("offline_access") {
        let held = match &grant_id_kept {
            Some(gid) => crate::store::refresh::grant_expires_at(&mut c, gid).await?,
            None => None,
        };
        let life = issue::lifetimes(state, &mut c).await?.refresh_token_expiration;
        [held, auth_time.map(|t| t.saturating_add(life))].into_iter().flatten().min()
    } else {
        None
    };
    let may_refresh = may_refresh && expires_at.is_none_or(|e| e > now);
    let scopes = if may_refresh { scopes } else { scopes.without("offline_access") };
    let audience = crate::oauth::audience::allowed_ids(state, &mut c, asker(), &subj, audience).await?;
    let g = Grant {
        client_id: client.app.client_id.clone(),
        project_id: client.project.project_id.clone(),
        audience: if audience.is_empty() {
            issue::audience(&client.app.client_id, &client.project.project_id, &scopes)
        } else {
            audience
        },
        subject: subj,
        scopes: scopes.clone(),
        auth_time,
        amr,
        session_id,
        grant_id: Some(grant_id.unwrap_or_else(crate::crypto::secret::random_id)),
        nonce: None,
        act,
        checked_at,
    };
    // The client now holds tokens of the session: it hears of the session's end as a client
    // signed in through it does (Back-Channel Logout 1.0, 2.3: the OP keeps track of the
    // relying parties of a session).
    if !client.config.back_channel_logout_uri.is_empty()
        && let Some(sid) = &g.session_id
        && let Some(s) = crate::store::session::get(&mut c, sid).await?
    {
        crate::oidc::backchannel::note(&mut c, &client, &s).await?;
    }
    let mut sh = shape(&client);
    sh.jwt_access_token = requested_type == JWT;
    if requested_type == ID_TOKEN {
        let life = issue::lifetimes(state, &mut c).await?;
        let id = issue::id_token(state, &mut c, &g, sh, life.id_token_lifetime, None, None).await?;
        return Ok(TokenResponse {
            access_token: id,
            token_type: "N_A",
            expires_in: life.id_token_lifetime,
            scope: scopes.join(),
            id_token: None,
            refresh_token: None,
            issued_token_type: Some(ID_TOKEN),
        });
    }
    let refresh = scopes.has("offline_access").then(|| RefreshPlan {
        grant_id: g.grant_id.clone().unwrap_or_default(),
        original_scopes: scopes.0.clone(),
        expires_at,
        stored: None,
        audience: Some(g.audience.clone()),
        jwt_access_token: Some(sh.jwt_access_token),
    });
    let mut r = issue_tokens(state, c, &g, sh, refresh).await?;
    // A logout or a revocation of the grant between the reading of the subject token and the
    // storing of the refresh token would not find that token (both revoke the stored refresh
    // tokens they find), and it would outlive their revocation entries; so, as the code exchange
    // does, the session and the grant are looked at again in the store once the token is
    // stored (the replica's mirror may not hold another replica's entry of the last poll yet),
    // and the grant revoked if either ended.
    if r.refresh_token.is_some()
        && let Some(gid) = &g.grant_id
    {
        let mut c = state.db.conn().await?;
        let mut ended = vec![revocation::grant_key(gid)];
        ended.extend(g.session_id.iter().map(|sid| revocation::session_key(sid)));
        let ended = match state.revocations.check(&ended) {
            Some(true) => true,
            _ => revocation::any_revoked(&mut c, &ended).await?,
        };
        if ended {
            revoke_grant(state, &mut c, gid).await?;
            return Err(OAuthError::invalid_grant("the session or grant of the token has ended"));
        }
    }
    r.issued_token_type = Some(if requested_type == JWT { JWT } else { ACCESS_TOKEN });
    Ok(r)
}

async fn subject_of(state: &AppState, c: &mut Conn, u: User) -> OAuthResult<crate::oidc::claims::Subject> {
    subject(state, c, u).await?.ok_or_else(|| OAuthError::invalid_grant("the user has no organization"))
}
