//! `admin migrate-storage --to-database-url postgres://… --to-document-store s3://…`: a
//! SQLite data directory, seeded through the API, moves to PostgreSQL (the harness's
//! cluster) and S3 (moto); `genied serve` on them then has everything and works.
//!
//! Runs in every test run, not only with GENIED_TEST_DATABASE=postgres: the upgrade path is
//! the one feature that needs both engines at once, and the harness starts its cluster on
//! demand (about 3 s on an idle machine; the test takes 20-40 s on a busy 2-core one).

use std::process::{Command, Stdio};

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::process::{self, Proc, free_port, wait_ready};
use crate::common::{Resp, TestApp, postgres, s3};

const KB: &str = "knowledge-base";
/// The database password: the trust-authenticated test cluster ignores it, and it must
/// appear in no output.
const PASSWORD: &str = "pg-secret-never-shown-7Qx";

fn genied(data: &std::path::Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_genied"));
    c.arg("--data-dir")
        .arg(data)
        .env_remove("GENIED_DOCUMENT_STORE")
        .env_remove("GENIED_DATABASE_URL")
        .env_remove("GENIED_TO_DATABASE_URL")
        .env("AWS_ACCESS_KEY_ID", s3::ACCESS_KEY_ID)
        .env("AWS_SECRET_ACCESS_KEY", s3::SECRET_ACCESS_KEY);
    c
}

/// A fresh database on the harness's cluster, its URL with a password added.
fn database_url() -> String {
    postgres::database().replacen(
        "postgres://genied@",
        &format!("postgres://genied:{PASSWORD}@"),
        1,
    )
}

/// Runs `migrate-storage` with `args`; returns success, the JSON report and stderr, after
/// checking that neither output shows a credential.
fn migrate(data: &std::path::Path, args: &[&str]) -> (bool, Value, String) {
    let out = process::output(
        genied(data)
            .args(["admin", "migrate-storage", "--json"])
            .args(args),
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    for secret in [PASSWORD, s3::SECRET_ACCESS_KEY] {
        assert!(
            !stdout.contains(secret) && !stderr.contains(secret),
            "{stdout}\n{stderr}"
        );
    }
    let report = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (out.status.success(), report, stderr)
}

async fn settle(app: &TestApp, token: &str, id: &str) {
    let d = crate::common::documents::settle(app, token, id).await;
    assert_eq!(d["status"], "completed", "{d}");
}

/// `POST /v1` on a server started from the binary; `auth` is a header.
async fn call(
    base: &str,
    auth: (&str, &str),
    resource: &str,
    action: &str,
    id: Option<Value>,
    data: Value,
) -> Resp {
    let mut body = json!({"resource": resource, "action": action, "data": data});
    if let Some(id) = id {
        body["id"] = id;
    }
    let req = reqwest::Client::new()
        .request(Method::POST, format!("{base}/v1"))
        .header(auth.0, auth.1)
        .json(&body);
    TestApp::finish(req).await
}

fn table<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["database"]["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no table {name} in {report}"))
}

