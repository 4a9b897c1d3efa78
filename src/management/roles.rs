//! A project's roles.

use axum::Json;
use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};

use super::machine::paginate;
use super::projects::load_project;
use crate::api::error::ApiResult;
use crate::api::types::{Details, DetailsResponse, ListQuery, ListResponse, SearchBudget};
use crate::api::{ApiError, ApiJson, Caller};
use crate::app::AppState;
use crate::domain::enums::TextQueryMethod;
use crate::domain::roles::Permission;
use crate::domain::validate;
use crate::store::StoreError;
use crate::store::project::{self, ProjectRole};

#[derive(Deserialize, Default, Clone, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct RoleInput {
    #[serde(alias = "key")]
    #[schema(required = true, min_length = 1, max_length = 200)]
    role_key: String,
    #[schema(required = true, min_length = 1, max_length = 200)]
    display_name: String,
    group: String,
}

fn check_role(req: &str, r: &RoleInput) -> ApiResult<()> {
    validate::required(req, "roleKey", &r.role_key, 200)?;
    if r.role_key.chars().any(|c| c.is_whitespace()) {
        return Err(ApiError::invalid(format!("invalid {req}.roleKey: value must not contain spaces")));
    }
    validate::required(req, "displayName", &r.display_name, 200)?;
    validate::max(req, "group", &r.group, 200)?;
    Ok(())
}

async fn insert_roles(
    state: &AppState,
    caller: &Caller,
    project_id: &str,
    roles: &[RoleInput],
) -> ApiResult<Json<DetailsResponse>> {
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    load_project(&mut tx, caller, project_id).await?;
    for r in roles {
        project::insert_role(
            &mut tx,
            &ProjectRole {
                project_id: project_id.to_string(),
                role_key: r.role_key.clone(),
                display_name: r.display_name.trim().to_string(),
                role_group: r.group.trim().to_string(),
                created_at: now,
                changed_at: now,
            },
        )
        .await
        .map_err(|e| match e {
            StoreError::Conflict => {
                ApiError::exists(format!("the role '{}' already exists", r.role_key)).with_id("PROJECT-RoleExists")
            }
            other => other.into(),
        })?;
    }
    tx.commit().await?;
    Ok(Json(DetailsResponse { details: Details::created(now, &caller.org_id) }))
}

#[utoipa::path(post, path = "/projects/{project_id}/roles", request_body = RoleInput, responses((status = 200, body = DetailsResponse)))]
pub async fn add_role(
    State(state): State<AppState>,
    caller: Caller,
    Path(project_id): Path<String>,
    ApiJson(req): ApiJson<RoleInput>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::ProjectWrite)?;
    check_role("AddProjectRoleRequest", &req)?;
    insert_roles(&state, &caller, &project_id, &[req]).await
}

/// The most roles one bulk call adds.
pub const MAX_BULK_ROLES: usize = 1000;

#[derive(Deserialize, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct BulkRolesRequest {
    #[schema(required = true, min_items = 1, max_items = 1000)]
    roles: Vec<RoleInput>,
}

#[utoipa::path(post, path = "/projects/{project_id}/roles/_bulk", request_body = BulkRolesRequest, responses((status = 200, body = DetailsResponse)))]
pub async fn bulk_add_roles(
    State(state): State<AppState>,
    caller: Caller,
    Path(project_id): Path<String>,
    ApiJson(req): ApiJson<BulkRolesRequest>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::ProjectWrite)?;
    if req.roles.is_empty() {
        return Err(ApiError::invalid("invalid BulkAddProjectRolesRequest.roles: at least one role is required"));
    }
    // Each role is one statement in one transaction, which on SQLite holds every writer back.
    if req.roles.len() > MAX_BULK_ROLES {
        return Err(ApiError::invalid(format!(
            "invalid BulkAddProjectRolesRequest.roles: at most {MAX_BULK_ROLES} roles per call"
        )));
    }
    for r in &req.roles {
        check_role("BulkAddProjectRolesRequest", r)?;
    }
    insert_roles(&state, &caller, &project_id, &req.roles).await
}

#[derive(Deserialize, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct UpdateRoleRequest {
    #[schema(required = true, min_length = 1, max_length = 200)]
    display_name: String,
    group: String,
}

