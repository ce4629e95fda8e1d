//! The `event_outbox` table: events written in the transaction of the change that raised
//! them, until a dispatcher fans them out (`crate::outbox`) and housekeeping prunes them.

use crate::db::sql::{Connection, params};
use serde_json::Value;

/// An outbox row not yet dispatched.
#[derive(Debug, Clone)]
pub struct Pending {
    pub seq: i64,
    pub id: String,
    pub kind: String,
    pub user_id: String,
    pub data: Value,
    pub created_at: String,
}

pub fn insert(
    c: &Connection,
    id: &str,
    kind: &str,
    user_id: &str,
    data: &Value,
    created_at: &str,
) -> rusqlite::Result<()> {
    c.prepare_cached(
        "INSERT INTO event_outbox (id, kind, user_id, data, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![id, kind, user_id, data.to_string(), created_at])?;
    Ok(())
}

/// The oldest `limit` undispatched events, in the order they were recorded.
pub fn pending(c: &Connection, limit: i64) -> rusqlite::Result<Vec<Pending>> {
    c.prepare_cached(
        "SELECT seq, id, kind, user_id, data, created_at FROM event_outbox
         WHERE dispatched_at IS NULL ORDER BY seq LIMIT ?1",
    )?
    .query_map([limit], |r| {
        Ok(Pending {
            seq: r.get(0)?,
            id: r.get(1)?,
            kind: r.get(2)?,
            user_id: r.get(3)?,
            data: crate::db::json_col(r.get(4)?, Value::Null),
            created_at: r.get(5)?,
        })
    })?
    .collect()
}

/// Marks event `seq` dispatched at `now`; false when it already was. The condition makes the
/// marking the claim: of two transactions that read the event pending, the second finds it
/// dispatched once the first commits (PostgreSQL re-reads a row an UPDATE waited for).
pub fn mark_dispatched(c: &Connection, seq: i64, now: &str) -> rusqlite::Result<bool> {
    Ok(c.prepare_cached(
        "UPDATE event_outbox SET dispatched_at = ?2 WHERE seq = ?1 AND dispatched_at IS NULL",
    )?
    .execute(params![seq, now])?
        == 1)
}

/// Deletes events dispatched before `before`; how many.
pub fn prune(c: &Connection, before: &str) -> rusqlite::Result<usize> {
    c.execute(
        "DELETE FROM event_outbox WHERE dispatched_at IS NOT NULL AND dispatched_at < ?1",
        [before],
    )
}

/// Undispatched events (for `admin check` and the tests).
pub fn pending_count(c: &Connection) -> rusqlite::Result<i64> {
    c.query_row(
        "SELECT COUNT(*) FROM event_outbox WHERE dispatched_at IS NULL",
        [],
        |r| r.get(0),
    )
}
