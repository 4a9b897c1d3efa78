//! `GET`/`POST /oidc/v1/end_session` (RP-Initiated Logout 1.0): ends the browser's sessions
//! (or, with an `id_token_hint`, that subject's session in this browser), which makes the tokens
//! bound to them inactive, then returns to a registered `post_logout_redirect_uri` or shows the
//! signed-out page. Without a hint, or with one that names no session of this browser (an old
//! ID token, another device's), while the browser has sessions, it first asks the person
//! (section 2: the OP MUST ask then), so that another site cannot sign them out with a link.
//! A POST from another site carries no cookie (`SameSite=Lax`): it is sent on as a GET, which
//! does, so that a relying party's logout form signs the person out.

use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::app::AppState;
use crate::login::cookie;
use crate::login::flow::store_fail;
use crate::login::i18n::{self, Texts};
use crate::login::pages;
use crate::oauth::authorize::request_id;
use crate::oauth::client;
use crate::oauth::issue;
use crate::store::{Conn, refresh, revocation, session};

#[derive(Deserialize)]
struct HintClaims {
    iss: String,
    sub: String,
    #[serde(default)]
    sid: Option<String>,
    #[serde(default)]
    azp: Option<String>,
    #[serde(default)]
    aud: serde_json::Value,
}

pub async fn get(State(state): State<AppState>, headers: HeaderMap, RawQuery(q): RawQuery) -> Response {
    let pairs: Vec<(String, String)> = form_urlencoded::parse(q.unwrap_or_default().as_bytes()).into_owned().collect();
    handle(&state, &headers, pairs, false).await
}

pub async fn post(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let pairs: Vec<(String, String)> = form_urlencoded::parse(&body).into_owned().collect();
    handle(&state, &headers, pairs, true).await
}

/// What the confirmation form carries (see [`Browser::derived`](cookie::Browser::derived)).
const CONFIRM: &str = "end_session";

/// Why a parameter is refused: repeated, or holding a NUL.
enum Bad<'a> {
    Repeated(&'a str),
    Invalid(&'a str),
}

impl Bad<'_> {
    fn message(&self, t: &Texts) -> String {
        match self {
            Bad::Repeated(name) => t.err_param_repeated.replace("{}", name),
            Bad::Invalid(name) => t.err_param_invalid.replace("{}", name),
        }
    }
}

fn one<'a, 'n>(pairs: &'a [(String, String)], name: &'n str) -> Result<Option<&'a str>, Bad<'n>> {
    let mut it = pairs.iter().filter(|(k, _)| k == name).map(|(_, v)| v.as_str());
    let first = it.next();
    if it.next().is_some() {
        return Err(Bad::Repeated(name));
    }
    if first.is_some_and(|v| v.contains('\0')) {
        return Err(Bad::Invalid(name));
    }
    Ok(first.filter(|v| !v.is_empty()))
}

