//! Every protocol path in one place: the routers and the discovery document both read them.

pub const DISCOVERY: &str = "/.well-known/openid-configuration";
pub const AUTHORIZE: &str = "/oauth/v2/authorize";
pub const TOKEN: &str = "/oauth/v2/token";
pub const INTROSPECT: &str = "/oauth/v2/introspect";
pub const REVOKE: &str = "/oauth/v2/revoke";
pub const KEYS: &str = "/oauth/v2/keys";
pub const USERINFO: &str = "/oidc/v1/userinfo";
pub const END_SESSION: &str = "/oidc/v1/end_session";
