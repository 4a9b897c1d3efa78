//! Settings in layers: built-in defaults, then a TOML file (`config/latch.toml` or `--config`),
//! then `LATCH_*` environment variables; every secret may also come from a file named by
//! `LATCH_<NAME>_FILE`. The raw layers are merged into [`Config`] by figment, then checked once
//! into typed [`Settings`]; a bad value stops start-up with one line naming the setting.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use figment::Figment;
use figment::providers::{Format, Serialized, Toml};
use figment::value::{Dict, Value};
use serde::{Deserialize, Serialize};
use url::Url;

use crate::domain::duration;

mod env;
mod secret;

use env::env_layer;
pub use env::{ENV_VARS, EnvVar, unknown_env_vars};
pub use secret::{SAMPLE_MASTERKEY_REFUSED, is_sample_masterkey, mask_url, parse_masterkey};

/// The default configuration file, read when it exists and no `--config` is given.
pub const DEFAULT_CONFIG_FILE: &str = "config/latch.toml";

/// The longest authorization code lifetime (`login.code_lifetime`) latch accepts.
pub const MAX_CODE_LIFETIME: i64 = 600;

#[derive(Debug, thiserror::Error)]
#[error("configuration error: {0}")]
pub struct ConfigError(pub String);

fn err(msg: impl Into<String>) -> ConfigError {
    ConfigError(msg.into())
}

/// The merged, unchecked configuration (the shape of `config/latch.toml`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub external_url: String,
    pub listen: String,
    pub database_url: String,
    pub database_max_connections: u32,
    pub masterkey: Option<String>,
    pub data_dir: String,
    pub log_format: String,
    pub log_level: String,
    pub shutdown_timeout: String,
    pub sweep_interval: String,
    /// How long after its rotation a refresh token may be used again (0: never).
    pub refresh_reuse_interval: String,
    /// Whether back-channel logout tokens may go to loopback, private and link-local addresses:
    /// `auto` (only while the external URL's host is a loopback one, a developer's machine),
    /// `allow` or `deny`.
    pub backchannel_private_targets: String,
    pub firstinstance: FirstInstanceConfig,
    pub keys: KeysConfig,
    pub password: PasswordConfig,
    pub login: LoginConfig,
    pub smtp: SmtpConfig,
    pub gcs: GcsConfig,
    pub limits: LimitsConfig,
}

/// Limits against abuse (see `crate::limits`): rate budgets `N/period` or `off`, per replica.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Login form posts per client IP.
    pub login_per_ip: String,
    /// Password attempts per login name.
    pub login_per_name: String,
    /// Token endpoint requests per client IP.
    pub token_per_ip: String,
    /// Token, introspection and revocation requests per authenticated client.
    pub per_client: String,
    /// Key set requests per client IP.
    pub keys_per_ip: String,
    /// Authorization requests (each stores a pending sign-in) per client IP.
    pub authorize_per_ip: String,
    /// Reverse proxies in front of latch that append to X-Forwarded-For (0: use the peer address).
    pub forwarded_for_hops: u32,
    /// Open connections per client IP (0: no cap); applies only without reverse proxies.
    pub connections_per_ip: u32,
    pub header_read_timeout: String,
    pub body_read_timeout: String,
}

