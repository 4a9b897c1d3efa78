//! The route tables of the JSON APIs. Each area (`/management/v1`, `/admin/v1`, `/v2`) lists its
//! operations once, as (method, path, handler); the router is built from that list and the
//! OpenAPI test reads the same list, so a handler the document does not describe cannot hide.

use axum::Router;
use axum::extract::Request;
use axum::handler::Handler;
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, delete, get, post, put};

use crate::api::ApiError;
use crate::app::AppState;

/// One operation of an area: its method, its path below the area's prefix, and its handler.
pub struct Route {
    pub method: Method,
    pub path: &'static str,
    handler: MethodRouter<AppState>,
}

/// The operations of one area, served below `prefix`.
pub struct Table {
    pub prefix: &'static str,
    pub routes: Vec<Route>,
}

impl Table {
    pub fn new(prefix: &'static str) -> Self {
        Self { prefix, routes: Vec::new() }
    }

    fn add(mut self, method: Method, path: &'static str, handler: MethodRouter<AppState>) -> Self {
        self.routes.push(Route { method, path, handler });
        self
    }

    pub fn get<H: Handler<T, AppState>, T: 'static>(self, path: &'static str, h: H) -> Self {
        self.add(Method::GET, path, get(h))
    }

    pub fn post<H: Handler<T, AppState>, T: 'static>(self, path: &'static str, h: H) -> Self {
        self.add(Method::POST, path, post(h))
    }

    pub fn put<H: Handler<T, AppState>, T: 'static>(self, path: &'static str, h: H) -> Self {
        self.add(Method::PUT, path, put(h))
    }

    pub fn delete<H: Handler<T, AppState>, T: 'static>(self, path: &'static str, h: H) -> Self {
        self.add(Method::DELETE, path, delete(h))
    }

    /// `(method, full path)` of every operation, in the OpenAPI path syntax (`/users/{user_id}`).
    pub fn operations(&self) -> Vec<(Method, String)> {
        self.routes.iter().map(|r| (r.method.clone(), format!("{}{}", self.prefix, r.path))).collect()
    }

    /// The router of the area, paths relative to its prefix; unknown paths answer 404 in the
    /// API's error format.
    pub fn router(self) -> Router<AppState> {
        let mut paths: Vec<(&'static str, MethodRouter<AppState>)> = Vec::new();
        for r in self.routes {
            match paths.iter().position(|(p, _)| *p == r.path) {
                Some(i) => {
                    let (path, existing) = paths.swap_remove(i);
                    paths.push((path, existing.merge(r.handler)));
                }
                None => paths.push((r.path, r.handler)),
            }
        }
        paths
            .into_iter()
            .fold(Router::new(), |router, (path, handler)| router.route(path, handler))
            .fallback(crate::api::error::not_found)
            .layer(axum::middleware::from_fn(reject_nul))
    }
}

/// A path parameter holding U+0000 (`%00`) can match nothing: no text column stores it
/// (PostgreSQL refuses it with an error), so it is refused here as invalid input; and one whose
/// percent-escapes are no UTF-8 would be refused by axum's `Path` in plain text.
async fn reject_nul(req: Request, next: Next) -> Response {
    let path = req.uri().path();
    if path.contains("%00") {
        return ApiError::invalid("invalid request: the path must not contain the NUL character (%00)").into_response();
    }
    if path.contains('%') && std::str::from_utf8(&percent_decode(path)).is_err() {
        return ApiError::invalid("invalid request: the path is not UTF-8 once its %-escapes are decoded")
            .into_response();
    }
    next.run(req).await
}

/// The bytes a path's %-escapes stand for (a `%` not followed by two hex digits stays as it is).
fn percent_decode(path: &str) -> Vec<u8> {
    let b = path.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (b[i], b.get(i + 1).copied().and_then(hex), b.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::percent_decode;

    #[test]
    fn percent_escapes_decode_to_their_bytes() {
        assert_eq!(percent_decode("/users/%C3%A9%20x"), "/users/é x".as_bytes());
        assert_eq!(percent_decode("/a%FF"), b"/a\xff");
        assert_eq!(percent_decode("/a%2"), b"/a%2");
        assert_eq!(percent_decode("/a%zz%"), b"/a%zz%");
    }
}
