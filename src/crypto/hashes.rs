//! Imported password hashes, verified in the format the previous system stored them in.
//!
//! Users migrated from another identity provider arrive with that system's hash. [`check`]
//! validates such a hash at import (format and parameter bounds; no password needed), so a bad one
//! is refused with an error naming the problem and nothing is stored. [`verify`] checks a password
//! against it at login; after the first success the caller re-hashes to argon2id, and
//! [`needs_rehash`] tells it when that is due. Verification is CPU-heavy and synchronous: run it on
//! the blocking pool.
//!
//! | format    | identifiers                                      | bounds                              |
//! |-----------|--------------------------------------------------|-------------------------------------|
//! | PBKDF2    | `$pbkdf2$` (HMAC-SHA1), `$pbkdf2-sha256$`, `$pbkdf2-sha384$`, `$pbkdf2-sha512$` | rounds 1,000..=10,000,000; key 16..=64 bytes; salt not empty |
//! | bcrypt    | `$2a$`, `$2b$`, `$2y$`                           | cost 4..=16                         |
//! | argon2    | `$argon2id$`, `$argon2i$`, version 19 or 16      | m 8 KiB..=512 MiB, t 1..=10, p 1..=16; salt at least 8 bytes |
//! | scrypt    | `$scrypt$`                                       | ln 10..=20, r 1..=32, p 1..=16; 128·r·p·2^ln at most 512 MiB |
//! | SHA-crypt | `$5$`, `$6$`, optional `rounds=N`                | rounds 1,000..=10,000,000 (5,000 when absent); salt 1..=16 characters |
//!
//! The upper bounds keep a single verification to seconds of CPU (about ten at the extreme
//! corners) and at most 512 MiB, whatever an import file contains; the lower bounds refuse values
//! no real system writes (a 500-round PBKDF2 hash is a mistake or an attack, not a migration).
//! Every function here takes untrusted input: a hash longer than [`MAX_HASH_LEN`] is refused
//! before it is parsed, which bounds every allocation, and nothing panics.

use std::num::NonZeroU32;
use std::ops::RangeInclusive;

use aws_lc_rs::constant_time::verify_slices_are_equal;
use aws_lc_rs::pbkdf2;
use base64::Engine as _;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

mod phc;
#[cfg(test)]
mod tests;

pub use phc::{ARGON2_LANES, ARGON2_MEMORY_KIB, ARGON2_TIME, needs_rehash};

/// The longest hash string considered. Real ones stay under 200 characters.
pub const MAX_HASH_LEN: usize = 512;

const PBKDF2_ROUNDS: RangeInclusive<u64> = 1_000..=10_000_000;
/// A key below 16 bytes makes collisions practical. No real format goes past 64 bytes (passlib
/// writes 20, 32 or 64, Keycloak 64 whatever the digest), and each further digest-length block
/// costs another full set of rounds for no added strength.
const PBKDF2_KEY_BYTES: RangeInclusive<u64> = 16..=64;
const BCRYPT_COST: RangeInclusive<u64> = 4..=16;
const SHA_CRYPT_ROUNDS: RangeInclusive<u64> = 1_000..=10_000_000;
/// glibc's default when a SHA-crypt hash has no `rounds=` field.
const SHA_CRYPT_DEFAULT_ROUNDS: u64 = 5_000;
/// glibc truncates longer salts, so a stored hash never carries more.
const SHA_CRYPT_MAX_SALT: usize = 16;
/// SHA-crypt hashes the whole password once per round, so its cost grows with the password's
/// length; longer passwords never match. latch itself accepts no new password longer than this.
const SHA_CRYPT_MAX_PASSWORD: usize = 256;

/// Why a hash was refused. `Display` names the problem, for the import report.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HashError {
    #[error("password hash longer than {MAX_HASH_LEN} characters")]
    TooLong,
    #[error("not a password hash: it must start with '$' and a format identifier")]
    NotAHash,
    #[error("unsupported hash format '${0}$'")]
    Unsupported(String),
    #[error("malformed {format} hash: {reason}")]
    Malformed { format: &'static str, reason: String },
    #[error("{format} {param} {value} outside {min}..={max}")]
    OutOfBounds { format: &'static str, param: &'static str, value: String, min: u64, max: u64 },
}

