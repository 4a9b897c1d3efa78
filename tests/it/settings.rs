//! Instance settings, policies and features.

use serde_json::json;

use crate::on_both;

on_both!(oidc_settings, |srv| {
    let r = srv.get("/admin/v1/settings/oidc").await;
    let s = r.ok()["settings"].clone();
    assert_eq!(s["accessTokenLifetime"], "43200s");
    assert_eq!(s["idTokenLifetime"], "43200s");
    assert_eq!(s["refreshTokenIdleExpiration"], "2592000s");
    assert_eq!(s["refreshTokenExpiration"], "7776000s");
    srv.put("/admin/v1/settings/oidc", json!({"accessTokenLifetime": "1h", "idTokenLifetime": "3600s"})).await.ok();
    let r = srv.get("/admin/v1/settings/oidc").await;
    assert_eq!(r.ok()["settings"]["accessTokenLifetime"], "3600s");
    assert_eq!(r.body["settings"]["refreshTokenExpiration"], "7776000s", "unset fields keep their value");
    assert!(r.body["settings"]["details"]["changeDate"].is_string());
    srv.put("/admin/v1/settings/oidc", json!({"accessTokenLifetime": "forever"})).await.err(400, 3);
    srv.put("/admin/v1/settings/oidc", json!({"accessTokenLifetime": "0s"})).await.err(400, 3);
    srv.put("/admin/v1/settings/oidc", json!({"refreshTokenIdleExpiration": "100d", "refreshTokenExpiration": "10d"}))
        .await
        .err(400, 3);
    let r = srv.get("/admin/v1/settings/oidc").await;
    assert_eq!(r.ok()["settings"]["accessTokenLifetime"], "3600s", "a refused update changes nothing");
});

on_both!(two_partial_updates_at_once_keep_each_others_fields, |srv| {
    use latch::domain::settings::OidcSettings;
    use latch::store::setting::{self, INSTANCE};
    // One update has read the settings and not yet written them back ...
    let mut first = srv.state.db.begin().await.unwrap();
    let mut v = setting::load_locked::<OidcSettings>(&mut first, INSTANCE, 0).await.unwrap().value;
    v.access_token_lifetime = 111;
    // ... when another changes a different field through the API: it waits for the first and
    // then reads what the first wrote, so neither change is lost.
    let committed = std::sync::Mutex::new(None);
    let (second, ()) = tokio::join!(
        async {
            let r = srv.put("/admin/v1/settings/oidc", json!({"idTokenLifetime": "222s"})).await;
            (r, std::time::Instant::now())
        },
        async {
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            // Taken before the commit: the waiting update may answer before this future runs on.
            *committed.lock().unwrap() = Some(std::time::Instant::now());
            setting::save(&mut first, INSTANCE, &v, 0).await.unwrap();
            first.commit().await.unwrap();
        }
    );
    let (r, answered) = second;
    r.ok();
    assert!(answered >= committed.lock().unwrap().unwrap(), "the second update waited for the first to write");
    let s = srv.get("/admin/v1/settings/oidc").await.ok()["settings"].clone();
    assert_eq!(s["accessTokenLifetime"], "111s");
    assert_eq!(s["idTokenLifetime"], "222s");
});

