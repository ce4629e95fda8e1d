//! Several `genied serve` processes on one PostgreSQL database (#22, item 3), each point on
//! its own: a job runs once and a dead instance's job is taken over after its lease (SIGKILL
//! under write load, nothing acknowledged lost); a scheduled worker run fires once per due
//! time; a revocation or role change made on one instance holds on the others' next
//! request; the per-key rate limit is counted across instances. Runs only on PostgreSQL
//! (`GENIED_TEST_DATABASE=postgres`): with SQLite there is one instance per database.
//!
//! The instances share one data directory (master key, document files) as instances behind
//! one load balancer share their secrets and object store. Instances that need not start in
//! order start together, on a fresh database and directory, as a deployment's replicas do:
//! which is how the first start's races (two first admins, two master keys) were found.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};

use crate::common::postgres;
use crate::common::process::{DEADLINE, Proc, free_port, wait_ready};

/// Lease of the tests' instances: short, so that a take-over comes within seconds.
const LEASE_SECONDS: u64 = 3;

fn skipped() -> bool {
    if postgres::enabled() {
        return false;
    }
    eprintln!(
        "skipped: several instances need a shared PostgreSQL database (run with GENIED_TEST_DATABASE=postgres)"
    );
    true
}

/// One `genied serve` of the group.
struct Instance {
    proc: Proc,
    base: String,
    id: &'static str,
}

