//! Keycloak credentials in their three layouts:
//!
//! - Keycloak 10 and later: `secretData` and `credentialData` are JSON documents inside JSON
//!   strings (`{"value","salt","additionalParameters"}` and `{"hashIterations","algorithm",
//!   "additionalParameters"}`; for OTP `{"value"}` and `{"subType","digits","period",
//!   "algorithm","secretEncoding"}`);
//! - before 10: one flat object (`hashedSaltedValue`, `salt`, `hashIterations`, `algorithm`,
//!   `digits`, `period`, and for OTP the secret in `value`);
//! - hand-written realms: `{"type":"password","value":"<plain text>","temporary":true}`.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::migration::hash::{self, HashError};

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct KcCredential {
    #[serde(rename = "type")]
    kind: Option<String>,
    secret_data: Option<String>,
    credential_data: Option<String>,
    hashed_salted_value: Option<String>,
    salt: Option<String>,
    hash_iterations: Option<i64>,
    algorithm: Option<String>,
    digits: Option<i64>,
    period: Option<i64>,
    value: Option<String>,
    temporary: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct SecretData {
    value: Option<String>,
    salt: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct CredentialData {
    hash_iterations: Option<i64>,
    algorithm: Option<String>,
    additional_parameters: Option<BTreeMap<String, Value>>,
    sub_type: Option<String>,
    digits: Option<i64>,
    period: Option<i64>,
    secret_encoding: Option<String>,
}

/// A password credential's outcome: a hash for `hashedPassword`, or a plain-text password
/// (hand-written realms) that still has to be hashed.
#[derive(Debug, PartialEq, Eq)]
pub enum Password {
    Hash(String),
    Plain(String),
}

/// The OTP credential's outcome.
#[derive(Debug, PartialEq, Eq)]
pub enum Otp {
    None,
    /// The base32 secret; `more` when the user has further OTP devices (portable or not).
    Code {
        code: String,
        more: bool,
    },
    /// There was an OTP credential the import cannot take; the reason says why.
    NotPortable(String),
}

/// The first password credential.
pub fn password(credentials: &[KcCredential]) -> Option<&KcCredential> {
    credentials.iter().find(|c| c.kind.as_deref() == Some("password"))
}

/// The first portable TOTP credential.
pub fn otp(credentials: &[KcCredential]) -> Otp {
    let mut found: Option<String> = None;
    let mut more = false;
    let mut refused: Option<String> = None;
    for c in credentials {
        if !matches!(c.kind.as_deref(), Some("otp" | "totp" | "hotp")) {
            continue;
        }
        match c.otp() {
            Ok(code) if found.is_none() => found = Some(code),
            Ok(_) => more = true,
            Err(why) => {
                refused.get_or_insert(why);
            }
        }
    }
    match (found, refused) {
        (Some(code), refused) => Otp::Code { code, more: more || refused.is_some() },
        (None, Some(why)) => Otp::NotPortable(why),
        (None, None) => Otp::None,
    }
}

impl KcCredential {
    pub fn temporary(&self) -> bool {
        self.temporary == Some(true)
    }

    pub fn is_webauthn(&self) -> bool {
        self.kind.as_deref().is_some_and(|k| k.starts_with("webauthn"))
    }

    /// The password hash in latch's form (or the plain-text password).
    pub fn hash(&self) -> Result<Password, HashError> {
        if let Some(secret) = &self.secret_data {
            let s: SecretData = parse("secretData", secret)?;
            let c: CredentialData = match &self.credential_data {
                Some(d) => parse("credentialData", d)?,
                None => CredentialData::default(),
            };
            let algorithm =
                c.algorithm.ok_or_else(|| HashError::Malformed("credentialData names no algorithm".into()))?;
            let params = c.additional_parameters.unwrap_or_default();
            return hash::keycloak(
                &algorithm,
                c.hash_iterations.unwrap_or(0),
                s.salt.as_deref().unwrap_or_default(),
                s.value.as_deref().unwrap_or_default(),
                &params,
            )
            .map(Password::Hash);
        }
        if let Some(value) = &self.hashed_salted_value {
            let algorithm = self
                .algorithm
                .as_deref()
                .ok_or_else(|| HashError::Malformed("the credential names no algorithm".into()))?;
            return hash::keycloak(
                algorithm,
                self.hash_iterations.unwrap_or(0),
                self.salt.as_deref().unwrap_or_default(),
                value,
                &BTreeMap::new(),
            )
            .map(Password::Hash);
        }
        match self.value.as_deref() {
            Some(p) if !p.is_empty() => Ok(Password::Plain(p.to_string())),
            _ => Err(HashError::Malformed("it has neither secretData, hashedSaltedValue nor a value".into())),
        }
    }

    /// The base32 TOTP secret, or why the credential cannot be imported.
    fn otp(&self) -> Result<String, String> {
        let (sub_type, digits, period, algorithm, secret, encoding) = match &self.secret_data {
            Some(secret) => {
                let s: SecretData = parse("secretData", secret).map_err(|e| e.to_string())?;
                let c: CredentialData = match &self.credential_data {
                    Some(d) => parse("credentialData", d).map_err(|e| e.to_string())?,
                    None => CredentialData::default(),
                };
                (
                    c.sub_type.unwrap_or_else(|| "totp".into()),
                    c.digits,
                    c.period,
                    c.algorithm,
                    s.value.unwrap_or_default(),
                    c.secret_encoding,
                )
            }
            None => (
                match self.kind.as_deref() {
                    Some("hotp") => "hotp".to_string(),
                    _ => "totp".to_string(),
                },
                self.digits,
                self.period,
                self.algorithm.clone(),
                self.value.clone().unwrap_or_default(),
                None,
            ),
        };
        // The flat layout writes 0 for "the realm's default"; Keycloak's defaults are the
        // import's only supported values.
        let digits = digits.filter(|d| *d != 0).unwrap_or(6);
        let period = period.filter(|p| *p != 0).unwrap_or(30);
        let algorithm = algorithm.unwrap_or_else(|| "HmacSHA1".into());
        if sub_type != "totp" {
            return Err(format!("{sub_type} (counter-based) codes"));
        }
        if digits != 6 {
            return Err(format!("{digits}-digit codes"));
        }
        if period != 30 {
            return Err(format!("a {period} s period"));
        }
        if algorithm != "HmacSHA1" {
            return Err(format!("algorithm {algorithm}"));
        }
        hash::keycloak_otp(&secret, encoding.as_deref()).map_err(|e| e.to_string())
    }
}

fn parse<T: serde::de::DeserializeOwned>(what: &str, json: &str) -> Result<T, HashError> {
    serde_json::from_str(json).map_err(|e| HashError::Malformed(format!("{what} is not the JSON Keycloak writes: {e}")))
}
