//! Real vectors only: hashes exported by Keycloak and Auth0, passlib's documented sample, the
//! SHA-crypt specification's examples, and hashes generated with the reference libraries (Python
//! 3.11, passlib 1.7.4, bcrypt 5.0.0, argon2-cffi 25.1.0 from PyPI), each cross-checked there:
//!
//! ```python
//! PW, U = "correct horse battery staple", "pässwörd ✓"
//! pbkdf2_sha1.using(rounds=1000).hash(PW); pbkdf2_sha512.using(rounds=1000).hash(U)
//! salt = bytes.fromhex("8f1c2a9d4be07f3365aa10c2d4e5f601")  # Keycloak-style: padded standard base64
//! "$pbkdf2-sha384$2000$%s$%s" % (b64encode(salt), b64encode(hashlib.pbkdf2_hmac("sha384", PW, salt, 2000)))
//! "$pbkdf2$1000$%s$%s" % (b64encode(salt), b64encode(hashlib.pbkdf2_hmac("sha1", PW, salt, 1000, dklen=64)))
//! bcrypt.hashpw(PW, bcrypt.gensalt(rounds=5, prefix=b"2a")); bcrypt.hashpw(U, b"$2y$" + bcrypt.gensalt(5)[4:])
//! argon2.PasswordHasher(time_cost=3, memory_cost=4096, parallelism=2, type=Type.I).hash(PW)
//! argon2.PasswordHasher(time_cost=2, memory_cost=1024, parallelism=1, type=Type.ID).hash(U)
//! argon2.low_level.hash_secret(PW, b"somesalt12345678", time_cost=2, memory_cost=1024,
//!                              parallelism=1, hash_len=32, type=Type.ID, version=16)
//! scrypt.using(rounds=14, block_size=8, parallelism=1).hash(PW)
//! scrypt.using(rounds=10, block_size=4, parallelism=2).hash(U)
//! sha256_crypt.using(rounds=5000).hash(PW); sha512_crypt.using(rounds=10000).hash(U)  # and glibc crypt()
//! ```

use super::*;
use crate::crypto::password::{Argon2Params, PasswordHasher};

const PW: &str = "correct horse battery staple";
const U: &str = "pässwörd ✓";

/// Keycloak 26.6.0's migration test realm, user `offline-test-user` (password `password2`):
/// `secretData` and `credentialData` exactly as exported, JSON strings inside the JSON.
const KC_PBKDF2_SECRET: &str = r#"{"value":"kNwotFPNeuwelpT1HWt+E4ONXFK6wjd+h0zbzNBRGwOqacAjeY7vYN9QZQ46DlEKSdn04cEU/3RvX8WPcRegxg==","salt":"rEIJDbs+BQqpx31v8mONWA=="}"#;
const KC_PBKDF2_CREDENTIAL: &str = r#"{"hashIterations":27500,"algorithm":"pbkdf2-sha256","additionalParameters":{}}"#;
/// A Keycloak 26 `kc.sh export` credential for the password `secret` (argon2id).
const KC_ARGON2_SECRET: &str = r#"{"value":"xKjWvB9+0sSP6wTqI1JoEI7w+iA0x9VDhPgmrOHRG80=","salt":"LRScGShC7shkdoU5B1UgUQ==","additionalParameters":{}}"#;
const KC_ARGON2_CREDENTIAL: &str = r#"{"hashIterations":5,"algorithm":"argon2","additionalParameters":{"hashLength":["32"],"memory":["7168"],"type":["id"],"version":["1.3"],"parallelism":["1"]}}"#;
/// Auth0 password-hash export, line 2 (`password2`).
const AUTH0_BCRYPT: &str = "$2b$10$JyDM8jzGYVTdDzZaPAQ2Lu2uZ7xFA3dgQNoHGblMmpkkeIfG2GEYa";
/// passlib's documented pbkdf2_sha256 sample (`password2`), also checked with hashlib directly.
const PASSLIB_SAMPLE: &str = "$pbkdf2-sha256$29000$MDEyMzQ1Njc4OWFiY2RlZg$izdHqhedoufBx1DZnk6FcZELyTfzNXmVmXkEaQ28.0M";

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap()
}

fn keycloak_pbkdf2() -> String {
    let (secret, credential) = (json(KC_PBKDF2_SECRET), json(KC_PBKDF2_CREDENTIAL));
    format!(
        "${}${}${}${}",
        credential["algorithm"].as_str().unwrap(),
        credential["hashIterations"],
        secret["salt"].as_str().unwrap(),
        secret["value"].as_str().unwrap()
    )
}

