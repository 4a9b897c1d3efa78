//! The HTTP ceiling for bench/run: a minimal axum server (the axum, hyper and tokio versions
//! latch uses, tokio's multi-threaded runtime with one worker per core) that answers GET / with
//! "hello". bench/run drives it with the same wrk settings as latch.
//!
//!   hello [ADDR]        (default 127.0.0.1:3000)

use axum::{Router, routing::get};

#[tokio::main]
async fn main() {
    let addr = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:3000".to_string());
    let app = Router::new().route("/", get(|| async { "hello" }));
    let listener = tokio::net::TcpListener::bind(&addr).await.expect("bind");
    axum::serve(listener, app).await.expect("serve");
}
