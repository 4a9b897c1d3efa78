//! JSON shapes of users, organizations and members as the v1 interface returns them (zero
//! values omitted, enums as names, 64-bit numbers as strings).

use serde::Serialize;

use crate::api::types::{Details, is_false, ts};
use crate::domain::enums::{AccessTokenType, Gender, OrgState, UserState, UserType};
use crate::store::member::Member;
use crate::store::org::Org;
use crate::store::user::User;

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OrgView {
    pub id: String,
    pub details: Details,
    #[serde(skip_serializing_if = "OrgState::is_default")]
    pub state: OrgState,
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub primary_domain: String,
}

impl From<&Org> for OrgView {
    fn from(o: &Org) -> Self {
        OrgView {
            id: o.org_id.clone(),
            details: Details::read(o.created_at, o.changed_at, &o.org_id),
            state: o.state,
            name: o.name.clone(),
            primary_domain: o.primary_domain.clone(),
        }
    }
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProfileView {
    pub first_name: String,
    pub last_name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub nick_name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub preferred_language: String,
    #[serde(skip_serializing_if = "Gender::is_default")]
    pub gender: Gender,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EmailView {
    pub email: String,
    #[serde(skip_serializing_if = "is_false")]
    pub is_email_verified: bool,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PhoneView {
    pub phone: String,
    #[serde(skip_serializing_if = "is_false")]
    pub is_phone_verified: bool,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HumanView {
    pub profile: ProfileView,
    pub email: EmailView,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phone: Option<PhoneView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password_changed: Option<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineView {
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(skip_serializing_if = "is_false")]
    pub has_secret: bool,
    #[serde(skip_serializing_if = "AccessTokenType::is_default")]
    pub access_token_type: AccessTokenType,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UserView {
    pub id: String,
    pub details: Details,
    #[serde(skip_serializing_if = "UserState::is_default")]
    pub state: UserState,
    pub user_name: String,
    pub login_names: Vec<String>,
    pub preferred_login_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub human: Option<HumanView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine: Option<MachineView>,
}

impl From<&User> for UserView {
    fn from(u: &User) -> Self {
        let login = u.login_name();
        UserView {
            id: u.user_id.clone(),
            details: Details::read(u.created_at, u.changed_at, &u.org_id),
            state: u.state,
            user_name: u.username.clone(),
            login_names: vec![login.clone()],
            preferred_login_name: login,
            human: u.human().map(|h| HumanView {
                profile: ProfileView {
                    first_name: h.first_name.clone(),
                    last_name: h.last_name.clone(),
                    nick_name: h.nick_name.clone(),
                    display_name: h.display_name.clone(),
                    preferred_language: h.preferred_language.clone(),
                    gender: h.gender,
                },
                email: EmailView { email: h.email.clone(), is_email_verified: h.email_verified },
                phone: (!h.phone.is_empty())
                    .then(|| PhoneView { phone: h.phone.clone(), is_phone_verified: h.phone_verified }),
                password_changed: h.password_changed_at.map(ts),
            }),
            machine: u.machine().map(|m| MachineView {
                name: m.name.clone(),
                description: m.description.clone(),
                has_secret: m.secret_digest.is_some(),
                access_token_type: m.access_token_type,
            }),
        }
    }
}

/// A member of the instance or an organization, with the member user's main fields.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemberView {
    pub user_id: String,
    pub details: Details,
    pub roles: Vec<String>,
    pub preferred_login_name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub email: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub first_name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub last_name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    #[serde(skip_serializing_if = "UserType::is_default")]
    pub user_type: UserType,
    pub user_resource_owner: String,
}

impl MemberView {
    pub fn new(m: &Member, u: &User, owner: &str) -> Self {
        let h = u.human();
        MemberView {
            user_id: m.user_id.clone(),
            details: Details::read(m.created_at, m.changed_at, owner),
            roles: m.roles.clone(),
            preferred_login_name: u.login_name(),
            email: h.map(|h| h.email.clone()).unwrap_or_default(),
            first_name: h.map(|h| h.first_name.clone()).unwrap_or_default(),
            last_name: h.map(|h| h.last_name.clone()).unwrap_or_default(),
            display_name: h
                .map(|h| h.display_name.clone())
                .or_else(|| u.machine().map(|m| m.name.clone()))
                .unwrap_or_default(),
            user_type: u.user_type(),
            user_resource_owner: u.org_id.clone(),
        }
    }
}