fn keycloak_argon2() -> String {
    let (secret, credential) = (json(KC_ARGON2_SECRET), json(KC_ARGON2_CREDENTIAL));
    let param = |name: &str| credential["additionalParameters"][name][0].as_str().unwrap();
    assert_eq!(param("version"), "1.3");
    let b64 = |name: &str| secret[name].as_str().unwrap().trim_end_matches('=').to_owned();
    format!(
        "$argon2{}$v=19$m={},t={},p={}${}${}",
        param("type"),
        param("memory"),
        credential["hashIterations"],
        param("parallelism"),
        b64("salt"),
        b64("value")
    )
}

/// (hash, password, format) for every real vector.
fn vectors() -> Vec<(String, &'static str, Algorithm)> {
    use Algorithm::*;
    let fixed = [
        (AUTH0_BCRYPT, "password2", Bcrypt),
        (PASSLIB_SAMPLE, "password2", Pbkdf2Sha256),
        ("$pbkdf2$1000$6J0zJmRMCaEUwhhjDKH03g$7XL70eJ4bFAf7NuxB5HhuPBar30", PW, Pbkdf2Sha1),
        (
            "$pbkdf2$1000$jxwqnUvgfzNlqhDC1OX2AQ==$WLLZEKEfAK9Pnim5SRBVqqh+9/RS1fOxqMx2SsXP920489kBCKnubFrnOmmcJWnQaKk+cWfktQ89FXBOG3s+zw==",
            PW,
            Pbkdf2Sha1,
        ),
        ("$pbkdf2-sha256$1000$MaZ0Tql17j2HMCYEgBCiFA$YRskWFCTddg87gXMPQfutJqj6FSUH9x.yxw1GMdi2rs", PW, Pbkdf2Sha256),
        (
            "$pbkdf2-sha384$2000$jxwqnUvgfzNlqhDC1OX2AQ==$ko5ANX3wMtGmW7pI6QKhk0YaYGMfNSy06kiV9x2+yEEqG6CVEgc+ZfZyRl+NKTM6",
            PW,
            Pbkdf2Sha384,
        ),
        (
            "$pbkdf2-sha512$1000$lFKqdU7JWat17j3H.D/HeA$ht.lk975UOaziVyQau9c5Oix6JU0.n1TmgHEL4ZVEo0n57mKv7WgpOjRamiLuIVWXlhm42QV02y6DC8Dw4ufQQ",
            U,
            Pbkdf2Sha512,
        ),
        ("$2a$05$2oW0HdwKi8tkyKKiBn8qrukipRcLXZi2tDzS35OX4zDqeNolUwSti", PW, Bcrypt),
        ("$2y$05$R48/Sk3pFEHI4sXhLNdmcuEI5obqVwalVCawo03y7h0bSbMeY6gTy", U, Bcrypt),
        (
            "$argon2i$v=19$m=4096,t=3,p=2$1iHShLOG3Q3bzZ/OXJnEbg$5FPB7LiApTRO7hilR0e5nBNPZIX8zvHuMQ80h6BiqaU",
            PW,
            Argon2i,
        ),
        (
            "$argon2id$v=19$m=1024,t=2,p=1$Ar4dcS1He8Rihur+bXhcPQ$XeKSGZdOcqgJm7hSc3nfNRHQpbK/rCqPorL83DMMYJ8",
            U,
            Argon2id,
        ),
        (
            "$argon2id$v=16$m=1024,t=2,p=1$c29tZXNhbHQxMjM0NTY3OA$rMnwbr+ZLGT4xXSjOWInp9bgYQran9oaciF4+pQDF3M",
            PW,
            Argon2id,
        ),
        ("$scrypt$ln=14,r=8,p=1$4zwnpDTmvNeaMwbg/F+r9Q$oSJ3xQ4bSSHm7uR9NDv5q54j5voSvbsQvVthy2XeoRs", PW, Scrypt),
        ("$scrypt$ln=10,r=4,p=2$3xtjrJVybq01pjRGCMG41w$8BPTQXaIb9/nvj//B16a5yUgZKDqxcThqqG/x4OeVgY", U, Scrypt),
        ("$5$z96PFc7LCKUZAQgA$wWCfDYVnaEU1LXzv0cHQdkO7UENAqZVMiAlEb8Jk2l2", PW, Sha256Crypt),
        (
            "$6$rounds=10000$hzKRZZtRJ74QdDkt$c.UlNlTwzsH0FzUu5YOIqFRmh5Yg/6VO9pqNTGY0l1Qw9.R.MYvHltQyks8cZf/ve/SifzTZp./7.IZMFG1Sb0",
            U,
            Sha512Crypt,
        ),
        // https://www.akkadia.org/drepper/SHA-crypt.txt, "Hello world!"; the second salt is
        // truncated to 16 characters as crypt writes it. Confirmed with glibc crypt and passlib.
        ("$5$saltstring$5B8vYYiY.CVt1RlTTf8KbXBH3hsxY/GNooZaBBGWEc5", "Hello world!", Sha256Crypt),
        ("$5$rounds=10000$saltstringsaltst$3xv.VbSHBb41AL9AvLeujZkZRBAwqFMz2.opqey6IcA", "Hello world!", Sha256Crypt),
        (
            "$6$saltstring$svn8UoSVapNtMuq1ukKS4tPQd8iKwSMHWjl/O817G3uBnIFNjnQJuesI68u4OTLiBFdcbYEdFCoEOfaS35inz1",
            "Hello world!",
            Sha512Crypt,
        ),
    ];
    let mut all: Vec<_> = fixed.map(|(h, p, a)| (h.to_owned(), p, a)).into();
    all.push((keycloak_pbkdf2(), "password2", Pbkdf2Sha256));
    all.push((keycloak_argon2(), "secret", Argon2id));
    all
}

