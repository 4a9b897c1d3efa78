//! The PHC-string formats: argon2 (`$argon2id$v=19$m=..,t=..,p=..$salt$hash`, `$argon2i$...`)
//! and scrypt (`$scrypt$ln=..,r=..,p=..$salt$hash`), salt and hash in standard base64 without
//! padding. The `password-hash` crate parses them; this module adds the bounds and insists on
//! every parameter being written out, since the crates' defaults for a missing one (argon2's
//! version 0x13 where the reference implementation assumes 0x10, for one) may not be what the
//! writer meant.

use std::ops::RangeInclusive;

use argon2::password_hash::{PasswordHash, PasswordVerifier as _};
use argon2::{Argon2, Version};

use super::{Algorithm, HashError, bounded, malformed, out_of_bounds};
use crate::crypto::password::Argon2Params;

/// Keycloak's default is 7168 KiB, OWASP's 19 MiB, the RFC 9106 second choice 64 MiB. The
/// configuration of latch's own hashes keeps within the same bounds, so what one instance
/// exports another imports.
pub const ARGON2_MEMORY_KIB: RangeInclusive<u64> = 8..=524_288;
pub const ARGON2_TIME: RangeInclusive<u64> = 1..=10;
pub const ARGON2_LANES: RangeInclusive<u64> = 1..=16;
/// argon2 itself requires 8 bytes of salt.
const ARGON2_MIN_SALT: usize = 8;
/// passlib's default is ln=16 (N = 65536) with r=8; 2^20 is the historical "sensitive" setting.
const SCRYPT_LOG_N: RangeInclusive<u64> = 10..=20;
const SCRYPT_R: RangeInclusive<u64> = 1..=32;
const SCRYPT_P: RangeInclusive<u64> = 1..=16;
/// scrypt fills 128·r·N bytes once per unit of p, one after the other: memory times p is its
/// cost, capped at 512 MiB like argon2's memory (so ln=20 needs r ≤ 4 and p = 1; the floor is
/// ln=10, r=1, p=1). That is about 2.5 seconds of CPU.
const SCRYPT_COST_BYTES: RangeInclusive<u64> = 131_072..=536_870_912;

/// A parsed argon2 or scrypt hash within bounds.
pub(super) struct Phc<'a> {
    algorithm: Algorithm,
    hash: PasswordHash<'a>,
}

impl Phc<'_> {
    pub(super) fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The crates take every parameter from the hash and compare outputs in constant time.
    pub(super) fn matches(&self, password: &[u8]) -> bool {
        match self.algorithm {
            Algorithm::Scrypt => scrypt::Scrypt.verify_password(password, &self.hash),
            _ => Argon2::default().verify_password(password, &self.hash),
        }
        .is_ok()
    }
}

/// A PHC parameter: [`bounded`], and written without leading zeros, as the PHC string format
/// requires and as the verifier reads it (`m=019456` would be stored and then never match).
fn decimal<T: TryFrom<u64>>(
    format: &'static str,
    param: &'static str,
    text: &str,
    range: RangeInclusive<u64>,
) -> Result<T, HashError> {
    if text.len() > 1 && text.starts_with('0') {
        return Err(malformed(format, format!("{param} has a leading zero")));
    }
    bounded(format, param, text, range)
}

pub(super) fn argon2(hash: &str, algorithm: Algorithm) -> Result<Phc<'_>, HashError> {
    let name = algorithm.name();
    let parsed = PasswordHash::new(hash).map_err(|e| malformed(name, e.to_string()))?;
    let version = parsed.version.ok_or_else(|| malformed(name, "missing version (v=19 or v=16)"))?;
    Version::try_from(version).map_err(|_| malformed(name, format!("unknown version {version}")))?;
    let [m, t, p] = required_params(&parsed, name, ["m", "t", "p"])?;
    let m = decimal(name, "memory (KiB)", m, ARGON2_MEMORY_KIB)?;
    let t = decimal(name, "time (passes)", t, ARGON2_TIME)?;
    let p = decimal(name, "parallelism", p, ARGON2_LANES)?;
    if salt_len(&parsed, name)? < ARGON2_MIN_SALT {
        return Err(malformed(name, "salt shorter than 8 bytes"));
    }
    let output = output_len(&parsed, name)?;
    argon2::Params::new(m, t, p, Some(output)).map_err(|e| malformed(name, e.to_string()))?;
    Ok(Phc { algorithm, hash: parsed })
}

