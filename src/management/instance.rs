//! What a client of the API learns about the instance itself: GetIAM, GetOIDCInformation and
//! the API's own health check.

use axum::Json;
use axum::extract::State;
use serde::Serialize;

use crate::api::error::ApiResult;
use crate::api::{ApiError, Caller, auth::API_AUDIENCE};
use crate::app::AppState;
use crate::paths::DISCOVERY;

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetIamResponse {
    /// The organization global objects belong to: the default organization (the platform latch
    /// follows sets both to its first organization).
    pub global_org_id: String,
    /// The project of the management API: the audience its tokens carry.
    pub iam_project_id: String,
    /// The organization created at the first start (registration, the operator's console).
    pub default_org_id: String,
}

/// The instance's default organization and the management API's project (any authenticated
/// caller).
#[utoipa::path(get, path = "/iam", responses((status = 200, body = GetIamResponse)))]
pub async fn get_iam(State(state): State<AppState>, _caller: Caller) -> ApiResult<Json<GetIamResponse>> {
    let mut c = state.db.lazy();
    let org = state.cache.default_org(&mut c).await?;
    let org = org.ok_or_else(|| ApiError::internal("the instance has no default organization"))?;
    Ok(Json(GetIamResponse { global_org_id: org.clone(), iam_project_id: API_AUDIENCE.into(), default_org_id: org }))
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetOidcInformationResponse {
    pub issuer: String,
    pub discovery_endpoint: String,
}

/// The issuer and its discovery document's address (no authentication, as on the platform latch
/// follows).
#[utoipa::path(get, path = "/zitadel/docs", security(()), responses((status = 200, body = GetOidcInformationResponse)))]
pub async fn get_oidc_information(State(state): State<AppState>) -> Json<GetOidcInformationResponse> {
    let issuer = state.settings.issuer.clone();
    let discovery_endpoint = format!("{}{DISCOVERY}", issuer.trim_end_matches('/'));
    Json(GetOidcInformationResponse { issuer, discovery_endpoint })
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct Empty {}

/// The API answers (no authentication; `/healthz` and `/readyz` at the root are the process's
/// and the store's checks).
#[utoipa::path(get, path = "/healthz", security(()), responses((status = 200, body = Empty)))]
pub async fn healthz() -> Json<Empty> {
    Json(Empty {})
}
