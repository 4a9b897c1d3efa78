//! CORS for browser-based applications: discovery and the key set for any origin (`*`); token,
//! introspection, revocation and userinfo reflect the origin, without credentials. (That the
//! authorization endpoint, the login pages and end session send none is in authorize.rs.)

use crate::harness::{Resp, TestServer};
use crate::on_both;

const SPA: &str = "https://spa.example.com";

async fn preflight(srv: &TestServer, path: &str, method: &str) -> Resp {
    srv.send(
        "OPTIONS",
        path,
        None,
        &[
            ("origin", SPA),
            ("access-control-request-method", method),
            ("access-control-request-headers", "authorization,content-type"),
        ],
        None,
    )
    .await
}

/// The comma-separated values of a header, lower-cased.
fn list(r: &Resp, name: &str) -> Vec<String> {
    r.headers
        .get_all(name)
        .iter()
        .flat_map(|v| v.to_str().unwrap_or("").split(','))
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .collect()
}

on_both!(cors_for_single_page_apps, |srv| {
    // Public documents: any origin, GET.
    for path in [latch::paths::DISCOVERY, latch::paths::KEYS] {
        let r = srv.send("GET", path, None, &[("origin", SPA)], None).await;
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.header("access-control-allow-origin"), Some("*"), "{path}");
        let p = preflight(srv, path, "GET").await;
        assert_eq!(p.status, 200, "{path}: {}", p.text);
        assert_eq!(p.header("access-control-allow-origin"), Some("*"), "{path}");
        assert!(list(&p, "access-control-allow-methods").contains(&"get".to_string()), "{path}: {:?}", p.headers);
    }

    // The endpoints a single-page app calls: the origin reflected, methods and headers allowed,
    // no credentials, and Vary: Origin so caches keep the answers apart.
    for (path, method) in [
        (latch::paths::TOKEN, "POST"),
        (latch::paths::INTROSPECT, "POST"),
        (latch::paths::REVOKE, "POST"),
        (latch::paths::USERINFO, "GET"),
        (latch::paths::USERINFO, "POST"),
    ] {
        let p = preflight(srv, path, method).await;
        assert_eq!(p.status, 200, "{path}: {}", p.text);
        assert_eq!(p.header("access-control-allow-origin"), Some(SPA), "{path}");
        assert!(list(&p, "access-control-allow-methods").contains(&method.to_ascii_lowercase()), "{path}");
        let headers = list(&p, "access-control-allow-headers");
        assert!(headers.contains(&"authorization".into()) && headers.contains(&"content-type".into()), "{path}");
        assert!(p.header("access-control-allow-credentials").is_none(), "{path}: no credentials");
        assert!(p.header("access-control-max-age").is_some(), "{path}");
        assert!(list(&p, "vary").contains(&"origin".into()), "{path}: {:?}", p.headers);
    }

    // The answers themselves carry it too, errors included, so the app can read the error.
    let r = srv
        .send(
            "POST",
            latch::paths::TOKEN,
            None,
            &[("origin", SPA), ("content-type", "application/x-www-form-urlencoded")],
            Some("grant_type=authorization_code&code=nope&client_id=nobody".into()),
        )
        .await;
    assert!(r.status == 400 || r.status == 401, "{}", r.text);
    assert!(r.body["error"].is_string(), "{}", r.text);
    assert_eq!(r.header("access-control-allow-origin"), Some(SPA));
    let r = srv.send("GET", latch::paths::USERINFO, Some("not-a-token"), &[("origin", SPA)], None).await;
    assert_eq!(r.status, 401);
    assert_eq!(r.header("access-control-allow-origin"), Some(SPA));
    assert!(list(&r, "access-control-expose-headers").contains(&"www-authenticate".into()), "{:?}", r.headers);

    // Without an Origin (a server-side client) nothing changes.
    let r = srv.send("GET", latch::paths::USERINFO, Some("not-a-token"), &[], None).await;
    assert_eq!(r.status, 401);
    assert!(r.header("access-control-allow-origin").is_none());
    // The management API is not for browsers of other origins.
    let r = srv.send("GET", "/management/v1/orgs/me", Some(&srv.pat), &[("origin", SPA)], None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.header("access-control-allow-origin").is_none());
});
