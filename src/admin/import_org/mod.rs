//! One organization of an import: read what the target already has, check the organization's
//! part of the document against it (collecting every problem), then write it in one transaction.

use std::collections::{HashMap, HashSet};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use super::data::*;
use super::import::{Duplicates, GrantRef, ImportItem, SuccessOrg, UserLinkRef};
use crate::api::error::ApiResult;
use crate::api::{ApiError, Code};
use crate::app::AppState;
use crate::domain::enums::{
    ApiAuthMethod, AppState as AppLifecycle, OidcAuthMethod, OrgState, ProjectState, UserGrantState, UserState,
};
use crate::domain::roles::{ORG_ROLES, PROJECT_ROLES};
use crate::domain::settings::{LockoutPolicy, LoginPolicy, PasswordComplexityPolicy};
use crate::domain::validate;
use crate::management::import::{check_record, prepare};
use crate::management::members::check_roles;
use crate::management::orgs::generated_domain;
use crate::store::app::{self, App, AppKind};
use crate::store::member::{self, Scope};
use crate::store::org::{self, OrgDomain};
use crate::store::project::{self, Project, ProjectRole, UserGrant};
use crate::store::user::{self, IdpLink, Kind, Machine, User};
use crate::store::{Conn, StoreError, fold, setting};

/// At most this many problems are listed per organization.
mod grants;
mod users;
mod write;

use grants::check_grants_and_members;
use users::{check_machines, check_users, human_slot};
pub use write::{Ledger, Target};

const MAX_ERRORS: usize = 100;

/// The users and domains of the instance (three queries for the whole import): users by user
/// name key and by id, the organization of each domain (and the domains of each organization),
/// the organizations whose users have user names ending in `@` and a domain (which only that
/// organization may hold, as [`crate::management::users::check_username_domain`] and adding a
/// domain keep it), and the human users' e-mail addresses (a login name too).
#[derive(Default)]
pub struct Index {
    by_name: HashMap<String, (String, String)>,
    org_of: HashMap<String, String>,
    domains: HashMap<String, String>,
    domains_of: HashMap<String, Vec<String>>,
    names_in_domain: HashMap<String, HashSet<String>>,
    emails: HashSet<String>,
}

impl Index {
    pub async fn load(c: &mut Conn) -> ApiResult<Index> {
        let rows = user::all_names(c).await?;
        let mut index = Index {
            by_name: HashMap::with_capacity(rows.len()),
            org_of: HashMap::with_capacity(rows.len()),
            emails: user::human_email_keys(c).await?.into_iter().collect(),
            ..Index::default()
        };
        for (domain, org) in org::all_domains(c).await? {
            index.add_domain(domain, org);
        }
        for (key, id, org) in rows {
            index.add_name(key, id, org);
        }
        Ok(index)
    }

    fn add_domain(&mut self, domain: String, org: String) {
        self.domains_of.entry(org.clone()).or_default().push(domain.clone());
        self.domains.insert(domain, org);
    }

    fn add_name(&mut self, key: String, id: String, org: String) {
        if let Some((_, domain)) = key.rsplit_once('@') {
            self.names_in_domain.entry(domain.to_string()).or_default().insert(org.clone());
        }
        self.org_of.insert(id.clone(), org.clone());
        self.by_name.insert(key, (id, org));
    }

    /// Records what an organization's import wrote, for the organizations after it: its users,
    /// its domains and the one generated for it.
    fn add(&mut self, plan: &Plan, org_id: &str, generated: Option<String>) {
        for u in &plan.users {
            self.add_name(fold(&u.username), u.user_id.clone(), u.org_id.clone());
            if let Some(h) = u.human().filter(|h| !h.email.trim().is_empty()) {
                self.emails.insert(fold(h.email.trim()));
            }
        }
        for d in &plan.domains {
            self.add_domain(d.domain.clone(), d.org_id.clone());
        }
        if let Some(domain) = generated {
            self.add_domain(domain, org_id.to_string());
        }
    }

