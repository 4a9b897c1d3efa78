//! Password hashes. New hashes are argon2id with the OWASP parameters (19 MiB, t=2, p=1).
//! Hashing and verification run on a small pool of dedicated threads (one per core), each of
//! which keeps its argon2 working memory between hashes: no 19 MiB allocation, page faults and
//! zeroing per login, and memory stays at one block per thread however many people sign in at
//! once (the queue, not the memory, grows). After 30 s without work a thread gives its memory
//! back, so an idle server stays small. Hashes imported in other formats verify through
//! [`super::hashes`].

use std::alloc::Layout;
use std::cell::RefCell;
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::{Duration, Instant};

use argon2::password_hash::{Output, PasswordHash};
use argon2::{Algorithm, Argon2, Block, Params, Version};
use base64::Engine;
use base64::engine::general_purpose::STANDARD_NO_PAD;

use super::hashes::{self, HashError};
use super::secret::random_bytes;

#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    #[error("the stored password hash is unusable: {0}")]
    Stored(#[from] HashError),
    #[error("password hashing failed: {0}")]
    Hashing(String),
    /// The memory of a hash could not be mapped (a limit on the address space, strict
    /// overcommit): the password was not checked either way.
    #[error("no memory for a password hash of {0} KiB")]
    Memory(usize),
    /// [`MAX_QUEUED`] hashes are already waiting for the hashing threads: the password was not
    /// checked either way (a flood of password posts cannot grow the queue, each holding its
    /// password, or the wait of everyone behind it, without bound).
    #[error("too many password hashes are waiting")]
    Busy,
}

/// How many hashes may wait for the hashing threads: several seconds of work at the default
/// parameters (a 200-browser login storm keeps at most 200 waiting).
pub const MAX_QUEUED: usize = 1024;

/// argon2id parameters.
#[derive(Clone, Copy, Debug)]
pub struct Argon2Params {
    pub memory_kib: u32,
    pub iterations: u32,
    pub parallelism: u32,
}

impl Default for Argon2Params {
    /// OWASP's recommendation: 19 MiB, two passes, one lane.
    fn default() -> Self {
        Self { memory_kib: 19 * 1024, iterations: 2, parallelism: 1 }
    }
}

/// Working memory kept by a thread between hashes, at most this many 1 KiB blocks (64 MiB);
/// larger (imported) parameters get memory for the one hash.
const KEEP_BLOCKS: usize = 64 * 1024;

/// A hashing thread gives its memory back after this long without work, so an idle server
/// stays small.
const IDLE_RELEASE: std::time::Duration = std::time::Duration::from_secs(30);

/// argon2 working memory mapped straight from the OS (anonymous `mmap`, zeroed by the kernel)
/// and unmapped when dropped, so the 19 MiB of a hash leave RSS at once (the first start's
/// hash, a thread's idle release). Neither allocator does that reliably: latch's global one
/// (mimalloc, see src/main.rs) keeps freed memory for reuse, and glibc's malloc maps a block
/// this large only until the first one is freed; that free raises its mmap threshold to the
/// block's size, so every later block comes from an arena and stays resident once freed.
struct Blocks {
    ptr: NonNull<Block>,
    len: usize,
}

// SAFETY: Blocks owns its mapping exclusively, like a Vec<Block>.
unsafe impl Send for Blocks {}

impl Blocks {
    const fn empty() -> Self {
        Self { ptr: NonNull::dangling(), len: 0 }
    }

