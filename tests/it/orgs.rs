//! Organizations, domains, members, and the admin organization calls.

use serde_json::json;

use crate::on_both;

on_both!(organizations_and_domains, |srv| {
    let r = srv.post("/management/v1/orgs", json!({"name": "Acme Corp"})).await;
    let acme = r.ok()["id"].as_str().unwrap().to_string();
    srv.post("/management/v1/orgs", json!({"name": "ACME corp"})).await.err(409, 6);
    srv.post("/management/v1/orgs", json!({"name": ""})).await.err(400, 3);
    srv.post("/management/v1/orgs", json!({"name": "x".repeat(201)})).await.err(400, 3);

    let on = |m: &'static str, p: &'static str, b: serde_json::Value| srv.call_as(Some(&srv.pat), Some(&acme), m, p, b);
    let org = on("GET", "/management/v1/orgs/me", json!(null)).await;
    assert_eq!(org.ok()["org"]["name"], "Acme Corp");
    assert_eq!(org.body["org"]["primaryDomain"], "acme-corp.127.0.0.1");
    assert_eq!(org.body["org"]["state"], "ORG_STATE_ACTIVE");

    // The creator owns the new organization.
    let members = on("POST", "/management/v1/orgs/me/members/_search", json!({})).await;
    assert_eq!(members.ok()["result"][0]["roles"], json!(["ORG_OWNER"]));

    on("PUT", "/management/v1/orgs/me", json!({"name": "Acme Inc"})).await.ok();
    on("PUT", "/management/v1/orgs/me", json!({"name": "Acme Inc"})).await.err(400, 9);
    on("PUT", "/management/v1/orgs/me", json!({"name": "latch"})).await.err(409, 6);

    on("POST", "/management/v1/orgs/me/domains", json!({"domain": "acme.example"})).await.ok();
    on("POST", "/management/v1/orgs/me/domains", json!({"domain": "ACME.example"})).await.err(409, 6);
    on("POST", "/management/v1/orgs/me/domains", json!({"domain": "not a domain"})).await.err(400, 3);
    srv.post("/management/v1/orgs/me/domains", json!({"domain": "acme.example"})).await.err(409, 6);
    let d = on("POST", "/management/v1/orgs/me/domains/_search", json!({})).await;
    assert_eq!(d.ok()["details"]["totalResult"], "2");
    // The reference's filter by name; a query naming nothing is refused, not ignored.
    let by_name = json!({"queries": [{"domainNameQuery": {"name": "ACME.", "method": "TEXT_QUERY_METHOD_STARTS_WITH_IGNORE_CASE"}}]});
    let d = on("POST", "/management/v1/orgs/me/domains/_search", by_name).await;
    assert_eq!(d.ok()["details"]["totalResult"], "1", "{}", d.text);
    assert_eq!(d.body["result"][0]["domainName"], "acme.example");
    on("POST", "/management/v1/orgs/me/domains/_search", json!({"queries": [{}]})).await.err(400, 3);
    on("POST", "/management/v1/orgs/me/domains/acme.example/_set_primary", json!(null)).await.ok();
    let org = on("GET", "/management/v1/orgs/me", json!(null)).await;
    assert_eq!(org.ok()["org"]["primaryDomain"], "acme.example");
    on("POST", "/management/v1/orgs/me/domains/other.example/_set_primary", json!(null)).await.err(404, 5);
    // Login names follow the primary domain.
    let r = on("POST", "/management/v1/users/machine", json!({"userName": "svc", "name": "Svc"})).await;
    let svc = r.ok()["userId"].as_str().unwrap().to_string();
    let u = srv.call_as(Some(&srv.pat), Some(&acme), "GET", &format!("/management/v1/users/{svc}"), json!(null)).await;
    assert_eq!(u.ok()["user"]["preferredLoginName"], "svc@acme.example");
    on("DELETE", "/management/v1/orgs/me/domains/acme.example", json!(null)).await.err(400, 9);
    on("DELETE", "/management/v1/orgs/me/domains/acme-corp.127.0.0.1", json!(null)).await.ok();
});

