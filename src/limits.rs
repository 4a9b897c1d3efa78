//! Rate limits against abuse: budgets per client IP (login form, token endpoint, key set), per
//! login name (password attempts) and per authenticated client (token, introspection and
//! revocation). Each budget is a GCRA limiter from `governor`, kept in this replica's memory:
//! with N replicas behind a balancer the effective budget is up to N times the configured one.
//!
//! A budget is written `N/period` ("300/1m"): up to N requests at once, refilled evenly over the
//! period. `off` disables it.

use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::app::AppState;
use crate::domain::duration;

/// A budget: `count` requests per `period`, all of them available at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    pub count: NonZeroU32,
    pub period: Duration,
}

impl Budget {
    /// Parses `N/period` (`300/1m`, `10/s`) or `off` (no limit).
    pub fn parse(s: &str) -> Result<Option<Budget>, String> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("off") {
            return Ok(None);
        }
        let (n, period) = s.split_once('/').ok_or("must be N/period (like 300/1m) or off")?;
        let count = n
            .trim()
            .parse::<NonZeroU32>()
            .map_err(|_| format!("'{n}' is not a whole number of requests of at least 1"))?;
        let period = period.trim();
        // "10/s" reads as "10 per second".
        let period =
            if period.starts_with(|c: char| c.is_ascii_digit()) { period.to_string() } else { format!("1{period}") };
        let period = duration::parse(&period).map_err(|e| format!("period '{period}' {e}"))?;
        if period.is_zero() || period > Duration::from_secs(86_400) {
            return Err("the period must be between 1s and 24h".into());
        }
        Ok(Some(Budget { count, period }))
    }

    fn quota(self) -> Quota {
        // One request is replenished every period/count; never below a nanosecond.
        let every = (self.period / self.count.get()).max(Duration::from_nanos(1));
        Quota::with_period(every).expect("a non-zero period").allow_burst(self.count)
    }
}

/// The limits of the HTTP interface, from the configuration (`[limits]`).
#[derive(Clone, Debug)]
pub struct LimitSettings {
    pub login_per_ip: Option<Budget>,
    pub login_per_name: Option<Budget>,
    pub token_per_ip: Option<Budget>,
    pub per_client: Option<Budget>,
    pub keys_per_ip: Option<Budget>,
    pub authorize_per_ip: Option<Budget>,
    /// How many reverse proxies in front of latch append to `X-Forwarded-For`; the client IP is
    /// taken that many entries from the right. 0: the TCP peer address (the header is ignored,
    /// so a client cannot choose its own IP).
    pub forwarded_for_hops: u32,
    /// Open connections one client IP (an IPv6 /64) may hold at once; 0: no cap. Behind
    /// reverse proxies (`forwarded_for_hops` > 0) every connection comes from a proxy, so the
    /// cap is theirs to keep and latch keeps none.
    pub connections_per_ip: u32,
    /// A client must send its whole request head within this time.
    pub header_read_timeout: Duration,
    /// A request body must not pause longer than this between two chunks.
    pub body_read_timeout: Duration,
}

type Limiter<K> = Option<DefaultKeyedRateLimiter<K>>;

/// The live limiters of one replica.
pub struct RateLimits {
    settings: LimitSettings,
    login_ip: Limiter<IpAddr>,
    login_name: Limiter<String>,
    token_ip: Limiter<IpAddr>,
    client: Limiter<String>,
    keys_ip: Limiter<IpAddr>,
    authorize_ip: Limiter<IpAddr>,
    clock: DefaultClock,
}

fn limiter<K: std::hash::Hash + Eq + Clone>(b: Option<Budget>) -> Limiter<K> {
    b.map(|b| RateLimiter::keyed(b.quota()))
}

/// Which budget a check draws on.
#[derive(Clone, Copy, Debug)]
pub enum IpBudget {
    Login,
    Token,
    Keys,
    Authorize,
}

impl IpBudget {
    fn name(self) -> &'static str {
        match self {
            IpBudget::Login => "login_per_ip",
            IpBudget::Token => "token_per_ip",
            IpBudget::Keys => "keys_per_ip",
            IpBudget::Authorize => "authorize_per_ip",
        }
    }
}

