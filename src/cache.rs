//! A short-lived cache of configuration the protocol endpoints read on every request:
//! applications by client id, projects, organizations and the token lifetimes. They change
//! rarely and only through the APIs, so each replica keeps what it read for [`TTL`]:
//!
//! - on the replica that made a change, the API clears the cache when the change is answered
//!   (see `api::clear_cache_after_writes`), so the change shows at once;
//! - on every other replica a change shows within [`TTL`], the same bound as for revocation.
//!
//! Tokens, sessions, codes, revocations and users are never cached. Absent entries are cached
//! too, so a flood of unknown client ids costs one query per id and second.

use std::collections::HashMap;
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::domain::settings::OidcSettings;
use crate::store::app::App;
use crate::store::org::Org;
use crate::store::project::Project;
use crate::store::{Conn, Result, app, org, project, setting};

/// How long a replica trusts what it read.
pub const TTL: Duration = Duration::from_secs(1);
/// Entries per kind before expired ones are dropped (and, if still full, all).
const MAX_ENTRIES: usize = 10_000;

struct Ttl<V> {
    map: RwLock<HashMap<String, (Instant, V)>>,
}

impl<V: Clone> Ttl<V> {
    fn new() -> Self {
        Self { map: RwLock::new(HashMap::new()) }
    }

    fn get(&self, key: &str) -> Option<V> {
        let map = self.map.read().ok()?;
        let (at, v) = map.get(key)?;
        (at.elapsed() < TTL).then(|| v.clone())
    }

    fn put(&self, key: &str, v: V) {
        if let Ok(mut map) = self.map.write() {
            if map.len() >= MAX_ENTRIES {
                map.retain(|_, (at, _)| at.elapsed() < TTL);
                if map.len() >= MAX_ENTRIES {
                    map.clear();
                }
            }
            map.insert(key.to_string(), (Instant::now(), v));
        }
    }

    fn clear(&self) {
        if let Ok(mut map) = self.map.write() {
            map.clear();
        }
    }
}

pub struct ConfigCache {
    apps: Ttl<Option<App>>,
    projects: Ttl<Option<Project>>,
    orgs: Ttl<Option<Org>>,
    oidc: Ttl<OidcSettings>,
    /// Bumped by [`ConfigCache::clear`]: a read that began before a clear is not stored.
    generation: AtomicU64,
}

impl Default for ConfigCache {
    fn default() -> Self {
        Self {
            apps: Ttl::new(),
            projects: Ttl::new(),
            orgs: Ttl::new(),
            oidc: Ttl::new(),
            generation: AtomicU64::new(0),
        }
    }
}

impl ConfigCache {
    async fn cached<V: Clone>(
        &self,
        table: &Ttl<V>,
        key: &str,
        load: impl std::future::Future<Output = Result<V>>,
    ) -> Result<V> {
        if let Some(v) = table.get(key) {
            return Ok(v);
        }
        let generation = self.generation.load(Ordering::Acquire);
        let v = load.await?;
        if self.generation.load(Ordering::Acquire) == generation {
            table.put(key, v.clone());
        }
        Ok(v)
    }

    /// An application by client id.
    pub async fn app(&self, c: &mut Conn, client_id: &str) -> Result<Option<App>> {
        self.cached(&self.apps, client_id, app::get_by_client_id(c, client_id)).await
    }

    pub async fn project(&self, c: &mut Conn, project_id: &str) -> Result<Option<Project>> {
        self.cached(&self.projects, project_id, project::get(c, project_id)).await
    }

    pub async fn org(&self, c: &mut Conn, org_id: &str) -> Result<Option<Org>> {
        self.cached(&self.orgs, org_id, org::get(c, org_id)).await
    }

    /// The instance's token lifetimes.
    pub async fn oidc_settings(&self, c: &mut Conn) -> Result<OidcSettings> {
        let load = async { Ok(setting::load::<OidcSettings>(c, setting::INSTANCE).await?.value) };
        self.cached(&self.oidc, "", load).await
    }

    /// Forgets everything (after a change through the APIs).
    pub fn clear(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.apps.clear();
        self.projects.clear();
        self.orgs.clear();
        self.oidc.clear();
    }
}
