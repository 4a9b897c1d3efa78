//! A short-lived cache of configuration the protocol endpoints read on every request:
//! applications by client id, projects, organizations, the token lifetimes, the login policy and
//! the instance features. They change rarely and only through the APIs, so each replica keeps
//! what it read for [`TTL`]:
//!
//! - on the replica that made a change, the API clears the cache when the change is answered
//!   (see `api::clear_cache_after_writes`), so the change shows at once;
//! - on every other replica a change shows within [`TTL`], the same bound as for revocation.
//!
//! Users are cached the same way for the token paths only (a token's user on introspection and
//! userinfo, a machine user on `client_credentials`, and with the key it names on the
//! jwt-bearer grant), and so are applications' keys for `private_key_jwt`: deactivating,
//! locking or deleting a user, or changing a secret or a key, goes through the API and so shows
//! at once on that replica and within [`TTL`] elsewhere. A user's copy carries the second it
//! was read (`User::read_at`), and tokens issued from it are dated no later, so that those a
//! replica issues from a copy read before a cut-off (a lock, a password set by an
//! administrator) that it has not seen yet end with it like the ones issued before. Sign-in never reads this cache, but it keeps the user it read
//! fresh, for the code exchange that follows. Tokens, sessions and codes are never
//! cached; revocations have their own mirror (`crate::revocations`). Absent entries are cached
//! too, so a flood of unknown client ids costs one query per id and second.
//!
//! An entry is read again shortly before it expires ([`REFRESH_AHEAD`]), by the first request
//! that finds it that old, while the others keep using it: a key in steady use is never
//! missing, so its expiry does not send every request in flight to the store at once (under
//! load, a dozen reads of the same row each second). Nothing is served past [`TTL`].

use std::collections::HashMap;
use std::sync::RwLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::clock::SharedClock;
use crate::domain::settings::{Features, LockoutPolicy, LoginPolicy, OidcSettings};
use crate::store::app::App;
use crate::store::key::{self, PublicKey};
use crate::store::org::Org;
use crate::store::project::Project;
use crate::store::user::User;
use crate::store::{Result, Source, app, fold, org, project, setting, user};

/// How long a replica trusts what it read.
pub const TTL: Duration = Duration::from_secs(1);
/// How long before its expiry an entry is read again, by one request.
pub const REFRESH_AHEAD: Duration = Duration::from_millis(100);
/// Entries per kind before expired ones are dropped (and, if still full, all).
const MAX_ENTRIES: usize = 10_000;

struct Entry<V> {
    at: Instant,
    value: V,
    /// A request has been sent to read it again (see [`REFRESH_AHEAD`]).
    refreshing: AtomicBool,
}

struct Ttl<V> {
    map: RwLock<HashMap<String, Entry<V>>>,
}

impl<V: Clone> Ttl<V> {
    fn new() -> Self {
        Self { map: RwLock::new(HashMap::new()) }
    }

    /// The entry of `key` while it is fresh. Within [`REFRESH_AHEAD`] of its expiry the first
    /// caller gets `None` (and reads it again, as on a miss) while every other caller still gets
    /// the entry until it expires.
    fn get(&self, key: &str) -> Option<V> {
        self.get_with(key, V::clone)
    }

    /// [`Ttl::get`], reading the entry through `f` instead of copying it.
    fn get_with<R>(&self, key: &str, f: impl FnOnce(&V) -> R) -> Option<R> {
        let map = self.map.read().ok()?;
        let e = map.get(key)?;
        let age = e.at.elapsed();
        if age >= TTL || (age >= TTL - REFRESH_AHEAD && !e.refreshing.swap(true, Ordering::AcqRel)) {
            return None;
        }
        Some(f(&e.value))
    }

    #[cfg(test)]
    fn put(&self, key: &str, v: V) {
        self.put_at(key, v, Instant::now());
    }

    #[cfg(test)]
    fn put_at(&self, key: &str, value: V, at: Instant) {
        self.put_checked(key, value, at, || true);
    }

    /// Stores `value` read while the cache was at generation `since`, unless a clear came
    /// after: checked under the table's lock, so a clear (which bumps the generation before it
    /// empties the tables) cannot fall between the check and the insert.
    fn put_since(&self, key: &str, value: V, generation: &AtomicU64, since: u64) {
        self.put_checked(key, value, Instant::now(), || generation.load(Ordering::Acquire) == since);
    }

