//! Pending authorization requests of the browser flow.

use sqlx::any::AnyRow;
use sqlx::{FromRow, Row};

use super::user::{self, User};
use super::{Conn, Result};

#[derive(Debug, Clone, FromRow)]
pub struct AuthRequestRow {
    pub auth_request_id: String,
    /// SHA-256 of the browser cookie that started the request.
    pub ua_key: Vec<u8>,
    pub client_id: String,
    /// The validated request parameters (JSON).
    pub params: String,
    pub csrf_token: String,
    /// The user being signed in, once known.
    #[sqlx(rename = "request_user_id")]
    pub user_id: Option<String>,
    /// What the user has done so far (JSON).
    pub progress: String,
    #[sqlx(rename = "request_created_at")]
    pub created_at: i64,
    pub expires_at: i64,
}

pub async fn insert(c: &mut Conn, r: &AuthRequestRow) -> Result<()> {
    sqlx::query(
        "INSERT INTO auth_request (auth_request_id, ua_key, client_id, params, csrf_token, user_id, progress, \
         created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(&r.auth_request_id)
    .bind(r.ua_key.clone())
    .bind(&r.client_id)
    .bind(&r.params)
    .bind(&r.csrf_token)
    .bind(r.user_id.clone())
    .bind(&r.progress)
    .bind(r.created_at)
    .bind(r.expires_at)
    .execute(&mut *c)
    .await?;
    Ok(())
}

/// Request `id` with its user (when one is known), read in one statement: every page and form of
/// the sign-in flow begins with this.
pub async fn get_with_user(c: &mut Conn, id: &str) -> Result<Option<(AuthRequestRow, Option<User>)>> {
    const SQL: &str = concat!(
        "SELECT r.auth_request_id, r.ua_key, r.client_id, r.params, r.csrf_token, r.user_id AS request_user_id, \
         r.progress, r.created_at AS request_created_at, r.expires_at, ",
        user::user_columns!(),
        " FROM auth_request r LEFT JOIN account a ON a.user_id = r.user_id ",
        user::user_domain_join!(),
        " WHERE r.auth_request_id = $1"
    );
    let row: Option<AnyRow> = sqlx::query(SQL).bind(id).fetch_optional(&mut *c).await?;
    let Some(row) = row else { return Ok(None) };
    let request = AuthRequestRow::from_row(&row)?;
    // The account's own user_id is NULL when the request names no user (or a deleted one).
    let user = match row.try_get::<Option<String>, _>("user_id")? {
        Some(_) => Some(user::from_row(&row)?),
        None => None,
    };
    Ok(Some((request, user)))
}

/// Records the login name typed on request `id`: the request names the user whose user name it
/// is (or no user) and its progress becomes `progress`; answers that user. The lookup and the
/// update go in one round trip (on SQLite one hop to the connection's thread, two statements as
/// in [`super::refresh::rotate_live`]), as the login-name form of every sign-in needs both. A
/// name that is no user name may still mean a user through a domain or an e-mail address
/// ([`user::find_by_domain_or_email`]); the caller then records that user with [`update`].
pub async fn name_user(c: &mut Conn, id: &str, login_name: &str, progress: &str) -> Result<Option<User>> {
    const UPDATE: &str = "UPDATE auth_request SET user_id = (SELECT user_id FROM account WHERE username_key = $1), \
         progress = $2 WHERE auth_request_id = $3";
    const SELECT: &str = concat!(
        "SELECT ",
        user::user_columns!(),
        " FROM account a ",
        user::user_domain_join!(),
        " WHERE a.username_key = $1"
    );
    let sql = if c.backend_name() == "PostgreSQL" {
        format!("WITH named AS ({UPDATE}) {SELECT}")
    } else {
        format!("{UPDATE}; {SELECT}")
    };
    // fetch_all: on SQLite sqlx's fetch_optional looks only at the first statement's result.
    let rows: Vec<AnyRow> =
        sqlx::query(&sql).bind(super::fold(login_name.trim())).bind(progress).bind(id).fetch_all(&mut *c).await?;
    rows.first().map(user::from_row).transpose().map_err(Into::into)
}

/// Records the user and progress of a request.
pub async fn update(c: &mut Conn, id: &str, user_id: Option<&str>, progress: &str) -> Result<bool> {
    let r = sqlx::query("UPDATE auth_request SET user_id = $1, progress = $2 WHERE auth_request_id = $3")
        .bind(user_id)
        .bind(progress)
        .bind(id)
        .execute(&mut *c)
        .await?;
    Ok(r.rows_affected() == 1)
}

/// Removes a finished request; false when it was already gone (finished elsewhere).
pub async fn delete(c: &mut Conn, id: &str) -> Result<bool> {
    let r = sqlx::query("DELETE FROM auth_request WHERE auth_request_id = $1").bind(id).execute(&mut *c).await?;
    Ok(r.rows_affected() == 1)
}

/// Removes the browser's pending requests (only those naming `user_id`, when given): a sign-out
/// leaves no sign-in half-way (a password checked, a change or second factor still to come)
/// for whoever uses the browser next.
pub async fn forget_browser(c: &mut Conn, ua_key: &[u8], user_id: Option<&str>) -> Result<u64> {
    let r = match user_id {
        Some(u) => {
            sqlx::query("DELETE FROM auth_request WHERE ua_key = $1 AND user_id = $2")
                .bind(ua_key.to_vec())
                .bind(u)
                .execute(&mut *c)
                .await?
        }
        None => {
            sqlx::query("DELETE FROM auth_request WHERE ua_key = $1").bind(ua_key.to_vec()).execute(&mut *c).await?
        }
    };
    Ok(r.rows_affected())
}
