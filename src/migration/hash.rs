//! Password hashes and OTP secrets of other providers, as strings latch's login verifies.
//!
//! - Keycloak PBKDF2 (`pbkdf2` = HMAC-SHA1, `pbkdf2-sha256`, `pbkdf2-sha512`): the
//!   `$<id>$<iterations>$<salt>$<hash>` form, with Keycloak's standard base64 copied verbatim
//!   (latch, like passlib and passwap, reads padded, unpadded and "ab64" base64; the key length
//!   is the decoded hash length, 64 bytes for Keycloak).
//! - Keycloak Argon2: a PHC string `$argon2id$v=19$m=..,t=..,p=..$salt$hash` in unpadded
//!   standard base64, the parameters taken from `additionalParameters`.
//! - Auth0 bcrypt, and Keycloak bcrypt (the keycloak-bcrypt extension's `bcrypt` credentials,
//!   the whole `$2a$<cost>$...` string in `value`): copied as it is.
//! - Keycloak TOTP secrets: base32, the form of an `otpauth://` secret.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD_NO_PAD;
use data_encoding::BASE32_NOPAD;
use serde_json::Value;

use crate::crypto::totp;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HashError {
    /// An algorithm latch cannot verify; the payload names it.
    #[error("unsupported password algorithm '{0}'")]
    Unsupported(String),
    #[error("{0}")]
    Malformed(String),
}

/// Keycloak's Argon2 defaults (`Argon2PasswordHashProviderFactory`), used for parameters a
/// credential leaves out.
const ARGON2_DEFAULT_MEMORY_KIB: u32 = 7168;
const ARGON2_DEFAULT_PARALLELISM: u32 = 1;
const ARGON2_DEFAULT_HASH_LENGTH: usize = 32;

/// A Keycloak password credential: `algorithm` and `hashIterations` from `credentialData`
/// (or the flat pre-10 credential), `salt` and `value` (standard base64) from `secretData`,
/// `params` from `credentialData.additionalParameters` (values are arrays of strings).
pub fn keycloak(
    algorithm: &str,
    iterations: i64,
    salt: &str,
    value: &str,
    params: &BTreeMap<String, Value>,
) -> Result<String, HashError> {
    let id = match algorithm {
        "pbkdf2" | "pbkdf2-sha256" | "pbkdf2-sha512" => algorithm,
        "argon2" => return argon2(iterations, salt, value, params),
        "bcrypt" => return bcrypt(value),
        other => return Err(HashError::Unsupported(other.to_string())),
    };
    let iterations = positive(iterations)?;
    decode_b64("salt", salt)?;
    decode_b64("hash", value)?;
    Ok(format!("${id}${iterations}${salt}${value}"))
}

/// A bcrypt string of the keycloak-bcrypt extension (salt and cost inside it); the import
/// checks its cost like any other.
fn bcrypt(value: &str) -> Result<String, HashError> {
    let v = value.trim();
    match v.strip_prefix('$').and_then(|r| r.split('$').next()) {
        Some("2a" | "2b" | "2y") if v.split('$').count() == 4 => Ok(v.to_string()),
        _ => Err(HashError::Malformed("a bcrypt credential holds no $2a$, $2b$ or $2y$ string".into())),
    }
}

fn argon2(iterations: i64, salt: &str, value: &str, params: &BTreeMap<String, Value>) -> Result<String, HashError> {
    let variant = match param(params, "type").as_deref() {
        None | Some("id") => "argon2id",
        Some("i") => "argon2i",
        Some(other) => return Err(HashError::Unsupported(format!("argon2 (type {other})"))),
    };
    let version = match param(params, "version").as_deref() {
        None | Some("1.3") => 19,
        Some("1.0") => 16,
        Some(other) => {
            return Err(HashError::Unsupported(format!("argon2 (version {other})")));
        }
    };
    let memory = number(params, "memory")?.unwrap_or(ARGON2_DEFAULT_MEMORY_KIB);
    let parallelism = number(params, "parallelism")?.unwrap_or(ARGON2_DEFAULT_PARALLELISM);
    let hash_length = match number(params, "hashLength")? {
        Some(n) => n as usize,
        None => ARGON2_DEFAULT_HASH_LENGTH,
    };
    let t = positive(iterations)?;
    let salt = decode_b64("salt", salt)?;
    let hash = decode_b64("hash", value)?;
    if hash.len() != hash_length {
        return Err(HashError::Malformed(format!(
            "the argon2 hash is {} bytes long, not the {hash_length} of its hashLength",
            hash.len()
        )));
    }
    if memory == 0 || parallelism == 0 || salt.len() < 8 {
        return Err(HashError::Malformed(
            "the argon2 parameters are out of range (memory, parallelism or salt length)".into(),
        ));
    }
    Ok(format!(
        "${variant}$v={version}$m={memory},t={t},p={parallelism}${}${}",
        STANDARD_NO_PAD.encode(&salt),
        STANDARD_NO_PAD.encode(&hash)
    ))
}

