//! What `genied admin check` reads: SQLite's own integrity check, counts of jobs in trouble,
//! and every document file a record names (to compare with the files on disk).

use std::collections::HashSet;

use crate::db::sql::Connection;

/// `PRAGMA integrity_check`, its lines joined; `ok` when the file is sound. PostgreSQL has
/// no such check of the whole database (it checks each page as it reads it): there `ok`
/// once the server answers.
pub fn integrity(c: &Connection) -> rusqlite::Result<String> {
    if c.is_postgres() {
        return c.query_row("SELECT 'ok'", [], |r| r.get(0));
    }
    let mut st = c.prepare("PRAGMA integrity_check")?;
    let lines = st
        .query_map([], |r| r.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(lines.join("; "))
}

/// Jobs counted by state.
pub struct JobCounts {
    /// `running` and not touched since `stale_before`.
    pub stuck: i64,
    pub dead: i64,
    /// Dead with `crashed` as their last error.
    pub crash_dead: i64,
    /// Still to run, after at least one stop of the service while running them.
    pub crash_retried: i64,
}

/// `crashed` is the last error the queue writes for a job the service stopped while running.
pub fn job_counts(
    c: &Connection,
    stale_before: &str,
    crashed: &str,
) -> rusqlite::Result<JobCounts> {
    c.query_row(
        "SELECT COALESCE(SUM(CASE WHEN status = 'running' AND updated_at < ?1 THEN 1 ELSE 0 END), 0),
                COALESCE(SUM(CASE WHEN status = 'dead' THEN 1 ELSE 0 END), 0),
                COALESCE(SUM(CASE WHEN status = 'dead' AND last_error = ?2 THEN 1 ELSE 0 END), 0),
                COALESCE(SUM(CASE WHEN status IN ('pending', 'running') AND crash_retries > 0 THEN 1 ELSE 0 END), 0)
         FROM jobs",
        [stale_before, crashed],
        |r| {
            Ok(JobCounts {
                stuck: r.get(0)?,
                dead: r.get(1)?,
                crash_dead: r.get(2)?,
                crash_retried: r.get(3)?,
            })
        },
    )
}

/// The content hashes of every stored original and extracted text.
pub fn document_hashes(c: &Connection) -> rusqlite::Result<HashSet<String>> {
    c.prepare(
        "SELECT original_hash FROM documents WHERE original_hash IS NOT NULL
         UNION SELECT content_hash FROM documents WHERE content_hash IS NOT NULL",
    )?
    .query_map([], |r| r.get::<_, String>(0))?
    .collect()
}
