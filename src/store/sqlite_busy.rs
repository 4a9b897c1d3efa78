//! How a SQLite connection waits for the write lock another connection holds.
//!
//! SQLite lets one connection write at a time. Its own busy handler (what `busy_timeout` sets)
//! sleeps 1, 2, 5, 10, 15, 20, 25 ... 100 ms between tries, while a write of latch holds the lock
//! for tens of microseconds: under a steady stream of writes a waiting connection sleeps through
//! many free moments and loses the lock to connections that did not sleep, so a few writes wait
//! tens of milliseconds (the p99 of the token exchange and of refresh on SQLite).
//!
//! latch's connections instead wait for the lock to be released: every commit of this process
//! wakes the waiting connections at once (SQLite's WAL hook runs after a commit has released the
//! lock), and a waiter also tries again after at most [`MAX_PAUSE`], for releases no commit
//! announces (a rollback, another process). It gives up after [`GIVE_UP`], as `busy_timeout =
//! 5000` did (the request is then answered 503). Taking over the WAL hook means taking over what
//! SQLite's own hook did: a passive checkpoint once the log holds [`CHECKPOINT_PAGES`] pages.
//!
//! SQLite's hook checkpoints after every commit once the log holds that many pages, for as long
//! as the log has not started over (which takes a checkpoint that copied all of it and a moment
//! without readers). Every checkpoint that finds something to copy begins with an fsync of the
//! log, inside the request that committed: during a login storm here that was about 47 fsyncs a
//! second, 1 to 30 ms each. latch checkpoints a database at most once per [`CHECKPOINT_EVERY`] instead.
//! Checkpointing less often than that (once per 1,000 new pages, or on a thread of its own) let
//! the log grow to 25-40 MB under steady writes: it starts over only at the start of a write
//! that finds all of it copied, so the committing connection has to be the one that copies.
//!
//! Under writes that never pause (a refresh storm) even that moment never comes, with SQLite's
//! hook as with latch's: some connection is always reading an older part of the log, so it
//! cannot start over, and in the benchmark it grew to 340 MB (SQLite's hook) and 2.5 GB (one
//! checkpoint per 50 ms). Once the log holds [`RESTART_PAGES`] pages, the checkpoint is a
//! restarting one: it holds the write lock while it copies the rest and waits for the readers of
//! the log to finish, so the next write starts the log over. It waits at most
//! [`RESTART_WAIT`] for the lock and the readers (a long read, such as an export, may hold
//! the log for seconds), that much again for every further [`RESTART_PAGES`] the log holds, up
//! to [`RESTART_WAIT_MAX`] (on an overloaded machine a reader may be off the CPU for longer than
//! the short wait, and a log that keeps growing is worth a longer stop).
//!
//! A restart that could not finish was held up by a reader, and what it copied tells which kind.
//! A reader that was merely slow (off the CPU for a while) is gone by the next try: the copy gets
//! further each time, and the restart is tried again at the next checkpoint, 50 ms later. A long
//! read (an export) keeps the snapshot it began with, so the copy stops at the same frame try
//! after try: the pause before the next try then doubles, up to [`RESTART_RETRY_MAX`], so writers
//! do not stop again and again for a reader that will not leave. (Doubling after every failure,
//! as latch first did, let the log reach 64-228 MB under the full test suite's load, where readers
//! are often off the CPU for longer than the wait: a few slow readers in a row pushed the pause to
//! a second, while the log grew by tens of megabytes.) After a restart, `journal_size_limit`
//! ([`LOG_LIMIT`]) gives back the disk space of a log that had grown past it.
//!
//! A writer that waits longer than [`LONG_WAIT`] waits for a long transaction (an import), and
//! each keeps a pooled connection while it waits: only half the pool may wait so (see
//! [`long_waiters`]); the next writer gives up at once with a 503, and the rest of the pool stays
//! for the reads.
//!
//! sqlx does not hand out the raw handle of a connection in a pool of `Any` connections, so the
//! hooks are installed through SQLite itself: [`install`] registers an auto-extension that gives
//! every new connection the SQL function `latch_busy_wait()`, and [`ENABLE`] (run when a
//! connection is opened, after sqlx set its own timeout) installs them on the calling connection.

use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::ptr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, LazyLock, Mutex, Once};
use std::time::{Duration, Instant};

use libsqlite3_sys as ffi;

/// Run on a new connection: switches it to latch's busy handler; answers 1.
pub const ENABLE: &str = "SELECT latch_busy_wait()";