impl RateLimits {
    pub fn new(settings: LimitSettings) -> Arc<Self> {
        Arc::new(Self {
            login_ip: limiter(settings.login_per_ip),
            login_name: limiter(settings.login_per_name),
            token_ip: limiter(settings.token_per_ip),
            client: limiter(settings.per_client),
            keys_ip: limiter(settings.keys_per_ip),
            authorize_ip: limiter(settings.authorize_per_ip),
            clock: DefaultClock::default(),
            settings,
        })
    }

    pub fn settings(&self) -> &LimitSettings {
        &self.settings
    }

    fn check<K: std::hash::Hash + Eq + Clone>(&self, l: &Limiter<K>, key: &K) -> Result<(), Duration> {
        match l {
            None => Ok(()),
            Some(l) => l.check_key(key).map_err(|not_until| not_until.wait_time_from(self.clock.now())),
        }
    }

    /// Draws one request from an IP budget; `Err` holds how long to wait.
    pub fn ip(&self, budget: IpBudget, ip: IpAddr) -> Result<(), Duration> {
        let l = match budget {
            IpBudget::Login => &self.login_ip,
            IpBudget::Token => &self.token_ip,
            IpBudget::Keys => &self.keys_ip,
            IpBudget::Authorize => &self.authorize_ip,
        };
        self.check(l, &network(ip))
    }

    /// Draws one password attempt for a login name (or user id).
    pub fn login_name(&self, name: &str) -> Result<(), Duration> {
        self.check(&self.login_name, &name.to_lowercase())
    }

    /// Draws one request of a client that authenticated with `method`. A public client
    /// (`none`) proves nothing but its client id, which anyone can send: its requests are
    /// bounded by the per-IP budgets only, so that no one can spend a public application's
    /// budget and lock its users out.
    pub fn client_as(
        &self,
        client_id: &str,
        method: crate::oauth::client_auth::Method,
    ) -> crate::oauth::error::OAuthResult<()> {
        if method == crate::oauth::client_auth::Method::None { Ok(()) } else { self.client(client_id) }
    }

    /// Draws one request of an authenticated client (token, introspection, revocation).
    pub fn client(&self, client_id: &str) -> crate::oauth::error::OAuthResult<()> {
        self.check(&self.client, &client_id.to_string()).map_err(|wait| {
            metrics::counter!("latch_rate_limited_total", "budget" => "per_client").increment(1);
            crate::oauth::error::OAuthError::too_many_requests(wait)
        })
    }

    /// Forgets keys whose budget is full again, so memory follows the recent callers only.
    pub fn forget_idle(&self) {
        fn sweep<K: std::hash::Hash + Eq + Clone>(l: &Limiter<K>) {
            if let Some(l) = l {
                l.retain_recent();
                l.shrink_to_fit();
            }
        }
        sweep(&self.login_ip);
        sweep(&self.login_name);
        sweep(&self.token_ip);
        sweep(&self.client);
        sweep(&self.keys_ip);
        sweep(&self.authorize_ip);
    }

    /// Number of keys tracked (for tests and metrics).
    pub fn tracked(&self) -> usize {
        fn len<K: std::hash::Hash + Eq + Clone>(l: &Limiter<K>) -> usize {
            l.as_ref().map_or(0, |l| l.len())
        }
        len(&self.login_ip)
            + len(&self.login_name)
            + len(&self.token_ip)
            + len(&self.client)
            + len(&self.keys_ip)
            + len(&self.authorize_ip)
    }

    /// The client's IP: the TCP peer, or with proxies configured the entry of `X-Forwarded-For`
    /// that the outermost trusted proxy wrote.
    pub fn client_ip(&self, headers: &HeaderMap, peer: Option<SocketAddr>) -> Option<IpAddr> {
        let hops = self.settings.forwarded_for_hops as usize;
        if hops > 0 {
            let entries: Vec<&str> = headers
                .get_all("x-forwarded-for")
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|v| v.split(','))
                .map(str::trim)
                .collect();
            // Some proxies write the client's port too (`1.2.3.4:5678`, `[2001:db8::1]:5678`).
            if let Some(e) = entries.len().checked_sub(hops).and_then(|i| entries.get(i))
                && let Some(ip) = e.parse::<IpAddr>().ok().or_else(|| e.parse::<SocketAddr>().ok().map(|a| a.ip()))
            {
                return Some(ip);
            }
        }
        peer.map(|p| p.ip())
    }
}

/// Forgets idle keys once a minute until `stop` turns true.
pub fn spawn_forgetting(
    limits: Arc<RateLimits>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(60));
        loop {
            tokio::select! {
                _ = tick.tick() => limits.forget_idle(),
                _ = stop.changed() => return,
            }
        }
    })
}

