//! An organization's own login policy (`/management/v1/policies/login`): read (its own, or the
//! instance's with `isDefault`), added, updated and reset to the instance's. Sign-in applies it
//! to the organization's users once the person is known (see `login::flow::policy_for`), and to
//! registration when the organization is the default one.

use axum::Json;
use axum::extract::State;

use crate::admin::settings::{LoginPolicyDoc, PolicyResponse};
use crate::api::error::ApiResult;
use crate::api::types::{Details, DetailsResponse};
use crate::api::{ApiError, ApiJson, Caller};
use crate::app::AppState;
use crate::domain::roles::Permission;
use crate::domain::settings::LoginPolicy;
use crate::store::setting::{self, INSTANCE};

#[utoipa::path(get, path = "/policies/login", responses((status = 200, body = PolicyResponse<LoginPolicyDoc>)))]
pub async fn get_login(
    State(state): State<AppState>,
    caller: Caller,
) -> ApiResult<Json<PolicyResponse<LoginPolicyDoc>>> {
    caller.require(Permission::PolicyRead)?;
    let mut c = state.db.conn().await?;
    let own = setting::load::<LoginPolicy>(&mut c, &caller.org_id).await?;
    let (l, owner, is_default) = match own.times {
        Some(_) => (own, caller.org_id.as_str(), false),
        None => (setting::load::<LoginPolicy>(&mut c, INSTANCE).await?, "", true),
    };
    let details = l.times.map(|(created, changed)| Details::read(created, changed, owner));
    let mut policy = LoginPolicyDoc::from_policy(&l.value, details);
    policy.is_default = is_default;
    Ok(Json(PolicyResponse { policy }))
}

/// AddCustomLoginPolicy: the organization's own policy, starting from the instance's for the
/// lifetimes the request leaves out.
#[utoipa::path(post, path = "/policies/login", request_body = LoginPolicyDoc, responses((status = 200, body = DetailsResponse)))]
pub async fn add_login(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<LoginPolicyDoc>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::PolicyWrite)?;
    let now = state.clock.now();
    let mut c = state.db.conn().await?;
    let base = setting::load::<LoginPolicy>(&mut c, INSTANCE).await?.value;
    let policy = req.to_policy("AddCustomLoginPolicyRequest", &base)?;
    if !setting::add(&mut c, &caller.org_id, &policy, now).await? {
        return Err(ApiError::exists("the organization has its own login policy already; update it")
            .with_id("ORG-LoginPolicyExists"));
    }
    Ok(Json(DetailsResponse { details: Details::created(now, &caller.org_id) }))
}

/// UpdateCustomLoginPolicy: lifetimes the request leaves out keep their values.
#[utoipa::path(put, path = "/policies/login", request_body = LoginPolicyDoc, responses((status = 200, body = DetailsResponse)))]
pub async fn update_login(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<LoginPolicyDoc>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::PolicyWrite)?;
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    let Some(current) = setting::load_set_locked::<LoginPolicy>(&mut tx, &caller.org_id).await? else {
        return Err(not_found());
    };
    let policy = req.to_policy("UpdateCustomLoginPolicyRequest", &current)?;
    setting::save(&mut tx, &caller.org_id, &policy, now).await?;
    tx.commit().await?;
    Ok(Json(DetailsResponse { details: Details::changed(now, &caller.org_id) }))
}

/// ResetLoginPolicyToDefault: the organization follows the instance's policy again.
#[utoipa::path(delete, path = "/policies/login", responses((status = 200, body = DetailsResponse)))]
pub async fn reset_login(State(state): State<AppState>, caller: Caller) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::PolicyWrite)?;
    let now = state.clock.now();
    let mut c = state.db.conn().await?;
    if !setting::reset::<LoginPolicy>(&mut c, &caller.org_id).await? {
        return Err(not_found());
    }
    Ok(Json(DetailsResponse { details: Details::changed(now, &caller.org_id) }))
}

fn not_found() -> ApiError {
    ApiError::not_found("the organization has no login policy of its own").with_id("ORG-LoginPolicyNotFound")
}
