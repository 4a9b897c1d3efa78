//! The OIDC application rules of the interface latch follows: hard validity (refused) and
//! compliance problems (reported with the application, not refused).

use url::Url;

use crate::domain::enums::{OidcAppType, OidcAuthMethod, OidcGrantType, OidcResponseType};
use crate::store::app::OidcConfig;

/// The problem keys and their English texts.
fn text(key: &str) -> &'static str {
    match key {
        "Application.OIDC.V1.NotCompliant" => "The configuration is not compliant with OIDC 1.0",
        "Application.OIDC.V1.NoRedirectUris" => "At least one redirect URI must be registered",
        "Application.OIDC.V1.GrantType.Refresh.NoAuthCode" => {
            "The refresh token grant needs the authorization code grant"
        }
        "Application.OIDC.V1.Native.AuthMethodType.NotNone" => "Native applications must use the auth method NONE",
        "Application.OIDC.V1.UserAgent.AuthMethodType.NotNone" => {
            "User agent applications must use the auth method NONE"
        }
        "Application.OIDC.V1.Code.RedirectUris.HttpOnlyForWeb" => {
            "http redirect URIs are only allowed for web applications in development mode"
        }
        "Application.OIDC.V1.Code.RedirectUris.CustomOnlyForNative" => {
            "Custom-scheme redirect URIs are only allowed for native applications"
        }
        "Application.OIDC.V1.Native.RedirectUris.MustBeHttpLocalhost" => {
            "Native applications may use http only for localhost or loopback addresses"
        }
        "Application.OIDC.V1.Implicit.RedirectUris.CustomNotAllowed" => {
            "Custom-scheme redirect URIs are not allowed for the implicit flow"
        }
        "Application.OIDC.V1.Implicit.RedirectUris.HttpNotAllowed" => {
            "http redirect URIs are not allowed for the implicit flow"
        }
        "Application.OIDC.V1.NotAllCombinationsAreAllowed" => {
            "Not every combination of the configured flows and redirect URIs is allowed"
        }
        _ => "",
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub key: &'static str,
    pub message: &'static str,
}

fn is_loopback(host: &str) -> bool {
    host == "localhost" || host == "127.0.0.1" || host == "[::1]" || host == "::1" || host.ends_with(".localhost")
}

/// Compliance problems of a configuration (empty when compliant).
pub fn problems(c: &OidcConfig, auth: OidcAuthMethod) -> Vec<Problem> {
    let mut keys: Vec<&'static str> = Vec::new();
    let has_code = c.grant_types.contains(&OidcGrantType::AuthorizationCode);
    let has_implicit = c.grant_types.contains(&OidcGrantType::Implicit);
    let device_only = c
        .grant_types
        .iter()
        .all(|g| matches!(g, OidcGrantType::DeviceCode | OidcGrantType::RefreshToken | OidcGrantType::TokenExchange));
    if c.redirect_uris.is_empty() && !device_only {
        keys.push("Application.OIDC.V1.NoRedirectUris");
    }
    if c.grant_types.contains(&OidcGrantType::RefreshToken)
        && !has_code
        && !c.grant_types.contains(&OidcGrantType::DeviceCode)
    {
        keys.push("Application.OIDC.V1.GrantType.Refresh.NoAuthCode");
    }
    match c.app_type {
        OidcAppType::Native if auth != OidcAuthMethod::None => {
            keys.push("Application.OIDC.V1.Native.AuthMethodType.NotNone")
        }
        OidcAppType::UserAgent if auth != OidcAuthMethod::None => {
            keys.push("Application.OIDC.V1.UserAgent.AuthMethodType.NotNone")
        }
        _ => {}
    }
    let mut any_http = false;
    for uri in &c.redirect_uris {
        let Ok(u) = Url::parse(uri) else { continue };
        let scheme = u.scheme();
        let host = u.host_str().unwrap_or("");
        let custom = scheme != "http" && scheme != "https";
        if scheme == "http" {
            any_http = true;
        }
        if has_code {
            if scheme == "http" {
                match c.app_type {
                    OidcAppType::Web if !c.dev_mode => {
                        keys.push("Application.OIDC.V1.Code.RedirectUris.HttpOnlyForWeb")
                    }
                    OidcAppType::Native if !is_loopback(host) => {
                        keys.push("Application.OIDC.V1.Native.RedirectUris.MustBeHttpLocalhost")
                    }
                    OidcAppType::UserAgent if !c.dev_mode => {
                        keys.push("Application.OIDC.V1.Code.RedirectUris.HttpOnlyForWeb")
                    }
                    _ => {}
                }
            }
            if custom && c.app_type != OidcAppType::Native {
                keys.push("Application.OIDC.V1.Code.RedirectUris.CustomOnlyForNative");
            }
        }
        if has_implicit {
            if custom {
                keys.push("Application.OIDC.V1.Implicit.RedirectUris.CustomNotAllowed");
            }
            if scheme == "http" && !(c.dev_mode && is_loopback(host)) {
                keys.push("Application.OIDC.V1.Implicit.RedirectUris.HttpNotAllowed");
            }
        }
    }
    if has_code && has_implicit && any_http {
        keys.push("Application.OIDC.V1.NotAllCombinationsAreAllowed");
    }
    keys.dedup();
    if !keys.is_empty() {
        keys.insert(0, "Application.OIDC.V1.NotCompliant");
    }
    keys.into_iter().map(|k| Problem { key: k, message: text(k) }).collect()
}

