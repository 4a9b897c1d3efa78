//! Introspection, userinfo, revocation, end session, the management API with access tokens,
//! and the sweep.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::browser::{Browser, human, oidc_app, param};
use crate::harness::{TestServer, now};
use crate::on_both;
use crate::token::{code_for, exchange_code, machine_key, sign, token};

const CB: &str = "https://app.example.com/cb";

pub async fn form(
    srv: &TestServer,
    path: &str,
    basic: Option<(&str, &str)>,
    fields: &[(&str, &str)],
) -> (u16, reqwest::header::HeaderMap, Value) {
    let body = form_urlencoded::Serializer::new(String::new()).extend_pairs(fields).finish();
    let mut req = reqwest::Client::new()
        .post(srv.url(path))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body);
    if let Some((id, secret)) = basic {
        req = req.header("authorization", format!("Basic {}", STANDARD.encode(format!("{id}:{secret}"))));
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    let text = r.text().await.unwrap();
    (status, headers, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

async fn userinfo(srv: &TestServer, at: &str) -> (u16, reqwest::header::HeaderMap, Value) {
    let r = reqwest::Client::new().get(srv.url("/oidc/v1/userinfo")).bearer_auth(at).send().await.unwrap();
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    (status, headers, r.json().await.unwrap_or(Value::Null))
}

/// An API application (a resource server) in `project`, with its client id and secret.
async fn api_app(srv: &TestServer, project: &str) -> (String, String) {
    let r = srv
        .post(
            &format!("/management/v1/projects/{project}/apps/api"),
            json!({"name": format!("rs{}", latch::id::new_id())}),
        )
        .await;
    (r.ok()["clientId"].as_str().unwrap().to_string(), r.body["clientSecret"].as_str().unwrap().to_string())
}

/// Signs alice in and returns (client id, secret, project, token response).
async fn signed_in(srv: &TestServer, scope: &str, app: Value) -> (String, String, String, Value) {
    let (client_id, secret, project) = oidc_app(srv, app).await;
    let secret = secret.unwrap();
    let b = Browser::new(srv);
    let (code, verifier) = code_for(srv, &b, &client_id, scope).await;
    let t = exchange_code(srv, Some((&client_id, &secret)), &code, &verifier).await;
    let body = t.ok().clone();
    (client_id, secret, project, body)
}

on_both!(introspection, |srv| {
    let alice = human(srv, "alice", "Wonder-land1").await;
    for jwt in [false, true] {
        let app = if jwt { json!({"accessTokenType": "OIDC_TOKEN_TYPE_JWT"}) } else { json!({}) };
        let (client_id, secret, project, t) = signed_in(srv, "openid profile email", app).await;
        let at = t["access_token"].as_str().unwrap();
        assert_eq!(at.contains('.'), jwt);
        let (rs, rs_secret) = api_app(srv, &project).await;
        let (status, headers, body) =
            form(srv, "/oauth/v2/introspect", Some((&rs, &rs_secret)), &[("token", at)]).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(headers.get("cache-control").unwrap(), "no-store");
        assert_eq!(body["active"], true);
        for f in ["aud", "client_id", "exp", "iat", "iss", "jti", "nbf", "scope", "token_type", "username"] {
            assert!(body.get(f).is_some(), "{f} missing: {body}");
        }
        assert_eq!(body["token_type"], "Bearer");
        assert_eq!(body["client_id"], client_id.as_str());
        assert_eq!(body["username"], "alice@latch.127.0.0.1");
        assert_eq!(body["sub"], alice.as_str());
        assert_eq!(body["email"], "alice@example.com");
        assert_eq!(body["given_name"], "alice");
        assert!(body["aud"].as_array().unwrap().contains(&json!(project)));
        // The client itself may introspect too.
        let (_, _, own) = form(srv, "/oauth/v2/introspect", Some((&client_id, &secret)), &[("token", at)]).await;
        assert_eq!(own["active"], true);
        // Another project's resource server sees nothing.
        let other = srv.post("/management/v1/projects", json!({"name": format!("other{jwt}")})).await;
        let (ors, ors_secret) = api_app(srv, other.ok()["id"].as_str().unwrap()).await;
        let (_, _, b) = form(srv, "/oauth/v2/introspect", Some((&ors, &ors_secret)), &[("token", at)]).await;
        assert_eq!(b, json!({"active": false}));
        // Forged JWT access tokens: a tampered payload, the header's alg or typ changed, the kid
        // unknown or missing, padding added to the signature, an ID token presented instead.
        if jwt {
            use base64::engine::general_purpose::URL_SAFE_NO_PAD;
            let parts: Vec<&str> = at.split('.').collect();
            let header: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[0]).unwrap()).unwrap();
            let mut payload: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
            payload["sub"] = json!("someone-else");
            let enc = |v: &Value| URL_SAFE_NO_PAD.encode(v.to_string());
            let with_header = |f: &dyn Fn(&mut Value)| {
                let mut h = header.clone();
                f(&mut h);
                format!("{}.{}.{}", enc(&h), parts[1], parts[2])
            };
            let forged = [
                format!("{}.{}.{}", parts[0], enc(&payload), parts[2]),
                with_header(&|h| h["alg"] = json!("HS256")),
                with_header(&|h| h["alg"] = json!("none")),
                with_header(&|h| h["typ"] = json!("JWT")),
                with_header(&|h| h["kid"] = json!("unknown")),
                with_header(&|h| {
                    h.as_object_mut().unwrap().remove("kid");
                }),
                format!("{}.{}.{}=", parts[0], parts[1], parts[2]),
                format!("{}.{}.", parts[0], parts[1]),
                t["id_token"].as_str().unwrap().to_string(),
            ];
            for bad in &forged {
                let (s, _, b) = form(srv, "/oauth/v2/introspect", Some((&rs, &rs_secret)), &[("token", bad)]).await;
                assert_eq!((s, b), (200, json!({"active": false})), "{bad}");
            }
        }
        // Garbage, expired.
        for bad in ["garbage", "x.y.z", &"a".repeat(20000), "eyJhbGciOiJub25lIn0.e30."] {
            let (s, _, b) = form(srv, "/oauth/v2/introspect", Some((&rs, &rs_secret)), &[("token", bad)]).await;
            assert_eq!((s, b), (200, json!({"active": false})));
        }
        srv.clock.advance(43201);
        let (_, _, b) = form(srv, "/oauth/v2/introspect", Some((&rs, &rs_secret)), &[("token", at)]).await;
        assert_eq!(b, json!({"active": false}), "expired");
        srv.clock.advance(-43201);
    }
    // Client authentication failures are 401; a missing token is invalid_request.
    let (_, _, project, t) = signed_in(srv, "openid", json!({"name": "x"})).await;
    let (rs, rs_secret) = api_app(srv, &project).await;
    let at = t["access_token"].as_str().unwrap();
    let (s, h, b) = form(srv, "/oauth/v2/introspect", Some((&rs, "wrong")), &[("token", at)]).await;
    assert_eq!((s, b["error"].as_str()), (401, Some("invalid_client")));
    assert!(h.get("www-authenticate").is_some());
    let (s, _, b) =
        form(srv, "/oauth/v2/introspect", None, &[("token", at), ("client_id", &rs), ("client_secret", &rs_secret)])
            .await;
    assert_eq!((s, b["error"].as_str()), (401, Some("invalid_client")), "client_secret_post is not accepted here");
    let (s, h, b) = form(srv, "/oauth/v2/introspect", None, &[("token", at)]).await;
    assert_eq!((s, b["error"].as_str()), (401, Some("invalid_client")));
    let challenge = h.get("www-authenticate").unwrap().to_str().unwrap();
    assert!(challenge.starts_with("Basic"), "the scheme the endpoint takes: {challenge}");
    // A client assertion that is no JWT fails the client's authentication too.
    let garbage = [
        ("token", at),
        ("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"),
        ("client_assertion", "garbage"),
    ];
    let (s, _, b) = form(srv, "/oauth/v2/introspect", None, &garbage).await;
    assert_eq!((s, b["error"].as_str()), (401, Some("invalid_client")), "{b}");
    let (s, _, b) = form(srv, "/oauth/v2/introspect", Some((&rs, &rs_secret)), &[]).await;
    assert_eq!((s, b["error"].as_str()), (400, Some("invalid_request")));
    // A personal access token is introspectable by any resource server.
    let (_, pat) = srv.machine_with_roles(None, "script", &[]).await;
    let (_, _, b) = form(srv, "/oauth/v2/introspect", Some((&rs, &rs_secret)), &[("token", &pat)]).await;
    assert_eq!(b["active"], true);
    assert_eq!(b["username"], "script@latch.127.0.0.1");
});

