//! Google Cloud Storage through its JSON API: upload (`uploadType=media`) and download
//! (`alt=media`). Credentials: the request's service-account key file (base64) signs an RS256
//! assertion posted to its `token_uri` (jwt-bearer), and the access token goes along as a bearer.
//! With `STORAGE_EMULATOR_HOST` set (the convention of Google's client libraries) the emulator
//! is used without credentials.
//!
//! The key file comes with the request, so its `token_uri` is not trusted as a destination: it
//! must be Google's token endpoint (https, `oauth2.googleapis.com`), or lie on the configured
//! storage endpoint's own origin when that is not Google's (a gateway or a test double, which
//! latch sends the bucket's requests to anyway). No redirect is followed, and what comes back
//! (the token answer, the object) is read with a byte cap.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE};
use serde::Deserialize;

use super::data::GcsTarget;
use crate::api::error::ApiResult;
use crate::api::{ApiError, Code};
use crate::config::{DEFAULT_GCS_ENDPOINT, Settings};

#[derive(Debug, Clone, Deserialize)]
struct ServiceAccount {
    client_email: String,
    private_key: String,
    #[serde(default)]
    private_key_id: String,
    token_uri: String,
}

pub struct Bucket {
    base: String,
    bucket: String,
    path: String,
    account: Option<ServiceAccount>,
    client: reqwest::Client,
    /// The access token, fetched once per call (an export asks for it before it builds the
    /// document, so that refused credentials fail at once, not after minutes of work).
    token: tokio::sync::OnceCell<Option<String>>,
}

/// Largest object an import reads, the import's own body limit.
const MAX_OBJECT: usize = super::import::MAX_BODY;
/// Largest answer of a token endpoint (Google's is under 2 KiB).
const MAX_TOKEN_ANSWER: usize = 64 * 1024;
const SCOPE: &str = "https://www.googleapis.com/auth/devstorage.read_write";
/// The host of Google's token endpoint, where a service account's `token_uri` points.
const GOOGLE_TOKEN_HOST: &str = "oauth2.googleapis.com";

fn unavailable(msg: impl Into<String>) -> ApiError {
    ApiError::new(Code::Unavailable, msg)
}

