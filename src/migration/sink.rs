//! The rules both converters share. A converter turns a source user into a [`Candidate`] (or
//! skips it); the [`Sink`] applies the import's requirements (an id, first and last name, an
//! e-mail address, a `+` phone number, unique ids and user names, then the import's own check
//! of the record), writes the user and keeps the summary.

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash as _, Hasher as _};

use indicatif::ProgressBar;
use sha2::{Digest, Sha256};

use super::body::{BodyWriter, Email, HashedPassword, HumanUser, ImportUser, Phone, Profile, UserState};
use super::{Error, Options, Summary};
use crate::domain::validate;
use crate::management::import::check_record;

/// Field limits of the import record (zitadel-interface.md section 5).
const NAME_MAX: usize = 200;
/// The longest user id the import takes.
const ID_MAX: usize = 200;
/// How many users without an e-mail address the error message names.
const MISSING_LISTED: usize = 20;

/// A source user, mapped field by field; the sink fills in what the import requires.
#[derive(Debug, Default, Clone)]
pub(crate) struct Candidate {
    /// How messages name the user (user name, or id).
    pub label: String,
    pub user_id: String,
    pub user_name: String,
    pub first_name: String,
    pub last_name: String,
    /// A full name ("Ada Lovelace"), used as display name and to fill missing names.
    pub full_name: String,
    pub nick_name: String,
    /// A locale like `en-US`; its base language becomes the preferred language.
    pub locale: String,
    pub email: String,
    pub email_verified: bool,
    pub phone: String,
    pub phone_verified: bool,
    pub password: Option<String>,
    pub password_change_required: bool,
    pub otp: Option<String>,
    pub inactive: bool,
}

pub(crate) struct Sink<'a> {
    opts: &'a Options,
    writer: BodyWriter,
    summary: Summary,
    /// Ids and lower-case user names seen, as [`key`]s.
    ids: HashSet<u128>,
    names: HashSet<u128>,
    missing_email: u64,
    missing_listed: Vec<String>,
    pb: ProgressBar,
}

impl<'a> Sink<'a> {
    pub fn create(opts: &'a Options, pb: ProgressBar) -> Result<Self, Error> {
        opts.validate()?;
        let writer = BodyWriter::create(&opts.output, &opts.org, opts.multiline)?;
        Ok(Self {
            opts,
            writer,
            summary: Summary { output: opts.output.clone(), org: opts.org.clone(), ..Summary::default() },
            ids: HashSet::new(),
            names: HashSet::new(),
            missing_email: 0,
            missing_listed: Vec::new(),
            pb,
        })
    }

    pub fn options(&self) -> &Options {
        self.opts
    }

    /// Counts a user of the input (before it is accepted or skipped).
    pub fn seen(&mut self) {
        self.summary.seen += 1;
        if self.summary.seen.is_multiple_of(4096) {
            self.pb.set_message(format!("{} users", self.summary.seen));
        }
    }

    pub fn skip(&mut self, user: &str, reason: &str) {
        self.summary.skipped.add(reason, user);
    }

    pub fn notice(&mut self, user: &str, what: &str) {
        self.summary.notices.add(what, user);
    }

    /// Writes a user, or skips it with a reason: without a user name, a repeated id or user
    /// name, or refused by the import's own checks of a user ([`import_check`]), so that the
    /// body always imports. A user without an id gets one derived from the organization and
    /// its user name ([`derived_id`]).
    pub fn accept(&mut self, c: Candidate) -> Result<(), Error> {
        if c.user_name.trim().is_empty() {
            self.skip(&c.label, "no user name");
            return Ok(());
        }
        // Notices count only for users written.
        let mut notes: Vec<&'static str> = Vec::new();
        let user_id = match c.user_id.trim() {
            "" => {
                notes.push("no user id in the export, one derived from the organization and the user name");
                derived_id(&self.opts.org, &c.user_name)
            }
            id => id.to_string(),
        };
        let (id_key, name_key) = (key(&user_id), key(&c.user_name.to_lowercase()));
        if self.ids.contains(&id_key) {
            self.skip(&c.label, "duplicate user id");
            return Ok(());
        }
        if self.names.contains(&name_key) {
            self.skip(&c.label, "duplicate user name");
            return Ok(());
        }
        let Some(email) = self.email(&c, &mut notes) else {
            return Ok(());
        };
        let (first_name, last_name, display_name, filled) =
            names(&c.first_name, &c.last_name, &c.full_name, &c.user_name);
        if filled {
            notes.push("first or last name missing, filled in");
        }
        let phone = match c.phone.trim() {
            "" => None,
            p if validate::phone("", "", p).is_ok() => {
                Some(Phone { phone: p.to_string(), is_phone_verified: c.phone_verified })
            }
            _ => {
                notes.push("phone number not in international form (+...), dropped");
                None
            }
        };
        let user = HumanUser {
            user_id,
            user: ImportUser {
                user_name: c.user_name,
                profile: Profile {
                    first_name,
                    last_name,
                    nick_name: clip(c.nick_name.trim()),
                    display_name,
                    preferred_language: base_language(&c.locale),
                },
                email,
                phone,
                hashed_password: c.password.map(|value| HashedPassword { value }),
                password_change_required: c.password_change_required,
                otp_code: c.otp.unwrap_or_default(),
            },
            state: c.inactive.then_some(UserState::Inactive),
        };
        if let Err(why) = import_check(&user) {
            self.skip(&c.label, &format!("refused by the import's checks: {why}"));
            return Ok(());
        }
        self.ids.insert(id_key);
        self.names.insert(name_key);
        for note in notes {
            self.notice(&c.label, note);
        }
        self.writer.push(&user)?;
        let s = &mut self.summary;
        s.written += 1;
        s.without_password += u64::from(user.user.hashed_password.is_none());
        s.with_otp += u64::from(!user.user.otp_code.is_empty());
        s.inactive += u64::from(c.inactive);
        s.password_change_required += u64::from(c.password_change_required);
        Ok(())
    }

