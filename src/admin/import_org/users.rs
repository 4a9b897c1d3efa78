//! The check of an organization's human and machine users.

use super::*;

/// Whether a user id of the document may be added to this organization; skips what is there.
fn check_user_slot(
    ck: &mut Check,
    kind: &'static str,
    id: &str,
    username: &str,
    index: &Index,
    duplicate: Option<&String>,
) -> bool {
    if let Some(msg) = duplicate {
        ck.fail(kind, id, msg.clone());
        return false;
    }
    if let Some(org) = index.org_of.get(id) {
        if org == ck.org_id {
            ck.skip(kind, id);
        } else {
            ck.fail(kind, id, format!("a user with this id already exists in organization {org}"));
        }
        return false;
    }
    if let Some((other, org)) = index.by_name.get(&fold(username.trim())) {
        ck.fail(
            kind,
            id,
            format!("the user name '{}' is taken by user {other} of organization {org}", username.trim()),
        );
        return false;
    }
    // It would be a login name of that organization and take its user's sign-ins.
    if let Some(org) = index.foreign_domain_of(username, ck.org_id) {
        ck.fail(
            kind,
            id,
            format!(
                "the user name '{}' ends in a domain of organization {org}; choose another user name",
                username.trim()
            ),
        );
        return false;
    }
    if let Some(why) = index.login_name_taken(username, ck.org_id) {
        ck.fail(kind, id, format!("the user name '{}' would take another user's sign-ins: {why}", username.trim()));
        return false;
    }
    true
}

fn import_state(ck: &mut Check, kind: &'static str, id: &str, s: Option<UserState>) -> Option<UserState> {
    match s {
        None | Some(UserState::Unspecified | UserState::Active | UserState::Initial) => None,
        Some(s @ (UserState::Inactive | UserState::Locked)) => Some(s),
        Some(other) => {
            ck.fail(kind, id, format!("state {} cannot be imported", other.name()));
            None
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) async fn check_users(
    state: &AppState,
    ck: &mut Check<'_>,
    d: &DataOrg,
    index_in_doc: usize,
    index: &Index,
    duplicates: &Duplicates,
    plan: &mut Plan,
    ok: &mut SuccessOrg,
    notify: &mut Vec<String>,
    now: i64,
    dry_run: bool,
) {
    let org_id = ck.org_id.to_string();
    // Plain passwords meet the policy the organization will have: the document's own for an
    // organization that has none yet, else the one in force.
    let policy = plan.complexity.clone();
    for (j, u) in d.human_users.iter().enumerate() {
        let Some((id, user_state)) = human_slot(ck, j, u, index_in_doc, index, duplicates) else { continue };
        let r = format!("humanUsers[{j}].user");
        let mut p = match prepare(state, &org_id, policy.as_ref(), &u.user, &r, !dry_run).await {
            Ok(p) => p,
            Err(e) => {
                ck.fail("human_user", id, e.message);
                continue;
            }
        };
        if let Some(code) = &p.otp_code {
            match state.seal_otp(id, code) {
                Ok(sealed) => p.human.otp_secret = Some(sealed),
                Err(e) => {
                    ck.fail("human_user", id, format!("the OTP secret cannot be sealed: {e}"));
                    continue;
                }
            }
        }
        let derived = if p.human.password_hash.is_some() { UserState::Active } else { UserState::Initial };
        if !p.human.email_verified || p.human.password_hash.is_none() {
            notify.push(id.to_string());
        }
        for l in p.idps {
            ok.user_links.push(UserLinkRef {
                user_id: id.to_string(),
                external_user_id: l.external_user_id.clone(),
                display_name: l.display_name.clone(),
                idp_id: l.config_id.clone(),
            });
            plan.links.push((id.to_string(), l));
        }
        plan.users.push(User {
            user_id: id.to_string(),
            org_id: org_id.clone(),
            username: p.username,
            state: user_state.unwrap_or(derived),
            created_at: now,
            changed_at: now,
            tokens_valid_from: now,
            kind: Kind::Human(p.human),
            org_domain: String::new(),
            org_active: true,
            read_at: None,
        });
        ok.human_user_ids.push(id.to_string());
    }
    check_machines(ck, d, index_in_doc, index, duplicates, plan, ok, now);
}

/// The id, slot and state checks of the human user `j`: its id and state when it may be added.
pub(super) fn human_slot<'d>(
    ck: &mut Check<'_>,
    j: usize,
    u: &'d DataHumanUser,
    index_in_doc: usize,
    index: &Index,
    duplicates: &Duplicates,
) -> Option<(&'d str, Option<UserState>)> {
    let id = u.user_id.trim();
    if id.is_empty() || id.len() > 200 {
        ck.fail("human_user", &format!("humanUsers[{j}]"), "userId is required (at most 200 characters)");
        return None;
    }
    let dup = duplicates.get(&(index_in_doc, u.user_id.clone()));
    if !check_user_slot(ck, "human_user", id, &u.user.user_name, index, dup) {
        return None;
    }
    Some((id, import_state(ck, "human_user", id, u.state)))
}

#[allow(clippy::too_many_arguments)]
pub(super) fn check_machines(
    ck: &mut Check<'_>,
    d: &DataOrg,
    index_in_doc: usize,
    index: &Index,
    duplicates: &Duplicates,
    plan: &mut Plan,
    ok: &mut SuccessOrg,
    now: i64,
) {
    let org_id = ck.org_id.to_string();
    for (j, u) in d.machine_users.iter().enumerate() {
        let id = u.user_id.trim();
        let r = "DataMachineUser.user";
        if id.is_empty() || id.len() > 200 {
            ck.fail("machine_user", &format!("machineUsers[{j}]"), "userId is required (at most 200 characters)");
            continue;
        }
        let valid =
            ck.check("machine_user", id, validate::required(r, "userName", &u.user.user_name, 200).map_err(Into::into))
                && ck.check("machine_user", id, validate::required(r, "name", &u.user.name, 200).map_err(Into::into))
                && ck.check(
                    "machine_user",
                    id,
                    validate::max(r, "description", &u.user.description, 500).map_err(Into::into),
                );
        if !valid {
            continue;
        }
        if u.user.user_name.trim().chars().any(|c| c.is_whitespace() || c.is_control()) {
            ck.fail("machine_user", id, format!("invalid {r}.userName: value must not contain spaces"));
            continue;
        }
        let dup = duplicates.get(&(index_in_doc, u.user_id.clone()));
        if !check_user_slot(ck, "machine_user", id, &u.user.user_name, index, dup) {
            continue;
        }
        let user_state = import_state(ck, "machine_user", id, u.state);
        let secret_digest = match digest(&u.secret_digest) {
            Ok(s) => s,
            Err(e) => {
                ck.fail("machine_user", id, e);
                continue;
            }
        };
        plan.users.push(User {
            user_id: id.to_string(),
            org_id: org_id.clone(),
            username: u.user.user_name.trim().to_string(),
            state: user_state.unwrap_or(UserState::Active),
            created_at: now,
            changed_at: now,
            tokens_valid_from: now,
            kind: Kind::Machine(Machine {
                name: u.user.name.trim().to_string(),
                description: u.user.description.trim().to_string(),
                access_token_type: u.user.access_token_type,
                secret_digest,
            }),
            org_domain: String::new(),
            org_active: true,
            read_at: None,
        });
        ok.machine_user_ids.push(id.to_string());
    }
}