on_both!(org_members, |srv| {
    let (robot, _) = srv.machine_with_roles(None, "robot", &[]).await;
    let path = "/management/v1/orgs/me/members";
    srv.post(path, json!({"userId": robot, "roles": ["ORG_NOT_A_ROLE"]})).await.err(400, 3);
    srv.post(path, json!({"userId": robot, "roles": ["IAM_OWNER"]})).await.err(400, 3);
    srv.post(path, json!({"userId": robot, "roles": []})).await.err(400, 3);
    srv.post(path, json!({"userId": "404", "roles": ["ORG_OWNER"]})).await.err(404, 5);
    srv.post(path, json!({"userId": robot, "roles": ["ORG_USER_MANAGER"]})).await.ok();
    srv.post(path, json!({"userId": robot, "roles": ["ORG_OWNER"]})).await.err(409, 6);
    srv.put(&format!("{path}/{robot}"), json!({"roles": ["ORG_OWNER_VIEWER"]})).await.ok();
    let r = srv.post(&format!("{path}/_search"), json!({})).await;
    let m = r.ok()["result"].as_array().unwrap().iter().find(|m| m["userId"] == robot.as_str()).unwrap().clone();
    assert_eq!(m["roles"], json!(["ORG_OWNER_VIEWER"]));
    assert_eq!(m["userType"], "TYPE_MACHINE");
    // The reference's filters (AND-combined): by user id, by a human's names or address; a
    // machine user has none of those. A filter naming nothing is refused, not ignored (which
    // would answer every member).
    let search_path = format!("{path}/_search");
    let search = |queries: serde_json::Value| srv.post(&search_path, json!({"queries": queries}));
    let ids = |r: crate::harness::Resp| -> Vec<String> {
        r.ok()["result"]
            .as_array()
            .map(|a| a.iter().map(|m| m["userId"].as_str().unwrap().to_string()).collect())
            .unwrap_or_default()
    };
    assert_eq!(ids(search(json!([{"userIdQuery": {"userId": robot}}])).await), std::slice::from_ref(&robot));
    let admin =
        search(json!([{"emailQuery": {"email": "ADMIN@", "method": "TEXT_QUERY_METHOD_STARTS_WITH_IGNORE_CASE"}}]))
            .await;
    let admin = ids(admin);
    assert_eq!(admin.len(), 1, "{admin:?}");
    assert!(!admin.contains(&robot));
    let none = search(json!([{"userIdQuery": {"userId": robot}}, {"firstNameQuery": {"firstName": "robot"}}])).await;
    assert!(ids(none).is_empty());
    search(json!([{}])).await.err(400, 3);
    search(json!([{"userIdQuery": {"userId": robot}, "emailQuery": {"email": "x"}}])).await.err(400, 3);
    srv.delete(&format!("{path}/{robot}")).await.ok();
    srv.delete(&format!("{path}/{robot}")).await.err(404, 5);
    let roles = srv.post("/management/v1/orgs/members/roles/_search", json!({})).await;
    assert!(roles.ok()["result"].as_array().unwrap().contains(&json!("ORG_OWNER")));
});

