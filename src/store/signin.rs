//! The end of a browser sign-in that answers with a code, in one round trip: the browser's
//! cookie renewed (its sessions and pending requests moved to the new one), the pending request
//! retired, the browser's session of the user created (or renewed) and the authorization code
//! stored. As separate statements these would be five round trips (on SQLite five hops to the
//! connection's thread) on the path of every password login.

use sqlx::FromRow;

use super::code::{self, NewCode};
use super::session::{NewSession, Session, SessionRow};
use super::{Conn, Result};

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
/// to a session, and only a new session to a stored code. The browser's cookie is renewed on the
/// way: the request must still be bound to browser key `from`, and the browser's other sessions
/// and pending requests move from it to the session's key first ([`super::session::moves`]);
/// a request no longer bound to `from` (another tab's sign-in renewed the cookie first) counts
/// as gone. On PostgreSQL one data-modifying CTE (the user's own session moved and renewed by
/// one update, since an upsert would not see a move made by the same statement). On SQLite five
/// statements that the connection's thread runs in one hop: the move of the browser's other
/// requests, which claims the browser ([`super::session::moves`]; of two tabs finishing at once
/// only one moves anything), then its sessions, then the rest, each tied to the one before by the
/// request's binding or by `changes()` (as [`super::refresh::rotate_live`] does, and for the
/// same reason without a transaction around them: a store error between two of them leaves the
/// browser's sessions under a cookie it does not get, signing it out of them).
pub async fn finish(
    c: &mut Conn,
    request_id: &str,
    from: &[u8],
    session: &NewSession,
    code: &NewCode<'_>,
) -> Result<Finished> {
    let (sessions, columns, codes) = (super::session::INSERT_COLUMNS, super::session::COLUMNS, code::INSERT_COLUMNS);
    let upsert = format!("INSERT INTO session ({sessions}) SELECT $2, $3, $4, $5, $6, $7, $7, $8");
    let on_conflict = format!(
        "ON CONFLICT (ua_key, user_id) DO UPDATE SET auth_time = $5, amr = $6, last_used_at = $7, expires_at = $8 \
         RETURNING {columns}"
    );
    let store_code = format!("INSERT INTO auth_code ({codes}) SELECT $9, $10, $11, $12, $13, $14, $15, $16, $17");
    let sql = if c.backend_name() == "PostgreSQL" {
        // $18: the key the request must still be bound to; $3 the session's (the new one). The
        // browser's requests are locked in the order of their ids first (as in
        // session::move_browser), and the user's own session is moved and renewed by one update
        // (an upsert would not see a move made by the same statement).
        let locked = super::session::locked("$18", "$1");
        format!(
            "WITH {locked}, \
             retired AS (DELETE FROM auth_request WHERE auth_request_id = $1 AND EXISTS (SELECT 1 FROM own) \
               RETURNING auth_request_id), \
             others AS (UPDATE auth_request SET ua_key = $3 WHERE auth_request_id <> $1 \
               AND auth_request_id IN (SELECT auth_request_id FROM locked) AND EXISTS (SELECT 1 FROM own)), \
             moved AS (UPDATE session SET ua_key = $3 WHERE ua_key = $18 AND user_id <> $4 \
               AND EXISTS (SELECT 1 FROM own)), \
             renewed AS (UPDATE session SET ua_key = $3, auth_time = $5, amr = $6, last_used_at = $7, \
               expires_at = $8 WHERE ua_key = $18 AND user_id = $4 AND EXISTS (SELECT 1 FROM retired) \
               RETURNING {columns}), \
             created AS ({upsert} FROM retired WHERE NOT EXISTS (SELECT 1 FROM renewed) RETURNING {columns}), \
             s AS (SELECT {columns} FROM renewed UNION ALL SELECT {columns} FROM created), \
             stored AS ({store_code} FROM s WHERE s.session_id = $2) \
             SELECT {columns} FROM s"
        )
    } else {
        // $18: the key the request must still be bound to; $3 the session's (the new one).
        let [move_requests, move_sessions] = super::session::moves("$18", "$3", "$1");
        format!(
            "{move_requests}; {move_sessions}; \
             DELETE FROM auth_request WHERE auth_request_id = $1 AND ua_key = $18; \
             {upsert} WHERE changes() = 1 {on_conflict}; \
             {store_code} WHERE changes() = 1 AND EXISTS (SELECT 1 FROM session WHERE session_id = $2)"
        )
    };
    let q = code::bind(super::session::bind(sqlx::query(&sql).bind(request_id), session), code);
    // fetch_all: on SQLite sqlx's fetch_optional would stop after the first statement.
    let rows = q.bind(from.to_vec()).fetch_all(&mut *c).await?;
    let Some(row) = rows.first() else { return Ok(Finished::RequestGone) };
    let stored = Session::try_from(SessionRow::from_row(row)?)?;
    let code_stored = stored.session_id == session.session_id;
    Ok(Finished::Done { session: stored, code_stored })
}