// The tokens of an application count only while it and its project are active (as Keycloak
// refuses a disabled client's tokens): deactivated, its tokens are inactive at introspection
// and refused by userinfo; reactivated, those not expired count again; removed, for good.
// (A machine user's own client_credentials and jwt-bearer tokens name no application; the
// introspection tests above show them counting.)
on_both!(an_applications_tokens_count_while_it_is_active, |srv| {
    human(srv, "alice", "Wonder-land1").await;
    let (client_id, _, project, t) = signed_in(srv, "openid", json!({})).await;
    let at = t["access_token"].as_str().unwrap().to_string();
    let (rs, rs_secret) = api_app(srv, &project).await;
    let app_id = crate::browser::app_id_of(srv, &client_id).await;
    let path = format!("/management/v1/projects/{project}/apps/{app_id}");
    let introspected = || async {
        let (status, _, b) = form(srv, "/oauth/v2/introspect", Some((&rs, &rs_secret)), &[("token", &at)]).await;
        assert_eq!(status, 200, "{b}");
        b["active"] == true
    };
    assert!(introspected().await);
    assert_eq!(userinfo(srv, &at).await.0, 200);
    srv.post(&format!("{path}/_deactivate"), json!({})).await.ok();
    assert!(!introspected().await, "a deactivated application's token");
    assert_eq!(userinfo(srv, &at).await.0, 401);
    srv.post(&format!("{path}/_reactivate"), json!({})).await.ok();
    assert!(introspected().await);
    assert_eq!(userinfo(srv, &at).await.0, 200);
    let project_path = format!("/management/v1/projects/{project}");
    srv.post(&format!("{project_path}/_deactivate"), json!({})).await.ok();
    assert_eq!(userinfo(srv, &at).await.0, 401, "a deactivated project's token");
    srv.post(&format!("{project_path}/_reactivate"), json!({})).await.ok();
    assert_eq!(userinfo(srv, &at).await.0, 200);
    srv.delete(&path).await.ok();
    assert!(!introspected().await, "a removed application's token");
    assert_eq!(userinfo(srv, &at).await.0, 401);
});

// A human user named like an application's client id is no machine user: its tokens from that
// application end with the application like everyone's.
on_both!(a_human_named_like_a_client_id_keeps_no_token_alive, |srv| {
    let (client_id, secret, project) = oidc_app(srv, json!({})).await;
    let secret = secret.unwrap();
    human(srv, &client_id, "Wonder-land1").await;
    let b = Browser::new(srv);
    let (verifier, challenge) = crate::browser::pkce();
    let (id, page) = b.authorize(&crate::authorize::code_query(&client_id, &challenge)).await;
    let done = b.sign_in(&id.unwrap(), &page, &client_id, "Wonder-land1").await;
    let code = param(&done.redirect_params(), "code").unwrap().to_string();
    let t = exchange_code(srv, Some((&client_id, &secret)), &code, &verifier).await;
    let at = t.ok()["access_token"].as_str().unwrap().to_string();
    assert_eq!(userinfo(srv, &at).await.0, 200);
    let app_id = crate::browser::app_id_of(srv, &client_id).await;
    srv.post(&format!("/management/v1/projects/{project}/apps/{app_id}/_deactivate"), json!({})).await.ok();
    assert_eq!(userinfo(srv, &at).await.0, 401);
});

