//! The authorization endpoint: every parameter and error, single sign-on, response modes.

use serde_json::{Value, json};

use crate::browser::{Browser, human, oidc_app, param, pkce};
use crate::on_both;

const CB: &str = "https://app.example.com/cb";

pub fn code_query<'a>(client_id: &'a str, challenge: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("client_id", client_id),
        ("redirect_uri", CB),
        ("response_type", "code"),
        ("scope", "openid profile email"),
        ("state", "st-123"),
        ("nonce", "n-456"),
        ("code_challenge", challenge),
        ("code_challenge_method", "S256"),
    ]
}

on_both!(code_flow_sign_in_and_single_sign_on, |srv| {
    let (client_id, _, _) = oidc_app(srv, json!({})).await;
    human(srv, "alice", "Wonder-land1").await;
    let (_, challenge) = pkce();
    let b = Browser::new(srv);
    let (id, page) = b.authorize(&code_query(&client_id, &challenge)).await;
    let id = id.expect("sent to the login pages");
    assert_eq!(page.status, 200);
    assert!(page.html.contains("name=\"loginname\""));
    assert_eq!(srv.count("auth_request").await, 1);
    let done = b.sign_in(&id, &page, "alice", "Wonder-land1").await;
    assert_eq!(done.status, 303, "{}", done.html);
    assert!(done.location().starts_with(CB), "{}", done.location());
    let p = done.redirect_params();
    assert_eq!(param(&p, "state"), Some("st-123"));
    assert_eq!(param(&p, "iss"), Some(srv.base.as_str()), "RFC 9207 iss");
    assert_eq!(done.headers.get("referrer-policy").map(|v| v.to_str().unwrap()), Some("no-referrer"));
    let code = param(&p, "code").expect("a code").to_string();
    assert!(code.len() >= 43);
    assert_eq!(srv.count("auth_request").await, 0, "the pending request is retired");
    assert_eq!(srv.count("session").await, 1);
    assert_eq!(srv.count("auth_code").await, 1);

    // No CORS at the authorization endpoint (RFC 9700 2.6): neither for a request nor a preflight.
    let query =
        form_urlencoded::Serializer::new(String::new()).extend_pairs(code_query(&client_id, &challenge)).finish();
    for method in ["GET", "OPTIONS"] {
        let r = srv
            .send(
                method,
                &format!("/oauth/v2/authorize?{query}"),
                None,
                &[("origin", "https://app.example.com"), ("access-control-request-method", "GET")],
                None,
            )
            .await;
        assert!(r.header("access-control-allow-origin").is_none(), "{method}: {:?}", r.headers);
    }

    // Single sign-on: the next request is answered at once, with a new code.
    let again = b
        .get(&format!(
            "/oauth/v2/authorize?{}",
            form_urlencoded::Serializer::new(String::new()).extend_pairs(code_query(&client_id, &challenge)).finish()
        ))
        .await;
    assert_eq!(again.status, 303);
    let p2 = again.redirect_params();
    assert!(param(&p2, "code").is_some_and(|c| c != code));
    // prompt=none with a session works too.
    let mut q = code_query(&client_id, &challenge);
    q.push(("prompt", "none"));
    let (_, none) = b.authorize(&q).await;
    assert!(param(&none.redirect_params(), "code").is_some());
    // ... and with the largest max_age, which allows any age (no overflow).
    q.push(("max_age", "9223372036854775807"));
    let (_, none) = b.authorize(&q).await;
    assert!(param(&none.redirect_params(), "code").is_some(), "{:?} {}", none.location, none.html);
    // prompt=login asks again.
    let mut q = code_query(&client_id, &challenge);
    q.push(("prompt", "login"));
    let (id, page) = b.authorize(&q).await;
    assert!(id.is_some() && page.html.contains("loginname"));
    // max_age=0 asks for the password of the signed-in user.
    let mut q = code_query(&client_id, &challenge);
    q.push(("max_age", "0"));
    srv.clock.advance(1);
    let (id, page) = b.authorize(&q).await;
    assert!(id.is_some());
    assert!(page.html.contains("name=\"password\""), "{}", page.html);
    assert!(page.html.contains("alice@"), "the user is known");
    // Another browser has no session.
    let other = Browser::new(srv);
    let mut q = code_query(&client_id, &challenge);
    q.push(("prompt", "none"));
    let (_, r) = other.authorize(&q).await;
    let p = r.redirect_params();
    assert_eq!(param(&p, "error"), Some("login_required"));
    assert_eq!(param(&p, "state"), Some("st-123"));
    assert_eq!(param(&p, "iss"), Some(srv.base.as_str()));
});

