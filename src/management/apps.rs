//! OIDC and API applications and their client secrets (their keys are in app_keys.rs).

use axum::Json;
use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};

use super::compliance;
use super::projects::{ListByNameRequest, load_project};
use crate::api::error::ApiResult;
use crate::api::types::{Details, DetailsResponse, ListDetails, ListResponse, is_false};
use crate::api::{ApiError, ApiJson, Caller};
use crate::app::AppState;
use crate::crypto::secret;
use crate::domain::enums::{
    ApiAuthMethod, AppState as AppLifecycle, OidcAppType, OidcAuthMethod, OidcGrantType, OidcResponseType,
    OidcTokenType, OidcVersion,
};
use crate::domain::roles::Permission;
use crate::domain::{duration, validate};
use crate::id::new_id;
use crate::store::app::{self, App, AppKind, OidcConfig};
use crate::store::{Conn, StoreError};

/// A client id or project id from `next` that is no user's name or id, nor a project's id or
/// an application's client id. All of them go into tokens' audiences, where each names who may
/// take the token: a machine user's name is the client id of its client_credentials tokens and a
/// user's id that of its jwt-bearer tokens, and an application's tokens name its client id and
/// its project's id. Machine users may take none of these (`USER-NameIsClientId`,
/// `USER-NameIsProjectId`), and a new id (time-based, so guessable a moment ahead) may not take
/// theirs either, nor an id an import chose.
pub async fn fresh_audience_id(c: &mut Conn, mut next: impl FnMut() -> String) -> ApiResult<String> {
    for _ in 0..5 {
        let id = next();
        if crate::store::user::get_by_username(c, &id).await?.is_none()
            && crate::store::user::get(c, &id).await?.is_none()
            && crate::store::project::get(c, &id).await?.is_none()
            && app::get_by_client_id(c, &id).await?.is_none()
        {
            return Ok(id);
        }
        tracing::warn!(id = %id, "a new client or project id was taken as a user's name or id, a project's id or a client id; another is drawn");
    }
    Err(ApiError::internal("five new ids in a row were taken as users' names or ids, project ids or client ids"))
}

/// Every field of `AddOIDCAppRequest` (`name` and `version` are ignored on updates; `projectId`
/// comes from the path, except in import documents).
#[derive(Debug, Clone, Deserialize, Serialize, Default, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct OidcAppRequest {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub project_id: String,
    pub name: String,
    pub redirect_uris: Vec<String>,
    pub response_types: Vec<OidcResponseType>,
    pub grant_types: Vec<OidcGrantType>,
    #[serde(skip_serializing_if = "OidcAppType::is_default")]
    pub app_type: OidcAppType,
    #[serde(skip_serializing_if = "OidcAuthMethod::is_default")]
    pub auth_method_type: OidcAuthMethod,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub post_logout_redirect_uris: Vec<String>,
    #[serde(skip_serializing_if = "OidcVersion::is_default")]
    pub version: OidcVersion,
    #[serde(skip_serializing_if = "is_false")]
    pub dev_mode: bool,
    #[serde(skip_serializing_if = "OidcTokenType::is_default")]
    pub access_token_type: OidcTokenType,
    #[serde(skip_serializing_if = "is_false")]
    pub access_token_role_assertion: bool,
    #[serde(skip_serializing_if = "is_false")]
    pub id_token_role_assertion: bool,
    #[serde(skip_serializing_if = "is_false")]
    pub id_token_userinfo_assertion: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock_skew: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub additional_origins: Vec<String>,
    #[serde(skip_serializing_if = "is_false")]
    pub skip_native_app_success_page: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub back_channel_logout_uri: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub login_version: Option<serde_json::Value>,
}

