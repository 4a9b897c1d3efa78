//! Signing key management. A created key is published at once and signs only after it is
//! activated (by this API or by the scheduled rotation). The active key cannot be deleted.

use axum::Json;
use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::api::error::ApiResult;
use crate::api::types::ts;
use crate::api::{ApiError, ApiJson, Caller};
use crate::app::AppState;
use crate::crypto::keys::KeySpec;
use crate::domain::roles::Permission;
use crate::keys::{KeyError, KeyState, LoadedKey};
use crate::store::web_key;

fn key_error(e: KeyError) -> ApiError {
    match e {
        KeyError::Store(s) => s.into(),
        other => ApiError::internal(other),
    }
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebKeyView {
    id: String,
    creation_date: String,
    change_date: String,
    #[schema(value_type = String, example = "STATE_ACTIVE")]
    state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    rsa: Option<RsaView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ecdsa: Option<EcdsaView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ed25519: Option<Ed25519View>,
}

#[derive(Serialize, ToSchema)]
pub struct RsaView {
    #[schema(example = "RSA_BITS_2048")]
    bits: String,
    #[schema(value_type = String, example = "RSA_HASHER_SHA256")]
    hasher: &'static str,
}

#[derive(Serialize, ToSchema)]
pub struct EcdsaView {
    #[schema(value_type = String, example = "ECDSA_CURVE_P256")]
    curve: &'static str,
}

#[derive(Serialize, ToSchema)]
pub struct Ed25519View {}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListWebKeysResponse {
    web_keys: Vec<WebKeyView>,
}

/// The signing keys: published, active and retired.
#[utoipa::path(get, path = "/web_keys", responses((status = 200, body = ListWebKeysResponse)))]
pub async fn list(State(state): State<AppState>, caller: Caller) -> ApiResult<Json<ListWebKeysResponse>> {
    caller.require(Permission::WebKeyRead)?;
    state.keys.reload().await.map_err(key_error)?;
    let set = state.keys.current();
    let now = state.clock.now();
    let web_keys = set
        .keys
        .iter()
        .map(|k| {
            let (rsa, ecdsa, ed25519) = match k.spec.as_str() {
                "ecdsa-p256" => (None, Some(EcdsaView { curve: "ECDSA_CURVE_P256" }), None),
                "ed25519" => (None, None, Some(Ed25519View {})),
                other => {
                    let bits = other.trim_start_matches("rsa-");
                    (Some(RsaView { bits: format!("RSA_BITS_{bits}"), hasher: "RSA_HASHER_SHA256" }), None, None)
                }
            };
            WebKeyView {
                id: k.key_id.clone(),
                creation_date: ts(k.created_at),
                change_date: ts(k.changed_at),
                state: match set.state(k, now) {
                    KeyState::Initial => "STATE_INITIAL",
                    KeyState::Active => "STATE_ACTIVE",
                    KeyState::Inactive => "STATE_INACTIVE",
                },
                rsa,
                ecdsa,
                ed25519,
            }
        })
        .collect();
    Ok(Json(ListWebKeysResponse { web_keys }))
}

#[derive(Deserialize, Default, serde::Serialize, ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct RsaKeyInput {
    bits: Option<String>,
    hasher: Option<String>,
}

#[derive(Deserialize, Default, serde::Serialize, ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct EcdsaKeyInput {
    curve: Option<String>,
}

/// At most one of `rsa`, `ecdsa` and `ed25519`; none means RSA 2048.
#[derive(Deserialize, Default, serde::Serialize, ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct CreateWebKeyRequest {
    rsa: Option<RsaKeyInput>,
    ecdsa: Option<EcdsaKeyInput>,
    #[schema(value_type = Option<Object>)]
    ed25519: Option<serde_json::Map<String, Value>>,
}

