//! The token endpoint: every grant, every client authentication method, and their errors.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};

use crate::browser::{Browser, human, oidc_app, param, pkce};
use crate::harness::{TestServer, now};
use crate::on_both;

const CB: &str = "https://app.example.com/cb";

pub struct TokenCall {
    pub status: u16,
    pub body: Value,
    pub headers: reqwest::header::HeaderMap,
}

/// POSTs a form to the token endpoint, optionally with Basic credentials.
pub async fn token(srv: &TestServer, basic: Option<(&str, &str)>, form: &[(&str, &str)]) -> TokenCall {
    let body = form_urlencoded::Serializer::new(String::new()).extend_pairs(form).finish();
    let mut req = reqwest::Client::new()
        .post(srv.url("/oauth/v2/token"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body);
    if let Some((id, secret)) = basic {
        let enc = |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
        req = req.header("authorization", format!("Basic {}", STANDARD.encode(format!("{}:{}", enc(id), enc(secret)))));
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    let body = r.json().await.unwrap_or(Value::Null);
    TokenCall { status, body, headers }
}

/// A refresh_token grant with Basic credentials, narrowed to `scope` when one is given.
pub async fn refresh_grant(srv: &TestServer, basic: (&str, &str), rt: &str, scope: Option<&str>) -> TokenCall {
    let mut form = vec![("grant_type", "refresh_token"), ("refresh_token", rt)];
    if let Some(s) = scope {
        form.push(("scope", s));
    }
    token(srv, Some(basic), &form).await
}

/// Redeems a code issued for `CB` with its PKCE verifier.
pub async fn exchange_code(srv: &TestServer, basic: Option<(&str, &str)>, code: &str, verifier: &str) -> TokenCall {
    let form =
        [("grant_type", "authorization_code"), ("code", code), ("redirect_uri", CB), ("code_verifier", verifier)];
    token(srv, basic, &form).await
}

impl TokenCall {
    #[track_caller]
    pub fn ok(&self) -> &Value {
        assert_eq!(self.status, 200, "{}", self.body);
        &self.body
    }

    #[track_caller]
    pub fn err(&self, status: u16, error: &str) {
        assert_eq!((self.status, self.body["error"].as_str()), (status, Some(error)), "{}", self.body);
        assert!(self.body["error_description"].as_str().is_some_and(|d| !d.is_empty()));
    }
}

pub fn claims(jwt: &str) -> Value {
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(jwt.split('.').nth(1).unwrap()).unwrap()).unwrap()
}

pub fn header(jwt: &str) -> Value {
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(jwt.split('.').next().unwrap()).unwrap()).unwrap()
}

/// The length in bytes of a token or grant id that is base64url (latch's 128-bit random ids
/// are 16 bytes); 0 for anything else.
pub fn id_bytes(id: &Value) -> usize {
    id.as_str().and_then(|s| URL_SAFE_NO_PAD.decode(s).ok()).map_or(0, |b| b.len())
}

/// Signs `alice` in through the pages and returns a fresh code with its PKCE verifier.
pub async fn code_for(_srv: &TestServer, b: &Browser, client_id: &str, scope: &str) -> (String, String) {
    let (verifier, challenge) = pkce();
    let (id, page) = b
        .authorize(&[
            ("client_id", client_id),
            ("redirect_uri", CB),
            ("response_type", "code"),
            ("scope", scope),
            ("nonce", "nonce-1"),
            ("code_challenge", &challenge),
            ("code_challenge_method", "S256"),
        ])
        .await;
    let done = match id {
        Some(id) => b.sign_in(&id, &page, "alice", "Wonder-land1").await,
        None => page,
    };
    let code =
        param(&done.redirect_params(), "code").unwrap_or_else(|| panic!("no code: {:?}", done.location)).to_string();
    (code, verifier)
}

on_both!(authorization_code_exchange, |srv| {
    let (client_id, secret, project) = oidc_app(srv, json!({})).await;
    let secret = secret.unwrap();
    let alice = human(srv, "alice", "Wonder-land1").await;
    let b = Browser::new(srv);
    let (code, verifier) = code_for(srv, &b, &client_id, "openid profile email").await;
    let r = exchange_code(srv, Some((&client_id, &secret)), &code, &verifier).await;
    let t = r.ok().clone();
    assert_eq!(r.headers.get("cache-control").unwrap(), "no-store");
    assert_eq!(r.headers.get("pragma").unwrap(), "no-cache");
    assert_eq!(t["token_type"], "Bearer");
    assert_eq!(t["expires_in"], 43200);
    assert_eq!(t["scope"], "openid profile email");
    assert!(t.get("refresh_token").is_none(), "no offline_access, no refresh token");
    let at = t["access_token"].as_str().unwrap();
    assert!(!at.contains('.'), "opaque by default");
    let id = claims(t["id_token"].as_str().unwrap());
    assert_eq!(id["sub"], alice.as_str());
    assert_eq!(id["nonce"], "nonce-1");
    assert_eq!(id["aud"], json!([client_id, project]));
    assert_eq!(id["azp"], client_id.as_str());
    assert_eq!(id["amr"], json!(["pwd"]));
    assert!(id["auth_time"].is_i64() && id["sid"].is_string());
    assert_eq!(id["at_hash"], latch::oauth::tokens::half_hash(latch::crypto::keys::KeyAlg::RS256, at));
    assert!(id.get("email").is_none(), "profile claims come from userinfo when an access token is issued");
    assert_eq!(header(t["id_token"].as_str().unwrap())["kid"], srv.state.keys.active().unwrap().key_id.as_str());

    // A second use fails.
    let again = exchange_code(srv, Some((&client_id, &secret)), &code, &verifier).await;
    again.err(400, "invalid_grant");
    assert_eq!(srv.count("revocation").await, 1, "the grant of the first use is revoked");

    // Wrong redirect URI, wrong or missing verifier, expired code, another client's code.
    for (form_extra, why) in [
        (vec![("redirect_uri", "https://app.example.com/other")], "redirect"),
        (vec![("redirect_uri", CB), ("code_verifier", "a".repeat(43).leak() as &str)], "verifier"),
        (vec![("redirect_uri", CB)], "no verifier"),
    ] {
        let (code, _) = code_for(srv, &b, &client_id, "openid").await;
        let mut form = vec![("grant_type", "authorization_code"), ("code", code.as_str())];
        form.extend(form_extra);
        token(srv, Some((&client_id, &secret)), &form).await.err(400, "invalid_grant");
        let _ = why;
    }
    let (code, verifier) = code_for(srv, &b, &client_id, "openid").await;
    srv.clock.advance(srv.settings.code_lifetime + 1);
    exchange_code(srv, Some((&client_id, &secret)), &code, &verifier).await.err(400, "invalid_grant");
    let (other, other_secret, _) = oidc_app(srv, json!({"name": "other"})).await;
    let (code, verifier) = code_for(srv, &b, &client_id, "openid").await;
    exchange_code(srv, Some((&other, other_secret.as_deref().unwrap())), &code, &verifier)
        .await
        .err(400, "invalid_grant");
    // It stays usable by its own client.
    exchange_code(srv, Some((&client_id, &secret)), &code, &verifier).await.ok();
    token(
        srv,
        Some((&client_id, &secret)),
        &[("grant_type", "authorization_code"), ("code", "no-such-code"), ("redirect_uri", CB)],
    )
    .await
    .err(400, "invalid_grant");

    // Sign-in leaves the user it read for the exchange; deactivating the user through the API
    // in between still counts: the code gets no tokens.
    let (code, verifier) = code_for(srv, &b, &client_id, "openid").await;
    srv.post(&format!("/management/v1/users/{alice}/_deactivate"), json!({})).await.ok();
    let r = exchange_code(srv, Some((&client_id, &secret)), &code, &verifier).await;
    r.err(400, "invalid_grant");
    assert!(r.body["error_description"].as_str().unwrap().contains("not active"), "{:?}", r.body);
});

