//! The first start, a second start, and replicas starting together.

use serde_json::json;

use crate::harness::{Backend, TestServer};
use crate::on_both;

on_both!(first_start_creates_org_admins_pat_and_key, |srv| {
    // The PAT file exists, is private, and authenticates the machine administrator.
    let meta = std::fs::metadata(&srv.settings.first_instance.pat_path).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        // On SQLite so are the database and its log (password hashes, personal data).
        if let Some(rest) = srv.settings.database_url.strip_prefix("sqlite://") {
            let path = rest.split('?').next().unwrap();
            for file in [path.to_string(), format!("{path}-wal")] {
                let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
                assert_eq!(mode, 0o600, "{file}");
            }
        }
    }
    let org = srv.get("/management/v1/orgs/me").await;
    let org = org.ok()["org"].clone();
    assert_eq!(org["name"], "latch");
    assert_eq!(org["primaryDomain"], "latch.127.0.0.1");
    let users = srv.post("/management/v1/users/_search", json!({"query": {"asc": true}})).await;
    let users = users.ok()["result"].as_array().unwrap().clone();
    let names: Vec<_> = users.iter().map(|u| u["userName"].as_str().unwrap().to_string()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names.contains(&"admin".to_string()) && names.contains(&"latch-admin-sa".to_string()));
    let admin = users.iter().find(|u| u["userName"] == "admin").unwrap();
    assert_eq!(admin["preferredLoginName"], "admin@latch.127.0.0.1");
    assert_eq!(admin["human"]["email"]["isEmailVerified"], true);
    // Both administrators hold IAM_OWNER and ORG_OWNER.
    let iam = srv.post("/admin/v1/members/_search", json!({})).await;
    let iam = iam.ok()["result"].as_array().unwrap().clone();
    assert_eq!(iam.len(), 2);
    assert!(iam.iter().all(|m| m["roles"] == json!(["IAM_OWNER"])));
    let orgm = srv.post("/management/v1/orgs/me/members/_search", json!({})).await;
    assert_eq!(orgm.ok()["result"].as_array().unwrap().len(), 2);
    assert_eq!(srv.count("web_key").await, 1);
    assert!(srv.state.keys.active().is_some());
    // The admin's password verifies and must be changed at first sign-in.
    let mut c = srv.state.db.conn().await.unwrap();
    let u = latch::store::user::get_by_username(&mut c, "admin").await.unwrap().unwrap();
    let h = u.human().unwrap();
    assert!(h.password_change_required);
    assert!(
        latch::crypto::password::PasswordHasher::verify_blocking("Admin-Passw0rd!", h.password_hash.as_ref().unwrap())
            .unwrap()
    );
});

async fn second_start_changes_nothing(backend: Backend) {
    let srv = TestServer::start(backend).await;
    let tables = ["org", "org_domain", "account", "member", "pat", "web_key", "setting", "instance"];
    let mut before = Vec::new();
    for t in tables {
        before.push(srv.count(t).await);
    }
    let kid = srv.state.keys.active().unwrap().key_id.clone();
    let pat_before = std::fs::read_to_string(&srv.settings.first_instance.pat_path).unwrap();
    // Start a second time on the same store.
    let again = latch::app::start(srv.settings.clone(), srv.clock.clone()).await.unwrap();
    assert!(again.first_start.is_none());
    let mut after = Vec::new();
    for t in tables {
        after.push(srv.count(t).await);
    }
    assert_eq!(before, after);
    assert_eq!(again.state.keys.active().unwrap().key_id, kid);
    assert_eq!(std::fs::read_to_string(&srv.settings.first_instance.pat_path).unwrap(), pat_before);
    again.state.db.close().await;
    srv.stop().await;
}

#[tokio::test]
async fn second_start_changes_nothing_sqlite() {
    second_start_changes_nothing(Backend::Sqlite).await;
}

#[tokio::test]
async fn second_start_changes_nothing_postgres() {
    second_start_changes_nothing(Backend::Postgres).await;
}