impl Bucket {
    pub fn from_target(settings: &Settings, t: &GcsTarget, field: &str) -> ApiResult<Bucket> {
        if t.bucket.trim().is_empty() || t.bucket.len() > 222 {
            return Err(ApiError::invalid(format!("invalid {field}.bucket: a bucket name is required")));
        }
        // Google's bucket names: lower-case letters, digits, '-', '_' and '.', starting and
        // ending with a letter or digit. Anything else never reaches the request's path.
        let name = t.bucket.trim();
        let edge_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        if name.len() < 3
            || !name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.'))
            || !edge_ok(name.chars().next())
            || !edge_ok(name.chars().last())
            || name.contains("..")
        {
            return Err(ApiError::invalid(format!("invalid {field}.bucket: '{name}' is not a bucket name")));
        }
        if t.path.trim().is_empty() || t.path.len() > 1024 {
            return Err(ApiError::invalid(format!("invalid {field}.path: an object path is required")));
        }
        // Google refuses these names, and no URL path can carry them as a segment.
        if matches!(t.path.trim(), "." | "..") {
            return Err(ApiError::invalid(format!("invalid {field}.path: '.' and '..' are not object names")));
        }
        let account = match t.serviceaccount_json.trim() {
            "" => None,
            raw => {
                let bytes = STANDARD
                    .decode(raw)
                    .or_else(|_| URL_SAFE.decode(raw))
                    .map_err(|_| ApiError::invalid(format!("invalid {field}.serviceaccount_json: not base64")))?;
                // serde's message may quote a value of the file (a key file encoded twice is one
                // JSON string, the private key within it): only where it went wrong is said.
                let sa: ServiceAccount = serde_json::from_slice(&bytes).map_err(|e| {
                    ApiError::invalid(format!(
                        "invalid {field}.serviceaccount_json: not a service-account key file (line {}, column {})",
                        e.line(),
                        e.column()
                    ))
                })?;
                // The PEM parse alone takes a public key, or any RSA PRIVATE KEY block: only a
                // signature shows that it is a private key (else the first use would be a 500).
                let signs = jsonwebtoken::EncodingKey::from_rsa_pem(sa.private_key.as_bytes()).is_ok_and(|key| {
                    jsonwebtoken::encode(
                        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256),
                        &serde_json::json!({}),
                        &key,
                    )
                    .is_ok()
                });
                if !signs {
                    return Err(ApiError::invalid(format!(
                        "invalid {field}.serviceaccount_json: private_key is not an RSA private key in PEM"
                    )));
                }
                Some(sa)
            }
        };
        let (base, account) = match &settings.gcs_emulator {
            Some(emulator) => (emulator.clone(), None),
            None => {
                let Some(sa) = &account else {
                    return Err(ApiError::invalid(format!(
                        "invalid {field}.serviceaccount_json: credentials are required"
                    )));
                };
                check_token_uri(settings, &sa.token_uri).map_err(|why| {
                    ApiError::invalid(format!("invalid {field}.serviceaccount_json: token_uri {why}"))
                })?;
                (settings.gcs_endpoint.clone(), account)
            }
        };
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            // No limit of its own but the connection's: the caller's `timeout` (up to 24 h)
            // bounds the whole call, and a large object may take longer than any fixed one
            // (reqwest's read timeout would also count an upload's sending time).
            .connect_timeout(std::time::Duration::from_secs(10))
            .build()
            .map_err(ApiError::internal)?;
        Ok(Bucket {
            base,
            bucket: t.bucket.trim().to_string(),
            path: t.path.trim().to_string(),
            account,
            client,
            token: tokio::sync::OnceCell::new(),
        })
    }

    /// An access token from the service account (none for an emulator), fetched once.
    pub async fn token(&self) -> ApiResult<Option<String>> {
        self.token.get_or_try_init(|| self.fetch_token()).await.cloned()
    }

    async fn fetch_token(&self) -> ApiResult<Option<String>> {
        let Some(sa) = &self.account else { return Ok(None) };
        #[allow(clippy::disallowed_methods)]
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let claims = serde_json::json!({
            "iss": sa.client_email, "scope": SCOPE, "aud": sa.token_uri, "iat": now, "exp": now + 3600,
        });
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
        if !sa.private_key_id.is_empty() {
            header.kid = Some(sa.private_key_id.clone());
        }
        let key = jsonwebtoken::EncodingKey::from_rsa_pem(sa.private_key.as_bytes()).map_err(ApiError::internal)?;
        let assertion = jsonwebtoken::encode(&header, &claims, &key).map_err(ApiError::internal)?;
        let r = self
            .client
            .post(&sa.token_uri)
            .form(&[("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"), ("assertion", assertion.as_str())])
            .send()
            .await
            .map_err(|e| {
                tracing::warn!(error = %e, "the token endpoint of a service account is unreachable");
                unavailable("the token endpoint of the service account is unreachable")
            })?;
        match r.status().as_u16() {
            200..=299 => {}
            // Google's token service is busy or failing: try again.
            s @ (429 | 500..) => {
                return Err(unavailable(format!("the token endpoint of the service account answered HTTP {s}")));
            }
            // The credentials were refused (invalid_grant, invalid_client), or the key file's
            // token_uri answers otherwise (a redirect is not followed): the caller's to mend.
            s => return Err(ApiError::denied(format!("the service account was refused a token (HTTP {s})"))),
        }
        #[derive(Deserialize)]
        struct Token {
            access_token: String,
        }
        let answer = read_capped(r, MAX_TOKEN_ANSWER).await.map_err(|e| match e {
            Capped::TooLarge => unavailable("the token endpoint answered badly: the answer is larger than 64 KiB"),
            Capped::Read(e) => unavailable(format!("the token endpoint answered badly: {e}")),
        })?;
        let t: Token = serde_json::from_slice(&answer)
            .map_err(|e| unavailable(format!("the token endpoint answered badly: {e}")))?;
        Ok(Some(t.access_token))
    }

    fn check(&self, status: reqwest::StatusCode) -> ApiResult<()> {
        match status.as_u16() {
            200..=299 => Ok(()),
            401 | 403 => {
                Err(ApiError::denied(format!("access to bucket {} was denied (HTTP {})", self.bucket, status.as_u16())))
            }
            404 => Err(ApiError::not_found(format!("bucket {} or object {} not found", self.bucket, self.path))),
            // A name the storage service does not take (a bucket name of a part over 63
            // characters, an object name with a line break): the caller's to mend.
            400 => Err(ApiError::invalid(format!(
                "the storage service refused the request (HTTP 400): check bucket {} and path",
                self.bucket
            ))),
            s => Err(unavailable(format!("the storage service answered HTTP {s}"))),
        }
    }

    /// The object name as one path segment or query value: every byte but RFC 3986's
    /// unreserved characters percent-encoded (`/` as `%2F`, a space as `%20`, `+` as `%2B`).
    fn object(&self) -> String {
        let mut out = String::with_capacity(self.path.len() * 3);
        for b in self.path.bytes() {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                out.push(char::from(b));
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
        out
    }

    /// Uploads `body` (shared, not copied: an export may be hundreds of megabytes).
    pub async fn upload(&self, body: axum::body::Bytes) -> ApiResult<()> {
        let token = self.token().await?;
        let url =
            format!("{}/upload/storage/v1/b/{}/o?uploadType=media&name={}", self.base, self.bucket, self.object());
        let mut req = self.client.post(url).header("content-type", "application/json").body(body);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let r = req.send().await.map_err(|e| unavailable(format!("the bucket is unreachable: {e}")))?;
        self.check(r.status())
    }

    pub async fn download(&self) -> ApiResult<Vec<u8>> {
        let token = self.token().await?;
        let url = format!("{}/storage/v1/b/{}/o/{}?alt=media", self.base, self.bucket, self.object());
        let mut req = self.client.get(url);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let r = req.send().await.map_err(|e| unavailable(format!("the bucket is unreachable: {e}")))?;
        self.check(r.status())?;
        read_capped(r, MAX_OBJECT).await.map_err(|e| match e {
            Capped::TooLarge => ApiError::invalid("the object is larger than 512 MiB"),
            Capped::Read(e) => unavailable(format!("reading the object failed: {e}")),
        })
    }
}

