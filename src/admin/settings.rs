//! Instance settings: token lifetimes and the login, lockout, password complexity and security
//! policies. Durations are protobuf JSON strings (`"43200s"`).

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};

use crate::api::error::ApiResult;
use crate::api::types::{Details, DetailsResponse, duration_secs, duration_str, is_false, lenient_u64};
use crate::api::{ApiError, ApiJson, Caller};
use crate::app::AppState;
use crate::domain::enums::PasswordlessType;
use crate::domain::roles::Permission;
use crate::domain::settings::{LockoutPolicy, LoginPolicy, OidcSettings, PasswordComplexityPolicy, SecurityPolicy};
use crate::domain::validate;
use crate::store::Conn;
use crate::store::setting::{self, INSTANCE, Loaded, Setting};

fn read_details<T>(l: &Loaded<T>) -> Details {
    match l.times {
        Some((created, changed)) => Details::read(created, changed, ""),
        None => Details::default(),
    }
}

async fn load<T: Setting>(state: &AppState) -> ApiResult<Loaded<T>> {
    let mut c = state.db.conn().await?;
    Ok(setting::load::<T>(&mut c, INSTANCE).await?)
}

async fn save<T: Setting>(state: &AppState, value: &T) -> ApiResult<Json<DetailsResponse>> {
    let now = state.clock.now();
    let mut c = state.db.conn().await?;
    setting::save(&mut c, INSTANCE, value, now).await?;
    Ok(Json(DetailsResponse { details: Details::changed(now, "") }))
}

/// Changes setting `T` with `edit` in one write transaction that holds the setting
/// ([`setting::load_locked`]): two partial updates at once (each keeps what it does not name)
/// run one after the other instead of one undoing the other. An error of `edit` writes nothing.
async fn change<T: Setting>(
    state: &AppState,
    edit: impl AsyncFnOnce(&mut Conn, &mut T) -> ApiResult<()>,
) -> ApiResult<Json<DetailsResponse>> {
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    let mut value = setting::load_locked::<T>(&mut tx, INSTANCE, now).await?.value;
    edit(&mut tx, &mut value).await?;
    setting::save(&mut tx, INSTANCE, &value, now).await?;
    tx.commit().await?;
    Ok(Json(DetailsResponse { details: Details::changed(now, "") }))
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OidcSettingsView {
    details: Details,
    access_token_lifetime: String,
    id_token_lifetime: String,
    refresh_token_idle_expiration: String,
    refresh_token_expiration: String,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct GetOidcResponse {
    settings: OidcSettingsView,
}

#[utoipa::path(get, path = "/settings/oidc", responses((status = 200, body = GetOidcResponse)))]
pub async fn get_oidc(State(state): State<AppState>, caller: Caller) -> ApiResult<Json<GetOidcResponse>> {
    caller.require(Permission::IamRead)?;
    let l = load::<OidcSettings>(&state).await?;
    let v = &l.value;
    Ok(Json(GetOidcResponse {
        settings: OidcSettingsView {
            details: read_details(&l),
            access_token_lifetime: duration_str(v.access_token_lifetime),
            id_token_lifetime: duration_str(v.id_token_lifetime),
            refresh_token_idle_expiration: duration_str(v.refresh_token_idle_expiration),
            refresh_token_expiration: duration_str(v.refresh_token_expiration),
        },
    }))
}

#[derive(Deserialize, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct PutOidcRequest {
    #[serde(deserialize_with = "duration_secs")]
    #[schema(value_type = Option<String>, example = "43200s")]
    access_token_lifetime: Option<i64>,
    #[serde(deserialize_with = "duration_secs")]
    #[schema(value_type = Option<String>, example = "43200s")]
    id_token_lifetime: Option<i64>,
    #[serde(deserialize_with = "duration_secs")]
    #[schema(value_type = Option<String>, example = "43200s")]
    refresh_token_idle_expiration: Option<i64>,
    #[serde(deserialize_with = "duration_secs")]
    #[schema(value_type = Option<String>, example = "43200s")]
    refresh_token_expiration: Option<i64>,
}

const YEAR: i64 = 365 * 86_400;

#[utoipa::path(method(put, post), path = "/settings/oidc", request_body = PutOidcRequest, responses((status = 200, body = DetailsResponse)))]
pub async fn put_oidc(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<PutOidcRequest>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::IamWrite)?;
    change::<OidcSettings>(&state, async |c, v| {
        let longest_before = v.longest_signed_token();
        let r = "UpdateOIDCSettingsRequest";
        for (field, given, target, max) in [
            ("accessTokenLifetime", req.access_token_lifetime, &mut v.access_token_lifetime, YEAR),
            ("idTokenLifetime", req.id_token_lifetime, &mut v.id_token_lifetime, YEAR),
            (
                "refreshTokenIdleExpiration",
                req.refresh_token_idle_expiration,
                &mut v.refresh_token_idle_expiration,
                10 * YEAR,
            ),
            ("refreshTokenExpiration", req.refresh_token_expiration, &mut v.refresh_token_expiration, 10 * YEAR),
        ] {
            if let Some(secs) = given {
                if secs < 1 || secs > max {
                    return Err(ApiError::invalid(format!("invalid {r}.{field}: must be between 1s and {max}s")));
                }
                *target = secs;
            }
        }
        if v.refresh_token_idle_expiration > v.refresh_token_expiration {
            return Err(ApiError::invalid(format!(
                "invalid {r}.refreshTokenIdleExpiration: must not be longer than refreshTokenExpiration"
            )));
        }
        if v.longest_signed_token() < longest_before {
            // The tokens signed so far keep their expiry, so their keys must stay published, and
            // revocations written later must outlast them (committed with the settings).
            state.keys.keep_for_lifetime(c, longest_before).await?;
            v.signed_tokens_valid_until = v.signed_tokens_valid_until.max(state.clock.now() + longest_before);
        }
        Ok(())
    })
    .await
}