/// How long a connection waits for the lock before the statement fails with `SQLITE_BUSY`.
pub const GIVE_UP: Duration = Duration::from_secs(5);

/// The longest a waiter sleeps between two tries.
pub const MAX_PAUSE: Duration = Duration::from_millis(1);

/// A writer that has waited this long waits for a long transaction (an import, a dry run, the
/// deletion of an application with many tokens), not for other requests' writes (which hold the
/// lock for microseconds, a restarting checkpoint for at most [`RESTART_WAIT_MAX`]). Only
/// [`long_waiters`] such writers wait on at once; the next gives up (503) instead of keeping a
/// pooled connection for up to [`GIVE_UP`], so that waiting writers never take every connection
/// from the reads (the login pages, `/readyz`, the revocation poll).
pub const LONG_WAIT: Duration = Duration::from_secs(2);

/// How many writers may wait longer than [`LONG_WAIT`] at once (set from the pool's size).
static LONG_WAITERS: AtomicUsize = AtomicUsize::new(usize::MAX);
/// Writers let past [`LONG_WAIT`] whose wait has not ended yet (it ends when they give up,
/// commit, wait again, or their connection's thread ends; a writer whose statement then writes
/// nothing, or whose transaction rolls back, keeps its place until its connection next waits or
/// commits, which lowers the cap for a while: the count errs towards turning writers away).
static LONG_ADMITTED: AtomicUsize = AtomicUsize::new(0);

/// Whether the current wait of this thread's connection was let past [`LONG_WAIT`]; a thread
/// that ends (its connection closed) gives its place back.
struct Admission(Cell<bool>);