    /// Whose sign-ins a new user named `username` in `org_id` would take, as the management
    /// API's [`crate::management::users::check_login_name_free`] refuses: the login form looks a
    /// name up as a user name first, then as a name at an organization's domain, then as a
    /// human's e-mail address. So the name may not be `name@domain` for a user `name` of the
    /// organization with that domain, nor a human's e-mail address, nor, the other way round,
    /// a name whose `name@domain` at one of the organization's domains is someone's user name.
    fn login_name_taken(&self, username: &str, org_id: &str) -> Option<String> {
        let key = fold(username.trim());
        if let Some((name, domain)) = key.rsplit_once('@') {
            if self.domains.get(domain).is_some_and(|o| o == org_id)
                && let Some((other, _)) = self.by_name.get(name).filter(|(_, o)| o == org_id)
            {
                return Some(format!("it is the login name of user {other} (its name at the organization's domain)"));
            }
            if self.emails.contains(&key) {
                return Some("it is a human user's e-mail address, with which that user signs in".to_string());
            }
        }
        for domain in self.domains_of.get(org_id).into_iter().flatten() {
            if let Some((other, _)) = self.by_name.get(&format!("{key}@{domain}")) {
                return Some(format!(
                    "its login name at the organization's domain {domain} is the name of user {other}"
                ));
            }
        }
        None
    }

    /// The organization other than `org_id` whose domain `username` ends in.
    fn foreign_domain_of(&self, username: &str, org_id: &str) -> Option<&str> {
        let key = fold(username.trim());
        let (_, domain) = key.rsplit_once('@')?;
        self.domains.get(domain).map(String::as_str).filter(|o| *o != org_id)
    }

    /// An organization other than `org_id` with users whose names end in `@domain`.
    fn names_elsewhere_in(&self, domain: &str, org_id: &str) -> Option<&str> {
        self.names_in_domain.get(domain)?.iter().map(String::as_str).find(|o| *o != org_id)
    }
}

/// The result of one organization.
#[derive(Default)]
pub struct Outcome {
    pub success: Option<SuccessOrg>,
    pub errors: Vec<ImportItem>,
    pub skipped: Vec<ImportItem>,
}

/// What the target already has of the organization.
#[derive(Default)]
struct Existing {
    /// The instance's login policy: an imported one takes its lifetimes where it is silent.
    instance_login: LoginPolicy,
    org: Option<org::Org>,
    domains: HashSet<String>,
    has_login: bool,
    has_lockout: bool,
    has_complexity: bool,
    projects: HashSet<String>,
    roles: HashSet<(String, String)>,
    apps: HashSet<String>,
    grants: HashSet<(String, String)>,
    org_members: HashSet<String>,
    project_members: HashSet<(String, String)>,
}

async fn existing(c: &mut Conn, org_id: &str) -> ApiResult<Existing> {
    let instance_login = setting::load::<LoginPolicy>(c, setting::INSTANCE).await?.value;
    let Some(o) = org::get(c, org_id).await? else { return Ok(Existing { instance_login, ..Existing::default() }) };
    let projects: Vec<Project> = project::list_by_org(c, org_id).await?;
    let mut project_members = HashSet::new();
    for p in &projects {
        for m in member::list(c, Scope::Project, &p.project_id).await? {
            project_members.insert((p.project_id.clone(), m.user_id));
        }
    }
    Ok(Existing {
        instance_login,
        org: Some(o),
        domains: org::domains(c, org_id).await?.into_iter().map(|d| d.domain).collect(),
        has_login: setting::load::<LoginPolicy>(c, org_id).await?.times.is_some(),
        has_lockout: setting::load::<LockoutPolicy>(c, org_id).await?.times.is_some(),
        has_complexity: setting::load::<PasswordComplexityPolicy>(c, org_id).await?.times.is_some(),
        projects: projects.into_iter().map(|p| p.project_id).collect(),
        roles: project::roles_by_org(c, org_id).await?.into_iter().map(|r| (r.project_id, r.role_key)).collect(),
        apps: app::list_by_org(c, org_id).await?.into_iter().map(|a| a.app_id).collect(),
        grants: project::grants_by_org(c, org_id).await?.into_iter().map(|g| (g.user_id, g.project_id)).collect(),
        org_members: member::list(c, Scope::Org, org_id).await?.into_iter().map(|m| m.user_id).collect(),
        project_members,
    })
}