/// Hard validity: the response types need their grant types, the clock skew is 0 to 5 s.
pub fn validity(c: &OidcConfig) -> Result<(), String> {
    if !(0..=5000).contains(&c.clock_skew_ms) {
        return Err("clockSkew: must be between 0s and 5s".into());
    }
    for rt in &c.response_types {
        let ok = match rt {
            OidcResponseType::Code => {
                c.grant_types.contains(&OidcGrantType::AuthorizationCode)
                    || c.grant_types.contains(&OidcGrantType::DeviceCode)
            }
            OidcResponseType::IdToken | OidcResponseType::IdTokenToken => {
                c.grant_types.contains(&OidcGrantType::Implicit)
            }
        };
        if !ok {
            let needs =
                if *rt == OidcResponseType::Code { OidcGrantType::AuthorizationCode } else { OidcGrantType::Implicit };
            return Err(format!("grantTypes: the response type {} needs the grant type {}", rt.name(), needs.name()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(app: OidcAppType, uris: &[&str], grants: &[OidcGrantType]) -> OidcConfig {
        OidcConfig {
            app_type: app,
            redirect_uris: uris.iter().map(|s| s.to_string()).collect(),
            response_types: vec![OidcResponseType::Code],
            grant_types: grants.to_vec(),
            ..OidcConfig::default()
        }
    }

    #[test]
    fn compliant_web_app() {
        let c = cfg(OidcAppType::Web, &["https://app.example.com/cb"], &[OidcGrantType::AuthorizationCode]);
        assert!(problems(&c, OidcAuthMethod::Basic).is_empty());
        assert!(validity(&c).is_ok());
    }

    #[test]
    fn reported_problems() {
        let c = cfg(OidcAppType::Web, &["http://app.example.com/cb"], &[OidcGrantType::AuthorizationCode]);
        let p: Vec<_> = problems(&c, OidcAuthMethod::Basic).into_iter().map(|p| p.key).collect();
        assert_eq!(p, vec!["Application.OIDC.V1.NotCompliant", "Application.OIDC.V1.Code.RedirectUris.HttpOnlyForWeb"]);
        let c = cfg(OidcAppType::Native, &["http://127.0.0.1:8000/cb"], &[OidcGrantType::AuthorizationCode]);
        let p: Vec<_> = problems(&c, OidcAuthMethod::Basic).into_iter().map(|p| p.key).collect();
        assert!(p.contains(&"Application.OIDC.V1.Native.AuthMethodType.NotNone"));
        assert!(problems(&c, OidcAuthMethod::None).is_empty());
        let c = cfg(OidcAppType::Web, &[], &[OidcGrantType::AuthorizationCode]);
        assert!(problems(&c, OidcAuthMethod::Basic).iter().any(|p| p.key == "Application.OIDC.V1.NoRedirectUris"));
    }

    #[test]
    fn validity_rules() {
        let mut c = cfg(OidcAppType::Web, &["https://a/cb"], &[OidcGrantType::Implicit]);
        assert!(validity(&c).is_err(), "code needs the authorization code grant");
        c.grant_types.push(OidcGrantType::AuthorizationCode);
        assert!(validity(&c).is_ok());
        c.clock_skew_ms = 6000;
        assert!(validity(&c).is_err());
    }
}
