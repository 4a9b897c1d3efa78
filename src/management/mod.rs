//! `/management/v1`: organizations, users, projects and applications of one organization (the
//! caller's own, or the one named by `x-latch-orgid`).

pub mod app_keys;
pub mod apps;
pub mod compliance;
pub mod global;
pub mod grants;
pub mod import;
pub mod instance;
pub mod machine;
pub mod members;
pub mod org_lifecycle;
pub mod orgs;
pub mod passwords;
pub mod policies;
pub mod projects;
pub mod roles;
pub mod user_mail;
pub mod users;
pub mod views;

use crate::api::routes::Table;

/// The operations of `/management/v1`.
pub fn api() -> Table {
    Table::new("/management/v1")
        .get("/iam", instance::get_iam)
        .get("/zitadel/docs", instance::get_oidc_information)
        .get("/healthz", instance::healthz)
        .post("/orgs", orgs::add_org)
        .get("/orgs/me", orgs::get_my_org)
        .put("/orgs/me", orgs::update_org)
        .delete("/orgs/me", org_lifecycle::remove_org)
        .post("/orgs/me/_deactivate", org_lifecycle::deactivate_org)
        .post("/orgs/me/_reactivate", org_lifecycle::reactivate_org)
        .post("/orgs/me/domains", orgs::add_domain)
        .get("/policies/login", policies::get_login)
        .post("/policies/login", policies::add_login)
        .put("/policies/login", policies::update_login)
        .delete("/policies/login", policies::reset_login)
        .get("/policies/lockout", policies::get_lockout)
        .post("/policies/lockout", policies::add_lockout)
        .put("/policies/lockout", policies::update_lockout)
        .delete("/policies/lockout", policies::reset_lockout)
        .get("/policies/password/complexity", policies::get_complexity)
        .post("/policies/password/complexity", policies::add_complexity)
        .put("/policies/password/complexity", policies::update_complexity)
        .delete("/policies/password/complexity", policies::reset_complexity)
        .post("/orgs/me/domains/_search", orgs::list_domains)
        .delete("/orgs/me/domains/{domain}", orgs::remove_domain)
        .post("/orgs/me/domains/{domain}/_set_primary", orgs::set_primary_domain)
        .post("/orgs/me/members", members::add_org_member)
        .post("/orgs/me/members/_search", members::list_org_members)
        .put("/orgs/me/members/{user_id}", members::update_org_member)
        .delete("/orgs/me/members/{user_id}", members::remove_org_member)
        .post("/orgs/members/roles/_search", members::list_org_member_roles)
        .post("/users/human", users::add_human)
        .post("/users/human/_import", import::import_human)
        .post("/users/_search", users::list)
        .get("/users/{user_id}", users::get)
        .delete("/users/{user_id}", users::remove)
        .put("/users/{user_id}/username", users::update_username)
        .get("/users/_is_unique", user_mail::is_unique)
        .post("/users/{user_id}/email/_resend_verification", user_mail::resend_email_verification)
        .post("/users/{user_id}/_resend_initialization", user_mail::resend_initialization)
        .post("/users/{user_id}/_deactivate", users::deactivate)
        .post("/users/{user_id}/_reactivate", users::reactivate)
        .post("/users/{user_id}/_lock", users::lock)
        .post("/users/{user_id}/_unlock", users::unlock)
        .post("/users/{user_id}/password", passwords::set_password)
        .post("/users/{user_id}/password/_reset", user_mail::send_password_reset)
        .post("/users/{user_id}/password/_initialize", passwords::set_initial_password)
        .get("/global/users/_by_login_name", global::user_by_login_name)
        .get("/users/{user_id}/email", users::get_email)
        .put("/users/{user_id}/email", users::update_email)
        .put("/users/{user_id}/profile", users::update_profile)
        .post("/users/{user_id}/grants", grants::add_user_grant)
        .post("/users/grants/_search", grants::list_user_grants)
        .get("/users/{user_id}/grants/{grant_id}", grants::get_user_grant)
        .put("/users/{user_id}/grants/{grant_id}", grants::update_user_grant)
        .delete("/users/{user_id}/grants/{grant_id}", grants::remove_user_grant)
        .post("/users/machine", machine::add_machine)
        .put("/users/{user_id}/machine", machine::update_machine)
        .put("/users/{user_id}/secret", machine::generate_secret)
        .delete("/users/{user_id}/secret", machine::remove_secret)
        .post("/users/{user_id}/keys", machine::add_key)
        .post("/users/{user_id}/keys/_search", machine::list_keys)
        .get("/users/{user_id}/keys/{key_id}", machine::get_key)
        .delete("/users/{user_id}/keys/{key_id}", machine::remove_key)
        .post("/users/{user_id}/pats", machine::add_pat)
        .post("/users/{user_id}/pats/_search", machine::list_pats)
        .delete("/users/{user_id}/pats/{token_id}", machine::remove_pat)
        .post("/projects", projects::add_project)
        .post("/projects/_search", projects::list_projects)
        .get("/projects/{project_id}", projects::get_project)
        .put("/projects/{project_id}", projects::update_project)
        .delete("/projects/{project_id}", projects::remove_project)
        .post("/projects/{project_id}/_deactivate", projects::deactivate_project)
        .post("/projects/{project_id}/_reactivate", projects::reactivate_project)
        .post("/projects/{project_id}/roles", roles::add_role)
        .post("/projects/{project_id}/roles/_bulk", roles::bulk_add_roles)
        .post("/projects/{project_id}/roles/_search", roles::list_roles)
        .put("/projects/{project_id}/roles/{role_key}", roles::update_role)
        .delete("/projects/{project_id}/roles/{role_key}", roles::remove_role)
        .post("/projects/{project_id}/apps/oidc", apps::add_oidc_app)
        .post("/projects/{project_id}/apps/api", apps::add_api_app)
        .post("/projects/{project_id}/apps/_search", apps::list_apps)
        .get("/projects/{project_id}/apps/{app_id}", apps::get_app)
        .put("/projects/{project_id}/apps/{app_id}", apps::update_app)
        .delete("/projects/{project_id}/apps/{app_id}", apps::remove_app)
        .post("/projects/{project_id}/apps/{app_id}/_deactivate", apps::deactivate_app)
        .post("/projects/{project_id}/apps/{app_id}/_reactivate", apps::reactivate_app)
        .put("/projects/{project_id}/apps/{app_id}/oidc_config", apps::update_oidc_config)
        .post("/projects/{project_id}/apps/{app_id}/oidc_config/_generate_client_secret", apps::generate_oidc_secret)
        .put("/projects/{project_id}/apps/{app_id}/api_config", apps::update_api_config)
        .post("/projects/{project_id}/apps/{app_id}/api_config/_generate_client_secret", apps::generate_api_secret)
        .post("/projects/{project_id}/apps/{app_id}/keys", app_keys::add_key)
        .post("/projects/{project_id}/apps/{app_id}/keys/_search", app_keys::list_keys)
        .get("/projects/{project_id}/apps/{app_id}/keys/{key_id}", app_keys::get_key)
        .delete("/projects/{project_id}/apps/{app_id}/keys/{key_id}", app_keys::remove_key)
}

