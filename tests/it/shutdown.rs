//! Stopping the real binary with SIGTERM while background work is pending: the process exits
//! promptly, leaves the rest of the work for the next start, and that start picks it up.
//!
//! The job test runs on PostgreSQL too (`GENIED_TEST_DATABASE=postgres`): the binary is
//! pointed at a database of its own on the test cluster.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use genied::db::{self, Db};
use rusqlite::types::Value as SqlValue;
use serde_json::{Value, json};

use crate::common::postgres;
use crate::common::process::{self, DEADLINE, Proc, free_port, wait_ready};

/// Leads left waiting for the search indexer. Far more than it indexes between the moment it
/// is seen at work and the SIGTERM a few milliseconds later (it takes 1,000 per batch), so
/// the backlog cannot be gone by chance before the stop; and the drain the process used to
/// wait for takes seconds even on a fast machine.
const BACKLOG: usize = 60_000;

/// The database the test's binary uses: SQLite in the data directory, or a database of its
/// own on the PostgreSQL test cluster.
struct Target {
    data: std::path::PathBuf,
    pg: Option<String>,
}

impl Target {
    fn new(data: &Path) -> Target {
        Target {
            data: data.to_path_buf(),
            pg: postgres::enabled().then(postgres::database),
        }
    }

    fn env(&self) -> Vec<(&'static str, String)> {
        self.pg
            .iter()
            .map(|u| ("GENIED_DATABASE_URL", u.clone()))
            .collect()
    }

    fn cli(&self, args: &[&str]) -> String {
        let out = process::output(
            Command::new(env!("CARGO_BIN_EXE_genied"))
                .arg("--data-dir")
                .arg(&self.data)
                .args(args)
                .envs(self.env()),
        );
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    /// Makes the data directory with one user of `email` and returns a session token of
    /// theirs.
    fn user(&self, email: &str) -> String {
        self.cli(&[
            "admin",
            "create-user",
            "--create-data-dir",
            "--email",
            email,
        ]);
        self.cli(&["admin", "issue-token", "--email", email])
    }

    fn serve(&self, port: u16) -> Proc {
        Proc::spawn(
            Command::new(env!("CARGO_BIN_EXE_genied"))
                .arg("--data-dir")
                .arg(&self.data)
                .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
                .args(["--job-poll-ms", "20", "--rate-limit-per-minute", "0"])
                .env("GENIED_LOG_LEVEL", "warn")
                .envs(self.env())
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        )
    }

    /// Runs `f` on the records with a `Db` of the test's own, on a thread outside the test's
    /// runtime (PostgreSQL's sync client starts a runtime of its own, which tokio refuses
    /// inside another).
    fn with_db<T: Send + 'static>(&self, f: impl FnOnce(&Db) -> T + Send + 'static) -> T {
        let (path, pg) = (self.data.join("genied.db"), self.pg.clone());
        std::thread::spawn(move || {
            let db = match pg {
                Some(url) => Db::open_postgres(&url, Some(2)).expect("open PostgreSQL"),
                None => Db::open(&path).expect("open SQLite"),
            };
            f(&db)
        })
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
    }

    /// `SELECT COUNT(*) ...` on the records.
    fn count(&self, query: &'static str) -> i64 {
        self.with_db(move |db| {
            db.read_blocking(|c| Ok(c.query_row(query, [], |r| r.get::<_, i64>(0))?))
                .unwrap()
        })
    }

    /// Leads waiting for the search indexer (past its watermark, or renamed).
    fn pending(&self) -> i64 {
        self.with_db(|db| {
            db.read_blocking(|c| Ok(db::leads::search_backlog(c)?))
                .unwrap()
        })
    }
}