#[tokio::test]
async fn a_wrong_master_key_stops_start_up_with_a_clear_error() {
    let srv = TestServer::start(Backend::Sqlite).await;
    let mut settings = srv.settings.clone();
    settings.masterkey = Some([9u8; 32]);
    let err = latch::app::start(settings, srv.clock.clone()).await.err().expect("start fails").to_string();
    assert!(err.contains("master key"), "{err}");
    srv.stop().await;
}

// The documentation's sample master key protects nothing: a new store is refused with it, and
// nothing is written; a store already sealed with it (from when the README showed it) starts.
#[tokio::test]
async fn the_sample_master_key_is_refused_for_a_new_store_only() {
    let sample: [u8; 32] = *b"MasterkeyNeedsToHave32Characters";
    let srv = TestServer::start(Backend::Sqlite).await;
    let mut fresh = srv.settings.clone();
    fresh.masterkey = Some(sample);
    let dir = tempfile::tempdir().unwrap();
    fresh.database_url = format!("sqlite://{}/fresh.db", dir.path().display());
    let err = latch::app::start(fresh.clone(), srv.clock.clone()).await.err().expect("start fails").to_string();
    assert!(err.contains("sample") && err.contains("openssl rand"), "{err}");
    let db = latch::store::Db::connect(&fresh.database_url, 1).await.unwrap();
    let mut c = db.conn().await.unwrap();
    assert!(latch::store::web_key::list(&mut c).await.unwrap().is_empty(), "no key sealed with it");
    drop(c);
    // A store whose keys are sealed with it: it starts (with a warning).
    let mut s = srv.settings.clone();
    s.database_url = fresh.database_url.clone();
    s.masterkey = Some(sample);
    let keys = latch::keys::KeyManager::new(db.clone(), &sample, srv.clock.clone(), s.keys.clone()).await.unwrap();
    keys.maintain().await.unwrap();
    let mut c = db.conn().await.unwrap();
    assert!(!latch::store::web_key::list(&mut c).await.unwrap().is_empty());
    drop(c);
    db.close().await;
    let started = latch::app::start(s, srv.clock.clone()).await;
    assert!(started.is_ok(), "{:?}", started.err().map(|e| e.to_string()));
    srv.stop().await;
}

// A first start whose bootstrap refused the configuration (here a weak administrator
// password), tried again with another master key (the first one was generated in a data folder
// that did not last, say), starts: the opaque-token key the failed start made had sealed nothing
// and is made anew. Once the instance exists, a wrong master key still stops the start.
#[tokio::test]
async fn a_failed_first_start_tried_again_with_another_master_key_starts() {
    let srv = TestServer::start(Backend::Sqlite).await;
    let dir = tempfile::tempdir().unwrap();
    let mut first = srv.settings.clone();
    first.database_url = format!("sqlite://{}/first.db", dir.path().display());
    first.first_instance.pat_path = dir.path().join("admin.pat");
    first.first_instance.admin_password = Some("weak".into());
    first.masterkey = Some([1u8; 32]);
    assert!(latch::app::start(first.clone(), srv.clock.clone()).await.is_err(), "the weak password is refused");
    let mut again = first.clone();
    again.first_instance.admin_password = Some("Admin-Passw0rd!".into());
    again.masterkey = Some([2u8; 32]);
    // Within five minutes the key may be another replica's, bootstrapping now with another
    // master key: that misconfiguration still stops the start.
    let err = latch::app::start(again.clone(), srv.clock.clone()).await.err().expect("start fails").to_string();
    assert!(err.contains("master key"), "{err}");
    srv.clock.advance(301);
    let started = latch::app::start(again.clone(), srv.clock.clone()).await;
    let started = started.map_err(|e| e.to_string()).expect("the second try starts");
    started.state.db.close().await;
    let mut wrong = again.clone();
    wrong.masterkey = Some([3u8; 32]);
    let err = latch::app::start(wrong, srv.clock.clone()).await.err().expect("start fails").to_string();
    assert!(err.contains("master key"), "{err}");
    srv.stop().await;
}
