//! latch's integration tests: one binary (each file under tests/ would be its own link step).
//! Every store and API test runs on SQLite and on PostgreSQL (`LATCH_TEST_DATABASE_URL`,
//! default the local server); a PostgreSQL that cannot be reached fails the run.

pub mod harness;

mod authorize;
mod bootstrap;
pub mod browser;
mod cli;
mod conformance;
mod cors;
mod exchange;
mod faults;
mod fuzz_corpus;
pub mod import_human;
mod keys;
mod limits;
pub mod login;
mod machine;
mod migrate_tool;
mod openapi;
mod ops;
mod orgs;
pub mod process;
mod projects;
mod replicas;
mod resource;
mod rp_openidconnect;
mod schema;
mod settings;
pub mod token;
mod transfer;
mod users;
mod walkthrough;
