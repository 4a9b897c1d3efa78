//! Organizations and their domains.

use axum::Json;
use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};

use super::views::OrgView;
use crate::api::error::ApiResult;
use crate::api::types::{Details, DetailsResponse, ListDetails, ListQuery, ListResponse, SearchBudget, is_false};
use crate::api::{ApiError, ApiJson, Caller};
use crate::app::AppState;
use crate::domain::enums::{DomainValidationType, OrgState, TextQueryMethod};
use crate::domain::roles::Permission;
use crate::domain::validate::{self, slug};
use crate::id::new_id;
use crate::store::{Conn, member, org, user};

#[derive(Deserialize, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct AddOrgRequest {
    #[schema(required = true, min_length = 1, max_length = 200)]
    name: String,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddOrgResponse {
    id: String,
    details: Details,
}

/// Creates an organization with a generated primary domain `{slug}.{external host}`. Used by
/// `POST /management/v1/orgs` and the admin set-up call.
/// The domain an organization gets when none is given: `{slug of its name}.{external host}`,
/// with the end of its id appended when that domain is taken: held by another organization, or
/// in the user names of users elsewhere (`admin@newco.{host}` made before NewCo exists would be
/// NewCo's login name and take its sign-ins). Should that be taken too, a random tail.
pub async fn generated_domain(state: &AppState, c: &mut Conn, org_id: &str, name: &str) -> ApiResult<String> {
    let host = state.settings.external_host();
    let base = format!("{}.{host}", slug(name));
    if domain_free(c, org_id, &base).await? {
        return Ok(base);
    }
    // The end of the id as a label: its last six letters and digits, in lower case (an imported
    // id may hold any characters).
    let mut tail: Vec<char> =
        org_id.chars().filter(char::is_ascii_alphanumeric).map(|c| c.to_ascii_lowercase()).collect();
    if tail.is_empty() {
        tail = crate::id::new_id().chars().collect();
    }
    let tail: String = tail[tail.len().saturating_sub(6)..].iter().collect();
    let with_tail = format!("{}-{tail}.{host}", slug(name));
    if domain_free(c, org_id, &with_tail).await? {
        return Ok(with_tail);
    }
    let random = crate::crypto::secret::random_id().to_ascii_lowercase().replace(['-', '_'], "");
    Ok(format!("{}-{}.{host}", slug(name), &random[..random.len().min(12)]))
}

/// Whether no organization holds `domain` and no user outside `org_id` has it in its user name.
async fn domain_free(c: &mut Conn, org_id: &str, domain: &str) -> ApiResult<bool> {
    Ok(org::get_domain(c, domain).await?.is_none() && !user::username_in_domain_elsewhere(c, org_id, domain).await?)
}

pub async fn create_org(
    state: &AppState,
    c: &mut Conn,
    name: &str,
    domain: Option<&str>,
    now: i64,
) -> ApiResult<String> {
    let name = name.trim();
    if org::name_taken(c, name).await? {
        return Err(ApiError::exists("an organization with this name already exists").with_id("ORG-AlreadyExists"));
    }
    let org_id = new_id();
    org::insert(c, &org_id, name, OrgState::Active, now).await?;
    let domain = match domain {
        Some(d) => {
            let d = d.trim().to_ascii_lowercase();
            if org::get_domain(c, &d).await?.is_some() {
                return Err(ApiError::exists("the domain belongs to another organization").with_id("ORG-DomainTaken"));
            }
            if user::username_in_domain_elsewhere(c, &org_id, &d).await? {
                return Err(ApiError::precondition(
                    "users of another organization have user names in this domain; they must be renamed first",
                )
                .with_id("ORG-DomainUsedByUsers"));
            }
            d
        }
        None => generated_domain(state, c, &org_id, name).await?,
    };
    org::insert_domain(
        c,
        &org::OrgDomain {
            domain,
            org_id: org_id.clone(),
            is_verified: true,
            is_primary: true,
            validation_type: DomainValidationType::Unspecified,
            created_at: now,
        },
    )
    .await?;
    Ok(org_id)
}

