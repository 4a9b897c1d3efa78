//! OAuth 2.0 endpoints: authorization, token, introspection, revocation.

pub mod access;
pub mod assertion;
pub mod audience;
pub mod authorize;
pub mod client;
pub mod client_auth;
pub mod error;
pub mod form;
pub mod introspect;
pub mod issue;
pub mod revoke;
pub mod scope;
pub mod token;
pub mod tokens;

use axum::Router;
use axum::routing::{get, post};

use crate::app::AppState;
use crate::paths;

pub fn routes() -> Router<AppState> {
    Router::new().route(paths::AUTHORIZE, get(authorize::get).post(authorize::post)).merge(cors_routes())
}

/// The endpoints a single-page app calls with `fetch` (see [`crate::cors`]).
fn cors_routes() -> Router<AppState> {
    Router::new()
        .route(paths::TOKEN, post(token::handler))
        .route(paths::INTROSPECT, post(introspect::handler))
        .route(paths::REVOKE, post(revoke::handler))
        .layer(crate::cors::endpoints())
}
