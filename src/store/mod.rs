//! The store: the only place with SQL. One set of queries runs on PostgreSQL and SQLite through
//! `sqlx::Any` (`$1` placeholders, `ON CONFLICT`, `RETURNING`); see DESIGN.md for the type rules.
//! Functions take `&mut AnyConnection`, so the caller chooses a pooled connection or a
//! transaction. Code above the store that may not need the database at all (the hot paths answer
//! from the replica's caches) takes a [`Source`] instead, typically a [`Lazy`] connection.

pub mod app;
pub mod auth_request;
pub mod code;
pub mod credentials;
pub mod instance;
pub mod key;
pub mod member;
pub mod org;
pub mod pool;
pub mod project;
pub mod query;
pub mod refresh;
pub mod revocation;
pub mod session;
pub mod session_client;
pub mod setting;
pub mod signin;
pub mod sqlite_busy;
mod sqlite_text;
pub mod token_key;
pub mod user;
pub mod user_code;
pub mod web_key;

use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

use sqlx::any::AnyConnectOptions;
use sqlx::migrate::Migrator;
use sqlx::{Connection, Executor};

pub use pool::{Pooled, Tx};
pub use sqlx::AnyConnection as Conn;

/// Where a connection comes from when one is needed: a connection or transaction already held,
/// or a [`Lazy`] one taken from the pool on first use.
pub trait Source: Send {
    fn conn(&mut self) -> impl std::future::Future<Output = Result<&mut Conn>> + Send;
}

impl Source for Conn {
    fn conn(&mut self) -> impl std::future::Future<Output = Result<&mut Conn>> + Send {
        std::future::ready(Ok(self))
    }
}

impl Source for Pooled {
    fn conn(&mut self) -> impl std::future::Future<Output = Result<&mut Conn>> + Send {
        std::future::ready(Ok(&mut **self))
    }
}

/// A pooled connection taken only when a query needs it: a request answered from the caches
/// does not touch the pool.
pub struct Lazy<'a> {
    db: &'a Db,
    conn: Option<Pooled>,
}

impl Source for Lazy<'_> {
    async fn conn(&mut self) -> Result<&mut Conn> {
        if self.conn.is_none() {
            self.conn = Some(self.db.conn().await?);
        }
        Ok(self.conn.as_deref_mut().expect("just acquired"))
    }
}

/// The schema's migrations. A migration applied that this build does not know (a newer
/// replica applied it: a rolling upgrade, or a rollback) is no error: an older replica keeps
/// starting against the newer schema, which is why every migration adds to the schema and
/// takes nothing an earlier build reads away.
static POSTGRES: Migrator = Migrator { ignore_missing: true, ..sqlx::migrate!("migrations/postgres") };
static SQLITE: Migrator = Migrator { ignore_missing: true, ..sqlx::migrate!("migrations/sqlite") };

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("a record with the same unique value already exists")]
    Conflict,
    /// A record the write refers to is gone (a foreign key found nothing): deleted by a
    /// concurrent request between the caller's check and its write.
    #[error("a record the write refers to no longer exists")]
    Gone,
    #[error("the database is unavailable: {0}")]
    Unavailable(String),
    #[error("database error: {0}")]
    Database(sqlx::Error),
    /// A value the database cannot store as text (PostgreSQL refuses U+0000): the caller's
    /// input was bad, whatever entry point it came through.
    #[error("the input contains characters that cannot be stored: {0}")]
    InvalidInput(String),
    #[error("stored data is invalid: {0}")]
    Corrupt(String),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        match &e {
            sqlx::Error::Database(db) if db.kind() == sqlx::error::ErrorKind::UniqueViolation => StoreError::Conflict,
            sqlx::Error::Database(db) if db.kind() == sqlx::error::ErrorKind::ForeignKeyViolation => StoreError::Gone,
            sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed => StoreError::Unavailable(e.to_string()),
            sqlx::Error::Io(_) | sqlx::Error::Protocol(_) | sqlx::Error::WorkerCrashed => {
                pool::suspect();
                StoreError::Unavailable(e.to_string())
            }
            sqlx::Error::Database(db) if db.code().is_some_and(|c| is_transient(&c)) => {
                if db.code().is_some_and(|c| is_connection_lost(&c)) {
                    pool::suspect();
                }
                StoreError::Unavailable(e.to_string())
            }
            // 22021 character_not_in_repertoire (a NUL byte), 22P05 untranslatable_character.
            sqlx::Error::Database(db) if db.code().is_some_and(|c| c == "22021" || c == "22P05") => {
                StoreError::InvalidInput(db.message().to_string())
            }
            _ => StoreError::Database(e),
        }
    }
}