#[test]
fn real_vectors_verify_in_their_own_format() {
    for (hash, password, algorithm) in vectors() {
        assert_eq!(check(&hash), Ok(algorithm), "{hash}");
        assert_eq!(verify(&hash, password), Ok(true), "{hash}");
        assert_eq!(verify(&hash, "wrong password"), Ok(false), "{hash}");
        assert!(needs_rehash(&hash, &Argon2Params::default()), "{hash}");
    }
}

#[test]
fn keycloak_strings_are_built_as_expected() {
    assert!(keycloak_pbkdf2().starts_with("$pbkdf2-sha256$27500$rEIJDbs+BQqpx31v8mONWA==$kNwo"));
    assert_eq!(
        keycloak_argon2(),
        "$argon2id$v=19$m=7168,t=5,p=1$LRScGShC7shkdoU5B1UgUQ$xKjWvB9+0sSP6wTqI1JoEI7w+iA0x9VDhPgmrOHRG80"
    );
}

#[test]
fn pbkdf2_accepts_standard_unpadded_and_ab64_but_not_url_safe() {
    let padded = keycloak_pbkdf2();
    let unpadded = padded.replace('=', "");
    assert_eq!(verify(&unpadded, "password2"), Ok(true));
    // The same bytes in standard base64: `.` back to `+`.
    let standard = PASSLIB_SAMPLE.replace('.', "+");
    assert_eq!(verify(&standard, "password2"), Ok(true));
    let url_safe = padded.replace('+', "-").replace('/', "_");
    assert!(matches!(check(&url_safe), Err(HashError::Malformed { .. })));
    // A piece with `+` is standard base64, so a `.` in it is an error, not ab64.
    let mixed = PASSLIB_SAMPLE.replace("izdH", "i+dH");
    assert!(matches!(check(&mixed), Err(HashError::Malformed { .. })));
}

