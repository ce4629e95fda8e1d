//! `--document-store s3://…` against a real S3-compatible server (moto, started by the
//! harness: `common::s3`), and `admin migrate-storage --to-document-store`.

use std::collections::BTreeSet;
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::common::documents::{b64, chunks, create_text, settle};
use crate::common::process::{self, Proc, free_port, wait_ready};
use crate::common::{TestApp, User, cli_env, s3};

const KB: &str = "knowledge-base";

fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

async fn upload_txt(app: &TestApp, u: &User, name: &str, bytes: &[u8]) -> String {
    app.call(
        &u.token,
        KB,
        "create",
        None,
        json!({"action": "extract-document", "data": {"filename": name, "content_base64": b64(bytes)}}),
    )
    .await
    .ok(201)["document"]["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Every hash the document records name.
async fn named_hashes(app: &TestApp) -> BTreeSet<String> {
    app.state
        .db
        .read(|c| {
            let mut st = c.prepare(
                "SELECT original_hash FROM documents WHERE original_hash IS NOT NULL
                 UNION SELECT content_hash FROM documents WHERE content_hash IS NOT NULL",
            )?;
            let rows = st.query_map([], |r| r.get::<_, String>(0))?;
            Ok(rows.collect::<Result<BTreeSet<_>, _>>()?)
        })
        .await
        .unwrap()
}

fn local_files(data: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    for d in std::fs::read_dir(data.join("documents"))
        .into_iter()
        .flatten()
        .flatten()
    {
        for f in std::fs::read_dir(d.path()).into_iter().flatten().flatten() {
            out.push(f.file_name().to_string_lossy().into_owned());
        }
    }
    out
}

/// Checks that the objects under `prefix` are exactly `hashes`, each at `<h[..2]>/<h>` and
/// each holding bytes whose SHA-256 is its name.
async fn assert_objects_are(prefix: &str, hashes: &BTreeSet<String>) {
    let objects = s3::objects(prefix).await;
    let keys: BTreeSet<String> = objects.iter().map(|(k, _)| k.clone()).collect();
    let want: BTreeSet<String> = hashes.iter().map(|h| format!("{}/{h}", &h[..2])).collect();
    assert_eq!(keys, want);
    for (key, size) in &objects {
        let bytes = s3::object(prefix, key).await;
        assert_eq!(bytes.len() as u64, *size);
        assert_eq!(format!("{}/{}", &sha(&bytes)[..2], sha(&bytes)), *key);
    }
}

#[tokio::test]
async fn documents_are_kept_as_objects_in_the_bucket_and_removed_with_their_last_record() {
    let mut prefix = String::new();
    let app = TestApp::spawn_with(|c| prefix = s3::use_s3(c)).await;
    let u = app.standard().await;
    let text = "Opening hours: nine to five, Monday to Friday.";
    let file = b"Refunds are paid within fourteen days of the return.\n";
    let a = create_text(&app, &u, "Hours", text).await;
    let b = upload_txt(&app, &u, "refunds.txt", file).await;
    let c = create_text(&app, &u, "Hours again", text).await;
    for id in [&a, &b, &c] {
        assert_eq!(settle(&app, &u.token, id).await["status"], "completed");
    }
    assert!(chunks(&app, &b).await.contains("fourteen days"));
    let hashes = named_hashes(&app).await;
    assert!(hashes.contains(&sha(text.as_bytes())), "{hashes:?}");
    assert!(hashes.contains(&sha(file)), "{hashes:?}");
    assert_objects_are(&prefix, &hashes).await;
    assert_eq!(local_files(app.dir.path()), Vec::<String>::new());

    // The text shared by two records stays until the second goes.
    app.call(&u.token, KB, "delete", Some(json!(a)), json!({}))
        .await
        .ok(200);
    assert_objects_are(&prefix, &named_hashes(&app).await).await;
    assert!(!s3::objects(&prefix).await.is_empty());
    for id in [&b, &c] {
        app.call(&u.token, KB, "delete", Some(json!(id)), json!({}))
            .await
            .ok(200);
    }
    assert_eq!(s3::objects(&prefix).await, vec![]);
}

#[tokio::test]
async fn a_document_stored_by_one_process_is_read_by_the_next_with_a_fresh_data_directory() {
    // The first process stores the upload but cannot extract it (no extraction binary), so
    // the document fails with its original in the bucket only.
    let mut prefix = String::new();
    let first = TestApp::spawn_with(|c| {
        prefix = s3::use_s3(c);
        c.extract_exe = Some("/nonexistent/genied".into());
    })
    .await;
    let u = first.standard().await;
    let file = crate::common::fixtures::pdf(
        None,
        &["The warranty covers parts and labour for two years."],
    );
    let id = first
        .call(
            &u.token,
            KB,
            "create",
            None,
            json!({"action": "upload-pdf", "data": {"filename": "warranty.pdf", "content_base64": b64(&file)}}),
        )
        .await
        .ok(201)["document"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(settle(&first, &u.token, &id).await["status"], "failed");
    assert_objects_are(&prefix, &[sha(&file)].into()).await;

    // The second process: a new data directory holding only the database and the secrets
    // (on PostgreSQL only the secrets: the second process is given the same database).
    let fresh = tempfile::tempdir().unwrap();
    let pg = first.state.config.postgres_url().map(str::to_owned);
    if pg.is_none() {
        first
            .state
            .db
            .backup_to(&fresh.path().join("genied.db"))
            .unwrap();
    }
    let secrets = fresh.path().join("secrets");
    std::fs::create_dir_all(&secrets).unwrap();
    for f in std::fs::read_dir(first.dir.path().join("secrets"))
        .unwrap()
        .flatten()
    {
        std::fs::copy(f.path(), secrets.join(f.file_name())).unwrap();
    }
    drop(first);
    assert!(!fresh.path().join("documents").exists());
    let p2 = prefix.clone();
    let second = TestApp::spawn_in(fresh, move |c| {
        s3::use_prefix(c, &p2);
        if let Some(url) = pg {
            c.database_url = Some(genied::config::DatabaseUrl::Postgres(url));
        }
    })
    .await;
    let r = second
        .call(&u.token, KB, "retry", Some(json!(id)), json!({}))
        .await;
    r.ok(202);
    let d = settle(&second, &u.token, &id).await;
    assert_eq!(d["status"], "completed", "{d}");
    assert!(chunks(&second, &id).await.contains("two years"));
    assert_eq!(local_files(second.dir.path()), Vec::<String>::new());
}

#[tokio::test]
async fn an_unreachable_store_answers_503_and_writes_nothing() {
    let port = free_port(); // nothing listens there
    let app = TestApp::spawn_with(|c| {
        s3::use_s3(c);
        c.s3_endpoint = Some(format!("http://127.0.0.1:{port}"));
    })
    .await;
    let u = app.standard().await;
    let r = app
        .call(
            &u.token,
            KB,
            "create",
            None,
            json!({"title": "Lost?", "content": "not without a store"}),
        )
        .await;
    r.err(503, "SERVICE_UNAVAILABLE");
    let message = r.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("document store"), "{message}");
    assert!(!message.contains(s3::SECRET_ACCESS_KEY));
    assert_eq!(app.count("documents").await, 0);
    assert_eq!(app.count("jobs").await, 0);
    let all = app.call(&u.token, KB, "all", None, json!({})).await;
    assert_eq!(all.ok(200)["total"], 0);
}

fn genied(data: &std::path::Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_genied"));
    c.arg("--data-dir")
        .arg(data)
        .envs(cli_env(data))
        .env_remove("GENIED_DOCUMENT_STORE")
        .env("AWS_ACCESS_KEY_ID", s3::ACCESS_KEY_ID)
        .env("AWS_SECRET_ACCESS_KEY", s3::SECRET_ACCESS_KEY);
    c
}

fn migrate(data: &std::path::Path, prefix: &str) -> (bool, Value, String) {
    let out = process::output(genied(data).args([
        "admin",
        "migrate-storage",
        "--to-document-store",
        &format!("s3://{}/{prefix}", s3::BUCKET),
        "--s3-endpoint",
        &s3::endpoint(),
        "--json",
    ]));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("no JSON report; stderr: {stderr}"));
    assert!(!stderr.contains(s3::SECRET_ACCESS_KEY));
    (out.status.success(), report["documents"].clone(), stderr)
}

#[tokio::test]
async fn migrate_storage_copies_every_file_verifies_it_and_switches_nothing() {
    let mut app = TestApp::spawn_with(|c| {
        c.document_store = genied::config::DocumentStoreUrl::File;
    })
    .await;
    let u = app.standard().await;
    let file = b"Shipping is free above fifty euros.\n";
    let ids = [
        create_text(&app, &u, "One", "The first text of the knowledge base.").await,
        upload_txt(&app, &u, "shipping.txt", file).await,
    ];
    for id in &ids {
        assert_eq!(settle(&app, &u.token, id).await["status"], "completed");
    }
    let hashes = named_hashes(&app).await;
    let data = app.dir.path().to_path_buf();

    // Not while the service runs on the data directory.
    let out = process::output(genied(&data).args([
        "admin",
        "migrate-storage",
        "--to-document-store",
        &format!("s3://{}/refused", s3::BUCKET),
        "--s3-endpoint",
        &s3::endpoint(),
    ]));
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("stop it first"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    app.shutdown().await;
    // A file a crash left without a record is not copied.
    let stray = "ef".repeat(32);
    std::fs::create_dir_all(data.join("documents/ef")).unwrap();
    std::fs::write(data.join("documents/ef").join(&stray), b"orphan").unwrap();

    let prefix = uuid::Uuid::new_v4().simple().to_string();
    let (ok, r, _) = migrate(&data, &prefix);
    assert!(ok, "{r}");
    let bytes: u64 = hashes
        .iter()
        .map(|h| {
            std::fs::metadata(data.join("documents").join(&h[..2]).join(h))
                .unwrap()
                .len()
        })
        .sum();
    assert_eq!(r["files"], hashes.len());
    assert_eq!(r["copied"], hashes.len());
    assert_eq!(r["already_present"], 0);
    assert_eq!(r["bytes"], bytes);
    assert_eq!(r["missing"], json!([]));
    assert_eq!(r["mismatches"], json!([]));
    assert_eq!(r["unreferenced_skipped"], 1);
    assert_objects_are(&prefix, &hashes).await;
    for h in &hashes {
        let local = std::fs::read(data.join("documents").join(&h[..2]).join(h)).unwrap();
        assert_eq!(
            s3::object(&prefix, &format!("{}/{h}", &h[..2])).await,
            local
        );
    }
    // Nothing switched: the data directory's files are all still there.
    assert_eq!(local_files(&data).len(), hashes.len() + 1);

    // A rerun finds everything there and intact, and sends nothing.
    let (ok, again, _) = migrate(&data, &prefix);
    assert!(ok, "{again}");
    assert_eq!(again["already_present"], hashes.len());
    assert_eq!(again["copied"], 0);
    assert_eq!(again["bytes"], bytes);

    // A local file whose bytes do not match its name is reported and not copied.
    let bad = hashes.iter().next().unwrap().clone();
    std::fs::write(
        data.join("documents").join(&bad[..2]).join(&bad),
        b"bit rot",
    )
    .unwrap();
    let other = uuid::Uuid::new_v4().simple().to_string();
    let (ok, r, stderr) = migrate(&data, &other);
    assert!(!ok);
    assert!(stderr.contains("incomplete"), "{stderr}");
    assert_eq!(r["mismatches"], json!([bad]));
    assert_eq!(r["copied"], hashes.len() - 1);
    let keys: Vec<String> = s3::objects(&other)
        .await
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert!(!keys.contains(&format!("{}/{bad}", &bad[..2])), "{keys:?}");

    // After the switch the service reads the files from the bucket: the local ones go, and
    // `admin check` (pointed at the same store) finds every named file there.
    std::fs::remove_dir_all(data.join("documents")).unwrap();
    let out = process::output(genied(&data).args([
        "admin",
        "check",
        "--json",
        "--document-store",
        &format!("s3://{}/{prefix}", s3::BUCKET),
        "--s3-endpoint",
        &s3::endpoint(),
    ]));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(out.status.success(), "{report}");
    assert_eq!(report["missing_files"], json!([]));
    assert_eq!(report["orphaned_files"], json!([]));
    let p2 = prefix.clone();
    let app = app.restart_with(move |c| s3::use_prefix(c, &p2)).await;
    let extra = create_text(&app, &u, "After", "A text stored after the switch.").await;
    assert_eq!(settle(&app, &u.token, &extra).await["status"], "completed");
    assert_objects_are(&prefix, &named_hashes(&app).await).await;
    assert_eq!(local_files(&data), Vec::<String>::new());
}

#[test]
fn migrate_storage_needs_a_target_and_a_valid_store_url() {
    let data = tempfile::tempdir().unwrap();
    let out = process::output(genied(data.path()).args(["admin", "migrate-storage"]));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--to-document-store"), "{err}");
    for bad in ["s3://", "s3://UPPER/x", "gs://bucket", "s3://bucket/../x"] {
        let out = process::output(genied(data.path()).args([
            "admin",
            "migrate-storage",
            "--to-document-store",
            bad,
        ]));
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--to-document-store"), "{bad}: {err}");
    }
}

#[tokio::test]
async fn the_binary_serves_from_s3_and_never_shows_the_credentials() {
    let data = tempfile::tempdir().unwrap();
    let secret = s3::SECRET_ACCESS_KEY;
    // --help shows the flags, not the environment's secret.
    let help = process::output(genied(data.path()).args(["serve", "--help"]));
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("--document-store") && help.contains("--s3-endpoint"));
    assert!(help.contains("AWS_SECRET_ACCESS_KEY"));
    assert!(!help.contains(secret) && !help.contains(s3::ACCESS_KEY_ID));
    // Nor does the configuration's Debug form.
    let mut config = genied::Config::new(data.path());
    s3::use_s3(&mut config);
    let shown = format!("{config:?}");
    assert!(
        !shown.contains(secret) && !shown.contains(s3::ACCESS_KEY_ID),
        "{shown}"
    );
    // A bad store URL is refused by name.
    let bad = process::output(genied(data.path()).args(["serve", "--document-store", "s3://a"]));
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("bucket"));

    let out = process::output(genied(data.path()).args([
        "--create-data-dir",
        "admin",
        "create-user",
        "--email",
        "ops@example.test",
    ]));
    assert!(out.status.success());
    let out = process::output(genied(data.path()).args([
        "admin",
        "create-key",
        "--email",
        "ops@example.test",
        "--name",
        "ci",
    ]));
    let key = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let prefix = uuid::Uuid::new_v4().simple().to_string();
    let port = free_port();
    let mut server = Proc::spawn(
        genied(data.path())
            .args(["--log-level", "debug", "serve", "--listen"])
            .arg(format!("127.0.0.1:{port}"))
            .args(["--document-store", &format!("s3://{}/{prefix}", s3::BUCKET)])
            .args(["--s3-endpoint", &s3::endpoint()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let (log, errs) = (server.drain_stdout(), server.drain_stderr());
    let base = format!("http://127.0.0.1:{port}");
    wait_ready(&mut server, &base).await;
    let client = reqwest::Client::new();
    let r: Value = client
        .post(format!("{base}/v1"))
        .bearer_auth(&key)
        .json(&json!({"resource": KB, "action": "create", "data": {"title": "Binary", "content": "Stored by the real binary."}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["success"], true, "{r}");
    let want = sha(b"Stored by the real binary.");
    let end = std::time::Instant::now() + process::DEADLINE;
    while !s3::objects(&prefix)
        .await
        .iter()
        .any(|(k, _)| k.ends_with(&want))
    {
        assert!(std::time::Instant::now() < end, "the object never appeared");
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert_eq!(local_files(data.path()), Vec::<String>::new());
    server.kill();
    let (log, errs) = (log.text(), errs.text());
    assert!(
        log.contains(&format!("s3://{}/{prefix}", s3::BUCKET)),
        "{log}"
    );
    for text in [&log, &errs] {
        assert!(!text.contains(secret) && !text.contains(s3::ACCESS_KEY_ID));
    }
}