/// Database error codes that mean "the database is going away, not there yet or out of room",
/// not "this statement is wrong": PostgreSQL's connection exceptions (class 08), operator
/// intervention (57P01 admin shutdown, 57P02 crash shutdown, 57P03 cannot connect now, e.g.
/// while starting), insufficient resources (class 53: disk full, out of memory, too many
/// connections), a transaction PostgreSQL rolled back to break a deadlock (40P01) or a
/// serialization failure (40001); SQLite's busy and locked (5, 6), out of memory (7), a file
/// it may not or can no longer write (8 read-only, 10 I/O error, 14 cannot open) and a full
/// disk (13), with their extended codes (SQLite codes are numbers shorter than PostgreSQL's
/// five-character SQLSTATEs). A request that meets one is answered 503, which clients retry,
/// never 500, and the log says the store is unavailable.
fn is_transient(code: &str) -> bool {
    is_connection_lost(code)
        || code.starts_with("53")
        || code == "40P01"
        || code == "40001"
        || (code.len() < 5 && matches!(code.parse::<u32>().map(|c| c & 0xff), Ok(5 | 6 | 7 | 8 | 10 | 13 | 14)))
}

/// PostgreSQL error codes that may mean the connection itself is gone: the pool checks its
/// connections after one (see pool::suspect).
fn is_connection_lost(code: &str) -> bool {
    code.starts_with("08") || code.starts_with("57P")
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// A statement of the store's `Any` driver, before its values are bound.
pub(crate) type AnyQuery<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>;

/// Logs that the store is unavailable (`detail`), at most once a second with the number of
/// such errors not logged since: during an outage every request meets it, thousands a second.
pub fn warn_unavailable(detail: &str) {
    use std::sync::LazyLock;
    use std::sync::atomic::{AtomicU64, Ordering};
    static EPOCH: LazyLock<std::time::Instant> = LazyLock::new(std::time::Instant::now);
    /// When the last one was logged, in milliseconds since [`EPOCH`] plus one (0: never).
    static LOGGED: AtomicU64 = AtomicU64::new(0);
    static NOT_LOGGED: AtomicU64 = AtomicU64::new(0);
    let now = EPOCH.elapsed().as_millis() as u64 + 1;
    let last = LOGGED.load(Ordering::SeqCst);
    if (last == 0 || now >= last + 1000)
        && LOGGED.compare_exchange(last, now, Ordering::SeqCst, Ordering::SeqCst).is_ok()
    {
        let not_logged = NOT_LOGGED.swap(0, Ordering::SeqCst);
        tracing::warn!(error = %detail, not_logged_since_the_last = not_logged, "store unavailable");
    } else {
        NOT_LOGGED.fetch_add(1, Ordering::SeqCst);
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    Sqlite,
}

impl Backend {
    /// The store a database URL names (`sqlite:...`, otherwise PostgreSQL).
    pub fn of_url(url: &str) -> Self {
        if url.starts_with("sqlite:") { Backend::Sqlite } else { Backend::Postgres }
    }
}

/// The connection pool and which database is behind it.
#[derive(Clone, Debug)]
pub struct Db {
    pool: pool::Pool,
    backend: Backend,
}

/// Adds `mode=rwc` to a SQLite URL (create the file) and creates its folder.
fn prepare_sqlite_url(url: &str) -> Result<String> {
    let rest = url.trim_start_matches("sqlite://").trim_start_matches("sqlite:");
    let (path, query) = match rest.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (rest, None),
    };
    if path.is_empty() || path == ":memory:" {
        return Err(StoreError::Unavailable(
            "an in-memory SQLite database cannot be shared by the pool; use a file".into(),
        ));
    }
    if let Some(parent) = Path::new(path).parent()
        && !parent.as_os_str().is_empty()
        && !parent.exists()
    {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(|e| StoreError::Unavailable(format!("cannot create {}: {e}", parent.display())))?;
    }
    // A new database file is made readable by latch's user only (it holds password hashes and
    // personal data; the default umask would let every local user read it); SQLite gives its
    // log and shared-memory files the same mode.
    if !Path::new(path).exists() {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| StoreError::Unavailable(format!("cannot create {path}: {e}")))?;
    }
    Ok(match query {
        Some(q) if q.contains("mode=") => url.to_string(),
        Some(q) => format!("sqlite://{path}?{q}&mode=rwc"),
        None => format!("sqlite://{path}?mode=rwc"),
    })
}

/// Prepares a new connection. On SQLite: WAL lets readers run beside the writer (the log's disk
/// space is given back down to its limit when it starts over); LIKE is case-sensitive as on
/// PostgreSQL so both backends search alike; writers wait for the lock through latch's busy
/// handler (see sqlite_busy).
async fn prepare(conn: &mut Conn, backend: Backend) -> std::result::Result<(), sqlx::Error> {
    if backend == Backend::Sqlite {
        let pragmas = format!(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; \
             PRAGMA journal_size_limit = {}; PRAGMA foreign_keys = ON; \
             PRAGMA busy_timeout = 5000; PRAGMA case_sensitive_like = ON;",
            sqlite_busy::LOG_LIMIT
        );
        conn.execute(pragmas.as_str()).await?;
        let enabled: i64 = sqlx::query_scalar(sqlite_busy::ENABLE).fetch_one(&mut *conn).await?;
        if enabled != 1 {
            return Err(sqlx::Error::Protocol("the SQLite busy handler was refused".into()));
        }
    }
    Ok(())
}

