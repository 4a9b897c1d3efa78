//! Which applications received tokens in which browser session (for back-channel logout).

use super::query::Builder;
use super::{Conn, Result};

/// Notes that `client_id` received tokens in session `session_id` (until `expires_at`).
pub async fn note(c: &mut Conn, session_id: &str, client_id: &str, expires_at: i64) -> Result<()> {
    sqlx::query(
        "INSERT INTO session_client (session_id, client_id, expires_at) VALUES ($1, $2, $3) \
         ON CONFLICT (session_id, client_id) DO UPDATE SET expires_at = $3",
    )
    .bind(session_id)
    .bind(client_id)
    .bind(expires_at)
    .execute(&mut *c)
    .await?;
    Ok(())
}

/// Removes and returns the (session id, client id) pairs of ended sessions.
pub async fn take(c: &mut Conn, session_ids: &[String]) -> Result<Vec<(String, String)>> {
    if session_ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut b = Builder::new("DELETE FROM session_client WHERE session_id IN (");
    for (i, s) in session_ids.iter().enumerate() {
        if i > 0 {
            b.push(", ");
        }
        b.text(s.clone());
    }
    b.push(") RETURNING session_id, client_id");
    b.fetch_all(c).await
}
