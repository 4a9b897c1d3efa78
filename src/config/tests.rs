//! The configuration's layers, checks and messages.

use super::*;

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn defaults_validate() {
    let s = Config::load(None, &env(&[])).unwrap().validate().unwrap();
    assert_eq!(s.issuer, "http://localhost:8080");
    assert_eq!(s.listen.to_string(), "127.0.0.1:8080");
    assert_eq!(s.database_url, "sqlite://data/latch.db");
    assert_eq!(s.first_instance.pat_path, PathBuf::from("data/admin.pat"));
    assert!(!s.secure_cookies);
}

#[test]
fn env_overrides_nested_keys_and_reads_secret_files() {
    let dir = tempfile::tempdir().unwrap();
    let pw = dir.path().join("pw");
    std::fs::write(&pw, "S3cret-pass!\n").unwrap();
    let e = env(&[
        ("LATCH_EXTERNAL_URL", "https://id.example.com/"),
        ("LATCH_FIRSTINSTANCE_ORG_NAME", "Acme"),
        ("LATCH_FIRSTINSTANCE_ADMIN_PASSWORD_FILE", pw.to_str().unwrap()),
        ("LATCH_DATABASE_MAX_CONNECTIONS", "4"),
    ]);
    let s = Config::load(None, &e).unwrap().validate().unwrap();
    assert_eq!(s.issuer, "https://id.example.com");
    assert!(s.secure_cookies);
    assert_eq!(s.first_instance.org_name, "Acme");
    assert_eq!(s.first_instance.admin_password.as_deref(), Some("S3cret-pass!"));
    assert_eq!(s.database_max_connections, 4);
}

#[test]
fn errors_quote_no_secret() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("latch.toml");
    for (text, secret) in [
        ("[smtp]\nhost = \"mail\"\npassword = \"hunter2\\q\"\n", "hunter2"),
        ("[smtp]\npassword = 31415926\n", "31415926"),
        ("masterkey = 27182818\n", "27182818"),
    ] {
        std::fs::write(&path, text).unwrap();
        let msg = Config::load(Some(&path), &env(&[])).unwrap_err().to_string();
        assert!(!msg.contains(secret), "{msg}");
        assert!(msg.contains("TOML") || msg.contains("password") || msg.contains("masterkey"), "{msg}");
    }
    // Other errors still say what is wrong.
    std::fs::write(&path, "[smtp]\nport = \"twenty-five\"\n").unwrap();
    let msg = Config::load(Some(&path), &env(&[])).unwrap_err().to_string();
    assert!(msg.contains("smtp.port") && msg.contains("twenty-five"), "{msg}");
}

#[test]
fn an_external_url_with_a_path_is_refused() {
    for url in ["https://example.com/auth", "https://example.com/auth/", "http://localhost:8080/x"] {
        let e = env(&[("LATCH_EXTERNAL_URL", url)]);
        let msg = Config::load(None, &e).unwrap().validate().unwrap_err().to_string();
        assert!(msg.contains("LATCH_EXTERNAL_URL") && msg.contains("path"), "{msg}");
    }
    let e = env(&[("LATCH_EXTERNAL_URL", "https://id.example.com:8443")]);
    assert_eq!(Config::load(None, &e).unwrap().validate().unwrap().issuer, "https://id.example.com:8443");
}

