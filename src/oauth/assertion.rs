//! Signed JWT assertions (RFC 7523): client assertions for `private_key_jwt` and the
//! `jwt-bearer` grant. Signature by a registered public key (RS256, ES256 or EdDSA; never
//! `none` or HMAC), `iss` = `sub` = the expected party, `aud` naming latch, `exp` in the future,
//! `iat` not in the future and not older than an hour, `jti` used once (a client assertion must
//! carry one; a jwt-bearer assertion may leave it out, as RFC 7523 allows).

use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;

use crate::crypto::keys::{PublicKeyFamily, classify_public_pem};
use crate::store::key::PublicKey;

/// Seconds of clock difference tolerated between latch and the signer.
pub const SKEW: i64 = 60;
/// How old an assertion may be (by `iat`).
pub const MAX_AGE: i64 = 3600;
/// The longest `jti` accepted.
pub const MAX_JTI: usize = 256;

#[derive(Debug, Clone, Deserialize)]
pub struct AssertionClaims {
    pub iss: String,
    pub sub: String,
    pub exp: i64,
    #[serde(default)]
    pub iat: Option<i64>,
    #[serde(default)]
    pub jti: Option<String>,
    #[serde(default)]
    pub scope: Option<String>,
    /// Not before (optional; checked against latch's clock with [`SKEW`]).
    #[serde(default)]
    pub nbf: Option<i64>,
}

impl AssertionClaims {
    /// Until when its `jti` must be remembered: while it could still pass [`verify`] (until
    /// `exp` plus the skew it allows, and no longer than an hour after its `iat`), and a skew
    /// more, so that a replica whose clock is ahead does not sweep it while one whose clock is
    /// behind would still take the assertion again.
    pub fn replay_window_end(&self) -> i64 {
        let by_iat = self.iat.map_or(i64::MAX, |iat| iat.saturating_add(MAX_AGE));
        self.exp.saturating_add(SKEW).min(by_iat).saturating_add(SKEW)
    }
}

#[derive(Debug, Deserialize)]
struct Peek {
    iss: Option<String>,
}

/// The unverified `iss` of an assertion (to find whose keys verify it).
pub fn peek_issuer(token: &str) -> Option<String> {
    let data = jsonwebtoken::dangerous::insecure_decode::<Peek>(token).ok()?;
    data.claims.iss
}

/// The `kid` of an assertion's header, unverified (it selects the key to verify with).
pub fn peek_key_id(token: &str) -> Option<String> {
    jsonwebtoken::decode_header(token).ok()?.kid
}

/// Checks an assertion against `keys` (the keys of the party it claims to come from).
pub fn verify(token: &str, keys: &[PublicKey], audiences: &[&str], now: i64) -> Result<AssertionClaims, String> {
    if token.len() > 16 * 1024 {
        return Err("the assertion is too large".into());
    }
    let header = jsonwebtoken::decode_header(token).map_err(|_| "the assertion is not a JWT".to_string())?;
    let kid = header.kid.as_deref().ok_or("the assertion has no kid")?;
    let key = keys.iter().find(|k| k.key_id == kid).ok_or("the assertion's kid is unknown")?;
    if key.expires_at.is_some_and(|t| t <= now) {
        return Err("the key has expired".into());
    }
    let family = classify_public_pem(&key.public_key).ok_or("the registered key is unusable")?;
    let (alg, dk) = match (family, header.alg) {
        (PublicKeyFamily::Rsa, Algorithm::RS256) => {
            (Algorithm::RS256, DecodingKey::from_rsa_pem(key.public_key.as_bytes()))
        }
        (PublicKeyFamily::Ec, Algorithm::ES256) => {
            (Algorithm::ES256, DecodingKey::from_ec_pem(key.public_key.as_bytes()))
        }
        (PublicKeyFamily::Ed, Algorithm::EdDSA) => {
            (Algorithm::EdDSA, DecodingKey::from_ed_pem(key.public_key.as_bytes()))
        }
        (_, a) => return Err(format!("the algorithm {a:?} does not fit the registered key")),
    };
    let dk = dk.map_err(|_| "the registered key is unusable".to_string())?;
    let mut v = Validation::new(alg);
    v.leeway = SKEW as u64;
    v.set_audience(audiences);
    v.set_required_spec_claims(&["exp", "aud", "iss", "sub"]);
    // jsonwebtoken compares exp and nbf with the wall clock; latch checks them with its own
    // clock below.
    v.validate_nbf = false;
    v.validate_exp = false;
    let data = jsonwebtoken::decode::<AssertionClaims>(token, &dk, &v)
        .map_err(|e| format!("the assertion is invalid: {e}"))?;
    let c = data.claims;
    if c.exp.saturating_add(SKEW) <= now {
        return Err("the assertion has expired".into());
    }
    if c.nbf.is_some_and(|nbf| nbf > now.saturating_add(SKEW)) {
        return Err("the assertion is not valid yet (nbf)".into());
    }
    match c.iat {
        Some(iat) if iat > now.saturating_add(SKEW) => return Err("the assertion was issued in the future".into()),
        Some(iat) if iat < now - MAX_AGE => return Err("the assertion is too old".into()),
        Some(_) => {}
        None => return Err("the assertion has no iat".into()),
    }
    if c.iss != c.sub {
        return Err("iss and sub of the assertion differ".into());
    }
    // The jti is remembered in an indexed column: a bounded one (PostgreSQL refuses index
    // entries over about 2.7 KB).
    if c.jti.as_ref().is_some_and(|j| j.len() > MAX_JTI) {
        return Err(format!("the assertion's jti is longer than {MAX_JTI} bytes"));
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(exp: i64, iat: Option<i64>) -> AssertionClaims {
        AssertionClaims { iss: "c".into(), sub: "c".into(), exp, iat, jti: Some("j".into()), scope: None, nbf: None }
    }

    /// A `jti` is remembered a skew past the last second its assertion could pass: by `exp`
    /// (accepted while `exp + SKEW > now`) or by `iat` (while `iat + MAX_AGE >= now`).
    #[test]
    fn a_jti_outlives_its_assertion_by_a_skew() {
        let last_by_exp = |c: &AssertionClaims| c.exp + SKEW - 1;
        let c = claims(10_000, Some(9_900));
        assert_eq!(c.replay_window_end(), 10_000 + 2 * SKEW);
        assert!(c.replay_window_end() - last_by_exp(&c) > SKEW);
        let c = claims(100_000, Some(9_900));
        assert_eq!(c.replay_window_end(), 9_900 + MAX_AGE + SKEW);
        assert_eq!(claims(i64::MAX, None).replay_window_end(), i64::MAX);
    }
}
