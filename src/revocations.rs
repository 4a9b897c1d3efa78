//! The replica's mirror of the revocation table, so that introspection, userinfo and the
//! refresh grant learn whether a token, its session or its grant was revoked without a query.
//!
//! - A background task polls the table every [`POLL`] for what is new (see
//!   `store::revocation::since`; nothing committed is ever skipped, however late it commits).
//! - What this replica revokes itself is added the moment the store has it, so it counts here at
//!   once; on every other replica within [`POLL`] plus one query.
//! - The mirror is trusted only while its last successful poll began less than [`FRESH`] ago.
//!   Past that (the store is slow or down, or the task has not run yet) [`Revocations::check`]
//!   answers `None` and the caller asks the store, so a lost feed never lets a revoked token
//!   pass: revocation shows within one second on every replica, or the request waits for the
//!   store like before.
//!
//! Entries are dropped when the tokens they concern have expired, as the sweep drops the rows.
//!
//! An entry is the revoked key's [`Fingerprint`] and its expiry, 16 bytes in the table: a
//! replica holds every unexpired revocation, and keeping the keys themselves cost about 110 bytes
//! each (17 MiB for 150,000 revoked tokens, the idle RSS goal being 30 MiB).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tokio::sync::watch;

use crate::clock::SharedClock;
use crate::store::{Conn, Db, Result, revocation};

/// How often the table is polled.
pub const POLL: Duration = Duration::from_millis(200);
/// How old the last poll may be for the mirror to be trusted.
pub const FRESH: Duration = Duration::from_secs(1);
/// How often expired entries are dropped.
const PRUNE: Duration = Duration::from_secs(60);

/// The first 8 bytes of a revoked key's SHA-256. Two keys share one by chance with a
/// probability of about 2^-64 per pair; a live token whose key shared one with a revoked key
/// would be refused (never the other way round: a revoked key always finds its entry). The
/// keys are random ids latch made, so no one can choose a key to collide with another's.
type Fingerprint = u64;

