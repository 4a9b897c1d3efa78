//! Back-channel logout (OpenID Connect Back-Channel Logout 1.0). When sessions end, every
//! application that received tokens in them and has a back-channel logout URI gets a signed
//! logout token (`typ: logout+jwt`, with `sid` and `sub`) POSTed as `logout_token`. Sent in the
//! background, once, with a 5 s timeout: the person's sign-out never waits for an application.
//! Enabled by the instance feature `enableBackChannelLogout` (`/v2/features/instance`).
//!
//! The URI is registered by an organization's owner, so the request must not reach what only
//! latch's network can: unless `backchannel_private_targets` allows it, a host that is an IP
//! address must be a public one, and a name is resolved by [`PublicOnly`], which keeps only
//! public addresses (the connection goes to an address that was checked, so a name that
//! resolves differently the second time changes nothing).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::app::AppState;
use crate::domain::settings::Features;
use crate::oauth::client;
use crate::store::session::Session;
use crate::store::{Conn, Result, session_client, setting};

/// The event a logout token carries.
pub const EVENT: &str = "http://schemas.openid.net/event/backchannel-logout";
/// How long a logout token is valid.
const LIFETIME: i64 = 120;

/// Deliveries in flight at once, over all logouts of this replica.
static AT_ONCE: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(16);
/// Applications notified of one logout at most (each costs a signature in the logout request).
const MAX_PER_LOGOUT: usize = 100;

/// Notes the application of a completed authorization in its session, when it wants to hear of
/// the session's end.
pub async fn note(c: &mut Conn, client: &client::OidcClient, s: &Session) -> Result<()> {
    if client.config.back_channel_logout_uri.is_empty() {
        return Ok(());
    }
    session_client::note(c, &s.session_id, &client.app.client_id, s.expires_at).await
}

/// Sends logout tokens for `ended` sessions to the applications noted in them.
pub async fn notify(state: &AppState, c: &mut Conn, ended: &[Session]) -> Result<()> {
    let ids: Vec<String> = ended.iter().map(|s| s.session_id.clone()).collect();
    let pairs = session_client::take(c, &ids).await?;
    if pairs.is_empty() {
        return Ok(());
    }
    let features = setting::load::<Features>(c, setting::INSTANCE).await?.value;
    if features.enable_back_channel_logout != Some(true) {
        return Ok(());
    }
    let now = state.clock.now();
    if pairs.len() > MAX_PER_LOGOUT {
        tracing::warn!(
            pairs = pairs.len(),
            "back-channel logout: only the first {MAX_PER_LOGOUT} applications are notified"
        );
    }
    for (sid, client_id) in pairs.into_iter().take(MAX_PER_LOGOUT) {
        let Some(user_id) = ended.iter().find(|s| s.session_id == sid).map(|s| s.user_id.clone()) else { continue };
        // A store error for one application loses only its notification, not the others'.
        let cl = match client::load(&state.cache, c, &client_id).await {
            Ok(Some(cl)) => cl,
            Ok(None) => continue,
            Err(e) => {
                tracing::warn!(error = %e, client_id, "back-channel logout not sent: the application could not be read");
                continue;
            }
        };
        let uri = cl.config.back_channel_logout_uri.clone();
        // https only, http in dev mode (as registration requires; a URI stored before that rule
        // is not posted to).
        if uri.is_empty() || !(uri.starts_with("https://") || (cl.config.dev_mode && uri.starts_with("http://"))) {
            continue;
        }
        let claims = json!({
            "iss": state.settings.issuer,
            "sub": user_id,
            "aud": client_id,
            "iat": now,
            "exp": now + LIFETIME,
            "jti": crate::crypto::secret::random_id(),
            "sid": sid,
            "events": { EVENT: {} },
        });
        let token = match state.tokens.sign(Some("logout+jwt"), &claims) {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(error = %e, client_id, "cannot sign a logout token");
                continue;
            }
        };
        state.background.spawn(deliver(uri, token, client_id, state.settings.backchannel_private_targets));
    }
    Ok(())
}

