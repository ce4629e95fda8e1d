//! Observability (#20): the Prometheus listener. The metrics recorder is process-wide, so
//! the exact counts are checked against the real binary (its own process, its own
//! counters): known traffic, one scrape, every counter compared with what was sent. With
//! `GENIED_TEST_DATABASE=postgres` that binary runs on a database of the test cluster
//! (`own_database`), so the database metrics and spans are checked on either engine.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::fakes::openai::{API_KEY, Expect, FakeOpenAi, Turn};
use crate::common::process::{self, DEADLINE, Proc, free_port, wait_ready};
use crate::common::{TestApp, cli_env, own_database};

fn cli(data: &std::path::Path, args: &[&str]) -> String {
    let out = process::output(
        Command::new(env!("CARGO_BIN_EXE_genied"))
            .arg("--data-dir")
            .arg(data)
            .arg("--create-data-dir")
            .args(args)
            .envs(own_database(data)),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// `genied serve` on free ports with metrics on; returns the guard, the API base and the
/// metrics base.
async fn serve(data: &std::path::Path, extra: &[&str]) -> (Proc, String, String) {
    let (port, mport) = (free_port(), free_port());
    let mut p = Proc::spawn(
        Command::new(env!("CARGO_BIN_EXE_genied"))
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--metrics-listen", &format!("127.0.0.1:{mport}")])
            .args(["--allow-private-outbound", "--job-poll-ms", "20"])
            .args(extra)
            .arg("--data-dir")
            .arg(data)
            .envs(own_database(data))
            .env("GENIED_LOG_LEVEL", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    let base = format!("http://127.0.0.1:{port}");
    wait_ready(&mut p, &base).await;
    (p, base, format!("http://127.0.0.1:{mport}"))
}

/// The samples of a text exposition: `name{labels}` → value (labels as rendered).
fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let (k, v) = l.rsplit_once(' ')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

/// The value of the sample `name` whose labels are exactly `labels` (in any order).
fn sample(all: &BTreeMap<String, f64>, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    all.iter().find_map(|(k, v)| {
        let (n, rest) = k.split_once('{').unwrap_or((k.as_str(), "}"));
        if n != name {
            return None;
        }
        let mut got: Vec<String> = rest
            .trim_end_matches('}')
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        let mut want: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
        got.sort();
        want.sort();
        (got == want).then_some(*v)
    })
}

#[tokio::test]
async fn a_scrape_after_known_traffic_counts_it_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    cli(
        data,
        &["admin", "create-user", "--email", "ops@example.test"],
    );
    let token = cli(
        data,
        &["admin", "issue-token", "--email", "ops@example.test"],
    );
    let llm = FakeOpenAi::start(Expect::Any).await;
    let (_p, base, mbase) = serve(
        data,
        &[
            "--llm-base-url",
            &llm.base,
            "--llm-api-key",
            API_KEY,
            "--llm-model",
            "fake-model",
        ],
    )
    .await;
    let http = reqwest::Client::new();
    let call = |body: Value, auth: bool| {
        let mut r = http.post(format!("{base}/v1")).json(&body);
        if auth {
            r = r.bearer_auth(&token);
        }
        async move {
            let r = r.send().await.unwrap();
            let status = r.status().as_u16();
            (status, r.json::<Value>().await.unwrap())
        }
    };
    for _ in 0..3 {
        let (s, b) = call(json!({"resource": "genies", "action": "list"}), true).await;
        assert_eq!(s, 200, "{b}");
    }
    for _ in 0..2 {
        // A resource name a client made up never becomes a label.
        let (s, _) = call(json!({"resource": "secret-x91", "action": "list"}), true).await;
        assert_eq!(s, 400);
    }
    let (s, _) = call(json!({"resource": "genies", "action": "made-up-7"}), true).await;
    assert_eq!(s, 400);
    let (s, _) = call(json!({"resource": "genies", "action": "list"}), false).await;
    assert_eq!(s, 401);
    // The REST route of the same action counts under the same labels.
    let r = http
        .get(format!("{base}/v1/genies"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    for _ in 0..2 {
        assert_eq!(
            http.get(format!("{base}/healthz"))
                .send()
                .await
                .unwrap()
                .status(),
            200
        );
    }
    // One LLM call: a conversation analysed by the model.
    let (s, b) = call(
        json!({"resource": "genies", "action": "create", "data": {"genieName": "Metered"}}),
        true,
    )
    .await;
    assert_eq!(s, 201, "{b}");
    let genie = b["data"]["genie"]["id"].clone();
    let (s, b) = call(
        json!({"resource": "conversations", "action": "create", "data": {"genieId": genie,
            "transcript": [{"role": "user", "message": "hello"}]}}),
        true,
    )
    .await;
    assert_eq!(s, 201, "{b}");
    let conv = b["data"]["conversation"]["id"].clone();
    let (s, b) = call(
        json!({"resource": "conversations", "action": "analyze", "id": conv}),
        true,
    )
    .await;
    assert_eq!(s, 200, "{b}");
    assert!(llm.problems().is_empty(), "{:?}", llm.problems());
    assert_eq!(llm.requests().len(), 1);

    // The API port does not serve the metrics; the metrics port serves nothing else.
    assert_eq!(
        http.get(format!("{base}/metrics"))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    let other = http.get(format!("{mbase}/v1/genies")).send().await.unwrap();
    assert_eq!(other.status(), 404);
    let post = http.post(format!("{mbase}/metrics")).send().await.unwrap();
    assert_eq!(post.status(), 405);

    let resp = http.get(format!("{mbase}/metrics")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    let text = resp.text().await.unwrap();
    let all = samples(&text);
    let req = |r: &str, a: &str, s: &str| {
        sample(
            &all,
            "genied_http_requests_total",
            &[("resource", r), ("action", a), ("status", s)],
        )
    };
    assert_eq!(req("genies", "list", "200"), Some(4.0), "{text}");
    assert_eq!(req("unknown", "unknown", "400"), Some(2.0), "{text}");
    assert_eq!(req("genies", "unknown", "400"), Some(1.0), "{text}");
    assert_eq!(req("genies", "list", "401"), Some(1.0), "{text}");
    assert_eq!(req("http", "healthz", "200"), Some(2.0), "{text}");
    assert_eq!(req("genies", "create", "201"), Some(1.0), "{text}");
    assert_eq!(req("conversations", "analyze", "200"), Some(1.0), "{text}");
    let dur = |r: &str, a: &str, s: &str| {
        sample(
            &all,
            "genied_http_request_duration_seconds_count",
            &[("resource", r), ("action", a), ("status", s)],
        )
    };
    assert_eq!(dur("genies", "list", "2xx"), Some(4.0), "{text}");
    assert_eq!(dur("genies", "list", "4xx"), Some(1.0), "{text}");
    let model = [("model", "fake-model")];
    assert_eq!(
        sample(
            &all,
            "genied_llm_requests_total",
            &[("model", "fake-model"), ("outcome", "ok")]
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&all, "genied_llm_request_duration_seconds_count", &model),
        Some(1.0)
    );
    // The fake answers every call with usage 10 in, 5 out.
    let tokens = |k: &str| {
        sample(
            &all,
            "genied_llm_tokens_total",
            &[("model", "fake-model"), ("kind", k)],
        )
    };
    assert_eq!(tokens("input"), Some(10.0), "{text}");
    assert_eq!(tokens("output"), Some(5.0), "{text}");
    // The database figures: every write above went through the writer and committed.
    assert!(sample(&all, "genied_db_commit_duration_seconds_count", &[]).unwrap_or(0.0) >= 3.0);
    // The gauge is there; a write of the event outbox's fan-out may be queued at the moment
    // of a scrape, so it must come back to 0 (nothing leaks on it), not read 0 at once.
    assert!(
        sample(&all, "genied_db_write_queue_depth", &[]).is_some(),
        "{text}"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (depth, _) = db_figures(&http, &mbase).await;
        if depth == Some(0.0) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the write queue depth stayed at {depth:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // The analysed conversation is `done`: none is under way.
    assert_eq!(
        sample(&all, "genied_conversations_active", &[]),
        Some(0.0),
        "{text}"
    );
    // The process figures.
    for name in ["process_resident_memory_bytes", "process_open_fds"] {
        assert!(
            sample(&all, name, &[]).is_some_and(|v| v > 0.0),
            "{name}: {text}"
        );
    }
    assert!(sample(&all, "process_cpu_seconds_total", &[]).is_some_and(|v| v >= 0.0));
    // No id, token, e-mail address or made-up name is a label value.
    for secret in [
        token.as_str(),
        "ops@example.test",
        "secret-x91",
        "made-up-7",
    ] {
        assert!(!text.contains(secret), "{secret} in the scrape");
    }
    for id in [&genie, &conv] {
        assert!(!text.contains(id.as_str().unwrap()));
    }
}

/// One scrape of `mbase`'s `/metrics`, as samples.
async fn scrape(http: &reqwest::Client, mbase: &str) -> BTreeMap<String, f64> {
    let text = http
        .get(format!("{mbase}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    samples(&text)
}

/// The value of `genied_db_write_queue_depth` and of the commit histogram's count in one
/// scrape of `mbase`.
async fn db_figures(http: &reqwest::Client, mbase: &str) -> (Option<f64>, f64) {
    let all = scrape(http, mbase).await;
    (
        sample(&all, "genied_db_write_queue_depth", &[]),
        sample(&all, "genied_db_commit_duration_seconds_count", &[]).unwrap_or(0.0),
    )
}

/// On PostgreSQL a write waits its turn for the write lock (every instance's writes take
/// it): while another session holds it, `genied_db_write_queue_depth` counts the writes
/// waiting (the three requests among them), of which only one waits on the server with a
/// pooled connection (the others wait for this instance's turn in memory), so a read still
/// finds a connection in a pool of two; once the lock goes they commit, each COMMIT in the
/// histogram, and the gauge is back at 0. On SQLite the writer takes a write off the gauge
/// before it waits for the file's lock (the gauge counts the queue before the writer), so
/// there the scrape test above is the check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_write_queue_depth_counts_the_writes_waiting_for_the_postgres_write_lock() {
    if !crate::common::postgres::enabled() {
        eprintln!("PostgreSQL only (GENIED_TEST_DATABASE=postgres)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    cli(data, &["admin", "create-user", "--email", "q@example.test"]);
    let token = cli(data, &["admin", "issue-token", "--email", "q@example.test"]);
    let url = own_database(data)
        .into_iter()
        .find(|(k, _)| *k == "GENIED_DATABASE_URL")
        .expect("the test's database")
        .1;
    // A pool of two connections (two per read thread): fewer than the writes that will wait.
    let (_p, base, mbase) = serve(data, &["--read-threads", "1"]).await;
    let http = reqwest::Client::new();
    let (_, commits_before) = db_figures(&http, &mbase).await;

    let lock = crate::common::postgres::hold_advisory_lock(&url, genied::db::pg::WRITE_LOCK);
    let writes: Vec<_> = (0..3)
        .map(|i| {
            let req = http
                .post(format!("{base}/v1"))
                .bearer_auth(&token)
                .json(&json!({"resource": "genies", "action": "create",
                              "data": {"genieName": format!("Queued {i}")}}));
            tokio::spawn(async move {
                let r = req.send().await.unwrap();
                (r.status().as_u16(), r.text().await.unwrap())
            })
        })
        .collect();
    // Sessions of this database waiting for an advisory lock: the service's writes (the
    // three requests, and any background write that came by), not the test's own holder.
    let waiting_on_server = || -> f64 {
        let rows = crate::common::postgres::query(
            &url,
            "SELECT CAST(COUNT(*) AS TEXT) FROM pg_locks l JOIN pg_database d ON d.oid = l.database \
             WHERE l.locktype = 'advisory' AND NOT l.granted AND d.datname = current_database()",
            &[],
        );
        rows[0][0].as_deref().unwrap().parse().unwrap()
    };
    let end = Instant::now() + DEADLINE;
    loop {
        let (depth, _) = db_figures(&http, &mbase).await;
        let server = waiting_on_server();
        if depth.is_some_and(|d| d >= 3.0) && server == 1.0 {
            break;
        }
        assert!(
            Instant::now() < end,
            "queue depth {depth:?}, waiting on the server {server}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Reads go on while the writes wait (the pool's other connection).
    let r = http
        .post(format!("{base}/v1"))
        .bearer_auth(&token)
        .timeout(Duration::from_secs(20))
        .json(&json!({"resource": "genies", "action": "all", "data": {}}))
        .send()
        .await
        .expect("a read answers while writes wait for the lock");
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(waiting_on_server(), 1.0, "one write waits on the server");

    drop(lock);
    for w in writes {
        let (status, body) = w.await.unwrap();
        assert_eq!(status, 201, "{body}");
    }
    let end = Instant::now() + DEADLINE;
    loop {
        let (depth, commits) = db_figures(&http, &mbase).await;
        if depth == Some(0.0) && commits >= commits_before + 3.0 {
            break;
        }
        assert!(
            Instant::now() < end,
            "queue depth {depth:?}, commits {commits} (before: {commits_before})"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `genied admin check --json` on `data` with `extra` flags: exit status success, and the report.
fn admin_check(data: &std::path::Path, extra: &[&str]) -> (bool, Value) {
    let out = process::output(
        Command::new(env!("CARGO_BIN_EXE_genied"))
            .arg("--data-dir")
            .arg(data)
            .args(["admin", "check", "--json"])
            .args(extra)
            .envs(cli_env(data)),
    );
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
    (out.status.success(), report)
}

/// Polls `/readyz` until it answers `status`; returns the last body.
async fn readyz_until(app: &TestApp, status: u16) -> Value {
    let end = Instant::now() + DEADLINE;
    loop {
        let r = app.request(Method::GET, "/readyz", None, None).await;
        if r.status == status {
            return r.body;
        }
        assert!(
            Instant::now() < end,
            "/readyz stayed {}: {}",
            r.status,
            r.body
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Another process holds the database's write lock: `/readyz` answers 503 with the envelope
/// (the service cannot take a write), `admin check` says the same and exits 1, and once the
/// lock goes the service is ready again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_and_check_fail_while_the_database_cannot_be_written() {
    let app = TestApp::spawn().await;
    let r = app.request(Method::GET, "/readyz", None, None).await;
    assert_eq!((r.status, &r.body), (200, &json!({"status": "ready"})));
    let (ok, report) = admin_check(app.dir.path(), &[]);
    assert!(ok, "{report}");
    assert_eq!(report["database_writable"], json!(true));
    assert_eq!(report["worker"]["state"], json!("running"), "{report}");

    // Another writer holds the database: on SQLite an exclusive transaction on the file, on
    // PostgreSQL another session holding the lock every write of genied takes first.
    let pg_lock =
        app.state.config.postgres_url().map(|url| {
            crate::common::postgres::hold_advisory_lock(url, genied::db::pg::WRITE_LOCK)
        });
    let lock = pg_lock.is_none().then(|| {
        let lock = rusqlite::Connection::open(app.dir.path().join("genied.db")).unwrap();
        lock.execute_batch("BEGIN EXCLUSIVE").unwrap();
        lock
    });
    let r = app.request(Method::GET, "/readyz", None, None).await;
    r.err(503, "SERVICE_UNAVAILABLE");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("database"),
        "{}",
        r.body
    );
    let (ok, report) = admin_check(app.dir.path(), &[]);
    assert!(!ok);
    assert_eq!(report["database_writable"], json!(false), "{report}");
    assert!(
        report["problems"][0]
            .as_str()
            .unwrap()
            .contains("cannot be written"),
        "{report}"
    );
    if let Some(lock) = lock {
        lock.execute_batch("ROLLBACK").unwrap();
    }
    drop(pg_lock);
    readyz_until(&app, 200).await;
}

/// The worker is held by a delivery to a receiver that never answers while another job falls
/// due: past `--job-stall-seconds`, `/readyz` answers 503 naming the stalled worker, and
/// `admin check` (another process, reading the heartbeat the service records) reports the
/// same and exits 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_and_check_fail_when_the_job_worker_has_stalled() {
    let (url, seen) = silent_receiver().await;
    let app = TestApp::spawn_with(|c| {
        c.job_stall_seconds = 1;
        c.webhook_timeout_seconds = 600;
    })
    .await;
    let u = app.standard().await;
    app.call(
        &u.token,
        "webhooks",
        "create",
        None,
        json!({"url": url, "event_types": ["genie.created"]}),
    )
    .await
    .ok(201);
    // Healthy so far: nothing is due.
    readyz_until(&app, 200).await;
    insert_genie_via_api(&app, &u).await;
    let end = Instant::now() + DEADLINE;
    while seen.load(Ordering::SeqCst) == 0 {
        assert!(
            Instant::now() < end,
            "the delivery never reached the receiver"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The worker is now inside the delivery; a job falls due behind it.
    app.state
        .db
        .write(|c| {
            Ok(genied::jobs::enqueue(
                c,
                "noop",
                &json!({}),
                Duration::ZERO,
                None,
            )?)
        })
        .await
        .unwrap();
    let body = readyz_until(&app, 503).await;
    assert_eq!(body["success"], json!(false));
    assert_eq!(body["error"]["code"], json!("SERVICE_UNAVAILABLE"));
    assert_eq!(body["error"]["status"], json!(503));
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("stalled") && msg.contains("--job-stall-seconds"),
        "{msg}"
    );

    let (ok, report) = admin_check(app.dir.path(), &["--job-stall-seconds", "1"]);
    assert!(!ok, "{report}");
    assert_eq!(report["worker"]["state"], json!("stalled"), "{report}");
    assert!(report["worker"]["oldest_due_age_seconds"].as_i64().unwrap() >= 1);
    assert!(
        report["problems"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p.as_str().unwrap().contains("stalled")),
        "{report}"
    );
    // The same data with a limit the wait has not reached: not stalled.
    let (_, report) = admin_check(app.dir.path(), &["--job-stall-seconds", "3600"]);
    assert_eq!(report["worker"]["state"], json!("running"), "{report}");
}

async fn insert_genie_via_api(app: &TestApp, u: &crate::common::User) {
    app.call(
        &u.token,
        "genies",
        "create",
        None,
        json!({"genieName": "Stall"}),
    )
    .await
    .ok(201);
}

/// A receiver that reads a webhook delivery's head and never answers. Counts deliveries.
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

/// Page chat turns record their figures on the conversation, and `get` shows them: turns,
/// duration, each LLM turn's latency, tokens (the endpoint's `usage`), tool calls, and the
/// cost from the operator's price table.
#[tokio::test]
async fn conversation_get_shows_each_llm_turns_figures_and_its_cost() {
    let llm = FakeOpenAi::start(Expect::Any).await;
    let prices = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        prices.path(),
        r#"{"currency": "EUR", "models": {"priced-model": {"input_per_million": 2.5, "output_per_million": 10}}}"#,
    )
    .unwrap();
    let path = prices.path().to_path_buf();
    let app = TestApp::spawn_with(|c| {
        llm.configure(c);
        c.llm_prices = Some(path);
    })
    .await;
    let owner = app.standard().await;
    let gid = crate::common::insert_genie_with(
        &app,
        &owner,
        "Counter",
        json!({"page_slug": "counter", "llm_model": "priced-model"}),
    )
    .await;
    // The second answer takes at least 300 ms.
    llm.push([
        Turn::Answer("First answer."),
        Turn::Slow(
            Duration::from_millis(300),
            Box::new(Turn::Answer("Second answer.")),
        ),
    ]);
    let first = say(&app, "counter", None, "hello").await;
    let conv = first.body["data"]["conversation_id"]
        .as_str()
        .unwrap()
        .to_string();
    let second = say(&app, "counter", Some(&conv), "and then?").await;
    assert_eq!(
        second.body["data"]["reply"],
        json!("Second answer."),
        "{}",
        second.body
    );
    assert!(llm.problems().is_empty(), "{:?}", llm.problems());

    let got = app
        .call(
            &owner.token,
            "conversations",
            "get",
            Some(json!(conv)),
            json!({}),
        )
        .await;
    let f = &got.ok(200)["conversation"]["figures"];
    assert_eq!(f["turns"], json!(4), "{f}");
    let l = &f["llm"];
    assert_eq!(l["calls"], json!(2));
    // The fake answers every call with usage 10 in, 5 out.
    assert_eq!(
        (l["tokens_in"].clone(), l["tokens_out"].clone()),
        (json!(20), json!(10))
    );
    assert_eq!(l["tool_calls"], json!(0));
    let turns = l["per_turn"].as_array().unwrap();
    assert_eq!(turns.len(), 2);
    for t in turns {
        assert_eq!(t["model"], json!("priced-model"));
        // Not streamed: the first token arrives with the whole answer.
        assert_eq!(t["first_token_ms"], t["total_ms"]);
        assert_eq!(t["currency"], json!("EUR"));
        // 10 × 2.5 + 5 × 10 = 75 millionths.
        assert_eq!(t["cost"], json!(0.000075));
    }
    assert!(turns[1]["total_ms"].as_i64().unwrap() >= 300, "{l}");
    assert_eq!(l["total_ms"]["max"], turns[1]["total_ms"]);
    assert_eq!(
        f["estimated_cost"],
        json!({"amount": 0.00015, "currency": "EUR", "priced_turns": 2, "unpriced_turns": 0})
    );
    // Lists stay light: no figures there.
    let list = app
        .call(&owner.token, "conversations", "all", None, json!({}))
        .await;
    assert!(list.ok(200)["conversations"][0].get("figures").is_none());

    // A model the table does not price: its turns are counted, no cost is invented.
    crate::common::insert_genie_with(
        &app,
        &owner,
        "Unpriced",
        json!({"page_slug": "unpriced", "llm_model": "unknown-model"}),
    )
    .await;
    let r = say(&app, "unpriced", None, "hi").await;
    let conv2 = r.body["data"]["conversation_id"]
        .as_str()
        .unwrap()
        .to_string();
    let got = app
        .call(
            &owner.token,
            "conversations",
            "get",
            Some(json!(conv2)),
            json!({}),
        )
        .await;
    let f = &got.ok(200)["conversation"]["figures"];
    assert_eq!(f["estimated_cost"], Value::Null, "{f}");
    assert_eq!(f["llm"]["per_turn"][0]["cost"], Value::Null);
    assert_eq!(f["llm"]["tokens_in"], json!(10));
    let _ = gid;
}

/// Posts one message to the page chat of `slug`.
async fn say(
    app: &TestApp,
    slug: &str,
    conversation: Option<&str>,
    message: &str,
) -> crate::common::Resp {
    let body = json!({"conversation_id": conversation, "message": message}).to_string();
    app.raw(
        Method::POST,
        &format!("/g/{slug}/chat"),
        &[("content-type", "application/json")],
        body,
    )
    .await
}

/// A bad price table stops `serve` before it listens, with one line naming the file and
/// the problem.
#[test]
fn serve_refuses_a_bad_price_table_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("prices.json");
    let cases: [(Option<&str>, &str); 4] = [
        (None, "cannot read it"),
        (Some("not json"), "not a price table"),
        (
            Some(r#"{"models": {"m": {"input_per_million": -1, "output_per_million": 2}}}"#),
            "models.m.input_per_million must be a number of at least 0",
        ),
        (
            Some(r#"{"models": {"m": {"input_per_million": 1, "output": 2}}}"#),
            "unknown field `output`",
        ),
    ];
    for (content, want) in cases {
        let _ = std::fs::remove_file(&file);
        if let Some(c) = content {
            std::fs::write(&file, c).unwrap();
        }
        let out = process::output(
            Command::new(env!("CARGO_BIN_EXE_genied"))
                .args(["serve", "--listen", &format!("127.0.0.1:{}", free_port())])
                .arg("--llm-prices")
                .arg(&file)
                .arg("--data-dir")
                .arg(dir.path().join("data")),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(
            err.contains("--llm-prices") && err.contains(want),
            "{want}: {err}"
        );
        assert!(err.contains(&file.display().to_string()), "{err}");
    }
}

/// Inserts a conversation row as the service stores them (the rollup triggers run as for
/// any write).
async fn seed_conversation(
    app: &TestApp,
    user: &str,
    genie: &str,
    started: &str,
    duration: i64,
    analysis: Option<Value>,
) -> String {
    let (id, user, genie, started) = (
        uuid::Uuid::now_v7().to_string(),
        user.to_string(),
        genie.to_string(),
        started.to_string(),
    );
    let id2 = id.clone();
    app.state
        .db
        .write(move |c| {
            c.execute(
                "INSERT INTO conversations (id, user_id, genie_id, channel, status, started_at,
                     duration_seconds, analysis, created_at, updated_at)
                 VALUES (?1, ?2, ?3, 'phone', 'done', ?4, ?5, ?6, ?4, ?4)",
                rusqlite::params![
                    id2,
                    user,
                    genie,
                    started,
                    duration,
                    analysis.map(|a| a.to_string())
                ],
            )?;
            Ok(())
        })
        .await
        .unwrap();
    id
}

async fn seed_lead(app: &TestApp, user: &str, genie: &str, created: &str, status: &str) {
    let (user, genie, created, status) = (
        user.to_string(),
        genie.to_string(),
        created.to_string(),
        status.to_string(),
    );
    app.state
        .db
        .write(move |c| {
            c.execute(
                "INSERT INTO leads (agent_id, user_id, name, status, created_at)
                 VALUES (genied_key(?1), genied_key(?2), 'L', ?3, ?4)",
                // Lead times are stored as milliseconds (V40).
                rusqlite::params![genie, user, status, genied::db::text_ms(&created)?],
            )?;
            Ok(())
        })
        .await
        .unwrap();
}

/// Analytics against seeded data with known answers: the owner's overview and series,
/// narrowed to a genie, the admins' all-users view, refusals, and the rollups following a
/// delete made through the API.
#[tokio::test]
async fn analytics_answers_known_figures_from_seeded_data() {
    let prices = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        prices.path(),
        r#"{"currency": "EUR", "models": {"m1": {"input_per_million": 1, "output_per_million": 2}}}"#,
    )
    .unwrap();
    let path = prices.path().to_path_buf();
    let app = TestApp::spawn_with(|c| c.llm_prices = Some(path)).await;
    let (a, b, admin) = (
        app.standard().await,
        app.standard().await,
        app.admin().await,
    );
    let g1 = crate::common::insert_genie(&app, &a, "One").await;
    let g2 = crate::common::insert_genie(&app, &a, "Two").await;
    let g3 = crate::common::insert_genie(&app, &b, "Three").await;
    let good = Some(json!({"sentiment": "positive", "intent": "purchase"}));
    let bad = Some(json!({"sentiment": "negative", "intent": "support"}));
    let fine = Some(json!({"sentiment": "neutral", "intent": "booking"}));
    seed_conversation(&app, &a.id, &g1, "2026-01-10T09:15:00.000Z", 60, good).await;
    let c2 = seed_conversation(&app, &a.id, &g1, "2026-01-10T09:45:00.000Z", 120, bad).await;
    seed_conversation(&app, &a.id, &g1, "2026-01-10T11:05:00.000Z", 30, None).await;
    let c4 = seed_conversation(&app, &a.id, &g2, "2026-01-11T08:00:00.000Z", 90, fine).await;
    seed_conversation(&app, &a.id, &g1, "2026-02-01T08:00:00.000Z", 999, None).await;
    seed_conversation(&app, &b.id, &g3, "2026-01-10T09:30:00.000Z", 600, None).await;
    // One LLM turn on c4: 1000 × 1 + 500 × 2 = 2000 millionths.
    let st = app.state.clone();
    app.state
        .db
        .write(move |c| {
            let f = genied::service::conversation_figures::TurnFigures {
                model: "m1".into(),
                first_token_ms: 40,
                total_ms: 90,
                tokens_in: 1000,
                tokens_out: 500,
                tool_calls: 1,
            };
            Ok(genied::service::conversation_figures::record_in(
                c, &st.prices, &c4, &f,
            )?)
        })
        .await
        .unwrap();
    seed_lead(&app, &a.id, &g1, "2026-01-10T10:00:00.000Z", "new").await;
    seed_lead(&app, &a.id, &g1, "2026-01-10T12:00:00.000Z", "converted").await;
    seed_lead(&app, &a.id, &g2, "2026-01-11T09:00:00.000Z", "qualified").await;
    seed_lead(&app, &b.id, &g3, "2026-01-10T09:00:00.000Z", "converted").await;

    let range = json!({"from": "2026-01-10T00:00:00Z", "to": "2026-01-11T23:59:59Z"});
    let overview = |user: &crate::common::User, data: Value| {
        let (app, token) = (&app, user.token.clone());
        async move { app.call(&token, "analytics", "overview", None, data).await }
    };
    let r = overview(&a, json!({"dateRange": range})).await;
    assert_eq!(
        r.ok(200)["overview"],
        json!({
            "from": "2026-01-10T00:00:00.000Z", "to": "2026-01-11T23:59:59.999Z", "genie_id": null,
            "conversations": 4, "average_duration_seconds": 75.0, "analyzed": 3, "successes": 2,
            "success_rate": 0.6667,
            "leads": {"total": 3, "by_status": {"converted": 1, "new": 1, "qualified": 1},
                      "converted": 1, "conversion_rate": 0.3333},
            "llm": {"tokens_in": 1000, "tokens_out": 500,
                    "estimated_cost": {"amount": 0.002, "currency": "EUR"}},
        })
    );
    // Partial first and last days are read by the hour: 10th 09h to 11th 08h.
    let edges = json!({"from": "2026-01-10T09:30:00Z", "to": "2026-01-11T08:30:00Z"});
    let r = overview(&a, json!({"dateRange": edges})).await;
    let o = &r.ok(200)["overview"];
    assert_eq!(
        (o["conversations"].clone(), o["leads"]["total"].clone()),
        (json!(4), json!(2)),
        "{o}"
    );
    let r = overview(&a, json!({"dateRange": range, "genie_id": g1})).await;
    let o = &r.ok(200)["overview"];
    assert_eq!(
        (
            o["conversations"].clone(),
            o["average_duration_seconds"].clone(),
            o["success_rate"].clone()
        ),
        (json!(3), json!(70.0), json!(0.5))
    );
    assert_eq!(o["leads"]["total"], json!(2));
    assert_eq!(o["leads"]["conversion_rate"], json!(0.5));
    // Admins see everyone's with adminMode, their own without.
    let r = overview(&admin, json!({"dateRange": range, "adminMode": true})).await;
    let o = &r.ok(200)["overview"];
    assert_eq!(o["conversations"], json!(5));
    assert_eq!(o["leads"]["total"], json!(4));
    assert_eq!(o["leads"]["conversion_rate"], json!(0.5));
    let r = overview(&admin, json!({"dateRange": range})).await;
    assert_eq!(r.ok(200)["overview"]["conversations"], json!(0));
    // Another user's genie reads as absent; adminMode is for admins.
    overview(&a, json!({"dateRange": range, "genie_id": g3}))
        .await
        .err(404, "AGENT_NOT_FOUND");
    overview(&a, json!({"adminMode": true}))
        .await
        .err(403, "FORBIDDEN");

    let series = |data: Value| {
        let (app, token) = (&app, a.token.clone());
        async move {
            let r = app
                .call(&token, "analytics", "timeseries", None, data)
                .await;
            let points = r.ok(200)["timeseries"]["points"].clone();
            points
                .as_array()
                .unwrap()
                .iter()
                .map(|p| (p["t"].as_str().unwrap().to_string(), p["value"].clone()))
                .collect::<Vec<_>>()
        }
    };
    let hours = json!({"from": "2026-01-10T08:00:00Z", "to": "2026-01-10T12:30:00Z"});
    let got =
        series(json!({"metric": "conversations", "interval": "hour", "dateRange": hours})).await;
    assert_eq!(
        got,
        [(8, 0), (9, 2), (10, 0), (11, 1), (12, 0)]
            .map(|(h, v)| (format!("2026-01-10T{h:02}:00:00.000Z"), json!(v)))
            .to_vec()
    );
    let days = |metric: &str| json!({"metric": metric, "interval": "day", "dateRange": range});
    let values = |pts: Vec<(String, Value)>| pts.into_iter().map(|p| p.1).collect::<Vec<_>>();
    let got = series(days("success_rate")).await;
    assert_eq!(got[0].0, "2026-01-10T00:00:00.000Z");
    assert_eq!(values(got), [json!(0.5), json!(1.0)]);
    assert_eq!(values(series(days("leads")).await), [json!(2), json!(1)]);
    assert_eq!(
        values(series(days("conversion_rate")).await),
        [json!(0.5), json!(0.0)]
    );
    assert_eq!(
        values(series(days("cost")).await),
        [json!(0.0), json!(0.002)]
    );
    assert_eq!(
        values(series(days("average_duration_seconds")).await),
        [json!(70.0), json!(90.0)]
    );

    // Bad input is refused with the member named.
    for (data, word) in [
        (json!({"metric": "bogus", "interval": "day"}), "data.metric"),
        (
            json!({"metric": "leads", "interval": "week"}),
            "data.interval",
        ),
        (
            json!({"metric": "leads", "interval": "day", "dateRange": "yesterday"}),
            "data.dateRange",
        ),
        (
            json!({"metric": "leads", "interval": "hour", "dateRange": {"from": "2001-01-01T00:00:00Z"}}),
            "data.interval",
        ),
        (
            json!({"metric": "leads", "interval": "day", "dateRange": {"from": "soon"}}),
            "data.dateRange.from",
        ),
    ] {
        let r = app
            .call(&a.token, "analytics", "timeseries", None, data.clone())
            .await;
        r.err(400, "VALIDATION_ERROR");
        assert!(
            r.body["error"]["message"].as_str().unwrap().contains(word),
            "{data}: {}",
            r.body
        );
    }

    // A delete through the API leaves the rollup in step.
    app.call(
        &a.token,
        "conversations",
        "delete",
        Some(json!(c2)),
        json!({}),
    )
    .await
    .ok(200);
    let got =
        series(json!({"metric": "conversations", "interval": "hour", "dateRange": hours})).await;
    assert_eq!(got[1].1, json!(1));
    let r = overview(&a, json!({"dateRange": range})).await;
    let o = &r.ok(200)["overview"];
    assert_eq!(
        (o["conversations"].clone(), o["success_rate"].clone()),
        (json!(3), json!(1.0))
    );
}

/// Each delivery a receiver got: whether it was a POST to `/hook`, and its `traceparent`.
type Deliveries = Arc<std::sync::Mutex<Vec<(bool, Option<String>)>>>;

/// A webhook receiver that answers 200 and records each delivery's `traceparent` (and
/// whether it was a POST to `/hook`).
async fn tracing_receiver() -> (String, Deliveries) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let seen: Deliveries = Arc::default();
    let s2 = seen.clone();
    let app = axum::Router::new().fallback(
        move |method: axum::http::Method, uri: axum::http::Uri, headers: axum::http::HeaderMap| {
            let s2 = s2.clone();
            async move {
                let ok = method == axum::http::Method::POST && uri.path() == "/hook";
                let tp = headers
                    .get("traceparent")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string);
                s2.lock().unwrap().push((ok, tp));
                "ok"
            }
        },
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, seen)
}

/// Traces to a fake OTLP collector: a request span with its resource, action, status and
/// request id, child of the caller's `traceparent`; database, LLM, job, webhook and fetch
/// spans under their parents; `traceparent` carried on to the LLM endpoint and the webhook
/// receiver; no token, e-mail address or transcript text in any attribute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_reach_the_collector_with_their_parents_and_attributes() {
    use crate::common::fakes::otlp::{FakeCollector, Span};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    cli(
        data,
        &["admin", "create-user", "--email", "tracer@example.test"],
    );
    let token = cli(
        data,
        &["admin", "issue-token", "--email", "tracer@example.test"],
    );
    let llm = FakeOpenAi::start(Expect::Any).await;
    let collector = FakeCollector::start().await;
    let (hook_url, deliveries) = tracing_receiver().await;
    let (_p, base, _m) = serve(
        data,
        &[
            "--otlp-endpoint",
            &collector.base,
            "--llm-base-url",
            &llm.base,
            "--llm-api-key",
            API_KEY,
            "--llm-model",
            "fake-model",
        ],
    )
    .await;
    let http = reqwest::Client::new();
    const T1: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    const P1: &str = "00f067aa0ba902b7";
    const T2: &str = "0af7651916cd43dd8448eb211c80319c";
    let call = |body: Value, trace: &str| {
        let req = http
            .post(format!("{base}/v1"))
            .bearer_auth(&token)
            .header("traceparent", format!("00-{trace}-{P1}-01"))
            .header("x-request-id", format!("req-{trace}"))
            .json(&body);
        async move {
            let r = req.send().await.unwrap();
            let s = r.status().as_u16();
            (s, r.json::<Value>().await.unwrap())
        }
    };
    let (s, _) = call(json!({"resource": "genies", "action": "list"}), T1).await;
    assert_eq!(s, 200);
    let (s, b) = call(
        json!({"resource": "webhooks", "action": "create",
               "data": {"url": hook_url, "event_types": ["genie.created"]}}),
        "11111111111111111111111111111111",
    )
    .await;
    assert_eq!(s, 201, "{b}");
    let (s, b) = call(
        json!({"resource": "genies", "action": "create", "data": {"genieName": "Traced"}}),
        "22222222222222222222222222222222",
    )
    .await;
    assert_eq!(s, 201, "{b}");
    let genie = b["data"]["genie"]["id"].clone();
    let (s, b) = call(
        json!({"resource": "conversations", "action": "create", "data": {"genieId": genie,
            "transcript": [{"role": "user", "message": "my secret is plum"}]}}),
        "33333333333333333333333333333333",
    )
    .await;
    assert_eq!(s, 201, "{b}");
    let conv = b["data"]["conversation"]["id"].clone();
    let (s, b) = call(
        json!({"resource": "conversations", "action": "analyze", "id": conv}),
        T2,
    )
    .await;
    assert_eq!(s, 200, "{b}");

    // Everything arrives within the deadline: the request spans, the LLM call's, the job's.
    let end = Instant::now() + DEADLINE;
    let find = |spans: &[Span], name: &str, trace: Option<&str>| -> Option<Span> {
        spans
            .iter()
            .find(|s| s.name == name && trace.is_none_or(|t| s.trace_id == t))
            .cloned()
    };
    let spans = loop {
        let spans = collector.spans();
        let done = find(&spans, "llm.chat", Some(T2)).is_some()
            && find(&spans, "request", Some(T1)).is_some()
            && find(&spans, "db.read", Some(T1)).is_some()
            && find(&spans, "http.fetch", None).is_some()
            && !deliveries.lock().unwrap().is_empty();
        if done {
            break spans;
        }
        assert!(Instant::now() < end, "spans missing: {spans:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        collector.problems().is_empty(),
        "{:?}",
        collector.problems()
    );
    assert!(spans.iter().all(|s| s.service == "genied"));

    let r1 = find(&spans, "request", Some(T1)).unwrap();
    assert_eq!(r1.parent_span_id, P1, "the caller's span is the parent");
    assert_eq!(r1.attributes["resource"], "genies");
    assert_eq!(r1.attributes["action"], "list");
    assert_eq!(r1.attributes["status"], "200");
    assert_eq!(r1.attributes["request_id"], format!("req-{T1}"));
    let read = find(&spans, "db.read", Some(T1)).unwrap();
    assert_eq!(read.parent_span_id, r1.span_id, "db.read under the request");

    let r2 = find(&spans, "request", Some(T2)).unwrap();
    assert_eq!(r2.attributes["action"], "analyze");
    let chat = find(&spans, "llm.chat", Some(T2)).unwrap();
    assert_eq!(chat.attributes["model"], "fake-model");
    // The LLM span sits under the request (through any spans between).
    let mut up = chat.parent_span_id.clone();
    let mut hops = 0;
    while up != r2.span_id {
        let parent = spans
            .iter()
            .find(|s| s.span_id == up)
            .unwrap_or_else(|| panic!("no parent {up}"));
        up = parent.parent_span_id.clone();
        hops += 1;
        assert!(hops < 10, "llm.chat is not under its request");
    }
    assert!(
        spans
            .iter()
            .any(|s| s.name == "db.write" && s.trace_id == T2 && s.parent_span_id == r2.span_id),
        "db.write under the analyze request"
    );
    // The LLM endpoint was told the trace and the calling span.
    let sent = llm.requests();
    let tp = sent
        .last()
        .and_then(|r| r.headers.get("traceparent"))
        .and_then(|v| v.to_str().ok())
        .expect("traceparent sent to the LLM")
        .to_string();
    assert_eq!(tp, format!("00-{T2}-{}-01", chat.span_id));

    // The delivery job: a root span of its own, with the delivery and the fetch under it, and
    // the fetch's traceparent at the receiver.
    let job = spans
        .iter()
        .find(|s| {
            s.name == "job"
                && s.attributes.get("kind").map(String::as_str) == Some("webhook.deliver")
        })
        .expect("job span");
    assert_eq!(job.parent_span_id, "");
    let deliver = spans
        .iter()
        .find(|s| s.name == "webhook.deliver" && s.parent_span_id == job.span_id)
        .expect("webhook.deliver under the job");
    let fetch = spans
        .iter()
        .find(|s| s.name == "http.fetch" && s.trace_id == job.trace_id)
        .expect("http.fetch in the job's trace");
    let (ok, tp) = deliveries.lock().unwrap()[0].clone();
    assert!(ok);
    assert_eq!(
        tp,
        Some(format!("00-{}-{}-01", job.trace_id, fetch.span_id))
    );
    let _ = deliver;

    for s in &spans {
        for v in s.attributes.values() {
            for secret in [token.as_str(), "tracer@example.test", "plum", API_KEY] {
                assert!(!v.contains(secret), "{secret} in {s:?}");
            }
        }
    }
}

/// `genied_http_requests_in_flight` counts a request from the moment its headers are read
/// until it ends, an abandoned one included: a POST whose body never finishes arriving is in
/// flight (the gauge reads 1 with nothing else running in that process), and once the client
/// hangs up it is not (back to 0, polled: the server notices the closed socket on its own
/// time). The scrape's own request is on the metrics port and not counted.
#[tokio::test]
async fn the_in_flight_gauge_counts_a_request_until_it_ends_or_is_abandoned() {
    use tokio::io::AsyncWriteExt;
    let dir = tempfile::tempdir().unwrap();
    let (_p, base, mbase) = serve(dir.path(), &[]).await;
    let http = reqwest::Client::new();
    let in_flight = || async {
        sample(
            &scrape(&http, &mbase).await,
            "genied_http_requests_in_flight",
            &[],
        )
    };
    let wait_for = |want: f64| async move {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let got = in_flight().await;
            if got == Some(want) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "in flight: {got:?}, waited for {want}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let status = http
        .get(format!("{base}/healthz"))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 200);
    wait_for(0.0).await;
    let addr = base.trim_start_matches("http://");
    let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
    sock.write_all(
        format!(
            "POST /v1 HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
             content-length: 100\r\n\r\n{{\"resource\":"
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    wait_for(1.0).await;
    drop(sock);
    wait_for(0.0).await;
}

/// Log lines written inside a request carry it (`telemetry::context`; no span a request
/// while traces are not exported): its id, method, path, resource and action, in either log
/// format, from the real binary. The genie create's `event` line (debug) is written on the
/// request's own task once its write committed.
#[tokio::test]
async fn log_lines_carry_the_request_they_were_written_in() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let password = "Log-lines-pass-9d2e";
    cli(
        &data,
        &[
            "admin",
            "create-user",
            "--email",
            "l@example.test",
            "--password",
            password,
        ],
    );
    for format in ["json", "text"] {
        let (port, log_path) = (free_port(), dir.path().join(format!("{format}.log")));
        let log = std::fs::File::create(&log_path).unwrap();
        let mut p = Proc::spawn(
            Command::new(env!("CARGO_BIN_EXE_genied"))
                .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
                .args(["--log-level", "genied=debug", "--log-format", format])
                .arg("--data-dir")
                .arg(&data)
                .envs(own_database(&data))
                .stdout(log.try_clone().unwrap())
                .stderr(log),
        );
        let base = format!("http://127.0.0.1:{port}");
        wait_ready(&mut p, &base).await;
        let http = reqwest::Client::new();
        let login: Value = http
            .post(format!("{base}/v1/auth/login"))
            .json(&json!({"email": "l@example.test", "password": password}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let token = login["data"]["access_token"].as_str().unwrap();
        let id = format!("req-log-{format}");
        let r = http
            .post(format!("{base}/v1"))
            .bearer_auth(token)
            .header("x-request-id", &id)
            .json(
                &json!({"resource": "genies", "action": "create", "data": {"genieName": "Logged"}}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
        assert_eq!(r.headers()["x-request-id"], id.as_str());
        let line = crate::common::wait_until("the request's event line in the log", async || {
            let text = std::fs::read_to_string(&log_path).unwrap();
            let found = text
                .lines()
                .find(|l| l.contains(&id) && l.contains("event"));
            found.map(str::to_string)
        })
        .await;
        if format == "json" {
            let line: Value = serde_json::from_str(&line).unwrap();
            assert_eq!(line["level"], "DEBUG", "{line}");
            assert_eq!(line["fields"]["message"], "event", "{line}");
            assert_eq!(line["fields"]["event"], "genie.created", "{line}");
            assert_eq!(
                line["span"],
                json!({"request_id": id, "method": "POST", "path": "/v1",
                       "resource": "genies", "action": "create", "name": "request"}),
                "{line}"
            );
        } else {
            let want = format!(
                "DEBUG request{{request_id={id} method=POST path=/v1 resource=\"genies\" \
                 action=\"create\"}}: genied::events: event event=genie.created"
            );
            assert!(line.contains(&want), "{line}\nwanted: {want}");
        }
        // A line outside any request has no request: the listener's, at start.
        let text = std::fs::read_to_string(&log_path).unwrap();
        let listening = text.lines().find(|l| l.contains("listening")).unwrap();
        assert!(!listening.contains("request"), "{listening}");
        p.signal(nix::sys::signal::Signal::SIGTERM);
        p.wait(DEADLINE);
    }
}

/// Work a request hands to another thread keeps its request for the log: a read on a read
/// thread, a write on the writer thread or on the request's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_goes_with_its_reads_and_writes_to_their_threads() {
    use genied::telemetry::context::{self, RequestContext};
    let dir = tempfile::tempdir().unwrap();
    let db = genied::db::Db::open_with(&dir.path().join("genied.db"), Some(1)).unwrap();
    let seen = || Ok(context::current().map(|c| (c.id().to_string(), c.path().to_string())));
    let id = axum::http::HeaderValue::from_static("req-threads");
    let c = RequestContext::new(
        Some(&id),
        &axum::http::Method::GET,
        &"/v1/leads".parse().unwrap(),
    );
    let want = Some(("req-threads".to_string(), "/v1/leads".to_string()));
    let (read, write, in_turn) = context::scope(Some(c), async {
        (
            db.read(move |_| seen()).await.unwrap(),
            db.write(move |_| seen()).await.unwrap(),
            db.write_in_turn(move |_| seen()).await.unwrap(),
        )
    })
    .await;
    assert_eq!(read, want);
    assert_eq!(write, want);
    assert_eq!(in_turn, want);
    assert_eq!(db.read(move |_| seen()).await.unwrap(), None);
}
