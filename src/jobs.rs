//! The durable job queue. Work that must happen even if the process dies (provider clean-up,
//! document pipeline steps, deliveries) is a row in `jobs`; the worker loop (`dispatch`)
//! claims due jobs, runs them, and reschedules failures with exponential backoff. This module
//! is the queue only: it knows no job kind, so everything that queues work can import it. A claim commits `running`
//! before the job runs, so a job found `running` at start belonged to a process that died
//! while running it: it is made due again at most [`MAX_CRASH_RETRIES`] times, then `dead`,
//! so an input that kills the process cannot do so at every restart.

use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;

use crate::db;

/// Times a job found `running` at startup is run again; the next time it is made `dead`.
pub const MAX_CRASH_RETRIES: i64 = 3;
/// `last_error` of a job the process died while running.
pub const CRASHED: &str = "the service stopped while running this job";

/// A claimed job.
#[derive(Debug, Clone)]
pub struct Job {
    pub id: i64,
    pub kind: String,
    pub payload: Value,
    pub attempts: i64,
}

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
    c.execute(
        "INSERT INTO jobs (kind, payload, status, attempts, max_attempts, run_at, created_at, updated_at)
         VALUES (?1, ?2, 'pending', 0, ?3, ?4, ?5, ?5)",
        params![kind, payload.to_string(), max_attempts, run_at, ts],
    )?;
    Ok(c.last_insert_rowid())
}

/// Takes the next due job and marks it `running` (committed before it runs, see above).
pub fn claim(c: &Connection) -> rusqlite::Result<Option<Job>> {
    let now = db::now();
    c.query_row(
        "UPDATE jobs SET status = 'running', attempts = attempts + 1, updated_at = ?1
         WHERE id = (SELECT id FROM jobs WHERE status = 'pending' AND run_at <= ?1 ORDER BY run_at, id LIMIT 1)
         RETURNING id, kind, payload, attempts",
        [&now],
        job_row,
    )
    .optional()
}

fn job_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Job> {
    Ok(Job {
        id: r.get(0)?,
        kind: r.get(1)?,
        payload: serde_json::from_str(&r.get::<_, String>(2)?).unwrap_or(Value::Null),
        attempts: r.get(3)?,
    })
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

/// Records how a claimed job ended: deleted when done, else due again after [`backoff`] or
/// `dead` once its `max_attempts` are used.
pub fn finish(
    c: &Connection,
    job: &Job,
    outcome: &Result<(), String>,
    base_ms: u64,
) -> rusqlite::Result<Finished> {
    let now = db::now();
    match outcome {
        Ok(()) => {
            c.execute("DELETE FROM jobs WHERE id = ?1", [job.id])?;
            Ok(Finished::Done)
        }
        Err(e) => {
            let max: Option<i64> = c.query_row(
                "SELECT max_attempts FROM jobs WHERE id = ?1",
                [job.id],
                |r| r.get(0),
            )?;
            let dead = max.is_some_and(|m| job.attempts >= m);
            let wait =
                chrono::Duration::from_std(backoff(job.attempts, base_ms)).unwrap_or_default();
            let run_at = db::fmt_time(chrono::Utc::now() + wait);
            c.execute(
                "UPDATE jobs SET status = ?2, last_error = ?3, run_at = ?4, updated_at = ?5 WHERE id = ?1",
                params![job.id, if dead { "dead" } else { "pending" }, e, run_at, now],
            )?;
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
    let dead = c
        .prepare(
            "UPDATE jobs SET status = 'dead', crash_retries = crash_retries + 1, last_error = ?2,
                    updated_at = ?1
             WHERE status = 'running' AND crash_retries >= ?3
             RETURNING id, kind, payload, attempts",
        )?
        .query_map(params![now, CRASHED, MAX_CRASH_RETRIES], job_row)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let requeued = c.execute(
        "UPDATE jobs SET status = 'pending', crash_retries = crash_retries + 1, last_error = ?2,
                updated_at = ?1
         WHERE status = 'running'",
        params![now, CRASHED],
    )?;
    Ok(Recovered { requeued, dead })
}

/// Counts jobs not yet done (pending or running); used by tests and `admin check`.
pub fn pending_count(c: &Connection) -> rusqlite::Result<i64> {
    c.query_row(
        "SELECT COUNT(*) FROM jobs WHERE status IN ('pending', 'running')",
        [],
        |r| r.get(0),
    )
}

/// A job `admin check` reports: dead, or run again after the process died running it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Troubled {
    pub id: i64,
    pub kind: String,
    pub status: String,
    pub attempts: i64,
    pub crash_retries: i64,
    pub last_error: Option<String>,
    /// The document a `document.*` job works on (payloads are not shown whole).
    pub document_id: Option<String>,
    pub updated_at: String,
}

/// Dead jobs and jobs the process died while running, oldest first (at most `limit`).
pub fn troubled(c: &Connection, limit: i64) -> rusqlite::Result<Vec<Troubled>> {
    c.prepare(
        "SELECT id, kind, status, attempts, crash_retries, last_error,
                json_extract(CASE WHEN json_valid(payload) THEN payload END, '$.document_id'),
                updated_at
         FROM jobs WHERE status = 'dead' OR crash_retries > 0 ORDER BY id LIMIT ?1",
    )?
    .query_map([limit], |r| {
        Ok(Troubled {
            id: r.get(0)?,
            kind: r.get(1)?,
            status: r.get(2)?,
            attempts: r.get(3)?,
            crash_retries: r.get(4)?,
            last_error: r.get(5)?,
            document_id: r.get(6).ok().flatten(),
            updated_at: r.get(7)?,
        })
    })?
    .collect()
}
