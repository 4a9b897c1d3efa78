//! The checks of the OpenID Foundation's "Basic OP" and "Config OP" certification plans (and the
//! RP-initiated logout plan) that apply to latch, reproduced as tests: the suite itself cannot
//! run here (it needs Maven Central and MongoDB). Each test names the module(s) of the plan it
//! stands for.

use base64::Engine;
use serde_json::{Value, json};

use crate::browser::{Browser, Page, human, oidc_app, param, pkce};
use crate::harness::{TestServer, now};
use crate::on_both;
use crate::token::{claims, exchange_code, header, token};

const CB: &str = "https://app.example.com/cb";

struct Client {
    id: String,
    secret: String,
}

async fn setup(srv: &TestServer, extra: Value) -> Client {
    let (id, secret, _) = oidc_app(srv, extra).await;
    human(srv, "alice", "Wonder-land1").await;
    Client { id, secret: secret.unwrap_or_default() }
}

fn query<'a>(client: &'a Client, challenge: &'a str, extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut q = vec![
        ("client_id", client.id.as_str()),
        ("redirect_uri", CB),
        ("response_type", "code"),
        ("scope", "openid"),
        ("state", "st"),
        ("nonce", "n-0S6_WzA2Mj"),
        ("code_challenge", challenge),
        ("code_challenge_method", "S256"),
    ];
    for (k, v) in extra {
        q.retain(|(k2, _)| k2 != k);
        q.push((k, v));
    }
    q.retain(|(_, v)| !v.is_empty());
    q
}

/// Runs an authorization request to its answer at the redirect URI, signing alice in when asked.
async fn authorize(b: &Browser, q: &[(&str, &str)]) -> Page {
    let (id, page) = b.authorize(q).await;
    match id {
        Some(id) => b.sign_in(&id, &page, "alice", "Wonder-land1").await,
        None => page,
    }
}

async fn exchange(srv: &TestServer, c: &Client, code: &str, verifier: &str) -> Value {
    token(
        srv,
        Some((&c.id, &c.secret)),
        &[("grant_type", "authorization_code"), ("code", code), ("redirect_uri", CB), ("code_verifier", verifier)],
    )
    .await
    .ok()
    .clone()
}

/// Verifies an ID token's signature with the key its `kid` names in the key set, and the claims
/// the plan checks (`ValidateIdToken` and friends).
async fn check_id_token(srv: &TestServer, jwt: &str, client_id: &str, nonce: Option<&str>) -> Value {
    let h = header(jwt);
    assert_ne!(h["alg"], "none", "OIDCCIdTokenUnsigned: never unsigned");
    let kid = h["kid"].as_str().expect("OIDCCIdTokenSignature: a kid");
    let jwks = srv.get("/oauth/v2/keys").await.ok().clone();
    let jwk = jwks["keys"].as_array().unwrap().iter().find(|k| k["kid"] == kid).expect("the kid is in the key set");
    let jwk: jsonwebtoken::jwk::Jwk = serde_json::from_value(jwk.clone()).unwrap();
    let key = jsonwebtoken::DecodingKey::from_jwk(&jwk).unwrap();
    let mut v = jsonwebtoken::Validation::new(h["alg"].as_str().unwrap().parse().expect("a known alg"));
    v.set_audience(&[client_id]);
    v.set_issuer(&[srv.base.as_str()]);
    let c = jsonwebtoken::decode::<Value>(jwt, &key, &v).expect("the signature and claims validate").claims;
    assert!(c["sub"].as_str().is_some_and(|s| !s.is_empty()));
    let t = now();
    assert!(c["exp"].as_i64().unwrap() > t);
    assert!(c["iat"].as_i64().unwrap() <= t + 300);
    assert_eq!(c["nonce"].as_str(), nonce);
    c
}

