//! The signing keys: loading (decrypting) them from the store, the key set served at
//! `/oauth/v2/keys`, which key signs now, and scheduled rotation.
//!
//! Replicas agree through the store: every key row carries `activate_at`, the time it starts
//! signing, and the key that signs at `now` is the one with the latest `activate_at <= now`.
//! Rotation creates (or schedules) the next key `prepublish` ahead of time, so it is in every
//! replica's key set and every client's cache before it signs; the next key has the active
//! key's algorithm and size (a key of another algorithm signs only once activated through the
//! API). A retired key stays published until the longest-lived token it signed has expired
//! (see [`KeyManager::retention`]). Each replica reloads the keys every `refresh_interval`.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use axum::body::Bytes;
use serde_json::json;

use crate::clock::SharedClock;
use crate::config::KeySettings;
use crate::crypto::CryptoError;
use crate::crypto::aead::{Aead, Purpose};
use crate::crypto::keys::{KeyAlg, KeySpec, SigningKey};
use crate::domain::settings::OidcSettings;
use crate::store::web_key::Unless;
use crate::store::{Conn, Db, StoreError, setting, web_key};

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("signing key {0} cannot be decrypted: the master key differs from the one the store was created with")]
    WrongMasterKey(String),
    #[error(transparent)]
    Crypto(#[from] CryptoError),
}

/// Where a key is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyState {
    /// Published, not signing yet.
    Initial,
    Active,
    /// Superseded, still published.
    Inactive,
}

pub struct LoadedKey {
    pub key_id: String,
    pub generation: i64,
    pub spec: String,
    pub created_at: i64,
    pub changed_at: i64,
    pub activate_at: Option<i64>,
    /// Published at least until then (see [`KeyManager::keep_for_lifetime`]).
    pub keep_until: Option<i64>,
    pub signer: Arc<SigningKey>,
    pub jwk: serde_json::Value,
    /// The public key, parsed once, ready to verify signatures.
    pub verifier: Arc<aws_lc_rs::signature::ParsedPublicKey>,
}

impl LoadedKey {
    pub fn alg(&self) -> KeyAlg {
        self.signer.alg()
    }

    /// The JWS algorithm as jsonwebtoken names it.
    pub fn jws_alg(&self) -> jsonwebtoken::Algorithm {
        match self.alg() {
            KeyAlg::RS256 => jsonwebtoken::Algorithm::RS256,
            KeyAlg::ES256 => jsonwebtoken::Algorithm::ES256,
            KeyAlg::EdDSA => jsonwebtoken::Algorithm::EdDSA,
        }
    }

    /// How the key was made; a stored spec latch does not know is read as the default of the
    /// key's algorithm.
    pub fn key_spec(&self) -> KeySpec {
        KeySpec::parse(&self.spec).filter(|s| s.alg() == self.alg()).unwrap_or(match self.alg() {
            KeyAlg::RS256 => KeySpec::DEFAULT,
            KeyAlg::ES256 => KeySpec::EcP256,
            KeyAlg::EdDSA => KeySpec::Ed25519,
        })
    }

    pub fn find<'a>(set: &'a KeySet, kid: &str) -> Option<&'a Arc<LoadedKey>> {
        set.keys.iter().find(|k| k.key_id == kid)
    }
}

pub struct KeySet {
    pub keys: Vec<Arc<LoadedKey>>,
    /// The JWKS document, rendered once per reload.
    pub jwks: Bytes,
}

impl KeySet {
    /// The key that signs at `now`.
    pub fn active(&self, now: i64) -> Option<&Arc<LoadedKey>> {
        self.keys
            .iter()
            .filter(|k| k.activate_at.is_some_and(|t| t <= now))
            .max_by_key(|k| (k.activate_at, k.generation))
    }

    pub fn state(&self, key: &LoadedKey, now: i64) -> KeyState {
        match key.activate_at {
            Some(t) if t <= now => {
                if self.active(now).is_some_and(|a| a.key_id == key.key_id) {
                    KeyState::Active
                } else {
                    KeyState::Inactive
                }
            }
            _ => KeyState::Initial,
        }
    }

