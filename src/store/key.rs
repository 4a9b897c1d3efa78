//! Public keys of machine users and applications, and personal access tokens.

use sqlx::any::AnyRow;
use sqlx::{FromRow, Row};

use super::user::{self, User};
use super::{Conn, Result, from_json, to_json};
use crate::domain::enums::KeyType;

/// Whose key: a machine user's or an application's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    User,
    App,
}

impl Owner {
    fn table(self) -> (&'static str, &'static str) {
        match self {
            Owner::User => ("machine_key", "user_id"),
            Owner::App => ("app_key", "app_id"),
        }
    }
}

#[derive(Debug, Clone)]
pub struct PublicKey {
    pub key_id: String,
    pub owner_id: String,
    pub key_type: KeyType,
    pub public_key: String,
    pub expires_at: Option<i64>,
    pub created_at: i64,
}

#[derive(FromRow)]
struct KeyRow {
    key_id: String,
    owner_id: String,
    key_type: i64,
    public_key: String,
    expires_at: Option<i64>,
    created_at: i64,
}

impl From<KeyRow> for PublicKey {
    fn from(r: KeyRow) -> Self {
        PublicKey {
            key_id: r.key_id,
            owner_id: r.owner_id,
            key_type: KeyType::from_number(r.key_type).unwrap_or_default(),
            public_key: r.public_key,
            expires_at: r.expires_at,
            created_at: r.created_at,
        }
    }
}

pub async fn insert_key(c: &mut Conn, owner: Owner, k: &PublicKey) -> Result<()> {
    let (table, col) = owner.table();
    sqlx::query(&format!(
        "INSERT INTO {table} (key_id, {col}, key_type, public_key, expires_at, created_at) VALUES ($1, $2, $3, $4, $5, $6)"
    ))
    .bind(&k.key_id)
    .bind(&k.owner_id)
    .bind(k.key_type.number())
    .bind(&k.public_key)
    .bind(k.expires_at)
    .bind(k.created_at)
    .execute(&mut *c)
    .await?;
    Ok(())
}

pub async fn list_keys(c: &mut Conn, owner: Owner, owner_id: &str) -> Result<Vec<PublicKey>> {
    let (table, col) = owner.table();
    let rows: Vec<KeyRow> = sqlx::query_as(&format!(
        "SELECT key_id, {col} AS owner_id, key_type, public_key, expires_at, created_at FROM {table} \
         WHERE {col} = $1 ORDER BY key_id"
    ))
    .bind(owner_id)
    .fetch_all(&mut *c)
    .await?;
    Ok(rows.into_iter().map(PublicKey::from).collect())
}

/// User `user_id` with its machine key `key_id` (when it has one by that id), read in one
/// statement: the jwt-bearer grant needs both before it can check the assertion.
pub async fn user_with_key(c: &mut Conn, user_id: &str, key_id: &str) -> Result<Option<(User, Option<PublicKey>)>> {
    const SQL: &str = concat!(
        "SELECT ",
        user::user_columns!(),
        ", k.key_id, k.user_id AS owner_id, k.key_type, k.public_key, k.expires_at AS key_expires_at, \
         k.created_at AS key_created_at FROM account a ",
        user::user_domain_join!(),
        " LEFT JOIN machine_key k ON k.user_id = a.user_id AND k.key_id = $2 WHERE a.user_id = $1"
    );
    let row: Option<AnyRow> = sqlx::query(SQL).bind(user_id).bind(key_id).fetch_optional(&mut *c).await?;
    let Some(row) = row else { return Ok(None) };
    let u = user::from_row(&row)?;
    let key = match row.try_get::<Option<String>, _>("key_id")? {
        Some(key_id) => Some(PublicKey::from(KeyRow {
            key_id,
            owner_id: row.try_get("owner_id")?,
            key_type: row.try_get("key_type")?,
            public_key: row.try_get("public_key")?,
            expires_at: row.try_get("key_expires_at")?,
            created_at: row.try_get("key_created_at")?,
        })),
        None => None,
    };
    Ok(Some((u, key)))
}

pub async fn get_key(c: &mut Conn, owner: Owner, owner_id: &str, key_id: &str) -> Result<Option<PublicKey>> {
    let (table, col) = owner.table();
    let row: Option<KeyRow> = sqlx::query_as(&format!(
        "SELECT key_id, {col} AS owner_id, key_type, public_key, expires_at, created_at FROM {table} \
         WHERE {col} = $1 AND key_id = $2"
    ))
    .bind(owner_id)
    .bind(key_id)
    .fetch_optional(&mut *c)
    .await?;
    Ok(row.map(PublicKey::from))
}