#[derive(Debug, Clone, Serialize, Deserialize, Default, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct LoginPolicyDoc {
    #[serde(skip_deserializing, skip_serializing_if = "Option::is_none")]
    details: Option<Details>,
    #[serde(skip_serializing_if = "is_false")]
    allow_username_password: bool,
    #[serde(skip_serializing_if = "is_false")]
    allow_register: bool,
    #[serde(skip_serializing_if = "is_false")]
    allow_external_idp: bool,
    #[serde(skip_serializing_if = "is_false")]
    force_mfa: bool,
    #[serde(skip_serializing_if = "PasswordlessType::is_default")]
    passwordless_type: PasswordlessType,
    #[serde(skip_deserializing, skip_serializing_if = "is_false")]
    pub(crate) is_default: bool,
    #[serde(skip_serializing_if = "is_false")]
    hide_password_reset: bool,
    #[serde(skip_serializing_if = "is_false")]
    ignore_unknown_usernames: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    default_redirect_uri: String,
    password_check_lifetime: Option<String>,
    external_login_check_lifetime: Option<String>,
    mfa_init_skip_lifetime: Option<String>,
    second_factor_check_lifetime: Option<String>,
    multi_factor_check_lifetime: Option<String>,
    #[serde(skip_serializing_if = "is_false")]
    allow_domain_discovery: bool,
    #[serde(skip_serializing_if = "is_false")]
    disable_login_with_email: bool,
    #[serde(skip_serializing_if = "is_false")]
    disable_login_with_phone: bool,
    #[serde(skip_serializing_if = "is_false")]
    force_mfa_local_only: bool,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyResponse<T: Serialize> {
    pub(crate) policy: T,
    /// An organization's policy read: whether it is the instance's default (ZITADEL's
    /// management responses carry it beside the policy as well as in it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) is_default: Option<bool>,
}