/// Seconds for `Retry-After`: rounded up, at least 1.
pub fn retry_after_secs(wait: Duration) -> u64 {
    wait.as_secs() + u64::from(wait.subsec_nanos() > 0).max(u64::from(wait.is_zero()))
}

/// Sets 429 and `Retry-After` on a response.
pub fn too_many(mut r: Response, wait: Duration) -> Response {
    *r.status_mut() = StatusCode::TOO_MANY_REQUESTS;
    r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs(wait)));
    r
}

fn peer(req: &Request) -> Option<SocketAddr> {
    req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0)
}

fn deny_json(wait: Duration, headers: &HeaderMap, _query: Option<&str>) -> Response {
    let mut r = crate::oauth::error::OAuthError::too_many_requests(wait).into_response();
    // A browser application reads this refusal as it reads the endpoint's other answers (the
    // CORS layers of the routes are inside this budget and never see it): the origin reflected,
    // as `cors::endpoints` does, and the wait readable.
    if let Some(origin) = headers.get(header::ORIGIN) {
        let h = r.headers_mut();
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
        h.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static("retry-after"));
        h.append(header::VARY, HeaderValue::from_static("origin"));
    }
    r
}

/// The key of an IP budget: an IPv4 address, or the /64 network of an IPv6 address (one host is
/// commonly given a whole /64, so counting addresses would let it change its address for every
/// request and never meet a budget).
pub(crate) fn network(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_none() => {
            let s = v6.segments();
            IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
        IpAddr::V6(v6) => IpAddr::V4(v6.to_ipv4_mapped().unwrap_or(std::net::Ipv4Addr::UNSPECIFIED)),
        v4 => v4,
    }
}

/// Open connections per client network, for `connections_per_ip`.
pub struct ConnectionCount {
    max: usize,
    open: std::sync::Mutex<std::collections::HashMap<IpAddr, usize>>,
}

/// One open connection, counted until it is dropped.
pub struct Counted {
    count: Arc<ConnectionCount>,
    ip: IpAddr,
}

impl ConnectionCount {
    /// The cap of `settings`, if it has one.
    pub fn of(settings: &LimitSettings) -> Option<Arc<Self>> {
        (settings.connections_per_ip > 0 && settings.forwarded_for_hops == 0)
            .then(|| Arc::new(Self { max: settings.connections_per_ip as usize, open: Default::default() }))
    }

