//! Scopes: the standard OpenID Connect ones and latch's reserved `urn:service:` scopes.

/// Prefix of every reserved scope and claim.
pub const URN: &str = "urn:service:iam:";
pub const PROJECT_AUD_PREFIX: &str = "urn:service:iam:org:project:id:";
pub const PROJECT_AUD_SUFFIX: &str = ":aud";
pub const PROJECT_ROLE_PREFIX: &str = "urn:service:iam:org:project:role:";
pub const PROJECTS_ROLES: &str = "urn:service:iam:org:projects:roles";
pub const RESOURCE_OWNER: &str = "urn:service:iam:user:resourceowner";
pub const ORG_ID_PREFIX: &str = "urn:service:iam:org:id:";
pub const ORG_DOMAIN_PREFIX: &str = "urn:service:iam:org:domain:primary:";
/// The role claim: `{role: {orgId: primaryDomain}}`.
pub const CLAIM_PROJECT_ROLES: &str = "urn:service:iam:org:project:roles";

/// Puts the role claim `roles` of `project_id` into `claims` under both names ZITADEL asserts
/// it with: `urn:service:iam:org:project:roles` and the project's own
/// `urn:service:iam:org:project:{projectId}:roles`.
pub fn insert_role_claims(
    claims: &mut serde_json::Map<String, serde_json::Value>,
    project_id: &str,
    roles: serde_json::Value,
) {
    claims.insert(format!("urn:service:iam:org:project:{project_id}:roles"), roles.clone());
    claims.insert(CLAIM_PROJECT_ROLES.to_string(), roles);
}

/// The scopes of a personal access token, as ZITADEL gives them (but its metadata scope, as latch
/// keeps no user metadata): introspection and userinfo answer with the user's organization.
pub fn pat_scopes() -> Vec<String> {
    vec!["openid".into(), RESOURCE_OWNER.into()]
}

const STANDARD: [&str; 6] = ["openid", "profile", "email", "phone", "address", "offline_access"];

/// A scope latch understands (others are dropped from requests).
pub fn is_known(s: &str) -> bool {
    if STANDARD.contains(&s) || s == PROJECTS_ROLES || s == RESOURCE_OWNER {
        return true;
    }
    if let Some(rest) = s.strip_prefix(PROJECT_AUD_PREFIX) {
        return rest.strip_suffix(PROJECT_AUD_SUFFIX).is_some_and(|id| !id.is_empty());
    }
    for p in [PROJECT_ROLE_PREFIX, ORG_ID_PREFIX, ORG_DOMAIN_PREFIX] {
        if s.strip_prefix(p).is_some_and(|v| !v.is_empty()) {
            return true;
        }
    }
    false
}

/// Parsed scopes in request order, without duplicates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scopes(pub Vec<String>);

/// Scope tokens are printable ASCII without space, `"` or `\` (RFC 6749 3.3).
fn valid_token(t: &str) -> bool {
    !t.is_empty()
        && t.len() <= 512
        && t.bytes().all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b))
}

impl Scopes {
    /// All tokens of a scope string, or `None` when one is malformed.
    pub fn parse(raw: &str) -> Option<Self> {
        let mut out: Vec<String> = Vec::new();
        for t in raw.split(' ').filter(|t| !t.is_empty()) {
            if !valid_token(t) {
                return None;
            }
            if !out.iter().any(|s| s == t) {
                out.push(t.to_string());
            }
        }
        Some(Scopes(out))
    }

    /// Only the scopes latch understands.
    pub fn known(&self) -> Scopes {
        Scopes(self.0.iter().filter(|s| is_known(s)).cloned().collect())
    }

    pub fn has(&self, s: &str) -> bool {
        self.0.iter().any(|x| x == s)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every scope of `self` is in `other`.
    pub fn subset_of(&self, other: &Scopes) -> bool {
        self.0.iter().all(|s| other.has(s))
    }

    /// Project ids named by audience scopes.
    pub fn audience_projects(&self) -> Vec<String> {
        self.0
            .iter()
            .filter_map(|s| s.strip_prefix(PROJECT_AUD_PREFIX)?.strip_suffix(PROJECT_AUD_SUFFIX))
            .map(str::to_string)
            .collect()
    }

    /// Role keys requested by role scopes.
    pub fn requested_roles(&self) -> Vec<String> {
        self.0.iter().filter_map(|s| s.strip_prefix(PROJECT_ROLE_PREFIX)).map(str::to_string).collect()
    }

    pub fn join(&self) -> String {
        self.0.join(" ")
    }

    /// Removes a scope (for scopes that turn out not to apply).
    pub fn without(&self, s: &str) -> Scopes {
        Scopes(self.0.iter().filter(|x| *x != s).cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_filter() {
        let s = Scopes::parse("openid  profile openid urn:service:iam:org:project:id:42:aud custom").unwrap();
        assert_eq!(s.0, vec!["openid", "profile", "urn:service:iam:org:project:id:42:aud", "custom"]);
        assert_eq!(s.known().0.len(), 3);
        assert_eq!(s.audience_projects(), vec!["42"]);
        assert!(Scopes::parse("open\"id").is_none());
        assert!(Scopes::parse("openid \u{7f}").is_none());
        assert!(!is_known("urn:service:iam:org:project:id::aud"));
        assert!(is_known("urn:service:iam:org:project:role:admin"));
        let a = Scopes::parse("openid email").unwrap();
        assert!(a.subset_of(&Scopes::parse("email openid profile").unwrap()));
    }
}