fn fingerprint(key: &str) -> Fingerprint {
    let digest = Sha256::digest(key.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(first)
}

#[derive(Default)]
pub struct Revocations {
    /// Revoked key's fingerprint -> expiry (Unix seconds).
    keys: RwLock<HashMap<Fingerprint, i64>>,
    /// The poll cursor and when the last successful poll began.
    feed: Mutex<Feed>,
}

#[derive(Default)]
struct Feed {
    cursor: i64,
    synced_at: Option<Instant>,
}

impl Revocations {
    /// Whether any of `keys` is revoked, when the mirror is fresh; `None` when the caller must
    /// ask the store.
    pub fn check(&self, keys: &[String]) -> Option<bool> {
        let synced_at = self.feed.lock().ok()?.synced_at?;
        if synced_at.elapsed() >= FRESH {
            return None;
        }
        let map = self.keys.read().ok()?;
        Some(keys.iter().any(|k| map.contains_key(&fingerprint(k))))
    }

    /// Records a revocation this replica has just written to the store.
    pub fn add(&self, key: &str, expires_at: i64) {
        if let Ok(mut map) = self.keys.write() {
            let e = map.entry(fingerprint(key)).or_insert(expires_at);
            *e = (*e).max(expires_at);
        }
    }

    /// Revokes `key` in the store and in this mirror. The connection must not be inside a
    /// transaction (the mirror cannot take the entry back if it rolled back).
    pub async fn revoke(&self, c: &mut Conn, key: &str, now: i64, expires_at: i64) -> Result<()> {
        revocation::revoke(c, key, now, expires_at).await?;
        self.add(key, expires_at);
        Ok(())
    }

    /// Reads what is new in the store (everything, the first time).
    pub async fn poll(&self, db: &Db, now: i64) -> Result<()> {
        let cursor = self.feed.lock().map(|f| f.cursor).unwrap_or(0);
        let began = Instant::now();
        let mut c = db.conn().await?;
        let (keys, next) = revocation::since(&mut c, cursor, now).await?;
        drop(c);
        // Hashed before the write lock is taken: the first poll brings every unexpired
        // revocation, and checks wait while the lock is held.
        let entries: Vec<(Fingerprint, i64)> = keys.iter().map(|(k, e)| (fingerprint(k), *e)).collect();
        drop(keys);
        if let Ok(mut map) = self.keys.write() {
            for (k, e) in entries {
                let v = map.entry(k).or_insert(e);
                *v = (*v).max(e);
            }
        }
        if let Ok(mut f) = self.feed.lock() {
            // A poll that began before the previous one finished must not move the cursor back.
            if next >= f.cursor {
                f.cursor = next;
            }
            if f.synced_at.is_none_or(|s| s < began) {
                f.synced_at = Some(began);
            }
        }
        Ok(())
    }

    /// Drops the entries of tokens that have all expired.
    pub fn prune(&self, now: i64) {
        if let Ok(mut map) = self.keys.write() {
            map.retain(|_, e| *e > now);
        }
    }

    /// Entries held (for `/metrics`).
    pub fn len(&self) -> usize {
        self.keys.read().map(|m| m.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Polls the store until `stop` turns true.
pub fn spawn(
    revocations: Arc<Revocations>,
    db: Db,
    clock: SharedClock,
    mut stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut pruned = Instant::now();
        let mut failing = false;
        loop {
            match revocations.poll(&db, clock.now()).await {
                Ok(()) if failing => {
                    tracing::info!("the revocation feed is back");
                    failing = false;
                }
                Ok(()) => {}
                Err(e) if !failing => {
                    tracing::warn!(error = %e, "the revocation feed failed; revocation is checked in the store");
                    failing = true;
                }
                Err(_) => {}
            }
            if pruned.elapsed() >= PRUNE {
                revocations.prune(clock.now());
                pruned = Instant::now();
            }
            tokio::select! {
                _ = tokio::time::sleep(POLL) => {}
                _ = stop.changed() => return,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unsynced_mirror_is_not_trusted() {
        let r = Revocations::default();
        r.add("t:1", 100);
        assert_eq!(r.check(&["t:1".into()]), None, "never polled: ask the store");
        r.feed.lock().unwrap().synced_at = Some(Instant::now());
        assert_eq!(r.check(&["t:1".into()]), Some(true));
        assert_eq!(r.check(&["t:2".into()]), Some(false));
        r.feed.lock().unwrap().synced_at = Some(Instant::now() - FRESH);
        assert_eq!(r.check(&["t:1".into()]), None, "stale: ask the store");
    }

    #[test]
    fn every_revoked_key_is_found_by_its_fingerprint_and_no_other() {
        let r = Revocations::default();
        for i in 0..10_000 {
            r.add(&format!("t:{i}-{}", "x".repeat(i % 200)), 100);
        }
        r.feed.lock().unwrap().synced_at = Some(Instant::now());
        assert_eq!(r.len(), 10_000);
        for i in 0..10_000 {
            let revoked = format!("t:{i}-{}", "x".repeat(i % 200));
            assert_eq!(r.check(std::slice::from_ref(&revoked)), Some(true), "{revoked}");
            assert_eq!(r.check(&[format!("s:{i}-{}", "x".repeat(i % 200))]), Some(false));
        }
        // An entry is the same 16 bytes whatever the key's length.
        assert_eq!(std::mem::size_of::<(Fingerprint, i64)>(), 16);
    }

    #[test]
    fn expired_entries_are_pruned_and_the_longest_expiry_wins() {
        let r = Revocations::default();
        r.add("s:1", 100);
        r.add("s:1", 50);
        r.add("t:2", 60);
        r.prune(70);
        assert_eq!(r.len(), 1);
        r.feed.lock().unwrap().synced_at = Some(Instant::now());
        assert_eq!(r.check(&["s:1".into()]), Some(true));
    }
}
