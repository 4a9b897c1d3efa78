//! Instance settings and policies with their defaults.

use serde::{Deserialize, Serialize};

use crate::domain::enums::PasswordlessType;
use crate::store::setting::Setting;

const HOUR: i64 = 3600;
const DAY: i64 = 24 * HOUR;

/// Token lifetimes, in seconds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct OidcSettings {
    pub access_token_lifetime: i64,
    pub id_token_lifetime: i64,
    pub refresh_token_idle_expiration: i64,
    pub refresh_token_expiration: i64,
    /// When the last signed token issued under longer lifetimes than today's expires: set when
    /// the lifetimes are shortened, so that revocations written later still outlast the tokens
    /// issued before (0: never shortened). Not part of the API.
    pub signed_tokens_valid_until: i64,
}

impl Default for OidcSettings {
    fn default() -> Self {
        Self {
            access_token_lifetime: 12 * HOUR,
            id_token_lifetime: 12 * HOUR,
            refresh_token_idle_expiration: 30 * DAY,
            refresh_token_expiration: 90 * DAY,
            signed_tokens_valid_until: 0,
        }
    }
}

impl Setting for OidcSettings {
    const KIND: &'static str = "oidc";
}

impl OidcSettings {
    /// The longest time a signed token stays valid: how long a retired key stays published.
    pub fn longest_signed_token(&self) -> i64 {
        self.access_token_lifetime.max(self.id_token_lifetime)
    }

    /// Until when a revocation written `now` of a session's or grant's tokens must be kept: as
    /// long as any of its signed tokens may be valid, also those issued before the lifetimes were
    /// shortened, plus a minute of clock skew.
    pub fn revocation_until(&self, now: i64) -> i64 {
        (now + self.longest_signed_token()).max(self.signed_tokens_valid_until) + 60
    }
}

/// Login policy. Durations in seconds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct LoginPolicy {
    pub allow_username_password: bool,
    pub allow_register: bool,
    pub allow_external_idp: bool,
    pub force_mfa: bool,
    pub passwordless_type: PasswordlessType,
    pub hide_password_reset: bool,
    pub ignore_unknown_usernames: bool,
    pub default_redirect_uri: String,
    pub password_check_lifetime: i64,
    pub external_login_check_lifetime: i64,
    pub mfa_init_skip_lifetime: i64,
    pub second_factor_check_lifetime: i64,
    pub multi_factor_check_lifetime: i64,
    pub allow_domain_discovery: bool,
    pub disable_login_with_email: bool,
    pub disable_login_with_phone: bool,
    pub force_mfa_local_only: bool,
}

impl LoginPolicy {
    /// Whether a sign-in needs a second factor: `forceMfa`, or `forceMfaLocalOnly` (every
    /// sign-in to latch is local; ZITADEL reads them together the same way).
    pub fn requires_mfa(&self) -> bool {
        self.force_mfa || self.force_mfa_local_only
    }
}

impl Default for LoginPolicy {
    fn default() -> Self {
        Self {
            allow_username_password: true,
            // Self-registration is off until an administrator turns it on (as in Keycloak).
            allow_register: false,
            allow_external_idp: false,
            force_mfa: false,
            passwordless_type: PasswordlessType::NotAllowed,
            hide_password_reset: false,
            ignore_unknown_usernames: false,
            default_redirect_uri: String::new(),
            password_check_lifetime: 240 * HOUR,
            external_login_check_lifetime: 240 * HOUR,
            mfa_init_skip_lifetime: 720 * HOUR,
            second_factor_check_lifetime: 18 * HOUR,
            multi_factor_check_lifetime: 12 * HOUR,
            allow_domain_discovery: false,
            disable_login_with_email: false,
            disable_login_with_phone: false,
            force_mfa_local_only: false,
        }
    }
}

impl Setting for LoginPolicy {
    const KIND: &'static str = "login_policy";
}

/// Lockout policy: 0 means never lock.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct LockoutPolicy {
    pub max_password_attempts: i64,
    pub max_otp_attempts: i64,
}

impl Setting for LockoutPolicy {
    const KIND: &'static str = "lockout_policy";
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct PasswordComplexityPolicy {
    pub min_length: i64,
    pub has_uppercase: bool,
    pub has_lowercase: bool,
    pub has_number: bool,
    pub has_symbol: bool,
}

impl Default for PasswordComplexityPolicy {
    fn default() -> Self {
        Self { min_length: 8, has_uppercase: true, has_lowercase: true, has_number: true, has_symbol: true }
    }
}

impl Setting for PasswordComplexityPolicy {
    const KIND: &'static str = "password_complexity_policy";
}

impl PasswordComplexityPolicy {
    /// Every rule the password breaks, as readable phrases (empty when it complies).
    pub fn violations(&self, password: &str) -> Vec<&'static str> {
        let mut v = Vec::new();
        if (password.chars().count() as i64) < self.min_length {
            v.push("is too short");
        }
        if self.has_uppercase && !password.chars().any(|c| c.is_uppercase()) {
            v.push("needs an uppercase letter");
        }
        if self.has_lowercase && !password.chars().any(|c| c.is_lowercase()) {
            v.push("needs a lowercase letter");
        }
        if self.has_number && !password.chars().any(|c| c.is_numeric()) {
            v.push("needs a number");
        }
        if self.has_symbol && !password.chars().any(|c| !c.is_alphanumeric()) {
            v.push("needs a symbol");
        }
        v
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct SecurityPolicy {
    pub enable_iframe_embedding: bool,
    pub allowed_origins: Vec<String>,
    pub enable_impersonation: bool,
}

impl Setting for SecurityPolicy {
    const KIND: &'static str = "security_policy";
}

/// Instance feature flags; `None` means not set (the default applies).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct Features {
    pub oidc_token_exchange: Option<bool>,
    pub enable_back_channel_logout: Option<bool>,
}

impl Setting for Features {
    const KIND: &'static str = "features";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complexity_rules() {
        let p = PasswordComplexityPolicy::default();
        assert!(p.violations("Password1!").is_empty());
        assert_eq!(p.violations("password"), vec!["needs an uppercase letter", "needs a number", "needs a symbol"]);
        assert!(p.violations("Pw1!").contains(&"is too short"));
    }
}
