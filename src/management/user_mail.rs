//! The codes an administrator has mailed to a human (ResendHumanEmailVerification,
//! ResendHumanInitialization, SendHumanResetPasswordNotification), and whether a user name or
//! address is free (IsUserUnique).

use axum::Json;
use axum::extract::{Path, RawQuery, State};
use serde::{Deserialize, Serialize};

use super::users::{load_user_to_change, require_human};
use crate::api::error::ApiResult;
use crate::api::types::{Details, DetailsResponse};
use crate::api::{ApiError, ApiJson, Caller};
use crate::app::AppState;
use crate::domain::enums::{NotificationType, UserState};
use crate::domain::roles::Permission;
use crate::domain::validate;
use crate::login::{codes, i18n};
use crate::store::{Conn, user, user_code};

/// Mails `purpose`'s code to the user, in its language (a code sent before is replaced).
async fn send(state: &AppState, c: &mut Conn, user_id: &str, purpose: &str) -> ApiResult<()> {
    let Some(u) = user::get(c, user_id).await? else {
        return Err(ApiError::not_found("user not found").with_id("USER-NotFound"));
    };
    let t = i18n::for_language(&require_human(&u)?.preferred_language);
    codes::send(state, c, &u, purpose, t).await?;
    Ok(())
}

/// A new verification code to the user's address, which must not be verified yet.
#[utoipa::path(post, path = "/users/{user_id}/email/_resend_verification", responses((status = 200, body = DetailsResponse)))]
pub async fn resend_email_verification(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::UserWrite)?;
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    let u = load_user_to_change(&mut tx, &caller, &user_id).await?;
    if require_human(&u)?.email_verified {
        return Err(ApiError::precondition("the e-mail address is verified already").with_id("USER-EmailVerified"));
    }
    send(&state, &mut tx, &u.user_id, codes::VERIFY).await?;
    tx.commit().await?;
    Ok(Json(DetailsResponse { details: Details::changed(now, &u.org_id) }))
}

#[derive(Deserialize, Default, Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ResendInitializationRequest {
    /// Replaces a wrong address first (then unverified).
    email: String,
}

/// A new initial-password code for a user who has no password yet, to a corrected address when
/// one is given (codes sent to the old one stop working).
#[utoipa::path(post, path = "/users/{user_id}/_resend_initialization", request_body = ResendInitializationRequest, responses((status = 200, body = DetailsResponse)))]
pub async fn resend_initialization(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
    ApiJson(req): ApiJson<ResendInitializationRequest>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::UserWrite)?;
    let email = req.email.trim();
    if !email.is_empty() {
        validate::email("ResendHumanInitializationRequest", "email", email)?;
    }
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    let u = load_user_to_change(&mut tx, &caller, &user_id).await?;
    let h = require_human(&u)?;
    if u.state != UserState::Initial || h.password_hash.is_some() {
        return Err(ApiError::precondition("the user has a password already").with_id("USER-AlreadyInitialised"));
    }
    if !u.org_active {
        return Err(ApiError::precondition("the user's organization is deactivated").with_id("USER-NotActive"));
    }
    if !email.is_empty() && email != h.email {
        crate::management::users::still_there(user::update_email(&mut tx, &u.user_id, email, false, now).await?)?;
        user_code::delete_all(&mut tx, &u.user_id).await?;
    }
    send(&state, &mut tx, &u.user_id, codes::INIT).await?;
    tx.commit().await?;
    Ok(Json(DetailsResponse { details: Details::changed(now, &u.org_id) }))
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct IsUniqueResponse {
    is_unique: bool,
}

/// IsUserUnique (`?userName=&email=`): false when the user name is taken, or would be another
/// user's login name, or when a human has the address already.
#[utoipa::path(get, path = "/users/_is_unique", params(("userName" = Option<String>, Query), ("email" = Option<String>, Query)), responses((status = 200, body = IsUniqueResponse)))]
pub async fn is_unique(
    State(state): State<AppState>,
    caller: Caller,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<IsUniqueResponse>> {
    caller.require(Permission::UserRead)?;
    let (mut name, mut email) = (None::<String>, None::<String>);
    for (k, v) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        // The gateway takes a field's JSON name or its proto name.
        let slot = match k.as_ref() {
            "userName" | "user_name" => &mut name,
            "email" => &mut email,
            _ => continue,
        };
        if slot.replace(v.trim().to_string()).is_some() {
            return Err(ApiError::invalid(format!("invalid request: {k} is given twice")));
        }
    }
    let (name, email) = (name.unwrap_or_default(), email.unwrap_or_default());
    validate::max("IsUserUniqueRequest", "userName", &name, 200)?;
    validate::max("IsUserUniqueRequest", "email", &email, 200)?;
    validate::no_controls("IsUserUniqueRequest", "userName", &name)?;
    validate::no_controls("IsUserUniqueRequest", "email", &email)?;
    let mut c = state.db.conn().await?;
    let name_taken = !name.is_empty()
        && (user::username_taken(&mut c, &name).await?
            || user::find_by_domain_or_email(&mut c, &name, true).await?.is_some());
    let email_taken = !email.is_empty() && user::email_taken(&mut c, &email).await?;
    Ok(Json(IsUniqueResponse { is_unique: !name_taken && !email_taken }))
}

#[derive(Deserialize, Default, Serialize, utoipa::ToSchema)]
#[serde(default)]
pub struct ResetPasswordRequest {
    #[serde(rename = "type")]
    kind: NotificationType,
}

/// SendHumanResetPasswordNotification: a password-reset code by e-mail, which the person enters
/// on the password page ("Forgot your password?") with a new password, within an hour. Refused
/// while the login policy hides password reset (`hidePasswordReset`: the page would not take the
/// code), for a user without a password yet (`_resend_initialization` is for those), for one who
/// cannot sign in (locked, deactivated, or of a deactivated organization), and for `TYPE_SMS`
/// (latch sends no text messages).
#[utoipa::path(post, path = "/users/{user_id}/password/_reset", request_body = ResetPasswordRequest, responses((status = 200, body = DetailsResponse)))]
pub async fn send_password_reset(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
    ApiJson(req): ApiJson<ResetPasswordRequest>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::UserWrite)?;
    if req.kind != NotificationType::Email {
        return Err(ApiError::precondition("latch sends no text messages; use TYPE_EMAIL").with_id("USER-NoSms"));
    }
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    let u = load_user_to_change(&mut tx, &caller, &user_id).await?;
    if require_human(&u)?.password_hash.is_none() {
        return Err(ApiError::precondition("the user has no password yet; send an initialization code instead")
            .with_id("USER-NotInitialised"));
    }
    if !u.is_active() {
        return Err(ApiError::precondition("the user cannot sign in (locked or deactivated)").with_id("USER-NotActive"));
    }
    if state.cache.login_policy_of(&mut *tx, &u.org_id).await?.hide_password_reset {
        return Err(ApiError::precondition("the login policy hides password reset (hidePasswordReset)")
            .with_id("USER-PasswordResetHidden"));
    }
    send(&state, &mut tx, &u.user_id, codes::RESET).await?;
    tx.commit().await?;
    Ok(Json(DetailsResponse { details: Details::changed(now, &u.org_id) }))
}
