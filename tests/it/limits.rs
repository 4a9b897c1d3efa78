//! Limits against abuse: rate budgets per IP, login name and client (429 with `Retry-After`),
//! body, header and field-count limits, and slow clients. The budgets live in each replica's
//! memory, so these tests run on one store.

use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::browser::{Browser, human};
use crate::harness::{Backend, TestServer};
use crate::token::token;

async fn with_limits(adjust: impl FnOnce(&mut latch::config::LimitsConfig)) -> TestServer {
    TestServer::start_with(Backend::Sqlite, |c| adjust(&mut c.limits)).await
}

fn retry_after(h: &reqwest::header::HeaderMap) -> u64 {
    h.get("retry-after").expect("Retry-After").to_str().unwrap().parse().expect("seconds")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_endpoint_has_a_budget_per_ip_and_per_client() {
    let srv = with_limits(|l| {
        l.token_per_ip = "30/1m".into();
        l.per_client = "3/1m".into();
    })
    .await;
    let id = srv.post("/management/v1/users/machine", json!({"userName": "robot", "name": "robot"})).await;
    let id = id.ok()["userId"].as_str().unwrap().to_string();
    let s = srv.put(&format!("/management/v1/users/{id}/secret"), json!({})).await;
    let secret = s.ok()["clientSecret"].as_str().unwrap().to_string();
    let cc = [("grant_type", "client_credentials")];

    // Failed authentications under the robot's name do not spend the robot's budget: nobody
    // can lock a client out by knowing its id.
    for _ in 0..5 {
        token(&srv, Some(("robot", "wrong")), &cc).await.err(401, "invalid_client");
    }
    for _ in 0..3 {
        token(&srv, Some(("robot", &secret)), &cc).await.ok();
    }
    let limited = token(&srv, Some(("robot", &secret)), &cc).await;
    limited.err(429, "temporarily_unavailable");
    let wait = retry_after(&limited.headers);
    assert!((1..=20).contains(&wait), "Retry-After {wait}");
    assert_eq!(limited.headers.get("cache-control").unwrap(), "no-store");

    // The IP budget: 30 per minute for everything posted to the token endpoint from here,
    // whatever the client; a forged X-Forwarded-For does not escape it (no proxy is trusted).
    let mut statuses = Vec::new();
    for _ in 0..30 {
        statuses.push(token(&srv, Some(("nobody", "x")), &cc).await.status);
    }
    let first_429 = statuses.iter().position(|s| *s == 429).expect("the IP budget runs out");
    assert!(first_429 >= 30 - 9 - 1, "429 came too early: {statuses:?}");
    let forged = reqwest::Client::new()
        .post(srv.url("/oauth/v2/token"))
        .header("x-forwarded-for", "203.0.113.9")
        .form(&cc)
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 429);
    assert!(forged.headers().contains_key("retry-after"));
    let body: serde_json::Value = forged.json().await.unwrap();
    assert_eq!(body["error"], "temporarily_unavailable");

    // Other endpoints are not affected.
    assert_eq!(srv.get("/.well-known/openid-configuration").await.status, 200);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_public_clients_budget_cannot_be_spent_by_others() {
    let srv = with_limits(|l| {
        l.token_per_ip = "10/1m".into();
        l.per_client = "3/1m".into();
    })
    .await;
    let spa =
        json!({"name": "spa", "authMethodType": "OIDC_AUTH_METHOD_TYPE_NONE", "appType": "OIDC_APP_TYPE_USER_AGENT"});
    let (spa, _, _) = crate::browser::oidc_app(&srv, spa).await;
    let revoke = || async {
        let r = reqwest::Client::new()
            .post(srv.url("/oauth/v2/revoke"))
            .form(&[("client_id", spa.as_str()), ("token", "anything")])
            .send()
            .await
            .unwrap();
        r.status().as_u16()
    };
    // Anyone may name a public client; doing so spends no budget of the client's own, so its
    // users' token requests still get their answers ...
    for _ in 0..5 {
        assert_eq!(revoke().await, 200);
    }
    let refresh = [("grant_type", "refresh_token"), ("client_id", spa.as_str()), ("refresh_token", "nope")];
    token(&srv, None, &refresh).await.err(400, "invalid_grant");
    // ... while revocation posts count toward the token endpoint's budget per IP.
    let mut statuses = Vec::new();
    for _ in 0..10 {
        statuses.push(revoke().await);
    }
    let first_429 = statuses.iter().position(|s| *s == 429).expect("the IP budget runs out");
    assert!(first_429 >= 10 - 6 - 1, "429 came too early: {statuses:?}");
    srv.stop().await;
}

// Each authorization request stores a pending sign-in for its lifetime (30 minutes): one IP gets
// a budget of them, so that no single client can fill the store with requests nobody finishes.
// Past it: 429 with Retry-After on an error page, and nothing stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorization_requests_are_limited_per_ip() {
    let srv = with_limits(|l| l.authorize_per_ip = "5/1m".into()).await;
    let (client_id, _, _) = crate::browser::oidc_app(&srv, json!({})).await;
    let (_, challenge) = crate::browser::pkce();
    let query = form_urlencoded::Serializer::new(String::new())
        .extend_pairs([
            ("client_id", client_id.as_str()),
            ("redirect_uri", "https://app.example.com/cb"),
            ("response_type", "code"),
            ("scope", "openid"),
            ("code_challenge", challenge.as_str()),
            ("code_challenge_method", "S256"),
            ("ui_locales", "de"),
        ])
        .finish();
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let mut statuses = Vec::new();
    for _ in 0..8 {
        let r = http.get(srv.url(&format!("/oauth/v2/authorize?{query}"))).send().await.unwrap();
        statuses.push(r.status().as_u16());
        if r.status() == 429 {
            assert!(retry_after(r.headers()) >= 1);
            assert!(r.headers()["content-type"].to_str().unwrap().starts_with("text/html"));
            // In the language the request asks for.
            assert!(r.text().await.unwrap().contains("lang=\"de\""));
        }
    }
    let first_429 = statuses.iter().position(|s| *s == 429).expect("the IP budget runs out");
    assert!(first_429 >= 4 && statuses[..first_429].iter().all(|s| *s == 303), "{statuses:?}");
    assert_eq!(srv.count("auth_request").await, first_429 as i64, "a refused request stores nothing");
    srv.stop().await;
}

