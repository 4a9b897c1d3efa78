//! Browser sessions: one per user per browser, found by the digest of the browser cookie.

use sqlx::FromRow;

use super::{AnyQuery, Conn, Result, from_json, to_json};

#[derive(Debug, Clone)]
pub struct Session {
    pub session_id: String,
    pub user_id: String,
    pub auth_time: i64,
    pub amr: Vec<String>,
    pub created_at: i64,
    pub last_used_at: i64,
    pub expires_at: i64,
}

/// A session as stored (`amr` as JSON).
#[derive(FromRow)]
pub(super) struct SessionRow {
    session_id: String,
    user_id: String,
    auth_time: i64,
    amr: String,
    created_at: i64,
    last_used_at: i64,
    expires_at: i64,
}

impl TryFrom<SessionRow> for Session {
    type Error = super::StoreError;
    fn try_from(r: SessionRow) -> Result<Self> {
        Ok(Session {
            amr: from_json("session.amr", &r.amr)?,
            session_id: r.session_id,
            user_id: r.user_id,
            auth_time: r.auth_time,
            created_at: r.created_at,
            last_used_at: r.last_used_at,
            expires_at: r.expires_at,
        })
    }
}

/// A session to create (or renew).
#[derive(Debug, Clone)]
pub struct NewSession {
    pub session_id: String,
    pub ua_key: Vec<u8>,
    pub user_id: String,
    pub auth_time: i64,
    pub amr: Vec<String>,
    pub now: i64,
    pub expires_at: i64,
}

impl NewSession {
    /// The session as it is stored when it is new.
    pub fn as_new(&self) -> Session {
        Session {
            session_id: self.session_id.clone(),
            user_id: self.user_id.clone(),
            auth_time: self.auth_time,
            amr: self.amr.clone(),
            created_at: self.now,
            last_used_at: self.now,
            expires_at: self.expires_at,
        }
    }
}

/// The columns a new session fills.
pub(super) const INSERT_COLUMNS: &str =
    "session_id, ua_key, user_id, auth_time, amr, created_at, last_used_at, expires_at";
/// A stored session's columns, as [`SessionRow`] reads them.
pub(super) const COLUMNS: &str = "session_id, user_id, auth_time, amr, created_at, last_used_at, expires_at";

/// Binds the values of a new session: id, browser, user, authentication time, methods, now (the
/// creation and last use) and expiry, so that a statement numbering them from `$k` fills
/// [`INSERT_COLUMNS`] with `$k, $k+1, $k+2, $k+3, $k+4, $k+5, $k+5, $k+6`.
pub(super) fn bind<'q>(q: AnyQuery<'q>, n: &'q NewSession) -> AnyQuery<'q> {
    q.bind(&n.session_id)
        .bind(n.ua_key.clone())
        .bind(&n.user_id)
        .bind(n.auth_time)
        .bind(to_json(&n.amr))
        .bind(n.now)
        .bind(n.expires_at)
}

/// Creates the session of a user in this browser, or renews it after a new authentication
/// (the session id stays).
pub async fn upsert(c: &mut Conn, n: &NewSession) -> Result<Session> {
    let sql = format!(
        "INSERT INTO session ({INSERT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $6, $7) \
         ON CONFLICT (ua_key, user_id) DO UPDATE SET auth_time = $4, amr = $5, last_used_at = $6, expires_at = $7 \
         RETURNING {COLUMNS}"
    );
    let row = bind(sqlx::query(&sql), n).fetch_one(&mut *c).await?;
    Session::try_from(SessionRow::from_row(&row)?)
}

/// Moves what browser `from` holds (its pending requests, in other tabs, and its sessions) and
/// request `request_id` itself to browser `to`, if that request is still bound to `from`;
/// answers whether it was (when not, nothing moves: the request is gone, or another tab's
/// sign-in renewed the cookie first and took the request with it). A sign-in gives the browser a
/// new cookie this way, so that a cookie value someone else knows (planted in the browser, or
/// taken from an authorization request they started themselves) names nothing afterwards. On
/// PostgreSQL one statement that first locks all the browser's requests in the order of their
/// ids (two tabs finishing at once then wait for each other instead of deadlocking, and the one
/// that waited finds its request moved); on SQLite three statements in one hop to the
/// connection's thread ([`moves`], then the request itself).
pub async fn move_browser(c: &mut Conn, request_id: &str, from: &[u8], to: &[u8]) -> Result<bool> {
    let sql = if c.backend_name() == "PostgreSQL" {
        let locked = locked("$1", "$3");
        format!(
            "WITH {locked}, \
             s AS (UPDATE session SET ua_key = $2 WHERE ua_key = $1 AND EXISTS (SELECT 1 FROM own)) \
             UPDATE auth_request SET ua_key = $2 \
             WHERE auth_request_id IN (SELECT auth_request_id FROM locked) AND EXISTS (SELECT 1 FROM own)"
        )
    } else {
        let [requests, sessions] = moves("$1", "$2", "$3");
        format!(
            "{requests}; {sessions}; UPDATE auth_request SET ua_key = $2 WHERE auth_request_id = $3 AND ua_key = $1"
        )
    };
    let r = sqlx::query(&sql).bind(from.to_vec()).bind(to.to_vec()).bind(request_id).execute(&mut *c).await?;
    // On SQLite the counts of the statements add up: nothing changes unless the request's own
    // update (the last) does.
    Ok(r.rows_affected() > 0)
}

