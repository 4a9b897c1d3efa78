//! The OpenID Connect Discovery document, built once at start and served from memory.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use serde_json::json;

use crate::app::AppState;
use crate::paths;

/// Client authentication methods per endpoint (SPEC.md 2.1).
const ALL_AUTH_METHODS: [&str; 4] = ["none", "client_secret_basic", "client_secret_post", "private_key_jwt"];
const INTROSPECTION_AUTH_METHODS: [&str; 2] = ["client_secret_basic", "private_key_jwt"];
/// Algorithms accepted for client assertions (private_key_jwt).
const ASSERTION_ALGS: [&str; 3] = ["RS256", "ES256", "EdDSA"];

pub fn document(issuer: &str) -> serde_json::Value {
    let url = |p: &str| format!("{issuer}{p}");
    json!({
        "issuer": issuer,
        "authorization_endpoint": url(paths::AUTHORIZE),
        "token_endpoint": url(paths::TOKEN),
        "introspection_endpoint": url(paths::INTROSPECT),
        "userinfo_endpoint": url(paths::USERINFO),
        "revocation_endpoint": url(paths::REVOKE),
        "end_session_endpoint": url(paths::END_SESSION),
        "backchannel_logout_supported": true,
        "backchannel_logout_session_supported": true,
        "jwks_uri": url(paths::KEYS),
        "scopes_supported": ["openid", "profile", "email", "phone", "address", "offline_access"],
        "response_types_supported": ["code", "id_token", "id_token token"],
        "response_modes_supported": ["query", "fragment", "form_post"],
        "grant_types_supported": [
            "authorization_code",
            "implicit",
            "refresh_token",
            "client_credentials",
            "urn:ietf:params:oauth:grant-type:jwt-bearer",
            "urn:ietf:params:oauth:grant-type:token-exchange"
        ],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256", "ES256", "EdDSA"],
        "request_object_signing_alg_values_supported": ["RS256"],
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
        "ui_locales_supported": ["en", "de"],
        "request_parameter_supported": false,
        "request_uri_parameter_supported": false,
        "claims_parameter_supported": false,
        "authorization_response_iss_parameter_supported": true
    })
}

pub fn render(issuer: &str) -> Bytes {
    Bytes::from(document(issuer).to_string())
}

pub async fn handler(State(state): State<AppState>) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "public, max-age=300"),
            (header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"),
        ],
        state.discovery.clone(),
    )
}