#[test]
fn refusals_name_the_problem() {
    let cases = [
        ("", "not a password hash: it must start with '$' and a format identifier"),
        ("$md5$rasmuslerdorf$abc", "unsupported hash format '$md5$'"),
        (
            "$pbkdf2-sha256$500$MDEyMzQ1Njc4OWFiY2RlZg$izdHqhedoufBx1DZnk6FcZELyTfzNXmVmXkEaQ28.0M",
            "PBKDF2-SHA256 rounds 500 outside 1000..=10000000",
        ),
        ("$2b$17$JyDM8jzGYVTdDzZaPAQ2Lu2uZ7xFA3dgQNoHGblMmpkkeIfG2GEYa", "bcrypt cost 17 outside 4..=16"),
        (
            "$argon2id$v=19$m=524289,t=5,p=1$LRScGShC7shkdoU5B1UgUQ$xKjWvB9+0sSP6wTqI1JoEI7w+iA0x9VDhPgmrOHRG80",
            "argon2id memory (KiB) 524289 outside 8..=524288",
        ),
        (
            "$scrypt$ln=20,r=8,p=1$4zwnpDTmvNeaMwbg/F+r9Q$oSJ3xQ4bSSHm7uR9NDv5q54j5voSvbsQvVthy2XeoRs",
            "scrypt cost 128·r·p·2^ln (bytes) 1073741824 outside 131072..=536870912",
        ),
        (
            "$5$rounds=999$saltstring$5B8vYYiY.CVt1RlTTf8KbXBH3hsxY/GNooZaBBGWEc5",
            "SHA-256-crypt rounds 999 outside 1000..=10000000",
        ),
        ("$pbkdf2$1000$c2FsdA$", "PBKDF2-SHA1 key length 0 outside 16..=64"),
    ];
    for (hash, message) in cases {
        assert_eq!(check(hash).unwrap_err().to_string(), message, "{hash}");
        assert_eq!(verify(hash, "password2").unwrap_err().to_string(), message);
    }
    let long = format!("$pbkdf2$1000${}", "A".repeat(MAX_HASH_LEN));
    assert_eq!(check(&long), Err(HashError::TooLong));
}

