//! v2 resources: signing keys (`/v2/web_keys`) and instance features (`/v2/features/instance`).

pub mod features;
pub mod web_keys;

use axum::Router;
use axum::routing::{delete, get, post};

use crate::app::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v2/web_keys", get(web_keys::list).post(web_keys::create))
        .route("/v2/web_keys/{id}/_activate", post(web_keys::activate))
        .route("/v2/web_keys/{id}", delete(web_keys::remove))
        .route("/v2/features/instance", get(features::get).put(features::set).delete(features::reset))
}
