//! `email_logs`: one row per mail attempt and recipient (`sent`, `failed` or `notified`).

use crate::db::sql::{Connection, params};

use super::{new_id, now};

pub fn insert(
    c: &Connection,
    user_id: &str,
    recipient: &str,
    subject: &str,
    body: &str,
    status: &str,
    error: Option<&str>,
) -> rusqlite::Result<()> {
    c.execute(
        "INSERT INTO email_logs (id, user_id, recipient, subject, body, status, error, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            new_id(),
            user_id,
            recipient,
            subject,
            body,
            status,
            error,
            now()
        ],
    )?;
    Ok(())
}
