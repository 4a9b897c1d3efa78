//! Projects, their roles, and user grants (a user's roles in a project).

use sqlx::FromRow;

use super::query::{Builder, Page};
use super::{Conn, Result, flag, fold, from_json, to_json};
use crate::domain::enums::{PrivateLabelingSetting, ProjectState, TextQueryMethod, UserGrantState};

#[derive(Debug, Clone)]
pub struct Project {
    pub project_id: String,
    pub org_id: String,
    pub name: String,
    pub state: ProjectState,
    pub role_assertion: bool,
    pub role_check: bool,
    pub has_project_check: bool,
    pub private_labeling: PrivateLabelingSetting,
    pub created_at: i64,
    pub changed_at: i64,
}

#[derive(FromRow)]
struct ProjectRow {
    project_id: String,
    org_id: String,
    name: String,
    state: i64,
    role_assertion: i64,
    role_check: i64,
    has_project_check: i64,
    private_labeling: i64,
    created_at: i64,
    changed_at: i64,
}

impl From<ProjectRow> for Project {
    fn from(r: ProjectRow) -> Self {
        Project {
            project_id: r.project_id,
            org_id: r.org_id,
            name: r.name,
            state: ProjectState::from_number(r.state).unwrap_or_default(),
            role_assertion: r.role_assertion != 0,
            role_check: r.role_check != 0,
            has_project_check: r.has_project_check != 0,
            private_labeling: PrivateLabelingSetting::from_number(r.private_labeling).unwrap_or_default(),
            created_at: r.created_at,
            changed_at: r.changed_at,
        }
    }
}

const SELECT: &str = "SELECT project_id, org_id, name, state, role_assertion, role_check, has_project_check, \
     private_labeling, created_at, changed_at FROM project";

pub async fn insert(c: &mut Conn, p: &Project) -> Result<()> {
    sqlx::query(
        "INSERT INTO project (project_id, org_id, name, name_key, state, role_assertion, role_check, \
         has_project_check, private_labeling, created_at, changed_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)",
    )
    .bind(&p.project_id)
    .bind(&p.org_id)
    .bind(&p.name)
    .bind(fold(&p.name))
    .bind(p.state.number())
    .bind(flag(p.role_assertion))
    .bind(flag(p.role_check))
    .bind(flag(p.has_project_check))
    .bind(p.private_labeling.number())
    .bind(p.created_at)
    .execute(&mut *c)
    .await?;
    Ok(())
}

pub async fn get(c: &mut Conn, project_id: &str) -> Result<Option<Project>> {
    let row: Option<ProjectRow> =
        sqlx::query_as(&format!("{SELECT} WHERE project_id = $1")).bind(project_id).fetch_optional(&mut *c).await?;
    Ok(row.map(Project::from))
}

pub async fn name_taken(c: &mut Conn, org_id: &str, name: &str) -> Result<bool> {
    let row: Option<(String,)> = sqlx::query_as("SELECT project_id FROM project WHERE org_id = $1 AND name_key = $2")
        .bind(org_id)
        .bind(fold(name))
        .fetch_optional(&mut *c)
        .await?;
    Ok(row.is_some())
}

pub async fn update(c: &mut Conn, p: &Project, now: i64) -> Result<bool> {
    let r = sqlx::query(
        "UPDATE project SET name = $1, name_key = $2, role_assertion = $3, role_check = $4, \
         has_project_check = $5, private_labeling = $6, changed_at = $7 WHERE project_id = $8",
    )
    .bind(&p.name)
    .bind(fold(&p.name))
    .bind(flag(p.role_assertion))
    .bind(flag(p.role_check))
    .bind(flag(p.has_project_check))
    .bind(p.private_labeling.number())
    .bind(now)
    .bind(&p.project_id)
    .execute(&mut *c)
    .await?;
    Ok(r.rows_affected() == 1)
}

