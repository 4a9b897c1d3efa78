//! The application: its state, its router, and serving it.

use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::IntoResponse;
use tokio::net::TcpListener;
use tower::ServiceBuilder;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::timeout::RequestBodyTimeoutLayer;
use tower_http::trace::TraceLayer;

use crate::clock::SharedClock;
use crate::config::Settings;
use crate::crypto::password::PasswordHasher;
use crate::keys::{KeyError, KeyManager};
use crate::oauth::tokens::TokenService;
use crate::store::{Db, StoreError};
use crate::{api, bootstrap, oidc, ops, telemetry};

/// The header carrying each request's id, in the request and the response.
pub const REQUEST_ID: &str = "x-request-id";

/// Everything a handler may need; cheap to clone.
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

pub struct Inner {
    pub settings: Settings,
    pub db: Db,
    pub clock: SharedClock,
    pub keys: Arc<KeyManager>,
    pub tokens: Arc<TokenService>,
    pub hasher: PasswordHasher,
    pub mailer: crate::login::email::Mailer,
    /// Encrypts TOTP secrets at rest.
    pub otp_cipher: crate::crypto::aead::Aead,
    /// Digests of the codes mailed to users (see `login::codes`).
    pub code_digest: Arc<crate::crypto::secret::KeyedDigest>,
    /// The discovery document, rendered once per combination of the features it reflects.
    pub discovery: oidc::discovery::Documents,
    pub jwks_cache_control: String,
    /// Applications, projects, organizations and lifetimes read recently.
    pub cache: crate::cache::ConfigCache,
    /// Rate limits of this replica.
    pub limits: Arc<crate::limits::RateLimits>,
    /// This replica's mirror of the revocation table.
    pub revocations: Arc<crate::revocations::Revocations>,
    /// Work requests left running after their answers; shutdown waits for it.
    pub background: crate::background::Background,
}

impl Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot open the store: {0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Keys(#[from] KeyError),
    #[error("{0}")]
    Bootstrap(#[from] bootstrap::BootstrapError),
    #[error("master key: {0}")]
    MasterKey(String),
    #[error("e-mail: {0}")]
    Mail(String),
}

/// The master key: from the settings, else from `{data_dir}/masterkey` (created on first use).
pub fn master_key(settings: &Settings) -> Result<[u8; 32], StartError> {
    use base64::Engine;
    if let Some(k) = settings.masterkey {
        return Ok(k);
    }
    let path = settings.data_dir.join("masterkey");
    let read = |path: &std::path::Path| -> Result<[u8; 32], StartError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| StartError::MasterKey(format!("cannot read {}: {e}", path.display())))?;
        crate::config::parse_masterkey(&text).map_err(|m| StartError::MasterKey(format!("{}: {m}", path.display())))
    };
    if path.exists() {
        return read(&path);
    }
    let key = crate::crypto::secret::random_bytes::<32>();
    let text = base64::engine::general_purpose::STANDARD.encode(key);
    match write_new(&path, &text) {
        Ok(()) => {
            tracing::warn!(
                path = %path.display(),
                "LATCH_MASTERKEY is not set: generated a master key into this file. Back it up; set LATCH_MASTERKEY (or LATCH_MASTERKEY_FILE) in production"
            );
            Ok(key)
        }
        // Another process created it first.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read(&path),
        Err(e) => Err(StartError::MasterKey(format!("cannot create {}: {e}", path.display()))),
    }
}

/// The documentation's sample master key protects nothing: a new store is refused with it; a
/// store whose keys are already sealed with it (set up when the README still showed it) starts,
/// with a warning at every start, since latch cannot yet seal them again under another key.
async fn refuse_sample_master_key(db: &Db, master: &[u8; 32]) -> Result<(), StartError> {
    if !crate::config::is_sample_masterkey(master) {
        return Ok(());
    }
    let mut c = db.conn().await?;
    if crate::store::web_key::list(&mut c).await?.is_empty() {
        return Err(StartError::MasterKey(crate::config::SAMPLE_MASTERKEY_REFUSED.to_string()));
    }
    tracing::warn!(
        "the master key is the published sample value: the signing keys and secrets sealed with it are readable by anyone who gets the database; move to a new store with a secret master key (export and import the organizations)"
    );
    Ok(())
}

