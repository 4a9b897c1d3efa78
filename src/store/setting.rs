//! Settings and policies, stored as JSON per owner ('' = the instance, or an organization id).

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{Conn, Result, from_json, to_json};

pub const INSTANCE: &str = "";

/// A settings document with a kind name and defaults.
pub trait Setting: Serialize + DeserializeOwned + Default {
    const KIND: &'static str;
}

/// A setting as stored, or its defaults when it was never set.
#[derive(Debug, Clone)]
pub struct Loaded<T> {
    pub value: T,
    /// `None` when the defaults apply.
    pub times: Option<(i64, i64)>,
}

pub async fn load<T: Setting>(c: &mut Conn, owner_id: &str) -> Result<Loaded<T>> {
    let row: Option<(String, i64, i64)> =
        sqlx::query_as("SELECT body, created_at, changed_at FROM setting WHERE owner_id = $1 AND kind = $2")
            .bind(owner_id)
            .bind(T::KIND)
            .fetch_optional(&mut *c)
            .await?;
    Ok(match row {
        Some((body, created, changed)) => {
            Loaded { value: from_json(&format!("setting {}", T::KIND), &body)?, times: Some((created, changed)) }
        }
        None => Loaded { value: T::default(), times: None },
    })
}

/// [`load`] inside a write transaction, holding the setting until the transaction ends: on
/// SQLite the transaction's write lock does (`BEGIN IMMEDIATE`, [`super::Db::begin`]); on
/// PostgreSQL the row's lock (`FOR UPDATE`), with the defaults stored first when the setting was
/// never set, so that there is a row to lock. Two partial updates at once then run one after
/// the other, the second reading what the first wrote, instead of one undoing the other. The
/// row stored for the lock is the defaults and goes with a rollback.
pub async fn load_locked<T: Setting>(tx: &mut Conn, owner_id: &str, now: i64) -> Result<Loaded<T>> {
    if tx.backend_name() != "PostgreSQL" {
        return load(tx, owner_id).await;
    }
    sqlx::query(
        "INSERT INTO setting (owner_id, kind, body, created_at, changed_at) VALUES ($1, $2, $3, $4, $4) \
         ON CONFLICT (owner_id, kind) DO NOTHING",
    )
    .bind(owner_id)
    .bind(T::KIND)
    .bind(to_json(&T::default()))
    .bind(now)
    .execute(&mut *tx)
    .await?;
    let (body, created, changed): (String, i64, i64) =
        sqlx::query_as("SELECT body, created_at, changed_at FROM setting WHERE owner_id = $1 AND kind = $2 FOR UPDATE")
            .bind(owner_id)
            .bind(T::KIND)
            .fetch_one(&mut *tx)
            .await?;
    Ok(Loaded { value: from_json(&format!("setting {}", T::KIND), &body)?, times: Some((created, changed)) })
}

/// The setting in force for organization `org_id`: its own when it has one, else the
/// instance's (`org_id` empty: the instance's).
pub async fn effective<T: Setting>(c: &mut Conn, org_id: &str) -> Result<T> {
    let own = load::<T>(c, org_id).await?;
    if own.times.is_some() || org_id.is_empty() {
        return Ok(own.value);
    }
    Ok(load::<T>(c, INSTANCE).await?.value)
}

/// [`load`] of a setting that was set, inside a write transaction that holds it until the
/// transaction ends (PostgreSQL: `FOR UPDATE`; SQLite's write transaction holds the database);
/// `None` when it was never set (nothing is stored meanwhile, unlike [`load_locked`]).
pub async fn load_set_locked<T: Setting>(tx: &mut Conn, owner_id: &str) -> Result<Option<T>> {
    let lock = if tx.backend_name() == "PostgreSQL" { " FOR UPDATE" } else { "" };
    let row: Option<(String,)> =
        sqlx::query_as(&format!("SELECT body FROM setting WHERE owner_id = $1 AND kind = $2{lock}"))
            .bind(owner_id)
            .bind(T::KIND)
            .fetch_optional(&mut *tx)
            .await?;
    row.map(|(body,)| from_json(&format!("setting {}", T::KIND), &body)).transpose()
}

/// Stores a setting that was never set; false when it was (the stored one stays).
pub async fn add<T: Setting>(c: &mut Conn, owner_id: &str, value: &T, now: i64) -> Result<bool> {
    let r = sqlx::query(
        "INSERT INTO setting (owner_id, kind, body, created_at, changed_at) VALUES ($1, $2, $3, $4, $4) \
         ON CONFLICT (owner_id, kind) DO NOTHING",
    )
    .bind(owner_id)
    .bind(T::KIND)
    .bind(to_json(value))
    .bind(now)
    .execute(&mut *c)
    .await?;
    Ok(r.rows_affected() == 1)
}

pub async fn save<T: Setting>(c: &mut Conn, owner_id: &str, value: &T, now: i64) -> Result<()> {
    sqlx::query(
        "INSERT INTO setting (owner_id, kind, body, created_at, changed_at) VALUES ($1, $2, $3, $4, $4) \
         ON CONFLICT (owner_id, kind) DO UPDATE SET body = $3, changed_at = $4",
    )
    .bind(owner_id)
    .bind(T::KIND)
    .bind(to_json(value))
    .bind(now)
    .execute(&mut *c)
    .await?;
    Ok(())
}

pub async fn reset<T: Setting>(c: &mut Conn, owner_id: &str) -> Result<bool> {
    let r = sqlx::query("DELETE FROM setting WHERE owner_id = $1 AND kind = $2")
        .bind(owner_id)
        .bind(T::KIND)
        .execute(&mut *c)
        .await?;
    Ok(r.rows_affected() == 1)
}