impl LimitsConfig {
    fn validate(&self) -> Result<crate::limits::LimitSettings, ConfigError> {
        use crate::limits::Budget;
        let budget = |name: &str, v: &str| {
            Budget::parse(v)
                .map_err(|m| err(format!("limits.{name} (LATCH_LIMITS_{}): '{v}' {m}", name.to_ascii_uppercase())))
        };
        let timeout = |name: &str, v: &str| {
            let env = format!("LATCH_LIMITS_{}", name.to_ascii_uppercase());
            let d = duration::parse(v).map_err(|e| err(format!("limits.{name} ({env}): '{v}' {e}")))?;
            if d < Duration::from_secs(1) || d > Duration::from_secs(600) {
                return Err(err(format!("limits.{name} ({env}) must be between 1s and 10m")));
            }
            Ok(d)
        };
        if self.forwarded_for_hops > 10 {
            return Err(err("limits.forwarded_for_hops (LATCH_LIMITS_FORWARDED_FOR_HOPS) must be 0 to 10"));
        }
        Ok(crate::limits::LimitSettings {
            login_per_ip: budget("login_per_ip", &self.login_per_ip)?,
            login_per_name: budget("login_per_name", &self.login_per_name)?,
            token_per_ip: budget("token_per_ip", &self.token_per_ip)?,
            per_client: budget("per_client", &self.per_client)?,
            keys_per_ip: budget("keys_per_ip", &self.keys_per_ip)?,
            authorize_per_ip: budget("authorize_per_ip", &self.authorize_per_ip)?,
            forwarded_for_hops: self.forwarded_for_hops,
            connections_per_ip: self.connections_per_ip,
            header_read_timeout: timeout("header_read_timeout", &self.header_read_timeout)?,
            body_read_timeout: timeout("body_read_timeout", &self.body_read_timeout)?,
        })
    }
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            login_per_ip: "300/1m".into(),
            login_per_name: "10/1m".into(),
            token_per_ip: "6000/1m".into(),
            per_client: "30000/1m".into(),
            keys_per_ip: "600/1m".into(),
            authorize_per_ip: "6000/1m".into(),
            forwarded_for_hops: 0,
            connections_per_ip: 512,
            header_read_timeout: "10s".into(),
            body_read_timeout: "30s".into(),
        }
    }
}

/// Google Cloud Storage for exports and imports.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GcsConfig {
    /// The JSON API endpoint (credentials from the request's service account are used).
    pub endpoint: String,
    /// An emulator (`STORAGE_EMULATOR_HOST`, as Google's client libraries read it): no
    /// credentials are used.
    pub emulator_host: Option<String>,
}

/// Google's JSON API for Cloud Storage, where exports and imports go unless configured otherwise.
pub const DEFAULT_GCS_ENDPOINT: &str = "https://storage.googleapis.com";

impl Default for GcsConfig {
    fn default() -> Self {
        Self { endpoint: DEFAULT_GCS_ENDPOINT.into(), emulator_host: None }
    }
}

/// The browser flow.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LoginConfig {
    /// How long an authorization code may be redeemed.
    pub code_lifetime: String,
    /// How long a person may take to sign in once sent to the login pages.
    pub request_lifetime: String,
}

impl Default for LoginConfig {
    fn default() -> Self {
        Self { code_lifetime: "60s".into(), request_lifetime: "30m".into() }
    }
}

/// Outgoing e-mail. Without a host, messages are written to `{data_dir}/outbox/`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SmtpConfig {
    pub host: Option<String>,
    pub port: Option<u32>,
    /// `starttls` (default), `tls` or `none`.
    pub tls: Option<String>,
    pub user: Option<String>,
    pub password: Option<String>,
    pub from: Option<String>,
}

/// argon2id parameters for new password hashes.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PasswordConfig {
    pub argon2_memory_kib: u32,
    pub argon2_iterations: u32,
    pub argon2_parallelism: u32,
}

