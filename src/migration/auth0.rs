//! `latch migrate auth0`: the Auth0 user export (NDJSON, one user per line) joined with the
//! password hashes of Auth0's support export (NDJSON: `_id.$oid`, `alt_id`, `email`,
//! `passwordHash`), to the import body.
//!
//! The join: a user `auth0|X` takes the password record whose `alt_id`, or else `_id.$oid`,
//! is X; a database user (`auth0|...`) without such a record takes the one with its e-mail
//! address, when exactly one record has it. Social users (`google-oauth2|...`) have no
//! password. The password index is the only thing held in memory (one entry per record);
//! users are streamed line by line.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use indicatif::ProgressBar;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::hash::{self, HashError};
use super::sink::{Candidate, Sink, key};
use super::{Error, Options, Summary, file_len, progress_bar};

/// The longest line read (Auth0 caps a user's metadata at 16 MB): a file without line breaks
/// is refused rather than read into memory whole.
const MAX_LINE: u64 = 32 << 20;

/// A line of the user export.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct A0User {
    user_id: Option<String>,
    email: Option<String>,
    email_verified: Option<bool>,
    username: Option<String>,
    given_name: Option<String>,
    family_name: Option<String>,
    name: Option<String>,
    nickname: Option<String>,
    locale: Option<String>,
    phone_number: Option<String>,
    phone_verified: Option<bool>,
    blocked: Option<bool>,
    /// Free-form, often edited by the users themselves: read as any JSON, so that a value of
    /// an unexpected type stops nothing (only a string `locale` is used).
    user_metadata: Option<serde_json::Value>,
}

/// A line of the password export.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct A0Password {
    #[serde(rename = "_id")]
    id: Option<ObjectId>,
    alt_id: Option<String>,
    email: Option<String>,
    #[serde(rename = "passwordHash")]
    password_hash: Option<String>,
    identifiers: Option<Vec<Identifier>>,
}

/// `{"$oid": "..."}` as MongoDB exports write it, or a bare string.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ObjectId {
    Extended {
        #[serde(rename = "$oid")]
        oid: String,
    },
    Plain(String),
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Identifier {
    #[serde(rename = "type")]
    kind: Option<String>,
    value: Option<String>,
}

/// A password record claimed by two or more e-mail addresses.
const AMBIGUOUS: usize = usize::MAX;

/// Password hashes by user id and by (lower-case) e-mail address.
#[derive(Debug, Default)]
struct Passwords {
    hashes: Vec<Box<str>>,
    /// How the summary names each record (its e-mail address, or user id).
    labels: Vec<Box<str>>,
    used: Vec<bool>,
    /// By [`key`] of the user id and of the lower-case e-mail address.
    by_id: HashMap<u128, usize>,
    by_email: HashMap<u128, usize>,
    /// Per record, the [`key`] of the user id it names (`auth0|` and its `_id` or `alt_id`).
    owner: Vec<u128>,
    /// The export's users ([`Users::scan`]): who may take a record by e-mail.
    users: Users,
}

/// What a first pass over the user export learns: the [`key`]s of its user ids, and how many
/// of its database users (`auth0|`) have each lower-case e-mail address.
#[derive(Debug, Default)]
struct Users {
    ids: HashSet<u128>,
    emails: HashMap<u128, u32>,
}

impl Users {
    fn scan(path: &Path) -> Result<Self, Error> {
        #[derive(Deserialize)]
        struct Who {
            user_id: Option<String>,
            email: Option<String>,
        }
        let mut users = Users::default();
        for_each_line(path, &ProgressBar::hidden(), |_, who: Who| {
            let Some(id) = who.user_id else { return Ok(()) };
            if id.starts_with("auth0|")
                && let Some(e) = who.email.filter(|e| !e.is_empty())
            {
                *users.emails.entry(key(&e.to_lowercase())).or_default() += 1;
            }
            users.ids.insert(key(&id));
            Ok(())
        })?;
        Ok(users)
    }
}

