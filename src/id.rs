//! Resource ids: 63-bit, time-ordered numbers written as decimal strings, in the style of the
//! platform latch's interface follows (`"285791837749112833"`).
//!
//! Layout: 41 bits of milliseconds since 2024-01-01, 10 bits of a random per-process node
//! number, 12 bits of sequence. The sequence borrows from the next millisecond when more than
//! 4096 ids are made in one, so ids from one process never repeat. Two replicas collide only if
//! they drew the same node number and create an id in the same millisecond with the same
//! sequence; the primary keys of the store reject such a duplicate. So these ids are only for
//! rows whose primary key they are (sessions included). Ids that nothing keeps unique but that
//! revocations are keyed by (token `jti`, grant ids) are 128-bit random values instead
//! ([`crate::crypto::secret::random_id`]).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

const EPOCH_MS: u64 = 1_704_067_200_000;
const SEQ_BITS: u64 = 12;
const NODE_BITS: u64 = 10;

static STATE: AtomicU64 = AtomicU64::new(0);
static NODE: OnceLock<u64> = OnceLock::new();

#[allow(clippy::disallowed_methods)]
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(EPOCH_MS)
        .saturating_sub(EPOCH_MS)
}

/// A new unique id.
pub fn new_id() -> String {
    next().to_string()
}

fn next() -> u64 {
    let node = *NODE.get_or_init(|| rand::random::<u64>() & ((1 << NODE_BITS) - 1));
    let now = now_ms();
    // STATE holds (ms << SEQ_BITS) | seq of the last id handed out.
    let mut current = STATE.load(Ordering::Relaxed);
    loop {
        let last_ms = current >> SEQ_BITS;
        let seq = current & ((1 << SEQ_BITS) - 1);
        let candidate = if now > last_ms {
            now << SEQ_BITS
        } else if seq + 1 < (1 << SEQ_BITS) {
            current + 1
        } else {
            (last_ms + 1) << SEQ_BITS
        };
        match STATE.compare_exchange_weak(current, candidate, Ordering::SeqCst, Ordering::Relaxed) {
            Ok(_) => {
                let ms = candidate >> SEQ_BITS;
                let seq = candidate & ((1 << SEQ_BITS) - 1);
                return (ms << (SEQ_BITS + NODE_BITS)) | (node << SEQ_BITS) | seq;
            }
            Err(actual) => current = actual,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ids_are_unique_and_increasing() {
        let mut seen = HashSet::new();
        let mut last = 0;
        for _ in 0..20_000 {
            let id = next();
            assert!(id > last, "ids must increase");
            assert!(seen.insert(id));
            last = id;
        }
    }
}
