//! Deactivating, reactivating and removing an organization (`/management/v1/orgs/me`).
//!
//! A deactivated organization's users, human and machine, cannot sign in or get tokens, and the
//! tokens, sessions and codes they held end (reactivating brings none of them back, as for one
//! user); its applications keep serving users of other organizations, and administrators keep
//! managing it through the API (so that someone can reactivate it). Removing an organization
//! deletes everything it holds. Neither is allowed for the instance's default organization (where
//! registration puts new users), nor when it would leave the instance without an owner who can
//! act. All three change the accounts of the organization's users, so a caller needs what
//! changing each of them needs: when one of them is an administrator, the permission to manage
//! administrators of that level (see `users::load_user_to_change`).

use axum::Json;
use axum::extract::State;

use crate::api::error::ApiResult;
use crate::api::types::{Details, DetailsResponse};
use crate::api::{ApiError, Caller};
use crate::app::AppState;
use crate::domain::enums::OrgState;
use crate::domain::roles::Permission;
use crate::store::{Conn, instance, member, org, user};

#[utoipa::path(post, path = "/orgs/me/_deactivate", responses((status = 200, body = DetailsResponse)))]
pub async fn deactivate_org(State(state): State<AppState>, caller: Caller) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::OrgWrite)?;
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    load(&mut tx, &caller.org_id).await?;
    not_the_default(&mut tx, &caller.org_id, "deactivated").await?;
    may_change_its_users(&mut tx, &caller).await?;
    super::members::keep_an_owner_outside(&mut tx, &caller.org_id).await?;
    if !org::change_state(&mut tx, &caller.org_id, OrgState::Active, OrgState::Inactive, now).await? {
        return Err(ApiError::precondition("the organization is not active").with_id("ORG-NotActive"));
    }
    user::cut_off_org_tokens(&mut tx, &caller.org_id, now).await?;
    tx.commit().await?;
    Ok(Json(DetailsResponse { details: Details::changed(now, &caller.org_id) }))
}

#[utoipa::path(post, path = "/orgs/me/_reactivate", responses((status = 200, body = DetailsResponse)))]
pub async fn reactivate_org(State(state): State<AppState>, caller: Caller) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::OrgWrite)?;
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    load(&mut tx, &caller.org_id).await?;
    // Reactivating gives its users back their sign-ins and their personal access tokens (which
    // no cut-off ends), so it needs what deactivating needs.
    may_change_its_users(&mut tx, &caller).await?;
    if !org::change_state(&mut tx, &caller.org_id, OrgState::Inactive, OrgState::Active, now).await? {
        return Err(ApiError::precondition("the organization is not inactive").with_id("ORG-NotInactive"));
    }
    tx.commit().await?;
    Ok(Json(DetailsResponse { details: Details::changed(now, &caller.org_id) }))
}

#[utoipa::path(delete, path = "/orgs/me", responses((status = 200, body = DetailsResponse)))]
pub async fn remove_org(State(state): State<AppState>, caller: Caller) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::OrgDelete)?;
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    load(&mut tx, &caller.org_id).await?;
    not_the_default(&mut tx, &caller.org_id, "removed").await?;
    may_change_its_users(&mut tx, &caller).await?;
    super::members::keep_an_owner_outside(&mut tx, &caller.org_id).await?;
    if !org::delete(&mut tx, &caller.org_id).await? {
        return Err(not_found());
    }
    tx.commit().await?;
    Ok(Json(DetailsResponse { details: Details::changed(now, &caller.org_id) }))
}

async fn load(c: &mut Conn, org_id: &str) -> ApiResult<org::Org> {
    org::get(c, org_id).await?.ok_or_else(not_found)
}

fn not_found() -> ApiError {
    ApiError::not_found("organization not found").with_id("ORG-NotFound")
}

/// Refuses a caller who may not change the organization's administrators.
async fn may_change_its_users(c: &mut Conn, caller: &Caller) -> ApiResult<()> {
    let held = member::held_in_org(c, &caller.org_id).await?;
    super::members::may_change_administrators(caller, held, "a user of the organization is")
}

async fn not_the_default(c: &mut Conn, org_id: &str, what: &str) -> ApiResult<()> {
    if instance::default_org(c).await?.as_deref() == Some(org_id) {
        return Err(ApiError::precondition(format!("the instance's default organization cannot be {what}"))
            .with_id("ORG-DefaultOrg"));
    }
    Ok(())
}
