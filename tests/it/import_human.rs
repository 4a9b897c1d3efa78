//! Importing human users with their password hashes and TOTP secrets, then signing them in.

use serde_json::{Value, json};

use crate::browser::{Browser, oidc_app, param, pkce};
use crate::harness::TestServer;
use crate::on_both;

const CB: &str = "https://app.example.com/cb";
/// Keycloak 26 `offline-test-user` (pbkdf2-sha256, 64-byte key): password2.
pub const KEYCLOAK_PBKDF2: &str = "$pbkdf2-sha256$27500$rEIJDbs+BQqpx31v8mONWA==$kNwotFPNeuwelpT1HWt+E4ONXFK6wjd+h0zbzNBRGwOqacAjeY7vYN9QZQ46DlEKSdn04cEU/3RvX8WPcRegxg==";
/// Keycloak 26 argon2 user `jane.doe`: secret.
pub const KEYCLOAK_ARGON2: &str =
    "$argon2id$v=19$m=7168,t=5,p=1$LRScGShC7shkdoU5B1UgUQ$xKjWvB9+0sSP6wTqI1JoEI7w+iA0x9VDhPgmrOHRG80";
/// Auth0 bcrypt export line 2: password2.
pub const AUTH0_BCRYPT: &str = "$2b$10$JyDM8jzGYVTdDzZaPAQ2Lu2uZ7xFA3dgQNoHGblMmpkkeIfG2GEYa";

pub fn record(name: &str, hash: Option<&str>, verified: bool) -> Value {
    let mut r = json!({"userName": name, "profile": {"firstName": name, "lastName": "Imported"},
                       "email": {"email": format!("{name}@example.com"), "isEmailVerified": verified}});
    if let Some(h) = hash {
        r["hashedPassword"] = json!({"value": h});
    }
    r
}

pub async fn sign_in_with(srv: &TestServer, login: &str, password: &str) -> crate::browser::Page {
    let b = Browser::new(srv);
    let (id, page) = login_page(srv, &b).await;
    b.sign_in(&id, &page, login, password).await
}

async fn stored_hash(srv: &TestServer, name: &str) -> String {
    let mut c = srv.state.db.conn().await.unwrap();
    let u = latch::store::user::get_by_username(&mut c, name).await.unwrap().unwrap();
    u.human().unwrap().password_hash.clone().unwrap()
}

on_both!(imported_hashes_sign_in_and_are_rehashed, |srv| {
    for (name, hash, password) in [
        ("kc-pbkdf2", KEYCLOAK_PBKDF2, "password2"),
        ("kc-argon2", KEYCLOAK_ARGON2, "secret"),
        ("auth0", AUTH0_BCRYPT, "password2"),
    ] {
        let r = srv.post("/management/v1/users/human/_import", record(name, Some(hash), true)).await;
        assert!(r.ok()["userId"].is_string());
        assert!(r.body["details"]["creationDate"].is_string());
        assert_eq!(stored_hash(srv, name).await, hash, "kept as imported");
        let wrong = sign_in_with(srv, name, "not-it").await;
        assert!(wrong.html.contains("The login name or the password is wrong."), "{name}");
        let ok = sign_in_with(srv, name, password).await;
        assert_eq!(ok.status, 303, "{name}: {}", ok.html);
        assert!(param(&ok.redirect_params(), "code").is_some());
        assert!(
            stored_hash(srv, name).await.starts_with("$argon2id$v=19$m=1024,t=1,p=1$"),
            "{name} re-hashed with latch's parameters"
        );
        assert_eq!(sign_in_with(srv, name, password).await.status, 303, "{name} still signs in");
    }
    // No e-mail for verified users with a password.
    assert!(!srv.settings.data_dir.join("outbox").exists());
});