    fn put_checked(&self, key: &str, value: V, at: Instant, still: impl FnOnce() -> bool) {
        if let Ok(mut map) = self.map.write() {
            if !still() {
                return;
            }
            if map.len() >= MAX_ENTRIES {
                map.retain(|_, e| e.at.elapsed() < TTL);
                if map.len() >= MAX_ENTRIES {
                    map.clear();
                }
            }
            map.insert(key.to_string(), Entry { at, value, refreshing: AtomicBool::new(false) });
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
    /// Login policies by organization id ("" for the instance's).
    login: Ttl<LoginPolicy>,
    /// Lockout policies by organization id, as the login policies.
    lockout: Ttl<LockoutPolicy>,
    /// The instance's default organization (key "").
    default_org: Ttl<Option<String>>,
    /// The instance's feature flags (the discovery document reflects two of them).
    features: Ttl<Features>,
    users: Ttl<Option<User>>,
    /// User ids by folded user name.
    user_names: Ttl<Option<String>>,
    /// Machine users' public keys by user id and key id (the jwt-bearer grant).
    machine_keys: Ttl<Option<PublicKey>>,
    /// Applications' public keys by client id (`private_key_jwt`).
    client_keys: Ttl<Vec<PublicKey>>,
    /// Bumped by [`ConfigCache::clear`]: a read that began before a clear is not stored.
    generation: AtomicU64,
    /// Dates users' copies (`User::read_at`).
    clock: SharedClock,
}

impl ConfigCache {
    pub fn new(clock: SharedClock) -> Self {
        Self {
            apps: Ttl::new(),
            projects: Ttl::new(),
            orgs: Ttl::new(),
            oidc: Ttl::new(),
            login: Ttl::new(),
            lockout: Ttl::new(),
            default_org: Ttl::new(),
            features: Ttl::new(),
            users: Ttl::new(),
            user_names: Ttl::new(),
            machine_keys: Ttl::new(),
            client_keys: Ttl::new(),
            generation: AtomicU64::new(0),
            clock,
        }
    }

    async fn cached<V: Clone>(
        &self,
        table: &Ttl<V>,
        key: &str,
        load: impl std::future::Future<Output = Result<V>>,
    ) -> Result<V> {
        self.cached_with(table, key, load, V::clone).await
    }

    /// [`ConfigCache::cached`], reading the entry through `f` instead of copying it.
    async fn cached_with<V: Clone, R>(
        &self,
        table: &Ttl<V>,
        key: &str,
        load: impl std::future::Future<Output = Result<V>>,
        f: impl Fn(&V) -> R,
    ) -> Result<R> {
        if let Some(r) = table.get_with(key, &f) {
            return Ok(r);
        }
        let generation = self.generation.load(Ordering::Acquire);
        let v = load.await?;
        let r = f(&v);
        table.put_since(key, v, &self.generation, generation);
        Ok(r)
    }

    /// Whether an application is active in an active project, without copying either entry
    /// (asked on every introspection and userinfo call of an application's token).
    pub async fn app_is_live(&self, c: &mut impl Source, client_id: &str) -> Result<bool> {
        use crate::domain::enums::{AppState, ProjectState};
        if !plausible(client_id) {
            return Ok(false);
        }
        let load = async { app::get_by_client_id(c.conn().await?, client_id).await };
        let project_id = self
            .cached_with(&self.apps, client_id, load, |a| {
                a.as_ref().filter(|a| a.state == AppState::Active).map(|a| a.project_id.clone())
            })
            .await?;
        let Some(project_id) = project_id else { return Ok(false) };
        let load = async { project::get(c.conn().await?, &project_id).await };
        self.cached_with(&self.projects, &project_id, load, |p| {
            p.as_ref().is_some_and(|p| p.state == ProjectState::Active)
        })
        .await
    }

    /// An application by client id.
    pub async fn app(&self, c: &mut impl Source, client_id: &str) -> Result<Option<App>> {
        if !plausible(client_id) {
            return Ok(None);
        }
        self.cached(&self.apps, client_id, async { app::get_by_client_id(c.conn().await?, client_id).await }).await
    }

    pub async fn project(&self, c: &mut impl Source, project_id: &str) -> Result<Option<Project>> {
        self.cached(&self.projects, project_id, async { project::get(c.conn().await?, project_id).await }).await
    }

    pub async fn org(&self, c: &mut impl Source, org_id: &str) -> Result<Option<Org>> {
        self.cached(&self.orgs, org_id, async { org::get(c.conn().await?, org_id).await }).await
    }

    /// The instance's token lifetimes.
    pub async fn oidc_settings(&self, c: &mut impl Source) -> Result<OidcSettings> {
        let load = async { Ok(setting::load::<OidcSettings>(c.conn().await?, setting::INSTANCE).await?.value) };
        self.cached(&self.oidc, "", load).await
    }

    /// The instance's login policy.
    pub async fn login_policy(&self, c: &mut impl Source) -> Result<LoginPolicy> {
        self.login_policy_of(c, setting::INSTANCE).await
    }

    /// The login policy of organization `org_id`: its own when it has one, else the instance's
    /// (`org_id` empty: the instance's).
    pub async fn login_policy_of(&self, c: &mut impl Source, org_id: &str) -> Result<LoginPolicy> {
        let load = async { setting::effective::<LoginPolicy>(c.conn().await?, org_id).await };
        self.cached(&self.login, org_id, load).await
    }

    /// The lockout policy of organization `org_id`: its own when it has one, else the instance's.
    /// Read on every wrong password or code of a known user: cached, so that such an answer
    /// takes no longer than one for an unknown name.
    pub async fn lockout_policy_of(&self, c: &mut impl Source, org_id: &str) -> Result<LockoutPolicy> {
        let load = async { setting::effective::<LockoutPolicy>(c.conn().await?, org_id).await };
        self.cached(&self.lockout, org_id, load).await
    }

    /// The instance's default organization, where registration puts new users.
    pub async fn default_org(&self, c: &mut impl Source) -> Result<Option<String>> {
        let load = async { crate::store::instance::default_org(c.conn().await?).await };
        self.cached(&self.default_org, "", load).await
    }

    /// The instance's feature flags.
    pub async fn features(&self, c: &mut impl Source) -> Result<Features> {
        let load = async { Ok(setting::load::<Features>(c.conn().await?, setting::INSTANCE).await?.value) };
        self.cached(&self.features, "", load).await
    }

    /// A user by id, for the token paths.
    pub async fn user(&self, c: &mut impl Source, user_id: &str) -> Result<Option<User>> {
        if !plausible(user_id) {
            return Ok(None);
        }
        let at = self.clock.now();
        let load = async { Ok(user::get(c.conn().await?, user_id).await?.map(|u| dated(u, at))) };
        self.cached(&self.users, user_id, load).await
    }

    /// The generation to pass to [`remember_user`](Self::remember_user): read it before the read.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Keeps a user that was just read from the store (by sign-in, which reads fresh) for the
    /// token paths, unless the cache was cleared since `since` (the read may predate a change);
    /// `read_at`: when the read began.
    pub fn remember_user(&self, since: u64, read_at: i64, u: &User) {
        self.users.put_since(&u.user_id, Some(dated(u.clone(), read_at)), &self.generation, since);
    }

    /// A user by user name (case-insensitively), for the token paths.
    pub async fn user_by_name(&self, c: &mut impl Source, username: &str) -> Result<Option<User>> {
        if !plausible(username) {
            return Ok(None);
        }
        let key = fold(username);
        let generation = self.generation.load(Ordering::Acquire);
        if let Some(id) = self.user_names.get(&key) {
            let Some(id) = id else { return Ok(None) };
            if let Some(u) = self.users.get(&id) {
                return Ok(u);
            }
        }
        let at = self.clock.now();
        let u = user::get_by_username(c.conn().await?, username).await?.map(|u| dated(u, at));
        self.user_names.put_since(&key, u.as_ref().map(|u| u.user_id.clone()), &self.generation, generation);
        if let Some(u) = &u {
            self.users.put_since(&u.user_id, Some(u.clone()), &self.generation, generation);
        }
        Ok(u)
    }

    /// A machine user and its key `key_id` (the jwt-bearer grant): from the cache, or both read
    /// in one statement and kept (an unknown user or key id too).
    pub async fn user_with_key(
        &self,
        c: &mut impl Source,
        user_id: &str,
        key_id: &str,
    ) -> Result<Option<(User, Option<PublicKey>)>> {
        if !plausible(user_id) || !plausible(key_id) {
            return Ok(None);
        }
        // A user id and a key id are ids latch made or an import kept: neither holds a newline.
        let slot = format!("{user_id}\n{key_id}");
        match (self.users.get(user_id), self.machine_keys.get(&slot)) {
            (Some(None), _) => return Ok(None),
            (Some(Some(u)), Some(k)) => return Ok(Some((u, k))),
            _ => {}
        }
        let generation = self.generation.load(Ordering::Acquire);
        let at = self.clock.now();
        let found = key::user_with_key(c.conn().await?, user_id, key_id).await?.map(|(u, k)| (dated(u, at), k));
        self.users.put_since(user_id, found.as_ref().map(|(u, _)| u.clone()), &self.generation, generation);
        if let Some((_, k)) = &found {
            self.machine_keys.put_since(&slot, k.clone(), &self.generation, generation);
        }
        Ok(found)
    }

    /// An application's public keys, for its `private_key_jwt` assertions.
    pub async fn client_keys(&self, c: &mut impl Source, client_id: &str) -> Result<Vec<PublicKey>> {
        if !plausible(client_id) {
            return Ok(Vec::new());
        }
        self.cached(&self.client_keys, client_id, async { key::keys_of_client(c.conn().await?, client_id).await }).await
    }

    /// Forgets everything (after a change through the APIs).
    pub fn clear(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.apps.clear();
        self.projects.clear();
        self.orgs.clear();
        self.oidc.clear();
        self.login.clear();
        self.lockout.clear();
        self.default_org.clear();
        self.features.clear();
        self.users.clear();
        self.user_names.clear();
        self.machine_keys.clear();
        self.client_keys.clear();
    }
}

/// Whether `id` (a client id, user id or name, key id: at most 200 characters wherever latch
/// takes one) may name something stored. Others are answered as absent without a query and
/// kept by no table: the keys come from unauthenticated requests (a client id in a Basic
/// header, an assertion's issuer), and a table keeps up to [`MAX_ENTRIES`] of them; on
/// PostgreSQL a NUL would fail the query itself.
fn plausible(id: &str) -> bool {
    !id.is_empty() && id.len() <= 4 * 200 && !id.contains('\0')
}

/// `u` as a copy read at `at`.
fn dated(mut u: User, at: i64) -> User {
    u.read_at = Some(at);
    u
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_caller_reads_an_entry_again_before_it_expires_and_the_others_keep_it() {
        let t: Ttl<u32> = Ttl::new();
        t.put("fresh", 1);
        assert_eq!((t.get("fresh"), t.get("fresh")), (Some(1), Some(1)));
        // Within the last REFRESH_AHEAD of its life: one None, then the entry for everyone else.
        let old = Instant::now() - (TTL - REFRESH_AHEAD / 2);
        t.put_at("ageing", 2, old);
        assert_eq!(t.get("ageing"), None, "the first caller reads it again");
        assert_eq!((t.get("ageing"), t.get("ageing")), (Some(2), Some(2)));
        // Its reading replaces it: fresh again, and the next refresh is one caller's again.
        t.put("ageing", 3);
        assert_eq!(t.get("ageing"), Some(3));
        t.put_at("ageing", 4, old);
        assert_eq!((t.get("ageing"), t.get("ageing")), (None, Some(4)));
        // Expired: nobody gets it.
        t.put_at("expired", 5, Instant::now() - TTL);
        assert_eq!((t.get("expired"), t.get("expired")), (None, None));
        assert_eq!(t.get("absent"), None);
    }

    #[test]
    fn a_value_read_before_a_clear_is_not_kept() {
        let cache = ConfigCache::new(crate::clock::system());
        let since = cache.generation();
        cache.clear();
        cache.features.put_since("", Features::default(), &cache.generation, since);
        assert!(cache.features.get("").is_none());
        let now = cache.generation();
        cache.features.put_since("", Features::default(), &cache.generation, now);
        assert!(cache.features.get("").is_some());
    }
}