    /// When `key` stopped signing (the activation of its successor), if it has.
    fn superseded_at(&self, key: &LoadedKey, now: i64) -> Option<i64> {
        let own = key.activate_at.filter(|t| *t <= now)?;
        self.keys.iter().filter_map(|k| k.activate_at).filter(|t| *t <= now && (*t > own)).min().or_else(|| {
            // Same activation time: the higher generation wins, the other is superseded at once.
            self.keys.iter().any(|k| k.activate_at == Some(own) && k.generation > key.generation).then_some(own)
        })
    }
}

pub struct KeyManager {
    db: Db,
    cipher: Aead,
    clock: SharedClock,
    settings: KeySettings,
    current: RwLock<Arc<KeySet>>,
    /// Held from reading the rows to publishing the set, so that of two reloads at once (the
    /// background maintenance and an API call) the older read never replaces the newer.
    reloading: tokio::sync::Mutex<()>,
    /// When [`reload_on_demand`](KeyManager::reload_on_demand) last read the store.
    on_demand_at: std::sync::atomic::AtomicI64,
}

impl std::fmt::Debug for KeyManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyManager")
    }
}

/// Grace for clock differences between replicas and clients, in seconds.
const CLOCK_GRACE: i64 = 60;

impl KeyManager {
    pub async fn new(
        db: Db,
        master: &[u8; 32],
        clock: SharedClock,
        settings: KeySettings,
    ) -> Result<Arc<Self>, KeyError> {
        let manager = Arc::new(Self {
            db,
            cipher: Aead::derive(master, Purpose::SigningKey)?,
            clock,
            settings,
            current: RwLock::new(Arc::new(KeySet { keys: Vec::new(), jwks: Bytes::from_static(b"{\"keys\":[]}") })),
            reloading: tokio::sync::Mutex::new(()),
            on_demand_at: std::sync::atomic::AtomicI64::new(i64::MIN),
        });
        manager.reload().await?;
        Ok(manager)
    }

    /// How long another replica may go on using the key set it last loaded: its reload
    /// interval and the clocks' difference. A key that signed, or is to sign, within this margin
    /// of now is not deleted.
    pub fn stale_margin(&self) -> i64 {
        self.settings.refresh_interval.as_secs() as i64 + CLOCK_GRACE
    }

    pub fn settings(&self) -> &KeySettings {
        &self.settings
    }

