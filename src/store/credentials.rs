//! What a sign-in checks and counts on an account: wrong passwords and second-factor codes
//! (toward the lockout policy), re-hashed passwords, TOTP secrets and their used steps; and
//! passwords set (by an administrator, a password change, or an e-mailed code).

use super::{Conn, Result, flag};
use crate::domain::enums::UserState;

/// Counts a wrong password; locks the user when `max_attempts` (> 0) is reached. Returns true
/// when the user is now locked.
pub async fn password_failed(c: &mut Conn, user_id: &str, max_attempts: i64, now: i64) -> Result<bool> {
    let row: Option<(i64,)> = sqlx::query_as(
        "UPDATE account SET failed_password_attempts = failed_password_attempts + 1, \
         state = CASE WHEN $1 > 0 AND failed_password_attempts + 1 >= $1 AND state = 1 THEN 4 ELSE state END, \
         changed_at = $2 WHERE user_id = $3 RETURNING state",
    )
    .bind(max_attempts)
    .bind(now)
    .bind(user_id)
    .fetch_optional(&mut *c)
    .await?;
    Ok(row.is_some_and(|(s,)| s == UserState::Locked.number()))
}

/// Resets the failure counter after a correct password.
pub async fn password_ok(c: &mut Conn, user_id: &str) -> Result<()> {
    sqlx::query("UPDATE account SET failed_password_attempts = 0 WHERE user_id = $1 AND failed_password_attempts > 0")
        .bind(user_id)
        .execute(&mut *c)
        .await?;
    Ok(())
}

/// Replaces a stored hash (re-hashing an imported format) without touching anything else.
pub async fn rehash(c: &mut Conn, user_id: &str, old_hash: &str, new_hash: &str) -> Result<bool> {
    let r = sqlx::query("UPDATE account SET password_hash = $1 WHERE user_id = $2 AND password_hash = $3")
        .bind(new_hash)
        .bind(user_id)
        .bind(old_hash)
        .execute(&mut *c)
        .await?;
    Ok(r.rows_affected() == 1)
}

/// Stores (or with `None` removes) a user's TOTP secret, already encrypted.
pub async fn set_otp(c: &mut Conn, user_id: &str, secret: Option<Vec<u8>>, now: i64) -> Result<bool> {
    store_otp(c, user_id, secret, now, "").await
}

/// Stores a human's first TOTP secret, already encrypted; false when it has one already.
pub async fn set_first_otp(c: &mut Conn, user_id: &str, secret: Vec<u8>, now: i64) -> Result<bool> {
    store_otp(c, user_id, Some(secret), now, " AND otp_secret IS NULL").await
}

async fn store_otp(c: &mut Conn, user_id: &str, secret: Option<Vec<u8>>, now: i64, unless: &str) -> Result<bool> {
    let sql = format!(
        "UPDATE account SET otp_secret = $1, otp_last_step = NULL, failed_otp_attempts = 0, changed_at = $2 \
         WHERE user_id = $3 AND user_type = 1{unless}"
    );
    let r = sqlx::query(&sql).bind(secret).bind(now).bind(user_id).execute(&mut *c).await?;
    Ok(r.rows_affected() == 1)
}

/// Records a used TOTP step; false when this or a later step was used already (a replay).
pub async fn otp_used(c: &mut Conn, user_id: &str, step: i64) -> Result<bool> {
    let r = sqlx::query(
        "UPDATE account SET otp_last_step = $1, failed_otp_attempts = 0 \
         WHERE user_id = $2 AND (otp_last_step IS NULL OR otp_last_step < $1)",
    )
    .bind(step)
    .bind(user_id)
    .execute(&mut *c)
    .await?;
    Ok(r.rows_affected() == 1)
}

/// Wrong TOTP codes in a row that may follow each other at once (the per-replica rate budget
/// aside); after them each try waits [`OTP_GAP`] seconds after the one before, and after
/// [`OTP_SLOW_AFTER`] wrong codes [`OTP_SLOW_GAP`]. A right code starts over.
pub const OTP_FREE_TRIES: i64 = 5;
pub const OTP_SLOW_AFTER: i64 = 10;
pub const OTP_GAP: i64 = 60;
pub const OTP_SLOW_GAP: i64 = 900;

/// Takes a TOTP try of `user_id`, counted as wrong until [`otp_used`] proves it right: `None`
/// when it may be checked, else the seconds to wait. The pace lives in the store, so replicas
/// share it (the rate budget per user is per replica), and the statement that checks the wait
/// takes the try, so tries sent at once through several replicas cannot pass together. The wait
/// counts from the last wrong code (`otp_failed_at`), which nothing else moves: a wrong password
/// or a profile change cannot prolong it. With the lockout policy's OTP attempts off (the
/// default) this is what bounds guessing: six digits in three accepted steps give one chance in
/// about 330,000 per try; past ten wrong codes in a row there are 96 tries a day, and ten more
/// after each right code.
pub async fn otp_claim(c: &mut Conn, user_id: &str, now: i64) -> Result<Option<i64>> {
    let taken = sqlx::query(
        "UPDATE account SET failed_otp_attempts = failed_otp_attempts + 1, \
         otp_failed_at = CASE WHEN failed_otp_attempts >= $3 THEN $2 ELSE otp_failed_at END \
         WHERE user_id = $1 AND (failed_otp_attempts < $3 OR otp_failed_at IS NULL \
           OR otp_failed_at <= $2 - CASE WHEN failed_otp_attempts < $4 THEN $5 ELSE $6 END)",
    )
    .bind(user_id)
    .bind(now)
    .bind(OTP_FREE_TRIES)
    .bind(OTP_SLOW_AFTER)
    .bind(OTP_GAP)
    .bind(OTP_SLOW_GAP)
    .execute(&mut *c)
    .await?;
    if taken.rows_affected() == 1 {
        return Ok(None);
    }
    let row: Option<(i64, i64)> =
        sqlx::query_as("SELECT failed_otp_attempts, COALESCE(otp_failed_at, 0) FROM account WHERE user_id = $1")
            .bind(user_id)
            .fetch_optional(&mut *c)
            .await?;
    Ok(Some(match row {
        Some((n, at)) => (at + if n < OTP_SLOW_AFTER { OTP_GAP } else { OTP_SLOW_GAP } - now).max(1),
        None => OTP_GAP,
    }))
}

