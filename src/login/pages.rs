//! The login pages: one view per page, rendered by askama from `templates/`, sent with the
//! security headers every page needs.

use askama::Template;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::i18n::Texts;

#[derive(Template)]
#[template(path = "login_name.html")]
pub struct LoginName<'a> {
    pub t: &'a Texts,
    pub id: &'a str,
    pub csrf: &'a str,
    pub app_name: &'a str,
    pub error: Option<String>,
    pub info: Option<String>,
    pub login_name: &'a str,
    pub can_register: bool,
}

#[derive(Template)]
#[template(path = "password.html")]
pub struct Password<'a> {
    pub t: &'a Texts,
    pub id: &'a str,
    pub csrf: &'a str,
    pub error: Option<String>,
    pub info: Option<String>,
    pub login_name: &'a str,
    /// The login policy offers password reset: the code link says "forgot".
    pub reset: bool,
}

pub struct Account {
    pub session_id: String,
    pub login_name: String,
    pub display_name: String,
    /// The account the application's login_hint names (at most one, listed first).
    pub hinted: bool,
}

#[derive(Template)]
#[template(path = "select_account.html")]
pub struct SelectAccount<'a> {
    pub t: &'a Texts,
    pub id: &'a str,
    pub csrf: &'a str,
    pub app_name: &'a str,
    pub error: Option<String>,
    pub info: Option<String>,
    pub accounts: Vec<Account>,
}

#[derive(Template)]
#[template(path = "register.html")]
pub struct Register<'a> {
    pub t: &'a Texts,
    pub id: &'a str,
    pub csrf: &'a str,
    pub error: Option<String>,
    pub info: Option<String>,
    pub email: &'a str,
    pub first_name: &'a str,
    pub last_name: &'a str,
    pub user_name: &'a str,
}

#[derive(Template)]
#[template(path = "change_password.html")]
pub struct ChangePassword<'a> {
    pub t: &'a Texts,
    pub id: &'a str,
    pub csrf: &'a str,
    pub error: Option<String>,
    pub info: Option<String>,
}

#[derive(Template)]
#[template(path = "verify_email.html")]
pub struct VerifyEmail<'a> {
    pub t: &'a Texts,
    pub id: &'a str,
    pub csrf: &'a str,
    pub error: Option<String>,
    pub info: Option<String>,
    pub email: &'a str,
    pub can_skip: bool,
}

#[derive(Template)]
#[template(path = "init_password.html")]
pub struct InitPassword<'a> {
    pub t: &'a Texts,
    pub id: &'a str,
    pub csrf: &'a str,
    pub error: Option<String>,
    pub info: Option<String>,
    pub login_name: &'a str,
}

#[derive(Template)]
#[template(path = "totp.html")]
pub struct Totp<'a> {
    pub t: &'a Texts,
    pub id: &'a str,
    pub csrf: &'a str,
    pub error: Option<String>,
    pub info: Option<String>,
}

/// The second factor the login policy asks for (`forceMfa`), set up during the sign-in.
#[derive(Template)]
#[template(path = "totp_setup.html")]
pub struct TotpSetup<'a> {
    pub t: &'a Texts,
    pub id: &'a str,
    pub csrf: &'a str,
    pub error: Option<String>,
    pub info: Option<String>,
    pub secret: &'a str,
    pub uri: &'a str,
}

#[derive(Template)]
#[template(path = "totp_enrol.html")]
pub struct TotpEnrol<'a> {
    pub t: &'a Texts,
    pub error: Option<String>,
    pub info: Option<String>,
    pub session: &'a str,
    pub pending: &'a str,
    pub secret: &'a str,
    pub uri: &'a str,
    pub done: bool,
    /// The account has a second factor already: replacing it needs a code of the current one.
    pub has_factor: bool,
}

#[derive(Template)]
#[template(path = "signed_out.html")]
pub struct SignedOut<'a> {
    pub t: &'a Texts,
}

/// The question a logout without an `id_token_hint` asks first (RP-Initiated Logout 1.0,
/// section 2): its form posts the request's parameters back with the browser's confirmation.
#[derive(Template)]
#[template(path = "confirm_logout.html")]
pub struct ConfirmLogout<'a> {
    pub t: &'a Texts,
    pub confirm: &'a str,
    pub client_id: Option<&'a str>,
    pub post_logout_redirect_uri: Option<&'a str>,
    pub state: Option<&'a str>,
    pub ui_locales: Option<&'a str>,
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorView<'a> {
    t: &'a Texts,
    message: &'a str,
    request_id: &'a str,
}

/// The policy of every login page: no script, styles from latch only, forms to latch (and to
/// the client's redirect origin, which browsers also check for the redirect after a form).
pub fn csp(extra_form_action: Option<&str>) -> String {
    let extra = extra_form_action.map(|o| format!(" {o}")).unwrap_or_default();
    format!(
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'{extra}; frame-ancestors 'none'; base-uri 'none'"
    )
}

/// An HTML response with the security headers.
pub fn with_headers(status: StatusCode, html: String, csp: &str) -> Response {
    let mut r = (status, html).into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    if let Ok(v) = HeaderValue::from_str(csp) {
        h.insert(header::CONTENT_SECURITY_POLICY, v);
    }
    r
}

/// Renders a page (a rendering failure becomes the error page).
/// How a redirect to `u` is allowed as a form target in a CSP: its origin, or for a custom
/// scheme (a native app's `com.example.app:/cb`) the scheme.
pub fn form_target(u: &url::Url) -> String {
    let o = u.origin();
    if o.is_tuple() { o.ascii_serialization() } else { format!("{}:", u.scheme()) }
}

pub fn render<T: Template>(t: &Texts, status: StatusCode, page: &T, form_action: Option<&str>) -> Response {
    match page.render() {
        Ok(html) => with_headers(status, html, &csp(form_action)),
        Err(e) => {
            tracing::error!(error = %e, "a page could not be rendered");
            error_page(t, StatusCode::INTERNAL_SERVER_ERROR, t.err_internal, "")
        }
    }
}

/// The error page, showing the request id the user can quote.
pub fn error_page(t: &Texts, status: StatusCode, message: &str, request_id: &str) -> Response {
    let view = ErrorView { t, message, request_id };
    let html = view.render().unwrap_or_else(|_| {
        format!(
            "<!doctype html><html lang=\"{}\"><meta charset=\"utf-8\"><meta name=\"viewport\" \
                 content=\"width=device-width, initial-scale=1\"><title>{}</title><p>{}</p></html>",
            t.lang,
            status.as_u16(),
            t.err_internal
        )
    });
    with_headers(status, html, &csp(None))
}

pub const STYLESHEET: &str = include_str!("../../templates/latch.css");

pub async fn stylesheet() -> Response {
    let mut r = STYLESHEET.into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/css; charset=utf-8"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=86400"));
    r
}