    /// Counts a new connection of `peer`, or `None` when its network holds `max` already.
    pub fn enter(self: &Arc<Self>, peer: IpAddr) -> Option<Counted> {
        let ip = network(peer);
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let n = open.entry(ip).or_insert(0);
        if *n >= self.max {
            return None;
        }
        *n += 1;
        Some(Counted { count: self.clone(), ip })
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        let mut open = self.count.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// The refusal as a page, in the language an authorization request asks for (`ui_locales` of
/// its query), else the browser's.
fn deny_page(wait: Duration, headers: &HeaderMap, query: Option<&str>) -> Response {
    let locales: Vec<String> = form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .filter(|(k, _)| k == "ui_locales")
        .flat_map(|(_, v)| v.split(' ').map(str::to_string).collect::<Vec<_>>())
        .collect();
    let t = crate::login::i18n::choose(&locales, headers);
    let msg = t.err_too_many.replace("{}", &retry_after_secs(wait).to_string());
    let id = crate::oauth::authorize::request_id(headers);
    too_many(crate::login::pages::error_page(t, StatusCode::TOO_MANY_REQUESTS, &msg, &id), wait)
}

/// Writes the refusal in the endpoint's format.
type Deny = fn(Duration, &HeaderMap, Option<&str>) -> Response;

/// The IP budget a request draws on, by path: token endpoint posts, key set fetches,
/// authorization requests (each stores a pending sign-in for its lifetime) and login form posts
/// (the pages themselves stay readable).
fn ip_budget(req: &Request) -> Option<(IpBudget, Deny)> {
    // A CORS preflight is the browser's question, not a request of the application's: it draws
    // on no budget (else an application's preflights could spend its IP's token budget).
    if req.method() == axum::http::Method::OPTIONS {
        return None;
    }
    let path = req.uri().path();
    if path == crate::paths::TOKEN || (path == crate::paths::REVOKE && req.method() == axum::http::Method::POST) {
        Some((IpBudget::Token, deny_json))
    } else if path == crate::paths::KEYS {
        Some((IpBudget::Keys, deny_json))
    } else if path == crate::paths::AUTHORIZE {
        Some((IpBudget::Authorize, deny_page))
    } else if (path.starts_with("/ui/login/") || path.starts_with("/ui/account/"))
        && req.method() == axum::http::Method::POST
    {
        Some((IpBudget::Login, deny_page))
    } else {
        None
    }
}

/// Middleware: the per-IP budgets.
pub async fn per_ip(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if let Some((budget, deny)) = ip_budget(&req)
        && let Some(ip) = state.limits.client_ip(req.headers(), peer(&req))
        && let Err(wait) = state.limits.ip(budget, ip)
    {
        metrics::counter!("latch_rate_limited_total", "budget" => budget.name()).increment(1);
        return deny(wait, req.headers(), req.uri().query());
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv6_host_counts_as_its_network() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff:1:2:3".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(network(a), network(b), "one /64");
        assert_ne!(network(a), network(other));
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(network(mapped), "192.0.2.7".parse::<IpAddr>().unwrap());
        let v4: IpAddr = "192.0.2.7".parse().unwrap();
        assert_eq!(network(v4), v4);
    }

    #[test]
    fn budgets_parse() {
        let b = Budget::parse("300/1m").unwrap().unwrap();
        assert_eq!((b.count.get(), b.period), (300, Duration::from_secs(60)));
        let b = Budget::parse(" 10/s ").unwrap().unwrap();
        assert_eq!((b.count.get(), b.period), (10, Duration::from_secs(1)));
        assert_eq!(Budget::parse("off").unwrap(), None);
        for bad in ["", "10", "0/1m", "-1/1m", "x/1m", "10/", "10/0s", "10/2d", "10/fortnight"] {
            assert!(Budget::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn retry_after_rounds_up() {
        assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1500)), 2);
        assert_eq!(retry_after_secs(Duration::from_secs(3)), 3);
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
    }

    fn settings(hops: u32) -> LimitSettings {
        LimitSettings {
            login_per_ip: None,
            login_per_name: Budget::parse("3/1m").unwrap(),
            token_per_ip: None,
            per_client: None,
            keys_per_ip: None,
            authorize_per_ip: None,
            forwarded_for_hops: hops,
            connections_per_ip: 0,
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
        }
    }

    #[test]
    fn a_budget_is_spent_then_refused_with_a_wait() {
        let l = RateLimits::new(settings(0));
        for _ in 0..3 {
            l.login_name("Alice").unwrap();
        }
        let wait = l.login_name("ALICE").unwrap_err();
        assert!(wait > Duration::ZERO && wait <= Duration::from_secs(20), "{wait:?}");
        l.login_name("bob").unwrap();
        // A disabled budget never refuses.
        for _ in 0..100 {
            l.client("c").unwrap();
        }
    }

    #[test]
    fn the_client_ip_is_the_peer_unless_proxies_are_trusted() {
        let peer: SocketAddr = "10.0.0.1:5000".parse().unwrap();
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", "6.6.6.6, 203.0.113.7".parse().unwrap());
        let direct = RateLimits::new(settings(0));
        assert_eq!(direct.client_ip(&h, Some(peer)), Some(peer.ip()));
        let one_proxy = RateLimits::new(settings(1));
        assert_eq!(one_proxy.client_ip(&h, Some(peer)), Some("203.0.113.7".parse().unwrap()));
        let two = RateLimits::new(settings(2));
        assert_eq!(two.client_ip(&h, Some(peer)), Some("6.6.6.6".parse().unwrap()));
        let too_many_hops = RateLimits::new(settings(3));
        assert_eq!(too_many_hops.client_ip(&h, Some(peer)), Some(peer.ip()));
        // An entry with the client's port names the client, not the proxy.
        for (entry, ip) in [("203.0.113.7:5678", "203.0.113.7"), ("[2001:db8::1]:443", "2001:db8::1")] {
            h.insert("x-forwarded-for", entry.parse().unwrap());
            assert_eq!(one_proxy.client_ip(&h, Some(peer)), Some(ip.parse().unwrap()), "{entry}");
        }
        h.insert("x-forwarded-for", "unknown".parse().unwrap());
        assert_eq!(one_proxy.client_ip(&h, Some(peer)), Some(peer.ip()));
    }
}