impl OidcAppRequest {
    /// The request that would create an application with this configuration (for exports).
    pub fn from_config(project_id: &str, name: &str, auth: OidcAuthMethod, c: &OidcConfig) -> Self {
        OidcAppRequest {
            project_id: project_id.to_string(),
            name: name.to_string(),
            redirect_uris: c.redirect_uris.clone(),
            response_types: c.response_types.clone(),
            grant_types: c.grant_types.clone(),
            app_type: c.app_type,
            auth_method_type: auth,
            post_logout_redirect_uris: c.post_logout_redirect_uris.clone(),
            version: OidcVersion::V1_0,
            dev_mode: c.dev_mode,
            access_token_type: c.access_token_type,
            access_token_role_assertion: c.access_token_role_assertion,
            id_token_role_assertion: c.id_token_role_assertion,
            id_token_userinfo_assertion: c.id_token_userinfo_assertion,
            clock_skew: (c.clock_skew_ms != 0)
                .then(|| duration::format_proto(std::time::Duration::from_millis(c.clock_skew_ms as u64))),
            additional_origins: c.additional_origins.clone(),
            skip_native_app_success_page: c.skip_native_app_success_page,
            back_channel_logout_uri: c.back_channel_logout_uri.clone(),
            login_version: c.login_version.clone(),
        }
    }
}

const MAX_URIS: usize = 100;

impl OidcAppRequest {
    pub fn config(&self, req: &str) -> ApiResult<OidcConfig> {
        let _ = self.version;
        for (field, list) in
            [("redirectUris", &self.redirect_uris), ("postLogoutRedirectUris", &self.post_logout_redirect_uris)]
        {
            if list.len() > MAX_URIS {
                return Err(ApiError::invalid(format!("invalid {req}.{field}: at most {MAX_URIS} URIs")));
            }
            for u in list {
                validate::redirect_uri(req, field, u)?;
            }
        }
        if self.additional_origins.len() > MAX_URIS {
            return Err(ApiError::invalid(format!("invalid {req}.additionalOrigins: at most {MAX_URIS} origins")));
        }
        for o in &self.additional_origins {
            validate::origin(req, "additionalOrigins", o)?;
        }
        if !self.back_channel_logout_uri.is_empty() {
            validate::redirect_uri(req, "backChannelLogoutUri", &self.back_channel_logout_uri)?;
            // latch itself posts to this URI (from inside the operator's network): https only,
            // so that an organization owner cannot aim it at plain-http services around latch;
            // http (a local receiver) in the application's dev mode.
            if !self.dev_mode && !self.back_channel_logout_uri.starts_with("https://") {
                return Err(ApiError::invalid(format!(
                    "invalid {req}.backChannelLogoutUri: must be an https URI (http only in dev mode)"
                )));
            }
        }
        let clock_skew_ms = match self.clock_skew.as_deref().filter(|s| !s.is_empty()) {
            Some(s) => duration::parse(s)
                .map(|d| d.as_millis() as i64)
                .map_err(|e| ApiError::invalid(format!("invalid {req}.clockSkew: '{s}' {e}")))?,
            None => 0,
        };
        let mut response_types = self.response_types.clone();
        if response_types.is_empty() {
            response_types.push(OidcResponseType::Code);
        }
        response_types.dedup();
        let mut grant_types = self.grant_types.clone();
        if grant_types.is_empty() {
            grant_types.push(OidcGrantType::AuthorizationCode);
        }
        grant_types.dedup();
        if let Some(v) = &self.login_version
            && !v.is_object()
        {
            return Err(ApiError::invalid(format!("invalid {req}.loginVersion: must be an object")));
        }
        let c = OidcConfig {
            redirect_uris: self.redirect_uris.clone(),
            response_types,
            grant_types,
            app_type: self.app_type,
            post_logout_redirect_uris: self.post_logout_redirect_uris.clone(),
            dev_mode: self.dev_mode,
            access_token_type: self.access_token_type,
            access_token_role_assertion: self.access_token_role_assertion,
            id_token_role_assertion: self.id_token_role_assertion,
            id_token_userinfo_assertion: self.id_token_userinfo_assertion,
            clock_skew_ms,
            additional_origins: self.additional_origins.clone(),
            skip_native_app_success_page: self.skip_native_app_success_page,
            back_channel_logout_uri: self.back_channel_logout_uri.clone(),
            login_version: self.login_version.clone(),
        };
        compliance::validity(&c).map_err(|m| ApiError::invalid(format!("invalid {req}.{m}")))?;
        Ok(c)
    }
}

