//! Crash durability: the real binary is SIGKILLed at random moments while clients write;
//! after every restart each acknowledged write is there, the database is intact, and no
//! job is left claimed by the dead process.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start(data: &std::path::Path, port: u16) -> Child {
    Command::new(env!("CARGO_BIN_EXE_genied"))
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--allow-private-outbound",
            "--job-poll-ms",
            "20",
        ])
        .arg("--data-dir")
        .arg(data)
        .env("GENIED_LOG_LEVEL", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start genied")
}

async fn wait_ready(client: &reqwest::Client, base: &str) {
    for _ in 0..400 {
        if client
            .get(format!("{base}/readyz"))
            .send()
            .await
            .is_ok_and(|r| r.status() == 200)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("genied did not become ready");
}

fn cli(data: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_genied"))
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[tokio::test]
async fn acknowledged_writes_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    cli(
        &data,
        &["admin", "create-user", "--email", "w@example.test"],
    );
    let token = cli(
        &data,
        &[
            "admin",
            "issue-token",
            "--email",
            "w@example.test",
            "--ttl-seconds",
            "3600",
        ],
    );
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut acked: Vec<String> = Vec::new();

    for round in 0..6 {
        let port = free_port();
        let base = format!("http://127.0.0.1:{port}");
        let mut child = start(&data, port);
        wait_ready(&client, &base).await;

        // Eight writers create records until the process dies under them.
        let writers: Vec<_> = (0..8)
            .map(|w| {
                let (client, base, token) = (client.clone(), base.clone(), token.clone());
                tokio::spawn(async move {
                    let mut ids = Vec::new();
                    for i in 0.. {
                        let body = json!({"resource": "webhooks", "action": "create",
                            "data": {"url": format!("http://127.0.0.1:9/r{round}/w{w}/{i}")}});
                        let Ok(resp) = client
                            .post(format!("{base}/v1"))
                            .bearer_auth(&token)
                            .json(&body)
                            .send()
                            .await
                        else {
                            break;
                        };
                        if resp.status() != 201 {
                            break;
                        }
                        let Ok(v) = resp.json::<Value>().await else {
                            break;
                        };
                        ids.push(v["data"]["webhook"]["id"].as_str().unwrap().to_string());
                    }
                    ids
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(rng.gen_range(30..250))).await;
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        for w in writers {
            acked.extend(w.await.unwrap());
        }
    }
    assert!(
        acked.len() > 20,
        "the writers barely wrote ({}), the test proves nothing",
        acked.len()
    );

    // Restart once more and read everything back.
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut child = start(&data, port);
    wait_ready(&client, &base).await;
    let list: Value = client
        .post(format!("{base}/v1"))
        .bearer_auth(&token)
        .json(&json!({"resource": "webhooks", "action": "list"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let present: std::collections::HashSet<&str> = list["data"]["webhooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["id"].as_str().unwrap())
        .collect();
    println!(
        "durability: 6 SIGKILL rounds, {} acknowledged writes, {} present after restart",
        acked.len(),
        present.len()
    );
    let lost: Vec<&String> = acked
        .iter()
        .filter(|id| !present.contains(id.as_str()))
        .collect();
    assert!(
        lost.is_empty(),
        "{} acknowledged writes lost: {lost:?}",
        lost.len()
    );
    child.kill().unwrap();
    child.wait().unwrap();

    let check = Command::new(env!("CARGO_BIN_EXE_genied"))
        .arg("--data-dir")
        .arg(&data)
        .args(["admin", "check", "--json"])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&check.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&check.stderr)));
    assert!(check.status.success(), "{report}");
    assert_eq!(report["integrity"], json!("ok"));
    assert_eq!(report["stuck_jobs"], json!(0));
}

/// `admin check` finds document files that are missing (a record names them) or orphaned (no
/// record names them), and exits non-zero for either.
#[tokio::test]
async fn admin_check_reports_missing_and_orphaned_document_files() {
    let mut app = crate::common::TestApp::spawn().await;
    let u = app.standard().await;
    app.call(
        &u.token,
        "knowledge-base",
        "create",
        None,
        json!({"title": "kept", "content": "some text to keep"}),
    )
    .await
    .ok(201);
    app.run_jobs().await;
    app.shutdown().await;
    let data = app.dir.path().to_path_buf();
    let run = |data: &std::path::Path| {
        let out = Command::new(env!("CARGO_BIN_EXE_genied"))
            .arg("--data-dir")
            .arg(data)
            .args(["admin", "check", "--json"])
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        (out.status.success(), v)
    };
    let (ok, report) = run(&data);
    assert!(ok, "{report}");
    assert_eq!(report["missing_files"], json!([]));
    assert_eq!(report["orphaned_files"], json!([]));

    let docs = data.join("documents");
    let stray = "ab".repeat(32);
    std::fs::create_dir_all(docs.join("ab")).unwrap();
    std::fs::write(docs.join("ab").join(&stray), b"left by a crash").unwrap();
    let (ok, report) = run(&data);
    assert!(!ok, "{report}");
    assert_eq!(report["orphaned_files"], json!([stray]));
    std::fs::remove_file(docs.join("ab").join(&stray)).unwrap();

    // Remove one stored file that a record names.
    let victim = std::fs::read_dir(&docs)
        .unwrap()
        .flatten()
        .filter(|d| d.path().is_dir())
        .flat_map(|d| std::fs::read_dir(d.path()).unwrap().flatten())
        .next()
        .expect("a stored file")
        .path();
    std::fs::remove_file(&victim).unwrap();
    let (ok, report) = run(&data);
    assert!(!ok, "{report}");
    let name = victim.file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(report["missing_files"], json!([name]));
}
