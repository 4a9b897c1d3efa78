//! Projects, roles, user grants, OIDC and API applications and their keys.

use base64::Engine;
use serde_json::{Value, json};

use crate::harness::TestServer;
use crate::on_both;

async fn project(srv: &TestServer, name: &str) -> String {
    let r = srv.post("/management/v1/projects", json!({"name": name, "projectRoleAssertion": true})).await;
    r.ok()["id"].as_str().unwrap().to_string()
}

fn full_oidc_app() -> Value {
    json!({
        "name": "portal",
        "redirectUris": ["https://portal.example.com/cb", "https://portal.example.com/cb2"],
        "responseTypes": ["OIDC_RESPONSE_TYPE_CODE", "OIDC_RESPONSE_TYPE_ID_TOKEN"],
        "grantTypes": ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_IMPLICIT", "OIDC_GRANT_TYPE_REFRESH_TOKEN", "OIDC_GRANT_TYPE_TOKEN_EXCHANGE"],
        "appType": "OIDC_APP_TYPE_WEB",
        "authMethodType": "OIDC_AUTH_METHOD_TYPE_POST",
        "postLogoutRedirectUris": ["https://portal.example.com/bye"],
        "version": "OIDC_VERSION_1_0",
        "devMode": false,
        "accessTokenType": "OIDC_TOKEN_TYPE_JWT",
        "accessTokenRoleAssertion": true,
        "idTokenRoleAssertion": true,
        "idTokenUserinfoAssertion": true,
        "clockSkew": "2s",
        "additionalOrigins": ["https://cdn.example.com"],
        "skipNativeAppSuccessPage": true,
        "backChannelLogoutUri": "https://portal.example.com/backchannel",
        "loginVersion": {"loginV1": {}}
    })
}

