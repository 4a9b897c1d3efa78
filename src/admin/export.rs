//! `POST /admin/v1/export`: organizations with their users, projects, applications, grants,
//! members and policies, into the response and/or a Google Cloud Storage object. Password
//! hashes only `with_passwords`, TOTP secrets only `with_otp`. Not exported (SPEC.md 2.6):
//! instance-wide policies, instance members, machine keys, personal access tokens, application
//! keys, the audit trail.

use std::time::Duration;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::Deserialize;

use super::data::*;
use super::gcs;
use super::settings::LoginPolicyDoc;
use crate::api::error::ApiResult;
use crate::api::{ApiError, ApiJson, Caller, Code};
use crate::app::AppState;
use crate::domain::duration;
use crate::domain::enums::{AppState as AppLifecycle, OrgState, ProjectState, UserState};
use crate::domain::roles::Permission;
use crate::domain::settings::{LockoutPolicy, LoginPolicy, PasswordComplexityPolicy};
use crate::management::apps::{ApiAppRequest, OidcAppRequest};
use crate::management::import::{HashedPassword, IdpInput, ImportHumanUserRequest};
use crate::management::users::{EmailInput, PhoneInput, ProfileInput};
use crate::store::app::AppKind;
use crate::store::member::{self, Scope};
use crate::store::{Conn, app, org, project, setting, user};

/// Time limit when the request gives none, and the longest allowed.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);
pub const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

#[derive(Deserialize, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ExportRequest {
    org_ids: Vec<String>,
    excluded_org_ids: Vec<String>,
    with_passwords: bool,
    with_otp: bool,
    timeout: Option<String>,
    response_output: bool,
    gcs_output: Option<GcsTarget>,
}

/// Parses a `timeout` field (Go duration strings such as `30s`, `1h2m3s`).
pub fn timeout(req: &str, raw: Option<&str>) -> ApiResult<Duration> {
    match raw.filter(|s| !s.is_empty()) {
        None => Ok(DEFAULT_TIMEOUT),
        Some(s) => {
            let d = duration::parse(s).map_err(|e| ApiError::invalid(format!("invalid {req}.timeout: '{s}' {e}")))?;
            if d.is_zero() || d > MAX_TIMEOUT {
                return Err(ApiError::invalid(format!("invalid {req}.timeout: must be between 1s and 24h")));
            }
            Ok(d)
        }
    }
}

pub fn deadline_error(what: &str) -> ApiError {
    ApiError::new(Code::DeadlineExceeded, format!("the {what} did not finish within its timeout"))
}