/// Moves a project from state `from` to `to`; false when it was not in `from`.
pub async fn set_state(c: &mut Conn, project_id: &str, from: ProjectState, to: ProjectState, now: i64) -> Result<bool> {
    let r = sqlx::query("UPDATE project SET state = $1, changed_at = $2 WHERE project_id = $3 AND state = $4")
        .bind(to.number())
        .bind(now)
        .bind(project_id)
        .bind(from.number())
        .execute(&mut *c)
        .await?;
    Ok(r.rows_affected() == 1)
}

/// Deletes a project with its roles, grants, applications (and what the protocol keeps for
/// them) and the memberships held in it.
pub async fn delete(c: &mut Conn, project_id: &str) -> Result<bool> {
    super::app::forget_clients(c, "SELECT client_id FROM app WHERE project_id = $1", project_id).await?;
    sqlx::query("DELETE FROM member WHERE member_kind = 'project' AND scope_id = $1")
        .bind(project_id)
        .execute(&mut *c)
        .await?;
    let r = sqlx::query("DELETE FROM project WHERE project_id = $1").bind(project_id).execute(&mut *c).await?;
    Ok(r.rows_affected() == 1)
}

pub async fn search(
    c: &mut Conn,
    org_id: &str,
    name: Option<(&str, TextQueryMethod)>,
    page: Page,
) -> Result<(Vec<Project>, i64)> {
    let mut filter = Builder::new(" WHERE org_id = ");
    filter.text(org_id);
    if let Some((v, m)) = name {
        filter.push(" AND ");
        filter.text_match("name", v, m);
    }
    let (where_sql, args) = filter.into_parts();
    let total =
        Builder::with_args(&format!("SELECT COUNT(*) FROM project{where_sql}"), args.clone()).fetch_count(c).await?;
    let mut list = Builder::with_args(&format!("{SELECT}{where_sql}"), args);
    list.page("project_id", page);
    let rows: Vec<ProjectRow> = list.fetch_all(c).await?;
    Ok((rows.into_iter().map(Project::from).collect(), total))
}

#[derive(Debug, Clone, FromRow)]
pub struct ProjectRole {
    pub project_id: String,
    pub role_key: String,
    pub display_name: String,
    pub role_group: String,
    pub created_at: i64,
    pub changed_at: i64,
}

pub async fn insert_role(c: &mut Conn, r: &ProjectRole) -> Result<()> {
    sqlx::query(
        "INSERT INTO project_role (project_id, role_key, display_name, role_group, created_at, changed_at) \
         VALUES ($1, $2, $3, $4, $5, $5)",
    )
    .bind(&r.project_id)
    .bind(&r.role_key)
    .bind(&r.display_name)
    .bind(&r.role_group)
    .bind(r.created_at)
    .execute(&mut *c)
    .await?;
    Ok(())
}

/// Replaces a role's display name and group; false when the project has no such role.
pub async fn update_role(
    c: &mut Conn,
    project_id: &str,
    role_key: &str,
    display_name: &str,
    group: &str,
    now: i64,
) -> Result<bool> {
    let r = sqlx::query(
        "UPDATE project_role SET display_name = $1, role_group = $2, changed_at = $3 \
         WHERE project_id = $4 AND role_key = $5",
    )
    .bind(display_name)
    .bind(group)
    .bind(now)
    .bind(project_id)
    .bind(role_key)
    .execute(&mut *c)
    .await?;
    Ok(r.rows_affected() == 1)
}

/// Holds the project's row until the transaction ends (on PostgreSQL; SQLite's write
/// transaction holds the whole store): what changes its roles and what checks a grant's roles
/// against them take turns, so a role removed meanwhile is neither kept in nor put back into a
/// grant (at READ COMMITTED each would otherwise write what it read before the other's commit).
pub async fn lock(c: &mut Conn, project_id: &str) -> Result<()> {
    if c.backend_name() == "PostgreSQL" {
        sqlx::query("SELECT project_id FROM project WHERE project_id = $1 FOR UPDATE")
            .bind(project_id)
            .fetch_optional(&mut *c)
            .await?;
    }
    Ok(())
}