on_both!(client_authentication_methods, |srv| {
    human(srv, "alice", "Wonder-land1").await;
    let (basic_id, basic_secret, _) = oidc_app(srv, json!({})).await;
    let basic_secret = basic_secret.unwrap();
    let (post_id, post_secret, _) =
        oidc_app(srv, json!({"name": "post", "authMethodType": "OIDC_AUTH_METHOD_TYPE_POST"})).await;
    let post_secret = post_secret.unwrap();
    let (public, _, _) = oidc_app(
        srv,
        json!({"name": "spa", "authMethodType": "OIDC_AUTH_METHOD_TYPE_NONE", "appType": "OIDC_APP_TYPE_USER_AGENT"}),
    )
    .await;
    let b = Browser::new(srv);
    let exchange = |code: String, verifier: String| {
        vec![
            ("grant_type", "authorization_code".to_string()),
            ("code", code),
            ("redirect_uri", CB.to_string()),
            ("code_verifier", verifier),
        ]
    };
    let as_pairs = |v: &Vec<(&'static str, String)>| v.iter().map(|(k, s)| (*k, s.clone())).collect::<Vec<_>>();

    // Wrong Basic secret: 401 with a Basic challenge.
    let (code, v) = code_for(srv, &b, &basic_id, "openid").await;
    let form = exchange(code.clone(), v.clone());
    let f: Vec<(&str, &str)> = form.iter().map(|(k, s)| (*k, s.as_str())).collect();
    let r = token(srv, Some((&basic_id, "wrong")), &f).await;
    r.err(401, "invalid_client");
    assert!(r.headers.get("www-authenticate").unwrap().to_str().unwrap().starts_with("Basic"));
    // Registered for Basic, but uses POST.
    let mut with_post = f.clone();
    with_post.extend([("client_id", basic_id.as_str()), ("client_secret", basic_secret.as_str())]);
    token(srv, None, &with_post).await.err(400, "invalid_client");
    // Two methods at once.
    token(srv, Some((&basic_id, &basic_secret)), &with_post).await.err(400, "invalid_request");
    // No authentication at all; an unknown client.
    token(srv, None, &f).await.err(400, "invalid_client");
    token(srv, Some(("nobody", "x")), &f).await.err(401, "invalid_client");
    // The code survived the failures and works with the right credentials.
    token(srv, Some((&basic_id, &basic_secret)), &f).await.ok();

    // client_secret_post.
    let (code, v) = code_for(srv, &b, &post_id, "openid").await;
    let mut form: Vec<(&str, String)> = as_pairs(&exchange(code, v));
    form.push(("client_id", post_id.clone()));
    form.push(("client_secret", "wrong".into()));
    let f: Vec<(&str, &str)> = form.iter().map(|(k, s)| (*k, s.as_str())).collect();
    token(srv, None, &f).await.err(400, "invalid_client");
    form.pop();
    form.push(("client_secret", post_secret.clone()));
    let f: Vec<(&str, &str)> = form.iter().map(|(k, s)| (*k, s.as_str())).collect();
    token(srv, None, &f).await.ok();

    // none: a public client with PKCE.
    let (code, v) = code_for(srv, &b, &public, "openid").await;
    let mut form = as_pairs(&exchange(code, v));
    form.push(("client_id", public.clone()));
    let f: Vec<(&str, &str)> = form.iter().map(|(k, s)| (*k, s.as_str())).collect();
    token(srv, None, &f).await.ok();
    // A confidential client cannot pretend to be public.
    let (code, v) = code_for(srv, &b, &basic_id, "openid").await;
    let mut form = as_pairs(&exchange(code, v));
    form.push(("client_id", basic_id.clone()));
    let f: Vec<(&str, &str)> = form.iter().map(|(k, s)| (*k, s.as_str())).collect();
    token(srv, None, &f).await.err(400, "invalid_client");
});

/// A live refresh token of client "client" in grant `grant`, made 10 s before `t`, idle until
/// `t + 100`, expiring at `expires_at`.
fn refresh_row(hash: &[u8], grant: &str, t: i64, expires_at: i64) -> latch::store::refresh::RefreshRow {
    latch::store::refresh::RefreshRow {
        token_hash: hash.to_vec(),
        grant_id: grant.into(),
        client_id: "client".into(),
        user_id: "user".into(),
        session_id: Some("session".into()),
        data: "{}".into(),
        created_at: t - 10,
        idle_expires_at: t + 100,
        expires_at,
        rotated_at: None,
        revoked_at: None,
    }
}

// The store's rotation: one successor per live token, none for a token that is not live, and
// a second rotation of the same token finds nothing (on SQLite its two statements run in one
// hop; the insert must follow only the update that just marked the token).
on_both!(refresh_rotation_in_the_store_makes_one_successor, |srv| {
    use latch::store::refresh;
    let mut c = srv.state.db.conn().await.unwrap();
    let t = now();
    refresh::insert(&mut c, &refresh_row(b"live", "g1", t, t + 50)).await.unwrap();
    refresh::insert(&mut c, &refresh_row(b"expired", "g2", t, t - 1)).await.unwrap();
    let next = refresh::rotate_live(&mut c, b"live", "client", b"next", t, 1000, i64::MAX).await.unwrap();
    let next = next.expect("a live token is rotated");
    assert_eq!(next.token_hash, b"next");
    assert_eq!((next.grant_id.as_str(), next.session_id.as_deref()), ("g1", Some("session")));
    assert_eq!((next.created_at, next.expires_at), (t, t + 50));
    assert_eq!(next.idle_expires_at, t + 50, "the idle expiry never passes the absolute one");
    assert!(next.rotated_at.is_none() && next.revoked_at.is_none());
    let old = refresh::get(&mut c, b"live").await.unwrap().unwrap();
    assert_eq!(old.rotated_at, Some(t));
    // Used once: nothing more, from this client or another.
    assert!(refresh::rotate_live(&mut c, b"live", "client", b"again", t, 1000, i64::MAX).await.unwrap().is_none());
    assert!(refresh::rotate_live(&mut c, b"next", "other", b"again", t, 1000, i64::MAX).await.unwrap().is_none());
    assert!(refresh::rotate_live(&mut c, b"expired", "client", b"again", t, 1000, i64::MAX).await.unwrap().is_none());
    assert!(refresh::get(&mut c, b"again").await.unwrap().is_none(), "no successor for a token that is not live");
    let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM refresh_token").fetch_one(&mut *c).await.unwrap();
    assert_eq!(n, 3);
    // The successor is live itself.
    let third = refresh::rotate_live(&mut c, b"next", "client", b"third", t + 1, 10, i64::MAX).await.unwrap().unwrap();
    assert_eq!(third.idle_expires_at, t + 11);
});

// A revocation of a chain while a rotation of its live token is under way (held open here in a
// transaction) revokes the successor as well. On PostgreSQL the revocation's update waits for
// the rotation's row lock and, in its first pass, does not see the successor the rotation
// inserted: without a second pass that successor stayed usable once the revocation entry was
// swept.
on_both!(a_revocation_racing_a_rotation_leaves_no_live_successor, |srv| {
    use latch::store::refresh;
    let t = now();
    let mut c = srv.state.db.conn().await.unwrap();
    refresh::insert(&mut c, &refresh_row(b"live", "g1", t, t + 100)).await.unwrap();
    drop(c);
    let mut rotation = srv.state.db.begin().await.unwrap();
    assert!(
        refresh::rotate_live(&mut rotation, b"live", "client", b"next", t, 1000, i64::MAX).await.unwrap().is_some()
    );
    let db = srv.state.db.clone();
    let revocation = tokio::spawn(async move {
        let mut c = db.conn().await.unwrap();
        refresh::revoke_grant(&mut c, "g1", t).await.unwrap()
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!revocation.is_finished(), "the revocation waits for the rotation's lock");
    rotation.commit().await.unwrap();
    assert_eq!(revocation.await.unwrap(), 2, "the rotated token and its successor");
    let mut c = srv.state.db.conn().await.unwrap();
    for hash in [&b"live"[..], b"next"] {
        let row = refresh::get(&mut c, hash).await.unwrap().unwrap();
        assert_eq!(row.revoked_at, Some(t), "{}", String::from_utf8_lossy(hash));
    }
});

// On PostgreSQL the undo of a rotation (delete the successor, make the token live again) and a
// revocation of the chain (a reuse elsewhere) write the same two rows: both lock them in one
// order, so neither holds one while waiting for the other (a deadlock, which PostgreSQL breaks
// after a second by aborting one: a reuse whose revocation was lost). A third transaction holds
// the successor's row while the undo, then the revocation, start: in the old order the undo
// waited for the successor first in line, the revocation behind it holding the token's row.
// SQLite's writers take turns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undone_rotation_and_a_revocation_of_its_chain_lock_in_one_order() {
    use latch::store::refresh;
    let srv = TestServer::start(crate::harness::Backend::Postgres).await;
    let t = now();
    let mut c = srv.state.db.conn().await.unwrap();
    refresh::insert(&mut c, &refresh_row(b"live", "g1", t, t + 100)).await.unwrap();
    assert!(refresh::rotate_live(&mut c, b"live", "client", b"next", t, 1000, i64::MAX).await.unwrap().is_some());
    drop(c);
    let mut holder = srv.state.db.begin().await.unwrap();
    sqlx::query("SELECT token_hash FROM refresh_token WHERE token_hash = $1 FOR UPDATE")
        .bind(b"next".to_vec())
        .fetch_all(&mut *holder)
        .await
        .unwrap();
    let db = srv.state.db.clone();
    let undo = tokio::spawn(async move { refresh::unrotate(&mut db.conn().await.unwrap(), b"live", b"next", t).await });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let db = srv.state.db.clone();
    let revocation = tokio::spawn(async move { refresh::revoke_grant(&mut db.conn().await.unwrap(), "g1", t).await });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!undo.is_finished() && !revocation.is_finished(), "both wait");
    holder.commit().await.unwrap();
    let wait = std::time::Duration::from_secs(10);
    let undone = tokio::time::timeout(wait, undo).await.unwrap().unwrap();
    let revoked = tokio::time::timeout(wait, revocation).await.unwrap().unwrap();
    assert!(undone.is_ok() && revoked.is_ok(), "undo {undone:?}, revocation {revoked:?}");
    let mut c = srv.state.db.conn().await.unwrap();
    let (live,): (i64,) =
        sqlx::query_as("SELECT COUNT(*) FROM refresh_token WHERE grant_id = 'g1' AND revoked_at IS NULL")
            .fetch_one(&mut *c)
            .await
            .unwrap();
    assert_eq!(live, 0, "whichever went first, the chain ends revoked");
    drop(c);
    srv.stop().await;
}

