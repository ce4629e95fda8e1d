//! Prometheus metrics through the `metrics` facade. Nothing is recorded until [`install`]
//! puts the exporter's recorder in place (`--metrics-listen`); until then every call below
//! goes to the facade's no-op recorder. Label values are bounded: names from the action
//! tables and job kinds from the code, status codes, fixed outcome words, and model names
//! only when the operator configured them (others are `other`). No ids, no user input.

use std::sync::OnceLock;
use std::time::Duration;

use metrics::{counter, gauge, histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Histogram buckets in seconds: from a cached read (sub-millisecond) to a slow LLM call.
const BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
static PROCESS: OnceLock<metrics_process::Collector> = OnceLock::new();

/// Installs the process-wide recorder (once; later calls return the same handle).
pub fn install() -> anyhow::Result<PrometheusHandle> {
    if let Some(h) = HANDLE.get() {
        return Ok(h.clone());
    }
    let mut builder = PrometheusBuilder::new();
    for name in [
        "genied_http_request_duration_seconds",
        "genied_db_commit_duration_seconds",
        "genied_llm_request_duration_seconds",
    ] {
        builder = builder.set_buckets_for_metric(Matcher::Full(name.into()), BUCKETS)?;
    }
    let recorder = builder.build_recorder();
    let handle = recorder.handle();
    match metrics::set_global_recorder(recorder) {
        Ok(()) => {
            let _ = HANDLE.set(handle);
            describe();
            // Shown from the first scrape: a write that finds the writer free runs at once
            // and never joins the queue, so without this the gauge appeared only after the
            // first write that waited (a scrape after a quiet start had none).
            gauge!("genied_db_write_queue_depth").increment(0.0);
            let process = metrics_process::Collector::default();
            process.describe();
            let _ = PROCESS.set(process);
        }
        // Another thread won the race; its recorder is the one in place.
        Err(_) if HANDLE.get().is_some() => {}
        Err(e) => anyhow::bail!("cannot install the metrics recorder: {e}"),
    }
    HANDLE
        .get()
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("the metrics recorder is not installed"))
}

/// Whether [`install`] ran in this process.
pub fn enabled() -> bool {
    HANDLE.get().is_some()
}

fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        "genied_http_requests_total",
        "HTTP requests answered, by resource, action and status code"
    );
    describe_histogram!(
        "genied_http_request_duration_seconds",
        Unit::Seconds,
        "Time to answer an HTTP request, by resource, action and status class"
    );
    describe_gauge!(
        "genied_db_write_queue_depth",
        "Database writes waiting their turn, not yet started: queued for the single writer \
         (SQLite), waiting for a connection or the write lock (PostgreSQL)"
    );
    describe_histogram!(
        "genied_db_commit_duration_seconds",
        Unit::Seconds,
        "Time of one commit: a group commit of the writer (SQLite), one write \
         transaction's COMMIT (PostgreSQL)"
    );
    describe_gauge!(
        "genied_jobs",
        "Jobs in the durable queue, by kind and state"
    );
    describe_gauge!(
        "genied_job_oldest_due_age_seconds",
        Unit::Seconds,
        "How long the longest-waiting due job of each kind has been due"
    );
    describe_counter!(
        "genied_webhook_deliveries_total",
        "Webhook delivery attempts, by outcome (delivered, failed, refused)"
    );
    describe_counter!(
        "genied_llm_requests_total",
        "LLM chat-completions calls, by model and outcome (ok, error)"
    );
    describe_histogram!(
        "genied_llm_request_duration_seconds",
        Unit::Seconds,
        "Time of one LLM call, by model"
    );
    describe_counter!(
        "genied_llm_tokens_total",
        "LLM tokens, by model and kind (input, output)"
    );
    describe_counter!(
        "genied_worker_runs_total",
        "Worker genie runs finished, by status"
    );
    describe_gauge!(
        "genied_http_requests_in_flight",
        "HTTP requests begun and not yet answered"
    );
    describe_gauge!(
        "genied_conversations_active",
        "Conversations initiated or in progress"
    );
}

/// The text exposition of every metric, after the process metrics are refreshed.
pub fn render() -> Option<String> {
    let handle = HANDLE.get()?;
    if let Some(p) = PROCESS.get() {
        p.collect();
    }
    gauge!("genied_http_requests_in_flight").set(super::load::requests_in_flight() as f64);
    Some(handle.render())
}

/// Drains histogram samples into their buckets so memory stays flat between scrapes.
pub fn upkeep() {
    if let Some(h) = HANDLE.get() {
        h.run_upkeep();
    }
}