/// Their description: every handler of [`api`] is listed here.
#[derive(utoipa::OpenApi)]
#[openapi(paths(
    instance::get_iam,
    instance::get_oidc_information,
    instance::healthz,
    orgs::add_org,
    orgs::get_my_org,
    orgs::update_org,
    org_lifecycle::remove_org,
    org_lifecycle::deactivate_org,
    org_lifecycle::reactivate_org,
    policies::get_login,
    policies::add_login,
    policies::update_login,
    policies::reset_login,
    policies::get_lockout,
    policies::add_lockout,
    policies::update_lockout,
    policies::reset_lockout,
    policies::get_complexity,
    policies::add_complexity,
    policies::update_complexity,
    policies::reset_complexity,
    orgs::add_domain,
    orgs::list_domains,
    orgs::remove_domain,
    orgs::set_primary_domain,
    members::add_org_member,
    members::list_org_members,
    members::update_org_member,
    members::remove_org_member,
    members::list_org_member_roles,
    users::add_human,
    import::import_human,
    users::list,
    users::get,
    users::remove,
    users::update_username,
    user_mail::is_unique,
    user_mail::send_password_reset,
    passwords::set_initial_password,
    global::user_by_login_name,
    user_mail::resend_email_verification,
    user_mail::resend_initialization,
    users::deactivate,
    users::reactivate,
    users::lock,
    users::unlock,
    passwords::set_password,
    users::get_email,
    users::update_email,
    users::update_profile,
    grants::add_user_grant,
    grants::list_user_grants,
    grants::get_user_grant,
    grants::update_user_grant,
    grants::remove_user_grant,
    machine::add_machine,
    machine::update_machine,
    machine::generate_secret,
    machine::remove_secret,
    machine::add_key,
    machine::list_keys,
    machine::get_key,
    machine::remove_key,
    machine::add_pat,
    machine::list_pats,
    machine::remove_pat,
    projects::add_project,
    projects::list_projects,
    projects::get_project,
    projects::update_project,
    projects::remove_project,
    projects::deactivate_project,
    projects::reactivate_project,
    roles::add_role,
    roles::bulk_add_roles,
    roles::list_roles,
    roles::update_role,
    roles::remove_role,
    apps::add_oidc_app,
    apps::add_api_app,
    apps::list_apps,
    apps::get_app,
    apps::remove_app,
    apps::update_app,
    apps::deactivate_app,
    apps::reactivate_app,
    apps::update_oidc_config,
    apps::generate_oidc_secret,
    apps::update_api_config,
    apps::generate_api_secret,
    app_keys::add_key,
    app_keys::list_keys,
    app_keys::get_key,
    app_keys::remove_key,
))]
pub struct Doc;