// The code's redemption stores its first refresh token in the same round trip: once, only for
// a code that carries a seed and has not expired, never on a second use (on SQLite the insert
// must follow only the update that just marked the code).
on_both!(code_redemption_in_the_store_stores_one_refresh_token, |srv| {
    use latch::store::code::{self, NewCode, Redeemed, RefreshSeed, Successor};
    use latch::store::refresh;
    let mut c = srv.state.db.conn().await.unwrap();
    let t = now();
    let seed = RefreshSeed { user_id: "user", session_id: "session", data: r#"{"scopes":["openid"]}"# };
    for (hash, seeded, expires_at) in [(b"seeded", true, t + 60), (b"plain!", false, t + 60), (b"stale!", true, t - 1)]
    {
        let new = NewCode {
            code_hash: hash,
            grant_id: std::str::from_utf8(hash).unwrap(),
            client_id: "client",
            data: "{}",
            refresh: seeded.then_some(RefreshSeed { ..seed }),
            created_at: t - 10,
            expires_at,
        };
        code::insert(&mut c, &new).await.unwrap();
    }
    let offer = |h: &'static [u8]| Some(Successor { token_hash: h, idle_expires_at: t + 100, expires_at: t + 200 });
    let redeem = |hash: &'static [u8], client: &'static str, successor| {
        let db = srv.state.db.clone();
        async move { code::redeem(&mut db.conn().await.unwrap(), hash, client, t, successor).await.unwrap() }
    };
    // Another client: nothing is used or stored.
    assert!(matches!(redeem(b"seeded", "other", offer(b"rt-other")).await, Redeemed::OtherClient));
    match redeem(b"seeded", "client", offer(b"rt-1")).await {
        Redeemed::Fresh { grant_id, refresh_stored, .. } => {
            assert_eq!((grant_id.as_str(), refresh_stored), ("seeded", true))
        }
        other => panic!("{other:?}"),
    }
    let rt = refresh::get(&mut c, b"rt-1").await.unwrap().expect("the refresh token is stored with the redemption");
    assert_eq!((rt.grant_id.as_str(), rt.client_id.as_str(), rt.user_id.as_str()), ("seeded", "client", "user"));
    assert_eq!((rt.session_id.as_deref(), rt.data.as_str()), (Some("session"), r#"{"scopes":["openid"]}"#));
    assert_eq!((rt.created_at, rt.idle_expires_at, rt.expires_at), (t, t + 100, t + 200));
    assert!(rt.rotated_at.is_none() && rt.revoked_at.is_none());
    // A second use, in the same second: reuse, and no second token.
    assert!(matches!(redeem(b"seeded", "client", offer(b"rt-2")).await, Redeemed::Reused { .. }));
    // No seed, or expired: used, nothing stored.
    assert!(matches!(redeem(b"plain!", "client", offer(b"rt-3")).await, Redeemed::Fresh { refresh_stored: false, .. }));
    assert!(matches!(redeem(b"stale!", "client", offer(b"rt-4")).await, Redeemed::Fresh { refresh_stored: false, .. }));
    assert!(matches!(redeem(b"nosuch", "client", offer(b"rt-5")).await, Redeemed::Unknown));
    for h in [&b"rt-other"[..], b"rt-2", b"rt-3", b"rt-4", b"rt-5"] {
        assert!(refresh::get(&mut c, h).await.unwrap().is_none(), "{}", String::from_utf8_lossy(h));
    }
    let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM refresh_token").fetch_one(&mut *c).await.unwrap();
    assert_eq!(n, 1);
});

// A code minted by a replica that predates the seed columns still gets its refresh token; a
// code whose check fails leaves no usable one.
on_both!(code_without_a_refresh_seed_still_gets_its_refresh_token, |srv| {
    let (client_id, secret, _) = oidc_app(srv, json!({})).await;
    let secret = secret.unwrap();
    human(srv, "alice", "Wonder-land1").await;
    let b = Browser::new(srv);
    let (code, verifier) = code_for(srv, &b, &client_id, "openid offline_access").await;
    let mut c = srv.state.db.conn().await.unwrap();
    let cleared = sqlx::query("UPDATE auth_code SET user_id = NULL, session_id = NULL, refresh_data = NULL")
        .execute(&mut *c)
        .await
        .unwrap();
    assert_eq!(cleared.rows_affected(), 1);
    drop(c);
    let t = exchange_code(srv, Some((&client_id, &secret)), &code, &verifier).await;
    let rt = t.ok()["refresh_token"].as_str().expect("a refresh token without the seed").to_string();
    let r = token(srv, Some((&client_id, &secret)), &[("grant_type", "refresh_token"), ("refresh_token", &rt)]).await;
    assert_eq!(r.ok()["scope"], "openid offline_access");
    assert_eq!(srv.count("refresh_token").await, 2);
    // A wrong verifier: the code is used up, and no token was handed out.
    let (code, verifier) = code_for(srv, &b, &client_id, "openid offline_access").await;
    exchange_code(srv, Some((&client_id, &secret)), &code, &"b".repeat(43)).await.err(400, "invalid_grant");
    exchange_code(srv, Some((&client_id, &secret)), &code, &verifier).await.err(400, "invalid_grant");
});

on_both!(refresh_rotation_and_reuse_detection, |srv| {
    let (client_id, secret, _) = oidc_app(srv, json!({})).await;
    let secret = secret.unwrap();
    human(srv, "alice", "Wonder-land1").await;
    let b = Browser::new(srv);
    let (code, verifier) = code_for(srv, &b, &client_id, "openid email offline_access").await;
    let t = exchange_code(srv, Some((&client_id, &secret)), &code, &verifier).await;
    let rt1 = t.ok()["refresh_token"].as_str().expect("offline_access gives a refresh token").to_string();
    let refresh = |rt: String, scope: Option<&'static str>| {
        let (cid, sec) = (client_id.clone(), secret.clone());
        async move { refresh_grant(srv, (&cid, &sec), &rt, scope).await }
    };
    let r2 = refresh(rt1.clone(), None).await;
    let t2 = r2.ok().clone();
    let rt2 = t2["refresh_token"].as_str().unwrap().to_string();
    assert_ne!(rt1, rt2, "rotated");
    assert_eq!(t2["scope"], "openid email offline_access");
    let id = claims(t2["id_token"].as_str().unwrap());
    assert!(id.get("nonce").is_none(), "a refreshed ID token has no nonce");
    // Narrowing works; widening does not.
    let r3 = refresh(rt2.clone(), Some("openid")).await;
    assert_eq!(r3.ok()["scope"], "openid");
    let rt3 = r3.body["refresh_token"].as_str().unwrap().to_string();
    refresh(rt3.clone(), Some("openid profile")).await.err(400, "invalid_scope");
    // The narrowed token still carries the original grant: email comes back.
    let r4 = refresh(rt3.clone(), None).await;
    assert_eq!(r4.ok()["scope"], "openid email offline_access");
    let rt4 = r4.body["refresh_token"].as_str().unwrap().to_string();
    // Reusing an old token revokes the whole chain, including the newest.
    refresh(rt1.clone(), None).await.err(400, "invalid_grant");
    refresh(rt4.clone(), None).await.err(400, "invalid_grant");
    // Another client cannot use a refresh token.
    let (code, verifier) = code_for(srv, &b, &client_id, "openid offline_access").await;
    let t = exchange_code(srv, Some((&client_id, &secret)), &code, &verifier).await;
    let fresh = t.ok()["refresh_token"].as_str().unwrap().to_string();
    let (other, other_secret, _) = oidc_app(srv, json!({"name": "other"})).await;
    token(
        srv,
        Some((&other, other_secret.as_deref().unwrap())),
        &[("grant_type", "refresh_token"), ("refresh_token", &fresh)],
    )
    .await
    .err(400, "invalid_grant");
    // ... and its attempt did not use the token up: the right client still can.
    let r5 = refresh(fresh, None).await;
    let fresh = r5.ok()["refresh_token"].as_str().unwrap().to_string();
    // Idle expiry (30 days by default), counted again from each rotation.
    srv.clock.advance(29 * 86400);
    let r6 = refresh(fresh, None).await;
    let fresh = r6.ok()["refresh_token"].as_str().unwrap().to_string();
    srv.clock.advance(29 * 86400);
    let r7 = refresh(fresh, None).await;
    let fresh = r7.ok()["refresh_token"].as_str().unwrap().to_string();
    srv.clock.advance(31 * 86400);
    refresh(fresh, None).await.err(400, "invalid_grant");
    // A client without the refresh grant gets no refresh token and may not refresh.
    let (no_rt, no_rt_secret, _) =
        oidc_app(srv, json!({"name": "nort", "grantTypes": ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE"]})).await;
    let b2 = Browser::new(srv);
    let (code, verifier) = code_for(srv, &b2, &no_rt, "openid offline_access").await;
    let t = exchange_code(srv, Some((&no_rt, no_rt_secret.as_deref().unwrap())), &code, &verifier).await;
    assert!(t.ok().get("refresh_token").is_none());
    assert_eq!(t.body["scope"], "openid");
    token(
        srv,
        Some((&no_rt, no_rt_secret.as_deref().unwrap())),
        &[("grant_type", "refresh_token"), ("refresh_token", "x")],
    )
    .await
    .err(400, "unauthorized_client");
});

on_both!(token_and_grant_ids_are_128_bit_random, |srv| {
    // Revocation is keyed by jti and grant id, which nothing else keeps unique: they must not
    // repeat across replicas (time-ordered ids could) nor be guessable.
    let (client_id, secret, _) = oidc_app(srv, json!({"accessTokenType": "OIDC_TOKEN_TYPE_JWT"})).await;
    let secret = secret.unwrap();
    let (opaque, opaque_secret, _) = oidc_app(srv, json!({"name": "opaque"})).await;
    let opaque_secret = opaque_secret.unwrap();
    human(srv, "alice", "Wonder-land1").await;
    let b = Browser::new(srv);
    let mut jtis = std::collections::HashSet::new();
    let mut gids = std::collections::HashSet::new();
    let jwt_client = (client_id.as_str(), secret.as_str());
    for (client, secret) in [jwt_client, jwt_client, (opaque.as_str(), opaque_secret.as_str())] {
        let (code, verifier) = code_for(srv, &b, client, "openid offline_access").await;
        let t = exchange_code(srv, Some((client, secret)), &code, &verifier).await;
        let first = latch::oauth::access::decode(&srv.state, t.ok()["access_token"].as_str().unwrap()).unwrap();
        let rt = t.body["refresh_token"].as_str().unwrap();
        let r = token(srv, Some((client, secret)), &[("grant_type", "refresh_token"), ("refresh_token", rt)]).await;
        let next = latch::oauth::access::decode(&srv.state, r.ok()["access_token"].as_str().unwrap()).unwrap();
        assert_eq!(next.gid, first.gid, "a refresh stays in its grant");
        let gid = first.gid.clone().unwrap();
        assert_eq!(id_bytes(&json!(gid)), 16, "{gid}");
        assert!(gids.insert(gid));
        for jti in [first.jti, next.jti] {
            assert_eq!(id_bytes(&json!(jti)), 16, "{jti}");
            assert!(jtis.insert(jti));
        }
    }
});

on_both!(at_hash_follows_the_signing_key, |srv| {
    // OIDC Core 3.1.3.6: the hash of the ID token's algorithm, as relying parties check it
    // (openid-client: SHA-512 for EdDSA with Ed25519), left half; computed here independently.
    use sha2::Digest;
    let (client_id, secret, _) = oidc_app(srv, json!({})).await;
    let secret = secret.unwrap();
    human(srv, "alice", "Wonder-land1").await;
    let b = Browser::new(srv);
    for (body, alg) in [
        (json!({"ed25519": {}}), "EdDSA"),
        (json!({"ecdsa": {"curve": "ECDSA_CURVE_P256"}}), "ES256"),
        (json!({}), "RS256"),
    ] {
        let kid = srv.post("/v2/web_keys", body).await.ok()["id"].as_str().unwrap().to_string();
        srv.post(&format!("/v2/web_keys/{kid}/_activate"), json!({})).await.ok();
        let (code, verifier) = code_for(srv, &b, &client_id, "openid offline_access").await;
        let t = exchange_code(srv, Some((&client_id, &secret)), &code, &verifier).await.ok().clone();
        let rt = t["refresh_token"].as_str().unwrap();
        let r =
            token(srv, Some((&client_id, &secret)), &[("grant_type", "refresh_token"), ("refresh_token", rt)]).await;
        let jwks: Value = reqwest::get(srv.url("/oauth/v2/keys")).await.unwrap().json().await.unwrap();
        let jwk = jwks["keys"].as_array().unwrap().iter().find(|k| k["kid"] == kid.as_str()).unwrap().clone();
        let jwk: jsonwebtoken::jwk::Jwk = serde_json::from_value(jwk).unwrap();
        for t in [&t, r.ok()] {
            let (at, idt) = (t["access_token"].as_str().unwrap(), t["id_token"].as_str().unwrap());
            let h = header(idt);
            assert_eq!((h["alg"].as_str(), h["kid"].as_str()), (Some(alg), Some(kid.as_str())));
            let expected = match alg {
                "EdDSA" => URL_SAFE_NO_PAD.encode(&sha2::Sha512::digest(at)[..32]),
                _ => URL_SAFE_NO_PAD.encode(&sha2::Sha256::digest(at)[..16]),
            };
            assert_eq!(claims(idt)["at_hash"], expected.as_str(), "{alg}");
            let mut v = jsonwebtoken::Validation::new(alg.parse().unwrap());
            v.set_audience(&[client_id.as_str()]);
            v.validate_exp = false;
            jsonwebtoken::decode::<Value>(idt, &jsonwebtoken::DecodingKey::from_jwk(&jwk).unwrap(), &v)
                .expect("signed with the key its header names");
        }
    }
});

// A logout between the sign-in and the code's exchange: the exchange gives nothing, and the
// refresh token stored with the redemption is revoked (it would have outlived the session's
// revocation entry, which is kept only as long as signed tokens live).
on_both!(a_code_exchanged_after_its_logout_gives_nothing, |srv| {
    human(srv, "alice", "Wonder-land1").await;
    let (client_id, secret, _) = oidc_app(srv, json!({})).await;
    let secret = secret.unwrap();
    let b = Browser::new(srv);
    let (code, verifier) = code_for(srv, &b, &client_id, "openid offline_access").await;
    b.sign_out("/oidc/v1/end_session").await;
    assert_eq!(srv.count("session").await, 0);
    let r = exchange_code(srv, Some((&client_id, &secret)), &code, &verifier).await;
    r.err(400, "invalid_grant");
    assert!(r.body["error_description"].as_str().unwrap().contains("ended"), "{}", r.body);
    let mut c = srv.state.db.conn().await.unwrap();
    let (live,): (i64,) =
        sqlx::query_as("SELECT COUNT(*) FROM refresh_token WHERE revoked_at IS NULL").fetch_one(&mut *c).await.unwrap();
    assert_eq!(live, 0, "no live refresh token is left");
});

// Role claims (ZITADEL's claim matrix): a requested role, or every role once the application
// (ID token, JWT access token) or the project (everywhere) asserts them, under
// `urn:service:iam:org:project:roles` and the project's own
// `urn:service:iam:org:project:{projectId}:roles`, shaped `{role: {orgId: primaryDomain}}`; in
// the ID token, the JWT access token, userinfo and introspection alike.
on_both!(role_claims_where_requested_or_asserted, |srv| {
    let (client_id, secret, project) = oidc_app(srv, json!({"accessTokenType": "OIDC_TOKEN_TYPE_JWT"})).await;
    let secret = secret.unwrap();
    for key in ["reader", "writer"] {
        let role = json!({"roleKey": key, "displayName": key});
        srv.post(&format!("/management/v1/projects/{project}/roles"), role).await.ok();
    }
    let alice = human(srv, "alice", "Wonder-land1").await;
    let grant = json!({"projectId": project, "roleKeys": ["reader", "writer"]});
    srv.post(&format!("/management/v1/users/{alice}/grants"), grant).await.ok();
    let org = srv.get("/management/v1/orgs/me").await.ok()["org"].clone();
    let (org_id, domain) = (org["id"].as_str().unwrap().to_string(), org["primaryDomain"].clone());
    let general = "urn:service:iam:org:project:roles";
    let own = format!("urn:service:iam:org:project:{project}:roles");
    let b = Browser::new(srv);
    // Every place a token's claims show: ID token, JWT access token, userinfo, introspection.
    let places = async |scope: &str| -> Vec<Value> {
        let (code, verifier) = code_for(srv, &b, &client_id, scope).await;
        let t = exchange_code(srv, Some((&client_id, &secret)), &code, &verifier).await;
        let at = t.ok()["access_token"].as_str().unwrap().to_string();
        let http = reqwest::Client::new();
        let userinfo = http.get(srv.url("/oidc/v1/userinfo")).bearer_auth(&at).send().await.unwrap();
        let userinfo: Value = userinfo.json().await.unwrap();
        let introspected = http
            .post(srv.url("/oauth/v2/introspect"))
            .basic_auth(&client_id, Some(&secret))
            .form(&[("token", at.as_str())])
            .send()
            .await
            .unwrap();
        let introspected: Value = introspected.json().await.unwrap();
        vec![claims(t.body["id_token"].as_str().unwrap()), claims(&at), userinfo, introspected]
    };
    let roles = |c: &Value| -> Vec<String> {
        let mut keys: Vec<String> = c[general].as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default();
        keys.sort();
        assert_eq!(c[general], c[&own], "the project's own claim is the same: {c}");
        keys
    };
    // Requested: that role alone, everywhere.
    for c in places("openid urn:service:iam:org:project:role:reader").await {
        assert_eq!(roles(&c), ["reader"], "{c}");
        assert_eq!(c[general]["reader"][&org_id], domain, "{c}");
    }
    // Not requested, not asserted: none.
    for c in places("openid").await {
        assert!(roles(&c).is_empty(), "{c}");
    }
    // The project asserts its roles: every role, everywhere, without a role scope.
    let asserted = json!({"name": "roles", "projectRoleAssertion": true});
    srv.put(&format!("/management/v1/projects/{project}"), asserted).await.ok();
    for c in places("openid").await {
        assert_eq!(roles(&c), ["reader", "writer"], "{c}");
    }
});

on_both!(a_refresh_that_fails_on_the_servers_side_leaves_its_token_usable, |srv| {
    // The role claim is read after the rotation; a grant whose stored roles cannot be read
    // makes that read fail (a 500), as a store going away would.
    let (client_id, secret, project) = oidc_app(srv, json!({})).await;
    let secret = secret.unwrap();
    srv.post(&format!("/management/v1/projects/{project}/roles"), json!({"roleKey": "reader", "displayName": "R"}))
        .await
        .ok();
    let alice = human(srv, "alice", "Wonder-land1").await;
    srv.post(&format!("/management/v1/users/{alice}/grants"), json!({"projectId": project, "roleKeys": ["reader"]}))
        .await
        .ok();
    let b = Browser::new(srv);
    let scope = "openid offline_access urn:service:iam:org:project:role:reader";
    let (code, verifier) = code_for(srv, &b, &client_id, scope).await;
    let t = exchange_code(srv, Some((&client_id, &secret)), &code, &verifier).await;
    let rt = t.ok()["refresh_token"].as_str().unwrap().to_string();
    let refresh = |rt: String| {
        let (cid, sec) = (client_id.clone(), secret.clone());
        async move { refresh_grant(srv, (&cid, &sec), &rt, None).await }
    };
    let set_roles = |keys: &'static str| {
        let alice = alice.clone();
        async move {
            let mut c = srv.state.db.conn().await.unwrap();
            sqlx::query("UPDATE user_grant SET role_keys = $1 WHERE user_id = $2")
                .bind(keys)
                .bind(alice)
                .execute(&mut *c)
                .await
                .unwrap();
        }
    };
    set_roles("not json").await;
    refresh(rt.clone()).await.err(500, "server_error");
    assert_eq!(srv.count("refresh_token").await, 1, "the successor stored by the rotation is gone");
    set_roles("[\"reader\"]").await;
    // The retry with the same token is no reuse: it is served, and rotates.
    let r = refresh(rt.clone()).await;
    let next = r.ok()["refresh_token"].as_str().unwrap().to_string();
    assert_ne!(next, rt);
    assert!(claims(r.body["id_token"].as_str().unwrap())["urn:service:iam:org:project:roles"]["reader"].is_object());
    // From here on the old token is used: presenting it again revokes the chain.
    refresh(rt).await.err(400, "invalid_grant");
    refresh(next).await.err(400, "invalid_grant");
});

// With a reuse interval (LATCH_REFRESH_REUSE_INTERVAL) a rotated refresh token is served again
// within it, each use making another successor (a client whose answer was lost retries);
// after it, a use is reuse and revokes the whole chain, the successors of every use included.
on_both!(a_refresh_token_may_be_used_again_within_the_reuse_interval, config: |c| c.refresh_reuse_interval = "30s".into(), |srv| {
    let (client_id, secret, _) = oidc_app(srv, json!({})).await;
    let secret = secret.unwrap();
    human(srv, "alice", "Wonder-land1").await;
    let b = Browser::new(srv);
    let (code, verifier) = code_for(srv, &b, &client_id, "openid email offline_access").await;
    let t = exchange_code(srv, Some((&client_id, &secret)), &code, &verifier).await;
    let rt1 = t.ok()["refresh_token"].as_str().unwrap().to_string();
    let refresh = |rt: String, scope: Option<&'static str>| {
        let (cid, sec) = (client_id.clone(), secret.clone());
        async move {
            let r = refresh_grant(srv, (&cid, &sec), &rt, scope).await;
            r.ok();
            r.body["refresh_token"].as_str().unwrap().to_string()
        }
    };
    let lost = refresh(rt1.clone(), None).await;
    srv.clock.advance(29);
    let retried = refresh(rt1.clone(), None).await;
    let narrowed = refresh(rt1.clone(), Some("openid")).await;
    assert!(lost != retried && retried != narrowed && lost != narrowed);
    // Both branches live on: the successor the client never got is not revoked by the retry.
    let lost_next = refresh(lost, None).await;
    let next = refresh(retried, None).await;
    // The interval counts from the first rotation: a second later the old token is reused.
    srv.clock.advance(2);
    refresh_grant(srv, (&client_id, &secret), &rt1, None).await.err(400, "invalid_grant");
    for rt in [next, lost_next, narrowed] {
        refresh_grant(srv, (&client_id, &secret), &rt, None).await.err(400, "invalid_grant");
    }
});

on_both!(code_reuse_revokes_the_refresh_chain, |srv| {
    let (client_id, secret, _) = oidc_app(srv, json!({})).await;
    let secret = secret.unwrap();
    human(srv, "alice", "Wonder-land1").await;
    let b = Browser::new(srv);
    let (code, verifier) = code_for(srv, &b, &client_id, "openid offline_access").await;
    let form = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", CB),
        ("code_verifier", verifier.as_str()),
    ];
    let t = token(srv, Some((&client_id, &secret)), &form).await;
    let rt = t.ok()["refresh_token"].as_str().unwrap().to_string();
    token(srv, Some((&client_id, &secret)), &form).await.err(400, "invalid_grant");
    token(srv, Some((&client_id, &secret)), &[("grant_type", "refresh_token"), ("refresh_token", &rt)])
        .await
        .err(400, "invalid_grant");
});

pub async fn machine(srv: &TestServer, name: &str, jwt: bool) -> (String, String) {
    let r = srv.post("/management/v1/users/machine", json!({"userName": name, "name": name, "accessTokenType": if jwt { "ACCESS_TOKEN_TYPE_JWT" } else { "ACCESS_TOKEN_TYPE_BEARER" }})).await;
    let id = r.ok()["userId"].as_str().unwrap().to_string();
    let s = srv.put(&format!("/management/v1/users/{id}/secret"), json!({})).await;
    (id, s.ok()["clientSecret"].as_str().unwrap().to_string())
}

on_both!(client_credentials_for_machine_users, |srv| {
    let (robot, secret) = machine(srv, "robot", false).await;
    // A project of the machine users' organization, named in the audience.
    let (_, _, p1) = oidc_app(srv, json!({})).await;
    let p1_aud = format!("urn:service:iam:org:project:id:{p1}:aud");
    let r = token(
        srv,
        Some(("robot", &secret)),
        &[("grant_type", "client_credentials"), ("scope", &format!("openid {p1_aud} unknown-scope offline_access"))],
    )
    .await;
    let t = r.ok().clone();
    let keys: Vec<_> = t.as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys.len(), 4, "access_token, token_type, expires_in, scope only: {keys:?}");
    assert_eq!(t["scope"], format!("openid {p1_aud}"));
    assert!(!t["access_token"].as_str().unwrap().contains('.'), "opaque for a Bearer machine user");
    // client_secret_post works too.
    token(srv, None, &[("grant_type", "client_credentials"), ("client_id", "robot"), ("client_secret", &secret)])
        .await
        .ok();
    // A JWT machine user gets an RFC 9068 token.
    let (jwt_robot, jwt_secret) = machine(srv, "jwt-robot", true).await;
    let t =
        token(srv, Some(("jwt-robot", &jwt_secret)), &[("grant_type", "client_credentials"), ("scope", &p1_aud)]).await;
    let at = t.ok()["access_token"].as_str().unwrap().to_string();
    assert_eq!(header(&at)["typ"], "at+jwt");
    let c = claims(&at);
    assert_eq!(c["sub"], jwt_robot.as_str());
    assert_eq!(c["client_id"], "jwt-robot");
    assert_eq!(c["aud"], json!(["jwt-robot", p1]));
    assert_eq!(c["iss"], srv.base.as_str());
    for k in ["exp", "iat", "nbf", "jti", "scope"] {
        assert!(c.get(k).is_some(), "{k}");
    }
    // Failures.
    let r = token(srv, Some(("robot", "wrong")), &[("grant_type", "client_credentials")]).await;
    r.err(401, "invalid_client");
    token(srv, Some(("ghost", "x")), &[("grant_type", "client_credentials")]).await.err(401, "invalid_client");
    let (app_client, app_secret, _) = oidc_app(srv, json!({})).await;
    token(srv, Some((&app_client, app_secret.as_deref().unwrap())), &[("grant_type", "client_credentials")])
        .await
        .err(400, "unauthorized_client");
    // Only an application that authenticated learns that: a wrong secret fails as any would.
    token(srv, Some((&app_client, "wrong")), &[("grant_type", "client_credentials")]).await.err(401, "invalid_client");
    srv.post(&format!("/management/v1/users/{robot}/_deactivate"), json!({})).await.ok();
    token(srv, Some(("robot", &secret)), &[("grant_type", "client_credentials")]).await.err(401, "invalid_client");
});

/// A key file for a machine user, and an assertion signed with it.
pub async fn machine_key(srv: &TestServer, user_id: &str) -> (String, jsonwebtoken::EncodingKey) {
    let r = srv.post(&format!("/management/v1/users/{user_id}/keys"), json!({"type": "KEY_TYPE_JSON"})).await;
    let file: Value =
        serde_json::from_slice(&STANDARD.decode(r.ok()["keyDetails"].as_str().unwrap()).unwrap()).unwrap();
    (
        file["keyId"].as_str().unwrap().to_string(),
        jsonwebtoken::EncodingKey::from_rsa_pem(file["key"].as_str().unwrap().as_bytes()).unwrap(),
    )
}

pub fn sign(kid: &str, key: &jsonwebtoken::EncodingKey, claims: &Value) -> String {
    let mut h = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
    h.kid = Some(kid.to_string());
    jsonwebtoken::encode(&h, claims, key).unwrap()
}

on_both!(jwt_bearer_grant, |srv| {
    let (robot, _) = machine(srv, "signer", false).await;
    let (kid, key) = machine_key(srv, &robot).await;
    let n = now();
    let good = json!({"iss": robot, "sub": robot, "aud": srv.base, "iat": n, "exp": n + 300, "jti": "j-1"});
    let grant = |assertion: String, scope: &'static str| async move {
        token(
            srv,
            None,
            &[
                ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"),
                ("assertion", &assertion),
                ("scope", scope),
            ],
        )
        .await
    };
    let t = grant(sign(&kid, &key, &good), "openid profile").await;
    let body = t.ok().clone();
    assert!(body.get("refresh_token").is_none());
    let id = claims(body["id_token"].as_str().expect("openid gives an ID token"));
    assert_eq!(id["sub"], robot.as_str());
    assert_eq!(id["azp"], robot.as_str());
    assert_eq!(id["amr"], json!(["private_key"]));
    // The same jti again is a replay.
    grant(sign(&kid, &key, &good), "openid").await.err(400, "invalid_grant");
    // The latest exp there is: accepted (no overflow), its jti remembered only while its iat
    // lets it pass (an hour and the clock skew), not until the end of time.
    let mut far = good.clone();
    far["exp"] = json!(i64::MAX);
    far["jti"] = json!("j-far");
    grant(sign(&kid, &key, &far), "openid").await.ok();
    let mut c = srv.state.db.conn().await.unwrap();
    let (until,): (i64,) = sqlx::query_as("SELECT expires_at FROM assertion_jti WHERE jti_key LIKE '%:j-far'")
        .fetch_one(&mut *c)
        .await
        .unwrap();
    drop(c);
    assert_eq!(until, n + 3600 + 60);
    grant(sign(&kid, &key, &far), "openid").await.err(400, "invalid_grant");
    let mut bad_cases = Vec::new();
    let mut c = good.clone();
    c["aud"] = json!("https://elsewhere.example");
    bad_cases.push(sign(&kid, &key, &c));
    let mut c = good.clone();
    c["exp"] = json!(n - 120);
    c["jti"] = json!("j-2");
    bad_cases.push(sign(&kid, &key, &c));
    let mut c = good.clone();
    c["iat"] = json!(n + 3600);
    c["jti"] = json!("j-3");
    bad_cases.push(sign(&kid, &key, &c));
    let mut c = good.clone();
    c["iat"] = json!(n - 7200);
    c["jti"] = json!("j-4");
    bad_cases.push(sign(&kid, &key, &c));
    let mut c = good.clone();
    c["sub"] = json!("someone-else");
    c["jti"] = json!("j-5");
    bad_cases.push(sign(&kid, &key, &c));
    let mut c = good.clone();
    c["jti"] = json!("j-6");
    bad_cases.push(sign("unknown-kid", &key, &c));
    // A jti too long to remember (PostgreSQL refuses index entries of this size).
    let mut c = good.clone();
    c["jti"] = json!("j".repeat(3000));
    bad_cases.push(sign(&kid, &key, &c));
    // alg none, HS256 keyed with the public key, a tampered payload.
    let none = format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(br#"{"alg":"none","kid":"x"}"#),
        URL_SAFE_NO_PAD.encode(good.to_string())
    );
    bad_cases.push(none);
    let mut hs = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
    hs.kid = Some(kid.clone());
    let mut stored = srv.state.db.conn().await.unwrap();
    let public = latch::store::key::get_key(&mut stored, latch::store::key::Owner::User, &robot, &kid)
        .await
        .unwrap()
        .unwrap()
        .public_key;
    drop(stored);
    bad_cases
        .push(jsonwebtoken::encode(&hs, &good, &jsonwebtoken::EncodingKey::from_secret(public.as_bytes())).unwrap());
    let mut c = good.clone();
    c["jti"] = json!("j-7");
    let signed = sign(&kid, &key, &c);
    let mut parts: Vec<String> = signed.split('.').map(str::to_string).collect();
    let mut tampered = c.clone();
    tampered["sub"] = json!("root");
    parts[1] = URL_SAFE_NO_PAD.encode(tampered.to_string());
    bad_cases.push(parts.join("."));
    bad_cases.push("not-a-jwt".into());
    for a in bad_cases {
        let r = grant(a.clone(), "openid").await;
        r.err(400, "invalid_grant");
    }

    // The user and its key are kept in the replica's cache; a change through the API shows at
    // once: a second key works, then with the user deactivated nothing does, and a deleted key
    // does not either once the user is active again.
    let mut c = good.clone();
    c["jti"] = json!("j-8");
    grant(sign(&kid, &key, &c), "openid").await.ok();
    let (kid2, key2) = machine_key(srv, &robot).await;
    c["jti"] = json!("j-9");
    grant(sign(&kid2, &key2, &c), "openid").await.ok();
    srv.post(&format!("/management/v1/users/{robot}/_deactivate"), json!({})).await.ok();
    c["jti"] = json!("j-10");
    grant(sign(&kid, &key, &c), "openid").await.err(400, "invalid_grant");
    srv.post(&format!("/management/v1/users/{robot}/_reactivate"), json!({})).await.ok();
    c["jti"] = json!("j-11");
    grant(sign(&kid, &key, &c), "openid").await.ok();
    srv.delete(&format!("/management/v1/users/{robot}/keys/{kid}")).await.ok();
    c["jti"] = json!("j-12");
    grant(sign(&kid, &key, &c), "openid").await.err(400, "invalid_grant");
    c["jti"] = json!("j-13");
    grant(sign(&kid2, &key2, &c), "openid").await.ok();
});

