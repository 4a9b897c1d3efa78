//! Human users through the management API, including bad input that must change nothing.

use serde_json::{Value, json};

use crate::harness::TestServer;
use crate::on_both;

pub fn alice() -> Value {
    json!({
        "userName": "alice",
        "profile": {"firstName": "Alice", "lastName": "Liddell", "nickName": "al", "preferredLanguage": "de", "gender": "GENDER_FEMALE"},
        "email": {"email": "alice@example.com", "isEmailVerified": true},
        "phone": {"phone": "+41 79 123 45 67", "isPhoneVerified": false},
        "initialPassword": "Wonder-land1"
    })
}

pub async fn create_alice(srv: &TestServer) -> String {
    let r = srv.post("/management/v1/users/human", alice()).await;
    r.ok()["userId"].as_str().unwrap().to_string()
}

on_both!(create_read_and_search_humans, |srv| {
    let r = srv.post("/management/v1/users/human", alice()).await;
    let body = r.ok().clone();
    let id = body["userId"].as_str().unwrap().to_string();
    assert!(body["details"]["creationDate"].is_string());
    assert!(body["details"]["resourceOwner"].is_string());

    let u = srv.get(&format!("/management/v1/users/{id}")).await;
    let u = u.ok()["user"].clone();
    assert_eq!(u["userName"], "alice");
    assert_eq!(u["state"], "USER_STATE_ACTIVE");
    assert_eq!(u["preferredLoginName"], "alice@latch.127.0.0.1");
    assert_eq!(u["human"]["profile"]["firstName"], "Alice");
    assert_eq!(u["human"]["profile"]["displayName"], "Alice Liddell");
    assert_eq!(u["human"]["profile"]["gender"], "GENDER_FEMALE");
    assert_eq!(u["human"]["profile"]["preferredLanguage"], "de");
    assert_eq!(u["human"]["email"]["isEmailVerified"], true);
    assert_eq!(u["human"]["phone"]["phone"], "+41 79 123 45 67");
    assert!(u["human"]["phone"].get("isPhoneVerified").is_none(), "false is omitted");
    assert!(u["human"]["passwordChanged"].is_string());

    // snake_case works as well as camelCase; enum numbers as well as names.
    let bob = json!({"user_name": "bob", "profile": {"first_name": "Bob", "last_name": "Builder", "gender": 2},
                     "email": {"email": "bob@example.com"}});
    let r = srv.post("/management/v1/users/human", bob).await;
    let bob_id = r.ok()["userId"].as_str().unwrap().to_string();
    let b = srv.get(&format!("/management/v1/users/{bob_id}")).await;
    assert_eq!(b.ok()["user"]["state"], "USER_STATE_INITIAL", "no password yet");
    assert_eq!(b.body["user"]["human"]["profile"]["gender"], "GENDER_MALE");

    let search = |q: Value| srv.post("/management/v1/users/_search", q);
    let r =
        search(json!({"queries": [{"userNameQuery": {"userName": "ali", "method": "TEXT_QUERY_METHOD_STARTS_WITH"}}]}))
            .await;
    assert_eq!(r.ok()["details"]["totalResult"], "1");
    assert_eq!(r.body["result"][0]["id"], id.as_str());
    let r = search(json!({"queries": [{"emailQuery": {"emailAddress": "BOB@EXAMPLE.COM", "method": "TEXT_QUERY_METHOD_EQUALS_IGNORE_CASE"}}]})).await;
    assert_eq!(r.ok()["result"][0]["id"], bob_id.as_str());
    // Case is ignored beyond ASCII too (SQLite's own lower() folds only A-Z).
    let umlaut = json!({"user_name": "ulla", "profile": {"first_name": "Ülla", "last_name": "Müller-Östra", "nick_name": "ΚΑΛΟΣΤΡΑΤΟΣ"},
                        "email": {"email": "ulla@example.com"}});
    let ulla = srv.post("/management/v1/users/human", umlaut).await.ok()["userId"].as_str().unwrap().to_string();
    for (query, method) in [
        (
            json!({"lastNameQuery": {"lastName": "MÜLLER-ÖSTRA", "method": "TEXT_QUERY_METHOD_EQUALS_IGNORE_CASE"}}),
            "equals",
        ),
        (
            json!({"lastNameQuery": {"lastName": "MÜL", "method": "TEXT_QUERY_METHOD_STARTS_WITH_IGNORE_CASE"}}),
            "starts",
        ),
        (
            json!({"firstNameQuery": {"firstName": "üLLA", "method": "TEXT_QUERY_METHOD_CONTAINS_IGNORE_CASE"}}),
            "contains",
        ),
        // A fragment ending in a capital sigma folds as the same letter inside the word does.
        (
            json!({"nickNameQuery": {"nickName": "ΚΑΛΟΣ", "method": "TEXT_QUERY_METHOD_STARTS_WITH_IGNORE_CASE"}}),
            "sigma",
        ),
    ] {
        let r = search(json!({"queries": [query]})).await;
        assert_eq!(r.ok()["details"]["totalResult"], "1", "{method}: {}", r.body);
        assert_eq!(r.body["result"][0]["id"], ulla.as_str());
    }
    let r = search(
        json!({"queries": [{"lastNameQuery": {"lastName": "MÜLLER-ÖSTRA", "method": "TEXT_QUERY_METHOD_EQUALS"}}]}),
    )
    .await;
    assert_eq!(r.ok()["details"]["totalResult"], "0", "case counts without IGNORE_CASE");
    srv.delete(&format!("/management/v1/users/{ulla}")).await.ok();
    let r = search(json!({"queries": [{"typeQuery": {"type": "TYPE_HUMAN"}}], "sortingColumn": "USER_FIELD_NAME_USER_NAME", "query": {"asc": true}})).await;
    let names: Vec<_> = r.ok()["result"].as_array().unwrap().iter().map(|u| u["userName"].as_str().unwrap()).collect();
    assert_eq!(names, vec!["admin", "alice", "bob"]);
    assert_eq!(r.body["sortingColumn"], "USER_FIELD_NAME_USER_NAME");
    let r = search(json!({"queries": [{"stateQuery": {"state": "USER_STATE_INITIAL"}}]})).await;
    assert_eq!(r.ok()["details"]["totalResult"], "1");
    let r = search(json!({"queries": [{"orQuery": {"queries": [
        {"userNameQuery": {"userName": "alice"}}, {"userNameQuery": {"userName": "bob"}}]}}]}))
    .await;
    assert_eq!(r.ok()["details"]["totalResult"], "2");
    let r = search(json!({"queries": [{"notQuery": {"query": {"typeQuery": {"type": "TYPE_HUMAN"}}}}]})).await;
    assert_eq!(r.ok()["details"]["totalResult"], "1", "only the machine administrator");
    let r = search(json!({"queries": [{"userNameQuery": {"userName": "%", "method": "TEXT_QUERY_METHOD_CONTAINS"}}]}))
        .await;
    assert_eq!(r.ok()["details"]["totalResult"], "0", "LIKE wildcards are escaped");
    let r = search(json!({"query": {"limit": 1, "offset": "1", "asc": true}})).await;
    assert_eq!(r.ok()["details"]["totalResult"], "4");
    assert_eq!(r.body["result"].as_array().unwrap().len(), 1);
    let r = search(json!({"queries": [{"loginNameQuery": {"loginName": "alice@latch.127.0.0.1"}}]})).await;
    assert_eq!(r.ok()["details"]["totalResult"], "1");

    search(json!({"queries": [{}]})).await.err(400, 3);
    search(json!({"queries": [{"userNameQuery": {"userName": "a"}, "typeQuery": {"type": 1}}]})).await.err(400, 3);
    search(json!({"query": {"limit": 100000}})).await.err(400, 3);
    search(json!({"sortingColumn": "USER_FIELD_NAME_SHOE_SIZE"})).await.err(400, 3);
    // Filters both stores can run, and a clear error past them (SQLite refused 1,000 chained
    // queries, 32,767 ids and 50,000-byte patterns with a 500).
    let state = json!({"stateQuery": {"state": "USER_STATE_ACTIVE"}});
    let r = search(json!({"queries": vec![state.clone(); 100]})).await;
    assert_eq!(r.ok()["details"]["totalResult"], "3");
    search(json!({"queries": vec![state; 1000]})).await.err(400, 3);
    let ids = |n: usize| json!({"queries": [{"inUserIdsQuery": {"userIds": vec!["1"; n]}}]});
    search(ids(1000)).await.ok();
    search(ids(40_000)).await.err(400, 3);
    let long = "a".repeat(60_000);
    search(json!({"queries": [{"userNameQuery": {"userName": long, "method": "TEXT_QUERY_METHOD_CONTAINS"}}]}))
        .await
        .err(400, 3);
    let orgs =
        |name: String| json!({"queries": [{"nameQuery": {"name": name, "method": "TEXT_QUERY_METHOD_CONTAINS"}}]});
    srv.post("/admin/v1/orgs/_search", orgs("a".repeat(60_000))).await.err(400, 3);
    srv.post("/admin/v1/orgs/_search", orgs("a".repeat(200))).await.ok();
});

