//! Calls across organizations: GetUserByLoginNameGlobal.

use axum::Json;
use axum::extract::{RawQuery, State};

use super::users::GetUserResponse;
use super::views::UserView;
use crate::api::error::ApiResult;
use crate::api::{ApiError, Caller};
use crate::app::AppState;
use crate::domain::roles::Permission;
use crate::store::user;

/// The user a login name means, in any organization, as the sign-in reads it: a user name, else
/// `username@domain` of one of its organization's domains (an e-mail address is no login name).
/// Needs `user.global.read` (IAM_OWNER, IAM_OWNER_VIEWER, IAM_USER_MANAGER).
#[utoipa::path(get, path = "/global/users/_by_login_name", params(("loginName" = String, Query)), responses((status = 200, body = GetUserResponse)))]
pub async fn user_by_login_name(
    State(state): State<AppState>,
    caller: Caller,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<GetUserResponse>> {
    caller.require(Permission::UserGlobalRead)?;
    let mut name = None::<String>;
    for (k, v) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        // The gateway takes a field's JSON name or its proto name.
        if (k == "loginName" || k == "login_name") && name.replace(v.trim().to_string()).is_some() {
            return Err(ApiError::invalid("invalid request: loginName is given twice"));
        }
    }
    // A user name (200) at a domain (200).
    let name = name.filter(|n| !n.is_empty() && n.chars().count() <= 401 && !n.chars().any(char::is_control));
    let Some(name) = name else {
        return Err(ApiError::invalid("invalid GetUserByLoginNameGlobalRequest.loginName: 1 to 401 characters"));
    };
    let mut c = state.db.conn().await?;
    let found = match user::get_by_username(&mut c, &name).await? {
        Some(u) => Some(u),
        None => user::find_by_domain_or_email(&mut c, &name, false).await?,
    };
    let u = found.ok_or_else(|| ApiError::not_found("user not found").with_id("USER-NotFound"))?;
    Ok(Json(GetUserResponse { user: UserView::from(&u) }))
}