on_both!(userinfo_endpoint, |srv| {
    let alice = human(srv, "alice", "Wonder-land1").await;
    let (client_id, _, _, t) = signed_in(srv, "openid profile email phone", json!({})).await;
    let at = t["access_token"].as_str().unwrap();
    let (s, h, b) = userinfo(srv, at).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(h.get("cache-control").unwrap(), "no-store");
    assert_eq!(b["sub"], alice.as_str());
    assert_eq!(b["email"], "alice@example.com");
    assert_eq!(b["email_verified"], true);
    assert_eq!(b["preferred_username"], "alice@latch.127.0.0.1");
    assert_eq!(b["name"], "alice Test");
    assert!(b.get("phone_number").is_none(), "alice has no phone");
    assert!(b.get("aud").is_none() && b.get("exp").is_none());
    // POST with the token in the header or in the body.
    let r = reqwest::Client::new().post(srv.url("/oidc/v1/userinfo")).bearer_auth(at).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let r = reqwest::Client::new()
        .post(srv.url("/oidc/v1/userinfo"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("access_token={at}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = reqwest::Client::new()
        .post(srv.url("/oidc/v1/userinfo"))
        .bearer_auth(at)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("access_token={at}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400, "two tokens");
    // Missing: a bare challenge. Invalid: invalid_token.
    let r = reqwest::get(srv.url("/oidc/v1/userinfo")).await.unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(r.headers().get("www-authenticate").unwrap(), "Bearer");
    let (s, h, _) = userinfo(srv, "garbage").await;
    assert_eq!(s, 401);
    assert!(h.get("www-authenticate").unwrap().to_str().unwrap().starts_with("Bearer error=\"invalid_token\""));
    let _ = client_id;
    // A machine user's token gets only a machine user's claims.
    let r = srv.post("/management/v1/users/machine", json!({"userName": "robot", "name": "Robot"})).await;
    let robot = r.ok()["userId"].as_str().unwrap().to_string();
    let sec = srv.put(&format!("/management/v1/users/{robot}/secret"), json!({})).await;
    let secret = sec.ok()["clientSecret"].as_str().unwrap().to_string();
    let t = token(
        srv,
        Some(("robot", &secret)),
        &[("grant_type", "client_credentials"), ("scope", "openid profile email")],
    )
    .await;
    let (s, _, b) = userinfo(srv, t.ok()["access_token"].as_str().unwrap()).await;
    assert_eq!(s, 200);
    assert_eq!(b["name"], "Robot");
    assert!(b.get("email").is_none() && b.get("given_name").is_none());
    // Without openid: insufficient scope.
    let t = token(srv, Some(("robot", &secret)), &[("grant_type", "client_credentials"), ("scope", "profile")]).await;
    let (s, h, _) = userinfo(srv, t.ok()["access_token"].as_str().unwrap()).await;
    assert_eq!(s, 403);
    assert!(h.get("www-authenticate").unwrap().to_str().unwrap().contains("insufficient_scope"));
});

on_both!(revocation_endpoint, |srv| {
    human(srv, "alice", "Wonder-land1").await;
    let (client_id, secret, project, t) = signed_in(srv, "openid offline_access", json!({})).await;
    let (rs, rs_secret) = api_app(srv, &project).await;
    let at = t["access_token"].as_str().unwrap().to_string();
    let rt = t["refresh_token"].as_str().unwrap().to_string();
    let active = |tok: String| {
        let (rs, rs_secret) = (rs.clone(), rs_secret.clone());
        async move {
            form(srv, "/oauth/v2/introspect", Some((&rs, &rs_secret)), &[("token", &tok)]).await.2["active"]
                == json!(true)
        }
    };
    assert!(active(at.clone()).await);
    let introspected = form(srv, "/oauth/v2/introspect", Some((&rs, &rs_secret)), &[("token", &at)]).await.2;
    let exp = introspected["exp"].as_i64().unwrap();
    // Another client may not revoke the token.
    let (other, other_secret, _) = oidc_app(srv, json!({"name": "other"})).await;
    let (s, _, b) =
        form(srv, "/oauth/v2/revoke", Some((&other, other_secret.as_deref().unwrap())), &[("token", &at)]).await;
    assert_eq!((s, b["error"].as_str()), (400, Some("unauthorized_client")));
    assert!(active(at.clone()).await);
    // Revoking the access token revokes only it.
    let (s, h, _) = form(
        srv,
        "/oauth/v2/revoke",
        Some((&client_id, &secret)),
        &[("token", &at), ("token_type_hint", "access_token")],
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(h.get("cache-control").unwrap(), "no-store");
    assert!(!active(at.clone()).await);
    // Its entry outlasts the token by a minute: a replica whose clock is ahead must not sweep it
    // while one whose clock is behind still takes the token.
    let mut c = srv.state.db.conn().await.unwrap();
    let (until,): (i64,) = sqlx::query_as("SELECT MAX(expires_at) FROM revocation").fetch_one(&mut *c).await.unwrap();
    drop(c);
    assert_eq!(until, exp + 60);
    let r = token(srv, Some((&client_id, &secret)), &[("grant_type", "refresh_token"), ("refresh_token", &rt)]).await;
    let t2 = r.ok().clone();
    let at2 = t2["access_token"].as_str().unwrap().to_string();
    let rt2 = t2["refresh_token"].as_str().unwrap().to_string();
    assert!(active(at2.clone()).await);
    // Revoking the refresh token revokes the chain and its access tokens; a wrong hint is only a hint.
    let (s, _, _) = form(
        srv,
        "/oauth/v2/revoke",
        Some((&client_id, &secret)),
        &[("token", &rt2), ("token_type_hint", "access_token")],
    )
    .await;
    assert_eq!(s, 200);
    assert!(!active(at2).await);
    token(srv, Some((&client_id, &secret)), &[("grant_type", "refresh_token"), ("refresh_token", &rt2)])
        .await
        .err(400, "invalid_grant");
    // Unknown or already revoked tokens: 200. Bad input: errors.
    for tok in ["unknown-token", rt2.as_str()] {
        let (s, _, _) = form(srv, "/oauth/v2/revoke", Some((&client_id, &secret)), &[("token", tok)]).await;
        assert_eq!(s, 200);
    }
    // A hint latch does not know is ignored (RFC 7009 2.2), also for a token it revokes.
    let (s, _, _) =
        form(srv, "/oauth/v2/revoke", Some((&client_id, &secret)), &[("token", "x"), ("token_type_hint", "id_token")])
            .await;
    assert_eq!(s, 200);
    let (s, _, b) = form(srv, "/oauth/v2/revoke", Some((&client_id, &secret)), &[]).await;
    assert_eq!((s, b["error"].as_str()), (400, Some("invalid_request")));
    let (s, h, b) = form(srv, "/oauth/v2/revoke", Some((&client_id, "wrong")), &[("token", "x")]).await;
    assert_eq!((s, b["error"].as_str()), (401, Some("invalid_client")));
    assert!(h.get("www-authenticate").unwrap().to_str().unwrap().starts_with("Basic"));

    // A machine user revokes the tokens of its client_credentials grants with its name and
    // secret, and no one else's; a wrong secret is invalid_client.
    let m = srv.post("/management/v1/users/machine", json!({"userName": "robot", "name": "robot"})).await;
    let robot = m.ok()["userId"].as_str().unwrap().to_string();
    let s = srv.put(&format!("/management/v1/users/{robot}/secret"), json!({})).await;
    let robot_secret = s.ok()["clientSecret"].as_str().unwrap().to_string();
    let aud = format!("urn:service:iam:org:project:id:{project}:aud");
    let cc = token(srv, Some(("robot", &robot_secret)), &[("grant_type", "client_credentials"), ("scope", &aud)]).await;
    let robot_at = cc.ok()["access_token"].as_str().unwrap().to_string();
    assert!(active(robot_at.clone()).await);
    let (s, _, b) = form(srv, "/oauth/v2/revoke", Some(("robot", "wrong")), &[("token", &robot_at)]).await;
    assert_eq!((s, b["error"].as_str()), (401, Some("invalid_client")));
    let (s, _, b) =
        form(srv, "/oauth/v2/revoke", Some((&other, other_secret.as_deref().unwrap())), &[("token", &robot_at)]).await;
    assert_eq!((s, b["error"].as_str()), (400, Some("unauthorized_client")));
    let (s, _, b) = form(srv, "/oauth/v2/revoke", Some(("robot", &robot_secret)), &[("token", &at)]).await;
    assert_eq!(
        (s, b["error"].as_str()),
        (400, Some("unauthorized_client")),
        "an application's token is not the robot's"
    );
    assert!(active(robot_at.clone()).await);
    let (s, _, _) = form(srv, "/oauth/v2/revoke", Some(("robot", &robot_secret)), &[("token", &robot_at)]).await;
    assert_eq!(s, 200);
    assert!(!active(robot_at).await);
});

on_both!(end_session_ends_sessions_and_their_tokens, |srv| {
    human(srv, "alice", "Wonder-land1").await;
    let (client_id, secret, project) = oidc_app(srv, json!({})).await;
    let secret = secret.unwrap();
    let (rs, rs_secret) = api_app(srv, &project).await;
    let b = Browser::new(srv);
    let (code, verifier) = code_for(srv, &b, &client_id, "openid offline_access").await;
    let t = exchange_code(srv, Some((&client_id, &secret)), &code, &verifier).await;
    let t = t.ok().clone();
    let (at, rt, idt) =
        (t["access_token"].as_str().unwrap(), t["refresh_token"].as_str().unwrap(), t["id_token"].as_str().unwrap());
    // Bad requests never redirect.
    let r = b
        .get(&format!("/oidc/v1/end_session?id_token_hint={idt}&post_logout_redirect_uri=https://evil.example/"))
        .await;
    assert_eq!(r.status, 400);
    assert!(r.location.is_none());
    let r = b.get(&format!("/oidc/v1/end_session?id_token_hint={idt}&client_id=someone-else")).await;
    assert_eq!(r.status, 400);
    let mut forged: Vec<&str> = idt.split('.').collect();
    let payload =
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json!({"sub": "x", "aud": client_id}).to_string());
    forged[1] = &payload;
    let r = b.get(&format!("/oidc/v1/end_session?id_token_hint={}", forged.join("."))).await;
    assert_eq!(r.status, 400);
    assert_eq!(srv.count("session").await, 1, "nothing ended yet");
    // A valid request (even with an expired hint) ends the session and redirects with state.
    srv.clock.advance(43201);
    let r = b
        .get(&format!(
            "/oidc/v1/end_session?id_token_hint={idt}&post_logout_redirect_uri=https://app.example.com/bye&state=xyz"
        ))
        .await;
    assert_eq!(r.status, 303, "{}", r.html);
    assert_eq!(r.location(), "https://app.example.com/bye?state=xyz");
    srv.clock.advance(-43201);
    assert_eq!(srv.count("session").await, 0);
    let (_, _, i) = form(srv, "/oauth/v2/introspect", Some((&rs, &rs_secret)), &[("token", at)]).await;
    assert_eq!(i["active"], false, "the session's access token is inactive");
    token(srv, Some((&client_id, &secret)), &[("grant_type", "refresh_token"), ("refresh_token", rt)])
        .await
        .err(400, "invalid_grant");
    // prompt=none now fails: the browser is signed out.
    let (_, r) = b
        .authorize(&[
            ("client_id", &client_id),
            ("redirect_uri", CB),
            ("response_type", "code"),
            ("scope", "openid"),
            ("prompt", "none"),
        ])
        .await;
    assert_eq!(param(&r.redirect_params(), "error"), Some("login_required"));
    // Without parameters: the signed-out page.
    let r = b.get("/oidc/v1/end_session").await;
    assert_eq!(r.status, 200);
    assert!(r.html.contains("signed out"));
    // A post_logout_redirect_uri without a client is ignored.
    let r = b.get("/oidc/v1/end_session?post_logout_redirect_uri=https://app.example.com/bye").await;
    assert_eq!(r.status, 200);
});

// A code issued before a logout is refused after it for as long as the code lives, also where
// tokens live shorter than codes: the session's revocation entry outlasts both (it lasted only
// as long as the tokens, and the code was taken once it was swept).
on_both!(a_code_from_before_a_logout_is_refused_all_its_life, config: |c| c.login.code_lifetime = "600s".into(), |srv| {
    human(srv, "alice", "Wonder-land1").await;
    let (client_id, secret, _) = oidc_app(srv, json!({})).await;
    let secret = secret.unwrap();
    srv.put("/admin/v1/settings/oidc", json!({"accessTokenLifetime": "60s", "idTokenLifetime": "60s"})).await.ok();
    // Past every token signed under the longer lifetimes before (revocations outlast those).
    srv.clock.advance(12 * 3600 + 120);
    let b = Browser::new(srv);
    let (code, verifier) = code_for(srv, &b, &client_id, "openid offline_access").await;
    assert_eq!(b.sign_out("/oidc/v1/end_session").await.status, 200);
    srv.clock.advance(400);
    let t = latch::clock::Clock::now(&*srv.clock);
    srv.state.revocations.prune(t);
    latch::sweep::sweep(&srv.state.db, t, 1000, 10).await.unwrap();
    exchange_code(srv, Some((&client_id, &secret)), &code, &verifier).await.err(400, "invalid_grant");
    // A code of a sign-in after the logout is taken, so the refusal above is the logout's.
    let (code, verifier) = code_for(srv, &b, &client_id, "openid").await;
    exchange_code(srv, Some((&client_id, &secret)), &code, &verifier).await.ok();
});

// A logout on another replica while a code is redeemed here: that replica revokes the refresh
// tokens it finds stored, and this replica's mirror of revocations may not hold the session's
// entry yet (it polls every 200 ms). A redemption that stores a refresh token therefore reads the
// session's entry from the store: the token is not handed out and is revoked, where before it
// stayed live and, once the entry was swept, refreshed again. The other replica's logout is its
// entry written to the store alone; three rounds, as the mirror may poll in between.
on_both!(a_logout_on_another_replica_during_a_redemption_leaves_no_live_refresh_token, |srv| {
    human(srv, "alice", "Wonder-land1").await;
    let (client_id, secret, _) = oidc_app(srv, json!({})).await;
    let secret = secret.unwrap();
    for _ in 0..3 {
        let b = Browser::new(srv);
        let (code, verifier) = code_for(srv, &b, &client_id, "openid offline_access").await;
        let t = latch::clock::Clock::now(&*srv.clock);
        let mut c = srv.state.db.conn().await.unwrap();
        let sessions: Vec<(String,)> =
            sqlx::query_as("SELECT session_id FROM session").fetch_all(&mut *c).await.unwrap();
        for (sid,) in sessions {
            let key = latch::store::revocation::session_key(&sid);
            latch::store::revocation::revoke(&mut c, &key, t, t + 3600).await.unwrap();
        }
        drop(c);
        let r = exchange_code(srv, Some((&client_id, &secret)), &code, &verifier).await;
        r.err(400, "invalid_grant");
        let mut c = srv.state.db.conn().await.unwrap();
        let (live,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM refresh_token WHERE revoked_at IS NULL")
            .fetch_one(&mut *c)
            .await
            .unwrap();
        assert_eq!(live, 0, "the refresh token stored with the redemption is revoked");
    }
});

on_both!(management_api_with_a_jwt_bearer_token, |srv| {
    let (robot, _) = srv.machine_with_roles(None, "ops", &["ORG_OWNER"]).await;
    let (kid, key) = machine_key(srv, &robot).await;
    let n = now();
    let assertion = sign(&kid, &key, &json!({"iss": robot, "sub": robot, "aud": srv.base, "iat": n, "exp": n + 300}));
    let t = token(
        srv,
        None,
        &[
            ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"),
            ("assertion", &assertion),
            ("scope", "openid urn:service:iam:org:project:id:latch:aud"),
        ],
    )
    .await;
    let at = t.ok()["access_token"].as_str().unwrap().to_string();
    let r = srv.call_as(Some(&at), None, "GET", "/management/v1/orgs/me", json!(null)).await;
    assert_eq!(r.ok()["org"]["name"], "latch");
    srv.call_as(Some(&at), None, "POST", "/management/v1/projects", json!({"name": "from a token"})).await.ok();
    // Without the API audience the token is refused.
    let assertion = sign(&kid, &key, &json!({"iss": robot, "sub": robot, "aud": srv.base, "iat": n, "exp": n + 300}));
    let t = token(
        srv,
        None,
        &[
            ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"),
            ("assertion", &assertion),
            ("scope", "openid"),
        ],
    )
    .await;
    let plain = t.ok()["access_token"].as_str().unwrap().to_string();
    let r = srv.call_as(Some(&plain), None, "GET", "/management/v1/orgs/me", json!(null)).await;
    assert!(r.err(401, 16).contains("latch:aud"));
});

on_both!(the_sweep_keeps_tables_bounded, |srv| {
    human(srv, "alice", "Wonder-land1").await;
    let (client_id, secret, _) = oidc_app(srv, json!({})).await;
    let secret = secret.unwrap();
    for _ in 0..3 {
        let b = Browser::new(srv);
        let (code, verifier) = code_for(srv, &b, &client_id, "openid offline_access").await;
        let t = token(
            srv,
            Some((&client_id, &secret)),
            &[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", CB),
                ("code_verifier", &verifier),
            ],
        )
        .await;
        let rt = t.ok()["refresh_token"].as_str().unwrap().to_string();
        token(
            srv,
            Some((&client_id, &secret)),
            &[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", CB),
                ("code_verifier", &verifier),
            ],
        )
        .await;
        let _ = rt;
        let (_, _) = b
            .authorize(&[
                ("client_id", &client_id),
                ("redirect_uri", CB),
                ("response_type", "code"),
                ("scope", "openid"),
                ("prompt", "login"),
            ])
            .await;
    }
    for t in ["auth_request", "auth_code", "session", "refresh_token", "revocation"] {
        assert!(srv.count(t).await > 0, "{t} has rows");
    }
    // Nothing is due yet.
    let r = latch::sweep::sweep(&srv.state.db, latch::clock::Clock::now(&*srv.clock), 2, 100).await.unwrap();
    assert_eq!(r.total(), 0, "{r:?}");
    // 91 days later every row has expired and goes, two at a time: one batch per round, so a
    // round leaves a backlog, and rounds follow until none is at its cap.
    srv.clock.advance(91 * 86400);
    let now = latch::clock::Clock::now(&*srv.clock);
    let pause = std::time::Duration::ZERO;
    let r = latch::sweep::sweep_until_done(&srv.state.db, now, 2, 1, 1000, pause).await.unwrap();
    assert!(r.total() > 10, "{r:?}");
    for t in ["auth_request", "auth_code", "session", "refresh_token", "revocation", "assertion_jti", "user_code"] {
        assert_eq!(srv.count(t).await, 0, "{t} is empty");
    }
    // Users and apps stay.
    assert!(srv.count("account").await >= 3);
});

/// The `logout_token` of the next form the endpoint of [`logout_receiver`] receives (within 10 s).
pub async fn next_logout_token(received: &mut tokio::sync::mpsc::UnboundedReceiver<String>) -> String {
    let body = tokio::time::timeout(std::time::Duration::from_secs(10), received.recv())
        .await
        .expect("a logout token within 10 s")
        .unwrap();
    form_urlencoded::parse(body.as_bytes())
        .find(|(k, _)| k == "logout_token")
        .map(|(_, v)| v.into_owned())
        .expect("logout_token in the form")
}

/// An application's back-channel logout endpoint: collects the forms posted to it.
pub async fn logout_receiver() -> (String, tokio::sync::mpsc::UnboundedReceiver<String>) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let app = axum::Router::new().route(
        "/backchannel",
        axum::routing::post(move |body: String| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(body);
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/backchannel"), rx)
}

// An application noted in a session for its logout token stays noted while the session lives,
// past the note's own expiry (the session's when the application was noted: a later sign-in
// renews the session, not the notes of the other applications in it). It goes with the session.
on_both!(an_applications_note_lasts_as_long_as_its_session, |srv| {
    use latch::store::{session, session_client};
    let alice = human(srv, "alice", "Wonder-land1").await;
    let now = latch::clock::Clock::now(&*srv.clock);
    let mut c = srv.state.db.conn().await.unwrap();
    let renewed = session::NewSession {
        session_id: "s1".into(),
        ua_key: vec![7; 32],
        user_id: alice,
        auth_time: now,
        amr: vec!["pwd".into()],
        now,
        expires_at: now + 1000,
    };
    session::upsert(&mut c, &renewed).await.unwrap();
    session_client::note(&mut c, "s1", "app-noted-before", now + 100).await.unwrap();
    drop(c);
    let sweep = async |at: i64| latch::sweep::sweep(&srv.state.db, at, 100, 10).await.unwrap();
    sweep(now + 500).await;
    assert_eq!(srv.count("session_client").await, 1, "the session lives: its logout token is still owed");
    sweep(now + 1001).await;
    assert_eq!(srv.count("session").await, 0);
    assert_eq!(srv.count("session_client").await, 0);
});

on_both!(back_channel_logout_notifies_the_applications_of_the_session, |srv| {
    let alice = human(srv, "alice", "Wonder-land1").await;
    let (uri, mut received) = logout_receiver().await;
    let (client_id, secret, _) = oidc_app(srv, json!({"backChannelLogoutUri": uri, "devMode": true})).await;
    let secret = secret.unwrap();
    // Another application in the same session, without a back-channel URI.
    let (other, _, _) = oidc_app(srv, json!({})).await;
    srv.put("/v2/features/instance", json!({"enableBackChannelLogout": true})).await.ok();
    let b = Browser::new(srv);
    let (code, verifier) = code_for(srv, &b, &client_id, "openid").await;
    code_for(srv, &b, &other, "openid").await;
    let t = exchange_code(srv, Some((&client_id, &secret)), &code, &verifier).await;
    let sid = crate::token::claims(t.ok()["id_token"].as_str().unwrap())["sid"].as_str().unwrap().to_string();
    assert_eq!(srv.count("session_client").await, 1, "only the application with a URI is noted");

    let r = b.sign_out("/oidc/v1/end_session").await;
    assert_eq!(r.status, 200);
    let token = next_logout_token(&mut received).await;
    // Signed by latch, for the application, about the session.
    let header = jsonwebtoken::decode_header(&token).unwrap();
    assert_eq!(header.typ.as_deref(), Some("logout+jwt"));
    let jwks: Value = reqwest::get(srv.url("/oauth/v2/keys")).await.unwrap().json().await.unwrap();
    let jwk = jwks["keys"].as_array().unwrap().iter().find(|k| k["kid"] == header.kid.clone().unwrap()).unwrap();
    let jwk: jsonwebtoken::jwk::Jwk = serde_json::from_value(jwk.clone()).unwrap();
    let mut v = jsonwebtoken::Validation::new(header.alg);
    v.set_audience(&[client_id.as_str()]);
    v.set_issuer(&[srv.base.as_str()]);
    v.validate_exp = false; // the test clock is not the system clock
    let claims = jsonwebtoken::decode::<Value>(&token, &jsonwebtoken::DecodingKey::from_jwk(&jwk).unwrap(), &v)
        .expect("signed by latch")
        .claims;
    assert_eq!(claims["sub"], alice.as_str());
    assert_eq!(claims["sid"], sid.as_str());
    assert!(claims["events"]["http://schemas.openid.net/event/backchannel-logout"].is_object(), "{claims}");
    assert!(claims.get("nonce").is_none());
    assert_eq!(claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(), 120);
    assert_eq!(crate::token::id_bytes(&claims["jti"]), 16, "a 128-bit random jti: {claims}");
    assert_eq!(srv.count("session_client").await, 0);

    // With the feature off, nothing is sent (and nothing is left behind).
    srv.put("/v2/features/instance", json!({"enableBackChannelLogout": false})).await.ok();
    code_for(srv, &b, &client_id, "openid").await;
    assert_eq!(srv.count("session_client").await, 1);
    b.sign_out("/oidc/v1/end_session").await;
    assert!(
        tokio::time::timeout(std::time::Duration::from_millis(1500), received.recv()).await.is_err(),
        "no logout token while the feature is off"
    );
    assert_eq!(srv.count("session_client").await, 0);
});

/// Stopping latch right after a sign-out: the logout token on its way to an application that
/// takes a second to answer is delivered before latch has stopped, not cut off with it.
async fn a_logout_token_on_its_way_is_delivered_before_latch_stops(backend: crate::harness::Backend) {
    let (tx, mut received) = tokio::sync::mpsc::unbounded_channel::<String>();
    let app = axum::Router::new().route(
        "/backchannel",
        axum::routing::post(move |body: String| {
            let tx = tx.clone();
            async move {
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                let _ = tx.send(body);
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let uri = format!("http://{}/backchannel", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let server = crate::harness::TestServer::start(backend).await;
    let srv = &server;
    human(srv, "alice", "Wonder-land1").await;
    let (client_id, _, _) = oidc_app(srv, json!({"backChannelLogoutUri": uri, "devMode": true})).await;
    srv.put("/v2/features/instance", json!({"enableBackChannelLogout": true})).await.ok();
    let b = Browser::new(srv);
    code_for(srv, &b, &client_id, "openid").await;
    assert_eq!(b.sign_out("/oidc/v1/end_session").await.status, 200);
    assert!(received.try_recv().is_err(), "the application is still answering");
    server.stop().await;
    let body = received.try_recv().expect("the logout token was delivered before latch stopped");
    assert!(body.contains("logout_token="), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_logout_token_on_its_way_is_delivered_before_latch_stops_sqlite() {
    a_logout_token_on_its_way_is_delivered_before_latch_stops(crate::harness::Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_logout_token_on_its_way_is_delivered_before_latch_stops_postgres() {
    a_logout_token_on_its_way_is_delivered_before_latch_stops(crate::harness::Backend::Postgres).await;
}

// An organization's owner registers the back-channel URI: with private targets denied (the
// default away from a developer's machine) a URI naming a loopback, private or link-local
// address gets nothing, whatever the application's devMode says.
on_both!(no_logout_token_to_a_private_address, config: |c| c.backchannel_private_targets = "deny".into(), |srv| {
    human(srv, "alice", "Wonder-land1").await;
    let (uri, mut received) = logout_receiver().await;
    let (client_id, _, _) = oidc_app(srv, json!({"backChannelLogoutUri": uri, "devMode": true})).await;
    srv.put("/v2/features/instance", json!({"enableBackChannelLogout": true})).await.ok();
    let b = Browser::new(srv);
    code_for(srv, &b, &client_id, "openid").await;
    assert_eq!(srv.count("session_client").await, 1);
    b.sign_out("/oidc/v1/end_session").await;
    assert!(
        tokio::time::timeout(std::time::Duration::from_millis(1500), received.recv()).await.is_err(),
        "a logout token went to {uri}"
    );
});

on_both!(nul_characters_are_client_errors_on_the_protocol_endpoints, |srv| {
    human(srv, "alice", "Wonder-land1").await;
    let (client_id, secret, project) = oidc_app(srv, json!({})).await;
    let secret = secret.unwrap();
    let (rs, rs_secret) = api_app(srv, &project).await;
    // Forms: invalid_request, never a server error.
    for (path, basic, fields) in [
        (
            "/oauth/v2/token",
            None,
            vec![("grant_type", "client_credentials"), ("client_id", "a\0b"), ("client_secret", "x")],
        ),
        (
            "/oauth/v2/token",
            Some((client_id.as_str(), secret.as_str())),
            vec![("grant_type", "refresh_token"), ("refresh_token", "\0")],
        ),
        ("/oauth/v2/introspect", Some((rs.as_str(), rs_secret.as_str())), vec![("token", "a\0b")]),
        ("/oauth/v2/revoke", Some((client_id.as_str(), secret.as_str())), vec![("token", "\0")]),
    ] {
        let (s, _, b) = form(srv, path, basic, &fields).await;
        assert_eq!((s, b["error"].as_str()), (400, Some("invalid_request")), "{path}: {b}");
    }
    // A client id with NUL in the Basic header: a client error too.
    let (s, _, b) = form(srv, "/oauth/v2/introspect", Some(("a\0b", "x")), &[("token", "t")]).await;
    assert!(s == 400 || s == 401, "{s} {b}");
    // Pages: a readable 400, never 500 or 503.
    let b = Browser::new(srv);
    let r = b
        .get(
            "/oauth/v2/authorize?client_id=%00&redirect_uri=https://app.example.com/cb&response_type=code&scope=openid",
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.html);
    let r = b
        .get(&format!("/oauth/v2/authorize?client_id={client_id}&redirect_uri=%00&response_type=code&scope=openid"))
        .await;
    assert_eq!(r.status, 400, "{}", r.html);
    let r = b.get("/oidc/v1/end_session?id_token_hint=%00").await;
    assert_eq!(r.status, 400, "{}", r.html);
    let (id, page) = crate::login::start(srv, &b, &[]).await;
    let r = b.post(&format!("/ui/login/{id}/loginname"), &[("csrf", &page.csrf()), ("loginname", "al\0ice")]).await;
    assert!(r.status == 400 || r.status == 200, "{} {}", r.status, r.html);
});

// Each replica mirrors the revocation table; a revocation another replica wrote (here: written
// straight into the store) counts here within a second, with no request to this replica.
on_both!(a_revocation_written_elsewhere_counts_within_a_second, |srv| {
    human(srv, "alice", "Wonder-land1").await;
    let (_, _, project, t) = signed_in(srv, "openid", json!({})).await;
    let (rs, rs_secret) = api_app(srv, &project).await;
    let at = t["access_token"].as_str().unwrap().to_string();
    let fields = [("token", at.as_str())];
    let introspect = || form(srv, "/oauth/v2/introspect", Some((&rs, &rs_secret)), &fields);
    assert_eq!(introspect().await.2["active"], json!(true));
    let jti = latch::oauth::access::decode(&srv.state, &at).unwrap().jti;
    {
        let mut c = srv.state.db.conn().await.unwrap();
        let key = latch::store::revocation::token_key(&jti);
        latch::store::revocation::revoke(&mut c, &key, srv.state.clock.now(), srv.state.clock.now() + 3600)
            .await
            .unwrap();
    }
    let written = std::time::Instant::now();
    loop {
        if introspect().await.2["active"] == json!(false) {
            break;
        }
        assert!(written.elapsed() < std::time::Duration::from_millis(1500), "still active after the revocation");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(userinfo(srv, &at).await.0, 401);
    let key = latch::store::revocation::token_key(&jti);
    assert_eq!(srv.state.revocations.check(&[key]), Some(true), "the replica's feed read it");
});

// The feed reads what committed since its last poll, however late a transaction commits
// relative to the order its rows were written in, and leaves out what has expired.
on_both!(the_revocation_feed_never_skips_a_late_commit, |srv| {
    use latch::store::revocation::{revoke, since};
    let db = &srv.state.db;
    let now = srv.state.clock.now();
    let mut c = db.conn().await.unwrap();
    let (_, start) = since(&mut c, 0, now).await.unwrap();
    // A transaction that writes first and commits last (SQLite has one writer: there the
    // second write waits for the first to commit, so only PostgreSQL can interleave).
    let mut late = db.begin().await.unwrap();
    revoke(&mut late, "t:late", now, now + 60).await.unwrap();
    if srv.backend == crate::harness::Backend::Postgres {
        revoke(&mut c, "t:early", now, now + 60).await.unwrap();
        revoke(&mut c, "t:expired", now, now - 1).await.unwrap();
        let (keys, cursor) = since(&mut c, start, now).await.unwrap();
        let names: Vec<&str> = keys.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["t:early"], "uncommitted and expired rows are not read");
        late.commit().await.unwrap();
        let (keys, _) = since(&mut c, cursor, now).await.unwrap();
        let names: Vec<&str> = keys.iter().map(|(k, _)| k.as_str()).collect();
        assert!(names.contains(&"t:late"), "the late commit is read on the next poll: {names:?}");
    } else {
        let (keys, cursor) = since(&mut c, start, now).await.unwrap();
        assert!(keys.is_empty(), "uncommitted rows are not read");
        late.commit().await.unwrap();
        revoke(&mut c, "t:expired", now, now - 1).await.unwrap();
        let (keys, next) = since(&mut c, cursor, now).await.unwrap();
        assert_eq!(keys, [("t:late".to_string(), now + 60)]);
        assert!(next > cursor);
        let (keys, _) = since(&mut c, next, now).await.unwrap();
        assert!(keys.is_empty(), "nothing is read twice");
    }
});

on_both!(a_key_revoked_again_keeps_the_later_expiry_and_the_feed_shows_it, |srv| {
    use latch::store::revocation::{revoke, since};
    let now = srv.state.clock.now();
    let mut c = srv.state.db.conn().await.unwrap();
    revoke(&mut c, "g:twice", now, now + 1_000).await.unwrap();
    let (_, cursor) = since(&mut c, 0, now).await.unwrap();
    // An earlier expiry leaves the row as it was (and the feed has nothing new).
    revoke(&mut c, "g:twice", now, now + 500).await.unwrap();
    let (keys, cursor) = since(&mut c, cursor, now).await.unwrap();
    assert!(!keys.iter().any(|(k, e)| k == "g:twice" && *e != now + 1_000), "{keys:?}");
    let stored = "SELECT expires_at FROM revocation WHERE revoked_key = 'g:twice'";
    let (e,): (i64,) = sqlx::query_as(stored).fetch_one(&mut *c).await.unwrap();
    assert_eq!(e, now + 1_000, "not shortened");
    // A later one is kept, and other replicas' next poll reads it.
    revoke(&mut c, "g:twice", now, now + 2_000).await.unwrap();
    if srv.backend == crate::harness::Backend::Postgres {
        let (keys, _) = since(&mut c, cursor, now).await.unwrap();
        assert!(keys.contains(&("g:twice".to_string(), now + 2_000)), "{keys:?}");
    }
    let (e,): (i64,) = sqlx::query_as(stored).fetch_one(&mut *c).await.unwrap();
    assert_eq!(e, now + 2_000);
});

// RP-Initiated Logout 1.0, section 2: without an id_token_hint latch asks before it ends the
// browser's sessions, so that a link or an image on another site cannot sign the person out.
on_both!(a_logout_without_a_hint_asks_first, |srv| {
    human(srv, "alice", "Wonder-land1").await;
    let (client_id, _, _) = oidc_app(srv, json!({})).await;
    let b = Browser::new(srv);
    code_for(srv, &b, &client_id, "openid").await;
    let bye = "https://app.example.com/bye";
    let url = format!("/oidc/v1/end_session?client_id={client_id}&post_logout_redirect_uri={bye}&state=s1");
    let asked = b.get(&url).await;
    assert_eq!(asked.status, 200, "{}", asked.html);
    assert!(asked.location.is_none());
    assert!(
        asked.html.contains("action=\"/oidc/v1/end_session\"") && asked.html.contains("Sign out"),
        "{}",
        asked.html
    );
    let csp = asked.header("content-security-policy").unwrap().to_string();
    assert!(csp.contains("form-action 'self' https://app.example.com"), "{csp}");
    assert_eq!(srv.count("session").await, 1, "nothing ended by the question");
    // The answer needs this browser's value, posted: not in a link, not from another browser,
    // not a guess.
    let confirm = crate::browser::field(&asked.html, "confirm").unwrap();
    let linked = b.get(&format!("{url}&confirm={confirm}")).await;
    assert!(linked.html.contains("name=\"confirm\""), "a GET only asks again");
    let guessed = b.post("/oidc/v1/end_session", &[("confirm", "x".repeat(43).as_str())]).await;
    assert!(guessed.html.contains("name=\"confirm\""));
    let other = Browser::new(srv);
    let r = other.post("/oidc/v1/end_session", &[("confirm", confirm.as_str())]).await;
    assert!(r.html.contains("signed out"), "a browser without sessions has nothing to end: {}", r.html);
    assert_eq!(srv.count("session").await, 1);
    // Said yes: the sessions end and the client gets its state back.
    let done = b.sign_out(&url).await;
    assert_eq!(done.status, 303, "{}", done.html);
    assert_eq!(done.location(), format!("{bye}?state=s1"));
    assert_eq!(srv.count("session").await, 0);
    // Nothing left to end: no question.
    let again = b.get(&url).await;
    assert_eq!(again.status, 303);
});

// A hint that names no session of this browser (an ID token from another device, or from a
// session that has ended) does not speak for the person: latch asks first (RP-Initiated Logout
// 1.0, section 2). A POST from another site carries no cookie (SameSite=Lax) and is sent on as a
// GET, which carries it, so a relying party's logout form does sign the person out.
on_both!(a_foreign_logout_hint_asks_and_a_cookieless_post_is_sent_on, |srv| {
    human(srv, "alice", "Wonder-land1").await;
    let (client_id, secret, _) = oidc_app(srv, json!({})).await;
    let secret = secret.unwrap();
    let signed_in = async |b: &Browser| {
        let (code, verifier) = code_for(srv, b, &client_id, "openid").await;
        let t = exchange_code(srv, Some((&client_id, &secret)), &code, &verifier).await;
        t.ok()["id_token"].as_str().unwrap().to_string()
    };
    let (phone, laptop) = (Browser::new(srv), Browser::new(srv));
    let phones = signed_in(&phone).await;
    signed_in(&laptop).await;
    let bye = "https://app.example.com/bye";
    let url = format!("/oidc/v1/end_session?id_token_hint={phones}&post_logout_redirect_uri={bye}&state=s0");
    let asked = laptop.get(&url).await;
    assert_eq!(asked.status, 200, "{}", asked.html);
    assert!(asked.html.contains("name=\"confirm\""), "{}", asked.html);
    assert_eq!(srv.count("session").await, 2, "nothing ended by the question");
    // Said yes, the laptop signs out and goes back to the hint's client.
    let done = laptop.sign_out(&url).await;
    assert_eq!(done.status, 303, "{}", done.html);
    assert_eq!(done.location(), format!("{bye}?state=s0"));
    assert_eq!(srv.count("session").await, 1);
    let laptops = signed_in(&laptop).await;
    assert_eq!(srv.count("session").await, 2);
    // The relying party's form, posted from its own site: no cookie comes along.
    let fields = [("id_token_hint", laptops.as_str()), ("post_logout_redirect_uri", bye), ("state", "s1")];
    let sent_on = Browser::new(srv).post("/oidc/v1/end_session", &fields).await;
    assert_eq!(sent_on.status, 303, "{}", sent_on.html);
    let get = sent_on.location().to_string();
    assert!(get.starts_with("/oidc/v1/end_session?") && get.contains("state=s1"), "{get}");
    assert_eq!(srv.count("session").await, 2);
    // The browser follows as a top-level GET, with its cookie: its own hint ends its session.
    let done = laptop.get(&get).await;
    assert_eq!(done.status, 303, "{}", done.html);
    assert_eq!(done.location(), format!("{bye}?state=s1"));
    assert_eq!(srv.count("session").await, 1, "the phone's session is left");
    // The laptop's hint, now of an ended session, asks the phone before anything ends.
    let asked = phone.get(&format!("/oidc/v1/end_session?id_token_hint={laptops}")).await;
    assert!(asked.html.contains("name=\"confirm\""), "{}", asked.html);
    assert_eq!(srv.count("session").await, 1);
    // A hint signed by a key latch no longer has (here one it never had) cannot be checked: the
    // person is asked, not shown an error that keeps them signed in.
    let (robot, _) = srv.machine_with_roles(None, "robot", &[]).await;
    let (kid, key) = crate::token::machine_key(srv, &robot).await;
    let gone = crate::token::sign(&kid, &key, &json!({"iss": srv.base, "sub": "someone", "aud": client_id}));
    let asked = phone.get(&format!("/oidc/v1/end_session?id_token_hint={gone}")).await;
    assert_eq!(asked.status, 200, "{}", asked.html);
    assert!(asked.html.contains("name=\"confirm\""), "{}", asked.html);
    assert_eq!(srv.count("session").await, 1);
});

// A revocation outlasts the tokens it concerns, also those issued before the lifetimes were
// shortened (it was kept for the new, shorter lifetime, and such a token came back to life).
on_both!(revocations_outlast_tokens_issued_under_longer_lifetimes, |srv| {
    human(srv, "alice", "Wonder-land1").await;
    let (client_id, secret, _) = oidc_app(srv, json!({})).await;
    let secret = secret.unwrap();
    let b = Browser::new(srv);
    let (code, verifier) = code_for(srv, &b, &client_id, "openid").await;
    let t = exchange_code(srv, Some((&client_id, &secret)), &code, &verifier).await;
    let id = crate::token::claims(t.ok()["id_token"].as_str().unwrap());
    let (sid, exp) = (id["sid"].as_str().unwrap().to_string(), id["exp"].as_i64().unwrap());
    srv.put("/admin/v1/settings/oidc", json!({"accessTokenLifetime": "3600s", "idTokenLifetime": "3600s"})).await.ok();
    assert_eq!(b.sign_out("/oidc/v1/end_session").await.status, 200);
    let mut c = srv.state.db.conn().await.unwrap();
    let (until,): (i64,) = sqlx::query_as("SELECT expires_at FROM revocation WHERE revoked_key = $1")
        .bind(format!("s:{sid}"))
        .fetch_one(&mut *c)
        .await
        .unwrap();
    assert!(until >= exp, "the session's revocation ({until}) outlasts its ID token ({exp})");
});

// An ID token latch signed under another issuer (its external URL before a change, with the
// same keys) is no hint: not at the authorization endpoint, not at end_session.
on_both!(a_hint_of_another_issuer_is_refused, |srv| {
    let alice = human(srv, "alice", "Wonder-land1").await;
    let (client_id, _, _) = oidc_app(srv, json!({})).await;
    let n = latch::clock::Clock::now(&*srv.clock);
    let hint = |iss: &str| {
        let claims = json!({"iss": iss, "sub": alice, "aud": client_id, "iat": n, "exp": n + 60});
        srv.state.tokens.sign(None, &claims).unwrap()
    };
    let (old, current) = (hint("https://old.example.com"), hint(&srv.base));
    let b = Browser::new(srv);
    let authorize = |h: String| {
        let b = &b;
        let client_id = client_id.clone();
        async move {
            let q = [
                ("client_id", client_id.as_str()),
                ("redirect_uri", "https://app.example.com/cb"),
                ("response_type", "code"),
                ("scope", "openid"),
                ("state", "s1"),
                ("id_token_hint", h.as_str()),
            ];
            b.authorize(&q).await
        }
    };
    let (id, page) = authorize(old.clone()).await;
    assert!(id.is_none());
    assert_eq!(param(&page.redirect_params(), "error"), Some("invalid_request"), "{:?}", page.location);
    let (id, _) = authorize(current.clone()).await;
    assert!(id.is_some(), "the issuer's own hint opens the login page");
    // One signed by a key latch no longer has (retired and removed while the relying party kept
    // the ID token; here one it never had) cannot be checked: no hint, as at end_session, rather
    // than an error for every later silent sign-in.
    let (robot, _) = srv.machine_with_roles(None, "robot", &[]).await;
    let (kid, key) = crate::token::machine_key(srv, &robot).await;
    let gone = crate::token::sign(&kid, &key, &json!({"iss": srv.base, "sub": alice, "aud": client_id}));
    let (id, page) = authorize(gone).await;
    assert!(id.is_some(), "{:?}", page.location);
    let r = b.get(&format!("/oidc/v1/end_session?id_token_hint={old}")).await;
    assert_eq!(r.status, 400, "{}", r.html);
    let r = b.get(&format!("/oidc/v1/end_session?id_token_hint={current}")).await;
    assert_eq!(r.status, 200, "{}", r.html);
});
