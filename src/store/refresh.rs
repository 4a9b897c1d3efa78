//! Refresh tokens: stored by digest, rotated on every use, revoked as a whole grant when an old
//! one is presented again.

use sqlx::FromRow;

use super::{Conn, Result};

#[derive(Debug, Clone, FromRow)]
pub struct RefreshRow {
    pub token_hash: Vec<u8>,
    pub grant_id: String,
    pub client_id: String,
    pub user_id: String,
    pub session_id: Option<String>,
    /// Scopes, audience, authentication facts (JSON).
    pub data: String,
    pub created_at: i64,
    pub idle_expires_at: i64,
    pub expires_at: i64,
    pub rotated_at: Option<i64>,
    pub revoked_at: Option<i64>,
}

pub(super) const COLUMNS: &str = "token_hash, grant_id, client_id, user_id, session_id, data, created_at, idle_expires_at, expires_at, \
     rotated_at, revoked_at";

pub async fn insert(c: &mut Conn, r: &RefreshRow) -> Result<()> {
    sqlx::query(&format!(
        "INSERT INTO refresh_token ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
    ))
    .bind(r.token_hash.clone())
    .bind(&r.grant_id)
    .bind(&r.client_id)
    .bind(&r.user_id)
    .bind(r.session_id.clone())
    .bind(&r.data)
    .bind(r.created_at)
    .bind(r.idle_expires_at)
    .bind(r.expires_at)
    .bind(r.rotated_at)
    .bind(r.revoked_at)
    .execute(&mut *c)
    .await?;
    Ok(())
}

pub async fn get(c: &mut Conn, token_hash: &[u8]) -> Result<Option<RefreshRow>> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM refresh_token WHERE token_hash = $1"))
        .bind(token_hash.to_vec())
        .fetch_optional(&mut *c)
        .await?)
}

/// Rotates a live, unexpired token of `client_id` and stores its successor `new_hash` (same
/// grant, session, data and absolute expiry; idle expiry `idle` seconds from now), atomically;
/// returns the successor, or `None` when there is no such live token (the caller reads it to
/// say why). One statement on PostgreSQL (a data-modifying CTE). SQLite has no such CTE: there
/// it is two statements sent together, which SQLite's worker thread runs one after the other
/// in a single hop; the insert copies the token the update has just marked (`changes()` is the
/// update's count on this connection). Each is its own transaction: a transaction around both
/// would have to be ended by a third statement that an error in the second skips, leaving the
/// pooled connection inside it, and one held across hops made refresh 40% slower with a p99 of
/// 166 ms. If the second failed alone (its wait for the write lock over 5 s behind a long
/// write, a full disk, the request dropped between the two), the token is used up without a
/// successor: nothing is issued, and the client's retry counts as reuse (it signs in again). A
/// revocation of the chain that lands between the two (another connection's [`revoke_grant`])
/// leaves no successor: the insert copies only a token that is not revoked.
///
/// A token rotated after `reuse_after` (a second; `i64::MAX` for never) counts as live: it
/// rotates again, keeping the second of its first rotation, and its earlier successor stays
/// (see [`reuse_after`]).
pub async fn rotate_live(
    c: &mut Conn,
    token_hash: &[u8],
    client_id: &str,
    new_hash: &[u8],
    now: i64,
    idle: i64,
    reuse_after: i64,
) -> Result<Option<RefreshRow>> {
    const LIVE: &str = "token_hash = $2 AND client_id = $3 AND (rotated_at IS NULL OR rotated_at > $6) \
         AND revoked_at IS NULL AND expires_at > $1 AND idle_expires_at > $1";
    let sql = if c.backend_name() == "PostgreSQL" {
        format!(
            "WITH old AS (UPDATE refresh_token SET rotated_at = COALESCE(rotated_at, $1) WHERE {LIVE} \
               RETURNING grant_id, client_id, user_id, session_id, data, expires_at) \
             INSERT INTO refresh_token ({COLUMNS}) \
             SELECT $4, grant_id, client_id, user_id, session_id, data, $1, LEAST($1 + $5, expires_at), \
               expires_at, NULL, NULL FROM old \
             RETURNING {COLUMNS}"
        )
    } else {
        format!(
            "UPDATE refresh_token SET rotated_at = COALESCE(rotated_at, $1) WHERE {LIVE}; \
             INSERT INTO refresh_token ({COLUMNS}) \
             SELECT $4, grant_id, client_id, user_id, session_id, data, $1, MIN($1 + $5, expires_at), \
               expires_at, NULL, NULL FROM refresh_token \
               WHERE token_hash = $2 AND revoked_at IS NULL AND changes() = 1 \
             RETURNING {COLUMNS}"
        )
    };
    // fetch_all: on SQLite sqlx's fetch_optional looks only at the first statement's result.
    let rows: Vec<RefreshRow> = sqlx::query_as(&sql)
        .bind(now)
        .bind(token_hash.to_vec())
        .bind(client_id)
        .bind(new_hash.to_vec())
        .bind(idle)
        .bind(reuse_after)
        .fetch_all(&mut *c)
        .await?;
    Ok(rows.into_iter().next())
}

