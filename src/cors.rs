//! CORS for browser-based applications (single-page apps using the code flow with PKCE).
//!
//! Two policies, both without credentials (no endpoint that has CORS reads a cookie):
//! - [`public`]: discovery and the key set are public documents: `Access-Control-Allow-Origin: *`.
//! - [`endpoints`]: token, introspection, revocation and userinfo reflect the request's `Origin`
//!   (with `Vary: Origin`), as ZITADEL does. They authenticate the client or the bearer token on
//!   every call, so the origin grants nothing; checking it against the registered origins of a
//!   client is not possible at the preflight, which names no client.
//!
//! The authorization endpoint, the login pages and end session get neither: they are
//! navigations, and must not be readable by other origins (RFC 9700 2.6).

use std::time::Duration;

use axum::http::{HeaderName, Method, header};
use tower_http::cors::{AllowOrigin, CorsLayer};

/// How long a browser may cache a preflight answer.
const PREFLIGHT_MAX_AGE: Duration = Duration::from_secs(600);

/// Discovery and the key set: any origin may read them.
pub fn public() -> CorsLayer {
    CorsLayer::new().allow_origin(tower_http::cors::Any).allow_methods([Method::GET]).max_age(PREFLIGHT_MAX_AGE)
}

/// Token, introspection, revocation and userinfo: the request's origin is reflected.
pub fn endpoints() -> CorsLayer {
    CorsLayer::new()
        .allow_origin(AllowOrigin::mirror_request())
        .allow_methods([Method::GET, Method::POST])
        .allow_headers([header::AUTHORIZATION, header::CONTENT_TYPE, header::ACCEPT])
        .expose_headers([header::WWW_AUTHENTICATE, HeaderName::from_static(crate::app::REQUEST_ID)])
        .max_age(PREFLIGHT_MAX_AGE)
}
