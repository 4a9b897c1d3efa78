//! Work a request leaves running after its answer (back-channel logout deliveries, a code's
//! e-mail begun after the answer, an import's messages): counted, so that latch waits for it
//! when it stops instead of cutting it off with the process.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

#[derive(Clone, Default)]
pub struct Background(Arc<Shared>);

#[derive(Default)]
struct Shared {
    pending: AtomicUsize,
    idle: Notify,
}

/// Counts its task down when dropped: when the task ends, panics or is cancelled.
struct Running(Arc<Shared>);

impl Drop for Running {
    fn drop(&mut self) {
        if self.0.pending.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

impl Background {
    /// Runs `work` in a task of its own, counted until it ends.
    pub fn spawn(&self, work: impl Future<Output = ()> + Send + 'static) -> tokio::task::JoinHandle<()> {
        self.0.pending.fetch_add(1, Ordering::SeqCst);
        let running = Running(self.0.clone());
        tokio::spawn(async move {
            let _running = running;
            work.await;
        })
    }

    /// Tasks still running.
    pub fn pending(&self) -> usize {
        self.0.pending.load(Ordering::SeqCst)
    }

    /// Waits until every task spawned so far has ended, for `at_most`.
    pub async fn wait(&self, at_most: Duration) {
        let _ = tokio::time::timeout(at_most, async {
            loop {
                let idle = self.0.idle.notified();
                tokio::pin!(idle);
                idle.as_mut().enable();
                if self.pending() == 0 {
                    return;
                }
                idle.await;
            }
        })
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn wait_returns_when_the_work_has_ended_or_at_the_bound() {
        let b = Background::default();
        b.wait(Duration::from_secs(5)).await;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let done = Arc::new(AtomicUsize::new(0));
        let d = done.clone();
        b.spawn(async move {
            let _ = rx.await;
            d.store(1, Ordering::SeqCst);
        });
        assert_eq!(b.pending(), 1);
        // Still running at the bound: wait gives up.
        b.wait(Duration::from_millis(50)).await;
        assert_eq!((b.pending(), done.load(Ordering::SeqCst)), (1, 0));
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let _ = tx.send(());
        });
        b.wait(Duration::from_secs(5)).await;
        assert_eq!((b.pending(), done.load(Ordering::SeqCst)), (0, 1));
        // A task that panics is counted down too.
        let _ = b.spawn(async { panic!("a failing task") }).await;
        assert_eq!(b.pending(), 0);
    }
}
