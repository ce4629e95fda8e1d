//! The reads behind the gauges a Prometheus scrape refreshes (the job queue by kind and
//! state, conversations under way), and the worker's heartbeat row that readiness and
//! `admin check` read.

use crate::db::sql::{Connection, OptionalExtension, params};

/// Jobs of one kind in one state; for `pending`, also when the longest-due one fell due
/// (`None`: none is due yet).
pub struct JobRow {
    pub kind: String,
    pub state: String,
    pub count: i64,
    pub oldest_due: Option<String>,
}

pub fn job_counts(c: &Connection, now: &str) -> rusqlite::Result<Vec<JobRow>> {
    c.prepare_cached(
        "SELECT kind, status, COUNT(*),
                MIN(CASE WHEN status = 'pending' AND run_at <= ?1 THEN run_at END)
         FROM jobs GROUP BY kind, status",
    )?
    .query_map([now], |r| {
        Ok(JobRow {
            kind: r.get(0)?,
            state: r.get(1)?,
            count: r.get(2)?,
            oldest_due: r.get(3)?,
        })
    })?
    .collect()
}

/// Conversations initiated or in progress (a partial index keeps this a short count).
pub fn active_conversations(c: &Connection) -> rusqlite::Result<i64> {
    c.prepare_cached(
        "SELECT COUNT(*) FROM conversations WHERE status IN ('initiated', 'in-progress')",
    )?
    .query_row([], |r| r.get(0))
}

/// The longest-due pending job: when it fell due (`None`: nothing is due at `now`).
pub fn oldest_due(c: &Connection, now: &str) -> rusqlite::Result<Option<String>> {
    c.query_row(
        "SELECT MIN(run_at) FROM jobs WHERE status = 'pending' AND run_at <= ?1",
        [now],
        |r| r.get(0),
    )
}

/// The job worker's last sign of life as written by the service, and whether it stopped
/// cleanly after it.
pub struct Heartbeat {
    pub beat_at: String,
    pub stopped: bool,
}

pub fn heartbeat(c: &Connection) -> rusqlite::Result<Option<Heartbeat>> {
    c.query_row(
        "SELECT beat_at, stopped FROM worker_heartbeat WHERE id = 1",
        [],
        |r| {
            Ok(Heartbeat {
                beat_at: r.get(0)?,
                stopped: r.get(1)?,
            })
        },
    )
    .optional()
}

pub fn beat(c: &Connection, at: &str, stopped: bool) -> rusqlite::Result<()> {
    c.execute(
        "INSERT INTO worker_heartbeat (id, beat_at, stopped) VALUES (1, ?1, ?2)
         ON CONFLICT (id) DO UPDATE SET beat_at = excluded.beat_at, stopped = excluded.stopped",
        params![at, stopped],
    )?;
    Ok(())
}
