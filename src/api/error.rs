//! The error of the JSON APIs: `{"code": <gRPC code>, "message": "...", "details": [...]}` with
//! the HTTP status the gateway of the platform latch follows would send.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::crypto::password::PasswordError;
use crate::domain::validate::Invalid;
use crate::store::StoreError;

/// gRPC status codes used by the APIs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    InvalidArgument = 3,
    DeadlineExceeded = 4,
    NotFound = 5,
    AlreadyExists = 6,
    PermissionDenied = 7,
    ResourceExhausted = 8,
    FailedPrecondition = 9,
    Unimplemented = 12,
    Internal = 13,
    Unavailable = 14,
    Unauthenticated = 16,
}

impl Code {
    pub fn status(self) -> StatusCode {
        match self {
            Code::InvalidArgument | Code::FailedPrecondition => StatusCode::BAD_REQUEST,
            Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
            Code::NotFound => StatusCode::NOT_FOUND,
            Code::AlreadyExists => StatusCode::CONFLICT,
            Code::PermissionDenied => StatusCode::FORBIDDEN,
            Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
            Code::Unimplemented => StatusCode::NOT_IMPLEMENTED,
            Code::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Code::Unauthenticated => StatusCode::UNAUTHORIZED,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ApiError {
    pub code: Code,
    pub message: String,
    /// A stable identifier of the error case (`USER-AlreadyExists`), when there is one.
    pub id: Option<&'static str>,
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), id: None }
    }

    pub fn with_id(mut self, id: &'static str) -> Self {
        self.id = Some(id);
        self
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(Code::InvalidArgument, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(Code::NotFound, message)
    }

    pub fn exists(message: impl Into<String>) -> Self {
        Self::new(Code::AlreadyExists, message)
    }

    pub fn denied(message: impl Into<String>) -> Self {
        Self::new(Code::PermissionDenied, message)
    }

    pub fn unauthenticated(message: impl Into<String>) -> Self {
        Self::new(Code::Unauthenticated, message)
    }

    pub fn precondition(message: impl Into<String>) -> Self {
        Self::new(Code::FailedPrecondition, message)
    }

    /// An unexpected failure: the detail goes to the log, the caller sees a generic message.
    pub fn internal(detail: impl std::fmt::Display) -> Self {
        tracing::error!(error = %detail, "internal error");
        Self::new(Code::Internal, "internal error")
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Conflict => ApiError::exists("the object already exists"),
            StoreError::Gone => ApiError::not_found("an object the request refers to no longer exists"),
            StoreError::InvalidInput(_) => ApiError::invalid("text must not contain the NUL character"),
            StoreError::Unavailable(detail) => {
                crate::store::warn_unavailable(&detail);
                ApiError::new(Code::Unavailable, "the store is unavailable, try again")
            }
            other => ApiError::internal(other),
        }
    }
}

impl From<PasswordError> for ApiError {
    /// A hash that got no memory is the machine's state of the moment, not the caller's fault
    /// nor a defect: 503, try again. Other hashing failures are internal.
    fn from(e: PasswordError) -> Self {
        match e {
            PasswordError::Memory(kib) => {
                tracing::warn!(memory_kib = kib, "no memory for a password hash");
                ApiError::new(Code::Unavailable, "no memory for the password hash at the moment, try again")
            }
            PasswordError::Busy => ApiError::new(Code::Unavailable, "too many password hashes are waiting, try again"),
            other => ApiError::internal(other),
        }
    }
}

impl From<Invalid> for ApiError {
    fn from(e: Invalid) -> Self {
        ApiError::invalid(e.0)
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(e: sqlx::Error) -> Self {
        ApiError::from(StoreError::from(e))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = match self.id {
            Some(id) => json!({
                "code": self.code as i32,
                "message": format!("{} ({id})", self.message),
                "details": [{
                    "@type": "type.googleapis.com/latch.v1.ErrorDetail",
                    "id": id,
                    "message": self.message,
                }],
            }),
            None => json!({ "code": self.code as i32, "message": self.message }),
        };
        let mut response = (self.code.status(), Json(body)).into_response();
        if self.code == Code::Unauthenticated {
            response
                .headers_mut()
                .insert(axum::http::header::WWW_AUTHENTICATE, axum::http::HeaderValue::from_static("Bearer"));
        }
        response
    }
}

/// Answers unknown API routes like the gateway: 404 with code 5.
pub async fn not_found() -> ApiError {
    ApiError::not_found("Not Found")
}

/// Answers a known route called with the wrong method: 405 with code 12.
pub async fn method_not_allowed() -> Response {
    let mut r = ApiError::new(Code::Unimplemented, "Method Not Allowed").into_response();
    *r.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_without_memory_is_unavailable_and_other_hash_failures_internal() {
        let e = ApiError::from(PasswordError::Memory(1 << 20));
        assert_eq!((e.code, e.code.status()), (Code::Unavailable, StatusCode::SERVICE_UNAVAILABLE));
        assert!(e.message.contains("try again"), "{}", e.message);
        let e = ApiError::from(PasswordError::Hashing("bad parameters".into()));
        assert_eq!((e.code, e.message.as_str()), (Code::Internal, "internal error"));
    }
}
