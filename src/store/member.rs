//! Administrative memberships: instance (`iam`), organization (`org`) and project members.

use sqlx::FromRow;

use super::{Conn, Result, from_json, to_json};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Iam,
    Org,
    Project,
}

impl Scope {
    fn as_str(self) -> &'static str {
        match self {
            Scope::Iam => "iam",
            Scope::Org => "org",
            Scope::Project => "project",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Member {
    pub scope_id: String,
    pub user_id: String,
    pub roles: Vec<String>,
    pub created_at: i64,
    pub changed_at: i64,
}

#[derive(FromRow)]
struct Row {
    scope_id: String,
    user_id: String,
    roles: String,
    created_at: i64,
    changed_at: i64,
}

impl TryFrom<Row> for Member {
    type Error = super::StoreError;
    fn try_from(r: Row) -> Result<Self> {
        Ok(Member {
            roles: from_json("member.roles", &r.roles)?,
            scope_id: r.scope_id,
            user_id: r.user_id,
            created_at: r.created_at,
            changed_at: r.changed_at,
        })
    }
}

/// Adds a new member: [`StoreError::Conflict`](super::StoreError::Conflict) when it is one
/// already (two concurrent adds: the second is refused, not merged), `Gone` when the user was
/// deleted meanwhile.
pub async fn insert(
    c: &mut Conn,
    scope: Scope,
    scope_id: &str,
    user_id: &str,
    roles: &[String],
    now: i64,
) -> Result<()> {
    write(c, scope, scope_id, user_id, roles, now, "").await
}

/// Adds the member, or replaces its roles.
pub async fn upsert(
    c: &mut Conn,
    scope: Scope,
    scope_id: &str,
    user_id: &str,
    roles: &[String],
    now: i64,
) -> Result<()> {
    let replace = "ON CONFLICT (member_kind, scope_id, user_id) DO UPDATE SET roles = $4, changed_at = $5";
    write(c, scope, scope_id, user_id, roles, now, replace).await
}

async fn write(
    c: &mut Conn,
    scope: Scope,
    scope_id: &str,
    user_id: &str,
    roles: &[String],
    now: i64,
    on_conflict: &str,
) -> Result<()> {
    sqlx::query(&format!(
        "INSERT INTO member (member_kind, scope_id, user_id, roles, created_at, changed_at) \
         VALUES ($1, $2, $3, $4, $5, $5) {on_conflict}"
    ))
    .bind(scope.as_str())
    .bind(scope_id)
    .bind(user_id)
    .bind(to_json(&roles))
    .bind(now)
    .execute(&mut *c)
    .await?;
    Ok(())
}

/// Replaces the roles of an existing member; false when there is none (removed meanwhile: an
/// upsert would bring it back with the new roles).
pub async fn set_roles(
    c: &mut Conn,
    scope: Scope,
    scope_id: &str,
    user_id: &str,
    roles: &[String],
    now: i64,
) -> Result<bool> {
    let r = sqlx::query(
        "UPDATE member SET roles = $4, changed_at = $5 WHERE member_kind = $1 AND scope_id = $2 AND user_id = $3",
    )
    .bind(scope.as_str())
    .bind(scope_id)
    .bind(user_id)
    .bind(to_json(&roles))
    .bind(now)
    .execute(&mut *c)
    .await?;
    Ok(r.rows_affected() == 1)
}

pub async fn get(c: &mut Conn, scope: Scope, scope_id: &str, user_id: &str) -> Result<Option<Member>> {
    let row: Option<Row> = sqlx::query_as(
        "SELECT scope_id, user_id, roles, created_at, changed_at FROM member \
         WHERE member_kind = $1 AND scope_id = $2 AND user_id = $3",
    )
    .bind(scope.as_str())
    .bind(scope_id)
    .bind(user_id)
    .fetch_optional(&mut *c)
    .await?;
    row.map(Member::try_from).transpose()
}

pub async fn list(c: &mut Conn, scope: Scope, scope_id: &str) -> Result<Vec<Member>> {
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT scope_id, user_id, roles, created_at, changed_at FROM member \
         WHERE member_kind = $1 AND scope_id = $2 ORDER BY created_at, user_id",
    )
    .bind(scope.as_str())
    .bind(scope_id)
    .fetch_all(&mut *c)
    .await?;
    rows.into_iter().map(Member::try_from).collect()
}

pub async fn remove(c: &mut Conn, scope: Scope, scope_id: &str, user_id: &str) -> Result<bool> {
    let r = sqlx::query("DELETE FROM member WHERE member_kind = $1 AND scope_id = $2 AND user_id = $3")
        .bind(scope.as_str())
        .bind(scope_id)
        .bind(user_id)
        .execute(&mut *c)
        .await?;
    Ok(r.rows_affected() == 1)
}

/// Which administrative memberships a user holds anywhere: of the instance, of any organization
/// (members need not belong to the organization) and of any project.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    pub iam: bool,
    /// Of an organization or a project, whichever.
    pub other: bool,
}