/// Every shape that must be refused, grouped by what is wrong.
#[test]
fn malformed_and_out_of_bounds_hashes_are_refused() {
    let key = "izdHqhedoufBx1DZnk6FcZELyTfzNXmVmXkEaQ28.0M";
    let argon = "LRScGShC7shkdoU5B1UgUQ$xKjWvB9+0sSP6wTqI1JoEI7w+iA0x9VDhPgmrOHRG80";
    let scrypt = "4zwnpDTmvNeaMwbg/F+r9Q$oSJ3xQ4bSSHm7uR9NDv5q54j5voSvbsQvVthy2XeoRs";
    let sha = "5B8vYYiY.CVt1RlTTf8KbXBH3hsxY/GNooZaBBGWEc5";
    let bad = [
        // not a hash, unsupported or empty identifiers
        "password2".to_owned(),
        "$".into(),
        "$$".into(),
        "$$$$".into(),
        " $2b$10$".into(),
        "$1$salt$hash".into(),
        "$argon2d$v=19$m=1024,t=2,p=1$c29tZXNhbHQ$aGFzaGhhc2hoYXNo".into(),
        "$2x$05$2oW0HdwKi8tkyKKiBn8qrukipRcLXZi2tDzS35OX4zDqeNolUwSti".into(),
        "$pbkdf2-sha1$1000$c2FsdA$aGFzaA".into(),
        "$PBKDF2$1000$c2FsdA$aGFzaA".into(),
        "$ü$x".into(),
        // PBKDF2: shape, rounds, base64, lengths
        "$pbkdf2-sha256".into(),
        "$pbkdf2-sha256$".into(),
        "$pbkdf2-sha256$29000".into(),
        "$pbkdf2-sha256$29000$MDEyMzQ1Njc4OWFiY2RlZg".into(),
        format!("$pbkdf2-sha256$29000$MDEyMzQ1Njc4OWFiY2RlZg${key}$"),
        format!("$pbkdf2-sha256$$MDEyMzQ1Njc4OWFiY2RlZg${key}"),
        format!("$pbkdf2-sha256$+29000$MDEyMzQ1Njc4OWFiY2RlZg${key}"),
        format!("$pbkdf2-sha256$-1$MDEyMzQ1Njc4OWFiY2RlZg${key}"),
        format!("$pbkdf2-sha256$2.9e4$MDEyMzQ1Njc4OWFiY2RlZg${key}"),
        format!("$pbkdf2-sha256$0$MDEyMzQ1Njc4OWFiY2RlZg${key}"),
        format!("$pbkdf2-sha256$999$MDEyMzQ1Njc4OWFiY2RlZg${key}"),
        format!("$pbkdf2-sha256$10000001$MDEyMzQ1Njc4OWFiY2RlZg${key}"),
        format!("$pbkdf2-sha256$99999999999999999999999$MDEyMzQ1Njc4OWFiY2RlZg${key}"),
        format!("$pbkdf2-sha256$29000$${key}"),
        format!("$pbkdf2-sha256$29000$==${key}"),
        format!("$pbkdf2-sha256$29000$M${key}"),
        format!("$pbkdf2-sha256$29000$MDEy!zQ1${key}"),
        format!("$pbkdf2-sha256$29000$MDEy zQ1${key}"),
        "$pbkdf2-sha256$29000$MDEyMzQ1Njc4OWFiY2RlZg$aGFzaGhhc2g".into(),
        format!("$pbkdf2-sha256$29000$MDEyMzQ1Njc4OWFiY2RlZg${}", "A".repeat(87)),
        format!("$pbkdf2-sha256$29000$MDEyMzQ1Njc4OWFiY2RlZg$é{key}"),
        // bcrypt: cost, length, alphabet
        "$2b$03$JyDM8jzGYVTdDzZaPAQ2Lu2uZ7xFA3dgQNoHGblMmpkkeIfG2GEYa".into(),
        "$2b$99$JyDM8jzGYVTdDzZaPAQ2Lu2uZ7xFA3dgQNoHGblMmpkkeIfG2GEYa".into(),
        "$2b$1a$JyDM8jzGYVTdDzZaPAQ2Lu2uZ7xFA3dgQNoHGblMmpkkeIfG2GEYa".into(),
        "$2b$$JyDM8jzGYVTdDzZaPAQ2Lu2uZ7xFA3dgQNoHGblMmpkkeIfG2GEYa".into(),
        "$2b$10$JyDM8jzGYVTdDzZaPAQ2Lu2uZ7xFA3dgQNoHGblMmpkkeIfG2GEY".into(),
        "$2b$10$JyDM8jzGYVTdDzZaPAQ2Lu2uZ7xFA3dgQNoHGblMmpkkeIfG2GEYaa".into(),
        "$2b$10$JyDM8jzGYVTdDzZaPAQ2Lu2uZ7xFA3dgQNoHGblMmpkkeIfG2GE€".into(),
        "$2b$10$JyDM8jzGYVTdDzZaPAQ2Lu2uZ7xFA3dgQNoHGblMmpkkeIfG2GE+a".into(),
        "$2b$10$JyDM8jzGYVTdDzZaPAQ2Lu2uZ7xFA3dgQNoHGblMmpkkeIfG2G$Ya".into(),
        "$2b$10".into(),
        "$2b$".into(),
        // argon2: version, parameters, bounds, salt, hash
        format!("$argon2id$m=7168,t=5,p=1${argon}"),
        format!("$argon2id$v=20$m=7168,t=5,p=1${argon}"),
        format!("$argon2id$v=019$m=7168,t=5,p=1${argon}"),
        format!("$argon2id$v=19$t=5,p=1${argon}"),
        format!("$argon2id$v=19$m=7168,t=5${argon}"),
        format!("$argon2id$v=19${argon}"),
        format!("$argon2id$v=19$m=7168,t=5,p=1,keyid=AAAA${argon}"),
        format!("$argon2id$v=19$m=7168,t=5,p=1,m=7168${argon}"),
        format!("$argon2id$v=19$m=7,t=5,p=1${argon}"),
        // leading zeros: the verifier would never match them
        format!("$argon2id$v=19$m=07168,t=5,p=1${argon}"),
        format!("$argon2id$v=19$m=7168,t=05,p=1${argon}"),
        format!("$scrypt$ln=014,r=8,p=1${scrypt}"),
        format!("$argon2id$v=19$m=16,t=5,p=4${argon}"),
        format!("$argon2id$v=19$m=99999999999999999999,t=5,p=1${argon}"),
        format!("$argon2id$v=19$m=7168,t=0,p=1${argon}"),
        format!("$argon2id$v=19$m=7168,t=11,p=1${argon}"),
        format!("$argon2id$v=19$m=7168,t=5,p=0${argon}"),
        format!("$argon2id$v=19$m=7168,t=5,p=17${argon}"),
        format!("$argon2id$v=19$m=7168,t=-5,p=1${argon}"),
        "$argon2id$v=19$m=7168,t=5,p=1$c2FsdA$xKjWvB9+0sSP6wTqI1JoEI7w+iA0x9VDhPgmrOHRG80".into(),
        "$argon2id$v=19$m=7168,t=5,p=1$LRScGShC7shkdoU5B1UgUQ".into(),
        "$argon2id$v=19$m=7168,t=5,p=1$LRScGShC7shkdoU5B1UgUQ$".into(),
        "$argon2id$v=19$m=7168,t=5,p=1$LRScGShC7shkdoU5B1UgUQ$aGFzaA".into(),
        "$argon2id$v=19$m=7168,t=5,p=1$LRScGShC7shkdoU5B1UgUQ==$xKjWvB9+0sSP6wTqI1JoEI7w+iA0x9VDhPgmrOHRG80".into(),
        format!("$argon2id$v=19$m=7168,t=5,p=1${argon}$extra"),
        // scrypt: parameters and their product
        format!("$scrypt$ln=9,r=8,p=1${scrypt}"),
        format!("$scrypt$ln=21,r=1,p=1${scrypt}"),
        format!("$scrypt$ln=14,r=0,p=1${scrypt}"),
        format!("$scrypt$ln=14,r=33,p=1${scrypt}"),
        format!("$scrypt$ln=14,r=8,p=0${scrypt}"),
        format!("$scrypt$ln=14,r=8,p=17${scrypt}"),
        format!("$scrypt$ln=16,r=1,p=1${scrypt}"),
        format!("$scrypt$ln=20,r=4,p=2${scrypt}"),
        format!("$scrypt$ln=16,r=8,p=16${scrypt}"),
        format!("$scrypt$ln=14,r=8${scrypt}"),
        format!("$scrypt$ln=14,r=8,p=1,x=1${scrypt}"),
        format!("$scrypt$v=1$ln=14,r=8,p=1${scrypt}"),
        "$scrypt$ln=14,r=8,p=1$4zwnpDTmvNeaMwbg/F+r9Q".into(),
        // SHA-crypt: rounds, salt, hash
        format!("$5$rounds=10000001$saltstring${sha}"),
        format!("$5$rounds=$saltstring${sha}"),
        format!("$5$rounds=1e4$saltstring${sha}"),
        format!("$5$rounds=5000${sha}"),
        format!("$5$${sha}"),
        format!("$5$saltstringsaltstr${sha}"),
        format!("$5$salt:string${sha}"),
        format!("$5$saltstring${sha}$"),
        "$5$saltstring$5B8vYYiY.CVt1RlTTf8KbXBH3hsxY/GNooZaBBGWEc".into(),
        "$5$saltstring$5B8vYYiY.CVt1RlTTf8KbXBH3hsxY/GNooZaBBGWE+5".into(),
        format!("$6$saltstring${sha}"),
        "$5$saltstring".into(),
        "$5$".into(),
    ];
    for hash in &bad {
        assert!(check(hash).is_err(), "accepted {hash:?}");
        assert!(verify(hash, "Hello world!").is_err(), "verified {hash:?}");
    }
}