/// Removes a role and takes it out of every user grant on the project (as ZITADEL does); false
/// when the project has no such role. Run it in a transaction.
pub async fn delete_role(c: &mut Conn, project_id: &str, role_key: &str, now: i64) -> Result<bool> {
    lock(c, project_id).await?;
    let r = sqlx::query("DELETE FROM project_role WHERE project_id = $1 AND role_key = $2")
        .bind(project_id)
        .bind(role_key)
        .execute(&mut *c)
        .await?;
    if r.rows_affected() != 1 {
        return Ok(false);
    }
    let grants: Vec<(String, String)> =
        sqlx::query_as("SELECT user_grant_id, role_keys FROM user_grant WHERE project_id = $1")
            .bind(project_id)
            .fetch_all(&mut *c)
            .await?;
    for (id, keys) in grants {
        let keys: Vec<String> = from_json("user_grant.role_keys", &keys)?;
        if keys.iter().any(|k| k == role_key) {
            let kept: Vec<String> = keys.into_iter().filter(|k| k != role_key).collect();
            update_grant_roles(c, &id, &kept, now).await?;
        }
    }
    Ok(true)
}

pub async fn roles(c: &mut Conn, project_id: &str) -> Result<Vec<ProjectRole>> {
    Ok(sqlx::query_as(
        "SELECT project_id, role_key, display_name, role_group, created_at, changed_at FROM project_role \
         WHERE project_id = $1 ORDER BY role_key",
    )
    .bind(project_id)
    .fetch_all(&mut *c)
    .await?)
}

#[derive(Debug, Clone)]
pub struct UserGrant {
    pub user_grant_id: String,
    pub user_id: String,
    pub project_id: String,
    pub org_id: String,
    pub role_keys: Vec<String>,
    pub state: UserGrantState,
    pub created_at: i64,
    pub changed_at: i64,
}

#[derive(FromRow)]
struct GrantRow {
    user_grant_id: String,
    user_id: String,
    project_id: String,
    org_id: String,
    role_keys: String,
    state: i64,
    created_at: i64,
    changed_at: i64,
}

impl TryFrom<GrantRow> for UserGrant {
    type Error = super::StoreError;
    fn try_from(r: GrantRow) -> Result<Self> {
        Ok(UserGrant {
            role_keys: from_json("user_grant.role_keys", &r.role_keys)?,
            user_grant_id: r.user_grant_id,
            user_id: r.user_id,
            project_id: r.project_id,
            org_id: r.org_id,
            state: UserGrantState::from_number(r.state).unwrap_or_default(),
            created_at: r.created_at,
            changed_at: r.changed_at,
        })
    }
}

pub async fn insert_grant(c: &mut Conn, g: &UserGrant) -> Result<()> {
    sqlx::query(
        "INSERT INTO user_grant (user_grant_id, user_id, project_id, org_id, role_keys, state, created_at, changed_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $7)",
    )
    .bind(&g.user_grant_id)
    .bind(&g.user_id)
    .bind(&g.project_id)
    .bind(&g.org_id)
    .bind(to_json(&g.role_keys))
    .bind(g.state.number())
    .bind(g.created_at)
    .execute(&mut *c)
    .await?;
    Ok(())
}

/// Inserts many grants with one statement per two hundred (imports).
pub async fn insert_grants(c: &mut Conn, grants: &[UserGrant]) -> Result<()> {
    use super::query::Arg;
    let rows = grants
        .iter()
        .map(|g| {
            vec![
                Arg::Text(g.user_grant_id.clone()),
                Arg::Text(g.user_id.clone()),
                Arg::Text(g.project_id.clone()),
                Arg::Text(g.org_id.clone()),
                Arg::Text(to_json(&g.role_keys)),
                Arg::Int(g.state.number()),
                Arg::Int(g.created_at),
                Arg::Int(g.changed_at),
            ]
        })
        .collect();
    super::query::insert_rows(
        c,
        "INSERT INTO user_grant (user_grant_id, user_id, project_id, org_id, role_keys, state, created_at, changed_at) \
         VALUES",
        rows,
        200,
    )
    .await
}