impl LoginPolicyDoc {
    /// The document form of a stored policy (durations as `"864000s"` strings).
    pub fn from_policy(p: &LoginPolicy, details: Option<Details>) -> Self {
        LoginPolicyDoc {
            details,
            allow_username_password: p.allow_username_password,
            allow_register: p.allow_register,
            allow_external_idp: p.allow_external_idp,
            force_mfa: p.force_mfa,
            passwordless_type: p.passwordless_type,
            is_default: false,
            hide_password_reset: p.hide_password_reset,
            ignore_unknown_usernames: p.ignore_unknown_usernames,
            default_redirect_uri: p.default_redirect_uri.clone(),
            password_check_lifetime: Some(duration_str(p.password_check_lifetime)),
            external_login_check_lifetime: Some(duration_str(p.external_login_check_lifetime)),
            mfa_init_skip_lifetime: Some(duration_str(p.mfa_init_skip_lifetime)),
            second_factor_check_lifetime: Some(duration_str(p.second_factor_check_lifetime)),
            multi_factor_check_lifetime: Some(duration_str(p.multi_factor_check_lifetime)),
            allow_domain_discovery: p.allow_domain_discovery,
            disable_login_with_email: p.disable_login_with_email,
            disable_login_with_phone: p.disable_login_with_phone,
            force_mfa_local_only: p.force_mfa_local_only,
        }
    }

    /// Checks the document; lifetimes it leaves out keep their `current` values.
    pub fn to_policy(&self, r: &str, current: &LoginPolicy) -> ApiResult<LoginPolicy> {
        if !self.default_redirect_uri.is_empty() {
            validate::redirect_uri(r, "defaultRedirectUri", &self.default_redirect_uri)?;
        }
        Ok(LoginPolicy {
            allow_username_password: self.allow_username_password,
            allow_register: self.allow_register,
            allow_external_idp: self.allow_external_idp,
            force_mfa: self.force_mfa,
            passwordless_type: self.passwordless_type,
            hide_password_reset: self.hide_password_reset,
            ignore_unknown_usernames: self.ignore_unknown_usernames,
            default_redirect_uri: self.default_redirect_uri.clone(),
            password_check_lifetime: lifetime(
                r,
                "passwordCheckLifetime",
                &self.password_check_lifetime,
                current.password_check_lifetime,
            )?,
            external_login_check_lifetime: lifetime(
                r,
                "externalLoginCheckLifetime",
                &self.external_login_check_lifetime,
                current.external_login_check_lifetime,
            )?,
            mfa_init_skip_lifetime: lifetime(
                r,
                "mfaInitSkipLifetime",
                &self.mfa_init_skip_lifetime,
                current.mfa_init_skip_lifetime,
            )?,
            second_factor_check_lifetime: lifetime(
                r,
                "secondFactorCheckLifetime",
                &self.second_factor_check_lifetime,
                current.second_factor_check_lifetime,
            )?,
            multi_factor_check_lifetime: lifetime(
                r,
                "multiFactorCheckLifetime",
                &self.multi_factor_check_lifetime,
                current.multi_factor_check_lifetime,
            )?,
            allow_domain_discovery: self.allow_domain_discovery,
            disable_login_with_email: self.disable_login_with_email,
            disable_login_with_phone: self.disable_login_with_phone,
            force_mfa_local_only: self.force_mfa_local_only,
        })
    }
}

#[utoipa::path(get, path = "/policies/login", responses((status = 200, body = PolicyResponse<LoginPolicyDoc>)))]
pub async fn get_login(
    State(state): State<AppState>,
    caller: Caller,
) -> ApiResult<Json<PolicyResponse<LoginPolicyDoc>>> {
    caller.require(Permission::IamPolicyRead)?;
    let l = load::<LoginPolicy>(&state).await?;
    let mut policy = LoginPolicyDoc::from_policy(&l.value, Some(read_details(&l)));
    policy.is_default = true;
    Ok(Json(PolicyResponse { policy, is_default: None }))
}