on_both!(admin_setup_search_get_and_iam_members, |srv| {
    let body = json!({
        "org": {"name": "Globex", "domain": "globex.example"},
        "human": {"userName": "hank", "profile": {"firstName": "Hank", "lastName": "Scorpio"},
                  "email": {"email": "hank@globex.example", "isEmailVerified": true}, "password": "Volcano-Lair1"}
    });
    let r = srv.post("/admin/v1/orgs/_setup", body.clone()).await;
    let org = r.ok()["orgId"].as_str().unwrap().to_string();
    let hank = r.body["userId"].as_str().unwrap().to_string();
    srv.post("/admin/v1/orgs/_setup", body).await.err(409, 6);
    let before = srv.count("org").await;
    let bad = json!({"org": {"name": "Bad"}, "human": {"userName": "bad", "profile": {"firstName": "B", "lastName": "C"},
                     "email": {"email": "b@example.com"}}, "roles": ["NOPE"]});
    srv.post("/admin/v1/orgs/_setup", bad).await.err(400, 3);
    // A user name already taken aborts the whole set-up: no organization is left behind.
    let taken = json!({"org": {"name": "Taken"}, "human": {"userName": "hank", "profile": {"firstName": "B", "lastName": "C"},
                       "email": {"email": "b@example.com"}}});
    srv.post("/admin/v1/orgs/_setup", taken).await.err(409, 6);
    assert_eq!(srv.count("org").await, before);

    let r = srv.get(&format!("/admin/v1/orgs/{org}")).await;
    assert_eq!(r.ok()["org"]["primaryDomain"], "globex.example");
    srv.get("/admin/v1/orgs/404").await.err(404, 5);
    let m = srv.call_as(Some(&srv.pat), Some(&org), "POST", "/management/v1/orgs/me/members/_search", json!({})).await;
    assert_eq!(m.ok()["result"][0]["userId"], hank.as_str());
    assert_eq!(m.body["result"][0]["roles"], json!(["ORG_OWNER"]));

    let r = srv.post("/admin/v1/orgs/_search", json!({"queries": [{"nameQuery": {"name": "glob", "method": "TEXT_QUERY_METHOD_STARTS_WITH_IGNORE_CASE"}}]})).await;
    assert_eq!(r.ok()["details"]["totalResult"], "1");
    let r =
        srv.post("/admin/v1/orgs/_search", json!({"queries": [{"domainQuery": {"domain": "globex.example"}}]})).await;
    assert_eq!(r.ok()["result"][0]["id"], org.as_str());
    let r = srv
        .post("/admin/v1/orgs/_search", json!({"sortingColumn": "ORG_FIELD_NAME_NAME", "query": {"asc": true}}))
        .await;
    let names: Vec<_> = r.ok()["result"].as_array().unwrap().iter().map(|o| o["name"].as_str().unwrap()).collect();
    assert_eq!(names, vec!["Globex", "latch"]);
    let r =
        srv.post("/admin/v1/orgs/_search", json!({"queries": [{"stateQuery": {"state": "ORG_STATE_INACTIVE"}}]})).await;
    assert_eq!(r.ok()["details"]["totalResult"], "0");
    srv.post("/admin/v1/orgs/_search", json!({"queries": [{"idQuery": {"id": org}, "nameQuery": {"name": "x"}}]}))
        .await
        .err(400, 3);

    // Instance members.
    srv.post("/admin/v1/members", json!({"userId": hank, "roles": ["ORG_OWNER"]})).await.err(400, 3);
    srv.post("/admin/v1/members", json!({"userId": hank, "roles": ["IAM_OWNER_VIEWER"]})).await.ok();
    let r = srv.post("/admin/v1/members/_search", json!({})).await;
    assert_eq!(r.ok()["details"]["totalResult"], "3");
    srv.put(&format!("/admin/v1/members/{hank}"), json!({"roles": ["IAM_USER_MANAGER"]})).await.ok();
    srv.delete(&format!("/admin/v1/members/{hank}")).await.ok();
    let r = srv.post("/admin/v1/members/_search", json!({"queries": [{"userIdQuery": {"userId": hank}}]})).await;
    assert_eq!(r.ok()["details"]["totalResult"], "0", "hank is no instance member any more");
    // ListIAMMemberRolesResponse: `details` and `roles` (the organization's call: `result`).
    let r = srv.post("/admin/v1/members/roles/_search", json!({})).await;
    assert!(r.ok()["roles"].as_array().unwrap().contains(&json!("IAM_OWNER")), "{}", r.text);
    assert!(r.body["details"]["totalResult"].is_string(), "{}", r.text);

    // The instance keeps an owner: the first-instance human and machine both own it; once the
    // human is gone, the machine (the caller here) is the last and stays.
    let owners = srv.post("/admin/v1/members/_search", json!({})).await;
    let owners: Vec<String> =
        owners.ok()["result"].as_array().unwrap().iter().map(|m| m["userId"].as_str().unwrap().to_string()).collect();
    let mut c = srv.state.db.conn().await.unwrap();
    let admin = latch::store::user::get_by_username(&mut c, "admin").await.unwrap().unwrap().user_id;
    drop(c);
    let machine = owners.iter().find(|id| **id != admin).unwrap().clone();
    srv.delete(&format!("/admin/v1/members/{admin}")).await.ok();
    let last = |r: crate::harness::Resp| {
        let msg = r.err(400, 9);
        assert!(msg.contains("last IAM_OWNER"), "{msg}");
    };
    last(srv.delete(&format!("/admin/v1/members/{machine}")).await);
    last(srv.put(&format!("/admin/v1/members/{machine}"), json!({"roles": ["IAM_OWNER_VIEWER"]})).await);
    last(srv.delete(&format!("/management/v1/users/{machine}")).await);
    last(srv.post(&format!("/management/v1/users/{machine}/_deactivate"), json!({})).await);
    last(srv.post(&format!("/management/v1/users/{machine}/_lock"), json!({})).await);
    // An owner who cannot act (deactivated) does not count.
    srv.post("/admin/v1/members", json!({"userId": hank, "roles": ["IAM_OWNER"]})).await.ok();
    let users = |verb: &str| format!("/management/v1/users/{hank}/{verb}");
    srv.call_as(Some(&srv.pat), Some(&org), "POST", &users("_deactivate"), json!({})).await.ok();
    last(srv.delete(&format!("/admin/v1/members/{machine}")).await);
    srv.call_as(Some(&srv.pat), Some(&org), "POST", &users("_reactivate"), json!({})).await.ok();
    srv.delete(&format!("/admin/v1/members/{hank}")).await.ok();
    srv.put(&format!("/admin/v1/members/{machine}"), json!({"roles": ["IAM_OWNER", "IAM_USER_MANAGER"]})).await.ok();
    // An owner who is not the last may go, with its user.
    srv.post("/admin/v1/members", json!({"userId": hank, "roles": ["IAM_OWNER"]})).await.ok();
    srv.call_as(Some(&srv.pat), Some(&org), "DELETE", &format!("/management/v1/users/{hank}"), json!(null)).await.ok();
    assert_eq!(srv.post("/admin/v1/members/_search", json!({})).await.ok()["details"]["totalResult"], "1");

    // An organization owner cannot use the admin API.
    let (_, owner) = srv.machine_with_roles(None, "owner", &["ORG_OWNER"]).await;
    srv.call_as(Some(&owner), None, "POST", "/admin/v1/orgs/_setup", json!({})).await.err(403, 7);
    srv.call_as(Some(&owner), None, "POST", "/admin/v1/members", json!({"userId": hank, "roles": ["IAM_OWNER"]}))
        .await
        .err(403, 7);
    srv.call_as(Some(&owner), None, "POST", "/management/v1/orgs", json!({"name": "Mine"})).await.err(403, 7);
});

