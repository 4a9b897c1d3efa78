//! Projects, project roles and user grants.

use axum::Json;
use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};

use super::machine::paginate;
use super::users::load_user;
use crate::api::error::ApiResult;
use crate::api::types::{Details, DetailsResponse, ListDetails, ListQuery, ListResponse, SearchBudget, is_false};
use crate::api::{ApiError, ApiJson, Caller};
use crate::app::AppState;
use crate::domain::enums::{PrivateLabelingSetting, ProjectState, TextQueryMethod, UserGrantState};
use crate::domain::roles::Permission;
use crate::domain::validate;
use crate::id::new_id;
use crate::store::project::{self, GrantListed, Project, ProjectRole, UserGrant};
use crate::store::{Conn, StoreError};

#[derive(Deserialize, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ProjectRequest {
    #[schema(required = true, min_length = 1, max_length = 200)]
    name: String,
    project_role_assertion: bool,
    project_role_check: bool,
    has_project_check: bool,
    private_labeling_setting: PrivateLabelingSetting,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddProjectResponse {
    id: String,
    details: Details,
}

#[utoipa::path(post, path = "/projects", request_body = ProjectRequest, responses((status = 200, body = AddProjectResponse)))]
pub async fn add_project(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<ProjectRequest>,
) -> ApiResult<Json<AddProjectResponse>> {
    caller.require(Permission::ProjectCreate)?;
    validate::required("AddProjectRequest", "name", &req.name, 200)?;
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    if project::name_taken(&mut tx, &caller.org_id, &req.name).await? {
        return Err(ApiError::exists("a project with this name already exists").with_id("PROJECT-AlreadyExists"));
    }
    let id = new_id();
    project::insert(
        &mut tx,
        &Project {
            project_id: id.clone(),
            org_id: caller.org_id.clone(),
            name: req.name.trim().to_string(),
            state: ProjectState::Active,
            role_assertion: req.project_role_assertion,
            role_check: req.project_role_check,
            has_project_check: req.has_project_check,
            private_labeling: req.private_labeling_setting,
            created_at: now,
            changed_at: now,
        },
    )
    .await?;
    tx.commit().await?;
    Ok(Json(AddProjectResponse { id, details: Details::created(now, &caller.org_id) }))
}

