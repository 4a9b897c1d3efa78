//! Two latch processes on one PostgreSQL behave as one server: every step of a flow may land on
//! either; revocation and logout on one count on the other within a second (at once on the one
//! that did it), key changes within the refresh interval.

use serde_json::json;

use crate::browser::{Browser, param, pkce};
use crate::harness::{create_pg_database, drop_pg_database};
use crate::process::{LatchProcess, base_env, call, free_port, post_form};

const KEY: &str = "TestOnlyMasterkeyOf32Characters!";
const CB: &str = "https://app.example.com/cb";

#[tokio::test]
async fn two_replicas_share_one_store() {
    let (url, name) = create_pg_database().await;
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let ports = [free_port(), free_port()];
    let issuer = format!("http://127.0.0.1:{}", ports[0]);
    let mut procs = Vec::new();
    // B reloads its keys only every minute: it learns the key A activates from the first token
    // that names it.
    for ((d, p), interval) in dirs.iter().zip(ports).zip(["1s", "1m"]) {
        let mut env = base_env(p, &url, KEY);
        env.retain(|(k, _)| k != "LATCH_EXTERNAL_URL");
        env.push(("LATCH_EXTERNAL_URL".into(), issuer.clone()));
        env.push(("LATCH_KEYS_REFRESH_INTERVAL".into(), interval.into()));
        procs.push(LatchProcess::spawn(d.path(), &env, p));
    }
    for p in procs.iter_mut() {
        p.wait_ready().await;
    }
    let (a, b) = (format!("http://127.0.0.1:{}", ports[0]), format!("http://127.0.0.1:{}", ports[1]));
    let pat_file = dirs.iter().map(|d| d.path().join("data/admin.pat")).find(|p| p.exists()).unwrap();
    let pat = std::fs::read_to_string(pat_file).unwrap().trim().to_string();

    // Set up on A.
    let project = call(&a, &pat, "POST", "/management/v1/projects", json!({"name": "p"})).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let app = call(
        &a,
        &pat,
        "POST",
        &format!("/management/v1/projects/{project}/apps/oidc"),
        json!({"name": "web", "redirectUris": [CB],
        "grantTypes": ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_REFRESH_TOKEN"]}),
    )
    .await;
    let (client_id, secret) =
        (app["clientId"].as_str().unwrap().to_string(), app["clientSecret"].as_str().unwrap().to_string());
    let rs =
        call(&a, &pat, "POST", &format!("/management/v1/projects/{project}/apps/api"), json!({"name": "rs"})).await;
    let (rs_id, rs_secret) =
        (rs["clientId"].as_str().unwrap().to_string(), rs["clientSecret"].as_str().unwrap().to_string());
    let user = call(&b, &pat, "POST", "/management/v1/users/human", json!({"userName": "alice", "profile": {"firstName": "A", "lastName": "L"}, "email": {"email": "a@example.com", "isEmailVerified": true}})).await;
    let uid = user["userId"].as_str().unwrap();
    call(
        &b,
        &pat,
        "POST",
        &format!("/management/v1/users/{uid}/password"),
        json!({"password": "Wonder-land1", "noChangeRequired": true}),
    )
    .await;

    // Start on A, every page on B, exchange on A: the cookie is per host, like behind a load balancer.
    let browser = Browser::at(&a);
    let (verifier, challenge) = pkce();
    let q = form_urlencoded::Serializer::new(String::new())
        .extend_pairs([
            ("client_id", client_id.as_str()),
            ("redirect_uri", CB),
            ("response_type", "code"),
            ("scope", "openid offline_access"),
            ("code_challenge", challenge.as_str()),
            ("code_challenge_method", "S256"),
        ])
        .finish();
    let first = browser.get(&format!("{a}/oauth/v2/authorize?{q}")).await;
    let login = first.location().to_string();
    let id = Browser::request_id(&login);
    let page = browser.get(&format!("{b}{login}")).await;
    assert_eq!(page.status, 200, "the request started on A is found on B");
    let pw =
        browser.post(&format!("{b}/ui/login/{id}/loginname"), &[("csrf", &page.csrf()), ("loginname", "alice")]).await;
    let done = browser
        .post(&format!("{b}/ui/login/{id}/password"), &[("csrf", &pw.csrf()), ("password", "Wonder-land1")])
        .await;
    let code = param(&done.redirect_params(), "code").unwrap().to_string();
    let (s, t) = post_form(
        &format!("{a}/oauth/v2/token"),
        (&client_id, &secret),
        &[("grant_type", "authorization_code"), ("code", &code), ("redirect_uri", CB), ("code_verifier", &verifier)],
    )
    .await;
    assert_eq!(s, 200, "{t}");
    let at = t["access_token"].as_str().unwrap().to_string();
    let rt = t["refresh_token"].as_str().unwrap().to_string();
    let active = |base: String, tok: String| {
        let (rs_id, rs_secret) = (rs_id.clone(), rs_secret.clone());
        async move {
            post_form(&format!("{base}/oauth/v2/introspect"), (&rs_id, &rs_secret), &[("token", &tok)]).await.1["active"]
                == json!(true)
        }
    };
    // Inactive on `base` within a second of `since`.
    let inactive_within_a_second = |base: String, tok: String, since: std::time::Instant| {
        let active = &active;
        async move {
            while active(base.clone(), tok.clone()).await {
                if since.elapsed() > std::time::Duration::from_millis(1500) {
                    return false;
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            true
        }
    };
    assert!(active(b.clone(), at.clone()).await && active(a.clone(), at.clone()).await);
    // Revoke on B: inactive on B at once, on A within a second.
    let (s, _) = post_form(&format!("{b}/oauth/v2/revoke"), (&client_id, &secret), &[("token", &at)]).await;
    let revoked = std::time::Instant::now();
    assert_eq!(s, 200);
    assert!(!active(b.clone(), at.clone()).await);
    assert!(inactive_within_a_second(a.clone(), at.clone(), revoked).await);
    // Refresh on B, then log out on A: the refreshed tokens die on both.
    let (s, t2) = post_form(
        &format!("{b}/oauth/v2/token"),
        (&client_id, &secret),
        &[("grant_type", "refresh_token"), ("refresh_token", &rt)],
    )
    .await;
    assert_eq!(s, 200, "{t2}");
    let at2 = t2["access_token"].as_str().unwrap().to_string();
    assert!(active(a.clone(), at2.clone()).await);
    let out = browser.sign_out(&format!("{a}/oidc/v1/end_session")).await;
    let ended = std::time::Instant::now();
    assert_eq!(out.status, 200);
    assert!(!active(a.clone(), at2.clone()).await);
    assert!(inactive_within_a_second(b.clone(), at2.clone(), ended).await);
    let rt2 = t2["refresh_token"].as_str().unwrap();
    let (s, _) = post_form(
        &format!("{b}/oauth/v2/token"),
        (&client_id, &secret),
        &[("grant_type", "refresh_token"), ("refresh_token", rt2)],
    )
    .await;
    assert_eq!(s, 400);

    // A key activated on A signs on A at once; B, which has not reloaded its keys since, takes
    // a token signed with it for one: it reloads them when a token names a key it lacks.
    let key = call(&a, &pat, "POST", "/v2/web_keys", json!({"ecdsa": {}})).await["id"].as_str().unwrap().to_string();
    call(&a, &pat, "POST", &format!("/v2/web_keys/{key}/_activate"), json!({})).await;
    let robot = json!({"userName": "robot", "name": "robot", "accessTokenType": "ACCESS_TOKEN_TYPE_JWT"});
    let robot =
        call(&a, &pat, "POST", "/management/v1/users/machine", robot).await["userId"].as_str().unwrap().to_string();
    let robot = call(&a, &pat, "PUT", &format!("/management/v1/users/{robot}/secret"), json!({})).await;
    let robot = (robot["clientId"].as_str().unwrap().to_string(), robot["clientSecret"].as_str().unwrap().to_string());
    let scope = format!("urn:service:iam:org:project:id:{project}:aud");
    let (s, t) = post_form(
        &format!("{a}/oauth/v2/token"),
        (&robot.0, &robot.1),
        &[("grant_type", "client_credentials"), ("scope", &scope)],
    )
    .await;
    assert_eq!(s, 200, "{t}");
    let jwt = t["access_token"].as_str().unwrap().to_string();
    assert_eq!(crate::token::header(&jwt)["kid"], key.as_str());
    assert!(active(b.clone(), jwt).await, "B learns the key from the token");
    let mut seen = false;
    for _ in 0..30 {
        let keys = call(&b, &pat, "GET", "/v2/web_keys", json!(null)).await;
        if keys["webKeys"].as_array().unwrap().iter().any(|k| k["id"] == key.as_str() && k["state"] == "STATE_ACTIVE") {
            seen = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(seen, "B sees the key A activated");
    // B signs with it (within its refresh interval).
    let mut signed_with_new = false;
    for _ in 0..30 {
        let browser2 = Browser::at(&b);
        let (verifier, challenge) = pkce();
        let q = form_urlencoded::Serializer::new(String::new())
            .extend_pairs([
                ("client_id", client_id.as_str()),
                ("redirect_uri", CB),
                ("response_type", "code"),
                ("scope", "openid"),
                ("code_challenge", challenge.as_str()),
                ("code_challenge_method", "S256"),
            ])
            .finish();
        let first = browser2.get(&format!("{b}/oauth/v2/authorize?{q}")).await;
        let login = first.location().to_string();
        let id = Browser::request_id(&login);
        let page = browser2.get(&format!("{b}{login}")).await;
        let pw = browser2
            .post(&format!("{b}/ui/login/{id}/loginname"), &[("csrf", &page.csrf()), ("loginname", "alice")])
            .await;
        let done = browser2
            .post(&format!("{b}/ui/login/{id}/password"), &[("csrf", &pw.csrf()), ("password", "Wonder-land1")])
            .await;
        let code = param(&done.redirect_params(), "code").unwrap().to_string();
        let (_, t) = post_form(
            &format!("{b}/oauth/v2/token"),
            (&client_id, &secret),
            &[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", CB),
                ("code_verifier", &verifier),
            ],
        )
        .await;
        let header = crate::token::header(t["id_token"].as_str().unwrap());
        if header["kid"] == key.as_str() {
            assert_eq!(header["alg"], "ES256");
            signed_with_new = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert!(signed_with_new, "B signs with the key activated on A");

    // B issues from its copy of robot, read in an earlier second, after A locked robot: the
    // token is dated when the copy was read, so it ends with the lock like those issued before
    // (unlocking brings none of them back).
    let robot_id = call(&a, &pat, "POST", "/management/v1/users/_search", json!({})).await["result"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["userName"] == "robot")
        .map(|u| u["id"].as_str().unwrap().to_string())
        .unwrap();
    let cc = |base: String| {
        let (robot, scope) = (robot.clone(), scope.clone());
        async move {
            post_form(
                &format!("{base}/oauth/v2/token"),
                (&robot.0, &robot.1),
                &[("grant_type", "client_credentials"), ("scope", &scope)],
            )
            .await
        }
    };
    let mut stale_token = None;
    for _ in 0..5 {
        // B reads robot late in a second; A locks robot early in the next, while B's copy is
        // fresh (the cache keeps it a second).
        wait_for_millisecond(850).await;
        let (s, _) = cc(b.clone()).await;
        assert_eq!(s, 200);
        if wall_millisecond() < 850 {
            continue; // B's read may have fallen into the next second: try again.
        }
        wait_for_millisecond(20).await;
        call(&a, &pat, "POST", &format!("/management/v1/users/{robot_id}/_lock"), json!({})).await;
        let (s, t) = cc(b.clone()).await;
        call(&a, &pat, "POST", &format!("/management/v1/users/{robot_id}/_unlock"), json!({})).await;
        if s == 200 {
            stale_token = t["access_token"].as_str().map(str::to_string);
            break;
        }
    }
    let stale_token = stale_token.expect("B issued from its copy of robot at least once in five tries");
    assert!(!active(a.clone(), stale_token.clone()).await, "ended with the lock");
    // B, once its copy is a second old, too.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    assert!(!active(b.clone(), stale_token).await);
    let (s, t) = cc(a.clone()).await;
    assert_eq!(s, 200);
    assert!(active(a.clone(), t["access_token"].as_str().unwrap().to_string()).await, "a token issued since counts");

    // A lengthens the access tokens' life while B holds the lifetimes it read: a revocation B
    // writes then (here: a reused refresh token) is kept as long as the new tokens live.
    let tokens = code_flow(&b, &client_id, &secret).await;
    let rt1 = tokens["refresh_token"].as_str().unwrap().to_string();
    let refresh = |rt: String| {
        let (b, client_id, secret) = (b.clone(), client_id.clone(), secret.clone());
        async move {
            post_form(
                &format!("{b}/oauth/v2/token"),
                (&client_id, &secret),
                &[("grant_type", "refresh_token"), ("refresh_token", &rt)],
            )
            .await
        }
    };
    assert_eq!(refresh(rt1.clone()).await.0, 200);
    call(&a, &pat, "PUT", "/admin/v1/settings/oidc", json!({"accessTokenLifetime": "172800s"})).await;
    assert_eq!(refresh(rt1).await.0, 400, "a reuse revokes the grant");
    let mut db = <sqlx::PgConnection as sqlx::Connection>::connect(&url).await.unwrap();
    let (until,): (i64,) = sqlx::query_as("SELECT max(expires_at) FROM revocation").fetch_one(&mut db).await.unwrap();
    let now = wall_clock().as_secs() as i64;
    assert!(until >= now + 172_800 - 5, "kept until {until}, the new tokens live until {}", now + 172_800);
    drop(db);

    for p in procs {
        let (status, out) = p.terminate();
        assert!(status.success(), "{out}");
    }
    drop_pg_database(&name).await;
}

/// The wall clock (the processes' clock), since the Unix epoch.
#[allow(clippy::disallowed_methods)]
fn wall_clock() -> std::time::Duration {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap()
}

/// The millisecond within the current wall-clock second.
fn wall_millisecond() -> u32 {
    wall_clock().subsec_millis()
}

/// Sleeps until the wall clock is `ms` milliseconds into a second (the next such moment).
async fn wait_for_millisecond(ms: u32) {
    let now = wall_millisecond();
    let wait = if now < ms { ms - now } else { 1000 - now + ms };
    tokio::time::sleep(std::time::Duration::from_millis(u64::from(wait))).await;
}

/// A sign-in of alice on `base` (`openid offline_access`) and the code's exchange: the token
/// response.
async fn code_flow(base: &str, client_id: &str, secret: &str) -> serde_json::Value {
    let (code, verifier) = crate::faults::code_for(base, client_id).await;
    let (s, t) = post_form(
        &format!("{base}/oauth/v2/token"),
        (client_id, secret),
        &[("grant_type", "authorization_code"), ("code", &code), ("redirect_uri", CB), ("code_verifier", &verifier)],
    )
    .await;
    assert_eq!(s, 200, "{t}");
    t
}
