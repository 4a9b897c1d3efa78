//! Signing key rotation with an injected clock, and the web key API.

use latch::clock::Clock;
use latch::crypto::keys::{KeyAlg, KeySpec};
use latch::keys::{KeyManager, KeyState};
use latch::store::web_key;
use serde_json::{Value, json};

use crate::on_both;

async fn jwks_kids(srv: &crate::harness::TestServer) -> Vec<String> {
    let r = srv.call_as(None, None, "GET", "/oauth/v2/keys", json!(null)).await;
    r.ok()["keys"].as_array().unwrap().iter().map(|k| k["kid"].as_str().unwrap().to_string()).collect()
}

on_both!(rotation_publishes_before_signing_and_keeps_after, |srv| {
    let keys = &srv.state.keys;
    let s = keys.settings().clone();
    let k1 = keys.active().unwrap();
    let t1 = k1.activate_at.unwrap();

    // Not due yet: nothing changes.
    srv.clock.set(t1 + s.rotation_interval - s.prepublish - 10);
    keys.maintain().await.unwrap();
    assert_eq!(jwks_kids(srv).await, vec![k1.key_id.clone()]);

    // Due: the next key is published, but the old one still signs. This replica, a second one
    // and the server's own background maintenance all run at once and store one key between them.
    let other = KeyManager::new(srv.state.db.clone(), &srv.settings.masterkey.unwrap(), srv.clock.clone(), s.clone())
        .await
        .unwrap();
    srv.clock.advance(20);
    let (a, b) = tokio::join!(keys.maintain(), other.maintain());
    a.unwrap();
    b.unwrap();
    assert_eq!(srv.count("web_key").await, 2);
    keys.reload().await.unwrap();
    let kids = jwks_kids(srv).await;
    assert_eq!(kids.len(), 2, "{kids:?}");
    let set = keys.current();
    let k2 = set.keys.iter().find(|k| k.key_id != k1.key_id).unwrap().clone();
    assert_eq!(set.state(&k2, srv.clock.now()), KeyState::Initial);
    assert_eq!(keys.active().unwrap().key_id, k1.key_id, "the new key does not sign yet");
    let t2 = k2.activate_at.unwrap();
    assert!(t2 - srv.clock.now() >= s.prepublish, "published at least the pre-publication time before signing");
    assert!(s.prepublish > s.jwks_max_age, "longer than a client may cache the set");

    // Running maintenance again, on both replicas at once, adds nothing.
    let (a, b) = tokio::join!(keys.maintain(), other.maintain());
    a.unwrap();
    b.unwrap();
    assert_eq!(srv.count("web_key").await, 2);

    // At its time the new key signs; the old one stays published.
    srv.clock.set(t2 - 1);
    assert_eq!(keys.active().unwrap().key_id, k1.key_id);
    srv.clock.set(t2);
    assert_eq!(keys.active().unwrap().key_id, k2.key_id);
    assert_eq!(other.active().unwrap().key_id, k2.key_id, "replicas agree");
    keys.maintain().await.unwrap();
    assert_eq!(jwks_kids(srv).await.len(), 2, "the retired key is still published");
    assert_eq!(keys.current().state(&k1, t2), KeyState::Inactive);

    // Once every token it signed has expired, it goes: 12 h (the default lifetimes) after the
    // last replica stopped signing with it (up to a refresh interval later), plus a minute.
    let keep = s.refresh_interval.as_secs() as i64 + 12 * 3600 + 60;
    assert!(keep > 12 * 3600 + 61);
    srv.clock.set(t2 + 12 * 3600 + 61);
    keys.maintain().await.unwrap();
    assert_eq!(jwks_kids(srv).await.len(), 2, "another replica may have signed with it a refresh interval longer");
    srv.clock.set(t2 + keep);
    keys.maintain().await.unwrap();
    assert_eq!(jwks_kids(srv).await.len(), 2);
    srv.clock.set(t2 + keep + 1);
    keys.maintain().await.unwrap();
    assert_eq!(jwks_kids(srv).await, vec![k2.key_id.clone()]);
});