/// PostgreSQL: the CTEs `locked` (the requests of browser `browser`, locked in the order of their
/// ids) and `own` (one row when request `request` is among them); statement parameters such as
/// `$1`. `own` reads all of `locked` before it answers, so every lock is taken before anything is
/// written.
pub(super) fn locked(browser: &str, request: &str) -> String {
    format!(
        "locked AS (SELECT auth_request_id FROM auth_request WHERE ua_key = {browser} \
           ORDER BY auth_request_id FOR UPDATE), \
         own AS (SELECT 1 FROM (SELECT bool_or(auth_request_id = {request}) AS ok FROM locked) x WHERE ok)"
    )
}

/// SQLite: the two updates that move a browser from key `old` to key `new` (statement
/// parameters such as `$1`), but not `request` itself, each only while `request` is bound to
/// `old`. The first moves the browser's other pending requests: it claims the browser, since it
/// moves the request of any other tab finishing at the same moment, whose own statements then
/// find their request no longer bound to `old` and change nothing. The second moves the
/// sessions. The subqueries read the table once, before the update.
pub(super) fn moves(old: &str, new: &str, request: &str) -> [String; 2] {
    let bound = format!("EXISTS (SELECT 1 FROM auth_request WHERE auth_request_id = {request} AND ua_key = {old})");
    [
        format!(
            "UPDATE auth_request SET ua_key = {new} WHERE ua_key = {old} AND auth_request_id <> {request} AND {bound}"
        ),
        format!("UPDATE session SET ua_key = {new} WHERE ua_key = {old} AND {bound}"),
    ]
}

/// The live sessions of a browser, oldest first.
pub async fn of_browser(c: &mut Conn, ua_key: &[u8], now: i64) -> Result<Vec<Session>> {
    let rows: Vec<SessionRow> = sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM session WHERE ua_key = $1 AND expires_at > $2 ORDER BY created_at, session_id"
    ))
    .bind(ua_key.to_vec())
    .bind(now)
    .fetch_all(&mut *c)
    .await?;
    rows.into_iter().map(Session::try_from).collect()
}

pub async fn get(c: &mut Conn, session_id: &str) -> Result<Option<Session>> {
    let row: Option<SessionRow> = sqlx::query_as(&format!("SELECT {COLUMNS} FROM session WHERE session_id = $1"))
        .bind(session_id)
        .fetch_optional(&mut *c)
        .await?;
    row.map(Session::try_from).transpose()
}

pub async fn touch(c: &mut Conn, session_id: &str, now: i64) -> Result<()> {
    sqlx::query("UPDATE session SET last_used_at = $1 WHERE session_id = $2")
        .bind(now)
        .bind(session_id)
        .execute(&mut *c)
        .await?;
    Ok(())
}

/// Ends sessions of a browser (all, or only that user's); returns the ended sessions.
pub async fn end(c: &mut Conn, ua_key: &[u8], user_id: Option<&str>) -> Result<Vec<Session>> {
    let rows: Vec<SessionRow> = match user_id {
        Some(u) => {
            sqlx::query_as(&format!("DELETE FROM session WHERE ua_key = $1 AND user_id = $2 RETURNING {COLUMNS}"))
                .bind(ua_key.to_vec())
                .bind(u)
                .fetch_all(&mut *c)
                .await?
        }
        None => {
            sqlx::query_as(&format!("DELETE FROM session WHERE ua_key = $1 RETURNING {COLUMNS}"))
                .bind(ua_key.to_vec())
                .fetch_all(&mut *c)
                .await?
        }
    };
    rows.into_iter().map(Session::try_from).collect()
}