on_both!(errors_shown_on_a_page_never_redirected, |srv| {
    let (client_id, _, _) = oidc_app(srv, json!({})).await;
    let b = Browser::new(srv);
    let cases: Vec<(Vec<(&str, &str)>, &str)> = vec![
        (vec![("redirect_uri", CB), ("response_type", "code"), ("scope", "openid")], "client_id"),
        (
            vec![("client_id", "unknown"), ("redirect_uri", CB), ("response_type", "code"), ("scope", "openid")],
            "unknown",
        ),
        (vec![("client_id", &client_id), ("response_type", "code"), ("scope", "openid")], "redirect_uri"),
        (
            vec![
                ("client_id", &client_id),
                ("redirect_uri", "https://app.example.com/cb/"),
                ("response_type", "code"),
                ("scope", "openid"),
            ],
            "not registered",
        ),
        (
            vec![
                ("client_id", &client_id),
                ("redirect_uri", "https://APP.example.com/cb"),
                ("response_type", "code"),
                ("scope", "openid"),
            ],
            "not registered",
        ),
        (
            vec![
                ("client_id", &client_id),
                ("redirect_uri", "https://app.example.com/cb?x=1"),
                ("response_type", "code"),
                ("scope", "openid"),
            ],
            "not registered",
        ),
        (
            vec![
                ("client_id", &client_id),
                ("client_id", &client_id),
                ("redirect_uri", CB),
                ("response_type", "code"),
                ("scope", "openid"),
            ],
            "repeated",
        ),
        (
            vec![
                ("client_id", &client_id),
                ("redirect_uri", CB),
                ("redirect_uri", CB),
                ("response_type", "code"),
                ("scope", "openid"),
            ],
            "repeated",
        ),
    ];
    for (q, expect) in cases {
        let (_, page) = b.authorize(&q).await;
        assert_eq!(page.status, 400, "{q:?}: {}", page.html);
        assert!(page.location.is_none(), "never redirected: {q:?}");
        assert!(page.html.contains(expect), "{q:?} should mention {expect}: {}", page.html);
        assert!(page.header("x-request-id").is_some_and(|id| page.html.contains(id)), "the page shows the request id");
    }
    // In the person's language: ui_locales, or else Accept-Language.
    let (_, page) = b
        .authorize(&[("client_id", "unknown"), ("redirect_uri", CB), ("response_type", "code"), ("ui_locales", "de")])
        .await;
    assert!(page.html.contains("Die Anwendung ist unbekannt oder deaktiviert."), "{}", page.html);
    assert!(page.html.contains("lang=\"de\""), "{}", page.html);
    let mut german = Browser::new(srv);
    german.accept_language = Some("de-CH, en;q=0.5".into());
    let (_, page) = german.authorize(&[("client_id", &client_id), ("redirect_uri", "https://evil.example/cb")]).await;
    assert!(page.html.contains("nicht registriert"), "{}", page.html);
    let (_, page) = german.authorize(&[("client_id", &client_id), ("client_id", &client_id)]).await;
    assert!(page.html.contains("Der Parameter client_id kommt mehrfach vor."), "{}", page.html);
    assert_eq!(srv.count("auth_request").await, 0);
});