async fn start(data: &Path, url: &str, id: &'static str, extra: &[&str]) -> Instance {
    let port = free_port();
    let mut proc = Proc::spawn(
        Command::new(env!("CARGO_BIN_EXE_genied"))
            .arg("--data-dir")
            .arg(data)
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--database-url", url, "--instance-id", id])
            .args(["--job-lease-seconds", &LEASE_SECONDS.to_string()])
            .args(["--job-poll-ms", "50", "--job-backoff-base-ms", "50"])
            .arg("--allow-private-outbound")
            .args(extra)
            .env("GENIED_LOG_LEVEL", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    let base = format!("http://127.0.0.1:{port}");
    wait_ready(&mut proc, &base).await;
    Instance { proc, base, id }
}

/// SQL straight on the shared database (the harness's own client, off the test's runtime).
fn sql(url: &str, query: &str, params: Vec<String>) -> Vec<Vec<Option<String>>> {
    let params: Vec<&str> = params.iter().map(String::as_str).collect();
    crate::common::postgres::query(url, query, &params)
}

fn one(url: &str, query: &str, params: Vec<String>) -> Option<String> {
    sql(url, query, params)
        .into_iter()
        .next()
        .and_then(|r| r.into_iter().next().flatten())
}

struct Answer {
    status: u16,
    body: Value,
    headers: reqwest::header::HeaderMap,
}

async fn call(
    base: &str,
    token: &str,
    resource: &str,
    action: &str,
    id: Option<&str>,
    data: Value,
) -> Answer {
    let mut body = json!({"resource": resource, "action": action, "data": data});
    if let Some(id) = id {
        body["id"] = json!(id);
    }
    let r = reqwest::Client::new()
        .post(format!("{base}/v1"))
        .bearer_auth(token)
        .json(&body)
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .expect("request");
    let (status, headers) = (r.status().as_u16(), r.headers().clone());
    let body = r.json().await.unwrap_or(Value::Null);
    Answer {
        status,
        body,
        headers,
    }
}

async fn post(base: &str, path: &str, body: Value) -> Answer {
    let r = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .json(&body)
        .send()
        .await
        .expect("request");
    let (status, headers) = (r.status().as_u16(), r.headers().clone());
    Answer {
        status,
        body: r.json().await.unwrap_or(Value::Null),
        headers,
    }
}

/// Signs in as the first admin, whose password the first instance wrote to its data dir.
async fn admin_token(data: &Path, base: &str) -> String {
    let text = std::fs::read_to_string(data.join("secrets/initial-admin.txt")).unwrap();
    let password = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("password:"))
        .unwrap()
        .trim()
        .to_string();
    login(base, "admin@localhost", &password).await
}

async fn login(base: &str, email: &str, password: &str) -> String {
    let r = post(
        base,
        "/v1/auth/login",
        json!({"email": email, "password": password}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["data"]["access_token"]
        .as_str()
        .or_else(|| r.body["access_token"].as_str())
        .unwrap_or_else(|| panic!("{}", r.body))
        .to_string()
}

/// A webhook receiver that records every delivery (by `Genied-Delivery`), checks each, and
/// holds requests while told to (a job in progress that an instance dies in).
#[derive(Clone, Default)]
struct Receiver {
    hits: Arc<Mutex<Vec<(String, Instant)>>>,
    problems: Arc<Mutex<Vec<String>>>,
    hold: Arc<AtomicBool>,
}

impl Receiver {
    async fn start(&self) -> String {
        let me = self.clone();
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |headers: HeaderMap, body: String| {
                let me = me.clone();
                async move {
                    let delivery = headers
                        .get("genied-delivery")
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_string);
                    let event: Option<Value> = serde_json::from_str(&body).ok();
                    match (&delivery, &event) {
                        (Some(d), Some(e)) if e["type"] == "worker_run.failed" => {
                            me.hits.lock().unwrap().push((d.clone(), Instant::now()));
                        }
                        _ => me
                            .problems
                            .lock()
                            .unwrap()
                            .push(format!("unexpected delivery {delivery:?}: {body}")),
                    }
                    if headers.get("genied-signature").is_none() {
                        me.problems.lock().unwrap().push("no signature".into());
                    }
                    while me.hold.load(Ordering::SeqCst) {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    StatusCode::OK
                }
            }),
        );
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", l.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
        url
    }

    fn per_delivery(&self) -> HashMap<String, usize> {
        let mut m = HashMap::new();
        for (d, _) in self.hits.lock().unwrap().iter() {
            *m.entry(d.clone()).or_default() += 1;
        }
        m
    }

    fn problems(&self) -> Vec<String> {
        self.problems.lock().unwrap().clone()
    }
}

async fn until<F: std::future::Future<Output = bool>>(what: &str, mut f: impl FnMut() -> F) {
    let end = Instant::now() + DEADLINE;
    while !f().await {
        assert!(Instant::now() < end, "waited {DEADLINE:?} for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn webhook_jobs(url: &str) -> i64 {
    one(
        url,
        "SELECT COUNT(*)::text FROM jobs WHERE kind = 'webhook.deliver'",
        vec![],
    )
    .unwrap()
    .parse()
    .unwrap()
}

#[tokio::test]
async fn jobs_run_once_and_a_dead_instances_job_is_taken_over_after_its_lease() {
    if skipped() {
        return;
    }
    let url = postgres::database();
    let data = tempfile::tempdir().unwrap();
    // The write load below is one session's: not to be slowed by its own rate limit.
    let unlimited = ["--session-rate-limit-per-minute", "0"];
    let (a, b) = tokio::join!(
        start(data.path(), &url, "inst-a", &unlimited),
        start(data.path(), &url, "inst-b", &unlimited)
    );
    let token = admin_token(data.path(), &a.base).await;
    let rx = Receiver::default();
    let hook = rx.start().await;
    let r = call(
        &a.base,
        &token,
        "webhooks",
        "create",
        None,
        json!({"url": hook, "event_types": ["worker_run.failed"]}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    // A manual worker genie: with no LLM configured each run fails at once, and its
    // `worker_run.failed` event becomes one delivery job.
    let r = call(
        &a.base,
        &token,
        "worker-genies",
        "create",
        None,
        json!({"name": "w", "soul_prompt": "x", "trigger_type": "manual"}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let gid = r.body["data"]["worker_genie"]["id"]
        .as_str()
        .unwrap()
        .to_string();

    // Each job once: 20 runs through both instances, 20 deliveries, each made once, though
    // both instances' workers claim from the one queue.
    for i in 0..20 {
        let base = if i % 2 == 0 { &a.base } else { &b.base };
        let r = call(base, &token, "worker-genies", "run", Some(&gid), json!({})).await;
        assert_eq!(r.status, 202, "{}", r.body);
    }
    until("the 20 deliveries", || async {
        rx.per_delivery().len() == 20 && webhook_jobs(&url) == 0
    })
    .await;
    let counts = rx.per_delivery();
    assert!(
        counts.values().all(|n| *n == 1),
        "a delivery was made twice: {counts:?}"
    );
    assert_eq!(rx.hits.lock().unwrap().len(), 20);
    assert_eq!(
        one(
            &url,
            "SELECT COUNT(*)::text FROM webhook_deliveries",
            vec![]
        )
        .as_deref(),
        Some("20"),
        "one delivery per event"
    );

    // SIGKILL under write load: writers on both instances, each keeping what was acknowledged.
    let acked: Arc<Mutex<Vec<String>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for base in [a.base.clone(), b.base.clone()] {
        let (acked, stop, token) = (acked.clone(), stop.clone(), token.clone());
        writers.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) {
                n += 1;
                let name = format!("load {base} {n}");
                let body =
                    json!({"resource": "genie-groups", "action": "create", "data": {"name": name}});
                let sent = client
                    .post(format!("{base}/v1"))
                    .bearer_auth(&token)
                    .json(&body)
                    .timeout(Duration::from_secs(10))
                    .send()
                    .await;
                match sent {
                    Ok(r) if r.status() == 201 => {
                        let v: Value = r.json().await.unwrap_or(Value::Null);
                        if let Some(id) = v["data"]["group"]["id"].as_str() {
                            acked.lock().unwrap().push(id.to_string());
                        }
                    }
                    // The killed instance refuses connections: nothing acknowledged there.
                    _ => tokio::time::sleep(Duration::from_millis(20)).await,
                }
            }
        }));
    }

    rx.hold.store(true, Ordering::SeqCst);
    let r = call(
        &a.base,
        &token,
        "worker-genies",
        "run",
        Some(&gid),
        json!({}),
    )
    .await;
    assert_eq!(r.status, 202, "{}", r.body);
    until("a held delivery", || async {
        rx.hits.lock().unwrap().len() == 21
    })
    .await;
    let row = sql(
        &url,
        "SELECT owner, lease_until FROM jobs WHERE kind = 'webhook.deliver' AND status = 'running'",
        vec![],
    );
    assert_eq!(row.len(), 1, "the held job is running once: {row:?}");
    let owner = row[0][0].clone().expect("a running job names its instance");
    let held = rx.hits.lock().unwrap()[20].0.clone();
    let (mut dead, survivor) = if owner == a.id { (a, b) } else { (b, a) };
    assert_eq!(owner, dead.id);
    // The lease is renewed while the job runs: its end moves later than the one first taken.
    let first_lease = row[0][1].clone().expect("a running job has a lease");
    let running_lease = || {
        one(
            &url,
            "SELECT lease_until FROM jobs WHERE kind = 'webhook.deliver' AND status = 'running'",
            vec![],
        )
        .unwrap()
    };
    until("the running job's lease to be renewed", || async {
        running_lease() > first_lease
    })
    .await;
    let lease_until = running_lease();
    let lease_end = chrono::DateTime::parse_from_rfc3339(&lease_until).unwrap();
    assert!(
        lease_end > chrono::Utc::now(),
        "the lease is renewed while the job runs (lease until {lease_until})"
    );
    dead.proc.kill();
    rx.hold.store(false, Ordering::SeqCst);

    until("the take-over of the dead instance's job", || async {
        webhook_jobs(&url) == 0
    })
    .await;
    let hits = rx.hits.lock().unwrap().clone();
    let again: Vec<_> = hits.iter().filter(|(d, _)| *d == held).collect();
    assert_eq!(
        again.len(),
        2,
        "held once by the dead instance, then once by the survivor: {hits:?}"
    );
    let taken_at = chrono::Utc::now() - chrono::Duration::from_std(again[1].1.elapsed()).unwrap();
    assert!(
        taken_at >= lease_end,
        "taken over only after the lease ran out ({taken_at} < {lease_end})"
    );
    assert_eq!(hits.len(), 22, "nothing else delivered twice: {hits:?}");
    assert_eq!(
        one(
            &url,
            "SELECT status FROM webhook_deliveries WHERE id = $1",
            vec![held.clone()]
        )
        .as_deref(),
        Some("succeeded"),
    );

    // Some writes on the survivor after the kill, then stop: every acknowledged one is there.
    let n = acked.lock().unwrap().len();
    until("writes on the survivor", || async {
        acked.lock().unwrap().len() >= n + 5
    })
    .await;
    stop.store(true, Ordering::SeqCst);
    for w in writers {
        w.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() > 5);
    let stored = sql(&url, "SELECT id FROM genie_groups", vec![]);
    let stored: std::collections::HashSet<_> =
        stored.into_iter().filter_map(|r| r[0].clone()).collect();
    let lost: Vec<_> = acked.iter().filter(|id| !stored.contains(*id)).collect();
    assert!(lost.is_empty(), "acknowledged writes lost: {lost:?}");
    // The survivor still serves.
    let r = call(
        &survivor.base,
        &token,
        "genie-groups",
        "list",
        None,
        json!({}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(rx.problems(), Vec::<String>::new());
}

#[tokio::test]
async fn a_scheduled_run_fires_once_per_due_time_across_instances() {
    if skipped() {
        return;
    }
    let url = postgres::database();
    let data = tempfile::tempdir().unwrap();
    let seconds = ["--worker-allow-seconds-cron"];
    let a = start(data.path(), &url, "inst-a", &seconds).await;
    let token = admin_token(data.path(), &a.base).await;
    let r = call(
        &a.base,
        &token,
        "worker-genies",
        "create",
        None,
        json!({"name": "tick", "soul_prompt": "x", "trigger_type": "schedule", "schedule": "*/2 * * * * *"}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let gid = r.body["data"]["worker_genie"]["id"]
        .as_str()
        .or(r.body["worker_genie"]["id"].as_str())
        .unwrap_or_else(|| panic!("{}", r.body))
        .to_string();
    // Started after the genie exists, the others register its schedule at start: three
    // schedulers fire for every due time.
    let (_b, _c) = tokio::join!(
        start(data.path(), &url, "inst-b", &seconds),
        start(data.path(), &url, "inst-c", &seconds)
    );
    let since = chrono::Utc::now();
    let runs = |url: String, gid: String| {
        sql(
            &url,
            "SELECT due_at, input FROM worker_runs WHERE worker_genie_id = $1 ORDER BY due_at",
            vec![gid],
        )
    };
    until(
        "four scheduled runs after all three instances started",
        || {
            let (url, gid) = (url.clone(), gid.clone());
            async move {
                runs(url, gid)
                    .iter()
                    .filter(|r| {
                        r[0].as_deref()
                            .and_then(|d| chrono::DateTime::parse_from_rfc3339(d).ok())
                            .is_some_and(|d| d > since + chrono::Duration::seconds(1))
                    })
                    .count()
                    >= 4
            }
        },
    )
    .await;
    let all = runs(url.clone(), gid.clone());
    let due: Vec<String> = all
        .iter()
        .map(|r| r[0].clone().expect("a scheduled run has its due time"))
        .collect();
    let distinct: std::collections::HashSet<_> = due.iter().collect();
    assert_eq!(distinct.len(), due.len(), "a due time ran twice: {due:?}");
    for (d, row) in due.iter().zip(&all) {
        let t = chrono::DateTime::parse_from_rfc3339(d).unwrap();
        assert_eq!(
            t.timestamp() % 2,
            0,
            "due times come from the schedule, not the clock: {d}"
        );
        assert_eq!(t.timestamp_subsec_millis(), 0, "{d}");
        let input: Value = serde_json::from_str(row[1].as_deref().unwrap()).unwrap();
        assert_eq!(input["scheduled_at"], json!(d));
    }
}

/// `data` of an answer (some answers are the data itself).
fn data(r: &Answer) -> &Value {
    if r.body["data"].is_null() {
        &r.body
    } else {
        &r.body["data"]
    }
}

/// The scheduled runs of genie `gid` due after `after`, by due time.
fn runs_due_after(url: &str, gid: &str, after: chrono::DateTime<chrono::Utc>) -> Vec<String> {
    sql(
        url,
        "SELECT due_at FROM worker_runs WHERE worker_genie_id = $1 AND due_at IS NOT NULL ORDER BY due_at",
        vec![gid.to_string()],
    )
    .into_iter()
    .filter_map(|r| r[0].clone())
    .filter(|d| {
        chrono::DateTime::parse_from_rfc3339(d).is_ok_and(|t| t > after)
    })
    .collect()
}

#[tokio::test]
async fn a_schedule_changed_on_one_instance_is_followed_by_the_others_within_seconds() {
    if skipped() {
        return;
    }
    let url = postgres::database();
    let data_dir = tempfile::tempdir().unwrap();
    let seconds = ["--worker-allow-seconds-cron"];
    let (mut a, b) = tokio::join!(
        start(data_dir.path(), &url, "inst-a", &seconds),
        start(data_dir.path(), &url, "inst-b", &seconds)
    );
    let token = admin_token(data_dir.path(), &a.base).await;
    let create = |base: String, name: &'static str| {
        let token = token.clone();
        async move {
            let r = call(
                &base,
                &token,
                "worker-genies",
                "create",
                None,
                json!({"name": name, "soul_prompt": "x", "trigger_type": "schedule", "schedule": "*/2 * * * * *"}),
            )
            .await;
            assert_eq!(r.status, 201, "{}", r.body);
            data(&r)["worker_genie"]["id"].as_str().unwrap().to_string()
        }
    };

    // Created on A while B runs (B registered its schedules at its start, before this one),
    // then A is killed: only B can fire it, so B picked it up.
    let gid = create(a.base.clone(), "made on a").await;
    a.proc.kill();
    let killed = chrono::Utc::now();
    until("two runs fired by B after A died", || {
        let (url, gid) = (url.clone(), gid.clone());
        async move { runs_due_after(&url, &gid, killed).len() >= 2 }
    })
    .await;
    let due = runs_due_after(&url, &gid, chrono::DateTime::<chrono::Utc>::MIN_UTC);
    let distinct: std::collections::HashSet<_> = due.iter().collect();
    assert_eq!(distinct.len(), due.len(), "a due time ran twice: {due:?}");

    // Changed on C to once a year: B stops firing it. A marker schedule created on C after
    // the change, and fired by B once C is gone too, shows B has synced past the change.
    let mut c = start(data_dir.path(), &url, "inst-c", &seconds).await;
    let r = call(
        &c.base,
        &token,
        "worker-genies",
        "update",
        Some(&gid),
        json!({"schedule": "0 0 0 1 1 *"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let marker = create(c.base.clone(), "marker").await;
    c.proc.kill();
    let c_killed = chrono::Utc::now();
    until("the marker schedule fired by B after C died", || {
        let (url, marker) = (url.clone(), marker.clone());
        async move { !runs_due_after(&url, &marker, c_killed).is_empty() }
    })
    .await;
    let synced = runs_due_after(&url, &marker, c_killed)[0].clone();
    let synced = chrono::DateTime::parse_from_rfc3339(&synced)
        .unwrap()
        .with_timezone(&chrono::Utc);
    // One more marker run after that: had B kept the old schedule, it fired meanwhile.
    until("a second marker run", || {
        let (url, marker) = (url.clone(), marker.clone());
        async move { !runs_due_after(&url, &marker, synced).is_empty() }
    })
    .await;
    let late = runs_due_after(&url, &gid, synced - chrono::Duration::seconds(1));
    assert!(
        late.is_empty(),
        "B still fires the schedule changed on C: runs due {late:?}"
    );

    // Removed (switched off) on a fresh instance D: B fires the marker no more. (A firing
    // also reads the genie, so this held before B followed; the change above is the case
    // only following catches.)
    let mut d = start(data_dir.path(), &url, "inst-d", &seconds).await;
    let r = call(
        &d.base,
        &token,
        "worker-genies",
        "update",
        Some(&marker),
        json!({"is_active": false}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let third = create(d.base.clone(), "third").await;
    d.proc.kill();
    let d_killed = chrono::Utc::now();
    until("the third schedule fired by B after D died", || {
        let (url, third) = (url.clone(), third.clone());
        async move { runs_due_after(&url, &third, d_killed).len() >= 2 }
    })
    .await;
    let first = runs_due_after(&url, &third, d_killed)[0].clone();
    let first = chrono::DateTime::parse_from_rfc3339(&first)
        .unwrap()
        .with_timezone(&chrono::Utc);
    let late = runs_due_after(&url, &marker, first - chrono::Duration::seconds(1));
    assert!(
        late.is_empty(),
        "B still fires the schedule switched off on D: runs due {late:?}"
    );
    drop(b);
}

const PROMPT: &str = "You are Sunny from Acme Solar. Offer a free rooftop assessment.";
const MODEL: &str = "gpt-4o-mini";

/// Calling hours open all day but one minute, an hour ago (a window over midnight).
fn all_day() -> Value {
    use chrono::Timelike;
    let h = chrono::Utc::now().hour();
    let (s, e) = ((h + 23) % 24, (h + 22) % 24);
    json!({"start": format!("{s:02}:00"), "end": format!("{e:02}:59"), "timezone": "UTC"})
}

fn call_row(url: &str, campaign: &str) -> Vec<Vec<Option<String>>> {
    sql(
        url,
        "SELECT owner, lease_until, status, outcome, error, ended_at FROM campaign_calls WHERE campaign_id = $1",
        vec![campaign.to_string()],
    )
}

#[tokio::test]
async fn a_campaign_call_survives_another_instances_start_and_a_dead_instances_call_is_closed_after_its_lease()
 {
    if skipped() {
        return;
    }
    let url = postgres::database();
    let data_dir = tempfile::tempdir().unwrap();
    let llm = crate::common::fakes::call_llm::FakeCallLlm::start(PROMPT, MODEL, None).await;
    // Every turn of the simulated call waits: the call stays in progress on its instance.
    llm.set_delay(Duration::from_secs(600));
    let flags = [
        "--llm-base-url",
        llm.base.as_str(),
        "--llm-api-key",
        crate::common::fakes::call_llm::API_KEY,
        "--llm-timeout-seconds",
        "600",
    ];
    let mut a = start(data_dir.path(), &url, "inst-a", &flags).await;
    let token = admin_token(data_dir.path(), &a.base).await;
    let r = call(
        &a.base,
        &token,
        "genies",
        "create",
        None,
        json!({"genieName": "Sunny", "systemPrompt": PROMPT, "llmModel": MODEL,
               "firstMessage": "Hi {{lead_name}}, this is Sunny from Acme Solar."}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let genie = data(&r)["genie"]["id"].as_str().unwrap().to_string();
    let r = call(
        &a.base,
        &token,
        "leads",
        "create",
        None,
        json!({"agent_id": genie, "name": "Lead", "phone": "+14155550002"}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let r = call(
        &a.base,
        &token,
        "campaigns",
        "create",
        None,
        json!({"genie_id": genie, "name": "Held", "calling_hours": all_day(), "concurrency": 1, "calls_per_minute": 60}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let campaign = data(&r)["campaign"]["id"].as_str().unwrap().to_string();
    let r = call(
        &a.base,
        &token,
        "campaigns",
        "start",
        Some(&campaign),
        json!({}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    until("A placing the call", || {
        let (url, campaign) = (url.clone(), campaign.clone());
        async move { call_row(&url, &campaign).len() == 1 }
    })
    .await;
    let row = call_row(&url, &campaign);
    assert_eq!(row[0][0].as_deref(), Some("inst-a"), "{row:?}");
    assert_eq!(row[0][2].as_deref(), Some("dialing"), "{row:?}");

    // B starts (and recovers) while A holds the call, then both run for over two leases:
    // the call stays open, A renewing its lease.
    let b = start(data_dir.path(), &url, "inst-b", &flags).await;
    let b_started = chrono::Utc::now();
    let first_lease = row[0][1].clone().unwrap();
    until("two leases with both instances running", || {
        let (url, campaign) = (url.clone(), campaign.clone());
        async move {
            let row = call_row(&url, &campaign);
            assert_eq!(
                row[0][2].as_deref(),
                Some("dialing"),
                "a live instance's call was closed: {row:?}"
            );
            chrono::Utc::now() > b_started + chrono::Duration::seconds(2 * LEASE_SECONDS as i64)
        }
    })
    .await;
    let row = call_row(&url, &campaign);
    let lease_until = row[0][1].clone().unwrap();
    assert!(lease_until > first_lease, "A renews its lease: {row:?}");

    // A dies: after its lease B closes the call as interrupted, never placed again, and the
    // campaign completes.
    let lease_end =
        chrono::DateTime::parse_from_rfc3339(&call_row(&url, &campaign)[0][1].clone().unwrap())
            .unwrap();
    a.proc.kill();
    until("B closing the dead instance's call", || {
        let (url, campaign) = (url.clone(), campaign.clone());
        async move { call_row(&url, &campaign)[0][2].as_deref() == Some("ended") }
    })
    .await;
    let row = call_row(&url, &campaign);
    assert_eq!(row.len(), 1, "the call is not placed again: {row:?}");
    assert_eq!(row[0][3].as_deref(), Some("failed"), "{row:?}");
    assert!(
        row[0][4]
            .as_deref()
            .is_some_and(|e| e.contains("interrupted")),
        "{row:?}"
    );
    let ended = chrono::DateTime::parse_from_rfc3339(row[0][5].as_deref().unwrap()).unwrap();
    assert!(
        ended >= lease_end,
        "closed only after the lease ran out ({ended} < {lease_end})"
    );
    until("the campaign completing on B", || {
        let (base, token, campaign) = (b.base.clone(), token.clone(), campaign.clone());
        async move {
            let r = call(
                &base,
                &token,
                "campaigns",
                "get",
                Some(&campaign),
                json!({}),
            )
            .await;
            data(&r)["campaign"]["status"] == json!("completed")
        }
    })
    .await;
    assert_eq!(llm.problems(), Vec::<String>::new());
}

#[tokio::test]
async fn auth_changes_and_the_rate_limit_hold_across_instances() {
    if skipped() {
        return;
    }
    let url = postgres::database();
    let data = tempfile::tempdir().unwrap();
    let limit = ["--rate-limit-per-minute", "10"];
    let (a, b) = tokio::join!(
        start(data.path(), &url, "inst-a", &limit),
        start(data.path(), &url, "inst-b", &limit)
    );
    let token = admin_token(data.path(), &a.base).await;

    // An API key, cached on B by use, revoked on A: B's next request refuses it.
    let key = |label: &'static str| {
        let (base, token) = (a.base.clone(), token.clone());
        async move {
            let r = call(
                &base,
                &token,
                "api-keys",
                "create",
                None,
                json!({"name": label}),
            )
            .await;
            assert_eq!(r.status, 201, "{}", r.body);
            let d = if r.body["data"].is_null() {
                &r.body
            } else {
                &r.body["data"]
            };
            (
                d["api_key"]["id"].as_str().unwrap().to_string(),
                d["api_key"]["key"].as_str().unwrap().to_string(),
            )
        }
    };
    let (kid, secret) = key("revoked").await;
    for _ in 0..3 {
        let r = call(&b.base, &secret, "profiles", "get", None, json!({})).await;
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let r = call(&a.base, &token, "api-keys", "revoke", Some(&kid), json!({})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = call(&b.base, &secret, "profiles", "get", None, json!({})).await;
    assert_eq!(
        r.status, 401,
        "a key revoked on A still works on B: {}",
        r.body
    );

    // A role changed on A: the user's session on B is a consumer's at its next request.
    let r = call(
        &a.base,
        &token,
        "users",
        "invite",
        None,
        json!({"email": "std@example.test", "role": "standard_user"}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let d = if r.body["data"].is_null() {
        r.body.clone()
    } else {
        r.body["data"].clone()
    };
    let invite = d["token"].as_str().unwrap().to_string();
    let password = "a long enough passphrase 42";
    let r = post(
        &b.base,
        "/v1/auth/accept-invitation",
        json!({"token": invite, "password": password}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let user_id = d["invitation"]["user_id"]
        .as_str()
        .map(str::to_string)
        .or_else(|| {
            one(
                &url,
                "SELECT id FROM users WHERE email = 'std@example.test'",
                vec![],
            )
        })
        .unwrap();
    let session = login(&b.base, "std@example.test", password).await;
    for i in 0..2 {
        let r = call(
            &b.base,
            &session,
            "genie-groups",
            "create",
            None,
            json!({"name": format!("g{i}")}),
        )
        .await;
        assert_eq!(r.status, 201, "{}", r.body);
    }
    let r = call(
        &a.base,
        &token,
        "users",
        "set-role",
        Some(&user_id),
        json!({"role": "consumer"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = call(
        &b.base,
        &session,
        "genie-groups",
        "create",
        None,
        json!({"name": "after"}),
    )
    .await;
    assert_eq!(
        r.status, 403,
        "a role changed on A is not seen on B: {}",
        r.body
    );

    // One limit for a key across both instances: 10 a minute, counted in the database. Not
    // across a minute's turn (the window is the minute), so wait that out if it is near.
    let now = chrono::Utc::now().timestamp() % 60;
    if now > 45 {
        tokio::time::sleep(Duration::from_secs((61 - now) as u64)).await;
    }
    let (_, secret) = key("limited").await;
    for i in 0..10u32 {
        let base = if i % 2 == 0 { &a.base } else { &b.base };
        let r = call(base, &secret, "profiles", "get", None, json!({})).await;
        assert_eq!(r.status, 200, "request {i}: {}", r.body);
        assert_eq!(r.headers["x-ratelimit-limit"], "10");
        assert_eq!(
            r.headers["x-ratelimit-remaining"].to_str().unwrap(),
            (9 - i).to_string(),
            "request {i} on {base}"
        );
    }
    for base in [&a.base, &b.base] {
        let r = call(base, &secret, "profiles", "get", None, json!({})).await;
        assert_eq!(r.status, 429, "{}", r.body);
        assert_eq!(r.body["error"]["code"], "RATE_LIMIT_EXCEEDED", "{}", r.body);
        assert_eq!(r.headers["x-ratelimit-remaining"], "0");
        let wait: u64 = r.headers["retry-after"].to_str().unwrap().parse().unwrap();
        assert!((1..=60).contains(&wait), "{wait}");
    }
}

/// Creates a lead through `base`; its id when acknowledged.
async fn create_lead(
    client: &reqwest::Client,
    base: &str,
    token: &str,
    genie: &str,
    name: String,
) -> Option<i64> {
    let r = client
        .post(format!("{base}/v1"))
        .bearer_auth(token)
        .json(&json!({"resource": "leads", "action": "create",
                      "data": {"agent_id": genie, "name": name}}))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .ok()?;
    if r.status() != 201 {
        return None;
    }
    r.json::<Value>().await.ok()?["data"]["lead"]["id"].as_i64()
}

/// Event-triggered runs per lead id (from each run's input, the event that started it).
fn runs_per_lead(url: &str, worker: &str) -> HashMap<i64, usize> {
    let mut m = HashMap::new();
    for row in sql(
        url,
        "SELECT input FROM worker_runs WHERE worker_genie_id = $1 AND trigger = 'event'",
        vec![worker.to_string()],
    ) {
        let input: Value = serde_json::from_str(row[0].as_deref().unwrap()).unwrap();
        *m.entry(input["event"]["data"]["id"].as_i64().unwrap())
            .or_default() += 1;
    }
    m
}

#[tokio::test]
async fn events_raised_on_any_instance_are_fanned_out_once() {
    if skipped() {
        return;
    }
    const ENDPOINTS: usize = 3;
    let url = postgres::database();
    let data = tempfile::tempdir().unwrap();
    let unlimited = ["--session-rate-limit-per-minute", "0"];
    let (a, b) = tokio::join!(
        start(data.path(), &url, "inst-a", &unlimited),
        start(data.path(), &url, "inst-b", &unlimited)
    );
    let token = admin_token(data.path(), &a.base).await;
    let rx = crate::common::fakes::receivers::Receivers::start().await;
    for n in 0..ENDPOINTS {
        let r = call(
            &a.base,
            &token,
            "webhooks",
            "create",
            None,
            json!({"url": rx.url(n), "event_types": ["lead.created"]}),
        )
        .await;
        assert_eq!(r.status, 201, "{}", r.body);
        rx.set_secret(n, r.body["data"]["webhook"]["secret"].as_str().unwrap());
    }
    let r = call(
        &b.base,
        &token,
        "worker-genies",
        "create",
        None,
        json!({"name": "on lead", "soul_prompt": "x", "trigger_type": "event",
               "event_type": "lead.created"}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let worker = r.body["data"]["worker_genie"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = call(
        &a.base,
        &token,
        "genies",
        "create",
        None,
        json!({"genieName": "Sales", "systemPrompt": "You sell."}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let genie = r.body["data"]["genie"]["id"].as_str().unwrap().to_string();
    let pending = || {
        one(
            &url,
            "SELECT COUNT(*)::text FROM event_outbox WHERE dispatched_at IS NULL",
            vec![],
        )
        .unwrap()
            != "0"
    };

    // Twenty leads, raised on both instances at once: each event reaches each endpoint once
    // and starts the worker genie once, whichever instance dispatched it.
    let client = reqwest::Client::new();
    let made: Vec<Option<i64>> = futures::future::join_all((0..20).map(|i| {
        let base = if i % 2 == 0 { &a.base } else { &b.base };
        create_lead(&client, base, &token, &genie, format!("lead {i}"))
    }))
    .await;
    let leads: Vec<i64> = made.into_iter().map(|l| l.expect("acknowledged")).collect();
    until("every delivery and run", || async {
        rx.delivered().len() >= 20 * ENDPOINTS
            && runs_per_lead(&url, &worker).len() == 20
            && !pending()
            && webhook_jobs(&url) == 0
    })
    .await;
    rx.assert_no_problems();
    let per_event = rx.per_event();
    assert_eq!(per_event.len(), 20 * ENDPOINTS, "{per_event:?}");
    assert!(
        per_event.values().all(|n| *n == 1),
        "an event reached an endpoint twice: {per_event:?}"
    );
    let mut delivered_leads: Vec<i64> = rx
        .delivered()
        .iter()
        .filter(|d| d.endpoint == 0)
        .map(|d| d.event["data"]["id"].as_i64().unwrap())
        .collect();
    delivered_leads.sort();
    let mut sorted = leads.clone();
    sorted.sort();
    assert_eq!(delivered_leads, sorted, "each lead's own event");
    let runs = runs_per_lead(&url, &worker);
    assert!(
        leads.iter().all(|l| runs.get(l) == Some(&1)),
        "one run per event: {runs:?}"
    );

    // SIGKILL one instance while both raise events: every lead that was committed, answered
    // or not, has its event fanned out once (one delivery per endpoint, one run); receivers
    // get each at least once (a POST in flight when its instance died is sent again, with
    // the same Genied-Delivery and event id).
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for base in [a.base.clone(), b.base.clone()] {
        let (stop, token, genie) = (stop.clone(), token.clone(), genie.clone());
        writers.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) {
                n += 1;
                if create_lead(&client, &base, &token, &genie, format!("load {n}"))
                    .await
                    .is_none()
                {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }));
    }
    let leads_now = || {
        one(&url, "SELECT COUNT(*)::text FROM leads", vec![])
            .unwrap()
            .parse::<usize>()
            .unwrap()
    };
    until("load on both instances", || async { leads_now() >= 40 }).await;
    let (mut dead, _survivor) = (b, a);
    dead.proc.kill();
    until("more load on the survivor", || async { leads_now() >= 60 }).await;
    stop.store(true, Ordering::SeqCst);
    for w in writers {
        w.await.unwrap();
    }
    let all: Vec<i64> = sql(&url, "SELECT id::text FROM leads", vec![])
        .into_iter()
        .map(|r| r[0].as_deref().unwrap().parse().unwrap())
        .collect();
    until("the fan-out of every committed lead", || async {
        !pending()
            && webhook_jobs(&url) == 0
            && runs_per_lead(&url, &worker).len() == all.len()
            && rx.per_event().len() == all.len() * ENDPOINTS
    })
    .await;
    rx.assert_no_problems();
    let fanned = rx.deliveries_per_event();
    assert!(
        fanned.values().all(|d| d.len() == 1),
        "an event was fanned out twice to one endpoint: {fanned:?}"
    );
    assert_eq!(
        one(
            &url,
            "SELECT COUNT(*)::text FROM (SELECT webhook_id, event_id FROM webhook_deliveries
             GROUP BY webhook_id, event_id HAVING COUNT(*) > 1) AS twice",
            vec![]
        )
        .as_deref(),
        Some("0"),
        "one delivery row per endpoint and event"
    );
    let runs = runs_per_lead(&url, &worker);
    assert!(
        all.iter().all(|l| runs.get(l) == Some(&1)),
        "one run per event: {runs:?}"
    );
}