impl Passwords {
    fn load(path: &Path, users: Users, pb: &ProgressBar) -> Result<Self, Error> {
        let mut p = Passwords { users, ..Passwords::default() };
        for_each_line(path, pb, |line, rec: A0Password| {
            let Some(hash) = rec.password_hash.filter(|h| !h.is_empty()) else {
                return Ok(());
            };
            let oid = rec.id.map(|id| match id {
                ObjectId::Extended { oid } | ObjectId::Plain(oid) => oid,
            });
            let Some(local_id) = rec.alt_id.filter(|a| !a.is_empty()).or(oid) else {
                return Err(Error::Line {
                    path: path.to_path_buf(),
                    line,
                    msg: "a password record without _id or alt_id".into(),
                });
            };
            let email = rec
                .email
                .filter(|e| !e.is_empty())
                .or_else(|| rec.identifiers?.into_iter().find(|i| i.kind.as_deref() == Some("email"))?.value);
            let index = p.hashes.len();
            let user_id = format!("auth0|{local_id}");
            p.hashes.push(hash.into());
            p.by_id.insert(key(&user_id), index);
            p.owner.push(key(&user_id));
            p.labels.push(email.clone().unwrap_or(user_id).into_boxed_str());
            p.used.push(false);
            if let Some(e) = email {
                p.by_email.entry(key(&e.to_lowercase())).and_modify(|i| *i = AMBIGUOUS).or_insert(index);
            }
            Ok(())
        })?;
        Ok(p)
    }

    /// The hash for a user: by id, then (database users only) by e-mail, when the record is
    /// the only one with that address, no other user of the export has the id it names, and no
    /// other database user has the address: a record must not give one person's password to
    /// another who shares the address (in another connection, say).
    fn find(&mut self, user_id: &str, email: &str) -> Option<&str> {
        let index = match self.by_id.get(&key(user_id)) {
            Some(i) => *i,
            None if user_id.starts_with("auth0|") && !email.is_empty() => {
                let address = key(&email.to_lowercase());
                let i = *self.by_email.get(&address)?;
                let owned = self.owner.get(i).is_some_and(|o| self.users.ids.contains(o));
                if owned || self.users.emails.get(&address).copied().unwrap_or(0) > 1 {
                    return None;
                }
                i
            }
            None => return None,
        };
        if let Some(used) = self.used.get_mut(index) {
            *used = true;
        }
        self.hashes.get(index).map(AsRef::as_ref)
    }

    /// The records no user took, by label.
    fn unused(&self) -> impl Iterator<Item = &str> {
        self.labels.iter().zip(&self.used).filter(|(_, used)| !**used).map(|(label, _)| label.as_ref())
    }
}

/// Converts an Auth0 export. Without `passwords` every user is written without a password;
/// `email_verified` forces the flag for everyone, else each user's own value is kept.
pub fn run(
    opts: &Options,
    users: &Path,
    passwords: Option<&Path>,
    email_verified: Option<bool>,
) -> Result<Summary, Error> {
    opts.validate()?;
    let total = file_len(users) + passwords.map_or(0, file_len);
    let pb = progress_bar(opts.progress, total);
    let result = (|| {
        let mut index = match passwords {
            Some(path) => Passwords::load(path, Users::scan(users)?, &pb)?,
            None => Passwords::default(),
        };
        let mut sink = Sink::create(opts, pb.clone())?;
        for_each_line(users, &pb, |_, u: A0User| convert(u, &mut index, email_verified, &mut sink))?;
        for label in index.unused() {
            sink.notice(label, "password record matching no user of the export");
        }
        sink.finish(&format!("the user export {}", users.display()))
    })();
    pb.finish_and_clear();
    result
}