on_both!(projects_roles_and_grants, |srv| {
    let p = project(srv, "Shop").await;
    srv.post("/management/v1/projects", json!({"name": "shop"})).await.err(409, 6);
    srv.post("/management/v1/projects", json!({})).await.err(400, 3);
    let r = srv.get(&format!("/management/v1/projects/{p}")).await;
    assert_eq!(r.ok()["project"]["name"], "Shop");
    assert_eq!(r.body["project"]["projectRoleAssertion"], true);
    assert_eq!(r.body["project"]["state"], "PROJECT_STATE_ACTIVE");
    srv.put(&format!("/management/v1/projects/{p}"), json!({"name": "Shop 2", "hasProjectCheck": true})).await.ok();
    let r = srv
        .post(
            "/management/v1/projects/_search",
            json!({"queries": [{"nameQuery": {"name": "Shop", "method": "TEXT_QUERY_METHOD_STARTS_WITH"}}]}),
        )
        .await;
    assert_eq!(r.ok()["result"][0]["name"], "Shop 2");
    assert!(r.body["result"][0].get("projectRoleAssertion").is_none(), "the update replaced every flag");

    let roles = format!("/management/v1/projects/{p}/roles");
    srv.post(&roles, json!({"roleKey": "reader", "displayName": "Reader", "group": "staff"})).await.ok();
    srv.post(&roles, json!({"roleKey": "reader", "displayName": "Again"})).await.err(409, 6);
    srv.post(&roles, json!({"roleKey": "has space", "displayName": "X"})).await.err(400, 3);
    srv.post(
        &format!("{roles}/_bulk"),
        json!({"roles": [{"key": "writer", "displayName": "Writer"}, {"key": "admin", "displayName": "Admin"}]}),
    )
    .await
    .ok();
    srv.post(
        &format!("{roles}/_bulk"),
        json!({"roles": [{"key": "x", "displayName": "X"}, {"key": "reader", "displayName": "dup"}]}),
    )
    .await
    .err(409, 6);
    // One bulk call adds at most a thousand roles (one statement each, in one transaction).
    let many: Vec<_> = (0..1001).map(|i| json!({"key": format!("r{i}"), "displayName": "R"})).collect();
    srv.post(&format!("{roles}/_bulk"), json!({"roles": many})).await.err(400, 3);
    let r = srv.post(&format!("{roles}/_search"), json!({"query": {"asc": true}})).await;
    let keys: Vec<_> = r.ok()["result"].as_array().unwrap().iter().map(|r| r["key"].as_str().unwrap()).collect();
    assert_eq!(keys, vec!["admin", "reader", "writer"], "the failed bulk call added nothing");
    // Filters: keyQuery and displayNameQuery with their text methods, AND-combined.
    let search = |queries: serde_json::Value| {
        let roles = roles.clone();
        async move {
            let r = srv.post(&format!("{roles}/_search"), json!({"query": {"asc": true}, "queries": queries})).await;
            // An empty result is omitted (zero values are).
            let result = r.ok()["result"].as_array().cloned().unwrap_or_default();
            let keys: Vec<String> = result.iter().map(|r| r["key"].as_str().unwrap().to_string()).collect();
            (keys, r.body["details"]["totalResult"].as_str().unwrap_or_default().to_string())
        }
    };
    let (keys, total) = search(json!([{"keyQuery": {"key": "er", "method": "TEXT_QUERY_METHOD_ENDS_WITH"}}])).await;
    assert_eq!((keys, total.as_str()), (vec!["reader".to_string(), "writer".to_string()], "2"));
    let q =
        json!([{"displayNameQuery": {"displayName": "WRI", "method": "TEXT_QUERY_METHOD_STARTS_WITH_IGNORE_CASE"}}]);
    assert_eq!(search(q).await.0, vec!["writer"]);
    let q = json!([{"displayNameQuery": {"displayName": "WRI", "method": "TEXT_QUERY_METHOD_STARTS_WITH"}}]);
    assert!(search(q).await.0.is_empty(), "case counts without IGNORE_CASE");
    let q = json!([{"keyQuery": {"key": "e", "method": "TEXT_QUERY_METHOD_CONTAINS"}}, {"keyQuery": {"key": "admin"}}]);
    assert!(search(q).await.0.is_empty(), "queries are AND-combined");
    let q = json!([{"keyQuery": {"key": "reader"}}]);
    assert_eq!(search(q).await.0, vec!["reader"], "EQUALS by default");
    let long = json!([{"keyQuery": {"key": "x".repeat(201)}}]);
    srv.post(&format!("{roles}/_search"), json!({"queries": long})).await.err(400, 3);
    // A query that names no member (a typo, {}, or an array) or two is refused, not read as none.
    for q in [
        json!([{"kyQuery": {"key": "reader"}}]),
        json!([{}]),
        json!([[null, null]]),
        json!([{"keyQuery": {"key": "a"}, "displayNameQuery": {"displayName": "b"}}]),
    ] {
        srv.post(&format!("{roles}/_search"), json!({"queries": q})).await.err(400, 3);
    }
    srv.post("/management/v1/projects/_search", json!({"queries": [{"nmeQuery": {"name": "x"}}]})).await.err(400, 3);
    // Names are bounded like every search text (SQLite refused a pattern this long with a 500).
    let long =
        json!({"queries": [{"nameQuery": {"name": "a".repeat(60_000), "method": "TEXT_QUERY_METHOD_CONTAINS"}}]});
    for path in ["/management/v1/projects/_search".to_string(), format!("/management/v1/projects/{p}/apps/_search")] {
        let r = srv.post(&path, long.clone()).await;
        assert!(r.err(400, 3).contains("200 characters"), "{path}: {}", r.text);
    }

    let alice = crate::users::create_alice(srv).await;
    let grants = format!("/management/v1/users/{alice}/grants");
    srv.post(&grants, json!({"projectId": p, "roleKeys": ["reader", "nope"]})).await.err(400, 9);
    srv.post(&grants, json!({"projectId": "404", "roleKeys": []})).await.err(404, 5);
    let r = srv.post(&grants, json!({"projectId": p, "roleKeys": ["reader", "writer"]})).await;
    assert!(r.ok()["userGrantId"].is_string());
    srv.post(&grants, json!({"projectId": p, "roleKeys": ["reader"]})).await.err(409, 6);
    let mut c = srv.state.db.conn().await.unwrap();
    let g = latch::store::project::grants_of_user(&mut c, &alice).await.unwrap();
    assert_eq!(g[0].role_keys, vec!["reader", "writer"]);
    drop(c);
    // A grant's roles are replaced, only with roles of its project, only by its organization.
    let grant_id = r.body["userGrantId"].as_str().unwrap().to_string();
    let grant = format!("{grants}/{grant_id}");
    srv.put(&grant, json!({"roleKeys": ["writer", "nope"]})).await.err(400, 9);
    srv.put(&grant, json!({"roleKeys": ["writer", "writer"]})).await.ok();
    let mut c = srv.state.db.conn().await.unwrap();
    let g = latch::store::project::grants_of_user(&mut c, &alice).await.unwrap();
    assert_eq!(g[0].role_keys, vec!["writer"]);
    drop(c);
    srv.put(&format!("{grants}/404"), json!({"roleKeys": []})).await.err(404, 5);
    // A role's display name and group change; removing a role takes it out of the grants.
    srv.post(&roles, json!({"roleKey": "a/b", "displayName": "Slashed"})).await.ok();
    srv.put(&format!("{roles}/a%2Fb"), json!({"displayName": "Slashed too", "group": "g"})).await.ok();
    srv.put(&format!("{roles}/writer"), json!({"displayName": ""})).await.err(400, 3);
    srv.put(&format!("{roles}/nope"), json!({"displayName": "x"})).await.err(404, 5);
    srv.put(&grant, json!({"roleKeys": ["writer", "a/b"]})).await.ok();
    srv.delete(&format!("{roles}/writer")).await.ok();
    srv.delete(&format!("{roles}/writer")).await.err(404, 5);
    let mut c = srv.state.db.conn().await.unwrap();
    let g = latch::store::project::grants_of_user(&mut c, &alice).await.unwrap();
    assert_eq!(g[0].role_keys, vec!["a/b"]);
    let all = latch::store::project::roles(&mut c, &p).await.unwrap();
    let slashed = all.iter().find(|r| r.role_key == "a/b").unwrap();
    assert_eq!((slashed.display_name.as_str(), slashed.role_group.as_str()), ("Slashed too", "g"));
    assert!(!all.iter().any(|r| r.role_key == "writer"));
    drop(c);
    srv.post(&roles, json!({"roleKey": "writer", "displayName": "Writer"})).await.ok();
    let elsewhere = srv.post("/management/v1/orgs", json!({"name": "Grant Elsewhere"})).await;
    let elsewhere = elsewhere.ok()["id"].as_str().unwrap().to_string();
    srv.call_as(Some(&srv.pat), Some(&elsewhere), "DELETE", &grant, json!(null)).await.err(404, 5);
    // Removed once; then it is gone, and the user may be granted the project again.
    srv.delete(&grant).await.ok();
    srv.delete(&grant).await.err(404, 5);
    assert_eq!(srv.count("user_grant").await, 0);
    let r = srv.post(&grants, json!({"projectId": p, "roleKeys": ["reader", "writer"]})).await;
    assert!(r.ok()["userGrantId"].is_string());
    let grant_id = r.body["userGrantId"].as_str().unwrap().to_string();
    // The organization's grants, filtered (AND-combined).
    let list = |queries: Value| async move {
        let r = srv.post("/management/v1/users/grants/_search", json!({"queries": queries})).await;
        r.ok()["result"].as_array().cloned().unwrap_or_default()
    };
    let all = list(json!([])).await;
    assert_eq!(all.len(), 1, "{all:?}");
    let g = &all[0];
    assert_eq!(g["id"], grant_id.as_str());
    assert_eq!(g["userId"], alice.as_str());
    assert_eq!(g["projectId"], p.as_str());
    assert_eq!(g["roleKeys"], json!(["reader", "writer"]));
    assert_eq!(g["state"], "USER_GRANT_STATE_ACTIVE");
    assert_eq!(g["userType"], "TYPE_HUMAN");
    assert!(g["preferredLoginName"].as_str().unwrap().starts_with(g["userName"].as_str().unwrap()));
    assert!(!g["projectName"].as_str().unwrap().is_empty() && !g["orgName"].as_str().unwrap().is_empty());
    for (queries, n) in [
        (json!([{"userIdQuery": {"userId": alice}}]), 1),
        (json!([{"userIdQuery": {"userId": "nobody"}}]), 0),
        (json!([{"projectIdQuery": {"projectId": p}}, {"roleKeyQuery": {"roleKey": "writer"}}]), 1),
        (json!([{"roleKeyQuery": {"roleKey": "WRI", "method": "TEXT_QUERY_METHOD_STARTS_WITH_IGNORE_CASE"}}]), 1),
        (json!([{"roleKeyQuery": {"roleKey": "admin"}}]), 0),
        (json!([{"inUserIdsQuery": {"inUserIds": ["x", alice]}}]), 1),
        (json!([{"userTypeQuery": {"type": "TYPE_MACHINE"}}]), 0),
        (json!([{"withGrantedQuery": {"withGranted": true}}]), 1),
        (json!([{"projectGrantIdQuery": {"projectGrantId": "1"}}]), 0),
    ] {
        assert_eq!(list(queries.clone()).await.len(), n, "{queries}");
    }
    // One grant by id, as listed.
    let one = srv.get(&format!("{grants}/{grant_id}")).await;
    assert_eq!(one.ok()["userGrant"], all[0], "{}", one.text);
    srv.get(&format!("{grants}/404")).await.err(404, 5);
    srv.call_as(Some(&srv.pat), Some(&elsewhere), "GET", &format!("{grants}/{grant_id}"), json!(null))
        .await
        .err(404, 5);
    let many: Vec<String> = (0..40).map(|i| format!("38456886727897{i:04}")).chain([alice.clone()]).collect();
    assert_eq!(list(json!([{"inUserIdsQuery": {"inUserIds": many}}])).await.len(), 1);
    // A query that names no member, or two, is refused (it would otherwise match everything).
    for queries in [
        json!([{"userIDQuery": {"userId": "x"}}]),
        json!([{}]),
        json!([{"userIdQuery": {"userId": alice}, "roleKeyQuery": {"roleKey": "reader"}}]),
        json!([{"userIdQuery": {"userId": "x".repeat(201)}}]),
    ] {
        let r = srv.post("/management/v1/users/grants/_search", json!({"queries": queries})).await;
        r.err(400, 3);
    }
    // Another organization sees none of them.
    let r =
        srv.call_as(Some(&srv.pat), Some(&elsewhere), "POST", "/management/v1/users/grants/_search", json!({})).await;
    assert_eq!(r.ok()["details"]["totalResult"], "0", "{}", r.text);

    // Another organization's project is invisible.
    let other = srv.post("/management/v1/orgs", json!({"name": "Elsewhere"})).await;
    let other = other.ok()["id"].as_str().unwrap().to_string();
    srv.call_as(Some(&srv.pat), Some(&other), "GET", &format!("/management/v1/projects/{p}"), json!(null))
        .await
        .err(404, 5);

    srv.delete(&format!("/management/v1/projects/{p}")).await.ok();
    srv.get(&format!("/management/v1/projects/{p}")).await.err(404, 5);
    assert_eq!(srv.count("project_role").await, 0, "roles go with their project");
    assert_eq!(srv.count("user_grant").await, 0, "grants go with their project");
});

