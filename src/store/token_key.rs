//! Keys of opaque access tokens (AES-256-GCM), each encrypted under the master key.

use super::{Conn, Result};

pub async fn all(c: &mut Conn) -> Result<Vec<(i64, Vec<u8>)>> {
    Ok(sqlx::query_as("SELECT generation, key_enc FROM token_key ORDER BY generation").fetch_all(&mut *c).await?)
}

/// Stores a key unless that generation exists (two replicas creating the first key at once
/// keep one).
pub async fn insert(c: &mut Conn, generation: i64, key_enc: &[u8], now: i64) -> Result<()> {
    sqlx::query("INSERT INTO token_key (generation, key_enc, created_at) VALUES ($1, $2, $3) ON CONFLICT (generation) DO NOTHING")
        .bind(generation)
        .bind(key_enc.to_vec())
        .bind(now)
        .execute(&mut *c)
        .await?;
    Ok(())
}

/// Removes every key (only before the instance exists, when none has sealed anything).
pub async fn delete_all(c: &mut Conn) -> Result<()> {
    sqlx::query("DELETE FROM token_key").execute(&mut *c).await?;
    Ok(())
}

/// When the newest key was made, if there is one.
pub async fn newest(c: &mut Conn) -> Result<Option<i64>> {
    let row: (Option<i64>,) = sqlx::query_as("SELECT MAX(created_at) FROM token_key").fetch_one(&mut *c).await?;
    Ok(row.0)
}
