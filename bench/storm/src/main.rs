//! The password login storm of bench/run: `concurrency` browsers, each signing in from scratch
//! (no cookie) again and again through latch's login pages, as a person would: authorize, login
//! page, login name, password (one argon2id verification on the server), then the exchange of
//! the code at the token endpoint. Prints one JSON line: logins, errors, seconds, per_s, p50_ms,
//! p99_ms, client_cpu_pct (this process's CPU over the run, 100 = one core).
//!
//! The scenario measures the server against the argon2 ceiling of the machine it shares with
//! this client, so the client takes as little CPU as it can: one thread, and per browser one
//! keep-alive HTTP/1.1 connection driven through hyper's connection-level client (no pool, no
//! URL parsing, no redirect or timeout machinery per request). The Python client it first
//! replaced took about a fifth of both cores, the reqwest client after it 5-6% of one core.
//!
//!   storm --state STATE.json --concurrency N --seconds S
//!
//! STATE.json is the file `latchbench.py seed` writes.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, COOKIE, HOST, HeaderMap, HeaderValue, LOCATION, SET_COOKIE};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use sha2::Digest;
use tokio::net::TcpStream;

struct Setup {
    /// host:port of latch, to connect to and to send as Host.
    host: String,
    authorize: String,
    basic: HeaderValue,
    users: Vec<String>,
    password: String,
    redirect_uri: String,
    verifier: String,
}

fn urlencode(pairs: &[(&str, &str)]) -> String {
    let mut s = form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        s.append_pair(k, v);
    }
    s.finish()
}

fn component(v: &str) -> String {
    form_urlencoded::byte_serialize(v.as_bytes()).collect::<String>().replace('+', "%20")
}

impl Setup {
    fn from_state(path: &str) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
        let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("{path}: {e}"))?;
        let s = |p: &str| v.pointer(p).and_then(|x| x.as_str()).map(str::to_string).ok_or(format!("{path}: no {p}"));
        let (client_id, secret) = (s("/apps/web/id")?, s("/apps/web/secret")?);
        let redirect_uri = s("/redirect_uri")?;
        let verifier = s("/verifier")?;
        let challenge = URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier.as_bytes()));
        let authorize = format!(
            "/oauth/v2/authorize?{}",
            urlencode(&[
                ("client_id", &client_id),
                ("redirect_uri", &redirect_uri),
                ("response_type", "code"),
                ("scope", "openid"),
                ("state", "s"),
                ("nonce", "n"),
                ("code_challenge", &challenge),
                ("code_challenge_method", "S256"),
            ])
        );
        let users = v
            .pointer("/users")
            .and_then(|u| u.as_array())
            .map(|u| u.iter().filter_map(|x| x.as_str().map(str::to_string)).collect::<Vec<_>>())
            .filter(|u| !u.is_empty())
            .ok_or(format!("{path}: no users"))?;
        let base = s("/base")?;
        let host = base
            .strip_prefix("http://")
            .map(|h| h.trim_end_matches('/').to_string())
            .filter(|h| !h.contains('/'))
            .ok_or(format!("{path}: base {base} is not http://host:port"))?;
        // RFC 6749 2.3.1: both parts form-urlencoded before they are joined.
        let basic = format!("Basic {}", STANDARD.encode(format!("{}:{}", component(&client_id), component(&secret))));
        Ok(Setup {
            host,
            authorize,
            basic: HeaderValue::from_str(&basic).map_err(|e| format!("{path}: {e}"))?,
            users,
            password: s("/password")?,
            redirect_uri,
            verifier,
        })
    }
}

/// The cookies of one browser, as `name=value` pairs.
#[derive(Default)]
struct Jar(Vec<(String, String)>);

impl Jar {
    fn take(&mut self, headers: &HeaderMap) {
        for v in headers.get_all(SET_COOKIE).iter().filter_map(|v| v.to_str().ok()) {
            let pair = v.split(';').next().unwrap_or_default();
            if let Some((name, value)) = pair.split_once('=') {
                self.0.retain(|(n, _)| n != name.trim());
                self.0.push((name.trim().to_string(), value.trim().to_string()));
            }
        }
    }

    fn header(&self) -> String {
        self.0.iter().map(|(n, v)| format!("{n}={v}")).collect::<Vec<_>>().join("; ")
    }
}

/// The value of the hidden input `name` in a page.
fn field(page: &str, name: &str) -> Option<String> {
    let marker = format!("name=\"{name}\" value=\"");
    let start = page.find(&marker)? + marker.len();
    let end = start + page[start..].find('"')?;
    Some(page[start..end].replace("&amp;", "&").replace("&#x2B;", "+").replace("&#43;", "+"))
}

