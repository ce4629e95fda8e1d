//! The durable job queue. Work that must happen even if the process dies (provider clean-up,
//! document pipeline steps, deliveries) is a row in `jobs`; the worker loop (`dispatch`)
//! claims due jobs, runs them, and reschedules failures with exponential backoff. This module
//! is the queue only: it knows no job kind, so everything that queues work can import it. A claim commits `running`
//! before the job runs, so a job found `running` at start belonged to a process that died
//! while running it: it is made due again at most [`MAX_CRASH_RETRIES`] times, then `dead`,
//! so an input that kills the process cannot do so at every restart.

use std::time::Duration;

use rusqlite::Connection;
use serde_json::Value;

use crate::db;
pub use crate::db::jobs::{Job, Troubled};

/// Times a job found `running` at startup is run again; the next time it is made `dead`.
pub const MAX_CRASH_RETRIES: i64 = 3;
/// `last_error` of a job the process died while running.
pub const CRASHED: &str = "the service stopped while running this job";

/// Queues a job (inside the caller's transaction, so it commits with the change that needs
/// it). `max_attempts` `None` retries until it succeeds.
pub fn enqueue(
    c: &Connection,
    kind: &str,
    payload: &Value,
    delay: Duration,
    max_attempts: Option<i64>,
) -> rusqlite::Result<i64> {
    let ts = db::now();
    let run_at =
        db::fmt_time(chrono::Utc::now() + chrono::Duration::from_std(delay).unwrap_or_default());
    db::jobs::insert(c, kind, payload, max_attempts, &run_at, &ts)
}

/// Takes the next due job and marks it `running` (committed before it runs, see above).
pub fn claim(c: &Connection) -> rusqlite::Result<Option<Job>> {
    db::jobs::claim_due(c, &db::now())
}

/// Backoff after the n-th failed attempt: base × 2^n, capped at an hour.
pub fn backoff(attempts: i64, base_ms: u64) -> Duration {
    let factor = 2u64.saturating_pow(attempts.clamp(0, 20) as u32);
    Duration::from_millis(base_ms.saturating_mul(factor).min(3_600_000))
}

/// What happened to a job that ran: done, or failed and either retried later or given up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finished {
    Done,
    Retrying,
    Dead,
}

/// Records how a claimed job ended (`Err` holds the text stored as its `last_error`):
/// deleted when done, else due again after [`backoff`] or `dead` once its `max_attempts`
/// are used.
pub fn finish(
    c: &Connection,
    job: &Job,
    outcome: Result<(), &str>,
    base_ms: u64,
) -> rusqlite::Result<Finished> {
    let now = db::now();
    match outcome {
        Ok(()) => {
            db::jobs::delete(c, job.id)?;
            Ok(Finished::Done)
        }
        Err(e) => {
            let max = db::jobs::max_attempts(c, job.id)?;
            let dead = max.is_some_and(|m| job.attempts >= m);
            let wait =
                chrono::Duration::from_std(backoff(job.attempts, base_ms)).unwrap_or_default();
            let run_at = db::fmt_time(chrono::Utc::now() + wait);
            db::jobs::record_failure(c, job.id, dead, e, &run_at, &now)?;
            Ok(if dead {
                Finished::Dead
            } else {
                Finished::Retrying
            })
        }
    }
}

/// What [`recover`] did: how many jobs it made due again, and the ones it made `dead`.
#[derive(Debug, Default)]
pub struct Recovered {
    pub requeued: usize,
    pub dead: Vec<Job>,
}

/// Deals with the jobs a dead process left `running` (call at startup, before the worker
/// starts): each is due again, unless the process already died [`MAX_CRASH_RETRIES`] times
/// running it, in which case it is `dead` with the reason [`CRASHED`]. Telling what waited on
/// a dead job is the dispatcher's part (`dispatch::recover`), since only it knows job kinds.
pub fn recover(c: &Connection) -> rusqlite::Result<Recovered> {
    let now = db::now();
    let dead = db::jobs::kill_crashed(c, CRASHED, MAX_CRASH_RETRIES, &now)?;
    let requeued = db::jobs::requeue_crashed(c, CRASHED, &now)?;
    Ok(Recovered { requeued, dead })
}

/// Counts jobs not yet done (pending or running); used by tests and `admin check`.
pub fn pending_count(c: &Connection) -> rusqlite::Result<i64> {
    db::jobs::pending_count(c)
}

/// Dead jobs and jobs the process died while running, oldest first (at most `limit`).
pub fn troubled(c: &Connection, limit: i64) -> rusqlite::Result<Vec<Troubled>> {
    db::jobs::troubled(c, limit)
}