on_both!(errors_redirected_to_the_client, |srv| {
    let (client_id, _, _) = oidc_app(srv, json!({})).await;
    let (public, _, _) = oidc_app(
        srv,
        json!({"name": "spa", "authMethodType": "OIDC_AUTH_METHOD_TYPE_NONE", "appType": "OIDC_APP_TYPE_USER_AGENT"}),
    )
    .await;
    // Set up for the device flow alone, which the code response type allows in the
    // configuration: no code it could not redeem.
    let device_only = json!({"name": "tv", "grantTypes": ["OIDC_GRANT_TYPE_DEVICE_CODE"]});
    let (device, _, _) = oidc_app(srv, device_only).await;
    let (_, challenge) = pkce();
    let b = Browser::new(srv);
    let base = |c: &'static str| -> Vec<(&'static str, String)> {
        vec![
            ("redirect_uri", CB.into()),
            ("response_type", c.into()),
            ("scope", "openid".into()),
            ("state", "s1".into()),
        ]
    };
    type Case<'a> = (String, Vec<(&'a str, String)>, &'a str);
    let cases: Vec<Case> = vec![
        (
            client_id.clone(),
            vec![("redirect_uri", CB.into()), ("scope", "openid".into()), ("state", "s1".into())],
            "invalid_request",
        ),
        (client_id.clone(), base("token"), "unsupported_response_type"),
        (client_id.clone(), base("code id_token"), "unsupported_response_type"),
        (client_id.clone(), base("id_token"), "unauthorized_client"),
        (device.clone(), base("code"), "unauthorized_client"),
        (
            client_id.clone(),
            vec![
                ("redirect_uri", CB.into()),
                ("response_type", "code".into()),
                ("scope", "profile".into()),
                ("state", "s1".into()),
            ],
            "invalid_scope",
        ),
        (
            client_id.clone(),
            vec![("redirect_uri", CB.into()), ("response_type", "code".into()), ("state", "s1".into())],
            "invalid_scope",
        ),
        (
            client_id.clone(),
            [base("code"), vec![("code_challenge", challenge.clone()), ("code_challenge_method", "plain".into())]]
                .concat(),
            "invalid_request",
        ),
        (client_id.clone(), [base("code"), vec![("code_challenge", challenge.clone())]].concat(), "invalid_request"),
        (
            client_id.clone(),
            [base("code"), vec![("code_challenge", "short".into()), ("code_challenge_method", "S256".into())]].concat(),
            "invalid_request",
        ),
        (client_id.clone(), [base("code"), vec![("state", "again".into())]].concat(), "invalid_request"),
        (client_id.clone(), [base("code"), vec![("request", "eyJ...".into())]].concat(), "request_not_supported"),
        (
            client_id.clone(),
            [base("code"), vec![("request_uri", "https://x/r".into())]].concat(),
            "request_uri_not_supported",
        ),
        (client_id.clone(), [base("code"), vec![("max_age", "-1".into())]].concat(), "invalid_request"),
        (client_id.clone(), [base("code"), vec![("max_age", "soon".into())]].concat(), "invalid_request"),
        (client_id.clone(), [base("code"), vec![("prompt", "none login".into())]].concat(), "invalid_request"),
        (client_id.clone(), [base("code"), vec![("prompt", "sometimes".into())]].concat(), "invalid_request"),
        (client_id.clone(), [base("code"), vec![("id_token_hint", "not.a.token".into())]].concat(), "invalid_request"),
        (client_id.clone(), [base("code"), vec![("nonce", "x".repeat(5000))]].concat(), "invalid_request"),
        (public.clone(), base("code"), "invalid_request"),
    ];
    for (cid, q, expect) in cases {
        let mut query: Vec<(&str, &str)> = vec![("client_id", &cid)];
        query.extend(q.iter().map(|(k, v)| (*k, v.as_str())));
        let (_, page) = b.authorize(&query).await;
        assert_eq!(page.status, 303, "{query:?}: {}", page.html);
        assert!(page.location().starts_with(CB), "{query:?}");
        let mut p = page.redirect_params();
        p.extend(page.fragment_params());
        assert_eq!(param(&p, "error"), Some(expect), "{query:?} -> {p:?}");
        assert!(param(&p, "error_description").is_some_and(|d| !d.is_empty()));
        assert_eq!(param(&p, "iss"), Some(srv.base.as_str()));
        let states = query.iter().filter(|(k, _)| *k == "state").count();
        assert_eq!(param(&p, "state").is_some(), states == 1, "state comes back unless it was ambiguous: {query:?}");
    }
    assert_eq!(srv.count("auth_request").await, 0, "nothing was stored");
    // The description quotes a plain value of the request, never text someone wrote into a link
    // for the client to show in latch's name, and keeps to RFC 6749's characters.
    for (rt, shown) in [
        ("token", Some("the response type 'token' is not supported")),
        ("Call <b>+1 555 0100</b> \"now\"", Some("the response type is not supported")),
        (&*"x".repeat(40), Some("the response type is not supported")),
    ] {
        let (_, page) = b
            .authorize(&[("client_id", &client_id), ("redirect_uri", CB), ("response_type", rt), ("scope", "openid")])
            .await;
        let p = page.redirect_params();
        assert_eq!(param(&p, "error"), Some("unsupported_response_type"));
        assert_eq!(param(&p, "error_description"), shown, "{rt}");
    }
    let (_, page) = b
        .authorize(&[
            ("client_id", &client_id),
            ("redirect_uri", CB),
            ("response_type", "code"),
            ("scope", "openid"),
            ("prompt", "\"quoted\\"),
        ])
        .await;
    let d = param(&page.redirect_params(), "error_description").unwrap().to_string();
    assert_eq!(d, "the prompt value is not supported");
    // The same request from a public client with PKCE is accepted.
    let (id, _) = b
        .authorize(&[
            ("client_id", &public),
            ("redirect_uri", CB),
            ("response_type", "code"),
            ("scope", "openid"),
            ("code_challenge", &challenge),
            ("code_challenge_method", "S256"),
        ])
        .await;
    assert!(id.is_some());
});

fn decode_jwt(token: &str) -> Value {
    use base64::Engine;
    let payload = token.split('.').nth(1).unwrap();
    serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap()
}

