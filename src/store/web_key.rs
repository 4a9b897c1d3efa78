//! Signing keys. The private key is stored encrypted; this module only moves bytes.

use sqlx::FromRow;

use super::{Conn, Result};

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

/// Inserts a key unless `unless` holds, in one statement; returns whether it was inserted. Fails
/// with `Conflict` when another replica took the same generation at the same moment.
pub async fn insert(c: &mut Conn, k: &WebKeyRow, unless: Unless) -> Result<bool> {
    let (guard, at) = match unless {
        Unless::Nothing => ("", 0),
        Unless::ActiveAt(t) => (" WHERE NOT EXISTS (SELECT 1 FROM web_key WHERE activate_at <= $10)", t),
        Unless::PendingAfter(t) => (" WHERE NOT EXISTS (SELECT 1 FROM web_key WHERE activate_at > $10)", t),
    };
    let sql = format!(
        "INSERT INTO web_key (key_id, generation, alg, spec, public_jwk, private_key, created_at, changed_at, activate_at) \
         SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9{guard} RETURNING generation"
    );
    let mut q = sqlx::query_as::<_, (i64,)>(&sql)
        .bind(&k.key_id)
        .bind(k.generation)
        .bind(&k.alg)
        .bind(&k.spec)
        .bind(&k.public_jwk)
        .bind(k.private_key.clone())
        .bind(k.created_at)
        .bind(k.changed_at)
        .bind(k.activate_at);
    if !guard.is_empty() {
        q = q.bind(at);
    }
    Ok(q.fetch_optional(&mut *c).await?.is_some())
}

pub async fn max_generation(c: &mut Conn) -> Result<i64> {
    let row: (Option<i64>,) = sqlx::query_as("SELECT MAX(generation) FROM web_key").fetch_one(&mut *c).await?;
    Ok(row.0.unwrap_or(0))
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

pub async fn delete(c: &mut Conn, key_id: &str) -> Result<bool> {
    let r = sqlx::query("DELETE FROM web_key WHERE key_id = $1").bind(key_id).execute(&mut *c).await?;
    Ok(r.rows_affected() == 1)
}