/// Everything to write for one organization.
#[derive(Default)]
struct Plan {
    new_org: Option<(String, OrgState)>,
    generate_domain: bool,
    domains: Vec<OrgDomain>,
    login: Option<LoginPolicy>,
    lockout: Option<LockoutPolicy>,
    complexity: Option<PasswordComplexityPolicy>,
    projects: Vec<Project>,
    roles: Vec<ProjectRole>,
    apps: Vec<App>,
    users: Vec<User>,
    links: Vec<(String, IdpLink)>,
    grants: Vec<UserGrant>,
    org_members: Vec<(String, Vec<String>)>,
    project_members: Vec<(String, String, Vec<String>)>,
}

/// Collects the problems and the objects left alone while checking.
struct Check<'a> {
    org_id: &'a str,
    errors: Vec<ImportItem>,
    skipped: Vec<ImportItem>,
}

impl Check<'_> {
    fn fail(&mut self, kind: &'static str, id: &str, message: impl Into<String>) {
        if self.errors.len() < MAX_ERRORS {
            let id = if id.is_empty() { self.org_id } else { id };
            self.errors.push(ImportItem::new(kind, id, message));
        }
    }

    fn skip(&mut self, kind: &'static str, id: impl Into<String>) {
        self.skipped.push(ImportItem::new(kind, id, "already exists; left as it is"));
    }

    /// Leaves a membership out whose user is not on this instance (nor a user of this
    /// organization in the document), rather than refusing the organization: the first owner
    /// of an organization created through the API is its creator, usually a user of another
    /// organization, and exporting the one organization would otherwise make a document no
    /// other instance imports. A user of an organization later in the same document is not
    /// there yet either: importing the document again adds the membership.
    fn leave_out_member(&mut self, kind: &'static str, id: impl Into<String>) {
        let why = "the user is not on this instance (nor a user of this organization in the document); \
                   the membership was left out: import again once the user is there to add it";
        self.skipped.push(ImportItem::new(kind, id, why));
    }

    fn check(&mut self, kind: &'static str, id: &str, r: ApiResult<()>) -> bool {
        match r {
            Ok(()) => true,
            Err(e) => {
                self.fail(kind, id, e.message);
                false
            }
        }
    }
}