fn location(headers: &HeaderMap) -> Result<String, String> {
    headers.get(LOCATION).and_then(|v| v.to_str().ok()).map(str::to_string).ok_or("no Location".to_string())
}

fn query_param(url: &str, name: &str) -> Option<String> {
    let q = url.split_once('?')?.1;
    form_urlencoded::parse(q.as_bytes()).find(|(k, _)| k == name).map(|(_, v)| v.into_owned())
}

struct Response {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl Response {
    fn text(&self) -> Result<&str, String> {
        std::str::from_utf8(&self.body).map_err(|e| format!("body: {e}"))
    }
}

/// One browser's keep-alive connection to latch, opened again when the server closed it.
struct Conn {
    host: Rc<str>,
    sender: Option<http1::SendRequest<Full<Bytes>>>,
}

impl Conn {
    fn new(host: &str) -> Self {
        Conn { host: host.into(), sender: None }
    }

    async fn connect(&mut self) -> Result<&mut http1::SendRequest<Full<Bytes>>, String> {
        let stream = TcpStream::connect(&*self.host).await.map_err(|e| format!("connect: {e}"))?;
        stream.set_nodelay(true).map_err(|e| format!("connect: {e}"))?;
        let (sender, conn) = http1::handshake(TokioIo::new(stream)).await.map_err(|e| format!("connect: {e}"))?;
        tokio::task::spawn_local(async move {
            let _ = conn.await;
        });
        Ok(self.sender.insert(sender))
    }

    /// Sends one request: `form` as an urlencoded body for a POST, else a GET.
    async fn send(
        &mut self,
        what: &str,
        path: &str,
        cookie: Option<String>,
        auth: Option<&HeaderValue>,
        form: Option<String>,
    ) -> Result<Response, String> {
        let e = |err: hyper::Error| format!("{what}: {err}");
        let mut req = Request::builder()
            .method(if form.is_some() { Method::POST } else { Method::GET })
            .uri(path)
            .header(HOST, &*self.host);
        if let Some(c) = cookie {
            req = req.header(COOKIE, c);
        }
        if let Some(a) = auth {
            req = req.header(AUTHORIZATION, a);
        }
        if form.is_some() {
            req = req.header(CONTENT_TYPE, "application/x-www-form-urlencoded");
        }
        let req = req.body(Full::new(Bytes::from(form.unwrap_or_default()))).map_err(|err| format!("{what}: {err}"))?;
        let sender = match self.sender.as_mut() {
            Some(s) if !s.is_closed() => s,
            _ => self.connect().await?,
        };
        sender.ready().await.map_err(e)?;
        let res = sender.send_request(req).await.map_err(e)?;
        let (parts, body) = res.into_parts();
        let body = body.collect().await.map_err(e)?.to_bytes();
        Ok(Response { status: parts.status, headers: parts.headers, body })
    }
}

/// One login from a fresh browser; the token response must carry an access token.
async fn login(conn: &mut Conn, s: &Setup, user: &str) -> Result<(), String> {
    let mut jar = Jar::default();
    let r = conn.send("authorize", &s.authorize, None, None, None).await?;
    let loc = location(&r.headers)?;
    if r.status != StatusCode::SEE_OTHER || !loc.starts_with("/ui/login/") {
        return Err(format!("authorize: {} to {loc}", r.status));
    }
    jar.take(&r.headers);
    let rid = loc.split('/').nth(3).ok_or("no request id")?.split('?').next().unwrap_or_default().to_string();

    let r = conn.send("page", &loc, Some(jar.header()), None, None).await?;
    if r.status != StatusCode::OK {
        return Err(format!("login page: {}", r.status));
    }
    jar.take(&r.headers);
    let csrf = field(r.text()?, "csrf").ok_or("no csrf on the login page")?;

    let form = urlencode(&[("csrf", csrf.as_str()), ("loginname", user)]);
    let r = conn.send("loginname", &format!("/ui/login/{rid}/loginname"), Some(jar.header()), None, Some(form)).await?;
    jar.take(&r.headers);
    let page = r.text()?;
    if r.status != StatusCode::OK || !page.contains("name=\"password\"") {
        return Err(format!("password page: {}", r.status));
    }
    let csrf = field(page, "csrf").ok_or("no csrf on the password page")?;

    let form = urlencode(&[("csrf", csrf.as_str()), ("password", s.password.as_str())]);
    let r = conn.send("password", &format!("/ui/login/{rid}/password"), Some(jar.header()), None, Some(form)).await?;
    if r.status != StatusCode::SEE_OTHER {
        let body = String::from_utf8_lossy(&r.body);
        return Err(format!("password: {} {}", r.status, &body[..body.len().min(300)]));
    }
    let to = location(&r.headers)?;
    let code = query_param(&to, "code").ok_or_else(|| format!("no code in {to}"))?;

    let form = urlencode(&[
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", s.redirect_uri.as_str()),
        ("code_verifier", s.verifier.as_str()),
    ]);
    let r = conn.send("exchange", "/oauth/v2/token", None, Some(&s.basic), Some(form)).await?;
    let body = String::from_utf8_lossy(&r.body);
    if r.status != StatusCode::OK || !body.contains("\"access_token\"") {
        return Err(format!("exchange: {} {body}", r.status));
    }
    Ok(())
}

/// This process's CPU time (user + system) so far.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name (which may hold spaces) start after the last ')'.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    // utime and stime are fields 14 and 15 of the whole line; here 12 and 13 (0-based, after ')').
    let hz = 100; // USER_HZ on Linux
    Duration::from_millis((ticks(11) + ticks(12)) * 1000 / hz)
}