on_both!(private_key_jwt_client_authentication, |srv| {
    let (client_id, _, project) =
        oidc_app(srv, json!({"name": "pkjwt", "authMethodType": "OIDC_AUTH_METHOD_TYPE_PRIVATE_KEY_JWT"})).await;
    let apps = srv.post(&format!("/management/v1/projects/{project}/apps/_search"), json!({})).await;
    let app_id = apps.ok()["result"][0]["id"].as_str().unwrap().to_string();
    let r = srv
        .post(&format!("/management/v1/projects/{project}/apps/{app_id}/keys"), json!({"type": "KEY_TYPE_JSON"}))
        .await;
    let file: Value =
        serde_json::from_slice(&STANDARD.decode(r.ok()["keyDetails"].as_str().unwrap()).unwrap()).unwrap();
    let key = jsonwebtoken::EncodingKey::from_rsa_pem(file["key"].as_str().unwrap().as_bytes()).unwrap();
    let kid = file["keyId"].as_str().unwrap().to_string();
    human(srv, "alice", "Wonder-land1").await;
    let b = Browser::new(srv);
    let (code, verifier) = code_for(srv, &b, &client_id, "openid").await;
    let n = now();
    let assertion = sign(
        &kid,
        &key,
        &json!({"iss": client_id, "sub": client_id, "aud": srv.url("/oauth/v2/token"), "iat": n, "exp": n + 60, "jti": "a-1"}),
    );
    // The code exchange authenticated by assertion `a`.
    let exchange_form = |code: &str, verifier: &str, a: &str| {
        vec![
            ("grant_type", "authorization_code".to_string()),
            ("code", code.to_string()),
            ("redirect_uri", CB.to_string()),
            ("code_verifier", verifier.to_string()),
            ("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer".to_string()),
            ("client_assertion", a.to_string()),
        ]
    };
    let form = |a: &str| exchange_form(&code, &verifier, a);
    let f = form(&assertion);
    let pairs: Vec<(&str, &str)> = f.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let at = token(srv, None, &pairs).await.ok()["access_token"].as_str().unwrap().to_string();
    // Introspection and revocation take an assertion meant for the token endpoint too (OIDC
    // Core 9 names its URL as the audience of every client assertion), besides the issuer and
    // their own URL; not one for another server.
    let at_endpoint = |path: &'static str, jti: &'static str, aud: String| {
        let claims = json!({"iss": client_id, "sub": client_id, "aud": aud, "iat": n, "exp": n + 60, "jti": jti});
        let assertion = sign(&kid, &key, &claims);
        let body = form_urlencoded::Serializer::new(String::new())
            .extend_pairs([
                ("token", at.as_str()),
                ("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"),
                ("client_assertion", assertion.as_str()),
            ])
            .finish();
        let req = reqwest::Client::new()
            .post(srv.url(path))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body);
        async move { req.send().await.unwrap() }
    };
    let r = at_endpoint("/oauth/v2/introspect", "i-1", srv.url("/oauth/v2/token")).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap()["active"], true);
    let r = at_endpoint("/oauth/v2/introspect", "i-2", srv.url("/oauth/v2/introspect")).await;
    assert_eq!(r.json::<Value>().await.unwrap()["active"], true);
    let r = at_endpoint("/oauth/v2/introspect", "i-3", "https://other".into()).await;
    assert_eq!(r.status(), 401);
    let r = at_endpoint("/oauth/v2/revoke", "r-1", "https://other".into()).await;
    assert_eq!(r.status(), 400);
    let r = at_endpoint("/oauth/v2/revoke", "r-2", srv.url("/oauth/v2/token")).await;
    assert_eq!(r.status(), 200);
    let r = at_endpoint("/oauth/v2/introspect", "i-4", srv.base.clone()).await;
    assert_eq!(r.json::<Value>().await.unwrap()["active"], false, "revoked");
    // Replaying the assertion is refused.
    token(srv, None, &pairs).await.err(400, "invalid_client");
    // Wrong assertion type, foreign audience.
    let bad_aud = sign(
        &kid,
        &key,
        &json!({"iss": client_id, "sub": client_id, "aud": "https://other", "iat": n, "exp": n + 60, "jti": "a-2"}),
    );
    let f = form(&bad_aud);
    let pairs: Vec<(&str, &str)> = f.iter().map(|(k, v)| (*k, v.as_str())).collect();
    token(srv, None, &pairs).await.err(400, "invalid_client");
    let mut f = form(&assertion);
    f[4].1 = "urn:other".into();
    let pairs: Vec<(&str, &str)> = f.iter().map(|(k, v)| (*k, v.as_str())).collect();
    token(srv, None, &pairs).await.err(400, "invalid_request");

    // The application's keys are kept in the replica's cache; deleting the key through the API
    // shows at once.
    let exchange = |jti: &'static str| {
        let (b, key, kid, client_id, exchange_form) = (&b, &key, &kid, &client_id, &exchange_form);
        async move {
            let (code, verifier) = code_for(srv, b, client_id, "openid").await;
            let n = now();
            let claims = json!({"iss": client_id, "sub": client_id, "aud": srv.url("/oauth/v2/token"), "iat": n, "exp": n + 60, "jti": jti});
            let f = exchange_form(&code, &verifier, &sign(kid, key, &claims));
            let pairs: Vec<(&str, &str)> = f.iter().map(|(k, v)| (*k, v.as_str())).collect();
            token(srv, None, &pairs).await
        }
    };
    exchange("a-3").await.ok();
    srv.delete(&format!("/management/v1/projects/{project}/apps/{app_id}/keys/{kid}")).await.ok();
    exchange("a-4").await.err(400, "invalid_client");
});