fn needs_secret(auth: OidcAuthMethod) -> bool {
    matches!(auth, OidcAuthMethod::Basic | OidcAuthMethod::Post)
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProblemView {
    key: &'static str,
    localized_message: &'static str,
}

fn problem_views(c: &OidcConfig, auth: OidcAuthMethod) -> Vec<ProblemView> {
    compliance::problems(c, auth)
        .into_iter()
        .map(|p| ProblemView { key: p.key, localized_message: p.message })
        .collect()
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddOidcAppResponse {
    app_id: String,
    details: Details,
    client_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    client_secret: Option<String>,
    #[serde(skip_serializing_if = "is_false")]
    none_compliant: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    compliance_problems: Vec<ProblemView>,
}

async fn insert_app(c: &mut Conn, a: &App) -> ApiResult<()> {
    if app::name_taken(c, &a.project_id, &a.name).await? {
        return Err(ApiError::exists("an application with this name already exists in the project")
            .with_id("APP-AlreadyExists"));
    }
    app::insert(c, a).await.map_err(|e| match e {
        StoreError::Conflict => ApiError::exists("the application already exists").with_id("APP-AlreadyExists"),
        other => other.into(),
    })
}

#[utoipa::path(post, path = "/projects/{project_id}/apps/oidc", request_body = OidcAppRequest, responses((status = 200, body = AddOidcAppResponse)))]
pub async fn add_oidc_app(
    State(state): State<AppState>,
    caller: Caller,
    Path(project_id): Path<String>,
    ApiJson(req): ApiJson<OidcAppRequest>,
) -> ApiResult<Json<AddOidcAppResponse>> {
    caller.require(Permission::AppWrite)?;
    let r = "AddOIDCAppRequest";
    validate::required(r, "name", &req.name, 200)?;
    let config = req.config(r)?;
    let auth = req.auth_method_type;
    let now = state.clock.now();
    let client_secret = needs_secret(auth).then(secret::new_secret);
    let mut tx = state.db.begin().await?;
    let p = load_project(&mut tx, &caller, &project_id).await?;
    let app_id = new_id();
    let client_id = fresh_audience_id(&mut tx, new_id).await?;
    let problems = problem_views(&config, auth);
    insert_app(
        &mut tx,
        &App {
            app_id: app_id.clone(),
            project_id: p.project_id.clone(),
            org_id: p.org_id.clone(),
            name: req.name.trim().to_string(),
            state: AppLifecycle::Active,
            client_id: client_id.clone(),
            secret_digest: client_secret.as_deref().map(secret::digest),
            kind: AppKind::Oidc { auth_method: auth, config },
            created_at: now,
            changed_at: now,
        },
    )
    .await?;
    tx.commit().await?;
    Ok(Json(AddOidcAppResponse {
        app_id,
        details: Details::created(now, &p.org_id),
        client_id,
        client_secret,
        none_compliant: !problems.is_empty(),
        compliance_problems: problems,
    }))
}

/// An application of a project of the caller's organization.
pub(super) async fn load_app(c: &mut Conn, caller: &Caller, project_id: &str, app_id: &str) -> ApiResult<App> {
    load_project(c, caller, project_id).await?;
    app::get(c, project_id, app_id)
        .await?
        .ok_or_else(|| ApiError::not_found("application not found").with_id("APP-NotFound"))
}

#[utoipa::path(put, path = "/projects/{project_id}/apps/{app_id}/oidc_config", request_body = OidcAppRequest, responses((status = 200, body = DetailsResponse)))]
pub async fn update_oidc_config(
    State(state): State<AppState>,
    caller: Caller,
    Path((project_id, app_id)): Path<(String, String)>,
    ApiJson(req): ApiJson<OidcAppRequest>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::AppWrite)?;
    let config = req.config("UpdateOIDCAppConfigRequest")?;
    let auth = req.auth_method_type;
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    let a = load_app(&mut tx, &caller, &project_id, &app_id).await?;
    let AppKind::Oidc { config: old, auth_method: old_auth } = &a.kind else {
        return Err(ApiError::precondition("the application is not an OIDC application").with_id("APP-NotOIDC"));
    };
    if *old == config && *old_auth == auth {
        return Err(ApiError::precondition("the configuration is unchanged").with_id("APP-NotChanged"));
    }
    app::update_kind(&mut tx, &app_id, &AppKind::Oidc { auth_method: auth, config }, now).await?;
    if !needs_secret(auth) {
        // A public or key-authenticated client must not keep a usable secret: cleared whatever
        // was read above (a secret generated meanwhile is written before this, on PostgreSQL).
        app::set_secret(&mut tx, &app_id, None, now).await?;
    }
    tx.commit().await?;
    Ok(Json(DetailsResponse { details: Details::changed(now, &a.org_id) }))
}

#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = AppSecretResponse)]
#[serde(rename_all = "camelCase")]
pub struct SecretResponse {
    client_secret: String,
    details: Details,
}

async fn regenerate_secret(
    state: &AppState,
    caller: &Caller,
    project_id: &str,
    app_id: &str,
) -> ApiResult<Json<SecretResponse>> {
    caller.require(Permission::AppWrite)?;
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    load_app(&mut tx, caller, project_id, app_id).await?;
    // Written first, then checked: the write holds the application's row (on PostgreSQL a
    // change of its auth method waits, or has committed and is read now), so no secret is
    // stored for a method that takes none (it would count again once the method took one).
    let client_secret = secret::new_secret();
    app::set_secret(&mut tx, app_id, Some(secret::digest(&client_secret)), now).await?;
    let a = load_app(&mut tx, caller, project_id, app_id).await?;
    let allowed = match a.kind {
        AppKind::Oidc { auth_method, .. } => needs_secret(auth_method),
        AppKind::Api { auth_method } => auth_method == ApiAuthMethod::Basic,
    };
    if !allowed {
        return Err(ApiError::precondition("the application does not authenticate with a client secret")
            .with_id("APP-NoSecret"));
    }
    tx.commit().await?;
    Ok(Json(SecretResponse { client_secret, details: Details::changed(now, &a.org_id) }))
}

#[utoipa::path(post, path = "/projects/{project_id}/apps/{app_id}/oidc_config/_generate_client_secret", responses((status = 200, body = SecretResponse)))]
pub async fn generate_oidc_secret(
    State(state): State<AppState>,
    caller: Caller,
    Path((project_id, app_id)): Path<(String, String)>,
) -> ApiResult<Json<SecretResponse>> {
    regenerate_secret(&state, &caller, &project_id, &app_id).await
}

#[utoipa::path(post, path = "/projects/{project_id}/apps/{app_id}/api_config/_generate_client_secret", responses((status = 200, body = SecretResponse)))]
pub async fn generate_api_secret(
    State(state): State<AppState>,
    caller: Caller,
    Path((project_id, app_id)): Path<(String, String)>,
) -> ApiResult<Json<SecretResponse>> {
    regenerate_secret(&state, &caller, &project_id, &app_id).await
}

#[derive(Debug, Clone, Deserialize, Serialize, Default, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ApiAppRequest {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub project_id: String,
    pub name: String,
    #[serde(skip_serializing_if = "ApiAuthMethod::is_default")]
    pub auth_method_type: ApiAuthMethod,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddApiAppResponse {
    app_id: String,
    details: Details,
    client_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    client_secret: Option<String>,
}

#[utoipa::path(post, path = "/projects/{project_id}/apps/api", request_body = ApiAppRequest, responses((status = 200, body = AddApiAppResponse)))]
pub async fn add_api_app(
    State(state): State<AppState>,
    caller: Caller,
    Path(project_id): Path<String>,
    ApiJson(req): ApiJson<ApiAppRequest>,
) -> ApiResult<Json<AddApiAppResponse>> {
    caller.require(Permission::AppWrite)?;
    validate::required("AddAPIAppRequest", "name", &req.name, 200)?;
    let now = state.clock.now();
    let client_secret = (req.auth_method_type == ApiAuthMethod::Basic).then(secret::new_secret);
    let mut tx = state.db.begin().await?;
    let p = load_project(&mut tx, &caller, &project_id).await?;
    let app_id = new_id();
    let client_id = fresh_audience_id(&mut tx, new_id).await?;
    insert_app(
        &mut tx,
        &App {
            app_id: app_id.clone(),
            project_id: p.project_id.clone(),
            org_id: p.org_id.clone(),
            name: req.name.trim().to_string(),
            state: AppLifecycle::Active,
            client_id: client_id.clone(),
            secret_digest: client_secret.as_deref().map(secret::digest),
            kind: AppKind::Api { auth_method: req.auth_method_type },
            created_at: now,
            changed_at: now,
        },
    )
    .await?;
    tx.commit().await?;
    Ok(Json(AddApiAppResponse { app_id, details: Details::created(now, &p.org_id), client_id, client_secret }))
}

#[utoipa::path(put, path = "/projects/{project_id}/apps/{app_id}/api_config", request_body = ApiAppRequest, responses((status = 200, body = DetailsResponse)))]
pub async fn update_api_config(
    State(state): State<AppState>,
    caller: Caller,
    Path((project_id, app_id)): Path<(String, String)>,
    ApiJson(req): ApiJson<ApiAppRequest>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::AppWrite)?;
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    let a = load_app(&mut tx, &caller, &project_id, &app_id).await?;
    let AppKind::Api { auth_method } = a.kind else {
        return Err(ApiError::precondition("the application is not an API application").with_id("APP-NotAPI"));
    };
    if auth_method == req.auth_method_type {
        return Err(ApiError::precondition("the configuration is unchanged").with_id("APP-NotChanged"));
    }
    app::update_kind(&mut tx, &app_id, &AppKind::Api { auth_method: req.auth_method_type }, now).await?;
    if req.auth_method_type != ApiAuthMethod::Basic {
        app::set_secret(&mut tx, &app_id, None, now).await?;
    }
    tx.commit().await?;
    Ok(Json(DetailsResponse { details: Details::changed(now, &a.org_id) }))
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OidcConfigView {
    redirect_uris: Vec<String>,
    response_types: Vec<OidcResponseType>,
    grant_types: Vec<OidcGrantType>,
    #[serde(skip_serializing_if = "OidcAppType::is_default")]
    app_type: OidcAppType,
    client_id: String,
    #[serde(skip_serializing_if = "OidcAuthMethod::is_default")]
    auth_method_type: OidcAuthMethod,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    post_logout_redirect_uris: Vec<String>,
    #[serde(skip_serializing_if = "is_false")]
    none_compliant: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    compliance_problems: Vec<ProblemView>,
    #[serde(skip_serializing_if = "is_false")]
    dev_mode: bool,
    #[serde(skip_serializing_if = "OidcTokenType::is_default")]
    access_token_type: OidcTokenType,
    #[serde(skip_serializing_if = "is_false")]
    access_token_role_assertion: bool,
    #[serde(skip_serializing_if = "is_false")]
    id_token_role_assertion: bool,
    #[serde(skip_serializing_if = "is_false")]
    id_token_userinfo_assertion: bool,
    clock_skew: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    additional_origins: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    allowed_origins: Vec<String>,
    #[serde(skip_serializing_if = "is_false")]
    skip_native_app_success_page: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    back_channel_logout_uri: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    login_version: Option<serde_json::Value>,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiConfigView {
    client_id: String,
    #[serde(skip_serializing_if = "ApiAuthMethod::is_default")]
    auth_method_type: ApiAuthMethod,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppView {
    id: String,
    details: Details,
    #[serde(skip_serializing_if = "AppLifecycle::is_default")]
    state: AppLifecycle,
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    oidc_config: Option<OidcConfigView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    api_config: Option<ApiConfigView>,
}

/// The origins allowed for CORS: those of the redirect URIs plus the additional origins.
pub fn allowed_origins(c: &OidcConfig) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for u in &c.redirect_uris {
        if let Ok(url) = url::Url::parse(u) {
            let o = url.origin();
            if o.is_tuple() {
                let s = o.ascii_serialization();
                if !out.contains(&s) {
                    out.push(s);
                }
            }
        }
    }
    for o in &c.additional_origins {
        if !out.contains(o) {
            out.push(o.clone());
        }
    }
    out
}

impl From<&App> for AppView {
    fn from(a: &App) -> Self {
        let (oidc_config, api_config) = match &a.kind {
            AppKind::Oidc { auth_method, config } => {
                let problems = problem_views(config, *auth_method);
                (
                    Some(OidcConfigView {
                        redirect_uris: config.redirect_uris.clone(),
                        response_types: config.response_types.clone(),
                        grant_types: config.grant_types.clone(),
                        app_type: config.app_type,
                        client_id: a.client_id.clone(),
                        auth_method_type: *auth_method,
                        post_logout_redirect_uris: config.post_logout_redirect_uris.clone(),
                        none_compliant: !problems.is_empty(),
                        compliance_problems: problems,
                        dev_mode: config.dev_mode,
                        access_token_type: config.access_token_type,
                        access_token_role_assertion: config.access_token_role_assertion,
                        id_token_role_assertion: config.id_token_role_assertion,
                        id_token_userinfo_assertion: config.id_token_userinfo_assertion,
                        clock_skew: duration::format_proto(std::time::Duration::from_millis(
                            config.clock_skew_ms as u64,
                        )),
                        additional_origins: config.additional_origins.clone(),
                        allowed_origins: allowed_origins(config),
                        skip_native_app_success_page: config.skip_native_app_success_page,
                        back_channel_logout_uri: config.back_channel_logout_uri.clone(),
                        login_version: config.login_version.clone(),
                    }),
                    None,
                )
            }
            AppKind::Api { auth_method } => {
                (None, Some(ApiConfigView { client_id: a.client_id.clone(), auth_method_type: *auth_method }))
            }
        };
        AppView {
            id: a.app_id.clone(),
            details: Details::read(a.created_at, a.changed_at, &a.org_id),
            state: a.state,
            name: a.name.clone(),
            oidc_config,
            api_config,
        }
    }
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct GetAppResponse {
    app: AppView,
}

#[utoipa::path(get, path = "/projects/{project_id}/apps/{app_id}", responses((status = 200, body = GetAppResponse)))]
pub async fn get_app(
    State(state): State<AppState>,
    caller: Caller,
    Path((project_id, app_id)): Path<(String, String)>,
) -> ApiResult<Json<GetAppResponse>> {
    caller.require(Permission::AppRead)?;
    let mut c = state.db.conn().await?;
    let a = load_app(&mut c, &caller, &project_id, &app_id).await?;
    Ok(Json(GetAppResponse { app: AppView::from(&a) }))
}

#[utoipa::path(post, path = "/projects/{project_id}/apps/_search", request_body = ListByNameRequest, responses((status = 200, body = ListResponse<AppView>)))]
pub async fn list_apps(
    State(state): State<AppState>,
    caller: Caller,
    Path(project_id): Path<String>,
    ApiJson(req): ApiJson<ListByNameRequest>,
) -> ApiResult<Json<ListResponse<AppView>>> {
    caller.require(Permission::AppRead)?;
    let page = req.query().page()?;
    let mut c = state.db.conn().await?;
    load_project(&mut c, &caller, &project_id).await?;
    let (apps, total) = app::search(&mut c, &project_id, req.name("ListAppsRequest")?, page).await?;
    Ok(Json(ListResponse {
        details: ListDetails::new(total, state.clock.now()),
        sorting_column: None,
        result: apps.iter().map(AppView::from).collect(),
    }))
}

#[utoipa::path(delete, path = "/projects/{project_id}/apps/{app_id}", responses((status = 200, body = DetailsResponse)))]
pub async fn remove_app(
    State(state): State<AppState>,
    caller: Caller,
    Path((project_id, app_id)): Path<(String, String)>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::AppDelete)?;
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    let a = load_app(&mut tx, &caller, &project_id, &app_id).await?;
    app::delete(&mut tx, &app_id).await?;
    tx.commit().await?;
    Ok(Json(DetailsResponse { details: Details::changed(now, &a.org_id) }))
}

#[derive(Deserialize, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct UpdateAppRequest {
    name: String,
}

/// UpdateApp: renames an application (its configuration has calls of its own).
#[utoipa::path(put, path = "/projects/{project_id}/apps/{app_id}", request_body = UpdateAppRequest, responses((status = 200, body = DetailsResponse)))]
pub async fn update_app(
    State(state): State<AppState>,
    caller: Caller,
    Path((project_id, app_id)): Path<(String, String)>,
    ApiJson(req): ApiJson<UpdateAppRequest>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::AppWrite)?;
    validate::required("UpdateAppRequest", "name", &req.name, 200)?;
    let name = req.name.trim();
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    let a = load_app(&mut tx, &caller, &project_id, &app_id).await?;
    if a.name == name {
        return Err(ApiError::precondition("the application's name is unchanged").with_id("APP-NotChanged"));
    }
    let taken =
        || ApiError::exists("an application with this name already exists in the project").with_id("APP-AlreadyExists");
    // Only the letters' case changed: the name is its own.
    if crate::store::fold(&a.name) != crate::store::fold(name) && app::name_taken(&mut tx, &project_id, name).await? {
        return Err(taken());
    }
    let renamed = app::rename(&mut tx, &app_id, name, now).await.map_err(|e| match e {
        StoreError::Conflict => taken(),
        other => other.into(),
    })?;
    if !renamed {
        return Err(ApiError::not_found("application not found").with_id("APP-NotFound"));
    }
    tx.commit().await?;
    Ok(Json(DetailsResponse { details: Details::changed(now, &a.org_id) }))
}

