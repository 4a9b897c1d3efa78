//! Runs the real `latch` binary as a child process.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

pub struct LatchProcess {
    pub child: Child,
    pub base: String,
    pub port: u16,
    /// What the process wrote to stderr and to stdout so far: read as it comes, so that a
    /// process that logs a lot never blocks on a full pipe.
    output: [Output; 2],
}

struct Output {
    text: Arc<Mutex<Vec<u8>>>,
    reader: Option<JoinHandle<()>>,
}

impl Output {
    fn drain(stream: Option<impl Read + Send + 'static>) -> Self {
        let text = Arc::new(Mutex::new(Vec::new()));
        let reader = stream.map(|mut s| {
            let text = text.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                while let Ok(n @ 1..) = s.read(&mut buf) {
                    text.lock().unwrap().extend_from_slice(&buf[..n]);
                }
            })
        });
        Output { text, reader }
    }

    fn now(&self) -> String {
        String::from_utf8_lossy(&self.text.lock().unwrap()).into_owned()
    }

    /// Everything, once the process has exited.
    fn all(&mut self) -> String {
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        self.now()
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The environment of a test process: fast hashing, quiet logs, the given store and key.
pub fn base_env(port: u16, database_url: &str, masterkey: &str) -> Vec<(String, String)> {
    vec![
        ("LATCH_LISTEN".into(), format!("127.0.0.1:{port}")),
        ("LATCH_EXTERNAL_URL".into(), format!("http://127.0.0.1:{port}")),
        ("LATCH_DATABASE_URL".into(), database_url.into()),
        ("LATCH_MASTERKEY".into(), masterkey.into()),
        ("LATCH_PASSWORD_ARGON2_MEMORY_KIB".into(), "1024".into()),
        ("LATCH_PASSWORD_ARGON2_ITERATIONS".into(), "1".into()),
        ("LATCH_LOG_LEVEL".into(), "warn".into()),
    ]
}

pub fn command(dir: &Path, env: &[(String, String)], args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_latch"));
    cmd.current_dir(dir).args(args);
    for (k, _) in std::env::vars() {
        if k.starts_with("LATCH_") {
            cmd.env_remove(k);
        }
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

impl LatchProcess {
    pub fn spawn(dir: &Path, env: &[(String, String)], port: u16) -> Self {
        latch::crypto::install_tls_provider();
        let mut child = command(dir, env, &["serve"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the latch binary starts");
        let output = [Output::drain(child.stderr.take()), Output::drain(child.stdout.take())];
        LatchProcess { child, base: format!("http://127.0.0.1:{port}"), port, output }
    }

    /// Waits until `/readyz` answers 200 (panics with the process output after 30 s).
    pub async fn wait_ready(&mut self) {
        let client = reqwest::Client::new();
        for _ in 0..300 {
            if let Ok(r) = client.get(format!("{}/readyz", self.base)).send().await
                && r.status() == 200
            {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                let out = self.stderr_now();
                panic!("latch exited with {status}: {out}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let _ = self.child.kill();
        panic!("latch did not become ready: {}", self.stderr_now());
    }

    /// What the process has written to stderr so far.
    pub fn stderr_now(&self) -> String {
        self.output[0].now()
    }

    /// Sends SIGTERM and waits for the exit.
    pub fn terminate(mut self) -> (std::process::ExitStatus, String) {
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let status = self.child.wait().expect("wait");
        let out = self.output[0].all() + &self.output[1].all();
        (status, out)
    }
}

impl Drop for LatchProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

/// A management call with a token to a running process; panics unless it succeeds.
pub async fn call(base: &str, pat: &str, method: &str, path: &str, body: Value) -> Value {
    let r = reqwest::Client::new()
        .request(method.parse().unwrap(), format!("{base}{path}"))
        .bearer_auth(pat)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = r.status();
    let v: Value = r.json().await.unwrap();
    assert!(status.is_success(), "{path}: {v}");
    v
}

/// A form post with Basic client authentication: (status, JSON body).
pub async fn post_form(url: &str, basic: (&str, &str), fields: &[(&str, &str)]) -> (u16, Value) {
    let body = form_urlencoded::Serializer::new(String::new()).extend_pairs(fields).finish();
    let r = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("authorization", format!("Basic {}", STANDARD.encode(format!("{}:{}", basic.0, basic.1))))
        .body(body)
        .send()
        .await
        .unwrap();
    let s = r.status().as_u16();
    (s, r.json().await.unwrap_or(Value::Null))
}
