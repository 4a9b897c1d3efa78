//! Machine users: secrets, key files, uploaded public keys and personal access tokens.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::harness::now;
use crate::on_both;

fn decode_key_file(b64: &str) -> Value {
    serde_json::from_slice(&STANDARD.decode(b64).unwrap()).unwrap()
}

on_both!(machine_users_and_secrets, |srv| {
    let r = srv.post("/management/v1/users/machine", json!({"userName": "robot", "name": "Robot", "description": "does work", "accessTokenType": "ACCESS_TOKEN_TYPE_JWT"})).await;
    let id = r.ok()["userId"].as_str().unwrap().to_string();
    let u = srv.get(&format!("/management/v1/users/{id}")).await;
    assert_eq!(u.ok()["user"]["machine"]["accessTokenType"], "ACCESS_TOKEN_TYPE_JWT");
    assert!(u.body["user"]["machine"].get("hasSecret").is_none());
    let custom = srv
        .post("/management/v1/users/machine", json!({"userName": "robot2", "name": "R2", "userId": "my-own-id"}))
        .await;
    assert_eq!(custom.ok()["userId"], "my-own-id");
    srv.post("/management/v1/users/machine", json!({"userName": "robot3", "name": "R3", "userId": "my-own-id"}))
        .await
        .err(409, 6);
    srv.post("/management/v1/users/machine", json!({"userName": "robot", "name": "again"})).await.err(409, 6);
    srv.post("/management/v1/users/machine", json!({"userName": "nameless"})).await.err(400, 3);
    // An application's client id is no user name: the machine user's tokens would carry it as
    // their client_id and audience.
    let (client_id, _, project) = crate::browser::oidc_app(srv, json!({})).await;
    let r = srv.post("/management/v1/users/machine", json!({"userName": client_id, "name": "Mimic"})).await;
    r.err(400, 3);
    assert!(r.body["message"].as_str().unwrap().contains("client id"), "{}", r.body);
    // Nor a project's id, as name or id: a resource server of the project takes a token whose
    // audience names the project, and the machine user's tokens name it first.
    for body in
        [json!({"userName": project, "name": "Mimic"}), json!({"userName": "mimic", "name": "M", "userId": project})]
    {
        let r = srv.post("/management/v1/users/machine", body).await;
        r.err(400, 3);
        assert!(r.body["message"].as_str().unwrap().contains("project"), "{}", r.body);
    }
    let r = srv.put("/management/v1/users/my-own-id/username", json!({"userName": project})).await;
    r.err(400, 3);
    // Nor is it a user id: the jwt-bearer tokens of that user would carry it as their client_id
    // (and an application's introspection would take them for its own); nor another machine
    // user's name, the client_id of that user's client_credentials tokens.
    let r =
        srv.post("/management/v1/users/machine", json!({"userName": "mimic", "name": "M", "userId": client_id})).await;
    r.err(400, 3);
    assert!(r.body["message"].as_str().unwrap().contains("client id"), "{}", r.body);
    let r =
        srv.post("/management/v1/users/machine", json!({"userName": "mimic", "name": "M", "userId": "ROBOT"})).await;
    r.err(400, 3);
    assert!(r.body["message"].as_str().unwrap().contains("user's name"), "{}", r.body);
    srv.post("/management/v1/users/machine", json!({"userName": "r", "name": "R", "description": "d".repeat(501)}))
        .await
        .err(400, 3);
    srv.post(
        "/management/v1/users/machine",
        json!({"userName": "r", "name": "R", "accessTokenType": "ACCESS_TOKEN_TYPE_PAPER"}),
    )
    .await
    .err(400, 3);

    let s = srv.put(&format!("/management/v1/users/{id}/secret"), json!({})).await;
    assert_eq!(s.ok()["clientId"], "robot");
    let secret = s.body["clientSecret"].as_str().unwrap().to_string();
    assert_eq!(secret.len(), 43, "256 bits");
    // Only the digest is stored.
    let mut c = srv.state.db.conn().await.unwrap();
    let stored = latch::store::user::get(&mut c, &id).await.unwrap().unwrap();
    let digest = stored.machine().unwrap().secret_digest.clone().unwrap();
    assert!(latch::crypto::secret::matches(&digest, &secret));
    drop(c);
    let u = srv.get(&format!("/management/v1/users/{id}")).await;
    assert_eq!(u.ok()["user"]["machine"]["hasSecret"], true);
    srv.delete(&format!("/management/v1/users/{id}/secret")).await.ok();
    srv.delete(&format!("/management/v1/users/{id}/secret")).await.err(404, 5);

    srv.put(
        &format!("/management/v1/users/{id}/machine"),
        json!({"name": "Robot 2", "accessTokenType": "ACCESS_TOKEN_TYPE_BEARER"}),
    )
    .await
    .ok();
    let u = srv.get(&format!("/management/v1/users/{id}")).await;
    assert_eq!(u.ok()["user"]["machine"]["name"], "Robot 2");
    assert!(u.body["user"]["machine"].get("accessTokenType").is_none());

    // Machine-only calls on a human.
    let admin =
        srv.post("/management/v1/users/_search", json!({"queries": [{"userNameQuery": {"userName": "admin"}}]})).await;
    let admin = admin.ok()["result"][0]["id"].as_str().unwrap().to_string();
    srv.put(&format!("/management/v1/users/{admin}/secret"), json!({})).await.err(400, 9);
    srv.post(&format!("/management/v1/users/{admin}/pats"), json!({})).await.err(400, 9);
    srv.post(&format!("/management/v1/users/{admin}/keys"), json!({"type": "KEY_TYPE_JSON"})).await.err(400, 9);
});

