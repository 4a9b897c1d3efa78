//! The binary: configuration errors, check-config, replicas bootstrapping together, shutdown.

use crate::harness::{create_pg_database, drop_pg_database};
use crate::process::{LatchProcess, base_env, command, free_port};

const KEY: &str = "TestOnlyMasterkeyOf32Characters!";

#[test]
fn a_configuration_error_is_one_line_naming_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    let out = command(dir.path(), &[("LATCH_LISTEN".into(), "not-an-address".into())], &["serve"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("LATCH_LISTEN"), "{err}");
    let out =
        command(dir.path(), &[("LATCH_EXTERNAL_URL".into(), "ftp://x".into())], &["check-config"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("LATCH_EXTERNAL_URL"));
    let out = command(dir.path(), &[], &["--config", "missing.toml", "check-config"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.toml"));
    assert!(!dir.path().join("data").exists(), "nothing was created");
}

#[test]
fn check_config_prints_the_effective_configuration_with_secrets_masked() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("config")).unwrap();
    std::fs::write(dir.path().join("config/latch.toml"), "listen = \"127.0.0.1:9999\"\n").unwrap();
    std::fs::write(dir.path().join("pw"), "Secret-Passw0rd\n").unwrap();
    let env = vec![
        ("LATCH_DATABASE_URL".to_string(), "postgres://latch:hunter2@db/latch".to_string()),
        ("LATCH_MASTERKEY".to_string(), KEY.to_string()),
        ("LATCH_FIRSTINSTANCE_ADMIN_PASSWORD_FILE".to_string(), "pw".to_string()),
        ("LATCH_LSTEN".to_string(), "typo".to_string()),
    ];
    let out = command(dir.path(), &env, &["check-config"]).output().unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stdout.contains("listen = \"127.0.0.1:9999\""), "the file layer applies: {stdout}");
    assert!(stdout.contains("postgres://latch:********@db/latch"), "{stdout}");
    for secret in ["hunter2", KEY, "Secret-Passw0rd"] {
        assert!(!stdout.contains(secret) && !stderr.contains(secret), "{secret} leaked");
    }
    assert!(stderr.contains("LATCH_LSTEN"), "unknown variables are warned about: {stderr}");
}

#[tokio::test]
async fn two_processes_on_one_fresh_postgres_bootstrap_once() {
    let (url, name) = create_pg_database().await;
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let ports = [free_port(), free_port()];
    let mut procs: Vec<LatchProcess> =
        dirs.iter().zip(ports).map(|(d, p)| LatchProcess::spawn(d.path(), &base_env(p, &url, KEY), p)).collect();
    for p in procs.iter_mut() {
        p.wait_ready().await;
    }
    let db = latch::store::Db::connect(&url, 1).await.unwrap();
    let mut c = db.conn().await.unwrap();
    for (table, expected) in [("instance", 1), ("org", 1), ("account", 2), ("web_key", 1), ("pat", 1)] {
        let (n,): (i64,) = sqlx::query_as(&format!("SELECT COUNT(*) FROM {table}")).fetch_one(&mut *c).await.unwrap();
        assert_eq!(n, expected, "{table}");
    }
    drop(c);
    db.close().await;
    let pat_files = dirs.iter().filter(|d| d.path().join("data/admin.pat").exists()).count();
    assert_eq!(pat_files, 1, "only the winner writes the token");
    // Both serve the same key set.
    let a = reqwest::get(format!("{}/oauth/v2/keys", procs[0].base)).await.unwrap().text().await.unwrap();
    let b = reqwest::get(format!("{}/oauth/v2/keys", procs[1].base)).await.unwrap().text().await.unwrap();
    assert_eq!(a, b);
    for p in procs {
        let (status, out) = p.terminate();
        assert!(status.success(), "SIGTERM ends latch cleanly: {out}");
    }
    drop_pg_database(&name).await;
}

#[tokio::test]
async fn serves_on_the_embedded_default_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    // No database URL and no master key: the zero-setup default.
    let env: Vec<(String, String)> = vec![
        ("LATCH_LISTEN".into(), format!("127.0.0.1:{port}")),
        ("LATCH_PASSWORD_ARGON2_MEMORY_KIB".into(), "1024".into()),
    ];
    let mut p = LatchProcess::spawn(dir.path(), &env, port);
    p.wait_ready().await;
    assert!(dir.path().join("data/latch.db").exists());
    assert!(dir.path().join("data/masterkey").exists());
    assert!(dir.path().join("data/admin.pat").exists());
    let d: serde_json::Value =
        reqwest::get(format!("{}/.well-known/openid-configuration", p.base)).await.unwrap().json().await.unwrap();
    assert_eq!(d["issuer"], "http://localhost:8080", "the default external URL");
    let health = command(dir.path(), &env, &["healthcheck"]).output().unwrap();
    assert!(health.status.success(), "{}", String::from_utf8_lossy(&health.stderr));
    let (status, out) = p.terminate();
    assert!(status.success(), "{out}");
    let health = command(dir.path(), &env, &["healthcheck"]).output().unwrap();
    assert_eq!(health.status.code(), Some(1), "not ready once stopped");
    assert!(out.contains("shown only now"), "a generated password is printed once: {out}");

    // A second start prints no password and reuses everything.
    let mut p = LatchProcess::spawn(dir.path(), &env, port);
    p.wait_ready().await;
    let (status, out) = p.terminate();
    assert!(status.success());
    assert!(!out.contains("shown only now"), "{out}");
}