pub async fn import(
    state: &AppState,
    index_in_doc: usize,
    d: DataOrg,
    index: &mut Index,
    duplicates: &Duplicates,
    target: &mut Target,
) -> ApiResult<Outcome> {
    let org_id = d.org_id.trim().to_string();
    let mut ck = Check { org_id: &org_id, errors: Vec::new(), skipped: Vec::new() };
    if org_id.is_empty() || org_id.len() > 200 {
        ck.fail("org", &format!("orgs[{index_in_doc}]"), "orgId is required (at most 200 characters)");
        return Ok(Outcome { errors: ck.errors, ..Outcome::default() });
    }
    // `GET /admin/v1/orgs/default` is the default organization: one whose id is `default` could
    // not be read by its id.
    if org_id == "default" {
        ck.fail(
            "org",
            &org_id,
            "the organization id 'default' is reserved: /admin/v1/orgs/default is the default organization",
        );
        return Ok(Outcome { errors: ck.errors, ..Outcome::default() });
    }
    let ex = match target.reads() {
        Some(c) => existing(c, &org_id).await?,
        None => {
            let mut c = state.db.conn().await?;
            existing(&mut c, &org_id).await?
        }
    };
    let now = state.clock.now();
    let mut plan = Plan::default();
    let mut ok = SuccessOrg { org_id: org_id.clone(), ..SuccessOrg::default() };
    let mut notify = Vec::new();

    check_org(&mut ck, &d, &ex, index, &mut plan, &mut ok, now);
    check_projects(&mut ck, &d, &ex, &mut plan, &mut ok, now);
    check_apps(&mut ck, &d, &ex, &mut plan, &mut ok, now);
    let dry_run = target.is_dry_run();
    check_users(state, &mut ck, &d, index_in_doc, index, duplicates, &mut plan, &mut ok, &mut notify, now, dry_run)
        .await;
    check_grants_and_members(&mut ck, &d, &ex, index, &mut plan, &mut ok, now);

    if !ck.errors.is_empty() {
        for e in &mut ck.errors {
            e.message = format!("{} (organization {org_id} was not imported)", e.message);
        }
        return Ok(Outcome { errors: ck.errors, ..Outcome::default() });
    }
    let Check { skipped, .. } = ck;
    let generated = match target.apply(state, &org_id, &plan, now, notify).await? {
        Ok(generated) => generated,
        Err(e) => {
            let message = format!("{} (organization {org_id} was not imported)", e.message);
            return Ok(Outcome { errors: vec![ImportItem::new("org", &org_id, message)], ..Outcome::default() });
        }
    };
    index.add(&plan, &org_id, generated);
    Ok(Outcome { success: Some(ok), errors: Vec::new(), skipped })
}

/// Every check of [`import`] for one organization as if the instance were empty, without the
/// store (the fuzz targets' entry point): the problems found. Plain passwords are not hashed.
pub fn check_offline(index_in_doc: usize, d: &DataOrg, duplicates: &Duplicates, now: i64) -> Vec<ImportItem> {
    let org_id = d.org_id.trim().to_string();
    let mut ck = Check { org_id: &org_id, errors: Vec::new(), skipped: Vec::new() };
    if org_id.is_empty() || org_id.len() > 200 {
        ck.fail("org", &format!("orgs[{index_in_doc}]"), "orgId is required (at most 200 characters)");
        return ck.errors;
    }
    let ex = Existing::default();
    let index = Index::default();
    let mut plan = Plan::default();
    let mut ok = SuccessOrg { org_id: org_id.clone(), ..SuccessOrg::default() };
    check_org(&mut ck, d, &ex, &index, &mut plan, &mut ok, now);
    check_projects(&mut ck, d, &ex, &mut plan, &mut ok, now);
    check_apps(&mut ck, d, &ex, &mut plan, &mut ok, now);
    for (j, u) in d.human_users.iter().enumerate() {
        if let Some((id, _)) = human_slot(&mut ck, j, u, index_in_doc, &index, duplicates)
            && let Err(e) = check_record(&u.user, &format!("humanUsers[{j}].user"))
        {
            ck.fail("human_user", id, e.message);
        }
    }
    check_machines(&mut ck, d, index_in_doc, &index, duplicates, &mut plan, &mut ok, now);
    check_grants_and_members(&mut ck, d, &ex, &index, &mut plan, &mut ok, now);
    ck.errors
}