fn lifetime(r: &str, field: &str, v: &Option<String>, current: i64) -> ApiResult<i64> {
    match v.as_deref().filter(|s| !s.is_empty()) {
        None => Ok(current),
        Some(s) => crate::domain::duration::parse(s)
            .map(|d| d.as_secs() as i64)
            .map_err(|e| ApiError::invalid(format!("invalid {r}.{field}: '{s}' {e}"))),
    }
}

#[utoipa::path(put, path = "/policies/login", request_body = LoginPolicyDoc, responses((status = 200, body = DetailsResponse)))]
pub async fn put_login(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<LoginPolicyDoc>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::IamPolicyWrite)?;
    change::<LoginPolicy>(&state, async |_, p| {
        *p = req.to_policy("UpdateLoginPolicyRequest", p)?;
        Ok(())
    })
    .await
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LockoutView {
    details: Details,
    max_password_attempts: String,
    max_otp_attempts: String,
    is_default: bool,
}

#[utoipa::path(get, path = "/policies/lockout", responses((status = 200, body = PolicyResponse<LockoutView>)))]
pub async fn get_lockout(
    State(state): State<AppState>,
    caller: Caller,
) -> ApiResult<Json<PolicyResponse<LockoutView>>> {
    caller.require(Permission::IamPolicyRead)?;
    let l = load::<LockoutPolicy>(&state).await?;
    Ok(Json(PolicyResponse { policy: LockoutView::new(&l.value, read_details(&l), true), is_default: None }))
}

impl LockoutView {
    pub fn new(p: &LockoutPolicy, details: Details, is_default: bool) -> Self {
        LockoutView {
            details,
            max_password_attempts: p.max_password_attempts.to_string(),
            max_otp_attempts: p.max_otp_attempts.to_string(),
            is_default,
        }
    }
}

impl PutLockoutRequest {
    /// The checked policy (`r`: the request's name in messages).
    pub fn to_policy(&self, r: &str) -> ApiResult<LockoutPolicy> {
        if self.max_password_attempts > 1000 || self.max_otp_attempts > 1000 {
            return Err(ApiError::invalid(format!("invalid {r}: at most 1000 attempts")));
        }
        Ok(LockoutPolicy {
            max_password_attempts: self.max_password_attempts as i64,
            max_otp_attempts: self.max_otp_attempts as i64,
        })
    }
}

#[derive(Deserialize, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct PutLockoutRequest {
    #[serde(deserialize_with = "lenient_u64")]
    #[schema(schema_with = crate::api::types::lenient_u64_schema)]
    max_password_attempts: u64,
    #[serde(deserialize_with = "lenient_u64")]
    #[schema(schema_with = crate::api::types::lenient_u64_schema)]
    max_otp_attempts: u64,
}

#[utoipa::path(put, path = "/policies/password/lockout", request_body = PutLockoutRequest, responses((status = 200, body = DetailsResponse)))]
pub async fn put_lockout(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<PutLockoutRequest>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::IamPolicyWrite)?;
    save(&state, &req.to_policy("UpdateLockoutPolicyRequest")?).await
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ComplexityView {
    details: Details,
    min_length: String,
    #[serde(skip_serializing_if = "is_false")]
    has_uppercase: bool,
    #[serde(skip_serializing_if = "is_false")]
    has_lowercase: bool,
    #[serde(skip_serializing_if = "is_false")]
    has_number: bool,
    #[serde(skip_serializing_if = "is_false")]
    has_symbol: bool,
    is_default: bool,
}