impl Default for PasswordConfig {
    /// OWASP's recommendation: 19 MiB, two passes, one lane.
    fn default() -> Self {
        Self { argon2_memory_kib: 19 * 1024, argon2_iterations: 2, argon2_parallelism: 1 }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FirstInstanceConfig {
    pub org_name: String,
    pub admin_username: String,
    pub admin_password: Option<String>,
    pub admin_email: Option<String>,
    pub machine_username: String,
    pub patpath: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KeysConfig {
    pub rotation_interval: String,
    pub prepublish: String,
    pub jwks_max_age: String,
    pub refresh_interval: String,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            external_url: "http://localhost:8080".into(),
            listen: "127.0.0.1:8080".into(),
            database_url: "sqlite://data/latch.db".into(),
            database_max_connections: 10,
            masterkey: None,
            data_dir: "data".into(),
            log_format: "text".into(),
            log_level: "info".into(),
            shutdown_timeout: "30s".into(),
            sweep_interval: "5m".into(),
            refresh_reuse_interval: "0s".into(),
            backchannel_private_targets: "auto".into(),
            firstinstance: FirstInstanceConfig::default(),
            keys: KeysConfig::default(),
            password: PasswordConfig::default(),
            login: LoginConfig::default(),
            smtp: SmtpConfig::default(),
            gcs: GcsConfig::default(),
            limits: LimitsConfig::default(),
        }
    }
}

impl Default for FirstInstanceConfig {
    fn default() -> Self {
        Self {
            org_name: "latch".into(),
            admin_username: "admin".into(),
            admin_password: None,
            admin_email: None,
            machine_username: "latch-admin-sa".into(),
            patpath: None,
        }
    }
}

impl Default for KeysConfig {
    fn default() -> Self {
        Self {
            rotation_interval: "720h".into(),
            prepublish: "1h".into(),
            jwks_max_age: "5m".into(),
            refresh_interval: "10s".into(),
        }
    }
}

impl Config {
    /// Merges the layers. `file` is the `--config` argument; without it
    /// [`DEFAULT_CONFIG_FILE`] is read when present.
    pub fn load(file: Option<&Path>, env: &BTreeMap<String, String>) -> Result<Self, ConfigError> {
        let mut figment = Figment::from(Serialized::defaults(Config::default()));
        match file {
            Some(path) => {
                if !path.is_file() {
                    return Err(err(format!("--config: {} does not exist", path.display())));
                }
                figment = figment.merge(Toml::file_exact(path));
            }
            None => {
                if Path::new(DEFAULT_CONFIG_FILE).is_file() {
                    figment = figment.merge(Toml::file_exact(DEFAULT_CONFIG_FILE));
                }
            }
        }
        figment = figment.merge(Serialized::from(env_layer(env)?, figment::Profile::Default));
        figment.extract::<Config>().map_err(|e| err(one_line(&e)))
    }

