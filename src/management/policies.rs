//! An organization's own policies (`/management/v1/policies/...`): login, lockout and password
//! complexity. Each is read (the organization's own, or the instance's with `isDefault`), added,
//! updated and reset to the instance's. Sign-in applies them to the organization's users: the
//! login policy once the person is known (see `login::flow::policy_for`; the default
//! organization's also to registration), the lockout policy to their wrong passwords and codes,
//! the complexity policy to every new password.

use axum::Json;
use axum::extract::State;

use crate::admin::settings::{
    ComplexityView, LockoutView, LoginPolicyDoc, PolicyResponse, PutComplexityRequest, PutLockoutRequest,
};
use crate::api::error::ApiResult;
use crate::api::types::{Details, DetailsResponse};
use crate::api::{ApiError, ApiJson, Caller};
use crate::app::AppState;
use crate::domain::roles::Permission;
use crate::domain::settings::{LockoutPolicy, LoginPolicy, PasswordComplexityPolicy};
use crate::store::setting::{self, INSTANCE, Setting};

/// The caller's organization's policy `T` with its details and whether it is the instance's.
async fn read<T: Setting>(state: &AppState, caller: &Caller) -> ApiResult<(T, Details, bool)> {
    caller.require(Permission::PolicyRead)?;
    let mut c = state.db.conn().await?;
    let own = setting::load::<T>(&mut c, &caller.org_id).await?;
    let (l, owner, is_default) = match own.times {
        Some(_) => (own, caller.org_id.as_str(), false),
        None => (setting::load::<T>(&mut c, INSTANCE).await?, "", true),
    };
    let details = l.times.map(|(created, changed)| Details::read(created, changed, owner)).unwrap_or_default();
    Ok((l.value, details, is_default))
}

/// Adds the caller's organization's own policy `T`, made by `make` from the instance's.
async fn add<T: Setting>(
    state: &AppState,
    caller: &Caller,
    exists: &'static str,
    make: impl FnOnce(&T) -> ApiResult<T>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::PolicyWrite)?;
    let now = state.clock.now();
    let mut c = state.db.conn().await?;
    let base = setting::load::<T>(&mut c, INSTANCE).await?.value;
    if !setting::add(&mut c, &caller.org_id, &make(&base)?, now).await? {
        return Err(ApiError::exists("the organization has its own policy already; update it").with_id(exists));
    }
    Ok(Json(DetailsResponse { details: Details::created(now, &caller.org_id) }))
}

/// Changes the caller's organization's own policy `T` with `edit`, holding it meanwhile.
async fn update<T: Setting>(
    state: &AppState,
    caller: &Caller,
    missing: &'static str,
    edit: impl FnOnce(&T) -> ApiResult<T>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::PolicyWrite)?;
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    let Some(current) = setting::load_set_locked::<T>(&mut tx, &caller.org_id).await? else {
        return Err(not_found(missing));
    };
    setting::save(&mut tx, &caller.org_id, &edit(&current)?, now).await?;
    tx.commit().await?;
    Ok(Json(DetailsResponse { details: Details::changed(now, &caller.org_id) }))
}

/// Removes the caller's organization's own policy `T`: the instance's applies again.
async fn reset<T: Setting>(
    state: &AppState,
    caller: &Caller,
    missing: &'static str,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::PolicyWrite)?;
    let now = state.clock.now();
    let mut c = state.db.conn().await?;
    if !setting::reset::<T>(&mut c, &caller.org_id).await? {
        return Err(not_found(missing));
    }
    Ok(Json(DetailsResponse { details: Details::changed(now, &caller.org_id) }))
}

fn not_found(id: &'static str) -> ApiError {
    ApiError::not_found("the organization has no policy of its own of this kind").with_id(id)
}

#[utoipa::path(get, path = "/policies/login", responses((status = 200, body = PolicyResponse<LoginPolicyDoc>)))]
pub async fn get_login(
    State(state): State<AppState>,
    caller: Caller,
) -> ApiResult<Json<PolicyResponse<LoginPolicyDoc>>> {
    let (p, details, is_default) = read::<LoginPolicy>(&state, &caller).await?;
    let mut policy = LoginPolicyDoc::from_policy(&p, Some(details));
    policy.is_default = is_default;
    Ok(Json(PolicyResponse { policy, is_default: Some(is_default) }))
}

/// AddCustomLoginPolicy: lifetimes the request leaves out are the instance's.
#[utoipa::path(post, path = "/policies/login", request_body = LoginPolicyDoc, responses((status = 200, body = DetailsResponse)))]
pub async fn add_login(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<LoginPolicyDoc>,
) -> ApiResult<Json<DetailsResponse>> {
    add(&state, &caller, "ORG-LoginPolicyExists", |base| req.to_policy("AddCustomLoginPolicyRequest", base)).await
}