on_both!(state_changes_and_removal, |srv| {
    let id = create_alice(srv).await;
    let path = |verb: &str| format!("/management/v1/users/{id}/{verb}");
    let state = || async {
        srv.get(&format!("/management/v1/users/{id}")).await.body["user"]["state"].as_str().unwrap().to_string()
    };

    srv.post(&path("_reactivate"), json!({})).await.err(400, 9);
    srv.post(&path("_unlock"), json!({})).await.err(400, 9);
    srv.post(&path("_deactivate"), json!({})).await.ok();
    assert_eq!(state().await, "USER_STATE_INACTIVE");
    srv.post(&path("_deactivate"), json!({})).await.err(400, 9);
    srv.post(&path("_lock"), json!({})).await.err(400, 9);
    srv.post(&path("_reactivate"), json!({})).await.ok();
    assert_eq!(state().await, "USER_STATE_ACTIVE");
    srv.post(&path("_lock"), json!({})).await.ok();
    assert_eq!(state().await, "USER_STATE_LOCKED");
    srv.post(&path("_unlock"), json!({})).await.ok();
    assert_eq!(state().await, "USER_STATE_ACTIVE");

    srv.delete(&format!("/management/v1/users/{id}")).await.ok();
    srv.get(&format!("/management/v1/users/{id}")).await.err(404, 5);
    srv.delete(&format!("/management/v1/users/{id}")).await.err(404, 5);
    srv.post(&path("_lock"), json!({})).await.err(404, 5);
    // The name is free again.
    create_alice(srv).await;
});