/// An Auth0 `passwordHash`: bcrypt (`$2a$`, `$2b$`, `$2y$`), copied as it is.
pub fn auth0(hash: &str) -> Result<String, HashError> {
    let mut parts = hash.split('$');
    let (empty, variant, cost, rest) = (parts.next(), parts.next(), parts.next(), parts.next());
    if empty != Some("") {
        return Err(HashError::Unsupported("unknown (not a $-prefixed hash)".into()));
    }
    match variant {
        Some("2a" | "2b" | "2y") => {}
        Some(other) => return Err(HashError::Unsupported(format!("${other}$"))),
        None => return Err(HashError::Unsupported("unknown".into())),
    }
    let cost_ok = cost.is_some_and(|c| c.len() == 2 && c.parse::<u32>().is_ok_and(|c| c >= 4));
    if !cost_ok || rest.is_none_or(|r| r.len() != 53) || parts.next().is_some() {
        return Err(HashError::Malformed("the bcrypt hash is malformed".into()));
    }
    Ok(hash.to_string())
}

/// The `otpCode` for a Keycloak TOTP credential.
///
/// Keycloak keeps the OTP secret as the string in `secretData.value` and, when checking a code,
/// uses it as the HMAC key in one of two ways: if `credentialData.secretEncoding` is `BASE32`
/// (secrets imported from elsewhere) the key is the base32-decoded string; otherwise (secrets
/// Keycloak generated: 20 random letters and digits) the key is the string's UTF-8 bytes, and
/// what Keycloak showed the user in the QR code was the base32 encoding of those bytes.
/// The import's `otpCode` is that base32 form (the `secret` of an `otpauth://` URI), so: a
/// BASE32 secret is kept (normalised: upper case, no spaces or padding), any other is the
/// base32 of its bytes. Both give the authenticator app the same key it already has. Either
/// must then pass the import's own check of a secret (its lenient base32, 10 to 128 bytes).
pub fn keycloak_otp(secret: &str, encoding: Option<&str>) -> Result<String, HashError> {
    if secret.is_empty() {
        return Err(HashError::Malformed("the OTP secret is empty".into()));
    }
    let code = if encoding.is_some_and(|e| e.eq_ignore_ascii_case("BASE32")) {
        secret.chars().filter(|c| !c.is_whitespace() && *c != '=').map(|c| c.to_ascii_uppercase()).collect()
    } else {
        BASE32_NOPAD.encode(secret.as_bytes())
    };
    totp::check_secret(&code).map_err(|e| {
        HashError::Malformed(match e {
            totp::TotpError::NotBase32 => "the BASE32 OTP secret is not base32".to_string(),
            other => other.to_string(),
        })
    })?;
    Ok(code)
}

fn positive(iterations: i64) -> Result<u32, HashError> {
    u32::try_from(iterations)
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| HashError::Malformed(format!("hashIterations {iterations} is not positive")))
}

/// Standard base64, padded or not, with trailing bits as Java's decoder (which wrote it) and
/// the import's take them; URL-safe and other alphabets are refused.
fn decode_b64(what: &str, s: &str) -> Result<Vec<u8>, HashError> {
    let bytes =
        crate::crypto::hashes::LENIENT_STANDARD.decode(s.strip_suffix("==").or(s.strip_suffix('=')).unwrap_or(s));
    match bytes {
        Ok(b) if !b.is_empty() => Ok(b),
        _ => Err(HashError::Malformed(format!("the {what} is not standard base64"))),
    }
}

/// A parameter of `additionalParameters`: Keycloak writes `["32"]`; a bare string or number is
/// accepted too.
fn param(params: &BTreeMap<String, Value>, key: &str) -> Option<String> {
    let v = match params.get(key)? {
        Value::Array(items) => items.first()?,
        other => other,
    };
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn number(params: &BTreeMap<String, Value>, key: &str) -> Result<Option<u32>, HashError> {
    param(params, key)
        .map(|s| {
            s.trim()
                .parse::<u32>()
                .map_err(|_| HashError::Malformed(format!("the argon2 parameter {key} '{s}' is not a number")))
        })
        .transpose()
}

#[cfg(test)]
#[path = "hash_tests.rs"]
pub(crate) mod tests;
