//! The check of an organization's user grants and members.

use super::*;

pub(super) fn check_grants_and_members(
    ck: &mut Check,
    d: &DataOrg,
    ex: &Existing,
    index: &Index,
    plan: &mut Plan,
    ok: &mut SuccessOrg,
    now: i64,
) {
    let org_id = ck.org_id.to_string();
    let new_users: HashSet<&str> = plan.users.iter().map(|u| u.user_id.as_str()).collect();
    let user_here = |id: &str| new_users.contains(id) || index.org_of.get(id).is_some_and(|o| *o == org_id);
    let user_anywhere = |id: &str| new_users.contains(id) || index.org_of.contains_key(id);
    let mut roles_of: HashMap<&str, HashSet<&str>> = HashMap::new();
    for (p, r) in &ex.roles {
        roles_of.entry(p.as_str()).or_default().insert(r.as_str());
    }
    for r in &plan.roles {
        roles_of.entry(r.project_id.as_str()).or_default().insert(r.role_key.as_str());
    }
    let mut grants = Vec::new();
    let mut seen = HashSet::new();
    for g in &d.user_grants {
        let gid = format!("{}_{}", g.user_id, g.project_id);
        if !user_here(&g.user_id) {
            ck.fail("user_grant", &gid, format!("user {} is not a user of the organization", g.user_id));
            continue;
        }
        if !known_project(plan, ex, &g.project_id) {
            ck.fail("user_grant", &gid, format!("project {} is not a project of the organization", g.project_id));
            continue;
        }
        if let Some(k) =
            g.role_keys.iter().find(|k| !roles_of.get(g.project_id.as_str()).is_some_and(|s| s.contains(k.as_str())))
        {
            ck.fail("user_grant", &gid, format!("project {} has no role '{k}'", g.project_id));
            continue;
        }
        let key = (g.user_id.clone(), g.project_id.clone());
        if ex.grants.contains(&key) {
            ck.skip("user_grant", gid);
            continue;
        }
        if !seen.insert(key) {
            ck.fail("user_grant", &gid, "the user grant occurs more than once in the document");
            continue;
        }
        grants.push(UserGrant {
            user_grant_id: crate::id::new_id(),
            user_id: g.user_id.clone(),
            project_id: g.project_id.clone(),
            org_id: org_id.clone(),
            role_keys: g.role_keys.clone(),
            state: UserGrantState::Active,
            created_at: now,
            changed_at: now,
        });
        ok.user_grants.push(GrantRef { project_id: g.project_id.clone(), user_id: g.user_id.clone() });
    }
    let mut members = Vec::new();
    for m in &d.org_members {
        let roles = match check_roles("DataOrg.orgMembers", &m.roles, ORG_ROLES) {
            Ok(r) => r,
            Err(e) => {
                ck.fail("org_member", &m.user_id, e.message);
                continue;
            }
        };
        if !user_anywhere(&m.user_id) {
            ck.leave_out_member("org_member", m.user_id.clone());
            continue;
        }
        if ex.org_members.contains(&m.user_id) {
            ck.skip("org_member", m.user_id.clone());
            continue;
        }
        if members.iter().any(|(u, _)| *u == m.user_id) {
            ck.fail("org_member", &m.user_id, "the member occurs more than once in the document");
            continue;
        }
        members.push((m.user_id.clone(), roles));
        ok.org_members.push(m.user_id.clone());
    }
    let mut project_members: Vec<(String, String, Vec<String>)> = Vec::new();
    for m in &d.project_members {
        let mid = format!("{}_{}", m.project_id, m.user_id);
        if !known_project(plan, ex, &m.project_id) {
            ck.fail("project_member", &mid, format!("project {} is not a project of the organization", m.project_id));
            continue;
        }
        let roles = match check_roles("DataOrg.projectMembers", &m.roles, PROJECT_ROLES) {
            Ok(r) => r,
            Err(e) => {
                ck.fail("project_member", &mid, e.message);
                continue;
            }
        };
        if !user_anywhere(&m.user_id) {
            ck.leave_out_member("project_member", mid);
            continue;
        }
        if ex.project_members.contains(&(m.project_id.clone(), m.user_id.clone())) {
            ck.skip("project_member", mid);
            continue;
        }
        if project_members.iter().any(|(p, u, _)| *p == m.project_id && *u == m.user_id) {
            ck.fail("project_member", &mid, "the member occurs more than once in the document");
            continue;
        }
        project_members.push((m.project_id.clone(), m.user_id.clone(), roles));
        ok.project_members.push(GrantRef { project_id: m.project_id.clone(), user_id: m.user_id.clone() });
    }
    plan.grants = grants;
    plan.org_members = members;
    plan.project_members = project_members;
}