on_both!(bad_hashes_and_records_are_refused_whole, |srv| {
    let before = srv.count("account").await;
    let bad: Vec<(Value, &str)> = vec![
        (record("x1", Some("$md5$abc"), true), "unsupported"),
        (record("x2", Some("plain-text"), true), "hashedPassword"),
        (
            record(
                "x3",
                Some(
                    "$pbkdf2-sha256$500$rEIJDbs+BQqpx31v8mONWA==$kNwotFPNeuwelpT1HWt+E4ONXFK6wjd+h0zbzNBRGwOqacAjeY7vYN9QZQ46DlEKSdn04cEU/3RvX8WPcRegxg==",
                ),
                true,
            ),
            "rounds",
        ),
        (record("x4", Some("$2b$31$JyDM8jzGYVTdDzZaPAQ2Lu2uZ7xFA3dgQNoHGblMmpkkeIfG2GEYa"), true), "cost"),
        (
            record(
                "x5",
                Some(
                    "$argon2id$v=19$m=9999999,t=5,p=1$LRScGShC7shkdoU5B1UgUQ$xKjWvB9+0sSP6wTqI1JoEI7w+iA0x9VDhPgmrOHRG80",
                ),
                true,
            ),
            "memory",
        ),
        (record("x6", Some("$pbkdf2-sha256$27500$rEIJDbs-BQqpx31v8mONWA$kNwotFPNeuwelpT1HWt"), true), "hashedPassword"),
        (
            {
                let mut r = record("x7", Some(AUTH0_BCRYPT), true);
                r["password"] = json!("Plain-Passw0rd");
                r
            },
            "exclude",
        ),
        (
            {
                let mut r = record("x8", None, true);
                r["otpCode"] = json!("not base32!");
                r
            },
            "otpCode",
        ),
        (
            {
                let mut r = record("x9", None, true);
                r["idps"] = json!([{"configId": "", "externalUserId": "e"}]);
                r
            },
            "configId",
        ),
        (
            {
                let mut r = record("x10", None, true);
                r["phone"] = json!({"phone": "0791234567"});
                r
            },
            "phone",
        ),
        (json!({"userName": "x11", "profile": {"firstName": "a", "lastName": "b"}}), "email"),
        (
            {
                let mut r = record("x12", None, true);
                let links: Vec<_> =
                    (0..101).map(|i| json!({"configId": "google", "externalUserId": format!("e{i}")})).collect();
                r["idps"] = json!(links);
                r
            },
            "at most 100 links",
        ),
    ];
    for (body, expect) in bad {
        let r = srv.post("/management/v1/users/human/_import", body.clone()).await;
        let msg = r.err(400, 3);
        assert!(msg.contains(expect), "{body}: {msg}");
    }
    srv.post("/management/v1/users/human/_import", record("dup", Some(AUTH0_BCRYPT), true)).await.ok();
    srv.post("/management/v1/users/human/_import", record("DUP", Some(AUTH0_BCRYPT), true)).await.err(409, 6);
    assert_eq!(srv.count("account").await, before + 1, "only the valid record was stored");
    // Only organization owners (or instance owners) may import.
    let (_, viewer) = srv.machine_with_roles(None, "viewer", &["ORG_OWNER_VIEWER"]).await;
    srv.call_as(Some(&viewer), None, "POST", "/management/v1/users/human/_import", record("v", None, true))
        .await
        .err(403, 7);
    let (_, owner) = srv.machine_with_roles(None, "owner", &["ORG_OWNER"]).await;
    srv.call_as(Some(&owner), None, "POST", "/management/v1/users/human/_import", record("by-owner", None, true))
        .await
        .ok();
});

