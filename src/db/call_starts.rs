//! The calls each genie started, campaign or `genies call`: the ledger its call rate
//! (`max_calls_per_minute`) is counted from. Rows older than the window are pruned as new
//! ones arrive.

use crate::db::sql::{Connection, params};

/// Records that the genie started a call at `started_at`, and forgets the genie's starts
/// before `forget_before` (outside every window the rate looks at).
pub fn record(
    c: &Connection,
    id: &str,
    genie_id: &str,
    campaign_id: Option<&str>,
    started_at: &str,
    forget_before: &str,
) -> rusqlite::Result<()> {
    c.prepare_cached(
        "INSERT INTO genie_call_starts (id, genie_id, campaign_id, started_at) VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![id, genie_id, campaign_id, started_at])?;
    c.prepare_cached("DELETE FROM genie_call_starts WHERE genie_id = ?1 AND started_at < ?2")?
        .execute(params![genie_id, forget_before])?;
    Ok(())
}

/// When the genie's calls started at or after `since` started, oldest first.
pub fn since(c: &Connection, genie_id: &str, since: &str) -> rusqlite::Result<Vec<String>> {
    c.prepare_cached(
        "SELECT started_at FROM genie_call_starts WHERE genie_id = ?1 AND started_at >= ?2 ORDER BY started_at",
    )?
    .query_map(params![genie_id, since], |r| r.get(0))?
    .collect()
}