// What a client learns about the instance: GetIAM (any authenticated caller), the default
// organization (iam.read), GetOIDCInformation and the API's health check (no token).
on_both!(the_instance_describes_itself, |srv| {
    let me = srv.get("/management/v1/orgs/me").await;
    let default_org = me.ok()["org"]["id"].as_str().unwrap().to_string();
    let other =
        srv.post("/management/v1/orgs", json!({"name": "Elsewhere"})).await.ok()["id"].as_str().unwrap().to_string();
    // A machine user of another organization, with no role at all.
    let (_, pat) = srv.machine_with_roles(Some(&other), "nobody", &[]).await;
    let iam = srv.call_as(Some(&pat), None, "GET", "/management/v1/iam", json!(null)).await;
    assert_eq!(iam.ok(), &json!({"globalOrgId": default_org, "iamProjectId": "latch", "defaultOrgId": default_org}));
    srv.call_as(None, None, "GET", "/management/v1/iam", json!(null)).await.err(401, 16);

    let org = srv.get("/admin/v1/orgs/default").await;
    assert_eq!(org.ok()["org"]["id"], default_org.as_str());
    assert_eq!(org.body["org"]["name"], "latch");
    assert_eq!(org.body["org"]["state"], "ORG_STATE_ACTIVE");
    srv.call_as(Some(&pat), None, "GET", "/admin/v1/orgs/default", json!(null)).await.err(403, 7);
    // Another organization by id is still GetOrgByID.
    let by_id = srv.get(&format!("/admin/v1/orgs/{other}")).await;
    assert_eq!(by_id.ok()["org"]["name"], "Elsewhere");
    // The default organization is fixed.
    srv.call("PUT", &format!("/admin/v1/orgs/default/{other}"), json!({})).await.err(404, 5);

    let docs = srv.call_as(None, None, "GET", "/management/v1/zitadel/docs", json!(null)).await;
    assert_eq!(
        docs.ok(),
        &json!({"issuer": srv.base, "discoveryEndpoint": format!("{}/.well-known/openid-configuration", srv.base)})
    );
    let health = srv.call_as(None, None, "GET", "/management/v1/healthz", json!(null)).await;
    assert_eq!(health.ok(), &json!({}));
});

// A write that meets what a concurrent request did between the handler's check and its write
// says so: a reference deleted meanwhile is "not found" (it was a 500), a member added twice is
// "already exists" (the second add replaced the first's roles).
on_both!(writes_that_lose_a_race_say_why, |srv| {
    use latch::store::StoreError;
    use latch::store::member::{self, Scope};
    let org = srv.get("/management/v1/orgs/me").await.ok()["org"]["id"].as_str().unwrap().to_string();
    let (robot, _) = srv.machine_with_roles(None, "robot", &[]).await;
    let mut c = srv.state.db.conn().await.unwrap();
    let roles = ["ORG_OWNER_VIEWER".to_string()];
    let e = member::insert(&mut c, Scope::Org, &org, "no-such-user", &roles, 0).await.unwrap_err();
    assert!(matches!(e, StoreError::Gone), "{e}");
    let api = latch::api::ApiError::from(e);
    assert_eq!(api.code, latch::api::Code::NotFound);
    member::insert(&mut c, Scope::Org, &org, &robot, &roles, 0).await.unwrap();
    let e = member::insert(&mut c, Scope::Org, &org, &robot, &["ORG_OWNER".to_string()], 0).await.unwrap_err();
    assert!(matches!(e, StoreError::Conflict), "{e}");
    drop(c);
    let body = json!({"userId": robot, "roles": ["ORG_OWNER"]});
    srv.post("/management/v1/orgs/me/members", body).await.err(409, 6);
    let m = srv.post("/management/v1/orgs/me/members/_search", json!({})).await;
    let mine = m.ok()["result"].as_array().unwrap().iter().find(|m| m["userId"] == robot.as_str()).unwrap().clone();
    assert_eq!(mine["roles"], json!(["ORG_OWNER_VIEWER"]));
});

