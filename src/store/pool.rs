//! latch's connection pool: at most `max` connections, handed out last-in first-out, given back
//! when the guard ([`Pooled`]) is dropped.
//!
//! It replaces sqlx's pool for one reason: sqlx checks every connection it gets back with a
//! round trip (a ping), in a task it spawns for the purpose, and a request of latch takes and
//! gives back one or two connections. Without them refresh ran 16% faster on SQLite and 10% on
//! PostgreSQL (bench/NOTES.md).
//! What the ping guarded against is handled where it arises instead:
//! - a transaction dropped without commit or rollback (an error, a cancelled request) marks its
//!   connection, which is rolled back at once in a task of its own before it is used again (on
//!   SQLite the transaction holds the write lock);
//! - a statement cancelled half-way leaves nothing behind that the driver does not settle
//!   itself before the next statement (SQLite runs statements in order on the connection's
//!   thread; the PostgreSQL driver reads what is left of the last answer first);
//! - a connection that broke (the database restarted) fails its next statement, and the store
//!   error that reports it ([`suspect`]) makes the pool check every connection with a round trip
//!   before it hands it out again. A connection that sat idle for over [`CHECK_AFTER_IDLE`] is
//!   checked too (a firewall may have cut it meanwhile), one idle for [`IDLE_TIMEOUT`] is closed.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use sqlx::any::AnyConnectOptions;
use sqlx::{AnyConnection, Connection, Executor};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::Backend;

/// How long a request waits for a connection (all in use, or a new one being opened).
pub const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(3);
/// A connection idle for longer is checked before it is handed out.
pub const CHECK_AFTER_IDLE: Duration = Duration::from_secs(1);
/// A connection idle for longer is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// Histogram of how long requests waited for a connection when every one was in use (a request
/// that found one free is not recorded): how often the pool is the bottleneck, and for how long.
pub const WAIT_METRIC: &str = "latch_store_pool_wait_seconds";
/// Histogram of how long a connection was held, from being handed out to being given back: with
/// [`WAIT_METRIC`] it tells slow statements (long holds) from requests waiting for a CPU (long
/// waits, short holds; bench/NOTES.md).
pub const HOLD_METRIC: &str = "latch_store_pool_hold_seconds";

/// Bumped by every store error that may mean a broken connection: connections checked before
/// the latest bump are checked again before they are handed out.
static SUSPECT: AtomicU64 = AtomicU64::new(0);

/// A store error that may come from a broken connection was seen.
pub(super) fn suspect() {
    SUSPECT.fetch_add(1, Ordering::SeqCst);
}

fn suspected() -> u64 {
    SUSPECT.load(Ordering::SeqCst)
}

struct Idle {
    conn: AnyConnection,
    since: Instant,
    /// [`SUSPECT`] when the connection was opened or last checked.
    checked: u64,
}

struct Shared {
    options: AnyConnectOptions,
    backend: Backend,
    permits: Arc<Semaphore>,
    /// The idle connections, the most recently used last.
    idle: Mutex<Vec<Idle>>,
    open: AtomicUsize,
    closed: AtomicBool,
}

impl Shared {
    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<Idle>> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Closes a connection that is still sound (a goodbye to the server), in the background.
    fn retire(&self, conn: AnyConnection) {
        self.open.fetch_sub(1, Ordering::SeqCst);
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = conn.close().await;
            });
        }
    }

    /// Forgets a broken connection.
    fn discard(&self, conn: AnyConnection) {
        self.open.fetch_sub(1, Ordering::SeqCst);
        drop(conn);
    }
}

/// The pool (cheap to clone).
#[derive(Clone)]
pub struct Pool {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (open, idle) = self.usage();
        f.debug_struct("Pool").field("backend", &self.shared.backend).field("open", &open).field("idle", &idle).finish()
    }
}