#[utoipa::path(post, path = "/orgs", request_body = AddOrgRequest, responses((status = 200, body = AddOrgResponse)))]
pub async fn add_org(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<AddOrgRequest>,
) -> ApiResult<Json<AddOrgResponse>> {
    caller.require(Permission::OrgCreate)?;
    validate::required("AddOrgRequest", "name", &req.name, 200)?;
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    let org_id = create_org(&state, &mut tx, &req.name, None, now).await?;
    // The creator owns the new organization.
    member::upsert(&mut tx, member::Scope::Org, &org_id, &caller.user_id, &["ORG_OWNER".to_string()], now).await?;
    tx.commit().await?;
    Ok(Json(AddOrgResponse { details: Details::created(now, &org_id), id: org_id }))
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct GetOrgResponse {
    pub org: OrgView,
}

pub async fn load_org(state: &AppState, org_id: &str) -> ApiResult<org::Org> {
    let mut c = state.db.conn().await?;
    org::get(&mut c, org_id).await?.ok_or_else(|| ApiError::not_found("organization not found").with_id("ORG-NotFound"))
}

#[utoipa::path(get, path = "/orgs/me", responses((status = 200, body = GetOrgResponse)))]
pub async fn get_my_org(State(state): State<AppState>, caller: Caller) -> ApiResult<Json<GetOrgResponse>> {
    caller.require(Permission::OrgRead)?;
    let o = load_org(&state, &caller.org_id).await?;
    Ok(Json(GetOrgResponse { org: OrgView::from(&o) }))
}

#[utoipa::path(put, path = "/orgs/me", request_body = AddOrgRequest, responses((status = 200, body = DetailsResponse)))]
pub async fn update_org(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<AddOrgRequest>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::OrgWrite)?;
    validate::required("UpdateOrgRequest", "name", &req.name, 200)?;
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    let current =
        org::get(&mut tx, &caller.org_id).await?.ok_or_else(|| ApiError::not_found("organization not found"))?;
    if current.name == req.name.trim() {
        return Err(ApiError::precondition("the organization already has this name").with_id("ORG-NotChanged"));
    }
    if crate::store::fold(&current.name) != crate::store::fold(&req.name) && org::name_taken(&mut tx, &req.name).await?
    {
        return Err(ApiError::exists("an organization with this name already exists").with_id("ORG-AlreadyExists"));
    }
    org::rename(&mut tx, &caller.org_id, req.name.trim(), now).await?;
    tx.commit().await?;
    Ok(Json(DetailsResponse { details: Details::changed(now, &caller.org_id) }))
}

#[derive(Deserialize, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct AddDomainRequest {
    #[schema(required = true, min_length = 1, max_length = 200)]
    domain: String,
}

#[utoipa::path(post, path = "/orgs/me/domains", request_body = AddDomainRequest, responses((status = 200, body = DetailsResponse)))]
pub async fn add_domain(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<AddDomainRequest>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::OrgWrite)?;
    validate::domain("AddOrgDomainRequest", "domain", req.domain.trim())?;
    let domain = req.domain.trim().to_ascii_lowercase();
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    if let Some(existing) = org::get_domain(&mut tx, &domain).await? {
        return Err(if existing.org_id == caller.org_id {
            ApiError::exists("the organization already has this domain").with_id("ORG-DomainExists")
        } else {
            ApiError::exists("the domain belongs to another organization").with_id("ORG-DomainTaken")
        });
    }
    // Users elsewhere whose user names end in it would hold this organization's login names.
    if user::username_in_domain_elsewhere(&mut tx, &caller.org_id, &domain).await? {
        return Err(ApiError::precondition(
            "users of another organization have user names in this domain; they must be renamed first",
        )
        .with_id("ORG-DomainUsedByUsers"));
    }
    // Domains are accepted as verified: latch trusts its organization owners and offers no
    // DNS or HTTP challenge.
    org::insert_domain(
        &mut tx,
        &org::OrgDomain {
            domain,
            org_id: caller.org_id.clone(),
            is_verified: true,
            is_primary: false,
            validation_type: DomainValidationType::Unspecified,
            created_at: now,
        },
    )
    .await?;
    tx.commit().await?;
    Ok(Json(DetailsResponse { details: Details::created(now, &caller.org_id) }))
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DomainView {
    org_id: String,
    details: Details,
    domain_name: String,
    #[serde(skip_serializing_if = "is_false")]
    is_verified: bool,
    #[serde(skip_serializing_if = "is_false")]
    is_primary: bool,
    #[serde(skip_serializing_if = "DomainValidationType::is_default")]
    validation_type: DomainValidationType,
}

#[derive(Deserialize, Default, Clone, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct DomainNameQuery {
    name: String,
    method: TextQueryMethod,
}