impl CreateWebKeyRequest {
    fn spec(&self) -> ApiResult<KeySpec> {
        let chosen = [self.rsa.is_some(), self.ecdsa.is_some(), self.ed25519.is_some()].iter().filter(|b| **b).count();
        if chosen > 1 {
            return Err(ApiError::invalid("invalid CreateWebKeyRequest: choose one of rsa, ecdsa and ed25519"));
        }
        if let Some(r) = &self.rsa {
            let bits = match r.bits.as_deref().unwrap_or("RSA_BITS_2048") {
                "RSA_BITS_UNSPECIFIED" | "RSA_BITS_2048" => 2048,
                "RSA_BITS_3072" => 3072,
                "RSA_BITS_4096" => 4096,
                other => {
                    return Err(ApiError::invalid(format!(
                        "invalid CreateWebKeyRequest.rsa.bits: unknown value '{other}'"
                    )));
                }
            };
            match r.hasher.as_deref().unwrap_or("RSA_HASHER_SHA256") {
                "RSA_HASHER_UNSPECIFIED" | "RSA_HASHER_SHA256" => {}
                other => {
                    return Err(ApiError::invalid(format!(
                        "invalid CreateWebKeyRequest.rsa.hasher: '{other}' is not supported; latch signs RSA keys with SHA-256 (RS256)"
                    )));
                }
            }
            return Ok(KeySpec::Rsa { bits });
        }
        if let Some(e) = &self.ecdsa {
            return match e.curve.as_deref().unwrap_or("ECDSA_CURVE_P256") {
                "ECDSA_CURVE_UNSPECIFIED" | "ECDSA_CURVE_P256" => Ok(KeySpec::EcP256),
                other => Err(ApiError::invalid(format!(
                    "invalid CreateWebKeyRequest.ecdsa.curve: '{other}' is not supported; latch offers P-256 (ES256)"
                ))),
            };
        }
        if self.ed25519.is_some() {
            return Ok(KeySpec::Ed25519);
        }
        Ok(KeySpec::Rsa { bits: 2048 })
    }
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateWebKeyResponse {
    id: String,
    creation_date: String,
}

/// Creates a key; it is published at once and signs once activated.
#[utoipa::path(post, path = "/web_keys", request_body = CreateWebKeyRequest, responses((status = 200, body = CreateWebKeyResponse)))]
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<CreateWebKeyRequest>,
) -> ApiResult<Json<CreateWebKeyResponse>> {
    caller.require(Permission::WebKeyWrite)?;
    let spec = req.spec()?;
    let mut c = state.db.conn().await?;
    let id = state.keys.create(&mut c, spec, None).await.map_err(key_error)?;
    drop(c);
    state.keys.reload().await.map_err(key_error)?;
    Ok(Json(CreateWebKeyResponse { id, creation_date: ts(state.clock.now()) }))
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActivateWebKeyResponse {
    change_date: String,
}

/// Makes a key the signing key.
#[utoipa::path(post, path = "/web_keys/{id}/_activate", responses((status = 200, body = ActivateWebKeyResponse)))]
pub async fn activate(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<ActivateWebKeyResponse>> {
    caller.require(Permission::WebKeyWrite)?;
    // Read again: the key may have been created through another replica.
    state.keys.reload().await.map_err(key_error)?;
    let now = state.clock.now();
    let set = state.keys.current();
    let key = set.keys.iter().find(|k| k.key_id == id);
    match key {
        None => return Err(ApiError::not_found("web key not found").with_id("WEBKEY-NotFound")),
        Some(k) if set.state(k, now) == KeyState::Active => {}
        Some(_) => {
            let mut c = state.db.conn().await?;
            if !web_key::schedule(&mut c, &id, now, now, false).await? {
                return Err(ApiError::not_found("web key not found").with_id("WEBKEY-NotFound"));
            }
            drop(c);
            state.keys.reload().await.map_err(key_error)?;
        }
    }
    Ok(Json(ActivateWebKeyResponse { change_date: ts(now) }))
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeleteWebKeyResponse {
    deletion_date: String,
}

/// Deletes a key that does not sign.
#[utoipa::path(delete, path = "/web_keys/{id}", responses((status = 200, body = DeleteWebKeyResponse)))]
pub async fn remove(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<DeleteWebKeyResponse>> {
    caller.require(Permission::WebKeyWrite)?;
    state.keys.reload().await.map_err(key_error)?;
    let now = state.clock.now();
    let set = state.keys.current();
    let not_found = || ApiError::not_found("web key not found").with_id("WEBKEY-NotFound");
    let seen = match set.keys.iter().find(|k| k.key_id == id) {
        None => return Err(not_found()),
        Some(k) if set.state(k, now) == KeyState::Active => {
            return Err(ApiError::precondition("the active key cannot be deleted; activate another key first")
                .with_id("WEBKEY-Active"));
        }
        Some(k) => k.activate_at,
    };
    // Deleted only in the state seen here: a replica that activated it meanwhile wins.
    let mut c = state.db.conn().await?;
    let deleted = web_key::delete_inactive(&mut c, &id, seen, now, state.keys.stale_margin()).await?;
    drop(c);
    state.keys.reload().await.map_err(key_error)?;
    match deleted {
        true => Ok(Json(DeleteWebKeyResponse { deletion_date: ts(now) })),
        false if LoadedKey::find(&state.keys.current(), &id).is_none() => Err(not_found()),
        false => Err(ApiError::precondition(
            "the key signs, signed or is to sign too close to now for every replica to have let go of it (or it was activated meanwhile); try again later",
        )
        .with_id("WEBKEY-Changed")),
    }
}