/// A project of the caller's organization (others are "not found").
pub async fn load_project(c: &mut Conn, caller: &Caller, project_id: &str) -> ApiResult<Project> {
    match project::get(c, project_id).await? {
        Some(p) if p.org_id == caller.org_id => Ok(p),
        _ => Err(ApiError::not_found("project not found").with_id("PROJECT-NotFound")),
    }
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProjectView {
    id: String,
    details: Details,
    name: String,
    #[serde(skip_serializing_if = "ProjectState::is_default")]
    state: ProjectState,
    #[serde(skip_serializing_if = "is_false")]
    project_role_assertion: bool,
    #[serde(skip_serializing_if = "is_false")]
    project_role_check: bool,
    #[serde(skip_serializing_if = "is_false")]
    has_project_check: bool,
    #[serde(skip_serializing_if = "PrivateLabelingSetting::is_default")]
    private_labeling_setting: PrivateLabelingSetting,
}

impl From<&Project> for ProjectView {
    fn from(p: &Project) -> Self {
        ProjectView {
            id: p.project_id.clone(),
            details: Details::read(p.created_at, p.changed_at, &p.org_id),
            name: p.name.clone(),
            state: p.state,
            project_role_assertion: p.role_assertion,
            project_role_check: p.role_check,
            has_project_check: p.has_project_check,
            private_labeling_setting: p.private_labeling,
        }
    }
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct GetProjectResponse {
    project: ProjectView,
}

#[utoipa::path(get, path = "/projects/{project_id}", responses((status = 200, body = GetProjectResponse)))]
pub async fn get_project(
    State(state): State<AppState>,
    caller: Caller,
    Path(project_id): Path<String>,
) -> ApiResult<Json<GetProjectResponse>> {
    caller.require(Permission::ProjectRead)?;
    let mut c = state.db.conn().await?;
    let p = load_project(&mut c, &caller, &project_id).await?;
    Ok(Json(GetProjectResponse { project: ProjectView::from(&p) }))
}

#[utoipa::path(put, path = "/projects/{project_id}", request_body = ProjectRequest, responses((status = 200, body = DetailsResponse)))]
pub async fn update_project(
    State(state): State<AppState>,
    caller: Caller,
    Path(project_id): Path<String>,
    ApiJson(req): ApiJson<ProjectRequest>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::ProjectWrite)?;
    validate::required("UpdateProjectRequest", "name", &req.name, 200)?;
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    let mut p = load_project(&mut tx, &caller, &project_id).await?;
    if crate::store::fold(&p.name) != crate::store::fold(&req.name)
        && project::name_taken(&mut tx, &caller.org_id, &req.name).await?
    {
        return Err(ApiError::exists("a project with this name already exists").with_id("PROJECT-AlreadyExists"));
    }
    p.name = req.name.trim().to_string();
    p.role_assertion = req.project_role_assertion;
    p.role_check = req.project_role_check;
    p.has_project_check = req.has_project_check;
    p.private_labeling = req.private_labeling_setting;
    project::update(&mut tx, &p, now).await?;
    tx.commit().await?;
    Ok(Json(DetailsResponse { details: Details::changed(now, &caller.org_id) }))
}

#[utoipa::path(delete, path = "/projects/{project_id}", responses((status = 200, body = DetailsResponse)))]
pub async fn remove_project(
    State(state): State<AppState>,
    caller: Caller,
    Path(project_id): Path<String>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::ProjectDelete)?;
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    load_project(&mut tx, &caller, &project_id).await?;
    project::delete(&mut tx, &project_id).await?;
    tx.commit().await?;
    Ok(Json(DetailsResponse { details: Details::changed(now, &caller.org_id) }))
}

#[utoipa::path(post, path = "/projects/{project_id}/_deactivate", responses((status = 200, body = DetailsResponse)))]
pub async fn deactivate_project(
    State(state): State<AppState>,
    caller: Caller,
    Path(project_id): Path<String>,
) -> ApiResult<Json<DetailsResponse>> {
    change_project_state(&state, &caller, &project_id, ProjectState::Active, ProjectState::Inactive).await
}

#[utoipa::path(post, path = "/projects/{project_id}/_reactivate", responses((status = 200, body = DetailsResponse)))]
pub async fn reactivate_project(
    State(state): State<AppState>,
    caller: Caller,
    Path(project_id): Path<String>,
) -> ApiResult<Json<DetailsResponse>> {
    change_project_state(&state, &caller, &project_id, ProjectState::Inactive, ProjectState::Active).await
}

/// An inactive project's applications authenticate no client and start no sign-in (as each
/// inactive application's); its tokens already issued stay valid until they expire.
async fn change_project_state(
    state: &AppState,
    caller: &Caller,
    project_id: &str,
    from: ProjectState,
    to: ProjectState,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::ProjectWrite)?;
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    load_project(&mut tx, caller, project_id).await?;
    if !project::set_state(&mut tx, project_id, from, to, now).await? {
        let what =
            if to == ProjectState::Inactive { "the project is not active" } else { "the project is not inactive" };
        return Err(ApiError::precondition(what).with_id("PROJECT-StateChange"));
    }
    tx.commit().await?;
    Ok(Json(DetailsResponse { details: Details::changed(now, &caller.org_id) }))
}

#[derive(Deserialize, Default, Clone, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct NameQuery {
    name: String,
    method: TextQueryMethod,
}

#[derive(Deserialize, Default, Clone, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct NameQueries {
    name_query: Option<NameQuery>,
}

#[derive(Deserialize, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ListByNameRequest {
    query: ListQuery,
    queries: Vec<NameQueries>,
}

impl ListByNameRequest {
    pub fn query(&self) -> &ListQuery {
        &self.query
    }