on_both!(the_email_rule_and_imported_fields, |srv| {
    // Verified with a password: no message. Unverified: a verification code. No password: an
    // initial-password code.
    srv.post("/management/v1/users/human/_import", record("quiet", Some(AUTH0_BCRYPT), true)).await.ok();
    srv.post("/management/v1/users/human/_import", record("unverified", Some(AUTH0_BCRYPT), false)).await.ok();
    srv.post("/management/v1/users/human/_import", record("nopassword", None, true)).await.ok();
    assert!(srv.outbox_to("quiet@example.com").is_empty());
    let v = srv.outbox_to("unverified@example.com");
    assert_eq!(v.len(), 1);
    assert!(v[0].contains("Subject: Verify your e-mail address"), "{}", v[0]);
    let i = srv.outbox_to("nopassword@example.com");
    assert_eq!(i.len(), 1);
    assert!(i[0].contains("Subject: Set your password"), "{}", i[0]);
    // A German user gets German mail.
    let mut de = record("deutsch", None, false);
    de["profile"]["preferredLanguage"] = json!("de");
    srv.post("/management/v1/users/human/_import", de).await.ok();
    assert!(
        srv.outbox_to("deutsch@example.com")[0].contains("Subject: =?utf-8?")
            || srv.outbox_to("deutsch@example.com")[0].contains("Bestätigen")
    );
    // Every field arrives.
    let full = json!({
        "userName": "full", "profile": {"firstName": "Fu", "lastName": "Ll", "nickName": "fl", "displayName": "Full L", "preferredLanguage": "en", "gender": "GENDER_DIVERSE"},
        "email": {"email": "full@example.com", "isEmailVerified": true}, "phone": {"phone": "+41 79 000 00 00", "isPhoneVerified": true},
        "password": "Plain-Passw0rd", "passwordChangeRequired": true,
        "idps": [{"configId": "google", "externalUserId": "1234", "displayName": "Full L"}],
        "requestPasswordlessRegistration": true
    });
    let r = srv.post("/management/v1/users/human/_import", full).await;
    let id = r.ok()["userId"].as_str().unwrap().to_string();
    let u = srv.get(&format!("/management/v1/users/{id}")).await;
    let h = u.ok()["user"]["human"].clone();
    assert_eq!(h["profile"]["nickName"], "fl");
    assert_eq!(h["profile"]["displayName"], "Full L");
    assert_eq!(h["profile"]["gender"], "GENDER_DIVERSE");
    assert_eq!(h["phone"]["isPhoneVerified"], true);
    let org = srv.get("/management/v1/orgs/me").await.ok()["org"]["id"].as_str().unwrap().to_string();
    let mut c = srv.state.db.conn().await.unwrap();
    let links = latch::store::user::idp_links_by_org(&mut c, &org).await.unwrap().remove(&id).unwrap();
    assert_eq!(links.len(), 1);
    assert_eq!(links[0].config_id, "google");
    drop(c);
    // passwordChangeRequired: the first sign-in asks for a new password.
    let page = sign_in_with(srv, "full", "Plain-Passw0rd").await;
    assert!(page.html.contains("password_repeat"), "{}", page.html);
});

on_both!(imported_totp_is_asked_after_the_password, |srv| {
    let mut r = record("otp-user", Some(KEYCLOAK_ARGON2), true);
    r["otpCode"] = json!("JBSWY3DPEHPK3PXP");
    srv.post("/management/v1/users/human/_import", r).await.ok();
    let b = Browser::new(srv);
    let (id, page) = login_page(srv, &b).await;
    let totp_page = b.sign_in(&id, &page, "otp-user", "secret").await;
    assert!(totp_page.html.contains("/totp"), "{}", totp_page.html);
    assert_eq!(srv.count("session").await, 0, "no session before the second factor");
    let wrong = b.post(&format!("/ui/login/{id}/totp"), &[("csrf", &totp_page.csrf()), ("code", "000000")]).await;
    assert!(wrong.html.contains("The code is wrong"), "{}", wrong.html);
    let now = latch::clock::Clock::now(&*srv.clock);
    let code = latch::crypto::totp::code_at("JBSWY3DPEHPK3PXP", now / 30).unwrap();
    let done = b.post(&format!("/ui/login/{id}/totp"), &[("csrf", &totp_page.csrf()), ("code", &code)]).await;
    assert_eq!(done.status, 303, "{}", done.html);
    // The same code cannot be used twice.
    let b2 = Browser::new(srv);
    let (id2, page2) = login_page(srv, &b2).await;
    let t2 = b2.sign_in(&id2, &page2, "otp-user", "secret").await;
    let again = b2.post(&format!("/ui/login/{id2}/totp"), &[("csrf", &t2.csrf()), ("code", &code)]).await;
    assert!(again.html.contains("The code is wrong"), "replayed code refused");
    srv.clock.advance(30);
    let next = latch::crypto::totp::code_at("JBSWY3DPEHPK3PXP", (now + 30) / 30).unwrap();
    let ok = b2.post(&format!("/ui/login/{id2}/totp"), &[("csrf", &t2.csrf()), ("code", &next)]).await;
    assert_eq!(ok.status, 303);
});

