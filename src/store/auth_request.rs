//! Pending authorization requests of the browser flow.

use sqlx::FromRow;

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
    pub user_id: Option<String>,
    /// What the user has done so far (JSON).
    pub progress: String,
    pub created_at: i64,
    pub expires_at: i64,
}

const SELECT: &str = "SELECT auth_request_id, ua_key, client_id, params, csrf_token, user_id, progress, created_at, \
     expires_at FROM auth_request";

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

pub async fn get(c: &mut Conn, id: &str) -> Result<Option<AuthRequestRow>> {
    Ok(sqlx::query_as(&format!("{SELECT} WHERE auth_request_id = $1")).bind(id).fetch_optional(&mut *c).await?)
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
