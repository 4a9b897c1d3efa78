//! v2 resources: signing keys (`/v2/web_keys`) and instance features (`/v2/features/instance`).

pub mod features;
pub mod web_keys;

use crate::api::routes::Table;

/// The operations of `/v2`.
pub fn api() -> Table {
    Table::new("/v2")
        .get("/web_keys", web_keys::list)
        .post("/web_keys", web_keys::create)
        .post("/web_keys/{id}/_activate", web_keys::activate)
        .delete("/web_keys/{id}", web_keys::remove)
        .get("/features/instance", features::get)
        .put("/features/instance", features::set)
        .delete("/features/instance", features::reset)
}

/// Their description: every handler of [`api`] is listed here.
#[derive(utoipa::OpenApi)]
#[openapi(paths(
    web_keys::list,
    web_keys::create,
    web_keys::activate,
    web_keys::remove,
    features::get,
    features::set,
    features::reset
))]
pub struct Doc;
