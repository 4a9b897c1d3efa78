//! Passwords that administrators set: the initial password, a new password (SetHumanPassword),
//! and the checks every new password passes (length, the organization's complexity policy).

use axum::Json;
use axum::extract::{Path, State};
use serde::Deserialize;

use super::users::{load_user_to_change, require_human};
use crate::api::error::ApiResult;
use crate::api::types::{Details, DetailsResponse};
use crate::api::{ApiError, ApiJson, Caller};
use crate::app::AppState;
use crate::domain::roles::Permission;
use crate::domain::settings::PasswordComplexityPolicy;
use crate::domain::validate;
use crate::store::{Conn, credentials, setting, user};

/// The longest password accepted (a bound against hashing abuse, not a policy).
pub const MAX_PASSWORD: usize = 256;

/// The password complexity policy in force for an organization.
pub async fn complexity_policy(c: &mut Conn, org_id: &str) -> ApiResult<PasswordComplexityPolicy> {
    Ok(setting::effective::<PasswordComplexityPolicy>(c, org_id).await?)
}

/// Checks a new password against the policy and hashes it.
pub async fn hash_new_password(state: &AppState, org_id: &str, req: &str, password: &str) -> ApiResult<String> {
    check_new_password(state, org_id, req, password).await?;
    Ok(state.hasher.hash(password).await?)
}

/// Whether `password` may be set in organization `org_id` (length, complexity policy), without
/// hashing it.
pub async fn check_new_password(state: &AppState, org_id: &str, req: &str, password: &str) -> ApiResult<()> {
    let policy = {
        let mut c = state.db.conn().await?;
        complexity_policy(&mut c, org_id).await?
    };
    check_against(req, password, &policy)
}

/// Whether `password` may be set under `policy` (length, complexity).
pub fn check_against(req: &str, password: &str, policy: &PasswordComplexityPolicy) -> ApiResult<()> {
    validate::length(req, "password", password, 1, MAX_PASSWORD)?;
    let problems = policy.violations(password);
    if !problems.is_empty() {
        return Err(ApiError::invalid(format!(
            "the password does not meet the complexity policy: it {}",
            problems.join(", ")
        ))
        .with_id("COMMAND-PasswordComplexity"));
    }
    Ok(())
}

#[derive(Deserialize, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct SetPasswordRequest {
    password: String,
    no_change_required: bool,
}

#[derive(Deserialize, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(default)]
pub struct InitialPasswordRequest {
    password: String,
}

/// SetHumanInitialPassword: a first password for a human who has none yet. As every password an
/// administrator sets, it is to be changed at the first sign-in and ends what the user held
/// before (tokens, sessions); initial-password codes sent before are void.
#[utoipa::path(post, path = "/users/{user_id}/password/_initialize", request_body = InitialPasswordRequest, responses((status = 200, body = DetailsResponse)))]
pub async fn set_initial_password(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
    ApiJson(req): ApiJson<InitialPasswordRequest>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::UserWrite)?;
    let initialised = || ApiError::precondition("the user has a password already").with_id("USER-AlreadyInitialised");
    {
        let mut c = state.db.conn().await?;
        let u = load_user_to_change(&mut c, &caller, &user_id).await?;
        if require_human(&u)?.password_hash.is_some() {
            return Err(initialised());
        }
    }
    let hash = hash_new_password(&state, &caller.org_id, "SetHumanInitialPasswordRequest", &req.password).await?;
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    // Read again in the write transaction: a password set meanwhile stays.
    let u = load_user_to_change(&mut tx, &caller, &user_id).await?;
    if require_human(&u)?.password_hash.is_some() {
        return Err(initialised());
    }
    // Only if none was set meanwhile (on PostgreSQL the read above holds no lock).
    if !credentials::set_initial_password(&mut tx, &u.user_id, &hash, now).await? {
        return Err(initialised());
    }
    // As for every password an administrator sets: what the user held before ends.
    user::cut_off_tokens(&mut tx, &u.user_id, now).await?;
    tx.commit().await?;
    Ok(Json(DetailsResponse { details: Details::changed(now, &u.org_id) }))
}

#[utoipa::path(post, path = "/users/{user_id}/password", request_body = SetPasswordRequest, responses((status = 200, body = DetailsResponse)))]
pub async fn set_password(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
    ApiJson(req): ApiJson<SetPasswordRequest>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::UserWrite)?;
    {
        let mut c = state.db.conn().await?;
        let u = load_user_to_change(&mut c, &caller, &user_id).await?;
        require_human(&u)?;
    }
    let hash = hash_new_password(&state, &caller.org_id, "SetHumanPasswordRequest", &req.password).await?;
    let now = state.clock.now();
    // A password set by an administrator (after a compromise, say) also ends the sessions and
    // tokens of whoever knew the old one.
    let mut tx = state.db.begin().await?;
    // Checked again in the write transaction: the user may have become an administrator while
    // the password was hashed.
    let u = load_user_to_change(&mut tx, &caller, &user_id).await?;
    require_human(&u)?;
    if !credentials::set_password(&mut tx, &u.user_id, &hash, !req.no_change_required, now).await? {
        return Err(ApiError::not_found("user not found").with_id("USER-NotFound"));
    }
    user::cut_off_tokens(&mut tx, &u.user_id, now).await?;
    tx.commit().await?;
    Ok(Json(DetailsResponse { details: Details::changed(now, &caller.org_id) }))
}
