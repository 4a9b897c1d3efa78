//! The login pages: passwords, lockout, CSRF and browser binding, password change,
//! registration with e-mail verification, initial passwords, languages, headers.

use serde_json::json;

use crate::browser::{Browser, human, oidc_app, param, pkce};
use crate::harness::TestServer;
use crate::on_both;

const CB: &str = "https://app.example.com/cb";

pub async fn start(srv: &TestServer, b: &Browser, extra: &[(&str, &str)]) -> (String, crate::browser::Page) {
    let (client_id, _, _) = oidc_app(srv, json!({})).await;
    let (_, challenge) = pkce();
    let mut q = vec![
        ("client_id", client_id.as_str()),
        ("redirect_uri", CB),
        ("response_type", "code"),
        ("scope", "openid"),
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
        ("state", "s"),
    ];
    q.extend_from_slice(extra);
    let (id, page) = b.authorize(&q).await;
    (id.expect("a login page"), page)
}

/// fred, with the password `Fred-Passw0rd` (no change required) and an unverified address.
async fn fred_unverified(srv: &TestServer) -> String {
    let body = json!({"userName": "fred", "profile": {"firstName": "Fred", "lastName": "F"}, "email": {"email": "fred@example.com"}});
    let fred = srv.post("/management/v1/users/human", body).await.ok()["userId"].as_str().unwrap().to_string();
    let password = json!({"password": "Fred-Passw0rd", "noChangeRequired": true});
    srv.post(&format!("/management/v1/users/{fred}/password"), password).await.ok();
    fred
}

/// The newest message in the outbox for `to`, and the code in it; waits up to 5 s for one (an
/// initial-password code is stored and mailed after the answer).
async fn outbox_code(srv: &TestServer, to: &str) -> String {
    for _ in 0..250 {
        if !srv.outbox_to(to).is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    newest_code(srv, to)
}

fn newest_code(srv: &TestServer, to: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let dir = srv.settings.data_dir.join("outbox");
    // The messages hold live codes: latch's own user only.
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    for f in files.iter().rev() {
        assert_eq!(mode(f), 0o600, "{}", f.display());
        let text = std::fs::read_to_string(f).unwrap();
        if text.contains(to) {
            let line = text
                .lines()
                .find(|l| {
                    l.contains(": ")
                        && l.trim().len() >= 8
                        && l.trim().rsplit(' ').next().is_some_and(|w| {
                            w.len() == 8 && w.chars().all(|c| c.is_ascii_alphanumeric() && !c.is_ascii_lowercase())
                        })
                })
                .unwrap_or_else(|| panic!("no code in {text}"));
            return line.trim().rsplit(' ').next().unwrap().to_string();
        }
    }
    panic!("no message to {to} in {}", dir.display());
}

on_both!(a_login_name_is_a_user_name_a_domain_login_or_an_address, |srv| {
    human(srv, "hank", "Hank-Passw0rd").await;
    human(srv, "ivy", "Ivy-Passw0rd1").await;
    // A second human with ivy's address: the address then names neither.
    srv.post(
        "/management/v1/users/human",
        json!({"userName": "ivy2", "profile": {"firstName": "Ivy", "lastName": "Two"},
               "email": {"email": "ivy@example.com", "isEmailVerified": true}}),
    )
    .await
    .ok();
    let sign_in = |name: &'static str, password: &'static str| async move {
        let b = Browser::new(srv);
        let (id, page) = start(srv, &b, &[]).await;
        b.sign_in(&id, &page, name, password).await
    };
    // The user name in any case, the user name at the organization's domain, the address.
    for name in ["hank", "HANK", " Hank ", "hank@latch.127.0.0.1", "HANK@Latch.127.0.0.1", "hank@example.com"] {
        let r = sign_in(name, "Hank-Passw0rd").await;
        assert_eq!(r.status, 303, "{name}: {}", r.html);
        assert!(param(&r.redirect_params(), "code").is_some(), "{name}");
    }
    // No new user may be named like one of hank's login names (the form would look the name
    // up as a user name first and take his sign-ins); nor may a user be named so that one of its
    // own login names is a name taken already.
    for name in ["hank@example.com", "HANK@latch.127.0.0.1"] {
        let body = json!({"userName": name, "profile": {"firstName": "H", "lastName": "X"},
                          "email": {"email": "other@example.org"}});
        let r = srv.post("/management/v1/users/human", body).await;
        assert!(r.err(409, 6).contains("login name"), "{name}: {}", r.text);
        let r = srv.post("/management/v1/users/machine", json!({"userName": name, "name": "m"})).await;
        assert!(r.err(409, 6).contains("login name"), "{name}: {}", r.text);
    }
    let body = |name: &str| json!({"userName": name, "profile": {"firstName": "Z", "lastName": "X"}, "email": {"email": "zed@example.org"}});
    srv.post("/management/v1/users/human", body("zed@latch.127.0.0.1")).await.ok();
    assert!(srv.post("/management/v1/users/human", body("Zed")).await.err(409, 6).contains("login name"));
    let r = sign_in("ivy@example.com", "Ivy-Passw0rd1").await;
    assert!(r.html.contains("The login name or the password is wrong."), "{}", r.html);
    for name in ["hank@other.example", "hank@", "@latch.127.0.0.1"] {
        let r = sign_in(name, "Hank-Passw0rd").await;
        assert!(r.html.contains("The login name or the password is wrong."), "{name}: {}", r.html);
    }
    assert_eq!(sign_in("ivy", "Ivy-Passw0rd1").await.status, 303);
    // A name typed again replaces the user the request named: back from hank's password page to
    // a name that is nobody's, hank's password no longer signs in.
    let b = Browser::new(srv);
    let (id, page) = start(srv, &b, &[]).await;
    let named = b.post(&format!("/ui/login/{id}/loginname"), &[("csrf", &page.csrf()), ("loginname", "hank")]).await;
    let again = b.post(&format!("/ui/login/{id}/loginname"), &[("csrf", &named.csrf()), ("loginname", "nobody")]).await;
    assert!(again.html.contains("name=\"password\""), "{}", again.html);
    let r =
        b.post(&format!("/ui/login/{id}/password"), &[("csrf", &again.csrf()), ("password", "Hank-Passw0rd")]).await;
    assert!(r.html.contains("The login name or the password is wrong."), "{}", r.html);
    // ... and the other way round.
    let b = Browser::new(srv);
    let (id, page) = start(srv, &b, &[]).await;
    let named = b.post(&format!("/ui/login/{id}/loginname"), &[("csrf", &page.csrf()), ("loginname", "nobody")]).await;
    let r = b.sign_in(&id, &named, "hank@example.com", "Hank-Passw0rd").await;
    assert_eq!(r.status, 303, "{}", r.html);
    // With the login policy's disableLoginWithEmail an address names no one; the user name and
    // the domain login still do.
    srv.put("/admin/v1/policies/login", json!({"disableLoginWithEmail": true})).await.ok();
    let r = sign_in("hank@example.com", "Hank-Passw0rd").await;
    assert!(r.html.contains("The login name or the password is wrong."), "{}", r.html);
    for name in ["hank", "hank@latch.127.0.0.1"] {
        assert_eq!(sign_in(name, "Hank-Passw0rd").await.status, 303, "{name}");
    }
});

on_both!(a_sign_in_renews_the_browser_cookie, |srv| {
    human(srv, "kim", "Kim-Passw0rd1").await;
    human(srv, "lee", "Lee-Passw0rd1").await;
    let (client_id, _, _) = oidc_app(srv, json!({})).await;
    let (_, challenge) = pkce();
    let query = |extra: &[(&'static str, &'static str)]| {
        let mut q = crate::authorize::code_query(&client_id, &challenge);
        q.extend_from_slice(extra);
        q
    };
    // Someone able to put a cookie into the victim's browser knows its value (session fixation).
    let planted = format!("latch_ua={}", "P".repeat(43));
    let victim = Browser::with_cookie(srv, &planted);
    let (id, page) = victim.authorize(&query(&[])).await;
    let r = victim.sign_in(&id.expect("a login page"), &page, "kim", "Kim-Passw0rd1").await;
    assert_eq!(r.status, 303, "{}", r.html);
    let renewed = r.header("set-cookie").expect("a new cookie at sign-in").to_string();
    assert!(renewed.starts_with("latch_ua=") && !renewed.starts_with(&planted), "{renewed}");
    assert!(renewed.contains("HttpOnly") && renewed.contains("SameSite=Lax"), "{renewed}");
    // The planted value names no session; the browser's new cookie names kim's.
    let attacker = Browser::with_cookie(srv, &planted);
    let (_, r) = attacker.authorize(&query(&[("prompt", "none")])).await;
    assert_eq!(param(&r.redirect_params(), "error"), Some("login_required"));
    let (_, r) = victim.authorize(&query(&[("prompt", "none")])).await;
    assert!(param(&r.redirect_params(), "code").is_some(), "{:?}", r.location);
    // A second account in the same browser: the cookie is renewed again and kim's session moves
    // with it, so both accounts are on the account page.
    let (id, page) = victim.authorize(&query(&[("prompt", "login")])).await;
    let r = victim.sign_in(&id.expect("a login page"), &page, "lee", "Lee-Passw0rd1").await;
    assert_eq!(r.status, 303, "{}", r.html);
    let again = r.header("set-cookie").expect("renewed again").to_string();
    assert_ne!(again.split(';').next(), renewed.split(';').next());
    let (_, accounts) = victim.authorize(&query(&[("prompt", "select_account")])).await;
    assert!(accounts.html.contains("kim") && accounts.html.contains("lee"), "{}", accounts.html);
    // A cookie latch set a moment ago is renewed too: whoever started the request knows it.
    // Here the attacker starts one, keeps the cookie it got and has the victim finish it.
    let attacker = Browser::new(srv);
    let q = form_urlencoded::Serializer::new(String::new()).extend_pairs(query(&[])).finish();
    let started = attacker.get(&format!("/oauth/v2/authorize?{q}")).await;
    let known =
        started.header("set-cookie").expect("a cookie for a new browser").split(';').next().unwrap().to_string();
    let victim = Browser::with_cookie(srv, &known);
    let page = victim.get(started.location()).await;
    let r = victim.sign_in(&Browser::request_id(started.location()), &page, "kim", "Kim-Passw0rd1").await;
    assert_eq!(r.status, 303, "{}", r.html);
    let renewed = r.header("set-cookie").expect("a new cookie at sign-in").to_string();
    assert!(!renewed.starts_with(&known), "{renewed}");
    let (_, r) = attacker.authorize(&query(&[("prompt", "none")])).await;
    assert_eq!(param(&r.redirect_params(), "error"), Some("login_required"), "{:?}", r.location);
    let (_, r) = victim.authorize(&query(&[("prompt", "none")])).await;
    assert!(param(&r.redirect_params(), "code").is_some(), "{:?}", r.location);
});

on_both!(wrong_passwords_lockout_and_no_enumeration, |srv| {
    human(srv, "alice", "Wonder-land1").await;
    srv.put("/admin/v1/policies/password/lockout", json!({"maxPasswordAttempts": 3})).await.ok();
    let b = Browser::new(srv);
    let (id, page) = start(srv, &b, &[]).await;
    // The password page repeats what was typed, user or no user: with the names swapped the
    // two pages are the same (the stored login name, alice@domain, would tell who exists).
    let name_page = |name: &'static str| {
        let (b, id, csrf) = (&b, id.clone(), page.csrf());
        async move { b.post(&format!("/ui/login/{id}/loginname"), &[("csrf", &csrf), ("loginname", name)]).await }
    };
    let (known, unknown) = (name_page("ALICE").await, name_page("NOBODY").await);
    assert!(known.html.contains("name=\"password\"") && !known.html.contains("alice@"), "{}", known.html);
    assert_eq!(known.html.replace("ALICE", "X"), unknown.html.replace("NOBODY", "X"));
    let wrong = b.sign_in(&id, &page, "alice", "wrong-password").await;
    assert_eq!(wrong.status, 200);
    assert!(wrong.html.contains("The login name or the password is wrong."), "{}", wrong.html);
    // An unknown user gets the same page and message.
    let p = b.post(&format!("/ui/login/{id}/loginname"), &[("csrf", &page.csrf()), ("loginname", "nobody")]).await;
    assert!(p.html.contains("name=\"password\""));
    let unknown = b.post(&format!("/ui/login/{id}/password"), &[("csrf", &p.csrf()), ("password", "whatever")]).await;
    assert!(unknown.html.contains("The login name or the password is wrong."));
    assert_eq!(srv.count("session").await, 0);
    assert_eq!(srv.count("auth_code").await, 0);
    let alice = || async {
        let mut c = srv.state.db.conn().await.unwrap();
        latch::store::user::get_by_username(&mut c, "alice").await.unwrap().unwrap()
    };
    let failures = |u: &latch::store::user::User| u.human().unwrap().failed_password_attempts;
    assert_eq!(failures(&alice().await), 1);
    // The right password (in another browser) starts the count again.
    let b2 = Browser::new(srv);
    let (id2, page2) = start(srv, &b2, &[]).await;
    assert_eq!(b2.sign_in(&id2, &page2, "alice", "Wonder-land1").await.status, 303);
    assert_eq!(failures(&alice().await), 0);
    // Three failures lock alice; then even the right password is refused.
    for _ in 0..3 {
        b.sign_in(&id, &page, "alice", "wrong-password").await;
    }
    let u = alice().await;
    assert_eq!(u.state, latch::domain::enums::UserState::Locked);
    // The answer is a wrong password's, whatever the password: were it to change when the
    // password is right, lockout would not stop guessing; were it "locked" for any password, it
    // would tell that the account exists.
    let locked = b.sign_in(&id, &page, "alice", "Wonder-land1").await;
    let wrong = b.sign_in(&id, &page, "alice", "wrong-password").await;
    let unknown = b.sign_in(&id, &page, "nobody", "Wonder-land1").await;
    for p in [&locked, &wrong, &unknown] {
        assert_eq!(p.status, 200);
        assert!(p.html.contains("The login name or the password is wrong."), "{}", p.html);
        assert!(!p.html.contains("locked"), "{}", p.html);
    }
    assert_eq!(locked.html, wrong.html);
    assert_eq!(srv.count("session").await, 1, "only the one of the other browser");
    // Unlocked by an administrator, alice signs in and the counter starts again.
    srv.post(&format!("/management/v1/users/{}/_unlock", u.user_id), json!({})).await.ok();
    let ok = b.sign_in(&id, &page, "alice", "Wonder-land1").await;
    assert_eq!(ok.status, 303, "{}", ok.html);
    assert!(param(&ok.redirect_params(), "code").is_some());
    // A deactivated account says so, whatever the password (only administrators deactivate).
    srv.post(&format!("/management/v1/users/{}/_deactivate", u.user_id), json!({})).await.ok();
    let b3 = Browser::new(srv);
    let (id3, page3) = start(srv, &b3, &[]).await;
    let wrong = b3.sign_in(&id3, &page3, "alice", "wrong-password").await;
    assert!(wrong.html.contains("deactivated"), "{}", wrong.html);
});

