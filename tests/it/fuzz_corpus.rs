//! The CI smoke of the fuzz targets (`fuzz/`, `scripts/fuzz`): every input of the committed
//! corpus goes through the same entry point the target calls (`latch::fuzzing`), so a crash once
//! found and fixed stays fixed and the entry points keep working without a nightly toolchain.

use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    out.sort();
    out
}

#[test]
fn fuzz_corpus_replays_without_a_panic() {
    for target in latch::fuzzing::TARGETS {
        let inputs = files(&fuzz_dir().join("corpus").join(target));
        assert!(!inputs.is_empty(), "the corpus of {target} is empty");
        for input in &inputs {
            // A fuzzer running on the same corpus replaces inputs by shorter ones meanwhile.
            let data = match std::fs::read(input) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                read => read.expect("a corpus file"),
            };
            assert!(latch::fuzzing::run(target, &data), "{target} is not an entry point");
        }
    }
}

#[test]
fn every_fuzz_target_has_an_entry_point() {
    let mut binaries: Vec<String> = files(&fuzz_dir().join("fuzz_targets"))
        .iter()
        .filter_map(|p| p.file_stem().and_then(|s| s.to_str()).map(str::to_string))
        .collect();
    binaries.sort();
    let mut targets: Vec<String> = latch::fuzzing::TARGETS.iter().map(|t| t.to_string()).collect();
    targets.sort();
    assert_eq!(binaries, targets, "fuzz/fuzz_targets and latch::fuzzing::TARGETS differ");
    assert!(!latch::fuzzing::run("no-such-target", b""));
}

/// The entry points must reach past the first check, or the fuzzer only ever sees rejections.
/// These seeds (from fuzz/seed) pass every check of their parser.
#[test]
fn fuzz_entry_points_reach_the_deep_checks() {
    use aws_lc_rs::signature::KeyPair as _;
    use latch::fuzzing::{AUDIENCES, KEY_ID, NOW, sign};

    // A signed assertion passes the full verification with the fixed key (seed [7; 32]).
    let pair = aws_lc_rs::signature::Ed25519KeyPair::from_seed_unchecked(&[7; 32]).expect("a seed");
    let mut spki = vec![0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00];
    spki.extend_from_slice(pair.public_key().as_ref());
    let key = latch::store::key::PublicKey {
        key_id: KEY_ID.into(),
        owner_id: "fuzz".into(),
        key_type: latch::domain::enums::KeyType::Json,
        public_key: latch::crypto::pem::encode("PUBLIC KEY", &spki),
        expires_at: None,
        created_at: 0,
    };
    let header = br#"{"alg":"EdDSA","kid":"fuzz","typ":"JWT"}"#;
    let claims = format!(r#"{{"iss":"svc","sub":"svc","aud":"{}","exp":{},"iat":{NOW}}}"#, AUDIENCES[0], NOW + 300);
    let token = sign(header, claims.as_bytes());
    let checked = latch::oauth::assertion::verify(&token, std::slice::from_ref(&key), &AUDIENCES, NOW)
        .expect("a valid assertion");
    assert_eq!(checked.sub, "svc");
    let stale = format!(r#"{{"iss":"svc","sub":"svc","aud":"{}","exp":{},"iat":1}}"#, AUDIENCES[0], NOW + 300);
    let err = latch::oauth::assertion::verify(&sign(header, stale.as_bytes()), &[key], &AUDIENCES, NOW).unwrap_err();
    assert!(err.contains("too old"), "{err}");

    // An authorization request of the fixed client passes every check.
    let query = "client_id=fuzz&redirect_uri=https%3A%2F%2Fapp.example%2Fcb&response_type=code&scope=openid&\
                 code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256";
    let pairs: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes()).into_owned().collect();
    let params = latch::oauth::authorize::request::check_offline(&pairs).expect("a valid request");
    assert_eq!(params.scopes, vec!["openid".to_string()]);
    let without_pkce: Vec<(String, String)> = pairs.iter().filter(|(k, _)| !k.starts_with("code_")).cloned().collect();
    assert!(latch::oauth::authorize::request::check_offline(&without_pkce).is_err(), "a public client needs PKCE");

    // An import document is checked organization by organization, down to the users.
    let doc = r#"{"dataOrgs": {"orgs": [{"orgId": "o1", "org": {"name": "Org"},
        "humanUsers": [{"userId": "u1", "user": {"userName": "alice",
            "profile": {"firstName": "A", "lastName": "L"}, "email": {"email": "alice@example.com"},
            "hashedPassword": {"value": "$2a$05$2oW0HdwKi8tkyKKiBn8qrukipRcLXZi2tDzS35OX4zDqeNolUwSti"}}}]}]}}"#;
    let problems = latch::admin::import::check_offline(doc.as_bytes(), NOW).expect("a valid request");
    assert!(problems.is_empty(), "{problems:?}");
    let bad_hash = doc.replace("$2a$05$", "$2a$99$");
    let problems = latch::admin::import::check_offline(bad_hash.as_bytes(), NOW).expect("a valid request");
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].message.contains("bcrypt cost 99"), "{problems:?}");
}
