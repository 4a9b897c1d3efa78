//! Authorization codes: short-lived, single use, stored by digest.

use super::{Conn, Result};

/// What redeeming a code found.
#[derive(Debug)]
pub enum Redeemed {
    /// First use by its client: the code's data (JSON) and grant.
    Fresh {
        grant_id: String,
        data: String,
        expires_at: i64,
    },
    /// The code was used before: the grant it started must be revoked.
    Reused {
        grant_id: String,
    },
    /// The code belongs to another client (it stays unused).
    OtherClient,
    Unknown,
}

pub async fn insert(
    c: &mut Conn,
    code_hash: &[u8],
    grant_id: &str,
    client_id: &str,
    data: &str,
    now: i64,
    expires_at: i64,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO auth_code (code_hash, grant_id, client_id, data, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(code_hash.to_vec())
    .bind(grant_id)
    .bind(client_id)
    .bind(data)
    .bind(now)
    .bind(expires_at)
    .execute(&mut *c)
    .await?;
    Ok(())
}

/// Marks the code used by `client_id`, atomically: of two concurrent redemptions exactly one
/// gets `Fresh`.
pub async fn redeem(c: &mut Conn, code_hash: &[u8], client_id: &str, now: i64) -> Result<Redeemed> {
    let row: Option<(String, String, i64)> = sqlx::query_as(
        "UPDATE auth_code SET used_at = $1 WHERE code_hash = $2 AND client_id = $3 AND used_at IS NULL \
         RETURNING grant_id, data, expires_at",
    )
    .bind(now)
    .bind(code_hash.to_vec())
    .bind(client_id)
    .fetch_optional(&mut *c)
    .await?;
    if let Some((grant_id, data, expires_at)) = row {
        return Ok(Redeemed::Fresh { grant_id, data, expires_at });
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
