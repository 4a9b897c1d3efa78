//! `/oauth/v2/keys`: the JSON Web Key Set, rendered at each reload and served from memory.

use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use crate::app::AppState;

pub async fn handler(State(state): State<AppState>) -> Response {
    let mut r = state.keys.jwks().into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    if let Ok(v) = HeaderValue::from_str(&state.jwks_cache_control) {
        h.insert(header::CACHE_CONTROL, v);
    }
    r
}
