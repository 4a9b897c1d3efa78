//! One-time codes sent to users by e-mail, stored by digest, with an attempt counter.

use super::{Conn, Result};

#[derive(Debug, PartialEq, Eq)]
pub enum CodeCheck {
    Valid,
    Wrong,
    /// Expired, unknown, or too many wrong attempts: a new code is needed.
    Gone,
}

/// Replaces the user's code for `purpose`.
pub async fn put(
    c: &mut Conn,
    user_id: &str,
    purpose: &str,
    code_hash: &[u8],
    now: i64,
    expires_at: i64,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO user_code (user_id, purpose, code_hash, attempts, created_at, expires_at) VALUES ($1, $2, $3, 0, $4, $5) \
         ON CONFLICT (user_id, purpose) DO UPDATE SET code_hash = $3, attempts = 0, created_at = $4, expires_at = $5",
    )
    .bind(user_id)
    .bind(purpose)
    .bind(code_hash.to_vec())
    .bind(now)
    .bind(expires_at)
    .execute(&mut *c)
    .await?;
    Ok(())
}

/// Drops every code of the user: they were sent to an address it no longer has.
pub async fn delete_all(c: &mut Conn, user_id: &str) -> Result<()> {
    sqlx::query("DELETE FROM user_code WHERE user_id = $1").bind(user_id).execute(&mut *c).await?;
    Ok(())
}

/// Checks a code; a valid code is consumed, a wrong one counts an attempt.
pub async fn check(
    c: &mut Conn,
    user_id: &str,
    purpose: &str,
    code_hash: &[u8],
    now: i64,
    max_attempts: i64,
) -> Result<CodeCheck> {
    let row: Option<(Vec<u8>, i64, i64)> =
        sqlx::query_as("SELECT code_hash, attempts, expires_at FROM user_code WHERE user_id = $1 AND purpose = $2")
            .bind(user_id)
            .bind(purpose)
            .fetch_optional(&mut *c)
            .await?;
    let Some((stored, attempts, expires_at)) = row else {
        return Ok(CodeCheck::Gone);
    };
    if expires_at <= now || attempts >= max_attempts {
        return Ok(CodeCheck::Gone);
    }
    if aws_lc_rs::constant_time::verify_slices_are_equal(&stored, code_hash).is_ok() {
        sqlx::query("DELETE FROM user_code WHERE user_id = $1 AND purpose = $2")
            .bind(user_id)
            .bind(purpose)
            .execute(&mut *c)
            .await?;
        return Ok(CodeCheck::Valid);
    }
    sqlx::query("UPDATE user_code SET attempts = attempts + 1 WHERE user_id = $1 AND purpose = $2")
        .bind(user_id)
        .bind(purpose)
        .execute(&mut *c)
        .await?;
    Ok(CodeCheck::Wrong)
}
