//! `GET`/`POST /oauth/v2/authorize`: checks the request, then either answers at once from a
//! session of this browser (single sign-on, `prompt=none`) or stores the request and sends the
//! browser to the login pages, which finish it with [`complete`].

pub mod request;
pub mod response;

use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::{Deserialize, Serialize};

use self::request::{AuthParams, PageError, Prompt, Rejection, ResponseType};
use crate::app::AppState;
use crate::crypto::secret;
use crate::domain::enums::OidcTokenType;
use crate::login::cookie::{self, Browser};
use crate::login::flow::{Progress, Start};
use crate::login::i18n::{self, Texts};
use crate::login::pages;
use crate::oauth::client::OidcClient;
use crate::oauth::error::{ErrorCode, OAuthError};
use crate::oauth::issue::{self, Grant, Shape};
use crate::oauth::scope::Scopes;
use crate::oauth::token::RefreshData;
use crate::oidc::claims::{self, Subject};
use crate::store::auth_request::AuthRequestRow;
use crate::store::org::Org;
use crate::store::session::Session;
use crate::store::user::User;
use crate::store::{Conn, Source, auth_request, code, session, to_json, user};

/// What an authorization code stands for, kept (as JSON) until it is redeemed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CodeData {
    pub redirect_uri: String,
    pub scopes: Vec<String>,
    pub nonce: Option<String>,
    pub code_challenge: Option<String>,
    pub user_id: String,
    pub session_id: String,
    pub auth_time: i64,
    pub amr: Vec<String>,
}

/// The longest authorization request POSTed without the browser cookie that is sent on as a
/// GET: 8 KiB, the request line nginx and most proxies take by default.
const MAX_POST_AS_GET: usize = 8 * 1024;

pub fn request_id(headers: &HeaderMap) -> String {
    headers.get(crate::app::REQUEST_ID).and_then(|v| v.to_str().ok()).unwrap_or("").to_string()
}

pub async fn get(State(state): State<AppState>, headers: HeaderMap, RawQuery(query): RawQuery) -> Response {
    let pairs: Vec<(String, String)> =
        form_urlencoded::parse(query.unwrap_or_default().as_bytes()).into_owned().collect();
    handle(&state, &headers, pairs).await
}

pub async fn post(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let pairs: Vec<(String, String)> = form_urlencoded::parse(&body).into_owned().collect();
    if cookie::existing(&headers, state.settings.secure_cookies).is_none() {
        // Sent on as a GET that carries the cookie (see `cookie::as_get`), within what proxies
        // take in a request line.
        let query_len = form_urlencoded::Serializer::new(String::new()).extend_pairs(&pairs).finish().len();
        if query_len > MAX_POST_AS_GET {
            let t = i18n::choose(&[], &headers);
            return pages::error_page(t, StatusCode::BAD_REQUEST, t.err_request_too_long, &request_id(&headers));
        }
        return cookie::as_get(crate::paths::AUTHORIZE, &pairs);
    }
    handle(&state, &headers, pairs).await
}

fn unavailable(t: &Texts, headers: &HeaderMap, e: impl std::fmt::Display) -> Response {
    tracing::warn!(error = %e, "authorization request failed on the store");
    pages::error_page(t, StatusCode::SERVICE_UNAVAILABLE, t.err_unavailable, &request_id(headers))
}

async fn handle(state: &AppState, headers: &HeaderMap, pairs: Vec<(String, String)>) -> Response {
    // Before the request is checked, `ui_locales` (when it is there once) still picks the language
    // of an error page.
    let asked: Vec<String> = match pairs.iter().filter(|(k, _)| k == "ui_locales").collect::<Vec<_>>().as_slice() {
        [(_, v)] if v.len() <= 200 => v.split(' ').filter(|l| !l.is_empty()).map(str::to_string).collect(),
        _ => Vec::new(),
    };
    let fallback = i18n::choose(&asked, headers);
    let mut c = match state.db.conn().await {
        Ok(c) => c,
        Err(e) => return unavailable(fallback, headers, e),
    };
    let (params, client) = match request::check(&state.cache, &mut c, &state.tokens, &state.settings.issuer, &pairs)
        .await
    {
        Ok(ok) => ok,
        Err(Rejection::Page(PageError::Unavailable(e))) => return unavailable(fallback, headers, e),
        Err(Rejection::Page(e)) => {
            return pages::error_page(fallback, StatusCode::BAD_REQUEST, &e.message(fallback), &request_id(headers));
        }
        Err(Rejection::Redirect { redirect_uri, mode, state: st, error }) => {
            return response::error(fallback, &state.settings.issuer, &redirect_uri, mode, st.as_deref(), &error);
        }
    };
    let t = i18n::choose(&params.ui_locales, headers);
    let secure = state.settings.secure_cookies;
    let browser = cookie::get_or_create(headers, secure);
    match decide(state, &mut c, t, &params, &client, &browser).await {
        Ok(mut r) => {
            browser.set_on(r.headers_mut(), secure);
            r
        }
        Err(e) => unavailable(t, headers, e),
    }
}