on_both!(shortened_lifetimes_keep_retired_keys_for_the_tokens_they_signed, |srv| {
    let keys = &srv.state.keys;
    let refresh = keys.settings().refresh_interval.as_secs() as i64;
    let k1 = keys.active().unwrap().key_id.clone();
    // k1 has signed tokens that live 12 h; then the lifetimes are shortened to an hour, and a
    // moment later k2 takes over.
    let t0 = srv.clock.now();
    srv.put("/admin/v1/settings/oidc", json!({"accessTokenLifetime": "3600s", "idTokenLifetime": "3600s"})).await.ok();
    let k2 = srv.post("/v2/web_keys", json!({})).await.ok()["id"].as_str().unwrap().to_string();
    srv.clock.advance(5);
    srv.post(&format!("/v2/web_keys/{k2}/_activate"), json!({})).await.ok();
    let t2 = srv.clock.now();
    // By the lifetimes of now k1 could go an hour later, but its 12 h tokens still need it.
    srv.clock.set(t2 + refresh + 3600 + 61);
    keys.maintain().await.unwrap();
    assert!(jwks_kids(srv).await.contains(&k1), "tokens signed before the change are still valid");
    srv.clock.set(t0 + refresh + 12 * 3600 + 60);
    keys.maintain().await.unwrap();
    assert!(jwks_kids(srv).await.contains(&k1));
    srv.clock.set(t0 + refresh + 12 * 3600 + 61);
    keys.maintain().await.unwrap();
    assert_eq!(jwks_kids(srv).await, vec![k2.clone()], "then it goes");

    // Lengthening them binds nothing in advance: a key retired later stays by the lifetimes
    // of then, here 2 h.
    srv.put("/admin/v1/settings/oidc", json!({"accessTokenLifetime": "7200s", "idTokenLifetime": "7200s"})).await.ok();
    let k3 = srv.post("/v2/web_keys", json!({})).await.ok()["id"].as_str().unwrap().to_string();
    srv.post(&format!("/v2/web_keys/{k3}/_activate"), json!({})).await.ok();
    let t3 = srv.clock.now();
    srv.clock.set(t3 + refresh + 7200 + 60);
    keys.maintain().await.unwrap();
    assert!(jwks_kids(srv).await.contains(&k2));
    srv.clock.set(t3 + refresh + 7200 + 61);
    keys.maintain().await.unwrap();
    assert_eq!(jwks_kids(srv).await, vec![k3.clone()]);
});

/// Creates a key through the API and returns its id.
async fn create_key(srv: &crate::harness::TestServer, body: Value) -> String {
    srv.post("/v2/web_keys", body).await.ok()["id"].as_str().unwrap().to_string()
}

on_both!(rotation_keeps_the_algorithm_of_the_active_key, |srv| {
    let keys = &srv.state.keys;
    let s = keys.settings().clone();
    // An Ed25519 key signs; an ECDSA key, created in advance, waits.
    let ed = create_key(srv, json!({"ed25519": {}})).await;
    srv.post(&format!("/v2/web_keys/{ed}/_activate"), json!({})).await.ok();
    let ec = create_key(srv, json!({"ecdsa": {}})).await;
    let since = keys.active().unwrap().activate_at.unwrap();

    // Rotation is due: the successor is a new Ed25519 key; the ECDSA key is not scheduled (it
    // signs only when activated through the API).
    srv.clock.set(since + s.rotation_interval - s.prepublish + 1);
    keys.maintain().await.unwrap();
    let set = keys.current();
    assert_eq!(set.keys.iter().find(|k| k.key_id == ec).unwrap().activate_at, None);
    let next: Vec<_> = set.keys.iter().filter(|k| k.activate_at.is_some_and(|t| t > srv.clock.now())).collect();
    assert_eq!(next.len(), 1);
    assert_eq!((next[0].alg(), next[0].spec.as_str()), (KeyAlg::EdDSA, "ed25519"));
    let (next_id, next_at) = (next[0].key_id.clone(), next[0].activate_at.unwrap());

    // A key of the active key's algorithm created in advance is taken rather than a new one.
    srv.clock.set(next_at);
    assert_eq!(keys.active().unwrap().key_id, next_id);
    let ready = create_key(srv, json!({"ed25519": {}})).await;
    let ids = |set: &latch::keys::KeySet| set.keys.iter().map(|k| k.key_id.clone()).collect::<Vec<_>>();
    let before = ids(&keys.current());
    srv.clock.set(next_at + s.rotation_interval - s.prepublish + 1);
    keys.maintain().await.unwrap();
    let set = keys.current();
    assert!(ids(&set).iter().all(|id| before.contains(id)), "no key generated");
    assert!(set.keys.iter().find(|k| k.key_id == ready).unwrap().activate_at.is_some(), "scheduled");
    assert_eq!(set.keys.iter().find(|k| k.key_id == ec).unwrap().activate_at, None);

    // With no key signing at all, the one made to sign at once is of the newest key's kind.
    let mut c = srv.state.db.conn().await.unwrap();
    sqlx::query("UPDATE web_key SET activate_at = NULL").execute(&mut *c).await.unwrap();
    drop(c);
    keys.maintain().await.unwrap();
    let active = keys.active().expect("a key signs again");
    assert_eq!((active.alg(), active.spec.as_str()), (KeyAlg::EdDSA, "ed25519"));
});