/// The hash formats latch verifies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    Argon2id,
    Argon2i,
    Bcrypt,
    Pbkdf2Sha1,
    Pbkdf2Sha256,
    Pbkdf2Sha384,
    Pbkdf2Sha512,
    Scrypt,
    Sha256Crypt,
    Sha512Crypt,
}

impl Algorithm {
    /// The name used in error messages and logs.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Argon2id => "argon2id",
            Algorithm::Argon2i => "argon2i",
            Algorithm::Bcrypt => "bcrypt",
            Algorithm::Pbkdf2Sha1 => "PBKDF2-SHA1",
            Algorithm::Pbkdf2Sha256 => "PBKDF2-SHA256",
            Algorithm::Pbkdf2Sha384 => "PBKDF2-SHA384",
            Algorithm::Pbkdf2Sha512 => "PBKDF2-SHA512",
            Algorithm::Scrypt => "scrypt",
            Algorithm::Sha256Crypt => "SHA-256-crypt",
            Algorithm::Sha512Crypt => "SHA-512-crypt",
        }
    }

    /// The format named by the identifier between the first two `$`.
    fn from_id(id: &str) -> Option<Self> {
        Some(match id {
            "argon2id" => Algorithm::Argon2id,
            "argon2i" => Algorithm::Argon2i,
            "2a" | "2b" | "2y" => Algorithm::Bcrypt,
            "pbkdf2" => Algorithm::Pbkdf2Sha1,
            "pbkdf2-sha256" => Algorithm::Pbkdf2Sha256,
            "pbkdf2-sha384" => Algorithm::Pbkdf2Sha384,
            "pbkdf2-sha512" => Algorithm::Pbkdf2Sha512,
            "scrypt" => Algorithm::Scrypt,
            "5" => Algorithm::Sha256Crypt,
            "6" => Algorithm::Sha512Crypt,
            _ => return None,
        })
    }
}

/// Import-time validation: parses `hash` and checks its parameters against the bounds above.
pub fn check(hash: &str) -> Result<Algorithm, HashError> {
    parse(hash).map(|parsed| parsed.algorithm())
}

/// Login-time verification. `Err` only for a hash that [`check`] refuses; otherwise whether
/// `password` matches, compared in constant time.
pub fn verify(hash: &str, password: &str) -> Result<bool, HashError> {
    Ok(parse(hash)?.matches(password.as_bytes()))
}

/// A hash that passed every check, ready to verify.
enum Parsed<'a> {
    Pbkdf2 { algorithm: Algorithm, prf: pbkdf2::Algorithm, rounds: NonZeroU32, salt: Vec<u8>, key: Vec<u8> },
    Bcrypt(&'a str),
    ShaCrypt { algorithm: Algorithm, rounds: usize, salt: &'a str, digest: &'a str },
    Phc(phc::Phc<'a>),
}

impl Parsed<'_> {
    fn algorithm(&self) -> Algorithm {
        match self {
            Parsed::Pbkdf2 { algorithm, .. } | Parsed::ShaCrypt { algorithm, .. } => *algorithm,
            Parsed::Bcrypt(_) => Algorithm::Bcrypt,
            Parsed::Phc(phc) => phc.algorithm(),
        }
    }

    fn matches(&self, password: &[u8]) -> bool {
        match self {
            Parsed::Pbkdf2 { prf, rounds, salt, key, .. } => pbkdf2::verify(*prf, *rounds, salt, password, key).is_ok(),
            // The crate compares in constant time; like every bcrypt it uses the first 72 bytes.
            Parsed::Bcrypt(hash) => bcrypt::verify(password, hash).unwrap_or(false),
            Parsed::ShaCrypt { algorithm, rounds, salt, digest } => {
                sha_crypt_matches(*algorithm, *rounds, salt, digest, password)
            }
            Parsed::Phc(phc) => phc.matches(password),
        }
    }
}