    /// The user's e-mail address, or `{user name}@DOMAIN` (unverified) when it has none or an
    /// unusable one. Without `--email-domain` such users are counted for the final error.
    fn email(&mut self, c: &Candidate, notes: &mut Vec<&'static str>) -> Option<Email> {
        let given = c.email.trim();
        if !given.is_empty() {
            if validate::email("", "", given).is_ok() {
                return Some(Email { email: given.to_string(), is_email_verified: c.email_verified });
            }
            notes.push("e-mail address not valid, treated as missing");
        }
        match &self.opts.email_domain {
            Some(domain) => {
                notes.push("e-mail filled in from --email-domain, unverified");
                Some(Email { email: format!("{}@{domain}", local_part(&c.user_name)), is_email_verified: false })
            }
            None => {
                self.missing_email += 1;
                if self.missing_listed.len() < MISSING_LISTED {
                    self.missing_listed.push(c.label.clone());
                }
                None
            }
        }
    }

    /// Completes the body (or fails without leaving one) and returns the summary. `what`
    /// names the input for the "no users" error.
    pub fn finish(self, what: &str) -> Result<Summary, Error> {
        self.pb.finish_and_clear();
        if self.missing_email > 0 {
            let mut list = self.missing_listed.join(", ");
            let more = self.missing_email - self.missing_listed.len() as u64;
            if more > 0 {
                list.push_str(&format!(", and {more} more"));
            }
            return Err(Error::MissingEmail { count: self.missing_email, list });
        }
        let s = self.summary;
        if s.written == 0 {
            return Err(Error::Input(if s.seen == 0 {
                format!("{what} has no users")
            } else {
                let reasons: Vec<String> = s.skipped.iter().map(|(reason, n, _)| format!("{reason}: {n}")).collect();
                format!("no user of {what} can be imported; all {} were skipped ({})", s.seen, reasons.join(", "))
            }));
        }
        self.writer.finish(self.opts.timeout)?;
        Ok(s)
    }
}

/// The checks `POST /admin/v1/import` makes of each user of an organization that do not
/// depend on the target instance: the record (user name, profile, e-mail, phone, password
/// hash, OTP secret; [`check_record`], the same function) and the id. One user refused there
/// would keep its whole organization out, so such a user is skipped here instead.
fn import_check(u: &HumanUser) -> Result<(), String> {
    if u.user_id.len() > ID_MAX {
        return Err(format!("userId is longer than {ID_MAX} characters"));
    }
    // The import refuses a NUL anywhere in its body (no store keeps one), and with it every user.
    if u.user_id.chars().any(char::is_control) {
        return Err("userId contains a control character".into());
    }
    check_record(&u.user.to_request(), "user").map(|_| ()).map_err(|e| e.message)
}

/// A stable id for a user the export gives none (the import requires one): a name-based
/// UUID (RFC 9562 version 8, from SHA-256) of the target organization and the lower-case user
/// name. Converting the same export for the same organization again gives the same ids, so a
/// second import skips the users it already has; user names are unique in an instance, so no
/// two users get the same id.
pub(crate) fn derived_id(org: &str, user_name: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"latch migrate user id\0");
    h.update(org.trim().as_bytes());
    h.update(b"\0");
    h.update(user_name.trim().to_lowercase().as_bytes());
    let digest = h.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    bytes[6] = (bytes[6] & 0x0f) | 0x80; // version 8
    bytes[8] = (bytes[8] & 0x3f) | 0x80; // the RFC variant
    uuid::Uuid::from_bytes(bytes).hyphenated().to_string()
}

