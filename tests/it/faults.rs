//! Faults: the database going away under load, and the server killed in the middle of an
//! import. The real binary runs against a PostgreSQL server of the test's own (initdb into a
//! temporary directory, a free port), so stopping it disturbs no other test.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::browser::{Browser, param, pkce};
use crate::process::{LatchProcess, base_env, call, free_port, post_form};

const KEY: &str = "TestOnlyMasterkeyOf32Characters!";
const CB: &str = "https://app.example.com/cb";

/// A PostgreSQL 15 server of the test's own.
struct PrivatePg {
    dir: tempfile::TempDir,
    port: u16,
    bin: PathBuf,
}

fn pg_bin() -> PathBuf {
    let base = PathBuf::from("/usr/lib/postgresql");
    let mut versions: Vec<PathBuf> = std::fs::read_dir(&base)
        .expect("PostgreSQL server binaries in /usr/lib/postgresql")
        .flatten()
        .map(|e| e.path())
        .collect();
    versions.sort();
    versions.pop().expect("a PostgreSQL version").join("bin")
}

/// Runs a PostgreSQL tool, as the `postgres` user when the test runs as root (initdb and the
/// server refuse to run as root).
fn pg_tool(bin: &std::path::Path, tool: &str, args: &[&str]) -> std::process::Output {
    let root = unsafe_is_root();
    let mut cmd = if root {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bin.join(tool));
        c
    } else {
        Command::new(bin.join(tool))
    };
    cmd.args(args).output().expect("a PostgreSQL tool runs")
}

fn unsafe_is_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0").unwrap_or(false)
}

impl PrivatePg {
    fn start() -> PrivatePg {
        let bin = pg_bin();
        let dir = tempfile::tempdir().unwrap();
        if unsafe_is_root() {
            Command::new("chown").args(["-R", "postgres:postgres"]).arg(dir.path()).status().unwrap();
        }
        let data = dir.path().join("data");
        let out =
            pg_tool(&bin, "initdb", &["-D", data.to_str().unwrap(), "-U", "postgres", "-A", "trust", "--no-sync"]);
        assert!(out.status.success(), "initdb: {}", String::from_utf8_lossy(&out.stderr));
        let pg = PrivatePg { dir, port: free_port(), bin };
        pg.up();
        let out =
            pg_tool(&pg.bin, "createdb", &["-h", "127.0.0.1", "-p", &pg.port.to_string(), "-U", "postgres", "latch"]);
        assert!(out.status.success(), "createdb: {}", String::from_utf8_lossy(&out.stderr));
        pg
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/latch", self.port)
    }

    fn up(&self) {
        let data = self.dir.path().join("data");
        let opts =
            format!("-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off", self.port, self.dir.path().display());
        let log = self.dir.path().join("pg.log");
        let out = pg_tool(
            &self.bin,
            "pg_ctl",
            &["-D", data.to_str().unwrap(), "-o", &opts, "-l", log.to_str().unwrap(), "-w", "-t", "30", "start"],
        );
        assert!(out.status.success(), "pg_ctl start: {}", String::from_utf8_lossy(&out.stderr));
    }

    fn down(&self) {
        let data = self.dir.path().join("data");
        let out = pg_tool(&self.bin, "pg_ctl", &["-D", data.to_str().unwrap(), "-m", "fast", "-w", "stop"]);
        assert!(out.status.success(), "pg_ctl stop: {}", String::from_utf8_lossy(&out.stderr));
    }
}

impl Drop for PrivatePg {
    fn drop(&mut self) {
        let data = self.dir.path().join("data");
        let _ = pg_tool(&self.bin, "pg_ctl", &["-D", data.to_str().unwrap(), "-m", "immediate", "-w", "stop"]);
    }
}

async fn start_latch(url: &str) -> (LatchProcess, tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut p = LatchProcess::spawn(dir.path(), &base_env(port, url, KEY), port);
    p.wait_ready().await;
    let pat = std::fs::read_to_string(dir.path().join("data/admin.pat")).unwrap().trim().to_string();
    (p, dir, pat)
}

