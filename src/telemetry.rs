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
                // How long a ready task waits for a worker ([`spawn_schedule_probe`]).
                .set_buckets_for_metric(Matcher::Prefix("latch_runtime_".into()), &SHORT_WAIT_BUCKETS)
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
pub fn spawn_upkeep(stop: tokio::sync::watch::Receiver<bool>) -> tokio::task::JoinHandle<()> {
    every(UPKEEP_EVERY, stop, || async {
        if let Some(h) = prometheus() {
            h.run_upkeep();
        }
    })
}

/// Runs `tick` every `period` (after the period, not at once) until `stop` turns true.
fn every<F, Fut>(
    period: std::time::Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
    mut tick: F,
) -> tokio::task::JoinHandle<()>
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(period) => {}
                _ = stop.changed() => return,
            }
            tick().await;
        }
    })
}

/// How long a task that is ready to run waited for a tokio worker, sampled by
/// [`spawn_schedule_probe`].
pub const SCHEDULE_DELAY_METRIC: &str = "latch_runtime_schedule_delay_seconds";

/// How often the scheduling delay is sampled.
const PROBE_EVERY: std::time::Duration = std::time::Duration::from_millis(50);

/// Samples, every [`PROBE_EVERY`] until `stop` turns true, how long a ready task waits before a
/// worker runs it: the probe yields (which puts it at the back of its worker's queue) and records
/// the time until it runs again in [`SCHEDULE_DELAY_METRIC`]. A request waits like this before it
/// is read (time `http_request_duration_seconds` does not see) and again after each of its awaits
/// (time it does see, mixed with the store's): when every core is busy with other requests, the
/// database or other processes, this shows it apart from a slow store or a slow client.
pub fn spawn_schedule_probe(stop: tokio::sync::watch::Receiver<bool>) -> tokio::task::JoinHandle<()> {
    every(PROBE_EVERY, stop, || async {
        let ready = Instant::now();
        tokio::task::yield_now().await;
        metrics::histogram!(SCHEDULE_DELAY_METRIC).record(ready.elapsed().as_secs_f64());
    })
}

/// The method as a metrics label: the standard methods by name, anything else (HTTP allows any
/// token, of any length, and each distinct label would be a series kept for the life of the
/// process) as `other`.
pub(crate) fn method_label(m: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *m {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// Counts requests and records their latency by method, route and status.
pub async fn track_requests(req: Request, next: Next) -> Response {
    let start = Instant::now();
    let route =
        req.extensions().get::<MatchedPath>().map(|p| p.as_str().to_owned()).unwrap_or_else(|| "unmatched".to_owned());
    let method = method_label(req.method()).to_owned();
    let response = next.run(req).await;
    let labels = [("method", method), ("route", route), ("status", response.status().as_u16().to_string())];
    metrics::counter!("http_requests_total", &labels).increment(1);
    metrics::histogram!("http_request_duration_seconds", &labels).record(start.elapsed().as_secs_f64());
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Samples of the schedule-delay histogram over 100 ms, from the recorder's text.
    fn delays_over_100ms(handle: &PrometheusHandle) -> f64 {
        let text = handle.render();
        let value = |prefix: &str| {
            text.lines()
                .find(|l| l.starts_with(prefix))
                .and_then(|l| l.rsplit(' ').next())
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        value(&format!("{SCHEDULE_DELAY_METRIC}_count "))
            - value(&format!("{SCHEDULE_DELAY_METRIC}_bucket{{le=\"0.1\"}}"))
    }

    /// With the only worker kept busy for 150 ms at a time, the probe waits that long to run
    /// again, and says so.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_busy_worker_shows_in_the_schedule_delay() {
        let handle = prometheus().expect("the metrics recorder");
        let before = delays_over_100ms(handle);
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let probe = spawn_schedule_probe(stop_rx);
        let hog = tokio::spawn(async {
            for _ in 0..8 {
                std::thread::sleep(std::time::Duration::from_millis(150));
                tokio::task::yield_now().await;
            }
        });
        hog.await.unwrap();
        let _ = stop_tx.send(true);
        probe.await.unwrap();
        let after = delays_over_100ms(handle);
        assert!(after - before >= 1.0, "no probe waited over 100 ms: {before} -> {after}");
    }
}
