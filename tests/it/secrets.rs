//! Secrets never leak: marker passwords, API keys and signing secrets are created, the service
//! is used at debug log level, and then every later response, every log line and the raw
//! database files are scanned for the markers (with `GENIED_TEST_DATABASE=postgres`, the
//! PostgreSQL database's files in the test cluster).

use std::process::Command;

use nix::sys::signal::Signal;
use serde_json::{Value, json};

use crate::common::process::{self, DEADLINE, Proc, free_port, wait_ready};

fn cli(data: &std::path::Path, args: &[&str]) -> String {
    let out = process::output(
        Command::new(env!("CARGO_BIN_EXE_genied"))
            .arg("--data-dir")
            .arg(data)
            .args(args)
            .envs(crate::common::own_database(data)),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Every file under `dir` except the key material in `secrets/`.
fn files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n != "secrets") {
                files(&p, out);
            }
        } else {
            out.push(p);
        }
    }
}

#[tokio::test]
async fn markers_appear_nowhere_after_creation() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let password = "Pw-MARKER-7d1c0e55-correct-horse";
    cli(
        &data,
        &[
            "admin",
            "create-user",
            "--create-data-dir",
            "--email",
            "s@example.test",
            "--password",
            password,
        ],
    );
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let log_path = dir.path().join("serve.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut child = Proc::spawn(
        Command::new(env!("CARGO_BIN_EXE_genied"))
            .args([
                "serve",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--allow-private-outbound",
                "--log-level",
                "debug",
                "--log-format",
                "json",
            ])
            .args(["--llm-api-key", "llm-MARKER-b3f1"])
            .arg("--data-dir")
            .arg(&data)
            .envs(crate::common::own_database(&data))
            .stdout(log.try_clone().unwrap())
            .stderr(log),
    );
    let client = reqwest::Client::new();
    wait_ready(&mut child, &base).await;

    let mut later = String::new(); // every response body after the one that created a secret
    let login: Value = client
        .post(format!("{base}/v1/auth/login"))
        .json(&json!({"email": "s@example.test", "password": password}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = login["data"]["access_token"].as_str().unwrap().to_string();
    let call = |body: Value| {
        let (client, base, token) = (client.clone(), base.clone(), token.clone());
        async move {
            let r = client
                .post(format!("{base}/v1"))
                .bearer_auth(token)
                .json(&body)
                .send()
                .await
                .unwrap();
            r.text().await.unwrap()
        }
    };
    let created: Value = serde_json::from_str(
        &call(json!({"resource": "api-keys", "action": "create", "data": {"name": "k"}})).await,
    )
    .unwrap();
    let api_key = created["data"]["api_key"]["key"]
        .as_str()
        .unwrap()
        .to_string();
    let hook: Value =
        serde_json::from_str(&call(json!({"resource": "webhooks", "action": "create", "data": {"url": "http://127.0.0.1:9/x"}})).await).unwrap();
    let hook_secret = hook["data"]["webhook"]["secret"]
        .as_str()
        .unwrap()
        .to_string();
    let hook_id = hook["data"]["webhook"]["id"].clone();

    // Use everything: the key authenticates, lists and logs are read.
    let r = client
        .post(format!("{base}/v1"))
        .header("x-api-key", &api_key)
        .json(&json!({"resource": "profiles", "action": "get"}))
        .send()
        .await
        .unwrap();
    later.push_str(&r.text().await.unwrap());
    for body in [
        json!({"resource": "api-keys", "action": "list"}),
        json!({"resource": "webhooks", "action": "list"}),
        json!({"resource": "webhooks", "action": "get", "id": hook_id}),
        json!({"resource": "webhooks", "action": "test", "id": hook_id}),
        json!({"resource": "activities", "action": "list"}),
        json!({"resource": "profiles", "action": "get"}),
    ] {
        later.push_str(&call(body).await);
    }
    // A wrong key and a wrong password are logged as failures, not echoed.
    client
        .post(format!("{base}/v1"))
        .header("x-api-key", format!("{api_key}x"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    client
        .post(format!("{base}/v1/auth/login"))
        .json(&json!({"email": "s@example.test", "password": format!("{password}!")}))
        .send()
        .await
        .unwrap();

    // A graceful stop flushes the log.
    child.signal(Signal::SIGTERM);
    child.wait(DEADLINE);

    let markers = [
        password,
        api_key.as_str(),
        hook_secret.as_str(),
        "llm-MARKER-b3f1",
        &token[token.len() - 20..],
    ];
    for m in markers {
        assert!(
            !later.contains(m),
            "a response after creation contains a secret"
        );
    }
    let logs = std::fs::read_to_string(&log_path).unwrap();
    assert!(logs.contains("listening"), "the log was not captured");
    let mut scanned = vec![];
    files(&data, &mut scanned);
    // With PostgreSQL the records are the database's files in the cluster (after a
    // CHECKPOINT), scanned besides the data directory.
    let pg = crate::common::cli_env(&data)
        .into_iter()
        .next()
        .map(|(_, url)| crate::common::postgres::stored_bytes(&url));
    assert!(pg.is_some() || scanned.iter().any(|p| p.ends_with("genied.db")));
    for m in markers {
        assert!(!logs.contains(m), "a log line contains a secret");
        for f in &scanned {
            let bytes = std::fs::read(f).unwrap();
            assert!(
                !bytes.windows(m.len()).any(|w| w == m.as_bytes()),
                "{} contains a secret in plaintext",
                f.display()
            );
        }
        if let Some(bytes) = &pg {
            assert!(
                !bytes.windows(m.len()).any(|w| w == m.as_bytes()),
                "the PostgreSQL database's files contain a secret in plaintext"
            );
        }
    }
}