/// Exports organizations into the response (`responseOutput`) and/or a bucket (`gcsOutput`); with
/// only a bucket the response is `{}`.
#[utoipa::path(post, path = "/export", request_body = ExportRequest, responses((status = 200, body = Document)))]
pub async fn export(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<ExportRequest>,
) -> ApiResult<Response> {
    caller.require(Permission::IamWrite)?;
    let limit = timeout("ExportDataRequest", req.timeout.as_deref())?;
    if !req.response_output && req.gcs_output.is_none() {
        return Err(ApiError::invalid("invalid ExportDataRequest: set response_output or gcs_output"));
    }
    let bucket = match &req.gcs_output {
        Some(t) => Some(gcs::Bucket::from_target(&state.settings, t, "gcs_output")?),
        None => None,
    };
    let work = async {
        // Credentials the token endpoint refuses fail before the document is built.
        if let Some(b) = &bucket {
            b.token().await?;
        }
        let doc = build(&state, &req).await?;
        let body = axum::body::Bytes::from(serde_json::to_vec(&doc).map_err(ApiError::internal)?);
        drop(doc);
        if let Some(b) = &bucket {
            b.upload(body.clone()).await?;
        }
        Ok::<_, ApiError>(body)
    };
    let body = tokio::time::timeout(limit, work).await.map_err(|_| deadline_error("export"))??;
    let body = if req.response_output { body } else { axum::body::Bytes::from_static(b"{}") };
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

async fn build(state: &AppState, req: &ExportRequest) -> ApiResult<Document> {
    let mut c = state.db.conn().await?;
    let ids = if req.org_ids.is_empty() {
        org::all_ids(&mut c).await?
    } else {
        for id in &req.org_ids {
            if org::get(&mut c, id).await?.is_none() {
                return Err(ApiError::not_found(format!("organization {id} not found")).with_id("ORG-NotFound"));
            }
        }
        req.org_ids.clone()
    };
    let mut doc = Document::default();
    for id in ids.iter().filter(|id| !req.excluded_org_ids.contains(id)) {
        doc.orgs.push(export_org(state, &mut c, id, req.with_passwords, req.with_otp).await?);
    }
    Ok(doc)
}

fn b64(d: &Option<Vec<u8>>, with: bool) -> String {
    match d {
        Some(d) if with => STANDARD.encode(d),
        _ => String::new(),
    }
}

async fn export_org(
    state: &AppState,
    c: &mut Conn,
    org_id: &str,
    with_passwords: bool,
    with_otp: bool,
) -> ApiResult<DataOrg> {
    let o = org::get(c, org_id).await?.ok_or_else(|| ApiError::not_found("organization not found"))?;
    let mut d = DataOrg {
        org_id: o.org_id.clone(),
        org: Some(OrgData { name: o.name.clone() }),
        org_state: (o.state != OrgState::Active).then_some(o.state),
        ..DataOrg::default()
    };
    for dm in org::domains(c, org_id).await? {
        d.domains.push(DomainData {
            domain_name: dm.domain,
            is_verified: dm.is_verified,
            is_primary: dm.is_primary,
            validation_type: dm.validation_type,
        });
    }
    let login = setting::load::<LoginPolicy>(c, org_id).await?;
    d.login_policy = login.times.map(|_| LoginPolicyDoc::from_policy(&login.value, None));
    let lockout = setting::load::<LockoutPolicy>(c, org_id).await?;
    d.lockout_policy = lockout.times.map(|_| LockoutData::from(&lockout.value));
    let complexity = setting::load::<PasswordComplexityPolicy>(c, org_id).await?;
    d.password_complexity_policy = complexity.times.map(|_| ComplexityData::from(&complexity.value));
    for p in project::list_by_org(c, org_id).await? {
        for m in member::list(c, Scope::Project, &p.project_id).await? {
            d.project_members.push(DataProjectMember {
                project_id: p.project_id.clone(),
                user_id: m.user_id,
                roles: m.roles,
            });
        }
        d.projects.push(DataProject {
            project_id: p.project_id.clone(),
            project: ProjectData {
                name: p.name,
                project_role_assertion: p.role_assertion,
                project_role_check: p.role_check,
                has_project_check: p.has_project_check,
                private_labeling_setting: p.private_labeling,
            },
            state: (p.state == ProjectState::Inactive).then_some(ProjectState::Inactive),
        });
    }
    for r in project::roles_by_org(c, org_id).await? {
        d.project_roles.push(DataProjectRole {
            project_id: r.project_id,
            role_key: r.role_key,
            display_name: r.display_name,
            group: r.role_group,
        });
    }
    for a in app::list_by_org(c, org_id).await? {
        match &a.kind {
            AppKind::Oidc { auth_method, config } => d.oidc_apps.push(DataOidcApp {
                app_id: a.app_id.clone(),
                app: OidcAppRequest::from_config(&a.project_id, &a.name, *auth_method, config),
                client_id: a.client_id.clone(),
                client_secret_digest: b64(&a.secret_digest, with_passwords),
                state: inactive(a.state),
            }),
            AppKind::Api { auth_method } => d.api_apps.push(DataApiApp {
                app_id: a.app_id.clone(),
                app: ApiAppRequest {
                    project_id: a.project_id.clone(),
                    name: a.name.clone(),
                    auth_method_type: *auth_method,
                },
                client_id: a.client_id.clone(),
                client_secret_digest: b64(&a.secret_digest, with_passwords),
                state: inactive(a.state),
            }),
        }
    }
    let mut links = user::idp_links_by_org(c, org_id).await?;
    for u in user::list_by_org(c, org_id).await? {
        let user_state = match u.state {
            UserState::Inactive | UserState::Locked => Some(u.state),
            _ => None,
        };
        if let Some(h) = u.human() {
            let otp = match (&h.otp_secret, with_otp) {
                // A secret that does not open (another master key, a damaged row) fails the
                // export: leaving it out would move the user without their second factor.
                (Some(s), true) => state.open_otp(&u.user_id, s).ok_or_else(|| {
                    ApiError::internal(format!("the TOTP secret of user {} does not open; nothing exported", u.user_id))
                })?,
                _ => String::new(),
            };
            let idps = links.remove(&u.user_id).unwrap_or_default();
            d.human_users.push(DataHumanUser {
                user_id: u.user_id.clone(),
                state: user_state,
                user: ImportHumanUserRequest {
                    user_name: u.username.clone(),
                    profile: Some(ProfileInput {
                        first_name: h.first_name.clone(),
                        last_name: h.last_name.clone(),
                        nick_name: h.nick_name.clone(),
                        display_name: h.display_name.clone(),
                        preferred_language: h.preferred_language.clone(),
                        gender: h.gender,
                    }),
                    email: Some(EmailInput { email: h.email.clone(), is_email_verified: h.email_verified }),
                    phone: (!h.phone.is_empty())
                        .then(|| PhoneInput { phone: h.phone.clone(), is_phone_verified: h.phone_verified }),
                    hashed_password: h
                        .password_hash
                        .clone()
                        .filter(|_| with_passwords)
                        .map(|value| HashedPassword { value }),
                    password_change_required: h.password_change_required && with_passwords,
                    otp_code: otp,
                    idps: idps
                        .into_iter()
                        .map(|l| IdpInput {
                            config_id: l.config_id,
                            external_user_id: l.external_user_id,
                            display_name: l.display_name,
                        })
                        .collect(),
                    ..ImportHumanUserRequest::default()
                },
            });
        } else if let Some(m) = u.machine() {
            d.machine_users.push(DataMachineUser {
                user_id: u.user_id.clone(),
                state: user_state,
                user: MachineData {
                    user_name: u.username.clone(),
                    name: m.name.clone(),
                    description: m.description.clone(),
                    access_token_type: m.access_token_type,
                },
                secret_digest: b64(&m.secret_digest, with_passwords),
            });
        }
    }
    for g in project::grants_by_org(c, org_id).await? {
        d.user_grants.push(DataUserGrant { user_id: g.user_id, project_id: g.project_id, role_keys: g.role_keys });
    }
    for m in member::list(c, Scope::Org, org_id).await? {
        d.org_members.push(DataMember { user_id: m.user_id, roles: m.roles });
    }
    Ok(d)
}

/// An application's state as the export carries it: only a deactivated one says so.
fn inactive(s: AppLifecycle) -> Option<AppLifecycle> {
    (s == AppLifecycle::Inactive).then_some(AppLifecycle::Inactive)
}