// A generated domain, or one given at set-up, that users elsewhere already have in their user
// names would make them the new organization's login names (`admin@newco.{host}` made before
// NewCo exists would take its sign-ins): the generated one takes a tail instead, a given one
// is refused.
on_both!(a_new_organizations_domain_is_in_nobodys_user_name, |srv| {
    let squatter = |name: &str| {
        json!({"userName": name, "profile": {"firstName": "S", "lastName": "Q"},
               "email": {"email": "squatter@example.com", "isEmailVerified": true}})
    };
    srv.post("/management/v1/users/human", squatter("admin@newco.127.0.0.1")).await.ok();
    let r = srv.post("/management/v1/orgs", json!({"name": "NewCo"})).await;
    let newco = r.ok()["id"].as_str().unwrap().to_string();
    let org = srv.call_as(Some(&srv.pat), Some(&newco), "GET", "/management/v1/orgs/me", json!(null)).await;
    let domain = org.ok()["org"]["primaryDomain"].as_str().unwrap().to_string();
    assert!(domain.starts_with("newco-") && domain.ends_with(".127.0.0.1"), "{domain}");
    srv.post("/management/v1/users/human", squatter("x@taken.example")).await.ok();
    let body = json!({
        "org": {"name": "Taken", "domain": "taken.example"},
        "human": {"userName": "tina", "profile": {"firstName": "T", "lastName": "T"},
                  "email": {"email": "tina@taken.example", "isEmailVerified": true}, "password": "Volcano-Lair1"}
    });
    let msg = srv.post("/admin/v1/orgs/_setup", body).await.err(400, 9).to_string();
    assert!(msg.contains("user names in this domain"), "{msg}");
    assert_eq!(srv.post("/admin/v1/orgs/_search", json!({})).await.ok()["details"]["totalResult"], "2");
});

