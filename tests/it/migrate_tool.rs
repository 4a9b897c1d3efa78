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

/// A Keycloak 10+ password credential.
fn kc_password(
    algorithm: &str,
    iterations: u32,
    salt: &str,
    value: &str,
    params: serde_json::Value,
) -> serde_json::Value {
    serde_json::json!({
        "type": "password",
        "secretData": serde_json::json!({"value": value, "salt": salt}).to_string(),
        "credentialData": serde_json::json!({"hashIterations": iterations, "algorithm": algorithm,
                                              "additionalParameters": params}).to_string(),
    })
}

fn kc_otp(secret: &str) -> serde_json::Value {
    serde_json::json!({
        "type": "otp",
        "secretData": serde_json::json!({"value": secret}).to_string(),
        "credentialData": r#"{"subType":"totp","digits":6,"period":30,"algorithm":"HmacSHA1","secretEncoding":"BASE32"}"#,
    })
}

const KC_SALT: &str = "rEIJDbs+BQqpx31v8mONWA==";
const KC_HASH: &str = "kNwotFPNeuwelpT1HWt+E4ONXFK6wjd+h0zbzNBRGwOqacAjeY7vYN9QZQ46DlEKSdn04cEU/3RvX8WPcRegxg==";

// What the migration tool writes always imports: a user without an id gets a stable one, a user
// the import would refuse (and with it the whole organization) is skipped and reported, an OTP
// secret the import would refuse is dropped with a notice, and one its lenient base32 reads is
// kept.
crate::on_both!(the_migration_tools_output_always_imports, |srv| {
    use latch::migration::{Options, auth0, keycloak};
    use serde_json::{Value, json};
    let org = srv.get("/management/v1/orgs/me").await.ok()["org"]["id"].as_str().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let argon2 = |memory: &str| {
        kc_password(
            "argon2",
            5,
            "LRScGShC7shkdoU5B1UgUQ==",
            "xKjWvB9+0sSP6wTqI1JoEI7w+iA0x9VDhPgmrOHRG80=",
            json!({"hashLength": ["32"], "memory": [memory], "type": ["id"], "version": ["1.3"], "parallelism": ["1"]}),
        )
    };
    let user = |name: &str, credentials: Value| {
        let slug: String = name.chars().take(20).map(|c| if c == ' ' { '-' } else { c }).collect();
        json!({"id": format!("kc-{slug}"), "username": name, "email": format!("{slug}@acme.test"),
               "firstName": "K", "lastName": "C", "credentials": credentials})
    };
    let long = "l".repeat(201);
    let realm = json!({"realm": "acme", "users": [
        {"username": "no-id", "email": "no-id@acme.test", "firstName": "No", "lastName": "Id",
         "credentials": [kc_password("pbkdf2-sha256", 27500, KC_SALT, KC_HASH, json!({}))]},
        user("bad name", json!([])),
        user(&long, json!([])),
        user("low-rounds", json!([kc_password("pbkdf2-sha256", 500, KC_SALT, KC_HASH, json!({}))])),
        user("big-argon2", json!([argon2("1048576")])),
        user("argon2-ok", json!([argon2("7168")])),
        user("short-otp", json!([kc_password("pbkdf2-sha256", 27500, KC_SALT, KC_HASH, json!({})), kc_otp("JBSWY3DP")])),
        user("lenient-otp", json!([kc_otp("jbswy3dpehpk3pxpjb")])),
        // An id the import's JSON refuses (NUL): the user is skipped, not the whole body.
        {"id": "kc-a\u{0}b", "username": "nul-id", "email": "nul-id@acme.test", "firstName": "N", "lastName": "I",
         "credentials": []},
    ]});
    let realm_path = dir.path().join("realm.json");
    std::fs::write(&realm_path, realm.to_string()).unwrap();
    let mut opts = Options::new(org.clone());
    opts.output = dir.path().join("kc.json");
    let summary = keycloak::run(&opts, &realm_path, None).unwrap();
    assert_eq!((summary.seen, summary.written), (9, 4), "{summary}");
    let refused = |s: &latch::migration::Summary, text: &str| {
        s.skipped
            .iter()
            .filter(|(reason, _, _)| reason.starts_with("refused by the import's checks") && reason.contains(text))
            .map(|(_, n, _)| n)
            .sum::<u64>()
    };
    assert_eq!(refused(&summary, "userName"), 2, "{summary}");
    assert_eq!(refused(&summary, "PBKDF2"), 1, "{summary}");
    assert_eq!(refused(&summary, "memory"), 1, "{summary}");
    assert_eq!(refused(&summary, "userId"), 1, "{summary}");
    assert_eq!(
        summary.notices.count("no user id in the export, one derived from the organization and the user name"),
        1
    );
    assert_eq!(summary.notices.count("OTP not imported: TOTP secret must be 10 to 128 bytes"), 1, "{summary}");
    let body: Value = serde_json::from_slice(&std::fs::read(&opts.output).unwrap()).unwrap();
    let users = body["dataOrgs"]["orgs"][0]["humanUsers"].as_array().unwrap().clone();
    let named = |name: &str| users.iter().find(|u| u["user"]["userName"] == name).unwrap().clone();
    let derived = named("no-id")["userId"].as_str().unwrap().to_string();
    assert_eq!(derived.len(), 36, "a UUID: {derived}");
    assert!(named("short-otp")["user"].get("otpCode").is_none());
    assert_eq!(named("lenient-otp")["user"]["otpCode"], "JBSWY3DPEHPK3PXPJB");
    // The same export again gives the same id.
    opts.output = dir.path().join("kc-again.json");
    keycloak::run(&opts, &realm_path, None).unwrap();
    let again: Value = serde_json::from_slice(&std::fs::read(&opts.output).unwrap()).unwrap();
    assert!(again.to_string().contains(&derived));
    // The timeout the body carries is one the import takes.
    opts.timeout = std::time::Duration::from_secs(25 * 3600);
    assert!(keycloak::run(&opts, &realm_path, None).unwrap_err().to_string().contains("24h"));

    let r = srv.post("/admin/v1/import", body).await;
    let report = r.ok();
    assert_eq!(report["errors"], json!([]), "{report}");
    let ids = report["success"]["orgs"][0]["humanUserIds"].as_array().unwrap();
    assert_eq!(ids.len(), 4, "{report}");
    assert!(ids.contains(&json!(derived)), "{report}");
    let u = srv.get(&format!("/management/v1/users/{derived}")).await;
    assert_eq!(u.ok()["user"]["userName"], "no-id");
    // Importing the second body changes nothing: the derived ids are the same.
    let r = srv.post("/admin/v1/import", again).await;
    assert_eq!(r.ok()["skipped"].as_array().unwrap().iter().filter(|s| s["type"] == "human_user").count(), 4);

    // Auth0: a bcrypt cost above the import's bound.
    let write = |name: &str, lines: &[Value]| {
        let path = dir.path().join(name);
        let text: Vec<String> = lines.iter().map(Value::to_string).collect();
        std::fs::write(&path, text.join("\n") + "\n").unwrap();
        path
    };
    let users_file = write(
        "users.ndjson",
        &[
            json!({"user_id": "auth0|a1", "email": "a1@acme.test"}),
            json!({"user_id": "auth0|a2", "email": "a2@acme.test"}),
        ],
    );
    let passwords = write(
        "passwords.ndjson",
        &[
            json!({"_id": {"$oid": "a1"}, "email": "a1@acme.test",
                   "passwordHash": "$2b$10$JyDM8jzGYVTdDzZaPAQ2Lu2uZ7xFA3dgQNoHGblMmpkkeIfG2GEYa"}),
            json!({"_id": {"$oid": "a2"}, "email": "a2@acme.test",
                   "passwordHash": "$2b$17$JyDM8jzGYVTdDzZaPAQ2Lu2uZ7xFA3dgQNoHGblMmpkkeIfG2GEYa"}),
        ],
    );
    let mut opts = Options::new(org.clone());
    opts.output = dir.path().join("auth0.json");
    let summary = auth0::run(&opts, &users_file, Some(&passwords), None).unwrap();
    assert_eq!((summary.seen, summary.written), (2, 1), "{summary}");
    assert_eq!(refused(&summary, "cost"), 1, "{summary}");
    let body: Value = serde_json::from_slice(&std::fs::read(&opts.output).unwrap()).unwrap();
    let report = srv.post("/admin/v1/import", body).await;
    let report = report.ok();
    assert_eq!(report["errors"], json!([]), "{report}");
    assert_eq!(report["success"]["orgs"][0]["humanUserIds"], json!(["auth0|a1"]), "{report}");
});