#[utoipa::path(post, path = "/projects/{project_id}/apps/{app_id}/_deactivate", responses((status = 200, body = DetailsResponse)))]
pub async fn deactivate_app(
    State(state): State<AppState>,
    caller: Caller,
    Path((project_id, app_id)): Path<(String, String)>,
) -> ApiResult<Json<DetailsResponse>> {
    change_app_state(&state, &caller, &project_id, &app_id, AppLifecycle::Active, AppLifecycle::Inactive).await
}

#[utoipa::path(post, path = "/projects/{project_id}/apps/{app_id}/_reactivate", responses((status = 200, body = DetailsResponse)))]
pub async fn reactivate_app(
    State(state): State<AppState>,
    caller: Caller,
    Path((project_id, app_id)): Path<(String, String)>,
) -> ApiResult<Json<DetailsResponse>> {
    change_app_state(&state, &caller, &project_id, &app_id, AppLifecycle::Inactive, AppLifecycle::Active).await
}

/// An inactive application authenticates no client and starts no sign-in; its tokens already
/// issued stay valid until they expire (revoke them, or end the users' sessions, to end them).
async fn change_app_state(
    state: &AppState,
    caller: &Caller,
    project_id: &str,
    app_id: &str,
    from: AppLifecycle,
    to: AppLifecycle,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::AppWrite)?;
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    let a = load_app(&mut tx, caller, project_id, app_id).await?;
    if !app::set_state(&mut tx, app_id, from, to, now).await? {
        let what = if to == AppLifecycle::Inactive {
            "the application is not active"
        } else {
            "the application is not inactive"
        };
        return Err(ApiError::precondition(what).with_id("APP-StateChange"));
    }
    tx.commit().await?;
    Ok(Json(DetailsResponse { details: Details::changed(now, &a.org_id) }))
}
