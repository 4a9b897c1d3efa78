//! The Keycloak converter on real exports (tests/fixtures/migration: excerpts of Keycloak's own
//! migration test realms 9.0.3 and 26.6.0, a Keycloak 3.x realm with SHA-1 PBKDF2 and service
//! accounts, a Keycloak 26 argon2 user) and on small hand-made realms for each rule.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::*;
use crate::migration::hash::tests::{argon2_verifies, pbkdf2_verifies};

pub(crate) fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/migration").join(name)
}

fn options(dir: &tempfile::TempDir) -> Options {
    let mut o = Options::new("org-1");
    o.output = dir.path().join("body.json");
    o
}

fn body(o: &Options) -> Value {
    serde_json::from_str(&std::fs::read_to_string(&o.output).unwrap()).unwrap()
}

fn users(v: &Value) -> Vec<Value> {
    assert_eq!(v["dataOrgs"]["orgs"][0]["orgId"], "org-1");
    assert_eq!(v["timeout"], "30m0s");
    v["dataOrgs"]["orgs"][0]["humanUsers"].as_array().unwrap().clone()
}

fn user<'v>(users: &'v [Value], name: &str) -> &'v Value {
    users.iter().find(|u| u["user"]["userName"] == name).unwrap_or_else(|| panic!("no user {name} in {users:?}"))
}

fn write_realm(dir: &tempfile::TempDir, realm: &Value) -> PathBuf {
    let path = dir.path().join("realm.json");
    std::fs::write(&path, realm.to_string()).unwrap();
    path
}

/// A realm with the given users.
fn realm_of(users: Value) -> Value {
    json!({"realm": "acme", "enabled": true, "clients": [{"clientId": "x"}], "users": users})
}

/// A Keycloak 10+ password credential.
fn pbkdf2_credential() -> Value {
    json!({
        "type": "password",
        "secretData": r#"{"value":"kNwotFPNeuwelpT1HWt+E4ONXFK6wjd+h0zbzNBRGwOqacAjeY7vYN9QZQ46DlEKSdn04cEU/3RvX8WPcRegxg==","salt":"rEIJDbs+BQqpx31v8mONWA=="}"#,
        "credentialData": r#"{"hashIterations":27500,"algorithm":"pbkdf2-sha256","additionalParameters":{}}"#
    })
}

const OFFLINE_HASH: &str = "$pbkdf2-sha256$27500$rEIJDbs+BQqpx31v8mONWA==$kNwotFPNeuwelpT1HWt+E4ONXFK6wjd+h0zbzNBRGwOqacAjeY7vYN9QZQ46DlEKSdn04cEU/3RvX8WPcRegxg==";

fn no_temp_files_left(dir: &tempfile::TempDir) {
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn keycloak_26_export_with_an_email_domain() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(&dir);
    o.email_domain = Some("example.org".into());
    let path = fixture("keycloak-26.6.0-migration-realm-users-excerpt.json");
    let summary = run(&o, &path, None).unwrap();
    let all = users(&body(&o));
    assert_eq!(all.len(), 3);
    let offline = user(&all, "offline-test-user");
    assert_eq!(
        offline,
        &json!({
            "userId": "47611b1e-6e38-415f-99b1-8babab008505",
            "user": {
                "userName": "offline-test-user",
                "profile": {"firstName": "offline-test-user", "lastName": "offline-test-user",
                            "displayName": "offline-test-user"},
                "email": {"email": "offline-test-user@example.org"},
                "hashedPassword": {"value": OFFLINE_HASH}
            }
        })
    );
    assert!(pbkdf2_verifies(OFFLINE_HASH, "password2"));
    let consent = user(&all, "consent-user");
    assert!(consent["user"].get("hashedPassword").is_none());
    assert_eq!(consent["userId"], "08420acf-d86f-4eba-8a69-73e7da43c668");
    assert_eq!((summary.seen, summary.written, summary.without_password), (3, 3, 2));
    assert_eq!(summary.notices.count("e-mail filled in from --email-domain, unverified"), 3);
    assert_eq!(summary.notices.count("first or last name missing, filled in"), 3);
}

