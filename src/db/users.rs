//! Users and their profile fields.

use crate::db::sql::{Connection, OptionalExtension, Row, params};
use serde::Serialize;
use serde_json::Value;

use super::{json_col, new_id, now};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
#[clap(rename_all = "snake_case")]
pub enum Role {
    InternalAdmin,
    StandardUser,
    Consumer,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::InternalAdmin => "internal_admin",
            Role::StandardUser => "standard_user",
            Role::Consumer => "consumer",
        }
    }
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "internal_admin" => Some(Role::InternalAdmin),
            "standard_user" => Some(Role::StandardUser),
            "consumer" => Some(Role::Consumer),
            _ => None,
        }
    }
}

/// The profile as the API shows it; never carries the password hash.
#[derive(Debug, Clone, Serialize)]
pub struct User {
    pub id: String,
    pub email: String,
    pub full_name: Option<String>,
    pub role: Role,
    pub avatar_url: Option<String>,
    pub timezone: Option<String>,
    pub preferences: Value,
    pub created_at: String,
    pub updated_at: String,
}

const COLS: &str =
    "id, email, full_name, role, avatar_url, timezone, preferences, created_at, updated_at";

fn from_row(r: &Row) -> rusqlite::Result<User> {
    let role: String = r.get(3)?;
    Ok(User {
        id: r.get(0)?,
        email: r.get(1)?,
        full_name: r.get(2)?,
        role: Role::parse(&role).unwrap_or(Role::Consumer),
        avatar_url: r.get(4)?,
        timezone: r.get(5)?,
        preferences: json_col(r.get(6)?, Value::Object(Default::default())),
        created_at: r.get(7)?,
        updated_at: r.get(8)?,
    })
}

pub fn insert(
    c: &Connection,
    email: &str,
    full_name: Option<&str>,
    role: Role,
    password_hash: Option<&str>,
) -> rusqlite::Result<User> {
    let id = new_id();
    let ts = now();
    c.execute(
        "INSERT INTO users (id, email, full_name, role, password_hash, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)",
        params![id, email, full_name, role.as_str(), password_hash, ts],
    )?;
    get(c, &id).map(|u| u.expect("row just inserted"))
}

pub fn get(c: &Connection, id: &str) -> rusqlite::Result<Option<User>> {
    c.query_row(
        &format!("SELECT {COLS} FROM users WHERE id = ?1"),
        [id],
        from_row,
    )
    .optional()
}

pub fn by_email(c: &Connection, email: &str) -> rusqlite::Result<Option<User>> {
    c.query_row(
        &format!("SELECT {COLS} FROM users WHERE email = ?1"),
        [email],
        from_row,
    )
    .optional()
}

/// The user, password hash and whether the account is disabled, for a sign-in attempt.
pub fn credentials(
    c: &Connection,
    email: &str,
) -> rusqlite::Result<Option<(User, Option<String>, bool)>> {
    c.query_row(
        &format!(
            "SELECT {COLS}, password_hash, disabled_at IS NOT NULL FROM users WHERE email = ?1"
        ),
        [email],
        |r| Ok((from_row(r)?, r.get(9)?, r.get(10)?)),
    )
    .optional()
}

pub fn list(c: &Connection, limit: i64, offset: i64) -> rusqlite::Result<Vec<User>> {
    let mut st = c.prepare(&format!(
        "SELECT {COLS} FROM users ORDER BY created_at, id LIMIT ?1 OFFSET ?2"
    ))?;
    st.query_map([limit, offset], from_row)?.collect()
}

pub fn count(c: &Connection) -> rusqlite::Result<i64> {
    c.query_row("SELECT COUNT(*) FROM users", [], |r| r.get(0))
}

/// Whether any user exists: one index probe, where `count` walks the whole table.
pub fn any(c: &Connection) -> rusqlite::Result<bool> {
    c.query_row("SELECT EXISTS (SELECT 1 FROM users)", [], |r| r.get(0))
}

pub fn set_role(c: &Connection, id: &str, role: Role) -> rusqlite::Result<()> {
    c.execute(
        "UPDATE users SET role = ?2, updated_at = ?3 WHERE id = ?1",
        params![id, role.as_str(), now()],
    )?;
    Ok(())
}

#[derive(Debug, Default)]
pub struct ProfileUpdate {
    pub full_name: Option<Option<String>>,
    pub avatar_url: Option<Option<String>>,
    pub timezone: Option<Option<String>>,
    pub preferences: Option<Value>,
}

pub fn update_profile(c: &Connection, id: &str, u: &ProfileUpdate) -> rusqlite::Result<()> {
    if let Some(v) = &u.full_name {
        c.execute(
            "UPDATE users SET full_name = ?2 WHERE id = ?1",
            params![id, v],
        )?;
    }
    if let Some(v) = &u.avatar_url {
        c.execute(
            "UPDATE users SET avatar_url = ?2 WHERE id = ?1",
            params![id, v],
        )?;
    }
    if let Some(v) = &u.timezone {
        c.execute(
            "UPDATE users SET timezone = ?2 WHERE id = ?1",
            params![id, v],
        )?;
    }
    if let Some(v) = &u.preferences {
        c.execute(
            "UPDATE users SET preferences = ?2 WHERE id = ?1",
            params![id, v.to_string()],
        )?;
    }
    c.execute(
        "UPDATE users SET updated_at = ?2 WHERE id = ?1",
        params![id, now()],
    )?;
    Ok(())
}