/// The browser's live sessions with their (active) users; a session authenticated before its
/// user's cut-off (`User::tokens_valid_from`) no longer counts.
pub async fn browser_sessions(c: &mut Conn, browser: &Browser, now: i64) -> crate::store::Result<Vec<(Session, User)>> {
    if browser.is_new {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for s in session::of_browser(c, &browser.key, now).await? {
        if let Some(u) = user::get(c, &s.user_id).await?
            && u.is_active()
            && s.auth_time >= u.tokens_valid_from
        {
            out.push((s, u));
        }
    }
    Ok(out)
}

/// Whether a session may answer a request without a new authentication: authenticated within
/// `max_age`, and with a second factor when the login policy asks for one (`mfa`; a session
/// from before the policy asked has none, and its user signs in again).
pub fn serves(s: &Session, max_age: Option<i64>, mfa: bool, now: i64) -> bool {
    max_age.is_none_or(|m| s.auth_time.saturating_add(m) >= now) && (!mfa || s.amr.iter().any(|a| a == "otp"))
}

/// `by_email`: whether an address names its human (the login policy's `disableLoginWithEmail`
/// off).
fn matches_hint(u: &User, hint: &str, by_email: bool) -> bool {
    u.login_name().eq_ignore_ascii_case(hint)
        || u.username.eq_ignore_ascii_case(hint)
        || (by_email && u.human().is_some_and(|h| h.email.eq_ignore_ascii_case(hint)))
}

async fn decide(
    state: &AppState,
    c: &mut Conn,
    t: &'static Texts,
    params: &AuthParams,
    client: &OidcClient,
    browser: &Browser,
) -> crate::store::Result<Response> {
    let now = state.clock.now();
    let sessions = browser_sessions(c, browser, now).await?;
    // Whether an address names its human: the instance's policy (a hint comes before any user
    // is known); whether a session needs a second factor: its user's organization's policy.
    let by_email = sessions.is_empty() || !state.cache.login_policy(c).await?.disable_login_with_email;
    let hinted = params.hint_sub.is_some() || params.login_hint.is_some();
    let pick = if let Some(sub) = &params.hint_sub {
        sessions.iter().find(|(_, u)| &u.user_id == sub)
    } else if let Some(h) = &params.login_hint {
        sessions.iter().find(|(_, u)| matches_hint(u, h, by_email))
    } else if sessions.len() == 1 {
        sessions.first()
    } else {
        None
    };
    let mfa = match pick {
        Some((_, u)) => state.cache.login_policy_of(c, &u.org_id).await?.requires_mfa(),
        None => false,
    };
    let fresh = |s: &Session| serves(s, params.max_age, mfa, now);
    let redirect_error = |code: ErrorCode, d: &str| {
        Ok(response::error(
            t,
            &state.settings.issuer,
            &params.redirect_uri,
            params.response_mode,
            params.state.as_deref(),
            &OAuthError::new(code, d),
        ))
    };
    if params.has_prompt(Prompt::None) {
        return match pick {
            Some((s, u)) if fresh(s) => complete(state, c, t, params, client, u.clone(), s).await,
            Some(_) => redirect_error(
                ErrorCode::LoginRequired,
                "the session is older than max_age, or lacks the second factor the login policy asks for",
            ),
            None if sessions.is_empty() || hinted => {
                redirect_error(ErrorCode::LoginRequired, "no session for this request")
            }
            None => {
                redirect_error(ErrorCode::InteractionRequired, "several accounts are signed in; one must be chosen")
            }
        };
    }
    // The user a hint names: the person signs in as them without typing the login name.
    let hinted_user = match (&params.hint_sub, pick) {
        (Some(sub), _) => user::get(c, sub).await?.filter(|u| u.is_active()),
        (None, Some((_, u))) if params.login_hint.is_some() => Some(u.clone()),
        _ => None,
    };
    let (start, preset) = if params.has_prompt(Prompt::Create) {
        (Start::Create, None)
    } else if params.has_prompt(Prompt::Login) {
        (Start::Login, hinted_user)
    } else if params.has_prompt(Prompt::SelectAccount) {
        (if sessions.is_empty() { Start::Login } else { Start::Select }, None)
    } else {
        match pick {
            // A user of another organization than the request's organization scopes ask for:
            // the person signs in as someone of that one (with prompt=none the client is told
            // access_denied, as at the end of a sign-in).
            Some((_, u)) if !of_the_asked_org(state, c, params, u).await? => (Start::Login, None),
            Some((s, u)) if fresh(s) => {
                return complete(state, c, t, params, client, u.clone(), s).await;
            }
            // The session is too old for max_age, or lacks the second factor the login policy
            // asks for: its user authenticates again.
            Some((_, u)) => (Start::Login, Some(u.clone())),
            None if sessions.len() > 1 => (Start::Select, None),
            None => (Start::Login, hinted_user),
        }
    };
    let id = secret::new_secret();
    let progress = Progress { start, ..Progress::default() };
    auth_request::insert(
        c,
        &AuthRequestRow {
            auth_request_id: id.clone(),
            ua_key: browser.key.clone(),
            client_id: client.app.client_id.clone(),
            params: to_json(params),
            csrf_token: secret::new_secret(),
            user_id: preset.map(|u| u.user_id),
            progress: to_json(&progress),
            created_at: now,
            expires_at: now + state.settings.request_lifetime,
        },
    )
    .await?;
    let mut r = StatusCode::SEE_OTHER.into_response_with_location(&format!("/ui/login/{id}"));
    r.headers_mut().insert(axum::http::header::CACHE_CONTROL, axum::http::HeaderValue::from_static("no-store"));
    Ok(r)
}

trait Location {
    fn into_response_with_location(self, location: &str) -> Response;
}

impl Location for StatusCode {
    fn into_response_with_location(self, location: &str) -> Response {
        let mut r = axum::response::IntoResponse::into_response(self);
        if let Ok(v) = axum::http::HeaderValue::from_str(location) {
            r.headers_mut().insert(axum::http::header::LOCATION, v);
        }
        r
    }
}

/// The token shape a client asked for.
pub fn shape(client: &OidcClient) -> Shape {
    Shape {
        jwt_access_token: client.config.access_token_type == OidcTokenType::Jwt,
        id_token_userinfo_assertion: client.config.id_token_userinfo_assertion,
        access_token_role_assertion: client.config.access_token_role_assertion,
        id_token_role_assertion: client.config.id_token_role_assertion,
        project_role_assertion: client.project.role_assertion,
    }
}

/// Why the project of `client` turns `subject` away, if it does (`None`: it does not). Its
/// `hasProjectCheck` admits only users of the organization that owns the project (latch has no
/// projects granted to other organizations), and its `projectRoleCheck` only users with an
/// active grant on it, as ZITADEL's "check for project" and "check authorization on
/// authentication" do. The client is told `access_denied`.
pub async fn refusal(c: &mut Conn, client: &OidcClient, subject: &Subject) -> crate::store::Result<Option<OAuthError>> {
    let p = &client.project;
    if p.has_project_check && subject.user.org_id != p.org_id {
        return Ok(Some(OAuthError::new(
            ErrorCode::AccessDenied,
            "the user's organization has no access to this application's project",
        )));
    }
    if p.role_check && !crate::store::project::has_active_grant(c, &subject.user.user_id, &p.project_id).await? {
        return Ok(Some(OAuthError::new(
            ErrorCode::AccessDenied,
            "the user has no authorization on this application's project",
        )));
    }
    Ok(None)
}

/// Why the request's organization scopes turn `subject` away, if they do: in a sign-in,
/// `urn:service:iam:org:id:{id}` and `urn:service:iam:org:domain:primary:{domain}` ask for a
/// user of that organization (in ZITADEL they select the organization the login is for), so a
/// user of another one, signed in or choosing a session, is not handed to the application as
/// if the organization had admitted them. The client is told `access_denied`.
pub fn org_scope_refusal(params: &AuthParams, org: &Org) -> Option<OAuthError> {
    let foreign = params.scopes.iter().any(|s| match s.strip_prefix(crate::oauth::scope::ORG_ID_PREFIX) {
        Some(id) => id != org.org_id,
        None => s
            .strip_prefix(crate::oauth::scope::ORG_DOMAIN_PREFIX)
            .is_some_and(|d| !d.eq_ignore_ascii_case(&org.primary_domain)),
    });
    foreign.then(|| OAuthError::new(ErrorCode::AccessDenied, "the user is not of the organization the request is for"))
}

/// The scopes a sign-in grants: the request's, but organization scopes of another organization
/// than the subject's and audiences the client may not ask for
/// ([`crate::oauth::audience::allowed`]).
pub async fn granted_scopes(
    state: &AppState,
    c: &mut Conn,
    params: &AuthParams,
    client: &OidcClient,
    subject: &Subject,
) -> crate::store::Result<Scopes> {
    let asker = crate::oauth::audience::Asker { org_id: &client.project.org_id, is_subject: false };
    let scopes = claims::filter_org_scopes(subject, &params.scopes());
    crate::oauth::audience::allowed(state, c, asker, subject, scopes).await
}

/// Whether `u` is of the organization the request's organization scopes ask for (any user when
/// there are none).
async fn of_the_asked_org(state: &AppState, c: &mut Conn, params: &AuthParams, u: &User) -> crate::store::Result<bool> {
    use crate::oauth::scope::{ORG_DOMAIN_PREFIX, ORG_ID_PREFIX};
    if !params.scopes.iter().any(|s| s.starts_with(ORG_ID_PREFIX) || s.starts_with(ORG_DOMAIN_PREFIX)) {
        return Ok(true);
    }
    Ok(state.cache.org(c, &u.org_id).await?.is_some_and(|org| org_scope_refusal(params, &org).is_none()))
}

/// Loads a user's organization to make a token subject.
pub async fn subject(state: &AppState, c: &mut impl Source, u: User) -> crate::store::Result<Option<Subject>> {
    Ok(state.cache.org(c, &u.org_id).await?.map(|o| Subject { user: u, org: o }))
}

/// An authorization code about to be stored: the value for the client and what its row holds.
pub struct IssuedCode {
    pub value: String,
    hash: Vec<u8>,
    grant_id: String,
    client_id: String,
    user_id: String,
    session_id: String,
    /// [`CodeData`] as JSON.
    data: String,
    /// What the exchange stores as the first refresh token, in the statement that marks the
    /// code used (when the code grants offline_access).
    refresh_data: Option<String>,
    created_at: i64,
    expires_at: i64,
}

impl IssuedCode {
    /// A new code for `user_id`, signed in with session `s`, granting `scopes`.
    pub fn new(
        state: &AppState,
        params: &AuthParams,
        client: &OidcClient,
        user_id: &str,
        scopes: &Scopes,
        s: &Session,
    ) -> Self {
        let now = state.clock.now();
        let data = CodeData {
            redirect_uri: params.redirect_uri.clone(),
            scopes: scopes.0.clone(),
            nonce: params.nonce.clone(),
            code_challenge: params.code_challenge.clone(),
            user_id: user_id.to_string(),
            session_id: s.session_id.clone(),
            auth_time: s.auth_time,
            amr: s.amr.clone(),
        };
        let refresh_data = scopes.has("offline_access").then(|| {
            to_json(&RefreshData {
                scopes: scopes.0.clone(),
                auth_time: Some(s.auth_time),
                amr: s.amr.clone(),
                act: None,
                granted_at: Some(now),
                audience: None,
                jwt_access_token: None,
            })
        });
        let value = secret::new_secret();
        IssuedCode {
            hash: secret::digest(&value),
            value,
            grant_id: secret::random_id(),
            client_id: client.app.client_id.clone(),
            user_id: user_id.to_string(),
            session_id: s.session_id.clone(),
            data: to_json(&data),
            refresh_data,
            created_at: now,
            expires_at: now + state.settings.code_lifetime,
        }
    }

    pub fn row(&self) -> code::NewCode<'_> {
        code::NewCode {
            code_hash: &self.hash,
            grant_id: &self.grant_id,
            client_id: &self.client_id,
            data: &self.data,
            refresh: self.refresh_data.as_deref().map(|data| code::RefreshSeed {
                user_id: &self.user_id,
                session_id: &self.session_id,
                data,
            }),
            created_at: self.created_at,
            expires_at: self.expires_at,
        }
    }
}

