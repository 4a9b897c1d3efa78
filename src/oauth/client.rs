//! OIDC clients (applications) as the protocol endpoints see them.

use url::Url;

use crate::cache::ConfigCache;
use crate::domain::enums::{AppState, OidcAppType, OidcAuthMethod, ProjectState};
use crate::store::app::{App, AppKind, OidcConfig};
use crate::store::project::Project;
use crate::store::{Result, Source};

#[derive(Debug, Clone)]
pub struct OidcClient {
    pub app: App,
    pub config: OidcConfig,
    pub auth_method: OidcAuthMethod,
    pub project: Project,
}

/// An active OIDC application of an active project, by client id.
pub async fn load(cache: &ConfigCache, c: &mut impl Source, client_id: &str) -> Result<Option<OidcClient>> {
    if client_id.is_empty() || client_id.len() > 200 || client_id.contains('\0') {
        return Ok(None);
    }
    let Some(a) = cache.app(c, client_id).await? else {
        return Ok(None);
    };
    if a.state != AppState::Active {
        return Ok(None);
    }
    let AppKind::Oidc { auth_method, config } = a.kind.clone() else {
        return Ok(None);
    };
    let Some(p) = cache.project(c, &a.project_id).await? else {
        return Ok(None);
    };
    if p.state != ProjectState::Active {
        return Ok(None);
    }
    Ok(Some(OidcClient { app: a, config, auth_method, project: p }))
}

fn is_loopback(host: &str) -> bool {
    matches!(host, "localhost" | "127.0.0.1" | "[::1]" | "::1")
}

/// Exact match with a registered URI. Native applications (RFC 8252 7.3) and applications in
/// development mode may vary the port of a loopback URI; development mode also lets a loopback
/// URI use http instead of https.
pub fn uri_allowed(registered: &[String], requested: &str, app_type: OidcAppType, dev_mode: bool) -> bool {
    // Never a scheme that runs script, even one registered before registration refused it.
    if Url::parse(requested).is_ok_and(|u| matches!(u.scheme(), "javascript" | "data" | "vbscript")) {
        return false;
    }
    if registered.iter().any(|r| r == requested) {
        return true;
    }
    if app_type != OidcAppType::Native && !dev_mode {
        return false;
    }
    let Ok(req) = Url::parse(requested) else {
        return false;
    };
    if !req.host_str().is_some_and(is_loopback) {
        return false;
    }
    registered.iter().filter_map(|r| Url::parse(r).ok()).any(|reg| {
        reg.host_str() == req.host_str()
            && reg.path() == req.path()
            && reg.query() == req.query()
            && reg.fragment().is_none()
            && req.fragment().is_none()
            && (reg.scheme() == req.scheme()
                || (dev_mode && matches!((reg.scheme(), req.scheme()), ("http", "https") | ("https", "http"))))
    })
}

impl OidcClient {
    pub fn redirect_allowed(&self, uri: &str) -> bool {
        uri_allowed(&self.config.redirect_uris, uri, self.config.app_type, self.config.dev_mode)
    }

    pub fn post_logout_allowed(&self, uri: &str) -> bool {
        uri_allowed(&self.config.post_logout_redirect_uris, uri, self.config.app_type, self.config.dev_mode)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_scheme_is_never_a_target() {
        // Registered before registration refused such schemes: still never redirected to.
        for uri in ["javascript:alert(document.domain)", "data:text/html,x", "vbscript:x"] {
            assert!(!uri_allowed(&[uri.to_string()], uri, OidcAppType::Native, true), "{uri}");
        }
    }

    #[test]
    fn exact_matching() {
        let reg = vec!["https://app.example.com/cb".to_string(), "http://127.0.0.1:8080/cb".to_string()];
        assert!(uri_allowed(&reg, "https://app.example.com/cb", OidcAppType::Web, false));
        for bad in [
            "https://app.example.com/cb/",
            "https://APP.example.com/cb",
            "https://app.example.com/cb?x=1",
            "https://app.example.com/CB",
            "http://app.example.com/cb",
            "https://app.example.com/cb#f",
            "http://127.0.0.1:9999/cb",
        ] {
            assert!(!uri_allowed(&reg, bad, OidcAppType::Web, false), "{bad}");
        }
        assert!(uri_allowed(&reg, "http://127.0.0.1:9999/cb", OidcAppType::Native, false), "RFC 8252 loopback port");
        assert!(!uri_allowed(&reg, "http://127.0.0.1:9999/other", OidcAppType::Native, false));
        assert!(uri_allowed(&reg, "https://127.0.0.1:9999/cb", OidcAppType::Web, true), "dev mode");
        assert!(!uri_allowed(&reg, "https://evil.example/cb", OidcAppType::Native, true));
    }
}