pub async fn delete_key(c: &mut Conn, owner: Owner, owner_id: &str, key_id: &str) -> Result<bool> {
    let (table, col) = owner.table();
    let r = sqlx::query(&format!("DELETE FROM {table} WHERE {col} = $1 AND key_id = $2"))
        .bind(owner_id)
        .bind(key_id)
        .execute(&mut *c)
        .await?;
    Ok(r.rows_affected() == 1)
}

#[derive(Debug, Clone)]
pub struct Pat {
    pub pat_id: String,
    pub user_id: String,
    pub scopes: Vec<String>,
    pub expires_at: Option<i64>,
    pub created_at: i64,
}

#[derive(FromRow)]
struct PatRow {
    pat_id: String,
    user_id: String,
    scopes: String,
    expires_at: Option<i64>,
    created_at: i64,
}

impl TryFrom<PatRow> for Pat {
    type Error = super::StoreError;
    fn try_from(r: PatRow) -> Result<Self> {
        Ok(Pat {
            scopes: from_json("pat.scopes", &r.scopes)?,
            pat_id: r.pat_id,
            user_id: r.user_id,
            expires_at: r.expires_at,
            created_at: r.created_at,
        })
    }
}

pub async fn insert_pat(c: &mut Conn, p: &Pat, digest: &[u8]) -> Result<()> {
    sqlx::query(
        "INSERT INTO pat (pat_id, user_id, token_digest, scopes, expires_at, created_at) VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(&p.pat_id)
    .bind(&p.user_id)
    .bind(digest.to_vec())
    .bind(to_json(&p.scopes))
    .bind(p.expires_at)
    .bind(p.created_at)
    .execute(&mut *c)
    .await?;
    Ok(())
}

pub async fn list_pats(c: &mut Conn, user_id: &str) -> Result<Vec<Pat>> {
    let rows: Vec<PatRow> = sqlx::query_as(
        "SELECT pat_id, user_id, scopes, expires_at, created_at FROM pat WHERE user_id = $1 ORDER BY pat_id",
    )
    .bind(user_id)
    .fetch_all(&mut *c)
    .await?;
    rows.into_iter().map(Pat::try_from).collect()
}

pub async fn delete_pat(c: &mut Conn, user_id: &str, pat_id: &str) -> Result<bool> {
    let r = sqlx::query("DELETE FROM pat WHERE user_id = $1 AND pat_id = $2")
        .bind(user_id)
        .bind(pat_id)
        .execute(&mut *c)
        .await?;
    Ok(r.rows_affected() == 1)
}

/// The token by the SHA-256 digest of its value.
pub async fn find_pat(c: &mut Conn, digest: &[u8]) -> Result<Option<Pat>> {
    let row: Option<PatRow> =
        sqlx::query_as("SELECT pat_id, user_id, scopes, expires_at, created_at FROM pat WHERE token_digest = $1")
            .bind(digest.to_vec())
            .fetch_optional(&mut *c)
            .await?;
    row.map(Pat::try_from).transpose()
}

/// The keys of the application whose client id is `client_id`.
pub async fn keys_of_client(c: &mut Conn, client_id: &str) -> Result<Vec<PublicKey>> {
    let rows: Vec<KeyRow> = sqlx::query_as(
        "SELECT k.key_id, k.app_id AS owner_id, k.key_type, k.public_key, k.expires_at, k.created_at \
         FROM app_key k JOIN app a ON a.app_id = k.app_id WHERE a.client_id = $1",
    )
    .bind(client_id)
    .fetch_all(&mut *c)
    .await?;
    Ok(rows.into_iter().map(PublicKey::from).collect())
}

/// Records an assertion id until `expires_at`; false when it was seen before (a replay).
pub async fn remember_jti(c: &mut Conn, key: &str, expires_at: i64) -> Result<bool> {
    let r =
        sqlx::query("INSERT INTO assertion_jti (jti_key, expires_at) VALUES ($1, $2) ON CONFLICT (jti_key) DO NOTHING")
            .bind(key)
            .bind(expires_at)
            .execute(&mut *c)
            .await?;
    Ok(r.rows_affected() == 1)
}
