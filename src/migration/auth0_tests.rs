//! The Auth0 converter on the real export samples (tests/fixtures/migration) and on small
//! hand-made exports for each rule.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::*;
use crate::migration::keycloak::tests::fixture;

fn options(dir: &tempfile::TempDir) -> Options {
    let mut o = Options::new("org-1");
    o.output = dir.path().join("body.json");
    o
}

fn users(o: &Options) -> Vec<Value> {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&o.output).unwrap()).unwrap();
    v["dataOrgs"]["orgs"][0]["humanUsers"].as_array().unwrap().clone()
}

fn user<'v>(users: &'v [Value], id: &str) -> &'v Value {
    users.iter().find(|u| u["userId"] == id).unwrap_or_else(|| panic!("no user {id} in {users:?}"))
}

fn ndjson(dir: &tempfile::TempDir, name: &str, lines: &[Value]) -> PathBuf {
    let text: Vec<String> = lines.iter().map(Value::to_string).collect();
    let path = dir.path().join(name);
    std::fs::write(&path, text.join("\n") + "\n").unwrap();
    path
}

const ALICE_HASH: &str = "$2b$10$JyDM8jzGYVTdDzZaPAQ2Lu2uZ7xFA3dgQNoHGblMmpkkeIfG2GEYa";
const NICO_HASH: &str = "$2b$10$.qHPp/srqo1NAAAAAvlkmOdqAbH2Rg0qPv2Txj3ZwXfjJnewSjc4m";

#[test]
fn auth0_samples_join_by_user_id() {
    let dir = tempfile::tempdir().unwrap();
    let o = options(&dir);
    let summary = run(
        &o,
        &fixture("auth0-users-export-sample.ndjson"),
        Some(&fixture("auth0-password-hashes-export-sample.ndjson")),
        None,
    )
    .unwrap();
    let all = users(&o);
    assert_eq!(
        all,
        vec![
            json!({
                "userId": "auth0|64b7f0c2a1b2c3d4e5f60718",
                "user": {
                    "userName": "alice@example.test",
                    "profile": {"firstName": "Alice", "lastName": "Example", "nickName": "alice",
                                "displayName": "Alice Example", "preferredLanguage": "en"},
                    "email": {"email": "alice@example.test", "isEmailVerified": true},
                    "hashedPassword": {"value": ALICE_HASH}
                }
            }),
            json!({
                "userId": "google-oauth2|109876543210987654321",
                "user": {
                    "userName": "bob@example.test",
                    "profile": {"firstName": "Bob", "lastName": "Example",
                                "displayName": "Bob Example"},
                    "email": {"email": "bob@example.test", "isEmailVerified": true}
                }
            }),
        ]
    );
    assert!(bcrypt::verify("password2", ALICE_HASH).unwrap());
    assert_eq!((summary.written, summary.without_password), (2, 1));
    let text = summary.notices.to_string();
    assert_eq!(
        text,
        concat!(
            "  password record matching no user of the export (1): nico9090@nico.com\n",
            "  signed in with google-oauth2 at Auth0, imported without password (1): bob@example.test\n"
        )
    );
}

#[test]
fn database_users_fall_back_to_the_email_join() {
    let dir = tempfile::tempdir().unwrap();
    let o = options(&dir);
    let passwords = ndjson(
        &dir,
        "passwords.ndjson",
        &[
            json!({"_id": {"$oid": "aaa"}, "email": "Nico9090@nico.com", "passwordHash": NICO_HASH}),
            json!({"_id": "bbb", "email": "twice@example.com", "passwordHash": ALICE_HASH}),
            json!({"_id": {"$oid": "ccc"}, "email": "twice@example.com", "passwordHash": ALICE_HASH}),
            json!({"_id": {"$oid": "ddd"}, "identifiers": [{"type": "email", "value": "only-in-identifiers@example.com"}],
                   "passwordHash": ALICE_HASH}),
            json!({"_id": {"$oid": "eee"}, "email": "nohash@example.com", "passwordHash": null}),
        ],
    );
    let users_file = ndjson(
        &dir,
        "users.ndjson",
        &[
            json!({"user_id": "auth0|custom-1", "email": "nico9090@nico.com"}),
            json!({"user_id": "auth0|custom-2", "email": "twice@example.com"}),
            json!({"user_id": "auth0|bbb", "email": "bbb@example.com"}),
            json!({"user_id": "auth0|custom-3", "email": "only-in-identifiers@example.com"}),
            json!({"user_id": "google-oauth2|9", "email": "other-nico@nico.com", "username": "g"}),
            json!({"user_id": "google-oauth2|10", "email": "Nico9090@nico.com", "username": "g2"}),
        ],
    );
    run(&o, &users_file, Some(&passwords), None).unwrap();
    let all = users(&o);
    let hash = |id: &str| user(&all, id)["user"]["hashedPassword"]["value"].clone();
    assert_eq!(hash("auth0|custom-1"), NICO_HASH);
    assert_eq!(hash("auth0|custom-2"), Value::Null, "ambiguous e-mail");
    assert_eq!(hash("auth0|bbb"), ALICE_HASH, "_id as a plain string");
    assert_eq!(hash("auth0|custom-3"), ALICE_HASH);
    assert_eq!(hash("google-oauth2|10"), Value::Null, "social users have no password");
}

