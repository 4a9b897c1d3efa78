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
use axum::extract::{Path, State};

use crate::api::error::ApiResult;
use crate::api::routes::Table;
use crate::api::types::{DetailsResponse, ListResponse};
use crate::api::{ApiJson, Caller};
use crate::app::AppState;
use crate::domain::roles::Permission;
use crate::management::members;
use crate::management::views::MemberView;
use crate::store::member::Scope;

/// The operations of `/admin/v1`.
pub fn api() -> Table {
    Table::new("/admin/v1")
        .post("/export", export::export)
        .post("/import", import::import)
        .post("/orgs/_setup", orgs::setup)
        .post("/orgs/_search", orgs::search)
        .get("/orgs/default", orgs::get_default)
        .get("/orgs/{id}", orgs::get)
        .post("/members", add_member)
        .post("/members/_search", list_members)
        .post("/members/roles/_search", list_member_roles)
        .put("/members/{user_id}", update_member)
        .delete("/members/{user_id}", remove_member)
        .get("/settings/oidc", settings::get_oidc)
        .put("/settings/oidc", settings::put_oidc)
        .post("/settings/oidc", settings::put_oidc)
        .get("/policies/login", settings::get_login)
        .put("/policies/login", settings::put_login)
        .get("/policies/lockout", settings::get_lockout)
        .put("/policies/password/lockout", settings::put_lockout)
        .get("/policies/password/complexity", settings::get_complexity)
        .put("/policies/password/complexity", settings::put_complexity)
        .get("/policies/security", settings::get_security)
        .put("/policies/security", settings::put_security)
}

/// Their description: every handler of [`api`] is listed here.
#[derive(utoipa::OpenApi)]
#[openapi(paths(
    export::export,
    import::import,
    orgs::setup,
    orgs::search,
    orgs::get_default,
    orgs::get,
    add_member,
    list_members,
    list_member_roles,
    update_member,
    remove_member,
    settings::get_oidc,
    settings::put_oidc,
    settings::get_login,
    settings::put_login,
    settings::get_lockout,
    settings::put_lockout,
    settings::get_complexity,
    settings::put_complexity,
    settings::get_security,
    settings::put_security
))]
pub struct Doc;

#[derive(serde::Deserialize, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct MemberRequest {
    #[schema(required = true, min_length = 1, max_length = 200)]
    user_id: String,
    #[schema(required = true, schema_with = members::iam_roles_schema)]
    roles: Vec<String>,
}

/// The body of `PUT /admin/v1/members/{user_id}`: the member is named by the path.
#[derive(serde::Deserialize, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct UpdateIamMemberRequest {
    #[schema(required = true, schema_with = members::iam_roles_schema)]
    roles: Vec<String>,
}

#[utoipa::path(post, path = "/members", request_body = MemberRequest, responses((status = 200, body = DetailsResponse)))]
pub async fn add_member(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<MemberRequest>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::IamMemberWrite)?;
    members::add(&state, Scope::Iam, "", "AddIAMMemberRequest", &req.user_id, &req.roles).await
}

#[utoipa::path(put, path = "/members/{user_id}", request_body = UpdateIamMemberRequest, responses((status = 200, body = DetailsResponse)))]
pub async fn update_member(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
    ApiJson(req): ApiJson<UpdateIamMemberRequest>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::IamMemberWrite)?;
    members::update(&state, Scope::Iam, "", "UpdateIAMMemberRequest", &user_id, &req.roles).await
}

#[utoipa::path(delete, path = "/members/{user_id}", responses((status = 200, body = DetailsResponse)))]
pub async fn remove_member(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::IamMemberWrite)?;
    members::remove(&state, Scope::Iam, "", &user_id).await
}

#[utoipa::path(post, path = "/members/_search", request_body = members::ListMembersRequest, responses((status = 200, body = ListResponse<MemberView>)))]
pub async fn list_members(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<members::ListMembersRequest>,
) -> ApiResult<Json<ListResponse<MemberView>>> {
    caller.require(Permission::IamMemberRead)?;
    members::list(&state, Scope::Iam, "", &req).await
}

#[utoipa::path(post, path = "/members/roles/_search", responses((status = 200, body = members::IamRolesResponse)))]
pub async fn list_member_roles(state: State<AppState>, caller: Caller) -> ApiResult<Json<members::IamRolesResponse>> {
    caller.require(Permission::IamMemberRead)?;
    Ok(members::list_iam_member_roles(state).await)
}
