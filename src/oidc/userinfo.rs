//! `GET`/`POST /oidc/v1/userinfo`: the user's claims for the scopes of the access token
//! (`Authorization: Bearer`, or `access_token` in a POST form body as OIDC Core 5.3.1 allows).

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::claims::{self, Subject};
use crate::app::AppState;
use crate::oauth::access;
use crate::oauth::error::no_store;
use crate::oauth::scope::Scopes;

fn challenge(status: StatusCode, value: &'static str, error: Option<(&str, &str)>) -> Response {
    let body = match error {
        Some((e, d)) => json!({"error": e, "error_description": d}),
        None => json!({"error": "invalid_request", "error_description": "a bearer access token is required"}),
    };
    let mut r = (status, Json(body)).into_response();
    r.headers_mut().insert(WWW_AUTHENTICATE, HeaderValue::from_static(value));
    no_store(&mut r);
    r
}

fn invalid_token() -> Response {
    challenge(
        StatusCode::UNAUTHORIZED,
        "Bearer error=\"invalid_token\", error_description=\"the access token is invalid or expired\"",
        Some(("invalid_token", "the access token is invalid or expired")),
    )
}

/// The token of the request: the Authorization header or (POST) the form body, never both.
fn presented(method: &Method, headers: &HeaderMap, body: &[u8]) -> Result<Option<String>, Response> {
    let header = match headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok()) {
        Some(v) => match v.split_once(' ') {
            Some((s, t)) if s.eq_ignore_ascii_case("bearer") && !t.trim().is_empty() => Some(t.trim().to_string()),
            _ => return Err(invalid_token()),
        },
        None => None,
    };
    let form_token = if *method == Method::POST
        && headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|c| c.starts_with("application/x-www-form-urlencoded"))
    {
        form_urlencoded::parse(body).find(|(k, _)| k == "access_token").map(|(_, v)| v.into_owned())
    } else {
        None
    };
    match (header, form_token) {
        (Some(_), Some(_)) => Err(challenge(
            StatusCode::BAD_REQUEST,
            "Bearer error=\"invalid_request\"",
            Some(("invalid_request", "the token was sent more than once")),
        )),
        (h, f) => Ok(h.or(f)),
    }
}

pub async fn handler(State(state): State<AppState>, method: Method, headers: HeaderMap, body: Bytes) -> Response {
    let token = match presented(&method, &headers, &body) {
        Ok(Some(t)) => t,
        Ok(None) => return challenge(StatusCode::UNAUTHORIZED, "Bearer", None),
        Err(r) => return r,
    };
    // Usually answered from the replica's caches without touching the store.
    let mut c = state.db.lazy();
    let a = match access::resolve(&state, &mut c, &token).await {
        Ok(Some(a)) => a,
        Ok(None) => return invalid_token(),
        Err(e) => return crate::oauth::error::OAuthError::from(e).into_response(),
    };
    let scopes = Scopes::parse(&a.claims.scope).unwrap_or_default();
    if !scopes.has("openid") {
        return challenge(
            StatusCode::FORBIDDEN,
            "Bearer error=\"insufficient_scope\", scope=\"openid\"",
            Some(("insufficient_scope", "the access token lacks the openid scope")),
        );
    }
    let result = async {
        let mut m = Map::new();
        m.insert("sub".into(), a.user.user_id.clone().into());
        if let Some(o) = state.cache.org(&mut c, &a.user.org_id).await? {
            let subject = Subject { user: a.user.clone(), org: o };
            claims::profile_claims(&subject, &scopes, "preferred_username", &mut m);
            claims::org_claims(&subject, &scopes, &mut m);
        }
        // Role claims for the project of the client the token was issued to.
        if let Some(client) = state.cache.app(&mut c, &a.claims.client_id).await?
            && let Some(p) = state.cache.project(&mut c, &client.project_id).await?
            && let Some(roles) =
                claims::role_claim(&mut c, &a.user.user_id, &p.project_id, &scopes, p.role_assertion).await?
        {
            crate::oauth::scope::insert_role_claims(&mut m, &p.project_id, roles);
        }
        Ok::<_, crate::store::StoreError>(Value::Object(m))
    }
    .await;
    match result {
        Ok(v) => {
            let mut r = Json(v).into_response();
            no_store(&mut r);
            r
        }
        Err(e) => crate::oauth::error::OAuthError::from(e).into_response(),
    }
}
