//! API key records. Only a SHA-256 hash of each key is stored, next to a short display prefix.

use crate::db::sql::{Connection, OptionalExtension, Row, params};
use serde::Serialize;

use super::{new_id, now};
use crate::db::users::Role;

pub const MAX_ACTIVE_PER_USER: i64 = 5;

#[derive(Debug, Clone, Serialize)]
pub struct ApiKey {
    pub id: String,
    pub name: String,
    pub key_prefix: String,
    pub status: String,
    pub created_at: String,
    pub last_used_at: Option<String>,
    pub revoked_at: Option<String>,
}

const COLS: &str = "id, name, key_prefix, status, created_at, last_used_at, revoked_at";

fn from_row(r: &Row) -> rusqlite::Result<ApiKey> {
    Ok(ApiKey {
        id: r.get(0)?,
        name: r.get(1)?,
        key_prefix: r.get(2)?,
        status: r.get(3)?,
        created_at: r.get(4)?,
        last_used_at: r.get(5)?,
        revoked_at: r.get(6)?,
    })
}

pub fn count_active(c: &Connection, user_id: &str) -> rusqlite::Result<i64> {
    c.query_row(
        "SELECT COUNT(*) FROM api_keys WHERE user_id = ?1 AND status = 'active'",
        [user_id],
        |r| r.get(0),
    )
}

pub fn insert(
    c: &Connection,
    user_id: &str,
    name: &str,
    key_prefix: &str,
    key_hash: &str,
) -> rusqlite::Result<ApiKey> {
    let id = new_id();
    c.execute(
        "INSERT INTO api_keys (id, user_id, name, key_prefix, key_hash, status, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, 'active', ?6)",
        params![id, user_id, name, key_prefix, key_hash, now()],
    )?;
    Ok(get(c, user_id, &id)?.expect("row just inserted"))
}

pub fn list(c: &Connection, user_id: &str) -> rusqlite::Result<Vec<ApiKey>> {
    let mut st = c.prepare_cached(&format!(
        "SELECT {COLS} FROM api_keys WHERE user_id = ?1 ORDER BY created_at DESC, id DESC"
    ))?;
    st.query_map([user_id], from_row)?.collect()
}

pub fn get(c: &Connection, user_id: &str, id: &str) -> rusqlite::Result<Option<ApiKey>> {
    c.query_row(
        &format!("SELECT {COLS} FROM api_keys WHERE id = ?1 AND user_id = ?2"),
        [id, user_id],
        from_row,
    )
    .optional()
}

/// Revokes the key if it is active; returns the record, or `None` when it is not the user's.
pub fn revoke(c: &Connection, user_id: &str, id: &str) -> rusqlite::Result<Option<ApiKey>> {
    c.execute(
        "UPDATE api_keys SET status = 'revoked', revoked_at = ?3
         WHERE id = ?1 AND user_id = ?2 AND status = 'active'",
        params![id, user_id, now()],
    )?;
    get(c, user_id, id)
}

/// Revokes any user's key by id (operator command).
pub fn revoke_any(c: &Connection, id: &str) -> rusqlite::Result<bool> {
    let n = c.execute(
        "UPDATE api_keys SET status = 'revoked', revoked_at = ?2 WHERE id = ?1 AND status = 'active'",
        params![id, now()],
    )?;
    Ok(n == 1)
}

pub fn delete(c: &Connection, user_id: &str, id: &str) -> rusqlite::Result<bool> {
    Ok(c.execute(
        "DELETE FROM api_keys WHERE id = ?1 AND user_id = ?2",
        [id, user_id],
    )? == 1)
}

/// What authentication needs to know about a presented key.
pub struct KeyOwner {
    pub key_id: String,
    pub user_id: String,
    pub role: Role,
    pub active: bool,
    pub last_used_at: Option<String>,
    /// The authentication epoch of the same snapshot (see `db::auth_epoch`).
    pub epoch: i64,
}

pub fn find_by_hash(c: &Connection, key_hash: &str) -> rusqlite::Result<Option<KeyOwner>> {
    let mut st = c.prepare_cached(
        "SELECT k.id, k.user_id, u.role, k.status, k.last_used_at,
                (SELECT epoch FROM auth_epoch WHERE id = 1), u.disabled_at IS NOT NULL
         FROM api_keys k JOIN users u ON u.id = k.user_id WHERE k.key_hash = ?1",
    )?;
    st.query_row([key_hash], |r| {
        let role: String = r.get(2)?;
        let status: String = r.get(3)?;
        Ok(KeyOwner {
            key_id: r.get(0)?,
            user_id: r.get(1)?,
            role: Role::parse(&role).unwrap_or(Role::Consumer),
            // A disabled user's keys stop with them (V13).
            active: status == "active" && !r.get::<_, bool>(6)?,
            last_used_at: r.get(4)?,
            epoch: r.get(5)?,
        })
    })
    .optional()
}

pub fn touch(c: &Connection, id: &str, at: &str) -> rusqlite::Result<()> {
    c.execute(
        "UPDATE api_keys SET last_used_at = ?2 WHERE id = ?1",
        [id, at],
    )?;
    Ok(())
}

/// Every key of every user, for the operator's listing.
pub fn list_for_user_email(c: &Connection, email: &str) -> rusqlite::Result<Vec<ApiKey>> {
    let mut st = c.prepare(&format!(
        "SELECT {} FROM api_keys k JOIN users u ON u.id = k.user_id WHERE u.email = ?1 ORDER BY k.created_at",
        COLS.split(", ").map(|c| format!("k.{c}")).collect::<Vec<_>>().join(", ")
    ))?;
    st.query_map([email], from_row)?.collect()
}