// A new application's client id or project's id is no user's name or id, project id or client
// id (an import chooses those): a drawn id that is one is drawn again.
on_both!(a_new_client_id_is_no_users_name_or_id, |srv| {
    use latch::management::apps::fresh_audience_id;
    let r = srv.post("/management/v1/users/machine", json!({"userName": "m-taken", "name": "M"})).await;
    let user_id = r.ok()["userId"].as_str().unwrap().to_string();
    let (client_id, _, project) = crate::browser::oidc_app(srv, json!({})).await;
    let mut c = srv.state.db.conn().await.unwrap();
    let mut drawn = ["m-taken".to_string(), user_id, client_id, project, "free".to_string()].into_iter();
    assert_eq!(fresh_audience_id(&mut c, || drawn.next().unwrap()).await.unwrap(), "free");
    let e = fresh_audience_id(&mut c, || "m-taken".to_string()).await.unwrap_err();
    assert_eq!(e.code, latch::api::error::Code::Internal);
});

on_both!(machine_keys, |srv| {
    let (id, _) = srv.machine_with_roles(None, "signer", &[]).await;
    let keys = format!("/management/v1/users/{id}/keys");
    srv.post(&keys, json!({})).await.err(400, 3);
    srv.post(&keys, json!({"type": "KEY_TYPE_UNSPECIFIED"})).await.err(400, 3);
    srv.post(&keys, json!({"type": "KEY_TYPE_JSON", "expirationDate": "2001-01-01T00:00:00Z"})).await.err(400, 3);
    srv.post(&keys, json!({"type": "KEY_TYPE_JSON", "expirationDate": "next week"})).await.err(400, 3);
    srv.post(&keys, json!({"type": "KEY_TYPE_JSON", "publicKey": "bm90IGEga2V5"})).await.err(400, 3);
    srv.post(&keys, json!({"type": "KEY_TYPE_JSON", "publicKey": "%%%"})).await.err(400, 3);
    assert_eq!(srv.count("machine_key").await, 0);

    let r = srv.post(&keys, json!({"type": "KEY_TYPE_JSON", "expirationDate": "2099-01-01T00:00:00Z"})).await;
    let key_id = r.ok()["keyId"].as_str().unwrap().to_string();
    let file = decode_key_file(r.body["keyDetails"].as_str().unwrap());
    assert_eq!(file["type"], "serviceaccount");
    assert_eq!(file["keyId"], key_id.as_str());
    assert_eq!(file["userId"], id.as_str());
    let pem = file["key"].as_str().unwrap();
    // A third-party JWT library signs with the key file; the stored public key verifies it.
    let enc = jsonwebtoken::EncodingKey::from_rsa_pem(pem.as_bytes()).expect("a PEM RSA private key");
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
    header.kid = Some(key_id.clone());
    let claims = json!({"iss": id, "sub": id, "aud": srv.base, "iat": now(), "exp": now() + 600});
    let jwt = jsonwebtoken::encode(&header, &claims, &enc).unwrap();
    let mut c = srv.state.db.conn().await.unwrap();
    let stored =
        latch::store::key::get_key(&mut c, latch::store::key::Owner::User, &id, &key_id).await.unwrap().unwrap();
    drop(c);
    let dec = jsonwebtoken::DecodingKey::from_rsa_pem(stored.public_key.as_bytes()).unwrap();
    let mut v = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
    v.set_audience(&[srv.base.as_str()]);
    jsonwebtoken::decode::<Value>(&jwt, &dec, &v).expect("the stored public key verifies the assertion");
    assert!(!stored.public_key.contains("PRIVATE"), "latch keeps no private key");

    // Bring your own public key: no key file comes back.
    let kp = latch::crypto::keys::generate_client_key().unwrap();
    let r = srv.post(&keys, json!({"type": "KEY_TYPE_JSON", "publicKey": STANDARD.encode(&kp.public_pem)})).await;
    assert!(r.ok().get("keyDetails").is_none());
    let own = r.body["keyId"].as_str().unwrap().to_string();

    let list = srv.post(&format!("{keys}/_search"), json!({"query": {"asc": true}})).await;
    assert_eq!(list.ok()["details"]["totalResult"], "2");
    assert_eq!(list.body["result"][0]["type"], "KEY_TYPE_JSON");
    assert_eq!(list.body["result"][0]["expirationDate"], "2099-01-01T00:00:00Z");
    let one = srv.get(&format!("{keys}/{own}")).await;
    assert_eq!(one.ok()["key"]["id"], own.as_str());
    srv.delete(&format!("{keys}/{own}")).await.ok();
    srv.get(&format!("{keys}/{own}")).await.err(404, 5);
    srv.delete(&format!("{keys}/{own}")).await.err(404, 5);
});