on_both!(policies, |srv| {
    let r = srv.get("/admin/v1/policies/login").await;
    let p = r.ok()["policy"].clone();
    assert_eq!(p["allowUsernamePassword"], true);
    assert!(p.get("allowRegister").is_none());
    assert_eq!(p["isDefault"], true);
    assert_eq!(p["passwordCheckLifetime"], "864000s");
    srv.put(
        "/admin/v1/policies/login",
        json!({"allowUsernamePassword": true, "allowRegister": true, "passwordCheckLifetime": "24h"}),
    )
    .await
    .ok();
    let r = srv.get("/admin/v1/policies/login").await;
    assert_eq!(r.ok()["policy"]["allowRegister"], true);
    assert_eq!(r.body["policy"]["passwordCheckLifetime"], "86400s");
    srv.put("/admin/v1/policies/login", json!({"defaultRedirectUri": "no uri"})).await.err(400, 3);

    let r = srv.get("/admin/v1/policies/lockout").await;
    assert_eq!(r.ok()["policy"]["maxPasswordAttempts"], "0");
    srv.put("/admin/v1/policies/password/lockout", json!({"maxPasswordAttempts": 5, "maxOtpAttempts": "3"})).await.ok();
    let r = srv.get("/admin/v1/policies/lockout").await;
    assert_eq!(r.ok()["policy"]["maxPasswordAttempts"], "5");
    assert_eq!(r.body["policy"]["maxOtpAttempts"], "3");
    srv.put("/admin/v1/policies/password/lockout", json!({"maxPasswordAttempts": -1})).await.err(400, 3);

    let r = srv.get("/admin/v1/policies/password/complexity").await;
    assert_eq!(r.ok()["policy"]["minLength"], "8");
    assert_eq!(r.body["policy"]["hasSymbol"], true);
    srv.put("/admin/v1/policies/password/complexity", json!({"minLength": 12, "hasNumber": true})).await.ok();
    srv.put("/admin/v1/policies/password/complexity", json!({"minLength": 0})).await.err(400, 3);
    // The new policy applies to new passwords.
    let weak = json!({"userName": "dora", "profile": {"firstName": "D", "lastName": "E"}, "email": {"email": "d@example.com"}, "initialPassword": "Short-Pw1!"});
    let r = srv.post("/management/v1/users/human", weak).await;
    assert!(r.err(400, 3).contains("too short"));
    let ok = json!({"userName": "dora", "profile": {"firstName": "D", "lastName": "E"}, "email": {"email": "d@example.com"}, "initialPassword": "twelve chars 1"});
    srv.post("/management/v1/users/human", ok).await.ok();

    let r = srv.get("/admin/v1/policies/security").await;
    assert!(r.ok()["policy"].get("enableImpersonation").is_none());
    srv.put(
        "/admin/v1/policies/security",
        json!({"enableImpersonation": true, "allowedOrigins": ["https://a.example"]}),
    )
    .await
    .ok();
    let r = srv.get("/admin/v1/policies/security").await;
    assert_eq!(r.ok()["policy"]["enableImpersonation"], true);
    srv.put("/admin/v1/policies/security", json!({"allowedOrigins": ["nope"]})).await.err(400, 3);

    let (_, owner) = srv.machine_with_roles(None, "owner", &["ORG_OWNER"]).await;
    srv.call_as(Some(&owner), None, "PUT", "/admin/v1/policies/login", json!({})).await.err(403, 7);
    srv.call_as(Some(&owner), None, "GET", "/admin/v1/settings/oidc", json!(null)).await.err(403, 7);
});

on_both!(instance_features, |srv| {
    let r = srv.get("/v2/features/instance").await;
    assert_eq!(r.ok()["oidcTokenExchange"], json!({"enabled": false, "source": "SOURCE_SYSTEM"}));
    srv.put("/v2/features/instance", json!({"oidcTokenExchange": true})).await.ok();
    let r = srv.get("/v2/features/instance").await;
    assert_eq!(r.ok()["oidcTokenExchange"], json!({"enabled": true, "source": "SOURCE_INSTANCE"}));
    srv.put("/v2/features/instance", json!({"oidcTokenExchange": "yes"})).await.err(400, 3);
    let (_, owner) = srv.machine_with_roles(None, "owner", &["ORG_OWNER"]).await;
    srv.call_as(Some(&owner), None, "PUT", "/v2/features/instance", json!({"oidcTokenExchange": false}))
        .await
        .err(403, 7);
    srv.call_as(Some(&owner), None, "GET", "/v2/features/instance", json!(null)).await.ok();
    srv.delete("/v2/features/instance").await.ok();
    let r = srv.get("/v2/features/instance").await;
    assert_eq!(r.ok()["oidcTokenExchange"]["source"], "SOURCE_SYSTEM");
});

