//! Genie versions (immutable, numbered per genie, configuration stored deflate-compressed),
//! the one draft a genie may have, its traffic split, and the per-version conversation
//! figures. What a configuration holds is `service::genie_versions`'s business; here it is
//! JSON.

use std::io::{Read, Write};

use crate::db::sql::{Connection, OptionalExtension, params};
use flate2::Compression;
use flate2::read::DeflateDecoder;
use flate2::write::DeflateEncoder;
use serde_json::Value;

/// One version without its configuration (the list).
#[derive(Debug, Clone, serde::Serialize)]
pub struct VersionMeta {
    pub version: i64,
    pub created_at: String,
    pub created_by: Option<String>,
    pub summary: String,
}

/// Every `SNAPSHOT_EVERY`th version is stored whole; the others as the edit from the
/// version before (a common prefix and suffix kept, the middle stored), so a 10 KB prompt
/// edited 1,000 times costs about the edits, and reading a version replays at most this
/// many edits.
const SNAPSHOT_EVERY: i64 = 32;
const WHOLE: u8 = b'F';
const EDIT: u8 = b'D';

fn deflate(bytes: &[u8]) -> rusqlite::Result<Vec<u8>> {
    let mut enc = DeflateEncoder::new(Vec::new(), Compression::default());
    enc.write_all(bytes)
        .and_then(|_| enc.finish())
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
}

fn corrupt(e: impl std::error::Error + Send + Sync + 'static) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Blob, Box::new(e))
}

fn inflate(bytes: &[u8]) -> rusqlite::Result<Vec<u8>> {
    let mut out = Vec::new();
    DeflateDecoder::new(bytes)
        .read_to_end(&mut out)
        .map_err(corrupt)?;
    Ok(out)
}

/// `text` stored whole, or as its edit from `prev`.
fn pack(text: &str, prev: Option<&str>) -> rusqlite::Result<Vec<u8>> {
    let (new, mut out) = (text.as_bytes(), Vec::new());
    match prev {
        None => {
            out.push(WHOLE);
            out.extend(deflate(new)?);
        }
        Some(prev) => {
            let old = prev.as_bytes();
            let prefix = old.iter().zip(new).take_while(|(a, b)| a == b).count();
            let max_suffix = old.len().min(new.len()) - prefix;
            let suffix = old
                .iter()
                .rev()
                .zip(new.iter().rev())
                .take(max_suffix)
                .take_while(|(a, b)| a == b)
                .count();
            let mut edit = Vec::new();
            edit.extend((prefix as u32).to_be_bytes());
            edit.extend((suffix as u32).to_be_bytes());
            edit.extend(&new[prefix..new.len() - suffix]);
            out.push(EDIT);
            out.extend(deflate(&edit)?);
        }
    }
    Ok(out)
}

/// Applies a stored version onto the text of the version before it (`None` for a whole one).
fn unpack(blob: &[u8], prev: Option<&[u8]>) -> rusqlite::Result<Vec<u8>> {
    let (tag, body) = blob.split_first().ok_or_else(|| corrupt(std::fmt::Error))?;
    let raw = inflate(body)?;
    match (*tag, prev) {
        (WHOLE, _) => Ok(raw),
        (EDIT, Some(old)) if raw.len() >= 8 => {
            let prefix = u32::from_be_bytes(raw[..4].try_into().expect("4 bytes")) as usize;
            let suffix = u32::from_be_bytes(raw[4..8].try_into().expect("4 bytes")) as usize;
            if prefix + suffix > old.len() {
                return Err(corrupt(std::fmt::Error));
            }
            let mut out = old[..prefix].to_vec();
            out.extend(&raw[8..]);
            out.extend(&old[old.len() - suffix..]);
            Ok(out)
        }
        _ => Err(corrupt(std::fmt::Error)),
    }
}