fn convert(
    u: A0User,
    passwords: &mut Passwords,
    email_verified: Option<bool>,
    sink: &mut Sink<'_>,
) -> Result<(), Error> {
    sink.seen();
    let user_id = u.user_id.unwrap_or_default();
    let email = u.email.unwrap_or_default();
    let phone = u.phone_number.unwrap_or_default();
    let user_name = [&u.username, &Some(email.clone()), &Some(phone.clone())]
        .into_iter()
        .flatten()
        .find(|s| !s.trim().is_empty())
        .cloned()
        .unwrap_or_else(|| user_id.clone());
    let label = if user_name.is_empty() { user_id.clone() } else { user_name.clone() };
    if user_id.is_empty() {
        sink.skip(&label, "no user_id");
        return Ok(());
    }
    let password = match passwords.find(&user_id, &email).map(hash::auth0) {
        None => None,
        Some(Ok(h)) => Some(h),
        Some(Err(HashError::Unsupported(algorithm))) if sink.options().skip_unsupported => {
            sink.skip(&label, &format!("unsupported password algorithm '{algorithm}'"));
            return Ok(());
        }
        Some(Err(HashError::Unsupported(algorithm))) => {
            return Err(Error::Unsupported { user: label, algorithm });
        }
        Some(Err(HashError::Malformed(msg))) => {
            return Err(Error::Credential { user: label, msg });
        }
    };
    if password.is_none()
        && let Some((provider, _)) = user_id.split_once('|')
        && provider != "auth0"
    {
        sink.notice(&label, &format!("signed in with {provider} at Auth0, imported without password"));
    }
    let metadata_locale = || u.user_metadata.as_ref()?.get("locale")?.as_str().map(str::to_string);
    let locale = u.locale.clone().or_else(metadata_locale).unwrap_or_default();
    sink.accept(Candidate {
        label,
        user_id,
        user_name,
        first_name: u.given_name.unwrap_or_default(),
        last_name: u.family_name.unwrap_or_default(),
        full_name: u.name.unwrap_or_default(),
        nick_name: u.nickname.unwrap_or_default(),
        locale,
        email_verified: email_verified.unwrap_or(u.email_verified.unwrap_or(false)),
        email,
        phone,
        phone_verified: u.phone_verified.unwrap_or(false),
        password,
        password_change_required: false,
        otp: None,
        inactive: u.blocked == Some(true),
    })
}

/// Calls `f` with each non-blank line of an NDJSON file, parsed, and its line number.
fn for_each_line<T: DeserializeOwned>(
    path: &Path,
    pb: &ProgressBar,
    mut f: impl FnMut(u64, T) -> Result<(), Error>,
) -> Result<(), Error> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let mut reader = BufReader::with_capacity(1 << 16, pb.wrap_read(file));
    let mut line = String::new();
    let mut number = 0u64;
    let at = |number: u64, msg: String| Error::Line { path: path.to_path_buf(), line: number, msg };
    loop {
        line.clear();
        number += 1;
        match std::io::Read::take(&mut reader, MAX_LINE + 1).read_line(&mut line) {
            Ok(0) => return Ok(()),
            Ok(n) if n as u64 > MAX_LINE => {
                return Err(at(number, format!("longer than {} MiB; no user record is", MAX_LINE >> 20)));
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                return Err(at(number, "not UTF-8 text".into()));
            }
            Err(e) => return Err(Error::io(path, e)),
        }
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        if number == 1 && text.starts_with('[') {
            return Err(at(number, "a JSON array; the export must have one JSON object per line (NDJSON)".into()));
        }
        if !text.starts_with('{') {
            return Err(at(number, "not a JSON object".into()));
        }
        let value: T = serde_json::from_str(text).map_err(|e| {
            if number == 1 && e.is_eof() {
                return at(
                    number,
                    "a JSON document over several lines; the export must have one JSON object per line (NDJSON)".into(),
                );
            }
            // serde's own position is "line 1" of this one line; the column is what helps.
            let msg = e.to_string();
            let msg = msg.rsplit_once(" at line ").map_or(msg.as_str(), |(m, _)| m);
            at(number, format!("not a JSON object of the export: {msg} (column {})", e.column()))
        })?;
        f(number, value)?;
    }
}

#[cfg(test)]
#[path = "auth0_tests.rs"]
mod tests;
