//! Token exchange (RFC 8693).

use serde_json::json;

use crate::browser::{Browser, human, oidc_app};
use crate::on_both;
use crate::token::{claims, code_for, exchange_code, token};

const TE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const AT: &str = "urn:ietf:params:oauth:token-type:access_token";

/// A second application of `project`, configured as `app`: its client id and secret.
async fn sibling_app(srv: &crate::harness::TestServer, project: &str, app: &serde_json::Value) -> (String, String) {
    let mut sibling = app.clone();
    sibling["name"] = json!("sibling");
    sibling["redirectUris"] = json!(["https://app.example.com/cb"]);
    sibling["authMethodType"] = json!("OIDC_AUTH_METHOD_TYPE_BASIC");
    let r = srv.post(&format!("/management/v1/projects/{project}/apps/oidc"), sibling).await;
    (r.ok()["clientId"].as_str().unwrap().to_string(), r.body["clientSecret"].as_str().unwrap().to_string())
}

/// What `alice_impersonates_bob` leaves: alice (an ORG_END_USER_IMPERSONATOR) signed in to a
/// client with the token-exchange grant (`actor`, her own access token) and impersonated bob
/// (`at` and `rt`, the impersonation's access and refresh tokens).
struct Impersonation {
    alice: String,
    bob: String,
    client_id: String,
    secret: String,
    actor: String,
    at: String,
    rt: String,
}