on_both!(password_email_and_profile, |srv| {
    let id = create_alice(srv).await;
    // Policy: 8 characters, upper, lower, number, symbol.
    let r = srv.post(&format!("/management/v1/users/{id}/password"), json!({"password": "short"})).await;
    let msg = r.err(400, 3).to_string();
    assert!(msg.contains("complexity") && msg.contains("too short"), "{msg}");
    srv.post(
        &format!("/management/v1/users/{id}/password"),
        json!({"password": "New-Passw0rd", "noChangeRequired": true}),
    )
    .await
    .ok();
    let mut c = srv.state.db.conn().await.unwrap();
    let u = latch::store::user::get(&mut c, &id).await.unwrap().unwrap();
    let h = u.human().unwrap();
    assert!(!h.password_change_required);
    assert!(h.password_hash.as_ref().unwrap().starts_with("$argon2id$"));
    assert!(
        latch::crypto::password::PasswordHasher::verify_blocking("New-Passw0rd", h.password_hash.as_ref().unwrap())
            .unwrap()
    );
    drop(c);

    let r = srv.get(&format!("/management/v1/users/{id}/email")).await;
    assert_eq!(r.ok()["email"]["email"], "alice@example.com");
    srv.put(&format!("/management/v1/users/{id}/email"), json!({"email": "alice@wonder.land"})).await.ok();
    let r = srv.get(&format!("/management/v1/users/{id}/email")).await;
    assert_eq!(r.ok()["email"]["email"], "alice@wonder.land");
    assert!(r.body["email"].get("isEmailVerified").is_none());
    srv.put(&format!("/management/v1/users/{id}/email"), json!({"email": "alice@wonder.land"})).await.err(400, 9);
    srv.put(&format!("/management/v1/users/{id}/email"), json!({"email": "not-an-address"})).await.err(400, 3);

    srv.put(
        &format!("/management/v1/users/{id}/profile"),
        json!({"firstName": "Alicia", "lastName": "L", "displayName": "Ali"}),
    )
    .await
    .ok();
    let r = srv.get(&format!("/management/v1/users/{id}")).await;
    assert_eq!(r.ok()["user"]["human"]["profile"]["displayName"], "Ali");
    srv.put(&format!("/management/v1/users/{id}/profile"), json!({"firstName": "", "lastName": "L"})).await.err(400, 3);

    // Human-only calls on a machine user.
    let (robot, _) = srv.machine_with_roles(None, "robot", &[]).await;
    srv.post(&format!("/management/v1/users/{robot}/password"), json!({"password": "New-Passw0rd"})).await.err(400, 9);
    srv.get(&format!("/management/v1/users/{robot}/email")).await.err(400, 9);
});