fn check_org(
    ck: &mut Check,
    d: &DataOrg,
    ex: &Existing,
    index: &Index,
    plan: &mut Plan,
    ok: &mut SuccessOrg,
    now: i64,
) {
    let org_id = ck.org_id.to_string();
    match &ex.org {
        Some(_) => ck.skip("org", &org_id),
        None => {
            let name = d.org.as_ref().map(|o| o.name.trim()).unwrap_or_default();
            if name.is_empty() || name.chars().count() > 200 {
                ck.fail("org", &org_id, "the organization does not exist here and the document gives no name for it");
            }
            let st = match d.org_state {
                None | Some(OrgState::Active | OrgState::Unspecified) => OrgState::Active,
                Some(OrgState::Inactive) => OrgState::Inactive,
                Some(other) => {
                    ck.fail("org", &org_id, format!("orgState {} cannot be imported", other.name()));
                    OrgState::Active
                }
            };
            plan.new_org = Some((name.to_string(), st));
        }
    }
    let mut primary = 0;
    let mut seen = HashSet::new();
    for dm in &d.domains {
        let name = dm.domain_name.trim().to_ascii_lowercase();
        if !ck.check("domain", &name, validate::domain("DataOrg", "domains.domainName", &name).map_err(Into::into)) {
            continue;
        }
        if !seen.insert(name.clone()) {
            ck.fail("domain", &name, "the domain occurs more than once in the organization");
            continue;
        }
        if ex.domains.contains(&name) {
            ck.skip("domain", &name);
            continue;
        }
        if let Some(other) = index.domains.get(&name).filter(|o| **o != org_id) {
            ck.fail("domain", &name, format!("the domain belongs to organization {other}"));
            continue;
        }
        // Users elsewhere whose user names end in it would hold this organization's login names.
        if let Some(other) = index.names_elsewhere_in(&name, &org_id) {
            ck.fail(
                "domain",
                &name,
                format!("users of organization {other} have user names in this domain; they must be renamed first"),
            );
            continue;
        }
        primary += usize::from(dm.is_primary && ex.org.is_none());
        plan.domains.push(OrgDomain {
            domain: name.clone(),
            org_id: org_id.clone(),
            is_verified: dm.is_verified,
            // An organization that exists keeps its primary domain.
            is_primary: dm.is_primary && ex.org.is_none(),
            validation_type: dm.validation_type,
            created_at: now,
        });
        ok.domains.push(name);
    }
    if primary > 1 {
        ck.fail("domain", &org_id, "more than one domain is marked primary");
    }
    if ex.org.is_none() && primary == 0 {
        match plan.domains.iter_mut().find(|dm| dm.is_verified) {
            Some(dm) => dm.is_primary = true,
            None => plan.generate_domain = true,
        }
    }
    if let Some(p) = &d.login_policy {
        if ex.has_login {
            ck.skip("login_policy", &org_id);
        } else {
            match p.to_policy("DataOrg.loginPolicy", &ex.instance_login) {
                Ok(p) => plan.login = Some(p),
                Err(e) => ck.fail("login_policy", &org_id, e.message),
            }
        }
    }
    if let Some(p) = &d.lockout_policy {
        if ex.has_lockout {
            ck.skip("lockout_policy", &org_id);
        } else if p.max_password_attempts > 1000 || p.max_otp_attempts > 1000 {
            ck.fail("lockout_policy", &org_id, "invalid DataOrg.lockoutPolicy: at most 1000 attempts");
        } else {
            plan.lockout = Some(LockoutPolicy {
                max_password_attempts: p.max_password_attempts as i64,
                max_otp_attempts: p.max_otp_attempts as i64,
            });
        }
    }
    if let Some(p) = &d.password_complexity_policy {
        if ex.has_complexity {
            ck.skip("password_complexity_policy", &org_id);
        } else if p.min_length == 0 || p.min_length > 72 {
            ck.fail(
                "password_complexity_policy",
                &org_id,
                "invalid DataOrg.passwordComplexityPolicy.minLength: must be between 1 and 72",
            );
        } else {
            plan.complexity = Some(PasswordComplexityPolicy {
                min_length: p.min_length as i64,
                has_uppercase: p.has_uppercase,
                has_lowercase: p.has_lowercase,
                has_number: p.has_number,
                has_symbol: p.has_symbol,
            });
        }
    }
}

/// Project ids of the organization: in the document (and new) or already there.
fn known_project(plan: &Plan, ex: &Existing, id: &str) -> bool {
    ex.projects.contains(id) || plan.projects.iter().any(|p| p.project_id == id)
}