    /// The name filter (only `nameQuery` is supported; several are AND-combined as the first);
    /// `what` names the request in errors. The name is bounded as every search text is (SQLite
    /// refuses LIKE patterns over 50,000 bytes).
    pub fn name(&self, what: &'static str) -> ApiResult<Option<(&str, TextQueryMethod)>> {
        match self.queries.as_slice() {
            [] => Ok(None),
            [q] => match &q.name_query {
                Some(n) => {
                    crate::api::types::SearchBudget::new(what).text(&n.name)?;
                    Ok(Some((n.name.as_str(), n.method)))
                }
                // A query naming nothing known is refused, not read as "no filter".
                None => Err(ApiError::invalid("invalid request: each query must set one of its members")),
            },
            _ => Err(ApiError::invalid("invalid request: only one nameQuery is supported")),
        }
    }
}

#[utoipa::path(post, path = "/projects/_search", request_body = ListByNameRequest, responses((status = 200, body = ListResponse<ProjectView>)))]
pub async fn list_projects(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<ListByNameRequest>,
) -> ApiResult<Json<ListResponse<ProjectView>>> {
    caller.require(Permission::ProjectRead)?;
    let page = req.query.page()?;
    let mut c = state.db.conn().await?;
    let (projects, total) = project::search(&mut c, &caller.org_id, req.name("ListProjectsRequest")?, page).await?;
    Ok(Json(ListResponse {
        details: ListDetails::new(total, state.clock.now()),
        sorting_column: None,
        result: projects.iter().map(ProjectView::from).collect(),
    }))
}

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

#[derive(Deserialize, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct BulkRolesRequest {
    #[schema(required = true, min_items = 1)]
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

#[derive(Deserialize, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct AddUserGrantRequest {
    #[schema(required = true, min_length = 1, max_length = 200)]
    project_id: String,
    project_grant_id: String,
    role_keys: Vec<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddUserGrantResponse {
    user_grant_id: String,
    details: Details,
}

#[derive(Deserialize, Default, Clone, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct GrantIdQuery {
    project_id: String,
    user_id: String,
    in_user_ids: Vec<String>,
}

#[derive(Deserialize, Default, Clone, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct GrantTextQuery {
    role_key: String,
    user_name: String,
    first_name: String,
    last_name: String,
    email: String,
    display_name: String,
    org_name: String,
    org_domain: String,
    project_name: String,
    method: TextQueryMethod,
}

#[derive(Deserialize, Default, Clone, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct GrantTypeQuery {
    r#type: crate::domain::enums::UserType,
}

/// One filter of `ListUserGrants` (exactly one member). `withGrantedQuery` and
/// `projectGrantIdQuery` concern granted projects, which latch does not have: the first keeps
/// every grant, the second none.
#[derive(Deserialize, Default, Clone, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct GrantQueries {
    project_id_query: Option<GrantIdQuery>,
    user_id_query: Option<GrantIdQuery>,
    in_user_ids_query: Option<GrantIdQuery>,
    role_key_query: Option<GrantTextQuery>,
    user_name_query: Option<GrantTextQuery>,
    first_name_query: Option<GrantTextQuery>,
    last_name_query: Option<GrantTextQuery>,
    email_query: Option<GrantTextQuery>,
    display_name_query: Option<GrantTextQuery>,
    org_name_query: Option<GrantTextQuery>,
    org_domain_query: Option<GrantTextQuery>,
    project_name_query: Option<GrantTextQuery>,
    user_type_query: Option<GrantTypeQuery>,
    with_granted_query: Option<serde_json::Value>,
    project_grant_id_query: Option<serde_json::Value>,
}

#[derive(Deserialize, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ListUserGrantsRequest {
    query: ListQuery,
    queries: Vec<GrantQueries>,
}

