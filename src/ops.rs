//! Operational endpoints: liveness, readiness and metrics.

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use crate::app::AppState;

pub fn routes() -> Router<AppState> {
    Router::new().route("/healthz", get(healthz)).route("/readyz", get(readyz)).route("/metrics", get(metrics))
}

/// The process is alive.
async fn healthz() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], r#"{"status":"ok"}"#)
}

/// The store answers and is migrated; a signing key is active.
async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    let store = state.db.is_ready().await;
    let keys = state.keys.active().is_some();
    let status = if store && keys { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    let body = serde_json::json!({
        "status": if status == StatusCode::OK { "ready" } else { "not ready" },
        "store": if store { "ok" } else { "unavailable" },
        "signing_key": if keys { "ok" } else { "missing" },
    });
    (status, [(header::CONTENT_TYPE, "application/json")], body.to_string())
}

async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    let (open, idle) = state.db.pool_usage();
    metrics::gauge!("db_pool_connections").set(open as f64);
    metrics::gauge!("db_pool_idle_connections").set(idle as f64);
    metrics::gauge!("latch_revocations_mirrored").set(state.revocations.len() as f64);
    let body = crate::telemetry::prometheus().map(|h| h.render()).unwrap_or_default();
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body)
}
