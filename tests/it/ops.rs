//! Discovery, the key set, health, readiness, metrics and the request id.

use serde_json::json;

use crate::on_both;

on_both!(discovery_document, |srv| {
    let r = srv.call_as(None, None, "GET", "/.well-known/openid-configuration", json!(null)).await;
    let d = r.ok();
    assert_eq!(d["issuer"], srv.base.as_str(), "issuer equals the external URL");
    assert_eq!(r.header("content-type"), Some("application/json"));
    for (field, path) in [
        ("authorization_endpoint", "/oauth/v2/authorize"),
        ("token_endpoint", "/oauth/v2/token"),
        ("introspection_endpoint", "/oauth/v2/introspect"),
        ("userinfo_endpoint", "/oidc/v1/userinfo"),
        ("revocation_endpoint", "/oauth/v2/revoke"),
        ("end_session_endpoint", "/oidc/v1/end_session"),
        ("jwks_uri", "/oauth/v2/keys"),
    ] {
        assert_eq!(d[field], format!("{}{path}", srv.base), "{field}");
    }
    assert!(d.get("device_authorization_endpoint").is_none());
    assert_eq!(d["code_challenge_methods_supported"], json!(["S256"]));
    assert!(d["id_token_signing_alg_values_supported"].as_array().unwrap().contains(&json!("RS256")));
    assert_eq!(d["response_types_supported"], json!(["code", "id_token", "id_token token"]));
    assert_eq!(d["response_modes_supported"], json!(["query", "fragment", "form_post"]));
    assert_eq!(d["subject_types_supported"], json!(["public"]));
    assert_eq!(
        d["token_endpoint_auth_methods_supported"],
        json!(["none", "client_secret_basic", "client_secret_post", "private_key_jwt"])
    );
    assert_eq!(d["introspection_endpoint_auth_methods_supported"], json!(["client_secret_basic", "private_key_jwt"]));
    assert_eq!(
        d["revocation_endpoint_auth_methods_supported"],
        json!(["none", "client_secret_basic", "client_secret_post", "private_key_jwt"])
    );
    assert!(d["scopes_supported"].as_array().unwrap().contains(&json!("openid")));
    assert_eq!(d["request_uri_parameter_supported"], json!(false));
    assert_eq!(d["authorization_response_iss_parameter_supported"], json!(true));
    // Request objects are not taken, so no algorithms for them are named.
    assert_eq!(d["request_parameter_supported"], json!(false));
    assert!(d.get("request_object_signing_alg_values_supported").is_none());
    // Back-channel logout and token exchange are advertised only while the instance has them on.
    let grants = |d: &serde_json::Value| d["grant_types_supported"].as_array().unwrap().clone();
    assert!(d.get("backchannel_logout_supported").is_none() && d.get("backchannel_logout_session_supported").is_none());
    assert!(!grants(d).contains(&json!("urn:ietf:params:oauth:grant-type:token-exchange")));
    assert!(grants(d).contains(&json!("urn:ietf:params:oauth:grant-type:jwt-bearer")));
    srv.put("/v2/features/instance", json!({"enableBackChannelLogout": true, "oidcTokenExchange": true})).await.ok();
    let d = srv.call_as(None, None, "GET", "/.well-known/openid-configuration", json!(null)).await.ok().clone();
    assert_eq!(d["backchannel_logout_supported"], json!(true));
    assert_eq!(d["backchannel_logout_session_supported"], json!(true));
    assert!(grants(&d).contains(&json!("urn:ietf:params:oauth:grant-type:token-exchange")));
    srv.put("/v2/features/instance", json!({"enableBackChannelLogout": false})).await.ok();
    let d = srv.call_as(None, None, "GET", "/.well-known/openid-configuration", json!(null)).await.ok().clone();
    assert!(d.get("backchannel_logout_supported").is_none());
    assert!(grants(&d).contains(&json!("urn:ietf:params:oauth:grant-type:token-exchange")));
});

on_both!(key_set_publishes_only_public_keys, |srv| {
    let r = srv.call_as(None, None, "GET", "/oauth/v2/keys", json!(null)).await;
    let keys = r.ok()["keys"].as_array().unwrap().clone();
    assert_eq!(keys.len(), 1, "one key after the first start");
    let k = &keys[0];
    assert_eq!(k["kty"], "RSA");
    assert_eq!(k["alg"], "RS256");
    assert_eq!(k["use"], "sig");
    assert!(k["kid"].as_str().is_some_and(|s| !s.is_empty()));
    for private in ["d", "p", "q", "dp", "dq", "qi", "k"] {
        assert!(k.get(private).is_none(), "no private member {private}");
    }
    // A 2048-bit modulus is 256 bytes: 342 base64url characters.
    assert_eq!(k["n"].as_str().unwrap().len(), 342);
    let cc = r.header("cache-control").unwrap();
    let max_age: i64 = cc.split("max-age=").nth(1).unwrap().parse().unwrap();
    assert!(max_age > 0 && max_age < srv.settings.keys.prepublish, "max-age {max_age} below the pre-publication time");
});

on_both!(health_readiness_metrics_and_request_ids, |srv| {
    let r = srv.call_as(None, None, "GET", "/healthz", json!(null)).await;
    assert_eq!(r.ok()["status"], "ok");
    let r = srv.call_as(None, None, "GET", "/readyz", json!(null)).await;
    assert_eq!(r.ok()["status"], "ready");
    let id = r.header("x-request-id").expect("a request id").to_string();
    assert_eq!(id.len(), 36, "a UUID: {id}");
    let again = srv.call_as(None, None, "GET", "/readyz", json!(null)).await;
    assert_ne!(again.header("x-request-id"), Some(id.as_str()), "ids differ per request");
    let given = srv.send("GET", "/healthz", None, &[("x-request-id", "my-trace-1")], None).await;
    assert_eq!(given.header("x-request-id"), Some("my-trace-1"), "a caller's id is kept");

    // A method of the client's own making is counted as "other", not as a label of its own
    // (each distinct label would be kept for the life of the process).
    let brew = srv.send("BREWCOFFEE", "/healthz", None, &[], None).await;
    assert_ne!(brew.status, 200);
    let m = srv.call_as(None, None, "GET", "/metrics", json!(null)).await;
    assert_eq!(m.status, 200);
    assert!(!m.text.contains("BREWCOFFEE"), "{}", m.text);
    assert!(m.text.contains("method=\"other\""), "{}", m.text);
    assert!(m.text.contains("http_requests_total{"), "{}", m.text);
    assert!(m.text.contains("route=\"/readyz\""), "{}", m.text);
    assert!(m.text.contains("http_request_duration_seconds_bucket"), "latency histogram");
    assert!(m.text.contains("db_pool_connections"), "pool usage");

    srv.state.db.close().await;
    let r = srv.call_as(None, None, "GET", "/readyz", json!(null)).await;
    assert_eq!(r.status, 503, "not ready without the store");
    assert_eq!(r.body["store"], "unavailable");
});

on_both!(unknown_routes_and_methods, |srv| {
    let r = srv.call_as(None, None, "GET", "/management/v1/nothing-here", json!(null)).await;
    assert_eq!(r.err(404, 5), "Not Found");
    let r = srv.call_as(None, None, "GET", "/no/such/path", json!(null)).await;
    r.err(404, 5);
    let r = srv.call_as(Some(&srv.pat), None, "PUT", "/management/v1/orgs/me/domains", json!({})).await;
    r.err(405, 12);
});
