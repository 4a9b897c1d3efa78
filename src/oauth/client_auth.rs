//! Client authentication at the token, introspection and revocation endpoints:
//! `client_secret_basic`, `client_secret_post`, `none` and `private_key_jwt` (SPEC.md 2.1).
//! Secrets are compared by SHA-256 digest in constant time; an application may use only the
//! method it is registered with; two methods in one request is `invalid_request`.

use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use super::assertion;
use super::client::{self, OidcClient};
use super::error::{OAuthError, OAuthResult};
use super::form::Form;
use crate::cache::ConfigCache;
use crate::crypto::secret;
use crate::domain::enums::{ApiAuthMethod, AppState, OidcAuthMethod, ProjectState};
use crate::store::app::{App, AppKind};
use crate::store::{Source, key};

pub const ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Basic,
    Post,
    None,
    PrivateKeyJwt,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Basic => "client_secret_basic",
            Method::Post => "client_secret_post",
            Method::None => "none",
            Method::PrivateKeyJwt => "private_key_jwt",
        }
    }
}

/// What the client presented.
#[derive(Debug, Clone)]
pub struct Presented {
    pub client_id: String,
    pub method: Method,
    secret: Option<String>,
    assertion: Option<String>,
}

impl Presented {
    /// The secret of `client_secret_basic` / `client_secret_post`.
    pub fn secret(&self) -> Option<&str> {
        self.secret.as_deref()
    }

    /// The error for a failed authentication (401 with `WWW-Authenticate: Basic` when the
    /// Basic scheme was used).
    pub fn fail(&self, d: impl Into<String>) -> OAuthError {
        let mut e = OAuthError::invalid_client(d);
        e.basic_auth = self.method == Method::Basic;
        e
    }
}

fn basic(headers: &HeaderMap) -> OAuthResult<Option<(String, String)>> {
    let Some(v) = headers.get(AUTHORIZATION) else { return Ok(None) };
    let v = v.to_str().map_err(|_| OAuthError::invalid_request("the Authorization header is malformed"))?;
    let Some((scheme, rest)) = v.split_once(' ') else { return Ok(None) };
    if !scheme.eq_ignore_ascii_case("basic") {
        return Ok(None);
    }
    let bad = || {
        let mut e = OAuthError::invalid_client("the Basic credentials are malformed");
        e.basic_auth = true;
        e
    };
    let raw = STANDARD.decode(rest.trim()).map_err(|_| bad())?;
    let raw = String::from_utf8(raw).map_err(|_| bad())?;
    let (id, pw) = raw.split_once(':').ok_or_else(bad)?;
    // RFC 6749 2.3.1: both parts are form-urlencoded.
    let dec = |s: &str| form_urlencoded::parse(format!("x={s}").as_bytes()).next().map(|(_, v)| v.into_owned());
    Ok(Some((dec(id).ok_or_else(bad)?, dec(pw).ok_or_else(bad)?)))
}

/// Reads the client credentials of a request (none at all is `Ok(None)`).
pub fn presented(headers: &HeaderMap, form: &Form) -> OAuthResult<Option<Presented>> {
    let basic = basic(headers)?;
    let form_id = form.get("client_id")?;
    let form_secret = form.get("client_secret")?;
    let assertion = form.get("client_assertion")?;
    let assertion_type = form.get("client_assertion_type")?;
    let used = [basic.is_some(), form_secret.is_some(), assertion.is_some()].iter().filter(|b| **b).count();
    if used > 1 {
        return Err(OAuthError::invalid_request("more than one client authentication method was used"));
    }
    if let Some((id, pw)) = basic {
        if form_id.is_some_and(|f| f != id) {
            return Err(OAuthError::invalid_request("client_id differs from the Basic credentials"));
        }
        return Ok(Some(Presented { client_id: id, method: Method::Basic, secret: Some(pw), assertion: None }));
    }
    if let Some(pw) = form_secret {
        let id = form_id.ok_or_else(|| OAuthError::invalid_request("client_secret without client_id"))?;
        return Ok(Some(Presented {
            client_id: id.to_string(),
            method: Method::Post,
            secret: Some(pw.to_string()),
            assertion: None,
        }));
    }
    if let Some(a) = assertion {
        if assertion_type != Some(ASSERTION_TYPE) {
            return Err(OAuthError::invalid_request(format!("client_assertion_type must be {ASSERTION_TYPE}")));
        }
        let iss =
            assertion::peek_issuer(a).ok_or_else(|| OAuthError::invalid_client("the client assertion is malformed"))?;
        if form_id.is_some_and(|f| f != iss) {
            return Err(OAuthError::invalid_request("client_id differs from the assertion's issuer"));
        }
        return Ok(Some(Presented {
            client_id: iss,
            method: Method::PrivateKeyJwt,
            secret: None,
            assertion: Some(a.to_string()),
        }));
    }
    if assertion_type.is_some() {
        return Err(OAuthError::invalid_request("client_assertion_type without client_assertion"));
    }
    Ok(form_id.map(|id| Presented { client_id: id.to_string(), method: Method::None, secret: None, assertion: None }))
}

