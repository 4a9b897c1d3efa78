//! `/admin/v1`: instance-wide calls (organizations of the instance, instance members, settings
//! and policies), export and import.

pub mod data;
pub mod export;
pub mod gcs;
pub mod import;
mod import_org;
pub mod orgs;
pub mod settings;

use axum::Json;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::extract::{Path, State};
use axum::routing::{get, post, put};

use crate::api::error::ApiResult;
use crate::api::types::{DetailsResponse, ListResponse};
use crate::api::{ApiJson, Caller};
use crate::app::AppState;
use crate::domain::roles::Permission;
use crate::management::members;
use crate::management::views::MemberView;
use crate::store::member::Scope;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/export", post(export::export))
        .route("/import", post(import::import).layer(DefaultBodyLimit::max(import::MAX_BODY)))
        .route("/orgs/_setup", post(orgs::setup))
        .route("/orgs/_search", post(orgs::search))
        .route("/orgs/{id}", get(orgs::get))
        .route("/members", post(add_member))
        .route("/members/_search", post(list_members))
        .route("/members/roles/_search", post(list_member_roles))
        .route("/members/{user_id}", put(update_member).delete(remove_member))
        .route("/settings/oidc", get(settings::get_oidc).put(settings::put_oidc).post(settings::put_oidc))
        .route("/policies/login", get(settings::get_login).put(settings::put_login))
        .route("/policies/lockout", get(settings::get_lockout))
        .route("/policies/password/lockout", put(settings::put_lockout))
        .route("/policies/password/complexity", get(settings::get_complexity).put(settings::put_complexity))
        .route("/policies/security", get(settings::get_security).put(settings::put_security))
        .fallback(crate::api::error::not_found)
}

#[derive(serde::Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct MemberRequest {
    user_id: String,
    roles: Vec<String>,
}

async fn add_member(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<MemberRequest>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::IamMemberWrite)?;
    members::add(&state, Scope::Iam, "", "AddIAMMemberRequest", &req.user_id, &req.roles).await
}

async fn update_member(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
    ApiJson(req): ApiJson<MemberRequest>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::IamMemberWrite)?;
    members::update(&state, Scope::Iam, "", "UpdateIAMMemberRequest", &user_id, &req.roles).await
}

async fn remove_member(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::IamMemberWrite)?;
    members::remove(&state, Scope::Iam, "", &user_id).await
}

#[derive(serde::Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct ListRequest {
    query: crate::api::types::ListQuery,
}

async fn list_members(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<ListRequest>,
) -> ApiResult<Json<ListResponse<MemberView>>> {
    caller.require(Permission::IamMemberRead)?;
    members::list(&state, Scope::Iam, "", &req.query).await
}

async fn list_member_roles(caller: Caller) -> ApiResult<impl axum::response::IntoResponse> {
    caller.require(Permission::IamMemberRead)?;
    Ok(members::list_iam_member_roles().await)
}