impl Pool {
    /// A pool of at most `max` connections to `options`, none opened yet; a task closes those
    /// idle for [`IDLE_TIMEOUT`].
    pub fn new(options: AnyConnectOptions, backend: Backend, max: u32) -> Self {
        let shared = Arc::new(Shared {
            options,
            backend,
            permits: Arc::new(Semaphore::new(max.max(1) as usize)),
            idle: Mutex::new(Vec::new()),
            open: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
        });
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(reap(Arc::downgrade(&shared)));
        }
        Self { shared }
    }

    /// A connection: an idle one (checked first when it idled long or a store error made every
    /// connection suspect), or a new one.
    pub async fn acquire(&self) -> Result<Pooled, sqlx::Error> {
        tokio::time::timeout(ACQUIRE_TIMEOUT, self.take()).await.map_err(|_| sqlx::Error::PoolTimedOut)?
    }

    async fn take(&self) -> Result<Pooled, sqlx::Error> {
        let shared = &self.shared;
        let permit = match shared.permits.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(tokio::sync::TryAcquireError::Closed) => return Err(sqlx::Error::PoolClosed),
            Err(tokio::sync::TryAcquireError::NoPermits) => {
                let start = Instant::now();
                let permit = shared.permits.clone().acquire_owned().await.map_err(|_| sqlx::Error::PoolClosed)?;
                metrics::histogram!(WAIT_METRIC).record(start.elapsed().as_secs_f64());
                permit
            }
        };
        if shared.closed.load(Ordering::SeqCst) {
            return Err(sqlx::Error::PoolClosed);
        }
        let mut permit = Some(permit);
        loop {
            let Some(idle) = shared.idle().pop() else { break };
            let idle_for = idle.since.elapsed();
            if idle_for > IDLE_TIMEOUT {
                shared.retire(idle.conn);
                continue;
            }
            let now = suspected();
            let check = idle_for > CHECK_AFTER_IDLE || idle.checked < now;
            // From here a cancelled acquire gives the connection back through the guard.
            let mut conn = Pooled::new(idle.conn, shared.clone(), permit.take(), idle.checked);
            if !check {
                return Ok(conn);
            }
            match conn.ping().await {
                Ok(()) => {
                    conn.checked = now;
                    return Ok(conn);
                }
                Err(e) => {
                    tracing::debug!(error = %e, "dropping a pooled connection that failed its check");
                    permit = conn.permit.take();
                    let raw = conn.conn.take().expect("held until dropped");
                    shared.discard(raw);
                }
            }
        }
        let checked = suspected();
        let raw = connect(&shared.options, shared.backend).await?;
        shared.open.fetch_add(1, Ordering::SeqCst);
        Ok(Pooled::new(raw, shared.clone(), permit, checked))
    }

    /// Closes the idle connections and refuses new acquisitions; connections in use are closed
    /// when they are given back.
    pub async fn close(&self) {
        self.shared.closed.store(true, Ordering::SeqCst);
        self.shared.permits.close();
        let idle: Vec<Idle> = std::mem::take(&mut *self.shared.idle());
        for i in idle {
            self.shared.open.fetch_sub(1, Ordering::SeqCst);
            let _ = i.conn.close().await;
        }
    }

    /// (open connections, idle connections).
    pub fn usage(&self) -> (u32, usize) {
        (self.shared.open.load(Ordering::SeqCst) as u32, self.shared.idle().len())
    }
}

/// Opens a connection and prepares it for latch.
async fn connect(options: &AnyConnectOptions, backend: Backend) -> Result<AnyConnection, sqlx::Error> {
    let mut conn = AnyConnection::connect_with(options).await?;
    super::prepare(&mut conn, backend).await?;
    Ok(conn)
}

/// Closes connections idle for [`IDLE_TIMEOUT`], until the pool is gone or closed.
async fn reap(shared: Weak<Shared>) {
    loop {
        tokio::time::sleep(IDLE_TIMEOUT / 10).await;
        let Some(shared) = shared.upgrade() else { return };
        if shared.closed.load(Ordering::SeqCst) {
            return;
        }
        let stale: Vec<Idle> = {
            let mut idle = shared.idle();
            // Oldest first: the stale ones are at the front.
            let keep = idle.iter().position(|i| i.since.elapsed() <= IDLE_TIMEOUT).unwrap_or(idle.len());
            idle.drain(..keep).collect()
        };
        for i in stale {
            shared.retire(i.conn);
        }
    }
}

