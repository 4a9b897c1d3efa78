//! The migration tool: `latch migrate keycloak` and `latch migrate auth0` turn another identity
//! provider's export into the bulk import body that `POST /admin/v1/import` accepts (SPEC.md
//! 2.7 and 4.12). It runs without a server or its configuration: it reads files and writes one.
//!
//! - [`body`]: the import body and its streaming writer (temporary file, renamed at the end);
//! - [`hash`]: password hash and OTP secret formats, turned into strings latch's login verifies;
//! - [`sink`]: the rules shared by both sources (names, e-mail, phone, language, duplicates);
//! - [`keycloak`] and [`realm`]: realm exports, read user by user;
//! - [`auth0`]: the NDJSON user export joined with the password export;
//! - [`summary`]: what was written, skipped and noticed.
//!
//! Memory stays bounded: users are converted and written one at a time, never collected.

pub mod auth0;
pub mod body;
pub mod hash;
pub mod keycloak;
mod realm;
mod sink;
pub mod summary;

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub use summary::Summary;

/// Settings common to both converters.
#[derive(Debug, Clone)]
pub struct Options {
    /// The target organization; it must already exist on the target instance.
    pub org: String,
    /// Where the body goes (written to a temporary file next to it, then renamed).
    pub output: PathBuf,
    /// Written into the body as a Go duration string (`30m0s`); at most 24 hours, as the import
    /// accepts.
    pub timeout: Duration,
    /// Pretty-printed output.
    pub multiline: bool,
    /// Users without an e-mail address get `{username}@DOMAIN`, unverified.
    pub email_domain: Option<String>,
    /// Leave out users whose password hash is in an unsupported format instead of failing.
    pub skip_unsupported: bool,
    /// Show a progress bar (only ever drawn when stderr is a terminal).
    pub progress: bool,
}

impl Options {
    /// Options with the command's defaults for `org`.
    pub fn new(org: impl Into<String>) -> Self {
        Self {
            org: org.into(),
            output: PathBuf::from("./importBody.json"),
            timeout: Duration::from_secs(30 * 60),
            multiline: false,
            email_domain: None,
            skip_unsupported: false,
            progress: false,
        }
    }

    /// Checks what the command line cannot: a non-empty organization, a plausible e-mail
    /// domain, a positive timeout in whole seconds.
    pub fn validate(&self) -> Result<(), Error> {
        if self.org.trim().is_empty() {
            return Err(Error::Usage("--org must name the target organization".into()));
        }
        if let Some(d) = &self.email_domain
            && (crate::domain::validate::domain("", "", d).is_err()
                || crate::domain::validate::email("", "", &format!("user@{d}")).is_err())
        {
            return Err(Error::Usage(format!("--email-domain '{d}' is not a domain name like example.com")));
        }
        if self.timeout.is_zero() || self.timeout.subsec_nanos() != 0 {
            return Err(Error::Usage("--timeout must be a positive whole number of seconds, like 30m or 1h30m".into()));
        }
        if self.timeout > crate::admin::export::MAX_TIMEOUT {
            return Err(Error::Usage("--timeout must be at most 24h, the longest the import accepts".into()));
        }
        Ok(())
    }
}

/// Everything that stops a conversion. Each message is one line and names the file, line or
/// user at fault.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}: not valid JSON: {msg}", path.display())]
    Json { path: PathBuf, msg: String },
    #[error("{}, line {line}: {msg}", path.display())]
    Line { path: PathBuf, line: u64, msg: String },
    #[error("{0}")]
    Input(String),
    #[error(
        "user '{user}': unsupported password algorithm '{algorithm}' (pass --skip-unsupported to leave such users out)"
    )]
    Unsupported { user: String, algorithm: String },
    #[error("user '{user}': {msg}")]
    Credential { user: String, msg: String },
    #[error(
        "{count} user(s) have no usable e-mail address, which the import requires; pass --email-domain DOMAIN to give them USERNAME@DOMAIN (unverified). Nothing was written. Users: {list}"
    )]
    MissingEmail { count: u64, list: String },
    #[error("{0}")]
    Usage(String),
}

impl Error {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        Error::Io { path: path.to_path_buf(), source }
    }
}

/// A byte-counting progress bar on stderr, or a hidden one when stderr is not a terminal.
pub(crate) fn progress_bar(enabled: bool, total_bytes: u64) -> ProgressBar {
    if !enabled || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::with_draw_target(Some(total_bytes), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("{elapsed:>4} [{wide_bar}] {bytes}/{total_bytes} {msg}") {
        pb.set_style(style.progress_chars("=> "));
    }
    pb
}

/// The size of a file for the progress bar (0 when unknown).
pub(crate) fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}