on_both!(totp_enrolment_page, |srv| {
    crate::browser::human(srv, "alice", "Wonder-land1").await;
    let (client_id, _, _) = oidc_app(srv, json!({})).await;
    let b = Browser::new(srv);
    // Not signed in: refused.
    assert_eq!(b.get("/ui/account/totp").await.status, 401);
    let (_, challenge) = pkce();
    let q = [
        ("client_id", client_id.as_str()),
        ("redirect_uri", CB),
        ("response_type", "code"),
        ("scope", "openid"),
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
    ];
    let (id, page) = b.authorize(&q).await;
    assert_eq!(b.sign_in(&id.unwrap(), &page, "alice", "Wonder-land1").await.status, 303);
    let enrol = b.get("/ui/account/totp").await;
    assert_eq!(enrol.status, 200, "{}", enrol.html);
    let start = enrol.html.find("<code id=\"secret\">").unwrap() + 18;
    let secret = enrol.html[start..start + 32].to_string();
    assert!(enrol.html.contains("otpauth://totp/"));
    let session = crate::browser::field(&enrol.html, "session").unwrap();
    let pending = crate::browser::field(&enrol.html, "pending").unwrap();
    // A forged pending key is refused.
    let r = b.post("/ui/account/totp", &[("session", &session), ("pending", "AAAA"), ("code", "123456")]).await;
    assert_eq!(r.status, 403);
    let now = latch::clock::Clock::now(&*srv.clock);
    let code = latch::crypto::totp::code_at(&secret, now / 30).unwrap();
    let r = b.post("/ui/account/totp", &[("session", &session), ("pending", &pending), ("code", &code)]).await;
    assert_eq!(r.status, 200);
    assert!(r.html.contains("Two-factor authentication is on"), "{}", r.html);
    // The next sign-in asks for a code.
    let b2 = Browser::new(srv);
    let (id, page) = b2.authorize(&q).await;
    let next = b2.sign_in(&id.unwrap(), &page, "alice", "Wonder-land1").await;
    assert!(next.html.contains("/totp"));

    // Replacing the factor needs a code of the current one: the session alone does not do.
    srv.clock.advance(60);
    let again = b.get("/ui/account/totp").await;
    assert!(again.html.contains("name=\"current\""), "{}", again.html);
    let start = again.html.find("<code id=\"secret\">").unwrap() + 18;
    let new_secret = again.html[start..start + 32].to_string();
    let pending = crate::browser::field(&again.html, "pending").unwrap();
    let new_code = totp_now(srv, &new_secret);
    for current in ["", "000000"] {
        let r = b
            .post(
                "/ui/account/totp",
                &[("session", &session), ("pending", &pending), ("code", &new_code), ("current", current)],
            )
            .await;
        assert!(r.html.contains("The code is wrong"), "{}", r.html);
    }
    let mut c = srv.state.db.conn().await.unwrap();
    let u = latch::store::user::get_by_username(&mut c, "alice").await.unwrap().unwrap();
    drop(c);
    assert_eq!(u.human().unwrap().failed_otp_attempts, 2, "wrong current codes count toward the lockout");
    let sealed = u.human().unwrap().otp_secret.clone().unwrap();
    assert_eq!(srv.state.open_otp(&u.user_id, &sealed).as_deref(), Some(secret.as_str()), "the factor is unchanged");
    let current = totp_now(srv, &secret);
    let r = b
        .post(
            "/ui/account/totp",
            &[("session", &session), ("pending", &pending), ("code", &new_code), ("current", &current)],
        )
        .await;
    assert!(r.html.contains("Two-factor authentication is on"), "{}", r.html);
    let mut c = srv.state.db.conn().await.unwrap();
    let u = latch::store::user::get_by_username(&mut c, "alice").await.unwrap().unwrap();
    let sealed = u.human().unwrap().otp_secret.clone().unwrap();
    assert_eq!(srv.state.open_otp(&u.user_id, &sealed).as_deref(), Some(new_secret.as_str()), "replaced");
});

