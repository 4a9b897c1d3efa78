//! TOTP (RFC 6238) second factors, imported from another system or enrolled here: HMAC-SHA1,
//! 30-second steps, 6 digits, the authenticator-app defaults every exported secret uses. A code
//! is accepted for the current step or one either side (clock skew), and never for a step at or
//! before the last one used, so an observed code cannot be replayed. Time is a parameter.
//!
//! Secrets travel as base32 (RFC 4648). A system that stores the raw key instead (Keycloak's
//! `secretEncoding: UTF8`) is migrated by base32-encoding those bytes at import.

use aws_lc_rs::constant_time::verify_slices_are_equal;
use aws_lc_rs::hmac;
use data_encoding::{BASE32_NOPAD, Encoding};

use super::secret::random_bytes;

/// Digits in a code.
pub const DIGITS: u32 = 6;
/// Seconds per time step.
pub const STEP_SECONDS: i64 = 30;
/// Steps accepted either side of the current one.
pub const SKEW_STEPS: i64 = 1;
/// RFC 4226 asks for 128 bits and recommends 160, but 80-bit secrets (16 base32 characters) are
/// common in exports, so 80 bits is the floor.
const MIN_SECRET_BYTES: usize = 10;
const MAX_SECRET_BYTES: usize = 128;
/// Base32 characters for `MAX_SECRET_BYTES`; longer input is refused before it is copied.
const MAX_SECRET_CHARS: usize = (MAX_SECRET_BYTES * 8).div_ceil(5);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TotpError {
    #[error("TOTP secret is not base32")]
    NotBase32,
    #[error("TOTP secret must be {MIN_SECRET_BYTES} to {MAX_SECRET_BYTES} bytes")]
    SecretLength,
    #[error("TOTP time step is negative")]
    NegativeStep,
}

/// A new secret for enrolment: 160 random bits, base32 without padding (32 characters).
pub fn generate_secret() -> String {
    BASE32_NOPAD.encode(&random_bytes::<20>())
}

/// The code for time step `step` (Unix time / 30).
pub fn code_at(secret: &str, step: i64) -> Result<String, TotpError> {
    let key = decode_secret(secret)?;
    let counter = u64::try_from(step).map_err(|_| TotpError::NegativeStep)?;
    Ok(hotp(&key, counter, DIGITS))
}

/// Checks `code` at `now_unix` and returns the step it matched, which the caller stores as the
/// next call's `last_used_step`. `None` for a wrong, reused or malformed code or secret. All
/// candidate steps are computed and compared in constant time, whichever matches.
pub fn verify(secret: &str, code: &str, now_unix: i64, last_used_step: Option<i64>) -> Option<i64> {
    if code.len() != DIGITS as usize || !code.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let key = decode_secret(secret).ok()?;
    let current = now_unix.div_euclid(STEP_SECONDS);
    let mut matched = None;
    for step in current.saturating_sub(SKEW_STEPS)..=current.saturating_add(SKEW_STEPS) {
        let Ok(counter) = u64::try_from(step) else {
            continue;
        };
        let candidate = hotp(&key, counter, DIGITS);
        let equal = verify_slices_are_equal(candidate.as_bytes(), code.as_bytes()).is_ok();
        let fresh = last_used_step.is_none_or(|last| step > last);
        if equal && fresh && matched.is_none() {
            matched = Some(step);
        }
    }
    matched
}

/// The `otpauth://` URI authenticator apps read from an enrolment QR code or link.
pub fn otpauth_uri(issuer: &str, account: &str, secret: &str) -> String {
    let issuer = percent_encode(issuer);
    format!(
        "otpauth://totp/{issuer}:{}?secret={}&issuer={issuer}&algorithm=SHA1&digits={DIGITS}&period={STEP_SECONDS}",
        percent_encode(account),
        percent_encode(secret),
    )
}

/// Everything but RFC 3986's unreserved characters as `%XX`, spaces included (some apps show a
/// `+` literally).
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Whether `secret` is one the import and the login read: base32 as [`decode_secret`] takes
/// it, 10 to 128 bytes. The migration tool checks its output with it.
pub fn check_secret(secret: &str) -> Result<(), TotpError> {
    decode_secret(secret).map(|_| ())
}

/// Base32 as apps and exports write it: either case, padding optional, trailing bits ignored
/// (some systems generate secrets as random base32 characters). Anything else is refused.
fn decode_secret(secret: &str) -> Result<Vec<u8>, TotpError> {
    let secret = secret.trim_end_matches('=');
    if secret.len() > MAX_SECRET_CHARS {
        return Err(TotpError::SecretLength);
    }
    let key = lenient_base32()?.decode(secret.to_ascii_uppercase().as_bytes()).map_err(|_| TotpError::NotBase32)?;
    if !(MIN_SECRET_BYTES..=MAX_SECRET_BYTES).contains(&key.len()) {
        return Err(TotpError::SecretLength);
    }
    Ok(key)
}

fn lenient_base32() -> Result<Encoding, TotpError> {
    let mut spec = BASE32_NOPAD.specification();
    spec.check_trailing_bits = false;
    spec.encoding().map_err(|_| TotpError::NotBase32)
}