#[derive(Default)]
struct Tally {
    done: u64,
    errors: u64,
    latencies: Vec<Duration>,
}

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

/// A login that takes longer than this counts as an error (and its connection is dropped).
const LOGIN_TIMEOUT: Duration = Duration::from_secs(120);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(state), Some(concurrency), Some(seconds)) =
        (arg(&args, "--state"), arg(&args, "--concurrency"), arg(&args, "--seconds"))
    else {
        eprintln!("usage: storm --state STATE.json --concurrency N --seconds S");
        std::process::exit(2);
    };
    let concurrency: usize = concurrency.parse().expect("--concurrency is a number");
    let seconds: f64 = seconds.parse().expect("--seconds is a number");
    let setup = match Setup::from_state(&state) {
        Ok(s) => Rc::new(s),
        Err(e) => {
            eprintln!("storm: {e}");
            std::process::exit(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let tally = Rc::new(RefCell::new(Tally::default()));
    let t0 = Instant::now();
    let cpu0 = cpu_time();
    let end = t0 + Duration::from_secs_f64(seconds);
    runtime.block_on(async {
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let browsers: Vec<_> = (0..concurrency)
                    .map(|i| {
                        let (setup, tally) = (setup.clone(), tally.clone());
                        tokio::task::spawn_local(async move {
                            let mut conn = Conn::new(&setup.host);
                            let mut n = 0usize;
                            while Instant::now() < end {
                                let user = &setup.users[(i + n * concurrency) % setup.users.len()];
                                let start = Instant::now();
                                let result =
                                    match tokio::time::timeout(LOGIN_TIMEOUT, login(&mut conn, &setup, user)).await {
                                        Ok(r) => r,
                                        Err(_) => Err("timed out".to_string()),
                                    };
                                if result.is_err() {
                                    // Whatever state the connection is in, the next login starts afresh.
                                    conn.sender = None;
                                }
                                let mut t = tally.borrow_mut();
                                match result {
                                    Ok(()) if Instant::now() <= end => {
                                        t.done += 1;
                                        t.latencies.push(start.elapsed());
                                    }
                                    Ok(()) => {}
                                    Err(e) => {
                                        t.errors += 1;
                                        if t.errors <= 3 {
                                            eprintln!("bench: login failed: {e}");
                                        }
                                    }
                                }
                                n += 1;
                            }
                        })
                    })
                    .collect();
                for b in browsers {
                    let _ = b.await;
                }
            })
            .await;
    });
    let wall = t0.elapsed();
    let elapsed = wall.min(end - t0).as_secs_f64();
    let client_cpu = (cpu_time() - cpu0).as_secs_f64() / wall.as_secs_f64();
    let mut t = tally.borrow_mut();
    t.latencies.sort();
    let pct = |p: f64| {
        if t.latencies.is_empty() {
            return 0.0;
        }
        let i = ((p * t.latencies.len() as f64) as usize).min(t.latencies.len() - 1);
        (t.latencies[i].as_secs_f64() * 10_000.0).round() / 10.0
    };
    println!(
        "{}",
        serde_json::json!({
            "logins": t.done,
            "errors": t.errors,
            "seconds": (elapsed * 100.0).round() / 100.0,
            "per_s": (t.done as f64 / elapsed * 10.0).round() / 10.0,
            "p50_ms": pct(0.50),
            "p99_ms": pct(0.99),
            "client_cpu_pct": (100.0 * client_cpu).round(),
        })
    );
}
