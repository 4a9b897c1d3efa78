//! `POST /oauth/v2/introspect` (RFC 7662): a resource server (API or OIDC application,
//! `client_secret_basic` or `private_key_jwt`) asks whether a token is active. Unlike local JWT
//! validation it sees revocation. Anything inactive, unknown or for another audience is
//! `{"active": false}`; only a failed client authentication is an error (401).

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::access::{self, Access};
use super::client_auth::{self, Method};
use super::error::{OAuthError, OAuthResult, no_store};
use super::form::Form;
use super::scope::Scopes;
use crate::app::AppState;
use crate::oidc::claims::{self, Subject};
use crate::paths;
use crate::store::Source;
use crate::store::app::App;

pub async fn handler(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    match introspect(&state, &headers, &body).await {
        Ok(v) => {
            let mut r = Json(v).into_response();
            no_store(&mut r);
            r
        }
        Err(e) => e.into_response(),
    }
}

fn unauthorized(mut e: OAuthError) -> OAuthError {
    if e.code == super::error::ErrorCode::InvalidClient {
        e.unauthorized = true;
    }
    e
}

async fn introspect(state: &AppState, headers: &HeaderMap, body: &[u8]) -> OAuthResult<Value> {
    let form = Form::parse(headers, body)?;
    let presented = client_auth::presented(headers, &form)
        .map_err(unauthorized)?
        .ok_or_else(|| unauthorized(OAuthError::invalid_client("client authentication is required")))?;
    let token = form.require("token")?;
    let now = state.clock.now();
    // Usually answered from the replica's caches without touching the store.
    let mut c = state.db.lazy();
    let issuer = &state.settings.issuer;
    let endpoint = format!("{issuer}{}", paths::INTROSPECT);
    // A client assertion names the issuer, this endpoint or, as OIDC Core 9 has every client
    // assertion name it, the token endpoint.
    let token_endpoint = format!("{issuer}{}", paths::TOKEN);
    let caller = client_auth::any_app(
        &state.cache,
        &mut c,
        &presented,
        &[Method::Basic, Method::PrivateKeyJwt],
        &[issuer, &endpoint, &token_endpoint],
        now,
    )
    .await
    .map_err(unauthorized)?;
    state.limits.client_as(&caller.client_id, presented.method)?;
    let Some(a) = access::resolve(state, &mut c, token).await? else { return Ok(json!({"active": false})) };
    let allowed = a.is_pat || a.claims.aud.iter().any(|x| *x == caller.client_id || *x == caller.project_id);
    if !allowed {
        return Ok(json!({"active": false}));
    }
    Ok(Value::Object(response(state, &mut c, &a, &caller).await?))
}

/// Every field of SPEC.md 2.4 plus the user's claims for the granted scopes.
async fn response(state: &AppState, c: &mut impl Source, a: &Access, caller: &App) -> OAuthResult<Map<String, Value>> {
    let cl = &a.claims;
    let mut m = Map::new();
    m.insert("active".into(), true.into());
    let mut aud = cl.aud.clone();
    if a.is_pat {
        // A personal access token is good for whoever the user presents it to.
        for x in [&caller.client_id, &caller.project_id] {
            if !aud.contains(x) {
                aud.push(x.clone());
            }
        }
    }
    m.insert("aud".into(), Value::from(aud));
    // A personal access token was issued to no client.
    if !cl.client_id.is_empty() {
        m.insert("client_id".into(), cl.client_id.clone().into());
    }
    if cl.exp != i64::MAX {
        m.insert("exp".into(), cl.exp.into());
    }
    m.insert("iat".into(), cl.iat.into());
    m.insert("iss".into(), cl.iss.clone().into());
    m.insert("jti".into(), cl.jti.clone().into());
    m.insert("nbf".into(), cl.nbf.into());
    m.insert("scope".into(), cl.scope.clone().into());
    m.insert("token_type".into(), "Bearer".into());
    m.insert("sub".into(), cl.sub.clone().into());
    m.insert("username".into(), a.user.login_name().into());
    if let Some(t) = cl.auth_time {
        m.insert("auth_time".into(), t.into());
    }
    if let Some(amr) = &cl.amr {
        m.insert("amr".into(), Value::from(amr.clone()));
    }
    if let Some(act) = &cl.act {
        m.insert("act".into(), act.clone());
    }
    let scopes = Scopes::parse(&cl.scope).unwrap_or_default();
    if let Some(o) = state.cache.org(c, &a.user.org_id).await? {
        let subject = Subject { user: a.user.clone(), org: o };
        claims::profile_claims(&subject, &scopes, "username", &mut m);
        claims::org_claims(&subject, &scopes, &mut m);
    }
    if let Some(p) = state.cache.project(c, &caller.project_id).await?
        && let Some(roles) = claims::role_claim(c, &a.user.user_id, &p.project_id, &scopes, p.role_assertion).await?
    {
        super::scope::insert_role_claims(&mut m, &p.project_id, roles);
    }
    Ok(m)
}
