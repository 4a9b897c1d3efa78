//! The browser cookie. It holds only a random id; the store keeps its SHA-256 digest, which
//! binds sessions and pending requests to the browser. `HttpOnly`, `SameSite=Lax`, and `Secure`
//! (with the `__Host-` prefix) when the external URL is https.

use axum::http::header::{CACHE_CONTROL, COOKIE, LOCATION, SET_COOKIE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::crypto::secret;

pub const NAME: &str = "latch_ua";
pub const SECURE_NAME: &str = "__Host-latch_ua";
/// One year, as browsers keep a user-agent cookie.
const MAX_AGE: i64 = 365 * 86_400;

/// The browser id of a request.
#[derive(Debug, Clone)]
pub struct Browser {
    value: String,
    /// SHA-256 of the value, as stored.
    pub key: Vec<u8>,
    /// The cookie must be set on the response.
    pub is_new: bool,
}

pub fn cookie_name(secure: bool) -> &'static str {
    if secure { SECURE_NAME } else { NAME }
}

/// The browser cookie of `headers`, if it has a plausible one.
pub fn existing(headers: &HeaderMap, secure: bool) -> Option<Browser> {
    let name = cookie_name(secure);
    for h in headers.get_all(COOKIE) {
        let Ok(s) = h.to_str() else { continue };
        for part in s.split(';') {
            if let Some((k, v)) = part.trim().split_once('=')
                && k == name
                && v.len() == 43
                && v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            {
                return Some(Browser { key: secret::digest(v), value: v.to_string(), is_new: false });
            }
        }
    }
    None
}

/// The browser cookie of `headers`, or a new one.
pub fn get_or_create(headers: &HeaderMap, secure: bool) -> Browser {
    existing(headers, secure).unwrap_or_else(fresh)
}

/// Sends a form POST that came without the browser cookie on to `path` as a GET with the same
/// parameters. A cross-site form POST comes without it (`SameSite=Lax` keeps it off), the GET
/// that follows the redirect brings it: answering the POST itself would set a new cookie and
/// cut the browser off from its sessions and pending sign-ins, for any site that posts a form.
pub fn as_get(path: &str, pairs: &[(String, String)]) -> Response {
    let query = form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs).finish();
    let mut r = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(&format!("{path}?{query}")) {
        r.headers_mut().insert(LOCATION, v);
    }
    r.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// A new browser id, to be set on the response.
pub fn fresh() -> Browser {
    let value = secret::new_secret();
    Browser { key: secret::digest(&value), value, is_new: true }
}

impl Browser {
    /// A value for `purpose` that only this browser's pages can carry: derived from the cookie's
    /// value, which the store never holds (it keeps the value's digest), so neither another site
    /// nor a reader of the store can make it.
    pub fn derived(&self, purpose: &str) -> String {
        use base64::Engine;
        use sha2::Digest;
        let d =
            sha2::Sha256::new().chain_update(purpose.as_bytes()).chain_update(b":").chain_update(self.value.as_bytes());
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(d.finalize())
    }

    /// Adds `Set-Cookie` when the cookie is new.
    pub fn set_on(&self, headers: &mut HeaderMap, secure: bool) {
        if !self.is_new {
            return;
        }
        let attrs = if secure { "; Secure" } else { "" };
        let c =
            format!("{}={}; Path=/; Max-Age={MAX_AGE}; HttpOnly; SameSite=Lax{attrs}", cookie_name(secure), self.value);
        if let Ok(v) = HeaderValue::from_str(&c) {
            headers.append(SET_COOKIE, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_set() {
        let b = get_or_create(&HeaderMap::new(), true);
        assert!(b.is_new);
        let mut h = HeaderMap::new();
        b.set_on(&mut h, true);
        let set = h.get(SET_COOKIE).unwrap().to_str().unwrap().to_string();
        assert!(
            set.starts_with("__Host-latch_ua=")
                && set.contains("HttpOnly")
                && set.contains("Secure")
                && set.contains("SameSite=Lax")
        );
        let mut req = HeaderMap::new();
        req.insert(COOKIE, HeaderValue::from_str(&format!("other=1; {}", set.split(';').next().unwrap())).unwrap());
        let again = existing(&req, true).unwrap();
        assert_eq!(again.key, b.key);
        assert!(!again.is_new);
        req.insert(COOKIE, HeaderValue::from_static("latch_ua=short"));
        assert!(existing(&req, false).is_none(), "a forged short value is ignored");
    }
}
