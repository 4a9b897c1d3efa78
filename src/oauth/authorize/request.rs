//! Parsing and checking an authorization request (OIDC Core 3.1.2, RFC 6749 4.1.1, RFC 7636).
//! Problems with the client or its redirect URI are shown on a latch page; every other problem
//! goes back to the client's redirect URI.

use serde::{Deserialize, Serialize};

use crate::domain::enums::{OidcAuthMethod, OidcGrantType, OidcResponseType};
use crate::oauth::client::{self, OidcClient};
use crate::oauth::error::{ErrorCode, OAuthError};
use crate::oauth::scope::Scopes;
use crate::oauth::tokens::TokenService;
use crate::store::Conn;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResponseType {
    Code,
    IdToken,
    IdTokenToken,
}

impl ResponseType {
    pub fn is_implicit(self) -> bool {
        self != ResponseType::Code
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResponseMode {
    Query,
    Fragment,
    FormPost,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Prompt {
    None,
    Login,
    SelectAccount,
    Create,
    Consent,
}

/// A checked authorization request, kept with the pending request while the user signs in.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AuthParams {
    pub client_id: String,
    pub redirect_uri: String,
    pub response_type: ResponseType,
    pub response_mode: ResponseMode,
    pub scopes: Vec<String>,
    pub state: Option<String>,
    pub nonce: Option<String>,
    pub code_challenge: Option<String>,
    pub prompt: Vec<Prompt>,
    pub max_age: Option<i64>,
    /// The subject of a valid `id_token_hint`.
    pub hint_sub: Option<String>,
    pub login_hint: Option<String>,
    pub ui_locales: Vec<String>,
}

impl AuthParams {
    pub fn has_prompt(&self, p: Prompt) -> bool {
        self.prompt.contains(&p)
    }

    pub fn scopes(&self) -> Scopes {
        Scopes(self.scopes.clone())
    }
}

/// Why a request is refused.
#[derive(Debug)]
pub enum Rejection {
    /// The redirect URI cannot be used: the error is shown on a latch page.
    Page(PageError),
    /// The error goes back to the client.
    Redirect { redirect_uri: String, mode: ResponseMode, state: Option<String>, error: OAuthError },
}

/// What the person sees when the request cannot go back to the application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageError {
    ClientMissing,
    ClientUnknown,
    RedirectMissing,
    RedirectUnknown,
    Repeated(String),
    TooLong(String),
    /// A value holds a character no parameter may hold (NUL).
    Invalid(String),
    /// The store failed while loading the client.
    Unavailable(String),
}

impl std::fmt::Display for PageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PageError::ClientMissing => f.write_str("the request has no client_id"),
            PageError::ClientUnknown => f.write_str("the application is unknown or inactive"),
            PageError::RedirectMissing => f.write_str("the request has no redirect_uri"),
            PageError::RedirectUnknown => f.write_str("the redirect_uri is not registered for this application"),
            PageError::Repeated(p) => write!(f, "the parameter {p} is repeated"),
            PageError::TooLong(p) => write!(f, "the parameter {p} is too long"),
            PageError::Invalid(p) => write!(f, "the parameter {p} contains an invalid character"),
            PageError::Unavailable(e) => write!(f, "the client could not be loaded: {e}"),
        }
    }
}

impl PageError {
    /// The message in the person's language.
    pub fn message(&self, t: &crate::login::i18n::Texts) -> String {
        match self {
            PageError::ClientMissing => t.err_client_missing.to_string(),
            PageError::ClientUnknown => t.err_client_unknown.to_string(),
            PageError::RedirectMissing => t.err_redirect_missing.to_string(),
            PageError::RedirectUnknown => t.err_redirect_unknown.to_string(),
            PageError::Repeated(p) => t.err_param_repeated.replace("{}", p),
            PageError::TooLong(p) => t.err_param_too_long.replace("{}", p),
            PageError::Invalid(p) => t.err_param_invalid.replace("{}", p),
            PageError::Unavailable(_) => t.err_unavailable.to_string(),
        }
    }
}

/// Longest value accepted for any parameter.
const MAX_PARAM: usize = 4096;

struct Raw<'a>(&'a [(String, String)]);