on_both!(web_key_changes_between_replicas, |srv| {
    let keys = &srv.state.keys;
    let first = keys.active().unwrap().key_id.clone();
    let other = KeyManager::new(
        srv.state.db.clone(),
        &srv.settings.masterkey.unwrap(),
        srv.clock.clone(),
        keys.settings().clone(),
    )
    .await
    .unwrap();
    // A key created through another replica can be activated here at once.
    let mut c = srv.state.db.conn().await.unwrap();
    let ec = other.create(&mut c, KeySpec::EcP256, None).await.unwrap();
    drop(c);
    srv.post(&format!("/v2/web_keys/{ec}/_activate"), json!({})).await.ok();
    assert_eq!(keys.active().unwrap().key_id, ec);

    // Keys created at once get generations of their own; none is refused.
    let before = srv.count("web_key").await;
    let body = || json!({"ed25519": {}});
    let (a, b, c, d) = tokio::join!(
        srv.post("/v2/web_keys", body()),
        srv.post("/v2/web_keys", body()),
        srv.post("/v2/web_keys", body()),
        srv.post("/v2/web_keys", body())
    );
    let created: Vec<String> = [a, b, c, d].iter().map(|r| r.ok()["id"].as_str().unwrap().to_string()).collect();
    assert_eq!(srv.count("web_key").await, before + 4);

    // A delete decided on a state that has changed since deletes nothing: `first`, retired,
    // is activated again elsewhere before a stale replica removes it.
    let seen = keys.current().keys.iter().find(|k| k.key_id == first).unwrap().activate_at;
    srv.clock.advance(1);
    srv.post(&format!("/v2/web_keys/{first}/_activate"), json!({})).await.ok();
    let now = srv.clock.now();
    let mut c = srv.state.db.conn().await.unwrap();
    assert!(!web_key::delete_retired(&mut c, &first, seen, now + 86_400 * 365, 0).await.unwrap());
    assert!(!web_key::delete_inactive(&mut c, &first, seen, now, 0).await.unwrap());
    // Nor is the key that signs deleted, even in the state seen.
    assert!(!web_key::delete_inactive(&mut c, &first, Some(now), now, 0).await.unwrap());
    // Nor a key seen unscheduled that another replica's rotation has scheduled since.
    assert!(web_key::schedule(&mut c, &created[0], now + 3600, now, true).await.unwrap());
    assert!(!web_key::delete_inactive(&mut c, &created[0], None, now, 0).await.unwrap());
    // The one it replaced, in the state seen, goes, once a replica that has not reloaded since
    // the switch would not sign with it any more (here no margin; with one, not a second later).
    let ec_at = keys.current().keys.iter().find(|k| k.key_id == ec).unwrap().activate_at;
    assert!(!web_key::delete_inactive(&mut c, &ec, ec_at, now, keys.stale_margin()).await.unwrap());
    assert!(web_key::delete_inactive(&mut c, &ec, ec_at, now, 0).await.unwrap());
    drop(c);
    keys.reload().await.unwrap();
    assert_eq!(keys.active().unwrap().key_id, first);
    assert!(keys.current().keys.iter().all(|k| k.key_id != ec));
});