/// UpdateCustomLoginPolicy: lifetimes the request leaves out keep their values.
#[utoipa::path(put, path = "/policies/login", request_body = LoginPolicyDoc, responses((status = 200, body = DetailsResponse)))]
pub async fn update_login(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<LoginPolicyDoc>,
) -> ApiResult<Json<DetailsResponse>> {
    update(&state, &caller, "ORG-LoginPolicyNotFound", |current| {
        req.to_policy("UpdateCustomLoginPolicyRequest", current)
    })
    .await
}

/// ResetLoginPolicyToDefault.
#[utoipa::path(delete, path = "/policies/login", responses((status = 200, body = DetailsResponse)))]
pub async fn reset_login(State(state): State<AppState>, caller: Caller) -> ApiResult<Json<DetailsResponse>> {
    reset::<LoginPolicy>(&state, &caller, "ORG-LoginPolicyNotFound").await
}

#[utoipa::path(get, path = "/policies/lockout", responses((status = 200, body = PolicyResponse<LockoutView>)))]
pub async fn get_lockout(
    State(state): State<AppState>,
    caller: Caller,
) -> ApiResult<Json<PolicyResponse<LockoutView>>> {
    let (p, details, is_default) = read::<LockoutPolicy>(&state, &caller).await?;
    Ok(Json(PolicyResponse { policy: LockoutView::new(&p, details, is_default), is_default: Some(is_default) }))
}

/// AddCustomLockoutPolicy.
#[utoipa::path(post, path = "/policies/lockout", request_body = PutLockoutRequest, responses((status = 200, body = DetailsResponse)))]
pub async fn add_lockout(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<PutLockoutRequest>,
) -> ApiResult<Json<DetailsResponse>> {
    add(&state, &caller, "ORG-LockoutPolicyExists", |_: &LockoutPolicy| req.to_policy("AddCustomLockoutPolicyRequest"))
        .await
}

/// UpdateCustomLockoutPolicy.
#[utoipa::path(put, path = "/policies/lockout", request_body = PutLockoutRequest, responses((status = 200, body = DetailsResponse)))]
pub async fn update_lockout(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<PutLockoutRequest>,
) -> ApiResult<Json<DetailsResponse>> {
    update(&state, &caller, "ORG-LockoutPolicyNotFound", |_: &LockoutPolicy| {
        req.to_policy("UpdateCustomLockoutPolicyRequest")
    })
    .await
}

/// ResetLockoutPolicyToDefault.
#[utoipa::path(delete, path = "/policies/lockout", responses((status = 200, body = DetailsResponse)))]
pub async fn reset_lockout(State(state): State<AppState>, caller: Caller) -> ApiResult<Json<DetailsResponse>> {
    reset::<LockoutPolicy>(&state, &caller, "ORG-LockoutPolicyNotFound").await
}

#[utoipa::path(get, path = "/policies/password/complexity", responses((status = 200, body = PolicyResponse<ComplexityView>)))]
pub async fn get_complexity(
    State(state): State<AppState>,
    caller: Caller,
) -> ApiResult<Json<PolicyResponse<ComplexityView>>> {
    let (p, details, is_default) = read::<PasswordComplexityPolicy>(&state, &caller).await?;
    Ok(Json(PolicyResponse { policy: ComplexityView::new(&p, details, is_default), is_default: Some(is_default) }))
}

/// AddCustomPasswordComplexityPolicy.
#[utoipa::path(post, path = "/policies/password/complexity", request_body = PutComplexityRequest, responses((status = 200, body = DetailsResponse)))]
pub async fn add_complexity(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<PutComplexityRequest>,
) -> ApiResult<Json<DetailsResponse>> {
    add(&state, &caller, "ORG-ComplexityPolicyExists", |_: &PasswordComplexityPolicy| {
        req.to_policy("AddCustomPasswordComplexityPolicyRequest")
    })
    .await
}

/// UpdateCustomPasswordComplexityPolicy.
#[utoipa::path(put, path = "/policies/password/complexity", request_body = PutComplexityRequest, responses((status = 200, body = DetailsResponse)))]
pub async fn update_complexity(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<PutComplexityRequest>,
) -> ApiResult<Json<DetailsResponse>> {
    update(&state, &caller, "ORG-ComplexityPolicyNotFound", |_: &PasswordComplexityPolicy| {
        req.to_policy("UpdateCustomPasswordComplexityPolicyRequest")
    })
    .await
}

/// ResetPasswordComplexityPolicyToDefault.
#[utoipa::path(delete, path = "/policies/password/complexity", responses((status = 200, body = DetailsResponse)))]
pub async fn reset_complexity(State(state): State<AppState>, caller: Caller) -> ApiResult<Json<DetailsResponse>> {
    reset::<PasswordComplexityPolicy>(&state, &caller, "ORG-ComplexityPolicyNotFound").await
}