impl ListUserGrantsRequest {
    fn check(&self) -> ApiResult<()> {
        let mut budget = SearchBudget::new("ListUserGrantRequest");
        for q in &self.queries {
            budget.term()?;
            let ids = [&q.project_id_query, &q.user_id_query, &q.in_user_ids_query];
            let others =
                [q.with_granted_query.is_some(), q.project_grant_id_query.is_some(), q.user_type_query.is_some()];
            let set = ids.iter().filter(|x| x.is_some()).count()
                + q.texts().iter().filter(|x| x.is_some()).count()
                + others.iter().filter(|x| **x).count();
            budget.one_member(set)?;
            for x in ids.into_iter().flatten() {
                budget.text(&x.project_id)?;
                budget.text(&x.user_id)?;
                budget.ids(x.in_user_ids.len())?;
                for id in &x.in_user_ids {
                    budget.text(id)?;
                }
            }
            for t in q.texts().into_iter().flatten() {
                for v in [&t.role_key, &t.user_name, &t.first_name, &t.last_name, &t.email, &t.display_name] {
                    budget.text(v)?;
                }
                for v in [&t.org_name, &t.org_domain, &t.project_name] {
                    budget.text(v)?;
                }
            }
        }
        Ok(())
    }

    /// Whether `g` passes every filter (AND-combined, as in the reference).
    fn keeps(&self, g: &GrantListed, roles: &[String]) -> bool {
        self.queries.iter().all(|q| {
            q.project_id_query.as_ref().is_none_or(|x| x.project_id == g.project_id)
                && q.user_id_query.as_ref().is_none_or(|x| x.user_id == g.user_id)
                && q.in_user_ids_query.as_ref().is_none_or(|x| x.in_user_ids.contains(&g.user_id))
                && q.role_key_query.as_ref().is_none_or(|t| roles.iter().any(|r| t.method.matches(r, &t.role_key)))
                && q.user_name_query.as_ref().is_none_or(|t| t.method.matches(&g.username, &t.user_name))
                && q.first_name_query.as_ref().is_none_or(|t| t.method.matches(&g.first_name, &t.first_name))
                && q.last_name_query.as_ref().is_none_or(|t| t.method.matches(&g.last_name, &t.last_name))
                && q.email_query.as_ref().is_none_or(|t| t.method.matches(&g.email, &t.email))
                && q.display_name_query.as_ref().is_none_or(|t| t.method.matches(&g.display_name, &t.display_name))
                && q.org_name_query.as_ref().is_none_or(|t| t.method.matches(&g.org_name, &t.org_name))
                && q.org_domain_query.as_ref().is_none_or(|t| t.method.matches(&g.org_domain, &t.org_domain))
                && q.project_name_query.as_ref().is_none_or(|t| t.method.matches(&g.project_name, &t.project_name))
                && q.user_type_query.as_ref().is_none_or(|t| t.r#type.number() == g.user_type)
                // latch has no granted projects: every grant is the organization's own (what
                // withGrantedQuery asks for either way), and none has a project grant id.
                && q.project_grant_id_query.is_none()
        })
    }
}

impl GrantQueries {
    fn texts(&self) -> [Option<&GrantTextQuery>; 9] {
        [
            self.role_key_query.as_ref(),
            self.user_name_query.as_ref(),
            self.first_name_query.as_ref(),
            self.last_name_query.as_ref(),
            self.email_query.as_ref(),
            self.display_name_query.as_ref(),
            self.org_name_query.as_ref(),
            self.org_domain_query.as_ref(),
            self.project_name_query.as_ref(),
        ]
    }
}

/// `UserGrant` of the reference (granted-project fields left out: latch has none).
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UserGrantView {
    id: String,
    details: Details,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    role_keys: Vec<String>,
    state: UserGrantState,
    user_id: String,
    user_name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    first_name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    last_name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    email: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    display_name: String,
    org_id: String,
    org_name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    org_domain: String,
    project_id: String,
    project_name: String,
    preferred_login_name: String,
    user_type: crate::domain::enums::UserType,
}

impl UserGrantView {
    fn new(g: &GrantListed, roles: &[String]) -> Self {
        UserGrantView {
            id: g.user_grant_id.clone(),
            details: Details::read(g.created_at, g.changed_at, &g.org_id),
            role_keys: roles.to_vec(),
            state: UserGrantState::from_number(g.state).unwrap_or_default(),
            user_id: g.user_id.clone(),
            user_name: g.username.clone(),
            first_name: g.first_name.clone(),
            last_name: g.last_name.clone(),
            email: g.email.clone(),
            display_name: g.display_name.clone(),
            org_id: g.org_id.clone(),
            org_name: g.org_name.clone(),
            org_domain: g.org_domain.clone(),
            project_id: g.project_id.clone(),
            project_name: g.project_name.clone(),
            preferred_login_name: match g.user_domain.is_empty() {
                true => g.username.clone(),
                false => format!("{}@{}", g.username, g.user_domain),
            },
            user_type: crate::domain::enums::UserType::from_number(g.user_type).unwrap_or_default(),
        }
    }
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetUserGrantResponse {
    user_grant: UserGrantView,
}

/// One grant the caller's organization gave.
#[utoipa::path(get, path = "/users/{user_id}/grants/{grant_id}", responses((status = 200, body = GetUserGrantResponse)))]
pub async fn get_user_grant(
    State(state): State<AppState>,
    caller: Caller,
    Path((user_id, grant_id)): Path<(String, String)>,
) -> ApiResult<Json<GetUserGrantResponse>> {
    caller.require(Permission::UserGrantRead)?;
    let mut c = state.db.conn().await?;
    load_user(&mut c, &caller, &user_id).await?;
    let g = project::grant_listed(&mut c, &caller.org_id, &user_id, &grant_id)
        .await?
        .ok_or_else(|| ApiError::not_found("user grant not found").with_id("USERGRANT-NotFound"))?;
    let roles: Vec<String> = crate::store::from_json("user_grant.role_keys", &g.role_keys)?;
    Ok(Json(GetUserGrantResponse { user_grant: UserGrantView::new(&g, &roles) }))
}

/// The grants the caller's organization gave, filtered and paged.
#[utoipa::path(post, path = "/users/grants/_search", request_body = ListUserGrantsRequest, responses((status = 200, body = ListResponse<UserGrantView>)))]
pub async fn list_user_grants(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<ListUserGrantsRequest>,
) -> ApiResult<Json<ListResponse<UserGrantView>>> {
    caller.require(Permission::UserGrantRead)?;
    req.check()?;
    let mut c = state.db.conn().await?;
    let mut kept = Vec::new();
    for g in project::grants_listed(&mut c, &caller.org_id).await? {
        let roles: Vec<String> = crate::store::from_json("user_grant.role_keys", &g.role_keys)?;
        if req.keeps(&g, &roles) {
            kept.push((g, roles));
        }
    }
    let list = paginate(kept, &req.query, state.clock.now(), |(g, roles)| UserGrantView::new(g, roles))?;
    Ok(Json(list))
}

/// `keys` without repeats, each a role of the project.
async fn role_keys_of(c: &mut Conn, project_id: &str, keys: &[String]) -> ApiResult<Vec<String>> {
    // Until the grant is written no role of the project goes (see project::lock).
    project::lock(c, project_id).await?;
    let known: Vec<String> = project::roles(c, project_id).await?.into_iter().map(|r| r.role_key).collect();
    let mut out: Vec<String> = Vec::new();
    for k in keys {
        if !known.contains(k) {
            return Err(
                ApiError::precondition(format!("the project has no role '{k}'")).with_id("PROJECT-RoleNotFound")
            );
        }
        if !out.contains(k) {
            out.push(k.clone());
        }
    }
    Ok(out)
}

/// The grant `grant_id` of user `user_id` that the caller's organization gave.
async fn load_grant(c: &mut Conn, caller: &Caller, user_id: &str, grant_id: &str) -> ApiResult<UserGrant> {
    project::get_grant(c, user_id, grant_id)
        .await?
        .filter(|g| g.org_id == caller.org_id)
        .ok_or_else(|| ApiError::not_found("user grant not found").with_id("USERGRANT-NotFound"))
}

#[derive(Deserialize, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct UpdateUserGrantRequest {
    /// The grant's roles after the call (a full replacement).
    role_keys: Vec<String>,
}

/// Replaces a user grant's roles. Tokens issued before keep the roles they carry until they
/// expire, as in ZITADEL.
#[utoipa::path(put, path = "/users/{user_id}/grants/{grant_id}", request_body = UpdateUserGrantRequest, responses((status = 200, body = DetailsResponse)))]
pub async fn update_user_grant(
    State(state): State<AppState>,
    caller: Caller,
    Path((user_id, grant_id)): Path<(String, String)>,
    ApiJson(req): ApiJson<UpdateUserGrantRequest>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::UserGrantWrite)?;
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    load_user(&mut tx, &caller, &user_id).await?;
    let g = load_grant(&mut tx, &caller, &user_id, &grant_id).await?;
    let keys = role_keys_of(&mut tx, &g.project_id, &req.role_keys).await?;
    if !project::update_grant_roles(&mut tx, &g.user_grant_id, &keys, now).await? {
        return Err(ApiError::not_found("user grant not found").with_id("USERGRANT-NotFound"));
    }
    tx.commit().await?;
    Ok(Json(DetailsResponse { details: Details::changed(now, &caller.org_id) }))
}

