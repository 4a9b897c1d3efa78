//! The end of a browser sign-in that answers with a code, in one round trip: the pending request
//! is retired, the browser's session of the user created (or renewed) and the authorization
//! code stored. As three separate statements these would be three round trips (on SQLite three
//! hops to the connection's thread) on the path of every password login.

use super::code::NewCode;
use super::session::{NewSession, Session, SessionRow};
use super::{Conn, Result, to_json};

/// What [`finish`] did.
#[derive(Debug)]
pub enum Finished {
    /// The request was gone (finished in another tab, or expired and swept): nothing was written.
    RequestGone,
    /// The request is retired and the session stored. The code is stored when the session is a
    /// new one (`code_stored`); when the browser already had a session of this user, that
    /// session was renewed and keeps its id, which the code's data has to name instead of the
    /// one offered, so the code is left to the caller.
    Done { session: Session, code_stored: bool },
}

/// Retires request `request_id`, then creates or renews `session`, then stores `code` when the
/// session is new (`code` names `session.session_id` in its data). Only a retired request leads
/// to a session, and only a new session to a stored code. One data-modifying CTE on PostgreSQL;
/// on SQLite three statements that the connection's thread runs in one hop, each tied to the
/// one before by `changes()` (as [`super::refresh::rotate_live`] does, and for the same reason
/// without a transaction around them).
pub async fn finish(c: &mut Conn, request_id: &str, session: &NewSession, code: &NewCode<'_>) -> Result<Finished> {
    const UPSERT: &str = "INSERT INTO session (session_id, ua_key, user_id, auth_time, amr, created_at, last_used_at, \
         expires_at) SELECT $2, $3, $4, $5, $6, $7, $7, $8";
    const ON_CONFLICT: &str = "ON CONFLICT (ua_key, user_id) DO UPDATE SET auth_time = $5, amr = $6, \
         last_used_at = $7, expires_at = $8 \
         RETURNING session_id, user_id, auth_time, amr, created_at, last_used_at, expires_at";
    const CODE: &str = "INSERT INTO auth_code (code_hash, grant_id, client_id, data, created_at, expires_at, user_id, \
         session_id, refresh_data) SELECT $9, $10, $11, $12, $13, $14, $15, $16, $17";
    let sql = if c.backend_name() == "PostgreSQL" {
        format!(
            "WITH retired AS (DELETE FROM auth_request WHERE auth_request_id = $1 RETURNING auth_request_id), \
             s AS ({UPSERT} FROM retired {ON_CONFLICT}), \
             stored AS ({CODE} FROM s WHERE s.session_id = $2) \
             SELECT session_id, user_id, auth_time, amr, created_at, last_used_at, expires_at FROM s"
        )
    } else {
        format!(
            "DELETE FROM auth_request WHERE auth_request_id = $1; \
             {UPSERT} WHERE changes() = 1 {ON_CONFLICT}; \
             {CODE} WHERE changes() = 1 AND EXISTS (SELECT 1 FROM session WHERE session_id = $2)"
        )
    };
    let seed = code.refresh.as_ref();
    // fetch_all: on SQLite sqlx's fetch_optional would stop after the first statement.
    let rows: Vec<SessionRow> = sqlx::query_as(&sql)
        .bind(request_id)
        .bind(&session.session_id)
        .bind(session.ua_key.clone())
        .bind(&session.user_id)
        .bind(session.auth_time)
        .bind(to_json(&session.amr))
        .bind(session.now)
        .bind(session.expires_at)
        .bind(code.code_hash.to_vec())
        .bind(code.grant_id)
        .bind(code.client_id)
        .bind(code.data)
        .bind(code.created_at)
        .bind(code.expires_at)
        .bind(seed.map(|s| s.user_id))
        .bind(seed.map(|s| s.session_id))
        .bind(seed.map(|s| s.data))
        .fetch_all(&mut *c)
        .await?;
    let Some(row) = rows.into_iter().next() else { return Ok(Finished::RequestGone) };
    let session_row = Session::try_from(row)?;
    let code_stored = session_row.session_id == session.session_id;
    Ok(Finished::Done { session: session_row, code_stored })
}
