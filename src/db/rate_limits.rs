//! `rate_counters` (migration V26): the per-key request counts several PostgreSQL instances
//! share, one row per key and fixed window. The rule (limit, window) is `crate::limits`.

use crate::db::sql::{Connection, params};

/// Counts one request of `key` in the window starting at `window_start` (Unix seconds) and
/// returns the window's count so far, this one included: one statement, atomic on its own.
pub fn count(c: &Connection, key: &str, window_start: i64) -> rusqlite::Result<i64> {
    c.query_row(
        "INSERT INTO rate_counters (key, window_start, n) VALUES (?1, ?2, 1)
         ON CONFLICT (key, window_start) DO UPDATE SET n = rate_counters.n + 1
         RETURNING n",
        params![key, window_start],
        |r| r.get(0),
    )
}

/// Removes the counters of windows that started before `before`.
pub fn prune(c: &Connection, before: i64) -> rusqlite::Result<usize> {
    c.execute(
        "DELETE FROM rate_counters WHERE window_start < ?1",
        [before],
    )
}
