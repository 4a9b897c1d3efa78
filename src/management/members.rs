//! Organization members (and the shared logic for instance members in the admin API).

use axum::Json;
use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};

use super::machine::paginate;
use super::views::MemberView;
use crate::api::error::ApiResult;
use crate::api::types::{Details, DetailsResponse, ListQuery, ListResponse, SearchBudget};
use crate::api::{ApiError, ApiJson, Caller};
use crate::app::AppState;
use crate::domain::enums::TextQueryMethod;
use crate::domain::roles::{IAM_ROLES, ORG_ROLES, Permission};
use crate::store::member::{self, Scope};
use crate::store::{Conn, StoreError, user};

#[derive(Deserialize, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct AddMemberRequest {
    #[schema(required = true, min_length = 1, max_length = 200)]
    user_id: String,
    #[schema(required = true, schema_with = org_roles_schema)]
    roles: Vec<String>,
}

#[derive(Deserialize, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct UpdateMemberRequest {
    #[schema(required = true, schema_with = org_roles_schema)]
    roles: Vec<String>,
}

/// The schema of `roles` in organization member requests: one or more organization roles.
pub fn org_roles_schema() -> utoipa::openapi::schema::Schema {
    roles_schema(ORG_ROLES)
}

/// The schema of `roles` in instance member requests: one or more instance roles.
pub fn iam_roles_schema() -> utoipa::openapi::schema::Schema {
    roles_schema(IAM_ROLES)
}

fn roles_schema(roles: &[&str]) -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Type};
    let item = ObjectBuilder::new().schema_type(Type::String).enum_values(Some(roles.iter().copied()));
    ArrayBuilder::new().items(item).min_items(Some(1)).into()
}

pub fn check_roles(req: &str, roles: &[String], allowed: &[&str]) -> ApiResult<Vec<String>> {
    if roles.is_empty() {
        return Err(ApiError::invalid(format!("invalid {req}.roles: at least one role is required")));
    }
    let mut out: Vec<String> = Vec::new();
    for r in roles {
        if !allowed.contains(&r.as_str()) {
            return Err(ApiError::invalid(format!(
                "invalid {req}.roles: unknown role '{r}', expected one of {}",
                allowed.join(", ")
            )));
        }
        if !out.contains(r) {
            out.push(r.clone());
        }
    }
    Ok(out)
}

fn scope_roles(scope: Scope) -> &'static [&'static str] {
    if scope == Scope::Iam { IAM_ROLES } else { ORG_ROLES }
}

/// Adds a member to the instance (`scope_id` "") or an organization.
pub async fn add(
    state: &AppState,
    scope: Scope,
    scope_id: &str,
    req_name: &str,
    user_id: &str,
    roles: &[String],
) -> ApiResult<Json<DetailsResponse>> {
    let roles = check_roles(req_name, roles, scope_roles(scope))?;
    if user_id.trim().is_empty() {
        return Err(ApiError::invalid(format!("invalid {req_name}.userId: value is required")));
    }
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    if user::get(&mut tx, user_id).await?.is_none() {
        return Err(ApiError::not_found("user not found").with_id("USER-NotFound"));
    }
    if member::get(&mut tx, scope, scope_id, user_id).await?.is_some() {
        return Err(ApiError::exists("the user is already a member").with_id("MEMBER-AlreadyExists"));
    }
    member::insert(&mut tx, scope, scope_id, user_id, &roles, now).await.map_err(|e| match e {
        StoreError::Conflict => ApiError::exists("the user is already a member").with_id("MEMBER-AlreadyExists"),
        StoreError::Gone => ApiError::not_found("user not found").with_id("USER-NotFound"),
        other => other.into(),
    })?;
    tx.commit().await?;
    Ok(Json(DetailsResponse { details: Details::created(now, scope_id) }))
}

pub async fn update(
    state: &AppState,
    scope: Scope,
    scope_id: &str,
    req_name: &str,
    user_id: &str,
    roles: &[String],
) -> ApiResult<Json<DetailsResponse>> {
    let roles = check_roles(req_name, roles, scope_roles(scope))?;
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    if scope == Scope::Iam {
        keep_an_owner(&mut tx, user_id, roles.iter().any(|r| r == "IAM_OWNER")).await?;
    }
    // An update, not an upsert: a removal committed since this request began leaves nothing
    // to update (404), where an upsert brought the member back with the new roles (on
    // PostgreSQL, where a read takes no lock; SQLite's writers take turns).
    if !member::set_roles(&mut tx, scope, scope_id, user_id, &roles, now).await? {
        return Err(ApiError::not_found("member not found").with_id("MEMBER-NotFound"));
    }
    tx.commit().await?;
    Ok(Json(DetailsResponse { details: Details::changed(now, scope_id) }))
}

