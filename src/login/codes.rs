//! One-time codes sent by e-mail: address verification, initial passwords and password resets.
//! Eight characters from an alphabet without look-alikes, stored by digest, five wrong guesses at
//! most.

use super::i18n::Texts;
use crate::app::AppState;
use crate::crypto::secret;
use crate::store::user::User;
use crate::store::user_code::{self, ATTEMPTS, CodeCheck, Replace};
use crate::store::{Conn, StoreError};

pub const VERIFY: &str = "verify_email";
pub const INIT: &str = "init_password";
/// A new password for a user who has one (forgotten): the same page as [`INIT`] sets it.
pub const RESET: &str = "reset_password";
const ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";

fn new_code() -> String {
    secret::random_bytes::<8>().iter().map(|b| ALPHABET[(*b as usize) % ALPHABET.len()] as char).collect()
}

/// The stored form of a code: an HMAC under a key derived from the master key, over the user,
/// the purpose and the code, so that a reader of the store can neither find a code by trying
/// all 2^40 of them nor reuse one row's work for another.
fn digest(state: &AppState, user_id: &str, purpose: &str, code: &str) -> Vec<u8> {
    state.code_digest.digest(&[user_id, purpose, &code.trim().to_ascii_uppercase()])
}

/// The digests a presented code may match: its own, and the plain SHA-256 that codes mailed by
/// versions before 2026-11-29 were stored by (accepted until the last of them expires, 72 hours
/// after an upgrade; a stored HMAC cannot match a SHA-256 by chance).
fn candidates(state: &AppState, user_id: &str, purpose: &str, code: &str) -> [Vec<u8>; 2] {
    [digest(state, user_id, purpose, code), secret::digest(&code.trim().to_ascii_uppercase())]
}

/// Sends a new code of `purpose` to a human user (replacing any earlier one). A failure to
/// deliver is logged, not returned: the person can ask for a new code.
pub async fn send(state: &AppState, c: &mut Conn, u: &User, purpose: &str, t: &Texts) -> Result<(), StoreError> {
    send_unless(state, c, u, purpose, t, Replace::Always).await
}

/// How long a code sent from the login pages stands before those pages send another.
pub const RESEND_AFTER: i64 = 60;

/// [`send`] for the login pages, which anyone may drive with any login name: nothing is sent
/// while the user's code of `purpose` is younger than [`RESEND_AFTER`], so that no one can flood
/// a mailbox or keep replacing the code its owner is about to type.
pub async fn send_paced(state: &AppState, c: &mut Conn, u: &User, purpose: &str, t: &Texts) -> Result<(), StoreError> {
    send_unless(state, c, u, purpose, t, Replace::CreatedUpTo(state.clock.now() - RESEND_AFTER)).await
}

/// [`send`] for the first time a page shows a code's step: a code sent before that can still be
/// used stays (one an administrator mailed, or one the person asked for earlier and is about to
/// type); a new one goes out only when there is none, when it expired, or when its tries are
/// spent and it is older than [`RESEND_AFTER`] (a new sign-in request reaches this step again, so
/// it keeps the pacing too). Asking for a new code on the page ([`send_paced`]) replaces it.
pub async fn send_unless_usable(
    state: &AppState,
    c: &mut Conn,
    u: &User,
    purpose: &str,
    t: &Texts,
) -> Result<(), StoreError> {
    send_unless(state, c, u, purpose, t, Replace::UnlessUsable(state.clock.now() - RESEND_AFTER)).await
}

async fn send_unless(
    state: &AppState,
    c: &mut Conn,
    u: &User,
    purpose: &str,
    t: &Texts,
    replace: Replace,
) -> Result<(), StoreError> {
    let Some(h) = u.human() else { return Ok(()) };
    let code = new_code();
    let now = state.clock.now();
    let (life, subject, body) = match purpose {
        INIT => (72 * 3600, t.mail_init_subject, t.mail_init_body),
        RESET => (3600, t.mail_reset_subject, t.mail_reset_body),
        _ => (3600, t.mail_verify_subject, t.mail_verify_body),
    };
    if !user_code::put(c, &u.user_id, purpose, &digest(state, &u.user_id, purpose, &code), now, now + life, replace)
        .await?
    {
        tracing::info!(user_id = %u.user_id, purpose, "the code sent before stands; not sending another");
        return Ok(());
    }
    // Names are refused with control characters at every form and API, but an import or an
    // older row may still hold one: no line of a name's own reaches the message.
    let plain = |s: &str| s.chars().map(|c| if c.is_control() { ' ' } else { c }).collect::<String>();
    // A name reaches the message only once its address is verified: registration (when the
    // policy allows it) lets anyone give any address and any name, and the name would then be
    // text of their choosing in a message latch sends to someone else (greeting and To: alike).
    let (body, to_name) = if h.email_verified {
        (body.replace("{name}", &plain(&h.first_name)), plain(&h.display_name))
    } else {
        (body.replace(" {name}", ""), String::new())
    };
    let body = body.replace("{code}", &code);
    state.mailer.dispatch(u.user_id.clone(), to_name, h.email.clone(), subject, body).await;
    Ok(())
}

/// Checks a code; a valid one is consumed.
pub async fn check(
    state: &AppState,
    c: &mut Conn,
    user_id: &str,
    purpose: &str,
    code: &str,
) -> Result<CodeCheck, StoreError> {
    user_code::check(c, user_id, purpose, &candidates(state, user_id, purpose, code), state.clock.now(), ATTEMPTS).await
}

/// Checks a code without consuming it (see [`user_code::verify`]).
pub async fn verify(
    state: &AppState,
    c: &mut Conn,
    user_id: &str,
    purpose: &str,
    code: &str,
) -> Result<CodeCheck, StoreError> {
    user_code::verify(c, user_id, purpose, &candidates(state, user_id, purpose, code), state.clock.now(), ATTEMPTS)
        .await
}

/// Consumes a code [`verify`] found valid; false when it is gone meanwhile.
pub async fn consume(
    state: &AppState,
    c: &mut Conn,
    user_id: &str,
    purpose: &str,
    code: &str,
) -> Result<bool, StoreError> {
    user_code::consume(c, user_id, purpose, &candidates(state, user_id, purpose, code), state.clock.now()).await
}