/// One filter of `ListOrgDomains` (`zitadel.org.v1.DomainSearchQuery`).
#[derive(Deserialize, Default, Clone, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct DomainQueries {
    domain_name_query: Option<DomainNameQuery>,
}

#[derive(Deserialize, Default, serde::Serialize, utoipa::ToSchema)]
#[schema(as = ListOrgDomainsRequest)]
#[serde(default, rename_all = "camelCase")]
pub struct ListRequest {
    query: ListQuery,
    queries: Vec<DomainQueries>,
}

impl ListRequest {
    fn check(&self) -> ApiResult<()> {
        let mut budget = SearchBudget::new("ListOrgDomainsRequest");
        for q in &self.queries {
            budget.term()?;
            budget.one_member(usize::from(q.domain_name_query.is_some()))?;
            if let Some(n) = &q.domain_name_query {
                budget.text(&n.name)?;
            }
        }
        Ok(())
    }

    /// Whether `domain` passes every filter (AND-combined).
    fn keeps(&self, domain: &str) -> bool {
        self.queries.iter().all(|q| q.domain_name_query.as_ref().is_none_or(|n| n.method.matches(domain, &n.name)))
    }
}

#[utoipa::path(post, path = "/orgs/me/domains/_search", request_body = ListRequest, responses((status = 200, body = ListResponse<DomainView>)))]
pub async fn list_domains(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<ListRequest>,
) -> ApiResult<Json<ListResponse<DomainView>>> {
    caller.require(Permission::OrgRead)?;
    req.check()?;
    let page = req.query.page()?;
    let mut c = state.db.conn().await?;
    let all: Vec<_> =
        org::domains(&mut c, &caller.org_id).await?.into_iter().filter(|d| req.keeps(&d.domain)).collect();
    let total = all.len() as i64;
    let result = all
        .into_iter()
        .skip(page.offset as usize)
        .take(page.limit as usize)
        .map(|d| DomainView {
            org_id: d.org_id.clone(),
            details: Details::created(d.created_at, &d.org_id),
            domain_name: d.domain,
            is_verified: d.is_verified,
            is_primary: d.is_primary,
            validation_type: d.validation_type,
        })
        .collect();
    Ok(Json(ListResponse { details: ListDetails::new(total, state.clock.now()), sorting_column: None, result }))
}

#[utoipa::path(post, path = "/orgs/me/domains/{domain}/_set_primary", responses((status = 200, body = DetailsResponse)))]
pub async fn set_primary_domain(
    State(state): State<AppState>,
    caller: Caller,
    Path(domain): Path<String>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::OrgWrite)?;
    let domain = domain.trim().to_ascii_lowercase();
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    match org::get_domain(&mut tx, &domain).await? {
        Some(d) if d.org_id == caller.org_id => {
            if !d.is_verified {
                return Err(ApiError::precondition("the domain is not verified").with_id("ORG-DomainNotVerified"));
            }
        }
        _ => {
            return Err(ApiError::not_found("the organization has no such domain").with_id("ORG-DomainNotFound"));
        }
    }
    if !org::set_primary_domain(&mut tx, &caller.org_id, &domain, now).await? {
        return Err(ApiError::not_found("the organization has no such domain").with_id("ORG-DomainNotFound"));
    }
    tx.commit().await?;
    Ok(Json(DetailsResponse { details: Details::changed(now, &caller.org_id) }))
}

#[utoipa::path(delete, path = "/orgs/me/domains/{domain}", responses((status = 200, body = DetailsResponse)))]
pub async fn remove_domain(
    State(state): State<AppState>,
    caller: Caller,
    Path(domain): Path<String>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::OrgWrite)?;
    let domain = domain.trim().to_ascii_lowercase();
    let now = state.clock.now();
    let mut c = state.db.conn().await?;
    match org::get_domain(&mut c, &domain).await? {
        Some(d) if d.org_id == caller.org_id && d.is_primary => {
            Err(ApiError::precondition("the primary domain cannot be removed").with_id("ORG-PrimaryDomain"))
        }
        Some(d) if d.org_id == caller.org_id => {
            // Removed only while not primary: it may have become so meanwhile.
            if !org::remove_domain(&mut c, &caller.org_id, &domain).await? {
                return Err(ApiError::precondition("the primary domain cannot be removed").with_id("ORG-PrimaryDomain"));
            }
            Ok(Json(DetailsResponse { details: Details::changed(now, &caller.org_id) }))
        }
        _ => Err(ApiError::not_found("the organization has no such domain").with_id("ORG-DomainNotFound")),
    }
}