on_both!(bad_input_is_refused_and_changes_nothing, |srv| {
    let before = srv.count("account").await;
    let post = |body: String| srv.send("POST", "/management/v1/users/human", Some(&srv.pat), &[], Some(body));
    for (body, expect) in [
        ("{".to_string(), "invalid JSON"),
        ("[]".to_string(), "object"),
        (json!({"userName": 5}).to_string(), "userName"),
        (json!({"userName": "x", "profile": {"firstName": "A", "lastName": "B"}}).to_string(), "email"),
        (json!({"userName": "x", "email": {"email": "x@example.com"}}).to_string(), "profile"),
        (json!({"userName": "", "profile": {"firstName": "A", "lastName": "B"}, "email": {"email": "x@example.com"}}).to_string(), "userName"),
        (json!({"userName": "a".repeat(201), "profile": {"firstName": "A", "lastName": "B"}, "email": {"email": "x@example.com"}}).to_string(), "between 1 and 200"),
        (json!({"userName": "x y", "profile": {"firstName": "A", "lastName": "B"}, "email": {"email": "x@example.com"}}).to_string(), "spaces"),
        (json!({"userName": "x", "profile": {"firstName": "A", "lastName": "B", "gender": "GENDER_ROBOT"}, "email": {"email": "x@example.com"}}).to_string(), "GENDER_ROBOT"),
        (json!({"userName": "x", "profile": {"firstName": "A", "lastName": "B"}, "email": {"email": "nope"}}).to_string(), "email"),
        (json!({"userName": "x", "profile": {"firstName": "A\nVisit evil.example", "lastName": "B"}, "email": {"email": "x@example.com"}}).to_string(), "firstName: value must not contain control characters"),
        (json!({"userName": "x", "profile": {"firstName": "A", "lastName": "B", "displayName": "A\u{0}B"}, "email": {"email": "x@example.com"}}).to_string(), "displayName"),
        (json!({"userName": "x", "profile": {"firstName": "A", "lastName": "B"}, "email": {"email": "x@example.com"}, "phone": {"phone": "12345"}}).to_string(), "phone"),
        (json!({"userName": "x", "profile": {"firstName": "A", "lastName": "B"}, "email": {"email": "x@example.com"}, "initialPassword": "weak"}).to_string(), "complexity"),
    ] {
        let r = post(body.clone()).await;
        let msg = r.err(400, 3);
        assert!(msg.contains(expect), "{body}: {msg}");
    }
    // Duplicates: the same user name in any case, in any organization.
    create_alice(srv).await;
    let mut dup = alice();
    dup["userName"] = json!("ALICE");
    srv.post("/management/v1/users/human", dup).await.err(409, 6);
    let org = srv.post("/management/v1/orgs", json!({"name": "Other"})).await;
    let org = org.ok()["id"].as_str().unwrap().to_string();
    let r = srv.call_as(Some(&srv.pat), Some(&org), "POST", "/management/v1/users/human", alice()).await;
    r.err(409, 6);
    assert_eq!(srv.count("account").await, before + 1);

    // Missing, malformed or unknown bearer tokens.
    srv.call_as(None, None, "GET", "/management/v1/orgs/me", json!(null)).await.err(401, 16);
    let r = srv.send("GET", "/management/v1/orgs/me", None, &[("authorization", "Basic Zm9vOmJhcg==")], None).await;
    r.err(401, 16);
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    srv.call_as(Some("not-a-token"), None, "GET", "/management/v1/orgs/me", json!(null)).await.err(401, 16);
    srv.get("/management/v1/users/999").await.err(404, 5);
});

