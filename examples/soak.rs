//! Soak: starts genied on 127.0.0.1 over a temporary data directory and drives mixed traffic
//! (reads and writes across genies, leads, lead notes, documents, conversations, groups,
//! activities, notifications; creates are paired with deletes so the working set stays
//! bounded) for a bounded time, then reports the request and error counts, and the process's
//! RSS and open file descriptors over time (from /proc/self). Loopback only; no outside
//! service is contacted.
//!
//!     cargo run --example soak                      # 10 minutes
//!     cargo run --example soak -- --seconds 120 --clients 4
//!
//! The server and the clients share this process, so the RSS includes the client side too;
//! the question the figures answer is whether it grows after warm-up. Exit status 1 when any
//! request failed.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use genied::auth::sessions;
use genied::db::{self, users::Role};
use serde_json::{Value, json};

struct Stats {
    requests: AtomicU64,
    errors: AtomicU64,
}

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().expect("a number"))
        .unwrap_or(default)
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count())
        .unwrap_or(0)
}

struct Client {
    http: reqwest::Client,
    base: String,
    token: String,
    stats: Arc<Stats>,
}

impl Client {
    async fn call(&self, resource: &str, action: &str, id: Option<Value>, data: Value) -> Value {
        let mut body = json!({"resource": resource, "action": action, "data": data});
        if let Some(id) = id {
            body["id"] = id;
        }
        self.stats.requests.fetch_add(1, Ordering::Relaxed);
        let res = self
            .http
            .post(format!("{}/v1", self.base))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await;
        match res {
            Ok(r) if r.status().is_success() => {
                r.json::<Value>().await.unwrap_or(Value::Null)["data"].clone()
            }
            Ok(r) => {
                let status = r.status();
                let text = r.text().await.unwrap_or_default();
                self.stats.errors.fetch_add(1, Ordering::Relaxed);
                eprintln!("error: {resource} {action}: {status} {text}");
                Value::Null
            }
            Err(e) => {
                self.stats.errors.fetch_add(1, Ordering::Relaxed);
                eprintln!("error: {resource} {action}: {e}");
                Value::Null
            }
        }
    }

