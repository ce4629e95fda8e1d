//! Webhook endpoints, their deliveries and each delivery's attempts.

use crate::db::sql::{Connection, OptionalExtension, Row, params};
use serde::Serialize;

use super::{json_col, now};

#[derive(Debug, Clone, Serialize)]
pub struct Webhook {
    pub id: String,
    pub url: String,
    pub description: Option<String>,
    pub event_types: Vec<String>,
    pub is_active: bool,
    pub secret_prefix: String,
    pub disabled_reason: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

const COLS: &str = "id, url, description, event_types, is_active, secret_prefix, disabled_reason, created_at, updated_at";

fn from_row(r: &Row) -> rusqlite::Result<Webhook> {
    let types = json_col(r.get(3)?, serde_json::json!([]));
    Ok(Webhook {
        id: r.get(0)?,
        url: r.get(1)?,
        description: r.get(2)?,
        event_types: serde_json::from_value(types).unwrap_or_default(),
        is_active: r.get(4)?,
        secret_prefix: r.get(5)?,
        disabled_reason: r.get(6)?,
        created_at: r.get(7)?,
        updated_at: r.get(8)?,
    })
}

pub struct NewWebhook<'a> {
    pub id: &'a str,
    pub user_id: &'a str,
    pub url: &'a str,
    pub description: Option<&'a str>,
    pub event_types: &'a [String],
    pub sealed: &'a [u8],
    pub secret_prefix: &'a str,
}

pub fn insert(c: &Connection, w: &NewWebhook) -> rusqlite::Result<()> {
    let ts = now();
    c.execute(
        "INSERT INTO webhooks (id, user_id, url, description, event_types, is_active, secret_sealed, secret_prefix, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, 1, ?6, ?7, ?8, ?8)",
        params![w.id, w.user_id, w.url, w.description, serde_json::to_string(w.event_types).unwrap_or_default(), w.sealed, w.secret_prefix, ts],
    )?;
    Ok(())
}

pub fn get(c: &Connection, user_id: &str, id: &str) -> rusqlite::Result<Option<Webhook>> {
    c.query_row(
        &format!("SELECT {COLS} FROM webhooks WHERE id = ?1 AND user_id = ?2"),
        [id, user_id],
        from_row,
    )
    .optional()
}

pub fn list(c: &Connection, user_id: &str) -> rusqlite::Result<Vec<Webhook>> {
    let mut st = c.prepare(&format!(
        "SELECT {COLS} FROM webhooks WHERE user_id = ?1 ORDER BY created_at, id"
    ))?;
    st.query_map([user_id], from_row)?.collect()
}

#[derive(Debug, Default)]
pub struct Patch {
    pub url: Option<String>,
    pub description: Option<Option<String>>,
    pub event_types: Option<Vec<String>>,
    pub is_active: Option<bool>,
}

pub fn update(c: &Connection, user_id: &str, id: &str, p: &Patch) -> rusqlite::Result<bool> {
    let ts = now();
    let n = c.execute(
        "UPDATE webhooks SET updated_at = ?3 WHERE id = ?1 AND user_id = ?2",
        params![id, user_id, ts],
    )?;
    if n == 0 {
        return Ok(false);
    }
    if let Some(v) = &p.url {
        c.execute("UPDATE webhooks SET url = ?2 WHERE id = ?1", params![id, v])?;
    }
    if let Some(v) = &p.description {
        c.execute(
            "UPDATE webhooks SET description = ?2 WHERE id = ?1",
            params![id, v],
        )?;
    }
    if let Some(v) = &p.event_types {
        c.execute(
            "UPDATE webhooks SET event_types = ?2 WHERE id = ?1",
            params![id, serde_json::to_string(v).unwrap_or_default()],
        )?;
    }
    if let Some(v) = p.is_active {
        // Turning an endpoint back on clears the reason it was turned off.
        c.execute("UPDATE webhooks SET is_active = ?2, disabled_reason = CASE WHEN ?2 = 1 THEN NULL ELSE disabled_reason END WHERE id = ?1", params![id, v])?;
    }
    Ok(true)
}

/// A sealed signing secret: (webhook id, nonce, ciphertext).
pub type SealedSecret = (String, Vec<u8>, Vec<u8>);

/// Every sealed secret, for master-key probes and rotation.
pub fn all_sealed(c: &Connection) -> rusqlite::Result<Vec<SealedSecret>> {
    let mut st = c.prepare("SELECT id, secret_sealed FROM webhooks ORDER BY id")?;
    st.query_map([], sealed_secret_row)?.collect()
}