/// Project ids and client ids go into the audience of the tokens issued to them: one named as
/// latch's own API (`latch`) would make those tokens management-API tokens.
fn reserved(id: &str) -> bool {
    id.eq_ignore_ascii_case(crate::api::auth::API_AUDIENCE)
}

const RESERVED: &str = "the id 'latch' is reserved: it is the audience of latch's own API";

fn check_projects(ck: &mut Check, d: &DataOrg, ex: &Existing, plan: &mut Plan, ok: &mut SuccessOrg, now: i64) {
    let org_id = ck.org_id.to_string();
    let mut names = HashSet::new();
    for p in &d.projects {
        let id = p.project_id.trim();
        let r = "DataProject";
        let valid = ck.check("project", id, validate::required(r, "projectId", id, 200).map_err(Into::into))
            && ck.check("project", id, validate::required(r, "project.name", &p.project.name, 200).map_err(Into::into));
        if !valid {
            continue;
        }
        if reserved(id) {
            ck.fail("project", id, RESERVED.to_string());
            continue;
        }
        if ex.projects.contains(id) {
            ck.skip("project", id);
            continue;
        }
        if known_project(plan, ex, id) {
            ck.fail("project", id, "the project id occurs more than once in the organization");
            continue;
        }
        if !names.insert(fold(p.project.name.trim())) {
            ck.fail("project", id, format!("another project of the organization is named '{}'", p.project.name.trim()));
            continue;
        }
        plan.projects.push(Project {
            project_id: id.to_string(),
            org_id: org_id.clone(),
            name: p.project.name.trim().to_string(),
            state: match p.state {
                Some(ProjectState::Inactive) => ProjectState::Inactive,
                _ => ProjectState::Active,
            },
            role_assertion: p.project.project_role_assertion,
            role_check: p.project.project_role_check,
            has_project_check: p.project.has_project_check,
            private_labeling: p.project.private_labeling_setting,
            created_at: now,
            changed_at: now,
        });
        ok.project_ids.push(id.to_string());
    }
    let mut seen = HashSet::new();
    for role in &d.project_roles {
        let rid = format!("{}_{}", role.project_id, role.role_key);
        let r = "DataProjectRole";
        let valid =
            ck.check("project_role", &rid, validate::required(r, "roleKey", &role.role_key, 200).map_err(Into::into))
                && ck.check(
                    "project_role",
                    &rid,
                    validate::required(r, "displayName", &role.display_name, 200).map_err(Into::into),
                )
                && ck.check("project_role", &rid, validate::max(r, "group", &role.group, 200).map_err(Into::into));
        if !valid {
            continue;
        }
        if role.role_key.chars().any(char::is_whitespace) {
            ck.fail("project_role", &rid, "invalid DataProjectRole.roleKey: value must not contain spaces");
            continue;
        }
        if !known_project(plan, ex, &role.project_id) {
            ck.fail("project_role", &rid, format!("project {} is not a project of the organization", role.project_id));
            continue;
        }
        let key = (role.project_id.clone(), role.role_key.clone());
        if ex.roles.contains(&key) {
            ck.skip("project_role", rid);
            continue;
        }
        if !seen.insert(key) {
            ck.fail("project_role", &rid, "the role occurs more than once in the document");
            continue;
        }
        plan.roles.push(ProjectRole {
            project_id: role.project_id.clone(),
            role_key: role.role_key.clone(),
            display_name: role.display_name.trim().to_string(),
            role_group: role.group.trim().to_string(),
            created_at: now,
            changed_at: now,
        });
        ok.project_roles.push(rid);
    }
}

/// A secret digest from the document: base64 of a SHA-256 digest.
fn digest(raw: &str) -> Result<Option<Vec<u8>>, String> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Ok(None);
    }
    match STANDARD.decode(raw) {
        Ok(d) if d.len() == 32 => Ok(Some(d)),
        _ => Err("the secret digest must be the base64 of a 32-byte SHA-256 digest".to_string()),
    }
}