/// A browser at the login page of a new code request of a new app; returns the request id and
/// the page.
async fn login_page(srv: &TestServer, b: &Browser) -> (String, crate::browser::Page) {
    let (client_id, _, _) = oidc_app(srv, json!({"name": format!("a{}", latch::id::new_id())})).await;
    let (_, challenge) = pkce();
    let (id, page) = b
        .authorize(&[
            ("client_id", &client_id),
            ("redirect_uri", CB),
            ("response_type", "code"),
            ("scope", "openid"),
            ("code_challenge", &challenge),
            ("code_challenge_method", "S256"),
        ])
        .await;
    (id.unwrap(), page)
}

fn totp_now(srv: &TestServer, secret: &str) -> String {
    let now = latch::clock::Clock::now(&*srv.clock);
    latch::crypto::totp::code_at(secret, now / 30).unwrap()
}

on_both!(a_second_factor_counts_for_its_own_user_only, |srv| {
    // A's e-mail is not verified: after password and code the flow stops at the verification.
    let mut a = record("otp-a", Some(KEYCLOAK_ARGON2), false);
    a["otpCode"] = json!("JBSWY3DPEHPK3PXP");
    srv.post("/management/v1/users/human/_import", a).await.ok();
    let mut b = record("otp-b", Some(KEYCLOAK_ARGON2), true);
    b["otpCode"] = json!("KRSXG5CTMVRXEZLU");
    srv.post("/management/v1/users/human/_import", b).await.ok();
    let br = Browser::new(srv);
    let (id, page) = login_page(srv, &br).await;
    let totp_page = br.sign_in(&id, &page, "otp-a", "secret").await;
    // A password change is not a step before the second factor.
    let change = [
        ("csrf", totp_page.csrf()),
        ("password", "New-Passw0rd!1".into()),
        ("password_repeat", "New-Passw0rd!1".into()),
    ];
    let pairs: Vec<(&str, &str)> = change.iter().map(|(k, v)| (*k, v.as_str())).collect();
    assert_eq!(br.post(&format!("/ui/login/{id}/change_password"), &pairs).await.status, 400);
    let code = totp_now(srv, "JBSWY3DPEHPK3PXP");
    let verify = br.post(&format!("/ui/login/{id}/totp"), &[("csrf", &totp_page.csrf()), ("code", &code)]).await;
    assert_eq!(verify.status, 200, "{}", verify.html);
    assert!(verify.html.contains("/verify_email"), "{}", verify.html);
    // Another account in the same request: A's second factor does not count for B.
    let switched = br.sign_in(&id, &verify, "otp-b", "secret").await;
    assert_eq!(switched.status, 200, "{}", switched.html);
    assert!(switched.html.contains("/totp"), "B's code is asked: {}", switched.html);
    assert_eq!(srv.count("session").await, 0, "no session without B's second factor");
    let code = totp_now(srv, "KRSXG5CTMVRXEZLU");
    let done = br.post(&format!("/ui/login/{id}/totp"), &[("csrf", &switched.csrf()), ("code", &code)]).await;
    assert_eq!(done.status, 303, "{}", done.html);
});