/// Writes a new key file so that nobody ever reads it half-written and a crash leaves either
/// no file or the whole key: the key goes into a temporary file in the same folder, is synced,
/// and is then linked to its name, the folder synced after. The link fails (AlreadyExists) when
/// another process created the file first; unlike a rename, it never replaces a key that
/// process may already be using.
fn write_new(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => std::path::Path::new("."),
    };
    std::fs::create_dir_all(dir)?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", crate::crypto::secret::random_id()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let written = options.open(&tmp).and_then(|mut f| {
        f.write_all(text.as_bytes())?;
        f.write_all(b"\n")?;
        f.sync_all()?;
        std::fs::hard_link(&tmp, path)
    });
    let _ = std::fs::remove_file(&tmp);
    written?;
    #[cfg(unix)]
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

/// What [`start`] produced.
pub struct Started {
    pub state: AppState,
    pub first_start: Option<bootstrap::FirstStart>,
}

/// Opens and migrates the store, loads the signing keys and bootstraps an empty store.
pub async fn start(settings: Settings, clock: SharedClock) -> Result<Started, StartError> {
    crate::crypto::install_tls_provider();
    telemetry::prometheus();
    let db = Db::connect(&settings.database_url, settings.database_max_connections).await?;
    db.migrate().await?;
    let master = master_key(&settings)?;
    refuse_sample_master_key(&db, &master).await?;
    let keys = KeyManager::new(db.clone(), &master, clock.clone(), settings.keys.clone()).await?;
    let tokens = Arc::new(TokenService::load(&db, &master, keys.clone(), clock.now()).await?);
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
    let state = AppState(Arc::new(Inner {
        discovery: oidc::discovery::Documents::render(&settings.issuer),
        jwks_cache_control: format!("public, max-age={}", settings.keys.jwks_max_age),
        limits: crate::limits::RateLimits::new(settings.limits.clone()),
        cache: crate::cache::ConfigCache::new(clock.clone()),
        revocations: Arc::default(),
        background: crate::background::Background::default(),
        hasher: PasswordHasher::new(settings.argon2, cores),
        mailer: crate::login::email::Mailer::from_settings(&settings).map_err(StartError::Mail)?,
        otp_cipher: crate::crypto::aead::Aead::derive(&master, crate::crypto::aead::Purpose::OtpSecret)
            .map_err(|e| StartError::MasterKey(e.to_string()))?,
        code_digest: Arc::new(
            crate::crypto::secret::KeyedDigest::derive(&master, "mailed-code digest")
                .map_err(|e| StartError::MasterKey(e.to_string()))?,
        ),
        settings,
        db,
        clock,
        keys,
        tokens,
    }));
    let first_start = bootstrap::run(&state).await?;
    // A store bootstrapped earlier might have lost its keys, or a rotation may be due.
    state.keys.maintain().await?;
    Ok(Started { state, first_start })
}

/// The whole HTTP interface.
pub fn router(state: AppState) -> Router {
    let x_request_id = HeaderName::from_static(REQUEST_ID);
    let body_read_timeout = state.settings.limits.body_read_timeout;
    let api = api::openapi::areas()
        .into_iter()
        .fold(Router::new(), |router, area| router.nest(area.prefix, area.router()))
        .route("/openapi.json", axum::routing::get(api::openapi::serve))
        .method_not_allowed_fallback(api::error::method_not_allowed)
        .layer(DefaultBodyLimit::max(api::json::MAX_BODY))
        .layer(axum::middleware::from_fn_with_state(state.clone(), api::clear_cache_after_writes));
    let protocol = Router::new()
        .merge(oidc::routes())
        .merge(crate::oauth::routes())
        .merge(crate::login::routes())
        .merge(ops::routes())
        .layer(DefaultBodyLimit::max(crate::oauth::form::MAX_FORM))
        .layer(axum::middleware::from_fn_with_state(body_read_timeout, crate::http::body_deadline));
    Router::new()
        .merge(protocol)
        .merge(api)
        .fallback(crate::refusal::not_found)
        .layer(axum::middleware::from_fn_with_state(state.clone(), crate::limits::per_ip))
        .with_state(state)
        .layer(axum::middleware::from_fn(telemetry::track_requests))
        .layer(
            ServiceBuilder::new()
                .layer(SetRequestIdLayer::new(x_request_id.clone(), MakeRequestUuid))
                .layer(TraceLayer::new_for_http().make_span_with(|req: &Request| {
                    let id = req.headers().get(REQUEST_ID).and_then(|v| v.to_str().ok()).unwrap_or("");
                    tracing::info_span!("request", method = %req.method(), path = %req.uri().path(), request_id = %id)
                }))
                .layer(PropagateRequestIdLayer::new(x_request_id))
                .layer(axum::middleware::from_fn(crate::http::close_if_body_unread))
                .layer(axum::middleware::from_fn(crate::refusal::explain))
                .layer(RequestBodyTimeoutLayer::new(body_read_timeout))
                .layer(SetResponseHeaderLayer::if_not_present(
                    header::X_CONTENT_TYPE_OPTIONS,
                    HeaderValue::from_static("nosniff"),
                ))
                // An empty 500, which `refusal::explain` writes in the route's format.
                .layer(CatchPanicLayer::custom(|_| {
                    tracing::error!("a request handler panicked");
                    StatusCode::INTERNAL_SERVER_ERROR.into_response()
                })),
        )
}

