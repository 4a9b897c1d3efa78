//! A scripted browser for the login pages: a cookie jar, no automatic redirects, and helpers
//! to read forms out of the HTML latch serves.

use serde_json::{Value, json};

use crate::harness::TestServer;

pub struct Browser {
    client: reqwest::Client,
    pub base: String,
    pub accept_language: Option<String>,
}

#[derive(Debug)]
pub struct Page {
    pub status: u16,
    pub location: Option<String>,
    pub headers: reqwest::header::HeaderMap,
    pub html: String,
}

impl Page {
    /// The value of the hidden CSRF field.
    pub fn csrf(&self) -> String {
        field(&self.html, "csrf").unwrap_or_else(|| panic!("no csrf field in: {}", self.html))
    }

    #[track_caller]
    pub fn location(&self) -> &str {
        self.location.as_deref().unwrap_or_else(|| panic!("no redirect ({}): {}", self.status, self.html))
    }

    /// The query parameters of the redirect target.
    pub fn redirect_params(&self) -> Vec<(String, String)> {
        let u = url::Url::parse(self.location()).unwrap();
        u.query_pairs().into_owned().collect()
    }

    pub fn fragment_params(&self) -> Vec<(String, String)> {
        let u = url::Url::parse(self.location()).unwrap();
        form_urlencoded::parse(u.fragment().unwrap_or("").as_bytes()).into_owned().collect()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

pub fn param<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// The `value` of the input named `name`.
pub fn field(html: &str, name: &str) -> Option<String> {
    let needle = format!("name=\"{name}\" value=\"");
    let start = html.find(&needle)? + needle.len();
    let end = html[start..].find('"')? + start;
    Some(html[start..end].replace("&amp;", "&").replace("&#x2f;", "/").replace("&#x2F;", "/"))
}

impl Browser {
    pub fn new(srv: &TestServer) -> Self {
        Self::at(&srv.base)
    }

    /// A browser for a server at `base` (a process started by a test).
    pub fn at(base: &str) -> Self {
        let client =
            reqwest::Client::builder().cookie_store(true).redirect(reqwest::redirect::Policy::none()).build().unwrap();
        Browser { client, base: base.to_string(), accept_language: None }
    }

    /// A browser that already holds `cookie` (`name=value`) for latch's host, as if something
    /// else had put it there.
    pub fn with_cookie(srv: &TestServer, cookie: &str) -> Self {
        let jar = std::sync::Arc::new(reqwest::cookie::Jar::default());
        jar.add_cookie_str(&format!("{cookie}; Path=/"), &srv.base.parse().unwrap());
        let client = reqwest::Client::builder()
            .cookie_provider(jar)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        Browser { client, base: srv.base.clone(), accept_language: None }
    }

    fn url(&self, path_or_url: &str) -> String {
        if path_or_url.starts_with("http") { path_or_url.to_string() } else { format!("{}{}", self.base, path_or_url) }
    }

    async fn page(r: reqwest::Response) -> Page {
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        let location = headers.get("location").and_then(|v| v.to_str().ok()).map(str::to_string);
        Page { status, location, headers, html: r.text().await.unwrap_or_default() }
    }

    pub async fn get(&self, path: &str) -> Page {
        let mut req = self.client.get(self.url(path));
        if let Some(l) = &self.accept_language {
            req = req.header("accept-language", l);
        }
        Self::page(req.send().await.unwrap()).await
    }

    pub async fn post(&self, path: &str, fields: &[(&str, &str)]) -> Page {
        let body = form_urlencoded::Serializer::new(String::new()).extend_pairs(fields).finish();
        let mut req =
            self.client.post(self.url(path)).header("content-type", "application/x-www-form-urlencoded").body(body);
        if let Some(l) = &self.accept_language {
            req = req.header("accept-language", l);
        }
        Self::page(req.send().await.unwrap()).await
    }

    /// Signs out at `url` (an end_session URL), answering latch's question when it asks one (a
    /// logout without an id_token_hint while the browser has sessions) by posting its form.
    pub async fn sign_out(&self, url: &str) -> Page {
        let page = self.get(url).await;
        let Some(confirm) = field(&page.html, "confirm") else { return page };
        let mut fields = vec![("confirm", confirm)];
        for name in ["client_id", "post_logout_redirect_uri", "state", "ui_locales"] {
            if let Some(v) = field(&page.html, name) {
                fields.push((name, v));
            }
        }
        let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
        self.post(url.split('?').next().unwrap_or(url), &fields).await
    }

    /// Follows redirects within latch (not to the client) and returns the last page.
    pub async fn follow(&self, mut page: Page) -> Page {
        for _ in 0..10 {
            match &page.location {
                Some(l) if l.starts_with('/') || l.starts_with(&self.base) => page = self.get(l).await,
                _ => break,
            }
        }
        page
    }

    /// The id of the pending request in a login page URL.
    pub fn request_id(location: &str) -> String {
        location.trim_start_matches("/ui/login/").split('/').next().unwrap().to_string()
    }

    /// Starts an authorization request and follows it to the first login page (or the client).
    pub async fn authorize(&self, query: &[(&str, &str)]) -> (Option<String>, Page) {
        let q = form_urlencoded::Serializer::new(String::new()).extend_pairs(query).finish();
        let first = self.get(&format!("/oauth/v2/authorize?{q}")).await;
        match &first.location {
            Some(l) if l.starts_with("/ui/login/") => {
                let id = Self::request_id(l);
                let page = self.get(l).await;
                (Some(id), page)
            }
            _ => (None, first),
        }
    }

    /// Signs in on the login name and password pages of request `id`.
    pub async fn sign_in(&self, id: &str, page: &Page, login: &str, password: &str) -> Page {
        let p = self.post(&format!("/ui/login/{id}/loginname"), &[("csrf", &page.csrf()), ("loginname", login)]).await;
        assert_eq!(p.status, 200, "password page: {}", p.html);
        assert!(p.html.contains("name=\"password\""), "{}", p.html);
        self.post(&format!("/ui/login/{id}/password"), &[("csrf", &p.csrf()), ("password", password)]).await
    }
}

/// The app id of the application with `client_id` (the path of its management calls).
pub async fn app_id_of(srv: &TestServer, client_id: &str) -> String {
    let mut c = srv.state.db.conn().await.unwrap();
    latch::store::app::get_by_client_id(&mut c, client_id).await.unwrap().unwrap().app_id
}

/// An OIDC app for the code flow (and more, per `extra`), in a new project; returns the
/// client id, the secret and the project id.
pub async fn oidc_app(srv: &TestServer, extra: Value) -> (String, Option<String>, String) {
    let p = srv.post("/management/v1/projects", json!({"name": format!("p{}", latch::id::new_id())})).await;
    let project = p.ok()["id"].as_str().unwrap().to_string();
    let mut body = json!({
        "name": "web",
        "redirectUris": ["https://app.example.com/cb"],
        "postLogoutRedirectUris": ["https://app.example.com/bye"],
        "responseTypes": ["OIDC_RESPONSE_TYPE_CODE"],
        "grantTypes": ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_REFRESH_TOKEN"],
        "authMethodType": "OIDC_AUTH_METHOD_TYPE_BASIC",
    });
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            b.insert(k.clone(), v.clone());
        }
    }
    let r = srv.post(&format!("/management/v1/projects/{project}/apps/oidc"), body).await;
    let client_id = r.ok()["clientId"].as_str().unwrap().to_string();
    let secret = r.body["clientSecret"].as_str().map(str::to_string);
    (client_id, secret, project)
}

/// A human user with a password that needs no change.
pub async fn human(srv: &TestServer, username: &str, password: &str) -> String {
    let r = srv
        .post(
            "/management/v1/users/human",
            json!({"userName": username, "profile": {"firstName": username, "lastName": "Test"},
                   "email": {"email": format!("{username}@example.com"), "isEmailVerified": true}}),
        )
        .await;
    let id = r.ok()["userId"].as_str().unwrap().to_string();
    srv.post(&format!("/management/v1/users/{id}/password"), json!({"password": password, "noChangeRequired": true}))
        .await
        .ok();
    id
}

/// A PKCE verifier and its S256 challenge.
pub fn pkce() -> (String, String) {
    use base64::Engine;
    use sha2::Digest;
    let verifier = latch::crypto::secret::new_secret();
    let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier.as_bytes()));
    (verifier, challenge)
}
