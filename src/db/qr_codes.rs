//! QR code records (soft-deleted, never removed by the API) and the genie page slug they
//! point at.

use crate::db::sql::{Connection, OptionalExtension, Row, params};
use serde::Serialize;

use super::{new_id, now};

#[derive(Debug, Clone, Serialize)]
pub struct QrCode {
    pub id: String,
    pub genie_id: String,
    pub label: Option<String>,
    pub url: String,
    pub download_count: i64,
    pub is_deleted: bool,
    pub created_at: String,
    /// The genie's page slug now; `url` is rebuilt from it by [`QrCode::at`].
    #[serde(skip)]
    pub page_slug: Option<String>,
}

impl QrCode {
    /// The record as shown: its link built from the public base URL of this run and the
    /// genie's slug, so a restart with another `--public-url` moves every code along. The
    /// stored `url` (the link when it was made) stays as the fallback.
    pub fn at(mut self, base: &str) -> QrCode {
        if let Some(slug) = self.page_slug.as_deref().filter(|s| !s.is_empty()) {
            self.url = format!("{}/g/{slug}", base.trim_end_matches('/'));
        }
        self
    }
}

const COLS: &str =
    "q.id, q.genie_id, q.label, q.url, q.download_count, q.is_deleted, q.created_at, g.page_slug";
const FROM: &str = "qr_codes q LEFT JOIN genies g ON g.id = q.genie_id";

fn from_row(r: &Row) -> rusqlite::Result<QrCode> {
    Ok(QrCode {
        id: r.get(0)?,
        genie_id: r.get(1)?,
        label: r.get(2)?,
        url: r.get(3)?,
        download_count: r.get(4)?,
        is_deleted: r.get(5)?,
        created_at: r.get(6)?,
        page_slug: r.get(7)?,
    })
}

/// The genie's page slug, giving it one (as genies get at creation) when it has none.
pub fn ensure_page_slug(c: &Connection, genie_id: &str) -> rusqlite::Result<Option<String>> {
    let row: Option<(Option<String>, String)> = c
        .query_row(
            "SELECT page_slug, name FROM genies WHERE id = ?1",
            [genie_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let Some((slug, name)) = row else {
        return Ok(None);
    };
    if let Some(s) = slug.filter(|s| !s.is_empty()) {
        return Ok(Some(s));
    }
    loop {
        let candidate = crate::db::genies::new_slug(&name);
        let taken: bool = c.query_row(
            "SELECT EXISTS(SELECT 1 FROM genies WHERE page_slug = ?1)",
            [&candidate],
            |r| r.get(0),
        )?;
        if !taken {
            c.execute(
                "UPDATE genies SET page_slug = ?2, updated_at = ?3 WHERE id = ?1",
                params![genie_id, candidate, now()],
            )?;
            return Ok(Some(candidate));
        }
    }
}

/// True when `user_id` owns the genie.
pub fn owns_genie(c: &Connection, user_id: &str, genie_id: &str) -> rusqlite::Result<bool> {
    c.query_row(
        "SELECT EXISTS(SELECT 1 FROM genies WHERE id = ?1 AND user_id = ?2)",
        [genie_id, user_id],
        |r| r.get(0),
    )
}

pub fn insert(
    c: &Connection,
    user_id: &str,
    genie_id: &str,
    label: Option<&str>,
    url: &str,
) -> rusqlite::Result<QrCode> {
    let id = new_id();
    let at = now();
    c.execute(
        "INSERT INTO qr_codes (id, user_id, genie_id, label, url, download_count, is_deleted, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, 0, 0, ?6, ?6)",
        params![id, user_id, genie_id, label, url, at],
    )?;
    Ok(get(c, user_id, &id)?.expect("row just inserted"))
}

/// The user's QR code unless it is soft-deleted.
pub fn get(c: &Connection, user_id: &str, id: &str) -> rusqlite::Result<Option<QrCode>> {
    c.query_row(
        &format!(
            "SELECT {COLS} FROM {FROM} WHERE q.id = ?1 AND q.user_id = ?2 AND q.is_deleted = 0"
        ),
        [id, user_id],
        from_row,
    )
    .optional()
}

pub fn list(
    c: &Connection,
    user_id: &str,
    genie_id: Option<&str>,
) -> rusqlite::Result<Vec<QrCode>> {
    let mut st = c.prepare_cached(&format!(
        "SELECT {COLS} FROM {FROM} WHERE q.user_id = ?1 AND q.is_deleted = 0 AND (?2 IS NULL OR q.genie_id = ?2)
         ORDER BY q.created_at DESC, q.id DESC"
    ))?;
    st.query_map(params![user_id, genie_id], from_row)?
        .collect()
}

pub fn soft_delete(c: &Connection, user_id: &str, id: &str) -> rusqlite::Result<bool> {
    Ok(c.execute(
        "UPDATE qr_codes SET is_deleted = 1, updated_at = ?3 WHERE id = ?1 AND user_id = ?2 AND is_deleted = 0",
        params![id, user_id, now()],
    )? == 1)
}

pub fn add_downloads(
    c: &Connection,
    user_id: &str,
    id: &str,
    n: i64,
) -> rusqlite::Result<Option<QrCode>> {
    let changed = c.execute(
        "UPDATE qr_codes SET download_count = download_count + ?3, updated_at = ?4
         WHERE id = ?1 AND user_id = ?2 AND is_deleted = 0",
        params![id, user_id, n, now()],
    )?;
    if changed == 0 {
        return Ok(None);
    }
    get(c, user_id, id)
}