on_both!(permissions_across_organizations, |srv| {
    // A user manager of the default org may manage users, not projects or other organizations.
    let (_, manager) = srv.machine_with_roles(None, "user-manager", &["ORG_USER_MANAGER"]).await;
    let r = srv.call_as(Some(&manager), None, "POST", "/management/v1/users/human", alice()).await;
    r.ok();
    srv.call_as(Some(&manager), None, "POST", "/management/v1/projects", json!({"name": "P"})).await.err(403, 7);
    srv.call_as(Some(&manager), None, "POST", "/admin/v1/orgs/_search", json!({})).await.err(403, 7);
    let org = srv.post("/management/v1/orgs", json!({"name": "Second"})).await;
    let org = org.ok()["id"].as_str().unwrap().to_string();
    let r = srv.call_as(Some(&manager), Some(&org), "POST", "/management/v1/users/_search", json!({})).await;
    r.err(403, 7);
    // A user name may not be a login name of another organization, whatever its case; a
    // domain of its own organization is fine.
    let mut taker = alice();
    taker["userName"] = json!("Carol@SECOND.127.0.0.1");
    let msg =
        srv.call_as(Some(&manager), None, "POST", "/management/v1/users/human", taker).await.err(400, 3).to_string();
    assert!(msg.contains("domain of another organization"), "{msg}");
    let machine = json!({"userName": "carol@second.127.0.0.1", "name": "C"});
    srv.post("/management/v1/users/machine", machine).await.err(400, 3);
    srv.post("/management/v1/users/machine", json!({"userName": "robot@latch.127.0.0.1", "name": "R"})).await.ok();
    // Compared as user names are (folded): a KELVIN SIGN is a k.
    let org_k = srv.post("/management/v1/orgs", json!({"name": "Kilo"})).await;
    let org_k = org_k.ok()["id"].as_str().unwrap().to_string();
    let r = srv.call_as(Some(&srv.pat), Some(&org_k), "GET", "/management/v1/orgs/me", json!(null)).await;
    let kilo_domain = r.ok()["org"]["primaryDomain"].as_str().unwrap().to_string();
    assert!(kilo_domain.starts_with("kilo."), "{kilo_domain}");
    let disguised = format!("ceo@\u{212A}{}", &kilo_domain[1..]);
    srv.post("/management/v1/users/machine", json!({"userName": disguised, "name": "C"})).await.err(400, 3);
    // A domain whose login names users elsewhere already hold cannot be added.
    srv.post("/management/v1/users/machine", json!({"userName": "zed@third.example", "name": "Z"})).await.ok();
    let r = srv
        .call_as(
            Some(&srv.pat),
            Some(&org),
            "POST",
            "/management/v1/orgs/me/domains",
            json!({"domain": "Third.example"}),
        )
        .await;
    assert!(r.err(400, 9).contains("user names in this domain"), "{}", r.text);
    // An org header that names nothing is refused (not read as the caller's own organization).
    let r = srv.send("GET", "/management/v1/orgs/me", Some(&srv.pat), &[("x-latch-orgid", " ")], None).await;
    assert!(r.err(400, 3).contains("x-latch-orgid"), "{}", r.text);
    // ZITADEL's name for the header works the same; two that disagree are refused.
    let r = srv.send("GET", "/management/v1/orgs/me", Some(&srv.pat), &[("x-zitadel-orgid", " ")], None).await;
    r.err(400, 3);
    let own = srv.get("/management/v1/orgs/me").await.ok()["org"]["id"].as_str().unwrap().to_string();
    let other =
        srv.post("/management/v1/orgs", json!({"name": "Header Org"})).await.ok()["id"].as_str().unwrap().to_string();
    let r = srv.send("GET", "/management/v1/orgs/me", Some(&srv.pat), &[("x-zitadel-orgid", &other)], None).await;
    assert_eq!(r.ok()["org"]["id"], other.as_str());
    let both = [("x-latch-orgid", other.as_str()), ("x-zitadel-orgid", other.as_str())];
    let r = srv.send("GET", "/management/v1/orgs/me", Some(&srv.pat), &both, None).await;
    assert_eq!(r.ok()["org"]["id"], other.as_str());
    let differ = [("x-latch-orgid", other.as_str()), ("x-zitadel-orgid", own.as_str())];
    srv.send("GET", "/management/v1/orgs/me", Some(&srv.pat), &differ, None).await.err(400, 3);
    // Without the IAM role an unknown org id is "denied", with it "not found".
    srv.call_as(Some(&manager), Some("12345"), "GET", "/management/v1/orgs/me", json!(null)).await.err(403, 7);
    srv.call_as(Some(&srv.pat), Some("12345"), "GET", "/management/v1/orgs/me", json!(null)).await.err(404, 5);
    // An instance owner acts on the other organization; its users stay there.
    let r = srv.call_as(Some(&srv.pat), Some(&org), "POST", "/management/v1/users/human",
        json!({"userName": "carol", "profile": {"firstName": "C", "lastName": "D"}, "email": {"email": "c@example.com"}})).await;
    let carol = r.ok()["userId"].as_str().unwrap().to_string();
    let r = srv.call_as(Some(&srv.pat), Some(&org), "GET", &format!("/management/v1/users/{carol}"), json!(null)).await;
    assert_eq!(r.ok()["user"]["preferredLoginName"], "carol@second.127.0.0.1");
    srv.get(&format!("/management/v1/users/{carol}")).await.err(404, 5);
    srv.call_as(Some(&manager), None, "GET", &format!("/management/v1/users/{carol}"), json!(null)).await.err(404, 5);
});