impl Held {
    /// From the member kinds held.
    fn of(kinds: &[String]) -> Self {
        Held { iam: kinds.iter().any(|k| k == "iam"), other: kinds.iter().any(|k| k != "iam") }
    }

    pub fn any(self) -> bool {
        self.iam || self.other
    }
}

pub async fn held(c: &mut Conn, user_id: &str) -> Result<Held> {
    let kinds: Vec<String> = sqlx::query_scalar("SELECT DISTINCT member_kind FROM member WHERE user_id = $1")
        .bind(user_id)
        .fetch_all(&mut *c)
        .await?;
    Ok(Held::of(&kinds))
}

/// The memberships held by any user of organization `org_id`.
pub async fn held_in_org(c: &mut Conn, org_id: &str) -> Result<Held> {
    let kinds: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT m.member_kind FROM member m JOIN account a ON a.user_id = m.user_id WHERE a.org_id = $1",
    )
    .bind(org_id)
    .fetch_all(&mut *c)
    .await?;
    Ok(Held::of(&kinds))
}

/// The instance's owners who can act, with their organizations (members holding `IAM_OWNER`
/// whose account is active in an organization that is not deactivated: a locked or deactivated
/// owner cannot sign in or use its tokens). On PostgreSQL the owners' member, account and
/// organization rows stay locked until the transaction ends (SQLite's write transaction holds
/// the whole database), so that two changes at once cannot each leave the other's owner as the
/// last: the second waits, and then reads the rows the first changed (a state set meanwhile
/// drops its owner from the list). The lock is FOR NO KEY UPDATE: it still waits for and holds
/// off every update and delete of those rows, but not the key-share locks of inserts that refer
/// to them (an owner's new session, a user registering into the owner's organization), which
/// would otherwise wait for the administrator's transaction or deadlock with it.
pub async fn iam_owners_locked(c: &mut Conn) -> Result<Vec<(String, String)>> {
    let lock = if c.backend_name() == "PostgreSQL" { " FOR NO KEY UPDATE OF m, a, o" } else { "" };
    let rows: Vec<(String, String, String)> = sqlx::query_as(&format!(
        "SELECT m.user_id, a.org_id, m.roles FROM member m JOIN account a ON a.user_id = m.user_id \
         JOIN org o ON o.org_id = a.org_id \
         WHERE m.member_kind = 'iam' AND m.scope_id = '' AND a.state = $1 AND o.state <> $2{lock}"
    ))
    .bind(crate::domain::enums::UserState::Active.number())
    .bind(crate::domain::enums::OrgState::Inactive.number())
    .fetch_all(&mut *c)
    .await?;
    let mut owners = Vec::new();
    for (user_id, org_id, roles) in rows {
        let roles: Vec<String> = from_json("member.roles", &roles)?;
        if roles.iter().any(|r| r == "IAM_OWNER") {
            owners.push((user_id, org_id));
        }
    }
    Ok(owners)
}

/// The instance roles of a user and its roles in one organization, in one round trip.
pub async fn roles_of(c: &mut Conn, user_id: &str, org_id: &str) -> Result<(Vec<String>, Vec<String>)> {
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT member_kind, roles FROM member WHERE user_id = $1 AND \
         ((member_kind = 'iam' AND scope_id = '') OR (member_kind = 'org' AND scope_id = $2))",
    )
    .bind(user_id)
    .bind(org_id)
    .fetch_all(&mut *c)
    .await?;
    let mut iam = Vec::new();
    let mut org = Vec::new();
    for (kind, roles) in rows {
        let roles: Vec<String> = from_json("member.roles", &roles)?;
        if kind == "iam" { iam.extend(roles) } else { org.extend(roles) }
    }
    Ok((iam, org))
}