on_both!(a_user_locked_by_wrong_codes_signs_in_no_further, |srv| {
    srv.put("/admin/v1/policies/password/lockout", json!({"maxOtpAttempts": 2})).await.ok();
    let mut r = record("otp-lock", Some(KEYCLOAK_ARGON2), true);
    r["otpCode"] = json!("JBSWY3DPEHPK3PXP");
    srv.post("/management/v1/users/human/_import", r).await.ok();
    let br = Browser::new(srv);
    let (id, page) = login_page(srv, &br).await;
    let totp_page = br.sign_in(&id, &page, "otp-lock", "secret").await;
    let csrf = totp_page.csrf();
    for _ in 0..2 {
        br.post(&format!("/ui/login/{id}/totp"), &[("csrf", &csrf), ("code", "000000")]).await;
    }
    // Locked now: the right code no longer signs in.
    let code = totp_now(srv, "JBSWY3DPEHPK3PXP");
    let r = br.post(&format!("/ui/login/{id}/totp"), &[("csrf", &csrf), ("code", &code)]).await;
    assert_ne!(r.status, 303, "{}", r.html);
    assert!(r.html.contains("locked"), "{}", r.html);
    assert_eq!(srv.count("session").await, 0);
    assert_eq!(srv.count("auth_code").await, 0);
});

// Single sign-on lasts while the second factor's check is within the login policy's
// secondFactorCheckLifetime; then both factors are asked again.
on_both!(the_second_factor_check_lifetime_bounds_single_sign_on, |srv| {
    srv.put("/admin/v1/policies/login", json!({"secondFactorCheckLifetime": "3600s"})).await.ok();
    let mut r = record("otp-sso", Some(KEYCLOAK_ARGON2), true);
    r["otpCode"] = json!("JBSWY3DPEHPK3PXP");
    srv.post("/management/v1/users/human/_import", r).await.ok();
    let (client_id, _, _) = oidc_app(srv, json!({})).await;
    let (_, challenge) = pkce();
    let mut q = vec![
        ("client_id", client_id.as_str()),
        ("redirect_uri", CB),
        ("response_type", "code"),
        ("scope", "openid"),
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
    ];
    let b = Browser::new(srv);
    let (id, page) = b.authorize(&q).await;
    let id = id.expect("a login page");
    let totp_page = b.sign_in(&id, &page, "otp-sso", "secret").await;
    let code = totp_now(srv, "JBSWY3DPEHPK3PXP");
    let done = b.post(&format!("/ui/login/{id}/totp"), &[("csrf", &totp_page.csrf()), ("code", &code)]).await;
    assert_eq!(done.status, 303, "{}", done.html);
    q.push(("prompt", "none"));
    srv.clock.advance(3500);
    let (_, r) = b.authorize(&q).await;
    assert!(param(&r.redirect_params(), "code").is_some(), "within the hour: {:?}", r.location);
    srv.clock.advance(200);
    let (_, r) = b.authorize(&q).await;
    assert_eq!(param(&r.redirect_params(), "error"), Some("login_required"), "{:?}", r.location);
});

