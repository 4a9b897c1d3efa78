//! User claims by scope, shared by ID tokens, userinfo and introspection.

use serde_json::{Map, Value, json};

use crate::domain::enums::Gender;
use crate::oauth::scope::{self, Scopes};
use crate::store::org::Org;
use crate::store::user::User;
use crate::store::{Result, Source, project};

/// A user with the organization it belongs to.
#[derive(Debug, Clone)]
pub struct Subject {
    pub user: User,
    pub org: Org,
}

fn gender(g: Gender) -> Option<&'static str> {
    match g {
        Gender::Female => Some("female"),
        Gender::Male => Some("male"),
        Gender::Diverse => Some("diverse"),
        Gender::Unspecified => None,
    }
}

fn put(out: &mut Map<String, Value>, k: &str, v: impl Into<Value>) {
    out.insert(k.to_string(), v.into());
}

/// `profile`, `email` and `phone` claims (`address` is not stored, so it adds nothing).
/// `preferred_username_key` lets introspection name it `username` instead.
pub fn profile_claims(s: &Subject, scopes: &Scopes, preferred_username_key: &str, out: &mut Map<String, Value>) {
    let u = &s.user;
    if scopes.has("profile") {
        match u.human() {
            Some(h) => {
                put(out, "name", h.display_name.clone());
                put(out, "given_name", h.first_name.clone());
                put(out, "family_name", h.last_name.clone());
                if !h.nick_name.is_empty() {
                    put(out, "nickname", h.nick_name.clone());
                }
                if !h.preferred_language.is_empty() {
                    put(out, "locale", h.preferred_language.clone());
                }
                if let Some(g) = gender(h.gender) {
                    put(out, "gender", g);
                }
            }
            None => {
                if let Some(m) = u.machine() {
                    put(out, "name", m.name.clone());
                }
            }
        }
        put(out, preferred_username_key, u.login_name());
        put(out, "updated_at", u.changed_at);
    }
    if let Some(h) = u.human() {
        if scopes.has("email") {
            put(out, "email", h.email.clone());
            put(out, "email_verified", h.email_verified);
        }
        if scopes.has("phone") && !h.phone.is_empty() {
            put(out, "phone_number", h.phone.clone());
            put(out, "phone_number_verified", h.phone_verified);
        }
    }
}

/// Resource-owner and organization claims of the reserved scopes.
pub fn org_claims(s: &Subject, scopes: &Scopes, out: &mut Map<String, Value>) {
    let wants_owner = scopes.has(scope::RESOURCE_OWNER)
        || scopes.0.iter().any(|x| x.strip_prefix(scope::ORG_ID_PREFIX) == Some(s.org.org_id.as_str()));
    if wants_owner {
        put(out, "urn:service:iam:user:resourceowner:id", s.org.org_id.clone());
        put(out, "urn:service:iam:user:resourceowner:name", s.org.name.clone());
        put(out, "urn:service:iam:user:resourceowner:primary_domain", s.org.primary_domain.clone());
    }
    if scopes.0.iter().any(|x| x.strip_prefix(scope::ORG_ID_PREFIX) == Some(s.org.org_id.as_str())) {
        put(out, "urn:service:iam:org:id", s.org.org_id.clone());
    }
    if scopes.0.iter().any(|x| {
        x.strip_prefix(scope::ORG_DOMAIN_PREFIX).is_some_and(|d| d.eq_ignore_ascii_case(&s.org.primary_domain))
    }) {
        put(out, "urn:service:iam:org:domain:primary", s.org.primary_domain.clone());
    }
}

/// Drops organization scopes that do not match the user's organization (silently, as the
/// platform latch follows does).
pub fn filter_org_scopes(s: &Subject, scopes: &Scopes) -> Scopes {
    Scopes(
        scopes
            .0
            .iter()
            .filter(|x| match x.strip_prefix(scope::ORG_ID_PREFIX) {
                Some(id) => id == s.org.org_id,
                None => match x.strip_prefix(scope::ORG_DOMAIN_PREFIX) {
                    // Domains are stored lowercased; a scope may spell one otherwise.
                    Some(d) => d.eq_ignore_ascii_case(&s.org.primary_domain),
                    None => true,
                },
            })
            .cloned()
            .collect(),
    )
}

/// The role claim `{role: {orgId: primaryDomain}}` of a user on a project: every granted role
/// when `all` is set (role assertion), otherwise only the roles the scopes request.
pub async fn role_claim(
    c: &mut impl Source,
    user_id: &str,
    project_id: &str,
    scopes: &Scopes,
    all: bool,
) -> Result<Option<Value>> {
    let requested = scopes.requested_roles();
    if !all && requested.is_empty() && !scopes.has(scope::PROJECTS_ROLES) {
        return Ok(None);
    }
    let mut roles = Map::new();
    for (keys, org_id, domain) in project::grant_roles(c.conn().await?, user_id, project_id).await? {
        for k in keys {
            if all || scopes.has(scope::PROJECTS_ROLES) || requested.contains(&k) {
                let entry = roles.entry(k).or_insert_with(|| json!({}));
                if let Value::Object(m) = entry {
                    m.insert(org_id.clone(), Value::from(domain.clone()));
                }
            }
        }
    }
    Ok((!roles.is_empty()).then_some(Value::Object(roles)))
}