/// A grant with what the grant list shows of its user, project and organization.
#[derive(Debug, Clone, FromRow)]
pub struct GrantListed {
    pub user_grant_id: String,
    pub user_id: String,
    pub project_id: String,
    pub org_id: String,
    pub role_keys: String,
    pub state: i64,
    pub created_at: i64,
    pub changed_at: i64,
    pub username: String,
    pub first_name: String,
    pub last_name: String,
    pub email: String,
    pub display_name: String,
    pub user_type: i64,
    /// The primary domain of the user's organization ('' when it has none).
    pub user_domain: String,
    pub project_name: String,
    pub org_name: String,
    /// The primary domain of the organization that gave the grant.
    pub org_domain: String,
}

/// The grants with their users, projects and organizations (`GrantListed`), to be filtered.
const GRANTS_LISTED: &str = "SELECT g.user_grant_id, g.user_id, g.project_id, g.org_id, g.role_keys, g.state, \
        g.created_at, g.changed_at, a.username, a.first_name, a.last_name, a.email, a.display_name, a.user_type, \
        COALESCE(ud.domain, '') AS user_domain, p.name AS project_name, o.name AS org_name, \
        COALESCE(od.domain, '') AS org_domain \
     FROM user_grant g \
     JOIN account a ON a.user_id = g.user_id \
     JOIN project p ON p.project_id = g.project_id \
     JOIN org o ON o.org_id = g.org_id \
     LEFT JOIN org_domain ud ON ud.org_id = a.org_id AND ud.is_primary = 1 \
     LEFT JOIN org_domain od ON od.org_id = g.org_id AND od.is_primary = 1";

/// Every grant organization `org_id` gave, oldest first, with their users, projects and the
/// organization (one statement).
pub async fn grants_listed(c: &mut Conn, org_id: &str) -> Result<Vec<GrantListed>> {
    Ok(sqlx::query_as(&format!("{GRANTS_LISTED} WHERE g.org_id = $1 ORDER BY g.created_at, g.user_grant_id"))
        .bind(org_id)
        .fetch_all(&mut *c)
        .await?)
}

/// The grant `grant_id` of user `user_id` that organization `org_id` gave, as listed.
pub async fn grant_listed(c: &mut Conn, org_id: &str, user_id: &str, grant_id: &str) -> Result<Option<GrantListed>> {
    Ok(sqlx::query_as(&format!("{GRANTS_LISTED} WHERE g.org_id = $1 AND g.user_id = $2 AND g.user_grant_id = $3"))
        .bind(org_id)
        .bind(user_id)
        .bind(grant_id)
        .fetch_optional(&mut *c)
        .await?)
}

/// The grant `grant_id` of user `user_id`.
pub async fn get_grant(c: &mut Conn, user_id: &str, grant_id: &str) -> Result<Option<UserGrant>> {
    let row: Option<GrantRow> = sqlx::query_as(
        "SELECT user_grant_id, user_id, project_id, org_id, role_keys, state, created_at, changed_at \
         FROM user_grant WHERE user_grant_id = $1 AND user_id = $2",
    )
    .bind(grant_id)
    .bind(user_id)
    .fetch_optional(&mut *c)
    .await?;
    row.map(UserGrant::try_from).transpose()
}

