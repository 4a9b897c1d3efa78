//! The write step of an organization's import: the checked plan, in one transaction, or, in a
//! dry run, in a savepoint of the one transaction the whole document is written in and that is
//! rolled back at the end.

use std::sync::{Arc, Mutex};

use super::*;
use crate::store::Tx;

/// What an import has done, kept outside the import's future: when the import's deadline
/// cancels it, its handler still learns every organization committed, including one whose
/// commit had begun (a commit runs to its end in a task of its own, and [`Ledger::settle`]
/// waits for it).
#[derive(Clone, Default)]
pub struct Ledger(Arc<LedgerInner>);

#[derive(Default)]
struct LedgerInner {
    done: Mutex<Done>,
    /// Held by a commit in flight.
    commit: Arc<tokio::sync::Mutex<()>>,
}

/// The organizations an import wrote, and the users who get a message (SPEC.md 4.11).
#[derive(Default)]
pub struct Done {
    /// Committed, or, in a dry run, checked and written.
    pub orgs: Vec<String>,
    /// The users of committed organizations.
    pub notify: Vec<String>,
    /// The organization whose commit had begun and not ended when [`Ledger::settle`] stopped
    /// waiting.
    pub committing: Option<String>,
}

impl Ledger {
    fn done(&self) -> std::sync::MutexGuard<'_, Done> {
        self.0.done.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether an organization was written.
    pub fn any(&self) -> bool {
        !self.done().orgs.is_empty()
    }

    /// Waits up to `grace` for a commit in flight to end, then takes what was written so far
    /// (a commit that ends later records into an empty ledger, for the next call).
    pub async fn settle(&self, grace: std::time::Duration) -> Done {
        let _ended = tokio::time::timeout(grace, self.0.commit.lock()).await;
        std::mem::take(&mut *self.done())
    }
}

/// Where the organizations of an import are written.
pub enum Target {
    /// Each in its own transaction, committed.
    Commit(Ledger),
    /// Each in a savepoint of one transaction, begun at the first write and rolled back by
    /// [`Target::finish`]: every organization sees what the ones before it wrote, as in a real
    /// import, so the report is the same.
    DryRun(Option<Tx>, Ledger),
}

impl Target {
    /// The connection an organization's check reads what the target already has through: in a
    /// dry run, the transaction that holds what the organizations before it wrote.
    pub(super) fn reads(&mut self) -> Option<&mut Conn> {
        match self {
            Target::DryRun(Some(tx), _) => Some(&mut **tx),
            _ => None,
        }
    }

    /// Writes one organization's plan and records it in the ledger, with the users to notify
    /// once committed; `Ok(Ok(domain))` names the domain generated for a new organization that
    /// brought no primary one. `Ok(Err(e))`: refused as a whole (a conflict found on writing),
    /// nothing of it kept; `Err(e)`: an internal or unavailable store, which stops the import.
    pub(super) async fn apply(
        &mut self,
        state: &AppState,
        org_id: &str,
        plan: &Plan,
        now: i64,
        notify: Vec<String>,
    ) -> ApiResult<Result<Option<String>, ApiError>> {
        // A store that failed or is unavailable stops the import; a conflict refuses one org.
        let stops = |e: &ApiError| matches!(e.code, Code::Internal | Code::Unavailable);
        let generated = match self {
            Target::Commit(ledger) => {
                let mut tx = state.db.begin().await?;
                match write(state, &mut tx, org_id, plan, now).await {
                    Ok(generated) => {
                        // Cancelled while committing, the import would not know whether the
                        // organization is in: the commit goes on in its own task, which records it.
                        let in_flight = ledger.0.commit.clone().lock_owned().await;
                        ledger.done().committing = Some(org_id.to_string());
                        let (ledger, org_id) = (ledger.clone(), org_id.to_string());
                        let commit = tokio::spawn(async move {
                            let _in_flight = in_flight;
                            let committed = tx.commit().await;
                            let mut done = ledger.done();
                            done.committing = None;
                            if committed.is_ok() {
                                done.orgs.push(org_id);
                                done.notify.extend(notify);
                            }
                            committed
                        });
                        commit
                            .await
                            .map_err(|e| ApiError::internal(format!("an import's commit failed: {e}")))?
                            .map_err(StoreError::from)?;
                        generated
                    }
                    Err(e) if stops(&e) => return Err(e),
                    Err(e) => return Ok(Err(e)),
                }
            }
            Target::DryRun(outer, ledger) => {
                let tx = match outer {
                    Some(tx) => tx,
                    slot @ None => slot.insert(state.db.begin().await?),
                };
                tx.savepoint().await.map_err(StoreError::from)?;
                match write(state, tx, org_id, plan, now).await {
                    Ok(generated) => {
                        tx.release_savepoint().await.map_err(StoreError::from)?;
                        ledger.done().orgs.push(org_id.to_string());
                        generated
                    }
                    Err(e) if stops(&e) => return Err(e),
                    Err(e) => {
                        tx.rollback_to_savepoint().await.map_err(StoreError::from)?;
                        return Ok(Err(e));
                    }
                }
            }
        };
        Ok(Ok(generated))
    }