/// Removes a user grant (tokens issued before keep their roles until they expire).
#[utoipa::path(delete, path = "/users/{user_id}/grants/{grant_id}", responses((status = 200, body = DetailsResponse)))]
pub async fn remove_user_grant(
    State(state): State<AppState>,
    caller: Caller,
    Path((user_id, grant_id)): Path<(String, String)>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::UserGrantDelete)?;
    let now = state.clock.now();
    let mut c = state.db.conn().await?;
    load_user(&mut c, &caller, &user_id).await?;
    let g = load_grant(&mut c, &caller, &user_id, &grant_id).await?;
    if !project::delete_grant(&mut c, &g.user_grant_id).await? {
        return Err(ApiError::not_found("user grant not found").with_id("USERGRANT-NotFound"));
    }
    Ok(Json(DetailsResponse { details: Details::changed(now, &caller.org_id) }))
}

#[utoipa::path(post, path = "/users/{user_id}/grants", request_body = AddUserGrantRequest, responses((status = 200, body = AddUserGrantResponse)))]
pub async fn add_user_grant(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
    ApiJson(req): ApiJson<AddUserGrantRequest>,
) -> ApiResult<Json<AddUserGrantResponse>> {
    caller.require(Permission::UserGrantWrite)?;
    validate::required("AddUserGrantRequest", "projectId", &req.project_id, 200)?;
    if !req.project_grant_id.is_empty() {
        return Err(ApiError::invalid(
            "invalid AddUserGrantRequest.projectGrantId: granted projects are not supported",
        ));
    }
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    let u = load_user(&mut tx, &caller, &user_id).await?;
    let p = load_project(&mut tx, &caller, &req.project_id).await?;
    let keys = role_keys_of(&mut tx, &p.project_id, &req.role_keys).await?;
    let id = new_id();
    project::insert_grant(
        &mut tx,
        &UserGrant {
            user_grant_id: id.clone(),
            user_id: u.user_id.clone(),
            project_id: p.project_id.clone(),
            org_id: caller.org_id.clone(),
            role_keys: keys,
            state: UserGrantState::Active,
            created_at: now,
            changed_at: now,
        },
    )
    .await
    .map_err(|e| match e {
        StoreError::Conflict => {
            ApiError::exists("the user already has a grant on this project").with_id("USERGRANT-AlreadyExists")
        }
        other => other.into(),
    })?;
    tx.commit().await?;
    Ok(Json(AddUserGrantResponse { user_grant_id: id, details: Details::created(now, &caller.org_id) }))
}
