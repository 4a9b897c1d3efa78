//! The README's curl walk-through, run as it stands against the real binary.

use serde_json::Value;

use crate::process::{LatchProcess, free_port};

fn readme_block() -> String {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let start = readme.find("<!-- walkthrough:begin -->").expect("walkthrough markers");
    let end = readme.find("<!-- walkthrough:end -->").unwrap();
    let block = &readme[start..end];
    let code_start = block.find("```bash\n").unwrap() + 8;
    let code_end = block.rfind("```").unwrap();
    block[code_start..code_end].to_string()
}

#[tokio::test]
async fn the_readme_walkthrough_works() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let env: Vec<(String, String)> = vec![
        ("LATCH_LISTEN".into(), format!("127.0.0.1:{port}")),
        ("LATCH_PASSWORD_ARGON2_MEMORY_KIB".into(), "1024".into()),
    ];
    let mut p = LatchProcess::spawn(dir.path(), &env, port);
    p.wait_ready().await;
    let script = readme_block();
    let out = std::process::Command::new("bash")
        .args(["-euo", "pipefail", "-c", &script])
        .current_dir(dir.path())
        .env("LATCH", &p.base)
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "the walk-through failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let app: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("demo-web.json")).unwrap()).unwrap();
    assert!(app["clientId"].is_string() && app["clientSecret"].is_string(), "{app}");
    let key: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("robot-key.json")).unwrap()).unwrap();
    assert_eq!(key["type"], "serviceaccount");
    assert!(key["key"].as_str().unwrap().starts_with("-----BEGIN PRIVATE KEY-----"));
    let pat = std::fs::read_to_string(dir.path().join("robot.pat")).unwrap();
    assert_eq!(pat.trim().len(), 43);
    p.terminate();
}