impl Drop for Admission {
    fn drop(&mut self) {
        if self.0.get() {
            LONG_ADMITTED.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Ends this thread's admission past [`LONG_WAIT`], if it has one.
fn end_admission() {
    let _ = ADMITTED.try_with(|a| {
        if a.0.replace(false) {
            LONG_ADMITTED.fetch_sub(1, Ordering::SeqCst);
        }
    });
}

/// Counter of writers that gave up at [`LONG_WAIT`] because enough others were waiting.
pub const TURNED_AWAY_METRIC: &str = "latch_sqlite_writers_turned_away_total";

/// Lets half the connections of a pool of `pool_size` (at least one) wait for a long
/// transaction; the others stay for the reads.
pub fn long_waiters(pool_size: u32) {
    LONG_WAITERS.store((pool_size / 2).max(1) as usize, Ordering::SeqCst);
}

/// SQLite's default auto-checkpoint threshold, kept.
const CHECKPOINT_PAGES: c_int = 1000;

/// At most one checkpoint per this many milliseconds (per database file).
const CHECKPOINT_EVERY: u64 = 50;

/// From this size of the log on (16 MiB in 4 KiB pages), a checkpoint restarts it.
const RESTART_PAGES: c_int = 4 * CHECKPOINT_PAGES;

/// How long a restarting checkpoint waits for the write lock, and then for the log's readers,
/// per [`RESTART_PAGES`] in the log.
const RESTART_WAIT: Duration = Duration::from_millis(10);

/// The longest a restarting checkpoint waits.
const RESTART_WAIT_MAX: Duration = Duration::from_millis(250);

/// Histogram of how long SQLite writers of this process waited for the write lock (seconds).
pub const LOCK_WAIT_METRIC: &str = "latch_sqlite_lock_wait_seconds";

/// Histogram of this process's checkpoints (seconds), by `mode`: `passive`, or `restart` (which
/// holds the write lock, so writers wait for it).
pub const CHECKPOINT_METRIC: &str = "latch_sqlite_checkpoint_seconds";

/// Counter of restarting checkpoints that could not finish (a reader held the log).
pub const HELD_UP_METRIC: &str = "latch_sqlite_restarts_held_up_total";

/// After restarts that a long read held up, the next is tried no sooner than 50 ms doubled per
/// such failure, up to this (milliseconds).
const RESTART_RETRY_MAX: u64 = 1000;

/// `PRAGMA journal_size_limit` for the SQLite store (bytes): a log that grew past this is cut
/// back to it when it starts over.
pub const LOG_LIMIT: u64 = 64 << 20;

/// One database file's checkpoints in this process.
#[derive(Default)]
struct Log {
    /// When the last one began, in milliseconds since [`EPOCH`] plus one (0: none yet).
    last: AtomicU64,
    count: AtomicU64,
    /// No restarting checkpoint before this (milliseconds since [`EPOCH`] plus one).
    restart_after: AtomicU64,
    /// Restarts in a row that could not finish because a read held the log.
    restart_failures: AtomicU64,
    /// The frames copied when the last restart could not finish, plus one (0: it finished).
    stuck_at: AtomicU64,
    restarts: AtomicU64,
    /// Restarting checkpoints that could not finish.
    held_up: AtomicU64,
}

static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);
/// The logs by database file (as SQLite names it): one small entry per file for the life of
/// the process, found when a connection is opened.
static LOGS: LazyLock<Mutex<HashMap<String, &'static Log>>> = LazyLock::new(Default::default);

fn log_of(path: &str) -> &'static Log {
    let mut logs = LOGS.lock().unwrap_or_else(|e| e.into_inner());
    logs.entry(path.to_string()).or_insert_with(|| Box::leak(Box::default()))
}

/// A counter of the log of the database file at `path` (absolute, as SQLite names it).
fn counted(path: &str, counter: fn(&Log) -> &AtomicU64) -> u64 {
    LOGS.lock().unwrap_or_else(|e| e.into_inner()).get(path).map_or(0, |l| counter(l).load(Ordering::SeqCst))
}

/// Checkpoints this process ran on the database file at `path`.
pub fn checkpoints(path: &str) -> u64 {
    counted(path, |l| &l.count)
}

/// Restarting checkpoints this process ran on the database file at `path`.
pub fn restarts(path: &str) -> u64 {
    counted(path, |l| &l.restarts)
}

/// Restarting checkpoints this process tried on the database file at `path` that could not
/// finish.
pub fn restarts_held_up(path: &str) -> u64 {
    counted(path, |l| &l.held_up)
}

fn now_ms() -> u64 {
    EPOCH.elapsed().as_millis() as u64 + 1
}

/// Whether a commit that left `pages` pages in the log should checkpoint now, and how (passive
/// or restarting); takes the turn when it should.
fn checkpoint_due(log: &Log, pages: c_int) -> Option<c_int> {
    if pages < CHECKPOINT_PAGES {
        return None;
    }
    let now = now_ms();
    let last = log.last.load(Ordering::SeqCst);
    let due = (last == 0 || now >= last + CHECKPOINT_EVERY)
        && log.last.compare_exchange(last, now, Ordering::SeqCst, Ordering::SeqCst).is_ok();
    match due {
        false => None,
        true if pages >= RESTART_PAGES && now >= log.restart_after.load(Ordering::SeqCst) => {
            Some(ffi::SQLITE_CHECKPOINT_RESTART)
        }
        true => Some(ffi::SQLITE_CHECKPOINT_PASSIVE),
    }
}

/// Commits of this process so far. A commit with nobody waiting only counts (no lock, no
/// wake-up call); waiters register in `WAITERS` and sleep on `COMMITTED`.
static COMMITS: AtomicU64 = AtomicU64::new(0);
static WAITERS: AtomicUsize = AtomicUsize::new(0);
static LOCK: Mutex<()> = Mutex::new(());
static COMMITTED: Condvar = Condvar::new();

thread_local! {
    /// When the connection of this thread began to wait, and the commit count it last saw
    /// (sqlx runs each SQLite connection on a thread of its own).
    static WAIT: Cell<(Option<Instant>, u64)> = const { Cell::new((None, 0)) };
    /// How long the latest wait of this thread's connection had lasted at its latest try, not yet
    /// recorded: recorded at the connection's next commit, its next wait or when it gives up, so
    /// the figure is short of the real wait by at most the last pause ([`MAX_PAUSE`]).
    static WAITED: Cell<Option<Duration>> = const { Cell::new(None) };
    /// Set while this thread's connection runs a restarting checkpoint: how long it waits at most.
    static RESTARTING: Cell<Option<Duration>> = const { Cell::new(None) };
    static ADMITTED: Admission = const { Admission(Cell::new(false)) };
}

/// Records the wait in [`WAITED`], if there is one, in [`LOCK_WAIT_METRIC`].
fn record_wait() {
    if let Some(d) = WAITED.try_with(Cell::take).ok().flatten() {
        metrics::histogram!(LOCK_WAIT_METRIC).record(d.as_secs_f64());
    }
}

/// Commits counted so far.
pub fn commits() -> u64 {
    COMMITS.load(Ordering::SeqCst)
}

/// Waits until a commit after `seen` or for `at_most`; answers the commit count. The waiter
/// registers before it reads the count and a commit counts before it looks for waiters, so one
/// of the two always sees the other (and `at_most` bounds any wait regardless).
fn wait_for_commit(seen: u64, at_most: Duration) -> u64 {
    WAITERS.fetch_add(1, Ordering::SeqCst);
    let guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let waited = COMMITTED.wait_timeout_while(guard, at_most, |_| commits() == seen);
    drop(waited.unwrap_or_else(|e| e.into_inner()));
    WAITERS.fetch_sub(1, Ordering::SeqCst);
    commits()
}

/// SQLite's busy callback: nonzero to try again, zero to give up. The first try again comes at
/// once (the holder may be done already); later ones after a commit, or [`MAX_PAUSE`].
unsafe extern "C" fn busy(_arg: *mut c_void, count: c_int) -> c_int {
    let now = Instant::now();
    let restarting = RESTARTING.try_with(Cell::get).ok().flatten();
    let (since, seen) = WAIT.try_with(Cell::get).unwrap_or((None, 0));
    let (since, seen) = match since {
        Some(t) if count > 0 => (t, seen),
        _ => {
            if restarting.is_none() {
                record_wait();
                let _ = WAITED.try_with(|w| w.set(Some(Duration::ZERO)));
            }
            let seen = commits();
            let _ = WAIT.try_with(|w| w.set((Some(now), seen)));
            end_admission();
            std::thread::yield_now();
            return 1;
        }
    };
    let waited = now.duration_since(since);
    if restarting.is_none() {
        let _ = WAITED.try_with(|w| w.set(Some(waited)));
    }
    if waited >= restarting.unwrap_or(GIVE_UP) {
        if restarting.is_none() {
            record_wait();
            end_admission();
        }
        return 0;
    }
    // Past LONG_WAIT, as many writers as allowed wait on; the next gives up.
    if restarting.is_none() && waited >= LONG_WAIT && ADMITTED.try_with(|a| !a.0.get()).unwrap_or(false) {
        if LONG_ADMITTED.fetch_add(1, Ordering::SeqCst) >= LONG_WAITERS.load(Ordering::SeqCst) {
            LONG_ADMITTED.fetch_sub(1, Ordering::SeqCst);
            record_wait();
            metrics::counter!(TURNED_AWAY_METRIC).increment(1);
            return 0;
        }
        let _ = ADMITTED.try_with(|a| a.0.set(true));
    }
    let seen = wait_for_commit(seen, MAX_PAUSE);
    let _ = WAIT.try_with(|w| w.set((Some(since), seen)));
    1
}

/// SQLite's WAL hook, called after each commit with the pages now in the log: wakes the
/// waiting connections, and checkpoints as SQLite's own hook would, at most once per
/// [`CHECKPOINT_EVERY`], restarting the log once it is [`RESTART_PAGES`] long.
unsafe extern "C" fn committed(arg: *mut c_void, db: *mut ffi::sqlite3, name: *const c_char, pages: c_int) -> c_int {
    COMMITS.fetch_add(1, Ordering::SeqCst);
    record_wait();
    end_admission();
    if WAITERS.load(Ordering::SeqCst) > 0 {
        // Taken so that a waiter between its check and its sleep is not passed by.
        drop(LOCK.lock().unwrap_or_else(|e| e.into_inner()));
        COMMITTED.notify_all();
    }
    // SAFETY: `arg` is null (a database in memory) or the `&'static Log` `enable` registered.
    let Some(log) = (unsafe { arg.cast_const().cast::<Log>().as_ref() }) else {
        return ffi::SQLITE_OK;
    };
    let Some(mode) = checkpoint_due(log, pages) else {
        return ffi::SQLITE_OK;
    };
    log.count.fetch_add(1, Ordering::SeqCst);
    let restart = mode == ffi::SQLITE_CHECKPOINT_RESTART;
    if restart {
        let wait = RESTART_WAIT * (pages / RESTART_PAGES).max(1) as u32;
        let _ = RESTARTING.try_with(|r| r.set(Some(wait.min(RESTART_WAIT_MAX))));
    }
    // SAFETY: SQLite passes the committing connection, which holds no transaction any more,
    // and the schema name; a checkpoint from the WAL hook is what sqlite3WalDefaultHook does.
    let started = Instant::now();
    let (mut frames, mut copied) = (0, 0);
    let rc = unsafe { ffi::sqlite3_wal_checkpoint_v2(db, name, mode, &mut frames, &mut copied) };
    let _ = RESTARTING.try_with(|r| r.set(None));
    let kind = if restart { "restart" } else { "passive" };
    metrics::histogram!(CHECKPOINT_METRIC, "mode" => kind).record(started.elapsed().as_secs_f64());
    if restart {
        match rc == ffi::SQLITE_OK {
            true => log.restarted(),
            false => log.held_up(copied),
        }
    }
    ffi::SQLITE_OK
}

impl Log {
    fn restarted(&self) {
        self.restarts.fetch_add(1, Ordering::SeqCst);
        self.restart_failures.store(0, Ordering::SeqCst);
        self.stuck_at.store(0, Ordering::SeqCst);
    }

