//! Revocations: access tokens, sessions and grants that must no longer count, kept until the
//! tokens they concern have expired.

use super::query::Builder;
use super::{Conn, Result};

pub fn token_key(jti: &str) -> String {
    format!("t:{jti}")
}

pub fn session_key(sid: &str) -> String {
    format!("s:{sid}")
}

pub fn grant_key(grant_id: &str) -> String {
    format!("g:{grant_id}")
}

/// Revokes `key` until `expires_at`. A key revoked again keeps the later of the two expiries,
/// and on PostgreSQL a later one is written by this transaction (its `txid`), so that the other
/// replicas' polls see it: else they would keep the first expiry and forget the key then.
pub async fn revoke(c: &mut Conn, key: &str, now: i64, expires_at: i64) -> Result<()> {
    let sql = if c.backend_name() == "PostgreSQL" {
        "INSERT INTO revocation (revoked_key, created_at, expires_at) VALUES ($1, $2, $3) \
         ON CONFLICT (revoked_key) DO UPDATE SET expires_at = EXCLUDED.expires_at, txid = pg_current_xact_id() \
         WHERE EXCLUDED.expires_at > revocation.expires_at"
    } else {
        "INSERT INTO revocation (revoked_key, created_at, expires_at) VALUES ($1, $2, $3) \
         ON CONFLICT (revoked_key) DO UPDATE SET expires_at = excluded.expires_at \
         WHERE excluded.expires_at > revocation.expires_at"
    };
    sqlx::query(sql).bind(key).bind(now).bind(expires_at).execute(&mut *c).await?;
    Ok(())
}

/// Whether any of `keys` is revoked, in one round trip.
pub async fn any_revoked(c: &mut Conn, keys: &[String]) -> Result<bool> {
    if keys.is_empty() {
        return Ok(false);
    }
    let mut b = Builder::new("SELECT COUNT(*) FROM revocation WHERE revoked_key IN (");
    for (i, k) in keys.iter().enumerate() {
        if i > 0 {
            b.push(", ");
        }
        b.text(k.clone());
    }
    b.push(")");
    Ok(b.fetch_count(c).await? > 0)
}

/// What changed in the revocation table since `cursor` (0: everything), and the cursor of the
/// next poll: the revoked keys with their expiry, expired ones left out. One statement, so the
/// rows and the new cursor come from one snapshot.
///
/// On PostgreSQL the cursor is the oldest transaction still running when the statement began
/// (`pg_snapshot_xmin`): every transaction before it has finished, so its rows are in this
/// answer, and rows of later ones are read again next time. On SQLite (one writer at a time)
/// it is the largest id (`txid` there is an autoincrement).
pub async fn since(c: &mut Conn, cursor: i64, now: i64) -> Result<(Vec<(String, i64)>, i64)> {
    let sql = if c.backend_name() == "PostgreSQL" {
        "SELECT h.x, r.revoked_key, r.expires_at \
         FROM (SELECT (pg_snapshot_xmin(pg_current_snapshot())::text)::bigint AS x) h \
         LEFT JOIN revocation r ON r.txid >= (($1::bigint)::text)::xid8 AND r.expires_at > $2"
    } else {
        "SELECT h.x, r.revoked_key, r.expires_at \
         FROM (SELECT COALESCE(MAX(txid), 0) AS x FROM revocation) h \
         LEFT JOIN revocation r ON r.txid > $1 AND r.expires_at > $2"
    };
    let rows: Vec<(i64, Option<String>, Option<i64>)> =
        sqlx::query_as(sql).bind(cursor).bind(now).fetch_all(&mut *c).await?;
    let next = rows.first().map_or(cursor, |r| r.0);
    let keys = rows.into_iter().filter_map(|(_, k, e)| Some((k?, e?))).collect();
    Ok((keys, next))
}
