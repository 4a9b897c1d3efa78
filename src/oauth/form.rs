//! The form body of the token, introspection and revocation endpoints.

use axum::http::HeaderMap;
use axum::http::header::CONTENT_TYPE;

use super::error::{OAuthError, OAuthResult};

/// Largest form body accepted.
pub const MAX_FORM: usize = 64 * 1024;

pub struct Form {
    pairs: Vec<(String, String)>,
}

impl Form {
    /// Parses an `application/x-www-form-urlencoded` body.
    pub fn parse(headers: &HeaderMap, body: &[u8]) -> OAuthResult<Form> {
        let ct = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
        if !ct.to_ascii_lowercase().starts_with("application/x-www-form-urlencoded") {
            return Err(OAuthError::invalid_request("the body must be application/x-www-form-urlencoded"));
        }
        if body.len() > MAX_FORM {
            return Err(OAuthError::invalid_request("the request body is too large"));
        }
        let pairs: Vec<(String, String)> = form_urlencoded::parse(body).into_owned().collect();
        if pairs.len() > 64 {
            return Err(OAuthError::invalid_request("too many parameters"));
        }
        if pairs.iter().any(|(k, v)| k.contains('\0') || v.contains('\0')) {
            return Err(OAuthError::invalid_request("a parameter contains the NUL character"));
        }
        Ok(Form { pairs })
    }

    /// A parameter; empty counts as absent, repeated is `invalid_request`.
    pub fn get(&self, name: &str) -> OAuthResult<Option<&str>> {
        let mut found = self.pairs.iter().filter(|(k, _)| k == name).map(|(_, v)| v.as_str());
        let first = found.next();
        if found.next().is_some() {
            return Err(OAuthError::invalid_request(format!("the parameter {name} is repeated")));
        }
        Ok(first.filter(|v| !v.is_empty()))
    }

    /// Every value of a parameter that may repeat (RFC 8693 `audience`).
    pub fn all(&self, name: &str) -> Vec<&str> {
        self.pairs.iter().filter(|(k, v)| k == name && !v.is_empty()).map(|(_, v)| v.as_str()).collect()
    }

    pub fn require(&self, name: &str) -> OAuthResult<&str> {
        self.get(name)?.ok_or_else(|| OAuthError::invalid_request(format!("the parameter {name} is missing")))
    }
}