/// Signs alice in through the login pages of `base` (scope `openid offline_access`) and returns
/// (code, PKCE verifier).
pub(crate) async fn code_for(base: &str, client_id: &str) -> (String, String) {
    let browser = Browser::at(base);
    let (verifier, challenge) = pkce();
    let q = form_urlencoded::Serializer::new(String::new())
        .extend_pairs([
            ("client_id", client_id),
            ("redirect_uri", CB),
            ("response_type", "code"),
            ("scope", "openid offline_access"),
            ("code_challenge", challenge.as_str()),
            ("code_challenge_method", "S256"),
        ])
        .finish();
    let first = browser.get(&format!("{base}/oauth/v2/authorize?{q}")).await;
    let login = first.location().to_string();
    let id = Browser::request_id(&login);
    let page = browser.get(&format!("{base}{login}")).await;
    let pw = browser
        .post(&format!("{base}/ui/login/{id}/loginname"), &[("csrf", &page.csrf()), ("loginname", "alice")])
        .await;
    let done = browser
        .post(&format!("{base}/ui/login/{id}/password"), &[("csrf", &pw.csrf()), ("password", "Wonder-land1")])
        .await;
    (param(&done.redirect_params(), "code").expect("a code").to_string(), verifier)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_restart_under_load_is_survived() {
    let pg = PrivatePg::start();
    let (latch, _dir, pat) = start_latch(&pg.url()).await;
    let base = latch.base.clone();

    // A web application, a user, a machine user for the load.
    let project = call(&base, &pat, "POST", "/management/v1/projects", json!({"name": "p"})).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let app = call(
        &base,
        &pat,
        "POST",
        &format!("/management/v1/projects/{project}/apps/oidc"),
        json!({"name": "web", "redirectUris": [CB],
               "grantTypes": ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_REFRESH_TOKEN"]}),
    )
    .await;
    let (client_id, secret) =
        (app["clientId"].as_str().unwrap().to_string(), app["clientSecret"].as_str().unwrap().to_string());
    let user = call(
        &base,
        &pat,
        "POST",
        "/management/v1/users/human",
        json!({"userName": "alice", "profile": {"firstName": "A", "lastName": "L"},
               "email": {"email": "a@example.com", "isEmailVerified": true}}),
    )
    .await;
    let uid = user["userId"].as_str().unwrap().to_string();
    call(
        &base,
        &pat,
        "POST",
        &format!("/management/v1/users/{uid}/password"),
        json!({"password": "Wonder-land1", "noChangeRequired": true}),
    )
    .await;
    let robot =
        call(&base, &pat, "POST", "/management/v1/users/machine", json!({"userName": "robot", "name": "robot"})).await;
    let robot_id = robot["userId"].as_str().unwrap().to_string();
    let robot_secret =
        call(&base, &pat, "PUT", &format!("/management/v1/users/{robot_id}/secret"), json!({})).await["clientSecret"]
            .as_str()
            .unwrap()
            .to_string();

    // Issued before the outage: a code not yet exchanged, and a refresh token.
    let (code, verifier) = code_for(&base, &client_id).await;
    let (code2, verifier2) = code_for(&base, &client_id).await;
    let token_url = format!("{base}/oauth/v2/token");
    let (s, t) = post_form(
        &token_url,
        (&client_id, &secret),
        &[("grant_type", "authorization_code"), ("code", &code2), ("redirect_uri", CB), ("code_verifier", &verifier2)],
    )
    .await;
    assert_eq!(s, 200, "{t}");
    let refresh = t["refresh_token"].as_str().unwrap().to_string();

    // Load: client_credentials in a loop, counting answers by status and the slowest one.
    let stop = Arc::new(AtomicBool::new(false));
    let (ok, unavailable, other, slowest_ms) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let mut load = Vec::new();
    for _ in 0..4 {
        let (stop, ok, unavailable, other, slowest_ms) =
            (stop.clone(), ok.clone(), unavailable.clone(), other.clone(), slowest_ms.clone());
        let (url, secret) = (token_url.clone(), robot_secret.clone());
        load.push(tokio::spawn(async move {
            let client = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
            while !stop.load(Ordering::Relaxed) {
                let t0 = Instant::now();
                let r = client
                    .post(&url)
                    .basic_auth("robot", Some(&secret))
                    .form(&[("grant_type", "client_credentials"), ("scope", "openid")])
                    .send()
                    .await;
                slowest_ms.fetch_max(t0.elapsed().as_millis() as u64, Ordering::Relaxed);
                match r {
                    Ok(r) if r.status() == 200 => ok.fetch_add(1, Ordering::Relaxed),
                    Ok(r) if r.status() == 503 => unavailable.fetch_add(1, Ordering::Relaxed),
                    Ok(r) => {
                        let status = r.status();
                        eprintln!(
                            "unexpected answer during the outage: {status} {}",
                            r.text().await.unwrap_or_default()
                        );
                        other.fetch_add(1, Ordering::Relaxed)
                    }
                    Err(e) => {
                        eprintln!("request failed during the outage: {e}");
                        other.fetch_add(1, Ordering::Relaxed)
                    }
                };
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(ok.load(Ordering::Relaxed) > 0, "the load runs");

    // The database goes away: latch says so (not ready, 503) instead of hanging or failing hard.
    pg.down();
    let client = reqwest::Client::builder().timeout(Duration::from_secs(20)).build().unwrap();
    let mut not_ready_after = None;
    let down_at = Instant::now();
    for _ in 0..100 {
        let r = client.get(format!("{base}/readyz")).send().await.unwrap();
        if r.status() == 503 {
            not_ready_after = Some(down_at.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let not_ready_after = not_ready_after.expect("readyz turns 503 while the database is down");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let t0 = Instant::now();
    let r = client
        .post(&token_url)
        .basic_auth("robot", Some(&robot_secret))
        .form(&[("grant_type", "client_credentials")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503, "{}", r.text().await.unwrap());
    assert!(t0.elapsed() < Duration::from_secs(5), "answered, not hung: {:?}", t0.elapsed());
    let r = client.get(format!("{base}/management/v1/orgs/me")).bearer_auth(&pat).send().await.unwrap();
    assert_eq!(r.status(), 503);

    // It comes back: ready and answering within 5 s of the database's return.
    pg.up();
    let up_at = Instant::now();
    let mut recovered = None;
    while up_at.elapsed() < Duration::from_secs(10) {
        let ready = client.get(format!("{base}/readyz")).send().await.is_ok_and(|r| r.status() == 200);
        let token = client
            .post(&token_url)
            .basic_auth("robot", Some(&robot_secret))
            .form(&[("grant_type", "client_credentials")])
            .send()
            .await
            .is_ok_and(|r| r.status() == 200);
        if ready && token {
            recovered = Some(up_at.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let recovered = recovered.expect("latch recovers after the database is back");
    assert!(recovered < Duration::from_secs(5), "recovered in {recovered:?}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    for l in load {
        l.await.unwrap();
    }
    let (ok, unavailable, other, slowest) = (
        ok.load(Ordering::Relaxed),
        unavailable.load(Ordering::Relaxed),
        other.load(Ordering::Relaxed),
        slowest_ms.load(Ordering::Relaxed),
    );
    println!(
        "database restart: not ready after {not_ready_after:?}, recovered {recovered:?} after the database returned; \
         load: {ok} ok, {unavailable} 503, {other} other, slowest {slowest} ms"
    );
    assert_eq!(other, 0, "only 200 and 503 during the outage");
    assert!(unavailable > 0, "the outage was seen");
    assert!(slowest < 10_000, "no request hung: slowest {slowest} ms");
    // Every 503 met the outage, but the log says so about once a second, not once a request.
    let logged = latch.stderr_now().matches("store unavailable").count() as u64;
    let bound = down_at.elapsed().as_secs() + 2;
    assert!((1..=bound).contains(&logged), "{logged} outage lines logged for {unavailable} 503s (at most {bound})");

    // Nothing issued before the outage was lost.
    let (s, t) = post_form(
        &token_url,
        (&client_id, &secret),
        &[("grant_type", "authorization_code"), ("code", &code), ("redirect_uri", CB), ("code_verifier", &verifier)],
    )
    .await;
    assert_eq!(s, 200, "the code from before the outage: {t}");
    let (s, t) =
        post_form(&token_url, (&client_id, &secret), &[("grant_type", "refresh_token"), ("refresh_token", &refresh)])
            .await;
    assert_eq!(s, 200, "the refresh token from before the outage: {t}");
    drop(latch);
}

/// An export document of `orgs` organizations of `users` users each.
fn document(orgs: usize, users: usize) -> Value {
    let orgs: Vec<Value> = (0..orgs)
        .map(|o| {
            let humans: Vec<Value> = (0..users)
                .map(|u| {
                    json!({"userId": format!("k{o}-{u}"), "user": {"userName": format!("k{o}-user{u}"),
                        "profile": {"firstName": "K", "lastName": "Ill"},
                        "email": {"email": format!("k{o}-{u}@example.com"), "isEmailVerified": true},
                        "hashedPassword": {"value": "$2b$10$JyDM8jzGYVTdDzZaPAQ2Lu2uZ7xFA3dgQNoHGblMmpkkeIfG2GEYa"}}})
                })
                .collect();
            json!({"orgId": format!("kill-{o}"), "org": {"name": format!("Kill {o}")}, "humanUsers": humans,
                   "projects": [{"projectId": format!("kp-{o}"), "project": {"name": "P"}}],
                   "userGrants": [{"userId": format!("k{o}-0"), "projectId": format!("kp-{o}")}]})
        })
        .collect();
    json!({"orgs": orgs})
}

async fn user_count(url: &str, org: &str) -> i64 {
    let mut c = <sqlx::PgConnection as sqlx::Connection>::connect(url).await.unwrap();
    let (n,): (i64,) =
        sqlx::query_as("SELECT COUNT(*) FROM account WHERE org_id = $1").bind(org).fetch_one(&mut c).await.unwrap();
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_during_an_import_leaves_whole_organizations() {
    let pg = PrivatePg::start();
    let (orgs, users) = (12, 3000);
    let body = json!({"data_orgsv1": document(orgs, users).to_string()}).to_string();
    let (mut latch, dir, pat) = start_latch(&pg.url()).await;
    let url = format!("{}/admin/v1/import", latch.base);
    let (pat2, body2) = (pat.clone(), body.clone());
    let import = tokio::spawn(async move {
        reqwest::Client::new()
            .post(url)
            .bearer_auth(pat2)
            .header("content-type", "application/json")
            .body(body2)
            .send()
            .await
            .map(|r| r.status().as_u16())
    });
    // Kill -9 once some organizations are in (and before all are).
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let done = user_count(&pg.url(), "kill-1").await;
        if done > 0 || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    latch.child.kill().unwrap();
    latch.child.wait().unwrap();
    assert!(import.await.unwrap().is_err(), "the import did not finish before the kill");
    let mut whole = 0;
    for o in 0..orgs {
        let n = user_count(&pg.url(), &format!("kill-{o}")).await;
        assert!(n == 0 || n == users as i64, "organization {o} has {n} of {users} users");
        whole += usize::from(n > 0);
    }
    assert!(whole > 0 && whole < orgs, "killed in the middle: {whole} of {orgs} organizations were in");

    // Started again, the same import completes what is missing and skips what is there.
    let port = free_port();
    let mut again = LatchProcess::spawn(dir.path(), &base_env(port, &pg.url(), KEY), port);
    again.wait_ready().await;
    let r = reqwest::Client::new()
        .post(format!("{}/admin/v1/import", again.base))
        .bearer_auth(&pat)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let report: Value = r.json().await.unwrap();
    assert_eq!(report["errors"], json!([]), "{}", report["errors"]);
    let created =
        report["success"]["orgs"].as_array().unwrap().iter().filter(|o| o.get("humanUserIds").is_some()).count();
    assert_eq!(created, orgs - whole, "only the missing organizations were imported");
    for o in 0..orgs {
        assert_eq!(user_count(&pg.url(), &format!("kill-{o}")).await, users as i64);
    }
    println!(
        "kill -9 during an import: {whole} of {orgs} organizations were whole, the rest absent; the re-run added {created}"
    );
}

/// A SQLite database of latch's store in `dir`, with a pool of `pool` connections and the one
/// table `ddl` creates.
/// The sum of the samples of `metric` (a full name with its suffix, such as `_count` or
/// `_bucket`) in this process's `/metrics` text whose labels contain `labels`.
fn metric(metric: &str, labels: &str) -> f64 {
    let text = latch::telemetry::prometheus().expect("the metrics recorder").render();
    text.lines()
        .filter(|l| l.split([' ', '{']).next() == Some(metric) && l.contains(labels))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn scratch_sqlite(dir: &tempfile::TempDir, file: &str, pool: u32, ddl: &str) -> latch::store::Db {
    let db = latch::store::Db::connect(&format!("sqlite://{}/{file}", dir.path().display()), pool).await.unwrap();
    sqlx::query(ddl).execute(&mut *db.conn().await.unwrap()).await.unwrap();
    db
}

/// The SQLite writers of a server wait for each other through latch's busy handler
/// (src/store/sqlite_busy.rs): a write blocked by another connection's write transaction goes on
/// once that commits, the commits are announced (the handler's WAL hook is installed on every
/// pooled connection), the write-ahead log is still checkpointed, and a write blocked for longer
/// than the limit fails as "unavailable" (a 503) instead of hanging.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_writers_wait_for_the_lock_and_give_up_in_time() {
    use latch::store::{StoreError, sqlite_busy};
    let dir = tempfile::tempdir().unwrap();
    let db = scratch_sqlite(&dir, "locks.db", 4, "CREATE TABLE t (x INTEGER NOT NULL, pad BLOB)").await;
    let commits = sqlite_busy::commits();
    // Waits and checkpoints are measured (other tests of this process may add to the figures).
    let waits = || metric("latch_sqlite_lock_wait_seconds_count", "");
    let long_waits = || waits() - metric("latch_sqlite_lock_wait_seconds_bucket", "le=\"0.25\"");
    let passive = || metric("latch_sqlite_checkpoint_seconds_count", "mode=\"passive\"");
    let (waits0, long_waits0, passive0) = (waits(), long_waits(), passive());

    // One transaction holds the write lock; a write on another connection waits for it.
    let mut holder = db.begin().await.unwrap();
    sqlx::query("INSERT INTO t (x) VALUES (1)").execute(&mut *holder).await.unwrap();
    let (db2, committed_at) = (db.clone(), Arc::new(std::sync::Mutex::new(None::<Instant>)));
    let seen = committed_at.clone();
    let waiter = tokio::spawn(async move {
        let mut c = db2.conn().await.unwrap();
        let r = sqlx::query("INSERT INTO t (x) VALUES (2)").execute(&mut *c).await;
        (r.map(|_| ()).map_err(StoreError::from), Instant::now(), *seen.lock().unwrap())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "the second writer waits while the lock is held");
    *committed_at.lock().unwrap() = Some(Instant::now());
    holder.commit().await.unwrap();
    let (result, done_at, commit) = tokio::time::timeout(Duration::from_secs(10), waiter).await.unwrap().unwrap();
    result.expect("the waiting write goes through after the commit");
    assert!(done_at >= commit.expect("finished after the commit was started"));
    assert!(sqlite_busy::commits() >= commits + 2, "both commits announced");
    assert!(waits() > waits0, "the wait for the lock is measured");
    assert!(long_waits() > long_waits0, "as one of over 0.25 s (it waited about 0.3 s)");
    let mut c = db.conn().await.unwrap();
    let rows: Vec<(i64,)> = sqlx::query_as("SELECT x FROM t ORDER BY x").fetch_all(&mut *c).await.unwrap();
    assert_eq!(rows, vec![(1,), (2,)]);

    // The log is checkpointed (from 1,000 pages on, at most every 50 ms, so between two
    // checkpoints it grows by what is committed in 50 ms) and restarted from 16 MiB on: 8,000
    // commits of 4 KiB (two pages each, about 64 MB of log without checkpoints) leave it below
    // 32 MiB. The margin over 16 MiB is what 50 ms of commits write: on a machine with a fast
    // disk that is several MiB (a bound of 20 MiB failed there with 22 MB).
    for i in 0..8000 {
        sqlx::query("INSERT INTO t (x, pad) VALUES ($1, zeroblob(4096))").bind(i).execute(&mut *c).await.unwrap();
    }
    let wal = std::fs::metadata(dir.path().join("locks.db-wal")).unwrap().len();
    assert!(wal < 32 << 20, "write-ahead log of {wal} bytes: not checkpointed");
    assert!(passive() > passive0, "checkpoints are measured");

    // While a reader keeps an old snapshot the log cannot start over, and SQLite's own hook
    // would checkpoint (and fsync) after every commit; latch does at most one per 50 ms.
    let mut reader = db.conn().await.unwrap();
    // (A plain BEGIN: `Db::begin` takes the write lock at once on SQLite.)
    sqlx::query("BEGIN").execute(&mut *reader).await.unwrap();
    sqlx::query("SELECT COUNT(*) FROM t").fetch_one(&mut *reader).await.unwrap();
    let path = std::fs::canonicalize(dir.path().join("locks.db")).unwrap();
    let path = path.to_str().unwrap();
    let (before, started) = (sqlite_busy::checkpoints(path), Instant::now());
    for i in 0..2000 {
        sqlx::query("INSERT INTO t (x, pad) VALUES ($1, zeroblob(4096))").bind(i).execute(&mut *c).await.unwrap();
    }
    let ran = sqlite_busy::checkpoints(path) - before;
    let bound = started.elapsed().as_millis() as u64 / 50 + 2;
    assert!((1..=bound).contains(&ran), "{ran} checkpoints for 2,000 commits (at most {bound})");
    sqlx::query("ROLLBACK").execute(&mut *reader).await.unwrap();
    drop((c, reader));

    // A lock held past the limit: the write fails as unavailable, in time.
    let mut holder = db.begin().await.unwrap();
    sqlx::query("INSERT INTO t (x) VALUES (3)").execute(&mut *holder).await.unwrap();
    let mut c = db.conn().await.unwrap();
    let started = Instant::now();
    let r = tokio::time::timeout(
        sqlite_busy::GIVE_UP + Duration::from_secs(10),
        sqlx::query("INSERT INTO t (x) VALUES (4)").execute(&mut *c),
    )
    .await
    .expect("the blocked write gives up instead of hanging");
    let e = StoreError::from(r.expect_err("the lock was never released"));
    assert!(matches!(e, StoreError::Unavailable(_)), "{e:?}");
    assert!(started.elapsed() >= sqlite_busy::GIVE_UP);
    holder.rollback().await.unwrap();
}

/// Writers waiting for a long transaction (an import) keep at most half the pool: the next one
/// gives up after `LONG_WAIT` (a 503) instead of holding its connection for `GIVE_UP`, so the
/// reads (login pages, /readyz, the revocation poll) still get a connection; when the
/// transaction ends, the writers let past go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_writers_waiting_for_a_long_transaction_leave_connections_for_reads() {
    use latch::store::{StoreError, sqlite_busy};
    let dir = tempfile::tempdir().unwrap();
    let db = scratch_sqlite(&dir, "long.db", 4, "CREATE TABLE t (x INTEGER NOT NULL)").await;
    let mut holder = db.begin().await.unwrap();
    sqlx::query("INSERT INTO t (x) VALUES (0)").execute(&mut *holder).await.unwrap();
    // The pool's other three connections, each a writer: two (half of four) may wait on.
    let started = Instant::now();
    let writers: Vec<_> = (1..=3i64)
        .map(|i| {
            let db = db.clone();
            tokio::spawn(async move {
                let mut c = db.conn().await.unwrap();
                let r = sqlx::query("INSERT INTO t (x) VALUES ($1)").bind(i).execute(&mut *c).await;
                (r.map(|_| ()).map_err(StoreError::from), started.elapsed())
            })
        })
        .collect();
    tokio::time::sleep(sqlite_busy::LONG_WAIT + Duration::from_millis(500)).await;
    let read = tokio::time::timeout(Duration::from_secs(1), async {
        let mut c = db.conn().await.unwrap();
        sqlx::query_as::<_, (i64,)>("SELECT COUNT(*) FROM t").fetch_one(&mut *c).await.unwrap()
    })
    .await;
    assert_eq!(read.expect("a read gets a connection while the writers wait"), (0,));
    holder.commit().await.unwrap();
    let mut turned_away = 0;
    for w in writers {
        let (r, after) = w.await.unwrap();
        match r {
            Ok(()) => {}
            Err(StoreError::Unavailable(_)) => {
                turned_away += 1;
                assert!(after < sqlite_busy::GIVE_UP, "turned away at {after:?}");
            }
            Err(e) => panic!("{e:?}"),
        }
    }
    assert_eq!(turned_away, 1, "one writer past the half of the pool gave up");
    let mut c = db.conn().await.unwrap();
    let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM t").fetch_one(&mut *c).await.unwrap();
    assert_eq!(n, 3, "the holder's row and the two writers let past");
}

/// Under writes that never pause, with readers always in the middle of a read (a refresh storm),
/// no moment comes when the write-ahead log is copied whole and nobody reads from it, so it
/// never starts over by itself: with passive checkpoints alone it grew to gigabytes during the
/// benchmark. Once it passes its bound latch makes writers wait for a checkpoint that restarts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_log_stays_bounded_under_writes_that_never_pause() {
    let dir = tempfile::tempdir().unwrap();
    let db = scratch_sqlite(&dir, "busy.db", 6, "CREATE TABLE t (x INTEGER PRIMARY KEY, pad BLOB)").await;
    let wal = dir.path().join("busy.db-wal");
    let stop = Arc::new(AtomicBool::new(false));
    let largest = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for w in 0..4i64 {
        let db = db.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..4000i64 {
                let mut c = db.conn().await.unwrap();
                sqlx::query("SELECT x FROM t WHERE x = $1")
                    .bind(w * 1_000_000 + i - 1)
                    .fetch_optional(&mut *c)
                    .await
                    .unwrap();
                sqlx::query("INSERT INTO t (x, pad) VALUES ($1, zeroblob(3000))")
                    .bind(w * 1_000_000 + i)
                    .execute(&mut *c)
                    .await
                    .unwrap();
            }
        }));
    }
    let watcher = {
        let (stop, largest, wal) = (stop.clone(), largest.clone(), wal.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let len = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
                largest.fetch_max(len, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    for t in tasks {
        t.await.unwrap();
    }
    stop.store(true, Ordering::SeqCst);
    watcher.await.unwrap();
    let largest = largest.load(Ordering::SeqCst).max(std::fs::metadata(&wal).unwrap().len());
    let mut c = db.conn().await.unwrap();
    let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM t").fetch_one(&mut *c).await.unwrap();
    assert_eq!(n, 16_000);
    let path = std::fs::canonicalize(dir.path().join("busy.db")).unwrap();
    let restarts = latch::store::sqlite_busy::restarts(path.to_str().unwrap());
    println!("16,000 commits of 3 kB from 4 connections: the log reached {} MB, {restarts} restarts", largest >> 20);
    assert!(restarts > 0, "the log was never restarted");
    // Without restarts the log of these commits reaches about 336 MB; with them about 24 MB
    // (bound 16 MiB plus what is written while a restart waits), more on a busy machine.
    assert!(largest < 64 << 20, "write-ahead log reached {largest} bytes");
}

/// A long read (an export) holds the write-ahead log: it cannot start over until the read ends,
/// however often a checkpoint tries. latch then tries less and less often (each try stops the
/// writers for a moment), finds out soon after the read ends, and gives back the disk space of
/// the log beyond its limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_log_waits_out_a_long_read_and_gives_its_space_back() {
    use latch::store::sqlite_busy;
    let dir = tempfile::tempdir().unwrap();
    let db = scratch_sqlite(&dir, "long.db", 3, "CREATE TABLE t (x INTEGER NOT NULL, pad BLOB)").await;
    let wal = dir.path().join("long.db-wal");
    let path = std::fs::canonicalize(dir.path().join("long.db")).unwrap();
    let path = path.to_str().unwrap().to_string();
    let mut c = db.conn().await.unwrap();
    let insert = "INSERT INTO t (x, pad) VALUES (1, zeroblob(4096))";

    // The reader's snapshot must include frames not yet copied (a snapshot of a fully copied log
    // reads the database file and holds nothing): it begins right after a commit that ran no
    // checkpoint.
    let mut reader = db.conn().await.unwrap();
    loop {
        let before = sqlite_busy::checkpoints(&path);
        sqlx::query(insert).execute(&mut *c).await.unwrap();
        if sqlite_busy::checkpoints(&path) == before {
            break;
        }
    }
    sqlx::query("BEGIN").execute(&mut *reader).await.unwrap();
    sqlx::query("SELECT COUNT(*) FROM t").fetch_one(&mut *reader).await.unwrap();

    // Writes go on while the read lasts: at full speed until restarts are tried (the log holds
    // 16 MiB), then for 1.5 s one every 5 ms (a chance to try every 50 ms), then at full speed
    // again until the log is past its limit.
    let held_up0 = sqlite_busy::restarts_held_up(&path);
    let counted0 = metric(sqlite_busy::HELD_UP_METRIC, "");
    let started = Instant::now();
    while sqlite_busy::restarts_held_up(&path) == held_up0 {
        sqlx::query(insert).execute(&mut *c).await.unwrap();
        assert!(started.elapsed() < Duration::from_secs(60), "no restart was tried");
    }
    let first_try = Instant::now();
    while first_try.elapsed() < Duration::from_millis(1500) {
        sqlx::query(insert).execute(&mut *c).await.unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    while std::fs::metadata(&wal).unwrap().len() <= sqlite_busy::LOG_LIMIT + (4 << 20) {
        sqlx::query(insert).execute(&mut *c).await.unwrap();
        assert!(started.elapsed() < Duration::from_secs(120), "the log did not grow past its limit");
    }
    let tries = sqlite_busy::restarts_held_up(&path) - held_up0;
    let trying_ms = first_try.elapsed().as_millis();
    assert_eq!(sqlite_busy::restarts(&path), 0, "the log started over under the reader's snapshot");
    // Each try waits for the reader; tried every 50 ms they would stop the writers about one
    // time in five. The pause doubles per try, up to a second: about log2(t / 50 ms) + t / 1 s
    // tries in t ms.
    let bound = trying_ms / 250 + 6;
    println!("{tries} restarts tried in {trying_ms} ms while the read held the log (at most {bound})");
    assert!((1..=bound as u64).contains(&tries), "{tries} restarts tried in {trying_ms} ms");
    // (Other tests of this process may add to the counter.)
    assert!(metric(sqlite_busy::HELD_UP_METRIC, "") - counted0 >= tries as f64, "held-up restarts are counted");

    // The read ends: the log starts over within the longest pause (restarted by a checkpoint, or
    // by a write that finds it all copied), and the next commit cuts the file back to the limit.
    sqlx::query("ROLLBACK").execute(&mut *reader).await.unwrap();
    drop(reader);
    let ended = Instant::now();
    let size = loop {
        sqlx::query(insert).execute(&mut *c).await.unwrap();
        let size = std::fs::metadata(&wal).unwrap().len();
        if size <= sqlite_busy::LOG_LIMIT {
            break size;
        }
        assert!(ended.elapsed() < Duration::from_secs(10), "the log neither started over nor shrank ({size} bytes)");
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    println!("after the read: the log was cut back to {size} bytes in {} ms", ended.elapsed().as_millis());
}

/// latch's connection pool (src/store/pool.rs) on `db`, a pool of at most 2 connections with a
/// table `t (x INTEGER)`: connections are reused, a transaction dropped half-way is rolled back
/// at once (on SQLite it held the write lock), and a request that finds every connection taken
/// gets "unavailable" after the acquire timeout, not a hang.
async fn pool_reuses_rolls_back_and_bounds(db: latch::store::Db) {
    use latch::store::{StoreError, pool};
    for _ in 0..10 {
        let mut c = db.conn().await.unwrap();
        sqlx::query("SELECT 1").execute(&mut *c).await.unwrap();
    }
    assert_eq!(db.pool_usage(), (1, 1), "one connection, reused");

    let mut tx = db.begin().await.unwrap();
    sqlx::query("INSERT INTO t (x) VALUES (1)").execute(&mut *tx).await.unwrap();
    drop(tx);
    let started = Instant::now();
    let mut tx = db.begin().await.unwrap();
    sqlx::query("INSERT INTO t (x) VALUES (2)").execute(&mut *tx).await.unwrap();
    tx.commit().await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(2), "the dropped transaction let go of the lock at once");
    let mut c = db.conn().await.unwrap();
    let rows: Vec<(i64,)> = sqlx::query_as("SELECT x FROM t").fetch_all(&mut *c).await.unwrap();
    assert_eq!(rows, vec![(2,)], "the dropped transaction's write is gone");

    let _second = db.conn().await.unwrap();
    let started = Instant::now();
    let third = db.conn().await;
    assert!(matches!(third, Err(StoreError::Unavailable(_))), "{:?}", third.err());
    assert!(started.elapsed() >= pool::ACQUIRE_TIMEOUT);
    drop(c);
    let started = Instant::now();
    drop(db.conn().await.unwrap());
    assert!(started.elapsed() < Duration::from_millis(500), "a connection given back is handed out at once");

    // A request that waits for a connection is counted with its wait, and a connection with how
    // long it was held. Other tests of this process add to the same histograms, so this checks
    // only that the 200 ms cases were added.
    latch::telemetry::prometheus();
    let waited = || {
        metric(&format!("{}_count", pool::WAIT_METRIC), "")
            - metric(&format!("{}_bucket", pool::WAIT_METRIC), "le=\"0.1\"")
    };
    let held = || {
        metric(&format!("{}_count", pool::HOLD_METRIC), "")
            - metric(&format!("{}_bucket", pool::HOLD_METRIC), "le=\"0.1\"")
    };
    let (before, held_before) = (waited(), held());
    let c = db.conn().await.unwrap();
    let waiter = tokio::spawn({
        let db = db.clone();
        async move { db.conn().await.map(drop) }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(c);
    waiter.await.unwrap().unwrap();
    assert!(waited() >= before + 1.0, "the 200 ms wait for a connection is recorded");
    assert!(held() >= held_before + 1.0, "the connection held for 200 ms is recorded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_pool_reuses_rolls_back_and_bounds() {
    let dir = tempfile::tempdir().unwrap();
    pool_reuses_rolls_back_and_bounds(scratch_sqlite(&dir, "pool.db", 2, "CREATE TABLE t (x INTEGER)").await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_pool_reuses_rolls_back_and_bounds() {
    let (url, name) = crate::harness::create_pg_database().await;
    let db = latch::store::Db::connect(&url, 2).await.unwrap();
    sqlx::query("CREATE TABLE t (x BIGINT)").execute(&mut *db.conn().await.unwrap()).await.unwrap();
    pool_reuses_rolls_back_and_bounds(db.clone()).await;

    // A connection the database cut off fails its next statement (503); the error makes the pool
    // check its connections before it hands them out again, so the next request gets a new one.
    use latch::store::StoreError;
    let pid = "SELECT pg_backend_pid()";
    let mut victim = db.conn().await.unwrap();
    let first: i32 = sqlx::query_scalar(pid).fetch_one(&mut *victim).await.unwrap();
    let mut admin = db.conn().await.unwrap();
    sqlx::query("SELECT pg_terminate_backend($1)").bind(first).execute(&mut *admin).await.unwrap();
    drop(admin);
    // Given back last, handed out first, and not checked (it idled for less than a second).
    drop(victim);
    let mut c = db.conn().await.unwrap();
    let cut = sqlx::query_scalar::<_, i32>(pid).fetch_one(&mut *c).await.map_err(StoreError::from);
    assert!(matches!(cut, Err(StoreError::Unavailable(_))), "{cut:?}");
    drop(c);
    for _ in 0..2 {
        let mut c = db.conn().await.unwrap();
        let now: i32 = sqlx::query_scalar(pid).fetch_one(&mut *c).await.expect("checked before it is handed out");
        assert_ne!(now, first, "the connection cut off was replaced");
    }
    drop(db);
    crate::harness::drop_pg_database(&name).await;
}
