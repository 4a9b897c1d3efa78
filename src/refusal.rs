//! Refusals made outside the handlers: axum's extractors and routers answer a body that cannot
//! be read, a path or query that does not parse, or a method a route does not take in plain
//! text or with an empty body, and the panic guard with an empty 500. This middleware writes
//! them in the format of the route's family, as the handlers write their own errors: OAuth
//! error JSON on the protocol endpoints, the error page on the login pages (and on the two
//! endpoints a browser opens, authorize and end_session), the API's JSON error elsewhere.

use axum::extract::Request;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::oauth::error::{ErrorCode, OAuthError};

/// Who reads a route's errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// A person, in a browser: the error page.
    Page,
    /// An OAuth or OIDC client: `{"error", "error_description"}`.
    Protocol,
    /// The management, admin and v2 APIs and the operations routes: the API's JSON error.
    Api,
}

pub fn family(path: &str) -> Family {
    if path == "/ui" || path.starts_with("/ui/") || path == crate::paths::AUTHORIZE || path == crate::paths::END_SESSION
    {
        Family::Page
    } else if path.starts_with("/oauth/") || path.starts_with("/oidc/") || path.starts_with("/.well-known/") {
        Family::Protocol
    } else {
        Family::Api
    }
}

/// A path no route takes, in its family's format.
pub async fn not_found(method: Method, uri: axum::http::Uri, headers: HeaderMap) -> Response {
    let asked = Asked { family: family(uri.path()), method, query: uri.query().map(str::to_string), headers };
    answer(&asked, StatusCode::NOT_FOUND)
}

/// Middleware: see the module's comment.
pub async fn explain(req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let family = family(path);
    // Only the login pages need the request's headers and query, and only when refusing.
    let (query, headers) = match family {
        Family::Page => (req.uri().query().map(str::to_string), req.headers().clone()),
        _ => (None, HeaderMap::new()),
    };
    let method = req.method().clone();
    let r = next.run(req).await;
    if !made_outside_a_handler(&r) {
        return r;
    }
    rewrite(Asked { family, method, query, headers }, r)
}

struct Asked {
    family: Family,
    method: Method,
    query: Option<String>,
    headers: HeaderMap,
}

/// axum's refusals are plain text (extractors, unmatched routes) or empty (a method a route
/// does not take, the panic guard's 500); no handler of latch answers an error either way.
fn made_outside_a_handler(r: &Response) -> bool {
    let status = r.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return false;
    }
    match r.headers().get(header::CONTENT_TYPE) {
        Some(v) => v.to_str().is_ok_and(|v| v.starts_with("text/plain")),
        None => matches!(status, StatusCode::METHOD_NOT_ALLOWED | StatusCode::INTERNAL_SERVER_ERROR),
    }
}

/// The refusal of `status` in the family's format.
fn answer(asked: &Asked, status: StatusCode) -> Response {
    let mut r = match asked.family {
        Family::Protocol => protocol(status, &asked.method),
        Family::Page => page(status, asked),
        Family::Api => api(status),
    };
    *r.status_mut() = status;
    r
}

fn rewrite(asked: Asked, original: Response) -> Response {
    let mut fresh = answer(&asked, original.status());
    // What the layers inside added stays (CORS headers, `Allow`, `Connection: close`); the
    // body's own headers are the new body's.
    let kept = original.into_parts().0.headers;
    for name in kept.keys() {
        if name == header::CONTENT_TYPE || name == header::CONTENT_LENGTH || fresh.headers().contains_key(name) {
            continue;
        }
        for value in kept.get_all(name) {
            fresh.headers_mut().append(name.clone(), value.clone());
        }
    }
    fresh
}

fn protocol(status: StatusCode, method: &Method) -> Response {
    let e = match status {
        StatusCode::BAD_REQUEST => OAuthError::invalid_request("the request could not be read"),
        StatusCode::NOT_FOUND => OAuthError::invalid_request("there is no such endpoint"),
        StatusCode::METHOD_NOT_ALLOWED => OAuthError::invalid_request(format!(
            "the endpoint does not take the method {}",
            crate::telemetry::method_label(method)
        )),
        StatusCode::PAYLOAD_TOO_LARGE => OAuthError::invalid_request("the request body is too large"),
        s if s.is_server_error() => OAuthError::new(ErrorCode::ServerError, "an internal error occurred"),
        _ => OAuthError::invalid_request("the request was refused"),
    };
    if status.is_server_error() {
        tracing::error!(status = status.as_u16(), "a protocol request failed outside its handler");
    }
    e.into_response()
}

