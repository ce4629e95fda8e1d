//! Dashboard notifications of a user: worker genies, conversation reports, failing webhooks.

use crate::db::sql::{Connection, OptionalExtension, Row, params};
use serde::Serialize;
use serde_json::Value;

use super::{json_col, new_id, now};

#[derive(Debug, Clone, Serialize)]
pub struct Notification {
    pub id: String,
    pub kind: String,
    pub title: String,
    pub body: String,
    pub data: Value,
    pub read_at: Option<String>,
    pub created_at: String,
}

const COLS: &str = "id, kind, title, body, data, read_at, created_at";

fn from_row(r: &Row) -> rusqlite::Result<Notification> {
    Ok(Notification {
        id: r.get(0)?,
        kind: r.get(1)?,
        title: r.get(2)?,
        body: r.get(3)?,
        data: json_col(r.get(4)?, Value::Object(Default::default())),
        read_at: r.get(5)?,
        created_at: r.get(6)?,
    })
}

pub fn insert(
    c: &Connection,
    user_id: &str,
    kind: &str,
    title: &str,
    body: &str,
    data: &Value,
) -> rusqlite::Result<String> {
    let id = new_id();
    c.execute(
        "INSERT INTO notifications (id, user_id, kind, title, body, data, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![id, user_id, kind, title, body, data.to_string(), now()],
    )?;
    Ok(id)
}

pub fn list(
    c: &Connection,
    user_id: &str,
    unread_only: bool,
    limit: i64,
    offset: i64,
) -> rusqlite::Result<(Vec<Notification>, i64)> {
    let filter = if unread_only {
        " AND read_at IS NULL"
    } else {
        ""
    };
    let total = c.query_row(
        &format!("SELECT COUNT(*) FROM notifications WHERE user_id = ?1{filter}"),
        [user_id],
        |r| r.get(0),
    )?;
    let mut st = c.prepare(&format!(
        "SELECT {COLS} FROM notifications WHERE user_id = ?1{filter} ORDER BY created_at DESC, id DESC LIMIT ?2 OFFSET ?3"
    ))?;
    let rows = st
        .query_map(params![user_id, limit, offset], from_row)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok((rows, total))
}

pub fn unread_count(c: &Connection, user_id: &str) -> rusqlite::Result<i64> {
    c.query_row(
        "SELECT COUNT(*) FROM notifications WHERE user_id = ?1 AND read_at IS NULL",
        [user_id],
        |r| r.get(0),
    )
}

pub fn mark_read(
    c: &Connection,
    user_id: &str,
    id: &str,
) -> rusqlite::Result<Option<Notification>> {
    c.execute(
        "UPDATE notifications SET read_at = ?3 WHERE id = ?1 AND user_id = ?2 AND read_at IS NULL",
        params![id, user_id, now()],
    )?;
    c.query_row(
        &format!("SELECT {COLS} FROM notifications WHERE id = ?1 AND user_id = ?2"),
        [id, user_id],
        from_row,
    )
    .optional()
}

pub fn mark_all_read(c: &Connection, user_id: &str) -> rusqlite::Result<usize> {
    c.execute(
        "UPDATE notifications SET read_at = ?2 WHERE user_id = ?1 AND read_at IS NULL",
        [user_id, &now()],
    )
}