/// The redirect that hands a stored code to the client.
pub fn code_response(state: &AppState, t: &'static Texts, params: &AuthParams, code: String) -> Response {
    let mut fields = vec![("code", code)];
    if let Some(st) = &params.state {
        fields.push(("state", st.clone()));
    }
    response::respond(t, &state.settings.issuer, &params.redirect_uri, params.response_mode, fields)
}

/// Answers the client for an authenticated session: a code, or the implicit tokens.
pub async fn complete(
    state: &AppState,
    c: &mut Conn,
    t: &'static Texts,
    params: &AuthParams,
    client: &OidcClient,
    u: User,
    s: &Session,
) -> crate::store::Result<Response> {
    let now = state.clock.now();
    let Some(subject) = subject(state, c, u).await? else {
        return Ok(pages::error_page(t, StatusCode::BAD_REQUEST, t.err_no_org, ""));
    };
    let refused = match org_scope_refusal(params, &subject.org) {
        Some(e) => Some(e),
        None => refusal(c, client, &subject).await?,
    };
    if let Some(e) = refused {
        let st = params.state.as_deref();
        return Ok(response::error(t, &state.settings.issuer, &params.redirect_uri, params.response_mode, st, &e));
    }
    // A session created or renewed this second was stored with this time already.
    if s.last_used_at < now {
        session::touch(c, &s.session_id, now).await?;
    }
    crate::oidc::backchannel::note(c, client, s).await?;
    let scopes = granted_scopes(state, c, params, client, &subject).await?;
    let mut fields: Vec<(&'static str, String)> = Vec::new();
    match params.response_type {
        ResponseType::Code => {
            let code = IssuedCode::new(state, params, client, &subject.user.user_id, &scopes, s);
            code::insert(c, &code.row()).await?;
            return Ok(code_response(state, t, params, code.value));
        }
        ResponseType::IdToken | ResponseType::IdTokenToken => {
            let checked_at = issue::checked_at(&subject.user, Some(s.auth_time));
            let grant = Grant {
                client_id: client.app.client_id.clone(),
                project_id: client.project.project_id.clone(),
                audience: issue::audience(&client.app.client_id, &client.project.project_id, &scopes),
                subject,
                scopes: scopes.clone(),
                auth_time: Some(s.auth_time),
                amr: s.amr.clone(),
                session_id: Some(s.session_id.clone()),
                grant_id: None,
                nonce: params.nonce.clone(),
                act: None,
                checked_at,
            };
            let shape = shape(client);
            let life = match issue::lifetimes(state, c).await {
                Ok(l) => l,
                Err(e) => {
                    return Ok(response::error(
                        t,
                        &state.settings.issuer,
                        &params.redirect_uri,
                        params.response_mode,
                        params.state.as_deref(),
                        &e,
                    ));
                }
            };
            let result = async {
                let at = if params.response_type == ResponseType::IdTokenToken {
                    Some(issue::access_token(state, c, &grant, shape, life.access_token_lifetime).await?.0)
                } else {
                    None
                };
                let id = issue::id_token(state, c, &grant, shape, life.id_token_lifetime, at.as_deref(), None).await?;
                Ok::<_, OAuthError>((at, id))
            }
            .await;
            let (at, id) = match result {
                Ok(v) => v,
                Err(e) => {
                    return Ok(response::error(
                        t,
                        &state.settings.issuer,
                        &params.redirect_uri,
                        params.response_mode,
                        params.state.as_deref(),
                        &e,
                    ));
                }
            };
            // token_type comes with every implicit response (SPEC.md 2.3, as ZITADEL sends it),
            // expires_in with an access token.
            fields.push(("token_type", "Bearer".into()));
            if let Some(at) = at {
                fields.push(("access_token", at));
                fields.push(("expires_in", life.access_token_lifetime.to_string()));
            }
            fields.push(("id_token", id));
            fields.push(("scope", scopes.join()));
        }
    }
    if let Some(st) = &params.state {
        fields.push(("state", st.clone()));
    }
    Ok(response::respond(t, &state.settings.issuer, &params.redirect_uri, params.response_mode, fields))
}