/// Every prefix of every vector, and each vector with one character replaced, parses without
/// panicking (and whatever `check` accepts, `verify` accepts too).
#[test]
fn mangled_vectors_never_panic() {
    for (hash, _, _) in vectors() {
        for (i, _) in hash.char_indices() {
            let _ = check(&hash[..i]);
            for c in ['$', '=', ',', '0', '9', 'é', '\0', '+', '.', '-'] {
                let mut mangled = hash.clone();
                mangled.replace_range(i..i + hash[i..].chars().next().unwrap().len_utf8(), &c.to_string());
                let _ = check(&mangled);
            }
        }
    }
}

#[test]
fn sha_crypt_refuses_overlong_passwords() {
    let hash = "$5$saltstring$5B8vYYiY.CVt1RlTTf8KbXBH3hsxY/GNooZaBBGWEc5";
    assert_eq!(verify(hash, &"x".repeat(SHA_CRYPT_MAX_PASSWORD + 1)), Ok(false));
}

#[test]
fn only_argon2id_with_current_parameters_skips_rehash() {
    let current = Argon2Params { memory_kib: 1024, iterations: 1, parallelism: 1 };
    let own = PasswordHasher::hash_blocking(current, "pw").unwrap();
    assert!(!needs_rehash(&own, &current));
    assert!(needs_rehash(&own, &Argon2Params::default()));
    let other = Argon2Params { parallelism: 2, ..current };
    assert!(needs_rehash(&own, &other));
    assert!(needs_rehash(&own.replace("argon2id", "argon2i"), &current));
    assert!(needs_rehash(&own.replace("v=19", "v=16"), &current));
    for garbage in ["", "$", "x", "$argon2id$", AUTH0_BCRYPT] {
        assert!(needs_rehash(garbage, &current));
    }
}