impl<'a> Raw<'a> {
    fn all(&self, name: &str) -> Vec<&'a str> {
        self.0.iter().filter(|(k, _)| k == name).map(|(_, v)| v.as_str()).collect()
    }

    /// The value of a parameter; an empty value counts as absent (OIDC Core 3.1.2.1).
    fn one(&self, name: &str) -> Result<Option<&'a str>, PageError> {
        match self.all(name).as_slice() {
            [] | [""] => Ok(None),
            [v] if v.len() > MAX_PARAM => Err(PageError::TooLong(name.to_string())),
            [v] if v.contains('\0') => Err(PageError::Invalid(name.to_string())),
            [v] => Ok(Some(v)),
            _ => Err(PageError::Repeated(name.to_string())),
        }
    }

    /// [`Raw::one`] with the problem as an `error_description`.
    fn text(&self, name: &str) -> Result<Option<&'a str>, String> {
        self.one(name).map_err(|e| e.to_string())
    }
}

pub fn parse_response_type(v: &str) -> Option<ResponseType> {
    let mut parts: Vec<&str> = v.split(' ').filter(|p| !p.is_empty()).collect();
    parts.sort_unstable();
    match parts.as_slice() {
        ["code"] => Some(ResponseType::Code),
        ["id_token"] => Some(ResponseType::IdToken),
        ["id_token", "token"] => Some(ResponseType::IdTokenToken),
        _ => None,
    }
}

fn valid_challenge(c: &str) -> bool {
    (43..=128).contains(&c.len())
        && c.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
}

/// What verifying an `id_token_hint` found.
enum Hint {
    Valid(HintClaims),
    /// Signed by a key latch no longer has (retired and removed while the relying party kept
    /// its ID token): it cannot be checked, which is not the same as forged, so it counts as no
    /// hint (as at end_session) rather than failing every later silent sign-in.
    SignerGone,
    Invalid,
}

#[derive(Deserialize)]
struct HintClaims {
    iss: String,
    sub: String,
    #[serde(default)]
    aud: serde_json::Value,
}

/// Checks a request. `tokens` verifies `id_token_hint`s (any published key; expiry ignored),
/// which must name `issuer` (an issuer latch had before a change of its external URL is
/// another's).
pub async fn check(
    cache: &crate::cache::ConfigCache,
    c: &mut Conn,
    tokens: &TokenService,
    issuer: &str,
    raw: &[(String, String)],
) -> Result<(AuthParams, OidcClient), Rejection> {
    let client_id =
        Raw(raw).one("client_id").map_err(Rejection::Page)?.ok_or(Rejection::Page(PageError::ClientMissing))?;
    let client = client::load(cache, c, client_id)
        .await
        .map_err(|e| Rejection::Page(PageError::Unavailable(e.to_string())))?
        .ok_or(Rejection::Page(PageError::ClientUnknown))?;
    // A hint signed by a key another replica activated since this one's last reload: learnt
    // first, so that the hint verifies.
    if let Ok(Some(hint)) = Raw(raw).one("id_token_hint") {
        tokens.learn_signer(hint).await;
    }
    let verify = |hint: &str| match tokens.verify_id_token::<HintClaims>(hint) {
        Some(h) if h.iss == issuer => Hint::Valid(h),
        None if tokens.signer_known(hint) == Some(false) => Hint::SignerGone,
        _ => Hint::Invalid,
    };
    let params = check_for_client(client_id, &client, raw, &verify)?;
    Ok((params, client))
}

/// The client `fuzz` checks requests against in [`check_offline`]: a web application with the
/// code and implicit flows, redirect URI `https://app.example/cb`.
fn offline_client() -> OidcClient {
    use crate::domain::enums::{AppState, PrivateLabelingSetting, ProjectState};
    use crate::store::app::{App, AppKind, OidcConfig};
    let config = OidcConfig {
        redirect_uris: vec!["https://app.example/cb".into(), "http://127.0.0.1/cb".into()],
        response_types: vec![OidcResponseType::Code, OidcResponseType::IdToken, OidcResponseType::IdTokenToken],
        grant_types: vec![OidcGrantType::AuthorizationCode, OidcGrantType::Implicit],
        ..OidcConfig::default()
    };
    let auth_method = OidcAuthMethod::None;
    OidcClient {
        app: App {
            app_id: "app".into(),
            project_id: "project".into(),
            org_id: "org".into(),
            name: "fuzz".into(),
            state: AppState::Active,
            client_id: "fuzz".into(),
            secret_digest: None,
            kind: AppKind::Oidc { auth_method, config: config.clone() },
            created_at: 0,
            changed_at: 0,
        },
        config,
        auth_method,
        project: crate::store::project::Project {
            project_id: "project".into(),
            org_id: "org".into(),
            name: "fuzz".into(),
            state: ProjectState::Active,
            role_assertion: false,
            role_check: false,
            has_project_check: false,
            private_labeling: PrivateLabelingSetting::Unspecified,
            created_at: 0,
            changed_at: 0,
        },
    }
}

