//! What the management (`/management/v1`), admin (`/admin/v1`) and v2 APIs share: the error
//! body, the JSON extractor, caller authentication and the common shapes of the v1 interface.

pub mod auth;
pub mod error;
pub mod json;
pub mod openapi;
pub mod routes;
pub mod types;

pub use auth::Caller;
pub use error::{ApiError, Code};
pub use json::ApiJson;

/// Middleware: after every call that may have changed something, this replica forgets the
/// configuration it cached (`crate::cache`), so the change shows at once. Not after reads (GET,
/// HEAD, the `_search` calls) nor after a client error (4xx: an unauthenticated or refused call,
/// a bad body, an unknown route), which writes nothing: else anyone could keep every cache
/// empty with a stream of anonymous POSTs, and every token request would go to the store.
pub async fn clear_cache_after_writes(
    axum::extract::State(state): axum::extract::State<crate::app::AppState>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let reads = matches!(*req.method(), axum::http::Method::GET | axum::http::Method::HEAD)
        || req.uri().path().ends_with("/_search");
    let r = next.run(req).await;
    if !reads && !r.status().is_client_error() {
        state.cache.clear();
    }
    r
}