pub async fn remove(state: &AppState, scope: Scope, scope_id: &str, user_id: &str) -> ApiResult<Json<DetailsResponse>> {
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    if scope == Scope::Iam {
        keep_an_owner(&mut tx, user_id, false).await?;
    }
    if !member::remove(&mut tx, scope, scope_id, user_id).await? {
        return Err(ApiError::not_found("member not found").with_id("MEMBER-NotFound"));
    }
    tx.commit().await?;
    Ok(Json(DetailsResponse { details: Details::changed(now, scope_id) }))
}

/// Refuses a caller who may not change accounts that hold `held`: an instance member's only one
/// with `IamMemberWrite`, a member of any organization or project only one with
/// `OrgMemberWrite`; otherwise a user manager could give itself an owner's powers through the
/// owner's account. `whose` names the accounts in the message.
pub fn may_change_administrators(caller: &Caller, held: member::Held, whose: &str) -> ApiResult<()> {
    let needed = if held.iam {
        Some(Permission::IamMemberWrite)
    } else if held.other {
        Some(Permission::OrgMemberWrite)
    } else {
        None
    };
    match needed {
        Some(p) if !caller.can(p) => Err(ApiError::denied(format!(
            "{whose} an administrator: changing it needs the permission to manage administrators"
        ))
        .with_id("USER-Administrator")),
        _ => Ok(()),
    }
}

/// Refuses a change after which user `user_id` would no longer own the instance
/// (`keeps_ownership` false: its membership removed or its `IAM_OWNER` role taken away, the
/// user deleted) when it is the instance's last owner: nobody could manage administrators
/// again without editing the database. Call inside the transaction that makes the change.
pub async fn keep_an_owner(tx: &mut Conn, user_id: &str, keeps_ownership: bool) -> ApiResult<()> {
    if keeps_ownership {
        return Ok(());
    }
    let owners = member::iam_owners_locked(tx).await?;
    if owners.len() == 1 && owners[0].0 == user_id {
        return Err(ApiError::precondition(
            "the instance's last IAM_OWNER cannot be removed; make another owner first",
        )
        .with_id("MEMBER-LastOwner"));
    }
    Ok(())
}

/// Refuses deactivating or removing organization `org_id` when every owner of the instance who
/// can act is one of its users (see [`keep_an_owner`]).
pub async fn keep_an_owner_outside(tx: &mut Conn, org_id: &str) -> ApiResult<()> {
    let owners = member::iam_owners_locked(tx).await?;
    if !owners.is_empty() && owners.iter().all(|(_, o)| o == org_id) {
        return Err(ApiError::precondition(
            "the instance's last IAM_OWNER is a user of this organization; make an owner elsewhere first",
        )
        .with_id("MEMBER-LastOwner"));
    }
    Ok(())
}

pub async fn list(
    state: &AppState,
    scope: Scope,
    scope_id: &str,
    req: &ListMembersRequest,
) -> ApiResult<Json<ListResponse<MemberView>>> {
    let what = match scope {
        Scope::Org => "ListOrgMembersRequest",
        _ => "ListIAMMembersRequest",
    };
    req.check(what)?;
    let mut c = state.db.conn().await?;
    let members = member::list(&mut c, scope, scope_id).await?;
    let mut rows = Vec::with_capacity(members.len());
    for m in members {
        if let Some(u) = user::get(&mut c, &m.user_id).await?
            && req.keeps(&u)
        {
            rows.push((m, u));
        }
    }
    Ok(Json(paginate(rows, &req.query, state.clock.now(), |(m, u)| MemberView::new(m, u, scope_id))?))
}

#[utoipa::path(post, path = "/orgs/me/members", request_body = AddMemberRequest, responses((status = 200, body = DetailsResponse)))]
pub async fn add_org_member(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<AddMemberRequest>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::OrgMemberWrite)?;
    add(&state, Scope::Org, &caller.org_id, "AddOrgMemberRequest", &req.user_id, &req.roles).await
}

#[utoipa::path(put, path = "/orgs/me/members/{user_id}", request_body = UpdateMemberRequest, responses((status = 200, body = DetailsResponse)))]
pub async fn update_org_member(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
    ApiJson(req): ApiJson<UpdateMemberRequest>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::OrgMemberWrite)?;
    update(&state, Scope::Org, &caller.org_id, "UpdateOrgMemberRequest", &user_id, &req.roles).await
}