    /// `len` zeroed blocks; None when the system gives no memory for them.
    fn zeroed(len: usize) -> Option<Self> {
        let Some(bytes) = Self::bytes(len) else { return Some(Self::empty()) };
        // SAFETY: a fresh private anonymous mapping; no existing memory is touched.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return None;
        }
        // An anonymous mapping is page-aligned (more than Block's 16 bytes) and reads as zeros,
        // which is a valid Block (an array of u64).
        let ptr = NonNull::new(raw.cast::<Block>()).expect("mmap returns a non-null mapping");
        Some(Self { ptr, len })
    }

    /// The size of `len` blocks in bytes, None for none (or for more than the address space,
    /// which then maps nothing: see [`Blocks::zeroed`]).
    fn bytes(len: usize) -> Option<usize> {
        (len > 0).then(|| Layout::array::<Block>(len).map_or(usize::MAX, |l| l.size()))
    }

    fn as_mut_slice(&mut self) -> &mut [Block] {
        // SAFETY: ptr points at len initialized blocks owned by self (or dangles with len 0).
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Blocks {
    fn drop(&mut self) {
        if let Some(bytes) = Self::bytes(self.len) {
            // SAFETY: the mapping of `zeroed`, with its size; nothing refers to it any more.
            let unmapped = unsafe { libc::munmap(self.ptr.as_ptr().cast(), bytes) };
            debug_assert_eq!(unmapped, 0, "munmap of argon2 memory");
        }
    }
}

thread_local! {
    static MEMORY: RefCell<Blocks> = const { RefCell::new(Blocks::empty()) };
    /// Only the hashing threads keep memory between hashes.
    static KEEPS_MEMORY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with `blocks` blocks of argon2 memory: the hashing thread's own, or (elsewhere, or
/// for parameters above [`KEEP_BLOCKS`]) memory for this one hash. An error when the system
/// gives no memory for it, instead of ending the process as an allocation failure would.
fn with_memory<R>(blocks: usize, f: impl FnOnce(&mut [Block]) -> R) -> Result<R, PasswordError> {
    let none = || PasswordError::Memory(blocks.saturating_mul(std::mem::size_of::<Block>()) / 1024);
    if blocks > KEEP_BLOCKS || !KEEPS_MEMORY.with(|k| k.get()) {
        return Ok(f(Blocks::zeroed(blocks).ok_or_else(none)?.as_mut_slice()));
    }
    MEMORY.with(|m| {
        let mut m = m.borrow_mut();
        if m.len < blocks {
            // The old memory goes first, so that the two are never held at once.
            *m = Blocks::empty();
            *m = Blocks::zeroed(blocks).ok_or_else(none)?;
        }
        Ok(f(&mut m.as_mut_slice()[..blocks]))
    })
}

type Job = Box<dyn FnOnce() + Send>;

/// The hashing threads; they end when the last [`PasswordHasher`] clone is dropped.
struct Workers {
    jobs: flume::Sender<Job>,
}

impl Workers {
    fn start(threads: usize) -> Self {
        let (jobs, queue) = flume::bounded::<Job>(MAX_QUEUED);
        for i in 0..threads.max(1) {
            let queue = queue.clone();
            let spawned = std::thread::Builder::new().name(format!("latch-argon2-{i}")).spawn(move || {
                KEEPS_MEMORY.with(|k| k.set(true));
                loop {
                    let job = match queue.recv_timeout(IDLE_RELEASE) {
                        Ok(job) => job,
                        Err(flume::RecvTimeoutError::Timeout) => {
                            MEMORY.with(|m| *m.borrow_mut() = Blocks::empty());
                            continue;
                        }
                        Err(flume::RecvTimeoutError::Disconnected) => return,
                    };
                    // A panicking hash answers its caller with an error; the thread carries on.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                }
            });
            if let Err(e) = spawned {
                tracing::error!(error = %e, "cannot start a password hashing thread");
            }
        }
        Self { jobs }
    }
}

/// How long a failed verification takes at least. An unknown user is checked against a hash
/// with latch's own parameters, but an imported user whose hash has not been replaced yet (no
/// sign-in since the import) is checked against that hash: bcrypt of cost 10 takes several
/// times as long as latch's argon2id, so the time of a wrong password would tell that such a
/// user exists. A failure therefore answers no sooner than the slowest failed verification of
/// the last one or two windows took (up to [`PACE_CAP`]): once anyone has hit a slow hash,
/// every failure takes as long for a while. Successes are not held back (whoever knows the
/// password knows the user exists), and neither is the queue for the hashing threads counted,
/// which every request waits in alike.
#[derive(Default)]
struct FailurePace {
    windows: std::sync::Mutex<PaceWindows>,
}

#[derive(Default)]
struct PaceWindows {
    started: Option<Instant>,
    current: Duration,
    previous: Duration,
}

/// How long the slowest failure is remembered: one to two of these.
const PACE_WINDOW: Duration = Duration::from_secs(600);
/// Failures are held back to at most this long (bcrypt up to cost 13 or so); hashes slower
/// than this still take longer to fail.
const PACE_CAP: Duration = Duration::from_secs(1);

impl FailurePace {
    /// Records a failure whose verification took `took`; returns how long it must take.
    fn floor_after(&self, took: Duration) -> Duration {
        let mut w = self.windows.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Instant::now();
        match w.started.map(|s| now.duration_since(s)) {
            Some(age) if age < PACE_WINDOW => {}
            Some(age) if age < 2 * PACE_WINDOW => {
                w.previous = w.current;
                w.current = Duration::ZERO;
                w.started = Some(now);
            }
            _ => *w = PaceWindows { started: Some(now), ..PaceWindows::default() },
        }
        w.current = w.current.max(took.min(PACE_CAP));
        w.current.max(w.previous)
    }
}

#[derive(Clone)]
pub struct PasswordHasher {
    params: Argon2Params,
    workers: Arc<Workers>,
    /// A hash of a random password, verified against when the user is unknown so that unknown
    /// and known users take the same time.
    dummy: Arc<std::sync::OnceLock<String>>,
    pace: Arc<FailurePace>,
}

impl std::fmt::Debug for PasswordHasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PasswordHasher").field("params", &self.params).finish()
    }
}

fn hashing(e: impl std::fmt::Display) -> PasswordError {
    PasswordError::Hashing(e.to_string())
}

impl PasswordHasher {
    /// `threads` hashes run at once (one per core is the sensible bound).
    pub fn new(params: Argon2Params, threads: usize) -> Self {
        Self {
            params,
            workers: Arc::new(Workers::start(threads)),
            dummy: Arc::new(std::sync::OnceLock::new()),
            pace: Arc::new(FailurePace::default()),
        }
    }

    /// Runs `f` on a hashing thread.
    async fn run<R: Send + 'static>(&self, f: impl FnOnce() -> R + Send + 'static) -> Result<R, PasswordError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            let _ = tx.send(f());
        });
        self.workers.jobs.try_send(job).map_err(|e| match e {
            flume::TrySendError::Full(_) => PasswordError::Busy,
            flume::TrySendError::Disconnected(_) => hashing("the hashing threads have stopped"),
        })?;
        rx.await.map_err(|_| hashing("the hash failed"))
    }

    /// Spends the time of one verification, for a user that does not exist. Answers
    /// [`PasswordError::Busy`] when the queue is full and [`PasswordError::Memory`] when the
    /// hash gets no memory, as a real user's verification would, so that the answer tells
    /// nothing about who exists.
    pub async fn verify_nobody(&self, password: &str) -> Result<(), PasswordError> {
        let hash = match self.dummy.get() {
            Some(h) => h.clone(),
            // Kept only once it is a hash: a failed first hash (no memory for it) is tried again
            // by the next unknown user, rather than leaving them all a string that checks at once.
            None => match self.hash(&super::secret::new_secret()).await {
                Ok(h) => self.dummy.get_or_init(|| h).clone(),
                Err(e @ (PasswordError::Busy | PasswordError::Memory(_))) => return Err(e),
                Err(_) => String::new(),
            },
        };
        match self.verify(password, &hash).await {
            Err(e @ (PasswordError::Busy | PasswordError::Memory(_))) => Err(e),
            _ => Ok(()),
        }
    }

    /// [`Self::hash`] that waits for room in the queue instead of answering
    /// [`PasswordError::Busy`]: for an administrator's import of many passwords, which should
    /// finish rather than skip users while sign-ins fill the queue.
    pub async fn hash_waiting(&self, password: &str) -> Result<String, PasswordError> {
        loop {
            match self.hash(password).await {
                Err(PasswordError::Busy) => tokio::time::sleep(Duration::from_millis(50)).await,
                other => return other,
            }
        }
    }

    /// Whether a stored hash should be replaced by one with the current parameters.
    pub fn needs_rehash(&self, stored: &str) -> bool {
        let p = self.params;
        !stored.starts_with(&format!("$argon2id$v=19$m={},t={},p={}$", p.memory_kib, p.iterations, p.parallelism))
    }

    pub fn params(&self) -> Argon2Params {
        self.params
    }

    /// Hashes synchronously on the calling thread (start-up, the migration tool, and the
    /// hashing threads themselves).
    pub fn hash_blocking(params: Argon2Params, password: &str) -> Result<String, PasswordError> {
        let p = Params::new(params.memory_kib, params.iterations, params.parallelism, Some(32)).map_err(hashing)?;
        let blocks = p.block_count();
        let argon2 = Argon2::new(Algorithm::Argon2id, Version::V0x13, p);
        let salt = random_bytes::<16>();
        let mut out = [0u8; 32];
        with_memory(blocks, |mem| argon2.hash_password_into_with_memory(password.as_bytes(), &salt, &mut out, mem))?
            .map_err(hashing)?;
        Ok(format!(
            "$argon2id$v=19$m={},t={},p={}${}${}",
            params.memory_kib,
            params.iterations,
            params.parallelism,
            STANDARD_NO_PAD.encode(salt),
            STANDARD_NO_PAD.encode(out)
        ))
    }

    /// Verifies synchronously. argon2 hashes verify here with whatever parameters they carry
    /// (latch's own may exceed the import bounds, within the configuration's); every other format
    /// goes through [`hashes::verify`].
    pub fn verify_blocking(password: &str, stored: &str) -> Result<bool, PasswordError> {
        match PasswordHash::new(stored) {
            Ok(parsed) if parsed.algorithm.as_str().starts_with("argon2") => verify_argon2(password, &parsed),
            _ => Ok(hashes::verify(stored, password)?),
        }
    }

    pub async fn hash(&self, password: &str) -> Result<String, PasswordError> {
        let params = self.params;
        let password = password.to_string();
        self.run(move || Self::hash_blocking(params, &password)).await?
    }

    /// A failure (a wrong password, an unusable hash) takes as long as the slowest failure of
    /// late ([`FailurePace`]).
    pub async fn verify(&self, password: &str, stored: &str) -> Result<bool, PasswordError> {
        let password = password.to_string();
        let stored = stored.to_string();
        let (ok, took) = self
            .run(move || {
                let started = Instant::now();
                let ok = Self::verify_blocking(&password, &stored);
                (ok, started.elapsed())
            })
            .await?;
        if !matches!(ok, Ok(true)) {
            let floor = self.pace.floor_after(took);
            if let Some(rest) = floor.checked_sub(took).filter(|d| !d.is_zero()) {
                tokio::time::sleep(rest).await;
            }
        }
        ok
    }
}