#[test]
fn the_example_configuration_file_is_valid() {
    let example = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config/latch.toml.example")).unwrap();
    // Uncomment every setting except the placeholders.
    let active: String = example
        .lines()
        .filter_map(|l| l.strip_prefix("# "))
        .filter(|l| (l.contains(" = ") || l.starts_with('[')) && !l.contains("\"...\"") && !l.contains("32 characters"))
        .map(|l| format!("{}\n", l.split("  #").next().unwrap().trim_end()))
        .collect();
    assert!(active.contains("[keys]") && active.contains("rotation_interval"), "{active}");
    // Its header says every key is shown: each variable latch reads is named beside its key.
    for v in latch::config::ENV_VARS.iter().filter(|v| v.name.starts_with("LATCH_")) {
        assert!(example.contains(v.name), "{} is not in config/latch.toml.example", v.name);
    }
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("latch.toml");
    std::fs::write(&f, &active).unwrap();
    let config = latch::config::Config::load(Some(&f), &Default::default()).unwrap_or_else(|e| panic!("{e}\n{active}"));
    let s = config.validate().unwrap();
    let d = latch::config::Config::default().validate().unwrap();
    // The example documents the defaults.
    assert_eq!(format!("{:?}", s.keys), format!("{:?}", d.keys));
    assert_eq!(format!("{:?}", s.argon2), format!("{:?}", d.argon2));
    assert_eq!(format!("{:?}", s.limits), format!("{:?}", d.limits));
    assert_eq!(s.listen, d.listen);
    assert_eq!(s.issuer, d.issuer);
}

#[test]
fn argon2_settings_stay_within_what_an_import_accepts() {
    // At the bounds of an imported argon2 hash the configuration is valid, and a hash with
    // those parameters passes the import's check, so another latch takes what this one exports.
    let dir = tempfile::tempdir().unwrap();
    let at = |memory: &str, iterations: &str, lanes: &str| {
        let env = vec![
            ("LATCH_PASSWORD_ARGON2_MEMORY_KIB".to_string(), memory.to_string()),
            ("LATCH_PASSWORD_ARGON2_ITERATIONS".to_string(), iterations.to_string()),
            ("LATCH_PASSWORD_ARGON2_PARALLELISM".to_string(), lanes.to_string()),
        ];
        command(dir.path(), &env, &["check-config"]).output().unwrap()
    };
    let out = at("524288", "10", "16");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let hash = "$argon2id$v=19$m=524288,t=10,p=16$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g";
    assert!(latch::crypto::hashes::check(hash).is_ok(), "{:?}", latch::crypto::hashes::check(hash));
    // One step past any of them stops start-up with one line naming the settings and bounds.
    for (memory, iterations, lanes) in
        [("524289", "10", "16"), ("4194304", "2", "1"), ("19456", "11", "1"), ("19456", "2", "17")]
    {
        let out = at(memory, iterations, lanes);
        assert!(!out.status.success(), "{memory} {iterations} {lanes}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains("LATCH_PASSWORD_ARGON2_MEMORY_KIB") && err.contains("524288 KiB"), "{err}");
    }
}

#[test]
fn migrate_applies_the_migrations_and_exits() {
    let dir = tempfile::tempdir().unwrap();
    let env = vec![("LATCH_DATABASE_URL".to_string(), "sqlite://store/latch.db".to_string())];
    let out = command(dir.path(), &env, &["migrate"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("migrations applied"));
    assert!(dir.path().join("store/latch.db").exists());
    assert!(!dir.path().join("data/admin.pat").exists(), "migrate does not bootstrap");
    let again = command(dir.path(), &env, &["migrate"]).output().unwrap();
    assert!(again.status.success());
}

#[test]
fn every_variable_in_the_readme_is_read_and_every_variable_read_is_documented() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let table = &readme[readme.find("| variable | default | meaning |").unwrap()..];
    let table = &table[..table.find("\n\n").unwrap()];
    let documented: Vec<String> = table.split('`').filter(|t| t.starts_with("LATCH_")).map(str::to_string).collect();
    let known: Vec<&str> = latch::config::ENV_VARS.iter().map(|v| v.name).collect();
    for d in &documented {
        assert!(known.contains(&d.as_str()), "{d} is in the README but latch does not read it");
    }
    for k in known.iter().filter(|k| k.starts_with("LATCH_")) {
        assert!(documented.iter().any(|d| d == k), "{k} is read but not in the README's configuration table");
    }
    // And each one really reaches the configuration.
    for v in latch::config::ENV_VARS {
        let value = if v.name.contains("PORT")
            || v.name.contains("CONNECTIONS")
            || v.name.contains("ARGON2")
            || v.name.contains("HOPS")
        {
            "7"
        } else {
            "x"
        };
        let env = std::collections::BTreeMap::from([(v.name.to_string(), value.to_string())]);
        let c = latch::config::Config::load(None, &env).unwrap();
        let json = serde_json::to_string(&c).unwrap();
        assert!(
            json.contains(&format!("\"{value}\"")) || json.contains(&format!(":{value}")),
            "{} does not reach the configuration: {json}",
            v.name
        );
    }
}
