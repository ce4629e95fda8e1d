//! Background `conversations sync` runs: their progress and the position a resumed run
//! starts from.

use crate::db::sql::{Connection, OptionalExtension, Row, params};
use serde::Serialize;
use serde_json::{Value, json};

use super::{json_col, new_id, now};

#[derive(Debug, Clone, Serialize)]
pub struct SyncRun {
    pub id: String,
    #[serde(skip)]
    pub user_id: String,
    pub genie_id: Option<String>,
    /// `queued`, `running`, `succeeded` or `failed`.
    pub status: String,
    pub genies: i64,
    pub genies_done: i64,
    pub created: i64,
    pub updated: i64,
    pub unchanged: i64,
    pub errors: Value,
    /// `{genie_id, cursor}`: where the run goes on from.
    #[serde(skip)]
    pub position: Value,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

const COLS: &str = "id, user_id, genie_id, status, genies, genies_done, created, updated, unchanged, errors, \
    position, started_at, finished_at, created_at, updated_at";

fn from_row(r: &Row) -> rusqlite::Result<SyncRun> {
    Ok(SyncRun {
        id: r.get(0)?,
        user_id: r.get(1)?,
        genie_id: r.get(2)?,
        status: r.get(3)?,
        genies: r.get(4)?,
        genies_done: r.get(5)?,
        created: r.get(6)?,
        updated: r.get(7)?,
        unchanged: r.get(8)?,
        errors: json_col(r.get(9)?, json!([])),
        position: json_col(r.get(10)?, json!({})),
        started_at: r.get(11)?,
        finished_at: r.get(12)?,
        created_at: r.get(13)?,
        updated_at: r.get(14)?,
    })
}

pub fn insert(
    c: &Connection,
    user_id: &str,
    genie_id: Option<&str>,
    genies: i64,
) -> rusqlite::Result<SyncRun> {
    let (id, at) = (new_id(), now());
    c.execute(
        "INSERT INTO sync_runs (id, user_id, genie_id, status, genies, created_at, updated_at)
         VALUES (?1, ?2, ?3, 'queued', ?4, ?5, ?5)",
        params![id, user_id, genie_id, genies, at],
    )?;
    Ok(get_any(c, &id)?.expect("row just inserted"))
}

pub fn get_any(c: &Connection, id: &str) -> rusqlite::Result<Option<SyncRun>> {
    c.query_row(
        &format!("SELECT {COLS} FROM sync_runs WHERE id = ?1"),
        [id],
        from_row,
    )
    .optional()
}

/// A run of `user_id`'s; anyone else's reads as absent.
pub fn get(c: &Connection, user_id: &str, id: &str) -> rusqlite::Result<Option<SyncRun>> {
    c.query_row(
        &format!("SELECT {COLS} FROM sync_runs WHERE id = ?1 AND user_id = ?2"),
        [id, user_id],
        from_row,
    )
    .optional()
}

/// Saves the progress and position of a run (`running`; `started_at` set once).
pub fn save(c: &Connection, r: &SyncRun) -> rusqlite::Result<()> {
    let at = now();
    c.execute(
        "UPDATE sync_runs SET status = ?2, genies_done = ?3, created = ?4, updated = ?5, unchanged = ?6,
             errors = ?7, position = ?8, started_at = COALESCE(started_at, ?9), finished_at = ?10,
             updated_at = ?9
         WHERE id = ?1",
        params![
            r.id,
            r.status,
            r.genies_done,
            r.created,
            r.updated,
            r.unchanged,
            r.errors.to_string(),
            r.position.to_string(),
            at,
            r.finished_at
        ],
    )?;
    Ok(())
}