on_both!(deactivated_and_removed_organizations, |srv| {
    use crate::authorize::code_query;
    use crate::browser::{Browser, oidc_app, param, pkce};
    use crate::token::{exchange_code, token};
    // An application of the default organization; alice and a machine user in Initech.
    let (client_id, secret, _) = oidc_app(srv, json!({})).await;
    let secret = secret.unwrap();
    let r = srv.post("/management/v1/orgs", json!({"name": "Initech"})).await;
    let initech = r.ok()["id"].as_str().unwrap().to_string();
    let on = |m: &'static str, p: String, b: serde_json::Value| {
        let org = initech.clone();
        async move { srv.call_as(Some(&srv.pat), Some(&org), m, &p, b).await }
    };
    let r = on(
        "POST",
        "/management/v1/users/human".into(),
        json!({"userName": "alice", "profile": {"firstName": "Alice", "lastName": "A"},
               "email": {"email": "alice@initech.example", "isEmailVerified": true}}),
    )
    .await;
    let alice = r.ok()["userId"].as_str().unwrap().to_string();
    on(
        "POST",
        format!("/management/v1/users/{alice}/password"),
        json!({"password": "Wonder-land1", "noChangeRequired": true}),
    )
    .await
    .ok();
    let r = on("POST", "/management/v1/users/machine".into(), json!({"userName": "printer", "name": "Printer"})).await;
    let printer = r.ok()["userId"].as_str().unwrap().to_string();
    let s = on("PUT", format!("/management/v1/users/{printer}/secret"), json!({})).await;
    let printer_secret = s.ok()["clientSecret"].as_str().unwrap().to_string();
    let cc = || token(srv, Some(("printer", &printer_secret)), &[("grant_type", "client_credentials")]);
    let machine_token = cc().await.ok()["access_token"].as_str().unwrap().to_string();

    // Alice signs in (a session in browser b, tokens with a refresh token).
    let b = Browser::new(srv);
    let (verifier, challenge) = pkce();
    let mut q = code_query(&client_id, &challenge);
    q[3] = ("scope", "openid offline_access");
    let (id, page) = b.authorize(&q).await;
    let done = b.sign_in(&id.unwrap(), &page, "alice", "Wonder-land1").await;
    let code = param(&done.redirect_params(), "code").unwrap().to_string();
    let t = exchange_code(srv, Some((&client_id, &secret)), &code, &verifier).await.ok().clone();
    // A second code from the session (single sign-on), redeemed only after the deactivation.
    let (_, sso) = b.authorize(&q).await;
    let pending_code = param(&sso.redirect_params(), "code").expect("single sign-on").to_string();
    let userinfo = |at: String| async move {
        reqwest::Client::new().get(srv.url("/oidc/v1/userinfo")).bearer_auth(at).send().await.unwrap().status()
    };
    assert_eq!(userinfo(t["access_token"].as_str().unwrap().to_string()).await, 200);
    // Without openid, the machine's token is valid but not for userinfo.
    assert_eq!(userinfo(machine_token.clone()).await, 403);
    // Cut-offs count whole seconds: what was issued is a second older than the deactivation.
    srv.clock.advance(1);

    // The default organization is neither deactivated nor removed.
    srv.post("/management/v1/orgs/me/_deactivate", json!({})).await.err(400, 9);
    srv.delete("/management/v1/orgs/me").await.err(400, 9);
    // Reactivating an active organization is a failed precondition.
    on("POST", "/management/v1/orgs/me/_reactivate".into(), json!({})).await.err(400, 9);
    let r = on(
        "POST",
        "/management/v1/users/human".into(),
        json!({"userName": "newbie", "profile": {"firstName": "New", "lastName": "B"},
               "email": {"email": "newbie@initech.example"}}),
    )
    .await;
    let newbie = r.ok()["userId"].as_str().unwrap().to_string();
    on("POST", "/management/v1/orgs/me/_deactivate".into(), json!({})).await.ok();
    on("POST", "/management/v1/orgs/me/_deactivate".into(), json!({})).await.err(400, 9);
    // Nor is a code mailed to a user who could not use it.
    on("POST", format!("/management/v1/users/{newbie}/_resend_initialization"), json!({})).await.err(400, 9);
    let o = on("GET", "/management/v1/orgs/me".into(), json!(null)).await;
    assert_eq!(o.ok()["org"]["state"], "ORG_STATE_INACTIVE");

    // Its users' tokens, sessions and refresh tokens end; they cannot sign in or get tokens.
    assert_eq!(userinfo(t["access_token"].as_str().unwrap().to_string()).await, 401);
    assert_eq!(userinfo(machine_token.clone()).await, 401);
    exchange_code(srv, Some((&client_id, &secret)), &pending_code, &verifier).await.err(400, "invalid_grant");
    let refresh = [("grant_type", "refresh_token"), ("refresh_token", t["refresh_token"].as_str().unwrap())];
    token(srv, Some((&client_id, &secret)), &refresh).await.err(400, "invalid_grant");
    cc().await.err(401, "invalid_client");
    // The jwt-bearer grant too, with a key added meanwhile (the API keeps working on it).
    let k = on("POST", format!("/management/v1/users/{printer}/keys"), json!({"type": "KEY_TYPE_JSON"})).await;
    let file: serde_json::Value = serde_json::from_slice(
        &base64::Engine::decode(&base64::engine::general_purpose::STANDARD, k.ok()["keyDetails"].as_str().unwrap())
            .unwrap(),
    )
    .unwrap();
    let key = jsonwebtoken::EncodingKey::from_rsa_pem(file["key"].as_str().unwrap().as_bytes()).unwrap();
    let kid = file["keyId"].as_str().unwrap().to_string();
    let bearer = |jti: &'static str| {
        let n = latch::clock::Clock::now(&*srv.clock);
        let claims = json!({"iss": printer, "sub": printer, "aud": srv.base, "iat": n, "exp": n + 300, "jti": jti});
        let assertion = crate::token::sign(&kid, &key, &claims);
        async move {
            let grant = [("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"), ("assertion", &assertion)];
            token(srv, None, &grant).await
        }
    };
    bearer("j-1").await.err(400, "invalid_grant");
    let mut none = code_query(&client_id, &challenge);
    none.push(("prompt", "none"));
    let (_, r) = b.authorize(&none).await;
    assert_eq!(param(&r.redirect_params(), "error"), Some("login_required"), "{:?}", r.location);
    let fresh = Browser::new(srv);
    let (id, page) = fresh.authorize(&code_query(&client_id, &challenge)).await;
    let refused = fresh.sign_in(&id.unwrap(), &page, "alice", "Wonder-land1").await;
    assert!(refused.html.contains("This account is deactivated."), "{}", refused.html);
    assert!(refused.location.is_none());
    // Whatever the password.
    let (id, page) = fresh.authorize(&code_query(&client_id, &challenge)).await;
    let wrong = fresh.sign_in(&id.unwrap(), &page, "alice", "not-her-password").await;
    assert!(wrong.html.contains("This account is deactivated."), "{}", wrong.html);

    // Reactivated: they sign in and get tokens again; what they held before stays ended.
    on("POST", "/management/v1/orgs/me/_reactivate".into(), json!({})).await.ok();
    let (id, page) = fresh.authorize(&code_query(&client_id, &challenge)).await;
    let done = fresh.sign_in(&id.unwrap(), &page, "alice", "Wonder-land1").await;
    assert!(param(&done.redirect_params(), "code").is_some(), "{:?} {}", done.location, done.html);
    token(srv, Some((&client_id, &secret)), &refresh).await.err(400, "invalid_grant");
    assert_eq!(userinfo(t["access_token"].as_str().unwrap().to_string()).await, 401);
    assert_eq!(userinfo(machine_token).await, 401);
    cc().await.ok();
    bearer("j-2").await.ok();

    // The instance's last owner who can act is a user of Initech: neither call is allowed.
    let (boss, boss_pat) = srv.machine_with_roles(Some(&initech), "boss", &[]).await;
    srv.post("/admin/v1/members", json!({"userId": boss, "roles": ["IAM_OWNER"]})).await.ok();
    let owners = srv.post("/admin/v1/members/_search", json!({})).await;
    let others: Vec<String> = owners.ok()["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["userId"].as_str().unwrap().to_string())
        .filter(|id| *id != boss)
        .collect();
    let as_boss = |m: &'static str, p: &'static str| srv.call_as(Some(&boss_pat), Some(&initech), m, p, json!({}));
    for id in &others {
        srv.call_as(Some(&boss_pat), None, "DELETE", &format!("/admin/v1/members/{id}"), json!(null)).await.ok();
    }
    as_boss("POST", "/management/v1/orgs/me/_deactivate").await.err(400, 9);
    as_boss("DELETE", "/management/v1/orgs/me").await.err(400, 9);
    // An owner of the organization who may not manage instance administrators may not cut off
    // or delete its users while one of them is one.
    let (_, keeper) = srv.machine_with_roles(Some(&initech), "keeper", &["ORG_OWNER"]).await;
    let as_keeper = |m: &'static str, p: &'static str| srv.call_as(Some(&keeper), Some(&initech), m, p, json!({}));
    as_keeper("POST", "/management/v1/orgs/me/_deactivate").await.err(403, 7);
    as_keeper("DELETE", "/management/v1/orgs/me").await.err(403, 7);
    for id in &others {
        srv.call_as(Some(&boss_pat), None, "POST", "/admin/v1/members", json!({"userId": id, "roles": ["IAM_OWNER"]}))
            .await
            .ok();
    }
    // Nor may an instance's organization manager bring it back while it is deactivated: that
    // gives its users their sign-ins back, and the boss's personal access token with them.
    on("POST", "/management/v1/orgs/me/_deactivate".into(), json!({})).await.ok();
    let (manager, manager_pat) = srv.machine_with_roles(None, "manager", &[]).await;
    srv.post("/admin/v1/members", json!({"userId": manager, "roles": ["IAM_ORG_MANAGER"]})).await.ok();
    let as_manager =
        |m: &'static str, p: &'static str| srv.call_as(Some(&manager_pat), Some(&initech), m, p, json!({}));
    as_manager("POST", "/management/v1/orgs/me/_reactivate").await.err(403, 7);
    on("POST", "/management/v1/orgs/me/_reactivate".into(), json!({})).await.ok();

    // Removed: its users, projects and the memberships others held in it are gone.
    let r = on("POST", "/management/v1/projects".into(), json!({"name": "Staplers"})).await;
    let staplers = r.ok()["id"].as_str().unwrap().to_string();
    let orgs_before = srv.count("org").await;
    on("DELETE", "/management/v1/orgs/me".into(), json!(null)).await.ok();
    assert_eq!(srv.count("org").await, orgs_before - 1);
    let mut c = srv.state.db.conn().await.unwrap();
    for id in [&alice, &printer, &boss] {
        assert!(latch::store::user::get(&mut c, id).await.unwrap().is_none());
    }
    assert!(latch::store::project::get(&mut c, &staplers).await.unwrap().is_none());
    let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM member WHERE scope_id = $1")
        .bind(&initech)
        .fetch_one(&mut *c)
        .await
        .unwrap();
    assert_eq!(n, 0, "the memberships held in the organization");
    let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM refresh_token WHERE user_id = $1")
        .bind(&alice)
        .fetch_one(&mut *c)
        .await
        .unwrap();
    assert_eq!(n, 0, "its users' refresh tokens");
    drop(c);
    srv.get(&format!("/admin/v1/orgs/{initech}")).await.err(404, 5);
    // The name is free again.
    srv.post("/management/v1/orgs", json!({"name": "Initech"})).await.ok();
});