/// Replaces a grant's roles; false when it is gone.
pub async fn update_grant_roles(c: &mut Conn, grant_id: &str, role_keys: &[String], now: i64) -> Result<bool> {
    let done = sqlx::query("UPDATE user_grant SET role_keys = $1, changed_at = $2 WHERE user_grant_id = $3")
        .bind(to_json(&role_keys))
        .bind(now)
        .bind(grant_id)
        .execute(&mut *c)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Deletes a grant; false when it is gone.
pub async fn delete_grant(c: &mut Conn, grant_id: &str) -> Result<bool> {
    let done = sqlx::query("DELETE FROM user_grant WHERE user_grant_id = $1").bind(grant_id).execute(&mut *c).await?;
    Ok(done.rows_affected() == 1)
}

pub async fn grants_of_user(c: &mut Conn, user_id: &str) -> Result<Vec<UserGrant>> {
    let rows: Vec<GrantRow> = sqlx::query_as(
        "SELECT user_grant_id, user_id, project_id, org_id, role_keys, state, created_at, changed_at \
         FROM user_grant WHERE user_id = $1 ORDER BY user_grant_id",
    )
    .bind(user_id)
    .fetch_all(&mut *c)
    .await?;
    rows.into_iter().map(UserGrant::try_from).collect()
}

/// The active grants of a user on a project, with the primary domain of each grant's
/// organization (for role claims).
pub async fn grant_roles(c: &mut Conn, user_id: &str, project_id: &str) -> Result<Vec<(Vec<String>, String, String)>> {
    let rows: Vec<(String, String, Option<String>)> = sqlx::query_as(
        "SELECT g.role_keys, g.org_id, d.domain FROM user_grant g \
         LEFT JOIN org_domain d ON d.org_id = g.org_id AND d.is_primary = 1 \
         WHERE g.user_id = $1 AND g.project_id = $2 AND g.state = 1",
    )
    .bind(user_id)
    .bind(project_id)
    .fetch_all(&mut *c)
    .await?;
    rows.into_iter()
        .map(|(keys, org, domain)| Ok((from_json("user_grant.role_keys", &keys)?, org, domain.unwrap_or_default())))
        .collect()
}

pub async fn list_by_org(c: &mut Conn, org_id: &str) -> Result<Vec<Project>> {
    let rows: Vec<ProjectRow> = sqlx::query_as(&format!("{SELECT} WHERE org_id = $1 ORDER BY project_id"))
        .bind(org_id)
        .fetch_all(&mut *c)
        .await?;
    Ok(rows.into_iter().map(Project::from).collect())
}

/// The roles of every project of an organization.
pub async fn roles_by_org(c: &mut Conn, org_id: &str) -> Result<Vec<ProjectRole>> {
    Ok(sqlx::query_as(
        "SELECT r.project_id, r.role_key, r.display_name, r.role_group, r.created_at, r.changed_at FROM project_role r \
         JOIN project p ON p.project_id = r.project_id WHERE p.org_id = $1 ORDER BY r.project_id, r.role_key",
    )
    .bind(org_id)
    .fetch_all(&mut *c)
    .await?)
}

/// The user grants on the projects of an organization.
pub async fn grants_by_org(c: &mut Conn, org_id: &str) -> Result<Vec<UserGrant>> {
    let rows: Vec<GrantRow> = sqlx::query_as(
        "SELECT user_grant_id, user_id, project_id, org_id, role_keys, state, created_at, changed_at \
         FROM user_grant WHERE org_id = $1 ORDER BY user_grant_id",
    )
    .bind(org_id)
    .fetch_all(&mut *c)
    .await?;
    rows.into_iter().map(UserGrant::try_from).collect()
}

/// Whether the user has an active grant on the project (the project's `projectRoleCheck`).
pub async fn has_active_grant(c: &mut Conn, user_id: &str, project_id: &str) -> Result<bool> {
    let row: Option<(String,)> = sqlx::query_as(
        "SELECT user_grant_id FROM user_grant WHERE user_id = $1 AND project_id = $2 AND state = 1 LIMIT 1",
    )
    .bind(user_id)
    .bind(project_id)
    .fetch_optional(&mut *c)
    .await?;
    Ok(row.is_some())
}

pub async fn grant_exists(c: &mut Conn, user_id: &str, project_id: &str) -> Result<bool> {
    let row: Option<(String,)> =
        sqlx::query_as("SELECT user_grant_id FROM user_grant WHERE user_id = $1 AND project_id = $2")
            .bind(user_id)
            .bind(project_id)
            .fetch_optional(&mut *c)
            .await?;
    Ok(row.is_some())
}