on_both!(forms_are_bound_to_the_request_and_the_browser, |srv| {
    human(srv, "alice", "Wonder-land1").await;
    let b = Browser::new(srv);
    let (id, page) = start(srv, &b, &[]).await;
    // A tampered CSRF token.
    let r = b.post(&format!("/ui/login/{id}/loginname"), &[("csrf", "forged"), ("loginname", "alice")]).await;
    assert_eq!(r.status, 403);
    let r = b.post(&format!("/ui/login/{id}/loginname"), &[("loginname", "alice")]).await;
    assert_eq!(r.status, 400);
    // Another browser (no cookie, or another cookie) cannot use the request, even with its token.
    let other = Browser::new(srv);
    let r = other.post(&format!("/ui/login/{id}/loginname"), &[("csrf", &page.csrf()), ("loginname", "alice")]).await;
    assert_eq!(r.status, 403);
    let r = other.get(&format!("/ui/login/{id}")).await;
    assert_eq!(r.status, 403);
    let forged = reqwest::Client::new()
        .get(format!("{}/ui/login/{id}", srv.base))
        .header("cookie", "latch_ua=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 403);
    // An unknown or expired request.
    assert_eq!(b.get("/ui/login/nope").await.status, 400);
    srv.clock.advance(srv.settings.request_lifetime + 1);
    let r = b.post(&format!("/ui/login/{id}/loginname"), &[("csrf", &page.csrf()), ("loginname", "alice")]).await;
    assert_eq!(r.status, 400);
    assert!(r.html.contains("expired"), "{}", r.html);
    assert_eq!(srv.count("session").await, 0);
});

on_both!(admin_set_password_must_be_changed, |srv| {
    let r = srv
        .post(
            "/management/v1/users/human",
            json!({"userName": "dora", "profile": {"firstName": "Dora", "lastName": "E"},
                   "email": {"email": "dora@example.com", "isEmailVerified": true}, "initialPassword": "Initial-Pw1"}),
        )
        .await;
    r.ok();
    let b = Browser::new(srv);
    let (id, page) = start(srv, &b, &[]).await;
    let change = b.sign_in(&id, &page, "dora", "Initial-Pw1").await;
    assert!(change.html.contains("name=\"password_repeat\""), "{}", change.html);
    let mismatch = b
        .post(
            &format!("/ui/login/{id}/change_password"),
            &[("csrf", &change.csrf()), ("password", "New-Passw0rd"), ("password_repeat", "Other-Passw0rd")],
        )
        .await;
    assert!(mismatch.html.contains("do not match"));
    let weak = b
        .post(
            &format!("/ui/login/{id}/change_password"),
            &[("csrf", &change.csrf()), ("password", "weak"), ("password_repeat", "weak")],
        )
        .await;
    assert!(weak.html.contains("does not meet the policy"), "{}", weak.html);
    assert_eq!(srv.count("session").await, 0, "no session before the change");
    let done = b
        .post(
            &format!("/ui/login/{id}/change_password"),
            &[("csrf", &change.csrf()), ("password", "New-Passw0rd"), ("password_repeat", "New-Passw0rd")],
        )
        .await;
    assert_eq!(done.status, 303, "{}", done.html);
    assert!(param(&done.redirect_params(), "code").is_some());
    // The new password is the password now.
    let b2 = Browser::new(srv);
    let (id, page) = start(srv, &b2, &[]).await;
    assert_eq!(b2.sign_in(&id, &page, "dora", "New-Passw0rd").await.status, 303);
});

on_both!(a_sign_in_left_half_way_ends_with_the_users_cut_off, |srv| {
    // Someone who knew dora's old password stopped at the password change; an administrator
    // then set a new password (or locked and unlocked her): the old password's check counts no
    // more, so the pending sign-in can neither set a password nor finish.
    let r = srv
        .post(
            "/management/v1/users/human",
            json!({"userName": "dora", "profile": {"firstName": "Dora", "lastName": "E"},
                   "email": {"email": "dora@example.com", "isEmailVerified": true}, "initialPassword": "Initial-Pw1"}),
        )
        .await;
    let dora = r.ok()["userId"].as_str().unwrap().to_string();
    let b = Browser::new(srv);
    let (id, page) = start(srv, &b, &[]).await;
    let change = b.sign_in(&id, &page, "dora", "Initial-Pw1").await;
    assert!(change.html.contains("name=\"password_repeat\""), "{}", change.html);
    srv.clock.advance(1);
    srv.post(
        &format!("/management/v1/users/{dora}/password"),
        json!({"password": "Admin-Passw0rd1", "noChangeRequired": true}),
    )
    .await
    .ok();
    let r = b
        .post(
            &format!("/ui/login/{id}/change_password"),
            &[("csrf", &change.csrf()), ("password", "Mine-Passw0rd1"), ("password_repeat", "Mine-Passw0rd1")],
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.html);
    // The request asks for the password again.
    let again = b.get(&format!("/ui/login/{id}")).await;
    assert!(again.html.contains("name=\"password\"") && !again.html.contains("password_repeat"), "{}", again.html);
    assert_eq!(srv.count("session").await, 0);
    let b2 = Browser::new(srv);
    let (id2, page2) = start(srv, &b2, &[]).await;
    assert_eq!(
        b2.sign_in(&id2, &page2, "dora", "Mine-Passw0rd1").await.status,
        200,
        "the attacker's password was not set"
    );
    let (id2, page2) = start(srv, &b2, &[]).await;
    assert_eq!(b2.sign_in(&id2, &page2, "dora", "Admin-Passw0rd1").await.status, 303);

    // Stopped at the e-mail verification, which could be put off: a lock and an unlock since
    // end that sign-in too.
    let fred = fred_unverified(srv).await;
    let b = Browser::new(srv);
    let (id, page) = start(srv, &b, &[]).await;
    let verify = b.sign_in(&id, &page, "fred", "Fred-Passw0rd").await;
    assert!(verify.html.contains("/verify_email/skip"), "{}", verify.html);
    srv.clock.advance(1);
    srv.post(&format!("/management/v1/users/{fred}/_lock"), json!({})).await.ok();
    srv.post(&format!("/management/v1/users/{fred}/_unlock"), json!({})).await.ok();
    let r = b.post(&format!("/ui/login/{id}/verify_email/skip"), &[("csrf", &verify.csrf())]).await;
    assert_eq!(r.status, 400, "no code after the cut-off: {:?} {}", r.location, r.html);
    assert_eq!(srv.count("session").await, 1, "dora's only");
});

on_both!(a_sign_out_ends_a_sign_in_left_half_way, |srv| {
    // dora stopped at the password change her administrator asked for and then signed out on
    // the same (shared) computer: whoever opens the page from the history next may not set her
    // password, nor finish her sign-in.
    let r = srv
        .post(
            "/management/v1/users/human",
            json!({"userName": "dora", "profile": {"firstName": "Dora", "lastName": "E"},
                   "email": {"email": "dora@example.com", "isEmailVerified": true}, "initialPassword": "Initial-Pw1"}),
        )
        .await;
    r.ok();
    let b = Browser::new(srv);
    let (id, page) = start(srv, &b, &[]).await;
    let change = b.sign_in(&id, &page, "dora", "Initial-Pw1").await;
    assert!(change.html.contains("name=\"password_repeat\""), "{}", change.html);
    // Another browser's sign-in, left at the same step, is not this sign-out's.
    let other = Browser::new(srv);
    let (other_id, other_page) = start(srv, &other, &[]).await;
    let other_change = other.sign_in(&other_id, &other_page, "dora", "Initial-Pw1").await;
    let out = b.sign_out("/oidc/v1/end_session").await;
    assert_eq!(out.status, 200, "{}", out.html);
    let new_password = |csrf: String| {
        [("csrf", csrf), ("password", "Mine-Passw0rd1".into()), ("password_repeat", "Mine-Passw0rd1".into())]
    };
    let fields = new_password(change.csrf());
    let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let r = b.post(&format!("/ui/login/{id}/change_password"), &fields).await;
    assert_eq!(r.status, 400, "{}", r.html);
    assert!(r.html.contains("expired"), "{}", r.html);
    assert_eq!(srv.count("session").await, 0);
    let b2 = Browser::new(srv);
    let (id2, page2) = start(srv, &b2, &[]).await;
    let still = b2.sign_in(&id2, &page2, "dora", "Initial-Pw1").await;
    assert!(still.html.contains("name=\"password_repeat\""), "the password was not changed: {}", still.html);
    let fields = new_password(other_change.csrf());
    let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let r = other.post(&format!("/ui/login/{other_id}/change_password"), &fields).await;
    assert_eq!(r.status, 303, "{}", r.html);
});

on_both!(registration_with_email_verification, |srv| {
    let b = Browser::new(srv);
    // Not allowed by default: the login page says so.
    let (_, page) = start(srv, &b, &[("prompt", "create")]).await;
    assert!(page.html.contains("Registration is not allowed"), "{}", page.html);
    assert!(page.html.contains("name=\"loginname\""));
    srv.put("/admin/v1/policies/login", json!({"allowUsernamePassword": true, "allowRegister": true})).await.ok();
    let (id, page) = start(srv, &b, &[("prompt", "create")]).await;
    assert!(page.html.contains("name=\"first_name\""), "{}", page.html);
    let csrf = page.csrf();
    let register = |pw: &'static str, email: &'static str| {
        let (b, id, csrf) = (&b, id.clone(), csrf.clone());
        async move {
            b.post(
                &format!("/ui/login/{id}/register"),
                &[
                    ("csrf", &csrf),
                    ("email", email),
                    ("first_name", "Erin"),
                    ("last_name", "Reg"),
                    ("user_name", ""),
                    ("password", pw),
                    ("password_repeat", pw),
                ],
            )
            .await
        }
    };
    // Names with line breaks (text for the e-mail greeting) are refused before anything is sent.
    let crafted = b
        .post(
            &format!("/ui/login/{id}/register"),
            &[
                ("csrf", &csrf),
                ("email", "victim@example.com"),
                ("first_name", "Erin\r\nYour account is suspended"),
                ("last_name", "Reg"),
                ("user_name", ""),
                ("password", "Sign-up-Pw1"),
                ("password_repeat", "Sign-up-Pw1"),
            ],
        )
        .await;
    assert!(crafted.html.contains("control characters"), "{}", crafted.html);
    assert!(!srv.settings.data_dir.join("outbox").exists(), "no e-mail");
    let bad = register("Sign-up-Pw1", "not-an-email").await;
    assert!(bad.html.contains("not valid"), "{}", bad.html);
    let weak = register("weak", "erin@example.com").await;
    assert!(weak.html.contains("does not meet"), "{}", weak.html);
    assert_eq!(srv.count("account").await, 2, "nothing was created");
    let verify = register("Sign-up-Pw1", "erin@example.com").await;
    assert!(verify.html.contains("name=\"code\""), "{}", verify.html);
    assert!(verify.html.contains("erin@example.com"));
    let code = outbox_code(srv, "erin@example.com").await;
    // The address is not verified yet: the message names no one (anyone may register with any
    // address and any name, which would otherwise be their text in latch's message).
    let sent = srv.outbox_to("erin@example.com");
    assert_eq!(sent.len(), 1);
    assert!(!sent[0].contains("Erin"), "{}", sent[0]);
    assert!(sent[0].contains("Hello,"), "{}", sent[0]);
    let wrong = b.post(&format!("/ui/login/{id}/verify_email"), &[("csrf", &csrf), ("code", "WRONG000")]).await;
    assert!(wrong.html.contains("The code is wrong"), "{}", wrong.html);
    let done =
        b.post(&format!("/ui/login/{id}/verify_email"), &[("csrf", &csrf), ("code", &code.to_lowercase())]).await;
    assert_eq!(done.status, 303, "{}", done.html);
    assert!(param(&done.redirect_params(), "code").is_some());
    let mut c = srv.state.db.conn().await.unwrap();
    let u = latch::store::user::get_by_username(&mut c, "erin@example.com").await.unwrap().unwrap();
    assert!(u.human().unwrap().email_verified);
    assert_eq!(u.state, latch::domain::enums::UserState::Active);
    drop(c);
    // The name is taken now.
    let b2 = Browser::new(srv);
    let (id, page) = start(srv, &b2, &[("prompt", "create")]).await;
    let taken = b2
        .post(
            &format!("/ui/login/{id}/register"),
            &[
                ("csrf", &page.csrf()),
                ("email", "erin@example.com"),
                ("first_name", "E"),
                ("last_name", "R"),
                ("user_name", ""),
                ("password", "Sign-up-Pw1"),
                ("password_repeat", "Sign-up-Pw1"),
            ],
        )
        .await;
    assert!(taken.html.contains("taken"), "{}", taken.html);
});

on_both!(unverified_email_can_be_skipped_and_initial_password_by_code, |srv| {
    // An unverified address: the verification page, which may be put off.
    fred_unverified(srv).await;
    let b = Browser::new(srv);
    let (id, page) = start(srv, &b, &[]).await;
    // Codes only for the step the flow is at: none for an initial password when the user has
    // one, none for the address before the password.
    let named = b.post(&format!("/ui/login/{id}/loginname"), &[("csrf", &page.csrf()), ("loginname", "fred")]).await;
    for purpose in ["init_password", "verify_email"] {
        let r = b.post(&format!("/ui/login/{id}/{purpose}/resend"), &[("csrf", &named.csrf())]).await;
        assert_eq!(r.status, 400, "{purpose}: {}", r.html);
    }
    // Nor can a code be tried there before the password: whoever typed the name would spend the
    // attempts of the code fred was sent.
    let r = b.post(&format!("/ui/login/{id}/verify_email"), &[("csrf", &named.csrf()), ("code", "AAAAAAAA")]).await;
    assert_eq!(r.status, 400, "{}", r.html);
    let verify = b.sign_in(&id, &page, "fred", "Fred-Passw0rd").await;
    assert!(verify.html.contains("/verify_email/skip"), "{}", verify.html);
    let first = outbox_code(srv, "fred@example.com").await;
    // Another code only after a minute: the pages would otherwise let anyone flood the mailbox
    // and keep replacing the code its owner is about to type.
    let resent = b.post(&format!("/ui/login/{id}/verify_email/resend"), &[("csrf", &verify.csrf())]).await;
    assert!(resent.html.contains("A new code is on its way"));
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(srv.outbox_to("fred@example.com").len(), 1);
    assert_eq!(newest_code(srv, "fred@example.com"), first);
    srv.clock.advance(61);
    let resent = b.post(&format!("/ui/login/{id}/verify_email/resend"), &[("csrf", &verify.csrf())]).await;
    assert!(resent.html.contains("A new code is on its way"));
    for _ in 0..250 {
        if srv.outbox_to("fred@example.com").len() == 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(srv.outbox_to("fred@example.com").len(), 2);
    assert_ne!(newest_code(srv, "fred@example.com"), first);
    // A code spent by wrong tries is replaced only after the minute too: spending tries (anyone
    // at this step can) does not speed up the mails.
    for _ in 0..5 {
        let r =
            b.post(&format!("/ui/login/{id}/verify_email"), &[("csrf", &verify.csrf()), ("code", "AAAAAAAA")]).await;
        assert_eq!(r.status, 200, "{}", r.html);
    }
    b.post(&format!("/ui/login/{id}/verify_email/resend"), &[("csrf", &verify.csrf())]).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(srv.outbox_to("fred@example.com").len(), 2);
    srv.clock.advance(61);
    b.post(&format!("/ui/login/{id}/verify_email/resend"), &[("csrf", &verify.csrf())]).await;
    for _ in 0..250 {
        if srv.outbox_to("fred@example.com").len() == 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(srv.outbox_to("fred@example.com").len(), 3);
    let skipped = b.post(&format!("/ui/login/{id}/verify_email/skip"), &[("csrf", &verify.csrf())]).await;
    assert_eq!(skipped.status, 303);

    // A user without a password gets a code by e-mail and sets one.
    let r = srv
        .post("/management/v1/users/human", json!({"userName": "gina", "profile": {"firstName": "Gina", "lastName": "G"}, "email": {"email": "gina@example.com"}}))
        .await;
    let gina = r.ok()["userId"].as_str().unwrap().to_string();
    let b = Browser::new(srv);
    let (id, page) = start(srv, &b, &[]).await;
    let named = b.post(&format!("/ui/login/{id}/loginname"), &[("csrf", &page.csrf()), ("loginname", "gina")]).await;
    assert!(named.html.contains("/init_password/request"), "{}", named.html);
    let init = b.post(&format!("/ui/login/{id}/init_password/request"), &[("csrf", &named.csrf())]).await;
    assert!(init.html.contains(&format!("action=\"/ui/login/{id}/init_password\"")), "{}", init.html);
    // The address is corrected before the code is used: the code sent to the old one no longer
    // sets a password (nor proves the new address); a new code goes to the new address.
    let stale = outbox_code(srv, "gina@example.com").await;
    srv.put(&format!("/management/v1/users/{gina}/email"), json!({"email": "gina@example.org"})).await.ok();
    let refused = b
        .post(
            &format!("/ui/login/{id}/init_password"),
            &[
                ("csrf", &init.csrf()),
                ("code", &stale),
                ("password", "Gina-Passw0rd"),
                ("password_repeat", "Gina-Passw0rd"),
            ],
        )
        .await;
    assert_ne!(refused.status, 303, "{}", refused.html);
    let mut c = srv.state.db.conn().await.unwrap();
    let u = latch::store::user::get(&mut c, &gina).await.unwrap().unwrap();
    assert!(u.human().unwrap().password_hash.is_none());
    drop(c);
    let resent = b.post(&format!("/ui/login/{id}/init_password/resend"), &[("csrf", &init.csrf())]).await;
    assert_eq!(resent.status, 200, "{}", resent.html);
    let code = outbox_code(srv, "gina@example.org").await;
    // Typos in the repeated password, more than the code's five tries: they spend none of them.
    for _ in 0..6 {
        let typo = b
            .post(
                &format!("/ui/login/{id}/init_password"),
                &[
                    ("csrf", &init.csrf()),
                    ("code", &code),
                    ("password", "Gina-Passw0rd"),
                    ("password_repeat", "Gina-Passw0rb"),
                ],
            )
            .await;
        assert_eq!(typo.status, 200, "{}", typo.html);
    }
    let done = b
        .post(
            &format!("/ui/login/{id}/init_password"),
            &[
                ("csrf", &init.csrf()),
                ("code", &code),
                ("password", "Gina-Passw0rd"),
                ("password_repeat", "Gina-Passw0rd"),
            ],
        )
        .await;
    assert_eq!(done.status, 303, "{}", done.html);
    let mut c = srv.state.db.conn().await.unwrap();
    let u = latch::store::user::get_by_username(&mut c, "gina").await.unwrap().unwrap();
    assert_eq!(u.state, latch::domain::enums::UserState::Active);
    assert!(u.human().unwrap().email_verified, "the code proved the address");
});

on_both!(no_password_yet_tells_nothing_about_the_account, |srv| {
    // gina has no password, fred has one, nobody does not exist: each asks for a code on the
    // password page and gets the same pages; gina is sent an initial-password code, fred a
    // password-reset code, nobody nothing.
    srv.post("/management/v1/users/human", json!({"userName": "gina", "profile": {"firstName": "Gina", "lastName": "G"}, "email": {"email": "gina@example.com"}}))
        .await
        .ok();
    let fred = srv
        .post("/management/v1/users/human", json!({"userName": "fred", "profile": {"firstName": "Fred", "lastName": "F"}, "email": {"email": "fred@example.com"}}))
        .await;
    let fred = fred.ok()["userId"].as_str().unwrap().to_string();
    srv.post(
        &format!("/management/v1/users/{fred}/password"),
        json!({"password": "Fred-Passw0rd", "noChangeRequired": true}),
    )
    .await
    .ok();
    let mut pages = Vec::new();
    for name in ["gina", "fred", "nobody"] {
        let b = Browser::new(srv);
        let (id, page) = start(srv, &b, &[]).await;
        let named = b.post(&format!("/ui/login/{id}/loginname"), &[("csrf", &page.csrf()), ("loginname", name)]).await;
        let init = b.post(&format!("/ui/login/{id}/init_password/request"), &[("csrf", &named.csrf())]).await;
        assert_eq!(init.status, 200, "{name}: {}", init.html);
        let wrong = b
            .post(
                &format!("/ui/login/{id}/init_password"),
                &[
                    ("csrf", &init.csrf()),
                    ("code", "WRONG000"),
                    ("password", "New-Passw0rd"),
                    ("password_repeat", "New-Passw0rd"),
                ],
            )
            .await;
        assert!(wrong.html.contains("The code is wrong or no longer valid."), "{name}: {}", wrong.html);
        let same = |html: &str| html.replace(&id, "ID").replace(&page.csrf(), "CSRF").replace(name, "NAME");
        pages.push((name, same(&init.html), same(&wrong.html)));
        // Back to the start from the code page.
        let back = b.post(&format!("/ui/login/{id}/other"), &[("csrf", &init.csrf())]).await;
        assert!(back.html.contains("name=\"loginname\""), "{}", back.html);
    }
    for (name, init, wrong) in &pages[1..] {
        assert_eq!(init, &pages[0].1, "the code page for {name}");
        assert_eq!(wrong, &pages[0].2, "a wrong code for {name}");
    }
    outbox_code(srv, "gina@example.com").await;
    assert_eq!(srv.outbox_to("gina@example.com").len(), 1);
    // fred is sent a password-reset code (the login policy offers reset by default).
    outbox_code(srv, "fred@example.com").await;
    assert_eq!(srv.outbox_to("fred@example.com").len(), 1);
    assert!(srv.outbox_to("fred@example.com")[0].contains("Reset your password"));
    // fred's password still works, and the request is only offered at the password step.
    let b = Browser::new(srv);
    let (id, page) = start(srv, &b, &[]).await;
    let early = b.post(&format!("/ui/login/{id}/init_password/request"), &[("csrf", &page.csrf())]).await;
    assert_eq!(early.status, 400);
    let signed_in = b.sign_in(&id, &page, "fred", "Fred-Passw0rd").await;
    assert!(signed_in.html.contains("/verify_email"), "the password was right: {}", signed_in.html);
});

on_both!(a_stored_name_with_a_line_break_adds_no_line_to_a_mail, |srv| {
    // Forms and the API refuse such names; a row from before that rule may still hold one.
    let r = srv
        .post("/management/v1/users/human", json!({"userName": "eve", "profile": {"firstName": "Eve", "lastName": "E"}, "email": {"email": "eve@example.com", "isEmailVerified": true}}))
        .await;
    let eve = r.ok()["userId"].as_str().unwrap().to_string();
    srv.post(
        &format!("/management/v1/users/{eve}/password"),
        json!({"password": "Eve-Passw0rd1", "noChangeRequired": true}),
    )
    .await
    .ok();
    let mut c = srv.state.db.conn().await.unwrap();
    sqlx::query("UPDATE account SET first_name = $1, display_name = $1 WHERE user_id = $2")
        .bind("Eve\r\nVisit evil.example")
        .bind(&eve)
        .execute(&mut *c)
        .await
        .unwrap();
    drop(c);
    // A verified address: the message greets the user by name.
    srv.post(&format!("/management/v1/users/{eve}/password/_reset"), json!({})).await.ok();
    outbox_code(srv, "eve@example.com").await;
    let mail = srv.outbox_to("eve@example.com").pop().unwrap();
    assert!(mail.contains("Eve  Visit evil.example"), "{mail}");
    assert!(!mail.lines().any(|l| l.starts_with("Visit evil")), "{mail}");
});

on_both!(tries_at_a_code_sent_at_once_count_each, |srv| {
    use latch::store::user_code::{self, CodeCheck};
    let gina = srv
        .post("/management/v1/users/human", json!({"userName": "gina", "profile": {"firstName": "Gina", "lastName": "G"}, "email": {"email": "gina@example.com"}}))
        .await;
    let gina = gina.ok()["userId"].as_str().unwrap().to_string();
    let mut c = srv.state.db.conn().await.unwrap();
    user_code::put(&mut c, &gina, "init_password", b"right", 0, i64::MAX, user_code::Replace::Always).await.unwrap();
    drop(c);
    // Twenty wrong tries at once, each on a connection of its own: five are counted as wrong,
    // the others find the code used up, and so does the right one after them.
    let mut tries = tokio::task::JoinSet::new();
    for i in 0..20 {
        let (db, gina) = (srv.state.db.clone(), gina.clone());
        tries.spawn(async move {
            let mut c = db.conn().await.unwrap();
            user_code::verify(&mut c, &gina, "init_password", &[format!("wrong{i}").into_bytes()], 1, 5).await.unwrap()
        });
    }
    let results: Vec<CodeCheck> = tries.join_all().await;
    assert_eq!(results.iter().filter(|r| **r == CodeCheck::Wrong).count(), 5, "{results:?}");
    let mut c = srv.state.db.conn().await.unwrap();
    assert_eq!(
        user_code::verify(&mut c, &gina, "init_password", &[b"right".to_vec()], 1, 5).await.unwrap(),
        CodeCheck::Gone
    );
    // A fresh code: verified (not used up), then consumed once.
    user_code::put(&mut c, &gina, "init_password", b"again", 0, i64::MAX, user_code::Replace::Always).await.unwrap();
    assert_eq!(
        user_code::verify(&mut c, &gina, "init_password", &[b"again".to_vec()], 1, 5).await.unwrap(),
        CodeCheck::Valid
    );
    assert!(user_code::consume(&mut c, &gina, "init_password", &[b"again".to_vec()], 1).await.unwrap());
    assert!(!user_code::consume(&mut c, &gina, "init_password", &[b"again".to_vec()], 1).await.unwrap());
});

on_both!(german_pages_and_security_headers, |srv| {
    human(srv, "alice", "Wonder-land1").await;
    let b = Browser::new(srv);
    let (id, page) = start(srv, &b, &[("ui_locales", "de-CH en")]).await;
    assert!(page.html.contains("<html lang=\"de\">"));
    assert!(page.html.contains("Anmeldename"), "{}", page.html);
    let wrong = b.sign_in(&id, &page, "alice", "falsch").await;
    assert!(wrong.html.contains("Der Anmeldename oder das Passwort ist falsch."), "{}", wrong.html);
    // Accept-Language when ui_locales says nothing.
    let mut b2 = Browser::new(srv);
    b2.accept_language = Some("de-DE,de;q=0.9".into());
    let (_, page2) = start(srv, &b2, &[]).await;
    assert!(page2.html.contains("Anmelden"));
    // The logout endpoint's errors are German too.
    let out = b2.get("/oidc/v1/end_session?state=a&state=b").await;
    assert_eq!(out.status, 400);
    assert!(out.html.contains("Der Parameter state kommt mehrfach vor."), "{}", out.html);

    let csp = page.header("content-security-policy").unwrap();
    assert!(csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"), "{csp}");
    assert!(!csp.contains("script-src"), "no script on login pages");
    assert!(csp.contains("form-action 'self' https://app.example.com"), "{csp}");
    assert_eq!(page.header("cache-control"), Some("no-store"));
    assert_eq!(page.header("referrer-policy"), Some("no-referrer"));
    assert_eq!(page.header("x-frame-options"), Some("DENY"));
    assert!(!page.html.contains("<script"), "pages work without JavaScript");
    assert!(page.html.contains("<label for=\"loginname\">"), "labelled inputs");
    // The cookie only holds a random id and has the right flags.
    let first = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let (client_id, _, _) = oidc_app(srv, json!({"name": "c2"})).await;
    let r = first
        .get(format!(
            "{}/oauth/v2/authorize?client_id={client_id}&redirect_uri={CB}&response_type=code&scope=openid",
            srv.base
        ))
        .send()
        .await
        .unwrap();
    let cookie = r.headers().get("set-cookie").unwrap().to_str().unwrap().to_string();
    assert!(
        cookie.starts_with("latch_ua=")
            && cookie.contains("HttpOnly")
            && cookie.contains("SameSite=Lax")
            && cookie.contains("Path=/"),
        "{cookie}"
    );
    assert!(!cookie.contains("Secure"), "not https here");
    let css = reqwest::get(format!("{}/ui/static/latch.css", srv.base)).await.unwrap();
    assert_eq!(css.headers().get("content-type").unwrap(), "text/css; charset=utf-8");
});

#[tokio::test]
async fn a_mail_server_that_does_not_answer_holds_up_no_sign_up() {
    // A server that takes connections and never says a word: the SMTP client waits for its
    // greeting until latch gives the message up (30 s).
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = silent.local_addr().unwrap().port();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((s, _)) = silent.accept().await {
            open.push(s);
        }
    });
    let srv = TestServer::start_with(crate::harness::Backend::Sqlite, |c| {
        c.smtp.host = Some("127.0.0.1".into());
        c.smtp.port = Some(u32::from(port));
        c.smtp.tls = Some("none".into());
        c.smtp.from = Some("latch <noreply@example.com>".into());
    })
    .await;
    srv.put("/admin/v1/policies/login", json!({"allowUsernamePassword": true, "allowRegister": true})).await.ok();
    let b = Browser::new(&srv);
    let (id, page) = start(&srv, &b, &[("prompt", "create")]).await;
    let csrf = page.csrf();
    let fields = [
        ("csrf", csrf.as_str()),
        ("email", "nora@example.com"),
        ("first_name", "Nora"),
        ("last_name", "N"),
        ("user_name", ""),
        ("password", "Sign-up-Pw1"),
        ("password_repeat", "Sign-up-Pw1"),
    ];
    let url = format!("/ui/login/{id}/register");
    let posted = b.post(&url, &fields);
    // The verification page comes at once; the message waits for the mail server on its own.
    let page = tokio::time::timeout(std::time::Duration::from_secs(5), posted)
        .await
        .expect("the answer came long before the mail server's timeout");
    assert!(page.html.contains("name=\"code\"") && page.html.contains("nora@example.com"), "{}", page.html);
    held.abort();
    srv.stop().await;
}

#[tokio::test]
async fn https_issuers_get_secure_host_cookies() {
    let srv =
        TestServer::start_with(crate::harness::Backend::Sqlite, |c| c.external_url = "https://id.example.com".into())
            .await;
    let (client_id, _, _) = oidc_app(&srv, json!({})).await;
    let r = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(format!(
            "{}/oauth/v2/authorize?client_id={client_id}&redirect_uri={CB}&response_type=code&scope=openid",
            srv.url("")
        ))
        .send()
        .await
        .unwrap();
    let cookie = r.headers().get("set-cookie").unwrap().to_str().unwrap().to_string();
    assert!(cookie.starts_with("__Host-latch_ua=") && cookie.contains("; Secure"), "{cookie}");
    srv.stop().await;
}

// The end of a sign-in in one round trip (two on PostgreSQL): only a request still pending and
// still bound to the browser's old cookie leads to a session, only a new session to a stored
// code (a renewed one keeps its id, which the caller's code must name), and the browser's
// sessions and other requests move to its new cookie. On SQLite each statement is tied to the
// one before by changes().
on_both!(finishing_a_sign_in_in_the_store_writes_all_or_nothing, |srv| {
    use latch::store::auth_request::{self, AuthRequestRow};
    use latch::store::code::NewCode;
    use latch::store::session::{self, NewSession};
    use latch::store::signin::{self, Finished};
    let user_id = human(srv, "alice", "Wonder-land1").await;
    let mut c = srv.state.db.conn().await.unwrap();
    let t = crate::harness::now();
    let request = |id: &str, browser: &[u8]| AuthRequestRow {
        auth_request_id: id.into(),
        ua_key: browser.to_vec(),
        client_id: "client".into(),
        params: "{}".into(),
        csrf_token: "csrf".into(),
        user_id: Some(user_id.clone()),
        progress: "{}".into(),
        created_at: t,
        expires_at: t + 600,
    };
    let session = |id: &str, auth_time: i64, browser: &[u8]| NewSession {
        session_id: id.into(),
        ua_key: browser.to_vec(),
        user_id: user_id.clone(),
        auth_time,
        amr: vec!["pwd".into()],
        now: auth_time,
        expires_at: auth_time + 3600,
    };
    let code = |hash: &'static [u8]| NewCode {
        code_hash: hash,
        grant_id: "grant",
        client_id: "client",
        data: r#"{"session":"s-1"}"#,
        refresh: None,
        created_at: t,
        expires_at: t + 60,
    };
    let count = |table: &'static str| {
        let db = srv.state.db.clone();
        async move {
            let sql = format!("SELECT COUNT(*) FROM {table}");
            let (n,): (i64,) = sqlx::query_as(&sql).fetch_one(&mut *db.conn().await.unwrap()).await.unwrap();
            n
        }
    };
    let browser_of = async |c: &mut latch::store::Conn, id: &str| {
        auth_request::get_with_user(c, id).await.unwrap().map(|(r, _)| r.ua_key)
    };
    auth_request::insert(&mut c, &request("r-1", b"b0")).await.unwrap();
    auth_request::insert(&mut c, &request("r-2", b"b0")).await.unwrap();

    // A new session: request retired, session and code stored under the new cookie b1, the
    // browser's other request moved to it.
    match signin::finish(&mut c, "r-1", b"b0", &session("s-1", t, b"b1"), &code(b"code-1")).await.unwrap() {
        Finished::Done { session, code_stored } => {
            assert!(code_stored);
            assert_eq!((session.session_id.as_str(), session.user_id.as_str()), ("s-1", user_id.as_str()));
            assert_eq!((session.auth_time, session.amr.clone(), session.expires_at), (t, vec!["pwd".into()], t + 3600));
        }
        other => panic!("{other:?}"),
    }
    assert!(auth_request::get_with_user(&mut c, "r-1").await.unwrap().is_none());
    assert_eq!(browser_of(&mut c, "r-2").await, Some(b"b1".to_vec()));
    assert_eq!(session::of_browser(&mut c, b"b1", t).await.unwrap().len(), 1);
    let (data,): (String,) = sqlx::query_as("SELECT data FROM auth_code WHERE code_hash = $1")
        .bind(b"code-1".to_vec())
        .fetch_one(&mut *c)
        .await
        .unwrap();
    assert_eq!(data, r#"{"session":"s-1"}"#);

    // The same request again (a second tab, a replay): nothing is written or moved.
    let again = signin::finish(&mut c, "r-1", b"b1", &session("s-x", t + 5, b"b9"), &code(b"code-x")).await.unwrap();
    assert!(matches!(again, Finished::RequestGone), "{again:?}");
    assert_eq!((count("session").await, count("auth_code").await), (1, 1));
    assert_eq!(browser_of(&mut c, "r-2").await, Some(b"b1".to_vec()));

    // A tab that still knows the cookie before the last renewal (b0): its request moved on
    // with the browser, so it counts as gone and nothing is written or moved.
    let stale = signin::finish(&mut c, "r-2", b"b0", &session("s-y", t + 6, b"b8"), &code(b"code-y")).await.unwrap();
    assert!(matches!(stale, Finished::RequestGone), "{stale:?}");
    assert_eq!(browser_of(&mut c, "r-2").await, Some(b"b1".to_vec()));
    assert_eq!((count("session").await, count("auth_code").await), (1, 1));

    // The browser signs the same user in again: the session moves to the new cookie b2 and is
    // renewed there, keeping its id; the code offered names another id and is not stored.
    match signin::finish(&mut c, "r-2", b"b1", &session("s-2", t + 10, b"b2"), &code(b"code-2")).await.unwrap() {
        Finished::Done { session, code_stored } => {
            assert!(!code_stored);
            assert_eq!((session.session_id.as_str(), session.auth_time, session.created_at), ("s-1", t + 10, t));
        }
        other => panic!("{other:?}"),
    }
    assert!(auth_request::get_with_user(&mut c, "r-2").await.unwrap().is_none());
    assert!(session::of_browser(&mut c, b"b1", t).await.unwrap().is_empty());
    assert_eq!(session::of_browser(&mut c, b"b2", t).await.unwrap().len(), 1);
    assert_eq!((count("session").await, count("auth_code").await, count("auth_request").await), (1, 1, 0));

    // Two tabs of one browser finishing at once, on two connections: one signs in, the other
    // finds its request taken along by the first's renewal (no error, no deadlock), every time.
    for round in 0..10u8 {
        let (old, a, b) = ([b'o', round], [b'a', round], [b'b', round]);
        let (ra, rb) = (format!("ra-{round}"), format!("rb-{round}"));
        auth_request::insert(&mut c, &request(&ra, &old)).await.unwrap();
        auth_request::insert(&mut c, &request(&rb, &old)).await.unwrap();
        let (mut c1, mut c2) = (srv.state.db.conn().await.unwrap(), srv.state.db.conn().await.unwrap());
        let (sa, sb) = (session(&format!("sa-{round}"), t, &a), session(&format!("sb-{round}"), t, &b));
        let (ka, kb) = (code(b"code-a"), code(b"code-b"));
        let (x, y) =
            tokio::join!(signin::finish(&mut c1, &ra, &old, &sa, &ka), signin::finish(&mut c2, &rb, &old, &sb, &kb),);
        let (x, y) = (x.unwrap(), y.unwrap());
        // The winner's request is retired with a session under its key; the loser's request
        // moved along with the browser and is still pending; nothing is under the loser's key.
        let (winner, loser, loser_request) = match (&x, &y) {
            (Finished::Done { .. }, Finished::RequestGone) => (a, b, &rb),
            (Finished::RequestGone, Finished::Done { .. }) => (b, a, &ra),
            _ => panic!("round {round}: {x:?} {y:?}"),
        };
        assert_eq!(browser_of(&mut c, loser_request).await, Some(winner.to_vec()), "round {round}");
        assert_eq!(session::of_browser(&mut c, &winner, t).await.unwrap().len(), 1, "round {round}");
        assert!(session::of_browser(&mut c, &loser, t).await.unwrap().is_empty(), "round {round}");
        assert_eq!(count("auth_code").await, 2, "round {round}: code-1 and the winner's");
        sqlx::query("DELETE FROM auth_request").execute(&mut *c).await.unwrap();
        sqlx::query("DELETE FROM auth_code WHERE code_hash <> $1")
            .bind(b"code-1".to_vec())
            .execute(&mut *c)
            .await
            .unwrap();
    }

    // The same move on its own (the implicit flow's): the browser's sessions and requests go to
    // the new key only while the request is bound to the old one.
    auth_request::insert(&mut c, &request("m-1", b"m0")).await.unwrap();
    auth_request::insert(&mut c, &request("m-2", b"m0")).await.unwrap();
    session::upsert(&mut c, &session("ms-1", t, b"m0")).await.unwrap();
    assert!(session::move_browser(&mut c, "m-1", b"m0", b"m1").await.unwrap());
    assert_eq!(
        (browser_of(&mut c, "m-1").await, browser_of(&mut c, "m-2").await),
        (Some(b"m1".to_vec()), Some(b"m1".to_vec()))
    );
    assert_eq!(session::of_browser(&mut c, b"m1", t).await.unwrap().len(), 1);
    assert!(!session::move_browser(&mut c, "m-2", b"m0", b"m2").await.unwrap(), "no longer bound to m0");
    assert!(!session::move_browser(&mut c, "gone", b"m1", b"m2").await.unwrap(), "no such request");
    assert_eq!(browser_of(&mut c, "m-2").await, Some(b"m1".to_vec()));
    assert_eq!(session::of_browser(&mut c, b"m1", t).await.unwrap().len(), 1);
});

async fn authorize_with(b: &Browser, q: &[(&'static str, String)]) -> (Option<String>, crate::browser::Page) {
    let q: Vec<(&str, &str)> = q.iter().map(|(k, v)| (*k, v.as_str())).collect();
    b.authorize(&q).await
}

on_both!(a_forgotten_password_is_reset_by_code, |srv| {
    let fred = human(srv, "fred", "Fred-Passw0rd").await;
    let (client_id, secret, _) = oidc_app(srv, json!({})).await;
    let (verifier, challenge) = pkce();
    let query = |prompt: &'static str| {
        let mut q = vec![
            ("client_id", client_id.clone()),
            ("redirect_uri", CB.to_string()),
            ("response_type", "code".to_string()),
            ("scope", "openid".to_string()),
            ("code_challenge", challenge.clone()),
            ("code_challenge_method", "S256".to_string()),
        ];
        if !prompt.is_empty() {
            q.push(("prompt", prompt.to_string()));
        }
        q
    };
    // fred is signed in in one browser.
    let first = Browser::new(srv);
    let (id, page) = authorize_with(&first, &query("")).await;
    let done = first.sign_in(&id.unwrap(), &page, "fred", "Fred-Passw0rd").await;
    let code = param(&done.redirect_params(), "code").unwrap().to_string();
    let tokens =
        crate::token::exchange_code(srv, Some((&client_id, secret.as_deref().unwrap())), &code, &verifier).await;
    let access = tokens.ok()["access_token"].as_str().unwrap().to_string();
    let userinfo = |at: String| async move {
        reqwest::Client::new().get(srv.url("/oidc/v1/userinfo")).bearer_auth(at).send().await.unwrap().status()
    };
    assert_eq!(userinfo(access.clone()).await, 200);
    srv.clock.advance(1);

    // In another, he has forgotten it: a code by e-mail, then a new password.
    let b = Browser::new(srv);
    let (id, page) = authorize_with(&b, &query("")).await;
    let id = id.unwrap();
    let named = b.post(&format!("/ui/login/{id}/loginname"), &[("csrf", &page.csrf()), ("loginname", "fred")]).await;
    assert!(named.html.contains("Forgot your password"), "{}", named.html);
    let code_page = b.post(&format!("/ui/login/{id}/init_password/request"), &[("csrf", &named.csrf())]).await;
    assert!(code_page.html.contains(&format!("action=\"/ui/login/{id}/init_password\"")), "{}", code_page.html);
    let code = outbox_code(srv, "fred@example.com").await;
    assert!(srv.outbox_to("fred@example.com")[0].contains("Reset your password"));
    let set = |code: String, pw: &'static str| {
        let (b, id, csrf) = (&b, id.clone(), code_page.csrf());
        async move {
            b.post(
                &format!("/ui/login/{id}/init_password"),
                &[("csrf", &csrf), ("code", &code), ("password", pw), ("password_repeat", pw)],
            )
            .await
        }
    };
    let wrong = set("WRONG000".into(), "Fred-Neu-Passw0rd").await;
    assert!(wrong.html.contains("The code is wrong or no longer valid."), "{}", wrong.html);
    let weak = set(code.clone(), "short").await;
    assert_eq!(weak.status, 200, "the password rules apply: {}", weak.html);
    let done = set(code.clone(), "Fred-Neu-Passw0rd").await;
    assert!(param(&done.redirect_params(), "code").is_some(), "{:?} {}", done.location, done.html);
    // The code is spent, the old password no longer works, the new one does.
    let again = Browser::new(srv);
    let (id2, page2) = authorize_with(&again, &query("")).await;
    let old = again.sign_in(&id2.unwrap(), &page2, "fred", "Fred-Passw0rd").await;
    assert!(old.html.contains("The login name or the password is wrong."), "{}", old.html);
    let (id2, page2) = authorize_with(&again, &query("")).await;
    let new = again.sign_in(&id2.unwrap(), &page2, "fred", "Fred-Neu-Passw0rd").await;
    assert!(param(&new.redirect_params(), "code").is_some(), "{}", new.html);
    // The reset ended fred's earlier session and its tokens.
    let (_, sso) = authorize_with(&first, &query("none")).await;
    assert_eq!(param(&sso.redirect_params(), "error"), Some("login_required"), "{:?}", sso.location);
    assert_eq!(userinfo(access).await, 401);

    // An administrator may send the code; not by text message, not to a user without a password.
    let reset_path = format!("/management/v1/users/{fred}/password/_reset");
    let reset = |body: serde_json::Value| srv.post(&reset_path, body);
    reset(json!({"type": "TYPE_SMS"})).await.err(400, 9);
    reset(json!({"type": "TYPE_NOPE"})).await.err(400, 3);
    let sent = srv.outbox_to("fred@example.com").len();
    reset(json!({"type": "TYPE_EMAIL"})).await.ok();
    reset(json!({})).await.ok();
    assert_eq!(srv.outbox_to("fred@example.com").len(), sent + 2);
    let r = srv
        .post("/management/v1/users/human", json!({"userName": "gina", "profile": {"firstName": "Gina", "lastName": "G"}, "email": {"email": "gina@example.com"}}))
        .await;
    let gina = r.ok()["userId"].as_str().unwrap().to_string();
    srv.post(&format!("/management/v1/users/{gina}/password/_reset"), json!({})).await.err(400, 9);
    let (robot, _) = srv.machine_with_roles(None, "robot", &[]).await;
    srv.post(&format!("/management/v1/users/{robot}/password/_reset"), json!({})).await.err(400, 9);
    srv.post("/management/v1/users/404/password/_reset", json!({})).await.err(404, 5);
    // The code an administrator sent stays usable when fred opens the code page later (the page
    // sends one only when none is usable), and no new mail goes out.
    srv.clock.advance(120);
    let mailed = newest_code(srv, "fred@example.com");
    let sent = srv.outbox_to("fred@example.com").len();
    let b = Browser::new(srv);
    let (id, page) = authorize_with(&b, &query("")).await;
    let id = id.unwrap();
    let named = b.post(&format!("/ui/login/{id}/loginname"), &[("csrf", &page.csrf()), ("loginname", "fred")]).await;
    let code_page = b.post(&format!("/ui/login/{id}/init_password/request"), &[("csrf", &named.csrf())]).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(srv.outbox_to("fred@example.com").len(), sent, "the administrator's code stands");
    let done = b
        .post(
            &format!("/ui/login/{id}/init_password"),
            &[
                ("csrf", &code_page.csrf()),
                ("code", &mailed),
                ("password", "Fred-Drittes-Passw0rd"),
                ("password_repeat", "Fred-Drittes-Passw0rd"),
            ],
        )
        .await;
    assert!(param(&done.redirect_params(), "code").is_some(), "{:?} {}", done.location, done.html);
    // A password set another way voids a pending reset code.
    reset(json!({})).await.ok();
    let pending = newest_code(srv, "fred@example.com");
    srv.post(&format!("/management/v1/users/{fred}/password"), json!({"password": "Fred-Admin-Passw0rd1"})).await.ok();
    let mut c = srv.state.db.conn().await.unwrap();
    let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM user_code WHERE user_id = $1")
        .bind(&fred)
        .fetch_one(&mut *c)
        .await
        .unwrap();
    assert_eq!(n, 0, "the reset code {pending} is void");
    drop(c);
    // Nor is a code sent to a user who cannot sign in.
    srv.post(&format!("/management/v1/users/{fred}/_lock"), json!({})).await.ok();
    reset(json!({})).await.err(400, 9);
    srv.post(&format!("/management/v1/users/{fred}/_unlock"), json!({})).await.ok();

    // Spending a code's tries and starting a new sign-in does not mail faster than once a
    // minute either.
    srv.clock.advance(61);
    let sent = srv.outbox_to("fred@example.com").len();
    for (round, mails) in [(0, 1), (1, 1), (2, 2)] {
        if round == 2 {
            srv.clock.advance(61);
        }
        let b = Browser::new(srv);
        let (id, page) = authorize_with(&b, &query("")).await;
        let id = id.unwrap();
        let named =
            b.post(&format!("/ui/login/{id}/loginname"), &[("csrf", &page.csrf()), ("loginname", "fred")]).await;
        let code_page = b.post(&format!("/ui/login/{id}/init_password/request"), &[("csrf", &named.csrf())]).await;
        for _ in 0..5 {
            let fields = [
                ("csrf", code_page.csrf()),
                ("code", "WRONG000".to_string()),
                ("password", "Fred-Neu-Passw0rd".to_string()),
                ("password_repeat", "Fred-Neu-Passw0rd".to_string()),
            ];
            let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
            b.post(&format!("/ui/login/{id}/init_password"), &fields).await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert_eq!(srv.outbox_to("fred@example.com").len(), sent + mails, "round {round}");
    }

    // The login policy may hide password reset: the page offers only initial passwords, a
    // user with a password is sent no code, and the call is refused.
    srv.put("/admin/v1/policies/login", json!({"hidePasswordReset": true})).await.ok();
    // Past the pacing of the codes sent above: a code now would be mailed.
    srv.clock.advance(61);
    reset(json!({})).await.err(400, 9);
    let sent = srv.outbox_to("fred@example.com").len();
    let b = Browser::new(srv);
    let (id, page) = authorize_with(&b, &query("")).await;
    let id = id.unwrap();
    let named = b.post(&format!("/ui/login/{id}/loginname"), &[("csrf", &page.csrf()), ("loginname", "fred")]).await;
    assert!(!named.html.contains("Forgot your password") && named.html.contains("No password yet?"), "{}", named.html);
    let code_page = b.post(&format!("/ui/login/{id}/init_password/request"), &[("csrf", &named.csrf())]).await;
    assert_eq!(code_page.status, 200);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(srv.outbox_to("fred@example.com").len(), sent, "no code while reset is hidden");
});

// A mailed code is stored as an HMAC under a key derived from the master key, over the user, the
// purpose and the code: a reader of the store cannot find it by trying all 2^40 codes against a
// plain digest. A code stored the older way (plain SHA-256, by a version before the change) is
// still taken while it lives, once.
on_both!(mailed_codes_are_stored_keyed_and_older_ones_still_count, |srv| {
    use latch::login::codes;
    use latch::store::user_code::{self, CodeCheck};
    let r = srv
        .post("/management/v1/users/human", json!({"userName": "gina", "profile": {"firstName": "Gina", "lastName": "G"}, "email": {"email": "gina@example.com"}}))
        .await;
    let gina = r.ok()["userId"].as_str().unwrap().to_string();
    srv.post(&format!("/management/v1/users/{gina}/_resend_initialization"), json!({})).await.ok();
    let code = outbox_code(srv, "gina@example.com").await;
    let mut c = srv.state.db.conn().await.unwrap();
    let (stored,): (Vec<u8>,) = sqlx::query_as("SELECT code_hash FROM user_code WHERE user_id = $1")
        .bind(gina.clone())
        .fetch_one(&mut *c)
        .await
        .unwrap();
    assert_ne!(stored, latch::crypto::secret::digest(&code), "no plain digest of the code is stored");
    assert_eq!(stored.len(), 32);
    let state = &srv.state;
    assert_eq!(codes::verify(state, &mut c, &gina, codes::INIT, &code.to_lowercase()).await.unwrap(), CodeCheck::Valid);
    // An older row: the plain digest of a code.
    let old = "ABCD2345";
    let legacy = latch::crypto::secret::digest(old);
    user_code::put(&mut c, &gina, codes::INIT, &legacy, 0, i64::MAX, user_code::Replace::Always).await.unwrap();
    assert_eq!(codes::verify(state, &mut c, &gina, codes::INIT, "ZZZZ2345").await.unwrap(), CodeCheck::Wrong);
    assert!(codes::consume(state, &mut c, &gina, codes::INIT, old).await.unwrap());
    assert!(!codes::consume(state, &mut c, &gina, codes::INIT, old).await.unwrap(), "once");
});

// Registration while the store answers "unavailable" (PostgreSQL's too_many_connections, raised
// by a trigger on the new account's row) says "try again" with 503, as every other login page
// does, not a 500.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registration_with_the_store_unavailable_says_try_again() {
    let srv = TestServer::start(crate::harness::Backend::Postgres).await;
    {
        let srv = &srv;
        srv.put("/admin/v1/policies/login", json!({"allowUsernamePassword": true, "allowRegister": true})).await.ok();
        let mut c = srv.state.db.conn().await.unwrap();
        for sql in [
            "CREATE FUNCTION busy_account() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
             IF NEW.username_key = 'fay' THEN RAISE EXCEPTION 'busy' USING ERRCODE = 'too_many_connections'; END IF; \
             RETURN NEW; END $$",
            "CREATE TRIGGER busy_account BEFORE INSERT ON account FOR EACH ROW EXECUTE FUNCTION busy_account()",
        ] {
            sqlx::query(sql).execute(&mut *c).await.unwrap();
        }
        drop(c);
        let b = Browser::new(srv);
        let (id, page) = start(srv, &b, &[("prompt", "create")]).await;
        let r = b
            .post(
                &format!("/ui/login/{id}/register"),
                &[
                    ("csrf", &page.csrf()),
                    ("email", "fay@example.com"),
                    ("first_name", "Fay"),
                    ("last_name", "F"),
                    ("user_name", "fay"),
                    ("password", "Sign-up-Pw1"),
                    ("password_repeat", "Sign-up-Pw1"),
                ],
            )
            .await;
        assert_eq!(r.status, 503, "{}", r.html);
    }
    srv.stop().await;
}

// What axum refuses before a handler runs (a path no route takes, a method a route does not
// take, a path, query or body that cannot be read, a body too large) is answered in the
// format of the route's family: a page in the person's language on the login pages and the two
// endpoints a browser opens, OAuth error JSON on the other protocol endpoints, the API's JSON
// error on the API; headers the route's layers added (CORS, Allow) stay.
on_both!(refusals_before_a_handler_keep_the_routes_format, |srv| {
    let client = reqwest::Client::new();
    let send = |method: &str, path: &str| {
        client
            .request(method.parse().unwrap(), srv.url(path))
            .header("accept-language", "de")
            .header("origin", "https://spa.example")
            .send()
    };
    let page = |r: reqwest::Response, status: u16, text: &'static str| async move {
        assert_eq!(r.status(), status, "{}", r.url());
        let ct = r.headers()["content-type"].to_str().unwrap().to_string();
        assert!(ct.starts_with("text/html"), "{ct}");
        assert!(r.headers().get("access-control-allow-origin").is_none(), "pages are not for other origins");
        let html = r.text().await.unwrap();
        assert!(html.contains(text) && html.contains("lang=\"de\""), "{html}");
    };
    let oauth = |r: reqwest::Response, status: u16, words: &'static str| async move {
        assert_eq!(r.status(), status, "{}", r.url());
        let headers = r.headers().clone();
        let body: serde_json::Value = r.json().await.unwrap();
        assert_eq!(body["error"], "invalid_request", "{body}");
        assert!(body["error_description"].as_str().unwrap().contains(words), "{body}");
        headers
    };
    page(send("GET", "/ui/nowhere").await.unwrap(), 404, "Diese Seite gibt es nicht.").await;
    page(send("GET", "/ui").await.unwrap(), 404, "Diese Seite gibt es nicht.").await;
    page(send("GET", "/ui/login/123/password").await.unwrap(), 405, "Diese Seite lässt sich so nicht öffnen.").await;
    page(send("PUT", "/oauth/v2/authorize").await.unwrap(), 405, "Diese Seite lässt sich so nicht öffnen.").await;
    page(send("DELETE", "/oidc/v1/end_session").await.unwrap(), 405, "Diese Seite lässt sich so nicht öffnen.").await;
    // A path segment that is no UTF-8, a repeated query field.
    page(send("GET", "/ui/login/%FF").await.unwrap(), 400, "Diese Seite gibt es nicht.").await;
    page(send("POST", "/ui/login/%FF/password").await.unwrap(), 400, "Formular").await;
    page(send("GET", "/ui/account/totp?session=a&session=b").await.unwrap(), 400, "Diese Seite gibt es nicht.").await;
    // The protocol endpoints: OAuth error JSON, with the route's CORS and Allow headers.
    let h = oauth(send("GET", "/oauth/v2/token").await.unwrap(), 405, "method GET").await;
    assert_eq!(h["allow"], "POST");
    assert_eq!(h["access-control-allow-origin"], "https://spa.example");
    oauth(send("PUT", "/oidc/v1/userinfo").await.unwrap(), 405, "method PUT").await;
    oauth(send("POST", "/.well-known/openid-configuration").await.unwrap(), 405, "method POST").await;
    oauth(send("GET", "/oauth/v2/tokens").await.unwrap(), 404, "no such endpoint").await;
    oauth(send("POST", "/oauth/v2/token/").await.unwrap(), 404, "no such endpoint").await;
    oauth(send("GET", "/.well-known/oauth-authorization-server").await.unwrap(), 404, "no such endpoint").await;
    // A body too large for the authorization endpoint, which a browser posts: a page.
    let big = format!("client_id=x&pad={}", "a".repeat(100 * 1024));
    let r = client
        .post(srv.url("/oauth/v2/authorize"))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("accept-language", "de")
        .body(big)
        .send()
        .await
        .unwrap();
    page(r, 413, "Das gesendete Formular war zu groß.").await;
    // A chunked body that breaks off in a bad chunk: the introspection endpoint answers in
    // JSON, the password form with a page.
    for (path, json) in [("/oauth/v2/introspect", true), ("/ui/login/123/password", false)] {
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: latch\r\ncontent-type: application/x-www-form-urlencoded\r\n\
             transfer-encoding: chunked\r\nconnection: close\r\n\r\nzz\r\n"
        );
        let raw = crate::harness::raw_http(&srv.base, head.as_bytes()).await;
        assert!(raw.starts_with("HTTP/1.1 400"), "{raw}");
        if json {
            assert!(raw.contains("application/json") && raw.contains("\"invalid_request\""), "{raw}");
        } else {
            assert!(raw.contains("text/html") && raw.contains("lang=\"en\""), "{raw}");
        }
    }
    // The API keeps its own JSON.
    let r = send("GET", "/management/v1/nowhere").await.unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(r.json::<serde_json::Value>().await.unwrap()["code"], 5, "the API answers in JSON");
    let r = send("PUT", "/healthz").await.unwrap();
    assert_eq!(r.status(), 405);
    assert_eq!(r.json::<serde_json::Value>().await.unwrap()["code"], 12, "{}", "the API's 405");
});