/// One stored secret, the first by id: a probe of which key the stored values open with.
pub fn first_sealed(c: &Connection) -> rusqlite::Result<Option<SealedSecret>> {
    c.query_row(
        "SELECT id, secret_sealed FROM webhooks ORDER BY id LIMIT 1",
        [],
        sealed_secret_row,
    )
    .optional()
}

fn sealed_secret_row(r: &Row) -> rusqlite::Result<SealedSecret> {
    let sealed: Vec<u8> = r.get(1)?;
    let (nonce, ct) = sealed.split_at(sealed.len().min(12));
    Ok((r.get(0)?, nonce.to_vec(), ct.to_vec()))
}

/// The stored form of a sealed secret: the 12-byte nonce followed by the ciphertext.
pub fn join_sealed(nonce: &[u8], ct: &[u8]) -> Vec<u8> {
    [nonce, ct].concat()
}

pub fn set_sealed(c: &Connection, id: &str, nonce: &[u8], ct: &[u8]) -> rusqlite::Result<()> {
    c.execute(
        "UPDATE webhooks SET secret_sealed = ?2 WHERE id = ?1",
        params![id, join_sealed(nonce, ct)],
    )?;
    Ok(())
}

pub fn set_secret(c: &Connection, id: &str, sealed: &[u8], prefix: &str) -> rusqlite::Result<()> {
    c.execute(
        "UPDATE webhooks SET secret_sealed = ?2, secret_prefix = ?3, updated_at = ?4 WHERE id = ?1",
        params![id, sealed, prefix, now()],
    )?;
    Ok(())
}

pub fn delete(c: &Connection, user_id: &str, id: &str) -> rusqlite::Result<bool> {
    Ok(c.execute(
        "DELETE FROM webhooks WHERE id = ?1 AND user_id = ?2",
        [id, user_id],
    )? == 1)
}

/// The active endpoints of a user with the event types they want.
pub fn active_for_user(
    c: &Connection,
    user_id: &str,
) -> rusqlite::Result<Vec<(String, Vec<String>)>> {
    let mut st = c.prepare_cached(
        "SELECT id, event_types FROM webhooks WHERE user_id = ?1 AND is_active = 1",
    )?;
    st.query_map([user_id], |r| {
        let types: Vec<String> =
            serde_json::from_value(json_col(r.get(1)?, serde_json::json!([]))).unwrap_or_default();
        Ok((r.get(0)?, types))
    })?
    .collect()
}