#[utoipa::path(delete, path = "/orgs/me/members/{user_id}", responses((status = 200, body = DetailsResponse)))]
pub async fn remove_org_member(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::OrgMemberWrite)?;
    remove(&state, Scope::Org, &caller.org_id, &user_id).await
}

#[derive(Deserialize, Default, Clone, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct FirstNameQuery {
    first_name: String,
    method: TextQueryMethod,
}

#[derive(Deserialize, Default, Clone, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct LastNameQuery {
    last_name: String,
    method: TextQueryMethod,
}

#[derive(Deserialize, Default, Clone, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct EmailQuery {
    email: String,
    method: TextQueryMethod,
}

#[derive(Deserialize, Default, Clone, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct UserIdQuery {
    user_id: String,
}

/// One filter of a member search (`zitadel.member.v1.SearchQuery`).
#[derive(Deserialize, Default, Clone, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct MemberQueries {
    first_name_query: Option<FirstNameQuery>,
    last_name_query: Option<LastNameQuery>,
    email_query: Option<EmailQuery>,
    user_id_query: Option<UserIdQuery>,
}

#[derive(Deserialize, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ListMembersRequest {
    query: ListQuery,
    queries: Vec<MemberQueries>,
}

impl ListMembersRequest {
    fn check(&self, what: &'static str) -> ApiResult<()> {
        let mut budget = SearchBudget::new(what);
        for q in &self.queries {
            budget.term()?;
            let set = [
                q.first_name_query.is_some(),
                q.last_name_query.is_some(),
                q.email_query.is_some(),
                q.user_id_query.is_some(),
            ];
            budget.one_member(set.iter().filter(|s| **s).count())?;
            for text in [
                q.first_name_query.as_ref().map(|f| f.first_name.as_str()),
                q.last_name_query.as_ref().map(|l| l.last_name.as_str()),
                q.email_query.as_ref().map(|e| e.email.as_str()),
                q.user_id_query.as_ref().map(|u| u.user_id.as_str()),
            ]
            .into_iter()
            .flatten()
            {
                budget.text(text)?;
            }
        }
        Ok(())
    }

    /// Whether a member (user `u`) passes every filter (AND-combined, as in the reference); a
    /// machine user has no first or last name nor e-mail address to match.
    fn keeps(&self, u: &user::User) -> bool {
        let h = u.human();
        let text = |method: TextQueryMethod, value: Option<&str>, pattern: &str| {
            value.is_some_and(|v| method.matches(v, pattern))
        };
        self.queries.iter().all(|q| {
            q.first_name_query.as_ref().is_none_or(|f| text(f.method, h.map(|h| h.first_name.as_str()), &f.first_name))
                && q.last_name_query
                    .as_ref()
                    .is_none_or(|l| text(l.method, h.map(|h| h.last_name.as_str()), &l.last_name))
                && q.email_query.as_ref().is_none_or(|e| text(e.method, h.map(|h| h.email.as_str()), &e.email))
                && q.user_id_query.as_ref().is_none_or(|i| u.user_id == i.user_id)
        })
    }
}

#[utoipa::path(post, path = "/orgs/me/members/_search", request_body = ListMembersRequest, responses((status = 200, body = ListResponse<MemberView>)))]
pub async fn list_org_members(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<ListMembersRequest>,
) -> ApiResult<Json<ListResponse<MemberView>>> {
    caller.require(Permission::OrgMemberRead)?;
    list(&state, Scope::Org, &caller.org_id, &req).await
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct RolesResponse {
    result: Vec<&'static str>,
}

#[utoipa::path(post, path = "/orgs/members/roles/_search", responses((status = 200, body = RolesResponse)))]
pub async fn list_org_member_roles(caller: Caller) -> ApiResult<Json<RolesResponse>> {
    caller.require(Permission::OrgMemberRead)?;
    Ok(Json(RolesResponse { result: ORG_ROLES.to_vec() }))
}

/// `ListIAMMemberRolesResponse`: `details` and `roles` (the organization's call answers
/// `result`, as the reference has it).
#[derive(Serialize, utoipa::ToSchema)]
pub struct IamRolesResponse {
    details: crate::api::types::ListDetails,
    roles: Vec<&'static str>,
}

pub async fn list_iam_member_roles(State(state): State<AppState>) -> Json<IamRolesResponse> {
    let details = crate::api::types::ListDetails::new(IAM_ROLES.len() as i64, state.clock.now());
    Json(IamRolesResponse { details, roles: IAM_ROLES.to_vec() })
}
