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

/// How versions are stored. The newest is stored whole and uncompressed (`W`), so that an
/// update, which reads it to decide whether a new version is due and to store the next as an
/// edit, reads one row and decodes nothing. When a newer one is stored, the version before it
/// is re-stored (an `UPDATE` of its row): whole and deflated (`F`) if it is one of every
/// `SNAPSHOT_EVERY`th (1, 33, 65, …), otherwise as the edit that turns the next version's text
/// into its own (`R`: a common prefix and suffix kept, the middle stored, deflated). Reading
/// an older version starts at the nearest whole one above it and applies at most
/// `SNAPSHOT_EVERY - 1` edits backwards, so a 10 KB prompt edited 1,000 times costs about the
/// edits. The configuration a version says never changes; only its encoding does.
///
/// On PostgreSQL, where re-storing a row leaves the old one for VACUUM, versions are stored
/// as before this scheme: each the edit from the version before (`D`), replayed forwards
/// from the whole version below it; the reader takes both encodings on either engine, so a
/// database moved between them (`admin migrate-storage` copies the bytes) reads the same.
///
/// Versions stored before this scheme are edits from the version before (`D`), replayed
/// forwards from the whole version below them. They are left as they are: their chains only
/// reach down to older versions, which are never re-stored, and the newest of them becomes
/// `R` or `F` when the first version after it is stored.
const SNAPSHOT_EVERY: i64 = 32;
const WHOLE: u8 = b'F';
const NEWEST: u8 = b'W';
const FROM_NEXT: u8 = b'R';
const FROM_PREVIOUS: u8 = b'D';

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

/// `text` as the newest version (whole, not compressed).
fn pack_newest(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + 1);
    out.push(NEWEST);
    out.extend(text.as_bytes());
    out
}

/// `text` whole and deflated, or as the edit that makes it from `base` (tagged `tag`).
fn pack(text: &str, base: Option<&str>, tag: u8) -> rusqlite::Result<Vec<u8>> {
    let (new, mut out) = (text.as_bytes(), Vec::new());
    match base {
        None => {
            out.push(WHOLE);
            out.extend(deflate(new)?);
        }
        Some(base) => {
            let old = base.as_bytes();
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
            out.push(tag);
            out.extend(deflate(&edit)?);
        }
    }
    Ok(out)
}