on_both!(administrators_are_changed_only_by_who_may_manage_them, |srv| {
    // The bootstrap's two instance owners (human "admin" and a machine user), an organization
    // owner, a user manager of the organization and one of the instance.
    let iam = srv.post("/admin/v1/members/_search", json!({})).await;
    let owners: Vec<String> =
        iam.ok()["result"].as_array().unwrap().iter().map(|m| m["userId"].as_str().unwrap().to_string()).collect();
    let mut c = srv.state.db.conn().await.unwrap();
    let admin = latch::store::user::get_by_username(&mut c, "admin").await.unwrap().unwrap().user_id;
    drop(c);
    let owner_machine = owners.iter().find(|id| **id != admin).unwrap().clone();
    let (org_owner, _) = srv.machine_with_roles(None, "org-owner", &["ORG_OWNER"]).await;
    let (org_mgr_id, org_mgr) = srv.machine_with_roles(None, "org-user-manager", &["ORG_USER_MANAGER"]).await;
    let (iam_mgr_id, iam_mgr) = srv.machine_with_roles(None, "iam-user-manager", &[]).await;
    srv.post("/admin/v1/members", json!({"userId": iam_mgr_id, "roles": ["IAM_USER_MANAGER"]})).await.ok();
    let (plain, _) = srv.machine_with_roles(None, "plain", &[]).await;
    // Owners elsewhere: users of this organization with no role in it, one owning another
    // organization, one owning a project.
    let (owner_elsewhere, _) = srv.machine_with_roles(None, "owner-elsewhere", &[]).await;
    let other =
        srv.post("/management/v1/orgs", json!({"name": "Elsewhere"})).await.ok()["id"].as_str().unwrap().to_string();
    let members = "/management/v1/orgs/me/members";
    let body = json!({"userId": owner_elsewhere, "roles": ["ORG_OWNER"]});
    srv.call_as(Some(&srv.pat), Some(&other), "POST", members, body).await.ok();
    let (project_owner, _) = srv.machine_with_roles(None, "project-owner", &[]).await;
    let project =
        srv.post("/management/v1/projects", json!({"name": "Owned"})).await.ok()["id"].as_str().unwrap().to_string();
    // (Project members come only with an import: written to the store here.)
    let mut c = srv.state.db.conn().await.unwrap();
    let roles = ["PROJECT_OWNER".to_string()];
    latch::store::member::insert(&mut c, latch::store::member::Scope::Project, &project, &project_owner, &roles, 0)
        .await
        .unwrap();
    drop(c);
    let pats = srv.count("pat").await;

    let machine_calls = |id: &str| {
        vec![
            ("POST", format!("/management/v1/users/{id}/pats"), json!({})),
            ("PUT", format!("/management/v1/users/{id}/secret"), json!({})),
            ("POST", format!("/management/v1/users/{id}/keys"), json!({"type": "KEY_TYPE_JSON"})),
            ("PUT", format!("/management/v1/users/{id}/machine"), json!({"name": "mine now"})),
            ("POST", format!("/management/v1/users/{id}/_lock"), json!({})),
            ("DELETE", format!("/management/v1/users/{id}"), json!(null)),
        ]
    };
    let human_calls = |id: &str| {
        vec![
            ("POST", format!("/management/v1/users/{id}/password"), json!({"password": "Taken-0ver-Password!"})),
            ("PUT", format!("/management/v1/users/{id}/email"), json!({"email": "mine@example.com"})),
            ("PUT", format!("/management/v1/users/{id}/profile"), json!({"firstName": "M", "lastName": "E"})),
            ("POST", format!("/management/v1/users/{id}/_deactivate"), json!({})),
        ]
    };
    // User managers cannot change an instance owner; the organization's user manager cannot
    // change the organization's owner, nor can the instance's (it may not manage org members).
    for (who, token) in [("org user manager", &org_mgr), ("iam user manager", &iam_mgr)] {
        let calls = [
            machine_calls(&owner_machine),
            human_calls(&admin),
            machine_calls(&org_owner),
            machine_calls(&owner_elsewhere),
            machine_calls(&project_owner),
        ]
        .concat();
        for (method, path, body) in calls {
            let r = srv.call_as(Some(token), None, method, &path, body).await;
            let msg = r.err(403, 7);
            assert!(msg.contains("administrator"), "{who} {method} {path}: {msg}");
        }
    }
    assert_eq!(srv.count("pat").await, pats, "no token was added to an administrator");
    let mut c = srv.state.db.conn().await.unwrap();
    let a = latch::store::user::get(&mut c, &admin).await.unwrap().unwrap();
    assert_ne!(a.human().unwrap().email, "mine@example.com");
    assert_eq!(a.state, latch::domain::enums::UserState::Active);
    drop(c);

    // They may change users who administer nothing, and themselves.
    srv.call_as(Some(&org_mgr), None, "POST", &format!("/management/v1/users/{plain}/pats"), json!({})).await.ok();
    srv.call_as(Some(&iam_mgr), None, "PUT", &format!("/management/v1/users/{plain}/secret"), json!({})).await.ok();
    let own = format!("/management/v1/users/{org_mgr_id}/secret");
    srv.call_as(Some(&org_mgr), None, "PUT", &own, json!({})).await.ok();
    // The instance owner may change everyone: here the organization owner.
    srv.post(&format!("/management/v1/users/{org_owner}/pats"), json!({})).await.ok();
    assert_eq!(srv.count("pat").await, pats + 2);
});