// A browser application's CORS preflights draw on no budget, and the budget's refusal carries the
// CORS headers the endpoint's other answers carry, so the application reads the 429 and its wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_application_sees_the_token_budget_and_its_preflights_spend_none() {
    let srv = with_limits(|l| l.token_per_ip = "2/1m".into()).await;
    let http = reqwest::Client::new();
    let origin = "https://spa.example.com";
    for _ in 0..4 {
        let r = http
            .request(reqwest::Method::OPTIONS, srv.url("/oauth/v2/token"))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "preflight: {}", r.status());
        assert_eq!(r.headers()["access-control-allow-origin"], origin);
    }
    let mut last = None;
    for _ in 0..3 {
        let r = http
            .post(srv.url("/oauth/v2/token"))
            .header("origin", origin)
            .header("content-type", "application/x-www-form-urlencoded")
            .body("grant_type=authorization_code&code=x&client_id=nobody")
            .send()
            .await
            .unwrap();
        assert_eq!(r.headers()["access-control-allow-origin"], origin, "{}", r.status());
        last = Some(r);
    }
    let r = last.unwrap();
    assert_eq!(r.status(), 429);
    assert!(retry_after(r.headers()) >= 1);
    assert!(r.headers()["access-control-expose-headers"].to_str().unwrap().contains("retry-after"));
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_set_limits_polling_but_never_a_client_that_honours_cache_control() {
    let srv = with_limits(|l| l.keys_per_ip = "5/1m".into()).await;
    let http = reqwest::Client::new();

    // A verifier that honours Cache-Control: it fetches once and reuses the set until max-age
    // passes. Checking 200 tokens costs it one request and no 429.
    let mut cached: Option<(Instant, Duration, String)> = None;
    let mut fetches = 0;
    for _ in 0..200 {
        let fresh = cached.as_ref().is_some_and(|(at, max_age, _)| at.elapsed() < *max_age);
        if !fresh {
            let r = http.get(srv.url("/oauth/v2/keys")).send().await.unwrap();
            assert_eq!(r.status(), 200, "a caching client is never limited");
            let cc = r.headers()["cache-control"].to_str().unwrap().to_string();
            let max_age: u64 = cc.split("max-age=").nth(1).unwrap().split(',').next().unwrap().parse().unwrap();
            cached = Some((Instant::now(), Duration::from_secs(max_age), r.text().await.unwrap()));
            fetches += 1;
        }
    }
    assert_eq!(fetches, 1);

    // A backend that fetches the key set on every request is limited.
    let mut statuses = Vec::new();
    for _ in 0..10 {
        let r = http.get(srv.url("/oauth/v2/keys")).send().await.unwrap();
        statuses.push(r.status().as_u16());
        if r.status() == 429 {
            assert!(r.headers().contains_key("retry-after"));
        }
    }
    assert!(statuses.starts_with(&[200, 200, 200, 200]), "{statuses:?}");
    assert_eq!(statuses.last(), Some(&429), "{statuses:?}");
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn password_guessing_is_limited_per_login_name_and_per_ip() {
    let srv = with_limits(|l| {
        l.login_per_name = "3/1m".into();
        l.login_per_ip = "20/1m".into();
    })
    .await;
    human(&srv, "alice", "Wonder-land1").await;
    human(&srv, "bob", "Builder-bob1").await;
    let b = Browser::new(&srv);
    let (id, page) = crate::login::start(&srv, &b, &[]).await;
    for _ in 0..3 {
        let wrong = b.sign_in(&id, &page, "alice", "wrong-password").await;
        assert!(wrong.html.contains("The login name or the password is wrong."), "{}", wrong.html);
    }
    // The fourth attempt on alice is refused before the password is checked, even the right one.
    let limited = b.sign_in(&id, &page, "ALICE", "Wonder-land1").await;
    assert_eq!(limited.status, 429, "{}", limited.html);
    assert!(limited.html.contains("Too many attempts"), "{}", limited.html);
    let wait: u64 = limited.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=20).contains(&wait), "{wait}");
    assert_eq!(srv.count("session").await, 0);
    // The budget is the name's as typed: another of alice's names (her address) is not limited,
    // or the 429 would tell that both names are one existing account.
    let other_name = b.sign_in(&id, &page, "alice@example.com", "wrong-password").await;
    assert!(other_name.html.contains("The login name or the password is wrong."), "{}", other_name.html);
    // Nor does it let her names (or spaces around them) add up to more guesses: alice's own
    // budget is spent too, and the right password under another name is answered as a wrong one.
    for name in ["alice @latch.127.0.0.1", "Alice@Example.com"] {
        let r = b.sign_in(&id, &page, name, "Wonder-land1").await;
        assert_eq!(r.status, 200, "{name}: {}", r.html);
        assert!(r.html.contains("The login name or the password is wrong."), "{name}: {}", r.html);
    }
    // ... and the same name with other spaces or case is the same name.
    let r = b.sign_in(&id, &page, " ALICE ", "wrong-password").await;
    assert_eq!(r.status, 429, "{}", r.html);
    // Bob is not affected.
    let ok = b.sign_in(&id, &page, "bob", "Builder-bob1").await;
    assert_eq!(ok.status, 303, "{}", ok.html);

    // The IP budget covers every login form post (here 20 per minute, 18 already spent), from
    // any browser.
    let b = Browser::new(&srv);
    let (id, page) = crate::login::start(&srv, &b, &[]).await;
    let mut last = 0;
    for _ in 0..12 {
        let p = b.post(&format!("/ui/login/{id}/loginname"), &[("csrf", &page.csrf()), ("loginname", "carol")]).await;
        last = p.status;
        if last == 429 {
            assert!(p.html.contains("Too many attempts"), "{}", p.html);
            assert!(p.header("retry-after").is_some());
            break;
        }
    }
    assert_eq!(last, 429);
    // The pages themselves stay readable.
    assert_eq!(b.get(&format!("/ui/login/{id}")).await.status, 200);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_factor_guessing_is_limited_per_user() {
    let srv = with_limits(|l| l.login_per_name = "3/1m".into()).await;
    let secret = "JBSWY3DPEHPK3PXP";
    let mut r = crate::import_human::record("otp-user", Some(crate::import_human::KEYCLOAK_ARGON2), true);
    r["otpCode"] = json!(secret);
    srv.post("/management/v1/users/human/_import", r).await.ok();
    let b = Browser::new(&srv);
    let (id, page) = crate::login::start(&srv, &b, &[]).await;
    let totp = b.sign_in(&id, &page, "otp-user", "secret").await;
    assert!(totp.html.contains("/totp"), "{}", totp.html);
    let post = |code: String| {
        let (b, id, csrf) = (&b, &id, totp.csrf());
        async move { b.post(&format!("/ui/login/{id}/totp"), &[("csrf", &csrf), ("code", &code)]).await }
    };
    for _ in 0..3 {
        let wrong = post("000000".into()).await;
        assert!(wrong.html.contains("The code is wrong"), "{}", wrong.html);
    }
    // The fourth code is refused before it is checked, even the right one.
    let now = latch::clock::Clock::now(&*srv.clock);
    let limited = post(latch::crypto::totp::code_at(secret, now / 30).unwrap()).await;
    assert_eq!(limited.status, 429, "{}", limited.html);
    assert!(limited.html.contains("Too many attempts"), "{}", limited.html);
    assert_eq!(srv.count("session").await, 0);

    // The account page's check of the current factor (to replace it) draws on the same budget:
    // another user signs in (one code), two wrong current codes, then 429.
    let mut r = crate::import_human::record("otp-user2", Some(crate::import_human::KEYCLOAK_ARGON2), true);
    r["otpCode"] = json!(secret);
    srv.post("/management/v1/users/human/_import", r).await.ok();
    let b = Browser::new(&srv);
    let (id, page) = crate::login::start(&srv, &b, &[]).await;
    let totp = b.sign_in(&id, &page, "otp-user2", "secret").await;
    let now = latch::clock::Clock::now(&*srv.clock);
    let code = latch::crypto::totp::code_at(secret, now / 30).unwrap();
    let done = b.post(&format!("/ui/login/{id}/totp"), &[("csrf", &totp.csrf()), ("code", &code)]).await;
    assert_eq!(done.status, 303, "{}", done.html);
    let enrol = b.get("/ui/account/totp").await;
    let session = crate::browser::field(&enrol.html, "session").unwrap();
    let pending = crate::browser::field(&enrol.html, "pending").unwrap();
    let replace = || async {
        let form = [("session", session.as_str()), ("pending", &pending), ("code", "000000"), ("current", "000000")];
        b.post("/ui/account/totp", &form).await
    };
    for _ in 0..2 {
        let r = replace().await;
        assert!(r.html.contains("The code is wrong"), "{}", r.html);
    }
    let r = replace().await;
    assert_eq!(r.status, 429, "{}", r.html);
    srv.stop().await;
}

