//! Who is calling the JSON APIs, on which organization, with which roles.
//!
//! The caller presents `Authorization: Bearer <token>`: a personal access token, or an access
//! token latch issued with the API audience (for example through the jwt-bearer grant). The
//! organization acted on is the caller's own unless the `x-latch-orgid` header names another;
//! instance roles act on every organization, organization roles on their own.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use super::error::ApiError;
use crate::app::AppState;
use crate::domain::roles::{Permission, grants};
use crate::oauth::access;
use crate::store::{member, org};

/// The header that selects the organization of a management call.
pub const ORG_HEADER: &str = "x-latch-orgid";
/// The same header under ZITADEL's name, so that clients written for its interface (which sends
/// `x-zitadel-orgid`) act on the organization they name and not silently on their own.
pub const ORG_HEADER_ZITADEL: &str = "x-zitadel-orgid";

#[derive(Debug, Clone)]
pub struct Caller {
    pub user_id: String,
    /// The caller's own organization.
    pub user_org_id: String,
    /// The organization this call acts on.
    pub org_id: String,
    pub iam_roles: Vec<String>,
    /// The caller's roles in `org_id`.
    pub org_roles: Vec<String>,
}

impl Caller {
    pub fn can(&self, perm: Permission) -> bool {
        self.iam_roles.iter().any(|r| grants(r, perm))
            || (!perm.is_instance_scope() && self.org_roles.iter().any(|r| grants(r, perm)))
    }

    /// PermissionDenied unless the caller holds `perm` on the organization of the call.
    pub fn require(&self, perm: Permission) -> Result<(), ApiError> {
        if self.can(perm) {
            Ok(())
        } else {
            Err(ApiError::denied("no permission for this call").with_id("AUTH-Denied"))
        }
    }
}

/// The bearer token of a request, if it has one.
pub fn bearer(parts: &Parts) -> Option<&str> {
    let value = parts.headers.get(axum::http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = token.trim();
    (!token.is_empty()).then_some(token)
}

/// The audience an access token needs to call the JSON APIs (scope
/// `urn:service:iam:org:project:id:latch:aud`); personal access tokens need none.
pub const API_AUDIENCE: &str = "latch";

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let token = bearer(parts)
            .ok_or_else(|| ApiError::unauthenticated("a bearer token is required").with_id("AUTH-NoToken"))?;
        let invalid = || ApiError::unauthenticated("the token is invalid or expired").with_id("AUTH-Invalid");
        let mut c = state.db.conn().await?;
        let access = access::resolve(state, &mut c, token).await?.ok_or_else(invalid)?;
        if !access.is_pat && !access.claims.aud.iter().any(|a| a == API_AUDIENCE) {
            return Err(ApiError::unauthenticated(format!(
                "the access token is not for this API; request it with the scope urn:service:iam:org:project:id:{API_AUDIENCE}:aud"
            ))
            .with_id("AUTH-Audience"));
        }
        let u = access.user;
        // A header that names nothing is refused rather than read as "my own organization":
        // a caller that meant another organization must not act on its own by mistake.
        // Either name, once; both only when they agree.
        let bad_header = || {
            ApiError::invalid(format!("the {ORG_HEADER} (or {ORG_HEADER_ZITADEL}) header must be one organization id"))
                .with_id("AUTH-OrgHeader")
        };
        let mut named =
            parts.headers.get_all(ORG_HEADER).iter().chain(parts.headers.get_all(ORG_HEADER_ZITADEL).iter());
        // Read as UTF-8, not only visible ASCII: an imported organization's id may have any
        // characters, and it must stay manageable.
        let org_id = match named.next().map(header_text) {
            None => u.org_id.clone(),
            Some(Ok(id)) if !id.is_empty() => {
                if named.any(|v| header_text(v).ok() != Some(id)) {
                    return Err(bad_header());
                }
                id.to_string()
            }
            Some(_) => return Err(bad_header()),
        };
        let (iam_roles, org_roles) = member::roles_of(&mut c, &u.user_id, &org_id).await?;
        if org_id != u.org_id && org::get(&mut c, &org_id).await?.is_none() {
            let caller_is_iam = !iam_roles.is_empty();
            return Err(if caller_is_iam {
                ApiError::not_found("organization not found").with_id("ORG-NotFound")
            } else {
                ApiError::denied("no permission for this organization").with_id("AUTH-Denied")
            });
        }
        Ok(Caller { user_id: u.user_id, user_org_id: u.org_id, org_id, iam_roles, org_roles })
    }
}

/// A header's value as UTF-8 text, trimmed.
fn header_text(v: &axum::http::HeaderValue) -> Result<&str, std::str::Utf8Error> {
    std::str::from_utf8(v.as_bytes()).map(str::trim)
}
