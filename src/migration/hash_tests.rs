//! Every converted hash is checked by computing it again with a real implementation
//! (aws-lc-rs PBKDF2, the argon2 crate), from the real samples in tests/fixtures/migration.

use std::num::NonZeroU32;

use argon2::password_hash::{PasswordHash, PasswordVerifier as _};
use aws_lc_rs::pbkdf2;
use base64::engine::general_purpose::STANDARD;

use super::*;

/// Verifies a `$pbkdf2[-shaN]$iterations$salt$hash` string the way latch's login does.
pub(crate) fn pbkdf2_verifies(encoded: &str, password: &str) -> bool {
    let parts: Vec<&str> = encoded.split('$').collect();
    assert_eq!(parts.len(), 5, "{encoded}");
    let alg = match parts[1] {
        "pbkdf2" => pbkdf2::PBKDF2_HMAC_SHA1,
        "pbkdf2-sha256" => pbkdf2::PBKDF2_HMAC_SHA256,
        "pbkdf2-sha512" => pbkdf2::PBKDF2_HMAC_SHA512,
        other => panic!("unexpected id {other}"),
    };
    let iterations = NonZeroU32::new(parts[2].parse().unwrap()).unwrap();
    let salt = decode_b64("salt", parts[3]).unwrap();
    let hash = decode_b64("hash", parts[4]).unwrap();
    pbkdf2::verify(alg, iterations, &salt, password.as_bytes(), &hash).is_ok()
}

pub(crate) fn argon2_verifies(encoded: &str, password: &str) -> bool {
    let parsed = PasswordHash::new(encoded).unwrap();
    argon2::Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok()
}

fn none() -> BTreeMap<String, Value> {
    BTreeMap::new()
}

fn params(json: &str) -> BTreeMap<String, Value> {
    serde_json::from_str(json).unwrap()
}

#[test]
fn keycloak_pbkdf2_sha256_is_copied_verbatim_and_verifies() {
    // Keycloak 26.6.0 migration realm, user offline-test-user, password "password2".
    let salt = "rEIJDbs+BQqpx31v8mONWA==";
    let value = "kNwotFPNeuwelpT1HWt+E4ONXFK6wjd+h0zbzNBRGwOqacAjeY7vYN9QZQ46DlEKSdn04cEU/3RvX8WPcRegxg==";
    let h = keycloak("pbkdf2-sha256", 27500, salt, value, &none()).unwrap();
    assert_eq!(h, format!("$pbkdf2-sha256$27500${salt}${value}"));
    assert!(pbkdf2_verifies(&h, "password2"));
    assert!(!pbkdf2_verifies(&h, "password3"));
    // The same salt written with non-zero trailing bits, which Java's decoder (and the import's)
    // reads as the same bytes: taken, not a stop of the whole run.
    let odd = "rEIJDbs+BQqpx31v8mONWB==";
    let h = keycloak("pbkdf2-sha256", 27500, odd, value, &none()).unwrap();
    assert!(pbkdf2_verifies(&h, "password2"));
}

#[test]
fn keycloak_pbkdf2_sha1_verifies() {
    // A Keycloak 3.x realm export (flat credential, algorithm "pbkdf2"), user demo, password "demo".
    let h = keycloak(
        "pbkdf2",
        20000,
        "VsYJarM+eZEMeGPx9L9tXg==",
        "b55DNTA2fTf2o4Vhp+oyTI9EugUpwVqpexCAZ7b6++J40QzVWa1j/6P1iJ2F8y9nBx0eXy53u0VX9pZYhgdaAg==",
        &none(),
    )
    .unwrap();
    assert!(h.starts_with("$pbkdf2$20000$"));
    assert!(pbkdf2_verifies(&h, "demo"));
    assert!(!pbkdf2_verifies(&h, "Demo"));
}

#[test]
fn keycloak_pbkdf2_sha512_verifies() {
    // Computed with Python's hashlib.pbkdf2_hmac("sha512", b"password3", salt, 210000, 64),
    // Keycloak's pbkdf2-sha512 default since 24 (210,000 iterations, 64-byte key).
    let h = keycloak(
        "pbkdf2-sha512",
        210_000,
        "jT8KbBsuT1qcfW5fSjssHQ==",
        "45qucc2vL2ejFmp4Z/CITjjTmHx40mU17VxodFfopwqs9ClTrDN2lAO2/up8zX3SRaQ77bIy6WZHVF+bXrLZNA==",
        &none(),
    )
    .unwrap();
    assert!(h.starts_with("$pbkdf2-sha512$210000$jT8KbBsuT1qcfW5fSjssHQ==$"));
    assert!(pbkdf2_verifies(&h, "password3"));
}

