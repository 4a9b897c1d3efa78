//! Starts latch in-process on a fresh database (a SQLite file in a temporary folder, or a new
//! PostgreSQL database) with a manual clock, and talks to it over real HTTP.

use std::sync::Arc;

use latch::app::{self, AppState};
use latch::clock::ManualClock;
use latch::config::{Config, Settings};
use serde_json::Value;
use sqlx::Connection;
use tempfile::TempDir;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// The PostgreSQL server tests create their databases on.
pub fn pg_admin_url() -> String {
    std::env::var("LATCH_TEST_DATABASE_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

fn with_database(url: &str, db: &str) -> String {
    let mut u = url::Url::parse(url).expect("LATCH_TEST_DATABASE_URL is not a URL");
    u.set_path(&format!("/{db}"));
    u.to_string()
}

/// A fresh, empty PostgreSQL database; returns its URL and name.
pub async fn create_pg_database() -> (String, String) {
    sqlx::any::install_default_drivers();
    let admin = pg_admin_url();
    let mut c = sqlx::AnyConnection::connect(&admin).await.unwrap_or_else(|e| {
        panic!(
            "PostgreSQL is not reachable at {admin} ({e}). Start it with `pg_ctlcluster --skip-systemctl-redirect 15 main start` or set LATCH_TEST_DATABASE_URL."
        )
    });
    let name = format!("latch_t_{}", latch::id::new_id());
    sqlx::query(&format!("CREATE DATABASE {name}")).execute(&mut c).await.expect("CREATE DATABASE");
    (with_database(&admin, &name), name)
}

pub async fn drop_pg_database(name: &str) {
    if let Ok(mut c) = sqlx::AnyConnection::connect(&pg_admin_url()).await {
        let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).execute(&mut c).await;
    }
}

/// Settings for a test server: fast password hashing, a random master key, files in `dir`.
pub fn test_config(dir: &std::path::Path, database_url: &str, port: u16) -> Config {
    let mut c = Config {
        external_url: format!("http://127.0.0.1:{port}"),
        listen: format!("127.0.0.1:{port}"),
        database_url: database_url.to_string(),
        database_max_connections: 5,
        data_dir: dir.join("data").display().to_string(),
        masterkey: Some(base64_key()),
        log_level: "warn".into(),
        ..Config::default()
    };
    c.firstinstance.admin_password = Some("Admin-Passw0rd!".into());
    c.password.argon2_memory_kib = 1024;
    c.password.argon2_iterations = 1;
    c
}

fn base64_key() -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(rand::random::<[u8; 32]>())
}

pub struct TestServer {
    pub backend: Backend,
    pub base: String,
    pub state: AppState,
    pub clock: Arc<ManualClock>,
    /// The machine administrator's personal access token (from the PAT file).
    pub pat: String,
    pub settings: Settings,
    pub dir: TempDir,
    pub pg_db: Option<String>,
    client: reqwest::Client,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// A response: status, headers and the body parsed as JSON (or a string).
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
    pub text: String,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Asserts the status and returns the body.
    #[track_caller]
    pub fn ok(&self) -> &Value {
        assert_eq!(self.status, 200, "expected 200, got {}: {}", self.status, self.text);
        &self.body
    }

    /// Asserts an API error with this HTTP status and gRPC code.
    #[track_caller]
    pub fn err(&self, status: u16, code: i64) -> &str {
        assert_eq!(self.status, status, "expected {status}, got {}: {}", self.status, self.text);
        assert_eq!(self.body["code"].as_i64(), Some(code), "expected code {code}: {}", self.text);
        self.body["message"].as_str().unwrap_or("")
    }
}

