//! `POST /management/v1/users/human/_import`: a human user with an existing password hash,
//! TOTP secret and identity-provider links, and the checks the bulk import shares.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};

use super::passwords::{check_against, check_new_password};
use super::users::{AddUserResponse, EmailInput, HumanInput, PhoneInput, ProfileInput, insert_human};
use crate::api::error::ApiResult;
use crate::api::types::Details;
use crate::api::{ApiError, ApiJson, Caller};
use crate::app::AppState;
use crate::crypto::{hashes, totp};
use crate::domain::enums::UserState;
use crate::domain::roles::Permission;
use crate::domain::settings::PasswordComplexityPolicy;
use crate::domain::validate;
use crate::login::{codes, i18n};
use crate::store::user::{Human, IdpLink};
use crate::store::{Conn, user};

#[derive(Debug, Deserialize, Serialize, Default, Clone, PartialEq, Eq, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct HashedPassword {
    pub value: String,
}

#[derive(Debug, Deserialize, Serialize, Default, Clone, PartialEq, Eq, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct IdpInput {
    pub config_id: String,
    pub external_user_id: String,
    pub display_name: String,
}

/// Every field of `ImportHumanUserRequest`.
#[derive(Debug, Deserialize, Serialize, Default, Clone, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ImportHumanUserRequest {
    #[schema(required = true, min_length = 1, max_length = 200)]
    pub user_name: String,
    #[schema(required = true)]
    pub profile: Option<ProfileInput>,
    #[schema(required = true)]
    pub email: Option<EmailInput>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phone: Option<PhoneInput>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub password: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hashed_password: Option<HashedPassword>,
    #[serde(skip_serializing_if = "crate::api::types::is_false")]
    pub password_change_required: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub otp_code: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub idps: Vec<IdpInput>,
    /// Passkey registration links are not offered by latch; the flag is accepted and ignored.
    #[serde(skip_serializing)]
    pub request_passwordless_registration: bool,
}

/// A checked import record, ready to insert.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub username: String,
    pub human: Human,
    pub otp_code: Option<String>,
    pub idps: Vec<IdpLink>,
}

/// Checks a record. A plain `password` is checked against the policy and hashed; a
/// `hashedPassword` must be a format latch verifies, within sane parameters.
/// What a dry run stores for a plain password it checked but did not hash (the dry run's
/// writes are rolled back; hashing would hold its transaction, and on SQLite every writer, for
/// a hash time per user).
pub const DRY_RUN_HASH: &str = "$dry-run$";

/// A record checked and ready to insert; a plain `password` is checked against the policy and
/// hashed, or only checked when `hash` is false (a dry run: [`DRY_RUN_HASH`] stands in).
///
/// `policy`: the complexity policy the password must meet when it is not the organization's
/// stored one (an organization import that brings the new organization's own policy).
pub async fn prepare(
    state: &AppState,
    org_id: &str,
    policy: Option<&PasswordComplexityPolicy>,
    req: &ImportHumanUserRequest,
    r: &str,
    hash: bool,
) -> ApiResult<Prepared> {
    let mut p = check_record(req, r)?;
    if p.human.password_hash.is_none() && !req.password.is_empty() {
        match policy {
            Some(policy) => check_against(r, &req.password, policy)?,
            None => check_new_password(state, org_id, r, &req.password).await?,
        }
        p.human.password_hash =
            Some(if hash { state.hasher.hash_waiting(&req.password).await? } else { DRY_RUN_HASH.to_string() });
    }
    if p.human.password_hash.is_some() {
        p.human.password_changed_at = Some(state.clock.now());
        p.human.password_change_required = req.password_change_required;
    }
    Ok(p)
}