fn check_apps(ck: &mut Check, d: &DataOrg, ex: &Existing, plan: &mut Plan, ok: &mut SuccessOrg, now: i64) {
    let org_id = ck.org_id.to_string();
    let mut ids = HashSet::new();
    let mut client_ids = HashSet::new();
    let mut names = HashSet::new();
    let oidc = d.oidc_apps.iter().map(|a| {
        let kind = a
            .app
            .config("DataOIDCApplication.app")
            .map(|config| AppKind::Oidc { auth_method: a.app.auth_method_type, config });
        ("oidc_app", &a.app_id, &a.app.project_id, &a.app.name, kind, &a.client_id, &a.client_secret_digest, a.state)
    });
    let api = d.api_apps.iter().map(|a| {
        let kind: ApiResult<AppKind> = Ok(AppKind::Api { auth_method: a.app.auth_method_type });
        ("api_app", &a.app_id, &a.app.project_id, &a.app.name, kind, &a.client_id, &a.client_secret_digest, a.state)
    });
    for (kind_name, app_id, project_id, name, kind, client_id, secret, app_state) in oidc.chain(api) {
        let id = app_id.trim();
        let r = "DataApplication";
        let valid = ck.check(kind_name, id, validate::required(r, "appId", id, 200).map_err(Into::into))
            && ck.check(kind_name, id, validate::required(r, "app.name", name, 200).map_err(Into::into))
            && ck.check(kind_name, id, validate::max(r, "clientId", client_id, 200).map_err(Into::into));
        if !valid {
            continue;
        }
        if ex.apps.contains(id) {
            ck.skip(kind_name, id);
            continue;
        }
        if !ids.insert(id.to_string()) {
            ck.fail(kind_name, id, "the application id occurs more than once in the organization");
            continue;
        }
        if !known_project(plan, ex, project_id) {
            ck.fail(kind_name, id, format!("project '{project_id}' is not a project of the organization"));
            continue;
        }
        if !names.insert((project_id.clone(), fold(name.trim()))) {
            ck.fail(kind_name, id, format!("another application of project {project_id} is named '{}'", name.trim()));
            continue;
        }
        let kind = match kind {
            Ok(k) => k,
            Err(e) => {
                ck.fail(kind_name, id, e.message);
                continue;
            }
        };
        let secret_digest = match digest(secret) {
            Ok(s) => s,
            Err(e) => {
                ck.fail(kind_name, id, e);
                continue;
            }
        };
        let confidential = match &kind {
            AppKind::Oidc { auth_method, .. } => matches!(auth_method, OidcAuthMethod::Basic | OidcAuthMethod::Post),
            AppKind::Api { auth_method } => *auth_method == ApiAuthMethod::Basic,
        };
        let client_id = if client_id.trim().is_empty() { crate::id::new_id() } else { client_id.trim().to_string() };
        if reserved(&client_id) {
            ck.fail(kind_name, id, RESERVED.to_string());
            continue;
        }
        if !client_ids.insert(client_id.clone()) {
            ck.fail(kind_name, id, format!("the client id '{client_id}' occurs more than once in the organization"));
            continue;
        }
        plan.apps.push(App {
            app_id: id.to_string(),
            project_id: project_id.clone(),
            org_id: org_id.clone(),
            name: name.trim().to_string(),
            state: match app_state {
                Some(AppLifecycle::Inactive) => AppLifecycle::Inactive,
                _ => AppLifecycle::Active,
            },
            client_id,
            // Without its digest a confidential client needs a new secret after the move.
            secret_digest: secret_digest.filter(|_| confidential),
            kind,
            created_at: now,
            changed_at: now,
        });
        if kind_name == "oidc_app" {
            ok.oidc_app_ids.push(id.to_string());
        } else {
            ok.api_app_ids.push(id.to_string());
        }
    }
}