fn parse(hash: &str) -> Result<Parsed<'_>, HashError> {
    if hash.len() > MAX_HASH_LEN {
        return Err(HashError::TooLong);
    }
    let id = hash
        .strip_prefix('$')
        .and_then(|rest| rest.split('$').next())
        .filter(|id| !id.is_empty())
        .ok_or(HashError::NotAHash)?;
    let algorithm = Algorithm::from_id(id)
        .ok_or_else(|| HashError::Unsupported(id.chars().take(16).flat_map(char::escape_debug).collect()))?;
    match algorithm {
        Algorithm::Pbkdf2Sha1 => parse_pbkdf2(hash, algorithm, pbkdf2::PBKDF2_HMAC_SHA1),
        Algorithm::Pbkdf2Sha256 => parse_pbkdf2(hash, algorithm, pbkdf2::PBKDF2_HMAC_SHA256),
        Algorithm::Pbkdf2Sha384 => parse_pbkdf2(hash, algorithm, pbkdf2::PBKDF2_HMAC_SHA384),
        Algorithm::Pbkdf2Sha512 => parse_pbkdf2(hash, algorithm, pbkdf2::PBKDF2_HMAC_SHA512),
        Algorithm::Bcrypt => parse_bcrypt(hash),
        Algorithm::Sha256Crypt | Algorithm::Sha512Crypt => parse_sha_crypt(hash, algorithm),
        Algorithm::Argon2id | Algorithm::Argon2i => phc::argon2(hash, algorithm).map(Parsed::Phc),
        Algorithm::Scrypt => phc::scrypt(hash).map(Parsed::Phc),
    }
}

fn malformed(format: &'static str, reason: impl Into<String>) -> HashError {
    HashError::Malformed { format, reason: reason.into() }
}

/// Parses a decimal parameter (ASCII digits only) and checks it against `range`. A number too
/// large for any integer type is out of bounds too, reported with the digits as written.
fn bounded<T: TryFrom<u64>>(
    format: &'static str,
    param: &'static str,
    text: &str,
    range: RangeInclusive<u64>,
) -> Result<T, HashError> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(malformed(format, format!("{param} is not a decimal number")));
    }
    text.parse::<u64>()
        .ok()
        .filter(|value| range.contains(value))
        .and_then(|value| T::try_from(value).ok())
        .ok_or_else(|| out_of_bounds(format, param, text.to_owned(), range))
}

fn out_of_bounds(format: &'static str, param: &'static str, value: String, range: RangeInclusive<u64>) -> HashError {
    HashError::OutOfBounds { format, param, value, min: *range.start(), max: *range.end() }
}

/// Standard base64 without padding, tolerant of non-zero trailing bits as the Python, Java and Go
/// decoders that wrote these hashes are.
pub(crate) const LENIENT_STANDARD: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::RequireNone)
        .with_decode_allow_trailing_bits(true),
);

/// Decodes a PBKDF2 salt or key: trailing `=` stripped; a piece containing `+` is standard
/// base64, any other is passlib's "ab64" (`.` in place of `+`). URL-safe base64 is refused.
fn decode_pbkdf2_b64(piece: &str) -> Option<Vec<u8>> {
    let piece = piece.trim_end_matches('=');
    if piece.contains('+') {
        LENIENT_STANDARD.decode(piece).ok()
    } else {
        LENIENT_STANDARD.decode(piece.replace('.', "+")).ok()
    }
}