/// What [`prepare`] checks without the store: everything but the plain `password`, which is
/// left unhashed (`password_hash` stays `None` for it).
pub fn check_record(req: &ImportHumanUserRequest, r: &str) -> ApiResult<Prepared> {
    let input = HumanInput {
        user_name: req.user_name.clone(),
        profile: req.profile.clone(),
        email: req.email.clone(),
        phone: req.phone.clone(),
        ..HumanInput::default()
    };
    let (username, mut human) = input.validate(r)?;
    let hashed = req.hashed_password.as_ref().map(|h| h.value.trim()).filter(|v| !v.is_empty());
    if !req.password.is_empty() && hashed.is_some() {
        return Err(ApiError::invalid(format!("invalid {r}: password and hashedPassword exclude each other")));
    }
    if let Some(h) = hashed {
        hashes::check(h).map_err(|e| {
            ApiError::invalid(format!("invalid {r}.hashedPassword.value: {e}")).with_id("USER-HashInvalid")
        })?;
        human.password_hash = Some(h.to_string());
    }
    let otp_code = match req.otp_code.trim() {
        "" => None,
        code => {
            totp::code_at(code, 0).map_err(|e| ApiError::invalid(format!("invalid {r}.otpCode: {e}")))?;
            Some(code.to_string())
        }
    };
    // Each link is one statement in the import's transaction.
    if req.idps.len() > MAX_IDP_LINKS {
        return Err(ApiError::invalid(format!("invalid {r}.idps: at most {MAX_IDP_LINKS} links per user")));
    }
    let mut idps = Vec::with_capacity(req.idps.len());
    for (i, idp) in req.idps.iter().enumerate() {
        validate::required(r, &format!("idps[{i}].configId"), &idp.config_id, 200)?;
        validate::required(r, &format!("idps[{i}].externalUserId"), &idp.external_user_id, 200)?;
        validate::max(r, &format!("idps[{i}].displayName"), &idp.display_name, 200)?;
        idps.push(IdpLink {
            config_id: idp.config_id.clone(),
            external_user_id: idp.external_user_id.clone(),
            display_name: idp.display_name.clone(),
        });
    }
    Ok(Prepared { username, human, otp_code, idps })
}

/// The most identity-provider links one imported user may bring.
pub const MAX_IDP_LINKS: usize = 100;

/// Inserts a prepared record (user, sealed TOTP secret, links); returns the user id.
pub async fn insert(
    state: &AppState,
    c: &mut Conn,
    org_id: &str,
    user_id: Option<String>,
    p: Prepared,
    user_state: Option<UserState>,
    now: i64,
) -> ApiResult<String> {
    let mut human = p.human;
    let id = user_id.clone().unwrap_or_else(crate::id::new_id);
    if let Some(code) = &p.otp_code {
        human.otp_secret = Some(state.seal_otp(&id, code).map_err(ApiError::internal)?);
    }
    let id = insert_human(c, org_id, Some(id), &p.username, human, now).await?;
    if let Some(s) = user_state.filter(|s| *s != UserState::Active && *s != UserState::Unspecified) {
        user::set_state(c, &id, s, now).await?;
    }
    for l in &p.idps {
        user::insert_idp_link(c, &id, l, now).await?;
    }
    Ok(id)
}

/// SPEC.md 4.11: a message goes out only when the address is not verified (a verification
/// code) or no password is set (an initial-password code).
pub async fn notify(state: &AppState, c: &mut Conn, user_id: &str) -> ApiResult<()> {
    let Some(u) = user::get(c, user_id).await? else { return Ok(()) };
    let Some(h) = u.human() else { return Ok(()) };
    let t = i18n::for_language(&h.preferred_language);
    if !h.email_verified {
        codes::send(state, c, &u, codes::VERIFY, t).await?;
    } else if h.password_hash.is_none() {
        codes::send(state, c, &u, codes::INIT, t).await?;
    }
    Ok(())
}

#[utoipa::path(post, path = "/users/human/_import", request_body = ImportHumanUserRequest, responses((status = 200, body = AddUserResponse)))]
pub async fn import_human(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<ImportHumanUserRequest>,
) -> ApiResult<Json<AddUserResponse>> {
    caller.require(Permission::UserWrite)?;
    let prepared = prepare(&state, &caller.org_id, None, &req, "ImportHumanUserRequest", true).await?;
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    let user_id = insert(&state, &mut tx, &caller.org_id, None, prepared, None, now).await?;
    tx.commit().await?;
    // The user is stored: a code that could not be stored is logged, not answered with an error
    // (a retry would meet "already exists"); the code can be sent again.
    let sent = match state.db.conn().await {
        Ok(mut c) => notify(&state, &mut c, &user_id).await,
        Err(e) => Err(e.into()),
    };
    if let Err(e) = sent {
        tracing::warn!(user_id, error = %e.message, "the imported user's code could not be stored");
    }
    Ok(Json(AddUserResponse { user_id, details: Details::created(now, &caller.org_id) }))
}
