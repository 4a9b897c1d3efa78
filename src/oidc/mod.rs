//! OpenID Connect endpoints: discovery and the key set.

pub mod backchannel;
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
    let public = Router::new()
        .route(paths::DISCOVERY, get(discovery::handler))
        .route(paths::KEYS, get(keys::handler))
        .layer(crate::cors::public());
    let userinfo = Router::new()
        .route(paths::USERINFO, get(userinfo::handler).post(userinfo::handler))
        .layer(crate::cors::endpoints());
    // End session is a navigation: no CORS.
    Router::new().route(paths::END_SESSION, get(end_session::get).post(end_session::post)).merge(public).merge(userinfo)
}