#[test]
fn users_without_email_stop_the_conversion_and_are_listed() {
    let dir = tempfile::tempdir().unwrap();
    let o = options(&dir);
    let path = fixture("keycloak-26.6.0-migration-realm-users-excerpt.json");
    let err = run(&o, &path, None).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::MissingEmail { count: 3, .. }), "{msg}");
    assert!(
        msg.contains("--email-domain") && msg.ends_with("Users: consent-user, migration-test-user, offline-test-user"),
        "{msg}"
    );
    assert!(!o.output.exists(), "nothing is written");
    no_temp_files_left(&dir);
}

#[test]
fn keycloak_26_argon2_user_otp_phone_and_disabled_state() {
    let dir = tempfile::tempdir().unwrap();
    let o = options(&dir);
    let summary = run(&o, &fixture("keycloak26-argon2-user.json"), None).unwrap();
    let all = users(&body(&o));
    let hash = "$argon2id$v=19$m=7168,t=5,p=1$LRScGShC7shkdoU5B1UgUQ$xKjWvB9+0sSP6wTqI1JoEI7w+iA0x9VDhPgmrOHRG80";
    assert_eq!(
        all,
        vec![json!({
            "userId": "a1",
            "user": {
                "userName": "jane.doe",
                "profile": {"firstName": "Jane", "lastName": "Doe"},
                "email": {"email": "jane@example.com", "isEmailVerified": true},
                "phone": {"phone": "+12025550142", "isPhoneVerified": true},
                "hashedPassword": {"value": hash},
                "otpCode": "JBSWY3DPEHPK3PXP"
            },
            "state": "USER_STATE_INACTIVE"
        })]
    );
    assert!(argon2_verifies(hash, "secret"));
    assert_eq!((summary.inactive, summary.with_otp), (1, 1));
    assert_eq!(summary.notices.count("security keys and passkeys not imported (not portable)"), 1);
}

#[test]
fn keycloak_9_flat_layout_gives_the_same_hash() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(&dir);
    o.email_domain = Some("example.org".into());
    let path = fixture("keycloak-9.0.3-migration-realm-users-excerpt.json");
    run(&o, &path, Some("Migration")).unwrap();
    let all = users(&body(&o));
    let offline = user(&all, "offline-test-user");
    assert_eq!(offline["user"]["hashedPassword"]["value"], OFFLINE_HASH);
    assert!(user(&all, "migration-test-user")["user"].get("hashedPassword").is_none());
}

#[test]
fn keycloak_3_sha1_user_and_service_accounts() {
    let dir = tempfile::tempdir().unwrap();
    let o = options(&dir);
    let path = fixture("keycloak-3.x-renku-realm-users-excerpt.json");
    let summary = run(&o, &path, None).unwrap();
    let all = users(&body(&o));
    assert_eq!(all.len(), 1);
    let demo = &all[0]["user"];
    assert_eq!(demo["email"], json!({"email": "demo@datascience.ch", "isEmailVerified": true}));
    assert_eq!(demo["profile"], json!({"firstName": "John", "lastName": "Doe"}));
    let hash = demo["hashedPassword"]["value"].as_str().unwrap();
    assert!(hash.starts_with("$pbkdf2$20000$VsYJarM+eZEMeGPx9L9tXg==$"), "{hash}");
    assert!(pbkdf2_verifies(hash, "demo"));
    assert_eq!(summary.skipped.total(), 2);
    let text = summary.to_string();
    assert!(text.contains("service-account-demo-client, service-account-renku-services"), "{text}");
}

#[test]
fn plain_text_passwords_and_required_actions() {
    let dir = tempfile::tempdir().unwrap();
    let o = options(&dir);
    let realm = realm_of(json!([
        {"id": "1", "username": "alice", "email": "alice@example.com",
         "credentials": [{"type": "password", "value": "s3cret", "temporary": true}]},
        {"id": "2", "username": "bob", "email": "bob@example.com",
         "requiredActions": ["VERIFY_EMAIL", "UPDATE_PASSWORD"], "credentials": [pbkdf2_credential()]},
        {"id": "3", "username": "carol", "email": "carol@example.com",
         "requiredActions": ["UPDATE_PASSWORD"]},
    ]));
    let summary = run(&o, &write_realm(&dir, &realm), None).unwrap();
    let all = users(&body(&o));
    let alice = &user(&all, "alice")["user"];
    let h = alice["hashedPassword"]["value"].as_str().unwrap();
    assert!(h.starts_with("$argon2id$v=19$"), "{h}");
    assert!(argon2_verifies(h, "s3cret"));
    assert_eq!(alice["passwordChangeRequired"], true);
    assert_eq!(user(&all, "bob")["user"]["passwordChangeRequired"], true);
    assert!(user(&all, "carol")["user"].get("passwordChangeRequired").is_none());
    assert_eq!(summary.password_change_required, 2);
    assert_eq!(summary.notices.count("plain-text password hashed with argon2id"), 1);
}

