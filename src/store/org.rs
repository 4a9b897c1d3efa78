//! Organizations and their domains.

use sqlx::FromRow;

use super::query::{Builder, Page};
use super::{Conn, Result, flag, fold};
use crate::domain::enums::{DomainValidationType, OrgState, TextQueryMethod};

#[derive(Debug, Clone)]
pub struct Org {
    pub org_id: String,
    pub name: String,
    pub state: OrgState,
    pub primary_domain: String,
    pub created_at: i64,
    pub changed_at: i64,
}

#[derive(FromRow)]
struct OrgRow {
    org_id: String,
    name: String,
    state: i64,
    primary_domain: Option<String>,
    created_at: i64,
    changed_at: i64,
}

impl From<OrgRow> for Org {
    fn from(r: OrgRow) -> Self {
        Org {
            org_id: r.org_id,
            name: r.name,
            state: OrgState::from_number(r.state).unwrap_or_default(),
            primary_domain: r.primary_domain.unwrap_or_default(),
            created_at: r.created_at,
            changed_at: r.changed_at,
        }
    }
}

#[derive(Debug, Clone, FromRow)]
pub struct OrgDomainRow {
    pub domain: String,
    pub org_id: String,
    pub is_verified: i64,
    pub is_primary: i64,
    pub validation_type: i64,
    pub created_at: i64,
}

#[derive(Debug, Clone)]
pub struct OrgDomain {
    pub domain: String,
    pub org_id: String,
    pub is_verified: bool,
    pub is_primary: bool,
    pub validation_type: DomainValidationType,
    pub created_at: i64,
}

impl From<OrgDomainRow> for OrgDomain {
    fn from(r: OrgDomainRow) -> Self {
        OrgDomain {
            domain: r.domain,
            org_id: r.org_id,
            is_verified: r.is_verified != 0,
            is_primary: r.is_primary != 0,
            validation_type: DomainValidationType::from_number(r.validation_type).unwrap_or_default(),
            created_at: r.created_at,
        }
    }
}

const SELECT: &str = "SELECT o.org_id, o.name, o.state, d.domain AS primary_domain, o.created_at, o.changed_at \
     FROM org o LEFT JOIN org_domain d ON d.org_id = o.org_id AND d.is_primary = 1";

pub async fn insert(c: &mut Conn, org_id: &str, name: &str, state: OrgState, now: i64) -> Result<()> {
    sqlx::query(
        "INSERT INTO org (org_id, name, name_key, state, created_at, changed_at) VALUES ($1, $2, $3, $4, $5, $5)",
    )
    .bind(org_id)
    .bind(name)
    .bind(fold(name))
    .bind(state.number())
    .bind(now)
    .execute(&mut *c)
    .await?;
    Ok(())
}

pub async fn get(c: &mut Conn, org_id: &str) -> Result<Option<Org>> {
    let row: Option<OrgRow> =
        sqlx::query_as(&format!("{SELECT} WHERE o.org_id = $1")).bind(org_id).fetch_optional(&mut *c).await?;
    Ok(row.map(Org::from))
}

pub async fn name_taken(c: &mut Conn, name: &str) -> Result<bool> {
    let row: Option<(String,)> =
        sqlx::query_as("SELECT org_id FROM org WHERE name_key = $1").bind(fold(name)).fetch_optional(&mut *c).await?;
    Ok(row.is_some())
}

pub async fn rename(c: &mut Conn, org_id: &str, name: &str, now: i64) -> Result<bool> {
    let r = sqlx::query("UPDATE org SET name = $1, name_key = $2, changed_at = $3 WHERE org_id = $4")
        .bind(name)
        .bind(fold(name))
        .bind(now)
        .bind(org_id)
        .execute(&mut *c)
        .await?;
    Ok(r.rows_affected() == 1)
}

