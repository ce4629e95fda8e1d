//! The real binary: admin commands print only their result; `serve` on an empty directory
//! bootstraps an admin who can sign in; backups are consistent while serving.

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output, Stdio};

use crate::common::process::{self, DEADLINE, Proc, free_port, wait_ready};
use crate::common::*;
use nix::sys::signal::Signal;
use reqwest::Method;
use serde_json::{Value, json};

fn genied(dir: &std::path::Path, args: &[&str]) -> Output {
    process::output(
        Command::new(env!("CARGO_BIN_EXE_genied"))
            .arg("--data-dir")
            .arg(dir)
            .args(args)
            .env_remove("GENIED_DATA_DIR"),
    )
}

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "failed: {}\nstderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

#[tokio::test]
async fn admin_commands_print_only_their_result() {
    let dir = tempfile::tempdir().unwrap();
    let migrate = stdout(&genied(dir.path(), &["migrate"]));
    assert!(
        migrate.lines().all(|l| l.parse::<u32>().is_ok()) && migrate.lines().next() == Some("1"),
        "{migrate}"
    );

    let out = stdout(&genied(
        dir.path(),
        &[
            "admin",
            "create-user",
            "--email",
            "ops@example.test",
            "--name",
            "Ops",
            "--role",
            "internal_admin",
        ],
    ));
    let v: Value = serde_json::from_str(out.trim()).expect("one JSON object");
    assert_eq!(v.as_object().unwrap().len(), 3);
    assert_eq!(
        (v["email"].clone(), v["role"].clone()),
        (json!("ops@example.test"), json!("internal_admin"))
    );
    uuid::Uuid::parse_str(v["id"].as_str().unwrap()).unwrap();

    let out = stdout(&genied(
        dir.path(),
        &["admin", "create-user", "--email", "dev@example.test"],
    ));
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["role"], json!("standard_user"));

    let key = stdout(&genied(
        dir.path(),
        &[
            "admin",
            "create-key",
            "--email",
            "dev@example.test",
            "--name",
            "ci",
        ],
    ));
    assert_eq!(key.lines().count(), 1);
    assert!(key.trim().starts_with("svc_live_"));
    let admin_key = stdout(&genied(
        dir.path(),
        &[
            "admin",
            "create-key",
            "--email",
            "ops@example.test",
            "--name",
            "ops",
            "--admin",
        ],
    ));
    assert!(admin_key.trim().starts_with("svc_admin_"));
    let refused = genied(
        dir.path(),
        &[
            "admin",
            "create-key",
            "--email",
            "dev@example.test",
            "--name",
            "x",
            "--admin",
        ],
    );
    assert_eq!(refused.status.code(), Some(1));
    assert!(refused.stdout.is_empty());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("internal_admin") && err.trim().lines().count() == 1,
        "{err}"
    );

    let token = stdout(&genied(
        dir.path(),
        &[
            "admin",
            "issue-token",
            "--email",
            "dev@example.test",
            "--ttl-seconds",
            "120",
        ],
    ));
    assert_eq!(token.trim().split('.').count(), 3);

    let users: Value = serde_json::from_str(&stdout(&genied(
        dir.path(),
        &["admin", "list-users", "--json"],
    )))
    .unwrap();
    assert_eq!(users.as_array().unwrap().len(), 2);
    let set = stdout(&genied(
        dir.path(),
        &[
            "admin",
            "set-role",
            "--email",
            "dev@example.test",
            "--role",
            "consumer",
            "--json",
        ],
    ));
    assert_eq!(
        serde_json::from_str::<Value>(&set).unwrap()["role"],
        json!("consumer")
    );

    let keys: Value = serde_json::from_str(&stdout(&genied(
        dir.path(),
        &[
            "admin",
            "list-keys",
            "--email",
            "dev@example.test",
            "--json",
        ],
    )))
    .unwrap();
    let key_id = keys[0]["id"].as_str().unwrap().to_string();
    assert!(
        !keys.to_string().contains(key.trim()),
        "list-keys must not print secrets"
    );
    stdout(&genied(
        dir.path(),
        &["admin", "revoke-key", "--id", &key_id],
    ));

    // Usage errors exit 2; other failures exit 1 with one line on stderr.
    assert_eq!(
        genied(dir.path(), &["admin", "create-user"]).status.code(),
        Some(2)
    );
    let dup = genied(
        dir.path(),
        &["admin", "create-user", "--email", "dev@example.test"],
    );
    assert_eq!(dup.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&dup.stderr).contains("already exists"));
}

