//! The instance row: its presence means the first start has happened.

use super::{Conn, Result};

/// Claims the bootstrap. Returns false when another process already did (on PostgreSQL a
/// concurrent claimer waits for the first transaction to finish, then gets false).
pub async fn claim(c: &mut Conn, default_org_id: &str, now: i64) -> Result<bool> {
    let row: Option<(i64,)> = sqlx::query_as(
        "INSERT INTO instance (instance_id, default_org_id, created_at) VALUES (1, $1, $2) \
         ON CONFLICT (instance_id) DO NOTHING RETURNING instance_id",
    )
    .bind(default_org_id)
    .bind(now)
    .fetch_optional(&mut *c)
    .await?;
    Ok(row.is_some())
}

/// The default organization, once bootstrapped.
pub async fn default_org(c: &mut Conn) -> Result<Option<String>> {
    let row: Option<(String,)> =
        sqlx::query_as("SELECT default_org_id FROM instance WHERE instance_id = 1").fetch_optional(&mut *c).await?;
    Ok(row.map(|r| r.0))
}