    /// Commits each organization, or with `dry_run` writes them all in one transaction that
    /// [`Target::finish`] rolls back; either way records them in `ledger`.
    pub fn new(dry_run: bool, ledger: Ledger) -> Self {
        if dry_run { Target::DryRun(None, ledger) } else { Target::Commit(ledger) }
    }

    pub fn is_dry_run(&self) -> bool {
        matches!(self, Target::DryRun(..))
    }

    /// Ends the import: a dry run's transaction is rolled back.
    pub async fn finish(self) -> ApiResult<()> {
        if let Target::DryRun(Some(tx), _) = self {
            tx.rollback().await.map_err(StoreError::from)?;
        }
        Ok(())
    }
}

fn conflict(what: String) -> impl FnOnce(StoreError) -> ApiError {
    move |e| match e {
        StoreError::Conflict => ApiError::exists(what),
        other => other.into(),
    }
}

/// Writes the plan (inside the organization's transaction or savepoint); answers the domain it
/// generated, if it did.
async fn write(state: &AppState, c: &mut Conn, org_id: &str, plan: &Plan, now: i64) -> ApiResult<Option<String>> {
    if let Some((name, st)) = &plan.new_org {
        if org::name_taken(c, name).await? {
            return Err(ApiError::exists(format!("another organization is named '{name}'")));
        }
        org::insert(c, org_id, name, *st, now)
            .await
            .map_err(conflict(format!("the organization id {org_id} is taken")))?;
    }
    for dm in &plan.domains {
        org::insert_domain(c, dm)
            .await
            .map_err(conflict(format!("the domain {} belongs to another organization", dm.domain)))?;
    }
    // After the listed domains, so that the generated one is none of them.
    let mut generated = None;
    if let Some((name, _)) = &plan.new_org
        && plan.generate_domain
    {
        let domain = generated_domain(state, c, org_id, name).await?;
        org::insert_domain(
            c,
            &OrgDomain {
                domain: domain.clone(),
                org_id: org_id.to_string(),
                is_verified: true,
                is_primary: true,
                validation_type: Default::default(),
                created_at: now,
            },
        )
        .await?;
        generated = Some(domain);
    }
    if let Some(p) = &plan.login {
        setting::save(c, org_id, p, now).await?;
    }
    if let Some(p) = &plan.lockout {
        setting::save(c, org_id, p, now).await?;
    }
    if let Some(p) = &plan.complexity {
        setting::save(c, org_id, p, now).await?;
    }
    for p in &plan.projects {
        project::insert(c, p).await.map_err(conflict(format!(
            "project {}: the id is taken by another organization's project, or the name by another project",
            p.project_id
        )))?;
    }
    for r in &plan.roles {
        project::insert_role(c, r).await?;
    }
    for a in &plan.apps {
        if app::name_taken(c, &a.project_id, &a.name).await? {
            return Err(ApiError::exists(format!(
                "application {}: project {} already has an application named '{}'",
                a.app_id, a.project_id, a.name
            )));
        }
        app::insert(c, a).await.map_err(conflict(format!(
            "application {}: its id or its client id {} is taken by another application",
            a.app_id, a.client_id
        )))?;
    }
    user::insert_many(c, &plan.users).await.map_err(conflict("a user id or user name is taken".to_string()))?;
    client_ids_apart(c, plan).await?;
    for (user_id, l) in &plan.links {
        user::insert_idp_link(c, user_id, l, now).await?;
    }
    project::insert_grants(c, &plan.grants).await?;
    for (user_id, roles) in &plan.org_members {
        member::upsert(c, Scope::Org, org_id, user_id, roles, now).await?;
    }
    for (project_id, user_id, roles) in &plan.project_members {
        member::upsert(c, Scope::Project, project_id, user_id, roles, now).await?;
    }
    Ok(generated)
}