on_both!(config_op_discovery_endpoint_verification, |srv| {
    // oidcc-discovery-endpoint-verification
    let r = srv.get("/.well-known/openid-configuration").await;
    assert!(r.header("content-type").is_some_and(|t| t.starts_with("application/json")));
    let d = r.ok().clone();
    assert_eq!(d["issuer"], srv.base.as_str(), "discovery URL = issuer + /.well-known/openid-configuration");
    assert!(url::Url::parse(d["issuer"].as_str().unwrap()).is_ok());
    for e in ["authorization_endpoint", "token_endpoint", "userinfo_endpoint", "jwks_uri"] {
        assert!(d[e].as_str().is_some_and(|u| u.starts_with(srv.base.as_str())), "{e}");
    }
    let has = |field: &str, v: &str| d[field].as_array().is_some_and(|a| a.iter().any(|x| x == v));
    assert!(has("response_types_supported", "code"));
    assert!(has("subject_types_supported", "public"));
    assert!(has("id_token_signing_alg_values_supported", "RS256"));
    assert!(has("scopes_supported", "openid"));
    assert!(has("grant_types_supported", "authorization_code"));
    assert!(d["claims_supported"].as_array().is_some_and(|a| !a.is_empty()));
    assert!(d["code_challenge_methods_supported"].is_array());
    // OpenID Connect's registration initiation: without `create` listed, a client may take
    // prompt=create as unsupported.
    assert!(has("prompt_values_supported", "create") && has("prompt_values_supported", "select_account"));
    for s in d["scopes_supported"].as_array().unwrap() {
        let s = s.as_str().unwrap();
        assert!(!s.is_empty() && s.bytes().all(|b| b > 0x20 && b != b'"' && b != b'\\' && b < 0x7f), "scope {s}");
    }
    // The key set: valid JWKs, each with a kid, no private or symmetric material.
    let jwks = reqwest::get(d["jwks_uri"].as_str().unwrap()).await.unwrap().json::<Value>().await.unwrap();
    for k in jwks["keys"].as_array().unwrap() {
        assert!(k["kid"].as_str().is_some_and(|s| !s.is_empty()), "OIDCC-10.1: a kid on every key");
        assert_ne!(k["kty"], "oct", "no symmetric keys");
        for private in ["d", "p", "q", "dp", "dq", "qi", "k"] {
            assert!(k.get(private).is_none(), "no private member {private}");
        }
        assert!(serde_json::from_value::<jsonwebtoken::jwk::Jwk>(k.clone()).is_ok());
    }
});

on_both!(basic_op_server_test_and_client_secret_post, |srv| {
    // OIDCCServerTest with client_secret_basic, OIDCCServerTestClientSecretPost, and
    // OIDCCEnsureRequestWithValidPkceSucceeds.
    human(srv, "alice", "Wonder-land1").await;
    for method in ["OIDC_AUTH_METHOD_TYPE_BASIC", "OIDC_AUTH_METHOD_TYPE_POST"] {
        let c = app(srv, method, method).await;
        let b = Browser::new(srv);
        let (verifier, challenge) = pkce();
        let done = authorize(&b, &query(&c, &challenge, &[])).await;
        let p = done.redirect_params();
        assert_eq!(param(&p, "state"), Some("st"));
        assert!(param(&p, "error").is_none());
        let code = param(&p, "code").unwrap();
        let form = [
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", CB),
            ("code_verifier", verifier.as_str()),
            ("client_id", c.id.as_str()),
            ("client_secret", c.secret.as_str()),
        ];
        let t = if method.ends_with("BASIC") {
            token(srv, Some((&c.id, &c.secret)), &form[..4]).await
        } else {
            token(srv, None, &form).await
        };
        let t = t.ok().clone();
        assert!(t["access_token"].as_str().is_some_and(|a| !a.is_empty()));
        assert!(t["expires_in"].as_i64().is_some_and(|e| e > 0));
        assert_eq!(t["token_type"], "Bearer");
        check_id_token(srv, t["id_token"].as_str().unwrap(), &c.id, Some("n-0S6_WzA2Mj")).await;
        // The protected resource: userinfo with the bearer token.
        let u = userinfo_get(srv, t["access_token"].as_str().unwrap()).await;
        assert_eq!(u.0, 200);
    }
});

async fn app(srv: &TestServer, name: &str, method: &str) -> Client {
    let (id, secret, _) = oidc_app(srv, json!({"name": name, "authMethodType": method})).await;
    Client { id, secret: secret.unwrap_or_default() }
}