pub async fn insert_domain(c: &mut Conn, d: &OrgDomain) -> Result<()> {
    sqlx::query(
        "INSERT INTO org_domain (domain, org_id, is_verified, is_primary, validation_type, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(&d.domain)
    .bind(&d.org_id)
    .bind(flag(d.is_verified))
    .bind(flag(d.is_primary))
    .bind(d.validation_type.number())
    .bind(d.created_at)
    .execute(&mut *c)
    .await?;
    Ok(())
}

/// Every domain of the instance with its organization (for an import's checks).
pub async fn all_domains(c: &mut Conn) -> Result<Vec<(String, String)>> {
    Ok(sqlx::query_as("SELECT domain, org_id FROM org_domain").fetch_all(&mut *c).await?)
}

pub async fn get_domain(c: &mut Conn, domain: &str) -> Result<Option<OrgDomain>> {
    let row: Option<OrgDomainRow> = sqlx::query_as(
        "SELECT domain, org_id, is_verified, is_primary, validation_type, created_at FROM org_domain WHERE domain = $1",
    )
    .bind(domain)
    .fetch_optional(&mut *c)
    .await?;
    Ok(row.map(OrgDomain::from))
}

pub async fn domains(c: &mut Conn, org_id: &str) -> Result<Vec<OrgDomain>> {
    let rows: Vec<OrgDomainRow> = sqlx::query_as(
        "SELECT domain, org_id, is_verified, is_primary, validation_type, created_at FROM org_domain \
         WHERE org_id = $1 ORDER BY domain",
    )
    .bind(org_id)
    .fetch_all(&mut *c)
    .await?;
    Ok(rows.into_iter().map(OrgDomain::from).collect())
}

/// Makes `domain` the primary domain of `org_id` (call inside a transaction). The organization's
/// row is written first: on PostgreSQL its lock makes a concurrent change of the primary domain
/// wait until this one commits, and then see it (else both could unset the old primary only and
/// the second set would break the one-primary index: a 409 for a valid request).
/// False when the domain is gone (removed meanwhile): the caller rolls back.
pub async fn set_primary_domain(c: &mut Conn, org_id: &str, domain: &str, now: i64) -> Result<bool> {
    sqlx::query("UPDATE org SET changed_at = $1 WHERE org_id = $2").bind(now).bind(org_id).execute(&mut *c).await?;
    sqlx::query("UPDATE org_domain SET is_primary = 0 WHERE org_id = $1 AND is_primary = 1")
        .bind(org_id)
        .execute(&mut *c)
        .await?;
    let r = sqlx::query("UPDATE org_domain SET is_primary = 1 WHERE org_id = $1 AND domain = $2")
        .bind(org_id)
        .bind(domain)
        .execute(&mut *c)
        .await?;
    Ok(r.rows_affected() == 1)
}

pub async fn remove_domain(c: &mut Conn, org_id: &str, domain: &str) -> Result<bool> {
    let r = sqlx::query("DELETE FROM org_domain WHERE org_id = $1 AND domain = $2 AND is_primary = 0")
        .bind(org_id)
        .bind(domain)
        .execute(&mut *c)
        .await?;
    Ok(r.rows_affected() == 1)
}

/// Filters of the organization search.
#[derive(Debug, Clone)]
pub enum OrgQuery {
    Name(String, TextQueryMethod),
    Domain(String, TextQueryMethod),
    State(OrgState),
    Id(String),
}

pub async fn search(c: &mut Conn, queries: &[OrgQuery], order_by_name: bool, page: Page) -> Result<(Vec<Org>, i64)> {
    let mut filter = Builder::new("");
    for q in queries {
        filter.push(" AND ");
        match q {
            OrgQuery::Name(v, m) => {
                filter.text_match("o.name", v, *m);
            }
            OrgQuery::Domain(v, m) => {
                filter.push("EXISTS (SELECT 1 FROM org_domain x WHERE x.org_id = o.org_id AND ");
                filter.text_match("x.domain", v, *m).push(")");
            }
            OrgQuery::State(s) => {
                filter.push("o.state = ").int(s.number());
            }
            OrgQuery::Id(id) => {
                filter.push("o.org_id = ").text(id.clone());
            }
        }
    }
    let (where_sql, args) = filter.into_parts();
    let count = Builder::with_args(&format!("SELECT COUNT(*) FROM org o WHERE 1 = 1{where_sql}"), args.clone());
    let total = count.fetch_count(c).await?;
    let mut list = Builder::with_args(&format!("{SELECT} WHERE 1 = 1{where_sql}"), args);
    list.page(if order_by_name { "o.name_key" } else { "o.org_id" }, page);
    let rows: Vec<OrgRow> = list.fetch_all(c).await?;
    Ok((rows.into_iter().map(Org::from).collect(), total))
}

/// Every organization id, oldest first.
pub async fn all_ids(c: &mut Conn) -> Result<Vec<String>> {
    let rows: Vec<(String,)> = sqlx::query_as("SELECT org_id FROM org ORDER BY org_id").fetch_all(&mut *c).await?;
    Ok(rows.into_iter().map(|r| r.0).collect())
}

pub async fn set_state(c: &mut Conn, org_id: &str, state: OrgState, now: i64) -> Result<()> {
    sqlx::query("UPDATE org SET state = $1, changed_at = $2 WHERE org_id = $3")
        .bind(state.number())
        .bind(now)
        .bind(org_id)
        .execute(&mut *c)
        .await?;
    Ok(())
}

/// Moves organization `org_id` from state `from` to `to`; false when it was not in `from`.
pub async fn change_state(c: &mut Conn, org_id: &str, from: OrgState, to: OrgState, now: i64) -> Result<bool> {
    let r = sqlx::query("UPDATE org SET state = $1, changed_at = $2 WHERE org_id = $3 AND state = $4")
        .bind(to.number())
        .bind(now)
        .bind(org_id)
        .bind(from.number())
        .execute(&mut *c)
        .await?;
    Ok(r.rows_affected() == 1)
}

/// Deletes organization `org_id` with all it holds: its domains, users (with their keys, tokens,
/// sessions, grants and memberships), projects (with their roles, applications and the grants on
/// them), its settings, and the memberships others hold in it and in its projects. The refresh
/// tokens, codes and pending sign-ins of its users and of its applications go too (they have no
/// foreign keys): were the organization imported again with the same ids, none would count.
pub async fn delete(c: &mut Conn, org_id: &str) -> Result<bool> {
    // The instance's settings have the empty owner.
    if org_id.is_empty() {
        return Ok(false);
    }
    super::app::forget_clients(c, "SELECT client_id FROM app WHERE org_id = $1", org_id).await?;
    const USERS: &str = "SELECT user_id FROM account WHERE org_id = $1";
    for table in ["refresh_token", "auth_request"] {
        sqlx::query(&format!("DELETE FROM {table} WHERE user_id IN ({USERS})")).bind(org_id).execute(&mut *c).await?;
    }
    sqlx::query(
        "DELETE FROM member WHERE (member_kind = 'org' AND scope_id = $1) OR (member_kind = 'project' \
         AND scope_id IN (SELECT project_id FROM project WHERE org_id = $1))",
    )
    .bind(org_id)
    .execute(&mut *c)
    .await?;
    sqlx::query("DELETE FROM setting WHERE owner_id = $1").bind(org_id).execute(&mut *c).await?;
    let r = sqlx::query("DELETE FROM org WHERE org_id = $1").bind(org_id).execute(&mut *c).await?;
    Ok(r.rows_affected() == 1)
}
