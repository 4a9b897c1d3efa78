//! One-time codes sent to users by e-mail, stored by digest, with an attempt counter.

use super::{Conn, Result};

#[derive(Debug, PartialEq, Eq)]
pub enum CodeCheck {
    Valid,
    Wrong,
    /// Expired, unknown, or too many wrong attempts: a new code is needed.
    Gone,
}

/// Wrong tries a code takes before it is gone.
pub const ATTEMPTS: i64 = 5;

/// When [`put`] replaces the user's code of a purpose (an expired code always is).
#[derive(Clone, Copy, Debug)]
pub enum Replace {
    Always,
    /// Not an unexpired code created after this time, even one whose tries are spent: the login
    /// pages' pacing, which spending a code's tries must not speed up.
    CreatedUpTo(i64),
    /// Not a code that can still be used (unexpired, tries left), nor one whose tries are spent
    /// that was created after this time: the first showing of a code's step, which a new
    /// sign-in request reaches again, so it keeps the pacing too.
    UnlessUsable(i64),
}

/// Stores a new code for `purpose` in place of the user's earlier one, as `replace` allows
/// (false: the earlier code stays).
pub async fn put(
    c: &mut Conn,
    user_id: &str,
    purpose: &str,
    code_hash: &[u8],
    now: i64,
    expires_at: i64,
    replace: Replace,
) -> Result<bool> {
    // Replaced when expired, or created up to `created_up_to`, or spent and created up to
    // `spent_up_to`.
    let (created_up_to, spent_up_to) = match replace {
        Replace::Always => (i64::MAX, i64::MAX),
        Replace::CreatedUpTo(t) => (t, i64::MIN),
        Replace::UnlessUsable(t) => (i64::MIN, t),
    };
    let r = sqlx::query(
        "INSERT INTO user_code (user_id, purpose, code_hash, attempts, created_at, expires_at) VALUES ($1, $2, $3, 0, $4, $5) \
         ON CONFLICT (user_id, purpose) DO UPDATE SET code_hash = $3, attempts = 0, created_at = $4, expires_at = $5 \
         WHERE user_code.created_at <= $6 OR (user_code.attempts >= $7 AND user_code.created_at <= $8) \
         OR user_code.expires_at <= $4",
    )
    .bind(user_id)
    .bind(purpose)
    .bind(code_hash.to_vec())
    .bind(now)
    .bind(expires_at)
    .bind(created_up_to)
    .bind(ATTEMPTS)
    .bind(spent_up_to)
    .execute(&mut *c)
    .await?;
    Ok(r.rows_affected() == 1)
}

/// Drops every code of the user: they were sent to an address it no longer has.
pub async fn delete_all(c: &mut Conn, user_id: &str) -> Result<()> {
    sqlx::query("DELETE FROM user_code WHERE user_id = $1").bind(user_id).execute(&mut *c).await?;
    Ok(())
}

/// Checks a code given as the digests it may be stored by (see [`verify`]); a valid code is
/// consumed, a wrong one counts an attempt.
pub async fn check(
    c: &mut Conn,
    user_id: &str,
    purpose: &str,
    code_hashes: &[Vec<u8>],
    now: i64,
    max_attempts: i64,
) -> Result<CodeCheck> {
    let result = verify(c, user_id, purpose, code_hashes, now, max_attempts).await?;
    if result == CodeCheck::Valid && !consume(c, user_id, purpose, code_hashes, now).await? {
        // Consumed meanwhile by another request with the same code.
        return Ok(CodeCheck::Gone);
    }
    Ok(result)
}

/// Checks a code without consuming it; every try, right or wrong, counts an attempt. The
/// attempt is taken in the statement that reads the code, so tries sent at once cannot exceed
/// `max_attempts` between them; and every try costs one statement, whether or not the user has
/// a code (no difference in time between them). `code_hashes` are the digests the presented
/// code may be stored by (the current form and an older one); it is valid when one matches.
pub async fn verify(
    c: &mut Conn,
    user_id: &str,
    purpose: &str,
    code_hashes: &[Vec<u8>],
    now: i64,
    max_attempts: i64,
) -> Result<CodeCheck> {
    let stored: Option<Vec<u8>> = sqlx::query_scalar(
        "UPDATE user_code SET attempts = attempts + 1 \
         WHERE user_id = $1 AND purpose = $2 AND expires_at > $3 AND attempts < $4 RETURNING code_hash",
    )
    .bind(user_id)
    .bind(purpose)
    .bind(now)
    .bind(max_attempts)
    .fetch_optional(&mut *c)
    .await?;
    Ok(match stored {
        None => CodeCheck::Gone,
        Some(stored)
            if code_hashes.iter().any(|h| aws_lc_rs::constant_time::verify_slices_are_equal(&stored, h).is_ok()) =>
        {
            CodeCheck::Valid
        }
        Some(_) => CodeCheck::Wrong,
    })
}

/// Consumes a code [`verify`] found valid; false when it is no longer there (consumed by another
/// request, replaced by a new code, or expired meanwhile).
pub async fn consume(c: &mut Conn, user_id: &str, purpose: &str, code_hashes: &[Vec<u8>], now: i64) -> Result<bool> {
    let listed: Vec<String> = (0..code_hashes.len()).map(|i| format!("${}", i + 4)).collect();
    let sql = format!(
        "DELETE FROM user_code WHERE user_id = $1 AND purpose = $2 AND expires_at > $3 AND code_hash IN ({})",
        listed.join(", ")
    );
    let mut q = sqlx::query(&sql).bind(user_id).bind(purpose).bind(now);
    for h in code_hashes {
        q = q.bind(h.clone());
    }
    let done = q.execute(&mut *c).await?;
    Ok(done.rows_affected() == 1)
}