on_both!(implicit_flow_and_response_modes, |srv| {
    let (client_id, _, project) = oidc_app(
        srv,
        json!({"name": "spa", "responseTypes": ["OIDC_RESPONSE_TYPE_CODE", "OIDC_RESPONSE_TYPE_ID_TOKEN", "OIDC_RESPONSE_TYPE_ID_TOKEN_TOKEN"],
               "grantTypes": ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_IMPLICIT"]}),
    )
    .await;
    let alice = human(srv, "alice", "Wonder-land1").await;
    let b = Browser::new(srv);
    let q = [
        ("client_id", client_id.as_str()),
        ("redirect_uri", CB),
        ("response_type", "id_token token"),
        ("scope", "openid profile email"),
        ("nonce", "n-1"),
        ("state", "s"),
    ];
    let (id, page) = b.authorize(&q).await;
    let done = b.sign_in(&id.unwrap(), &page, "alice", "Wonder-land1").await;
    assert_eq!(done.status, 303);
    assert!(done.location().contains('#'), "fragment by default");
    let f = done.fragment_params();
    assert_eq!(param(&f, "token_type"), Some("Bearer"));
    assert_eq!(param(&f, "state"), Some("s"));
    assert_eq!(param(&f, "iss"), Some(srv.base.as_str()));
    let at = param(&f, "access_token").unwrap();
    let idt = param(&f, "id_token").unwrap();
    let claims = decode_jwt(idt);
    assert_eq!(claims["sub"], alice.as_str());
    assert_eq!(claims["nonce"], "n-1");
    assert_eq!(claims["iss"], srv.base.as_str());
    assert_eq!(claims["aud"], json!([client_id, project]));
    assert_eq!(claims["azp"], client_id.as_str());
    assert_eq!(claims["at_hash"], latch::oauth::tokens::half_hash(latch::crypto::keys::KeyAlg::RS256, at));
    assert!(claims.get("email").is_none(), "with an access token, profile claims stay out of the ID token");
    // The signature verifies with the published key.
    let jwks: Value = reqwest::get(format!("{}/oauth/v2/keys", srv.base)).await.unwrap().json().await.unwrap();
    let jwk: jsonwebtoken::jwk::Jwk = serde_json::from_value(jwks["keys"][0].clone()).unwrap();
    let mut v = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
    v.set_audience(&[client_id.as_str()]);
    v.set_issuer(&[srv.base.as_str()]);
    jsonwebtoken::decode::<Value>(idt, &jsonwebtoken::DecodingKey::from_jwk(&jwk).unwrap(), &v)
        .expect("signed by latch");

    // id_token alone carries the profile claims.
    let (_, only) = b
        .authorize(&[
            ("client_id", client_id.as_str()),
            ("redirect_uri", CB),
            ("response_type", "id_token"),
            ("scope", "openid profile email"),
            ("nonce", "n-2"),
        ])
        .await;
    let f = only.fragment_params();
    assert!(param(&f, "access_token").is_none());
    assert!(param(&f, "expires_in").is_none());
    assert_eq!(param(&f, "token_type"), Some("Bearer"), "SPEC.md 2.3: every implicit response");
    let claims = decode_jwt(param(&f, "id_token").unwrap());
    assert_eq!(claims["email"], "alice@example.com");
    assert_eq!(claims["preferred_username"], "alice@latch.127.0.0.1");
    assert!(claims.get("at_hash").is_none());
    // Implicit without a nonce is refused; query mode is never used for tokens.
    let (_, r) = b
        .authorize(&[
            ("client_id", client_id.as_str()),
            ("redirect_uri", CB),
            ("response_type", "id_token"),
            ("scope", "openid"),
        ])
        .await;
    assert_eq!(param(&r.fragment_params(), "error"), Some("invalid_request"));
    let (_, r) = b
        .authorize(&[
            ("client_id", client_id.as_str()),
            ("redirect_uri", CB),
            ("response_type", "id_token"),
            ("scope", "openid"),
            ("nonce", "n"),
            ("response_mode", "query"),
        ])
        .await;
    assert!(r.location().contains('#'), "{}", r.location());
    assert!(param(&r.fragment_params(), "id_token").is_some(), "{}", r.location());

    // form_post: a page that posts the parameters, with a hashed script and a no-script button.
    let (_, fp) = b
        .authorize(&[
            ("client_id", client_id.as_str()),
            ("redirect_uri", CB),
            ("response_type", "code"),
            ("scope", "openid"),
            ("state", "fp"),
            ("response_mode", "form_post"),
        ])
        .await;
    assert_eq!(fp.status, 200, "{}", fp.html);
    assert!(fp.html.contains("<form method=\"post\" action=\"https://app.example.com/cb\">"), "{}", fp.html);
    assert!(crate::browser::field(&fp.html, "code").is_some());
    assert_eq!(crate::browser::field(&fp.html, "state").as_deref(), Some("fp"));
    assert!(crate::browser::field(&fp.html, "iss").is_some());
    assert!(fp.html.contains("<noscript>"));
    let csp = fp.header("content-security-policy").unwrap();
    assert!(csp.contains("script-src 'sha256-") && csp.contains("form-action https://app.example.com"), "{csp}");
    // An invalid response_mode is ignored.
    let (_, r) = b
        .authorize(&[
            ("client_id", client_id.as_str()),
            ("redirect_uri", CB),
            ("response_type", "code"),
            ("scope", "openid"),
            ("response_mode", "carrier_pigeon"),
        ])
        .await;
    assert!(param(&r.redirect_params(), "code").is_some());
});

on_both!(hints_select_the_session, |srv| {
    let (client_id, _, _) = oidc_app(
        srv,
        json!({"responseTypes": ["OIDC_RESPONSE_TYPE_CODE", "OIDC_RESPONSE_TYPE_ID_TOKEN"], "grantTypes": ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_IMPLICIT"]}),
    )
    .await;
    human(srv, "alice", "Wonder-land1").await;
    let bob = human(srv, "bob", "Builder-b0b!").await;
    let b = Browser::new(srv);
    let q = |extra: Vec<(&'static str, String)>| {
        let mut v: Vec<(&'static str, String)> = vec![
            ("client_id", client_id.clone()),
            ("redirect_uri", CB.into()),
            ("response_type", "id_token".into()),
            ("scope", "openid".into()),
            ("nonce", "n".into()),
        ];
        v.extend(extra);
        v
    };
    for (name, pw) in [("alice", "Wonder-land1"), ("bob", "Builder-b0b!")] {
        let qq = q(vec![("prompt", "login".into())]);
        let (id, page) = b.authorize(&pairs(&qq)).await;
        let done = b.sign_in(&id.unwrap(), &page, name, pw).await;
        assert_eq!(done.status, 303);
    }
    assert_eq!(srv.count("session").await, 2, "two users in one browser");
    // Without a hint, the person chooses.
    let qq = q(vec![]);
    let (id, page) = b.authorize(&pairs(&qq)).await;
    assert!(id.is_some() && page.html.contains("alice@") && page.html.contains("bob@"), "{}", page.html);
    // prompt=none cannot choose.
    let qq = q(vec![("prompt", "none".into())]);
    let (_, r) = b.authorize(&pairs(&qq)).await;
    assert_eq!(param(&r.fragment_params(), "error"), Some("interaction_required"));
    // login_hint picks bob.
    let qq = q(vec![("prompt", "none".into()), ("login_hint", "bob".into())]);
    let (_, r) = b.authorize(&pairs(&qq)).await;
    let f = r.fragment_params();
    let idt = param(&f, "id_token").expect("answered at once").to_string();
    let claims = {
        use base64::Engine;
        let v: Value = serde_json::from_slice(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(idt.split('.').nth(1).unwrap()).unwrap(),
        )
        .unwrap();
        v
    };
    assert_eq!(claims["sub"], bob.as_str());
    // id_token_hint picks the same subject.
    let qq = q(vec![("prompt", "none".into()), ("id_token_hint", idt.clone())]);
    let (_, r) = b.authorize(&pairs(&qq)).await;
    assert!(param(&r.fragment_params(), "id_token").is_some());
    // An address picks its human too, unless the login policy's disableLoginWithEmail says no.
    let qq = q(vec![("prompt", "none".into()), ("login_hint", "bob@example.com".into())]);
    let (_, r) = b.authorize(&pairs(&qq)).await;
    assert!(param(&r.fragment_params(), "id_token").is_some(), "{:?}", r.location);
    srv.put("/admin/v1/policies/login", json!({"disableLoginWithEmail": true})).await.ok();
    let (_, r) = b.authorize(&pairs(&qq)).await;
    assert_eq!(param(&r.fragment_params(), "error"), Some("login_required"), "{:?}", r.location);
    srv.put("/admin/v1/policies/login", json!({})).await.ok();
    // A hint for someone without a session: login_required.
    let qq = q(vec![("prompt", "none".into()), ("login_hint", "carol".into())]);
    let (_, r) = b.authorize(&pairs(&qq)).await;
    assert_eq!(param(&r.fragment_params(), "error"), Some("login_required"));
    // select_account lists the sessions and offers another account.
    let qq = q(vec![("prompt", "select_account".into())]);
    let (id, page) = b.authorize(&pairs(&qq)).await;
    let id = id.unwrap();
    assert!(page.html.contains("/other"));
    let bob_session = crate::browser::field(&page.html, "session").unwrap();
    let chosen = b.post(&format!("/ui/login/{id}/select"), &[("csrf", &page.csrf()), ("session", &bob_session)]).await;
    assert_eq!(chosen.status, 303, "{}", chosen.html);
    assert!(param(&chosen.fragment_params(), "id_token").is_some());
    // With select_account a login_hint preselects its account: listed first, with the focus.
    for hint in ["ALICE", "bob"] {
        let qq = q(vec![("prompt", "select_account".into()), ("login_hint", hint.into())]);
        let (_, page) = b.authorize(&pairs(&qq)).await;
        let at = |s: &str| page.html.find(s).unwrap_or_else(|| panic!("{s} in {}", page.html));
        let (named, other) = if hint == "ALICE" { ("alice@", "bob@") } else { ("bob@", "alice@") };
        assert!(at("class=\"account\" autofocus") < at(named) && at(named) < at(other), "{}", page.html);
        assert_eq!(page.html.matches("autofocus").count(), 1, "{}", page.html);
    }
});

fn pairs<'a>(v: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    v.iter().map(|(k, s)| (*k, s.as_str())).collect()
}

on_both!(no_cors_on_authorize_login_pages_and_end_session, |srv| {
    // Navigations only (RFC 9700 2.6): no other origin may read these answers, so none of them
    // carries CORS headers, for a request or a preflight (the CORS endpoints are in cors.rs).
    let (client_id, _, _) = oidc_app(srv, json!({})).await;
    let (_, challenge) = pkce();
    let b = Browser::new(srv);
    let (id, page) = b.authorize(&code_query(&client_id, &challenge)).await;
    let id = id.expect("a pending request");
    let csrf = page.csrf();
    let login_page = format!("/ui/login/{id}");
    let loginname = format!("/ui/login/{id}/loginname");
    let query =
        form_urlencoded::Serializer::new(String::new()).extend_pairs(code_query(&client_id, &challenge)).finish();
    let authorize = format!("/oauth/v2/authorize?{query}");
    let origin = [("origin", "https://app.example.com"), ("access-control-request-method", "POST")];
    for (method, path) in [
        ("GET", authorize.as_str()),
        ("POST", "/oauth/v2/authorize"),
        ("OPTIONS", authorize.as_str()),
        ("GET", login_page.as_str()),
        ("OPTIONS", login_page.as_str()),
        ("POST", loginname.as_str()),
        ("OPTIONS", loginname.as_str()),
        ("GET", "/oidc/v1/end_session"),
        ("OPTIONS", "/oidc/v1/end_session"),
    ] {
        let r = srv.send(method, path, None, &origin, None).await;
        assert!(r.status != 500, "{method} {path}: {}", r.text);
        for h in ["access-control-allow-origin", "access-control-allow-methods", "access-control-allow-credentials"] {
            assert!(r.header(h).is_none(), "{method} {path} sent {h}: {:?}", r.headers);
        }
    }
    // The pending request is still usable: nothing above consumed it.
    let p = b.post(&loginname, &[("csrf", &csrf), ("loginname", "nobody-here")]).await;
    assert_eq!(p.status, 200, "{}", p.html);
});

on_both!(a_projects_checks_turn_users_away, |srv| {
    let (client_id, _, project) = oidc_app(
        srv,
        json!({"responseTypes": ["OIDC_RESPONSE_TYPE_CODE", "OIDC_RESPONSE_TYPE_ID_TOKEN"],
               "grantTypes": ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_IMPLICIT"]}),
    )
    .await;
    let alice = human(srv, "alice", "Wonder-land1").await;
    let checks = json!({"name": "checked", "projectRoleCheck": true, "hasProjectCheck": true});
    srv.put(&format!("/management/v1/projects/{project}"), checks).await.ok();
    let (_, challenge) = pkce();
    let sign_in = |b: Browser| {
        let client_id = client_id.clone();
        let challenge = challenge.clone();
        async move {
            let (id, page) = b.authorize(&code_query(&client_id, &challenge)).await;
            let done = b.sign_in(&id.expect("a login page"), &page, "alice", "Wonder-land1").await;
            assert_eq!(done.status, 303, "{}", done.html);
            (b, done.redirect_params())
        }
    };
    // projectRoleCheck: no grant on the project, no code; nothing is left behind.
    let (_, p) = sign_in(Browser::new(srv)).await;
    assert_eq!(param(&p, "error"), Some("access_denied"), "{p:?}");
    assert!(param(&p, "error_description").unwrap().contains("authorization"), "{p:?}");
    assert_eq!(param(&p, "state"), Some("st-123"));
    assert_eq!(param(&p, "iss"), Some(srv.base.as_str()));
    assert!(param(&p, "code").is_none());
    for table in ["auth_code", "auth_request", "session"] {
        assert_eq!(srv.count(table).await, 0, "{table}");
    }
    // The implicit flow the same way: no session is stored for the user turned away.
    let b = Browser::new(srv);
    let q = [
        ("client_id", client_id.as_str()),
        ("redirect_uri", CB),
        ("response_type", "id_token"),
        ("scope", "openid"),
        ("nonce", "n"),
        ("state", "s"),
    ];
    let (id, page) = b.authorize(&q).await;
    let done = b.sign_in(&id.expect("a login page"), &page, "alice", "Wonder-land1").await;
    let f = done.fragment_params();
    assert_eq!(param(&f, "error"), Some("access_denied"), "{} {}", done.location(), done.html);
    assert!(param(&f, "id_token").is_none());
    for table in ["auth_request", "session"] {
        assert_eq!(srv.count(table).await, 0, "{table}");
    }
    // A grant (with no role) lets her in.
    let grant = srv.post(&format!("/management/v1/users/{alice}/grants"), json!({"projectId": project})).await;
    let grant = grant.ok()["userGrantId"].as_str().unwrap().to_string();
    let (b, p) = sign_in(Browser::new(srv)).await;
    assert!(param(&p, "code").is_some(), "{p:?}");
    // Without it, single sign-on (prompt=none too) is refused the same way.
    srv.delete(&format!("/management/v1/users/{alice}/grants/{grant}")).await.ok();
    let mut q = code_query(&client_id, &challenge);
    q.push(("prompt", "none"));
    let (_, r) = b.authorize(&q).await;
    let p = r.redirect_params();
    assert_eq!(param(&p, "error"), Some("access_denied"), "{p:?}");
    assert!(param(&p, "code").is_none());

    // hasProjectCheck: a user of another organization is refused even with roleCheck off.
    let checks = json!({"name": "checked", "projectRoleCheck": false, "hasProjectCheck": true});
    srv.put(&format!("/management/v1/projects/{project}"), checks).await.ok();
    let (_, r) = b.authorize(&q).await;
    assert!(param(&r.redirect_params(), "code").is_some(), "her own organization's project");
    let other =
        srv.post("/management/v1/orgs", json!({"name": "Elsewhere"})).await.ok()["id"].as_str().unwrap().to_string();
    let body = json!({"userName": "oscar", "profile": {"firstName": "Oscar", "lastName": "Other"},
                      "email": {"email": "oscar@example.com", "isEmailVerified": true}});
    let r = srv.call_as(Some(&srv.pat), Some(&other), "POST", "/management/v1/users/human", body).await;
    let oscar = r.ok()["userId"].as_str().unwrap().to_string();
    let password = json!({"password": "Oscar-Passw0rd", "noChangeRequired": true});
    srv.call_as(Some(&srv.pat), Some(&other), "POST", &format!("/management/v1/users/{oscar}/password"), password)
        .await
        .ok();
    let b = Browser::new(srv);
    let (id, page) = b.authorize(&code_query(&client_id, &challenge)).await;
    let done = b.sign_in(&id.expect("a login page"), &page, "oscar", "Oscar-Passw0rd").await;
    let p = done.redirect_params();
    assert_eq!(param(&p, "error"), Some("access_denied"), "{p:?} {}", done.html);
    assert!(param(&p, "error_description").unwrap().contains("organization"), "{p:?}");
    // With the check off, the same user gets a code.
    let checks = json!({"name": "checked", "projectRoleCheck": false, "hasProjectCheck": false});
    srv.put(&format!("/management/v1/projects/{project}"), checks).await.ok();
    let b = Browser::new(srv);
    let (id, page) = b.authorize(&code_query(&client_id, &challenge)).await;
    let done = b.sign_in(&id.expect("a login page"), &page, "oscar", "Oscar-Passw0rd").await;
    assert!(param(&done.redirect_params(), "code").is_some(), "{}", done.html);

    // An organization scope asks for a user of that organization: another one's user is turned
    // away, signing in or with a session (prompt=none), the organization's own is not.
    let home = srv.get("/management/v1/orgs/me").await.ok()["org"]["id"].as_str().unwrap().to_string();
    let for_org = |org: &str, prompt_none: bool| -> Vec<(&'static str, String)> {
        let mut q = vec![
            ("client_id", client_id.clone()),
            ("redirect_uri", CB.to_string()),
            ("response_type", "code".to_string()),
            ("scope", format!("openid urn:service:iam:org:id:{org}")),
            ("code_challenge", challenge.clone()),
            ("code_challenge_method", "S256".to_string()),
        ];
        if prompt_none {
            q.push(("prompt", "none".to_string()));
        }
        q
    };
    let (_, r) = b.authorize(&pairs(&for_org(&home, true))).await;
    assert_eq!(param(&r.redirect_params(), "error"), Some("access_denied"), "{:?}", r.location);
    let (_, r) = b.authorize(&pairs(&for_org(&other, true))).await;
    assert!(param(&r.redirect_params(), "code").is_some(), "{:?}", r.location);
    // Without prompt=none, oscar's session does not answer a request for the other
    // organization: the login page does, to sign in as someone of it.
    let (id, page) = b.authorize(&pairs(&for_org(&home, false))).await;
    assert!(id.is_some() && page.html.contains("name=\"loginname\""), "a login page: {}", page.html);
    // Nor when the session is too old for max_age: not oscar's password page either.
    let mut q = for_org(&home, false);
    q.push(("max_age", "0".to_string()));
    srv.clock.advance(5);
    let (id, page) = b.authorize(&pairs(&q)).await;
    assert!(id.is_some() && page.html.contains("name=\"loginname\""), "the login name page: {}", page.html);
    // The primary domain's scope is compared as domains are, whatever its case.
    let domain = srv.get("/management/v1/orgs/me").await.ok()["org"]["primaryDomain"].as_str().unwrap().to_uppercase();
    let mut q = for_org(&home, false);
    q.iter_mut()
        .filter(|(k, _)| *k == "scope")
        .for_each(|(_, v)| *v = format!("openid urn:service:iam:org:domain:primary:{domain}"));
    let b2 = Browser::new(srv);
    let (id, page) = b2.authorize(&pairs(&q)).await;
    let done = b2.sign_in(&id.expect("a login page"), &page, "alice", "Wonder-land1").await;
    assert!(param(&done.redirect_params(), "code").is_some(), "{:?}", done.location);
    for (user, password, want_code) in [("oscar", "Oscar-Passw0rd", false), ("alice", "Wonder-land1", true)] {
        let b = Browser::new(srv);
        let (id, page) = b.authorize(&pairs(&for_org(&home, false))).await;
        let done = b.sign_in(&id.expect("a login page"), &page, user, password).await;
        let p = done.redirect_params();
        assert_eq!(param(&p, "code").is_some(), want_code, "{user}: {p:?}");
        if !want_code {
            assert_eq!(param(&p, "error"), Some("access_denied"), "{p:?}");
        }
    }
});

// A redirect URI removed from the application while a sign-in is under way receives nothing:
// each sign-in page checks it again, as a new request would be checked.
on_both!(a_redirect_uri_removed_during_a_sign_in_receives_nothing, |srv| {
    human(srv, "alice", "Wonder-land1").await;
    let (client_id, _, project) = oidc_app(srv, json!({})).await;
    let app_id = crate::browser::app_id_of(srv, &client_id).await;
    let b = Browser::new(srv);
    let (_, challenge) = pkce();
    let (id, page) = b.authorize(&code_query(&client_id, &challenge)).await;
    let id = id.expect("a login page");
    let config = format!("/management/v1/projects/{project}/apps/{app_id}/oidc_config");
    let update = json!({"redirectUris": ["https://app.example.com/elsewhere"],
                        "responseTypes": ["OIDC_RESPONSE_TYPE_CODE"],
                        "grantTypes": ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE"],
                        "authMethodType": "OIDC_AUTH_METHOD_TYPE_BASIC"});
    srv.put(&config, update).await.ok();
    let p = b.post(&format!("/ui/login/{id}/loginname"), &[("csrf", &page.csrf()), ("loginname", "alice")]).await;
    assert_eq!(p.status, 400, "{}", p.html);
    assert!(p.html.contains("is not registered for this application"), "{}", p.html);
    assert!(p.location.is_none());
    assert_eq!(srv.count("auth_code").await, 0);
    assert_eq!(srv.count("session").await, 0);
});

// An administrator's lock (and unlock) that lands while a sign-in's password is being checked
// ends what that sign-in issues through the implicit flow, as it ends everything issued before
// it: the tokens are dated when the flow read the user, not when they were signed. (The code
// flow's exchange checks the sign-in's time itself.) A slow hash leaves the time to act.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn implicit_tokens_of_a_sign_in_a_lock_overtook_end_with_it() {
    let srv = crate::harness::TestServer::start_with(crate::harness::Backend::Sqlite, |c| {
        c.password.argon2_memory_kib = 131_072;
        c.password.argon2_iterations = 5;
    })
    .await;
    {
        let srv = &srv;
        let implicit =
            json!({"responseTypes": ["OIDC_RESPONSE_TYPE_ID_TOKEN_TOKEN"], "grantTypes": ["OIDC_GRANT_TYPE_IMPLICIT"]});
        let (client_id, _, _) = oidc_app(srv, implicit).await;
        let alice = human(srv, "alice", "Wonder-land1").await;
        let b = Browser::new(srv);
        let q = [
            ("client_id", client_id.as_str()),
            ("redirect_uri", CB),
            ("response_type", "id_token token"),
            ("scope", "openid"),
            ("nonce", "n-1"),
        ];
        let (id, page) = b.authorize(&q).await;
        let id = id.unwrap();
        let named =
            b.post(&format!("/ui/login/{id}/loginname"), &[("csrf", &page.csrf()), ("loginname", "alice")]).await;
        let csrf = named.csrf();
        let posted = tokio::spawn(async move {
            b.post(&format!("/ui/login/{id}/password"), &[("csrf", csrf.as_str()), ("password", "Wonder-land1")]).await
        });
        // The flow has read alice and waits for the hash: a lock and an unlock land meanwhile.
        tokio::time::sleep(std::time::Duration::from_millis(150)).await;
        srv.clock.advance(5);
        srv.post(&format!("/management/v1/users/{alice}/_lock"), json!({})).await.ok();
        srv.post(&format!("/management/v1/users/{alice}/_unlock"), json!({})).await.ok();
        assert!(!posted.is_finished(), "the hash outlasted the lock (slow parameters)");
        let done = posted.await.unwrap();
        assert_eq!(done.status, 303, "{}", done.html);
        let f = done.fragment_params();
        let at = param(&f, "access_token").expect("implicit tokens").to_string();
        let r = reqwest::Client::new().get(srv.url("/oidc/v1/userinfo")).bearer_auth(&at).send().await.unwrap();
        assert_eq!(r.status(), 401, "the lock's cut-off ends the token of the sign-in it overtook");
        // A sign-in after the lock is good.
        let b2 = Browser::new(srv);
        let (id, page) = b2.authorize(&q).await;
        let done = b2.sign_in(&id.unwrap(), &page, "alice", "Wonder-land1").await;
        let f = done.fragment_params();
        let at = param(&f, "access_token").unwrap().to_string();
        let r = reqwest::Client::new().get(srv.url("/oidc/v1/userinfo")).bearer_auth(&at).send().await.unwrap();
        assert_eq!(r.status(), 200);
    }
    srv.stop().await;
}