/// Serves until `shutdown` resolves, then lets in-flight requests finish (up to the configured
/// shutdown timeout) and stops the background tasks.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let maintenance = state.keys.spawn(stop_rx.clone());
    let sweeper =
        crate::sweep::spawn(state.db.clone(), state.clock.clone(), state.settings.sweep_interval, stop_rx.clone());
    let revocations =
        crate::revocations::spawn(state.revocations.clone(), state.db.clone(), state.clock.clone(), stop_rx.clone());
    let upkeep = crate::telemetry::spawn_upkeep(stop_rx.clone());
    let probe = crate::telemetry::spawn_schedule_probe(stop_rx.clone());
    let limits = crate::limits::spawn_forgetting(state.limits.clone(), stop_rx);
    let grace = state.settings.shutdown_timeout;
    let app = router(state.clone());
    let connections = crate::http::Connections::new(&state.settings.limits);
    let result = connections.accept_until(listener, app, shutdown, grace).await;
    // What the last requests left running (logout tokens on their way, e-mail begun after an
    // answer) ends before the process does, and so does e-mail handed to the SMTP queue.
    state.background.wait(grace).await;
    state.mailer.flush(grace).await;
    let _ = stop_tx.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(5), maintenance).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), sweeper).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), revocations).await;
    let _ = upkeep.await;
    let _ = probe.await;
    let _ = limits.await;
    state.db.close().await;
    result
}

impl Inner {
    /// Encrypts a TOTP secret for `user_id`.
    pub fn seal_otp(&self, user_id: &str, secret: &str) -> Result<Vec<u8>, crate::crypto::CryptoError> {
        self.otp_cipher.seal(user_id.as_bytes(), secret.as_bytes())
    }

    /// Decrypts the TOTP secret of `user_id`.
    pub fn open_otp(&self, user_id: &str, sealed: &[u8]) -> Option<String> {
        self.otp_cipher.open(user_id.as_bytes(), sealed).ok().and_then(|b| String::from_utf8(b).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::write_new;

    #[test]
    fn a_generated_master_key_file_appears_whole_and_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data").join("masterkey");
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        // A reader beside the writers: whenever the file exists, it holds a whole key.
        let reader = {
            let (path, done) = (path.clone(), done.clone());
            std::thread::spawn(move || {
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    if let Ok(text) = std::fs::read_to_string(&path) {
                        assert_eq!(text.len(), 45, "a partial key file was read: {text:?}");
                    }
                }
            })
        };
        let writers: Vec<_> = (0..8)
            .map(|i| {
                let path = path.clone();
                std::thread::spawn(move || write_new(&path, &format!("{i:044}")).map(|()| i))
            })
            .collect();
        let results: Vec<_> = writers.into_iter().map(|w| w.join().unwrap()).collect();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        reader.join().unwrap();
        // One writer wins; the others are told the file exists, and nothing else is left.
        let winners: Vec<i32> = results.iter().filter_map(|r| r.as_ref().ok().copied()).collect();
        assert_eq!(winners.len(), 1, "{results:?}");
        assert!(
            results.iter().all(|r| r.as_ref().map_or_else(|e| e.kind() == std::io::ErrorKind::AlreadyExists, |_| true))
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), format!("{:044}\n", winners[0]));
        let left: Vec<_> = std::fs::read_dir(path.parent().unwrap()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, vec![std::ffi::OsString::from("masterkey")]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        }
    }
}
