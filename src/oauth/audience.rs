//! Which audiences a grant may carry. A client asks for another project's audience with the
//! scope `urn:service:iam:org:project:id:{id}:aud`, and for the JSON APIs' with
//! `urn:service:iam:org:project:id:latch:aud`; the tokens then count at that project's APIs
//! (introspection answers them) or at latch's own, with the user's roles. So the scope is kept
//! only where the client could have been meant:
//!
//! - a project of the client's own organization (latch grants no project to another
//!   organization, so no other project's API has a reason to take these tokens);
//! - the JSON APIs for a client's own tokens (a machine user's), for a user of the client's
//!   organization, or for a client of the instance's default organization (the operator's own
//!   console): else any organization's application could, with a link a signed-in
//!   administrator of another organization follows, get a token the API takes with that
//!   administrator's roles.
//!
//! Other audience scopes are dropped like scopes latch does not know.

use crate::api::auth::API_AUDIENCE;
use crate::app::AppState;
use crate::oauth::scope::{PROJECT_AUD_PREFIX, PROJECT_AUD_SUFFIX, Scopes};
use crate::oidc::claims::Subject;
use crate::store::{Result, Source};

/// Who asks: the client's organization, and whether the client is the subject itself.
pub struct Asker<'a> {
    pub org_id: &'a str,
    pub is_subject: bool,
}

/// At most this many audience scopes count in one request; more are dropped (each names a
/// project to look up).
pub const MAX_AUDIENCE_SCOPES: usize = 32;

/// `scopes` without the audience scopes `asker` may not ask for `subject`.
pub async fn allowed(
    state: &AppState,
    c: &mut impl Source,
    asker: Asker<'_>,
    subject: &Subject,
    scopes: Scopes,
) -> Result<Scopes> {
    let mut kept = Vec::with_capacity(scopes.0.len());
    let mut audiences = 0;
    for s in scopes.0 {
        let Some(project) = s.strip_prefix(PROJECT_AUD_PREFIX).and_then(|r| r.strip_suffix(PROJECT_AUD_SUFFIX)) else {
            kept.push(s);
            continue;
        };
        audiences += 1;
        if audiences <= MAX_AUDIENCE_SCOPES && may_name(state, c, &asker, subject, project).await? {
            kept.push(s);
        }
    }
    Ok(Scopes(kept))
}

/// `audience` (a token exchange's, taken from the tokens it was given) without `latch` and
/// the projects of other organizations where `asker` may not name them for `subject`; other
/// entries (client ids) stay.
pub async fn allowed_ids(
    state: &AppState,
    c: &mut impl Source,
    asker: Asker<'_>,
    subject: &Subject,
    audience: Vec<String>,
) -> Result<Vec<String>> {
    let mut kept = Vec::with_capacity(audience.len());
    for a in audience {
        let ok = if a == API_AUDIENCE {
            may_name(state, c, &asker, subject, &a).await?
        } else {
            state.cache.project(c, &a).await?.is_none_or(|p| p.org_id == asker.org_id)
        };
        if ok {
            kept.push(a);
        }
    }
    Ok(kept)
}

/// Whether `asker` may name `project` (a project id, or `latch`) in `subject`'s tokens.
async fn may_name(
    state: &AppState,
    c: &mut impl Source,
    asker: &Asker<'_>,
    subject: &Subject,
    project: &str,
) -> Result<bool> {
    Ok(if project == API_AUDIENCE {
        asker.is_subject
            || subject.org.org_id == asker.org_id
            || state.cache.default_org(c).await?.as_deref() == Some(asker.org_id)
    } else {
        state.cache.project(c, project).await?.is_some_and(|p| p.org_id == asker.org_id)
    })
}
