//! Voice collections: a user's named, ordered lists of voice ids.

use crate::db::sql::{Connection, OptionalExtension, Row, params};
use serde::Serialize;

use super::{new_id, now};

#[derive(Debug, Clone, Serialize)]
pub struct Collection {
    pub id: String,
    pub name: String,
    pub description: Option<String>,
    pub sort_order: i64,
    pub voice_count: i64,
    /// Voice ids in their order.
    pub voice_ids: Vec<String>,
    pub created_at: String,
    pub updated_at: String,
}

fn from_row(r: &Row) -> rusqlite::Result<Collection> {
    Ok(Collection {
        id: r.get(0)?,
        name: r.get(1)?,
        description: r.get(2)?,
        sort_order: r.get(3)?,
        voice_count: 0,
        voice_ids: vec![],
        created_at: r.get(4)?,
        updated_at: r.get(5)?,
    })
}

const COLS: &str = "id, name, description, sort_order, created_at, updated_at";

fn fill(c: &Connection, mut col: Collection) -> rusqlite::Result<Collection> {
    col.voice_ids = voice_ids(c, &col.id)?;
    col.voice_count = col.voice_ids.len() as i64;
    Ok(col)
}

pub fn voice_ids(c: &Connection, collection_id: &str) -> rusqlite::Result<Vec<String>> {
    let mut st = c.prepare_cached(
        "SELECT voice_id FROM voice_collection_items WHERE collection_id = ?1 ORDER BY position, added_at",
    )?;
    st.query_map([collection_id], |r| r.get(0))?.collect()
}

pub fn get(c: &Connection, user_id: &str, id: &str) -> rusqlite::Result<Option<Collection>> {
    let col = c
        .query_row(
            &format!("SELECT {COLS} FROM voice_collections WHERE id = ?1 AND user_id = ?2"),
            [id, user_id],
            from_row,
        )
        .optional()?;
    col.map(|col| fill(c, col)).transpose()
}

pub fn list(c: &Connection, user_id: &str) -> rusqlite::Result<Vec<Collection>> {
    let mut st = c.prepare_cached(&format!(
        "SELECT {COLS} FROM voice_collections WHERE user_id = ?1 ORDER BY sort_order, created_at, id"
    ))?;
    let cols: Vec<Collection> = st
        .query_map([user_id], from_row)?
        .collect::<rusqlite::Result<_>>()?;
    cols.into_iter().map(|col| fill(c, col)).collect()
}

pub fn insert(
    c: &Connection,
    user_id: &str,
    name: &str,
    description: Option<&str>,
    voices: &[String],
) -> rusqlite::Result<Collection> {
    let id = new_id();
    let at = now();
    let next: i64 = c.query_row(
        "SELECT COALESCE(MAX(sort_order) + 1, 0) FROM voice_collections WHERE user_id = ?1",
        [user_id],
        |r| r.get(0),
    )?;
    c.execute(
        "INSERT INTO voice_collections (id, user_id, name, description, sort_order, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)",
        params![id, user_id, name, description, next, at],
    )?;
    for v in voices {
        add_voice(c, &id, v)?;
    }
    Ok(get(c, user_id, &id)?.expect("row just inserted"))
}

pub fn update(
    c: &Connection,
    user_id: &str,
    id: &str,
    name: Option<&str>,
    description: Option<Option<&str>>,
) -> rusqlite::Result<Option<Collection>> {
    let n = c.execute(
        "UPDATE voice_collections SET name = COALESCE(?3, name),
             description = CASE WHEN ?4 THEN ?5 ELSE description END, updated_at = ?6
         WHERE id = ?1 AND user_id = ?2",
        params![
            id,
            user_id,
            name,
            description.is_some(),
            description.flatten(),
            now()
        ],
    )?;
    if n == 0 {
        return Ok(None);
    }
    get(c, user_id, id)
}

pub fn touch(c: &Connection, id: &str) -> rusqlite::Result<()> {
    c.execute(
        "UPDATE voice_collections SET updated_at = ?2 WHERE id = ?1",
        params![id, now()],
    )?;
    Ok(())
}

pub fn delete(c: &Connection, user_id: &str, id: &str) -> rusqlite::Result<bool> {
    Ok(c.execute(
        "DELETE FROM voice_collections WHERE id = ?1 AND user_id = ?2",
        [id, user_id],
    )? == 1)
}

/// Appends the voice at the end; returns false when it was already in the collection.
pub fn add_voice(c: &Connection, collection_id: &str, voice_id: &str) -> rusqlite::Result<bool> {
    let n = c.execute(
        "INSERT INTO voice_collection_items (collection_id, voice_id, position, added_at)
         SELECT ?1, ?2, COALESCE(MAX(position) + 1, 0), ?3 FROM voice_collection_items WHERE collection_id = ?1
         ON CONFLICT (collection_id, voice_id) DO NOTHING",
        params![collection_id, voice_id, now()],
    )?;
    Ok(n == 1)
}

pub fn remove_voice(c: &Connection, collection_id: &str, voice_id: &str) -> rusqlite::Result<bool> {
    Ok(c.execute(
        "DELETE FROM voice_collection_items WHERE collection_id = ?1 AND voice_id = ?2",
        [collection_id, voice_id],
    )? == 1)
}

pub fn set_voice_order(
    c: &Connection,
    collection_id: &str,
    ordered: &[String],
) -> rusqlite::Result<()> {
    for (i, v) in ordered.iter().enumerate() {
        c.execute(
            "UPDATE voice_collection_items SET position = ?3 WHERE collection_id = ?1 AND voice_id = ?2",
            params![collection_id, v, i as i64],
        )?;
    }
    Ok(())
}

pub fn set_sort_order(c: &Connection, user_id: &str, id: &str, pos: i64) -> rusqlite::Result<bool> {
    Ok(c.execute(
        "UPDATE voice_collections SET sort_order = ?3, updated_at = ?4 WHERE id = ?1 AND user_id = ?2",
        params![id, user_id, pos, now()],
    )? == 1)
}
