//! Outgoing e-mail: through SMTP when configured, otherwise into `{data_dir}/outbox/` (one
//! `.eml` file per message, logged), so the embedded default works with no mail server.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::AsyncWriteExt;

use lettre::message::{Mailbox, header::ContentType};
use lettre::transport::smtp::authentication::Credentials;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

use crate::config::{Settings, SmtpTls};

/// How long the connection to the SMTP server may take (lettre applies its timeout to the
/// connect only).
const SMTP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// How long one message may take in all (connect, greeting, TLS, login, commands) before it
/// counts as not delivered: lettre has no limit on the commands after the connect, and a server
/// that accepts connections and never answers would otherwise keep a sending task forever.
const SEND_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// At most this many messages are on their way to the SMTP server at once ([`Mailer::dispatch`]);
/// the others wait for their turn (an organization import queues one per user).
const SMTP_AT_ONCE: usize = 8;

#[derive(Clone)]
pub enum Mailer {
    Outbox { dir: PathBuf, from: Mailbox },
    Smtp { transport: AsyncSmtpTransport<Tokio1Executor>, from: Mailbox, queue: std::sync::Arc<Queue> },
}

/// The messages [`Mailer::dispatch`] has handed to tasks of their own: how many go out at once,
/// how many are not done yet, and a wake-up for [`Mailer::flush`] when none is left.
pub struct Queue {
    turns: tokio::sync::Semaphore,
    pending: AtomicUsize,
    idle: tokio::sync::Notify,
}

impl Queue {
    fn new() -> Self {
        Queue {
            turns: tokio::sync::Semaphore::new(SMTP_AT_ONCE),
            pending: AtomicUsize::new(0),
            idle: tokio::sync::Notify::new(),
        }
    }
}

impl std::fmt::Debug for Mailer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mailer::Outbox { dir, .. } => write!(f, "Mailer::Outbox({})", dir.display()),
            Mailer::Smtp { .. } => f.write_str("Mailer::Smtp"),
        }
    }
}