fn page(status: StatusCode, asked: &Asked) -> Response {
    // The language an authorization request asks for (`ui_locales`), else the browser's.
    let locales: Vec<String> = form_urlencoded::parse(asked.query.as_deref().unwrap_or("").as_bytes())
        .filter(|(k, _)| k == "ui_locales")
        .flat_map(|(_, v)| v.split(' ').map(str::to_string).collect::<Vec<_>>())
        .collect();
    let t = crate::login::i18n::choose(&locales, &asked.headers);
    let reading = matches!(asked.method, Method::GET | Method::HEAD);
    let message = match status {
        StatusCode::NOT_FOUND => t.err_no_page,
        StatusCode::METHOD_NOT_ALLOWED => t.err_wrong_method,
        StatusCode::PAYLOAD_TOO_LARGE => t.err_too_large,
        StatusCode::BAD_REQUEST if reading => t.err_no_page,
        s if s.is_server_error() => {
            tracing::error!(status = s.as_u16(), "a login page request failed outside its handler");
            t.err_internal
        }
        _ => t.err_form,
    };
    let id = crate::oauth::authorize::request_id(&asked.headers);
    crate::login::pages::error_page(t, status, message, &id)
}

fn api(status: StatusCode) -> Response {
    use crate::api::ApiError;
    use crate::api::error::Code;
    match status {
        StatusCode::NOT_FOUND => ApiError::not_found("Not Found").into_response(),
        StatusCode::METHOD_NOT_ALLOWED => ApiError::new(Code::Unimplemented, "Method Not Allowed").into_response(),
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::invalid("the request body is too large").into_response(),
        s if s.is_server_error() => ApiError::internal("a request failed outside its handler").into_response(),
        _ => ApiError::invalid("the request could not be read").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(path: &str) -> Asked {
        Asked { family: family(path), method: Method::POST, query: None, headers: HeaderMap::new() }
    }

    async fn body(r: Response) -> String {
        let bytes = axum::body::to_bytes(r.into_body(), 1 << 20).await.unwrap();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[test]
    fn each_path_has_its_family() {
        for (path, f) in [
            ("/ui", Family::Page),
            ("/ui/login/x", Family::Page),
            ("/oauth/v2/authorize", Family::Page),
            ("/oidc/v1/end_session", Family::Page),
            ("/oauth/v2/token", Family::Protocol),
            ("/oauth/v2/authorize/", Family::Protocol),
            ("/oidc/v1/userinfo", Family::Protocol),
            ("/.well-known/openid-configuration", Family::Protocol),
            ("/management/v1/users", Family::Api),
            ("/uix", Family::Api),
            ("/healthz", Family::Api),
        ] {
            assert_eq!(family(path), f, "{path}");
        }
    }

    /// The panic guard's empty 500 becomes each family's internal error; what the layers inside
    /// added stays, the old body's headers do not.
    #[tokio::test]
    async fn an_empty_500_is_written_in_the_familys_format() {
        let empty = || {
            let mut r = StatusCode::INTERNAL_SERVER_ERROR.into_response();
            r.headers_mut().insert("access-control-allow-origin", "https://spa.example".parse().unwrap());
            r.headers_mut().insert(header::CONTENT_LENGTH, "0".parse().unwrap());
            r
        };
        assert!(made_outside_a_handler(&empty()));
        let r = rewrite(asked("/oauth/v2/token"), empty());
        assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(r.headers()["access-control-allow-origin"], "https://spa.example");
        assert!(r.headers().get(header::CONTENT_LENGTH).is_none_or(|v| v != "0"));
        assert!(body(r).await.contains("\"server_error\""));
        let r = rewrite(asked("/ui/login/x"), empty());
        assert!(r.headers()[header::CONTENT_TYPE].to_str().unwrap().starts_with("text/html"));
        assert!(body(r).await.contains("Something went wrong on our side"));
        let r = rewrite(asked("/management/v1/users"), empty());
        assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert!(body(r).await.contains("\"code\":13"));
    }

    /// A handler's own answers are left alone: errors with a body of their own type, and
    /// empty answers other than 405 and 500 (a bare 401 of a bearer-token endpoint).
    #[test]
    fn a_handlers_own_answers_are_left_alone() {
        let json = crate::oauth::error::OAuthError::invalid_request("x").into_response();
        assert!(!made_outside_a_handler(&json));
        assert!(!made_outside_a_handler(&StatusCode::UNAUTHORIZED.into_response()));
        assert!(!made_outside_a_handler(&StatusCode::SEE_OTHER.into_response()));
        let mut plain_ok = StatusCode::OK.into_response();
        plain_ok.headers_mut().insert(header::CONTENT_TYPE, "text/plain".parse().unwrap());
        assert!(!made_outside_a_handler(&plain_ok), "the metrics are plain text");
    }
}