/// Records that the try [`otp_claim`] took was wrong; locks the user when its wrong codes in a
/// row reach `max_attempts` (> 0).
pub async fn otp_failed(c: &mut Conn, user_id: &str, max_attempts: i64, now: i64) -> Result<bool> {
    let row: Option<(i64,)> = sqlx::query_as(
        "UPDATE account SET \
         state = CASE WHEN $1 > 0 AND failed_otp_attempts >= $1 AND state = 1 THEN 4 ELSE state END, \
         changed_at = $2, otp_failed_at = $2 WHERE user_id = $3 RETURNING state",
    )
    .bind(max_attempts)
    .bind(now)
    .bind(user_id)
    .fetch_optional(&mut *c)
    .await?;
    Ok(row.is_some_and(|(s,)| s == UserState::Locked.number()))
}

/// How a password is set (see [`write_password`]).
#[derive(Clone, Copy, Default)]
struct PasswordWrite {
    change_required: bool,
    /// Only if the user has none yet.
    only_first: bool,
    /// A code mailed to the address proved it.
    verifies_email: bool,
    /// Tokens and sessions issued before end ([`super::user::cut_off_tokens`]), in the same
    /// statement.
    cut_off: bool,
    /// Only if the user's cut-off (`tokens_valid_from`) is not later than this: the password
    /// check the change rests on still counts.
    checked_at: Option<i64>,
}

/// Sets a human's password (an initial one makes the user active), in one statement; the codes
/// mailed to set one (initial password, reset) are void afterwards. False when no row changed.
async fn write_password(c: &mut Conn, user_id: &str, hash: &str, how: PasswordWrite, now: i64) -> Result<bool> {
    let r = sqlx::query(
        "UPDATE account SET password_hash = $1, password_change_required = $2, password_changed_at = $3, \
         changed_at = $3, failed_password_attempts = 0, \
         email_verified = CASE WHEN $4 = 1 THEN 1 ELSE email_verified END, \
         tokens_valid_from = CASE WHEN $5 = 1 AND tokens_valid_from < $3 THEN $3 ELSE tokens_valid_from END, \
         state = CASE WHEN state = 6 THEN 1 ELSE state END \
         WHERE user_id = $6 AND user_type = 1 AND ($7 = 0 OR password_hash IS NULL) AND tokens_valid_from <= $8",
    )
    .bind(hash)
    .bind(flag(how.change_required))
    .bind(now)
    .bind(flag(how.verifies_email))
    .bind(flag(how.cut_off))
    .bind(user_id)
    .bind(flag(how.only_first))
    .bind(how.checked_at.unwrap_or(i64::MAX))
    .execute(&mut *c)
    .await?;
    let changed = r.rows_affected() == 1;
    if changed {
        drop_password_codes(c, user_id).await?;
    }
    Ok(changed)
}

/// Sets a human's password (an administrator's, or a change at sign-in).
pub async fn set_password(c: &mut Conn, user_id: &str, hash: &str, change_required: bool, now: i64) -> Result<bool> {
    write_password(c, user_id, hash, PasswordWrite { change_required, ..Default::default() }, now).await
}

/// [`set_password`] as the sign-in's required change, resting on the password checked at
/// `checked_at`: false, and nothing written, when the user was cut off since (a lock, a
/// deactivation, a password set by an administrator or by e-mailed code).
pub async fn change_password_at_sign_in(
    c: &mut Conn,
    user_id: &str,
    hash: &str,
    checked_at: i64,
    now: i64,
) -> Result<bool> {
    write_password(c, user_id, hash, PasswordWrite { checked_at: Some(checked_at), ..Default::default() }, now).await
}

/// [`set_password`] for a human who has none yet (false: one has been set meanwhile, which stays);
/// to be changed at the first sign-in.
pub async fn set_initial_password(c: &mut Conn, user_id: &str, hash: &str, now: i64) -> Result<bool> {
    let how = PasswordWrite { change_required: true, only_first: true, ..Default::default() };
    write_password(c, user_id, hash, how, now).await
}

/// [`set_password`] with a code mailed to the user's address: the address is verified too and,
/// for a reset (`cut_off`), the user's tokens and sessions issued before end in the same
/// statement, so that no new password stands while the old one's sessions live on.
pub async fn set_password_by_code(c: &mut Conn, user_id: &str, hash: &str, cut_off: bool, now: i64) -> Result<bool> {
    let how = PasswordWrite { verifies_email: true, cut_off, ..Default::default() };
    write_password(c, user_id, hash, how, now).await
}

async fn drop_password_codes(c: &mut Conn, user_id: &str) -> Result<()> {
    sqlx::query("DELETE FROM user_code WHERE user_id = $1 AND purpose IN ('init_password', 'reset_password')")
        .bind(user_id)
        .execute(&mut *c)
        .await?;
    Ok(())
}