on_both!(personal_access_tokens, |srv| {
    let (id, _) = srv.machine_with_roles(None, "script", &["ORG_OWNER"]).await;
    let pats = format!("/management/v1/users/{id}/pats");
    let r = srv.post(&pats, json!({"expirationDate": "2099-01-01T00:00:00Z"})).await;
    let token = r.ok()["token"].as_str().unwrap().to_string();
    let token_id = r.body["tokenId"].as_str().unwrap().to_string();
    // The new token authenticates its user.
    let me = srv.call_as(Some(&token), None, "GET", "/management/v1/orgs/me", json!(null)).await;
    assert_eq!(me.ok()["org"]["name"], "latch");
    let list = srv.post(&format!("{pats}/_search"), json!({})).await;
    assert_eq!(list.ok()["details"]["totalResult"], "2");
    let created =
        list.body["result"].as_array().unwrap().iter().find(|p| p["id"] == token_id.as_str()).cloned().unwrap();
    assert_eq!(created["scopes"], json!(["openid", "urn:service:iam:user:resourceowner"]));
    // An API introspects it: the user's organization comes along (as ZITADEL's token scopes
    // give it), no client it was issued to, no expiry when it has none.
    let project =
        srv.post("/management/v1/projects", json!({"name": "api"})).await.ok()["id"].as_str().unwrap().to_string();
    let api = srv.post(&format!("/management/v1/projects/{project}/apps/api"), json!({"name": "rs"})).await;
    let (api_id, api_secret) =
        (api.ok()["clientId"].as_str().unwrap().to_string(), api.body["clientSecret"].as_str().unwrap().to_string());
    let never = srv.post(&pats, json!({})).await.ok()["token"].as_str().unwrap().to_string();
    for (t, expires) in [(&token, true), (&never, false)] {
        let r = reqwest::Client::new()
            .post(srv.url("/oauth/v2/introspect"))
            .basic_auth(&api_id, Some(&api_secret))
            .form(&[("token", t.as_str())])
            .send()
            .await
            .unwrap();
        let body: serde_json::Value = r.json().await.unwrap();
        assert_eq!(body["active"], true, "{body}");
        assert_eq!(body["sub"], id.as_str());
        assert!(body["urn:service:iam:user:resourceowner:id"].is_string(), "{body}");
        assert!(body.get("client_id").is_none(), "{body}");
        assert_eq!(body.get("exp").is_some(), expires, "{body}");
    }
    srv.post(&pats, json!({"expirationDate": "1999-01-01T00:00:00Z"})).await.err(400, 3);

    // A short-lived token stops working when it expires.
    let soon = latch::api::types::ts(latch::clock::Clock::now(&*srv.clock) + 60);
    let r = srv.post(&pats, json!({"expirationDate": soon})).await;
    let short = r.ok()["token"].as_str().unwrap().to_string();
    srv.call_as(Some(&short), None, "GET", "/management/v1/orgs/me", json!(null)).await.ok();
    srv.clock.advance(61);
    srv.call_as(Some(&short), None, "GET", "/management/v1/orgs/me", json!(null)).await.err(401, 16);

    // A removed token, or one of a deactivated user, is refused.
    srv.delete(&format!("{pats}/{token_id}")).await.ok();
    srv.call_as(Some(&token), None, "GET", "/management/v1/orgs/me", json!(null)).await.err(401, 16);
    srv.delete(&format!("{pats}/{token_id}")).await.err(404, 5);
    let r = srv.post(&pats, json!({})).await;
    let third = r.ok()["token"].as_str().unwrap().to_string();
    srv.post(&format!("/management/v1/users/{id}/_deactivate"), json!({})).await.ok();
    srv.call_as(Some(&third), None, "GET", "/management/v1/orgs/me", json!(null)).await.err(401, 16);
});

// A machine secret generated while another administrator deletes the user: once the deletion
// commits, the call finds no user (404) instead of answering with a secret nothing would take.
// PostgreSQL only: SQLite's writers take turns, so the call never runs between.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_for_a_user_deleted_meanwhile_is_not_found() {
    let srv = crate::harness::TestServer::start(crate::harness::Backend::Postgres).await;
    {
        let srv = &srv;
        let r = srv.post("/management/v1/users/machine", json!({"userName": "doomed", "name": "D"})).await;
        let id = r.ok()["userId"].as_str().unwrap().to_string();
        let mut deletion = srv.state.db.begin().await.unwrap();
        assert!(latch::store::user::delete(&mut deletion, &id).await.unwrap());
        let path = format!("/management/v1/users/{id}/secret");
        let change = srv.put(&path, json!({}));
        let commit = async {
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            deletion.commit().await.unwrap();
        };
        let (r, ()) = tokio::join!(change, commit);
        r.err(404, 5);
    }
    srv.stop().await;
}