#[test]
fn otp_credentials_in_both_layouts() {
    let dir = tempfile::tempdir().unwrap();
    let o = options(&dir);
    let otp10 = |secret: &str, data: &str| json!({"type": "otp", "secretData": format!(r#"{{"value":"{secret}"}}"#), "credentialData": data});
    let realm = realm_of(json!([
        {"username": "flat", "email": "a@example.com", "credentials": [
            {"type": "totp", "value": "12345678901234567890", "digits": 6, "period": 30,
             "algorithm": "HmacSHA1", "counter": 0}]},
        {"username": "ten", "email": "b@example.com", "credentials": [
            otp10("12345678901234567890", r#"{"subType":"totp","digits":6,"counter":0,"period":30,"algorithm":"HmacSHA1"}"#),
            otp10("JBSWY3DPEHPK3PXP", r#"{"subType":"totp","digits":6,"period":30,"algorithm":"HmacSHA1","secretEncoding":"BASE32"}"#)]},
        {"username": "hotp", "email": "c@example.com", "credentials": [
            otp10("x", r#"{"subType":"hotp","digits":6,"counter":3,"period":30,"algorithm":"HmacSHA1"}"#)]},
        {"username": "eight", "email": "d@example.com", "credentials": [
            otp10("x", r#"{"subType":"totp","digits":8,"period":30,"algorithm":"HmacSHA1"}"#)]},
        {"username": "sha256", "email": "e@example.com", "credentials": [
            otp10("x", r#"{"subType":"totp","digits":6,"period":30,"algorithm":"HmacSHA256"}"#)]},
        // A device the import cannot take before one it can: the second is imported, and the
        // summary says the user had more.
        {"username": "mixed", "email": "f@example.com", "credentials": [
            otp10("x", r#"{"subType":"totp","digits":8,"period":30,"algorithm":"HmacSHA1"}"#),
            otp10("12345678901234567890", r#"{"subType":"totp","digits":6,"counter":0,"period":30,"algorithm":"HmacSHA1"}"#)]},
    ]));
    let summary = run(&o, &write_realm(&dir, &realm), None).unwrap();
    let all = users(&body(&o));
    let rfc = "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ";
    assert_eq!(user(&all, "flat")["user"]["otpCode"], rfc);
    assert_eq!(user(&all, "ten")["user"]["otpCode"], rfc);
    assert_eq!(user(&all, "mixed")["user"]["otpCode"], rfc);
    for name in ["hotp", "eight", "sha256"] {
        assert!(user(&all, name)["user"].get("otpCode").is_none(), "{name}");
    }
    let n = &summary.notices;
    assert_eq!(n.count("several OTP devices, one imported"), 2);
    assert_eq!(n.count("OTP not imported: hotp (counter-based) codes"), 1);
    assert_eq!(n.count("OTP not imported: 8-digit codes"), 1);
    assert_eq!(n.count("OTP not imported: algorithm HmacSHA256"), 1);
    assert_eq!(summary.with_otp, 3);
}

#[test]
fn unsupported_algorithms_fail_or_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(&dir);
    let realm = realm_of(json!([
        {"username": "ok", "email": "ok@example.com", "credentials": [pbkdf2_credential()]},
        {"username": "old", "email": "old@example.com", "credentials": [{"type": "password",
          "secretData": r#"{"value":"abcd","salt":"abcd"}"#,
          "credentialData": r#"{"hashIterations":1,"algorithm":"md5"}"#}]},
    ]));
    let path = write_realm(&dir, &realm);
    let err = run(&o, &path, None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "user 'old': unsupported password algorithm 'md5' (pass --skip-unsupported to leave such users out)"
    );
    assert!(!o.output.exists());
    o.skip_unsupported = true;
    let summary = run(&o, &path, None).unwrap();
    assert_eq!(users(&body(&o)).len(), 1);
    assert_eq!(summary.skipped.count("unsupported password algorithm 'md5'"), 1);
}

#[test]
fn malformed_credentials_name_the_user() {
    let dir = tempfile::tempdir().unwrap();
    let o = options(&dir);
    for (credential, expected) in [
        (
            json!({"type": "password", "secretData": "{not json", "credentialData": "{}"}),
            "user 'u': password credential: secretData is not the JSON Keycloak writes",
        ),
        (
            json!({"type": "password", "secretData": r#"{"value":"a","salt":"b"}"#,
                   "credentialData": r#"{"hashIterations":1}"#}),
            "user 'u': password credential: credentialData names no algorithm",
        ),
        (
            json!({"type": "password", "hashedSaltedValue": "a-b_", "salt": "c2FsdA==",
                   "hashIterations": 1000, "algorithm": "pbkdf2"}),
            "user 'u': password credential: the hash is not standard base64",
        ),
    ] {
        let realm = realm_of(json!([{"username": "u", "email": "u@example.com",
                                     "credentials": [credential]}]));
        let err = run(&o, &write_realm(&dir, &realm), None).unwrap_err().to_string();
        assert!(err.starts_with(expected), "{err}");
    }
    no_temp_files_left(&dir);
}

#[test]
fn arrays_of_realms_need_a_name() {
    let dir = tempfile::tempdir().unwrap();
    let o = options(&dir);
    let realms = json!([
        {"id": "master", "realm": "master", "users": [{"username": "admin", "email": "admin@example.com"}]},
        // users before the realm's name: held until the name is known.
        {"users": [{"username": "m1", "email": "m1@example.com"}], "id": "Migration", "realm": "Migration"},
    ]);
    let path = write_realm(&dir, &realms);
    let err = run(&o, &path, None).unwrap_err().to_string();
    assert!(err.ends_with("holds 2 realms (master, Migration); pick one with --realm-name"), "{err}");
    assert!(!o.output.exists());
    run(&o, &path, Some("Migration")).unwrap();
    let all = users(&body(&o));
    assert_eq!(all.len(), 1);
    assert_eq!(all[0]["user"]["userName"], "m1");
    run(&o, &path, Some("master")).unwrap();
    assert_eq!(users(&body(&o))[0]["user"]["userName"], "admin");
    let err = run(&o, &path, Some("nope")).unwrap_err().to_string();
    assert!(err.ends_with("has no realm 'nope' (realms: master, Migration)"), "{err}");
    let one = write_realm(&dir, &json!([realm_of(json!([{"username": "x", "email": "x@example.com"}]))]));
    run(&o, &one, None).unwrap();
}

#[test]
fn directory_exports_read_the_users_files_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("export");
    std::fs::create_dir(&export).unwrap();
    let u = |n: &str| json!({"id": n, "username": n, "email": format!("{n}@example.com")});
    let write = |name: &str, v: Value| std::fs::write(export.join(name), v.to_string()).unwrap();
    write("acme-realm.json", json!({"realm": "acme", "users": [u("r")]}));
    for n in [0, 1, 2, 10] {
        write(&format!("acme-users-{n}.json"), json!({"realm": "acme", "users": [u(&format!("u{n}"))]}));
    }
    write("acme-federated-users-0.json", json!({"realm": "acme", "federatedUsers": []}));
    let o = options(&dir);
    let summary = run(&o, &export, None).unwrap();
    let names: Vec<Value> = users(&body(&o)).iter().map(|u| u["user"]["userName"].clone()).collect();
    assert_eq!(names, vec!["r", "u0", "u1", "u2", "u10"]);
    assert_eq!(summary.written, 5);
    write("master-realm.json", json!({"realm": "master"}));
    let err = run(&o, &export, None).unwrap_err().to_string();
    assert!(err.ends_with("holds 2 realms (acme, master); pick one with --realm-name"), "{err}");
    run(&o, &export, Some("acme")).unwrap();
    let err = run(&o, &export, Some("master")).unwrap_err().to_string();
    assert!(err.ends_with("has no users"), "{err}");
}

#[test]
fn bad_input_gives_one_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let o = options(&dir);
    let file = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let cases = [
        (file("a.txt", "<html>not JSON</html>"), "a.txt: not valid JSON: expected value at line 1 column 1"),
        (file("b.json", r#"{"realm": "acme"}"#), "the realm in "),
        (file("c.json", r#"{"realm": "acme", "users": []}"#), "has no users"),
        (file("d.json", r#""a string""#), "expected a realm object or an array of realm objects"),
        (file("e.json", r#"{"realm": "x", "users": [{"username": 5}]}"#), "invalid type: integer `5`"),
        (file("f.json", r#"{"realm": "x", "users": [{"username": "a"}"#), "EOF while parsing"),
        (file("g.json", r#"{"realm": "x"} {"realm": "y"}"#), "trailing characters"),
        (dir.path().join("missing.json"), "missing.json: No such file or directory"),
    ];
    for (path, expected) in cases {
        let err = run(&o, &path, None).unwrap_err().to_string();
        assert!(err.contains(expected), "{}: {err}", path.display());
        assert!(!err.contains('\n'), "{err}");
    }
    let realm = write_realm(&dir, &realm_of(json!([{"username": "sa", "serviceAccountClientId": "c"}])));
    let err = run(&o, &realm, None).unwrap_err().to_string();
    assert!(err.contains("all 1 were skipped (service account"), "{err}");
    let mut bad = options(&dir);
    bad.org = " ".into();
    assert!(matches!(run(&bad, &realm, None), Err(Error::Usage(_))));
    bad.org = "1".into();
    for domain in ["not a domain", "localhost", "-x.com"] {
        bad.email_domain = Some(domain.into());
        assert!(matches!(run(&bad, &realm, None), Err(Error::Usage(_))), "{domain}");
    }
    assert!(!o.output.exists());
    no_temp_files_left(&dir);
}

#[test]
fn profile_rules_phone_locale_duplicates_and_email() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(&dir);
    o.email_domain = Some("users.example.net".into());
    let realm = realm_of(json!([
        {"id": "1", "username": "anna", "email": "anna@example.com", "firstName": "Anna",
         "attributes": {"phoneNumber": ["0791234567"], "locale": ["de-CH"]}},
        {"id": "2", "username": "ANNA", "email": "anna2@example.com"},
        {"id": "1", "username": "other", "email": "other@example.com"},
        {"id": "4", "username": "ben@corp", "email": "not-an-email", "enabled": true,
         "attributes": {"phoneNumber": "+41 79 123 45 67"}},
        {"id": "5", "email": "nameless@example.com"},
        {"id": "6", "username": "ldap", "email": "ldap@example.com", "federationLink": "f1"},
        {"id": "7", "username": "social", "email": "social@example.com",
         "federatedIdentities": [{"identityProvider": "google", "userId": "1234", "userName": "s@gmail.com"}]},
    ]));
    let summary = run(&o, &write_realm(&dir, &realm), None).unwrap();
    let all = users(&body(&o));
    assert_eq!(all.len(), 4);
    let anna = &user(&all, "anna")["user"];
    assert_eq!(
        anna["profile"],
        json!({"firstName": "Anna", "lastName": "Anna", "displayName": "Anna", "preferredLanguage": "de"})
    );
    assert!(anna.get("phone").is_none());
    let ben = &user(&all, "ben@corp")["user"];
    assert_eq!(ben["email"], json!({"email": "ben_corp@users.example.net"}));
    assert_eq!(ben["phone"], json!({"phone": "+41 79 123 45 67"}));
    assert!(user(&all, "ben@corp").get("state").is_none());
    let s = &summary;
    assert_eq!(s.skipped.count("duplicate user name"), 1);
    assert_eq!(s.skipped.count("duplicate user id"), 1);
    assert_eq!(s.skipped.count("no user name"), 1);
    assert_eq!(s.notices.count("phone number not in international form (+...), dropped"), 1);
    assert_eq!(s.notices.count("e-mail address not valid, treated as missing"), 1);
    assert_eq!(s.notices.count("federated user (LDAP, Kerberos), its password is not in the export"), 1);
    assert_eq!(s.notices.count("identity-provider links (federatedIdentities) not imported"), 1);
}

#[test]
fn multiline_output_is_the_same_document() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(&dir);
    let path = fixture("keycloak26-argon2-user.json");
    run(&o, &path, None).unwrap();
    let compact = std::fs::read_to_string(&o.output).unwrap();
    o.multiline = true;
    o.timeout = std::time::Duration::from_secs(3723);
    run(&o, &path, None).unwrap();
    let pretty = std::fs::read_to_string(&o.output).unwrap();
    assert_eq!(compact.lines().count(), 1);
    assert!(pretty.lines().count() > 20);
    let mut a: Value = serde_json::from_str(&compact).unwrap();
    let b: Value = serde_json::from_str(&pretty).unwrap();
    assert_eq!(b["timeout"], "1h2m3s");
    a["timeout"] = b["timeout"].clone();
    assert_eq!(a, b);
}