impl Db {
    /// Connects to `url` (`sqlite:...` or `postgres://...`).
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self> {
        sqlx::any::install_default_drivers();
        let backend = Backend::of_url(url);
        let url = match backend {
            Backend::Sqlite => {
                sqlite_busy::install();
                sqlite_busy::long_waiters(max_connections);
                prepare_sqlite_url(url)?
            }
            Backend::Postgres => url.to_string(),
        };
        let options: AnyConnectOptions =
            url.parse().map_err(|e: sqlx::Error| StoreError::Unavailable(format!("bad database URL: {e}")))?;
        let pool = pool::Pool::new(options, backend, max_connections);
        // One connection now, so that a database that cannot be reached fails here.
        drop(pool.acquire().await?);
        Ok(Self { pool, backend })
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    fn migrator(&self) -> &'static Migrator {
        match self.backend {
            Backend::Postgres => &POSTGRES,
            Backend::Sqlite => &SQLITE,
        }
    }

    /// Applies the migrations that are not applied yet.
    pub async fn migrate(&self) -> Result<()> {
        let mut c = self.conn().await?;
        self.migrator().run(&mut *c).await?;
        Ok(())
    }

    /// The store answers and every migration latch knows is applied.
    pub async fn is_ready(&self) -> bool {
        let latest = self.migrator().iter().map(|m| m.version).max().unwrap_or(0);
        let Ok(mut c) = self.conn().await else { return false };
        let row: std::result::Result<Option<(i64,)>, _> =
            sqlx::query_as("SELECT MAX(version) FROM _sqlx_migrations WHERE success = $1")
                .bind(true)
                .fetch_optional(&mut *c)
                .await;
        matches!(row, Ok(Some((v,))) if v >= latest)
    }

    pub async fn conn(&self) -> Result<Pooled> {
        Ok(self.pool.acquire().await?)
    }

    /// A connection taken from the pool on first use (see [`Lazy`]).
    pub fn lazy(&self) -> Lazy<'_> {
        Lazy { db: self, conn: None }
    }

    /// A write transaction. On SQLite it takes the write lock up front (`BEGIN IMMEDIATE`), so
    /// two writers wait for each other instead of failing when one upgrades a read.
    pub async fn begin(&self) -> Result<Tx> {
        let begin = match self.backend {
            Backend::Postgres => "BEGIN",
            Backend::Sqlite => "BEGIN IMMEDIATE",
        };
        Ok(Tx::begin(self.conn().await?, begin).await?)
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Pool gauges for `/metrics`: (open connections, idle connections).
    pub fn pool_usage(&self) -> (u32, usize) {
        self.pool.usage()
    }

    /// Checks the connection (used by tests and `readyz`).
    pub async fn ping(&self) -> Result<()> {
        let mut c = self.conn().await?;
        c.ping().await?;
        Ok(())
    }
}

/// Integer flag helpers (flags are stored as 0/1).
pub fn flag(b: bool) -> i64 {
    i64::from(b)
}

/// Lower-cased key for case-insensitive uniqueness (Unicode-aware, same on both backends).
pub fn fold(s: &str) -> String {
    s.trim().to_lowercase()
}

/// Lowercases `s` one character at a time, as PostgreSQL's `lower()` does (and latch's SQLite
/// one, `sqlite_text`): unlike [`str::to_lowercase`], a capital sigma is always σ, never the
/// final ς, so a fragment of a word folds as the word does.
pub fn lower_chars(s: &str) -> String {
    s.chars().flat_map(char::to_lowercase).collect()
}

/// Escapes `%`, `_` and `\` for a LIKE pattern with `ESCAPE '\'`.
pub fn like_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Decodes a JSON column.
pub fn from_json<T: serde::de::DeserializeOwned>(column: &str, raw: &str) -> Result<T> {
    serde_json::from_str(raw).map_err(|e| StoreError::Corrupt(format!("{column}: {e}")))
}

pub fn to_json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".into())
}

#[cfg(test)]
mod tests {
    use super::is_transient;

    #[test]
    fn connection_loss_is_transient_and_statement_errors_are_not() {
        let transient = ["08006", "08003", "57P01", "57P02", "57P03", "53300", "53100", "53200", "40P01", "40001"];
        // SQLite: busy, locked, out of memory, read-only (1032: the file was moved), I/O
        // errors (266: a read), full, cannot open.
        let sqlite = ["5", "517", "6", "262", "7", "8", "1032", "10", "266", "13", "14"];
        for code in transient.into_iter().chain(sqlite) {
            assert!(is_transient(code), "{code}");
        }
        for code in ["23505", "23502", "42P01", "42601", "22001", "40002", "19", "2067", "1", "11", "26"] {
            assert!(!is_transient(code), "{code}");
        }
    }
}
