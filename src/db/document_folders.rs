//! Document folders: a tree per user (`parent_id`), with the number of documents in each.

use crate::db::sql::{Connection, OptionalExtension, Row, params};
use serde::Serialize;

use super::{new_id, now};

#[derive(Debug, Clone, Serialize)]
pub struct Folder {
    pub id: String,
    pub name: String,
    pub parent_id: Option<String>,
    pub document_count: i64,
    pub created_at: String,
    pub updated_at: String,
}

const SELECT: &str = "SELECT f.id, f.name, f.parent_id,
        (SELECT COUNT(*) FROM documents d WHERE d.folder_id = f.id), f.created_at, f.updated_at
     FROM document_folders f";

fn from_row(r: &Row) -> rusqlite::Result<Folder> {
    Ok(Folder {
        id: r.get(0)?,
        name: r.get(1)?,
        parent_id: r.get(2)?,
        document_count: r.get(3)?,
        created_at: r.get(4)?,
        updated_at: r.get(5)?,
    })
}

pub fn get(c: &Connection, user_id: &str, id: &str) -> rusqlite::Result<Option<Folder>> {
    c.query_row(
        &format!("{SELECT} WHERE f.id = ?1 AND f.user_id = ?2"),
        params![id, user_id],
        from_row,
    )
    .optional()
}

pub fn list(c: &Connection, user_id: &str) -> rusqlite::Result<Vec<Folder>> {
    let mut st = c.prepare_cached(&format!(
        "{SELECT} WHERE f.user_id = ?1 ORDER BY lower(f.name), f.id"
    ))?;
    st.query_map([user_id], from_row)?.collect()
}

pub fn insert(
    c: &Connection,
    user_id: &str,
    name: &str,
    parent_id: Option<&str>,
) -> rusqlite::Result<Folder> {
    let id = new_id();
    c.execute(
        "INSERT INTO document_folders (id, user_id, name, parent_id, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
        params![id, user_id, name, parent_id, now()],
    )?;
    Ok(get(c, user_id, &id)?.expect("row just inserted"))
}

pub fn update(
    c: &Connection,
    user_id: &str,
    id: &str,
    name: Option<&str>,
    parent: Option<Option<&str>>,
) -> rusqlite::Result<bool> {
    let n = c.execute(
        "UPDATE document_folders SET name = COALESCE(?3, name),
            parent_id = CASE WHEN ?4 THEN ?5 ELSE parent_id END, updated_at = ?6
         WHERE id = ?1 AND user_id = ?2",
        params![id, user_id, name, parent.is_some(), parent.flatten(), now()],
    )?;
    Ok(n == 1)
}

/// The chain of ancestors of `id` (itself first), to refuse cycles.
pub fn ancestors(c: &Connection, id: &str) -> rusqlite::Result<Vec<String>> {
    let mut st = c.prepare_cached(
        "WITH RECURSIVE up(id, parent_id, depth) AS (
             SELECT id, parent_id, 0 FROM document_folders WHERE id = ?1
             UNION ALL
             SELECT f.id, f.parent_id, up.depth + 1 FROM document_folders f JOIN up ON f.id = up.parent_id
             WHERE up.depth < 1000)
         SELECT id FROM up",
    )?;
    st.query_map([id], |r| r.get(0))?.collect()
}

/// Deletes the folder; its documents and sub-folders move to the root.
pub fn delete(c: &Connection, user_id: &str, id: &str) -> rusqlite::Result<Option<i64>> {
    if get(c, user_id, id)?.is_none() {
        return Ok(None);
    }
    let moved = c.execute(
        "UPDATE documents SET folder_id = NULL, updated_at = ?2 WHERE folder_id = ?1",
        params![id, now()],
    )?;
    c.execute(
        "UPDATE document_folders SET parent_id = NULL, updated_at = ?2 WHERE parent_id = ?1",
        params![id, now()],
    )?;
    c.execute(
        "DELETE FROM document_folders WHERE id = ?1 AND user_id = ?2",
        params![id, user_id],
    )?;
    Ok(Some(moved as i64))
}