/// The second after which a rotated token may still be used, for a reuse interval of
/// `interval` seconds (0: none; `i64::MAX`, which no rotation is after, so that replicas whose
/// clocks differ by a second never take a rotation for a recent one).
pub fn reuse_after(now: i64, interval: i64) -> i64 {
    if interval > 0 { now - interval } else { i64::MAX }
}

/// Takes back the rotation [`rotate_live`] made at `rotated_at`, when its successor `new_hash`
/// was never handed out (the request failed after it on the server's side): the successor is
/// deleted and the token is live again. Nothing changes unless the successor is still unused
/// and unrevoked and the token still carries that rotation (a revocation of the chain or a use
/// of the successor in between wins). Answers whether the token is live again. As
/// [`rotate_live`]: one statement on PostgreSQL, two sent together on SQLite (the second tied
/// to the first by `changes()`).
pub async fn unrotate(c: &mut Conn, token_hash: &[u8], new_hash: &[u8], rotated_at: i64) -> Result<bool> {
    const GONE: &str = "DELETE FROM refresh_token WHERE token_hash = $2 AND rotated_at IS NULL AND revoked_at IS NULL";
    const BACK: &str = "UPDATE refresh_token SET rotated_at = NULL \
         WHERE token_hash = $1 AND rotated_at = $3 AND revoked_at IS NULL";
    // On PostgreSQL both rows are locked first, in token_hash order, the order [`revoke_all`]
    // takes a chain's rows in: a delete of the successor before the update of the token would
    // otherwise wait for the one a revocation of the chain holds while it waits for the other
    // (a deadlock, one of them aborted). (The sweep's and an application's or organization's
    // deletes still lock in scan order; they touch expired chains or end them all.)
    let sql = if c.backend_name() == "PostgreSQL" {
        format!(
            "WITH locked AS (SELECT token_hash FROM refresh_token WHERE token_hash IN ($1, $2) \
               ORDER BY token_hash FOR UPDATE), \
             gone AS ({GONE} AND (SELECT count(*) FROM locked) = 2 RETURNING grant_id) \
             {BACK} AND grant_id IN (SELECT grant_id FROM gone)"
        )
    } else {
        format!("{GONE}; {BACK} AND changes() = 1")
    };
    // The update's own rows (sqlx's count on SQLite would add the delete's).
    let rows = sqlx::query(&format!("{sql} RETURNING token_hash"))
        .bind(token_hash.to_vec())
        .bind(new_hash.to_vec())
        .bind(rotated_at)
        .fetch_all(&mut *c)
        .await?;
    Ok(!rows.is_empty())
}

/// The absolute expiry of a grant's refresh tokens (rotation keeps it), if it has any.
pub async fn grant_expires_at(c: &mut Conn, grant_id: &str) -> Result<Option<i64>> {
    Ok(sqlx::query_scalar("SELECT MAX(expires_at) FROM refresh_token WHERE grant_id = $1")
        .bind(grant_id)
        .fetch_one(&mut *c)
        .await?)
}

/// Revokes every token of a grant; returns how many were live.
pub async fn revoke_grant(c: &mut Conn, grant_id: &str, now: i64) -> Result<u64> {
    revoke_all(c, "grant_id", grant_id, now).await
}

/// Revokes every token of the given sessions (when the sessions end).
pub async fn revoke_sessions(c: &mut Conn, session_ids: &[String], now: i64) -> Result<()> {
    for sid in session_ids {
        revoke_all(c, "session_id", sid, now).await?;
    }
    Ok(())
}

/// Revokes every token whose `column` is `value`, including a successor that a rotation running
/// at the same moment stores. On PostgreSQL an update does not see rows committed after it
/// began: a rotation that locked the chain's live token first makes the update wait for it,
/// then revokes that token (already rotated) but not the successor the rotation inserted, which
/// would stay usable once the revocation entry is swept. The update is therefore repeated while
/// it finds anything: a pass that revoked nothing met no rotation, and each pass starts after
/// the rotation it waited for committed. (On SQLite, whose writers take turns, the rotation
/// refuses to copy a revoked token, see [`rotate_live`]; the second pass finds nothing.) The
/// passes are bounded: each one needs a rotation of a token the pass before left live, which
/// only its holder can send, and a chain longer than the bound is revoked by the next reuse.
async fn revoke_all(c: &mut Conn, column: &'static str, value: &str, now: i64) -> Result<u64> {
    const PASSES: usize = 8;
    // PostgreSQL: the rows are locked in token_hash order, as [`unrotate`] locks its two.
    let sql = if c.backend_name() == "PostgreSQL" {
        format!(
            "UPDATE refresh_token SET revoked_at = $1 WHERE revoked_at IS NULL AND token_hash IN \
               (SELECT token_hash FROM refresh_token WHERE {column} = $2 AND revoked_at IS NULL \
                ORDER BY token_hash FOR UPDATE)"
        )
    } else {
        format!("UPDATE refresh_token SET revoked_at = $1 WHERE {column} = $2 AND revoked_at IS NULL")
    };
    let mut total = 0;
    for _ in 0..PASSES {
        let n = sqlx::query(&sql).bind(now).bind(value).execute(&mut *c).await?.rows_affected();
        total += n;
        if n == 0 {
            break;
        }
    }
    Ok(total)
}
