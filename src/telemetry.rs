//! Logs (tracing, human-readable or JSON) and metrics (Prometheus text at `/metrics`).

use std::sync::OnceLock;
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// Installs the log subscriber, writing to standard error (once per process; later calls are
/// ignored).
pub fn init_logging(format: LogFormat, level: &str) {
    let filter = EnvFilter::try_new(level).unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_target(true).with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(true).try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

/// Buckets of the store's short waits: SQLite's lock waits and checkpoints, the pool's waits.
const SHORT_WAIT_BUCKETS: [f64; 12] = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 2.5, 5.0];

static PROMETHEUS: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// The process-wide metrics recorder (installed on first use).
pub fn prometheus() -> Option<&'static PrometheusHandle> {
    PROMETHEUS
        .get_or_init(|| {
            let buckets = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Full("http_request_duration_seconds".into()), &buckets)
                .ok()?
                // SQLite's lock waits and checkpoints (src/store/sqlite_busy.rs): most are under 5 ms.
                .set_buckets_for_metric(Matcher::Prefix("latch_sqlite_".into()), &SHORT_WAIT_BUCKETS)
                .ok()?
                // Waits for a pooled connection and how long one is held (src/store/pool.rs).
                .set_buckets_for_metric(Matcher::Prefix("latch_store_pool_".into()), &SHORT_WAIT_BUCKETS)
                .ok()?
                .build_recorder();
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder).ok()?;
            Some(handle)
        })
        .as_ref()
}

/// How often recorded latencies are folded into the histograms.
const UPKEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Folds the latencies recorded since the last run into the histograms, every [`UPKEEP_EVERY`]
/// until `stop` turns true. The recorder keeps every sample (16 bytes) until this runs or
/// `/metrics` is read; without it a server nobody scraped grew by about 1.5 MiB a minute at
/// 1,000 operations/s (found by the soak).
pub fn spawn_upkeep(mut stop: tokio::sync::watch::Receiver<bool>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(UPKEEP_EVERY) => {}
                _ = stop.changed() => return,
            }
            if let Some(h) = prometheus() {
                h.run_upkeep();
            }
        }
    })
}

/// Counts requests and records their latency by method, route and status.
pub async fn track_requests(req: Request, next: Next) -> Response {
    let start = Instant::now();
    let route =
        req.extensions().get::<MatchedPath>().map(|p| p.as_str().to_owned()).unwrap_or_else(|| "unmatched".to_owned());
    let method = req.method().as_str().to_owned();
    let response = next.run(req).await;
    let labels = [("method", method), ("route", route), ("status", response.status().as_u16().to_string())];
    metrics::counter!("http_requests_total", &labels).increment(1);
    metrics::histogram!("http_request_duration_seconds", &labels).record(start.elapsed().as_secs_f64());
    response
}