    /// Checks every value and returns the typed settings.
    pub fn validate(&self) -> Result<Settings, ConfigError> {
        let issuer_url = Url::parse(self.external_url.trim()).map_err(|e| {
            err(format!("external_url (LATCH_EXTERNAL_URL): '{}' is not a URL: {e}", self.external_url))
        })?;
        if !matches!(issuer_url.scheme(), "http" | "https")
            || issuer_url.host_str().is_none()
            || issuer_url.query().is_some()
            || issuer_url.fragment().is_some()
        {
            return Err(err(format!(
                "external_url (LATCH_EXTERNAL_URL): '{}' must be an http(s) URL without query or fragment",
                self.external_url
            )));
        }
        // latch serves from the root of its host: its redirects, forms and pages name absolute
        // paths, which a prefix stripped by a proxy would break.
        if issuer_url.path() != "/" {
            return Err(err(format!(
                "external_url (LATCH_EXTERNAL_URL): '{}' has a path; latch is served from the root of its host \
                 (give it a host name of its own)",
                self.external_url
            )));
        }
        let issuer = issuer_url.as_str().trim_end_matches('/').to_string();
        let listen: SocketAddr = self.listen.trim().parse().map_err(|_| {
            err(format!("listen (LATCH_LISTEN): '{}' is not an address like 127.0.0.1:8080", self.listen))
        })?;
        let database_url = self.database_url.trim().to_string();
        if !(database_url.starts_with("sqlite:")
            || database_url.starts_with("postgres://")
            || database_url.starts_with("postgresql://"))
        {
            return Err(err(format!(
                "database_url (LATCH_DATABASE_URL): '{}' must start with sqlite: or postgres://",
                mask_url(&database_url)
            )));
        }
        if self.database_max_connections == 0 {
            return Err(err("database_max_connections (LATCH_DATABASE_MAX_CONNECTIONS) must be at least 1"));
        }
        let log_format = match self.log_format.as_str() {
            "text" => LogFormat::Text,
            "json" => LogFormat::Json,
            other => {
                return Err(err(format!("log_format (LATCH_LOG_FORMAT): '{other}' must be text or json")));
            }
        };
        let backchannel_private_targets = match self.backchannel_private_targets.trim() {
            "auto" => issuer_url.host().is_some_and(|h| match h {
                url::Host::Domain(d) => d.eq_ignore_ascii_case("localhost"),
                url::Host::Ipv4(ip) => ip.is_loopback(),
                url::Host::Ipv6(ip) => ip.is_loopback(),
            }),
            "allow" => true,
            "deny" => false,
            other => {
                return Err(err(format!(
                    "backchannel_private_targets (LATCH_BACKCHANNEL_PRIVATE_TARGETS): '{other}' must be auto, allow or deny"
                )));
            }
        };
        let masterkey = match &self.masterkey {
            Some(k) => Some(parse_masterkey(k).map_err(|m| err(format!("masterkey (LATCH_MASTERKEY): {m}")))?),
            None => None,
        };
        // Whole seconds: "500ms" would otherwise round down to 0s (for some settings, "off").
        let dur = |name: &str, env: &str, v: &str| -> Result<i64, ConfigError> {
            let d = duration::parse(v).map_err(|e| err(format!("{name} ({env}): '{v}' {e}")))?;
            if d.subsec_nanos() != 0 {
                return Err(err(format!("{name} ({env}): '{v}' is not a whole number of seconds")));
            }
            Ok(d.as_secs() as i64)
        };
        let rotation_interval =
            dur("keys.rotation_interval", "LATCH_KEYS_ROTATION_INTERVAL", &self.keys.rotation_interval)?;
        let prepublish = dur("keys.prepublish", "LATCH_KEYS_PREPUBLISH", &self.keys.prepublish)?;
        let jwks_max_age = dur("keys.jwks_max_age", "LATCH_KEYS_JWKS_MAX_AGE", &self.keys.jwks_max_age)?;
        let refresh_interval =
            dur("keys.refresh_interval", "LATCH_KEYS_REFRESH_INTERVAL", &self.keys.refresh_interval)?;
        if prepublish <= jwks_max_age + refresh_interval {
            return Err(err(
                "keys.prepublish (LATCH_KEYS_PREPUBLISH) must be longer than keys.jwks_max_age plus keys.refresh_interval, so every replica and client cache sees a key before it signs",
            ));
        }
        if rotation_interval <= prepublish {
            return Err(err(
                "keys.rotation_interval (LATCH_KEYS_ROTATION_INTERVAL) must be longer than keys.prepublish",
            ));
        }
        if refresh_interval < 1 {
            return Err(err("keys.refresh_interval (LATCH_KEYS_REFRESH_INTERVAL) must be at least 1s"));
        }
        let shutdown_timeout = dur("shutdown_timeout", "LATCH_SHUTDOWN_TIMEOUT", &self.shutdown_timeout)?;
        let sweep_interval = dur("sweep_interval", "LATCH_SWEEP_INTERVAL", &self.sweep_interval)?;
        if sweep_interval < 1 {
            return Err(err("sweep_interval (LATCH_SWEEP_INTERVAL) must be at least 1s"));
        }
        let refresh_reuse_interval =
            dur("refresh_reuse_interval", "LATCH_REFRESH_REUSE_INTERVAL", &self.refresh_reuse_interval)?;
        if !(0..=300).contains(&refresh_reuse_interval) {
            return Err(err("refresh_reuse_interval (LATCH_REFRESH_REUSE_INTERVAL) must be between 0s and 5m"));
        }
        let code_lifetime = dur("login.code_lifetime", "LATCH_LOGIN_CODE_LIFETIME", &self.login.code_lifetime)?;
        let request_lifetime =
            dur("login.request_lifetime", "LATCH_LOGIN_REQUEST_LIFETIME", &self.login.request_lifetime)?;
        if !(1..=MAX_CODE_LIFETIME).contains(&code_lifetime) {
            return Err(err("login.code_lifetime (LATCH_LOGIN_CODE_LIFETIME) must be between 1s and 10m"));
        }
        if !(60..=86_400).contains(&request_lifetime) {
            return Err(err("login.request_lifetime (LATCH_LOGIN_REQUEST_LIFETIME) must be between 1m and 24h"));
        }
        let smtp = self.smtp.validate(issuer_url.host_str().unwrap_or("localhost"))?;
        let pw = &self.password;
        // The bounds of an imported argon2 hash: a hash latch writes must be one that another
        // latch accepts when the users are moved (export and import).
        use crate::crypto::hashes::{ARGON2_LANES, ARGON2_MEMORY_KIB, ARGON2_TIME};
        if !ARGON2_MEMORY_KIB.contains(&u64::from(pw.argon2_memory_kib))
            || !ARGON2_TIME.contains(&u64::from(pw.argon2_iterations))
            || !ARGON2_LANES.contains(&u64::from(pw.argon2_parallelism))
            || u64::from(pw.argon2_memory_kib) < 8 * u64::from(pw.argon2_parallelism)
        {
            return Err(err(format!(
                "password.argon2_* (LATCH_PASSWORD_ARGON2_MEMORY_KIB, _ITERATIONS, _PARALLELISM): memory {} to {} KiB (512 MiB; at least 8 KiB per lane), {} to {} iterations, {} to {} lanes, the bounds latch accepts in an imported hash (got memory {}, iterations {}, lanes {})",
                ARGON2_MEMORY_KIB.start(),
                ARGON2_MEMORY_KIB.end(),
                ARGON2_TIME.start(),
                ARGON2_TIME.end(),
                ARGON2_LANES.start(),
                ARGON2_LANES.end(),
                pw.argon2_memory_kib,
                pw.argon2_iterations,
                pw.argon2_parallelism,
            )));
        }
        let fi = &self.firstinstance;
        for (name, env, v) in [
            ("firstinstance.org_name", "LATCH_FIRSTINSTANCE_ORG_NAME", &fi.org_name),
            ("firstinstance.admin_username", "LATCH_FIRSTINSTANCE_ADMIN_USERNAME", &fi.admin_username),
            ("firstinstance.machine_username", "LATCH_FIRSTINSTANCE_MACHINE_USERNAME", &fi.machine_username),
        ] {
            let n = v.trim().chars().count();
            if n == 0 || n > 200 {
                return Err(err(format!("{name} ({env}) must have 1 to 200 characters")));
            }
        }
        if fi.admin_username.trim().eq_ignore_ascii_case(fi.machine_username.trim()) {
            return Err(err("firstinstance.admin_username and firstinstance.machine_username must differ"));
        }
        let limits = self.limits.validate()?;
        let data_dir = PathBuf::from(&self.data_dir);
        let pat_path = fi.patpath.as_ref().map(PathBuf::from).unwrap_or_else(|| data_dir.join("admin.pat"));
        Ok(Settings {
            secure_cookies: issuer_url.scheme() == "https",
            issuer,
            issuer_url,
            listen,
            database_url,
            database_max_connections: self.database_max_connections,
            masterkey,
            data_dir,
            log_format,
            backchannel_private_targets,
            log_level: self.log_level.clone(),
            shutdown_timeout: Duration::from_secs(shutdown_timeout as u64),
            sweep_interval: Duration::from_secs(sweep_interval as u64),
            refresh_reuse_interval,
            first_instance: FirstInstance {
                org_name: fi.org_name.trim().to_string(),
                admin_username: fi.admin_username.trim().to_string(),
                admin_password: fi.admin_password.clone(),
                admin_email: fi.admin_email.clone(),
                machine_username: fi.machine_username.trim().to_string(),
                pat_path,
            },
            argon2: crate::crypto::password::Argon2Params {
                memory_kib: pw.argon2_memory_kib,
                iterations: pw.argon2_iterations,
                parallelism: pw.argon2_parallelism,
            },
            code_lifetime,
            request_lifetime,
            smtp,
            gcs_endpoint: self.gcs.endpoint.trim_end_matches('/').to_string(),
            gcs_emulator: self.gcs.emulator_host.as_ref().map(|h| {
                let h = h.trim().trim_end_matches('/');
                if h.starts_with("http://") || h.starts_with("https://") {
                    h.to_string()
                } else {
                    format!("http://{h}")
                }
            }),
            keys: KeySettings {
                rotation_interval,
                prepublish,
                jwks_max_age,
                refresh_interval: Duration::from_secs(refresh_interval as u64),
            },
            limits,
        })
    }

