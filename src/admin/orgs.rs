//! Instance-level organization calls: set-up (organization with its first user), search, read.

use axum::Json;
use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};

use crate::api::error::ApiResult;
use crate::api::types::{Details, ListDetails, ListQuery, ListResponse, SearchBudget};
use crate::api::{ApiError, ApiJson, Caller};
use crate::app::AppState;
use crate::domain::enums::{OrgFieldName, OrgState, TextQueryMethod};
use crate::domain::roles::{ORG_ROLES, Permission};
use crate::domain::validate;
use crate::management::orgs::{GetOrgResponse, create_org, load_org};
use crate::management::passwords::hash_new_password;
use crate::management::users::{HumanInput, insert_human};
use crate::management::views::OrgView;
use crate::store::member;
use crate::store::org::{self, OrgQuery};

#[derive(Deserialize, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct SetupOrgInput {
    #[schema(required = true, min_length = 1, max_length = 200)]
    name: String,
    domain: String,
}

#[derive(Deserialize, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct SetUpOrgRequest {
    #[schema(required = true)]
    org: Option<SetupOrgInput>,
    human: Option<HumanInput>,
    roles: Vec<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SetUpOrgResponse {
    details: Details,
    org_id: String,
    user_id: String,
}

#[utoipa::path(post, path = "/orgs/_setup", request_body = SetUpOrgRequest, responses((status = 200, body = SetUpOrgResponse)))]
pub async fn setup(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<SetUpOrgRequest>,
) -> ApiResult<Json<SetUpOrgResponse>> {
    caller.require(Permission::IamWrite)?;
    let r = "SetUpOrgRequest";
    let o = req.org.as_ref().ok_or_else(|| ApiError::invalid(format!("invalid {r}.org: value is required")))?;
    validate::required(r, "org.name", &o.name, 200)?;
    if !o.domain.is_empty() {
        validate::domain(r, "org.domain", &o.domain)?;
    }
    let h = req.human.as_ref().ok_or_else(|| ApiError::invalid(format!("invalid {r}.human: value is required")))?;
    let (username, mut human) = h.validate(r)?;
    let roles = if req.roles.is_empty() { vec!["ORG_OWNER".to_string()] } else { req.roles.clone() };
    if let Some(bad) = roles.iter().find(|x| !ORG_ROLES.contains(&x.as_str())) {
        return Err(ApiError::invalid(format!("invalid {r}.roles: unknown role '{bad}'")));
    }
    if !h.password.is_empty() {
        // The new organization has no policy of its own yet: the instance policy applies.
        human.password_hash = Some(hash_new_password(&state, "", r, &h.password).await?);
        human.password_change_required = true;
        human.password_changed_at = Some(state.clock.now());
    }
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    let domain = (!o.domain.is_empty()).then_some(o.domain.as_str());
    let org_id = create_org(&state, &mut tx, &o.name, domain, now).await?;
    let user_id = insert_human(&mut tx, &org_id, None, &username, human, now).await?;
    member::upsert(&mut tx, member::Scope::Org, &org_id, &user_id, &roles, now).await?;
    tx.commit().await?;
    Ok(Json(SetUpOrgResponse { details: Details::created(now, &org_id), org_id, user_id }))
}

/// The default organization: the one created at the first start, where self-registration puts
/// new users and whose applications form the operator's console. It is fixed: SetDefaultOrg is
/// not served, since moving it would hand another organization's applications the console's
/// standing (see the README).
#[utoipa::path(get, path = "/orgs/default", responses((status = 200, body = GetOrgResponse)))]
pub async fn get_default(State(state): State<AppState>, caller: Caller) -> ApiResult<Json<GetOrgResponse>> {
    caller.require(Permission::IamRead)?;
    let mut c = state.db.lazy();
    let id = state.cache.default_org(&mut c).await?;
    let id = id.ok_or_else(|| ApiError::internal("the instance has no default organization"))?;
    drop(c);
    let o = load_org(&state, &id).await?;
    Ok(Json(GetOrgResponse { org: OrgView::from(&o) }))
}

#[utoipa::path(get, path = "/orgs/{id}", responses((status = 200, body = GetOrgResponse)))]
pub async fn get(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<GetOrgResponse>> {
    caller.require(Permission::IamRead)?;
    let o = load_org(&state, &id).await?;
    Ok(Json(GetOrgResponse { org: OrgView::from(&o) }))
}

#[derive(Deserialize, Default, Clone, serde::Serialize, utoipa::ToSchema)]
#[schema(as = OrgNameQuery)]
#[serde(default, rename_all = "camelCase")]
pub struct NameQuery {
    name: String,
    method: TextQueryMethod,
}

#[derive(Deserialize, Default, Clone, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct DomainQuery {
    domain: String,
    method: TextQueryMethod,
}

#[derive(Deserialize, Default, Clone, serde::Serialize, utoipa::ToSchema)]
#[schema(as = OrgStateQuery)]
#[serde(default, rename_all = "camelCase")]
pub struct StateQuery {
    state: OrgState,
}

#[derive(Deserialize, Default, Clone, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct IdQuery {
    id: String,
}

#[derive(Deserialize, Default, Clone, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct OrgSearchQuery {
    name_query: Option<NameQuery>,
    domain_query: Option<DomainQuery>,
    state_query: Option<StateQuery>,
    id_query: Option<IdQuery>,
}

impl OrgSearchQuery {
    fn convert(&self, b: &mut SearchBudget) -> ApiResult<OrgQuery> {
        b.term()?;
        let mut found = Vec::new();
        if let Some(q) = &self.name_query {
            found.push(OrgQuery::Name(b.text(&q.name)?, q.method));
        }
        if let Some(q) = &self.domain_query {
            found.push(OrgQuery::Domain(b.text(&q.domain)?, q.method));
        }
        if let Some(q) = &self.state_query {
            found.push(OrgQuery::State(q.state));
        }
        if let Some(q) = &self.id_query {
            found.push(OrgQuery::Id(b.text(&q.id)?));
        }
        if found.len() != 1 {
            return Err(ApiError::invalid(
                "invalid ListOrgsRequest.queries: each query must set exactly one of its members",
            ));
        }
        Ok(found.remove(0))
    }
}

#[derive(Deserialize, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ListOrgsRequest {
    query: ListQuery,
    sorting_column: OrgFieldName,
    queries: Vec<OrgSearchQuery>,
}

#[utoipa::path(post, path = "/orgs/_search", request_body = ListOrgsRequest, responses((status = 200, body = ListResponse<OrgView>)))]
pub async fn search(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<ListOrgsRequest>,
) -> ApiResult<Json<ListResponse<OrgView>>> {
    caller.require(Permission::IamRead)?;
    let page = req.query.page()?;
    let mut budget = SearchBudget::new("ListOrgsRequest");
    let queries = req.queries.iter().map(|q| q.convert(&mut budget)).collect::<ApiResult<Vec<_>>>()?;
    let mut c = state.db.conn().await?;
    let (orgs, total) = org::search(&mut c, &queries, req.sorting_column == OrgFieldName::Name, page).await?;
    Ok(Json(ListResponse {
        details: ListDetails::new(total, state.clock.now()),
        sorting_column: (!req.sorting_column.is_default()).then(|| req.sorting_column.name().to_string()),
        result: orgs.iter().map(OrgView::from).collect(),
    }))
}