// Changes of the primary domain at once (PostgreSQL runs them side by side): each is answered
// 200, and the organization keeps exactly one primary domain.
on_both!(concurrent_primary_domain_changes_all_succeed, |srv| {
    for d in ["one.example", "two.example"] {
        srv.post("/management/v1/orgs/me/domains", json!({"domain": d})).await.ok();
    }
    let mut tasks = Vec::new();
    for i in 0..16 {
        let (base, pat) = (srv.base.clone(), srv.pat.clone());
        let d = if i % 2 == 0 { "one.example" } else { "two.example" };
        tasks.push(tokio::spawn(async move {
            let url = format!("{base}/management/v1/orgs/me/domains/{d}/_set_primary");
            reqwest::Client::new().post(url).bearer_auth(pat).send().await.unwrap().status().as_u16()
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), 200);
    }
    let d = srv.post("/management/v1/orgs/me/domains/_search", json!({})).await;
    let primaries = d.ok()["result"].as_array().unwrap().iter().filter(|d| d["isPrimary"] == true).count();
    assert_eq!(primaries, 1, "{}", d.body);
});

// On PostgreSQL the administrator calls that guard the last instance owner lock the owners' rows
// against updates and deletes only: a session of an owner signing in meanwhile is stored at once.
// A full row lock made the session's insert (its key-share lock on the account) wait for the
// administrator's transaction, and a sign-in that had locked its requests first could deadlock
// with the removal of an organization.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guarding_the_instance_owners_holds_off_no_sign_in() {
    use latch::store::{member, session, user};
    let srv = crate::harness::TestServer::start(crate::harness::Backend::Postgres).await;
    let mut c = srv.state.db.conn().await.unwrap();
    let admin = user::get_by_username(&mut c, "admin").await.unwrap().unwrap().user_id;
    drop(c);
    let mut tx = srv.state.db.begin().await.unwrap();
    let owners = member::iam_owners_locked(&mut tx).await.unwrap();
    assert!(owners.iter().any(|(u, _)| *u == admin), "{owners:?}");
    let (db, t) = (srv.state.db.clone(), crate::harness::now());
    let mut insert = tokio::spawn(async move {
        let n = session::NewSession {
            session_id: "s-1".into(),
            ua_key: b"browser".to_vec(),
            user_id: admin,
            auth_time: t,
            amr: vec!["pwd".into()],
            now: t,
            expires_at: t + 3600,
        };
        session::upsert(&mut db.conn().await.unwrap(), &n).await
    });
    let at_once = tokio::time::timeout(std::time::Duration::from_secs(3), &mut insert).await.ok();
    tx.commit().await.unwrap();
    let waited = at_once.is_none();
    let stored = match at_once {
        Some(r) => r,
        None => insert.await,
    };
    stored.unwrap().unwrap();
    assert!(!waited, "the owner's session waited for the administrator's transaction");
    srv.stop().await;
}