#[tokio::test]
async fn a_sqlite_data_directory_moves_to_postgres_and_s3_and_serves_from_there() {
    // The source: SQLite and the file store, whatever the test run's engine.
    let mut app = TestApp::spawn_with(|c| {
        c.database_url = None;
        c.document_store = genied::config::DocumentStoreUrl::File;
    })
    .await;
    let data = app.dir.path().to_path_buf();
    let email = "owner@example.test";
    let password = "Tr4vel-Lantern-Quiet-92";
    let out = process::output(genied(&data).args([
        "admin",
        "create-user",
        "--email",
        email,
        "--password",
        password,
    ]));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = app
        .request(
            Method::POST,
            "/v1/auth/login",
            None,
            Some(json!({"email": email, "password": password})),
        )
        .await;
    let token = r.ok(200)["access_token"].as_str().unwrap().to_string();

    // Records of every kind, through the API.
    let genie = app
        .call(
            &token,
            "genies",
            "create",
            None,
            json!({"genieName": "Front desk", "pageSlug": "front-desk"}),
        )
        .await
        .ok(201)["genie"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let lead = app
        .call(&token, "leads", "create", None, json!({"agent_id": genie, "name": "Ann Lee", "email": "ann@example.test", "status": "new"}))
        .await
        .ok(201)["lead"]
        .clone();
    let top = app
        .call(
            &token,
            "document-folders",
            "create",
            None,
            json!({"name": "Policies"}),
        )
        .await
        .ok(201)["folder"]["id"]
        .clone();
    // A child folder: a row that names another row of its own table.
    app.call(
        &token,
        "document-folders",
        "create",
        None,
        json!({"name": "Returns", "parent_id": top}),
    )
    .await
    .ok(201);
    let text_doc = app
        .call(&token, KB, "create", None, json!({"title": "Hours", "content": "The shop opens at nine and closes at marigold o'clock."}))
        .await
        .ok(201)["document"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let file = b"Parcels travel by zeppelin when the weather allows.\n";
    let file_doc = app
        .call(&token, KB, "create", None, json!({"action": "extract-document", "data": {"filename": "shipping.txt", "content_base64": crate::common::documents::b64(file)}}))
        .await
        .ok(201)["document"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    for d in [&text_doc, &file_doc] {
        settle(&app, &token, d).await;
    }
    let chat = app
        .raw(
            Method::POST,
            "/g/front-desk/chat",
            &[("content-type", "application/json")],
            r#"{"message": "Hello?"}"#,
        )
        .await;
    let conversation = chat.ok(200)["conversation_id"]
        .as_str()
        .unwrap()
        .to_string();
    let key = app
        .call(
            &token,
            "api-keys",
            "create",
            None,
            json!({"name": "integration"}),
        )
        .await
        .ok(201)["api_key"]["key"]
        .as_str()
        .unwrap()
        .to_string();
    let worker = app
        .call(&token, "worker-genies", "create", None, json!({"name": "Watcher", "soul_prompt": "You watch things.", "trigger_type": "manual"}))
        .await
        .ok(201)["worker_genie"]["id"]
        .clone();
    let hashes: std::collections::BTreeSet<String> = app
        .state
        .db
        .read(|c| Ok(genied::db::documents::stored_hashes(c)?))
        .await
        .unwrap()
        .into_iter()
        .collect();
    assert!(hashes.len() >= 2, "{hashes:?}");
    let mut counts = Vec::new();
    for t in [
        "users",
        "genies",
        "leads",
        "document_folders",
        "documents",
        "document_chunks",
        "conversations",
        "api_keys",
        "worker_genies",
        "sessions",
        "jobs",
        "lead_status_counts",
    ] {
        counts.push((t, app.count(t).await));
    }

    // Not while the service runs on the data directory.
    let url = database_url();
    let (ok, _, stderr) = migrate(&data, &["--to-database-url", &url]);
    assert!(!ok && stderr.contains("stop it first"), "{stderr}");
    app.shutdown().await;

    // A bad URL is refused without being repeated (it may hold a password).
    let (ok, _, stderr) = migrate(
        &data,
        &["--to-database-url", &format!("mysql://u:{PASSWORD}@h/db")],
    );
    assert!(
        !ok && stderr.contains("--to-database-url must be a PostgreSQL URL"),
        "{stderr}"
    );

    let prefix = uuid::Uuid::new_v4().simple().to_string();
    let store = format!("s3://{}/{prefix}", s3::BUCKET);
    let endpoint = s3::endpoint();
    let (ok, report, stderr) = migrate(
        &data,
        &[
            "--to-database-url",
            &url,
            "--to-document-store",
            &store,
            "--s3-endpoint",
            &endpoint,
        ],
    );
    assert!(ok, "{report}\n{stderr}");
    let copied = report.clone();
    let db = &report["database"];
    assert_eq!(db["mismatches"], json!([]), "{report}");
    let db_tables = db["tables"].as_array().unwrap().len();
    assert!(db["to"].as_str().unwrap().contains("***"), "{report}");
    for (t, n) in &counts {
        assert!(*n > 0, "the seed made no {t}");
        assert_eq!(table(&report, t)["rows"], json!(n), "{t}");
    }
    assert_eq!(
        report["documents"]["copied"],
        json!(hashes.len()),
        "{report}"
    );
    assert_eq!(report["documents"]["missing"], json!([]));
    let seq = db["sequences"].as_array().unwrap();
    let leads_next = seq.iter().find(|s| s["column"] == "leads.id").unwrap()["next"]
        .as_i64()
        .unwrap();
    assert_eq!(leads_next, lead["id"].as_i64().unwrap() + 1, "{report}");
    // Into a database that holds records already: refused, and nothing changes.
    let (ok, _, stderr) = migrate(&data, &["--to-database-url", &url]);
    assert!(
        !ok && stderr.contains("not empty") && stderr.contains("users (1 rows)"),
        "{stderr}"
    );

    // The source changes after the copy: a check reports the table, and fails.
    let mut app = app
        .restart_with(|c| {
            c.database_url = None;
            c.document_store = genied::config::DocumentStoreUrl::File;
        })
        .await;
    app.call(
        &token,
        "leads",
        "update",
        Some(json!(lead["id"].to_string())),
        json!({"name": "Ann Changed"}),
    )
    .await
    .ok(200);
    app.shutdown().await;
    let (ok, report, stderr) = migrate(&data, &["--to-database-url", &url, "--verify-only"]);
    assert!(!ok && stderr.contains("does not match"), "{stderr}");
    let mismatched: Vec<&str> = report["database"]["mismatches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["table"].as_str().unwrap())
        .collect();
    assert!(mismatched.contains(&"leads"), "{report}");
    let m = report["database"]["mismatches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["table"] == "leads")
        .unwrap();
    assert_eq!(m["source_rows"], m["target_rows"]);
    assert_ne!(m["source_checksum"], m["target_checksum"]);
    assert!(!mismatched.contains(&"users"), "{report}");
    assert_eq!(
        report["database"]["tables"].as_array().unwrap().len(),
        db_tables
    );
    // In words, too.
    let out = process::output(
        genied(&data)
            .args(["admin", "migrate-storage", "--verify-only"])
            .env("GENIED_TO_DATABASE_URL", &url),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success());
    assert!(
        text.contains("MISMATCH") && text.contains("  leads: SQLite"),
        "{text}"
    );
    assert!(!text.contains(PASSWORD));

    // Every table of SQLite's schema has its PostgreSQL counterpart: a table missing there
    // would be data a `serve` on PostgreSQL cannot hold.
    assert_eq!(
        copied["database"]["empty_tables_not_in_target"],
        json!([]),
        "PostgreSQL's migrations lag SQLite's"
    );

    // The local files go: the new service must read them from the bucket.
    std::fs::rename(data.join("documents"), data.join("documents.before")).unwrap();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut server = Proc::spawn(
        genied(&data)
            .args([
                "serve",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--document-store",
                &store,
                "--s3-endpoint",
                &endpoint,
            ])
            .env("GENIED_DATABASE_URL", &url)
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    wait_ready(&mut server, &base).await;

    // Sign in with the same password; read the lead, the genie, the conversation, the worker.
    let login = TestApp::finish(
        reqwest::Client::new()
            .post(format!("{base}/v1/auth/login"))
            .json(&json!({"email": email, "password": password})),
    )
    .await;
    let fresh = login.ok(200)["access_token"].as_str().unwrap().to_string();
    let bearer = format!("Bearer {fresh}");
    let auth = ("authorization", bearer.as_str());
    let got = call(
        &base,
        auth,
        "leads",
        "get",
        Some(json!(lead["id"].to_string())),
        json!({}),
    )
    .await;
    assert_eq!(got.ok(200)["lead"]["name"], "Ann Lee");
    assert_eq!(got.ok(200)["lead"]["email"], "ann@example.test");
    let g = call(&base, auth, "genies", "get", Some(json!(genie)), json!({})).await;
    assert_eq!(g.ok(200)["genie"]["name"], "Front desk");
    let c = call(
        &base,
        auth,
        "conversations",
        "get",
        Some(json!(conversation)),
        json!({}),
    )
    .await;
    assert_eq!(
        c.ok(200)["conversation"]["id"],
        json!(conversation),
        "{:?}",
        c.body
    );
    let w = call(
        &base,
        auth,
        "worker-genies",
        "get",
        Some(worker.clone()),
        json!({}),
    )
    .await;
    assert_eq!(w.ok(200)["worker_genie"]["name"], "Watcher");
    // Full-text search finds both documents (PostgreSQL's own index, built from the copy).
    for (q, id) in [("marigold", &text_doc), ("zeppelin", &file_doc)] {
        let s = call(&base, auth, KB, "search", None, json!({"query": q})).await;
        let hits = s.ok(200).to_string();
        assert!(hits.contains(id.as_str()), "{q}: {hits}");
    }
    // The API key works, and sees the same lead.
    let by_key = call(&base, ("x-api-key", &key), "leads", "all", None, json!({})).await;
    assert!(
        by_key.ok(200).to_string().contains("Ann Lee"),
        "{:?}",
        by_key.body
    );
    // New records take ids after the copied ones; the bucket serves the stored files.
    let next = call(
        &base,
        auth,
        "leads",
        "create",
        None,
        json!({"agent_id": genie, "name": "Bo"}),
    )
    .await;
    assert_eq!(next.ok(201)["lead"]["id"], json!(leads_next));
    let objects: std::collections::BTreeSet<String> = s3::objects(&prefix)
        .await
        .into_iter()
        .map(|(k, _)| k.rsplit('/').next().unwrap().to_string())
        .collect();
    assert!(objects.is_superset(&hashes), "{objects:?} {hashes:?}");
    drop(server);
}