/// The status code as a `'static` label (no allocation on the request path).
pub fn status_label(code: u16) -> &'static str {
    match code {
        200 => "200",
        201 => "201",
        202 => "202",
        204 => "204",
        301 => "301",
        302 => "302",
        303 => "303",
        304 => "304",
        307 => "307",
        308 => "308",
        400 => "400",
        401 => "401",
        403 => "403",
        404 => "404",
        405 => "405",
        408 => "408",
        409 => "409",
        413 => "413",
        415 => "415",
        422 => "422",
        429 => "429",
        500 => "500",
        502 => "502",
        503 => "503",
        504 => "504",
        c => status_class(c),
    }
}

pub fn status_class(code: u16) -> &'static str {
    match code / 100 {
        1 => "1xx",
        2 => "2xx",
        3 => "3xx",
        4 => "4xx",
        _ => "5xx",
    }
}

/// One answered HTTP request.
pub fn http_request(resource: &'static str, action: &'static str, status: u16, took: Duration) {
    counter!("genied_http_requests_total", "resource" => resource, "action" => action, "status" => status_label(status))
        .increment(1);
    histogram!("genied_http_request_duration_seconds", "resource" => resource, "action" => action, "status" => status_class(status))
        .record(took.as_secs_f64());
}

/// `n` writes joined (positive) or left (negative) the writer's queue (on PostgreSQL: the
/// wait for a connection and the write lock).
pub fn db_queue(n: f64) {
    gauge!("genied_db_write_queue_depth").increment(n);
}

pub fn db_commit(took: Duration) {
    histogram!("genied_db_commit_duration_seconds").record(took.as_secs_f64());
}

/// One webhook delivery attempt: `delivered`, `failed` or `refused`.
pub fn webhook_delivery(outcome: &'static str) {
    counter!("genied_webhook_deliveries_total", "outcome" => outcome).increment(1);
}

/// One LLM call; `model` is already bounded by the caller (see `llm::Llm::model_label`).
pub fn llm_request(model: &str, ok: bool, took: Duration, tokens_in: i64, tokens_out: i64) {
    let model = model.to_string();
    let outcome = if ok { "ok" } else { "error" };
    counter!("genied_llm_requests_total", "model" => model.clone(), "outcome" => outcome)
        .increment(1);
    histogram!("genied_llm_request_duration_seconds", "model" => model.clone())
        .record(took.as_secs_f64());
    if tokens_in > 0 {
        counter!("genied_llm_tokens_total", "model" => model.clone(), "kind" => "input")
            .increment(tokens_in as u64);
    }
    if tokens_out > 0 {
        counter!("genied_llm_tokens_total", "model" => model, "kind" => "output")
            .increment(tokens_out as u64);
    }
}

/// A worker genie run ended: `succeeded` or `failed`.
pub fn worker_run(status: &'static str) {
    counter!("genied_worker_runs_total", "status" => status).increment(1);
}

/// Jobs of one kind in one state, and (for the pending ones) how long the oldest has been due.
#[derive(Debug, Clone)]
pub struct JobGauge {
    pub kind: String,
    pub state: String,
    pub count: i64,
    pub oldest_due_age_seconds: f64,
}

/// Sets the queue gauges from a fresh count; kinds and states seen before and absent now
/// drop to zero instead of keeping their last value.
pub fn set_jobs(now: &[JobGauge]) {
    use std::collections::BTreeSet;
    use std::sync::Mutex;
    static SEEN: Mutex<BTreeSet<(String, String)>> = Mutex::new(BTreeSet::new());
    let mut seen = SEEN.lock().unwrap_or_else(|p| p.into_inner());
    let mut due_kinds = BTreeSet::new();
    for j in now {
        seen.insert((j.kind.clone(), j.state.clone()));
    }
    for (kind, state) in seen.iter() {
        let found = now.iter().find(|j| &j.kind == kind && &j.state == state);
        gauge!("genied_jobs", "kind" => kind.clone(), "state" => state.clone())
            .set(found.map_or(0.0, |j| j.count as f64));
        if state == "pending" && due_kinds.insert(kind.clone()) {
            gauge!("genied_job_oldest_due_age_seconds", "kind" => kind.clone())
                .set(found.map_or(0.0, |j| j.oldest_due_age_seconds));
        }
    }
}

pub fn set_conversations_active(n: i64) {
    gauge!("genied_conversations_active").set(n as f64);
}

#[cfg(test)]
mod tests {
    /// A scrape shows the write queue's gauge before any write has waited in the queue: a
    /// write that finds the writer free never joins it, and a gauge no one has touched is
    /// not rendered at all (a dashboard would show no data rather than 0).
    #[test]
    fn the_write_queue_gauge_is_shown_before_any_write_waits() {
        let text = super::install().unwrap().render();
        assert!(
            text.lines()
                .any(|l| l.starts_with("genied_db_write_queue_depth ")),
            "{text}"
        );
    }
}