// Changing a member's roles while another administrator removes the member: the change finds
// no member once the removal commits (404), where it used to write the member back with the new
// roles (its read took no lock and its write was an upsert), which could bring back a removed
// owner. PostgreSQL only: SQLite's writers take turns, so the change never runs between.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_removed_while_its_roles_change_stays_removed() {
    use latch::store::member::{self, Scope};
    let srv = crate::harness::TestServer::start(crate::harness::Backend::Postgres).await;
    {
        let srv = &srv;
        let bob = crate::browser::human(srv, "bob", "Builder-b0b!").await;
        srv.post("/management/v1/orgs/me/members", json!({"userId": bob, "roles": ["ORG_USER_MANAGER"]})).await.ok();
        let org = srv.get("/management/v1/orgs/me").await.ok()["org"]["id"].as_str().unwrap().to_string();
        let mut removal = srv.state.db.begin().await.unwrap();
        assert!(member::remove(&mut removal, Scope::Org, &org, &bob).await.unwrap());
        let path = format!("/management/v1/orgs/me/members/{bob}");
        let change = srv.put(&path, json!({"roles": ["ORG_OWNER"]}));
        let commit = async {
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            removal.commit().await.unwrap();
        };
        let (r, ()) = tokio::join!(change, commit);
        r.err(404, 5);
        let mut c = srv.state.db.conn().await.unwrap();
        assert!(member::get(&mut c, Scope::Org, &org, &bob).await.unwrap().is_none(), "the member stays removed");
    }
    srv.stop().await;
}