fn states(list: &Value) -> Vec<(String, String)> {
    list["webKeys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| (k["id"].as_str().unwrap().to_string(), k["state"].as_str().unwrap().to_string()))
        .collect()
}

on_both!(web_key_api, |srv| {
    let first = srv.state.keys.active().unwrap().key_id.clone();
    let rsa = srv.post("/v2/web_keys", json!({})).await;
    let rsa = rsa.ok()["id"].as_str().unwrap().to_string();
    let ec = srv.post("/v2/web_keys", json!({"ecdsa": {"curve": "ECDSA_CURVE_P256"}})).await;
    let ec = ec.ok()["id"].as_str().unwrap().to_string();
    let ed = srv.post("/v2/web_keys", json!({"ed25519": {}})).await;
    let ed = ed.ok()["id"].as_str().unwrap().to_string();

    // Created keys are published at once and do not sign.
    let jwks = srv.call_as(None, None, "GET", "/oauth/v2/keys", json!(null)).await;
    let jwks = jwks.ok()["keys"].as_array().unwrap().clone();
    assert_eq!(jwks.len(), 4);
    let kty: Vec<_> = jwks.iter().map(|k| k["kty"].as_str().unwrap()).collect();
    assert!(kty.contains(&"EC") && kty.contains(&"OKP"), "{kty:?}");
    let list = srv.get("/v2/web_keys").await;
    let st = states(list.ok());
    assert!(st.contains(&(first.clone(), "STATE_ACTIVE".into())));
    assert!(st.contains(&(rsa.clone(), "STATE_INITIAL".into())));
    let ec_view = list.body["webKeys"].as_array().unwrap().iter().find(|k| k["id"] == ec.as_str()).unwrap().clone();
    assert_eq!(ec_view["ecdsa"]["curve"], "ECDSA_CURVE_P256");

    // Activation switches the signing key at once.
    srv.post(&format!("/v2/web_keys/{ed}/_activate"), json!({})).await.ok();
    assert_eq!(srv.state.keys.active().unwrap().key_id, ed);
    let st = states(srv.get("/v2/web_keys").await.ok());
    assert!(st.contains(&(ed.clone(), "STATE_ACTIVE".into())));
    assert!(st.contains(&(first.clone(), "STATE_INACTIVE".into())));

    // The active key cannot be deleted; others can, once no replica that has not reloaded yet
    // may still sign with them (the one just superseded signed a moment ago).
    srv.delete(&format!("/v2/web_keys/{ed}")).await.err(400, 9);
    let msg = srv.delete(&format!("/v2/web_keys/{first}")).await.err(400, 9).to_string();
    assert!(msg.contains("too close to now"), "{msg}");
    srv.clock.advance(srv.state.keys.stale_margin() + 1);
    srv.delete(&format!("/v2/web_keys/{first}")).await.ok();
    srv.delete(&format!("/v2/web_keys/{first}")).await.err(404, 5);
    srv.post("/v2/web_keys/999/_activate", json!({})).await.err(404, 5);
    assert_eq!(srv.count("web_key").await, 3);

    // Unsupported algorithms are refused and nothing is stored.
    srv.post("/v2/web_keys", json!({"rsa": {"hasher": "RSA_HASHER_SHA512"}})).await.err(400, 3);
    srv.post("/v2/web_keys", json!({"ecdsa": {"curve": "ECDSA_CURVE_P384"}})).await.err(400, 3);
    srv.post("/v2/web_keys", json!({"rsa": {}, "ed25519": {}})).await.err(400, 3);
    // `ed25519` is an (empty) object, as in the schema; another value is not a choice.
    srv.post("/v2/web_keys", json!({"ed25519": 0})).await.err(400, 3);
    assert_eq!(srv.count("web_key").await, 3);

    // Only instance administrators manage keys.
    let (_, owner) = srv.machine_with_roles(None, "org-owner", &["ORG_OWNER"]).await;
    srv.call_as(Some(&owner), None, "POST", "/v2/web_keys", json!({})).await.err(403, 7);
    srv.call_as(Some(&owner), None, "GET", "/v2/web_keys", json!(null)).await.err(403, 7);
    srv.call_as(None, None, "GET", "/v2/web_keys", json!(null)).await.err(401, 16);
});

// The published key set is made from the private keys, not read from the stored public_jwk
// column, which nothing binds to them: whoever could write the store without the master key
// could otherwise publish a key of their own under latch's key id, for this replica and one
// that starts afterwards.
on_both!(the_key_set_comes_from_the_private_keys, |srv| {
    let jwks =
        || async { reqwest::get(srv.url("/oauth/v2/keys")).await.unwrap().json::<serde_json::Value>().await.unwrap() };
    let before = jwks().await;
    let mut c = srv.state.db.conn().await.unwrap();
    let forged = r#"{"kty":"RSA","kid":"x","use":"sig","alg":"RS256","n":"AQAB","e":"AQAB"}"#;
    sqlx::query("UPDATE web_key SET public_jwk = $1").bind(forged).execute(&mut *c).await.unwrap();
    drop(c);
    srv.state.keys.reload().await.unwrap();
    assert_eq!(jwks().await, before);
    let s = srv.state.keys.settings().clone();
    let other =
        KeyManager::new(srv.state.db.clone(), &srv.settings.masterkey.unwrap(), srv.clock.clone(), s).await.unwrap();
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&other.jwks()).unwrap(), before);
});
