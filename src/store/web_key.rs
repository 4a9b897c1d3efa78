//! Signing keys. The private key is stored encrypted; this module only moves bytes.

use sqlx::FromRow;

use super::{Conn, Result, StoreError};

#[derive(Debug, Clone, FromRow)]
pub struct WebKeyRow {
    pub key_id: String,
    pub generation: i64,
    pub alg: String,
    /// How the key was made (`rsa-2048`, `ecdsa-p256`, `ed25519`).
    pub spec: String,
    pub public_jwk: String,
    pub private_key: Vec<u8>,
    pub created_at: i64,
    pub changed_at: i64,
    /// When the key starts signing; `None` while it is only published.
    pub activate_at: Option<i64>,
    /// Published at least until then, whenever it retires: set when token lifetimes are
    /// shortened, for the tokens it may have signed under the longer ones.
    pub keep_until: Option<i64>,
}

/// A key to store; its generation is the next free one, chosen by the statement that stores it.
#[derive(Debug, Clone)]
pub struct NewWebKey<'a> {
    pub key_id: &'a str,
    pub alg: &'a str,
    pub spec: &'a str,
    pub public_jwk: &'a str,
    pub private_key: &'a [u8],
    pub created_at: i64,
    pub activate_at: Option<i64>,
}

const SELECT: &str = "SELECT key_id, generation, alg, spec, public_jwk, private_key, created_at, changed_at, \
                      activate_at, keep_until FROM web_key";

pub async fn list(c: &mut Conn) -> Result<Vec<WebKeyRow>> {
    Ok(sqlx::query_as(&format!("{SELECT} ORDER BY generation")).fetch_all(&mut *c).await?)
}

/// What must not exist for [`insert`] to add a key.
#[derive(Debug, Clone, Copy)]
pub enum Unless {
    /// Insert in any case.
    Nothing,
    /// A key that signs at this time or earlier.
    ActiveAt(i64),
    /// A key scheduled to sign after this time.
    PendingAfter(i64),
}

/// Inserts a key with the next generation unless `unless` holds, in one statement; returns its
/// generation, `None` when `unless` held. Two inserts at once may still pick the same
/// generation (PostgreSQL's statements do not see each other's uncommitted rows): the second
/// fails on the unique generation and is tried again, up to `attempts` times in all, so that
/// with a guard it finds the key the other stored and stores none (two replicas rotating at
/// once store one key), and without one it takes the next generation.
pub async fn insert(c: &mut Conn, k: &NewWebKey<'_>, unless: Unless, attempts: u32) -> Result<Option<i64>> {
    let (guard, at) = match unless {
        Unless::Nothing => ("", 0),
        Unless::ActiveAt(t) => (" WHERE NOT EXISTS (SELECT 1 FROM web_key WHERE activate_at <= $9)", t),
        Unless::PendingAfter(t) => (" WHERE NOT EXISTS (SELECT 1 FROM web_key WHERE activate_at > $9)", t),
    };
    let sql = format!(
        "INSERT INTO web_key (key_id, generation, alg, spec, public_jwk, private_key, created_at, changed_at, activate_at) \
         SELECT $1, COALESCE((SELECT MAX(generation) FROM web_key), 0) + 1, $2, $3, $4, $5, $6, $7, $8{guard} \
         RETURNING generation"
    );
    let mut tried = 0;
    loop {
        tried += 1;
        let mut q = sqlx::query_as::<_, (i64,)>(&sql)
            .bind(k.key_id)
            .bind(k.alg)
            .bind(k.spec)
            .bind(k.public_jwk)
            .bind(k.private_key.to_vec())
            .bind(k.created_at)
            .bind(k.created_at)
            .bind(k.activate_at);
        if !guard.is_empty() {
            q = q.bind(at);
        }
        match q.fetch_optional(&mut *c).await.map_err(StoreError::from) {
            Err(StoreError::Conflict) if tried < attempts => continue,
            r => return Ok(r?.map(|(generation,)| generation)),
        }
    }
}

/// Sets when a key starts signing. With `only_if_unscheduled`, a key that already has a time is
/// left alone (two replicas scheduling at once agree on one time).
pub async fn schedule(c: &mut Conn, key_id: &str, at: i64, now: i64, only_if_unscheduled: bool) -> Result<bool> {
    let sql = if only_if_unscheduled {
        "UPDATE web_key SET activate_at = $1, changed_at = $2 WHERE key_id = $3 AND activate_at IS NULL"
    } else {
        "UPDATE web_key SET activate_at = $1, changed_at = $2 WHERE key_id = $3"
    };
    let r = sqlx::query(sql).bind(at).bind(now).bind(key_id).execute(&mut *c).await?;
    Ok(r.rows_affected() == 1)
}

/// Every key stays published at least until `until` (kept when it is later already).
pub async fn keep_until(c: &mut Conn, until: i64) -> Result<u64> {
    let r = sqlx::query("UPDATE web_key SET keep_until = $1 WHERE keep_until IS NULL OR keep_until < $1")
        .bind(until)
        .execute(&mut *c)
        .await?;
    Ok(r.rows_affected())
}

/// The conditions of a delete: the key's activation time is still the one the caller saw (no
/// replica activated it since; NULL seen as -1), and it does not sign at `$3`: it is not
/// activated yet, or another key activated later (or at the same time with a higher
/// generation) signs instead.
/// The key's activation time is still the one seen ($2) and it signs nowhere: it never activates
/// (NULL), or not before $4, or a newer key superseded it by $5. $4 and $5 are `now` widened by
/// a margin: a replica that has not reloaded yet still signs with the key it last saw active,
/// and switches by its own clock to one it saw scheduled.
const UNCHANGED_AND_NOT_SIGNING: &str = "key_id = $1 AND COALESCE(activate_at, -1) = $2 \
     AND (activate_at IS NULL OR activate_at > $4 OR EXISTS (SELECT 1 FROM web_key o WHERE o.activate_at <= $5 \
     AND (o.activate_at > web_key.activate_at \
          OR (o.activate_at = web_key.activate_at AND o.generation > web_key.generation))))";

/// Deletes a key that does not sign at `now` nor within `margin` seconds of it (as other replicas
/// may still see it), if its activation time is still `seen`.
pub async fn delete_inactive(c: &mut Conn, key_id: &str, seen: Option<i64>, now: i64, margin: i64) -> Result<bool> {
    delete_unchanged(c, "", key_id, seen, now, margin).await
}

/// [`delete_inactive`], and only once the time the key must stay published until has passed.
pub async fn delete_retired(c: &mut Conn, key_id: &str, seen: Option<i64>, now: i64, margin: i64) -> Result<bool> {
    delete_unchanged(c, " AND (keep_until IS NULL OR keep_until < $3)", key_id, seen, now, margin).await
}

async fn delete_unchanged(
    c: &mut Conn,
    and: &str,
    key_id: &str,
    seen: Option<i64>,
    now: i64,
    margin: i64,
) -> Result<bool> {
    let sql = format!("DELETE FROM web_key WHERE {UNCHANGED_AND_NOT_SIGNING}{and}");
    let r = sqlx::query(&sql)
        .bind(key_id)
        .bind(seen.unwrap_or(-1))
        .bind(now)
        .bind(now + margin)
        .bind(now - margin)
        .execute(&mut *c)
        .await?;
    Ok(r.rows_affected() == 1)
}