    /// The configuration as TOML with every secret masked (for `latch check-config`).
    pub fn masked_toml(&self) -> String {
        let mut c = self.clone();
        c.database_url = mask_url(&c.database_url);
        if c.masterkey.is_some() {
            c.masterkey = Some("********".into());
        }
        if c.firstinstance.admin_password.is_some() {
            c.firstinstance.admin_password = Some("********".into());
        }
        if c.smtp.password.is_some() {
            c.smtp.password = Some("********".into());
        }
        toml_string(&c)
    }
}

fn toml_string(c: &Config) -> String {
    // figment's TOML support is read-only; a small writer is enough for this flat shape.
    let mut out = String::new();
    let json = serde_json::to_value(c).unwrap_or_default();
    let mut tables = Vec::new();
    if let Some(obj) = json.as_object() {
        for (k, v) in obj {
            if v.is_object() {
                tables.push((k, v));
            } else if !v.is_null() {
                out.push_str(&format!("{k} = {v}\n"));
            }
        }
        for (name, table) in tables {
            out.push_str(&format!("\n[{name}]\n"));
            if let Some(t) = table.as_object() {
                for (k, v) in t {
                    if !v.is_null() {
                        out.push_str(&format!("{k} = {v}\n"));
                    }
                }
            }
        }
    }
    out
}

/// A configuration error on one line, without the secrets it may quote: a value of a secret
/// setting (a wrong type echoes it) and the source lines of a TOML syntax error (the line may be
/// `password = "..."`) are left out; stderr usually ends up in a log.
fn one_line(e: &figment::Error) -> String {
    let mut parts = Vec::new();
    for e in e.clone() {
        let path = e.path.join(".");
        let src = e.metadata.as_ref().map(|m| m.name.to_string()).unwrap_or_default();
        let secret = e.path.last().is_some_and(|k| {
            let k = k.to_ascii_lowercase();
            ["password", "masterkey", "secret", "database_url"].iter().any(|s| k.contains(s))
        });
        let kind = if secret {
            "the value is not valid here (not shown: the setting holds a secret)".to_string()
        } else {
            // A TOML syntax error quotes the offending line between lines of `|`.
            e.kind
                .to_string()
                .lines()
                .map(str::trim)
                .filter(|l| {
                    !l.is_empty()
                        && !l.starts_with('|')
                        && l.split_once('|').is_none_or(|(n, _)| n.trim().parse::<u64>().is_err())
                })
                .collect::<Vec<_>>()
                .join(": ")
        };
        parts.push(if path.is_empty() { format!("{kind} ({src})") } else { format!("{path}: {kind} ({src})") });
    }
    parts.join("; ")
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// The checked settings the server runs with.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The issuer: the external URL without a trailing slash.
    pub issuer: String,
    pub issuer_url: Url,
    pub secure_cookies: bool,
    pub listen: SocketAddr,
    pub database_url: String,
    pub database_max_connections: u32,
    pub masterkey: Option<[u8; 32]>,
    pub data_dir: PathBuf,
    pub log_format: LogFormat,
    /// Back-channel logout tokens may go to loopback, private and link-local addresses.
    pub backchannel_private_targets: bool,
    pub log_level: String,
    pub shutdown_timeout: Duration,
    pub sweep_interval: Duration,
    /// Seconds after its rotation in which a refresh token may be used again, each use making
    /// another successor (0: a use after the rotation is reuse, and revokes the chain).
    pub refresh_reuse_interval: i64,
    pub first_instance: FirstInstance,
    pub keys: KeySettings,
    pub argon2: crate::crypto::password::Argon2Params,
    /// Seconds an authorization code may be redeemed.
    pub code_lifetime: i64,
    /// Seconds a pending authorization request lives.
    pub request_lifetime: i64,
    pub smtp: Option<SmtpSettings>,
    pub gcs_endpoint: String,
    pub gcs_emulator: Option<String>,
    pub limits: crate::limits::LimitSettings,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SmtpTls {
    StartTls,
    Tls,
    None,
}

#[derive(Clone, Debug)]
pub struct SmtpSettings {
    pub host: String,
    pub port: u16,
    pub tls: SmtpTls,
    pub user: Option<String>,
    pub password: Option<String>,
    pub from: String,
}

impl SmtpConfig {
    fn validate(&self, external_host: &str) -> Result<Option<SmtpSettings>, ConfigError> {
        let Some(host) = self.host.as_ref().map(|h| h.trim().to_string()).filter(|h| !h.is_empty()) else {
            return Ok(None);
        };
        let tls = match self.tls.as_deref().unwrap_or("starttls") {
            "starttls" => SmtpTls::StartTls,
            "tls" => SmtpTls::Tls,
            "none" => SmtpTls::None,
            other => {
                return Err(err(format!("smtp.tls (LATCH_SMTP_TLS): '{other}' must be starttls, tls or none")));
            }
        };
        let port = match self.port {
            Some(p) => u16::try_from(p)
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| err("smtp.port (LATCH_SMTP_PORT) must be 1 to 65535"))?,
            None => match tls {
                SmtpTls::Tls => 465,
                SmtpTls::StartTls => 587,
                SmtpTls::None => 25,
            },
        };
        let from = self.from.clone().unwrap_or_else(|| format!("latch <noreply@{external_host}>"));
        if from.parse::<lettre::message::Mailbox>().is_err() {
            return Err(err(format!(
                "smtp.from (LATCH_SMTP_FROM): '{from}' is not an address like 'latch <noreply@example.com>'"
            )));
        }
        if self.user.is_some() != self.password.is_some() {
            return Err(err("smtp.user and smtp.password (LATCH_SMTP_USER, LATCH_SMTP_PASSWORD) go together"));
        }
        Ok(Some(SmtpSettings { host, port, tls, user: self.user.clone(), password: self.password.clone(), from }))
    }
}

#[derive(Clone, Debug)]
pub struct FirstInstance {
    pub org_name: String,
    pub admin_username: String,
    pub admin_password: Option<String>,
    pub admin_email: Option<String>,
    pub machine_username: String,
    pub pat_path: PathBuf,
}

/// Signing key rotation, all in seconds except the refresh interval.
#[derive(Clone, Debug)]
pub struct KeySettings {
    pub rotation_interval: i64,
    pub prepublish: i64,
    pub jwks_max_age: i64,
    pub refresh_interval: Duration,
}

impl Settings {
    /// The host of the external URL (used for the default organization's domain).
    pub fn external_host(&self) -> String {
        self.issuer_url.host_str().unwrap_or("localhost").to_ascii_lowercase()
    }
}

#[cfg(test)]
mod tests;
