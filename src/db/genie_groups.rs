//! Genie groups: a user's folders for genies, with a manual order and live agent counts.

use crate::db::sql::{Connection, OptionalExtension, Row, params};
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Group {
    pub id: String,
    pub name: String,
    pub description: Option<String>,
    pub sort_order: i64,
    pub agent_count: i64,
    pub created_at: String,
    pub updated_at: String,
}

const SELECT: &str = "SELECT g.id, g.name, g.description, g.sort_order,
    (SELECT COUNT(*) FROM genies x WHERE x.group_id = g.id) AS agent_count, g.created_at, g.updated_at
    FROM genie_groups g";

fn from_row(r: &Row) -> rusqlite::Result<Group> {
    Ok(Group {
        id: r.get(0)?,
        name: r.get(1)?,
        description: r.get(2)?,
        sort_order: r.get(3)?,
        agent_count: r.get(4)?,
        created_at: r.get(5)?,
        updated_at: r.get(6)?,
    })
}

pub fn insert(
    c: &Connection,
    id: &str,
    user_id: &str,
    name: &str,
    description: Option<&str>,
    at: &str,
) -> rusqlite::Result<()> {
    let pos: i64 = c.query_row(
        "SELECT COALESCE(MAX(sort_order) + 1, 0) FROM genie_groups WHERE user_id = ?1",
        [user_id],
        |r| r.get(0),
    )?;
    c.execute(
        "INSERT INTO genie_groups (id, user_id, name, description, sort_order, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)",
        params![id, user_id, name, description, pos, at],
    )?;
    Ok(())
}

/// The user's group, or `None` when absent or someone else's.
pub fn get(c: &Connection, user_id: &str, id: &str) -> rusqlite::Result<Option<Group>> {
    c.query_row(
        &format!("{SELECT} WHERE g.id = ?1 AND g.user_id = ?2"),
        [id, user_id],
        from_row,
    )
    .optional()
}

/// Any group by id (the genie object's `group`, whose owner is the genie's owner).
pub fn find(c: &Connection, id: &str) -> rusqlite::Result<Option<Group>> {
    c.query_row(&format!("{SELECT} WHERE g.id = ?1"), [id], from_row)
        .optional()
}

pub fn list(c: &Connection, user_id: &str) -> rusqlite::Result<Vec<Group>> {
    let mut st = c.prepare_cached(&format!(
        "{SELECT} WHERE g.user_id = ?1 ORDER BY g.sort_order, g.id"
    ))?;
    st.query_map([user_id], from_row)?.collect()
}

pub fn update(
    c: &Connection,
    user_id: &str,
    id: &str,
    name: &str,
    description: Option<&str>,
    at: &str,
) -> rusqlite::Result<bool> {
    Ok(c.execute(
        "UPDATE genie_groups SET name = ?3, description = ?4, updated_at = ?5 WHERE id = ?1 AND user_id = ?2",
        params![id, user_id, name, description, at],
    )? == 1)
}

/// Deletes the group; its genies become ungrouped (the foreign key's `ON DELETE SET NULL`,
/// made explicit so `updated_at` moves too). Returns how many genies were ungrouped.
pub fn delete(
    c: &Connection,
    user_id: &str,
    id: &str,
    at: &str,
) -> rusqlite::Result<Option<usize>> {
    if get(c, user_id, id)?.is_none() {
        return Ok(None);
    }
    let n = c.execute(
        "UPDATE genies SET group_id = NULL, updated_at = ?2 WHERE group_id = ?1",
        params![id, at],
    )?;
    c.execute(
        "DELETE FROM genie_groups WHERE id = ?1 AND user_id = ?2",
        [id, user_id],
    )?;
    Ok(Some(n))
}

pub fn set_sort_order(
    c: &Connection,
    user_id: &str,
    id: &str,
    pos: i64,
    at: &str,
) -> rusqlite::Result<bool> {
    Ok(c.execute(
        "UPDATE genie_groups SET sort_order = ?3, updated_at = ?4 WHERE id = ?1 AND user_id = ?2",
        params![id, user_id, pos, at],
    )? == 1)
}