on_both!(bad_requests, |srv| {
    token(srv, None, &[]).await.err(400, "invalid_request");
    token(srv, None, &[("grant_type", "password"), ("username", "a"), ("password", "b")])
        .await
        .err(400, "unsupported_grant_type");
    token(srv, None, &[("grant_type", "client_credentials"), ("grant_type", "client_credentials")])
        .await
        .err(400, "invalid_request");
    let r = reqwest::Client::new()
        .post(srv.url("/oauth/v2/token"))
        .json(&json!({"grant_type": "client_credentials"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"], "invalid_request");
    let big = "x".repeat(70_000);
    token(srv, None, &[("grant_type", "client_credentials"), ("scope", &big)]).await.err(413, "invalid_request");
    let r = reqwest::Client::new().get(srv.url("/oauth/v2/token")).send().await.unwrap();
    assert_eq!(r.status(), 405);
    // A client id that can name nothing (a NUL, which PostgreSQL would refuse in a query, or
    // thousands of characters) is an unknown client on both stores.
    let long = "c".repeat(5_000);
    for id in ["abc\0", long.as_str()] {
        token(srv, Some((id, "x")), &[("grant_type", "client_credentials")]).await.err(401, "invalid_client");
        let enc = form_urlencoded::byte_serialize(id.as_bytes()).collect::<String>();
        let r = reqwest::Client::new()
            .post(srv.url("/oauth/v2/introspect"))
            .header("authorization", format!("Basic {}", STANDARD.encode(format!("{enc}:x"))))
            .form(&[("token", "x")])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401);
        assert_eq!(r.json::<Value>().await.unwrap()["error"], "invalid_client");
    }
    // A scope no access token can carry is refused, rather than answered with a token no
    // endpoint would read.
    let (_, secret) = machine(srv, "wordy", false).await;
    let roles: Vec<String> =
        (0..20).map(|i| format!("urn:service:iam:org:project:role:r{i}{}", "x".repeat(450))).collect();
    let form = [("grant_type", "client_credentials"), ("scope", &roles.join(" "))];
    token(srv, Some(("wordy", &secret)), &form).await.err(400, "invalid_scope");
    let form = [("grant_type", "client_credentials"), ("scope", &roles[..2].join(" "))];
    token(srv, Some(("wordy", &secret)), &form).await.ok();
});

/// A sign-in of `user` to `client_id` asking for `scope`, and the code's exchange.
async fn tokens_of(srv: &TestServer, client: (&str, &str), user: (&str, &str), scope: &str) -> Value {
    let b = Browser::new(srv);
    let (verifier, challenge) = pkce();
    let (id, page) = b
        .authorize(&[
            ("client_id", client.0),
            ("redirect_uri", CB),
            ("response_type", "code"),
            ("scope", scope),
            ("code_challenge", &challenge),
            ("code_challenge_method", "S256"),
        ])
        .await;
    let done = b.sign_in(&id.expect("a login page"), &page, user.0, user.1).await;
    let code = param(&done.redirect_params(), "code").unwrap_or_else(|| panic!("{:?}", done.location)).to_string();
    exchange_code(srv, Some(client), &code, &verifier).await.ok().clone()
}

on_both!(audience_scopes_name_projects_of_the_clients_organization, |srv| {
    // The instance's default organization: a project and an application (the operator's
    // console, say), alice, and a machine user.
    let (console, console_secret, home_project) = oidc_app(srv, json!({})).await;
    let console_secret = console_secret.unwrap();
    human(srv, "alice", "Wonder-land1").await;
    let (_, robot_secret) = machine(srv, "robot", false).await;
    let home = srv.get("/management/v1/orgs/me").await.ok()["org"]["id"].as_str().unwrap().to_string();
    // Another organization with its own project, application and user.
    let x = srv.post("/management/v1/orgs", json!({"name": "Xorg"})).await.ok()["id"].as_str().unwrap().to_string();
    let as_x = |method: &'static str, path: String, body: Value| {
        let x = x.clone();
        async move { srv.call_as(Some(&srv.pat), Some(&x), method, &path, body).await }
    };
    let px = as_x("POST", "/management/v1/projects".into(), json!({"name": "px"})).await.ok()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let app = json!({"name": "xweb", "redirectUris": [CB], "authMethodType": "OIDC_AUTH_METHOD_TYPE_BASIC",
                     "grantTypes": ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_TOKEN_EXCHANGE"]});
    let r = as_x("POST", format!("/management/v1/projects/{px}/apps/oidc"), app).await;
    let (xweb, xweb_secret) =
        (r.ok()["clientId"].as_str().unwrap().to_string(), r.body["clientSecret"].as_str().unwrap().to_string());
    let body = json!({"userName": "xavier", "profile": {"firstName": "X", "lastName": "Avier"},
                      "email": {"email": "xavier@example.com", "isEmailVerified": true}});
    let xavier =
        as_x("POST", "/management/v1/users/human".into(), body).await.ok()["userId"].as_str().unwrap().to_string();
    let password = json!({"password": "Xavier-Passw0rd", "noChangeRequired": true});
    as_x("POST", format!("/management/v1/users/{xavier}/password"), password).await.ok();

    let aud = |p: &str| format!("urn:service:iam:org:project:id:{p}:aud");
    let scope = format!("openid {} {} {}", aud("latch"), aud(&home_project), aud(&px));
    let audience = |t: &Value| -> Vec<String> {
        claims(t["id_token"].as_str().unwrap())["aud"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect()
    };
    let api_status = |at: String| async move {
        srv.call_as(Some(&at), None, "GET", "/management/v1/orgs/me", json!(null)).await.status
    };
    // alice (of the default organization) at the other organization's
    // application: neither the API nor her organization's project; only its own project.
    let t = tokens_of(srv, (&xweb, &xweb_secret), ("alice", "Wonder-land1"), &scope).await;
    let a = audience(&t);
    assert!(a.contains(&px) && !a.contains(&"latch".to_string()) && !a.contains(&home_project), "{a:?}");
    assert_eq!(api_status(t["access_token"].as_str().unwrap().to_string()).await, 401);
    // xavier at his own organization's application: the API too.
    let t = tokens_of(srv, (&xweb, &xweb_secret), ("xavier", "Xavier-Passw0rd"), &scope).await;
    let a = audience(&t);
    assert!(a.contains(&px) && a.contains(&"latch".to_string()) && !a.contains(&home_project), "{a:?}");
    assert_ne!(api_status(t["access_token"].as_str().unwrap().to_string()).await, 401);
    let xavier_token = t["access_token"].as_str().unwrap().to_string();
    // xavier at the default organization's console: the API, not the other project.
    let t =
        tokens_of(srv, (&console, &console_secret), ("xavier", "Xavier-Passw0rd"), &format!("{scope} offline_access"))
            .await;
    let a = audience(&t);
    assert!(a.contains(&"latch".to_string()) && a.contains(&home_project) && !a.contains(&px), "{a:?}");
    // Refreshing applies the rule as it stands: with another default organization the console
    // is one organization's application like any other.
    let rt = t["refresh_token"].as_str().unwrap().to_string();
    {
        let mut c = srv.state.db.conn().await.unwrap();
        sqlx::query("UPDATE instance SET default_org_id = $1").bind(&x).execute(&mut *c).await.unwrap();
        srv.state.cache.clear();
    }
    let form = [("grant_type", "refresh_token"), ("refresh_token", rt.as_str())];
    let r = token(srv, Some((&console, &console_secret)), &form).await;
    let a = audience(r.ok());
    assert!(!a.contains(&"latch".to_string()) && a.contains(&home_project), "{a:?}");
    {
        let mut c = srv.state.db.conn().await.unwrap();
        sqlx::query("UPDATE instance SET default_org_id = $1").bind(&home).execute(&mut *c).await.unwrap();
        srv.state.cache.clear();
    }
    // Nor does a token exchange carry it over: xavier (who may impersonate the default
    // organization's end users) impersonates alice at his organization's application; his
    // token names the API, alice's may not.
    srv.put("/v2/features/instance", json!({"oidcTokenExchange": true})).await.ok();
    srv.put("/admin/v1/policies/security", json!({"enableImpersonation": true})).await.ok();
    let users = srv.post("/management/v1/users/_search", json!({})).await;
    let alice = users.ok()["result"].as_array().unwrap().iter().find(|u| u["userName"] == "alice").unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    srv.post("/management/v1/orgs/me/members", json!({"userId": xavier, "roles": ["ORG_END_USER_IMPERSONATOR"]}))
        .await
        .ok();
    let form = [
        ("grant_type", "urn:ietf:params:oauth:grant-type:token-exchange"),
        ("subject_token", alice.as_str()),
        ("subject_token_type", "urn:service:params:oauth:token-type:user_id"),
        ("actor_token", xavier_token.as_str()),
        ("actor_token_type", "urn:ietf:params:oauth:token-type:access_token"),
    ];
    let r = token(srv, Some((&xweb, &xweb_secret)), &form).await;
    assert_eq!(api_status(r.ok()["access_token"].as_str().unwrap().to_string()).await, 401, "{}", r.body);
    // A machine user: its own organization's projects and the API; organization scopes only of
    // its own organization.
    let form = [
        ("grant_type", "client_credentials"),
        ("scope", &format!("{scope} urn:service:iam:org:id:{x} urn:service:iam:org:id:{home}")),
    ];
    let r = token(srv, Some(("robot", &robot_secret)), &form).await;
    let granted: Vec<&str> = r.ok()["scope"].as_str().unwrap().split(' ').collect();
    assert!(granted.contains(&aud("latch").as_str()) && granted.contains(&aud(&home_project).as_str()), "{granted:?}");
    assert!(!granted.contains(&aud(&px).as_str()), "{granted:?}");
    assert!(!granted.iter().any(|s| s.ends_with(&x)), "{granted:?}");
    assert!(granted.iter().any(|s| s.ends_with(&home)), "{granted:?}");
});

/// Whether the browser's session answers an authorization request without the login page.
async fn signs_in_silently(b: &Browser, client_id: &str) -> bool {
    let (_, challenge) = pkce();
    let q = [
        ("client_id", client_id),
        ("redirect_uri", CB),
        ("response_type", "code"),
        ("scope", "openid"),
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
    ];
    let (login_page, done) = b.authorize(&q).await;
    login_page.is_none() && param(&done.redirect_params(), "code").is_some()
}

// An administrator's lock, deactivation or new password ends the tokens, codes and browser
// sessions the user held: unlocking or reactivating does not bring them back. Credentials
// (password, secret, personal access tokens) stay; new sign-ins work at once.
on_both!(a_cut_off_ends_what_the_user_held, |srv| {
    let (client_id, secret, _) = oidc_app(srv, json!({})).await;
    let client = (client_id.as_str(), secret.as_deref().unwrap());
    let alice = human(srv, "alice", "Wonder-land1").await;
    let (robot, robot_secret) = machine(srv, "robot", true).await;
    let pat = srv.post(&format!("/management/v1/users/{robot}/pats"), json!({})).await;
    let pat = pat.ok()["token"].as_str().unwrap().to_string();
    let api = "urn:service:iam:org:project:id:latch:aud";
    let cc = || async {
        let form = [("grant_type", "client_credentials"), ("scope", api)];
        let r = token(srv, Some(("robot", &robot_secret)), &form).await;
        r.ok()["access_token"].as_str().unwrap().to_string()
    };
    // 401: the token does not count; 403: it does (the robot administers nothing).
    let api_status = |t: String| async move {
        srv.call_as(Some(&t), None, "GET", "/management/v1/orgs/me", json!(null)).await.status
    };
    let userinfo = |at: String| async move {
        let r = reqwest::Client::new().get(srv.url("/oidc/v1/userinfo")).bearer_auth(at).send().await.unwrap();
        r.status().as_u16()
    };
    let refresh = |rt: String| async move {
        token(srv, Some(client), &[("grant_type", "refresh_token"), ("refresh_token", &rt)]).await
    };
    let b = Browser::new(srv);
    for cut_off in ["lock", "password"] {
        let (code, verifier) = code_for(srv, &b, &client_id, "openid offline_access").await;
        let t = exchange_code(srv, Some(client), &code, &verifier).await.ok().clone();
        let at = t["access_token"].as_str().unwrap().to_string();
        let rt = t["refresh_token"].as_str().unwrap().to_string();
        let rt = refresh(rt).await.ok()["refresh_token"].as_str().unwrap().to_string();
        let (late_code, late_verifier) = code_for(srv, &b, &client_id, "openid").await;
        let robot_at = cc().await;
        assert_eq!(userinfo(at.clone()).await, 200);
        assert_eq!(api_status(robot_at.clone()).await, 403);
        assert!(signs_in_silently(&b, &client_id).await, "the browser signs in without a page");

        srv.clock.advance(1);
        if cut_off == "lock" {
            for id in [&alice, &robot] {
                srv.post(&format!("/management/v1/users/{id}/_lock"), json!({})).await.ok();
                srv.post(&format!("/management/v1/users/{id}/_unlock"), json!({})).await.ok();
            }
        } else {
            let body = json!({"password": "Wonder-land1", "noChangeRequired": true});
            srv.post(&format!("/management/v1/users/{alice}/password"), body).await.ok();
            srv.post(&format!("/management/v1/users/{robot}/_deactivate"), json!({})).await.ok();
            srv.post(&format!("/management/v1/users/{robot}/_reactivate"), json!({})).await.ok();
        }
        assert_eq!(userinfo(at).await, 401, "{cut_off}: the access token is void");
        assert_eq!(api_status(robot_at).await, 401, "{cut_off}: the machine's token is void");
        refresh(rt).await.err(400, "invalid_grant");
        exchange_code(srv, Some(client), &late_code, &late_verifier).await.err(400, "invalid_grant");
        assert!(!signs_in_silently(&b, &client_id).await, "{cut_off}: the browser's session is void");
        // Credentials stay; what is issued now counts.
        assert_eq!(api_status(pat.clone()).await, 403, "{cut_off}: the personal access token stays");
        assert_eq!(api_status(cc().await).await, 403);
        let (code, verifier) = code_for(srv, &b, &client_id, "openid offline_access").await;
        let t = exchange_code(srv, Some(client), &code, &verifier).await.ok().clone();
        assert_eq!(userinfo(t["access_token"].as_str().unwrap().to_string()).await, 200);
        refresh(t["refresh_token"].as_str().unwrap().to_string()).await.ok();
        srv.clock.advance(1);
    }
});

// An account created with a deleted account's id (AddMachineUser takes a userId) inherits none
// of the tokens issued to its predecessor.
on_both!(a_reused_user_id_inherits_no_tokens, |srv| {
    let api = "urn:service:iam:org:project:id:latch:aud";
    let machine = |name: &str| json!({"userId": "4242", "userName": name, "name": name, "accessTokenType": "ACCESS_TOKEN_TYPE_JWT"});
    srv.post("/management/v1/users/machine", machine("old")).await.ok();
    let s = srv.put("/management/v1/users/4242/secret", json!({})).await;
    let secret = s.ok()["clientSecret"].as_str().unwrap().to_string();
    let t = token(srv, Some(("old", &secret)), &[("grant_type", "client_credentials"), ("scope", api)]).await;
    let at = t.ok()["access_token"].as_str().unwrap().to_string();
    let status = |t: String| async move {
        srv.call_as(Some(&t), None, "GET", "/management/v1/orgs/me", json!(null)).await.status
    };
    assert_eq!(status(at.clone()).await, 403, "the token counts (the user administers nothing)");
    srv.delete("/management/v1/users/4242").await.ok();
    srv.clock.advance(1);
    srv.post("/management/v1/users/machine", machine("new")).await.ok();
    assert_eq!(status(at).await, 401, "the old account's token is not the new one's");
});

// An assertion's nbf is checked against latch's clock (with the minute of skew), as its exp and
// iat are, not against the wall clock: refused before it, taken after it.
on_both!(an_assertion_counts_from_its_nbf_on_latchs_clock, |srv| {
    let (robot, _) = srv.machine_with_roles(None, "ops", &[]).await;
    let (kid, key) = machine_key(srv, &robot).await;
    let n = now();
    let assertion = |jti: &str| {
        sign(
            &kid,
            &key,
            &json!({"iss": robot, "sub": robot, "aud": srv.base, "iat": n, "exp": n + 3000, "nbf": n + 600, "jti": jti}),
        )
    };
    let grant = |a: String| async move {
        token(srv, None, &[("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"), ("assertion", &a)]).await
    };
    grant(assertion("j-1")).await.err(400, "invalid_grant");
    srv.clock.advance(700);
    grant(assertion("j-2")).await.ok();
});
