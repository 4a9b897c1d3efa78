//! The JSON body extractor of the APIs. Like the gateway of the platform latch follows it
//! accepts both `camelCase` and `snake_case` field names, ignores unknown fields, treats an empty
//! body as `{}`, and reports malformed input as `InvalidArgument` naming the offending field.

use std::pin::Pin;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{FromRequest, Request};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::error::ApiError;

/// Request bodies above this size are refused.
pub const MAX_BODY: usize = 1024 * 1024;

pub struct ApiJson<T>(pub T);

/// `user_name` -> `userName`; names without underscores are unchanged.
pub fn camel(key: &str) -> String {
    if !key.contains('_') {
        return key.to_string();
    }
    let mut out = String::with_capacity(key.len());
    let mut upper = false;
    for c in key.chars() {
        if c == '_' {
            upper = !out.is_empty();
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// Rewrites every object key to camelCase (an explicit camelCase key wins over its snake twin).
pub fn normalize(v: Value) -> Value {
    match v {
        Value::Object(map) => {
            let mut out = Map::with_capacity(map.len());
            let mut later = Vec::new();
            for (k, v) in map {
                let c = camel(&k);
                if c == k {
                    out.insert(k, normalize(v));
                } else {
                    later.push((c, normalize(v)));
                }
            }
            for (k, v) in later {
                out.entry(k).or_insert(v);
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.into_iter().map(normalize).collect()),
        other => other,
    }
}

/// Where a string (or an object key) holds U+0000, which no text column stores (PostgreSQL
/// refuses it): the field's path, as `a.b[2]`.
pub fn nul_at(v: &Value, path: String) -> Option<String> {
    let field = |path: &str, key: &str| if path.is_empty() { key.to_string() } else { format!("{path}.{key}") };
    match v {
        Value::String(s) if s.contains('\0') => Some(if path.is_empty() { ".".to_string() } else { path }),
        Value::Object(map) => map.iter().find_map(|(k, v)| {
            if k.contains('\0') { Some(field(&path, &k.replace('\0', "\\u0000"))) } else { nul_at(v, field(&path, k)) }
        }),
        Value::Array(items) => items.iter().enumerate().find_map(|(i, v)| nul_at(v, format!("{path}[{i}]"))),
        _ => None,
    }
}

/// Whether raw JSON text carries U+0000 in a string: JSON can only write it as the escape
/// `\u0000` (a backslash not itself escaped). For bodies too large to walk as a [`Value`].
pub fn has_nul_escape(raw: &[u8]) -> bool {
    raw.windows(6)
        .enumerate()
        .any(|(i, w)| w == b"\\u0000" && raw[..i].iter().rev().take_while(|b| **b == b'\\').count() % 2 == 0)
}

/// Reads the body of `req`, at most `limit` bytes: a larger `Content-Length` is refused before
/// anything is read, and the bytes are counted as they come (a body without a length is held to
/// the same limit). For a route that authorizes its caller before it reads a large body; more is
/// `InvalidArgument`, like a body over [`MAX_BODY`] elsewhere.
pub async fn read_limited(req: Request, limit: usize) -> Result<Vec<u8>, ApiError> {
    let size = if limit.is_multiple_of(1 << 20) { format!("{} MiB", limit >> 20) } else { format!("{limit} bytes") };
    let too_large = || ApiError::invalid(format!("the request body is larger than {size}"));
    let announced = req
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0)
        .max(req.body().size_hint().lower());
    if announced > limit as u64 {
        return Err(too_large());
    }
    let mut body: Body = req.into_body();
    // Room for what the length announces, within reason: the bytes are not there yet.
    let mut out = Vec::with_capacity(announced.min(16 << 20) as usize);
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        let frame = frame.map_err(|e| ApiError::invalid(format!("cannot read the request body: {e}")))?;
        if let Ok(data) = frame.into_data() {
            if out.len() + data.len() > limit {
                return Err(too_large());
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(out)
}

/// Parses a body into `T` with the rules above.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let value: Value = if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        Value::Object(Map::new())
    } else {
        serde_json::from_slice(bytes).map_err(|e| ApiError::invalid(format!("invalid JSON: {e}")))?
    };
    if !value.is_object() {
        return Err(ApiError::invalid("invalid JSON: the body must be an object"));
    }
    if let Some(path) = nul_at(&value, String::new()) {
        return Err(ApiError::invalid(format!("invalid request: {path}: text must not contain the NUL character")));
    }
    serde_path_to_error::deserialize(normalize(value)).map_err(|e| {
        let path = e.path().to_string();
        if path == "." {
            ApiError::invalid(format!("invalid request: {}", e.inner()))
        } else {
            ApiError::invalid(format!("invalid request: {path}: {}", e.inner()))
        }
    })
}

impl<T, S> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|e| ApiError::invalid(format!("cannot read the request body: {e}")))?;
        if bytes.len() > MAX_BODY {
            return Err(ApiError::invalid("the request body is too large"));
        }
        parse(&bytes).map(ApiJson)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize, Debug)]
    #[serde(rename_all = "camelCase")]
    struct R {
        user_name: String,
        #[serde(default)]
        is_email_verified: bool,
    }

    #[test]
    fn both_spellings_and_errors() {
        let r: R = parse(br#"{"user_name":"a","is_email_verified":true,"extra":1}"#).unwrap();
        assert_eq!(r.user_name, "a");
        assert!(r.is_email_verified);
        let r: R = parse(br#"{"userName":"b"}"#).unwrap();
        assert_eq!(r.user_name, "b");
        let e = parse::<R>(br#"{"userName":3}"#).unwrap_err();
        assert!(e.message.contains("userName"), "{}", e.message);
        assert!(parse::<R>(b"{").is_err());
        assert!(parse::<R>(b"[1]").is_err());
        assert!(parse::<R>(b"").unwrap_err().message.contains("userName"));
        assert_eq!(camel("data_orgsv1_gcs"), "dataOrgsv1Gcs");
        let e = parse::<R>(b"{\"userName\":\"a\\u0000b\"}").unwrap_err();
        assert!(e.message.contains("userName") && e.message.contains("NUL"), "{}", e.message);
        let e = parse::<R>(b"{\"userName\":\"a\",\"x\":[{\"y\":\"\\u0000\"}]}").unwrap_err();
        assert!(e.message.contains("x[0].y"), "{}", e.message);
        assert!(has_nul_escape(br#"{"a":"x\u0000"}"#));
        assert!(!has_nul_escape(br#"{"a":"x\\u0000"}"#));
        assert!(has_nul_escape(br#"{"a":"x\\\u0000"}"#));
        assert_eq!(camel("_x"), "x");
    }
}