// A record joined by e-mail must be no one else's: not when the user it names is in the export
// (B's hash would let A sign in with B's password), nor when two database users share the
// address.
#[test]
fn an_email_join_never_takes_another_users_record() {
    let dir = tempfile::tempdir().unwrap();
    let o = options(&dir);
    let passwords = ndjson(
        &dir,
        "passwords.ndjson",
        &[
            json!({"_id": {"$oid": "B"}, "email": "x@example.com", "passwordHash": NICO_HASH}),
            json!({"_id": {"$oid": "gone"}, "email": "shared@example.com", "passwordHash": ALICE_HASH}),
        ],
    );
    let users_file = ndjson(
        &dir,
        "users.ndjson",
        &[
            // Only A has the address now (B's record kept an older one): the record is still B's.
            json!({"user_id": "auth0|A", "email": "x@example.com", "username": "a"}),
            json!({"user_id": "auth0|B", "email": "b-now@example.com", "username": "b"}),
            json!({"user_id": "auth0|C", "email": "shared@example.com", "username": "c"}),
            json!({"user_id": "auth0|D", "email": "Shared@example.com", "username": "d"}),
        ],
    );
    run(&o, &users_file, Some(&passwords), None).unwrap();
    let all = users(&o);
    let hash = |id: &str| user(&all, id)["user"]["hashedPassword"]["value"].clone();
    assert_eq!(hash("auth0|B"), NICO_HASH, "by id");
    assert_eq!(hash("auth0|A"), Value::Null, "B's record, though A comes first and has the address");
    assert_eq!(hash("auth0|C"), Value::Null, "two database users have the address");
    assert_eq!(hash("auth0|D"), Value::Null);
}

#[test]
fn email_verified_is_kept_or_forced() {
    let dir = tempfile::tempdir().unwrap();
    let o = options(&dir);
    let file = ndjson(
        &dir,
        "users.ndjson",
        &[
            json!({"user_id": "auth0|1", "email": "a@example.com", "email_verified": true}),
            json!({"user_id": "auth0|2", "email": "b@example.com", "email_verified": false}),
            json!({"user_id": "auth0|3", "email": "c@example.com"}),
        ],
    );
    let verified = |flag: Option<bool>| -> Vec<bool> {
        run(&o, &file, None, flag).unwrap();
        users(&o).iter().map(|u| u["user"]["email"]["isEmailVerified"] == true).collect()
    };
    assert_eq!(verified(None), [true, false, false]);
    assert_eq!(verified(Some(true)), [true, true, true]);
    assert_eq!(verified(Some(false)), [false, false, false]);
}

#[test]
fn profile_phone_locale_and_blocked_users() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(&dir);
    o.email_domain = Some("example.org".into());
    let file = ndjson(
        &dir,
        "users.ndjson",
        &[
            json!({"user_id": "auth0|1", "email": "a@example.com", "username": "ann", "given_name": "Ann",
                   "family_name": "Lee", "locale": "pt_BR", "phone_number": "+14155550100",
                   "phone_verified": true, "blocked": true}),
            json!({"user_id": "auth0|2", "email": "b@example.com", "phone_number": "4155550100",
                   "name": "Prince"}),
            json!({"user_id": "sms|3", "phone_number": "+14155550101"}),
            json!({"email": "noid@example.com"}),
        ],
    );
    let summary = run(&o, &file, None, None).unwrap();
    let all = users(&o);
    let ann = user(&all, "auth0|1");
    assert_eq!(ann["state"], "USER_STATE_INACTIVE");
    assert_eq!(ann["user"]["userName"], "ann");
    assert_eq!(ann["user"]["profile"]["preferredLanguage"], "pt");
    assert_eq!(ann["user"]["phone"], json!({"phone": "+14155550100", "isPhoneVerified": true}));
    let two = &user(&all, "auth0|2")["user"];
    assert!(two.get("phone").is_none());
    assert_eq!(two["profile"], json!({"firstName": "Prince", "lastName": "Prince", "displayName": "Prince"}));
    let sms = &user(&all, "sms|3")["user"];
    assert_eq!(sms["userName"], "+14155550101");
    assert_eq!(sms["email"], json!({"email": "+14155550101@example.org"}));
    assert_eq!(summary.inactive, 1);
    assert_eq!(summary.skipped.count("no user_id"), 1);
    assert_eq!(summary.notices.count("phone number not in international form (+...), dropped"), 1);
}