    /// One round of mixed traffic; everything it creates it deletes again.
    async fn round(&self, n: u64) {
        let g = self
            .call(
                "genies",
                "create",
                None,
                json!({"genieName": format!("Soak {n}"), "systemPrompt": "You help."}),
            )
            .await;
        let gid = g["genie"]["id"].clone();
        self.call("genies", "get", Some(gid.clone()), json!({}))
            .await;
        self.call("genies", "list", None, json!({"limit": 20}))
            .await;
        self.call(
            "genies",
            "update",
            Some(gid.clone()),
            json!({"description": format!("round {n}")}),
        )
        .await;
        let lead = self
            .call("leads", "create", None, json!({"agent_id": gid, "name": format!("Lead {n}"), "email": format!("l{n}@example.test")}))
            .await;
        let lid = lead["lead"]["id"].clone();
        self.call(
            "leads",
            "update",
            Some(lid.clone()),
            json!({"status": "contacted"}),
        )
        .await;
        self.call(
            "leads",
            "log",
            Some(lid.clone()),
            json!({"type": "call", "description": "soak"}),
        )
        .await;
        let note = self
            .call(
                "lead-notes",
                "create",
                None,
                json!({"leadId": lid, "content": "soak note"}),
            )
            .await;
        self.call("lead-notes", "list", None, json!({"leadId": lid}))
            .await;
        self.call(
            "lead-notes",
            "delete",
            Some(note["note"]["id"].clone()),
            json!({}),
        )
        .await;
        self.call("leads", "stats", None, json!({})).await;
        self.call("leads", "all", None, json!({"limit": 20})).await;
        let doc = self
            .call("knowledge-base", "create", None, json!({"title": format!("Doc {n}"), "content": "Refunds are issued within 30 days. Keep the receipt."}))
            .await;
        self.call("knowledge-base", "all", None, json!({"limit": 20}))
            .await;
        self.call(
            "knowledge-base",
            "search",
            None,
            json!({"query": "refunds"}),
        )
        .await;
        let conv = self
            .call("conversations", "create", None, json!({"genieId": gid, "transcript": [{"role": "user", "message": "hello", "time_in_call_secs": 1}]}))
            .await;
        self.call("conversations", "all", None, json!({"limit": 20}))
            .await;
        let grp = self
            .call(
                "genie-groups",
                "create",
                None,
                json!({"name": format!("G{n}")}),
            )
            .await;
        self.call(
            "genie-groups",
            "delete",
            Some(grp["group"]["id"].clone()),
            json!({}),
        )
        .await;
        self.call("activities", "list", None, json!({"limit": 20}))
            .await;
        self.call("notifications", "unread-count", None, json!({}))
            .await;
        self.call("profiles", "get", None, json!({})).await;
        // Clean up: the working set stays bounded, so growth would be a leak.
        self.call(
            "conversations",
            "delete",
            Some(conv["conversation"]["id"].clone()),
            json!({}),
        )
        .await;
        self.call(
            "knowledge-base",
            "delete",
            Some(doc["document"]["id"].clone()),
            json!({}),
        )
        .await;
        self.call("leads", "delete", Some(lid), json!({})).await;
        self.call("genies", "delete", Some(gid), json!({})).await;
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let seconds = arg("--seconds", 600);
    let clients = arg("--clients", 4);
    let samples = arg("--samples", 12).max(2);
    // The server runs in this process, so nothing it starts outlives the soak; but a request
    // or a graceful shutdown that never ends must not hang CI: past the run time plus two
    // minutes the process exits with status 1.
    let limit = Duration::from_secs(seconds + 120);
    std::thread::spawn(move || {
        std::thread::sleep(limit);
        eprintln!(
            "soak: not finished {} s after it started; giving up",
            limit.as_secs()
        );
        std::process::exit(1);
    });
    let dir = tempfile::tempdir()?;
    let mut config = genied::Config::new(dir.path());
    config.rate_limit_per_minute = 0;
    config.session_rate_limit_per_minute = 0;
    config.job_poll_ms = 100;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    config.public_url = Some(format!("http://{addr}"));
    let app = genied::build_app(config)?;
    let state = app.state.clone();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        genied::serve(app, listener, async move {
            let _ = stop_rx.await;
        })
        .await
    });

    let user = state
        .db
        .write(|c| {
            Ok(db::users::insert(
                c,
                "soak@example.test",
                Some("Soak"),
                Role::StandardUser,
                None,
            )?)
        })
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let pair = sessions::open(
        &state.db,
        &state.secrets.jwt_key,
        &user.id,
        Role::StandardUser,
        24 * 3600,
        24 * 3600,
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e}"))?;

    let stats = Arc::new(Stats {
        requests: AtomicU64::new(0),
        errors: AtomicU64::new(0),
    });
    let deadline = Instant::now() + Duration::from_secs(seconds);
    // A request that takes this long counts as failed instead of stalling its client.
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()?;
    let mut tasks = Vec::new();
    for c in 0..clients {
        let client = Client {
            http: http.clone(),
            base: format!("http://{addr}"),
            token: pair.access_token.clone(),
            stats: stats.clone(),
        };
        tasks.push(tokio::spawn(async move {
            let mut n = c * 1_000_000;
            while Instant::now() < deadline {
                client.round(n).await;
                n += 1;
            }
        }));
    }

    println!("soak: {seconds} s, {clients} clients, genied on {addr}");
    println!(
        "{:>8} {:>10} {:>8} {:>10} {:>6}",
        "t (s)", "requests", "errors", "RSS (KiB)", "fds"
    );
    let start = Instant::now();
    let interval = Duration::from_secs(seconds.max(1)) / (samples as u32 - 1);
    let mut rows = Vec::new();
    loop {
        let row = (
            start.elapsed().as_secs(),
            stats.requests.load(Ordering::Relaxed),
            stats.errors.load(Ordering::Relaxed),
            rss_kib(),
            open_fds(),
        );
        println!(
            "{:>8} {:>10} {:>8} {:>10} {:>6}",
            row.0, row.1, row.2, row.3, row.4
        );
        rows.push(row);
        if Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(interval.min(deadline - Instant::now())).await;
    }
    for t in tasks {
        t.await?;
    }
    let _ = stop_tx.send(());
    server.await??;

    let total = stats.requests.load(Ordering::Relaxed);
    let errors = stats.errors.load(Ordering::Relaxed);
    // Warm-up: the first quarter of the samples.
    let warm = &rows[rows.len() / 4..];
    let (rss_min, rss_max) = warm
        .iter()
        .fold((u64::MAX, 0), |(lo, hi), r| (lo.min(r.3), hi.max(r.3)));
    let (fd_min, fd_max) = warm
        .iter()
        .fold((usize::MAX, 0), |(lo, hi), r| (lo.min(r.4), hi.max(r.4)));
    println!(
        "total: {total} requests ({:.0}/s), {errors} errors; after warm-up RSS {rss_min}..{rss_max} KiB, fds {fd_min}..{fd_max}",
        total as f64 / start.elapsed().as_secs_f64()
    );
    if errors > 0 {
        std::process::exit(1);
    }
    Ok(())
}