pub fn disable(
    c: &Connection,
    id: &str,
    reason: &str,
) -> rusqlite::Result<Option<(String, String)>> {
    c.execute(
        "UPDATE webhooks SET is_active = 0, disabled_reason = ?2, updated_at = ?3 WHERE id = ?1",
        params![id, reason, now()],
    )?;
    c.query_row(
        "SELECT user_id, url FROM webhooks WHERE id = ?1",
        [id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()
}

/// Everything one delivery attempt needs.
pub struct Target {
    pub delivery_id: String,
    pub webhook_id: String,
    pub user_id: String,
    pub url: String,
    pub is_active: bool,
    pub sealed: Vec<u8>,
    pub event_type: String,
    pub body: String,
}

pub fn target(c: &Connection, delivery_id: &str) -> rusqlite::Result<Option<Target>> {
    c.query_row(
        "SELECT d.id, w.id, w.user_id, w.url, w.is_active, w.secret_sealed, d.event_type, d.body
         FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id WHERE d.id = ?1",
        [delivery_id],
        |r| {
            Ok(Target {
                delivery_id: r.get(0)?,
                webhook_id: r.get(1)?,
                user_id: r.get(2)?,
                url: r.get(3)?,
                is_active: r.get(4)?,
                sealed: r.get(5)?,
                event_type: r.get(6)?,
                body: r.get(7)?,
            })
        },
    )
    .optional()
}

pub fn insert_delivery(
    c: &Connection,
    id: &str,
    webhook_id: &str,
    event_id: &str,
    event_type: &str,
    body: &str,
) -> rusqlite::Result<()> {
    let ts = now();
    c.execute(
        "INSERT INTO webhook_deliveries (id, webhook_id, event_id, event_type, body, status, attempts, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, 'pending', 0, ?6, ?6)",
        params![id, webhook_id, event_id, event_type, body, ts],
    )?;
    Ok(())
}

pub struct Attempt<'a> {
    pub status_code: Option<u16>,
    pub latency_ms: i64,
    pub response_excerpt: Option<&'a str>,
    pub error: Option<&'a str>,
    pub succeeded: bool,
}

pub fn record_attempt(c: &Connection, delivery_id: &str, a: &Attempt) -> rusqlite::Result<()> {
    let ts = now();
    c.execute(
        "INSERT INTO webhook_attempts (delivery_id, status_code, latency_ms, response_excerpt, error, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![delivery_id, a.status_code, a.latency_ms, a.response_excerpt, a.error, ts],
    )?;
    c.execute(
        "UPDATE webhook_deliveries SET attempts = attempts + 1, last_status_code = ?2, last_error = ?3, updated_at = ?4,
                status = CASE WHEN ?5 THEN 'succeeded' ELSE status END
         WHERE id = ?1",
        params![delivery_id, a.status_code, a.error, ts, a.succeeded],
    )?;
    Ok(())
}

pub fn fail_delivery(c: &Connection, delivery_id: &str) -> rusqlite::Result<Option<String>> {
    c.execute(
        "UPDATE webhook_deliveries SET status = 'failed', updated_at = ?2 WHERE id = ?1",
        [delivery_id, &now()],
    )?;
    c.query_row(
        "SELECT webhook_id FROM webhook_deliveries WHERE id = ?1",
        [delivery_id],
        |r| r.get(0),
    )
    .optional()
}

#[derive(Debug, Clone, Serialize)]
pub struct AttemptRow {
    pub status_code: Option<u16>,
    pub latency_ms: i64,
    pub response_excerpt: Option<String>,
    pub error: Option<String>,
    pub created_at: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Delivery {
    pub id: String,
    pub webhook_id: String,
    pub event_id: String,
    pub event_type: String,
    pub status: String,
    pub attempts: i64,
    pub last_status_code: Option<u16>,
    pub last_error: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub attempt_log: Vec<AttemptRow>,
}

const DELIVERY_COLS: &str = "d.id, d.webhook_id, d.event_id, d.event_type, d.status, d.attempts, d.last_status_code, d.last_error, d.created_at, d.updated_at";

fn delivery_row(c: &Connection, r: &Row) -> rusqlite::Result<Delivery> {
    let id: String = r.get(0)?;
    let mut st = c.prepare_cached(
        "SELECT status_code, latency_ms, response_excerpt, error, created_at FROM webhook_attempts WHERE delivery_id = ?1 ORDER BY id",
    )?;
    let attempt_log = st
        .query_map([&id], |a| {
            Ok(AttemptRow {
                status_code: a.get(0)?,
                latency_ms: a.get(1)?,
                response_excerpt: a.get(2)?,
                error: a.get(3)?,
                created_at: a.get(4)?,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(Delivery {
        id,
        webhook_id: r.get(1)?,
        event_id: r.get(2)?,
        event_type: r.get(3)?,
        status: r.get(4)?,
        attempts: r.get(5)?,
        last_status_code: r.get(6)?,
        last_error: r.get(7)?,
        created_at: r.get(8)?,
        updated_at: r.get(9)?,
        attempt_log,
    })
}

/// A delivery of one of the user's endpoints, with its attempt log (a statement of its own:
/// read it through `Db::read_snapshot` where attempts may be recorded meanwhile).
pub fn delivery(c: &Connection, user_id: &str, id: &str) -> rusqlite::Result<Option<Delivery>> {
    let mut st = c.prepare(&format!(
        "SELECT {DELIVERY_COLS} FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id WHERE d.id = ?1 AND w.user_id = ?2"
    ))?;
    let mut rows = st.query([id, user_id])?;
    rows.next()?.map(|r| delivery_row(c, &r)).transpose()
}

/// The body and routing of a delivery to replay.
pub fn delivery_body(
    c: &Connection,
    id: &str,
) -> rusqlite::Result<Option<(String, String, String, String)>> {
    c.query_row(
        "SELECT webhook_id, event_id, event_type, body FROM webhook_deliveries WHERE id = ?1",
        [id],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )
    .optional()
}

pub fn list_deliveries(
    c: &Connection,
    webhook_id: &str,
    limit: i64,
    offset: i64,
) -> rusqlite::Result<(Vec<Delivery>, i64)> {
    let total = c.query_row(
        "SELECT COUNT(*) FROM webhook_deliveries WHERE webhook_id = ?1",
        [webhook_id],
        |r| r.get(0),
    )?;
    let mut st = c.prepare(&format!(
        "SELECT {DELIVERY_COLS} FROM webhook_deliveries d WHERE d.webhook_id = ?1 ORDER BY d.created_at DESC, d.id DESC LIMIT ?2 OFFSET ?3"
    ))?;
    let mut rows = st.query(params![webhook_id, limit, offset])?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        out.push(delivery_row(c, &r)?);
    }
    Ok((out, total))
}