#[test]
fn unsupported_hashes_fail_or_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(&dir);
    let passwords = ndjson(
        &dir,
        "p.ndjson",
        &[json!({"_id": {"$oid": "1"}, "email": "a@example.com", "passwordHash": "$1$salt$hash"})],
    );
    let file = ndjson(
        &dir,
        "u.ndjson",
        &[
            json!({"user_id": "auth0|1", "email": "a@example.com"}),
            json!({"user_id": "auth0|2", "email": "b@example.com"}),
        ],
    );
    let err = run(&o, &file, Some(&passwords), None).unwrap_err().to_string();
    assert_eq!(
        err,
        "user 'a@example.com': unsupported password algorithm '$1$' (pass --skip-unsupported to leave such users out)"
    );
    assert!(!o.output.exists());
    o.skip_unsupported = true;
    let summary = run(&o, &file, Some(&passwords), None).unwrap();
    assert_eq!(users(&o).len(), 1);
    assert_eq!(summary.skipped.count("unsupported password algorithm '$1$'"), 1);
}

#[test]
fn malformed_lines_are_reported_with_their_number() {
    let dir = tempfile::tempdir().unwrap();
    let o = options(&dir);
    let write = |name: &str, bytes: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };
    let good = r#"{"user_id":"auth0|1","email":"a@example.com"}"#;
    let cases = [
        (
            write("a.ndjson", format!("{good}\n\n{{\"user_id\": \"auth0|2\",\n").as_bytes()),
            "a.ndjson, line 3: not a JSON object of the export: EOF while parsing a value (column 22)",
        ),
        (
            write("b.ndjson", format!("{good}\n[\"auth0|2\", \"b@example.com\"]\n").as_bytes()),
            "b.ndjson, line 2: not a JSON object",
        ),
        (
            write("c.ndjson", b"[{\"user_id\": \"auth0|1\"}]\n"),
            "c.ndjson, line 1: a JSON array; the export must have one JSON object per line (NDJSON)",
        ),
        (write("d.ndjson", b"{\"user_id\": \"auth0|\xff\"}\n"), "d.ndjson, line 1: not UTF-8 text"),
        (write("e.ndjson", b"\n\n"), "the user export"),
        (
            write("f.ndjson", b"{\n  \"user_id\": \"auth0|1\"\n}\n"),
            "f.ndjson, line 1: a JSON document over several lines; the export must have one JSON object per line (NDJSON)",
        ),
        (dir.path().join("none.ndjson"), "none.ndjson: No such file or directory"),
        (
            write(
                "g.ndjson",
                format!("{good}\n{{\"user_id\":\"auth0|2\",\"email\":\"{}\"}}\n", "x".repeat(33 << 20)).as_bytes(),
            ),
            "g.ndjson, line 2: longer than 32 MiB; no user record is",
        ),
    ];
    for (path, expected) in cases {
        let err = run(&o, &path, None, None).unwrap_err().to_string();
        assert!(err.contains(expected), "{}: {err}", path.display());
        assert!(!err.contains('\n'), "{err}");
    }
    let users_file = write("u.ndjson", format!("{good}\n").as_bytes());
    let passwords = write("p.ndjson", b"{\"_id\":{\"$oid\":\"1\"},\"passwordHash\":\"x\"}\nnot json\n");
    let err = run(&o, &users_file, Some(&passwords), None).unwrap_err().to_string();
    assert!(err.contains("p.ndjson, line 2: not a JSON object"), "{err}");
    let passwords = write("q.ndjson", b"{\"email\":\"a@b.co\",\"passwordHash\":\"x\"}\n");
    let err = run(&o, &users_file, Some(&passwords), None).unwrap_err().to_string();
    assert!(err.ends_with("line 1: a password record without _id or alt_id"), "{err}");
    assert!(!o.output.exists());
}

#[test]
fn users_without_email_need_a_domain() {
    let dir = tempfile::tempdir().unwrap();
    let o = options(&dir);
    let file = ndjson(
        &dir,
        "u.ndjson",
        &[json!({"user_id": "auth0|1", "username": "jo"}), json!({"user_id": "auth0|2", "email": "b@example.com"})],
    );
    let err = run(&o, &file, None, None).unwrap_err().to_string();
    assert!(err.starts_with("1 user(s) have no usable e-mail address"), "{err}");
    assert!(err.ends_with("Users: jo"), "{err}");
    assert!(!o.output.exists());
}

/// `user_metadata` is the users' own to edit: a value of an unexpected type stops nothing, a
/// string `locale` in it is still read.
#[test]
fn user_metadata_of_any_shape_is_taken() {
    let dir = tempfile::tempdir().unwrap();
    let o = options(&dir);
    let file = ndjson(
        &dir,
        "users.ndjson",
        &[
            json!({"user_id": "auth0|1", "email": "a@example.com", "user_metadata": {"locale": {"lang": "de"}}}),
            json!({"user_id": "auth0|2", "email": "b@example.com", "user_metadata": ["x", 1]}),
            json!({"user_id": "auth0|3", "email": "c@example.com", "user_metadata": {"locale": "de-CH", "n": 2}}),
        ],
    );
    run(&o, &file, None, None).unwrap();
    let all = users(&o);
    assert!(user(&all, "auth0|1")["user"]["profile"].get("preferredLanguage").is_none());
    assert!(user(&all, "auth0|2")["user"]["profile"].get("preferredLanguage").is_none());
    assert_eq!(user(&all, "auth0|3")["user"]["profile"]["preferredLanguage"], "de");
}