async fn handle(state: &AppState, headers: &HeaderMap, pairs: Vec<(String, String)>, posted: bool) -> Response {
    let ui_locales = one(&pairs, "ui_locales").ok().flatten();
    let locales: Vec<String> = ui_locales.unwrap_or("").split(' ').map(str::to_string).collect();
    let t = i18n::choose(&locales, headers);
    let bad = |msg: &str| pages::error_page(t, StatusCode::BAD_REQUEST, msg, &request_id(headers));
    let (hint, client_id, redirect, st) = match (
        one(&pairs, "id_token_hint"),
        one(&pairs, "client_id"),
        one(&pairs, "post_logout_redirect_uri"),
        one(&pairs, "state"),
    ) {
        (Ok(h), Ok(c), Ok(r), Ok(s)) => (h, c, r, s),
        (Err(e), ..) | (_, Err(e), ..) | (_, _, Err(e), _) | (.., Err(e)) => return bad(&e.message(t)),
    };
    let confirmed = match one(&pairs, "confirm") {
        Ok(c) => c,
        Err(e) => return bad(&e.message(t)),
    };
    let asked = (client_id, redirect, st);
    // The hint identifies the client and the subject; an expired hint still does, a forged
    // one is refused. One signed by a key latch no longer has (retired and removed, while the
    // relying party's session lasted longer) cannot be checked: it counts as no hint, so the
    // person is asked, rather than kept signed in by an error page.
    // A key another replica activated since this one's last reload is learnt first.
    // It must name latch's issuer: one of an issuer latch had before a change of its external
    // URL is another's.
    let issuer = &state.settings.issuer;
    let verify = |h: &str| state.tokens.verify_id_token::<HintClaims>(h).filter(|c| &c.iss == issuer);
    let hint = match hint {
        Some(h) => match verify(h) {
            Some(c) => Some(c),
            None if state.tokens.learn_signer(h).await => match verify(h) {
                Some(c) => Some(c),
                None => return bad(t.err_hint_invalid),
            },
            None if state.tokens.signer_known(h) == Some(false) => None,
            None => return bad(t.err_hint_invalid),
        },
        None => None,
    };
    let hint_client = hint.as_ref().and_then(|h| {
        h.azp.clone().or_else(|| match &h.aud {
            serde_json::Value::String(a) => Some(a.clone()),
            serde_json::Value::Array(a) => a.first().and_then(|x| x.as_str()).map(str::to_string),
            _ => None,
        })
    });
    let client_id = match (client_id, hint_client.as_deref()) {
        (Some(c), Some(h)) if c != h => return bad(t.err_hint_other_client),
        (Some(c), _) => Some(c.to_string()),
        (None, h) => h.map(str::to_string),
    };
    let mut c = match state.db.conn().await {
        Ok(c) => c,
        Err(e) => return store_fail(t, headers, e),
    };
    let target = match (&client_id, redirect) {
        (Some(cid), Some(uri)) => match client::load(&state.cache, &mut c, cid).await {
            Ok(Some(cl)) if cl.post_logout_allowed(uri) => Some(uri.to_string()),
            Ok(_) => return bad(t.err_post_logout_unknown),
            Err(e) => return store_fail(t, headers, e),
        },
        // Without a client the URI cannot be checked, so it is ignored.
        _ => None,
    };
    let browser = cookie::existing(headers, state.settings.secure_cookies);
    if posted && browser.is_none() && confirmed.is_none() {
        return cookie::as_get(crate::paths::END_SESSION, &pairs);
    }
    // Without a hint every session of the browser would end, and a hint that names none of its
    // sessions does not speak for this person: only once the person said so on latch's own page
    // (a form posted with a value derived from this browser's cookie).
    if let Some(b) = &browser
        && !(posted
            && confirmed.is_some_and(|v| {
                aws_lc_rs::constant_time::verify_slices_are_equal(v.as_bytes(), b.derived(CONFIRM).as_bytes()).is_ok()
            }))
    {
        match session::of_browser(&mut c, &b.key, state.clock.now()).await {
            Ok(live) if live.is_empty() => {}
            Ok(live)
                if hint.as_ref().is_some_and(|h| {
                    live.iter().any(|s| h.sid.as_deref() == Some(s.session_id.as_str()) && s.user_id == h.sub)
                }) => {}
            Ok(_) => {
                // The form's answer redirects to the client: a form target in the CSP.
                let origin = target.as_deref().and_then(|u| url::Url::parse(u).ok()).map(|u| pages::form_target(&u));
                let confirm = b.derived(CONFIRM);
                let page = pages::ConfirmLogout {
                    t,
                    confirm: &confirm,
                    // The client named or the hint's: the hint is not carried (it names no session
                    // here), but its client keeps the way back to the registered URI.
                    client_id: client_id.as_deref().or(asked.0),
                    post_logout_redirect_uri: asked.1,
                    state: asked.2,
                    ui_locales,
                };
                return pages::render(t, StatusCode::OK, &page, origin.as_deref());
            }
            Err(e) => return store_fail(t, headers, e),
        }
    }
    if let Some(browser) = browser
        && let Err(e) = end_sessions(state, &mut c, &browser.key, hint.as_ref().map(|h| h.sub.as_str())).await
    {
        return store_fail(t, headers, e);
    }
    respond(t, target, st)
}

/// Ends sessions and everything bound to them.
pub async fn end_sessions(
    state: &AppState,
    c: &mut Conn,
    ua_key: &[u8],
    user_id: Option<&str>,
) -> crate::store::Result<usize> {
    let now = state.clock.now();
    // A sign-in this browser left half-way (the password checked, a required change or a
    // second factor still to come) ends too, whether or not a session came of it yet.
    crate::store::auth_request::forget_browser(c, ua_key, user_id).await?;
    // The sessions' tokens are revoked before the sessions are deleted: a failure part-way
    // leaves the sessions in place, so that the logout can be repeated.
    let before: Vec<String> = session::of_browser(c, ua_key, i64::MIN)
        .await?
        .into_iter()
        .filter(|s| user_id.is_none_or(|u| s.user_id == u))
        .map(|s| s.session_id)
        .collect();
    if before.is_empty() {
        return Ok(0);
    }
    let until = issue::revocation_until(c, now).await?;
    revoke_sessions(state, c, &before, now, until).await?;
    let ended = session::end(c, ua_key, user_id).await?;
    // A session signed in between the read and the deletion (another tab) is revoked too.
    let late: Vec<String> = ended.iter().map(|s| s.session_id.clone()).filter(|id| !before.contains(id)).collect();
    revoke_sessions(state, c, &late, now, until).await?;
    let ids: Vec<String> = ended.iter().map(|s| s.session_id.clone()).collect();
    if let Err(e) = super::backchannel::notify(state, c, &ended).await {
        tracing::warn!(error = %e, "back-channel logout notifications failed");
    }
    tracing::info!(sessions = ids.len(), "sessions ended");
    Ok(ids.len())
}

/// Revokes the tokens of sessions `ids`: their access and ID tokens until `until`, their
/// refresh tokens for good.
async fn revoke_sessions(
    state: &AppState,
    c: &mut Conn,
    ids: &[String],
    now: i64,
    until: i64,
) -> crate::store::Result<()> {
    for sid in ids {
        state.revocations.revoke(c, &revocation::session_key(sid), now, until).await?;
    }
    if !ids.is_empty() {
        refresh::revoke_sessions(c, ids, now).await?;
    }
    Ok(())
}

fn respond(t: &Texts, target: Option<String>, st: Option<&str>) -> Response {
    match target.and_then(|u| url::Url::parse(&u).ok()) {
        Some(mut u) => {
            if let Some(s) = st {
                u.query_pairs_mut().append_pair("state", s);
            }
            let mut r = StatusCode::SEE_OTHER.into_response();
            if let Ok(v) = HeaderValue::from_str(u.as_str()) {
                r.headers_mut().insert(header::LOCATION, v);
            }
            r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            r
        }
        None => pages::render(t, StatusCode::OK, &pages::SignedOut { t }, None),
    }
}