/// Whether a service account's `token_uri` may be asked for a token; why not otherwise.
fn check_token_uri(settings: &Settings, raw: &str) -> Result<(), String> {
    let uri = url::Url::parse(raw.trim()).map_err(|_| "is not a URL".to_string())?;
    let google = uri.scheme() == "https" && uri.host_str() == Some(GOOGLE_TOKEN_HOST) && uri.port().is_none();
    if google {
        return Ok(());
    }
    let configured = settings.gcs_endpoint != DEFAULT_GCS_ENDPOINT;
    let endpoint = url::Url::parse(&settings.gcs_endpoint).ok().filter(|_| configured);
    if endpoint.is_some_and(|e| e.origin() == uri.origin()) {
        return Ok(());
    }
    let or = if configured { " or on the configured storage endpoint" } else { "" };
    Err(format!("must be on https://{GOOGLE_TOKEN_HOST}{or}"))
}

/// Why a capped read failed.
enum Capped {
    TooLarge,
    Read(reqwest::Error),
}

/// Reads a response body of at most `cap` bytes, counted as they come, so a body without a
/// `Content-Length` (or with a false one) is held to the same cap.
async fn read_capped(mut r: reqwest::Response, cap: usize) -> Result<Vec<u8>, Capped> {
    let announced = r.content_length().unwrap_or(0);
    if announced > cap as u64 {
        return Err(Capped::TooLarge);
    }
    let mut out = Vec::with_capacity(announced.min(16 << 20) as usize);
    while let Some(chunk) = r.chunk().await.map_err(Capped::Read)? {
        if out.len() + chunk.len() > cap {
            return Err(Capped::TooLarge);
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}
