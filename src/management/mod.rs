//! `/management/v1`: organizations, users, projects and applications of one organization (the
//! caller's own, or the one named by `x-latch-orgid`).

pub mod apps;
pub mod compliance;
pub mod import;
pub mod machine;
pub mod members;
pub mod orgs;
pub mod projects;
pub mod users;
pub mod views;

use axum::Router;
use axum::routing::{delete, get, post, put};

use crate::app::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/orgs", post(orgs::add_org))
        .route("/orgs/me", get(orgs::get_my_org).put(orgs::update_org))
        .route("/orgs/me/domains", post(orgs::add_domain))
        .route("/orgs/me/domains/_search", post(orgs::list_domains))
        .route("/orgs/me/domains/{domain}", delete(orgs::remove_domain))
        .route("/orgs/me/domains/{domain}/_set_primary", post(orgs::set_primary_domain))
        .route("/orgs/me/members", post(members::add_org_member))
        .route("/orgs/me/members/_search", post(members::list_org_members))
        .route("/orgs/me/members/{user_id}", put(members::update_org_member).delete(members::remove_org_member))
        .route("/orgs/members/roles/_search", post(members::list_org_member_roles))
        .route("/users/human", post(users::add_human))
        .route("/users/human/_import", post(import::import_human))
        .route("/users/_search", post(users::list))
        .route("/users/{user_id}", get(users::get).delete(users::remove))
        .route("/users/{user_id}/_deactivate", post(users::deactivate))
        .route("/users/{user_id}/_reactivate", post(users::reactivate))
        .route("/users/{user_id}/_lock", post(users::lock))
        .route("/users/{user_id}/_unlock", post(users::unlock))
        .route("/users/{user_id}/password", post(users::set_password))
        .route("/users/{user_id}/email", get(users::get_email).put(users::update_email))
        .route("/users/{user_id}/profile", put(users::update_profile))
        .route("/users/{user_id}/grants", post(projects::add_user_grant))
        .route("/users/machine", post(machine::add_machine))
        .route("/users/{user_id}/machine", put(machine::update_machine))
        .route("/users/{user_id}/secret", put(machine::generate_secret).delete(machine::remove_secret))
        .route("/users/{user_id}/keys", post(machine::add_key))
        .route("/users/{user_id}/keys/_search", post(machine::list_keys))
        .route("/users/{user_id}/keys/{key_id}", get(machine::get_key).delete(machine::remove_key))
        .route("/users/{user_id}/pats", post(machine::add_pat))
        .route("/users/{user_id}/pats/_search", post(machine::list_pats))
        .route("/users/{user_id}/pats/{token_id}", delete(machine::remove_pat))
        .route("/projects", post(projects::add_project))
        .route("/projects/_search", post(projects::list_projects))
        .route(
            "/projects/{project_id}",
            get(projects::get_project).put(projects::update_project).delete(projects::remove_project),
        )
        .route("/projects/{project_id}/roles", post(projects::add_role))
        .route("/projects/{project_id}/roles/_bulk", post(projects::bulk_add_roles))
        .route("/projects/{project_id}/roles/_search", post(projects::list_roles))
        .route("/projects/{project_id}/apps/oidc", post(apps::add_oidc_app))
        .route("/projects/{project_id}/apps/api", post(apps::add_api_app))
        .route("/projects/{project_id}/apps/_search", post(apps::list_apps))
        .route("/projects/{project_id}/apps/{app_id}", get(apps::get_app).delete(apps::remove_app))
        .route("/projects/{project_id}/apps/{app_id}/oidc_config", put(apps::update_oidc_config))
        .route(
            "/projects/{project_id}/apps/{app_id}/oidc_config/_generate_client_secret",
            post(apps::generate_oidc_secret),
        )
        .route("/projects/{project_id}/apps/{app_id}/api_config", put(apps::update_api_config))
        .route(
            "/projects/{project_id}/apps/{app_id}/api_config/_generate_client_secret",
            post(apps::generate_api_secret),
        )
        .route("/projects/{project_id}/apps/{app_id}/keys", post(apps::add_key))
        .route("/projects/{project_id}/apps/{app_id}/keys/_search", post(apps::list_keys))
        .route("/projects/{project_id}/apps/{app_id}/keys/{key_id}", get(apps::get_key).delete(apps::remove_key))
        .fallback(crate::api::error::not_found)
}
