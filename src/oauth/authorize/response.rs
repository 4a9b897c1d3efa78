//! Sending the authorization response back to the client: in the query, in the fragment, or
//! as a self-submitting form (`form_post`). Every response carries `iss` (RFC 9207).

use askama::Template;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use url::Url;

use super::request::ResponseMode;
use crate::login::i18n::Texts;
use crate::login::pages;
use crate::oauth::error::OAuthError;

#[derive(Template)]
#[template(path = "form_post.html")]
struct FormPost<'a> {
    t: &'a Texts,
    action: &'a str,
    fields: &'a [(String, String)],
}

/// The one script latch serves; its hash is the only script the page's CSP allows.
pub const FORM_POST_SCRIPT: &str = "document.forms[0].submit();";

fn script_hash() -> String {
    use base64::Engine;
    use sha2::{Digest, Sha256};
    base64::engine::general_purpose::STANDARD.encode(Sha256::digest(FORM_POST_SCRIPT.as_bytes()))
}

fn see_other(location: &str) -> Response {
    let mut r = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(location) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r.headers_mut().insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    r
}

/// Sends `fields` (plus `iss`) to the client.
pub fn respond(
    t: &Texts,
    issuer: &str,
    redirect_uri: &str,
    mode: ResponseMode,
    fields: Vec<(&'static str, String)>,
) -> Response {
    let mut fields: Vec<(String, String)> = fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    fields.push(("iss".into(), issuer.to_string()));
    let Ok(mut url) = Url::parse(redirect_uri) else {
        return pages::error_page(t, StatusCode::BAD_REQUEST, t.err_redirect_unknown, "");
    };
    match mode {
        ResponseMode::Query => {
            url.query_pairs_mut().extend_pairs(fields.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            see_other(url.as_str())
        }
        ResponseMode::Fragment => {
            let frag = form_urlencoded::Serializer::new(String::new())
                .extend_pairs(fields.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                .finish();
            url.set_fragment(Some(&frag));
            see_other(url.as_str())
        }
        ResponseMode::FormPost => {
            let page = FormPost { t, action: redirect_uri, fields: &fields };
            let target = crate::login::pages::form_target(&url);
            let csp = format!(
                "default-src 'none'; script-src 'sha256-{}'; form-action {target}; frame-ancestors 'none'; base-uri 'none'",
                script_hash()
            );
            match page.render() {
                Ok(html) => pages::with_headers(StatusCode::OK, html, &csp),
                Err(e) => {
                    tracing::error!(error = %e, "the form_post page could not be rendered");
                    pages::error_page(t, StatusCode::INTERNAL_SERVER_ERROR, t.err_internal, "")
                }
            }
        }
    }
}

/// RFC 6749 4.1.2.1: an error description's characters are %x20-21 / %x23-5B / %x5D-7E; any
/// other is left out.
fn rfc_description(d: &str) -> String {
    d.chars().filter(|c| matches!(*c as u32, 0x20..=0x21 | 0x23..=0x5B | 0x5D..=0x7E)).collect()
}

/// Sends an error to the client.
pub fn error(
    t: &Texts,
    issuer: &str,
    redirect_uri: &str,
    mode: ResponseMode,
    state: Option<&str>,
    e: &OAuthError,
) -> Response {
    let mut fields =
        vec![("error", e.code.as_str().to_string()), ("error_description", rfc_description(&e.description))];
    if let Some(s) = state {
        fields.push(("state", s.to_string()));
    }
    respond(t, issuer, redirect_uri, mode, fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_keep_to_the_rfcs_characters() {
        assert_eq!(rfc_description("a \"quoted\" \\ text\n\u{e9}"), "a quoted  text");
        assert_eq!(rfc_description("the value 'x' is <not> ok!"), "the value 'x' is <not> ok!");
    }
}
