//! The `jobs` table: the statements of the durable queue. The queue's rules (when a job is
//! due again, when it is dead) are `crate::jobs`; here only the rows.

use crate::db::sql::{Connection, OptionalExtension, params};
use serde_json::Value;

/// A claimed job.
#[derive(Debug, Clone)]
pub struct Job {
    pub id: i64,
    pub kind: String,
    pub payload: Value,
    pub attempts: i64,
}

fn job_row(r: &crate::db::Row<'_>) -> rusqlite::Result<Job> {
    Ok(Job {
        id: r.get(0)?,
        kind: r.get(1)?,
        payload: serde_json::from_str(&r.get::<_, String>(2)?).unwrap_or(Value::Null),
        attempts: r.get(3)?,
    })
}

/// Adds a `pending` job due at `run_at`.
pub fn insert(
    c: &Connection,
    kind: &str,
    payload: &Value,
    max_attempts: Option<i64>,
    run_at: &str,
    now: &str,
) -> rusqlite::Result<i64> {
    c.query_row(
        "INSERT INTO jobs (kind, payload, status, attempts, max_attempts, run_at, created_at, updated_at)
         VALUES (?1, ?2, 'pending', 0, ?3, ?4, ?5, ?5) RETURNING id",
        params![kind, payload.to_string(), max_attempts, run_at, now],
        |r| r.get(0),
    )
}

/// Marks the next job due at `now` `running`, held by `owner` until `lease_until`, and
/// counts the attempt, in one statement. On PostgreSQL the row is taken `FOR UPDATE SKIP
/// LOCKED`, so claims of several instances never wait on or take the same row.
pub fn claim_due(
    c: &Connection,
    now: &str,
    owner: &str,
    lease_until: &str,
) -> rusqlite::Result<Option<Job>> {
    let lock = if c.is_postgres() {
        " FOR UPDATE SKIP LOCKED"
    } else {
        ""
    };
    c.query_row(
        &format!(
            "UPDATE jobs SET status = 'running', attempts = attempts + 1, owner = ?2,
                    lease_until = ?3, updated_at = ?1
             WHERE id = (SELECT id FROM jobs WHERE status = 'pending' AND run_at <= ?1
                         ORDER BY run_at, id LIMIT 1{lock})
             RETURNING id, kind, payload, attempts"
        ),
        params![now, owner, lease_until],
        job_row,
    )
    .optional()
}

/// Extends `owner`'s lease on running job `id`; false when the job is no longer its own
/// (another instance took it over after the lease ran out, or it was removed).
pub fn renew(c: &Connection, id: i64, owner: &str, lease_until: &str) -> rusqlite::Result<bool> {
    Ok(c.execute(
        "UPDATE jobs SET lease_until = ?3 WHERE id = ?1 AND owner = ?2 AND status = 'running'",
        params![id, owner, lease_until],
    )? == 1)
}

/// Whether running job `id` is still held by `owner`.
pub fn held_by(c: &Connection, id: i64, owner: &str) -> rusqlite::Result<bool> {
    c.query_row(
        "SELECT COUNT(*) FROM jobs WHERE id = ?1 AND owner = ?2 AND status = 'running'",
        params![id, owner],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n == 1)
}

pub fn delete(c: &Connection, id: i64) -> rusqlite::Result<()> {
    c.execute("DELETE FROM jobs WHERE id = ?1", [id])?;
    Ok(())
}

pub fn max_attempts(c: &Connection, id: i64) -> rusqlite::Result<Option<i64>> {
    c.query_row("SELECT max_attempts FROM jobs WHERE id = ?1", [id], |r| {
        r.get(0)
    })
}

/// Records a failed attempt: `dead`, or `pending` again at `run_at`.
pub fn record_failure(
    c: &Connection,
    id: i64,
    dead: bool,
    error: &str,
    run_at: &str,
    now: &str,
) -> rusqlite::Result<()> {
    c.execute(
        "UPDATE jobs SET status = ?2, last_error = ?3, run_at = ?4, updated_at = ?5,
                owner = NULL, lease_until = NULL
         WHERE id = ?1",
        params![
            id,
            if dead { "dead" } else { "pending" },
            error,
            run_at,
            now
        ],
    )?;
    Ok(())
}

/// Which `running` jobs belong to no live instance: every one (`all`, one instance on
/// SQLite, at its start), or those whose lease ran out before `now`, of no owner (rows from
/// before leases), or of `me` (this instance's id from a previous life: given at start only,
/// since while the instance runs its own running jobs are live).
pub struct Orphans<'a> {
    pub all: bool,
    pub me: Option<&'a str>,
    pub now: &'a str,
}

const ORPHAN: &str = "status = 'running'
    AND (?3 = 1 OR owner IS NULL OR owner = ?4 OR lease_until IS NULL OR lease_until < ?1)";

/// Makes `dead` the orphaned jobs already taken back `max_crash_retries` times, and returns
/// them.
pub fn kill_crashed(
    c: &Connection,
    error: &str,
    max_crash_retries: i64,
    o: &Orphans<'_>,
) -> rusqlite::Result<Vec<Job>> {
    c.prepare(&format!(
        "UPDATE jobs SET status = 'dead', crash_retries = crash_retries + 1, last_error = ?2,
                owner = NULL, lease_until = NULL, updated_at = ?1
         WHERE {ORPHAN} AND crash_retries >= ?5
         RETURNING id, kind, payload, attempts"
    ))?
    .query_map(
        params![o.now, error, i64::from(o.all), o.me, max_crash_retries],
        job_row,
    )?
    .collect()
}

/// Makes every remaining orphaned job due again, counting the crash.
pub fn requeue_crashed(c: &Connection, error: &str, o: &Orphans<'_>) -> rusqlite::Result<usize> {
    c.execute(
        &format!(
            "UPDATE jobs SET status = 'pending', crash_retries = crash_retries + 1, last_error = ?2,
                    owner = NULL, lease_until = NULL, updated_at = ?1
             WHERE {ORPHAN}"
        ),
        params![o.now, error, i64::from(o.all), o.me],
    )
}

/// Jobs not yet done (pending or running).
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