// Beside the per-replica budget, second-factor tries keep a pace in the store, which every
// replica shares: five wrong codes in a row at once, then one try a minute after the last, and
// past ten wrong codes one each quarter hour; a right code starts over. A try that comes too
// soon is refused before it is checked, even the right code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_factor_tries_keep_a_pace_every_replica_shares_sqlite() {
    second_factor_tries_keep_a_pace_every_replica_shares(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_factor_tries_keep_a_pace_every_replica_shares_postgres() {
    second_factor_tries_keep_a_pace_every_replica_shares(Backend::Postgres).await;
}

/// A browser at the second-factor step of `user` (password "secret").
struct AtSecondFactor {
    b: Browser,
    id: String,
    csrf: String,
}

impl AtSecondFactor {
    async fn sign_in(srv: &TestServer, user: &str) -> Self {
        let b = Browser::new(srv);
        let (id, page) = crate::login::start(srv, &b, &[]).await;
        let totp = b.sign_in(&id, &page, user, "secret").await;
        assert!(totp.html.contains("/totp"), "{}", totp.html);
        let csrf = totp.csrf();
        Self { b, id, csrf }
    }

    async fn post(&self, code: &str) -> crate::browser::Page {
        self.b.post(&format!("/ui/login/{}/totp", self.id), &[("csrf", &self.csrf), ("code", code)]).await
    }

    async fn wrong(&self) {
        let r = self.post("000000").await;
        assert!(r.html.contains("The code is wrong"), "{}", r.html);
    }
}

async fn second_factor_tries_keep_a_pace_every_replica_shares(backend: Backend) {
    let srv = TestServer::start_with(backend, |c| c.limits.login_per_name = "off".into()).await;
    let secret = "JBSWY3DPEHPK3PXP";
    let mut r = crate::import_human::record("otp-user", Some(crate::import_human::KEYCLOAK_ARGON2), true);
    r["otpCode"] = json!(secret);
    let user_id = srv.post("/management/v1/users/human/_import", r).await.ok()["userId"].as_str().unwrap().to_string();
    let right = || latch::crypto::totp::code_at(secret, latch::clock::Clock::now(&*srv.clock) / 30).unwrap();
    let at = AtSecondFactor::sign_in(&srv, "otp-user").await;
    for _ in 0..5 {
        at.wrong().await;
    }
    let early = at.post(&right()).await;
    assert_eq!(early.status, 429, "{}", early.html);
    assert!(retry_after(&early.headers) >= 59);
    assert_eq!(srv.count("session").await, 0);
    // A wrong password for the same user meanwhile (anyone who knows the name can send one)
    // moves the account's change time, not the wait.
    srv.clock.advance(40);
    let other = Browser::new(&srv);
    let (other_id, other_page) = crate::login::start(&srv, &other, &[]).await;
    let failed = other.sign_in(&other_id, &other_page, "otp-user", "not the password").await;
    assert!(!failed.html.contains("/totp"), "{}", failed.html);
    srv.clock.advance(21);
    let done = at.post(&right()).await;
    assert_eq!(done.status, 303, "{}", done.html);

    // The right code started over: five at once again, then a minute apart up to ten, then a
    // quarter hour.
    let at = AtSecondFactor::sign_in(&srv, "otp-user").await;
    for i in 0..10 {
        if i >= 5 {
            srv.clock.advance(61);
        }
        let r = at.post("000000").await;
        assert!(r.html.contains("The code is wrong"), "try {i}: {}", r.html);
    }
    srv.clock.advance(61);
    let early = at.post(&right()).await;
    assert_eq!(early.status, 429, "{}", early.html);
    assert!(retry_after(&early.headers) > 800);
    srv.clock.advance(900);
    let done = at.post(&right()).await;
    assert_eq!(done.status, 303, "{}", done.html);

    // An administrator who unlocks the user clears the count and the wait with the lock.
    let at = AtSecondFactor::sign_in(&srv, "otp-user").await;
    for _ in 0..5 {
        at.post("000000").await;
    }
    srv.clock.advance(31);
    let early = at.post(&right()).await;
    assert_eq!(early.status, 429, "{}", early.html);
    srv.post(&format!("/management/v1/users/{user_id}/_lock"), json!({})).await.ok();
    srv.post(&format!("/management/v1/users/{user_id}/_unlock"), json!({})).await.ok();
    let done = AtSecondFactor::sign_in(&srv, "otp-user").await.post(&right()).await;
    assert_eq!(done.status, 303, "{}", done.html);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_bodies_headers_and_forms_are_refused_in_the_endpoints_format() {
    let srv = TestServer::start(Backend::Sqlite).await;
    let http = reqwest::Client::new();
    // Token endpoint: 413 as OAuth JSON.
    let big = format!("grant_type=client_credentials&pad={}", "a".repeat(200 * 1024));
    let r = http
        .post(srv.url("/oauth/v2/token"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(big.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    // The rest of the body is not read, so the connection ends: the client must not reuse it.
    assert_eq!(r.headers()["connection"], "close");
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"], "invalid_request", "{body}");
    // A body read to its end keeps the connection open, whatever the answer.
    let r = http
        .post(srv.url("/oauth/v2/token"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("grant_type=client_credentials")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.headers().get("connection").is_none(), "{:?}", r.headers());
    // Too many form fields.
    let many: String = (0..100).map(|i| format!("f{i}=x&")).collect();
    let r = http
        .post(srv.url("/oauth/v2/token"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(many)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"], "invalid_request", "{body}");
    // Login form: 413 as a page.
    let r = http
        .post(srv.url("/ui/login/x/password"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(big)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    assert!(r.headers()["content-type"].to_str().unwrap().starts_with("text/html"));
    assert_eq!(r.headers()["connection"], "close");
    // The API: 1 MiB, InvalidArgument.
    let r = srv
        .send(
            "POST",
            "/management/v1/projects",
            Some(&srv.pat),
            &[],
            Some(format!("{{\"name\":\"{}\"}}", "a".repeat(2 << 20))),
        )
        .await;
    r.err(400, 3);
    assert_eq!(r.headers["connection"], "close");
    // Too many header fields, or a huge header: 431, and nothing else breaks.
    let mut req = http.get(srv.url("/healthz"));
    for i in 0..150 {
        req = req.header(format!("x-h{i}"), "v");
    }
    assert_eq!(req.send().await.unwrap().status(), 431);
    let r = http.get(srv.url("/healthz")).header("x-big", "a".repeat(100 * 1024)).send().await.unwrap();
    assert_eq!(r.status(), 431);
    assert_eq!(srv.get("/healthz").await.status, 200);
    srv.stop().await;
}

/// Sends a request head announcing `length` bytes of body and only the first few of them, and
/// returns what the server answers within 10 s (it closes the connection after answering, as it
/// does not read the rest).
async fn announce_body(srv: &TestServer, path: &str, token: &str, length: u64) -> String {
    let addr = srv.base.trim_start_matches("http://").to_string();
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n{{\"dataOrgs\": "
    );
    s.write_all(head.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "no answer before the body was sent: the server waits for it");
    String::from_utf8_lossy(&buf).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_import_reads_its_large_body_only_for_a_caller_who_may_import() {
    let srv = TestServer::start(Backend::Sqlite).await;
    // A token of a user without roles announcing 100 MiB: refused before any of it is read.
    let (_, nobody) = srv.machine_with_roles(None, "nobody", &[]).await;
    let answer = announce_body(&srv, "/admin/v1/import", &nobody, 100 << 20).await;
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(answer.contains("\"code\":7"), "{answer}");
    assert!(answer.to_ascii_lowercase().contains("connection: close"), "{answer}");
    // An instance owner announcing more than 512 MiB: refused at once, in the API's format.
    let answer = announce_body(&srv, "/admin/v1/import", &srv.pat, (512 << 20) + 1).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("application/json"), "{answer}");
    assert!(answer.contains("\"code\":3") && answer.contains("larger than 512 MiB"), "{answer}");
    // Within the limit the body is read and imported as before.
    let r = srv.post("/admin/v1/import", json!({"dataOrgs": {"orgs": []}})).await;
    assert_eq!(r.ok()["errors"], json!([]));
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_cut_off() {
    let srv = with_limits(|l| {
        l.header_read_timeout = "1s".into();
        l.body_read_timeout = "1s".into();
    })
    .await;
    let addr = srv.base.trim_start_matches("http://").to_string();

    // A head that never ends: the connection is closed after the header timeout.
    let mut slow = tokio::net::TcpStream::connect(&addr).await.unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n").await.unwrap();
    let t0 = Instant::now();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), slow.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "the connection was not closed");
    assert!(t0.elapsed() < Duration::from_secs(5), "closed after {:?}", t0.elapsed());

    // A body that stalls: the request fails after the body timeout instead of holding a task.
    let mut slow = tokio::net::TcpStream::connect(&addr).await.unwrap();
    slow.write_all(
        b"POST /oauth/v2/token HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\ngrant_type=",
    )
    .await
    .unwrap();
    let t0 = Instant::now();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), slow.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "the stalled request was not ended");
    assert!(t0.elapsed() < Duration::from_secs(5), "ended after {:?}", t0.elapsed());
    let answer = String::from_utf8_lossy(&buf);
    assert!(answer.is_empty() || answer.starts_with("HTTP/1.1 4"), "{answer}");

    // A body that trickles, a byte well within each pause, still ends by the deadline for the
    // whole body (the same timeout): it could otherwise hold the request for minutes.
    let trickle = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let (mut rd, mut wr) = trickle.into_split();
    wr.write_all(
        b"POST /oauth/v2/token HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\n",
    )
    .await
    .unwrap();
    let writer = tokio::spawn(async move {
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(300)).await;
            if wr.write_all(b"a").await.is_err() {
                break;
            }
        }
    });
    let t0 = Instant::now();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(15), rd.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "the trickling request was not ended");
    assert!(t0.elapsed() < Duration::from_secs(6), "ended after {:?}", t0.elapsed());
    let answer = String::from_utf8_lossy(&buf);
    assert!(answer.is_empty() || answer.starts_with("HTTP/1.1 4"), "{answer}");
    writer.abort();

    // Meanwhile others are served.
    assert_eq!(srv.get("/healthz").await.status, 200);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_ip_holds_a_bounded_number_of_connections() {
    let srv = with_limits(|l| l.connections_per_ip = 3).await;
    let addr = srv.base.trim_start_matches("http://").to_string();
    // Five idle connections from one IP: at most three stay open (fewer if the test client
    // keeps one of its own), the others are closed at once.
    let mut conns = Vec::new();
    for _ in 0..5 {
        conns.push(tokio::net::TcpStream::connect(&addr).await.unwrap());
    }
    // An accepted connection stays open (idle, far from the 10 s header timeout); a refused
    // one reads its end at once. Read them together, with time to spare on a busy machine.
    let reads: Vec<_> = conns
        .into_iter()
        .map(|mut c| {
            tokio::spawn(async move {
                let mut buf = [0u8; 16];
                match tokio::time::timeout(Duration::from_secs(3), c.read(&mut buf)).await {
                    Err(_) => Some(c),
                    Ok(n) => {
                        assert!(matches!(n, Ok(0) | Err(_)), "a refused connection gets no bytes: {n:?}");
                        None
                    }
                }
            })
        })
        .collect();
    let mut results = Vec::new();
    for r in reads {
        results.push(r.await.unwrap());
    }
    let closed = results.iter().filter(|r| r.is_none()).count();
    let open: Vec<_> = results.into_iter().flatten().collect();
    assert!((1..=3).contains(&open.len()) && closed >= 2, "{} open, {closed} closed", open.len());
    // A connection that ends makes room for the next (once the server has seen it end).
    drop(open);
    let mut answer = Vec::new();
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut c = tokio::net::TcpStream::connect(&addr).await.unwrap();
        if c.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.is_err() {
            continue;
        }
        answer.clear();
        if tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut answer)).await.is_ok_and(|r| r.is_ok())
            && !answer.is_empty()
        {
            break;
        }
    }
    assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"), "{}", String::from_utf8_lossy(&answer));
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_rate_limit_keys_are_forgotten() {
    let srv = with_limits(|l| l.per_client = "100/1s".into()).await;
    for i in 0..50 {
        srv.state.limits.client(&format!("c{i}")).unwrap();
    }
    assert!(srv.state.limits.tracked() >= 50);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    srv.state.limits.forget_idle();
    assert_eq!(srv.state.limits.tracked(), 0);
    srv.stop().await;
}