#[utoipa::path(get, path = "/policies/password/complexity", responses((status = 200, body = PolicyResponse<ComplexityView>)))]
pub async fn get_complexity(
    State(state): State<AppState>,
    caller: Caller,
) -> ApiResult<Json<PolicyResponse<ComplexityView>>> {
    caller.require(Permission::IamPolicyRead)?;
    let l = load::<PasswordComplexityPolicy>(&state).await?;
    Ok(Json(PolicyResponse { policy: ComplexityView::new(&l.value, read_details(&l), true), is_default: None }))
}

impl ComplexityView {
    pub fn new(p: &PasswordComplexityPolicy, details: Details, is_default: bool) -> Self {
        ComplexityView {
            details,
            min_length: p.min_length.to_string(),
            has_uppercase: p.has_uppercase,
            has_lowercase: p.has_lowercase,
            has_number: p.has_number,
            has_symbol: p.has_symbol,
            is_default,
        }
    }
}

impl PutComplexityRequest {
    /// The checked policy (`r`: the request's name in messages).
    pub fn to_policy(&self, r: &str) -> ApiResult<PasswordComplexityPolicy> {
        // 72: what an import accepts too (bcrypt's limit, which other systems' policies respect).
        if !(1..=72).contains(&self.min_length) {
            return Err(ApiError::invalid(format!("invalid {r}.minLength: must be between 1 and 72")));
        }
        Ok(PasswordComplexityPolicy {
            min_length: self.min_length as i64,
            has_uppercase: self.has_uppercase,
            has_lowercase: self.has_lowercase,
            has_number: self.has_number,
            has_symbol: self.has_symbol,
        })
    }
}

#[derive(Deserialize, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct PutComplexityRequest {
    #[serde(deserialize_with = "lenient_u64")]
    #[schema(schema_with = crate::api::types::lenient_u64_schema)]
    min_length: u64,
    has_uppercase: bool,
    has_lowercase: bool,
    has_number: bool,
    has_symbol: bool,
}

#[utoipa::path(put, path = "/policies/password/complexity", request_body = PutComplexityRequest, responses((status = 200, body = DetailsResponse)))]
pub async fn put_complexity(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<PutComplexityRequest>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::IamPolicyWrite)?;
    save(&state, &req.to_policy("UpdatePasswordComplexityPolicyRequest")?).await
}

#[derive(Serialize, Deserialize, Default, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct SecurityDoc {
    #[serde(skip_deserializing, skip_serializing_if = "Option::is_none")]
    details: Option<Details>,
    #[serde(skip_serializing_if = "is_false")]
    enable_iframe_embedding: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    allowed_origins: Vec<String>,
    #[serde(skip_serializing_if = "is_false")]
    enable_impersonation: bool,
}

#[utoipa::path(get, path = "/policies/security", responses((status = 200, body = PolicyResponse<SecurityDoc>)))]
pub async fn get_security(
    State(state): State<AppState>,
    caller: Caller,
) -> ApiResult<Json<PolicyResponse<SecurityDoc>>> {
    caller.require(Permission::IamPolicyRead)?;
    let l = load::<SecurityPolicy>(&state).await?;
    Ok(Json(PolicyResponse {
        policy: SecurityDoc {
            details: Some(read_details(&l)),
            enable_iframe_embedding: l.value.enable_iframe_embedding,
            allowed_origins: l.value.allowed_origins.clone(),
            enable_impersonation: l.value.enable_impersonation,
        },
        is_default: None,
    }))
}

#[utoipa::path(put, path = "/policies/security", request_body = SecurityDoc, responses((status = 200, body = DetailsResponse)))]
pub async fn put_security(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<SecurityDoc>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::IamPolicyWrite)?;
    for o in &req.allowed_origins {
        validate::origin("SetSecurityPolicyRequest", "allowedOrigins", o)?;
    }
    save(
        &state,
        &SecurityPolicy {
            enable_iframe_embedding: req.enable_iframe_embedding,
            allowed_origins: req.allowed_origins.clone(),
            enable_impersonation: req.enable_impersonation,
        },
    )
    .await
}