    /// A restart could not finish, with `copied` frames of the log copied: when that is where the
    /// last one stopped too, a read has held the log since, and the pause before the next try
    /// doubles; otherwise the next try comes with the next checkpoint.
    fn held_up(&self, copied: c_int) {
        self.held_up.fetch_add(1, Ordering::SeqCst);
        metrics::counter!(HELD_UP_METRIC).increment(1);
        let at = u64::try_from(copied).map_or(0, |c| c + 1);
        let failures = match self.stuck_at.swap(at, Ordering::SeqCst) == at && at != 0 {
            true => self.restart_failures.fetch_add(1, Ordering::SeqCst) + 1,
            false => {
                self.restart_failures.store(0, Ordering::SeqCst);
                0
            }
        };
        let pause = (CHECKPOINT_EVERY << failures.min(5)).min(RESTART_RETRY_MAX);
        self.restart_after.store(now_ms() + pause, Ordering::SeqCst);
    }
}

/// `latch_busy_wait()`: installs [`busy`] and [`committed`] on the connection that calls it.
unsafe extern "C" fn enable(ctx: *mut ffi::sqlite3_context, _argc: c_int, _argv: *mut *mut ffi::sqlite3_value) {
    // SAFETY: SQLite calls this with a valid context of a connection that is executing it.
    unsafe {
        let db = ffi::sqlite3_context_db_handle(ctx);
        let rc = ffi::sqlite3_busy_handler(db, Some(busy), ptr::null_mut());
        // The file's checkpoint state (none for a database in memory: no file, no log).
        let path = ffi::sqlite3_db_filename(db, c"main".as_ptr());
        let log: *const Log = match path.is_null() {
            true => ptr::null(),
            false => match CStr::from_ptr(path).to_string_lossy() {
                p if p.is_empty() => ptr::null(),
                p => log_of(&p),
            },
        };
        ffi::sqlite3_wal_hook(db, Some(committed), log.cast_mut().cast());
        ffi::sqlite3_result_int(ctx, c_int::from(rc == ffi::SQLITE_OK));
    }
}

/// The auto-extension: registers `latch_busy_wait()` and the Unicode `lower()`
/// ([`super::sqlite_text`]) on a connection being opened.
unsafe extern "C" fn register(
    db: *mut ffi::sqlite3,
    _err: *mut *mut c_char,
    _api: *const ffi::sqlite3_api_routines,
) -> c_int {
    // SAFETY: SQLite calls auto-extensions with the connection it is opening. DIRECTONLY keeps
    // the function out of triggers and views.
    unsafe {
        let rc = ffi::sqlite3_create_function_v2(
            db,
            c"latch_busy_wait".as_ptr(),
            0,
            ffi::SQLITE_UTF8 | ffi::SQLITE_DIRECTONLY,
            ptr::null_mut(),
            Some(enable),
            None,
            None,
            None,
        );
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        super::sqlite_text::register(db)
    }
}

/// Registers the auto-extension once per process; connections opened afterwards can run
/// [`ENABLE`].
pub fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: `register` has the signature SQLite expects of an extension entry point.
        let rc = unsafe { ffi::sqlite3_auto_extension(Some(register)) };
        if rc != ffi::SQLITE_OK {
            tracing::error!(code = rc, "cannot register latch's SQLite busy handler");
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_wakes_a_waiter_and_nothing_waits_longer_than_the_pause() {
        let seen = commits();
        let t = Instant::now();
        assert_eq!(wait_for_commit(seen, Duration::from_millis(20)), seen, "no commit meanwhile");
        assert!(t.elapsed() >= Duration::from_millis(20));
        let waiter = std::thread::spawn(move || wait_for_commit(seen, Duration::from_secs(30)));
        std::thread::sleep(Duration::from_millis(20));
        // SAFETY: with no log (null) the hook touches only the counters.
        unsafe { committed(ptr::null_mut(), ptr::null_mut(), ptr::null(), 0) };
        assert!(waiter.join().unwrap() > seen);
    }
}