/// Checks the secret or the assertion of `p` for an application with this registered method.
async fn check_credentials(
    cache: &ConfigCache,
    c: &mut impl Source,
    p: &Presented,
    a: &App,
    audiences: &[&str],
    now: i64,
) -> OAuthResult<()> {
    match p.method {
        Method::Basic | Method::Post => {
            let ok = match (&a.secret_digest, &p.secret) {
                (Some(d), Some(s)) => secret::matches(d, s),
                _ => false,
            };
            if !ok {
                return Err(p.fail("client authentication failed"));
            }
        }
        Method::PrivateKeyJwt => {
            let keys = cache.client_keys(c, &a.client_id).await?;
            let token = p.assertion.as_deref().unwrap_or_default();
            let claims = assertion::verify(token, &keys, audiences, now).map_err(|e| p.fail(e))?;
            let jti = claims.jti.as_deref().ok_or_else(|| p.fail("the client assertion has no jti"))?;
            if !key::remember_jti(c.conn().await?, &format!("client:{}:{jti}", a.client_id), claims.replay_window_end())
                .await?
            {
                return Err(p.fail("the client assertion was used before"));
            }
        }
        Method::None => {}
    }
    Ok(())
}

/// Authenticates an OIDC application with one of the `allowed` methods.
pub async fn oidc_client(
    cache: &ConfigCache,
    c: &mut impl Source,
    p: &Presented,
    allowed: &[Method],
    audiences: &[&str],
    now: i64,
) -> OAuthResult<OidcClient> {
    if !allowed.contains(&p.method) {
        return Err(p.fail(format!("{} is not accepted here", p.method.as_str())));
    }
    let client = client::load(cache, c, &p.client_id).await?.ok_or_else(|| p.fail("client authentication failed"))?;
    let registered = match client.auth_method {
        OidcAuthMethod::Basic => Method::Basic,
        OidcAuthMethod::Post => Method::Post,
        OidcAuthMethod::None => Method::None,
        OidcAuthMethod::PrivateKeyJwt => Method::PrivateKeyJwt,
    };
    if registered != p.method {
        return Err(p.fail(format!("the client is registered for {}", registered.as_str())));
    }
    check_credentials(cache, c, p, &client.app, audiences, now).await?;
    Ok(client)
}

/// Authenticates an OIDC or API application (introspection, revocation).
pub async fn any_app(
    cache: &ConfigCache,
    c: &mut impl Source,
    p: &Presented,
    allowed: &[Method],
    audiences: &[&str],
    now: i64,
) -> OAuthResult<App> {
    if !allowed.contains(&p.method) {
        return Err(p.fail(format!("{} is not accepted here", p.method.as_str())));
    }
    let a = cache.app(c, &p.client_id).await?.filter(|a| a.state == AppState::Active);
    let a = a.ok_or_else(|| p.fail("client authentication failed"))?;
    // An application of an inactive project authenticates no more than an inactive one.
    if !cache.project(c, &a.project_id).await?.is_some_and(|p| p.state == ProjectState::Active) {
        return Err(p.fail("client authentication failed"));
    }
    let registered = match &a.kind {
        AppKind::Oidc { auth_method, .. } => match auth_method {
            OidcAuthMethod::Basic => Method::Basic,
            OidcAuthMethod::Post => Method::Post,
            OidcAuthMethod::None => Method::None,
            OidcAuthMethod::PrivateKeyJwt => Method::PrivateKeyJwt,
        },
        AppKind::Api { auth_method: ApiAuthMethod::Basic } => Method::Basic,
        AppKind::Api { auth_method: ApiAuthMethod::PrivateKeyJwt } => Method::PrivateKeyJwt,
    };
    if registered != p.method {
        return Err(p.fail(format!("the client is registered for {}", registered.as_str())));
    }
    check_credentials(cache, c, p, &a, audiences, now).await?;
    Ok(a)
}
