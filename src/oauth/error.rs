//! The OAuth error of the protocol endpoints: exactly the codes of RFC 6749, OIDC Core and
//! RFC 8693, written as `{"error", "error_description"}` with the status the RFCs give.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::store::StoreError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    InvalidRequest,
    InvalidClient,
    InvalidGrant,
    UnauthorizedClient,
    UnsupportedGrantType,
    InvalidScope,
    InvalidTarget,
    UnsupportedTokenType,
    AccessDenied,
    UnsupportedResponseType,
    LoginRequired,
    InteractionRequired,
    RequestNotSupported,
    RequestUriNotSupported,
    ServerError,
    TemporarilyUnavailable,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::InvalidClient => "invalid_client",
            ErrorCode::InvalidGrant => "invalid_grant",
            ErrorCode::UnauthorizedClient => "unauthorized_client",
            ErrorCode::UnsupportedGrantType => "unsupported_grant_type",
            ErrorCode::InvalidScope => "invalid_scope",
            ErrorCode::InvalidTarget => "invalid_target",
            ErrorCode::UnsupportedTokenType => "unsupported_token_type",
            ErrorCode::AccessDenied => "access_denied",
            ErrorCode::UnsupportedResponseType => "unsupported_response_type",
            ErrorCode::LoginRequired => "login_required",
            ErrorCode::InteractionRequired => "interaction_required",
            ErrorCode::RequestNotSupported => "request_not_supported",
            ErrorCode::RequestUriNotSupported => "request_uri_not_supported",
            ErrorCode::ServerError => "server_error",
            ErrorCode::TemporarilyUnavailable => "temporarily_unavailable",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone)]
pub struct OAuthError {
    pub code: ErrorCode,
    pub description: String,
    /// The client authenticated (or tried to) with the Basic scheme: a failure is 401 with
    /// `WWW-Authenticate: Basic`.
    pub basic_auth: bool,
    /// Force HTTP 401 (introspection answers client failures with 401 whatever the scheme).
    pub unauthorized: bool,
    /// A rate limit was reached: HTTP 429 with `Retry-After` in seconds.
    pub retry_after: Option<u64>,
}

pub type OAuthResult<T> = Result<T, OAuthError>;

impl OAuthError {
    pub fn new(code: ErrorCode, description: impl Into<String>) -> Self {
        Self { code, description: description.into(), basic_auth: false, unauthorized: false, retry_after: None }
    }

    pub fn invalid_request(d: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidRequest, d)
    }

    pub fn invalid_client(d: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidClient, d)
    }

    pub fn invalid_grant(d: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidGrant, d)
    }

    pub fn invalid_scope(d: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidScope, d)
    }

    pub fn unauthorized_client(d: impl Into<String>) -> Self {
        Self::new(ErrorCode::UnauthorizedClient, d)
    }

    /// An unexpected failure: logged in full, answered with a generic description.
    pub fn server_error(detail: impl std::fmt::Display) -> Self {
        tracing::error!(error = %detail, "server error");
        Self::new(ErrorCode::ServerError, "the server could not complete the request")
    }

    /// A spent rate budget: `temporarily_unavailable`, HTTP 429 with `Retry-After`.
    pub fn too_many_requests(wait: std::time::Duration) -> Self {
        let secs = crate::limits::retry_after_secs(wait);
        let mut e = Self::new(ErrorCode::TemporarilyUnavailable, format!("too many requests; retry after {secs} s"));
        e.retry_after = Some(secs);
        e
    }

    pub fn status(&self) -> StatusCode {
        if self.retry_after.is_some() {
            return StatusCode::TOO_MANY_REQUESTS;
        }
        match self.code {
            ErrorCode::ServerError => StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::TemporarilyUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::InvalidClient if self.basic_auth || self.unauthorized => StatusCode::UNAUTHORIZED,
            _ => StatusCode::BAD_REQUEST,
        }
    }
}

impl From<StoreError> for OAuthError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Unavailable(detail) => {
                crate::store::warn_unavailable(&detail);
                OAuthError::new(ErrorCode::TemporarilyUnavailable, "the service is temporarily unavailable")
            }
            StoreError::InvalidInput(_) => OAuthError::invalid_request("a parameter contains an invalid character"),
            other => OAuthError::server_error(other),
        }
    }
}

impl From<sqlx::Error> for OAuthError {
    fn from(e: sqlx::Error) -> Self {
        StoreError::from(e).into()
    }
}

/// `Cache-Control: no-store` and `Pragma: no-cache`, as every token-bearing response needs.
pub fn no_store(r: &mut Response) {
    let h = r.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
}

impl IntoResponse for OAuthError {
    fn into_response(self) -> Response {
        let status = self.status();
        let mut r =
            (status, Json(json!({"error": self.code.as_str(), "error_description": self.description}))).into_response();
        no_store(&mut r);
        if let Some(secs) = self.retry_after {
            r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        // A 401 here is a client's failed authentication (Basic used, or none at introspection):
        // the challenge names the scheme the endpoint takes (RFC 6749 5.2), never Bearer, which
        // is userinfo's (it writes its own).
        if status == StatusCode::UNAUTHORIZED {
            r.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Basic realm=\"latch\""));
        }
        r
    }
}