/// The names tokens carry in their audience stay apart, as the management API keeps them: a
/// machine user's id and name are the client ids of its tokens (jwt-bearer, client_credentials),
/// an application's client id and its project's id are in its tokens, and a resource server
/// takes a token whose audience names its client id or its project. So no machine user's id or
/// name may be an application's client id or a project's id, in this organization or another,
/// nor the other one of another user; no application's client id a project's id; and no
/// project's id a client id or a machine user's id or name: each would make one party's tokens
/// pass for another's (another organization's, where the document chose it). Read after the
/// organization's projects, applications and users are written, so it sees both those of the
/// document and those already there.
async fn client_ids_apart(c: &mut Conn, plan: &Plan) -> ApiResult<()> {
    let machine = |u: Option<user::User>| u.is_some_and(|u| matches!(u.kind, Kind::Machine(_)));
    for p in &plan.projects {
        let id = &p.project_id;
        if app::get_by_client_id(c, id).await?.is_some()
            || machine(user::get(c, id).await?)
            || machine(user::get_by_username(c, id).await?)
        {
            return Err(ApiError::exists(format!(
                "project {id}: its id is the client id of an application or a machine user's id or name"
            )));
        }
    }
    for u in plan.users.iter().filter(|u| matches!(u.kind, Kind::Machine(_))) {
        for name in [&u.user_id, &u.username] {
            if app::get_by_client_id(c, name).await?.is_some() {
                return Err(ApiError::exists(format!(
                    "machine user {}: '{name}' is the client id of an application",
                    u.user_id
                )));
            }
            if project::get(c, name).await?.is_some() {
                return Err(ApiError::exists(format!("machine user {}: '{name}' is the id of a project", u.user_id)));
            }
        }
        // Nor another user's name as its id, nor another user's id as its name.
        let other = |found: Option<user::User>| found.is_some_and(|f| f.user_id != u.user_id);
        if other(user::get_by_username(c, &u.user_id).await?) || other(user::get(c, &u.username).await?) {
            return Err(ApiError::exists(format!(
                "machine user {}: its id is another user's name, or its name another user's id",
                u.user_id
            )));
        }
    }
    for a in &plan.apps {
        if project::get(c, &a.client_id).await?.is_some() {
            return Err(ApiError::exists(format!(
                "application {}: its client id {} is the id of a project",
                a.app_id, a.client_id
            )));
        }
        if machine(user::get(c, &a.client_id).await?) || machine(user::get_by_username(c, &a.client_id).await?) {
            return Err(ApiError::exists(format!(
                "application {}: its client id {} is a machine user's id or name",
                a.app_id, a.client_id
            )));
        }
    }
    Ok(())
}