// An expired sign-in is said so in the language the request asked for (ui_locales), not only
// the browser's.
on_both!(an_expired_sign_in_speaks_the_requests_language, |srv| {
    let b = Browser::new(srv);
    let (id, page) = start(srv, &b, &[("ui_locales", "de")]).await;
    assert!(page.html.contains("lang=\"de\""), "{}", page.html);
    srv.clock.advance(srv.settings.request_lifetime + 1);
    let r = b.post(&format!("/ui/login/{id}/loginname"), &[("csrf", &page.csrf()), ("loginname", "alice")]).await;
    assert_eq!(r.status, 400);
    assert!(r.html.contains("Diese Anmeldung ist abgelaufen."), "{}", r.html);
});

// A code sent to the old address, checked just as an administrator changes the address (here
// by a trigger the moment the code is used up), verifies nothing: the new address stays
// unverified. PostgreSQL only (the trigger).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_changed_while_its_code_is_checked_stays_unverified() {
    let srv = TestServer::start(crate::harness::Backend::Postgres).await;
    {
        let srv = &srv;
        let fred = fred_unverified(srv).await;
        let b = Browser::new(srv);
        let (id, page) = start(srv, &b, &[]).await;
        let verify = b.sign_in(&id, &page, "fred", "Fred-Passw0rd").await;
        assert!(verify.html.contains("/verify_email/skip"), "{}", verify.html);
        let code = outbox_code(srv, "fred@example.com").await;
        let mut c = srv.state.db.conn().await.unwrap();
        for sql in [
            "CREATE FUNCTION new_address() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
             UPDATE account SET email = 'fred@new.example', email_key = 'fred@new.example', email_verified = 0 \
             WHERE user_id = OLD.user_id; RETURN OLD; END $$",
            "CREATE TRIGGER new_address AFTER DELETE ON user_code FOR EACH ROW EXECUTE FUNCTION new_address()",
        ] {
            sqlx::query(sql).execute(&mut *c).await.unwrap();
        }
        drop(c);
        b.post(&format!("/ui/login/{id}/verify_email"), &[("csrf", &verify.csrf()), ("code", &code)]).await;
        let mut c = srv.state.db.conn().await.unwrap();
        let u = latch::store::user::get(&mut c, &fred).await.unwrap().unwrap();
        let h = u.human().unwrap();
        assert_eq!(h.email, "fred@new.example");
        assert!(!h.email_verified, "the new address was never proven");
    }
    srv.stop().await;
}