/// The configuration text of version `version`: the nearest whole version at or before it,
/// then the edits after it.
fn text_of(c: &Connection, genie_id: &str, version: i64) -> rusqlite::Result<Option<String>> {
    let mut st = c.prepare_cached(
        "SELECT version, config FROM genie_versions WHERE genie_id = ?1 AND version <= ?2
         ORDER BY version DESC LIMIT ?3",
    )?;
    let rows: Vec<(i64, Vec<u8>)> = st
        .query_map(params![genie_id, version, SNAPSHOT_EVERY], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?
        .collect::<rusqlite::Result<_>>()?;
    if rows.first().map(|r| r.0) != Some(version) {
        return Ok(None);
    }
    let start = rows
        .iter()
        .position(|(_, b)| b.first() == Some(&WHOLE))
        .ok_or_else(|| corrupt(std::fmt::Error))?;
    let mut text: Option<Vec<u8>> = None;
    for (_, blob) in rows[..=start].iter().rev() {
        text = Some(unpack(blob, text.as_deref())?);
    }
    String::from_utf8(text.unwrap_or_default())
        .map(Some)
        .map_err(corrupt)
}

/// A stored configuration's text as JSON (an error names it corrupt).
pub fn parse(text: &str) -> rusqlite::Result<Value> {
    serde_json::from_str(text).map_err(corrupt)
}

/// The newest version number and its configuration.
pub fn latest(c: &Connection, genie_id: &str) -> rusqlite::Result<Option<(i64, Value)>> {
    match latest_text(c, genie_id)? {
        Some((v, t)) => Ok(Some((v, parse(&t)?))),
        None => Ok(None),
    }
}

/// The newest version number and its configuration's text, for [`insert_after`].
pub fn latest_text(c: &Connection, genie_id: &str) -> rusqlite::Result<Option<(i64, String)>> {
    let newest: Option<i64> = c
        .prepare_cached("SELECT MAX(version) FROM genie_versions WHERE genie_id = ?1")?
        .query_row([genie_id], |r| r.get(0))?;
    let Some(v) = newest else { return Ok(None) };
    Ok(text_of(c, genie_id, v)?.map(|t| (v, t)))
}

/// [`insert`] after `newest`, the genie's newest version and its text as [`latest_text`]
/// just read them in this transaction: the same row, without replaying the stored edits a
/// second time (a genie update read the newest version twice).
pub fn insert_after(
    c: &Connection,
    genie_id: &str,
    newest: (i64, &str),
    config: &Value,
    created_by: Option<&str>,
    summary: &str,
    at: &str,
) -> rusqlite::Result<i64> {
    let (prev, text) = newest;
    let next = prev + 1;
    let prev = (prev % SNAPSHOT_EVERY != 0).then_some(text);
    store(c, genie_id, next, prev, config, created_by, summary, at)
}

/// Appends a version; returns its number (one past the newest).
pub fn insert(
    c: &Connection,
    genie_id: &str,
    config: &Value,
    created_by: Option<&str>,
    summary: &str,
    at: &str,
) -> rusqlite::Result<i64> {
    let next: i64 = c.query_row(
        "SELECT COALESCE(MAX(version), 0) + 1 FROM genie_versions WHERE genie_id = ?1",
        [genie_id],
        |r| r.get(0),
    )?;
    let prev = if (next - 1) % SNAPSHOT_EVERY == 0 {
        None
    } else {
        text_of(c, genie_id, next - 1)?
    };
    store(
        c,
        genie_id,
        next,
        prev.as_deref(),
        config,
        created_by,
        summary,
        at,
    )
}

/// Stores version `next`, whole or as its edit from `prev` (the text of the version before).
#[allow(clippy::too_many_arguments)]
fn store(
    c: &Connection,
    genie_id: &str,
    next: i64,
    prev: Option<&str>,
    config: &Value,
    created_by: Option<&str>,
    summary: &str,
    at: &str,
) -> rusqlite::Result<i64> {
    let blob = pack(&config.to_string(), prev)?;
    c.prepare_cached(
        "INSERT INTO genie_versions (genie_id, version, config, created_by, created_at, summary)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![genie_id, next, blob, created_by, at, summary])?;
    Ok(next)
}

/// Every version of a genie, newest first.
pub fn list(c: &Connection, genie_id: &str) -> rusqlite::Result<Vec<VersionMeta>> {
    c.prepare_cached(
        "SELECT version, created_at, created_by, summary FROM genie_versions WHERE genie_id = ?1
         ORDER BY version DESC",
    )?
    .query_map([genie_id], |r| {
        Ok(VersionMeta {
            version: r.get(0)?,
            created_at: r.get(1)?,
            created_by: r.get(2)?,
            summary: r.get(3)?,
        })
    })?
    .collect()
}

/// One version with its configuration.
pub fn get(
    c: &Connection,
    genie_id: &str,
    version: i64,
) -> rusqlite::Result<Option<(VersionMeta, Value)>> {
    let meta: Option<VersionMeta> = c
        .prepare_cached(
            "SELECT version, created_at, created_by, summary FROM genie_versions
             WHERE genie_id = ?1 AND version = ?2",
        )?
        .query_row(params![genie_id, version], |r| {
            Ok(VersionMeta {
                version: r.get(0)?,
                created_at: r.get(1)?,
                created_by: r.get(2)?,
                summary: r.get(3)?,
            })
        })
        .optional()?;
    let Some(meta) = meta else { return Ok(None) };
    match text_of(c, genie_id, version)? {
        Some(t) => Ok(Some((meta, parse(&t)?))),
        None => Ok(None),
    }
}

// ---- drafts --------------------------------------------------------------------------

#[derive(Debug, Clone)]
pub struct Draft {
    pub config: Value,
    pub base_version: Option<i64>,
    pub created_by: Option<String>,
    pub updated_at: String,
}

pub fn draft(c: &Connection, genie_id: &str) -> rusqlite::Result<Option<Draft>> {
    c.prepare_cached(
        "SELECT config, base_version, created_by, updated_at FROM genie_drafts WHERE genie_id = ?1",
    )?
    .query_row([genie_id], |r| {
        Ok(Draft {
            config: super::json_col(r.get(0)?, Value::Null),
            base_version: r.get(1)?,
            created_by: r.get(2)?,
            updated_at: r.get(3)?,
        })
    })
    .optional()
}

pub fn save_draft(c: &Connection, genie_id: &str, d: &Draft) -> rusqlite::Result<()> {
    c.execute(
        "INSERT INTO genie_drafts (genie_id, config, base_version, created_by, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (genie_id) DO UPDATE SET config = excluded.config,
             base_version = excluded.base_version, created_by = excluded.created_by,
             updated_at = excluded.updated_at",
        params![
            genie_id,
            d.config.to_string(),
            d.base_version,
            d.created_by,
            d.updated_at
        ],
    )?;
    Ok(())
}

pub fn delete_draft(c: &Connection, genie_id: &str) -> rusqlite::Result<bool> {
    Ok(c.execute("DELETE FROM genie_drafts WHERE genie_id = ?1", [genie_id])? == 1)
}

// ---- traffic -------------------------------------------------------------------------

/// The split as stored: `[{version, weight}]`; `None` when every new conversation gets live.
pub fn traffic(c: &Connection, genie_id: &str) -> rusqlite::Result<Option<Value>> {
    c.prepare_cached("SELECT traffic FROM genie_traffic WHERE genie_id = ?1")?
        .query_row([genie_id], |r| r.get::<_, String>(0))
        .optional()
        .map(|t| t.map(|t| super::json_col(Some(t), Value::Null)))
}

pub fn set_traffic(
    c: &Connection,
    genie_id: &str,
    traffic: Option<&Value>,
    at: &str,
) -> rusqlite::Result<()> {
    match traffic {
        None => {
            c.execute("DELETE FROM genie_traffic WHERE genie_id = ?1", [genie_id])?;
        }
        Some(t) => {
            c.execute(
                "INSERT INTO genie_traffic (genie_id, traffic, updated_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (genie_id) DO UPDATE SET traffic = excluded.traffic, updated_at = excluded.updated_at",
                params![genie_id, t.to_string(), at],
            )?;
        }
    }
    Ok(())
}

// ---- per-version figures -------------------------------------------------------------

#[derive(Debug, Clone, serde::Serialize)]
pub struct VersionStats {
    /// `null`: conversations from before versions were recorded, or of no page split.
    pub version: Option<i64>,
    pub conversations: i64,
    pub average_duration_seconds: Option<f64>,
    pub analysed: i64,
    /// Of the analysed ones, the share whose analysis found neither a negative sentiment nor
    /// a complaint; `null` when none was analysed.
    pub successful_share: Option<f64>,
}

pub fn stats(c: &Connection, genie_id: &str) -> rusqlite::Result<Vec<VersionStats>> {
    c.prepare_cached(
        "SELECT version, COUNT(*), AVG(duration_seconds),
                SUM(CASE WHEN analysis IS NOT NULL THEN 1 ELSE 0 END),
                SUM(CASE WHEN analysis IS NOT NULL
                    AND COALESCE(json_extract(analysis, '$.sentiment'), '') <> 'negative'
                    AND COALESCE(json_extract(analysis, '$.intent'), '') <> 'complaint' THEN 1 ELSE 0 END)
         FROM conversations WHERE genie_id = ?1 GROUP BY version ORDER BY version DESC",
    )?
    .query_map([genie_id], |r| {
        let analysed: i64 = r.get::<_, Option<i64>>(3)?.unwrap_or(0);
        let ok: i64 = r.get::<_, Option<i64>>(4)?.unwrap_or(0);
        Ok(VersionStats {
            version: r.get(0)?,
            conversations: r.get(1)?,
            average_duration_seconds: r.get(2)?,
            analysed,
            successful_share: (analysed > 0).then(|| ok as f64 / analysed as f64),
        })
    })?
    .collect()
}

// ---- documents of a version ------------------------------------------------------------

/// Of `ids`, the documents that still exist and `owner` may attach (theirs or public), in
/// the order given, as a genie lists them.
pub fn attachable(
    c: &Connection,
    owner: &str,
    ids: &[String],
) -> rusqlite::Result<Vec<super::genies::AttachedDoc>> {
    let mut st = c.prepare_cached(
        "SELECT id, name, type, status, external_id, is_active FROM documents
         WHERE id = ?1 AND (user_id = ?2 OR is_public = 1)",
    )?;
    let mut out = Vec::new();
    for id in ids {
        if let Some(d) = st
            .query_row(params![id, owner], |r| {
                Ok(super::genies::AttachedDoc {
                    id: r.get(0)?,
                    name: r.get(1)?,
                    doc_type: r.get(2)?,
                    status: r.get(3)?,
                    external_id: r.get(4)?,
                    is_active: r.get(5)?,
                })
            })
            .optional()?
        {
            out.push(d);
        }
    }
    Ok(out)
}

/// Makes the genie's document links exactly `ids` (in that order).
pub fn set_documents(
    c: &Connection,
    genie_id: &str,
    ids: &[String],
    at: &str,
) -> rusqlite::Result<()> {
    c.execute(
        "DELETE FROM genie_documents WHERE genie_id = ?1",
        [genie_id],
    )?;
    let mut st = c.prepare_cached(
        "INSERT INTO genie_documents (genie_id, document_id, created_at) VALUES (?1, ?2, ?3)
         ON CONFLICT DO NOTHING",
    )?;
    for (i, id) in ids.iter().enumerate() {
        // The link time orders a genie's documents; keep the version's order.
        st.execute(params![genie_id, id, format!("{at}{i:04}")])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_replay_to_the_same_text() {
        let cases = [
            ("", "abc"),
            ("abc", ""),
            ("hello world", "hello brave world"),
            ("aaaa", "aa"),
            ("aa", "aaaa"),
            ("héllo", "hèllo"),
        ];
        for (a, b) in cases {
            let blob = pack(b, Some(a)).unwrap();
            assert_eq!(
                unpack(&blob, Some(a.as_bytes())).unwrap(),
                b.as_bytes(),
                "{a:?} -> {b:?}"
            );
        }
        let whole = pack("x", None).unwrap();
        assert_eq!(unpack(&whole, None).unwrap(), b"x");
        assert!(unpack(&pack("x", Some("y")).unwrap(), None).is_err());
    }
}