// UpdateUserName: a new name meets every rule a new user's does; sign-in and a machine user's
// client_credentials follow it.
on_both!(user_names_change_under_the_rules_of_new_ones, |srv| {
    let alice = crate::browser::human(srv, "alice", "Wonder-land1").await;
    crate::browser::human(srv, "bob", "Builder-b0b1").await;
    let path = format!("/management/v1/users/{alice}/username");
    srv.put(&path, json!({"userName": "alice"})).await.err(400, 9);
    srv.put(&path, json!({"userName": "a b"})).await.err(400, 3);
    srv.put(&path, json!({"userName": "BOB"})).await.err(409, 6);
    assert!(srv.put(&path, json!({"userName": "bob@example.com"})).await.err(409, 6).contains("login name"));
    srv.put("/management/v1/users/404/username", json!({"userName": "x"})).await.err(404, 5);
    // Her own address, or her own name in other letters' case, are hers to take.
    srv.put(&path, json!({"userName": "alice@example.com"})).await.ok();
    srv.put(&path, json!({"userName": "ALICE@example.com"})).await.ok();
    srv.put(&path, json!({"userName": "alice.new"})).await.ok();
    assert_eq!(srv.get(&format!("/management/v1/users/{alice}")).await.ok()["user"]["userName"], "alice.new");
    let sign_in = |name: &'static str| async move {
        let b = crate::browser::Browser::new(srv);
        let (id, page) = crate::login::start(srv, &b, &[]).await;
        b.sign_in(&id, &page, name, "Wonder-land1").await
    };
    assert_eq!(sign_in("alice.new").await.status, 303);
    assert!(sign_in("alice").await.html.contains("The login name or the password is wrong."));

    let (robot, secret) = crate::token::machine(srv, "robot", false).await;
    let cc = |id: &'static str| {
        let secret = secret.clone();
        async move {
            crate::token::token(srv, Some((id, &secret)), &[("grant_type", "client_credentials"), ("scope", "openid")])
                .await
        }
    };
    let before = cc("robot").await;
    let before = before.ok()["access_token"].as_str().unwrap().to_string();
    let userinfo =
        |token: String| async move { srv.send("GET", "/oidc/v1/userinfo", Some(&token), &[], None).await.status };
    assert_eq!(userinfo(before.clone()).await, 200);
    srv.clock.advance(1); // cut-offs count in whole seconds
    srv.put(&format!("/management/v1/users/{robot}/username"), json!({"userName": "robot2"})).await.ok();
    cc("robot").await.err(401, "invalid_client");
    let after = cc("robot2").await;
    // The tokens of the old name end with it (another machine user may take the name now).
    assert_eq!(userinfo(before).await, 401);
    assert_eq!(userinfo(after.ok()["access_token"].as_str().unwrap().to_string()).await, 200);
    // A machine user's name may not be a user's id (it would match that user's jwt-bearer
    // tokens, whose client_id is the user id).
    let r = srv.post("/management/v1/users/machine", json!({"userName": alice, "name": "m"})).await;
    assert!(r.err(400, 3).contains("user's id"), "{}", r.text);
});

// ResendHumanInitialization (to a corrected address), ResendHumanEmailVerification, and
// IsUserUnique.
on_both!(codes_mailed_again_and_names_checked_for_uniqueness, |srv| {
    let body = json!({"userName": "gina", "profile": {"firstName": "Gina", "lastName": "G"},
                      "email": {"email": "gina@example.com"}});
    let gina = srv.post("/management/v1/users/human", body).await.ok()["userId"].as_str().unwrap().to_string();
    let mailed = |to: &'static str, n: usize| async move {
        for _ in 0..250 {
            if srv.outbox_to(to).len() >= n {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        srv.outbox_to(to).len()
    };
    let path = format!("/management/v1/users/{gina}");
    srv.post(&format!("{path}/_resend_initialization"), json!({"email": "not an address"})).await.err(400, 3);
    srv.post(&format!("{path}/_resend_initialization"), json!({"email": "gina@example.org"})).await.ok();
    assert_eq!(mailed("gina@example.org", 1).await, 1);
    let email = srv.get(&format!("{path}/email")).await;
    assert_eq!(email.ok()["email"]["email"], "gina@example.org", "{}", email.text);
    srv.post(&format!("{path}/email/_resend_verification"), json!({})).await.ok();
    assert_eq!(mailed("gina@example.org", 2).await, 2);
    // Not for a user with a password, nor for a verified address.
    let alice = crate::browser::human(srv, "alice", "Wonder-land1").await;
    let alice_path = format!("/management/v1/users/{alice}");
    srv.post(&format!("{alice_path}/_resend_initialization"), json!({})).await.err(400, 9);
    srv.post(&format!("{alice_path}/email/_resend_verification"), json!({})).await.err(400, 9);
    srv.post("/management/v1/users/404/_resend_initialization", json!({})).await.err(404, 5);

    let unique = |query: &'static str| async move {
        let r = srv.get(&format!("/management/v1/users/_is_unique?{query}")).await;
        r.ok()["isUnique"].as_bool().unwrap()
    };
    assert!(unique("userName=nobody&email=nobody%40example.com").await);
    assert!(!unique("userName=ALICE").await);
    assert!(!unique("userName=alice%40example.com").await, "alice's address signs her in");
    assert!(!unique("email=Alice%40Example.com").await);
    // The gateway's proto name of the field works as its JSON name does.
    assert!(!unique("user_name=alice").await);
    srv.get("/management/v1/users/_is_unique?userName=a&userName=b").await.err(400, 3);
    srv.get("/management/v1/users/_is_unique?userName=a&user_name=b").await.err(400, 3);
});