#[test]
fn bad_values_name_the_setting() {
    let e = env(&[("LATCH_LISTEN", "nonsense")]);
    let msg = Config::load(None, &e).unwrap().validate().unwrap_err().to_string();
    assert!(msg.contains("LATCH_LISTEN"), "{msg}");
    let e = env(&[("LATCH_DATABASE_MAX_CONNECTIONS", "many")]);
    let msg = Config::load(None, &e).unwrap_err().to_string();
    assert!(msg.contains("LATCH_DATABASE_MAX_CONNECTIONS"), "{msg}");
    let e = env(&[("LATCH_MASTERKEY", "short")]);
    let msg = Config::load(None, &e).unwrap().validate().unwrap_err().to_string();
    assert!(msg.contains("LATCH_MASTERKEY"), "{msg}");
    let e = env(&[("LATCH_KEYS_PREPUBLISH", "1m")]);
    let msg = Config::load(None, &e).unwrap().validate().unwrap_err().to_string();
    assert!(msg.contains("LATCH_KEYS_PREPUBLISH"), "{msg}");
    for v in ["6m", "soon", "500ms"] {
        let e = env(&[("LATCH_REFRESH_REUSE_INTERVAL", v)]);
        let msg = Config::load(None, &e).unwrap().validate().unwrap_err().to_string();
        assert!(msg.contains("LATCH_REFRESH_REUSE_INTERVAL"), "{msg}");
    }
    let e = env(&[("LATCH_SWEEP_INTERVAL", "1.5s")]);
    let msg = Config::load(None, &e).unwrap().validate().unwrap_err().to_string();
    assert!(msg.contains("LATCH_SWEEP_INTERVAL") && msg.contains("whole number of seconds"), "{msg}");
    let e = env(&[("LATCH_REFRESH_REUSE_INTERVAL", "5m")]);
    assert_eq!(Config::load(None, &e).unwrap().validate().unwrap().refresh_reuse_interval, 300);
}

#[test]
fn toml_file_layer_and_unknown_keys() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("latch.toml");
    std::fs::write(&f, "listen = \"0.0.0.0:9000\"\n[firstinstance]\norg_name = \"FromFile\"\n").unwrap();
    let s = Config::load(Some(&f), &env(&[("LATCH_FIRSTINSTANCE_ORG_NAME", "FromEnv")])).unwrap().validate().unwrap();
    assert_eq!(s.listen.port(), 9000);
    assert_eq!(s.first_instance.org_name, "FromEnv", "env wins over the file");
    std::fs::write(&f, "lisen = \"0.0.0.0:9000\"\n").unwrap();
    let msg = Config::load(Some(&f), &env(&[])).unwrap_err().to_string();
    assert!(msg.contains("lisen"), "{msg}");
}

#[test]
fn unknown_variables_are_reported() {
    let e = env(&[
        ("LATCH_LISTN", "x"),
        ("LATCH_MASTERKEY_FILE", "/x"),
        ("LATCH_LISTEN_FILE", "/x"),
        ("LATCH_TEST_DATABASE_URL", "x"),
    ]);
    assert_eq!(unknown_env_vars(&e), vec!["LATCH_LISTEN_FILE", "LATCH_LISTN"]);
}

#[test]
fn masked_output_hides_secrets() {
    let c = Config {
        database_url: "postgres://u:hunter2@db/latch".into(),
        masterkey: Some("AnotherMasterkeyOf32Characters!!".into()),
        ..Config::default()
    };
    let out = c.masked_toml();
    assert!(!out.contains("hunter2") && !out.contains("AnotherMasterkey"), "{out}");
    // sqlx's PostgreSQL driver also takes the password as a query parameter.
    let masked = mask_url("postgres://u@db/latch?sslmode=require&Password=hunter2");
    assert!(!masked.contains("hunter2") && masked.contains("sslmode=require"), "{masked}");
    assert_eq!(mask_url("not a url with @ and hunter2"), "********");
    assert_eq!(mask_url("sqlite://data/latch.db"), "sqlite://data/latch.db");
}

#[test]
fn masterkey_forms() {
    assert!(parse_masterkey("AnotherMasterkeyOf32Characters!!").is_ok());
    // The sample parses (a store sealed with it must still start); start-up decides.
    let sample = parse_masterkey("MasterkeyNeedsToHave32Characters").unwrap();
    assert!(is_sample_masterkey(&sample));
    assert!(!is_sample_masterkey(&parse_masterkey("AnotherMasterkeyOf32Characters!!").unwrap()));
    assert!(parse_masterkey("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=").is_ok());
    assert!(parse_masterkey("too short").is_err());
}