    pub fn current(&self) -> Arc<KeySet> {
        match self.current.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The key that signs now.
    pub fn active(&self) -> Option<Arc<LoadedKey>> {
        self.current().active(self.clock.now()).cloned()
    }

    pub fn jwks(&self) -> Bytes {
        self.current().jwks.clone()
    }

    /// Re-reads the keys from the store; keys already decrypted are reused.
    pub async fn reload(&self) -> Result<(), KeyError> {
        let _one_at_a_time = self.reloading.lock().await;
        let rows = {
            let mut c = self.db.conn().await?;
            web_key::list(&mut c).await?
        };
        let previous: HashMap<String, Arc<LoadedKey>> =
            self.current().keys.iter().map(|k| (k.key_id.clone(), k.clone())).collect();
        let mut keys = Vec::with_capacity(rows.len());
        for row in rows {
            let (signer, verifier) = match previous.get(&row.key_id) {
                Some(k) => (k.signer.clone(), k.verifier.clone()),
                None => {
                    let alg = KeyAlg::parse(&row.alg).ok_or_else(|| {
                        StoreError::Corrupt(format!("web_key {}: unknown alg {}", row.key_id, row.alg))
                    })?;
                    let der = self
                        .cipher
                        .open(row.key_id.as_bytes(), &row.private_key)
                        .map_err(|_| KeyError::WrongMasterKey(row.key_id.clone()))?;
                    let signer = SigningKey::from_pkcs8(alg, &der)?;
                    let verifier = signer.verifier()?;
                    (Arc::new(signer), Arc::new(verifier))
                }
            };
            // Made from the private key, not read from the stored public_jwk: nothing binds that
            // column to the key (the private key is sealed with its id, the column is plain), so
            // whoever could write the store without the master key could otherwise publish a key
            // of their own under latch's key id.
            let jwk = signer.public_jwk(&row.key_id);
            keys.push(Arc::new(LoadedKey {
                key_id: row.key_id,
                generation: row.generation,
                spec: row.spec,
                created_at: row.created_at,
                changed_at: row.changed_at,
                activate_at: row.activate_at,
                keep_until: row.keep_until,
                signer,
                jwk,
                verifier,
            }));
        }
        // Newest first: clients that pick the first key find the current one quickly.
        keys.sort_by_key(|k| std::cmp::Reverse(k.generation));
        let jwks = json!({ "keys": keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>() });
        let set = Arc::new(KeySet { keys, jwks: Bytes::from(jwks.to_string()) });
        match self.current.write() {
            Ok(mut g) => *g = set,
            Err(poisoned) => *poisoned.into_inner() = set,
        }
        Ok(())
    }

    /// [`reload`](Self::reload) for a token naming a key this replica does not have: another
    /// replica may have activated a key through the API since this one's last reload. The store
    /// is read at most once a second, whatever the tokens (anyone can send a made-up key id); a
    /// caller that finds that second's read taken waits for any reload under way, so that a burst
    /// of tokens of a new key all see the key once it is loaded.
    pub async fn reload_on_demand(&self) {
        use std::sync::atomic::Ordering;
        let now = self.clock.now();
        let last = self.on_demand_at.load(Ordering::Relaxed);
        if last > now - 1
            || self.on_demand_at.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_err()
        {
            drop(self.reloading.lock().await);
            return;
        }
        if let Err(e) = self.reload().await {
            tracing::warn!(error = %e, "reloading the signing keys for an unknown key id failed");
        }
    }

    /// Generates a key and stores it (encrypted) with the next generation number.
    pub async fn create(&self, c: &mut Conn, spec: KeySpec, activate_at: Option<i64>) -> Result<String, KeyError> {
        self.create_unless(c, spec, activate_at, Unless::Nothing).await.map(|id| id.unwrap_or_default())
    }

    /// [`create`](Self::create), unless `unless` holds when the key is stored (checked in the
    /// same statement, so two replicas generating the next key at once store one).
    async fn create_unless(
        &self,
        c: &mut Conn,
        spec: KeySpec,
        activate_at: Option<i64>,
        unless: Unless,
    ) -> Result<Option<String>, KeyError> {
        let (signer, der) = tokio::task::spawn_blocking(move || SigningKey::generate(spec))
            .await
            .map_err(|_| CryptoError::Unspecified)??;
        let key_id = crate::id::new_id();
        let private_key = self.cipher.seal(key_id.as_bytes(), &der)?;
        let public_jwk = signer.public_jwk(&key_id).to_string();
        let row = web_key::NewWebKey {
            key_id: &key_id,
            alg: signer.alg().as_str(),
            spec: &spec.name(),
            public_jwk: &public_jwk,
            private_key: &private_key,
            created_at: self.clock.now(),
            activate_at,
        };
        // A few tries: each conflict means another key was stored in the meantime.
        Ok(web_key::insert(c, &row, unless, 4).await?.map(|_| key_id))
    }

    /// How long a key stays published after it stopped signing, when tokens live at most
    /// `longest` seconds: other replicas may go on signing with it until they next reload the
    /// keys (one refresh interval after an activation through the API), then its last token
    /// lives `longest`, plus a minute for clocks.
    pub fn retention(&self, longest: i64) -> i64 {
        self.settings.refresh_interval.as_secs() as i64 + longest + CLOCK_GRACE
    }

    /// Called before the longest access or ID token lifetime is shortened from `longest`: every
    /// key stays published at least until the tokens it signed under that lifetime, up to now,
    /// have expired, however short the lifetimes are when it retires.
    pub async fn keep_for_lifetime(&self, c: &mut Conn, longest: i64) -> Result<(), StoreError> {
        web_key::keep_until(c, self.clock.now() + self.retention(longest)).await.map(|_| ())
    }

    /// One maintenance round: schedule or create the next key when due, drop keys no token
    /// needs any more, then reload. Safe to run on every replica at once.
    pub async fn maintain(&self) -> Result<(), KeyError> {
        self.reload().await?;
        let now = self.clock.now();
        let set = self.current();
        let s = &self.settings;
        let mut c = self.db.conn().await?;
        let pending = set.keys.iter().any(|k| k.activate_at.is_some_and(|t| t > now));
        match set.active(now) {
            None => {
                // Nothing signs (the store lost its keys): a key must sign at once, of the kind
                // of the newest key left (the default when there is none).
                let spec = set.keys.first().map_or(KeySpec::DEFAULT, |k| k.key_spec());
                match self.create_unless(&mut c, spec, Some(now), Unless::ActiveAt(now)).await {
                    Ok(None) => {}
                    Ok(Some(id)) => {
                        tracing::warn!(key_id = %id, "no active signing key; created one that signs immediately")
                    }
                    Err(KeyError::Store(StoreError::Conflict)) => {}
                    Err(e) => return Err(e),
                }
            }
            Some(active) if !pending => {
                let since = active.activate_at.unwrap_or(now);
                if since + s.rotation_interval - s.prepublish <= now {
                    let at = (now + s.prepublish).max(since + s.rotation_interval);
                    // Prefer a key an operator created in advance, of the active key's algorithm:
                    // clients may accept only that one, so another signs only when activated.
                    let unscheduled = set
                        .keys
                        .iter()
                        .filter(|k| k.activate_at.is_none() && k.alg() == active.alg())
                        .min_by_key(|k| k.generation);
                    match unscheduled {
                        Some(k) => {
                            if web_key::schedule(&mut c, &k.key_id, at.max(k.created_at + s.prepublish), now, true)
                                .await?
                            {
                                tracing::info!(key_id = %k.key_id, activate_at = at, "scheduled the next signing key");
                            }
                        }
                        None => match self
                            .create_unless(&mut c, active.key_spec(), Some(at), Unless::PendingAfter(now))
                            .await
                        {
                            Ok(None) => {}
                            Ok(Some(id)) => {
                                tracing::info!(key_id = %id, activate_at = at, "created the next signing key")
                            }
                            Err(KeyError::Store(StoreError::Conflict)) => {}
                            Err(e) => return Err(e),
                        },
                    }
                }
            }
            Some(_) => {}
        }
        let oidc = setting::load::<OidcSettings>(&mut c, setting::INSTANCE).await?.value;
        let keep_for = self.retention(oidc.longest_signed_token());
        for k in &set.keys {
            // Deleted only as seen here: not when another replica activated it again meanwhile.
            if let Some(at) = set.superseded_at(k, now)
                && at + keep_for < now
                && k.keep_until.is_none_or(|t| t < now)
                && web_key::delete_retired(&mut c, &k.key_id, k.activate_at, now, self.stale_margin()).await?
            {
                tracing::info!(key_id = %k.key_id, "removed a retired signing key");
            }
        }
        drop(c);
        self.reload().await
    }

    /// Runs [`maintain`](Self::maintain) every refresh interval until `shutdown` fires.
    pub fn spawn(self: &Arc<Self>, mut shutdown: tokio::sync::watch::Receiver<bool>) -> tokio::task::JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(this.settings.refresh_interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => {
                        if let Err(e) = this.maintain().await {
                            tracing::warn!(error = %e, "signing key maintenance failed; will retry");
                        }
                    }
                    _ = shutdown.changed() => break,
                }
            }
        })
    }
}