/// An argon2 PHC string checked with this thread's memory; the comparison is constant-time. A
/// string that is no usable argon2 hash verifies no password; an error only when the memory
/// for the hash could not be had.
fn verify_argon2(password: &str, parsed: &PasswordHash<'_>) -> Result<bool, PasswordError> {
    let Some((argon2, expected, salt_b64)) = argon2_of(parsed) else { return Ok(false) };
    let blocks = argon2.params().block_count();
    let mut salt = [0u8; 64];
    let Ok(salt) = salt_b64.decode_b64(&mut salt) else { return Ok(false) };
    let mut out = vec![0u8; expected.len()];
    let hashed =
        with_memory(blocks, |mem| argon2.hash_password_into_with_memory(password.as_bytes(), salt, &mut out, mem))?;
    Ok(hashed.is_ok() && Output::new(&out).is_ok_and(|o| o == expected))
}

/// The hasher, expected output and salt a PHC string names, if it is a usable argon2 hash.
fn argon2_of<'a>(parsed: &PasswordHash<'a>) -> Option<(Argon2<'static>, Output, argon2::password_hash::Salt<'a>)> {
    let algorithm = Algorithm::try_from(parsed.algorithm).ok()?;
    let version = match parsed.version {
        Some(v) => Version::try_from(v).ok()?,
        None => Version::V0x13,
    };
    let params = Params::try_from(parsed).ok()?;
    Some((Argon2::new(algorithm, version, params), parsed.hash?, parsed.salt?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This process's resident set in KiB.
    fn rss_kib() -> i64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    // Every drop gives the memory back, not only the first (glibc's malloc keeps the second
    // block of this size resident after its free: this test fails with System.alloc_zeroed).
    #[test]
    fn argon2_memory_leaves_rss_each_time_it_is_dropped() {
        let blocks = 19 * 1024;
        for round in 0..3 {
            let mut m = Blocks::zeroed(blocks).unwrap();
            let before = rss_kib();
            for b in m.as_mut_slice().iter_mut() {
                // SAFETY: a valid, exclusively borrowed block; volatile so the stores stay.
                unsafe { std::ptr::write_volatile(b, Block::new()) };
            }
            let touched = rss_kib();
            assert!(touched - before > 15 * 1024, "round {round}: {before} -> {touched} KiB");
            drop(m);
            let after = rss_kib();
            assert!(touched - after > 15 * 1024, "round {round}: {touched} KiB -> {after} KiB after the drop");
        }
        assert!(Blocks::zeroed(0).unwrap().as_mut_slice().is_empty());
    }

    /// Memory the system cannot give (2^60 bytes, beyond any address space) is an error to the
    /// caller, not the end of the process.
    #[test]
    fn memory_not_given_is_an_error() {
        let blocks = 1usize << 50;
        assert!(Blocks::zeroed(blocks).is_none());
        assert!(matches!(with_memory(blocks, |_| ()), Err(PasswordError::Memory(_))));
        KEEPS_MEMORY.with(|k| k.set(true));
        assert!(matches!(with_memory(blocks, |_| ()), Err(PasswordError::Memory(_))));
        // The thread's own memory still serves a hash that fits.
        assert_eq!(with_memory(8, |m| m.len()).unwrap(), 8);
    }

    #[test]
    fn hash_and_verify() {
        let p = Argon2Params { memory_kib: 1024, iterations: 1, parallelism: 1 };
        let h = PasswordHasher::hash_blocking(p, "Password1!").unwrap();
        assert!(h.starts_with("$argon2id$v=19$m=1024,t=1,p=1$"));
        assert!(PasswordHasher::verify_blocking("Password1!", &h).unwrap());
        assert!(!PasswordHasher::verify_blocking("password1!", &h).unwrap());
        assert!(PasswordHasher::verify_blocking("x", "$2b$10$abc").is_err());
        // Imported formats delegate to `hashes` (Auth0's bcrypt of "password2").
        let bcrypt = "$2b$10$JyDM8jzGYVTdDzZaPAQ2Lu2uZ7xFA3dgQNoHGblMmpkkeIfG2GEYa";
        assert!(PasswordHasher::verify_blocking("password2", bcrypt).unwrap());
        assert!(!PasswordHasher::verify_blocking("password1", bcrypt).unwrap());
    }

    #[test]
    fn hashes_agree_with_the_argon2_crates_own_hasher() {
        use argon2::password_hash::{PasswordHasher as _, PasswordVerifier as _, SaltString};
        let p = Argon2Params { memory_kib: 2048, iterations: 2, parallelism: 2 };
        // Ours, checked by the crate's verifier.
        let ours = PasswordHasher::hash_blocking(p, "Correct horse").unwrap();
        let parsed = PasswordHash::new(&ours).unwrap();
        assert!(Argon2::default().verify_password(b"Correct horse", &parsed).is_ok());
        // The crate's (argon2i and argon2id, other output lengths), checked by ours.
        for alg in [Algorithm::Argon2i, Algorithm::Argon2id, Algorithm::Argon2d] {
            let params = Params::new(4096, 3, 1, Some(24)).unwrap();
            let salt = SaltString::encode_b64(b"sixteen byte salt").unwrap();
            let theirs = Argon2::new(alg, Version::V0x13, params).hash_password(b"pw", &salt).unwrap().to_string();
            assert!(PasswordHasher::verify_blocking("pw", &theirs).unwrap(), "{theirs}");
            assert!(!PasswordHasher::verify_blocking("pW", &theirs).unwrap(), "{theirs}");
        }
        // Version 0x10 hashes (no v= field) still verify.
        let old = Argon2::new(Algorithm::Argon2i, Version::V0x10, Params::new(1024, 2, 1, None).unwrap())
            .hash_password(b"pw", &SaltString::encode_b64(b"another salt!!").unwrap())
            .unwrap()
            .to_string();
        assert!(PasswordHasher::verify_blocking("pw", &old).unwrap(), "{old}");
    }

    #[tokio::test]
    async fn the_hashing_threads_reuse_their_memory_and_survive_many_calls() {
        let hasher = PasswordHasher::new(Argon2Params { memory_kib: 1024, iterations: 1, parallelism: 1 }, 2);
        let h = hasher.hash("pw").await.unwrap();
        let checks = (0..20).map(|i| {
            let hasher = hasher.clone();
            let h = h.clone();
            async move { hasher.verify(if i % 2 == 0 { "pw" } else { "nope" }, &h).await.unwrap() }
        });
        let results = futures_join(checks).await;
        assert_eq!(results.iter().filter(|ok| **ok).count(), 10);
        assert!(!hasher.verify("pw", "$argon2id$v=19$m=1024,t=1,p=1$broken").await.unwrap());
    }

    // A flood of password checks beyond the queue's bound is answered Busy at once (the caller
    // says "try again"), instead of queueing without bound; the queue drains and hashing goes on.
    #[tokio::test]
    async fn a_full_queue_is_busy_not_a_longer_wait() {
        let hasher = PasswordHasher::new(Argon2Params { memory_kib: 1024, iterations: 1, parallelism: 1 }, 1);
        let (release, gate) = std::sync::mpsc::channel::<()>();
        let (started, busy_thread) = tokio::sync::oneshot::channel();
        let h = hasher.clone();
        let blocker = tokio::spawn(async move {
            h.run(move || {
                let _ = started.send(());
                let _ = gate.recv();
            })
            .await
        });
        busy_thread.await.unwrap();
        let waiting: Vec<_> = (0..MAX_QUEUED)
            .map(|_| {
                let h = hasher.clone();
                tokio::spawn(async move { h.run(|| ()).await })
            })
            .collect();
        while hasher.workers.jobs.len() < MAX_QUEUED {
            tokio::task::yield_now().await;
        }
        // At once: a queue without bound would hold these behind the blocked thread.
        let at_once = Duration::from_secs(5);
        let hashed = tokio::time::timeout(at_once, hasher.hash("pw")).await;
        assert!(matches!(hashed, Ok(Err(PasswordError::Busy))), "{hashed:?}");
        let stored = "$argon2id$v=19$m=8,t=1,p=1$c2FsdHNhbHQ$AAAA";
        let verified = tokio::time::timeout(at_once, hasher.verify("pw", stored)).await;
        assert!(matches!(verified, Ok(Err(PasswordError::Busy))), "{verified:?}");
        let nobody = tokio::time::timeout(at_once, hasher.verify_nobody("pw")).await;
        assert!(matches!(nobody, Ok(Err(PasswordError::Busy))), "{nobody:?}");
        release.send(()).unwrap();
        blocker.await.unwrap().unwrap();
        for w in waiting {
            w.await.unwrap().unwrap();
        }
        assert!(hasher.hash("pw").await.is_ok());
    }

    // A wrong password for a user with a slow imported hash (bcrypt, cost 10) takes far longer
    // than latch's own cheap argon2 here; afterwards an unknown user's failure takes as long,
    // and so does a wrong password against latch's own hash. A success is not held back.
    #[tokio::test]
    async fn failures_take_as_long_as_the_slowest_failure_of_late() {
        let hasher = PasswordHasher::new(Argon2Params { memory_kib: 1024, iterations: 1, parallelism: 1 }, 1);
        let own = hasher.hash("pw").await.unwrap();
        hasher.verify_nobody("warm-up").await.unwrap();
        let timed = async |password: &str, stored: &str| {
            let started = Instant::now();
            let ok = hasher.verify(password, stored).await.unwrap();
            (ok, started.elapsed())
        };
        let (_, fast) = timed("nope", &own).await;
        let bcrypt = "$2b$10$JyDM8jzGYVTdDzZaPAQ2Lu2uZ7xFA3dgQNoHGblMmpkkeIfG2GEYa";
        let (ok, slow) = timed("password1", bcrypt).await;
        assert!(!ok);
        assert!(slow > fast * 5, "bcrypt {slow:?} against argon2 {fast:?}: the check needs a slow hash");
        let started = Instant::now();
        hasher.verify_nobody("guess").await.unwrap();
        let nobody = started.elapsed();
        let (_, wrong) = timed("nope", &own).await;
        for (what, took) in [("unknown user", nobody), ("wrong password", wrong)] {
            assert!(took >= slow.mul_f64(0.9), "{what}: {took:?}, the slow failure {slow:?}");
        }
        let (ok, right) = timed("pw", &own).await;
        assert!(ok);
        assert!(right < slow / 2, "a success waits for nothing: {right:?}");
    }

    async fn futures_join<F: std::future::Future<Output = bool> + Send + 'static>(
        fs: impl Iterator<Item = F>,
    ) -> Vec<bool> {
        let handles: Vec<_> = fs.map(tokio::spawn).collect();
        let mut out = Vec::new();
        for h in handles {
            out.push(h.await.unwrap());
        }
        out
    }
}