/// Whether an address is one anyone on the internet could reach: not loopback, private,
/// link-local, shared (carrier-grade NAT), unique-local, documentation, benchmarking,
/// multicast, broadcast, reserved or unspecified (an IPv4-mapped IPv6 address as its IPv4).
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            !(v4.is_private()
                || v4.is_loopback()
                || v4.is_link_local()
                || v4.is_broadcast()
                || v4.is_documentation()
                || v4.is_unspecified()
                || v4.is_multicast()
                || a == 0
                || (a == 100 && (64..128).contains(&b))
                || (a == 192 && b == 0 && v4.octets()[2] == 0)
                || (a == 198 && (b == 18 || b == 19))
                || a >= 240)
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            // An IPv4 address inside: mapped (::ffff:a.b.c.d), the old IPv4-compatible form
            // (::a.b.c.d, `::1` and `::` among them) and 6to4 (2002:aabb:ccdd::/48) count as
            // that address.
            if let Some(v4) = v6.to_ipv4() {
                return is_public(IpAddr::V4(v4));
            }
            if s[0] == 0x2002 {
                let [a, b] = s[1].to_be_bytes();
                let [c, d] = s[2].to_be_bytes();
                return is_public(IpAddr::V4(std::net::Ipv4Addr::new(a, b, c, d)));
            }
            !(v6.is_multicast()
                || v6.is_unique_local()
                || v6.is_unicast_link_local()
                || s[0] & 0xffc0 == 0xfec0 // site-local (deprecated, still routed by some)
                || s[0] == 0x2001 && s[1] == 0x0db8 // documentation
                || s[0] == 0x3fff && s[1] < 0x1000 // documentation (3fff::/20)
                || s[0] == 0x0064 && s[1] == 0xff9b // NAT64, well-known and local-use: an IPv4 behind
                // IETF protocol assignments (2001::/23): Teredo (2001::/32, whose IPv4 address is
                // hidden by a XOR), benchmarking, ORCHID
                || s[0] == 0x2001 && s[1] < 0x0200
                || s[0] == 0x0100 && s[1] == 0 && s[2] == 0 && s[3] == 0 // discard-only (100::/64)
                || s[0] == 0x5f00) // SRv6 segment identifiers
        }
    }
}

/// A resolver that answers only with public addresses ([`is_public`]).
struct PublicOnly;

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public: Vec<SocketAddr> = found.into_iter().filter(|a| is_public(a.ip())).collect();
            if public.is_empty() {
                return Err(format!("{host} has no public address").into());
            }
            Ok(Box::new(public.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

async fn deliver(uri: String, token: String, client_id: String, private_targets: bool) {
    if !private_targets {
        let literal = url::Url::parse(&uri).ok().and_then(|u| match u.host() {
            Some(url::Host::Ipv4(ip)) => Some(IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => Some(IpAddr::V6(ip)),
            _ => None,
        });
        if literal.is_some_and(|ip| !is_public(ip)) {
            tracing::warn!(
                client_id,
                "back-channel logout not sent: the URI names a non-public address (LATCH_BACKCHANNEL_PRIVATE_TARGETS)"
            );
            return;
        }
    }
    let mut builder =
        reqwest::Client::builder().timeout(Duration::from_secs(5)).redirect(reqwest::redirect::Policy::none());
    if !private_targets {
        // No proxy from the environment (HTTP_PROXY, ...): it would resolve the name itself,
        // past the check of the addresses.
        builder = builder.dns_resolver(Arc::new(PublicOnly)).no_proxy();
    }
    // A bounded number at once, whatever the logouts: each waits for a slot, but not past half
    // its token's life (slow applications of one organization do not make everyone's tokens
    // arrive expired).
    let _slot = match tokio::time::timeout(Duration::from_secs(LIFETIME as u64 / 2), AT_ONCE.acquire()).await {
        Ok(Ok(slot)) => slot,
        _ => {
            tracing::warn!(client_id, "back-channel logout not sent: too many deliveries waiting");
            return;
        }
    };
    let http = match builder.build() {
        Ok(h) => h,
        Err(e) => {
            tracing::warn!(error = %e, "cannot build the HTTP client for back-channel logout");
            return;
        }
    };
    match http.post(&uri).form(&[("logout_token", token.as_str())]).send().await {
        Ok(r) if r.status().is_success() => tracing::info!(client_id, "back-channel logout delivered"),
        Ok(r) => tracing::warn!(client_id, status = %r.status(), "back-channel logout refused by the application"),
        Err(e) => tracing::warn!(client_id, error = %e, "back-channel logout could not be delivered"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_addresses_are_public() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "0.1.2.3",
            "192.0.0.8",
            "192.0.2.1",
            "198.18.0.1",
            "224.0.0.1",
            "240.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fc00::1",
            "fd12::1",
            "fe80::1",
            "ff02::1",
            "2001:db8::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
            "::127.0.0.1",
            "::a9fe:a9fe",
            "fec0::1",
            "2002:7f00:1::1",
            "2002:a9fe:a9fe::1",
            "64:ff9b:1::a00:1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "2001:2::1",
            "2001:10::1",
            "2001:1ff::1",
            "100::1",
            "3fff::1",
            "3fff:fff::1",
            "5f00::1",
        ] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        for public in [
            "8.8.8.8",
            "1.1.1.1",
            "100.128.0.1",
            "172.32.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "2002:808:808::1",
            "2001:200::1",
            "2001:4860:4860::8888",
            "2a00:1450:4001::1",
        ] {
            assert!(is_public(public.parse().unwrap()), "{public}");
        }
    }

    #[tokio::test]
    async fn the_resolver_keeps_only_public_addresses() {
        use reqwest::dns::Resolve;
        let name: reqwest::dns::Name = "localhost".parse().unwrap();
        let err = match PublicOnly.resolve(name).await {
            Ok(addrs) => panic!("localhost resolved to {:?}", addrs.collect::<Vec<_>>()),
            Err(e) => e.to_string(),
        };
        assert!(err.contains("no public address"), "{err}");
    }
}