/// [`check`] without the store, for the fuzz targets: the request is checked against a fixed
/// public client (client id `fuzz`) and no `id_token_hint` verifies.
pub fn check_offline(raw: &[(String, String)]) -> Result<AuthParams, Rejection> {
    match Raw(raw).one("client_id").map_err(Rejection::Page)? {
        None => Err(Rejection::Page(PageError::ClientMissing)),
        Some(id @ "fuzz") => check_for_client(id, &offline_client(), raw, &|_| Hint::Invalid),
        Some(_) => Err(Rejection::Page(PageError::ClientUnknown)),
    }
}

/// Everything [`check`] does once the client is loaded (by `client_id`, as requested).
/// `verify_hint` verifies an `id_token_hint`.
fn check_for_client(
    client_id: &str,
    client: &OidcClient,
    raw: &[(String, String)],
    verify_hint: &dyn Fn(&str) -> Hint,
) -> Result<AuthParams, Rejection> {
    let raw = Raw(raw);
    let redirect_uri =
        raw.one("redirect_uri").map_err(Rejection::Page)?.ok_or(Rejection::Page(PageError::RedirectMissing))?;
    if !client.redirect_allowed(redirect_uri) {
        return Err(Rejection::Page(PageError::RedirectUnknown));
    }
    let response_type = raw.one("response_type").ok().flatten().and_then(parse_response_type);
    let default_mode =
        if response_type.is_some_and(ResponseType::is_implicit) { ResponseMode::Fragment } else { ResponseMode::Query };
    // Invalid modes are ignored; tokens never travel in a query string.
    let response_mode = match raw.one("response_mode").ok().flatten() {
        Some("query") if !response_type.is_some_and(ResponseType::is_implicit) => ResponseMode::Query,
        Some("fragment") => ResponseMode::Fragment,
        Some("form_post") => ResponseMode::FormPost,
        _ => default_mode,
    };
    let state = raw.one("state").ok().flatten().map(str::to_string);
    let fail = |code: ErrorCode, d: String| Rejection::Redirect {
        redirect_uri: redirect_uri.to_string(),
        mode: response_mode,
        state: state.clone(),
        error: OAuthError::new(code, d),
    };
    let invalid = |d: String| fail(ErrorCode::InvalidRequest, d);

    // Every parameter may appear once.
    let mut seen: Vec<&str> = Vec::new();
    for (k, _) in raw.0 {
        if seen.contains(&k.as_str()) {
            return Err(invalid(format!("the parameter{} is repeated", quoted(k))));
        }
        seen.push(k);
    }
    if raw.text("state").is_err() {
        return Err(invalid("the parameter state is too long".into()));
    }
    if raw.text("request").map_err(invalid)?.is_some() {
        return Err(fail(ErrorCode::RequestNotSupported, "request objects are not supported".into()));
    }
    if raw.text("request_uri").map_err(invalid)?.is_some() {
        return Err(fail(ErrorCode::RequestUriNotSupported, "request_uri is not supported".into()));
    }
    let rt_raw = raw
        .text("response_type")
        .map_err(invalid)?
        .ok_or_else(|| invalid("the request has no response_type".into()))?;
    let response_type = response_type.ok_or_else(|| {
        fail(ErrorCode::UnsupportedResponseType, format!("the response type{} is not supported", quoted(rt_raw)))
    })?;
    let allowed = match response_type {
        ResponseType::Code => OidcResponseType::Code,
        ResponseType::IdToken => OidcResponseType::IdToken,
        ResponseType::IdTokenToken => OidcResponseType::IdTokenToken,
    };
    if !client.config.response_types.contains(&allowed) {
        return Err(fail(
            ErrorCode::UnauthorizedClient,
            format!("the application may not use the response type{}", quoted(rt_raw)),
        ));
    }
    // A code only for an application that may redeem it (one set up for the device flow alone
    // has the code response type too, as ZITADEL's configuration allows).
    if response_type == ResponseType::Code && !client.config.grant_types.contains(&OidcGrantType::AuthorizationCode) {
        return Err(fail(
            ErrorCode::UnauthorizedClient,
            "the application may not use the authorization_code grant".into(),
        ));
    }
    let scopes = Scopes::parse(raw.text("scope").map_err(invalid)?.unwrap_or(""))
        .ok_or_else(|| fail(ErrorCode::InvalidScope, "the scope is malformed".into()))?;
    if !scopes.has("openid") {
        return Err(fail(ErrorCode::InvalidScope, "the scope must contain openid".into()));
    }
    let nonce = raw.text("nonce").map_err(invalid)?.map(str::to_string);
    if response_type.is_implicit() && nonce.is_none() {
        return Err(invalid("a nonce is required for the implicit flow".into()));
    }
    let code_challenge = raw.text("code_challenge").map_err(invalid)?;
    let method = raw.text("code_challenge_method").map_err(invalid)?;
    match (code_challenge, method) {
        (Some(ch), Some("S256")) if valid_challenge(ch) => {}
        (Some(_), Some("S256")) => return Err(invalid("the code_challenge is malformed".into())),
        (Some(_), None) => return Err(invalid("code_challenge_method must be S256".into())),
        (_, Some(m)) if m != "S256" => {
            return Err(invalid(format!("the code_challenge_method{} is not supported; use S256", quoted(m))));
        }
        (None, Some(_)) => {
            return Err(invalid("code_challenge_method without code_challenge".into()));
        }
        (None, None) if client.auth_method == OidcAuthMethod::None && response_type == ResponseType::Code => {
            return Err(invalid("public clients must use PKCE (code_challenge with S256)".into()));
        }
        _ => {}
    }
    let mut prompt = Vec::new();
    for p in raw.text("prompt").map_err(invalid)?.unwrap_or("").split(' ').filter(|p| !p.is_empty()) {
        let v = match p {
            "none" => Prompt::None,
            "login" => Prompt::Login,
            "select_account" => Prompt::SelectAccount,
            "create" => Prompt::Create,
            "consent" => Prompt::Consent,
            other => {
                return Err(invalid(format!("the prompt value{} is not supported", quoted(other))));
            }
        };
        if !prompt.contains(&v) {
            prompt.push(v);
        }
    }
    if prompt.contains(&Prompt::None) && prompt.len() > 1 {
        return Err(invalid("prompt=none cannot be combined with other values".into()));
    }
    let max_age = match raw.text("max_age").map_err(invalid)? {
        Some(v) => Some(
            v.parse::<i64>()
                .ok()
                .filter(|n| *n >= 0)
                .ok_or_else(|| invalid("max_age must be a non-negative integer".into()))?,
        ),
        None => None,
    };
    let hint_sub = match raw.text("id_token_hint").map_err(invalid)?.map(verify_hint) {
        None | Some(Hint::SignerGone) => None,
        Some(Hint::Invalid) => return Err(invalid("the id_token_hint is not a valid ID token of this issuer".into())),
        Some(Hint::Valid(claims)) => {
            let aud_ok = match &claims.aud {
                serde_json::Value::String(a) => a == client_id,
                serde_json::Value::Array(a) => a.iter().any(|x| x.as_str() == Some(client_id)),
                _ => false,
            };
            if !aud_ok {
                return Err(invalid("the id_token_hint was issued to another client".into()));
            }
            Some(claims.sub)
        }
    };
    let login_hint = raw
        .text("login_hint")
        .map_err(invalid)?
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty() && s.len() <= 200);
    let ui_locales = raw
        .text("ui_locales")
        .map_err(invalid)?
        .unwrap_or("")
        .split(' ')
        .filter(|s| !s.is_empty())
        .take(10)
        .map(str::to_string)
        .collect();
    Ok(AuthParams {
        client_id: client_id.to_string(),
        redirect_uri: redirect_uri.to_string(),
        response_type,
        response_mode,
        scopes: scopes.known().0,
        state,
        nonce,
        code_challenge: code_challenge.map(str::to_string),
        prompt,
        max_age,
        hint_sub,
        login_hint,
        ui_locales,
    })
}

/// A value of the request quoted in an error description, which goes back to the client with
/// the redirect and which a client may show: only a short, plain value (a parameter name, a
/// response type, a method), never text someone put into a link to have it shown in latch's
/// name on the client's page (RFC 6749 4.1.2.1 limits the description to plain ASCII too).
fn quoted(v: &str) -> String {
    let plain = |b: u8| b.is_ascii_alphanumeric() || b"_-".contains(&b);
    if !v.is_empty() && v.len() <= 32 && v.bytes().all(plain) { format!(" '{v}'") } else { String::new() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn response_types() {
        assert_eq!(parse_response_type("code"), Some(ResponseType::Code));
        assert_eq!(parse_response_type("token id_token"), Some(ResponseType::IdTokenToken));
        assert_eq!(parse_response_type("id_token"), Some(ResponseType::IdToken));
        assert_eq!(parse_response_type("token"), None);
        assert_eq!(parse_response_type("code id_token"), None);
        assert!(valid_challenge(&"a".repeat(43)));
        assert!(!valid_challenge("short"));
        assert!(!valid_challenge(&format!("{}=", "a".repeat(43))));
    }
}