#[tokio::test]
async fn issued_tokens_and_keys_authenticate_against_a_running_service() {
    let app = TestApp::spawn().await;
    let dir = app.dir.path().to_path_buf();
    stdout(&genied(
        &dir,
        &["admin", "create-user", "--email", "cli@example.test"],
    ));
    let token = stdout(&genied(
        &dir,
        &["admin", "issue-token", "--email", "cli@example.test"],
    ))
    .trim()
    .to_string();
    let r = app.call(&token, "profiles", "get", None, json!({})).await;
    assert_eq!(r.ok(200)["profile"]["email"], json!("cli@example.test"));
    let key = stdout(&genied(
        &dir,
        &[
            "admin",
            "create-key",
            "--email",
            "cli@example.test",
            "--name",
            "n",
        ],
    ))
    .trim()
    .to_string();
    let r = app
        .raw(
            Method::POST,
            "/v1",
            &[("x-api-key", &key)],
            json!({"resource": "profiles", "action": "get"}).to_string(),
        )
        .await;
    r.ok(200);

    // A backup taken while serving holds everything written so far.
    let out = dir.join("backup.db");
    stdout(&genied(
        &dir,
        &["admin", "backup", "--out", out.to_str().unwrap()],
    ));
    let conn = rusqlite::Connection::open(&out).unwrap();
    let n: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM users WHERE email = 'cli@example.test'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(n, 1);
    let ok: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
    assert_eq!(
        genied(&dir, &["admin", "backup", "--out", out.to_str().unwrap()])
            .status
            .code(),
        Some(1)
    );
}

#[tokio::test]
async fn first_serve_bootstraps_an_admin_who_can_sign_in() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("fresh");
    let port = free_port();
    let mut child = Proc::spawn(
        Command::new(env!("CARGO_BIN_EXE_genied"))
            .args([
                "serve",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--data-dir",
            ])
            .arg(&data)
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
    );
    let stderr = child.drain_stderr();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    wait_ready(&mut child, &base).await;

    for f in ["jwt.key", "master.key", "initial-admin.txt"] {
        let mode = std::fs::metadata(data.join("secrets").join(f))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600, "{f}");
    }
    let text = std::fs::read_to_string(data.join("secrets/initial-admin.txt")).unwrap();
    let password = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("password:"))
        .unwrap()
        .trim()
        .to_string();
    let r = client
        .post(format!("{base}/v1/auth/login"))
        .json(&json!({"email": "admin@localhost", "password": password}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    let token = body["data"]["access_token"].as_str().unwrap();
    let me: Value = client
        .post(format!("{base}/v1"))
        .bearer_auth(token)
        .json(&json!({"resource": "profiles", "action": "get"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(me["data"]["profile"]["role"], json!("internal_admin"));

    // SIGTERM stops it cleanly; the operator was told once, on stderr.
    child.signal(Signal::SIGTERM);
    let status = child.wait(DEADLINE);
    assert!(status.success(), "exit: {status}");
    let stderr = String::from_utf8_lossy(&stderr.finish()).into_owned();
    assert_eq!(
        stderr.matches("created the first user").count(),
        1,
        "{stderr}"
    );
    assert!(!stderr.contains(&std::fs::read_to_string(data.join("secrets/jwt.key")).unwrap()));
}
