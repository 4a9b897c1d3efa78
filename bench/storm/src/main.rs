//! The password login storm of bench/run: `concurrency` browsers, each signing in from scratch
//! (no cookie) again and again through latch's login pages, as a person would: authorize, login
//! page, login name, password (one argon2id verification on the server), then the exchange of
//! the code at the token endpoint. Prints one JSON line: logins, errors, seconds, per_s, p50_ms,
//! p99_ms, client_cpu_pct (this process's CPU over the run, 100 = one core).
//!
//! It runs on one thread: the scenario measures the server against the argon2 ceiling of the
//! machine it shares with this client, so the client should take as little CPU as it can (the
//! Python client it replaces took about a fifth of both cores).
//!
//!   storm --state STATE.json --concurrency N --seconds S
//!
//! STATE.json is the file `latchbench.py seed` writes.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use reqwest::StatusCode;
use reqwest::header::{AUTHORIZATION, COOKIE, HeaderMap, LOCATION, SET_COOKIE};
use sha2::Digest;

struct Setup {
    base: String,
    authorize: String,
    basic: String,
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
        Ok(Setup {
            base: s("/base")?,
            authorize,
            // RFC 6749 2.3.1: both parts form-urlencoded before they are joined.
            basic: format!("Basic {}", STANDARD.encode(format!("{}:{}", component(&client_id), component(&secret)))),
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

/// One login from a fresh browser; the token response must carry an access token.
async fn login(http: &reqwest::Client, s: &Setup, user: &str) -> Result<(), String> {
    let e = |what: &'static str| move |err: reqwest::Error| format!("{what}: {err}");
    let mut jar = Jar::default();
    let r = http.get(format!("{}{}", s.base, s.authorize)).send().await.map_err(e("authorize"))?;
    let loc = location(r.headers())?;
    if r.status() != StatusCode::SEE_OTHER || !loc.starts_with("/ui/login/") {
        return Err(format!("authorize: {} to {loc}", r.status()));
    }
    jar.take(r.headers());
    let rid = loc.split('/').nth(3).ok_or("no request id")?.split('?').next().unwrap_or_default().to_string();

    let r = http.get(format!("{}{loc}", s.base)).header(COOKIE, jar.header()).send().await.map_err(e("page"))?;
    if r.status() != StatusCode::OK {
        return Err(format!("login page: {}", r.status()));
    }
    jar.take(r.headers());
    let page = r.text().await.map_err(e("page"))?;
    let csrf = field(&page, "csrf").ok_or("no csrf on the login page")?;

    let r = http
        .post(format!("{}/ui/login/{rid}/loginname", s.base))
        .header(COOKIE, jar.header())
        .form(&[("csrf", csrf.as_str()), ("loginname", user)])
        .send()
        .await
        .map_err(e("loginname"))?;
    let status = r.status();
    jar.take(r.headers());
    let page = r.text().await.map_err(e("loginname"))?;
    if status != StatusCode::OK || !page.contains("name=\"password\"") {
        return Err(format!("password page: {status}"));
    }
    let csrf = field(&page, "csrf").ok_or("no csrf on the password page")?;

    let r = http
        .post(format!("{}/ui/login/{rid}/password", s.base))
        .header(COOKIE, jar.header())
        .form(&[("csrf", csrf.as_str()), ("password", s.password.as_str())])
        .send()
        .await
        .map_err(e("password"))?;
    if r.status() != StatusCode::SEE_OTHER {
        let status = r.status();
        let body = r.text().await.unwrap_or_default();
        return Err(format!("password: {status} {}", &body[..body.len().min(300)]));
    }
    let to = location(r.headers())?;
    let code = query_param(&to, "code").ok_or_else(|| format!("no code in {to}"))?;

    let r = http
        .post(format!("{}/oauth/v2/token", s.base))
        .header(AUTHORIZATION, &s.basic)
        .form(&[
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("redirect_uri", s.redirect_uri.as_str()),
            ("code_verifier", s.verifier.as_str()),
        ])
        .send()
        .await
        .map_err(e("exchange"))?;
    let status = r.status();
    let body = r.text().await.map_err(e("exchange"))?;
    if status != StatusCode::OK || !body.contains("\"access_token\"") {
        return Err(format!("exchange: {status} {body}"));
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
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(concurrency)
        .timeout(Duration::from_secs(120))
        .build()
        .expect("client");
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
                        let (http, setup, tally) = (http.clone(), setup.clone(), tally.clone());
                        tokio::task::spawn_local(async move {
                            let mut n = 0usize;
                            while Instant::now() < end {
                                let user = &setup.users[(i + n * concurrency) % setup.users.len()];
                                let start = Instant::now();
                                let result = login(&http, &setup, user).await;
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
