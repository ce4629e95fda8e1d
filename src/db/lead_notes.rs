//! Notes on leads. Listing order: pinned notes first, then `sort_order` (set by `reorder`),
//! then newest first.

use crate::db::sql::{Connection, OptionalExtension, Row, params};
use serde::Serialize;

use super::{new_id, now};

#[derive(Debug, Clone, Serialize)]
pub struct Note {
    pub id: String,
    pub lead_id: i64,
    /// The author.
    pub user_id: Option<String>,
    pub content: String,
    pub is_pinned: bool,
    pub sort_order: i64,
    pub created_at: String,
    pub updated_at: String,
}

const COLS: &str = "id, lead_id, user_id, content, is_pinned, sort_order, created_at, updated_at";

fn from_row(r: &Row) -> rusqlite::Result<Note> {
    Ok(Note {
        id: r.get(0)?,
        lead_id: r.get(1)?,
        user_id: r.get(2)?,
        content: r.get(3)?,
        is_pinned: r.get(4)?,
        sort_order: r.get(5)?,
        created_at: r.get(6)?,
        updated_at: r.get(7)?,
    })
}

pub fn insert(
    c: &Connection,
    lead_id: i64,
    user_id: &str,
    content: &str,
    pinned: bool,
) -> rusqlite::Result<Note> {
    let ts = now();
    c.query_row(
        &format!(
            "INSERT INTO lead_notes (id, lead_id, user_id, content, is_pinned, sort_order, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, 0, ?6, ?6) RETURNING {COLS}"
        ),
        params![new_id(), lead_id, user_id, content, pinned, ts],
        from_row,
    )
}

pub fn get(c: &Connection, id: &str) -> rusqlite::Result<Option<Note>> {
    c.query_row(
        &format!("SELECT {COLS} FROM lead_notes WHERE id = ?1"),
        [id],
        from_row,
    )
    .optional()
}

pub fn list(c: &Connection, lead_id: i64) -> rusqlite::Result<Vec<Note>> {
    let mut st = c.prepare_cached(&format!(
        "SELECT {COLS} FROM lead_notes WHERE lead_id = ?1
         ORDER BY is_pinned DESC, sort_order ASC, created_at DESC, id DESC"
    ))?;
    st.query_map([lead_id], from_row)?.collect()
}

pub fn set_content(c: &Connection, id: &str, content: &str) -> rusqlite::Result<()> {
    c.execute(
        "UPDATE lead_notes SET content = ?2, updated_at = ?3 WHERE id = ?1",
        params![id, content, now()],
    )?;
    Ok(())
}

pub fn set_pinned(c: &Connection, id: &str, pinned: bool) -> rusqlite::Result<()> {
    c.execute(
        "UPDATE lead_notes SET is_pinned = ?2, updated_at = ?3 WHERE id = ?1",
        params![id, pinned, now()],
    )?;
    Ok(())
}

/// Sets one note's position; only a note of `lead_id` changes. Returns whether it did.
pub fn set_position(c: &Connection, lead_id: i64, id: &str, pos: i64) -> rusqlite::Result<bool> {
    Ok(c.execute(
        "UPDATE lead_notes SET sort_order = ?3, updated_at = ?4 WHERE id = ?1 AND lead_id = ?2",
        params![id, lead_id, pos, now()],
    )? == 1)
}

pub fn delete(c: &Connection, id: &str) -> rusqlite::Result<bool> {
    Ok(c.execute("DELETE FROM lead_notes WHERE id = ?1", [id])? == 1)
}
