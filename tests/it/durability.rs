//! Crash durability: the real binary is SIGKILLed at random moments while clients write;
//! after every restart each acknowledged write is there, the database is intact, and no
//! job is left claimed by the dead process. Besides records (webhooks), writers create
//! knowledge-base documents (typed text through the envelope, files through the multipart
//! route), so the document file store is under the kills too: after the last restart every
//! acknowledged document is there with its stored original, the pipeline finishes them all,
//! and `admin check` finds no orphaned or missing file.
//!
//! With `GENIED_TEST_DATABASE=postgres` the binary runs on a fresh PostgreSQL database of
//! the test cluster (`common::own_database`), so the kills hit PostgreSQL's commits too.
//!
//! Every wait is for a condition with a generous deadline, and each kill comes at a random
//! moment after every kind of writer has been acknowledged at least twice, so a busy machine
//! makes the test slower, not flaky. Each `genied` runs under a `Proc` guard: a failing
//! assertion kills it too.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use crate::common::process::{self, DEADLINE, Proc, free_port, wait_ready};

/// How long the pipeline and the worker runs get to finish after the last restart.
const SETTLE: Duration = Duration::from_secs(180);

fn start(data: &std::path::Path, port: u16) -> Proc {
    Proc::spawn(
        Command::new(env!("CARGO_BIN_EXE_genied"))
            .args([
                "serve",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--allow-private-outbound",
                "--job-poll-ms",
                "20",
                "--session-rate-limit-per-minute",
                "0",
                // One instance restarted under one id: on PostgreSQL its start takes back
                // what its previous life held (jobs, runs), as a SQLite start takes all.
                "--instance-id",
                "durability",
            ])
            .arg("--data-dir")
            .arg(data)
            .envs(crate::common::own_database(data))
            .env("GENIED_LOG_LEVEL", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    )
}

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

/// `genied admin check --json`: exit status success, and the report.
fn admin_check(data: &std::path::Path) -> (bool, Value) {
    let out = process::output(
        Command::new(env!("CARGO_BIN_EXE_genied"))
            .arg("--data-dir")
            .arg(data)
            .args(["admin", "check", "--json"])
            .envs(crate::common::own_database(data)),
    );
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
    (out.status.success(), report)
}

/// A document a writer was told was created: its id and the exact text it sent.
struct AckedDoc {
    id: String,
    content: String,
    marker: String,
}

/// Creates documents until the server stops answering 201: typed text through the envelope
/// (`upload == false`) or a `.txt` file through `POST /v1/knowledge-base/upload`.
async fn document_writer(
    client: reqwest::Client,
    base: String,
    token: String,
    round: usize,
    w: usize,
    upload: bool,
    count: Arc<AtomicUsize>,
) -> Vec<AckedDoc> {
    let mut acked = Vec::new();
    for i in 0.. {
        // One word no other document has, to find the document by search later.
        let marker = format!("zq{round}x{w}x{i}q");
        let content = format!(
            "Durability note {i} of writer {w} in round {round}. The marker word is {marker}. \
             A process may die at any moment; what it acknowledged must still be there."
        );
        let req = if upload {
            let boundary = "genied-durability-boundary";
            let body = format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; \
                 filename=\"note-{round}-{w}-{i}.txt\"\r\nContent-Type: text/plain\r\n\r\n\
                 {content}\r\n--{boundary}--\r\n"
            );
            client
                .post(format!("{base}/v1/knowledge-base/upload"))
                .header(
                    "content-type",
                    format!("multipart/form-data; boundary={boundary}"),
                )
                .body(body)
        } else {
            client.post(format!("{base}/v1")).json(&json!({
                "resource": "knowledge-base", "action": "create",
                "data": {"title": format!("note {round}/{w}/{i}"), "content": content}}))
        };
        let Ok(resp) = req.bearer_auth(&token).send().await else {
            break;
        };
        if resp.status() != 201 {
            break;
        }
        let Ok(v) = resp.json::<Value>().await else {
            break;
        };
        let id = v["data"]["document"]["id"].as_str().unwrap().to_string();
        acked.push(AckedDoc {
            id,
            content,
            marker,
        });
        count.fetch_add(1, Ordering::Relaxed);
    }
    acked
}

async fn envelope(client: &reqwest::Client, base: &str, token: &str, body: Value) -> Value {
    let resp = client
        .post(format!("{base}/v1"))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = resp.status();
    let v: Value = resp.json().await.unwrap();
    assert!(status.is_success(), "{body}: {status} {v}");
    v["data"].clone()
}