#[test]
fn keycloak_argon2_becomes_a_phc_string_that_verifies() {
    // The Keycloak 26 argon2 credential of the sample user jane.doe, password "secret".
    let p = params(r#"{"hashLength":["32"],"memory":["7168"],"type":["id"],"version":["1.3"],"parallelism":["1"]}"#);
    let h =
        keycloak("argon2", 5, "LRScGShC7shkdoU5B1UgUQ==", "xKjWvB9+0sSP6wTqI1JoEI7w+iA0x9VDhPgmrOHRG80=", &p).unwrap();
    assert_eq!(h, "$argon2id$v=19$m=7168,t=5,p=1$LRScGShC7shkdoU5B1UgUQ$xKjWvB9+0sSP6wTqI1JoEI7w+iA0x9VDhPgmrOHRG80");
    assert!(argon2_verifies(&h, "secret"));
    assert!(!argon2_verifies(&h, "Secret"));
    // Missing parameters take Keycloak's defaults, which are the sample's.
    assert_eq!(
        keycloak("argon2", 5, "LRScGShC7shkdoU5B1UgUQ==", "xKjWvB9+0sSP6wTqI1JoEI7w+iA0x9VDhPgmrOHRG80=", &none())
            .unwrap(),
        h
    );
}

#[test]
fn keycloak_argon2i_and_version_1_0_verify() {
    use argon2::{Algorithm, Argon2, Params, Version};
    let salt = b"0123456789abcdef";
    for (alg, version, kind, v, v_id) in
        [(Algorithm::Argon2i, Version::V0x13, "i", "1.3", 19), (Algorithm::Argon2id, Version::V0x10, "id", "1.0", 16)]
    {
        let mut out = [0u8; 24];
        Argon2::new(alg, version, Params::new(1024, 2, 2, Some(24)).unwrap())
            .hash_password_into(b"hunter2", salt, &mut out)
            .unwrap();
        let p = params(&format!(
            r#"{{"hashLength":["24"],"memory":["1024"],"type":["{kind}"],"version":["{v}"],"parallelism":["2"]}}"#
        ));
        let h = keycloak("argon2", 2, &STANDARD.encode(salt), &STANDARD.encode(out), &p).unwrap();
        assert!(h.starts_with(&format!("$argon2{kind}$v={v_id}$m=1024,t=2,p=2$")), "{h}");
        assert!(argon2_verifies(&h, "hunter2"), "{h}");
    }
}

#[test]
fn unsupported_and_malformed_credentials_are_refused() {
    let ok_salt = "rEIJDbs+BQqpx31v8mONWA==";
    let ok_hash = "kNwotFPNeuwelpT1HWt+E4ONXFK6wjd+h0zbzNBRGwOqacAjeY7vYN9QZQ46DlEKSdn04cEU/3RvX8WPcRegxg==";
    for alg in ["md5", "pbkdf2-sha384", "PBKDF2-SHA256", ""] {
        assert_eq!(keycloak(alg, 1000, ok_salt, ok_hash, &none()), Err(HashError::Unsupported(alg.into())));
    }
    let d = params(r#"{"type":["d"]}"#);
    assert_eq!(keycloak("argon2", 5, ok_salt, ok_hash, &d), Err(HashError::Unsupported("argon2 (type d)".into())));
    let url_safe = "rEIJDbs-BQqpx31v8mONWA==";
    let cases = [
        ("pbkdf2-sha256", 0, ok_salt, ok_hash),
        ("pbkdf2-sha256", -1, ok_salt, ok_hash),
        ("pbkdf2-sha256", 27500, url_safe, ok_hash),
        ("pbkdf2-sha256", 27500, ok_salt, "not base64!"),
        ("pbkdf2-sha256", 27500, "", ok_hash),
        ("argon2", 5, ok_salt, ok_hash),
    ];
    for (alg, it, salt, hash) in cases {
        let r = keycloak(alg, it, salt, hash, &none());
        assert!(matches!(r, Err(HashError::Malformed(_))), "{alg} {it} {salt}: {r:?}");
    }
    let bad_memory = params(r#"{"memory":["lots"]}"#);
    assert!(matches!(keycloak("argon2", 5, ok_salt, ok_hash, &bad_memory), Err(HashError::Malformed(_))));
}

#[test]
fn auth0_bcrypt_is_copied_and_verifies() {
    // Line 2 of the password export sample: bcrypt of "password2".
    let hash = "$2b$10$JyDM8jzGYVTdDzZaPAQ2Lu2uZ7xFA3dgQNoHGblMmpkkeIfG2GEYa";
    assert_eq!(auth0(hash).unwrap(), hash);
    assert!(bcrypt::verify("password2", hash).unwrap());
    assert!(auth0("$2y$12$.qHPp/srqo1NAAAAAvlkmOdqAbH2Rg0qPv2Txj3ZwXfjJnewSjc4m").is_ok());
    assert_eq!(auth0("$1$abc$def"), Err(HashError::Unsupported("$1$".into())));
    assert!(matches!(auth0("plain"), Err(HashError::Unsupported(_))));
    for bad in ["$2b$10$short", "$2b$xx$JyDM8jzGYVTdDzZaPAQ2Lu2uZ7xFA3dgQNoHGblMmpkkeIfG2GEYa"] {
        assert!(matches!(auth0(bad), Err(HashError::Malformed(_))), "{bad}");
    }
}

/// RFC 6238's SHA-1 test key is the ASCII string "12345678901234567890"; stored by Keycloak as
/// that raw string, it must come out as the base32 every authenticator knows, and produce the
/// RFC's code for T = 59 s.
#[test]
fn keycloak_otp_secret_becomes_base32_with_the_same_key() {
    let code = keycloak_otp("12345678901234567890", None).unwrap();
    assert_eq!(code, "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ");
    let key = BASE32_NOPAD.decode(code.as_bytes()).unwrap();
    assert_eq!(totp_sha1_6(&key, 59), 287082);
    // A secret Keycloak keeps in BASE32 is already the otpauth form.
    assert_eq!(keycloak_otp("JBSWY3DPEHPK3PXP", Some("BASE32")).unwrap(), "JBSWY3DPEHPK3PXP");
    assert_eq!(keycloak_otp("jbsw y3dp ehpk 3pxp", Some("BASE32")).unwrap(), "JBSWY3DPEHPK3PXP");
    assert!(keycloak_otp("not base32!", Some("BASE32")).is_err());
    assert!(keycloak_otp("", None).is_err());
}

fn totp_sha1_6(key: &[u8], unix: u64) -> u32 {
    use aws_lc_rs::hmac;
    let k = hmac::Key::new(hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, key);
    let tag = hmac::sign(&k, &(unix / 30).to_be_bytes());
    let d = tag.as_ref();
    let off = (d[19] & 0x0f) as usize;
    let bin = u32::from_be_bytes([d[off] & 0x7f, d[off + 1], d[off + 2], d[off + 3]]);
    bin % 1_000_000
}

/// The keycloak-bcrypt extension's credential: the bcrypt string is copied and verifies;
/// anything else in a bcrypt credential is malformed.
#[test]
fn keycloak_bcrypt_credentials_are_copied() {
    // bcrypt.hashpw(b"correct horse battery staple", bcrypt.gensalt(rounds=5, prefix=b"2a"))
    let stored = "$2a$05$2oW0HdwKi8tkyKKiBn8qrukipRcLXZi2tDzS35OX4zDqeNolUwSti";
    let h = keycloak("bcrypt", 5, "", stored, &none()).unwrap();
    assert_eq!(h, stored);
    assert!(crate::crypto::hashes::verify(&h, "correct horse battery staple").unwrap());
    assert!(!crate::crypto::hashes::verify(&h, "correct horse battery stapler").unwrap());
    for bad in ["", "kNwotFPNeuwelpT1HWt+E4ONXFK6wjd", "$2x$04$abc", "$argon2id$v=19$m=1,t=1,p=1$a$b"] {
        assert!(matches!(keycloak("bcrypt", 10, "", bad, &none()), Err(HashError::Malformed(_))), "{bad}");
    }
}