async fn envelope(base: &str, token: &str, body: Value) -> Value {
    let resp = reqwest::Client::new()
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

/// The ids of the leads a search for `term` finds.
async fn search(base: &str, token: &str, term: &str) -> Vec<i64> {
    let data = envelope(
        base,
        token,
        json!({"resource": "leads", "action": "all",
               "data": {"filters": {"searchTerm": term}, "limit": 10}}),
    )
    .await;
    data["leads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["id"].as_i64().unwrap())
        .collect()
}

/// The documents (one entry per chunk) a knowledge-base search for `volume<k>` finds.
async fn found(base: &str, token: &str, k: usize) -> Vec<String> {
    let data = envelope(
        base,
        token,
        json!({"resource": "knowledge-base", "action": "search",
               "data": {"query": format!("volume{k:04}")}}),
    )
    .await;
    data["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["document_id"].as_str().unwrap().to_string())
        .collect()
}

/// SIGTERM and wait for the exit; the status must be a clean one.
fn stop(p: &mut Proc) -> Duration {
    let t = Instant::now();
    p.signal(nix::sys::signal::Signal::SIGTERM);
    let status = p.wait(DEADLINE);
    assert!(
        status.success(),
        "genied exited with {status} after SIGTERM"
    );
    t.elapsed()
}

#[tokio::test]
async fn sigterm_does_not_wait_for_the_search_backlog() {
    if postgres::skip("the search backlog is SQLite's full-text index; PostgreSQL has none") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let t = Target::new(&dir.path().join("data"));
    let email = "backlog@example.test";
    let token = t.user(email);

    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut p = t.serve(port);
    wait_ready(&mut p, &base).await;
    let genie = envelope(
        &base,
        &token,
        json!({"resource": "genies", "action": "create", "data": {"genieName": "Backlog"}}),
    )
    .await["genie"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let user = envelope(
        &base,
        &token,
        json!({"resource": "profiles", "action": "get"}),
    )
    .await["profile"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    stop(&mut p);

    // The backlog, written through genied's db layer while nothing serves: every lead is
    // left pending for the indexer, as a bulk import leaves them.
    let last = t.with_db(move |db| {
        let mut last = 0;
        for chunk in 0..BACKLOG / 5_000 {
            last = db
                .write_blocking(|c| {
                    let mut last = 0;
                    for k in chunk * 5_000..(chunk + 1) * 5_000 {
                        let fields: db::leads::Fields = vec![
                            ("agent_id", SqlValue::from(genie.clone())),
                            ("user_id", SqlValue::from(user.clone())),
                            ("name", format!("Backlog Lead {k:06}").into()),
                            ("email", format!("lead{k:06}@backlog.test").into()),
                            ("status", "new".to_string().into()),
                        ];
                        last = db::leads::insert(c, &fields)?;
                    }
                    Ok(last)
                })
                .unwrap();
        }
        last
    });
    assert_eq!(t.pending(), BACKLOG as i64);

    // Stopped as soon as the indexer is seen at work on the backlog.
    let mut p = t.serve(port);
    wait_ready(&mut p, &base).await;
    let end = Instant::now() + DEADLINE;
    while t.pending() == BACKLOG as i64 {
        assert!(Instant::now() < end, "the indexer did not start");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let took = stop(&mut p);
    let left = t.pending();
    assert!(
        left > 0,
        "the stopping process indexed the whole backlog of {BACKLOG} leads before exiting \
         (in {took:?}) instead of leaving it for the next start"
    );

    // The next start: a lead still pending is found at once, and the rest gets indexed.
    let mut p = t.serve(port);
    wait_ready(&mut p, &base).await;
    let term = format!("lead{:06}@backlog", BACKLOG - 1);
    assert_eq!(search(&base, &token, &term).await, vec![last]);
    let end = Instant::now() + 3 * DEADLINE;
    while t.pending() > 0 {
        assert!(
            Instant::now() < end,
            "the backlog left by the stop ({left} leads) was not indexed after the restart"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(search(&base, &token, &term).await, vec![last]);
    assert_eq!(
        search(&base, &token, "Backlog Lead 000000").await.len(),
        1,
        "a lead indexed before the stop is still found"
    );
    stop(&mut p);
}

/// Jobs queued at once: far more than the worker runs between being seen at work and the
/// SIGTERM (each job is two commits, a claim and a finish).
const JOBS: usize = 20_000;

#[tokio::test]
async fn sigterm_does_not_wait_for_the_job_backlog() {
    let dir = tempfile::tempdir().unwrap();
    let t = Target::new(&dir.path().join("data"));
    t.cli(&[
        "admin",
        "create-user",
        "--create-data-dir",
        "--email",
        "jobs@example.test",
    ]);
    t.with_db(|db| {
        db.write_blocking(|c| {
            for k in 0..JOBS {
                genied::jobs::enqueue(c, "noop", &json!({"k": k}), Duration::ZERO, None)?;
            }
            Ok(())
        })
        .unwrap()
    });
    let queued = || t.count("SELECT COUNT(*) FROM jobs WHERE kind = 'noop'");
    assert_eq!(queued(), JOBS as i64);

    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut p = t.serve(port);
    wait_ready(&mut p, &base).await;
    let end = Instant::now() + DEADLINE;
    while queued() == JOBS as i64 {
        assert!(Instant::now() < end, "the job worker did not start");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let took = stop(&mut p);
    let left = queued();
    assert!(
        left > 0,
        "the stopping process ran all {JOBS} queued jobs before exiting (in {took:?}) instead \
         of leaving them for the next start"
    );
    // Stopped cleanly: no job is left claimed by the stopped process.
    assert_eq!(
        t.count("SELECT COUNT(*) FROM jobs WHERE status = 'running'"),
        0
    );

    let mut p = t.serve(port);
    wait_ready(&mut p, &base).await;
    let end = Instant::now() + 3 * DEADLINE;
    while queued() > 0 {
        assert!(
            Instant::now() < end,
            "the {left} jobs left by the stop did not run after the restart ({} still queued)",
            queued()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop(&mut p);
}

/// The size of the SQLite WAL next to the database (0 when there is none).
fn wal_bytes(data: &Path) -> u64 {
    std::fs::metadata(data.join("genied.db-wal")).map_or(0, |m| m.len())
}

#[tokio::test]
async fn a_clean_stop_leaves_no_wal_for_the_next_start_to_read() {
    if postgres::skip("the write-ahead log checked here is SQLite's") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let t = Target::new(&dir.path().join("data"));
    let email = "wal@example.test";
    let token = t.user(email);
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut p = t.serve(port);
    wait_ready(&mut p, &base).await;
    let genie = envelope(
        &base,
        &token,
        json!({"resource": "genies", "action": "create", "data": {"genieName": "Wal"}}),
    )
    .await["genie"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut leads = Vec::new();
    for k in 0..20 {
        let lead = envelope(
            &base,
            &token,
            json!({"resource": "leads", "action": "create",
                   "data": {"agent_id": genie, "name": format!("Wal Lead {k}")}}),
        )
        .await;
        leads.push(lead["lead"]["id"].as_i64().unwrap());
    }
    // While it runs, the writes are in the WAL (so the check below can tell).
    assert!(wal_bytes(&t.data) > 0);
    stop(&mut p);
    // Emptied at close: the next start has no log to replay before it answers (a left-over
    // WAL is read whole, frame by frame, by the first connection that opens the database).
    assert_eq!(
        wal_bytes(&t.data),
        0,
        "the WAL was left behind by a clean stop"
    );

    // Nothing acknowledged was lost on the way into the database file.
    let mut p = t.serve(port);
    wait_ready(&mut p, &base).await;
    let all = envelope(
        &base,
        &token,
        json!({"resource": "leads", "action": "all", "data": {"limit": 50}}),
    )
    .await;
    let mut found: Vec<i64> = all["leads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["id"].as_i64().unwrap())
        .collect();
    found.sort_unstable();
    assert_eq!(found, leads);
    stop(&mut p);
}

/// Stores documents `from..to` of `email` through the db layer, as the pipeline leaves a
/// completed text document: three chunks each, the first words `volume<k>`.
fn seed_documents(t: &Target, email: &'static str, from: usize, to: usize) -> Vec<String> {
    let words = [
        "river", "stone", "lantern", "harbor", "meadow", "copper", "signal", "orchard",
    ];
    t.with_db(move |db| {
        db.write_blocking(|c| {
            let user = db::users::by_email(c, email)?.expect("the user").id;
            let mut ids = Vec::new();
            for k in from..to {
                let chunks: Vec<String> = (0..3)
                    .map(|j| {
                        let mut text = format!("volume{k:04} part {j}:");
                        for w in 0..120 {
                            text.push(' ');
                            text.push_str(words[(k * 7 + j * 3 + w * w) % words.len()]);
                        }
                        text
                    })
                    .collect();
                let id = db::documents::insert(
                    c,
                    &db::documents::NewDocument {
                        user_id: &user,
                        name: &format!("Volume {k}"),
                        doc_type: "text",
                        status: "completed",
                        folder_id: None,
                        is_public: false,
                        size_bytes: 0,
                        source_url: None,
                        original_hash: None,
                        filename: None,
                        options: &json!({}),
                    },
                )?;
                db::documents::replace_chunks(c, &id, &chunks)?;
                ids.push(id);
            }
            Ok(ids)
        })
        .unwrap()
    })
}

/// Documents left for a first start's index build: enough that the build process is still
/// at work for a second or more after it is seen, far longer than the test takes to kill
/// the server once it sees it.
const DOCUMENTS: usize = 4_000;

#[tokio::test]
async fn the_index_build_runs_in_a_child_that_ends_with_the_server() {
    if postgres::skip("the documents search index is SQLite's") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let t = Target::new(&data);
    let email = "library@example.test";
    let token = t.user(email);
    // Stored as the pipeline leaves a completed text document, while nothing serves: the
    // first start finds them all queued and no index.
    let ids = seed_documents(&t, email, 0, DOCUMENTS);
    let serve = |port: u16| {
        Proc::spawn(
            Command::new(env!("CARGO_BIN_EXE_genied"))
                .arg("--data-dir")
                .arg(&data)
                .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
                .args(["--rate-limit-per-minute", "0"])
                .env("GENIED_LOG_LEVEL", "info")
                .stdout(Stdio::piped())
                .stderr(Stdio::null()),
        )
    };
    let builders = || process::marked(&format!("{}-search", data.join("genied.db").display()));

    // Killed while the build process works: that process notices and exits by itself (the
    // test signals the server alone, and leaves it unreaped so its group is not killed).
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut p = serve(port);
    let first_log = p.drain_stdout();
    wait_ready(&mut p, &base).await;
    let builder = async || {
        let end = Instant::now() + DEADLINE;
        loop {
            if let [pid] = builders()[..] {
                break pid;
            }
            assert!(
                Instant::now() < end,
                "no build process was started for {DOCUMENTS} documents"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    let child = builder().await;
    assert_eq!(process::descendants(p.id() as i32), vec![child]);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(p.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let end = Instant::now() + DEADLINE;
    while process::is_running(child) {
        assert!(
            Instant::now() < end,
            "the build process {child} outlived its server"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    p.wait(DEADLINE);
    let left = t.count("SELECT COUNT(*) FROM document_search_queue");
    assert!(
        left > 0,
        "the build process finished its work after its server was killed, not at once:\n{}",
        first_log.text()
    );

    // Stopped (SIGTERM) while the next start's build process works: the server exits
    // cleanly without waiting for the build, which is left for the start after.
    let mut p = serve(port);
    let _log = p.drain_stdout();
    wait_ready(&mut p, &base).await;
    let child = builder().await;
    assert_eq!(process::descendants(p.id() as i32), vec![child]);
    stop(&mut p);
    assert!(!process::is_running(child));
    assert!(t.count("SELECT COUNT(*) FROM document_search_queue") > 0);

    // The next start finishes the build in a child (a backlog of more than a batch, or the
    // whole build again), and says so.
    let mut p = serve(port);
    let log = p.drain_stdout();
    wait_ready(&mut p, &base).await;
    // All of the index's chunks; the documents it indexed are those the stopped build left.
    let built = format!("chunks={}", 3 * DOCUMENTS);
    let reported = async |line: &str| {
        let end = Instant::now() + 3 * DEADLINE;
        while !log.text().contains(line) {
            assert!(
                Instant::now() < end,
                "{line:?} was not logged:\n{}",
                log.text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    reported("built in a process of its own").await;
    let text = log.text();
    assert!(text.contains(&built), "{built} not in:\n{text}");
    assert!(!text.contains("the build process failed"), "{text}");
    assert_eq!(builders(), Vec::<i32>::new());
    assert_eq!(t.count("SELECT COUNT(*) FROM document_search_queue"), 0);
    let k = DOCUMENTS - 1;
    assert_eq!(found(&base, &token, k).await, vec![ids[k].clone(); 3]);

    // As many again stored while it serves (an import): that backlog goes to a child too.
    let more = seed_documents(&t, email, DOCUMENTS, 2 * DOCUMENTS);
    let built = format!("chunks={}", 6 * DOCUMENTS);
    reported(&built).await;
    let k = 2 * DOCUMENTS - 1;
    assert_eq!(
        found(&base, &token, k).await,
        vec![more[DOCUMENTS - 1].clone(); 3]
    );
    stop(&mut p);
}