// The login policy's forceMfa: a user without a second factor sets one up during the sign-in;
// the key offered stays the same until a code of it is entered.
on_both!(a_second_factor_the_login_policy_asks_for_is_set_up_at_sign_in, |srv| {
    srv.put("/admin/v1/policies/login", json!({"forceMfa": true})).await.ok();
    crate::browser::human(srv, "alice", "Wonder-land1").await;
    let b = Browser::new(srv);
    let (id, page) = login_page(srv, &b).await;
    let setup = b.sign_in(&id, &page, "alice", "Wonder-land1").await;
    assert_eq!(setup.status, 200, "{}", setup.html);
    assert!(setup.html.contains(&format!("action=\"/ui/login/{id}/totp/setup\"")), "{}", setup.html);
    assert!(setup.html.contains("otpauth://totp/"), "{}", setup.html);
    assert_eq!(srv.count("session").await, 0, "no session before the second factor");
    let start = setup.html.find("<code id=\"secret\">").unwrap() + 18;
    let secret = setup.html[start..start + 32].to_string();
    let post = |code: String| {
        let (b, id, csrf) = (&b, &id, setup.csrf());
        async move { b.post(&format!("/ui/login/{id}/totp/setup"), &[("csrf", &csrf), ("code", &code)]).await }
    };
    let wrong = post("000000".into()).await;
    assert!(wrong.html.contains("The code is wrong"), "{}", wrong.html);
    assert!(wrong.html.contains(&secret), "the same key again");
    let done = post(totp_now(srv, &secret)).await;
    assert_eq!(done.status, 303, "{}", done.html);
    assert!(param(&done.redirect_params(), "code").is_some());
    // The key is alice's factor now: the next sign-in asks for a code of it.
    let b2 = Browser::new(srv);
    let (id2, page2) = login_page(srv, &b2).await;
    let next = b2.sign_in(&id2, &page2, "alice", "Wonder-land1").await;
    assert!(next.html.contains(&format!("action=\"/ui/login/{id2}/totp\"")), "{}", next.html);
    // A key offered to one user is not offered to the next user of the same request (another
    // account chosen): each gets a key of their own.
    crate::browser::human(srv, "mallory", "Mallory-Pw1").await;
    crate::browser::human(srv, "victor", "Victor-Pw1").await;
    let b4 = Browser::new(srv);
    let (id4, page4) = login_page(srv, &b4).await;
    let first = b4.sign_in(&id4, &page4, "mallory", "Mallory-Pw1").await;
    let start = first.html.find("<code id=\"secret\">").unwrap() + 18;
    let mallorys = first.html[start..start + 32].to_string();
    let other = b4.post(&format!("/ui/login/{id4}/other"), &[("csrf", &first.csrf())]).await;
    let second = b4.sign_in(&id4, &other, "victor", "Victor-Pw1").await;
    assert!(second.html.contains("/totp/setup"), "{}", second.html);
    assert!(!second.html.contains(&mallorys), "victor is not offered mallory's key");

    // Without forceMfa nothing is asked of a user without a factor, and a session without a
    // second factor serves single sign-on ...
    srv.put("/admin/v1/policies/login", json!({"forceMfa": false})).await.ok();
    crate::browser::human(srv, "bob", "Builder-b0b1").await;
    let b3 = Browser::new(srv);
    let (id3, page3) = login_page(srv, &b3).await;
    assert_eq!(b3.sign_in(&id3, &page3, "bob", "Builder-b0b1").await.status, 303);
    let (client_id, _, _) = oidc_app(srv, json!({})).await;
    let (_, challenge) = pkce();
    let mut q = vec![
        ("client_id", client_id.as_str()),
        ("redirect_uri", CB),
        ("response_type", "code"),
        ("scope", "openid"),
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
    ];
    let (id, _) = b3.authorize(&q).await;
    assert!(id.is_none(), "single sign-on");
    // ... until the policy asks for one (forceMfaLocalOnly reads the same): then bob signs in
    // again, and sets one up.
    srv.put("/admin/v1/policies/login", json!({"forceMfaLocalOnly": true})).await.ok();
    let (id, page) = b3.authorize(&q).await;
    let id = id.expect("no single sign-on without a second factor");
    assert!(page.html.contains("name=\"password\""), "{}", page.html);
    let again =
        b3.post(&format!("/ui/login/{id}/password"), &[("csrf", &page.csrf()), ("password", "Builder-b0b1")]).await;
    assert!(again.html.contains("/totp/setup"), "{}", again.html);
    q.push(("prompt", "none"));
    let (_, r) = b3.authorize(&q).await;
    assert_eq!(param(&r.redirect_params(), "error"), Some("login_required"));
});