/// UpdateProjectRole: the display name and group (the key is the role's identity). A key with
/// `/` in it is sent %-encoded (`a%2Fb`).
#[utoipa::path(put, path = "/projects/{project_id}/roles/{role_key}", request_body = UpdateRoleRequest, responses((status = 200, body = DetailsResponse)))]
pub async fn update_role(
    State(state): State<AppState>,
    caller: Caller,
    Path((project_id, role_key)): Path<(String, String)>,
    ApiJson(req): ApiJson<UpdateRoleRequest>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::ProjectWrite)?;
    validate::required("UpdateProjectRoleRequest", "displayName", &req.display_name, 200)?;
    validate::max("UpdateProjectRoleRequest", "group", &req.group, 200)?;
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    load_project(&mut tx, &caller, &project_id).await?;
    let (name, group) = (req.display_name.trim(), req.group.trim());
    if !project::update_role(&mut tx, &project_id, &role_key, name, group, now).await? {
        return Err(role_not_found());
    }
    tx.commit().await?;
    Ok(Json(DetailsResponse { details: Details::changed(now, &caller.org_id) }))
}

/// RemoveProjectRole: the role goes, and with it from every user grant on the project; tokens
/// issued before keep it until they expire.
#[utoipa::path(delete, path = "/projects/{project_id}/roles/{role_key}", responses((status = 200, body = DetailsResponse)))]
pub async fn remove_role(
    State(state): State<AppState>,
    caller: Caller,
    Path((project_id, role_key)): Path<(String, String)>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::ProjectDelete)?;
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    load_project(&mut tx, &caller, &project_id).await?;
    if !project::delete_role(&mut tx, &project_id, &role_key, now).await? {
        return Err(role_not_found());
    }
    tx.commit().await?;
    Ok(Json(DetailsResponse { details: Details::changed(now, &caller.org_id) }))
}

fn role_not_found() -> ApiError {
    ApiError::not_found("the project has no such role").with_id("PROJECT-RoleNotFound")
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RoleView {
    key: String,
    details: Details,
    display_name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    group: String,
}

#[derive(Deserialize, Default, Clone, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct RoleKeyQuery {
    key: String,
    method: TextQueryMethod,
}

#[derive(Deserialize, Default, Clone, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct RoleDisplayNameQuery {
    display_name: String,
    method: TextQueryMethod,
}

/// One filter of `ListProjectRoles`: `keyQuery` or `displayNameQuery`.
#[derive(Deserialize, Default, Clone, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct RoleQueries {
    key_query: Option<RoleKeyQuery>,
    display_name_query: Option<RoleDisplayNameQuery>,
}

#[derive(Deserialize, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ListRolesRequest {
    query: ListQuery,
    queries: Vec<RoleQueries>,
}

impl ListRolesRequest {
    /// Whether `role` passes every filter (they are AND-combined, as in the reference).
    fn keeps(&self, role: &ProjectRole) -> bool {
        self.queries.iter().all(|q| {
            q.key_query.as_ref().is_none_or(|k| k.method.matches(&role.role_key, &k.key))
                && q.display_name_query.as_ref().is_none_or(|d| d.method.matches(&role.display_name, &d.display_name))
        })
    }

    fn check(&self) -> ApiResult<()> {
        let mut budget = SearchBudget::new("ListProjectRolesRequest");
        for q in &self.queries {
            budget.term()?;
            budget.one_member(usize::from(q.key_query.is_some()) + usize::from(q.display_name_query.is_some()))?;
            if let Some(k) = &q.key_query {
                budget.text(&k.key)?;
            }
            if let Some(d) = &q.display_name_query {
                budget.text(&d.display_name)?;
            }
        }
        Ok(())
    }
}

#[utoipa::path(post, path = "/projects/{project_id}/roles/_search", request_body = ListRolesRequest, responses((status = 200, body = ListResponse<RoleView>)))]
pub async fn list_roles(
    State(state): State<AppState>,
    caller: Caller,
    Path(project_id): Path<String>,
    ApiJson(req): ApiJson<ListRolesRequest>,
) -> ApiResult<Json<ListResponse<RoleView>>> {
    caller.require(Permission::ProjectRead)?;
    req.check()?;
    let mut c = state.db.conn().await?;
    load_project(&mut c, &caller, &project_id).await?;
    let roles: Vec<_> = project::roles(&mut c, &project_id).await?.into_iter().filter(|r| req.keeps(r)).collect();
    let list = paginate(roles, &req.query, state.clock.now(), |r| RoleView {
        key: r.role_key.clone(),
        details: Details::read(r.created_at, r.changed_at, &caller.org_id),
        display_name: r.display_name.clone(),
        group: r.role_group.clone(),
    })?;
    Ok(Json(list))
}