/// A 128-bit digest standing in for a string in the sets and maps that grow with the input
/// (a third of the memory of the strings; two strings share one with a chance of about
/// n²/2¹²⁹, nil for any real export).
pub(crate) fn key(s: &str) -> u128 {
    let half = |salt: u8| {
        let mut h = DefaultHasher::new();
        salt.hash(&mut h);
        s.hash(&mut h);
        h.finish()
    };
    (u128::from(half(1)) << 64) | u128::from(half(2))
}

/// First, last and display name. Missing names come from the full name (split at its last
/// space) or are the one name there is (first, last, full or user name); the display name is
/// then that name, so the profile does not read "jdoe jdoe". The flag says something was filled.
fn names(first: &str, last: &str, full: &str, user_name: &str) -> (String, String, String, bool) {
    let (first, last, full) = (first.trim(), last.trim(), full.trim());
    if !first.is_empty() && !last.is_empty() {
        return (clip(first), clip(last), clip(full), false);
    }
    if first.is_empty()
        && last.is_empty()
        && let Some((a, b)) = full.rsplit_once(char::is_whitespace)
        && !a.trim().is_empty()
        && !b.is_empty()
    {
        return (clip(a.trim()), clip(b), clip(full), false);
    }
    let single = [first, last, full, user_name.trim()].into_iter().find(|s| !s.is_empty()).unwrap_or_default();
    let pick = |s: &str| clip(if s.is_empty() { single } else { s });
    let display = if full.is_empty() { single } else { full };
    (pick(first), pick(last), clip(display), true)
}

/// At most [`NAME_MAX`] characters.
fn clip(s: &str) -> String {
    match s.char_indices().nth(NAME_MAX) {
        Some((i, _)) => s[..i].to_string(),
        None => s.to_string(),
    }
}

/// The base language of a locale: `en-US` and `en_US` give `en`; anything that is not two or
/// three letters gives nothing.
pub(crate) fn base_language(locale: &str) -> String {
    let base = locale.trim().split(['-', '_']).next().unwrap_or_default();
    if (2..=3).contains(&base.len()) && base.chars().all(|c| c.is_ascii_alphabetic()) {
        base.to_ascii_lowercase()
    } else {
        String::new()
    }
}

/// A user name made fit for the local part of an address: characters an address cannot hold
/// (including `@` and spaces) become `_`.
fn local_part(user_name: &str) -> String {
    let s: String = user_name
        .trim()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || "!#$%&'*+-/=?^_`{|}~.".contains(c) { c } else { '_' })
        .collect();
    let s = s.trim_matches('.');
    if s.is_empty() { "user".to_string() } else { s.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fall_back_sensibly() {
        let n = |f, l, full, u| names(f, l, full, u);
        assert_eq!(n("Ada", "Lovelace", "", "ada"), ("Ada".into(), "Lovelace".into(), "".into(), false));
        assert_eq!(
            n("", "", "Mary Ann Smith", "m"),
            ("Mary Ann".into(), "Smith".into(), "Mary Ann Smith".into(), false)
        );
        assert_eq!(n("", "", "", "jdoe"), ("jdoe".into(), "jdoe".into(), "jdoe".into(), true));
        assert_eq!(n("Madonna", "", "", "m"), ("Madonna".into(), "Madonna".into(), "Madonna".into(), true));
        assert_eq!(n("", "Doe", "", "jd"), ("Doe".into(), "Doe".into(), "Doe".into(), true));
        assert_eq!(n("", "", "Cher", "c"), ("Cher".into(), "Cher".into(), "Cher".into(), true));
        let long = "x".repeat(250);
        assert_eq!(n(&long, "y", "", "u").0.chars().count(), 200);
    }

    #[test]
    fn base_languages() {
        for (locale, lang) in [
            ("en-US", "en"),
            ("en_GB", "en"),
            ("de", "de"),
            ("FR-ca", "fr"),
            ("gsw-CH", "gsw"),
            ("", ""),
            ("english", ""),
            ("e1", ""),
        ] {
            assert_eq!(base_language(locale), lang, "{locale}");
        }
    }

    #[test]
    fn local_parts_make_valid_addresses() {
        for (name, local) in [
            ("jdoe", "jdoe"),
            ("j.doe+x", "j.doe+x"),
            ("bob@corp", "bob_corp"),
            ("Zoë Smith", "Zo__Smith"),
            (".", "user"),
        ] {
            assert_eq!(local_part(name), local, "{name}");
            let address = format!("{local}@example.com");
            assert!(validate::email("", "", &address).is_ok(), "{address}");
        }
    }
}