async fn userinfo_get(srv: &TestServer, at: &str) -> (u16, Value) {
    let r = reqwest::Client::new().get(srv.url("/oidc/v1/userinfo")).bearer_auth(at).send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

on_both!(basic_op_userinfo_get_post_header_post_body_and_scopes, |srv| {
    // OIDCCUserInfoGet, OIDCCUserInfoPostHeader, OIDCCUserInfoPostBody, OIDCCScopeProfile/Email/
    // Address/Phone/All, OIDCEnsureOtherScopeOrderSucceeds.
    let c = setup(srv, json!({})).await;
    let b = Browser::new(srv);
    let (verifier, challenge) = pkce();
    let done = authorize(&b, &query(&c, &challenge, &[("scope", "email profile openid phone address")])).await;
    let t = exchange(srv, &c, param(&done.redirect_params(), "code").unwrap(), &verifier).await;
    let at = t["access_token"].as_str().unwrap();
    let id = check_id_token(srv, t["id_token"].as_str().unwrap(), &c.id, Some("n-0S6_WzA2Mj")).await;
    let (s, get) = userinfo_get(srv, at).await;
    assert_eq!(s, 200);
    let client = reqwest::Client::new();
    let header: Value =
        client.post(srv.url("/oidc/v1/userinfo")).bearer_auth(at).send().await.unwrap().json().await.unwrap();
    let body: Value = client
        .post(srv.url("/oidc/v1/userinfo"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("access_token={at}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(get, header);
    assert_eq!(get, body);
    assert_eq!(get["sub"], id["sub"], "userinfo sub = ID token sub");
    for claim in ["name", "given_name", "family_name", "preferred_username", "email", "email_verified"] {
        assert!(get.get(claim).is_some(), "{claim} for the granted scopes: {get}");
    }
    // openid alone: no profile or e-mail claims.
    let (verifier, challenge) = pkce();
    let done = authorize(&b, &query(&c, &challenge, &[])).await;
    let t = exchange(srv, &c, param(&done.redirect_params(), "code").unwrap(), &verifier).await;
    let (_, only) = userinfo_get(srv, t["access_token"].as_str().unwrap()).await;
    assert!(only.get("email").is_none() && only.get("given_name").is_none(), "{only}");
});

on_both!(basic_op_request_variants_succeed, |srv| {
    // OIDCCEnsureRequestWithoutNonceSucceedsForCodeFlow, OIDCCDisplayPage, OIDCCDisplayPopup,
    // OIDCCEnsureRequestWithUnknownParameterSucceeds, OIDCCUiLocales, OIDCCClaimsLocales,
    // OIDCCEnsureRequestWithAcrValuesSucceeds, OIDCCClaimsEssential (the claims parameter is
    // not supported: ignored, the request succeeds), OIDCCLoginHint, OIDCCEnsurePostRequestSucceeds.
    let c = setup(srv, json!({})).await;
    let variants: Vec<Vec<(&str, &str)>> = vec![
        vec![("nonce", "")],
        vec![("display", "page")],
        vec![("display", "popup")],
        vec![("extra_param", "foobar")],
        vec![("ui_locales", "se")],
        vec![("claims_locales", "se")],
        vec![("acr_values", "1 2")],
        vec![("claims", r#"{"userinfo":{"name":{"essential":true}}}"#)],
    ];
    for extra in variants {
        let b = Browser::new(srv);
        let (verifier, challenge) = pkce();
        let done = authorize(&b, &query(&c, &challenge, &extra)).await;
        let p = done.redirect_params();
        let code = param(&p, "code").unwrap_or_else(|| panic!("{extra:?}: {p:?}"));
        let t = exchange(srv, &c, code, &verifier).await;
        let nonce = if extra[0] == ("nonce", "") { None } else { Some("n-0S6_WzA2Mj") };
        check_id_token(srv, t["id_token"].as_str().unwrap(), &c.id, nonce).await;
    }
    // login_hint fills in the login name.
    let b = Browser::new(srv);
    let (_, challenge) = pkce();
    let (_, page) = b.authorize(&query(&c, &challenge, &[("login_hint", "alice")])).await;
    assert!(page.html.contains("alice"), "{}", page.html);
    // The authorization request as a POST.
    let b = Browser::new(srv);
    let (verifier, challenge) = pkce();
    // Without the browser cookie (a cross-site form post never brings it) the POST goes on as
    // a GET, which brings it: no new cookie is set in its answer, which would cut the browser
    // off from its sessions.
    let first = b.post("/oauth/v2/authorize", &query(&c, &challenge, &[])).await;
    assert_eq!(first.status, 303);
    assert!(first.header("set-cookie").is_none(), "{:?}", first.headers);
    assert!(first.location().starts_with("/oauth/v2/authorize?"), "{}", first.location());
    // Within what proxies take in a request line: a longer one is an error page.
    let long = "x".repeat(9_000);
    let mut too_long = query(&c, &challenge, &[]);
    too_long.push(("login_hint", long.as_str()));
    let r = Browser::new(srv).post("/oauth/v2/authorize", &too_long).await;
    assert_eq!((r.status, r.location.is_none()), (400, true), "{}", r.html);
    assert!(r.html.contains("too long"), "{}", r.html);
    let as_get = b.get(first.location()).await;
    let login = as_get.location().to_string();
    let id = Browser::request_id(&login);
    let page = b.get(&login).await;
    let done = b.sign_in(&id, &page, "alice", "Wonder-land1").await;
    let t = exchange(srv, &c, param(&done.redirect_params(), "code").unwrap(), &verifier).await;
    assert!(t["id_token"].is_string());
    // With the cookie the POST is answered itself: single sign-on.
    let (verifier, challenge) = pkce();
    let sso = b.post("/oauth/v2/authorize", &query(&c, &challenge, &[("prompt", "none")])).await;
    let code = param(&sso.redirect_params(), "code").unwrap_or_else(|| panic!("{:?}", sso.location)).to_string();
    assert!(exchange(srv, &c, &code, &verifier).await["id_token"].is_string());
});

on_both!(basic_op_missing_response_type_and_unregistered_redirect_uri, |srv| {
    // OIDCCResponseTypeMissing, OIDCCEnsureRegisteredRedirectUri, and request objects rejected
    // as unsupported (OIDCCRequestUriUnsignedSupportedCorrectlyOrRejectedAsUnsupported,
    // OIDCCUnsignedRequestObjectSupportedCorrectlyOrRejectedAsUnsupported).
    let c = setup(srv, json!({})).await;
    let b = Browser::new(srv);
    let (_, challenge) = pkce();
    let mut q = query(&c, &challenge, &[]);
    q.retain(|(k, _)| *k != "response_type");
    let (_, page) = b.authorize(&q).await;
    let p = page.redirect_params();
    assert_eq!(param(&p, "error"), Some("invalid_request"), "{p:?}");
    assert_eq!(param(&p, "state"), Some("st"));
    let (_, page) = b.authorize(&query(&c, &challenge, &[("redirect_uri", "https://attacker.example/cb")])).await;
    assert!(page.location.is_none(), "never redirected to an unregistered URI");
    assert_eq!(page.status, 400);
    let unsigned = format!(
        "{}.{}.",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#),
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json!({"client_id": c.id}).to_string())
    );
    for (k, v, e) in [
        ("request", unsigned.as_str(), "request_not_supported"),
        ("request_uri", "https://rp.example/request.jwt", "request_uri_not_supported"),
    ] {
        let (_, page) = b.authorize(&query(&c, &challenge, &[(k, v)])).await;
        assert_eq!(param(&page.redirect_params(), "error"), Some(e));
    }
});

on_both!(basic_op_prompt_and_max_age, |srv| {
    // OIDCCPromptNoneNotLoggedIn, OIDCCPromptNoneLoggedIn, OIDCCPromptLogin, OIDCCMaxAge1,
    // OIDCCMaxAge10000, OIDCCIdTokenHint.
    let c = setup(srv, json!({})).await;
    let b = Browser::new(srv);
    let (verifier, challenge) = pkce();
    let (_, none) = b.authorize(&query(&c, &challenge, &[("prompt", "none")])).await;
    assert_eq!(param(&none.redirect_params(), "error"), Some("login_required"));
    let done = authorize(&b, &query(&c, &challenge, &[])).await;
    let t = exchange(srv, &c, param(&done.redirect_params(), "code").unwrap(), &verifier).await;
    let first = claims(t["id_token"].as_str().unwrap());
    let auth_time = first["auth_time"].as_i64().expect("auth_time");
    // Logged in: prompt=none answers with a code; max_age=10000 too, with the same auth_time.
    for extra in [("prompt", "none"), ("max_age", "10000")] {
        let (verifier, challenge) = pkce();
        let (id, page) = b.authorize(&query(&c, &challenge, &[extra])).await;
        assert!(id.is_none(), "{extra:?}: no login page");
        let t = exchange(srv, &c, param(&page.redirect_params(), "code").unwrap(), &verifier).await;
        assert_eq!(claims(t["id_token"].as_str().unwrap())["auth_time"].as_i64(), Some(auth_time));
    }
    // id_token_hint of the signed-in user: answered at once.
    let hint = t["id_token"].as_str().unwrap();
    let (verifier, challenge) = pkce();
    let (id, page) = b.authorize(&query(&c, &challenge, &[("prompt", "none"), ("id_token_hint", hint)])).await;
    assert!(id.is_none());
    let t2 = exchange(srv, &c, param(&page.redirect_params(), "code").unwrap(), &verifier).await;
    assert_eq!(claims(t2["id_token"].as_str().unwrap())["sub"], first["sub"]);
    // max_age=1 after two seconds, and prompt=login: a new authentication with a later auth_time.
    srv.clock.advance(2);
    for extra in [("max_age", "1"), ("prompt", "login")] {
        srv.clock.advance(1);
        let (verifier, challenge) = pkce();
        let (id, page) = b.authorize(&query(&c, &challenge, &[extra])).await;
        let id = id.unwrap_or_else(|| panic!("{extra:?}: the login page again"));
        let p =
            b.post(&format!("/ui/login/{id}/password"), &[("csrf", &page.csrf()), ("password", "Wonder-land1")]).await;
        let p = if p.location.as_deref().is_some_and(|l| l.starts_with(CB)) {
            p
        } else {
            b.sign_in(&id, &page, "alice", "Wonder-land1").await
        };
        let t = exchange(srv, &c, param(&p.redirect_params(), "code").unwrap(), &verifier).await;
        let renewed = claims(t["id_token"].as_str().unwrap());
        assert!(renewed["auth_time"].as_i64().unwrap() > auth_time, "{extra:?}");
        // The browser's session is renewed, not replaced: the code named the id it kept.
        assert!(first["sid"].is_string());
        assert_eq!(renewed["sid"], first["sid"], "{extra:?}");
    }
});

on_both!(basic_op_code_reuse_and_refresh_token, |srv| {
    // OIDCCAuthCodeReuse, OIDCCAuthCodeReuseAfter30Seconds (tokens of a reused code are revoked),
    // OIDCCRefreshToken (allowed characters, a working refresh, a consistent refreshed ID token,
    // another client's refresh token refused).
    let c = setup(srv, json!({})).await;
    let other = app(srv, "other", "OIDC_AUTH_METHOD_TYPE_BASIC").await;
    let b = Browser::new(srv);
    let (verifier, challenge) = pkce();
    let done = authorize(&b, &query(&c, &challenge, &[("scope", "openid offline_access")])).await;
    let code = param(&done.redirect_params(), "code").unwrap().to_string();
    let t = exchange(srv, &c, &code, &verifier).await;
    srv.clock.advance(30);
    exchange_code(srv, Some((&c.id, &c.secret)), &code, &verifier).await.err(400, "invalid_grant");
    let (s, _) = userinfo_get(srv, t["access_token"].as_str().unwrap()).await;
    assert_eq!(s, 401, "the tokens of a reused code are revoked");

    let (verifier, challenge) = pkce();
    let done = authorize(&b, &query(&c, &challenge, &[("scope", "openid offline_access")])).await;
    let t = exchange(srv, &c, param(&done.redirect_params(), "code").unwrap(), &verifier).await;
    let rt = t["refresh_token"].as_str().expect("a refresh token with offline_access");
    assert!(rt.bytes().all(|b| (0x20..=0x7e).contains(&b)), "RFC 6749 A.17 characters");
    token(srv, Some((&other.id, &other.secret)), &[("grant_type", "refresh_token"), ("refresh_token", rt)])
        .await
        .err(400, "invalid_grant");
    let r = token(srv, Some((&c.id, &c.secret)), &[("grant_type", "refresh_token"), ("refresh_token", rt)]).await;
    let r = r.ok();
    let (a, b2) = (claims(t["id_token"].as_str().unwrap()), claims(r["id_token"].as_str().unwrap()));
    for k in ["iss", "sub", "aud", "azp", "auth_time"] {
        assert_eq!(a[k], b2[k], "refreshed ID token keeps {k}");
    }
    check_id_token(srv, r["id_token"].as_str().unwrap(), &c.id, None).await;
});

on_both!(rp_initiated_logout_plan, |srv| {
    // OIDCCRpInitiatedLogoutTestPlan: rp-initiated-logout, bad-id-token-hint, modified-id-token-
    // hint, no-id-token-hint, bad/no/query-added post_logout_redirect_uri, no-params, no-state,
    // only-state.
    let c = setup(srv, json!({})).await;
    let signed_in = || async {
        let b = Browser::new(srv);
        let (verifier, challenge) = pkce();
        let done = authorize(&b, &query(&c, &challenge, &[])).await;
        let t = exchange(srv, &c, param(&done.redirect_params(), "code").unwrap(), &verifier).await;
        (b, t["id_token"].as_str().unwrap().to_string())
    };
    let bye = "https://app.example.com/bye";
    let logout = |hint: &str, uri: &str, state: &str| {
        let q = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(
                [("id_token_hint", hint), ("post_logout_redirect_uri", uri), ("state", state)]
                    .iter()
                    .filter(|(_, v)| !v.is_empty()),
            )
            .finish();
        format!("/oidc/v1/end_session?{q}")
    };
    // The happy path with state, and without.
    let (b, hint) = signed_in().await;
    let out = b.get(&logout(&hint, bye, "s1")).await;
    assert_eq!(out.location.as_deref(), Some(format!("{bye}?state=s1").as_str()));
    let (b, hint) = signed_in().await;
    let out = b.get(&logout(&hint, bye, "")).await;
    assert_eq!(out.location.as_deref(), Some(bye));
    // A hint with a broken signature, or a modified payload: an error page, no redirect.
    let (b, hint) = signed_in().await;
    let mut parts: Vec<String> = hint.split('.').map(str::to_string).collect();
    let mut sig = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(&parts[2]).unwrap();
    sig[0] ^= 1;
    parts[2] = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sig);
    let out = b.get(&logout(&parts.join("."), bye, "s")).await;
    assert!(out.location.is_none() && out.status == 400, "bad hint: {} {:?}", out.status, out.location);
    let mut payload = claims(&hint);
    payload["sub"] = json!("someone-else");
    let modified = format!(
        "{}.{}.{}",
        hint.split('.').next().unwrap(),
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(payload.to_string()),
        hint.split('.').nth(2).unwrap()
    );
    let out = b.get(&logout(&modified, bye, "s")).await;
    assert!(out.location.is_none() && out.status == 400, "modified hint");
    // Unregistered, or with a query added: no redirect.
    for uri in ["https://attacker.example/bye", "https://app.example.com/bye?extra=1"] {
        let out = b.get(&logout(&hint, uri, "s")).await;
        assert!(out.location.is_none(), "{uri}");
        assert_eq!(out.status, 400);
    }
    // No id_token_hint but client_id, and no parameters at all: signed out, no redirect without a hint.
    let out =
        b.sign_out(&format!("/oidc/v1/end_session?client_id={}&post_logout_redirect_uri={bye}&state=x", c.id)).await;
    assert_eq!(out.location.as_deref(), Some(format!("{bye}?state=x").as_str()));
    let (b, _) = signed_in().await;
    let out = b.follow(b.sign_out("/oidc/v1/end_session").await).await;
    assert_eq!(out.status, 200);
    let (_, challenge) = pkce();
    let (_, none) = b.authorize(&query(&c, &challenge, &[("prompt", "none")])).await;
    assert_eq!(param(&none.redirect_params(), "error"), Some("login_required"), "the session ended");
});
