//! latch: an OpenID Connect identity provider and OAuth 2.0 authorization server.
//!
//! `main.rs` only parses the command line; everything else lives here so tests can build the
//! application in-process: [`app::start`] opens the store and bootstraps it, [`app::router`]
//! builds the HTTP interface, [`app::serve`] serves it.

pub mod admin;
pub mod api;
pub mod app;
pub mod background;
pub mod bootstrap;
pub mod cache;
pub mod clock;
pub mod config;
pub mod cors;
pub mod crypto;
pub mod domain;
#[doc(hidden)]
pub mod fuzzing;
pub mod http;
pub mod id;
pub mod keys;
pub mod limits;
pub mod login;
pub mod management;
pub mod migration;
pub mod oauth;
pub mod oidc;
pub mod ops;
pub mod paths;
pub mod refusal;
pub mod revocations;
pub mod store;
pub mod sweep;
pub mod telemetry;
pub mod v2;