async fn alice_impersonates_bob(srv: &crate::harness::TestServer) -> Impersonation {
    let alice = human(srv, "alice", "Wonder-land1").await;
    let bob = human(srv, "bob", "Builder-b0b!").await;
    let te_app = json!({"grantTypes": ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_REFRESH_TOKEN", "OIDC_GRANT_TYPE_TOKEN_EXCHANGE"]});
    let (client_id, secret, _) = oidc_app(srv, te_app).await;
    let secret = secret.unwrap();
    srv.put("/v2/features/instance", json!({"oidcTokenExchange": true})).await.ok();
    srv.put("/admin/v1/policies/security", json!({"enableImpersonation": true})).await.ok();
    srv.post("/management/v1/orgs/me/members", json!({"userId": alice, "roles": ["ORG_END_USER_IMPERSONATOR"]}))
        .await
        .ok();
    let b = Browser::new(srv);
    let (code, verifier) = code_for(srv, &b, &client_id, "openid offline_access").await;
    let t = exchange_code(srv, Some((&client_id, &secret)), &code, &verifier).await;
    let actor = t.ok()["access_token"].as_str().unwrap().to_string();
    let form = [
        ("grant_type", TE),
        ("subject_token", bob.as_str()),
        ("subject_token_type", "urn:service:params:oauth:token-type:user_id"),
        ("actor_token", actor.as_str()),
        ("actor_token_type", AT),
    ];
    let r = token(srv, Some((&client_id, &secret)), &form).await;
    let (at, rt) =
        (r.ok()["access_token"].as_str().unwrap().to_string(), r.body["refresh_token"].as_str().unwrap().to_string());
    Impersonation { alice, bob, client_id, secret, actor, at, rt }
}

/// Token exchange on, alice signed in with `openid offline_access` to a new client that may
/// exchange and refresh: its client id, secret and project, and the code exchange's answer.
async fn exchanger_signed_in(srv: &crate::harness::TestServer) -> (String, String, String, crate::token::TokenCall) {
    human(srv, "alice", "Wonder-land1").await;
    srv.put("/v2/features/instance", json!({"oidcTokenExchange": true})).await.ok();
    let te_app = json!({"grantTypes": ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_REFRESH_TOKEN", "OIDC_GRANT_TYPE_TOKEN_EXCHANGE"]});
    let (client_id, secret, project) = oidc_app(srv, te_app).await;
    let secret = secret.unwrap();
    let b = Browser::new(srv);
    let (code, verifier) = code_for(srv, &b, &client_id, "openid offline_access").await;
    let t = exchange_code(srv, Some((&client_id, &secret)), &code, &verifier).await;
    (client_id, secret, project, t)
}

/// The status of a userinfo request with `at`.
async fn userinfo_status(srv: &crate::harness::TestServer, at: String) -> u16 {
    reqwest::Client::new().get(srv.url("/oidc/v1/userinfo")).bearer_auth(at).send().await.unwrap().status().as_u16()
}

on_both!(token_exchange, |srv| {
    let alice = human(srv, "alice", "Wonder-land1").await;
    let bob = human(srv, "bob", "Builder-b0b!").await;
    let te_app = json!({"accessTokenType": "OIDC_TOKEN_TYPE_JWT", "grantTypes": ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_REFRESH_TOKEN", "OIDC_GRANT_TYPE_TOKEN_EXCHANGE"]});
    let (client_id, secret, project) = oidc_app(srv, te_app.clone()).await;
    let secret = secret.unwrap();
    let b = Browser::new(srv);
    let (code, verifier) = code_for(srv, &b, &client_id, "openid profile offline_access").await;
    let t = exchange_code(srv, Some((&client_id, &secret)), &code, &verifier).await;
    let subject = t.ok()["access_token"].as_str().unwrap().to_string();
    let exchange = |extra: Vec<(&'static str, String)>| {
        let (cid, sec) = (client_id.clone(), secret.clone());
        async move {
            let mut form: Vec<(&str, String)> = vec![("grant_type", TE.into())];
            form.extend(extra);
            let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
            token(srv, Some((&cid, &sec)), &pairs).await
        }
    };
    let basic = || vec![("subject_token", subject.clone()), ("subject_token_type", AT.to_string())];
    // Off until the feature is on.
    exchange(basic()).await.err(400, "unsupported_grant_type");
    srv.put("/v2/features/instance", json!({"oidcTokenExchange": true})).await.ok();
    // A project that checks its users turns away whom a sign-in would turn away (here alice has
    // no grant on it).
    let checked = json!({"name": "te", "projectRoleCheck": true});
    srv.put(&format!("/management/v1/projects/{project}"), checked).await.ok();
    let r = exchange(basic()).await;
    r.err(400, "invalid_request");
    assert!(r.body["error_description"].as_str().unwrap().contains("authorization"), "{}", r.body);
    srv.put(&format!("/management/v1/projects/{project}"), json!({"name": "te"})).await.ok();
    // The default: an opaque access token for the same subject and audience.
    let r = exchange(basic()).await;
    let body = r.ok().clone();
    assert_eq!(body["issued_token_type"], AT);
    assert_eq!(body["token_type"], "Bearer");
    assert!(!body["access_token"].as_str().unwrap().contains('.'));
    assert!(body["refresh_token"].is_string(), "offline_access gives a refresh token");
    assert!(body["id_token"].is_string(), "openid gives an ID token");
    // A JWT, a narrower scope, a subset of the audience.
    let mut form = basic();
    form.extend([
        ("requested_token_type", "urn:ietf:params:oauth:token-type:jwt".to_string()),
        ("scope", "openid".into()),
        ("audience", project.clone()),
    ]);
    let r = exchange(form).await;
    let c = claims(r.ok()["access_token"].as_str().unwrap());
    assert_eq!(c["sub"], alice.as_str());
    assert_eq!(c["aud"], json!([project]));
    assert_eq!(c["scope"], "openid");
    // The exchange belongs to the subject token's grant (a reused code or refresh token of it
    // revokes what the exchange issued too), and its token has a jti of its own.
    let subject_claims = claims(&subject);
    assert_eq!(c["gid"], subject_claims["gid"]);
    assert_ne!(c["jti"], subject_claims["jti"]);
    for id in [&c["gid"], &c["jti"]] {
        assert_eq!(crate::token::id_bytes(id), 16, "{c}");
    }
    // The access token keeps the narrowed audience; the ID token names the client as OIDC
    // Core requires (relying-party libraries refuse it otherwise).
    let id = claims(r.body["id_token"].as_str().unwrap());
    assert_eq!(id["aud"], json!([client_id, project]), "{id}");
    assert_eq!(r.body["issued_token_type"], "urn:ietf:params:oauth:token-type:jwt");
    // An ID token as the result.
    let mut form = basic();
    form.push(("requested_token_type", "urn:ietf:params:oauth:token-type:id_token".into()));
    let r = exchange(form).await;
    assert_eq!(r.ok()["token_type"], "N_A");
    assert_eq!(claims(r.body["access_token"].as_str().unwrap())["sub"], alice.as_str());
    // Errors.
    let mut f = basic();
    f.push(("audience", "someone-else".into()));
    exchange(f).await.err(400, "invalid_target");
    let mut f = basic();
    f.push(("resource", "https://api.example.com".into()));
    exchange(f).await.err(400, "invalid_target");
    let mut f = basic();
    f.push(("scope", "openid email".into()));
    exchange(f).await.err(400, "invalid_scope");
    exchange(vec![
        ("subject_token", subject.clone()),
        ("subject_token_type", "urn:ietf:params:oauth:token-type:refresh_token".into()),
    ])
    .await
    .err(400, "invalid_request");
    exchange(vec![("subject_token", "garbage".into()), ("subject_token_type", AT.into())])
        .await
        .err(400, "invalid_request");
    exchange(vec![
        ("subject_token", bob.clone()),
        ("subject_token_type", "urn:service:params:oauth:token-type:user_id".into()),
    ])
    .await
    .err(400, "invalid_request");
    exchange(vec![("subject_token", subject.clone())]).await.err(400, "invalid_request");
    // Impersonation: alice acts as bob.
    let imp = |actor: String| {
        vec![
            ("subject_token", bob.clone()),
            ("subject_token_type", "urn:service:params:oauth:token-type:user_id".to_string()),
            ("actor_token", actor),
            ("actor_token_type", AT.to_string()),
        ]
    };
    exchange(imp(subject.clone())).await.err(400, "invalid_request");
    srv.put("/admin/v1/policies/security", json!({"enableImpersonation": true})).await.ok();
    exchange(imp(subject.clone())).await.err(400, "invalid_request");
    srv.post("/management/v1/orgs/me/members", json!({"userId": alice, "roles": ["ORG_END_USER_IMPERSONATOR"]}))
        .await
        .ok();
    let r = exchange(imp(subject.clone())).await;
    let mut form = imp(subject.clone());
    form.push(("requested_token_type", "urn:ietf:params:oauth:token-type:jwt".into()));
    let jwt = exchange(form).await;
    let c = claims(jwt.ok()["access_token"].as_str().unwrap());
    assert_eq!(c["sub"], bob.as_str());
    assert_eq!(c["act"]["sub"], alice.as_str());
    assert_eq!(c["act"]["iss"], srv.base.as_str());
    r.ok();
    // A client without the grant type may not exchange.
    let (plain, plain_secret, _) = oidc_app(srv, json!({"name": "plain"})).await;
    token(
        srv,
        Some((&plain, plain_secret.as_deref().unwrap())),
        &[("grant_type", TE), ("subject_token", &subject), ("subject_token_type", AT)],
    )
    .await
    .err(400, "unauthorized_client");
    // Nor may one with the grant type trade in a token issued to another client (of another
    // project): its audience must name the client or the client's project.
    let (other, other_secret, _) = oidc_app(srv, te_app.clone()).await;
    let other_secret = other_secret.unwrap();
    let r = token(
        srv,
        Some((&other, &other_secret)),
        &[("grant_type", TE), ("subject_token", &subject), ("subject_token_type", AT)],
    )
    .await;
    r.err(400, "invalid_request");
    assert!(r.body["error_description"].as_str().unwrap().contains("not issued to this client"), "{}", r.body);
    let form = imp(subject.clone());
    let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut pairs = pairs;
    pairs.push(("grant_type", TE));
    token(srv, Some((&other, &other_secret)), &pairs).await.err(400, "invalid_request");
    // A token whose audience names the client's project passes: the exchange above narrowed to
    // the project's id.
    let narrowed = exchange(vec![
        ("subject_token", subject.clone()),
        ("subject_token_type", AT.to_string()),
        ("audience", project.clone()),
    ])
    .await;
    let narrowed = narrowed.ok()["access_token"].as_str().unwrap().to_string();
    exchange(vec![("subject_token", narrowed), ("subject_token_type", AT.to_string())]).await.ok();
    // A sibling client of the same project may trade in the access token (its audience names
    // the project, the API) but gets a grant of its own: revoking what it got leaves the first
    // client's refresh chain alone.
    let (sib, sib_secret) = sibling_app(srv, &project, &te_app).await;
    let form = [("grant_type", TE), ("subject_token", subject.as_str()), ("subject_token_type", AT)];
    let r = token(srv, Some((&sib, &sib_secret)), &form).await;
    let sib_refresh = r.ok()["refresh_token"].as_str().unwrap().to_string();
    let revoke = reqwest::Client::new()
        .post(srv.url("/oauth/v2/revoke"))
        .basic_auth(&sib, Some(&sib_secret))
        .form(&[("token", sib_refresh.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(revoke.status(), 200);
    let own_refresh = t.body["refresh_token"].as_str().unwrap();
    let form = [("grant_type", "refresh_token"), ("refresh_token", own_refresh)];
    token(srv, Some((&client_id, &secret)), &form).await.ok();
    // What an exchange issues belongs to the subject token's session: the logout ends it.
    let userinfo = |at: String| async move {
        let r = reqwest::Client::new().get(srv.url("/oidc/v1/userinfo")).bearer_auth(at).send().await.unwrap();
        r.status().as_u16()
    };
    let exchanged = exchange(basic()).await.ok()["access_token"].as_str().unwrap().to_string();
    assert_eq!(userinfo(exchanged.clone()).await, 200);
    let id_token = t.body["id_token"].as_str().unwrap();
    let out = b.get(&format!("/oidc/v1/end_session?id_token_hint={id_token}")).await;
    assert!(out.status == 303 || out.status == 200, "{}", out.status);
    assert_eq!(userinfo(exchanged).await, 401, "the exchanged token outlived the session");
});

on_both!(only_live_id_tokens_pass_as_id_tokens, |srv| {
    const ID: &str = "urn:ietf:params:oauth:token-type:id_token";
    human(srv, "alice", "Wonder-land1").await;
    let te_app = json!({"accessTokenType": "OIDC_TOKEN_TYPE_JWT", "grantTypes": ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_TOKEN_EXCHANGE"]});
    let (client_id, secret, project) = oidc_app(srv, te_app.clone()).await;
    let secret = secret.unwrap();
    srv.put("/v2/features/instance", json!({"oidcTokenExchange": true})).await.ok();
    let b = Browser::new(srv);
    let (code, verifier) = code_for(srv, &b, &client_id, "openid").await;
    let t = exchange_code(srv, Some((&client_id, &secret)), &code, &verifier).await;
    let (access, id_token) =
        (t.ok()["access_token"].as_str().unwrap().to_string(), t.body["id_token"].as_str().unwrap().to_string());
    let exchange = |subject: String| {
        let (cid, sec) = (client_id.clone(), secret.clone());
        async move {
            let form = [("grant_type", TE), ("subject_token", &subject), ("subject_token_type", ID)];
            token(srv, Some((&cid, &sec)), &form).await
        }
    };
    // A JWT access token (typ at+jwt) is not an ID token, though latch signed it.
    assert_eq!(claims(&access)["sub"], claims(&id_token)["sub"]);
    exchange(access.clone()).await.err(400, "invalid_request");
    let plain = exchange(id_token.clone()).await;
    assert!(plain.ok().get("id_token").is_none(), "no scope asked, none brought: {}", plain.body);
    // An ID token allows openid (an ID token out), not offline_access.
    let with_scope = |scope: &'static str| {
        let (cid, sec, subject) = (client_id.clone(), secret.clone(), id_token.clone());
        async move {
            let form = [
                ("grant_type", TE),
                ("subject_token", subject.as_str()),
                ("subject_token_type", ID),
                ("scope", scope),
                ("requested_token_type", ID),
            ];
            token(srv, Some((&cid, &sec)), &form).await
        }
    };
    let r = with_scope("openid").await;
    assert_eq!(claims(r.ok()["access_token"].as_str().unwrap())["sub"], claims(&id_token)["sub"]);
    assert_eq!(r.body["token_type"], "N_A");
    with_scope("openid offline_access").await.err(400, "invalid_scope");
    // Once the session has ended, its ID token is exchanged no more.
    let out = b.get(&format!("/oidc/v1/end_session?id_token_hint={id_token}")).await;
    assert!(out.status == 303 || out.status == 200, "{}", out.status);
    exchange(id_token.clone()).await.err(400, "invalid_request");
    // An ID token issued to another client is not this one's to trade in, however live: not by
    // a client of the same project either (the ID token's audience names the project too).
    let (sib, sib_secret) = sibling_app(srv, &project, &te_app).await;
    let (code, verifier) = code_for(srv, &b, &client_id, "openid").await;
    let t = exchange_code(srv, Some((&client_id, &secret)), &code, &verifier).await;
    let fresh = t.ok()["id_token"].as_str().unwrap().to_string();
    let form = [("grant_type", TE), ("subject_token", fresh.as_str()), ("subject_token_type", ID)];
    let r = token(srv, Some((&sib, &sib_secret)), &form).await;
    r.err(400, "invalid_request");
    assert!(r.body["error_description"].as_str().unwrap().contains("not issued to this client"), "{}", r.body);
    let (other, other_secret, _) = oidc_app(srv, te_app).await;
    let (code, verifier) = code_for(srv, &b, &other, "openid").await;
    let t = exchange_code(srv, Some((&other, other_secret.as_deref().unwrap())), &code, &verifier).await;
    let others = t.ok()["id_token"].as_str().unwrap().to_string();
    let r = exchange(others).await;
    r.err(400, "invalid_request");
    assert!(r.body["error_description"].as_str().unwrap().contains("not issued to this client"), "{}", r.body);
});

on_both!(a_refreshed_impersonation_keeps_its_actor, |srv| {
    let alice = human(srv, "alice", "Wonder-land1").await;
    let bob = human(srv, "bob", "Builder-b0b!").await;
    let te_app = json!({"accessTokenType": "OIDC_TOKEN_TYPE_JWT", "grantTypes": ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_REFRESH_TOKEN", "OIDC_GRANT_TYPE_TOKEN_EXCHANGE"]});
    let (client_id, secret, _) = oidc_app(srv, te_app).await;
    let secret = secret.unwrap();
    srv.put("/v2/features/instance", json!({"oidcTokenExchange": true})).await.ok();
    srv.put("/admin/v1/policies/security", json!({"enableImpersonation": true})).await.ok();
    srv.post("/management/v1/orgs/me/members", json!({"userId": alice, "roles": ["ORG_END_USER_IMPERSONATOR"]}))
        .await
        .ok();
    let b = Browser::new(srv);
    let (code, verifier) = code_for(srv, &b, &client_id, "openid offline_access").await;
    let t = exchange_code(srv, Some((&client_id, &secret)), &code, &verifier).await;
    let actor = t.ok()["access_token"].as_str().unwrap().to_string();
    let r = token(
        srv,
        Some((&client_id, &secret)),
        &[
            ("grant_type", TE),
            ("subject_token", &bob),
            ("subject_token_type", "urn:service:params:oauth:token-type:user_id"),
            ("actor_token", &actor),
            ("actor_token_type", AT),
            ("requested_token_type", "urn:ietf:params:oauth:token-type:jwt"),
        ],
    )
    .await;
    let refresh = r.ok()["refresh_token"].as_str().expect("offline_access gives a refresh token").to_string();
    assert_eq!(claims(r.body["access_token"].as_str().unwrap())["act"]["sub"], alice.as_str());
    let r =
        token(srv, Some((&client_id, &secret)), &[("grant_type", "refresh_token"), ("refresh_token", &refresh)]).await;
    let c = claims(r.ok()["access_token"].as_str().unwrap());
    assert_eq!(c["sub"], bob.as_str());
    assert_eq!(c["act"]["sub"], alice.as_str(), "the refreshed token still names its actor: {c}");
    assert_eq!(claims(r.body["id_token"].as_str().unwrap())["act"]["sub"], alice.as_str());
    // End users only: an administrator (here the bootstrap's human owner) is not impersonated,
    // whose token would carry its powers to the actor.
    let mut c = srv.state.db.conn().await.unwrap();
    let admin = latch::store::user::get_by_username(&mut c, "admin").await.unwrap().unwrap().user_id;
    drop(c);
    let r = token(
        srv,
        Some((&client_id, &secret)),
        &[
            ("grant_type", TE),
            ("subject_token", &admin),
            ("subject_token_type", "urn:service:params:oauth:token-type:user_id"),
            ("actor_token", &actor),
            ("actor_token_type", AT),
        ],
    )
    .await;
    r.err(400, "invalid_request");
    assert!(r.body["error_description"].as_str().unwrap().contains("administrators"), "{}", r.body);
    // Nor is an owner of another organization, though bob has no role in his own: members need
    // not belong to the organization, and the management API takes it from a header.
    let impersonate_bob = || {
        let (cid, sec, actor, bob) = (client_id.clone(), secret.clone(), actor.clone(), bob.clone());
        async move {
            let form = [
                ("grant_type", TE),
                ("subject_token", bob.as_str()),
                ("subject_token_type", "urn:service:params:oauth:token-type:user_id"),
                ("actor_token", actor.as_str()),
                ("actor_token_type", AT),
            ];
            token(srv, Some((&cid, &sec)), &form).await
        }
    };
    impersonate_bob().await.ok();
    let other =
        srv.post("/management/v1/orgs", json!({"name": "Elsewhere"})).await.ok()["id"].as_str().unwrap().to_string();
    let path = "/management/v1/orgs/me/members";
    srv.call_as(Some(&srv.pat), Some(&other), "POST", path, json!({"userId": bob, "roles": ["ORG_OWNER"]})).await.ok();
    let r = impersonate_bob().await;
    r.err(400, "invalid_request");
    assert!(r.body["error_description"].as_str().unwrap().contains("administrators"), "{}", r.body);
});

// A user of a deactivated organization is no subject of an exchange, also where no token of
// theirs is presented (impersonation by user id, whose refusal no token cut-off explains).
on_both!(no_exchange_for_a_user_of_a_deactivated_organization, |srv| {
    let alice = human(srv, "alice", "Wonder-land1").await;
    let te_app = json!({"grantTypes": ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_TOKEN_EXCHANGE"]});
    let (client_id, secret, _) = oidc_app(srv, te_app).await;
    let secret = secret.unwrap();
    srv.put("/v2/features/instance", json!({"oidcTokenExchange": true})).await.ok();
    srv.put("/admin/v1/policies/security", json!({"enableImpersonation": true})).await.ok();
    srv.post("/admin/v1/members", json!({"userId": alice, "roles": ["IAM_END_USER_IMPERSONATOR"]})).await.ok();
    let r = srv.post("/management/v1/orgs", json!({"name": "Initech"})).await;
    let initech = r.ok()["id"].as_str().unwrap().to_string();
    let on =
        |m: &'static str, p: &'static str, b: serde_json::Value| srv.call_as(Some(&srv.pat), Some(&initech), m, p, b);
    let body = json!({"userName": "carol", "profile": {"firstName": "Carol", "lastName": "C"},
                      "email": {"email": "carol@initech.example", "isEmailVerified": true}});
    let carol = on("POST", "/management/v1/users/human", body).await.ok()["userId"].as_str().unwrap().to_string();
    // With a password she is an active user, not one still to be initialised.
    let password = json!({"password": "Wonder-land1", "noChangeRequired": true});
    let path = format!("/management/v1/users/{carol}/password");
    srv.call_as(Some(&srv.pat), Some(&initech), "POST", &path, password).await.ok();

    let b = Browser::new(srv);
    let (code, verifier) = code_for(srv, &b, &client_id, "openid").await;
    let t = exchange_code(srv, Some((&client_id, &secret)), &code, &verifier).await;
    let actor = t.ok()["access_token"].as_str().unwrap().to_string();
    let impersonate = || {
        let form = [
            ("grant_type", TE),
            ("subject_token", carol.as_str()),
            ("subject_token_type", "urn:service:params:oauth:token-type:user_id"),
            ("actor_token", actor.as_str()),
            ("actor_token_type", AT),
        ];
        let (cid, sec) = (client_id.clone(), secret.clone());
        async move { token(srv, Some((&cid, &sec)), &form).await }
    };
    impersonate().await.ok();
    on("POST", "/management/v1/orgs/me/_deactivate", json!({})).await.ok();
    let r = impersonate().await;
    r.err(400, "invalid_request");
    on("POST", "/management/v1/orgs/me/_reactivate", json!({})).await.ok();
    impersonate().await.ok();
});

// What an impersonation issued ends with its actor: deactivating the actor ends the access
// token and the refresh token that name them in `act`, as it ends the actor's own.
on_both!(impersonation_ends_with_its_actor, |srv| {
    let Impersonation { alice, bob, client_id, secret, at, rt, .. } = alice_impersonates_bob(srv).await;
    let userinfo = |at: String| userinfo_status(srv, at);
    let refresh = |rt: String| {
        let (cid, sec) = (client_id.clone(), secret.clone());
        async move { token(srv, Some((&cid, &sec)), &[("grant_type", "refresh_token"), ("refresh_token", &rt)]).await }
    };
    assert_eq!(userinfo(at.clone()).await, 200);
    let r = refresh(rt).await;
    let rt = r.ok()["refresh_token"].as_str().unwrap().to_string();
    // The impersonation's token as the actor of an exchange for bob himself keeps its `act`
    // (without it the result would be bob's own token, free of alice's end).
    let exchange = |form: Vec<(&'static str, String)>| {
        let (cid, sec) = (client_id.clone(), secret.clone());
        async move {
            let mut pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
            pairs.push(("grant_type", TE));
            token(srv, Some((&cid, &sec)), &pairs).await
        }
    };
    let relay = |requested: &'static str| {
        vec![
            ("subject_token", bob.clone()),
            ("subject_token_type", "urn:service:params:oauth:token-type:user_id".to_string()),
            ("actor_token", at.clone()),
            ("actor_token_type", AT.to_string()),
            ("requested_token_type", requested.to_string()),
        ]
    };
    let r = exchange(relay("urn:ietf:params:oauth:token-type:jwt")).await;
    let relayed = r.ok()["access_token"].as_str().unwrap().to_string();
    assert_eq!(claims(&relayed)["act"]["sub"], alice.as_str(), "{}", claims(&relayed));
    // An ID token of the impersonation, as a subject token of its own.
    let r = exchange(relay("urn:ietf:params:oauth:token-type:id_token")).await;
    let id_token = r.ok()["access_token"].as_str().unwrap().to_string();
    assert_eq!(claims(&id_token)["act"]["sub"], alice.as_str());
    let by_id_token = || {
        let t = id_token.clone();
        exchange(vec![
            ("subject_token", t),
            ("subject_token_type", "urn:ietf:params:oauth:token-type:id_token".to_string()),
        ])
    };
    by_id_token().await.ok();
    assert_eq!(userinfo(relayed.clone()).await, 200);
    // bob, impersonated by alice, becomes an impersonator himself: no longer an end user, so the
    // impersonation of him ends (alice would act with his new role), and its token is no actor
    // for a nested impersonation of carol. Without the role it serves again.
    let carol = human(srv, "carol", "Carol-pass-1").await;
    let role = json!({"userId": bob, "roles": ["ORG_END_USER_IMPERSONATOR"]});
    srv.post("/management/v1/orgs/me/members", role).await.ok();
    assert_eq!(userinfo(at.clone()).await, 401, "bob holds a role now");
    let r = exchange(vec![
        ("subject_token", carol),
        ("subject_token_type", "urn:service:params:oauth:token-type:user_id".to_string()),
        ("actor_token", at.clone()),
        ("actor_token_type", AT.to_string()),
        ("requested_token_type", "urn:ietf:params:oauth:token-type:jwt".to_string()),
    ])
    .await;
    r.err(400, "invalid_request");
    srv.delete(&format!("/management/v1/orgs/me/members/{bob}")).await.ok();
    assert_eq!(userinfo(at.clone()).await, 200);
    // Cut-offs count whole seconds.
    srv.clock.advance(1);
    srv.post(&format!("/management/v1/users/{alice}/_deactivate"), json!({})).await.ok();
    assert_eq!(userinfo(at).await, 401, "the impersonation's access token");
    refresh(rt).await.err(400, "invalid_grant");
    assert_eq!(userinfo(relayed).await, 401, "a token exchanged from the impersonation's");
    by_id_token().await.err(400, "invalid_request");
});

// An ID token belongs to its grant like the access token beside it: once the grant is revoked
// (here by a refresh token used twice), the ID token is exchanged no more, and what an earlier
// exchange of it issued ends too.
on_both!(an_id_token_ends_with_its_grant, |srv| {
    const ID: &str = "urn:ietf:params:oauth:token-type:id_token";
    human(srv, "alice", "Wonder-land1").await;
    let te_app = json!({"grantTypes": ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_REFRESH_TOKEN", "OIDC_GRANT_TYPE_TOKEN_EXCHANGE"]});
    let (client_id, secret, _) = oidc_app(srv, te_app).await;
    let secret = secret.unwrap();
    srv.put("/v2/features/instance", json!({"oidcTokenExchange": true})).await.ok();
    let b = Browser::new(srv);
    let (code, verifier) = code_for(srv, &b, &client_id, "openid offline_access").await;
    let t = exchange_code(srv, Some((&client_id, &secret)), &code, &verifier).await;
    let (id_token, rt) =
        (t.ok()["id_token"].as_str().unwrap().to_string(), t.body["refresh_token"].as_str().unwrap().to_string());
    assert!(claims(&id_token)["gid"].is_string(), "{}", claims(&id_token));
    let exchange = || {
        let (cid, sec, subject) = (client_id.clone(), secret.clone(), id_token.clone());
        async move {
            let form = [
                ("grant_type", TE),
                ("subject_token", subject.as_str()),
                ("subject_token_type", ID),
                ("scope", "openid"),
            ];
            token(srv, Some((&cid, &sec)), &form).await
        }
    };
    let exchanged = exchange().await.ok()["access_token"].as_str().unwrap().to_string();
    let userinfo = |at: String| async move {
        reqwest::Client::new().get(srv.url("/oidc/v1/userinfo")).bearer_auth(at).send().await.unwrap().status().as_u16()
    };
    assert_eq!(userinfo(exchanged.clone()).await, 200);
    let refresh = [("grant_type", "refresh_token"), ("refresh_token", rt.as_str())];
    token(srv, Some((&client_id, &secret)), &refresh).await.ok();
    token(srv, Some((&client_id, &secret)), &refresh).await.err(400, "invalid_grant");
    exchange().await.err(400, "invalid_request");
    assert_eq!(userinfo(exchanged).await, 401, "what the exchange issued belongs to the grant");
});

// What an impersonation issued stands only while impersonation does: turning the security
// policy's switch off refuses its tokens (on again, they serve again), and the actor's loss of
// the impersonator role ends them.
on_both!(an_impersonation_ends_when_its_subject_becomes_an_administrator, |srv| {
    // Only end users are impersonated: a membership given to bob afterwards (here an
    // organization role) ends what the impersonation issued, or alice would act with it.
    let imp = alice_impersonates_bob(srv).await;
    assert_eq!(userinfo_status(srv, imp.at.clone()).await, 200);
    srv.post("/management/v1/orgs/me/members", json!({"userId": imp.bob, "roles": ["ORG_USER_MANAGER"]})).await.ok();
    assert_eq!(userinfo_status(srv, imp.at.clone()).await, 401);
    let form = [("grant_type", "refresh_token"), ("refresh_token", imp.rt.as_str())];
    token(srv, Some((&imp.client_id, &imp.secret)), &form).await.err(400, "invalid_grant");
});

on_both!(a_nested_impersonation_counts_no_more, |srv| {
    // A token of an earlier version that nested impersonations (carol, impersonated by bob,
    // who was impersonated by alice, bob holding the impersonator role for it): bob, a user
    // with a role, cannot have been impersonated, so the token counts no more; else alice
    // would act with bob's role.
    let imp = alice_impersonates_bob(srv).await;
    let carol = human(srv, "carol", "Carol-pass-1").await;
    let now = latch::clock::Clock::now(&*srv.clock);
    let claims = latch::oauth::issue::AccessClaims {
        iss: srv.base.clone(),
        sub: carol,
        aud: vec![imp.client_id.clone()],
        exp: now + 600,
        iat: now,
        nbf: now,
        jti: latch::crypto::secret::random_id(),
        client_id: imp.client_id.clone(),
        scope: "openid".into(),
        sid: None,
        gid: None,
        auth_time: None,
        amr: None,
        act: Some(json!({"iss": srv.base, "sub": imp.bob, "act": {"iss": srv.base, "sub": imp.alice}})),
        extra: Default::default(),
    };
    let nested = srv.state.tokens.sign(Some("at+jwt"), &claims).unwrap();
    let role = json!({"userId": imp.bob, "roles": ["ORG_END_USER_IMPERSONATOR"]});
    srv.post("/management/v1/orgs/me/members", role).await.ok();
    assert_eq!(userinfo_status(srv, nested).await, 401);
    // The same token without the nesting (bob's own impersonation of carol) counts.
    let single = latch::oauth::issue::AccessClaims {
        act: Some(json!({"iss": srv.base, "sub": imp.bob})),
        jti: latch::crypto::secret::random_id(),
        ..claims
    };
    let single = srv.state.tokens.sign(Some("at+jwt"), &single).unwrap();
    assert_eq!(userinfo_status(srv, single).await, 200);
});

on_both!(an_impersonation_carries_the_actors_authentication, |srv| {
    // alice signs in, then bob, later; alice impersonates bob with his own access token as
    // the subject: the tokens tell how and when alice signed in (RFC 8693, as in ZITADEL), not
    // bob's sign-in, which alice never gave.
    let imp = alice_impersonates_bob(srv).await;
    let alice_signed_in = latch::clock::Clock::now(&*srv.clock);
    srv.clock.advance(100);
    let b = Browser::new(srv);
    let (verifier, challenge) = crate::browser::pkce();
    let (id, page) = b
        .authorize(&[
            ("client_id", imp.client_id.as_str()),
            ("redirect_uri", "https://app.example.com/cb"),
            ("response_type", "code"),
            ("scope", "openid"),
            ("code_challenge", &challenge),
            ("code_challenge_method", "S256"),
        ])
        .await;
    let done = b.sign_in(&id.unwrap(), &page, "bob", "Builder-b0b!").await;
    let code = crate::browser::param(&done.redirect_params(), "code").unwrap().to_string();
    let t = exchange_code(srv, Some((&imp.client_id, &imp.secret)), &code, &verifier).await;
    let bob_token = t.ok()["access_token"].as_str().unwrap().to_string();
    assert!(claims(t.body["id_token"].as_str().unwrap())["auth_time"].as_i64().unwrap() > alice_signed_in);
    let form = [
        ("grant_type", TE),
        ("subject_token", bob_token.as_str()),
        ("subject_token_type", AT),
        ("actor_token", imp.actor.as_str()),
        ("actor_token_type", AT),
        ("scope", "openid"),
    ];
    let r = token(srv, Some((&imp.client_id, &imp.secret)), &form).await;
    let id_token = claims(r.ok()["id_token"].as_str().unwrap());
    assert_eq!(id_token["sub"], imp.bob.as_str());
    assert_eq!(id_token["act"]["sub"], imp.alice.as_str());
    assert!(id_token["auth_time"].as_i64().unwrap() <= alice_signed_in, "{id_token}");
});

on_both!(impersonation_tokens_need_the_policy_and_the_role, |srv| {
    let Impersonation { alice, client_id, secret, actor, at, rt, .. } = alice_impersonates_bob(srv).await;
    let userinfo = |at: String| userinfo_status(srv, at);
    let refresh = [("grant_type", "refresh_token"), ("refresh_token", rt.as_str())];
    assert_eq!(userinfo(at.clone()).await, 200);
    srv.put("/admin/v1/policies/security", json!({"enableImpersonation": false})).await.ok();
    assert_eq!(userinfo(at.clone()).await, 401, "impersonation is off");
    token(srv, Some((&client_id, &secret)), &refresh).await.err(400, "invalid_grant");
    assert_eq!(userinfo(actor.clone()).await, 200, "the actor's own token is no impersonation's");
    srv.put("/admin/v1/policies/security", json!({"enableImpersonation": true})).await.ok();
    assert_eq!(userinfo(at.clone()).await, 200, "on again");
    srv.delete(&format!("/management/v1/orgs/me/members/{alice}")).await.ok();
    assert_eq!(userinfo(at).await, 401, "the actor is no impersonator any more");
});

// An impersonation's subject stays an end user: a user who becomes an impersonator after being
// impersonated ends that impersonation, so impersonations do not nest through a role given
// later (the actor would act with the subject's new power over other users).
on_both!(impersonations_do_not_nest_through_a_role_given_later, |srv| {
    let te_app = json!({"grantTypes": ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_TOKEN_EXCHANGE"]});
    let (client_id, secret, _) = oidc_app(srv, te_app).await;
    let secret = secret.unwrap();
    srv.put("/v2/features/instance", json!({"oidcTokenExchange": true})).await.ok();
    srv.put("/admin/v1/policies/security", json!({"enableImpersonation": true})).await.ok();
    // code_for signs in alice.
    let alice = human(srv, "alice", "Wonder-land1").await;
    let (link, next) = (human(srv, "link", "Wonder-land1").await, human(srv, "next", "Wonder-land1").await);
    let make_impersonator = |id: String| async move {
        let role = json!({"userId": id, "roles": ["ORG_END_USER_IMPERSONATOR"]});
        srv.post("/management/v1/orgs/me/members", role).await.ok();
    };
    make_impersonator(alice.clone()).await;
    let b = Browser::new(srv);
    let (code, verifier) = code_for(srv, &b, &client_id, "openid").await;
    let t = exchange_code(srv, Some((&client_id, &secret)), &code, &verifier).await;
    let alices = t.ok()["access_token"].as_str().unwrap().to_string();
    let impersonate = |subject: String, actor: String| {
        let (cid, sec) = (client_id.clone(), secret.clone());
        async move {
            let form = [
                ("grant_type", TE),
                ("subject_token", subject.as_str()),
                ("subject_token_type", "urn:service:params:oauth:token-type:user_id"),
                ("actor_token", actor.as_str()),
                ("actor_token_type", AT),
                ("requested_token_type", "urn:ietf:params:oauth:token-type:jwt"),
            ];
            token(srv, Some((&cid, &sec)), &form).await
        }
    };
    let r = impersonate(link.clone(), alices).await;
    let as_link = r.ok()["access_token"].as_str().unwrap().to_string();
    assert_eq!(claims(&as_link)["act"]["sub"], alice.as_str());
    make_impersonator(link).await;
    let r = impersonate(next, as_link).await;
    r.err(400, "invalid_request");
    assert!(r.body["error_description"].as_str().unwrap().contains("not active"), "{}", r.body);
});

// A token exchange's refresh token keeps the exchange's audience and token type in what it
// gives (a refreshed ID token's `aud` is the one first issued, OIDC Core 12.2), where the
// refresh rebuilt them from the client; and a client without the refresh_token grant gets no
// refresh token from an exchange, as it gets none from a code (nor `offline_access` in the
// answer's scope).
on_both!(an_exchanges_refresh_token_keeps_its_audience_and_type, |srv| {
    let (client_id, secret, project, t) = exchanger_signed_in(srv).await;
    let subject = t.ok()["access_token"].as_str().unwrap().to_string();
    let form = [
        ("grant_type", TE),
        ("subject_token", subject.as_str()),
        ("subject_token_type", AT),
        ("audience", project.as_str()),
        ("requested_token_type", "urn:ietf:params:oauth:token-type:jwt"),
        ("scope", "openid offline_access"),
    ];
    let r = token(srv, Some((&client_id, &secret)), &form).await;
    let first = r.ok().clone();
    let at = first["access_token"].as_str().unwrap();
    assert!(at.contains('.'), "a JWT, as asked (the client issues opaque tokens)");
    assert_eq!(claims(at)["aud"], json!([project]));
    let id_aud = claims(first["id_token"].as_str().unwrap())["aud"].clone();
    let mut rt = first["refresh_token"].as_str().unwrap().to_string();
    for _ in 0..2 {
        let r =
            token(srv, Some((&client_id, &secret)), &[("grant_type", "refresh_token"), ("refresh_token", &rt)]).await;
        let next = r.ok().clone();
        let at = next["access_token"].as_str().unwrap();
        assert!(at.contains('.'), "still a JWT: {next}");
        assert_eq!(claims(at)["aud"], json!([project]));
        assert_eq!(claims(next["id_token"].as_str().unwrap())["aud"], id_aud);
        rt = next["refresh_token"].as_str().unwrap().to_string();
    }
    let (plain, plain_secret) = sibling_app(
        srv,
        &project,
        &json!({"grantTypes": ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_TOKEN_EXCHANGE"]}),
    )
    .await;
    let form = [("grant_type", TE), ("subject_token", subject.as_str()), ("subject_token_type", AT)];
    let r = token(srv, Some((&plain, &plain_secret)), &form).await;
    assert!(r.ok().get("refresh_token").is_none(), "{}", r.body);
    assert!(!r.body["scope"].as_str().unwrap().contains("offline_access"), "{}", r.body);
});

// A refresh token from an exchange under a grant the client already holds keeps that grant's
// absolute expiry, as a rotation does: exchanging the grant's own access tokens with
// offline_access does not extend the grant (it restarted the 90 days each time).
on_both!(an_exchange_under_a_held_grant_keeps_its_absolute_expiry, |srv| {
    let (client_id, secret, _, t) = exchanger_signed_in(srv).await;
    let rt = t.ok()["refresh_token"].as_str().unwrap().to_string();
    srv.clock.advance(10 * 86400);
    let r = token(srv, Some((&client_id, &secret)), &[("grant_type", "refresh_token"), ("refresh_token", &rt)]).await;
    let at = r.ok()["access_token"].as_str().unwrap().to_string();
    let form = [
        ("grant_type", TE),
        ("subject_token", at.as_str()),
        ("subject_token_type", AT),
        ("scope", "openid offline_access"),
    ];
    let r = token(srv, Some((&client_id, &secret)), &form).await;
    assert!(r.ok()["refresh_token"].is_string(), "{}", r.body);
    let mut c = srv.state.db.conn().await.unwrap();
    let expiries: Vec<(i64,)> =
        sqlx::query_as("SELECT DISTINCT expires_at FROM refresh_token").fetch_all(&mut *c).await.unwrap();
    assert_eq!(expiries.len(), 1, "one absolute expiry for the grant: {expiries:?}");
    drop(c);
    // Near the end of the grant (refreshed every 29 days, within the idle expiry) its last access
    // token outlives it by hours; once the grant's rows are swept, an exchange of that token
    // starts no new grant: no refresh token past the sign-in's 90 days.
    let mut rt = r.body["refresh_token"].as_str().unwrap().to_string();
    let mut at = String::new();
    for days in [19.0, 29.0, 29.0, 2.9] {
        srv.clock.advance((days * 86400.0) as i64);
        let r =
            token(srv, Some((&client_id, &secret)), &[("grant_type", "refresh_token"), ("refresh_token", &rt)]).await;
        rt = r.ok()["refresh_token"].as_str().unwrap().to_string();
        at = r.body["access_token"].as_str().unwrap().to_string();
    }
    srv.clock.advance(5 * 3600);
    let now = latch::clock::Clock::now(&*srv.clock);
    latch::sweep::sweep(&srv.state.db, now, 1000, 10).await.unwrap();
    assert_eq!(srv.count("refresh_token").await, 0, "the grant's rows are swept");
    let form = [
        ("grant_type", TE),
        ("subject_token", at.as_str()),
        ("subject_token_type", AT),
        ("scope", "openid offline_access"),
    ];
    let r = token(srv, Some((&client_id, &secret)), &form).await;
    assert!(r.ok().get("refresh_token").is_none(), "{}", r.body);
    assert!(!r.body["scope"].as_str().unwrap().contains("offline_access"), "{}", r.body);
});

// Back-Channel Logout 1.0, 2.3: a client that got tokens of a session by exchanging another
// client's token hears of the session's end, as a client signed in through it does.
on_both!(a_client_that_exchanged_a_sessions_token_hears_of_its_end, |srv| {
    let (_, _, project, t) = exchanger_signed_in(srv).await;
    let subject = t.ok()["access_token"].as_str().unwrap().to_string();
    let sid = claims(t.body["id_token"].as_str().unwrap())["sid"].as_str().unwrap().to_string();
    let (uri, mut received) = crate::resource::logout_receiver().await;
    srv.put("/v2/features/instance", json!({"oidcTokenExchange": true, "enableBackChannelLogout": true})).await.ok();
    let app = json!({"grantTypes": ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_TOKEN_EXCHANGE"],
                     "backChannelLogoutUri": uri, "devMode": true});
    let (sibling, sibling_secret) = sibling_app(srv, &project, &app).await;
    assert_eq!(srv.count("session_client").await, 0);
    let form = [("grant_type", TE), ("subject_token", subject.as_str()), ("subject_token_type", AT)];
    token(srv, Some((&sibling, &sibling_secret)), &form).await.ok();
    assert_eq!(srv.count("session_client").await, 1, "the exchanging client is noted in the session");
    // alice signs out in the browser she signed in with.
    let ended = {
        let mut c = srv.state.db.conn().await.unwrap();
        let browser = "SELECT ua_key FROM session WHERE session_id = $1";
        let (ua_key,): (Vec<u8>,) = sqlx::query_as(browser).bind(&sid).fetch_one(&mut *c).await.unwrap();
        latch::oidc::end_session::end_sessions(&srv.state, &mut c, &ua_key, None).await.unwrap()
    };
    assert_eq!(ended, 1);
    let token = crate::resource::next_logout_token(&mut received).await;
    let c = claims(&token);
    assert_eq!(c["aud"], sibling.as_str(), "{c}");
    assert_eq!(c["sid"], sid.as_str(), "{c}");
});
