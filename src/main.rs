//! The `latch` command: `serve` (the default), `migrate` (database migrations, or with
//! `keycloak`/`auth0` the migration tool), `check-config`, `healthcheck`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use latch::config::{Config, Settings};

/// mimalloc serves latch's own allocations: with glibc's malloc, allocation and its locks took
/// about a tenth of latch's CPU in the writing grants (perf), and rotating refresh tokens ran
/// 5-13% slower (bench/NOTES.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` (the same place in the option enum of mimalloc 2 and 3).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// mimalloc gives freed memory back to the OS at once instead of a second later (its default):
/// with the delay, the RSS 1 s after a restart on a used store read 31-36 MiB, without it 21-25
/// MiB, at the same speed (bench/NOTES.md).
fn tune_allocator() {
    // SAFETY: sets one of mimalloc's options; it only changes when freed memory is returned.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) }
}

#[derive(Parser)]
#[command(name = "latch", version, about = "An OpenID Connect identity provider and OAuth 2.0 authorization server")]
struct Cli {
    /// Configuration file (default: config/latch.toml when it exists).
    #[arg(long, global = true, env = "LATCH_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server (the default).
    Serve,
    /// Apply the database migrations and exit; with `keycloak` or `auth0`, convert another
    /// identity provider's export into an import body instead (no server or configuration
    /// needed).
    Migrate {
        #[command(subcommand)]
        tool: Option<MigrateTool>,
    },
    /// Check the configuration and print it with secrets masked.
    CheckConfig,
    /// Ask a running latch whether it is ready (exit 0) or not (exit 1); for container health
    /// checks in images without curl.
    Healthcheck {
        /// Address to ask (default: the configured listen address).
        #[arg(long)]
        addr: Option<String>,
    },
}

/// The migration tool: an export of another identity provider to the body of
/// `POST /admin/v1/import`.
#[derive(Subcommand)]
enum MigrateTool {
    /// Convert a Keycloak realm export (`kc.sh export --file` or `--dir`).
    Keycloak {
        /// The realm export: a JSON file (one realm, or an array of realms) or an export
        /// directory with `<realm>-realm.json` and `<realm>-users-<n>.json`.
        #[arg(long, value_name = "FILE")]
        realm: PathBuf,
        /// Which realm, when the export holds several.
        #[arg(long, value_name = "NAME")]
        realm_name: Option<String>,
        #[command(flatten)]
        common: MigrateArgs,
    },
    /// Convert an Auth0 user export and its password export (both NDJSON).
    Auth0 {
        /// The user export (one JSON object per line).
        #[arg(long, value_name = "FILE")]
        users: PathBuf,
        /// The password hash export from Auth0 support (one JSON object per line); without it
        /// users are imported without password.
        #[arg(long, value_name = "FILE")]
        passwords: Option<PathBuf>,
        /// Mark every e-mail address verified (`--email-verified=false`: unverified); without
        /// the flag each user's own value is kept.
        #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "BOOL")]
        email_verified: Option<bool>,
        #[command(flatten)]
        common: MigrateArgs,
    },
}

#[derive(Args)]
struct MigrateArgs {
    /// The target organization's id; it must already exist on the target.
    #[arg(long)]
    org: String,
    /// Where to write the import body.
    #[arg(long, default_value = "./importBody.json", value_name = "FILE")]
    output: PathBuf,
    /// The import's time limit, written into the body (e.g. 30m, 1h30m; at most 24h).
    #[arg(long, default_value = "30m", value_parser = parse_timeout)]
    timeout: Duration,
    /// Pretty-print the body.
    #[arg(long)]
    multiline: bool,
    /// Give users without an e-mail address USERNAME@DOMAIN (unverified); without it such
    /// users stop the conversion and are listed.
    #[arg(long, value_name = "DOMAIN")]
    email_domain: Option<String>,
    /// Leave out users whose password hash is in an unsupported format instead of failing.
    #[arg(long)]
    skip_unsupported: bool,
}

fn parse_timeout(s: &str) -> Result<Duration, String> {
    latch::domain::duration::parse(s).map_err(|e| format!("'{s}' {e}"))
}

/// Runs a converter; prints the summary on stdout, or one line of error on stderr.
fn migrate_tool(tool: MigrateTool) -> ExitCode {
    let options = |c: MigrateArgs| latch::migration::Options {
        org: c.org,
        output: c.output,
        timeout: c.timeout,
        multiline: c.multiline,
        email_domain: c.email_domain,
        skip_unsupported: c.skip_unsupported,
        progress: true,
    };
    let result = match tool {
        MigrateTool::Keycloak { realm, realm_name, common } => {
            latch::migration::keycloak::run(&options(common), &realm, realm_name.as_deref())
        }
        MigrateTool::Auth0 { users, passwords, email_verified, common } => {
            latch::migration::auth0::run(&options(common), &users, passwords.as_deref(), email_verified)
        }
    };
    match result {
        Ok(summary) => {
            print!("{summary}");
            ExitCode::SUCCESS
        }
        Err(e @ latch::migration::Error::Usage(_)) => fail(e),
        Err(e) => {
            eprintln!("latch: {e}");
            ExitCode::from(1)
        }
    }
}

fn fail(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("latch: {msg}");
    ExitCode::from(2)
}

fn settings(config: Option<&Path>, env: &BTreeMap<String, String>) -> Result<(Config, Settings), ExitCode> {
    let config = Config::load(config, env).map_err(fail)?;
    let settings = config.validate().map_err(fail)?;
    Ok((config, settings))
}

