//! Authorization codes: short-lived, single use, stored by digest.

use super::{AnyQuery, Conn, Result};

/// A code to store.
pub struct NewCode<'a> {
    pub code_hash: &'a [u8],
    pub grant_id: &'a str,
    pub client_id: &'a str,
    /// What the exchange needs (JSON).
    pub data: &'a str,
    /// Set when the code grants offline_access.
    pub refresh: Option<RefreshSeed<'a>>,
    pub created_at: i64,
    pub expires_at: i64,
}

/// The columns of the refresh token a code's exchange stores together with its redemption.
pub struct RefreshSeed<'a> {
    pub user_id: &'a str,
    pub session_id: &'a str,
    /// The refresh token's data (JSON).
    pub data: &'a str,
}

/// The refresh token an exchange offers to store with the redemption: stored only when the
/// code carries a [`RefreshSeed`] and has not expired.
pub struct Successor<'a> {
    pub token_hash: &'a [u8],
    pub idle_expires_at: i64,
    pub expires_at: i64,
}

/// What redeeming a code found.
#[derive(Debug)]
pub enum Redeemed {
    /// First use by its client: the code's data (JSON) and grant, and whether the offered
    /// successor was stored.
    Fresh {
        grant_id: String,
        data: String,
        expires_at: i64,
        refresh_stored: bool,
    },
    /// The code was used before: the grant it started must be revoked.
    Reused {
        grant_id: String,
    },
    /// The code belongs to another client (it stays unused).
    OtherClient,
    Unknown,
}

/// The columns a new code fills, in the order [`bind`] binds them.
pub(super) const INSERT_COLUMNS: &str =
    "code_hash, grant_id, client_id, data, created_at, expires_at, user_id, session_id, refresh_data";

/// Binds the values of a new code, in the order of [`INSERT_COLUMNS`].
pub(super) fn bind<'q>(q: AnyQuery<'q>, code: &NewCode<'q>) -> AnyQuery<'q> {
    let seed = code.refresh.as_ref();
    q.bind(code.code_hash.to_vec())
        .bind(code.grant_id)
        .bind(code.client_id)
        .bind(code.data)
        .bind(code.created_at)
        .bind(code.expires_at)
        .bind(seed.map(|s| s.user_id))
        .bind(seed.map(|s| s.session_id))
        .bind(seed.map(|s| s.data))
}

pub async fn insert(c: &mut Conn, code: &NewCode<'_>) -> Result<()> {
    let sql = format!("INSERT INTO auth_code ({INSERT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)");
    bind(sqlx::query(&sql), code).execute(&mut *c).await?;
    Ok(())
}

/// Marks the code used by `client_id`, atomically: of two concurrent redemptions exactly one
/// gets `Fresh`. With a `successor`, the same round trip stores that refresh token when the
/// code carries a seed for it: one data-modifying CTE on PostgreSQL; on SQLite two statements
/// that SQLite's thread runs in one hop, the insert tied to the update that has just marked
/// the code (`changes()` is the update's count on this connection; see
/// [`super::refresh::rotate_live`] for why there is no transaction around them). Should a
/// check of the caller then refuse the code, the stored token was never handed out and
/// expires unused.
pub async fn redeem(
    c: &mut Conn,
    code_hash: &[u8],
    client_id: &str,
    now: i64,
    successor: Option<Successor<'_>>,
) -> Result<Redeemed> {
    const MARK: &str = "UPDATE auth_code SET used_at = $1 WHERE code_hash = $2 AND client_id = $3 AND used_at IS NULL";
    // As a number: SQLite has no boolean type for sqlx to decode.
    const STORED: &str = "CAST(CASE WHEN refresh_data IS NOT NULL AND expires_at > $1 THEN 1 ELSE 0 END AS BIGINT)";
    let columns = super::refresh::COLUMNS;
    let sql = match (&successor, c.backend_name() == "PostgreSQL") {
        (None, _) => format!("{MARK} RETURNING grant_id, data, expires_at, CAST(0 AS BIGINT)"),
        (Some(_), true) => format!(
            "WITH used AS ({MARK} RETURNING grant_id, data, expires_at, user_id, session_id, refresh_data), \
             successor AS (INSERT INTO refresh_token ({columns}) \
               SELECT $4, grant_id, $3, user_id, session_id, refresh_data, $1, $5, $6, NULL, NULL FROM used \
               WHERE refresh_data IS NOT NULL AND expires_at > $1) \
             SELECT grant_id, data, expires_at, {STORED} FROM used"
        ),
        (Some(_), false) => format!(
            "{MARK} RETURNING grant_id, data, expires_at, {STORED}; \
             INSERT INTO refresh_token ({columns}) \
             SELECT $4, grant_id, client_id, user_id, session_id, refresh_data, $1, $5, $6, NULL, NULL \
             FROM auth_code WHERE code_hash = $2 AND used_at = $1 AND changes() = 1 \
               AND refresh_data IS NOT NULL AND expires_at > $1"
        ),
    };
    let mut q = sqlx::query_as(&sql).bind(now).bind(code_hash.to_vec()).bind(client_id);
    if let Some(s) = &successor {
        q = q.bind(s.token_hash.to_vec()).bind(s.idle_expires_at).bind(s.expires_at);
    }
    // fetch_all: on SQLite sqlx's fetch_optional would stop after the first statement.
    let rows: Vec<(String, String, i64, i64)> = q.fetch_all(&mut *c).await?;
    if let Some((grant_id, data, expires_at, refresh_stored)) = rows.into_iter().next() {
        return Ok(Redeemed::Fresh { grant_id, data, expires_at, refresh_stored: refresh_stored == 1 });
    }
    let found: Option<(String, String, Option<i64>)> =
        sqlx::query_as("SELECT grant_id, client_id, used_at FROM auth_code WHERE code_hash = $1")
            .bind(code_hash.to_vec())
            .fetch_optional(&mut *c)
            .await?;
    Ok(match found {
        Some((_, owner, _)) if owner != client_id => Redeemed::OtherClient,
        Some((grant_id, _, Some(_))) => Redeemed::Reused { grant_id },
        Some(_) | None => Redeemed::Unknown,
    })
}
