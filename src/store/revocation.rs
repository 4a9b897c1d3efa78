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

pub async fn revoke(c: &mut Conn, key: &str, now: i64, expires_at: i64) -> Result<()> {
    sqlx::query(
        "INSERT INTO revocation (revoked_key, created_at, expires_at) VALUES ($1, $2, $3) \
         ON CONFLICT (revoked_key) DO UPDATE SET expires_at = $3",
    )
    .bind(key)
    .bind(now)
    .bind(expires_at)
    .execute(&mut *c)
    .await?;
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
