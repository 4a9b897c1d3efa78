//! What the management (`/management/v1`), admin (`/admin/v1`) and v2 APIs share: the error
//! body, the JSON extractor, caller authentication and the common shapes of the v1 interface.

pub mod auth;
pub mod error;
pub mod json;
pub mod openapi;
pub mod routes;
pub mod types;

pub use auth::Caller;
pub use error::{ApiError, Code};
pub use json::ApiJson;