/// RFC 4226 HOTP: HMAC-SHA1 over the big-endian counter, dynamic truncation, `digits` decimal
/// digits (at most 9), zero-padded.
fn hotp(key: &[u8], counter: u64, digits: u32) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, key);
    let tag = hmac::sign(&key, &counter.to_be_bytes());
    let mac = tag.as_ref();
    let offset = usize::from(mac.last().copied().unwrap_or_default() & 0x0f);
    let word = mac.get(offset..offset + 4).and_then(|bytes| <[u8; 4]>::try_from(bytes).ok()).unwrap_or_default();
    let value = (u32::from_be_bytes(word) & 0x7fff_ffff) % 10u32.pow(digits);
    format!("{value:0width$}", width = digits as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 6238's SHA-1 key, "12345678901234567890", in base32.
    const RFC_SECRET: &str = "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ";

    #[test]
    fn rfc6238_appendix_b_sha1_vectors() {
        let key = b"12345678901234567890";
        assert_eq!(decode_secret(RFC_SECRET).unwrap(), key);
        for (time, code) in [
            (59, "94287082"),
            (1_111_111_109, "07081804"),
            (1_111_111_111, "14050471"),
            (1_234_567_890, "89005924"),
            (2_000_000_000, "69279037"),
            (20_000_000_000, "65353130"),
        ] {
            assert_eq!(hotp(key, time / 30, 8), code, "T = {time}");
            let six = &code[2..];
            assert_eq!(code_at(RFC_SECRET, time as i64 / STEP_SECONDS).unwrap(), six);
            assert_eq!(verify(RFC_SECRET, six, time as i64, None), Some(time as i64 / 30));
        }
    }

    #[test]
    fn rfc4226_appendix_d_hotp_vectors() {
        let codes =
            ["755224", "287082", "359152", "969429", "338314", "254676", "287922", "162583", "399871", "520489"];
        for (counter, code) in codes.iter().enumerate() {
            assert_eq!(code_at(RFC_SECRET, counter as i64).unwrap(), *code);
        }
    }

    #[test]
    fn one_step_of_skew_either_way() {
        // Step 1's code is "287082" (RFC 4226 counter 1).
        assert_eq!(verify(RFC_SECRET, "287082", 30, None), Some(1));
        assert_eq!(verify(RFC_SECRET, "287082", 0, None), Some(1));
        assert_eq!(verify(RFC_SECRET, "287082", 89, None), Some(1));
        assert_eq!(verify(RFC_SECRET, "287082", 90, None), None);
        assert_eq!(verify(RFC_SECRET, "287082", -1, None), None);
        assert_eq!(verify(RFC_SECRET, "755224", 29, None), Some(0));
        assert_eq!(verify(RFC_SECRET, "000000", 59, None), None);
    }

    #[test]
    fn a_used_step_is_never_accepted_again() {
        let used = verify(RFC_SECRET, "287082", 45, None);
        assert_eq!(used, Some(1));
        assert_eq!(verify(RFC_SECRET, "287082", 45, used), None);
        assert_eq!(verify(RFC_SECRET, "755224", 45, used), None);
        assert_eq!(verify(RFC_SECRET, "359152", 45, used), Some(2));
        assert_eq!(verify(RFC_SECRET, "359152", 45, Some(2)), None);
    }

    #[test]
    fn secrets_accept_lower_case_and_padding() {
        let padded = data_encoding::BASE32.encode(b"12345678901");
        assert!(padded.ends_with("======"));
        let expected = hotp(b"12345678901", 7, DIGITS);
        for secret in [padded.clone(), padded.to_lowercase(), padded.replace('=', "")] {
            assert_eq!(code_at(&secret, 7).unwrap(), expected, "{secret}");
        }
        assert_eq!(code_at(&RFC_SECRET.to_lowercase(), 1).unwrap(), "287082");
        // The OTP secret in the Keycloak 26 export fixture: 80 bits, the floor.
        assert!(code_at("JBSWY3DPEHPK3PXP", 1).is_ok());
    }

    #[test]
    fn garbage_is_refused_without_panicking() {
        let huge = "A".repeat(1 << 20);
        for secret in [
            "",
            "=",
            "A",
            "JBSWY3DPEHPK3PX",
            "JBSWY3DPEHPK3PX1",
            "JBSW Y3DP EHPK 3PXP",
            "JBSWY3DPEHPK3PXP\n",
            "ЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖ",
            "JBSW=Y3DPEHPK3PXP",
            "JBSWY3DP",
            huge.as_str(),
        ] {
            assert!(code_at(secret, 1).is_err(), "{secret:.40}");
            assert_eq!(verify(secret, "287082", 30, None), None);
        }
        assert_eq!(code_at(RFC_SECRET, -1), Err(TotpError::NegativeStep));
        for code in ["", "28708", "2870822", "28708a", "２８７０８２", " 287082", "+28708"] {
            assert_eq!(verify(RFC_SECRET, code, 30, None), None, "{code}");
        }
        for now in [i64::MIN, i64::MAX, -30] {
            assert_eq!(verify(RFC_SECRET, "287082", now, None), None);
        }
        assert_eq!(verify(RFC_SECRET, "287082", 30, Some(i64::MAX)), None);
    }

    #[test]
    fn generated_secrets_are_160_random_bits() {
        let (a, b) = (generate_secret(), generate_secret());
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        assert_eq!(decode_secret(&a).unwrap().len(), 20);
        let step = 1_700_000_000 / STEP_SECONDS;
        let code = code_at(&a, step).unwrap();
        assert_eq!(verify(&a, &code, 1_700_000_000, None), Some(step));
    }

    #[test]
    fn otpauth_uri_encodes_label_and_issuer() {
        assert_eq!(
            otpauth_uri("ACME Co", "jane@example.com", "JBSWY3DPEHPK3PXP"),
            "otpauth://totp/ACME%20Co:jane%40example.com?secret=JBSWY3DPEHPK3PXP&issuer=ACME%20Co&algorithm=SHA1&digits=6&period=30"
        );
        assert_eq!(
            otpauth_uri("a:b&c", "ü", "X"),
            "otpauth://totp/a%3Ab%26c:%C3%BC?secret=X&issuer=a%3Ab%26c&algorithm=SHA1&digits=6&period=30"
        );
    }
}
