//! `latch migrate keycloak|auth0` as a user runs it: no configuration needed, a summary on
//! stdout, and for bad input one line on stderr with a non-zero status (never a panic).

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::process::command;

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/migration").join(name).to_string_lossy().into_owned()
}

/// An environment whose server configuration is invalid: the converters must not read it.
fn broken_config() -> Vec<(String, String)> {
    vec![("LATCH_LISTEN".into(), "not-an-address".into()), ("LATCH_DATABASE_URL".into(), "bogus".into())]
}

fn latch(dir: &Path, args: &[&str]) -> Output {
    command(dir, &broken_config(), args).output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn converters_run_without_a_server_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let out =
        latch(dir.path(), &["migrate", "keycloak", "--org", "42", "--realm", &fixture("keycloak26-argon2-user.json")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("wrote 1 of 1 users to ./importBody.json (organization 42)"), "{stdout}");
    let body: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("importBody.json")).unwrap()).unwrap();
    assert_eq!(body["dataOrgs"]["orgs"][0]["orgId"], "42");
    assert_eq!(body["timeout"], "30m0s");
    let output: PathBuf = dir.path().join("auth0.json");
    let out = latch(
        dir.path(),
        &[
            "migrate",
            "auth0",
            "--org",
            "42",
            "--users",
            &fixture("auth0-users-export-sample.ndjson"),
            "--passwords",
            &fixture("auth0-password-hashes-export-sample.ndjson"),
            "--output",
            output.to_str().unwrap(),
            "--email-verified",
            "--multiline",
            "--timeout",
            "1h",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&output).unwrap();
    assert!(text.lines().count() > 20);
    let body: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(body["timeout"], "1h0m0s");
    assert!(!dir.path().join("data").exists(), "no server state was created");
}

#[test]
fn bad_input_is_one_line_and_a_non_zero_status() {
    let dir = tempfile::tempdir().unwrap();
    let not_json = dir.path().join("realm.json");
    std::fs::write(&not_json, "<html>").unwrap();
    let bad_line = dir.path().join("users.ndjson");
    std::fs::write(&bad_line, "{\"user_id\":\"auth0|1\",\"email\":\"a@example.com\"}\n{oops\n").unwrap();
    let kc = fixture("keycloak-26.6.0-migration-realm-users-excerpt.json");
    let cases: [(Vec<&str>, u8, &str); 5] = [
        (vec!["migrate", "keycloak", "--org", "1", "--realm", not_json.to_str().unwrap()], 1, "not valid JSON"),
        (vec!["migrate", "keycloak", "--org", "1", "--realm", &kc], 1, "3 user(s) have no usable e-mail address"),
        (vec!["migrate", "auth0", "--org", "1", "--users", bad_line.to_str().unwrap()], 1, "users.ndjson, line 2:"),
        (vec!["migrate", "keycloak", "--org", "1", "--realm", &kc, "--email-domain", "no domain"], 2, "--email-domain"),
        (vec!["migrate", "keycloak", "--realm", &kc], 2, "--org"),
    ];
    for (args, status, expected) in cases {
        let out = latch(dir.path(), &args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(i32::from(status)), "{args:?}: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        if status == 1 {
            assert_eq!(err.trim().lines().count(), 1, "{err}");
            assert!(err.starts_with("latch: "), "{err}");
        }
    }
    assert!(!dir.path().join("importBody.json").exists());
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(left.len(), 2, "only the two input files: {left:?}");
}
