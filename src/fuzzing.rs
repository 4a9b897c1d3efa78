//! Entry points for the fuzz targets in `fuzz/` and for the replay of their corpus in the
//! `fuzz_corpus` integration test. Each takes arbitrary bytes, drives one parser of untrusted
//! input the way latch drives it, and throws the result away: the only thing under test is that
//! nothing panics, hangs or allocates without bound. Not part of latch's interface.

use std::path::PathBuf;
use std::sync::OnceLock;

use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderValue};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::crypto::hashes::{self, Algorithm};
use crate::crypto::password::Argon2Params;
use crate::domain::duration;
use crate::domain::enums::KeyType;
use crate::migration::{self, Options};
use crate::oauth::scope::Scopes;
use crate::oauth::{assertion, client_auth, form::Form};
use crate::store::key::PublicKey;

/// The names of the fuzz targets, each also a function of this module.
pub const TARGETS: [&str; 8] = [
    "duration",
    "password_hash",
    "authorize_query",
    "token_form",
    "assertion",
    "import_document",
    "keycloak_realm",
    "auth0_export",
];

/// Runs the entry point of `target` on `data`; false for an unknown target.
pub fn run(target: &str, data: &[u8]) -> bool {
    match target {
        "duration" => duration_string(data),
        "password_hash" => password_hash(data),
        "authorize_query" => authorize_query(data),
        "token_form" => token_form(data),
        "assertion" => assertion(data),
        "import_document" => import_document(data),
        "keycloak_realm" => keycloak_realm(data),
        "auth0_export" => auth0_export(data),
        _ => return false,
    }
    true
}

/// The first line of `data` and the rest.
fn split_line(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().position(|b| *b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[]),
    }
}

/// A duration string (configuration, import and export timeouts, settings).
pub fn duration_string(data: &[u8]) {
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = duration::parse(s);
    }
}

/// `hash\npassword`: import-time check, the rehash decision, the Auth0 conversion, and login-time
/// verification when the hash's work factor is small (the bounds let a valid hash cost seconds,
/// which would only slow the fuzzer down).
pub fn password_hash(data: &[u8]) {
    let (hash, password) = split_line(data);
    let (Ok(hash), Ok(password)) = (std::str::from_utf8(hash), std::str::from_utf8(password)) else { return };
    let _ = migration::hash::auth0(hash);
    let _ = hashes::needs_rehash(hash, &Argon2Params::default());
    match hashes::check(hash) {
        Ok(algorithm) if cheap(hash, algorithm) => {
            let _ = hashes::verify(hash, password);
        }
        Ok(_) => {}
        Err(_) => {
            // A refused hash must be refused at login too.
            assert!(hashes::verify(hash, password).is_err(), "verify accepted a hash check refused");
        }
    }
}

/// Whether verifying `hash` (which passed [`hashes::check`]) takes milliseconds.
fn cheap(hash: &str, algorithm: Algorithm) -> bool {
    let fields: Vec<&str> = hash.split('$').collect();
    let num = |s: &str| s.parse::<u64>().ok();
    let field = |i: usize| fields.get(i).copied().unwrap_or_default();
    let params =
        |names: &[(&str, u64)]| {
            field(2).split(',').chain(field(3).split(',')).filter_map(|kv| kv.split_once('=')).all(|(k, v)| {
                names.iter().find(|(n, _)| *n == k).is_none_or(|(_, max)| num(v).is_some_and(|v| v <= *max))
            })
        };
    match algorithm {
        Algorithm::Bcrypt => num(field(2)).is_some_and(|cost| cost <= 5),
        Algorithm::Pbkdf2Sha1 | Algorithm::Pbkdf2Sha256 | Algorithm::Pbkdf2Sha384 | Algorithm::Pbkdf2Sha512 => {
            num(field(2)).is_some_and(|rounds| rounds <= 5_000)
        }
        Algorithm::Sha256Crypt | Algorithm::Sha512Crypt => {
            field(2).strip_prefix("rounds=").is_none_or(|r| num(r).is_some_and(|rounds| rounds <= 5_000))
        }
        Algorithm::Argon2id | Algorithm::Argon2i => params(&[("m", 1024), ("t", 2), ("p", 2)]),
        Algorithm::Scrypt => params(&[("ln", 12), ("r", 8), ("p", 2)]),
    }
}

/// An authorization request query string (or POST body), checked against a fixed registered
/// client.
pub fn authorize_query(data: &[u8]) {
    let pairs: Vec<(String, String)> = form_urlencoded::parse(data).into_owned().collect();
    let _ = crate::oauth::authorize::request::check_offline(&pairs);
}

