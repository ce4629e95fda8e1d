//! The audit log: one row per mutating action, written by `api::dispatch` for every resource,
//! or by the write that carries the action out when it claims the row (see [`claim`]).
//!
//! Stored compactly (migration V37; docs/storage.md, round ten): `id` and `user_id` as the
//! 16 bytes of their UUID, `created_at` as milliseconds since the Unix epoch, the same on both
//! engines (BLOB / INTEGER on SQLite, bytea / bigint on PostgreSQL). The API's text forms are
//! made here, on the way in and out, so nothing above this module sees the difference.

use crate::db::sql::{Connection, Row, ToSql, params};
use serde::Serialize;

use super::{ms_text, text_ms};

#[derive(Debug, Clone, Serialize)]
pub struct Activity {
    pub id: String,
    pub user_id: String,
    pub resource: String,
    pub action: String,
    pub record_id: Option<String>,
    pub summary: String,
    pub ip: Option<String>,
    pub created_at: String,
}

pub struct NewActivity<'a> {
    pub user_id: &'a str,
    pub resource: &'a str,
    pub action: &'a str,
    pub record_id: Option<&'a str>,
    pub summary: &'a str,
    pub ip: Option<&'a str>,
}

pub use super::keys::Key;

/// The text of a stored id (see [`Key`]).
fn key_text(b: Vec<u8>) -> String {
    super::keys::text(&b)
}

pub fn insert(c: &Connection, a: &NewActivity) -> rusqlite::Result<()> {
    c.prepare_cached(
        "INSERT INTO activities (id, user_id, resource, action, record_id, summary, ip, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        Key::Uuid(uuid::Uuid::now_v7().into_bytes()),
        Key::of(a.user_id),
        a.resource,
        a.action,
        a.record_id,
        a.summary,
        a.ip,
        super::now_ms()
    ])?;
    Ok(())
}

#[derive(Debug, Default)]
pub struct Filter {
    /// `None` means every user's (admin mode).
    pub user_id: Option<String>,
    pub resource: Option<String>,
    pub action: Option<String>,
    /// RFC 3339 bounds, inclusive.
    pub from: Option<String>,
    pub to: Option<String>,
}

type Args<'a> = Vec<Box<dyn ToSql + 'a>>;

fn where_clause<'a>(f: &'a Filter) -> rusqlite::Result<(String, Args<'a>)> {
    let mut sql = String::from(" WHERE 1=1");
    let mut args: Args<'a> = Vec::new();
    let mut push = |cond: &str, v: Box<dyn ToSql + 'a>| {
        args.push(v);
        sql.push_str(&format!(" AND {cond} ?{}", args.len()));
    };
    if let Some(v) = &f.user_id {
        push("user_id =", Box::new(Key::of(v)));
    }
    if let Some(v) = &f.resource {
        push("resource =", Box::new(v));
    }
    if let Some(v) = &f.action {
        push("action =", Box::new(v));
    }
    if let Some(v) = &f.from {
        push("created_at >=", Box::new(text_ms(v)?));
    }
    if let Some(v) = &f.to {
        push("created_at <=", Box::new(text_ms(v)?));
    }
    Ok((sql, args))
}

pub fn list(
    c: &Connection,
    f: &Filter,
    limit: i64,
    offset: i64,
) -> rusqlite::Result<(Vec<Activity>, i64)> {
    let (w, mut args) = where_clause(f)?;
    let total: i64 = c.query_row(
        &format!("SELECT COUNT(*) FROM activities{w}"),
        crate::db::sql::params_from_iter(args.iter()),
        |r| r.get(0),
    )?;
    let n = args.len();
    args.push(Box::new(limit));
    args.push(Box::new(offset));
    let mut st = c.prepare(&format!(
        "SELECT id, user_id, resource, action, record_id, summary, ip, created_at FROM activities{w}
         ORDER BY created_at DESC, id DESC LIMIT ?{} OFFSET ?{}",
        n + 1,
        n + 2
    ))?;
    let rows = st
        .query_map(crate::db::sql::params_from_iter(args.iter()), |r: &Row| {
            Ok(Activity {
                id: key_text(r.get(0)?),
                user_id: key_text(r.get(1)?),
                resource: r.get(2)?,
                action: r.get(3)?,
                record_id: r.get(4)?,
                summary: r.get(5)?,
                ip: r.get(6)?,
                created_at: ms_text(r.get(7)?),
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok((rows, total))
}

/// The audit row of the action being served, before its record and summary are known.
#[derive(Debug, Clone)]
pub struct Pending {
    pub user_id: String,
    pub resource: &'static str,
    pub action: String,
    pub ip: Option<String>,
}

impl Pending {
    /// Inserts the row inside the caller's transaction.
    pub fn insert(
        &self,
        c: &Connection,
        record_id: Option<&str>,
        summary: &str,
    ) -> rusqlite::Result<()> {
        insert(
            c,
            &NewActivity {
                user_id: &self.user_id,
                resource: self.resource,
                action: &self.action,
                record_id,
                summary,
                ip: self.ip.as_deref(),
            },
        )
    }
}

/// Where a write action's audit row waits for the write that carries the action out.
pub type Slot = std::sync::Arc<std::sync::Mutex<Option<Pending>>>;

tokio::task_local! {
    static PENDING: Slot;
}

/// Runs `f` with `pending` on offer to [`claim`]. Returns `f`'s output and the audit row when
/// no write claimed it (the caller then writes it on its own).
pub async fn offer<F: std::future::Future>(pending: Pending, f: F) -> (F::Output, Option<Pending>) {
    let slot: Slot = std::sync::Arc::new(std::sync::Mutex::new(Some(pending)));
    let out = PENDING.scope(slot.clone(), f).await;
    let left = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
    (out, left)
}

/// Takes the audit row on offer when it records an action on `resource`, for the write that
/// carries the action out to insert in its own transaction: the row then commits with the
/// change it records, in the same commit, instead of in a second transaction of its own.
/// Must be called on the async side (where the action runs), before `Db::write`.
pub fn claim(resource: &str) -> Option<Pending> {
    PENDING
        .try_with(|slot| {
            let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
            if slot.as_ref().is_some_and(|p| p.resource == resource) {
                slot.take()
            } else {
                None
            }
        })
        .ok()
        .flatten()
}