impl Mailer {
    pub fn from_settings(s: &Settings) -> Result<Self, String> {
        let Some(smtp) = &s.smtp else {
            let from: Mailbox = format!("latch <noreply@{}>", s.external_host()).parse().map_err(|e| format!("{e}"))?;
            return Ok(Mailer::Outbox { dir: s.data_dir.join("outbox"), from });
        };
        let from: Mailbox = smtp.from.parse().map_err(|e| format!("smtp.from: {e}"))?;
        let builder = match smtp.tls {
            SmtpTls::Tls => AsyncSmtpTransport::<Tokio1Executor>::relay(&smtp.host).map_err(|e| e.to_string())?,
            SmtpTls::StartTls => {
                AsyncSmtpTransport::<Tokio1Executor>::starttls_relay(&smtp.host).map_err(|e| e.to_string())?
            }
            SmtpTls::None => AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&smtp.host),
        };
        let mut builder = builder.port(smtp.port).timeout(Some(SMTP_TIMEOUT));
        if let (Some(u), Some(p)) = (&smtp.user, &smtp.password) {
            builder = builder.credentials(Credentials::new(u.clone(), p.clone()));
        }
        Ok(Mailer::Smtp { transport: builder.build(), from, queue: std::sync::Arc::new(Queue::new()) })
    }

    /// Sends a plain-text message without holding up the caller on a mail server: through SMTP
    /// in a task of its own (a server that stops answering would otherwise keep the request, and
    /// the database connection it holds, waiting), [`SMTP_AT_ONCE`] at a time, each within
    /// [`SEND_TIMEOUT`]; into the outbox at once (a local file, so the message is there when the
    /// answer is). Failures are logged with `user_id`. Messages still waiting when the process
    /// stops are sent first, as far as [`Mailer::flush`] waits for them.
    pub async fn dispatch(&self, user_id: String, to_name: String, to: String, subject: &'static str, body: String) {
        let log =
            |e: String, user_id: &str| tracing::error!(error = %e, user_id = %user_id, "sending an e-mail failed");
        match self {
            Mailer::Outbox { .. } => {
                if let Err(e) = self.send(&to_name, &to, subject, &body).await {
                    log(e, &user_id);
                }
            }
            Mailer::Smtp { queue, .. } => {
                let (mailer, queue) = (self.clone(), queue.clone());
                queue.pending.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    if let Ok(_turn) = queue.turns.acquire().await
                        && let Err(e) = mailer.send(&to_name, &to, subject, &body).await
                    {
                        log(e, &user_id);
                    }
                    if queue.pending.fetch_sub(1, Ordering::SeqCst) == 1 {
                        queue.idle.notify_waiters();
                    }
                });
            }
        }
    }

    /// Waits until every message handed to [`Mailer::dispatch`] so far is sent or given up, for
    /// `at_most` (latch waits this way when it stops, after the last request).
    pub async fn flush(&self, at_most: std::time::Duration) {
        let Mailer::Smtp { queue, .. } = self else { return };
        let _ = tokio::time::timeout(at_most, async {
            loop {
                let idle = queue.idle.notified();
                tokio::pin!(idle);
                idle.as_mut().enable();
                if queue.pending.load(Ordering::SeqCst) == 0 {
                    return;
                }
                idle.await;
            }
        })
        .await;
    }

    /// Sends a plain-text message.
    pub async fn send(&self, to_name: &str, to: &str, subject: &str, body: &str) -> Result<(), String> {
        let (from, kind) = match self {
            Mailer::Outbox { from, .. } => (from.clone(), "outbox"),
            Mailer::Smtp { from, .. } => (from.clone(), "smtp"),
        };
        let to_box = Mailbox::new(
            (!to_name.is_empty()).then(|| to_name.to_string()),
            to.parse().map_err(|e| format!("bad address {to}: {e}"))?,
        );
        let msg = Message::builder()
            .from(from)
            .to(to_box)
            .subject(subject)
            .message_id(None)
            .header(ContentType::TEXT_PLAIN)
            .body(body.to_string())
            .map_err(|e| e.to_string())?;
        match self {
            Mailer::Outbox { dir, .. } => {
                // The messages hold live codes: readable by latch's own user only.
                tokio::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)
                    .await
                    .map_err(|e| e.to_string())?;
                let path = dir.join(format!("{}.eml", crate::id::new_id()));
                let mut file = tokio::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&path)
                    .await
                    .map_err(|e| e.to_string())?;
                file.write_all(&msg.formatted()).await.map_err(|e| e.to_string())?;
                file.flush().await.map_err(|e| e.to_string())?;
                tracing::info!(to = %to, subject = %subject, path = %path.display(), "e-mail written to the outbox (no SMTP configured)");
            }
            Mailer::Smtp { transport, .. } => {
                tokio::time::timeout(SEND_TIMEOUT, transport.send(msg))
                    .await
                    .map_err(|_| format!("no answer from the mail server within {}s", SEND_TIMEOUT.as_secs()))?
                    .map_err(|e| e.to_string())?;
                tracing::info!(to = %to, subject = %subject, via = kind, "e-mail sent");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    #[tokio::test]
    async fn flush_waits_for_the_messages_on_their_way_and_no_longer() {
        // A server that takes connections and never answers: a message stays on its way.
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = silent.local_addr().unwrap().port();
        let held = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Ok((s, _)) = silent.accept().await {
                open.push(s);
            }
        });
        let transport = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous("127.0.0.1")
            .port(port)
            .timeout(Some(SMTP_TIMEOUT))
            .build();
        let queue = std::sync::Arc::new(Queue::new());
        let from = "latch <noreply@example.com>".parse().unwrap();
        let mailer = Mailer::Smtp { transport, from, queue: queue.clone() };
        let t = Instant::now();
        mailer.flush(Duration::from_secs(5)).await;
        assert!(t.elapsed() < Duration::from_secs(1), "nothing on its way: no wait");
        mailer.dispatch("u-1".into(), "A".into(), "a@example.com".into(), "subject", "body".into()).await;
        let t = Instant::now();
        mailer.flush(Duration::from_millis(300)).await;
        assert!(t.elapsed() >= Duration::from_millis(300), "the message is still on its way");
        assert_eq!(queue.pending.load(Ordering::SeqCst), 1);
        // The server goes away: the message fails, and the wait ends with it.
        held.abort();
        let t = Instant::now();
        mailer.flush(Duration::from_secs(20)).await;
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        assert_eq!(queue.pending.load(Ordering::SeqCst), 0);
    }
}