// An organization's own login policy: managed through /management/v1/policies/login and applied
// to its users once they are known; the default organization's also to registration.
on_both!(an_organizations_own_login_policy, |srv| {
    use crate::browser::{Browser, param};
    let r = srv.post("/management/v1/orgs", json!({"name": "Initech"})).await;
    let initech = r.ok()["id"].as_str().unwrap().to_string();
    let on = |m: &'static str, b: serde_json::Value| {
        let org = initech.clone();
        async move { srv.call_as(Some(&srv.pat), Some(&org), m, "/management/v1/policies/login", b).await }
    };
    let alice = srv
        .call_as(
            Some(&srv.pat),
            Some(&initech),
            "POST",
            "/management/v1/users/human",
            json!({"userName": "alice", "profile": {"firstName": "Alice", "lastName": "A"},
                   "email": {"email": "alice@initech.example", "isEmailVerified": true}}),
        )
        .await;
    let alice = alice.ok()["userId"].as_str().unwrap().to_string();
    srv.call_as(
        Some(&srv.pat),
        Some(&initech),
        "POST",
        &format!("/management/v1/users/{alice}/password"),
        json!({"password": "Wonder-land1", "noChangeRequired": true}),
    )
    .await
    .ok();
    crate::browser::human(srv, "bob", "Builder-Pw1").await;

    // None of its own: the instance's, marked as the default.
    let p = on("GET", json!(null)).await;
    assert_eq!(p.ok()["policy"]["isDefault"], true);
    assert_eq!(p.body["isDefault"], true, "beside the policy too, as GetLoginPolicyResponse has it");
    on("PUT", json!({"forceMfa": true})).await.err(404, 5);
    on("DELETE", json!(null)).await.err(404, 5);
    on("POST", json!({"allowUsernamePassword": true, "forceMfa": true, "hidePasswordReset": true})).await.ok();
    on("POST", json!({"forceMfa": true})).await.err(409, 6);
    on("PUT", json!({"defaultRedirectUri": "not a uri"})).await.err(400, 3);
    let p = on("GET", json!(null)).await;
    assert!(p.ok()["policy"].get("isDefault").is_none(), "{}", p.body);
    assert_eq!(p.body["isDefault"], false);
    assert_eq!(p.body["policy"]["forceMfa"], true);
    assert_eq!(p.body["policy"]["passwordCheckLifetime"], "864000s", "the instance's, where not given");
    // Other organizations follow the instance's.
    assert_eq!(srv.get("/management/v1/policies/login").await.ok()["policy"]["isDefault"], true);

    let sign_in = |login: &'static str, password: &'static str| async move {
        let b = Browser::new(srv);
        let (id, page) = crate::login::start(srv, &b, &[]).await;
        let r = b.sign_in(&id, &page, login, password).await;
        (id, r)
    };
    // alice's organization asks for a second factor, bob's does not.
    let (id, setup) = sign_in("alice", "Wonder-land1").await;
    assert!(setup.html.contains(&format!("action=\"/ui/login/{id}/totp/setup\"")), "{}", setup.html);
    let (_, done) = sign_in("bob", "Builder-Pw1").await;
    assert!(param(&done.redirect_params(), "code").is_some(), "{}", done.html);
    // It hides password reset: the page reads as for anyone (the instance's wording), and no
    // code is mailed to alice.
    let b = Browser::new(srv);
    let (id, page) = crate::login::start(srv, &b, &[]).await;
    let named = b.post(&format!("/ui/login/{id}/loginname"), &[("csrf", &page.csrf()), ("loginname", "alice")]).await;
    assert!(named.html.contains("Forgot your password"), "{}", named.html);
    let code_page = b.post(&format!("/ui/login/{id}/init_password/request"), &[("csrf", &named.csrf())]).await;
    assert_eq!(code_page.status, 200);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(srv.outbox_to("alice@initech.example").is_empty());

    // Updated: lifetimes left out keep their values.
    on("PUT", json!({"forceMfa": false, "passwordCheckLifetime": "3600s"})).await.ok();
    on("PUT", json!({"passwordCheckLifetime": "soon"})).await.err(400, 3);
    let p = on("GET", json!(null)).await;
    assert_eq!(p.ok()["policy"]["passwordCheckLifetime"], "3600s");
    assert!(p.body["policy"].get("forceMfa").is_none());
    let (_, done) = sign_in("alice", "Wonder-land1").await;
    assert!(param(&done.redirect_params(), "code").is_some(), "{}", done.html);
    // Reset: the instance's again.
    on("DELETE", json!(null)).await.ok();
    assert_eq!(on("GET", json!(null)).await.ok()["policy"]["isDefault"], true);

    // Registration follows the default organization's policy.
    srv.put("/admin/v1/policies/login", json!({"allowUsernamePassword": true, "allowRegister": true})).await.ok();
    srv.post("/management/v1/policies/login", json!({"allowUsernamePassword": true, "allowRegister": false}))
        .await
        .ok();
    let b = Browser::new(srv);
    let (_, page) = crate::login::start(srv, &b, &[("prompt", "create")]).await;
    assert!(page.html.contains("Registration is not allowed"), "{}", page.html);
    srv.delete("/management/v1/policies/login").await.ok();
    let (_, page) = crate::login::start(srv, &b, &[("prompt", "create")]).await;
    assert!(page.html.contains("name=\"first_name\""), "{}", page.html);
});