/// glibc's malloc, which still serves SQLite and the other C code, gives each thread that
/// allocates under contention its own arena (up to 8 per core) and keeps what was freed in each:
/// when it served every allocation, RSS doubled under load (72 -> 141 MiB over the benchmark's
/// request scenarios) for no gain in speed. One arena per core, at least two, unless the operator
/// set `MALLOC_ARENA_MAX` (glibc reads it itself).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn limit_malloc_arenas() {
    if std::env::var_os("MALLOC_ARENA_MAX").is_some() {
        return;
    }
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2).max(2);
    let arenas = libc::c_int::try_from(cores).unwrap_or(libc::c_int::MAX);
    // SAFETY: mallopt only changes allocator settings; it runs before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, arenas);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn limit_malloc_arenas() {}

fn main() -> ExitCode {
    tune_allocator();
    limit_malloc_arenas();
    let cli = Cli::parse();
    // The migration tool reads files and writes one: no server configuration is involved.
    let command = match cli.command {
        Some(Command::Migrate { tool: Some(tool) }) => return migrate_tool(tool),
        other => other.unwrap_or(Command::Serve),
    };
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let (config, settings) = match settings(cli.config.as_deref(), &env) {
        Ok(s) => s,
        Err(code) => return code,
    };
    latch::telemetry::init_logging(settings.log_format, &settings.log_level);
    for name in latch::config::unknown_env_vars(&env) {
        tracing::warn!(variable = %name, "unknown LATCH_ environment variable (ignored); check its spelling");
    }
    match command {
        Command::CheckConfig => {
            print!("{}", config.masked_toml());
            println!("\n# the configuration is valid");
            ExitCode::SUCCESS
        }
        Command::Migrate { .. } => run(
            async move {
                let db = latch::store::Db::connect(&settings.database_url, 1).await.map_err(|e| e.to_string())?;
                db.migrate().await.map_err(|e| e.to_string())?;
                println!("migrations applied");
                Ok(())
            },
            false,
        ),
        Command::Serve => {
            let sqlite = latch::store::Backend::of_url(&settings.database_url) == latch::store::Backend::Sqlite;
            run(serve(settings), sqlite)
        }
        Command::Healthcheck { addr } => {
            let addr = addr.unwrap_or_else(|| settings.listen.to_string().replace("0.0.0.0", "127.0.0.1"));
            match healthcheck(&addr) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("latch: not ready: {e}");
                    ExitCode::from(1)
                }
            }
        }
    }
}

/// `GET /readyz` over a plain TCP connection.
fn healthcheck(addr: &str) -> Result<(), String> {
    use std::io::{Read, Write};
    use std::time::Duration;
    let sock: std::net::SocketAddr =
        addr.parse().map_err(|_| format!("'{addr}' is not an address like 127.0.0.1:8080"))?;
    let mut s = std::net::TcpStream::connect_timeout(&sock, Duration::from_secs(3)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(5))).map_err(|e| e.to_string())?;
    write!(s, "GET /readyz HTTP/1.0\r\nHost: {addr}\r\n\r\n").map_err(|e| e.to_string())?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).map_err(|e| e.to_string())?;
    let status = buf.lines().next().unwrap_or("");
    if status.split_whitespace().nth(1) == Some("200") { Ok(()) } else { Err(status.to_string()) }
}

/// On SQLite, a tokio worker takes a task from the runtime's shared queue every this many tasks
/// (tokio tunes the interval itself otherwise, to a few dozen). A SQLite statement runs on its
/// connection's own thread, outside the runtime, and the request it finishes is woken through
/// that shared queue, while new requests arrive on the worker's own queue: with tokio's interval
/// requests already half served waited behind new ones. Measured on 2026-11-26
/// (bench/NOTES.md): the share of paced token requests over 10 ms inside latch fell from 5-17% to
/// 0.1-10%, at the same throughput. PostgreSQL's answers arrive through the runtime's own I/O
/// driver; there the same setting did not help and is not used.
const SQLITE_GLOBAL_QUEUE_INTERVAL: u32 = 2;

/// Runs `fut` on a multi-threaded runtime tuned for the store (`sqlite`: see
/// [`SQLITE_GLOBAL_QUEUE_INTERVAL`]).
fn run(fut: impl std::future::Future<Output = Result<(), String>>, sqlite: bool) -> ExitCode {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    if sqlite {
        builder.global_queue_interval(SQLITE_GLOBAL_QUEUE_INTERVAL);
    }
    let rt = match builder.build() {
        Ok(rt) => rt,
        Err(e) => return fail(e),
    };
    match rt.block_on(fut) {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("latch: {msg}");
            ExitCode::from(1)
        }
    }
}

async fn serve(settings: Settings) -> Result<(), String> {
    latch::telemetry::prometheus();
    let listen = settings.listen;
    let issuer = settings.issuer.clone();
    let started = latch::app::start(settings, latch::clock::system()).await.map_err(|e| e.to_string())?;
    if let Some(first) = &started.first_start {
        let s = &started.state.settings.first_instance;
        eprintln!(
            "\nlatch: first start. Administrator '{}' (change the password at first sign-in); machine administrator '{}' with its personal access token in {}",
            s.admin_username,
            s.machine_username,
            s.pat_path.display()
        );
        if let Some(p) = &first.generated_password {
            eprintln!("latch: the generated administrator password is shown only now: {p}\n");
        }
    }
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| format!("cannot listen on {listen} (LATCH_LISTEN): {e}"))?;
    tracing::info!(%listen, %issuer, "latch is serving");
    latch::app::serve(listener, started.state, shutdown_signal()).await.map_err(|e| e.to_string())?;
    tracing::info!("latch stopped");
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutdown signal received; finishing in-flight requests");
}