on_both!(a_user_found_by_login_name_in_any_organization_and_an_initial_password_set, |srv| {
    let r = srv.post("/management/v1/orgs", json!({"name": "Initech"})).await;
    let initech = r.ok()["id"].as_str().unwrap().to_string();
    let r = srv
        .call_as(
            Some(&srv.pat),
            Some(&initech),
            "POST",
            "/management/v1/users/human",
            json!({"userName": "alice", "profile": {"firstName": "Alice", "lastName": "A"},
                   "email": {"email": "alice@example.com"}}),
        )
        .await;
    let alice = r.ok()["userId"].as_str().unwrap().to_string();
    // By user name, or by user name at one of the organization's domains; not by address.
    let by = |name: &'static str| async move {
        srv.get(&format!("/management/v1/global/users/_by_login_name?loginName={name}")).await
    };
    assert_eq!(by("alice").await.ok()["user"]["id"], alice.as_str());
    let proto_name = srv.get("/management/v1/global/users/_by_login_name?login_name=alice").await;
    assert_eq!(proto_name.ok()["user"]["id"], alice.as_str());
    assert_eq!(by("ALICE@initech.127.0.0.1").await.ok()["user"]["id"], alice.as_str());
    by("alice@example.com").await.err(404, 5);
    by("alice@other.example").await.err(404, 5);
    by("").await.err(400, 3);
    // As long as a user name at a domain may be.
    let long = format!("/management/v1/global/users/_by_login_name?loginName={}@initech.127.0.0.1", "a".repeat(200));
    srv.get(&long).await.err(404, 5);
    let too_long = format!("/management/v1/global/users/_by_login_name?loginName={}", "a".repeat(402));
    srv.get(&too_long).await.err(400, 3);
    srv.get("/management/v1/global/users/_by_login_name").await.err(400, 3);
    srv.get("/management/v1/global/users/_by_login_name?loginName=a&loginName=b").await.err(400, 3);
    // It needs an instance role: an organization owner may not look across organizations.
    let (_, owner) = srv.machine_with_roles(None, "owner", &["ORG_OWNER"]).await;
    let r = srv.call_as(
        Some(&owner),
        None,
        "GET",
        "/management/v1/global/users/_by_login_name?loginName=alice",
        json!(null),
    );
    r.await.err(403, 7);

    // SetHumanInitialPassword: once, for a user who has none, under the password rules; to be
    // changed at the first sign-in.
    let init_path = format!("/management/v1/users/{alice}/password/_initialize");
    let init = |body: serde_json::Value| srv.call_as(Some(&srv.pat), Some(&initech), "POST", &init_path, body);
    init(json!({"password": "short"})).await.err(400, 3);
    init(json!({"password": "Wonder-land1"})).await.ok();
    init(json!({"password": "Wonder-land2"})).await.err(400, 9);
    let mut c = srv.state.db.conn().await.unwrap();
    let u = latch::store::user::get(&mut c, &alice).await.unwrap().unwrap();
    assert_eq!(u.state, latch::domain::enums::UserState::Active);
    assert!(u.human().unwrap().password_change_required);
    drop(c);
    let (robot, _) = srv.machine_with_roles(None, "robot", &[]).await;
    srv.post(&format!("/management/v1/users/{robot}/password/_initialize"), json!({"password": "Wonder-land1"}))
        .await
        .err(400, 9);
});

// A user's cut-off only moves forward: a replica whose clock is behind another's never moves it
// back (which would bring the tokens issued in between back to life).
on_both!(a_cut_off_only_moves_forward, |srv| {
    use latch::store::user;
    let id = crate::browser::human(srv, "alice", "Wonder-land1").await;
    let mut c = srv.state.db.conn().await.unwrap();
    let org = user::get(&mut c, &id).await.unwrap().unwrap().org_id;
    let t = crate::harness::now() + 1000;
    user::cut_off_tokens(&mut c, &id, t + 100).await.unwrap();
    user::cut_off_tokens(&mut c, &id, t).await.unwrap();
    user::cut_off_org_tokens(&mut c, &org, t + 50).await.unwrap();
    assert_eq!(user::get(&mut c, &id).await.unwrap().unwrap().tokens_valid_from, t + 100);
    user::cut_off_org_tokens(&mut c, &org, t + 200).await.unwrap();
    assert_eq!(user::get(&mut c, &id).await.unwrap().unwrap().tokens_valid_from, t + 200);
    user::cut_off_tokens(&mut c, &id, t + 300).await.unwrap();
    assert_eq!(user::get(&mut c, &id).await.unwrap().unwrap().tokens_valid_from, t + 300);
});