/// `authorization header\nbody` of a token request: the form, the grant type, client
/// authentication as presented (Basic, form secret, client assertion), the scope and the
/// parameters every grant reads before it looks anything up.
pub fn token_form(data: &[u8]) {
    let (authorization, body) = split_line(data);
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/x-www-form-urlencoded"));
    if !authorization.is_empty()
        && let Ok(v) = HeaderValue::from_bytes(authorization)
    {
        headers.insert(AUTHORIZATION, v);
    }
    let Ok(form) = Form::parse(&headers, body) else { return };
    let _ = form.get("grant_type");
    let _ = client_auth::presented(&headers, &form);
    if let Ok(Some(scope)) = form.get("scope") {
        let _ = Scopes::parse(scope).map(|s| (s.known(), s.audience_projects(), s.requested_roles()));
    }
    for name in ["code", "redirect_uri", "code_verifier", "refresh_token", "subject_token", "actor_token"] {
        let _ = form.get(name);
    }
    let _ = form.all("audience");
    if let Ok(Some(a)) = form.get("assertion") {
        let _ = assertion::peek_issuer(a);
    }
}

/// The fixed time assertions are checked at.
pub const NOW: i64 = 1_700_000_000;
/// The audiences assertions must name.
pub const AUDIENCES: [&str; 2] = ["http://localhost:8080", "http://localhost:8080/oauth/v2/token"];
/// The key id of the fixed Ed25519 key that signs and verifies fuzzed assertions.
pub const KEY_ID: &str = "fuzz";

fn fixed_key() -> &'static (aws_lc_rs::signature::Ed25519KeyPair, Vec<PublicKey>) {
    static KEY: OnceLock<(aws_lc_rs::signature::Ed25519KeyPair, Vec<PublicKey>)> = OnceLock::new();
    KEY.get_or_init(|| {
        use aws_lc_rs::signature::KeyPair as _;
        #[allow(clippy::expect_used)]
        let pair = aws_lc_rs::signature::Ed25519KeyPair::from_seed_unchecked(&[7; 32]).expect("a 32-byte seed");
        // SubjectPublicKeyInfo of an Ed25519 key: a fixed prefix, then the 32 key bytes.
        let mut spki = vec![0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00];
        spki.extend_from_slice(pair.public_key().as_ref());
        let key = PublicKey {
            key_id: KEY_ID.into(),
            owner_id: "fuzz".into(),
            key_type: KeyType::Json,
            public_key: crate::crypto::pem::encode("PUBLIC KEY", &spki),
            expires_at: None,
            created_at: 0,
        };
        (pair, vec![key])
    })
}

/// A compact JWS of `header` and `payload` (any bytes) signed with the fixed key.
pub fn sign(header: &[u8], payload: &[u8]) -> String {
    let signing_input = format!("{}.{}", URL_SAFE_NO_PAD.encode(header), URL_SAFE_NO_PAD.encode(payload));
    let signature = fixed_key().0.sign(signing_input.as_bytes());
    format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref()))
}

/// A client assertion or jwt-bearer assertion, checked as latch checks both (issuer peeked
/// before the key lookup, then the full verification) against the fixed key. The first byte
/// picks the form: `0` (or `'0'`) the rest is a token as sent; otherwise the rest is
/// `header JSON\npayload`, signed with the fixed key first so the claim checks are reached.
pub fn assertion(data: &[u8]) {
    let Some((mode, rest)) = data.split_first() else { return };
    let token = if matches!(mode, 0 | b'0') {
        match std::str::from_utf8(rest) {
            Ok(t) => t.to_string(),
            Err(_) => return,
        }
    } else {
        let (header, payload) = split_line(rest);
        sign(header, payload)
    };
    let _ = assertion::peek_issuer(&token);
    let _ = assertion::verify(&token, &fixed_key().1, &AUDIENCES, NOW);
}

/// An import request body (`POST /admin/v1/import`): parsed and every organization checked as
/// on an empty instance, without the store.
pub fn import_document(data: &[u8]) {
    let _ = crate::admin::import::check_offline(data, NOW);
}

/// A scratch directory of this process for the file-based readers.
fn scratch() -> Option<&'static PathBuf> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("latch-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok().map(|()| dir)
    })
    .as_ref()
}

fn options(dir: &std::path::Path) -> Options {
    let mut opts = Options::new("fuzz-org");
    opts.output = dir.join("importBody.json");
    opts.email_domain = Some("example.com".into());
    opts
}

/// A Keycloak realm export file, converted by `latch migrate keycloak`.
pub fn keycloak_realm(data: &[u8]) {
    let Some(dir) = scratch() else { return };
    let realm = dir.join("realm.json");
    if std::fs::write(&realm, data).is_err() {
        return;
    }
    let _ = migration::keycloak::run(&options(dir), &realm, None);
}

/// `users NDJSON` and `password NDJSON` separated by a NUL byte, converted by
/// `latch migrate auth0`.
pub fn auth0_export(data: &[u8]) {
    let Some(dir) = scratch() else { return };
    let (users, passwords) = match data.iter().position(|b| *b == 0) {
        Some(i) => (&data[..i], Some(&data[i + 1..])),
        None => (data, None),
    };
    let (users_path, passwords_path) = (dir.join("users.ndjson"), dir.join("passwords.ndjson"));
    if std::fs::write(&users_path, users).is_err() {
        return;
    }
    let passwords_path = match passwords {
        Some(p) if std::fs::write(&passwords_path, p).is_ok() => Some(passwords_path.as_path()),
        _ => None,
    };
    let _ = migration::auth0::run(&options(dir), &users_path, passwords_path, None);
}