/// Writes `request` as it is to the server at `base` (an http:// URL) and returns everything
/// it answers until it closes the connection (within 10 s): for requests no HTTP client sends.
pub async fn raw_http(base: &str, request: &[u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(base.trim_start_matches("http://")).await.unwrap();
    s.write_all(request).await.unwrap();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(std::time::Duration::from_secs(10), s.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "the server neither answered nor closed the connection");
    String::from_utf8_lossy(&buf).into_owned()
}

#[allow(clippy::disallowed_methods)]
pub fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

impl TestServer {
    /// The messages in the outbox (no SMTP server is configured in tests) addressed to `to`.
    pub fn outbox_to(&self, to: &str) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(self.settings.data_dir.join("outbox")) else { return Vec::new() };
        entries
            .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
            // `To: Name <address>`, or the bare address for a message that names no one.
            .filter(|m| m.contains(&format!("<{to}>")) || m.lines().any(|l| l == format!("To: {to}")))
            .collect()
    }

    pub async fn start(backend: Backend) -> Self {
        Self::start_with(backend, |_| {}).await
    }

    pub async fn start_with(backend: Backend, adjust: impl FnOnce(&mut Config)) -> Self {
        latch::crypto::install_tls_provider();
        let dir = tempfile::tempdir().unwrap();
        let (database_url, pg_db) = match backend {
            Backend::Sqlite => (format!("sqlite://{}/latch.db", dir.path().display()), None),
            Backend::Postgres => {
                let (url, name) = create_pg_database().await;
                (url, Some(name))
            }
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut config = test_config(dir.path(), &database_url, port);
        adjust(&mut config);
        let settings = config.validate().expect("test settings");
        let clock = Arc::new(ManualClock::new(now()));
        let started = app::start(settings.clone(), clock.clone()).await.expect("latch starts");
        let pat = std::fs::read_to_string(&settings.first_instance.pat_path).expect("PAT file").trim().to_string();
        let state = started.state.clone();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let _ = app::serve(listener, started.state, async {
                let _ = stop_rx.await;
            })
            .await;
        });
        TestServer {
            backend,
            base: format!("http://127.0.0.1:{port}"),
            state,
            clock,
            pat,
            settings,
            dir,
            pg_db,
            client: reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap(),
            stop: Some(stop_tx),
            task: Some(task),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    pub async fn send(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        headers: &[(&str, &str)],
        body: Option<String>,
    ) -> Resp {
        let mut req = self.client.request(method.parse().unwrap(), self.url(path));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        if let Some(b) = body {
            req = req.header("content-type", "application/json").body(b);
        }
        let r = req.send().await.expect("request");
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        let text = r.text().await.unwrap_or_default();
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text.clone()));
        Resp { status, headers, body, text }
    }

    /// A call as the machine administrator.
    pub async fn call(&self, method: &str, path: &str, body: Value) -> Resp {
        let body = if method == "GET" || method == "DELETE" { None } else { Some(body.to_string()) };
        self.send(method, path, Some(&self.pat), &[], body).await
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.call("GET", path, Value::Null).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Resp {
        self.call("POST", path, body).await
    }

    pub async fn put(&self, path: &str, body: Value) -> Resp {
        self.call("PUT", path, body).await
    }

    pub async fn delete(&self, path: &str) -> Resp {
        self.call("DELETE", path, Value::Null).await
    }

    /// A call with another token (or none), optionally in another organization.
    pub async fn call_as(&self, token: Option<&str>, org: Option<&str>, method: &str, path: &str, body: Value) -> Resp {
        let headers: Vec<(&str, &str)> = org.map(|o| vec![("x-latch-orgid", o)]).unwrap_or_default();
        let body = if method == "GET" || method == "DELETE" { None } else { Some(body.to_string()) };
        self.send(method, path, token, &headers, body).await
    }

    /// Creates a machine user with the given organization roles and returns (user id, PAT).
    pub async fn machine_with_roles(&self, org_id: Option<&str>, name: &str, org_roles: &[&str]) -> (String, String) {
        let r = self
            .call_as(
                Some(&self.pat),
                org_id,
                "POST",
                "/management/v1/users/machine",
                serde_json::json!({"userName": name, "name": name}),
            )
            .await;
        let user_id = r.ok()["userId"].as_str().unwrap().to_string();
        if !org_roles.is_empty() {
            self.call_as(
                Some(&self.pat),
                org_id,
                "POST",
                "/management/v1/orgs/me/members",
                serde_json::json!({"userId": user_id, "roles": org_roles}),
            )
            .await
            .ok();
        }
        let r = self
            .call_as(
                Some(&self.pat),
                org_id,
                "POST",
                &format!("/management/v1/users/{user_id}/pats"),
                serde_json::json!({}),
            )
            .await;
        (user_id, r.ok()["token"].as_str().unwrap().to_string())
    }

    /// Row count of a table, straight from the store.
    pub async fn count(&self, table: &str) -> i64 {
        let mut c = self.state.db.conn().await.unwrap();
        let (n,): (i64,) = sqlx::query_as(&format!("SELECT COUNT(*) FROM {table}")).fetch_one(&mut *c).await.unwrap();
        n
    }

    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.task.take() {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(10), t).await;
        }
        if let Some(db) = &self.pg_db {
            drop_pg_database(db).await;
        }
    }
}

/// Declares a test that runs once on SQLite and once on PostgreSQL; with `config: |c| ...` the
/// servers start with that change to the test configuration.
#[macro_export]
macro_rules! on_both {
    ($name:ident, config: |$c:ident| $adjust:expr, |$srv:ident| $body:block) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let $srv =
                    $crate::harness::TestServer::start_with($crate::harness::Backend::Sqlite, |$c| $adjust).await;
                {
                    let $srv = &$srv;
                    $body
                }
                $srv.stop().await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let $srv =
                    $crate::harness::TestServer::start_with($crate::harness::Backend::Postgres, |$c| $adjust).await;
                {
                    let $srv = &$srv;
                    $body
                }
                $srv.stop().await;
            }
        }
    };
    ($name:ident, |$srv:ident| $body:block) => {
        $crate::on_both!($name, config: |_c| {}, |$srv| $body);
    };
}
