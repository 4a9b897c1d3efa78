//! Projects (their roles are in roles.rs, the user grants on them in grants.rs).

use axum::Json;
use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};

use crate::api::error::ApiResult;
use crate::api::types::{Details, DetailsResponse, ListDetails, ListQuery, ListResponse, is_false};
use crate::api::{ApiError, ApiJson, Caller};
use crate::app::AppState;
use crate::domain::enums::{PrivateLabelingSetting, ProjectState, TextQueryMethod};
use crate::domain::roles::Permission;
use crate::domain::validate;
use crate::id::new_id;
use crate::store::Conn;
use crate::store::project::{self, Project};

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
    let id = crate::management::apps::fresh_audience_id(&mut tx, new_id).await?;
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
