//! The environment layer: every `LATCH_*` variable, the configuration key it sets, and the
//! `_FILE` form of secrets.

use super::*;

#[derive(Clone, Copy)]
enum Kind {
    Str,
    U32,
}

/// One environment variable and the configuration key it sets.
pub struct EnvVar {
    pub name: &'static str,
    key: &'static str,
    kind: Kind,
    /// May also be given as `<name>_FILE`, and is masked when printed.
    pub secret: bool,
}

const fn var(name: &'static str, key: &'static str) -> EnvVar {
    EnvVar { name, key, kind: Kind::Str, secret: false }
}

const fn num(name: &'static str, key: &'static str) -> EnvVar {
    EnvVar { name, key, kind: Kind::U32, secret: false }
}

const fn secret(name: &'static str, key: &'static str) -> EnvVar {
    EnvVar { name, key, kind: Kind::Str, secret: true }
}

/// Every environment variable latch reads for its configuration.
pub const ENV_VARS: &[EnvVar] = &[
    var("LATCH_EXTERNAL_URL", "external_url"),
    var("LATCH_LISTEN", "listen"),
    secret("LATCH_DATABASE_URL", "database_url"),
    EnvVar { name: "LATCH_DATABASE_MAX_CONNECTIONS", key: "database_max_connections", kind: Kind::U32, secret: false },
    secret("LATCH_MASTERKEY", "masterkey"),
    var("LATCH_DATA_DIR", "data_dir"),
    var("LATCH_LOG_FORMAT", "log_format"),
    var("LATCH_LOG_LEVEL", "log_level"),
    var("LATCH_SHUTDOWN_TIMEOUT", "shutdown_timeout"),
    var("LATCH_SWEEP_INTERVAL", "sweep_interval"),
    var("LATCH_REFRESH_REUSE_INTERVAL", "refresh_reuse_interval"),
    var("LATCH_BACKCHANNEL_PRIVATE_TARGETS", "backchannel_private_targets"),
    var("LATCH_FIRSTINSTANCE_ORG_NAME", "firstinstance.org_name"),
    var("LATCH_FIRSTINSTANCE_ADMIN_USERNAME", "firstinstance.admin_username"),
    secret("LATCH_FIRSTINSTANCE_ADMIN_PASSWORD", "firstinstance.admin_password"),
    var("LATCH_FIRSTINSTANCE_ADMIN_EMAIL", "firstinstance.admin_email"),
    var("LATCH_FIRSTINSTANCE_MACHINE_USERNAME", "firstinstance.machine_username"),
    var("LATCH_FIRSTINSTANCE_PATPATH", "firstinstance.patpath"),
    var("LATCH_KEYS_ROTATION_INTERVAL", "keys.rotation_interval"),
    var("LATCH_KEYS_PREPUBLISH", "keys.prepublish"),
    var("LATCH_KEYS_JWKS_MAX_AGE", "keys.jwks_max_age"),
    var("LATCH_KEYS_REFRESH_INTERVAL", "keys.refresh_interval"),
    num("LATCH_PASSWORD_ARGON2_MEMORY_KIB", "password.argon2_memory_kib"),
    num("LATCH_PASSWORD_ARGON2_ITERATIONS", "password.argon2_iterations"),
    num("LATCH_PASSWORD_ARGON2_PARALLELISM", "password.argon2_parallelism"),
    var("LATCH_LOGIN_CODE_LIFETIME", "login.code_lifetime"),
    var("LATCH_LOGIN_REQUEST_LIFETIME", "login.request_lifetime"),
    var("LATCH_SMTP_HOST", "smtp.host"),
    num("LATCH_SMTP_PORT", "smtp.port"),
    var("LATCH_SMTP_TLS", "smtp.tls"),
    var("LATCH_SMTP_USER", "smtp.user"),
    secret("LATCH_SMTP_PASSWORD", "smtp.password"),
    var("LATCH_SMTP_FROM", "smtp.from"),
    var("LATCH_GCS_ENDPOINT", "gcs.endpoint"),
    var("LATCH_LIMITS_LOGIN_PER_IP", "limits.login_per_ip"),
    var("LATCH_LIMITS_LOGIN_PER_NAME", "limits.login_per_name"),
    var("LATCH_LIMITS_TOKEN_PER_IP", "limits.token_per_ip"),
    var("LATCH_LIMITS_PER_CLIENT", "limits.per_client"),
    var("LATCH_LIMITS_KEYS_PER_IP", "limits.keys_per_ip"),
    var("LATCH_LIMITS_AUTHORIZE_PER_IP", "limits.authorize_per_ip"),
    num("LATCH_LIMITS_FORWARDED_FOR_HOPS", "limits.forwarded_for_hops"),
    num("LATCH_LIMITS_CONNECTIONS_PER_IP", "limits.connections_per_ip"),
    var("LATCH_LIMITS_HEADER_READ_TIMEOUT", "limits.header_read_timeout"),
    var("LATCH_LIMITS_BODY_READ_TIMEOUT", "limits.body_read_timeout"),
    // The convention of Google's client libraries for an emulator.
    var("STORAGE_EMULATOR_HOST", "gcs.emulator_host"),
];

/// `LATCH_` variables that are read elsewhere (the CLI and the test suite).
const OTHER_KNOWN_VARS: &[&str] = &["LATCH_CONFIG", "LATCH_TEST_DATABASE_URL"];

/// Builds the environment layer from `(name, value)` pairs, reading `_FILE` secrets.
pub(super) fn env_layer(env: &BTreeMap<String, String>) -> Result<Dict, ConfigError> {
    let mut root = Dict::new();
    for v in ENV_VARS {
        let file_var = format!("{}_FILE", v.name);
        let raw = match (env.get(v.name), env.get(&file_var)) {
            (Some(_), Some(_)) => {
                return Err(err(format!("{} and {file_var} are both set; use one", v.name)));
            }
            (Some(value), None) => value.clone(),
            (None, Some(path)) if v.secret => std::fs::read_to_string(path)
                .map(|s| s.trim_end_matches(['\r', '\n']).to_string())
                .map_err(|e| err(format!("{file_var}: cannot read {path}: {e}")))?,
            _ => continue,
        };
        let value = match v.kind {
            Kind::Str => Value::from(raw),
            Kind::U32 => Value::from(
                raw.trim().parse::<u32>().map_err(|_| err(format!("{}: '{raw}' is not a whole number", v.name)))?,
            ),
        };
        insert_dotted(&mut root, v.key, value);
    }
    Ok(root)
}

fn insert_dotted(root: &mut Dict, key: &str, value: Value) {
    match key.split_once('.') {
        None => {
            root.insert(key.to_string(), value);
        }
        Some((head, rest)) => {
            let entry = root.entry(head.to_string()).or_insert_with(|| Value::from(Dict::new()));
            if let Value::Dict(_, dict) = entry {
                insert_dotted(dict, rest, value);
            }
        }
    }
}

/// `LATCH_` variables in `env` that latch does not know (likely typos).
pub fn unknown_env_vars(env: &BTreeMap<String, String>) -> Vec<String> {
    env.keys()
        .filter(|k| k.starts_with("LATCH_"))
        .filter(|k| {
            let known =
                ENV_VARS.iter().any(|v| v.name == k.as_str() || (v.secret && k.strip_suffix("_FILE") == Some(v.name)));
            !known && !OTHER_KNOWN_VARS.contains(&k.as_str())
        })
        .cloned()
        .collect()
}
