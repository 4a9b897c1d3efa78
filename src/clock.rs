//! Time as a parameter. Domain code never reads the system clock directly; it asks the
//! [`Clock`] held in the application state, so tests can move time forward.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

/// Seconds since the Unix epoch.
pub type UnixTime = i64;

pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> UnixTime;
}

pub type SharedClock = Arc<dyn Clock>;

/// The wall clock.
#[derive(Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[allow(clippy::disallowed_methods)]
    fn now(&self) -> UnixTime {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
    }
}

/// A clock that only moves when told to (tests, simulations).
#[derive(Debug)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    pub fn new(start: UnixTime) -> Self {
        Self(AtomicI64::new(start))
    }

    pub fn set(&self, t: UnixTime) {
        self.0.store(t, Ordering::SeqCst);
    }

    pub fn advance(&self, secs: i64) {
        self.0.fetch_add(secs, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> UnixTime {
        self.0.load(Ordering::SeqCst)
    }
}

/// The system clock as a shared handle.
pub fn system() -> SharedClock {
    Arc::new(SystemClock)
}
