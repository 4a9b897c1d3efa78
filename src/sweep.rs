//! The sweep: deletes expired pending requests, codes, sessions, refresh tokens, revocations,
//! assertion ids and e-mailed codes in bounded batches, so tables stay bounded under constant
//! load. Every replica may run it at once: the deletes are idempotent.

use std::time::Duration;

use crate::clock::SharedClock;
use crate::store::{Db, Result};

/// Used codes are kept ten minutes past their expiry, so a late reuse still revokes its grant.
const CODE_GRACE: i64 = 600;

/// An application noted in a session (for its logout token) stays while the session lives: the
/// note's expiry is the session's when the application was noted, and a later sign-in renews
/// the session but not the notes of the other applications in it.
const WHILE_THE_SESSION_LIVES: &str = " AND NOT EXISTS (SELECT 1 FROM session s \
     WHERE s.session_id = session_client.session_id AND s.expires_at >= $1)";

/// (table, primary key columns, how long past `expires_at` a row is kept, a further condition)
const TABLES: [(&str, &str, i64, &str); 8] = [
    ("auth_request", "auth_request_id", 0, ""),
    ("auth_code", "code_hash", CODE_GRACE, ""),
    ("session", "session_id", 0, ""),
    ("session_client", "session_id, client_id", 0, WHILE_THE_SESSION_LIVES),
    ("refresh_token", "token_hash", 0, ""),
    ("revocation", "revoked_key", 0, ""),
    ("assertion_jti", "jti_key", 0, ""),
    ("user_code", "user_id, purpose", 0, ""),
];

/// Rows deleted per table in one round.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report(pub Vec<(&'static str, u64)>);

impl Report {
    pub fn total(&self) -> u64 {
        self.0.iter().map(|(_, n)| n).sum()
    }

    /// Whether some table gave all a round may delete: more may be due.
    fn at_cap(&self, batch: i64, max_batches: usize) -> bool {
        self.0.iter().any(|(_, n)| *n >= batch as u64 * max_batches as u64)
    }

    fn add(&mut self, other: Report) {
        for (table, n) in other.0 {
            match self.0.iter_mut().find(|(t, _)| *t == table) {
                Some((_, m)) => *m += n,
                None => self.0.push((table, n)),
            }
        }
    }
}

/// One round: deletes expired rows, `batch` at a time, at most `max_batches` per table.
pub async fn sweep(db: &Db, now: i64, batch: i64, max_batches: usize) -> Result<Report> {
    let mut report = Report::default();
    for (table, key, grace, unless) in TABLES {
        // The expiry again outside the subquery: on PostgreSQL a row renewed in place while the
        // delete waits for it (a session signed in again, a code e-mailed again) is checked anew
        // against these conditions, not against the key the subquery picked, and stays.
        let sql = format!(
            "DELETE FROM {table} WHERE ({key}) IN (SELECT {key} FROM {table} WHERE expires_at < $1{unless} LIMIT $2) \
             AND expires_at < $1{unless}"
        );
        let mut deleted = 0u64;
        for _ in 0..max_batches {
            let mut c = db.conn().await?;
            let n = sqlx::query(&sql).bind(now - grace).bind(batch).execute(&mut *c).await?.rows_affected();
            deleted += n;
            if n < batch as u64 {
                break;
            }
        }
        report.0.push((table, deleted));
    }
    Ok(report)
}

/// Rounds of [`sweep`] until one leaves no table at its cap, or `max_rounds` have run, `pause`
/// apart: a backlog (a load that expires more rows per interval than a round deletes) is worked
/// off now, in bounded deletes, instead of growing round after round.
pub async fn sweep_until_done(
    db: &Db,
    now: i64,
    batch: i64,
    max_batches: usize,
    max_rounds: usize,
    pause: Duration,
) -> Result<Report> {
    let mut report = Report::default();
    for round in 0..max_rounds {
        if round > 0 {
            tokio::time::sleep(pause).await;
        }
        let r = sweep(db, now, batch, max_batches).await?;
        let more = r.at_cap(batch, max_batches);
        report.add(r);
        if !more {
            break;
        }
    }
    Ok(report)
}

/// Runs the sweep every `interval` until `shutdown` fires.
pub fn spawn(
    db: Db,
    clock: SharedClock,
    interval: Duration,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    // Up to an hour's worth of rounds a second apart; shutdown cancels it between deletes.
                    let rounds = sweep_until_done(&db, clock.now(), 1000, 20, 3600, Duration::from_secs(1));
                    let done = tokio::select! {
                        r = rounds => r,
                        _ = shutdown.changed() => break,
                    };
                    match done {
                        Ok(r) if r.total() > 0 => tracing::info!(deleted = r.total(), details = ?r.0, "sweep removed expired rows"),
                        Ok(_) => {}
                        Err(e) => tracing::warn!(error = %e, "sweep failed; will retry"),
                    }
                }
                _ = shutdown.changed() => break,
            }
        }
    })
}