/// A connection taken from the pool; dropping it gives it back.
pub struct Pooled {
    conn: Option<AnyConnection>,
    shared: Arc<Shared>,
    /// Released after the connection is back among the idle ones (fields drop after `drop`).
    permit: Option<OwnedSemaphorePermit>,
    checked: u64,
    /// A transaction may be open on it.
    dirty: bool,
    /// When it was handed out.
    taken: Instant,
}

impl Pooled {
    fn new(conn: AnyConnection, shared: Arc<Shared>, permit: Option<OwnedSemaphorePermit>, checked: u64) -> Self {
        Self { conn: Some(conn), shared, permit, checked, dirty: false, taken: Instant::now() }
    }
}

impl Deref for Pooled {
    type Target = AnyConnection;
    fn deref(&self) -> &AnyConnection {
        self.conn.as_ref().expect("held until dropped")
    }
}

impl DerefMut for Pooled {
    fn deref_mut(&mut self) -> &mut AnyConnection {
        self.conn.as_mut().expect("held until dropped")
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else { return };
        metrics::histogram!(HOLD_METRIC).record(self.taken.elapsed().as_secs_f64());
        let shared = self.shared.clone();
        if shared.closed.load(Ordering::SeqCst) {
            shared.retire(conn);
            return;
        }
        let checked = self.checked;
        if !self.dirty {
            shared.idle().push(Idle { conn, since: Instant::now(), checked });
            return;
        }
        // A transaction was left open: rolled back before anyone else uses the connection,
        // which stays counted against the pool (the permit goes along) until then.
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            shared.discard(conn);
            return;
        };
        let permit = self.permit.take();
        rt.spawn(async move {
            let mut conn = conn;
            match conn.execute("ROLLBACK").await {
                // A statement error ("no transaction is active") leaves the connection sound.
                Ok(_) | Err(sqlx::Error::Database(_)) => {
                    shared.idle().push(Idle { conn, since: Instant::now(), checked });
                }
                Err(e) => {
                    tracing::debug!(error = %e, "dropping a pooled connection whose rollback failed");
                    shared.discard(conn);
                }
            }
            drop(permit);
        });
    }
}

/// A transaction on a pooled connection. Dropped without [`Tx::commit`], it is rolled back.
pub struct Tx {
    conn: Pooled,
}

impl Tx {
    /// Begins a transaction with `begin` (`BEGIN`, or `BEGIN IMMEDIATE` on SQLite).
    pub(super) async fn begin(mut conn: Pooled, begin: &'static str) -> Result<Self, sqlx::Error> {
        conn.dirty = true;
        conn.execute(begin).await?;
        Ok(Self { conn })
    }

    pub async fn commit(mut self) -> Result<(), sqlx::Error> {
        self.conn.execute("COMMIT").await?;
        self.conn.dirty = false;
        Ok(())
    }

    pub async fn rollback(mut self) -> Result<(), sqlx::Error> {
        self.conn.execute("ROLLBACK").await?;
        self.conn.dirty = false;
        Ok(())
    }

    /// Marks a point inside the transaction that [`Tx::rollback_to_savepoint`] returns to (one
    /// level; both stores accept the same statements).
    pub async fn savepoint(&mut self) -> Result<(), sqlx::Error> {
        self.conn.execute("SAVEPOINT part").await.map(|_| ())
    }

    /// Keeps what was written since [`Tx::savepoint`], as part of the transaction.
    pub async fn release_savepoint(&mut self) -> Result<(), sqlx::Error> {
        self.conn.execute("RELEASE SAVEPOINT part").await.map(|_| ())
    }

    /// Undoes what was written since [`Tx::savepoint`] (also after a failed statement, which
    /// on PostgreSQL leaves the transaction usable again) and ends the savepoint.
    pub async fn rollback_to_savepoint(&mut self) -> Result<(), sqlx::Error> {
        self.conn.execute("ROLLBACK TO SAVEPOINT part").await?;
        self.conn.execute("RELEASE SAVEPOINT part").await.map(|_| ())
    }
}

impl Deref for Tx {
    type Target = AnyConnection;
    fn deref(&self) -> &AnyConnection {
        &self.conn
    }
}

impl DerefMut for Tx {
    fn deref_mut(&mut self) -> &mut AnyConnection {
        &mut self.conn
    }
}