pub(super) fn scrypt(hash: &str) -> Result<Phc<'_>, HashError> {
    let name = Algorithm::Scrypt.name();
    let parsed = PasswordHash::new(hash).map_err(|e| malformed(name, e.to_string()))?;
    if parsed.version.is_some() {
        return Err(malformed(name, "scrypt hashes carry no version"));
    }
    let [ln, r, p] = required_params(&parsed, name, ["ln", "r", "p"])?;
    let ln: u8 = decimal(name, "ln", ln, SCRYPT_LOG_N)?;
    let r: u32 = decimal(name, "r", r, SCRYPT_R)?;
    let p: u32 = decimal(name, "p", p, SCRYPT_P)?;
    let cost = (128 * u64::from(r) * u64::from(p)) << ln;
    if !SCRYPT_COST_BYTES.contains(&cost) {
        let (param, value) = ("cost 128·r·p·2^ln (bytes)", cost.to_string());
        return Err(out_of_bounds(name, param, value, SCRYPT_COST_BYTES));
    }
    salt_len(&parsed, name)?;
    let output = output_len(&parsed, name)?;
    scrypt::Params::new(ln, r, p, output)
        .map_err(|_| malformed(name, "parameters rejected by scrypt (2^ln must be below 2^(16·r))"))?;
    Ok(Phc { algorithm: Algorithm::Scrypt, hash: parsed })
}

/// The values of exactly the parameters `names`, in that order: none missing, none repeated,
/// none other.
fn required_params<'h, const N: usize>(
    hash: &'h PasswordHash<'_>,
    format: &'static str,
    names: [&'static str; N],
) -> Result<[&'h str; N], HashError> {
    let mut values: [Option<&'h str>; N] = [None; N];
    for (ident, value) in hash.params.iter() {
        let slot = names
            .iter()
            .zip(values.iter_mut())
            .find_map(|(name, slot)| (*name == ident.as_str()).then_some(slot))
            .ok_or_else(|| malformed(format, format!("unexpected parameter '{ident}'")))?;
        if slot.replace(value.as_str()).is_some() {
            return Err(malformed(format, format!("parameter '{ident}' repeated")));
        }
    }
    let mut found = [""; N];
    for ((name, value), out) in names.iter().zip(values).zip(found.iter_mut()) {
        *out = value.ok_or_else(|| malformed(format, format!("missing parameter '{name}'")))?;
    }
    Ok(found)
}

/// The decoded length of the salt, which must be present and valid base64.
fn salt_len(hash: &PasswordHash<'_>, format: &'static str) -> Result<usize, HashError> {
    let salt = hash.salt.ok_or_else(|| malformed(format, "missing salt"))?;
    let mut buf = [0u8; 64];
    salt.decode_b64(&mut buf).map(<[u8]>::len).map_err(|e| malformed(format, format!("salt: {e}")))
}

fn output_len(hash: &PasswordHash<'_>, format: &'static str) -> Result<usize, HashError> {
    hash.hash.as_ref().map(|output| output.len()).ok_or_else(|| malformed(format, "missing hash"))
}

/// Whether a stored hash should be replaced by a fresh argon2id one after a successful login:
/// true unless it is already argon2id, version 0x13, with exactly the `current` parameters.
/// Deliberately independent of the import bounds, which latch's own configuration may exceed.
pub fn needs_rehash(hash: &str, current: &Argon2Params) -> bool {
    let Ok(parsed) = PasswordHash::new(hash) else {
        return true;
    };
    let Ok(params) = argon2::Params::try_from(&parsed) else {
        return true;
    };
    !(parsed.algorithm.as_str() == "argon2id"
        && parsed.version == Some(0x13)
        && params.m_cost() == current.memory_kib
        && params.t_cost() == current.iterations
        && params.p_cost() == current.parallelism)
}