/// Decodes a stored version; `base` is the text its edit applies to (the version before for
/// `D`, the one after for `R`; `None` for a whole one).
fn unpack(blob: &[u8], base: Option<&[u8]>) -> rusqlite::Result<Vec<u8>> {
    let (tag, body) = blob.split_first().ok_or_else(|| corrupt(std::fmt::Error))?;
    if *tag == NEWEST {
        return Ok(body.to_vec());
    }
    let raw = inflate(body)?;
    match (*tag, base) {
        (WHOLE, _) => Ok(raw),
        (FROM_PREVIOUS | FROM_NEXT, Some(old)) if raw.len() >= 8 => {
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

fn is_whole(blob: &[u8]) -> bool {
    matches!(blob.first(), Some(&WHOLE) | Some(&NEWEST))
}

/// The configuration text of version `version`, from the nearest whole version its edits
/// chain to: above it for `R`, below it for `D`.
fn text_of(c: &Connection, genie_id: &str, version: i64) -> rusqlite::Result<Option<String>> {
    let blob: Option<Vec<u8>> = c
        .prepare_cached("SELECT config FROM genie_versions WHERE genie_id = ?1 AND version = ?2")?
        .query_row(params![genie_id, version], |r| r.get(0))
        .optional()?;
    let Some(blob) = blob else { return Ok(None) };
    let text = match blob.first() {
        Some(&FROM_NEXT) => replay(c, genie_id, version, blob, "version >= ?2 ORDER BY version")?,
        Some(&FROM_PREVIOUS) => replay(
            c,
            genie_id,
            version,
            blob,
            "version <= ?2 ORDER BY version DESC",
        )?,
        _ => unpack(&blob, None)?,
    };
    String::from_utf8(text).map(Some).map_err(corrupt)
}

/// Version `version` (stored as `blob`, an edit) rebuilt from the rows `range` walks away
/// from it, up to the first whole one: the edits are applied from that one back to it.
fn replay(
    c: &Connection,
    genie_id: &str,
    version: i64,
    blob: Vec<u8>,
    range: &str,
) -> rusqlite::Result<Vec<u8>> {
    let mut st = c.prepare_cached(&format!(
        "SELECT config FROM genie_versions WHERE genie_id = ?1 AND {range} LIMIT ?3"
    ))?;
    let mut chain: Vec<Vec<u8>> = st
        .query_map(params![genie_id, version, SNAPSHOT_EVERY + 1], |r| r.get(0))?
        .skip(1)
        .collect::<rusqlite::Result<_>>()?;
    let whole = chain
        .iter()
        .position(|b| is_whole(b))
        .ok_or_else(|| corrupt(std::fmt::Error))?;
    chain.truncate(whole + 1);
    chain.insert(0, blob);
    let mut text: Option<Vec<u8>> = None;
    for b in chain.iter().rev() {
        text = Some(unpack(b, text.as_deref())?);
    }
    Ok(text.unwrap_or_default())
}

/// A stored configuration's text as JSON (an error names it corrupt).
pub fn parse(text: &str) -> rusqlite::Result<Value> {
    serde_json::from_str(text).map_err(corrupt)
}

/// The newest version number, if the genie has a version.
pub fn latest_version(c: &Connection, genie_id: &str) -> rusqlite::Result<Option<i64>> {
    c.prepare_cached("SELECT MAX(version) FROM genie_versions WHERE genie_id = ?1")?
        .query_row([genie_id], |r| r.get(0))
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
    let newest: Option<(i64, Vec<u8>)> = c
        .prepare_cached(
            "SELECT version, config FROM genie_versions WHERE genie_id = ?1
             ORDER BY version DESC LIMIT 1",
        )?
        .query_row([genie_id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let Some((v, blob)) = newest else {
        return Ok(None);
    };
    if blob.first() == Some(&NEWEST) {
        let text = String::from_utf8(unpack(&blob, None)?).map_err(corrupt)?;
        return Ok(Some((v, text)));
    }
    // Stored before the newest was kept whole.
    Ok(text_of(c, genie_id, v)?.map(|t| (v, t)))
}

/// [`insert`] after `newest`, the genie's newest version and its text as [`latest_text`]
/// just read them in this transaction, without reading them again.
pub fn insert_after(
    c: &Connection,
    genie_id: &str,
    newest: (i64, &str),
    config: &Value,
    created_by: Option<&str>,
    summary: &str,
    at: &str,
) -> rusqlite::Result<i64> {
    let (prev, prev_text) = newest;
    let text = config.to_string();
    if c.is_postgres() {
        // No re-storing there: an UPDATE leaves the old row for VACUUM, a whole configuration
        // of garbage per version. Each version is stored as the edit from the one before
        // (whole every SNAPSHOT_EVERYth), which the reader takes as well.
        let blob = if prev % SNAPSHOT_EVERY == 0 {
            pack(&text, None, WHOLE)?
        } else {
            pack(&text, Some(prev_text), FROM_PREVIOUS)?
        };
        return store(c, genie_id, prev + 1, &blob, created_by, summary, at);
    }
    // The version that was newest gives up its whole copy: it becomes the edit from this one,
    // or a deflated whole version if it is one of every SNAPSHOT_EVERYth.
    let restored = if (prev - 1) % SNAPSHOT_EVERY == 0 {
        pack(prev_text, None, WHOLE)?
    } else {
        pack(prev_text, Some(&text), FROM_NEXT)?
    };
    c.prepare_cached("UPDATE genie_versions SET config = ?3 WHERE genie_id = ?1 AND version = ?2")?
        .execute(params![genie_id, prev, restored])?;
    store(
        c,
        genie_id,
        prev + 1,
        &pack_newest(&text),
        created_by,
        summary,
        at,
    )
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
    match latest_text(c, genie_id)? {
        Some((v, text)) => insert_after(c, genie_id, (v, &text), config, created_by, summary, at),
        None => {
            let text = config.to_string();
            let blob = if c.is_postgres() {
                pack(&text, None, WHOLE)?
            } else {
                pack_newest(&text)
            };
            store(c, genie_id, 1, &blob, created_by, summary, at)
        }
    }
}

/// Stores version `next`, encoded as `blob`.
fn store(
    c: &Connection,
    genie_id: &str,
    next: i64,
    blob: &[u8],
    created_by: Option<&str>,
    summary: &str,
    at: &str,
) -> rusqlite::Result<i64> {
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
            for tag in [FROM_PREVIOUS, FROM_NEXT] {
                let blob = pack(b, Some(a), tag).unwrap();
                assert_eq!(
                    unpack(&blob, Some(a.as_bytes())).unwrap(),
                    b.as_bytes(),
                    "{a:?} -> {b:?}"
                );
            }
        }
        let whole = pack("x", None, WHOLE).unwrap();
        assert_eq!(unpack(&whole, None).unwrap(), b"x");
        assert_eq!(unpack(&pack_newest("x"), None).unwrap(), b"x");
        assert!(unpack(&pack("x", Some("y"), FROM_NEXT).unwrap(), None).is_err());
    }

    fn table() -> rusqlite::Connection {
        let c = rusqlite::Connection::open_in_memory().unwrap();
        c.execute_batch(
            "CREATE TABLE genie_versions (genie_id TEXT NOT NULL, version INTEGER NOT NULL,
                config BLOB NOT NULL, created_by TEXT, created_at TEXT NOT NULL,
                summary TEXT NOT NULL, PRIMARY KEY (genie_id, version)) WITHOUT ROWID;",
        )
        .unwrap();
        c
    }

    fn config(i: usize) -> Value {
        serde_json::json!({"system_prompt": format!("You sell houses. Rule {i}."), "n": i, "tail": "x".repeat(200)})
    }

    /// Every version reads back as stored, whichever way its row is encoded, across several
    /// snapshot spans and after versions stored by the previous scheme (forward edits).
    #[test]
    fn every_version_reads_back_across_both_schemes() {
        let raw = table();
        let c = Connection::sqlite(&raw);
        // The previous scheme: whole at 1, 33, ..., else the edit from the version before.
        let old = 40;
        for i in 1..=old {
            let text = config(i).to_string();
            let blob = if (i as i64 - 1) % SNAPSHOT_EVERY == 0 {
                pack(&text, None, WHOLE).unwrap()
            } else {
                pack(&text, Some(&config(i - 1).to_string()), FROM_PREVIOUS).unwrap()
            };
            raw.execute(
                "INSERT INTO genie_versions VALUES ('g', ?1, ?2, NULL, 't', 's')",
                params![i as i64, blob],
            )
            .unwrap();
        }
        assert_eq!(latest(&c, "g").unwrap(), Some((old as i64, config(old))));
        for i in old + 1..=110 {
            let (v, text) = latest_text(&c, "g").unwrap().unwrap();
            assert_eq!(v, i as i64 - 1);
            let n = insert_after(&c, "g", (v, &text), &config(i), None, "s", "t").unwrap();
            assert_eq!(n, i as i64);
        }
        for i in 1..=110 {
            let text = text_of(&c, "g", i as i64).unwrap().unwrap();
            assert_eq!(parse(&text).unwrap(), config(i), "version {i}");
        }
        let tags: Vec<(i64, u8)> = raw
            .prepare("SELECT version, config FROM genie_versions ORDER BY version")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get::<_, Vec<u8>>(1)?[0])))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        for (v, tag) in tags {
            let want = match v {
                110 => NEWEST,
                v if (v - 1) % SNAPSHOT_EVERY == 0 => WHOLE,
                v if v < old as i64 => FROM_PREVIOUS,
                _ => FROM_NEXT,
            };
            assert_eq!(tag as char, want as char, "version {v}");
        }
        assert_eq!(latest_version(&c, "g").unwrap(), Some(110));
        assert_eq!(text_of(&c, "g", 111).unwrap(), None);
        // `insert` without the newest in hand stores the same way.
        assert_eq!(insert(&c, "g", &config(111), None, "s", "t").unwrap(), 111);
        assert_eq!(latest(&c, "g").unwrap(), Some((111, config(111))));
        assert_eq!(
            parse(&text_of(&c, "g", 110).unwrap().unwrap()).unwrap(),
            config(110)
        );
        assert_eq!(insert(&c, "h", &config(0), None, "s", "t").unwrap(), 1);
        assert_eq!(latest(&c, "h").unwrap(), Some((1, config(0))));
    }
}