/// `$<id>$<rounds>$<salt>$<key>`, the format of passlib and of Keycloak exports.
fn parse_pbkdf2(hash: &str, algorithm: Algorithm, prf: pbkdf2::Algorithm) -> Result<Parsed<'_>, HashError> {
    let name = algorithm.name();
    let mut pieces = hash.split('$').skip(2);
    let (Some(rounds), Some(salt), Some(key), None) = (pieces.next(), pieces.next(), pieces.next(), pieces.next())
    else {
        return Err(malformed(name, "expected $<id>$<rounds>$<salt>$<hash>"));
    };
    let rounds: u32 = bounded(name, "rounds", rounds, PBKDF2_ROUNDS)?;
    let rounds = NonZeroU32::new(rounds).ok_or_else(|| malformed(name, "rounds is zero"))?;
    let salt = decode_pbkdf2_b64(salt).ok_or_else(|| malformed(name, "salt is not standard or ab64 base64"))?;
    if salt.is_empty() {
        return Err(malformed(name, "salt is empty"));
    }
    let key = decode_pbkdf2_b64(key).ok_or_else(|| malformed(name, "hash is not standard or ab64 base64"))?;
    if !PBKDF2_KEY_BYTES.contains(&(key.len() as u64)) {
        let len = key.len().to_string();
        return Err(out_of_bounds(name, "key length", len, PBKDF2_KEY_BYTES));
    }
    Ok(Parsed::Pbkdf2 { algorithm, prf, rounds, salt, key })
}

/// `$2a$`, `$2b$` or `$2y$`, a two-digit cost, then 53 characters of salt and hash. (`$2x$`, the
/// output of a buggy crypt_blowfish, is not accepted.)
fn parse_bcrypt(hash: &str) -> Result<Parsed<'_>, HashError> {
    let name = Algorithm::Bcrypt.name();
    let cost = hash.split('$').nth(2).unwrap_or_default();
    bounded::<u32>(name, "cost", cost, BCRYPT_COST)?;
    hash.parse::<bcrypt::HashParts>().map_err(|e| malformed(name, e.to_string()))?;
    Ok(Parsed::Bcrypt(hash))
}

/// The characters of crypt's base64 (and of its salts, as passlib restricts them).
fn is_hash64(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'.' || b == b'/'
}

/// `$5$[rounds=N$]salt$hash` or `$6$...`, as glibc's crypt writes them.
fn parse_sha_crypt(hash: &str, algorithm: Algorithm) -> Result<Parsed<'_>, HashError> {
    let name = algorithm.name();
    let mut pieces = hash.split('$').skip(2);
    let mut next = pieces.next();
    let mut rounds = SHA_CRYPT_DEFAULT_ROUNDS as usize;
    if let Some(text) = next.and_then(|piece| piece.strip_prefix("rounds=")) {
        rounds = bounded(name, "rounds", text, SHA_CRYPT_ROUNDS)?;
        next = pieces.next();
    }
    let (Some(salt), Some(digest), None) = (next, pieces.next(), pieces.next()) else {
        return Err(malformed(name, "expected $<id>$[rounds=<n>$]<salt>$<hash>"));
    };
    if salt.is_empty() || salt.len() > SHA_CRYPT_MAX_SALT || !salt.bytes().all(is_hash64) {
        return Err(malformed(name, "salt must be 1 to 16 characters of [./0-9A-Za-z]"));
    }
    let digest_len = if algorithm == Algorithm::Sha512Crypt { 86 } else { 43 };
    if digest.len() != digest_len || !digest.bytes().all(is_hash64) {
        let reason = format!("hash must be {digest_len} characters of [./0-9A-Za-z]");
        return Err(malformed(name, reason));
    }
    Ok(Parsed::ShaCrypt { algorithm, rounds, salt, digest })
}

/// Recomputes the crypt string and compares it with the stored one in constant time, which is
/// what crypt(3) callers do (and avoids decoding crypt's permuted base64).
fn sha_crypt_matches(algorithm: Algorithm, rounds: usize, salt: &str, digest: &str, password: &[u8]) -> bool {
    if password.len() > SHA_CRYPT_MAX_PASSWORD {
        return false;
    }
    let computed = if algorithm == Algorithm::Sha512Crypt {
        sha_crypt::Sha512Params::new(rounds)
            .ok()
            .and_then(|p| sha_crypt::sha512_crypt_b64(password, salt.as_bytes(), &p).ok())
    } else {
        sha_crypt::Sha256Params::new(rounds)
            .ok()
            .and_then(|p| sha_crypt::sha256_crypt_b64(password, salt.as_bytes(), &p).ok())
    };
    computed.is_some_and(|c| verify_slices_are_equal(c.as_bytes(), digest.as_bytes()).is_ok())
}
