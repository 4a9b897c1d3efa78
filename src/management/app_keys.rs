//! Applications' public keys, for private_key_jwt client authentication.

use axum::Json;
use axum::extract::{Path, State};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::apps::load_app;
use super::machine::{KeyView, check_key_input, key_material, paginate, store_key};
use crate::api::error::ApiResult;
use crate::api::types::{Details, DetailsResponse, ListQuery, ListResponse};
use crate::api::{ApiError, ApiJson, Caller};
use crate::app::AppState;
use crate::domain::enums::{ApiAuthMethod, KeyType, OidcAuthMethod};
use crate::domain::roles::Permission;
use crate::store::app::{App, AppKind};
use crate::store::key::{self, Owner};

#[derive(Deserialize, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct AddAppKeyRequest {
    #[serde(rename = "type")]
    #[schema(required = true, schema_with = crate::management::machine::json_key_type_schema)]
    key_type: KeyType,
    expiration_date: Option<String>,
    public_key: Option<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddAppKeyResponse {
    id: String,
    details: Details,
    #[serde(skip_serializing_if = "Option::is_none")]
    key_details: Option<String>,
}

/// Refuses an application that does not authenticate with keys.
fn uses_keys(a: &App) -> ApiResult<()> {
    let uses = match a.kind {
        AppKind::Oidc { auth_method, .. } => auth_method == OidcAuthMethod::PrivateKeyJwt,
        AppKind::Api { auth_method } => auth_method == ApiAuthMethod::PrivateKeyJwt,
    };
    if !uses {
        return Err(ApiError::precondition("keys are only for applications with the auth method PRIVATE_KEY_JWT")
            .with_id("APP-NoKeys"));
    }
    Ok(())
}

#[utoipa::path(post, path = "/projects/{project_id}/apps/{app_id}/keys", request_body = AddAppKeyRequest, responses((status = 200, body = AddAppKeyResponse)))]
pub async fn add_key(
    State(state): State<AppState>,
    caller: Caller,
    Path((project_id, app_id)): Path<(String, String)>,
    ApiJson(req): ApiJson<AddAppKeyRequest>,
) -> ApiResult<Json<AddAppKeyResponse>> {
    caller.require(Permission::AppWrite)?;
    let now = state.clock.now();
    let input = check_key_input(
        "AddAppKeyRequest",
        req.key_type,
        req.expiration_date.as_deref(),
        req.public_key.as_deref(),
        now,
    )?;
    let a = {
        let mut c = state.db.conn().await?;
        load_app(&mut c, &caller, &project_id, &app_id).await?
    };
    uses_keys(&a)?;
    let material = key_material(input).await?;
    // Stored only if the application is still there and still uses keys (it may have been
    // removed or changed while the pair was generated).
    let mut tx = state.db.begin().await?;
    uses_keys(&load_app(&mut tx, &caller, &project_id, &app_id).await?)?;
    let (key_id, private_pem) = store_key(&mut tx, Owner::App, &a.app_id, material, now).await?;
    tx.commit().await?;
    let key_details = private_pem.map(|pem| {
        let file =
            json!({"type": "application", "keyId": key_id, "key": pem, "appId": a.app_id, "clientId": a.client_id});
        STANDARD.encode(file.to_string())
    });
    Ok(Json(AddAppKeyResponse { id: key_id, details: Details::created(now, &a.org_id), key_details }))
}

#[derive(Deserialize, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ListKeysRequest {
    query: ListQuery,
}

#[utoipa::path(post, path = "/projects/{project_id}/apps/{app_id}/keys/_search", request_body = ListKeysRequest, responses((status = 200, body = ListResponse<KeyView>)))]
pub async fn list_keys(
    State(state): State<AppState>,
    caller: Caller,
    Path((project_id, app_id)): Path<(String, String)>,
    ApiJson(req): ApiJson<ListKeysRequest>,
) -> ApiResult<Json<ListResponse<KeyView>>> {
    caller.require(Permission::AppRead)?;
    let mut c = state.db.conn().await?;
    let a = load_app(&mut c, &caller, &project_id, &app_id).await?;
    let keys = key::list_keys(&mut c, Owner::App, &app_id).await?;
    Ok(Json(paginate(keys, &req.query, state.clock.now(), |k| KeyView::new(k, &a.org_id))?))
}

#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = GetAppKeyResponse)]
pub struct GetKeyResponse {
    key: KeyView,
}

#[utoipa::path(get, path = "/projects/{project_id}/apps/{app_id}/keys/{key_id}", responses((status = 200, body = GetKeyResponse)))]
pub async fn get_key(
    State(state): State<AppState>,
    caller: Caller,
    Path((project_id, app_id, key_id)): Path<(String, String, String)>,
) -> ApiResult<Json<GetKeyResponse>> {
    caller.require(Permission::AppRead)?;
    let mut c = state.db.conn().await?;
    let a = load_app(&mut c, &caller, &project_id, &app_id).await?;
    let k = key::get_key(&mut c, Owner::App, &app_id, &key_id)
        .await?
        .ok_or_else(|| ApiError::not_found("key not found").with_id("KEY-NotFound"))?;
    Ok(Json(GetKeyResponse { key: KeyView::new(&k, &a.org_id) }))
}

#[utoipa::path(delete, path = "/projects/{project_id}/apps/{app_id}/keys/{key_id}", responses((status = 200, body = DetailsResponse)))]
pub async fn remove_key(
    State(state): State<AppState>,
    caller: Caller,
    Path((project_id, app_id, key_id)): Path<(String, String, String)>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::AppWrite)?;
    let now = state.clock.now();
    let mut c = state.db.conn().await?;
    let a = load_app(&mut c, &caller, &project_id, &app_id).await?;
    if !key::delete_key(&mut c, Owner::App, &app_id, &key_id).await? {
        return Err(ApiError::not_found("key not found").with_id("KEY-NotFound"));
    }
    Ok(Json(DetailsResponse { details: Details::changed(now, &a.org_id) }))
}
