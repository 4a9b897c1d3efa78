//! The OpenID Connect Discovery document, built at start in one variant per combination of the
//! instance features it reflects (back-channel logout, token exchange) and served from memory;
//! the features come from the configuration cache (`crate::cache`), so a change shows within its
//! TTL on every replica.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use serde_json::json;

use crate::app::AppState;
use crate::domain::settings::Features;
use crate::paths;

/// Client authentication methods per endpoint (SPEC.md 2.1).
const ALL_AUTH_METHODS: [&str; 4] = ["none", "client_secret_basic", "client_secret_post", "private_key_jwt"];
const INTROSPECTION_AUTH_METHODS: [&str; 2] = ["client_secret_basic", "private_key_jwt"];
/// Algorithms accepted for client assertions (private_key_jwt).
const ASSERTION_ALGS: [&str; 3] = ["RS256", "ES256", "EdDSA"];

/// The document for an instance with `features` on: back-channel logout is advertised only
/// when the instance sends logout tokens, and the token exchange grant only when it is enabled
/// (both are omitted otherwise, as ZITADEL does for back-channel logout).
pub fn document(issuer: &str, features: &Features) -> serde_json::Value {
    let url = |p: &str| format!("{issuer}{p}");
    let mut grants = vec![
        "authorization_code",
        "implicit",
        "refresh_token",
        "client_credentials",
        "urn:ietf:params:oauth:grant-type:jwt-bearer",
    ];
    if features.oidc_token_exchange == Some(true) {
        grants.push("urn:ietf:params:oauth:grant-type:token-exchange");
    }
    let mut doc = json!({
        "issuer": issuer,
        "authorization_endpoint": url(paths::AUTHORIZE),
        "token_endpoint": url(paths::TOKEN),
        "introspection_endpoint": url(paths::INTROSPECT),
        "userinfo_endpoint": url(paths::USERINFO),
        "revocation_endpoint": url(paths::REVOKE),
        "end_session_endpoint": url(paths::END_SESSION),
        "jwks_uri": url(paths::KEYS),
        "scopes_supported": ["openid", "profile", "email", "phone", "address", "offline_access"],
        "response_types_supported": ["code", "id_token", "id_token token"],
        "response_modes_supported": ["query", "fragment", "form_post"],
        "grant_types_supported": grants,
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256", "ES256", "EdDSA"],
        "token_endpoint_auth_methods_supported": ALL_AUTH_METHODS,
        "token_endpoint_auth_signing_alg_values_supported": ASSERTION_ALGS,
        "introspection_endpoint_auth_methods_supported": INTROSPECTION_AUTH_METHODS,
        "introspection_endpoint_auth_signing_alg_values_supported": ASSERTION_ALGS,
        "revocation_endpoint_auth_methods_supported": ALL_AUTH_METHODS,
        "revocation_endpoint_auth_signing_alg_values_supported": ASSERTION_ALGS,
        "claims_supported": [
            "sub", "aud", "exp", "iat", "iss", "auth_time", "nonce", "acr", "amr", "c_hash", "at_hash",
            "act", "scopes", "client_id", "azp", "preferred_username", "name", "family_name",
            "given_name", "nickname", "locale", "gender", "updated_at", "email", "email_verified",
            "phone_number", "phone_number_verified", "sid"
        ],
        "code_challenge_methods_supported": ["S256"],
        "prompt_values_supported": ["none", "login", "consent", "select_account", "create"],
        "ui_locales_supported": ["en", "de"],
        "request_parameter_supported": false,
        "request_uri_parameter_supported": false,
        "claims_parameter_supported": false,
        "authorization_response_iss_parameter_supported": true
    });
    if features.enable_back_channel_logout == Some(true) {
        doc["backchannel_logout_supported"] = json!(true);
        doc["backchannel_logout_session_supported"] = json!(true);
    }
    doc
}

/// The rendered documents, one per combination of the two features.
#[derive(Clone, Debug)]
pub struct Documents([Bytes; 4]);

impl Documents {
    pub fn render(issuer: &str) -> Self {
        Self(std::array::from_fn(|i| {
            let features =
                Features { enable_back_channel_logout: Some(i & 1 != 0), oidc_token_exchange: Some(i & 2 != 0) };
            Bytes::from(document(issuer, &features).to_string())
        }))
    }

    pub fn get(&self, features: &Features) -> Bytes {
        let i = usize::from(features.enable_back_channel_logout == Some(true))
            | usize::from(features.oidc_token_exchange == Some(true)) << 1;
        self.0[i].clone()
    }
}

pub async fn handler(State(state): State<AppState>) -> impl IntoResponse {
    // Read from the cache (the store once per TTL); if the store cannot answer, the document
    // without the optional features (a client then does not count on them), not to be kept.
    let (features, cache) = match state.cache.features(&mut state.db.lazy()).await {
        Ok(f) => (f, "public, max-age=300"),
        Err(e) => {
            tracing::warn!(error = %e, "discovery: the instance features could not be read");
            (Features::default(), "no-store")
        }
    };
    (
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, cache),
            (header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"),
        ],
        state.discovery.get(&features),
    )
}
