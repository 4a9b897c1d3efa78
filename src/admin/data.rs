//! The export document (`{"orgs": [DataOrg, ...]}`), which import reads back: the shape of the
//! v1 `DataOrg` of the platform latch follows, with a few latch additions (client ids and secret
//! digests of applications, machine secrets) so applications keep working after a move.

use serde::{Deserialize, Serialize};

use super::settings::LoginPolicyDoc;
use crate::api::types::is_false;
use crate::api::types::lenient_u64;
use crate::domain::enums::{
    AccessTokenType, AppState, DomainValidationType, OrgState, PrivateLabelingSetting, ProjectState, UserState,
};
use crate::domain::settings::{LockoutPolicy, PasswordComplexityPolicy};
use crate::management::apps::{ApiAppRequest, OidcAppRequest};
use crate::management::import::ImportHumanUserRequest;

#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct Document {
    pub orgs: Vec<DataOrg>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct OrgData {
    pub name: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct DomainData {
    pub domain_name: String,
    #[serde(skip_serializing_if = "is_false")]
    pub is_verified: bool,
    #[serde(skip_serializing_if = "is_false")]
    pub is_primary: bool,
    #[serde(skip_serializing_if = "DomainValidationType::is_default")]
    pub validation_type: DomainValidationType,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ProjectData {
    pub name: String,
    #[serde(skip_serializing_if = "is_false")]
    pub project_role_assertion: bool,
    #[serde(skip_serializing_if = "is_false")]
    pub project_role_check: bool,
    #[serde(skip_serializing_if = "is_false")]
    pub has_project_check: bool,
    #[serde(skip_serializing_if = "PrivateLabelingSetting::is_default")]
    pub private_labeling_setting: PrivateLabelingSetting,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct DataProject {
    pub project_id: String,
    pub project: ProjectData,
    /// latch: `PROJECT_STATE_INACTIVE` for a deactivated project (left out when active), so it
    /// stays deactivated on the target.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<ProjectState>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct DataProjectRole {
    pub project_id: String,
    pub role_key: String,
    pub display_name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub group: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct DataOidcApp {
    pub app_id: String,
    pub app: OidcAppRequest,
    /// latch: the client id, kept so the application's configuration still fits.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub client_id: String,
    /// latch: the SHA-256 digest (base64) of the client secret (only with `with_passwords`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub client_secret_digest: String,
    /// latch: `APP_STATE_INACTIVE` for a deactivated application (left out when active).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<AppState>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct DataApiApp {
    pub app_id: String,
    pub app: ApiAppRequest,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub client_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub client_secret_digest: String,
    /// latch: `APP_STATE_INACTIVE` for a deactivated application (left out when active).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<AppState>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct DataHumanUser {
    pub user_id: String,
    pub user: ImportHumanUserRequest,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<UserState>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct MachineData {
    pub user_name: String,
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(skip_serializing_if = "AccessTokenType::is_default")]
    pub access_token_type: AccessTokenType,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct DataMachineUser {
    pub user_id: String,
    pub user: MachineData,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<UserState>,
    /// latch: the SHA-256 digest (base64) of the machine secret (only with `with_passwords`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub secret_digest: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct DataUserGrant {
    pub user_id: String,
    pub project_id: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub role_keys: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct DataMember {
    pub user_id: String,
    pub roles: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct DataProjectMember {
    pub project_id: String,
    pub user_id: String,
    pub roles: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct DataOrg {
    pub org_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub org: Option<OrgData>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub org_state: Option<OrgState>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub domains: Vec<DomainData>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub login_policy: Option<LoginPolicyDoc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lockout_policy: Option<LockoutData>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password_complexity_policy: Option<ComplexityData>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub projects: Vec<DataProject>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub project_roles: Vec<DataProjectRole>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub api_apps: Vec<DataApiApp>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub oidc_apps: Vec<DataOidcApp>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub human_users: Vec<DataHumanUser>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub machine_users: Vec<DataMachineUser>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub user_grants: Vec<DataUserGrant>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub org_members: Vec<DataMember>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub project_members: Vec<DataProjectMember>,
}

/// The lockout policy of an organization (numbers also as strings, as protobuf JSON writes them).
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct LockoutData {
    #[serde(deserialize_with = "lenient_u64")]
    #[schema(schema_with = crate::api::types::lenient_u64_schema)]
    pub max_password_attempts: u64,
    #[serde(deserialize_with = "lenient_u64")]
    #[schema(schema_with = crate::api::types::lenient_u64_schema)]
    pub max_otp_attempts: u64,
}

impl From<&LockoutPolicy> for LockoutData {
    fn from(p: &LockoutPolicy) -> Self {
        LockoutData {
            max_password_attempts: p.max_password_attempts.max(0) as u64,
            max_otp_attempts: p.max_otp_attempts.max(0) as u64,
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ComplexityData {
    #[serde(deserialize_with = "lenient_u64")]
    #[schema(schema_with = crate::api::types::lenient_u64_schema)]
    pub min_length: u64,
    pub has_uppercase: bool,
    pub has_lowercase: bool,
    pub has_number: bool,
    pub has_symbol: bool,
}

impl From<&PasswordComplexityPolicy> for ComplexityData {
    fn from(p: &PasswordComplexityPolicy) -> Self {
        ComplexityData {
            min_length: p.min_length.max(0) as u64,
            has_uppercase: p.has_uppercase,
            has_lowercase: p.has_lowercase,
            has_number: p.has_number,
            has_symbol: p.has_symbol,
        }
    }
}

/// A bucket object: where an export goes or an import comes from.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct GcsTarget {
    pub bucket: String,
    pub path: String,
    /// Base64 of a service-account key file.
    #[serde(alias = "serviceaccount_json", alias = "serviceaccountJSON")]
    pub serviceaccount_json: String,
}
