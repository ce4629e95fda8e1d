//! The durable job queue. Work that must happen even if the process dies (provider clean-up,
//! document pipeline steps, deliveries) is a row in `jobs`; the worker loop (`dispatch`)
//! claims due jobs, runs them, and reschedules failures with exponential backoff. This module
//! is the queue only: it knows no job kind, so everything that queues work can import it. A claim commits `running`
//! before the job runs, with the claiming instance's id (`owner`) and a lease (`lease_until`)
//! that the instance renews while the job runs. A running job whose lease ran out, or (with
//! SQLite, one instance) any job found `running` at start, belonged to a process that died
//! while running it: it is made due again at most [`MAX_CRASH_RETRIES`] times, then `dead`,
//! so an input that kills the process cannot do so at every restart. With several instances
//! on one PostgreSQL database, a starting instance leaves the live leases of the others
//! alone; their jobs are taken over only once their lease has run out.

use std::time::Duration;

use crate::db::sql::Connection;
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

/// Who claims jobs and for how long: this instance's id and the lease length.
#[derive(Debug, Clone)]
pub struct Lease {
    pub owner: String,
    pub length: Duration,
}

impl Lease {
    /// From `--instance-id` (a generated id when unset) and `--job-lease-seconds`.
    pub fn from_config(config: &crate::config::Config) -> Lease {
        Lease {
            owner: config
                .instance_id
                .clone()
                .unwrap_or_else(generated_instance_id),
            length: Duration::from_secs(config.job_lease_seconds.max(1)),
        }
    }

    /// The lease's end if it starts now.
    pub fn until(&self) -> String {
        db::fmt_time(
            chrono::Utc::now() + chrono::Duration::from_std(self.length).unwrap_or_default(),
        )
    }

    /// How often a running job's lease is renewed: a third of it, so that two renewals may
    /// be late before it runs out.
    pub fn renew_every(&self) -> Duration {
        (self.length / 3).max(Duration::from_millis(100))
    }
}

/// Host name, process id and a random suffix: unique across instances and restarts.
pub fn generated_instance_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "genied".into());
    let suffix: u32 = rand::random();
    format!("{host}-{}-{suffix:08x}", std::process::id())
}

/// Takes the next due job and marks it `running` under `lease` (committed before it runs,
/// see above).
pub fn claim(c: &Connection, lease: &Lease) -> rusqlite::Result<Option<Job>> {
    db::jobs::claim_due(c, &db::now(), &lease.owner, &lease.until())
}

/// Extends the lease on a job this instance is running; false when it is no longer its own
/// (its lease ran out and another instance took it over).
pub fn renew(c: &Connection, job: &Job, lease: &Lease) -> rusqlite::Result<bool> {
    db::jobs::renew(c, job.id, &lease.owner, &lease.until())
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
    /// The lease had run out and another instance had taken the job over: its outcome is
    /// that instance's to record, so this one records nothing.
    Lost,
}

/// Records how a claimed job ended (`Err` holds the text stored as its `last_error`):
/// deleted when done, else due again after [`backoff`] or `dead` once its `max_attempts`
/// are used.
pub fn finish(
    c: &Connection,
    job: &Job,
    lease: &Lease,
    outcome: Result<(), &str>,
    base_ms: u64,
) -> rusqlite::Result<Finished> {
    let now = db::now();
    if !db::jobs::held_by(c, job.id, &lease.owner)? {
        return Ok(Finished::Lost);
    }
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
/// starts): each is due again, unless it was already taken back [`MAX_CRASH_RETRIES`] times,
/// in which case it is `dead` with the reason [`CRASHED`]. With SQLite (one instance) that
/// is every running job; with PostgreSQL only those whose lease ran out or that carry this
/// instance's own id, since the others belong to live instances. Telling what waited on a
/// dead job is the dispatcher's part (`dispatch::recover`), since only it knows job kinds.
pub fn recover(c: &Connection, lease: &Lease) -> rusqlite::Result<Recovered> {
    take_back(c, Some(&lease.owner), !c.is_postgres())
}

/// Takes over the jobs of instances that died: those whose lease ran out, made due again (or
/// `dead`) as [`recover`] does. The worker calls it now and then on PostgreSQL.
pub fn take_over(c: &Connection) -> rusqlite::Result<Recovered> {
    take_back(c, None, false)
}

fn take_back(c: &Connection, me: Option<&str>, all: bool) -> rusqlite::Result<Recovered> {
    let now = db::now();
    let o = db::jobs::Orphans { all, me, now: &now };
    let dead = db::jobs::kill_crashed(c, CRASHED, MAX_CRASH_RETRIES, &o)?;
    let requeued = db::jobs::requeue_crashed(c, CRASHED, &o)?;
    Ok(Recovered { requeued, dead })
}

/// The worker's sign of life: when it last looked for work or finished a job (Unix
/// milliseconds). Kept in memory for `/readyz`; the worker also writes it to the database
/// every [`BEAT_EVERY`] so that `admin check`, another process, can read it.
#[derive(Debug)]
pub struct Heartbeat(std::sync::atomic::AtomicI64);

/// How often the worker writes its heartbeat to the database (when it beats at all).
pub const BEAT_EVERY: Duration = Duration::from_secs(10);

impl Heartbeat {
    /// A heartbeat that beat now: a worker that has not started yet is not stalled.
    pub fn new() -> Heartbeat {
        Heartbeat(std::sync::atomic::AtomicI64::new(
            chrono::Utc::now().timestamp_millis(),
        ))
    }
    pub fn beat(&self) {
        self.0.store(
            chrono::Utc::now().timestamp_millis(),
            std::sync::atomic::Ordering::Relaxed,
        );
    }
    pub fn last(&self) -> chrono::DateTime<chrono::Utc> {
        chrono::DateTime::from_timestamp_millis(self.0.load(std::sync::atomic::Ordering::Relaxed))
            .unwrap_or_default()
    }
}

impl Default for Heartbeat {
    fn default() -> Self {
        Heartbeat::new()
    }
}

/// Whether the worker has stalled, the rule `/readyz` and `admin check` share: a job has
/// been due for longer than `stall` and the worker's last beat is older than `stall`.
/// `None` when it has not; otherwise the sentence that says why.
pub fn stalled(
    oldest_due: Option<chrono::DateTime<chrono::Utc>>,
    last_beat: Option<chrono::DateTime<chrono::Utc>>,
    now: chrono::DateTime<chrono::Utc>,
    stall: Duration,
) -> Option<String> {
    let stall_c = chrono::Duration::from_std(stall).unwrap_or_default();
    let due = oldest_due?;
    let waited = now - due;
    if waited <= stall_c {
        return None;
    }
    let beat_age = last_beat.map(|b| now - b);
    if beat_age.is_some_and(|a| a <= stall_c) {
        return None;
    }
    Some(format!(
        "the job worker has stalled: a job has been due for {} s and the worker {} (limit {} s, --job-stall-seconds)",
        waited.num_seconds(),
        match beat_age {
            Some(a) => format!("last showed life {} s ago", a.num_seconds()),
            None => "never showed life".to_string(),
        },
        stall.as_secs()
    ))
}

/// Counts jobs not yet done (pending or running); used by tests and `admin check`.
pub fn pending_count(c: &Connection) -> rusqlite::Result<i64> {
    db::jobs::pending_count(c)
}

/// Dead jobs and jobs the process died while running, oldest first (at most `limit`).
pub fn troubled(c: &Connection, limit: i64) -> rusqlite::Result<Vec<Troubled>> {
    db::jobs::troubled(c, limit)
}
