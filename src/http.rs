//! The HTTP/1.1 server: accepts TCP connections and serves the router on each, with limits
//! against slow and oversized request heads, the peer address for the rate limits, and a
//! graceful end.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::extract::ConnectInfo;
use axum::http::{HeaderValue, Request, header};
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tower::ServiceExt;

use crate::limits::LimitSettings;

/// Most header fields a request may carry (more is answered 431).
pub const MAX_HEADERS: usize = 100;
/// Read buffer for a request head (request line and headers): a head that does not fit in it
/// after the last read is answered 431. hyper checks the limit before each read, so heads
/// somewhat above it may still pass (up to about twice); far larger ones never do.
pub const MAX_HEAD_BYTES: usize = 32 * 1024;

pub struct Connections {
    builder: hyper::server::conn::http1::Builder,
    per_ip: Option<Arc<crate::limits::ConnectionCount>>,
}

impl Connections {
    pub fn new(limits: &LimitSettings) -> Self {
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_read_timeout)
            .max_headers(MAX_HEADERS)
            .max_buf_size(MAX_HEAD_BYTES)
            .keep_alive(true);
        Self { builder, per_ip: crate::limits::ConnectionCount::of(limits) }
    }

    /// Serves `app` on every connection `listener` accepts until `shutdown` resolves; then
    /// stops accepting, lets open requests finish for up to `grace`, and returns.
    pub async fn accept_until(
        self,
        listener: TcpListener,
        app: Router,
        shutdown: impl Future<Output = ()> + Send + 'static,
        grace: Duration,
    ) -> std::io::Result<()> {
        let graceful = GracefulShutdown::new();
        tokio::pin!(shutdown);
        loop {
            let (stream, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(v) => v,
                    Err(e) => {
                        // Out of file descriptors and the like: wait instead of spinning.
                        tracing::warn!(error = %e, "accepting a connection failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
                _ = &mut shutdown => break,
            };
            // A network holding `connections_per_ip` already gets its new connection closed
            // at once: slow clients cannot take every socket the process may open.
            let counted = match &self.per_ip {
                Some(count) => match count.enter(peer.ip()) {
                    Some(c) => Some(c),
                    None => {
                        metrics::counter!("latch_rate_limited_total", "budget" => "connections_per_ip").increment(1);
                        drop(stream);
                        continue;
                    }
                },
                None => None,
            };
            let _ = stream.set_nodelay(true);
            let svc = app.clone().map_request(move |mut req: Request<Incoming>| {
                req.extensions_mut().insert(ConnectInfo(peer));
                req
            });
            let conn =
                graceful.watch(self.builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(svc)));
            tokio::spawn(async move {
                let _counted = counted;
                if let Err(e) = conn.await {
                    tracing::debug!(error = %e, "connection closed with an error");
                }
            });
        }
        drop(listener);
        tokio::select! {
            _ = graceful.shutdown() => {}
            _ = tokio::time::sleep(grace) => {
                tracing::warn!("shutdown timeout passed with requests still open; stopping");
            }
        }
        Ok(())
    }
}

/// Middleware: a response that goes out before its request's body was read to the end (a body
/// refused as too large, a request refused before its body mattered) says `Connection: close`.
/// hyper stops reading such a connection and closes it after the response; without the header
/// a client keeps the connection for its next request and finds it closed.
pub async fn close_if_body_unread(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    if req.body().is_end_stream() {
        return next.run(req).await;
    }
    let read = Arc::new(AtomicBool::new(false));
    let req = req.map(|inner| Body::new(ReadToEnd { inner, read: read.clone() }));
    let mut r = next.run(req).await;
    if !read.load(Ordering::Acquire) {
        r.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    r
}

/// A request body that notes when it has been read to its end.
struct ReadToEnd {
    inner: Body,
    read: Arc<AtomicBool>,
}

impl HttpBody for ReadToEnd {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) || self.inner.is_end_stream() {
            self.read.store(true, Ordering::Release);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Middleware (protocol and login routes): the whole request body must arrive within the
/// body-read timeout. The per-chunk timeout alone lets a client trickle a byte just before it
/// runs out and hold the request for hours; these bodies are at most a 64 KiB form, which any
/// real client sends at once. A body past its deadline ends in an error, which the extractors
/// answer as a bad request, and the connection closes (its body was not read to the end).
pub async fn body_deadline(
    axum::extract::State(limit): axum::extract::State<Duration>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    if req.body().is_end_stream() {
        return next.run(req).await;
    }
    let at = tokio::time::Instant::now() + limit;
    next.run(req.map(|inner| Body::new(Deadline { inner, at, timer: None }))).await
}

/// A request body that fails once its deadline has passed. The timer is set only when the body
/// has to be waited for: a form that came with its head (nearly every one) never sets one.
struct Deadline {
    inner: Body,
    at: tokio::time::Instant,
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl HttpBody for Deadline {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        let at = self.at;
        match self.timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at))).as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(axum::Error::new("the request body took too long")))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
