//! OpenID Connect endpoints: discovery and the key set.

pub mod claims;
pub mod discovery;
pub mod end_session;
pub mod keys;
pub mod userinfo;

use axum::Router;
use axum::routing::get;

use crate::app::AppState;
use crate::paths;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route(paths::DISCOVERY, get(discovery::handler))
        .route(paths::KEYS, get(keys::handler))
        .route(paths::USERINFO, get(userinfo::handler).post(userinfo::handler))
        .route(paths::END_SESSION, get(end_session::get).post(end_session::post))
}