on_both!(oidc_applications, |srv| {
    let p = project(srv, "Portal").await;
    let apps = format!("/management/v1/projects/{p}/apps");
    let r = srv.post(&format!("{apps}/oidc"), full_oidc_app()).await;
    let created = r.ok().clone();
    let app_id = created["appId"].as_str().unwrap().to_string();
    let client_id = created["clientId"].as_str().unwrap().to_string();
    assert_eq!(created["clientSecret"].as_str().unwrap().len(), 43, "POST apps get a secret");
    assert!(created.get("noneCompliant").is_none(), "https URIs for code and implicit are compliant: {created}");

    let r = srv.get(&format!("{apps}/{app_id}")).await;
    let c = r.ok()["app"]["oidcConfig"].clone();
    let want = full_oidc_app();
    for field in [
        "redirectUris",
        "responseTypes",
        "grantTypes",
        "postLogoutRedirectUris",
        "accessTokenType",
        "accessTokenRoleAssertion",
        "idTokenRoleAssertion",
        "idTokenUserinfoAssertion",
        "additionalOrigins",
        "skipNativeAppSuccessPage",
        "backChannelLogoutUri",
        "loginVersion",
        "authMethodType",
    ] {
        assert_eq!(c[field], want[field], "{field}");
    }
    assert_eq!(c["clockSkew"], "2s");
    assert_eq!(c["clientId"], client_id.as_str());
    assert_eq!(c["allowedOrigins"], json!(["https://portal.example.com", "https://cdn.example.com"]));
    assert!(c.get("appType").is_none(), "WEB is the zero value");
    assert_eq!(r.body["app"]["name"], "portal");
    assert_eq!(r.body["app"]["state"], "APP_STATE_ACTIVE");

    // A compliant public native app gets no secret and no problems.
    let native = json!({"name": "cli", "redirectUris": ["http://127.0.0.1:8765/cb", "com.example.cli:/cb"],
        "appType": "OIDC_APP_TYPE_NATIVE", "authMethodType": "OIDC_AUTH_METHOD_TYPE_NONE"});
    let r = srv.post(&format!("{apps}/oidc"), native).await;
    assert!(r.ok().get("clientSecret").is_none());
    assert!(r.body.get("noneCompliant").is_none(), "{}", r.text);
    let cli = r.body["appId"].as_str().unwrap().to_string();
    srv.post(&format!("{apps}/{cli}/oidc_config/_generate_client_secret"), json!({})).await.err(400, 9);
    // A non-compliant one is created and reported.
    let r = srv
        .post(&format!("{apps}/oidc"), json!({"name": "plain", "redirectUris": ["http://app.example.com/cb"]}))
        .await;
    let keys: Vec<_> =
        r.ok()["complianceProblems"].as_array().unwrap().iter().map(|p| p["key"].as_str().unwrap()).collect();
    assert_eq!(keys, vec!["Application.OIDC.V1.NotCompliant", "Application.OIDC.V1.Code.RedirectUris.HttpOnlyForWeb"]);
    assert!(r.body["complianceProblems"][0]["localizedMessage"].as_str().is_some_and(|s| !s.is_empty()));

    // Hard errors: nothing is created.
    let before = srv.count("app").await;
    for bad in [
        json!({"name": "", "redirectUris": ["https://a.example/cb"]}),
        json!({"name": "x", "redirectUris": ["https://a.example/cb#frag"]}),
        json!({"name": "x", "redirectUris": ["not a uri"]}),
        json!({"name": "x", "appType": "OIDC_APP_TYPE_NATIVE", "redirectUris": ["javascript:alert(document.domain)"]}),
        json!({"name": "x", "postLogoutRedirectUris": ["data:text/html,<script>alert(1)</script>"]}),
        json!({"name": "x", "responseTypes": ["OIDC_RESPONSE_TYPE_ID_TOKEN"], "grantTypes": ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE"]}),
        json!({"name": "x", "clockSkew": "6s"}),
        json!({"name": "x", "clockSkew": "soon"}),
        json!({"name": "x", "additionalOrigins": ["https://a.example/path"]}),
        json!({"name": "x", "backChannelLogoutUri": "http://10.0.0.5:8080/admin"}),
        json!({"name": "x", "backChannelLogoutUri": "ftp://a.example/logout"}),
        json!({"name": "x", "appType": "OIDC_APP_TYPE_TOASTER"}),
        json!({"name": "x", "authMethodType": 9}),
        json!({"name": "portal", "redirectUris": ["https://a.example/cb"]}),
    ] {
        let r = srv.post(&format!("{apps}/oidc"), bad.clone()).await;
        assert!(r.status == 400 || r.status == 409, "{bad}: {}", r.text);
    }
    assert_eq!(srv.count("app").await, before);
    srv.post("/management/v1/projects/404/apps/oidc", json!({"name": "x"})).await.err(404, 5);

    // Update replaces the configuration; switching to NONE drops the secret.
    let mut update = full_oidc_app();
    update["authMethodType"] = json!("OIDC_AUTH_METHOD_TYPE_NONE");
    update["redirectUris"] = json!(["https://portal.example.com/new"]);
    srv.put(&format!("{apps}/{app_id}/oidc_config"), update.clone()).await.ok();
    srv.put(&format!("{apps}/{app_id}/oidc_config"), update).await.err(400, 9);
    let r = srv.get(&format!("{apps}/{app_id}")).await;
    assert_eq!(r.ok()["app"]["oidcConfig"]["redirectUris"], json!(["https://portal.example.com/new"]));
    let mut c = srv.state.db.conn().await.unwrap();
    let stored = latch::store::app::get_by_client_id(&mut c, &client_id).await.unwrap().unwrap();
    assert!(stored.secret_digest.is_none());
    drop(c);
    let mut back = full_oidc_app();
    back["authMethodType"] = json!("OIDC_AUTH_METHOD_TYPE_BASIC");
    srv.put(&format!("{apps}/{app_id}/oidc_config"), back).await.ok();
    let s = srv.post(&format!("{apps}/{app_id}/oidc_config/_generate_client_secret"), json!({})).await;
    let secret = s.ok()["clientSecret"].as_str().unwrap().to_string();
    let mut c = srv.state.db.conn().await.unwrap();
    let stored = latch::store::app::get_by_client_id(&mut c, &client_id).await.unwrap().unwrap();
    assert!(latch::crypto::secret::matches(stored.secret_digest.as_ref().unwrap(), &secret));
    drop(c);

    let r = srv.post(&format!("{apps}/_search"), json!({"queries": [{"nameQuery": {"name": "cli"}}]})).await;
    assert_eq!(r.ok()["details"]["totalResult"], "1");
    let r = srv.post(&format!("{apps}/_search"), json!({})).await;
    assert_eq!(r.ok()["details"]["totalResult"], "3");
    srv.delete(&format!("{apps}/{cli}")).await.ok();
    srv.get(&format!("{apps}/{cli}")).await.err(404, 5);
});

on_both!(api_applications_and_app_keys, |srv| {
    let p = project(srv, "Backend").await;
    let apps = format!("/management/v1/projects/{p}/apps");
    let r = srv.post(&format!("{apps}/api"), json!({"name": "resource-server"})).await;
    assert!(r.ok()["clientSecret"].is_string(), "BASIC is the default");
    let basic = r.body["appId"].as_str().unwrap().to_string();
    let r = srv
        .post(
            &format!("{apps}/api"),
            json!({"name": "jwt-rs", "authMethodType": "API_AUTH_METHOD_TYPE_PRIVATE_KEY_JWT"}),
        )
        .await;
    assert!(r.ok().get("clientSecret").is_none());
    let jwt_app = r.body["appId"].as_str().unwrap().to_string();
    let jwt_client = r.body["clientId"].as_str().unwrap().to_string();
    let r = srv.get(&format!("{apps}/{jwt_app}")).await;
    assert_eq!(r.ok()["app"]["apiConfig"]["authMethodType"], "API_AUTH_METHOD_TYPE_PRIVATE_KEY_JWT");
    srv.post(&format!("{apps}/{basic}/api_config/_generate_client_secret"), json!({})).await.ok();
    srv.post(&format!("{apps}/{jwt_app}/api_config/_generate_client_secret"), json!({})).await.err(400, 9);
    srv.put(&format!("{apps}/{basic}/api_config"), json!({"authMethodType": "API_AUTH_METHOD_TYPE_BASIC"}))
        .await
        .err(400, 9);

    // Keys only for PRIVATE_KEY_JWT applications.
    srv.post(&format!("{apps}/{basic}/keys"), json!({"type": "KEY_TYPE_JSON"})).await.err(400, 9);
    let r = srv.post(&format!("{apps}/{jwt_app}/keys"), json!({"type": "KEY_TYPE_JSON"})).await;
    let key_id = r.ok()["id"].as_str().unwrap().to_string();
    let file: Value = serde_json::from_slice(
        &base64::engine::general_purpose::STANDARD.decode(r.body["keyDetails"].as_str().unwrap()).unwrap(),
    )
    .unwrap();
    assert_eq!(file["type"], "application");
    assert_eq!(file["keyId"], key_id.as_str());
    assert_eq!(file["appId"], jwt_app.as_str());
    assert_eq!(file["clientId"], jwt_client.as_str());
    assert!(jsonwebtoken::EncodingKey::from_rsa_pem(file["key"].as_str().unwrap().as_bytes()).is_ok());
    let r = srv.post(&format!("{apps}/{jwt_app}/keys/_search"), json!({})).await;
    assert_eq!(r.ok()["details"]["totalResult"], "1");
    srv.get(&format!("{apps}/{jwt_app}/keys/{key_id}")).await.ok();
    srv.delete(&format!("{apps}/{jwt_app}/keys/{key_id}")).await.ok();
    srv.delete(&format!("{apps}/{jwt_app}/keys/{key_id}")).await.err(404, 5);

    // An OIDC app with private_key_jwt gets keys too.
    let r = srv.post(&format!("{apps}/oidc"), json!({"name": "pkjwt", "redirectUris": ["https://a.example/cb"], "authMethodType": "OIDC_AUTH_METHOD_TYPE_PRIVATE_KEY_JWT"})).await;
    let oidc = r.ok()["appId"].as_str().unwrap().to_string();
    srv.post(&format!("{apps}/{oidc}/keys"), json!({"type": "KEY_TYPE_JSON"})).await.ok();
    // Removing an app removes its keys.
    srv.delete(&format!("{apps}/{oidc}")).await.ok();
    assert_eq!(srv.count("app_key").await, 0);
});

// Deactivating an application, or its project, stops it from authenticating (introspection
// here) and from starting sign-ins; reactivating it brings it back. The state moves only from
// the state it is in.
on_both!(inactive_applications_and_projects_authenticate_no_one, |srv| {
    let p = project(srv, "Switch").await;
    let apps = format!("/management/v1/projects/{p}/apps");
    let rs = srv.post(&format!("{apps}/api"), json!({"name": "rs"})).await;
    let (rs_app, rs_id, rs_secret) = (
        rs.ok()["appId"].as_str().unwrap().to_string(),
        rs.body["clientId"].as_str().unwrap().to_string(),
        rs.body["clientSecret"].as_str().unwrap().to_string(),
    );
    let web = json!({"name": "web", "redirectUris": ["https://app.example.com/cb"]});
    let web_id = srv.post(&format!("{apps}/oidc"), web).await.ok()["clientId"].as_str().unwrap().to_string();
    let introspect = || async {
        crate::resource::form(srv, "/oauth/v2/introspect", Some((&rs_id, &rs_secret)), &[("token", "nothing")]).await.0
    };
    let authorize = || async {
        let b = crate::browser::Browser::new(srv);
        let (_, challenge) = crate::browser::pkce();
        let (id, page) = b.authorize(&crate::authorize::code_query(&web_id, &challenge)).await;
        (id.is_some(), page.status)
    };
    assert_eq!(introspect().await, 200);
    assert_eq!(authorize().await, (true, 200));

    let app = format!("{apps}/{rs_app}");
    srv.post(&format!("{app}/_reactivate"), json!({})).await.err(400, 9);
    srv.post(&format!("{app}/_deactivate"), json!({})).await.ok();
    assert_eq!(srv.get(&app).await.ok()["app"]["state"], "APP_STATE_INACTIVE");
    srv.post(&format!("{app}/_deactivate"), json!({})).await.err(400, 9);
    assert_eq!(introspect().await, 401);
    srv.post(&format!("{app}/_reactivate"), json!({})).await.ok();
    assert_eq!(introspect().await, 200);

    let project_path = format!("/management/v1/projects/{p}");
    srv.post(&format!("{project_path}/_deactivate"), json!({})).await.ok();
    assert_eq!(srv.get(&project_path).await.ok()["project"]["state"], "PROJECT_STATE_INACTIVE");
    srv.post(&format!("{project_path}/_deactivate"), json!({})).await.err(400, 9);
    assert_eq!(introspect().await, 401);
    assert!(!authorize().await.0, "an inactive project's application starts no sign-in");
    srv.post(&format!("{project_path}/_reactivate"), json!({})).await.ok();
    assert_eq!(introspect().await, 200);
    assert_eq!(authorize().await, (true, 200));
    srv.post("/management/v1/projects/404/_deactivate", json!({})).await.err(404, 5);
    // UpdateApp renames, within the project's names.
    srv.put(&app, json!({"name": "rs"})).await.err(400, 9);
    srv.put(&app, json!({"name": "WEB"})).await.err(409, 6);
    srv.put(&app, json!({"name": ""})).await.err(400, 3);
    srv.put(&app, json!({"name": "RS"})).await.ok();
    srv.put(&app, json!({"name": "resource server"})).await.ok();
    assert_eq!(srv.get(&app).await.ok()["app"]["name"], "resource server");
    assert_eq!(introspect().await, 200, "the client id stays");
});

// A role removed while a grant's roles change: the removal waits for the change (both hold the
// project's row on PostgreSQL; SQLite's writers take turns), so it neither keeps the removed role
// in the grant nor brings back one the change took away.
on_both!(a_role_removed_while_a_grant_changes_stays_removed, |srv| {
    use latch::store::project as store;
    let p = project(srv, "Race").await;
    let roles = format!("/management/v1/projects/{p}/roles");
    for k in ["viewer", "editor", "admin"] {
        srv.post(&roles, json!({"roleKey": k, "displayName": k})).await.ok();
    }
    let alice = crate::users::create_alice(srv).await;
    let body = json!({"projectId": p, "roleKeys": ["viewer", "editor", "admin"]});
    let g = srv.post(&format!("/management/v1/users/{alice}/grants"), body).await;
    let grant_id = g.ok()["userGrantId"].as_str().unwrap().to_string();
    let t = latch::clock::Clock::now(&*srv.clock);
    let mut change = srv.state.db.begin().await.unwrap();
    store::lock(&mut change, &p).await.unwrap();
    store::update_grant_roles(&mut change, &grant_id, &["viewer".to_string()], t).await.unwrap();
    let (db, project_id) = (srv.state.db.clone(), p.clone());
    let removal = tokio::spawn(async move {
        let mut tx = db.begin().await.unwrap();
        let done = store::delete_role(&mut tx, &project_id, "editor", t).await.unwrap();
        tx.commit().await.unwrap();
        done
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!removal.is_finished(), "the removal waits for the change");
    change.commit().await.unwrap();
    assert!(removal.await.unwrap());
    let mut c = srv.state.db.conn().await.unwrap();
    let g = store::grants_of_user(&mut c, &alice).await.unwrap();
    assert_eq!(g[0].role_keys, vec!["viewer"]);
});

// Removing an application or its project deletes the refresh tokens, unredeemed codes, pending
// sign-ins and back-channel registrations of its client id, which have no foreign keys and would otherwise come back
// to life with an import that brings the same client id again.
on_both!(removed_applications_and_projects_leave_no_tokens_behind, |srv| {
    use crate::authorize::code_query;
    use crate::browser::{Browser, human, oidc_app, param, pkce};
    use crate::token::exchange_code;
    human(srv, "rita", "Wonder-land1").await;
    let left_for = |client_id: String| async move {
        let mut c = srv.state.db.conn().await.unwrap();
        let mut n = Vec::new();
        for table in ["refresh_token", "auth_code", "auth_request", "session_client"] {
            let (k,): (i64,) = sqlx::query_as(&format!("SELECT COUNT(*) FROM {table} WHERE client_id = $1"))
                .bind(&client_id)
                .fetch_one(&mut *c)
                .await
                .unwrap();
            n.push(k);
        }
        n
    };
    for remove_project in [false, true] {
        let bcl = json!({"backChannelLogoutUri": "https://app.example.com/bcl"});
        let (client_id, secret, project) = oidc_app(srv, bcl).await;
        let secret = secret.unwrap();
        // A refresh token, a code not yet redeemed, a sign-in still pending and the session's
        // note that the application wants to hear of its end.
        let b = Browser::new(srv);
        let (verifier, challenge) = pkce();
        let mut q = code_query(&client_id, &challenge);
        q[3] = ("scope", "openid offline_access");
        let (id, page) = b.authorize(&q).await;
        let done = b.sign_in(&id.unwrap(), &page, "rita", "Wonder-land1").await;
        let code = param(&done.redirect_params(), "code").unwrap().to_string();
        let t = exchange_code(srv, Some((&client_id, &secret)), &code, &verifier).await.ok().clone();
        assert!(t["refresh_token"].is_string());
        b.authorize(&q).await;
        let (pending, _) = Browser::new(srv).authorize(&q).await;
        assert!(pending.is_some());
        // The redeemed code stays (marked used); a finished sign-in does not.
        assert_eq!(left_for(client_id.clone()).await, vec![1, 2, 1, 1], "before the removal");

        let apps = format!("/management/v1/projects/{project}/apps");
        let r = srv.post(&format!("{apps}/_search"), json!({})).await;
        let app_id = r.ok()["result"][0]["id"].as_str().unwrap().to_string();
        if remove_project {
            srv.delete(&format!("/management/v1/projects/{project}")).await.ok();
        } else {
            srv.delete(&format!("{apps}/{app_id}")).await.ok();
        }
        assert_eq!(left_for(client_id).await, vec![0, 0, 0, 0], "removing the project: {remove_project}");
    }
});