// An organization's own lockout and password complexity policies: managed like its login policy
// and applied to its users only.
on_both!(an_organizations_own_lockout_and_complexity_policies, |srv| {
    use crate::browser::Browser;
    let r = srv.post("/management/v1/orgs", json!({"name": "Initech"})).await;
    let initech = r.ok()["id"].as_str().unwrap().to_string();
    let on = |m: &'static str, path: &'static str, b: serde_json::Value| {
        let org = initech.clone();
        async move { srv.call_as(Some(&srv.pat), Some(&org), m, path, b).await }
    };
    let r = on(
        "POST",
        "/management/v1/users/human",
        json!({"userName": "alice", "profile": {"firstName": "Alice", "lastName": "A"},
               "email": {"email": "alice@initech.example", "isEmailVerified": true}}),
    )
    .await;
    let alice = r.ok()["userId"].as_str().unwrap().to_string();
    let set_password = |id: String, pw: &'static str| {
        let org = initech.clone();
        async move {
            srv.call_as(
                Some(&srv.pat),
                Some(&org),
                "POST",
                &format!("/management/v1/users/{id}/password"),
                json!({"password": pw, "noChangeRequired": true}),
            )
            .await
        }
    };
    set_password(alice.clone(), "Wonder-land1").await.ok();
    let bob = crate::browser::human(srv, "bob", "Builder-Pw1").await;

    const LOCKOUT: &str = "/management/v1/policies/lockout";
    const COMPLEXITY: &str = "/management/v1/policies/password/complexity";
    assert_eq!(on("GET", LOCKOUT, json!(null)).await.ok()["policy"]["isDefault"], true);
    on("PUT", LOCKOUT, json!({"maxPasswordAttempts": 2})).await.err(404, 5);
    on("POST", LOCKOUT, json!({"maxPasswordAttempts": 5000})).await.err(400, 3);
    on("POST", LOCKOUT, json!({"maxPasswordAttempts": 3})).await.ok();
    on("POST", LOCKOUT, json!({"maxPasswordAttempts": 2})).await.err(409, 6);
    on("PUT", LOCKOUT, json!({"maxPasswordAttempts": 2})).await.ok();
    let p = on("GET", LOCKOUT, json!(null)).await;
    assert_eq!(p.ok()["policy"]["maxPasswordAttempts"], "2");
    assert_eq!(p.body["policy"]["isDefault"], false);

    // alice is locked after two wrong passwords; bob, under the instance's policy (no lockout),
    // is not after three.
    for (name, n) in [("alice", 2), ("bob", 3)] {
        for _ in 0..n {
            let b = Browser::new(srv);
            let (id, page) = crate::login::start(srv, &b, &[]).await;
            let r = b.sign_in(&id, &page, name, "not-the-password").await;
            assert!(r.html.contains("The login name or the password is wrong."), "{}", r.html);
        }
    }
    let mut c = srv.state.db.conn().await.unwrap();
    let state = |u: Option<latch::store::user::User>| u.unwrap().state;
    assert_eq!(state(latch::store::user::get(&mut c, &alice).await.unwrap()), latch::domain::enums::UserState::Locked);
    assert_eq!(state(latch::store::user::get(&mut c, &bob).await.unwrap()), latch::domain::enums::UserState::Active);
    drop(c);

    // Its complexity policy applies to its users' new passwords only.
    on("POST", COMPLEXITY, json!({"minLength": 0})).await.err(400, 3);
    on("POST", COMPLEXITY, json!({"minLength": 20})).await.ok();
    assert_eq!(on("GET", COMPLEXITY, json!(null)).await.ok()["policy"]["minLength"], "20");
    set_password(alice.clone(), "Short-Passw0rd1").await.err(400, 3);
    set_password(alice.clone(), "A-much-longer-Passw0rd").await.ok();
    srv.post(&format!("/management/v1/users/{bob}/password"), json!({"password": "Short-Passw0rd1"})).await.ok();

    // Reset: the instance's again.
    on("DELETE", COMPLEXITY, json!(null)).await.ok();
    on("DELETE", COMPLEXITY, json!(null)).await.err(404, 5);
    on("DELETE", LOCKOUT, json!(null)).await.ok();
    assert_eq!(on("GET", LOCKOUT, json!(null)).await.ok()["policy"]["isDefault"], true);
    set_password(alice, "Short-Passw0rd1").await.ok();
});