/// Sends `body(0)`, `body(1)`, ... until the server stops answering (it is killed), and
/// returns the ids of the records it acknowledged: `data.<member>.id` of each answer with
/// status `status`.
async fn envelope_writer(
    client: reqwest::Client,
    base: String,
    token: String,
    (status, member): (u16, &'static str),
    count: Arc<AtomicUsize>,
    body: impl Fn(u64) -> Value,
) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0.. {
        let Ok(resp) = client
            .post(format!("{base}/v1"))
            .bearer_auth(&token)
            .json(&body(i))
            .send()
            .await
        else {
            break;
        };
        if resp.status() != status {
            break;
        }
        let Ok(v) = resp.json::<Value>().await else {
            break;
        };
        ids.push(v["data"][member]["id"].as_str().unwrap().to_string());
        count.fetch_add(1, Ordering::Relaxed);
    }
    ids
}

#[tokio::test]
async fn acknowledged_writes_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    cli(
        &data,
        &[
            "admin",
            "create-user",
            "--create-data-dir",
            "--email",
            "w@example.test",
        ],
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
    // Requests to a killed process fail at once; the timeout only bounds a stuck one.
    let client = reqwest::Client::builder()
        .timeout(DEADLINE)
        .build()
        .unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut acked: Vec<String> = Vec::new();
    let mut acked_docs: Vec<AckedDoc> = Vec::new();
    let mut acked_runs: Vec<String> = Vec::new();
    let mut worker = String::new();
    let mut orphans_after_kills = 0;

    for round in 0..6 {
        let port = free_port();
        let base = format!("http://127.0.0.1:{port}");
        let mut child = start(&data, port);
        wait_ready(&mut child, &base).await;
        if round == 0 {
            let w = envelope(
                &client,
                &base,
                &token,
                json!({"resource": "worker-genies", "action": "create",
                       "data": {"name": "Durability", "soul_prompt": "You count.",
                                "trigger_type": "manual"}}),
            )
            .await;
            worker = w["worker_genie"]["id"].as_str().unwrap().to_string();
        }

        let (records, documents, runs) = Default::default();
        let counts: [&Arc<AtomicUsize>; 3] = [&records, &documents, &runs];
        // Eight writers create records until the process dies under them. The endpoints
        // subscribe to an event this test never causes: subscribed to every event (the
        // default), the hundreds of endpoints got a delivery (to a closed port, retried with
        // backoff) for each document and run event, tens of thousands of jobs ahead of the
        // documents' pipeline jobs in the one job queue, and a busy machine ran out of time.
        let writers: Vec<_> = (0..8)
            .map(|w| {
                tokio::spawn(envelope_writer(
                    client.clone(),
                    base.clone(),
                    token.clone(),
                    (201, "webhook"),
                    records.clone(),
                    move |i| {
                        json!({"resource": "webhooks", "action": "create",
                        "data": {"url": format!("http://127.0.0.1:9/r{round}/w{w}/{i}"),
                                 "event_types": ["genie.created"]}})
                    },
                ))
            })
            .collect();
        // Four more create documents: two typed, two uploaded as files.
        let doc_writers: Vec<_> = (0..4)
            .map(|w| {
                tokio::spawn(document_writer(
                    client.clone(),
                    base.clone(),
                    token.clone(),
                    round,
                    w,
                    w % 2 == 1,
                    documents.clone(),
                ))
            })
            .collect();
        // Two queue worker runs (with no LLM configured each fails at once, so runs move
        // through queued and running while the process dies).
        let run_writers: Vec<_> = (0..2)
            .map(|w| {
                let worker = worker.clone();
                tokio::spawn(envelope_writer(
                    client.clone(),
                    base.clone(),
                    token.clone(),
                    (202, "run"),
                    runs.clone(),
                    move |i| {
                        json!({"resource": "worker-genies", "action": "run", "id": worker,
                        "data": {"round": round, "writer": w, "n": i}})
                    },
                ))
            })
            .collect();
        // Kill at a random moment once every kind of writer has had two writes acknowledged
        // (on a busy machine a fixed delay could pass before any write got through).
        let end = Instant::now() + DEADLINE;
        while counts.iter().any(|c| c.load(Ordering::Relaxed) < 2) {
            assert!(
                Instant::now() < end,
                "the writers made no progress within {DEADLINE:?}: {counts:?} acknowledged"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(Duration::from_millis(rng.gen_range(0..200))).await;
        child.kill(); // SIGKILL
        for w in writers {
            acked.extend(w.await.unwrap());
        }
        for w in doc_writers {
            acked_docs.extend(w.await.unwrap());
        }
        for w in run_writers {
            acked_runs.extend(w.await.unwrap());
        }
        // Straight after the kill, before the restart: no record names a missing file. Files
        // no record names yet may be there (a document's file is written before its record
        // commits); the sweep beside the next start removes them.
        let report = admin_check(&data).1;
        assert_eq!(report["integrity"], json!("ok"), "{report}");
        assert_eq!(report["missing_files"], json!([]), "{report}");
        orphans_after_kills += report["orphaned_files"].as_array().unwrap().len();
    }
    assert!(
        acked.len() > 20,
        "the writers barely wrote ({}), the test proves nothing",
        acked.len()
    );
    assert!(
        acked_runs.len() > 10,
        "the run writers barely wrote ({}), the test proves nothing",
        acked_runs.len()
    );
    assert!(
        acked_docs.len() > 10,
        "the document writers barely wrote ({}), the test proves nothing",
        acked_docs.len()
    );

    // Restart once more and read everything back.
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut child = start(&data, port);
    wait_ready(&mut child, &base).await;
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
        "durability: 6 SIGKILL rounds, {} acknowledged webhook writes, {} present after restart",
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

    // Documents: the pipeline resumes after the restart and brings every acknowledged one to
    // a final status (bounded wait); each is there, completed, findable by its marker word,
    // and its original is in the file store byte for byte.
    let mut docs: std::collections::HashMap<String, Value> = Default::default();
    let end = Instant::now() + SETTLE;
    while Instant::now() < end {
        docs.clear();
        let mut offset = 0;
        loop {
            let page = envelope(
                &client,
                &base,
                &token,
                json!({"resource": "knowledge-base", "action": "all",
                       "data": {"limit": 500, "offset": offset}}),
            )
            .await;
            let items = page["documents"].as_array().unwrap().clone();
            offset += items.len();
            for d in items {
                docs.insert(d["id"].as_str().unwrap().to_string(), d);
            }
            if offset as u64 >= page["total"].as_u64().unwrap() {
                break;
            }
        }
        if docs
            .values()
            .all(|d| d["status"] == json!("completed") || d["status"] == json!("failed"))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let store = data.join("documents");
    for a in &acked_docs {
        let d = docs
            .get(&a.id)
            .unwrap_or_else(|| panic!("acknowledged document {} lost", a.id));
        assert_eq!(d["status"], json!("completed"), "{d}");
        let hash = genied::document_store::DocumentStore::hash(a.content.as_bytes());
        assert_eq!(
            crate::common::documents::stored_file(&store, &hash).as_deref(),
            Some(a.content.as_bytes()),
            "the original of {} is not stored intact",
            a.id
        );
        let found = envelope(
            &client,
            &base,
            &token,
            json!({"resource": "knowledge-base", "action": "search",
                   "data": {"query": a.marker, "limit": 5}}),
        )
        .await;
        let hits: Vec<&str> = found["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["document_id"].as_str().unwrap())
            .collect();
        assert_eq!(hits, [a.id.as_str()], "search for {}: {found}", a.marker);
    }
    // Documents created but not acknowledged (the process died before answering) may exist;
    // they too must have finished.
    let unfinished: Vec<&Value> = docs
        .values()
        .filter(|d| d["status"] != json!("completed"))
        .collect();
    assert!(unfinished.is_empty(), "not completed: {unfinished:?}");
    println!(
        "durability: {} acknowledged documents, {} present and completed after restart; \
         {orphans_after_kills} unreferenced files found after the kills, swept at the restarts",
        acked_docs.len(),
        docs.len()
    );
    // Worker runs: every acknowledged run is there and ends (runs a dead process left
    // `running` are failed at start; queued ones run); none stays queued or running.
    let mut runs: std::collections::HashMap<String, String> = Default::default();
    let end = Instant::now() + SETTLE;
    while Instant::now() < end {
        runs = crate::common::query(
            &data,
            "SELECT id, status FROM worker_runs WHERE worker_genie_id = $1",
            &[&worker],
        )
        .into_iter()
        .map(|r| (r[0].clone().unwrap(), r[1].clone().unwrap()))
        .collect();
        if runs.values().all(|s| s != "queued" && s != "running") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    for id in &acked_runs {
        let status = runs
            .get(id)
            .unwrap_or_else(|| panic!("acknowledged run {id} lost"));
        assert!(
            status != "queued" && status != "running",
            "run {id} is still {status}"
        );
    }
    println!(
        "durability: {} acknowledged worker runs, {} present after restart, none left queued or running",
        acked_runs.len(),
        runs.len()
    );
    // The files the kills left without a record go in the sweep beside the start.
    crate::common::wait_until("the start's sweep of unreferenced files", async || {
        (admin_check(&data).1["orphaned_files"] == json!([])).then_some(())
    })
    .await;
    child.kill();

    // No pipeline job is left behind.
    let left = crate::common::query(
        &data,
        "SELECT CAST(COUNT(*) AS TEXT) FROM jobs WHERE kind LIKE 'document.%' AND status != 'done'",
        &[],
    );
    assert_eq!(
        left[0][0].as_deref(),
        Some("0"),
        "document pipeline jobs not done"
    );

    let (ok, report) = admin_check(&data);
    assert!(ok, "{report}");
    assert_eq!(report["integrity"], json!("ok"));
    assert_eq!(report["stuck_jobs"], json!(0));
    assert_eq!(report["missing_files"], json!([]), "{report}");
    assert_eq!(report["orphaned_files"], json!([]), "{report}");
    assert_eq!(report["problems"], json!([]), "{report}");
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
    let run = admin_check;
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

/// The sweep beside each start removes document files no record names (what a crash between
/// writing a file and committing its record leaves) and leftover temp files, and keeps every
/// file a record names, also one a new record names while the sweep is under way.
#[tokio::test]
async fn startup_sweeps_unreferenced_document_files() {
    let app = crate::common::TestApp::spawn().await;
    let u = app.standard().await;
    let content = "a note that must keep its file";
    let id = app
        .call(
            &u.token,
            "knowledge-base",
            "create",
            None,
            json!({"title": "kept", "content": content}),
        )
        .await
        .ok(201)["document"]["id"]
        .clone();
    // The background worker may hold a pipeline step while `run_jobs` finds nothing due, and
    // the restart below stops it from claiming the next one: wait for the whole pipeline.
    for _ in 0..400 {
        app.run_jobs().await;
        let d = app
            .call(
                &u.token,
                "knowledge-base",
                "get",
                Some(id.clone()),
                json!({}),
            )
            .await;
        if d.ok(200)["document"]["status"] == json!("completed") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    let docs = app.dir.path().join("documents");
    let stray = "cd".repeat(32);
    std::fs::create_dir_all(docs.join("cd")).unwrap();
    std::fs::write(docs.join("cd").join(&stray), b"left by a crash").unwrap();
    std::fs::write(docs.join("cd").join(".tmp-0123"), b"half a write").unwrap();
    // A name that is not a hash at all: no record can name it.
    std::fs::write(docs.join("cd").join("notes.txt"), b"put there by hand").unwrap();
    // A file no record names yet, whose bytes a document created as the service starts will
    // name: whichever of the sweep and that create comes first, the file is there at the end
    // (the sweep looks again under the write lock; a create after it writes the file anew).
    let late = "a note created while the sweep may still be looking";
    let late_hash = genied::document_store::DocumentStore::hash(late.as_bytes());
    std::fs::create_dir_all(docs.join(&late_hash[..2])).unwrap();
    std::fs::write(docs.join(&late_hash[..2]).join(&late_hash), late).unwrap();

    let app = app.restart().await;
    let late_id = crate::common::documents::create_text(&app, &u, "late", late).await;
    let docs = app.dir.path().join("documents");
    // The sweep runs beside the start, and removes what it removes in one transaction.
    crate::common::wait_until("the start's sweep", async || {
        (!docs.join("cd").join(&stray).exists()).then_some(())
    })
    .await;
    assert!(!docs.join("cd").join(".tmp-0123").exists());
    assert!(!docs.join("cd").join("notes.txt").exists());
    assert_eq!(
        crate::common::documents::stored_file(&docs, &late_hash).as_deref(),
        Some(late.as_bytes())
    );
    let kept = genied::document_store::DocumentStore::hash(content.as_bytes());
    assert_eq!(
        crate::common::documents::stored_file(&docs, &kept).as_deref(),
        Some(content.as_bytes())
    );
    let d = app
        .call(&u.token, "knowledge-base", "get", Some(id), json!({}))
        .await;
    assert_eq!(d.ok(200)["document"]["status"], json!("completed"));
    let d = app
        .call(
            &u.token,
            "knowledge-base",
            "get",
            Some(json!(late_id)),
            json!({}),
        )
        .await;
    assert_eq!(d.ok(200)["document"]["name"], json!("late"));
    let (ok, report) = admin_check(app.dir.path());
    assert!(ok, "{report}");
}

/// A receiver that takes webhook deliveries and never answers them: each one costs the
/// sender its whole delivery timeout. Counts the requests it was sent.
async fn silent_receiver() -> (String, Arc<AtomicUsize>) {
    use tokio::io::AsyncReadExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let counter = counter.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while let Ok(n) = sock.read(&mut buf).await {
                    if n == 0 {
                        return;
                    }
                    head.extend_from_slice(&buf[..n]);
                    if head.windows(4).any(|w| w == b"\r\n\r\n") {
                        assert!(head.starts_with(b"POST /hook "), "a delivery is a POST");
                        counter.fetch_add(1, Ordering::SeqCst);
                        break;
                    }
                }
                // Hold the connection open until the sender gives up on it.
                while let Ok(n) = sock.read(&mut buf).await {
                    if n == 0 {
                        return;
                    }
                }
            });
        }
    });
    (url, seen)
}

/// SIGTERM with a backlog of slow jobs: the job in hand finishes, the rest wait for the next
/// start. (The job worker used to work through every due job before it looked at the stop
/// signal, so a backlog held shutdown up for as long as the backlog took.)
// Multi-threaded: the receiver keeps accepting while the test blocks on the child's exit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_does_not_wait_for_the_job_backlog() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    cli(
        &data,
        &[
            "admin",
            "create-user",
            "--create-data-dir",
            "--email",
            "s@example.test",
        ],
    );
    let token = cli(
        &data,
        &["admin", "issue-token", "--email", "s@example.test"],
    );
    let (url, seen) = silent_receiver().await;
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut child = Proc::spawn(
        Command::new(env!("CARGO_BIN_EXE_genied"))
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--allow-private-outbound", "--webhook-timeout-seconds", "1"])
            .arg("--data-dir")
            .arg(&data)
            .envs(crate::common::own_database(&data))
            .env("GENIED_LOG_LEVEL", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    wait_ready(&mut child, &base).await;
    let client = reqwest::Client::new();
    envelope(
        &client,
        &base,
        &token,
        json!({"resource": "webhooks", "action": "create",
               "data": {"url": url, "event_types": ["genie.created"]}}),
    )
    .await;
    const EVENTS: usize = 12;
    for i in 0..EVENTS {
        envelope(
            &client,
            &base,
            &token,
            json!({"resource": "genies", "action": "create",
                   "data": {"genieName": format!("Genie {i}"), "systemPrompt": "You help."}}),
        )
        .await;
    }
    // Every delivery is queued (fan-out runs beside the request) and the first is in hand
    // (the receiver holds it): stop the service now.
    let count = |sql: &str| -> i64 {
        crate::common::query(&data, sql, &[genied::webhooks::DELIVER_JOB])[0][0]
            .as_deref()
            .unwrap()
            .parse()
            .unwrap()
    };
    let deliveries = || count("SELECT CAST(COUNT(*) AS TEXT) FROM jobs WHERE kind = $1");
    let end = Instant::now() + DEADLINE;
    while deliveries() < EVENTS as i64 || seen.load(Ordering::SeqCst) == 0 {
        assert!(
            Instant::now() < end,
            "{} deliveries queued, {} reached the receiver",
            deliveries(),
            seen.load(Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.signal(nix::sys::signal::Signal::SIGTERM);
    let status = child.wait(DEADLINE);
    assert!(status.success(), "exit: {status}");
    let delivered = seen.load(Ordering::SeqCst);
    assert!(
        delivered < 4,
        "{delivered} delivery attempts reached the receiver ({EVENTS} queued): shutdown drained the backlog"
    );
    // The rest are still queued for the next start, none lost.
    let queued =
        count("SELECT CAST(COUNT(*) AS TEXT) FROM jobs WHERE kind = $1 AND status = 'pending'");
    assert_eq!(
        queued as usize, EVENTS,
        "every delivery (the timed-out one for its retry) waits for the next start"
    );
}
