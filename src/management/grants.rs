//! User grants: a user's roles on a project, given by the project's organization.

use axum::Json;
use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};

use super::machine::paginate;
use super::projects::load_project;
use super::users::load_user;
use crate::api::error::ApiResult;
use crate::api::types::{Details, DetailsResponse, ListQuery, ListResponse, SearchBudget};
use crate::api::{ApiError, ApiJson, Caller};
use crate::app::AppState;
use crate::domain::enums::{TextQueryMethod, UserGrantState};
use crate::domain::roles::Permission;
use crate::domain::validate;
use crate::id::new_id;
use crate::store::project::{self, GrantListed, UserGrant};
use crate::store::{Conn, StoreError};

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
    let known: std::collections::HashSet<String> =
        project::roles(c, project_id).await?.into_iter().map(|r| r.role_key).collect();
    let mut out: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for k in keys {
        if !known.contains(k) {
            return Err(
                ApiError::precondition(format!("the project has no role '{k}'")).with_id("PROJECT-RoleNotFound")
            );
        }
        if seen.insert(k.as_str()) {
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
