//! Moving genies between voice platforms: the move under way (`genie_moves`), copies of
//! documents at platforms other than the default (`provider_documents`), and the drift a
//! check last found (`genie_providers.drift`).

use crate::db::sql::{Connection, OptionalExtension, params};
use serde_json::Value;

fn json_list(s: String) -> Vec<String> {
    serde_json::from_str(&s).unwrap_or_default()
}

/// A move under way.
#[derive(Debug, Clone)]
pub struct Move {
    pub genie_id: String,
    pub from_provider: String,
    pub to_provider: String,
    pub new_agent_id: Option<String>,
    /// Document ids whose copy at `to_provider` this move made.
    pub created_documents: Vec<String>,
    /// Platform ids of the numbers this move bought at `to_provider`.
    pub created_numbers: Vec<String>,
}

pub fn get_move(c: &Connection, genie_id: &str) -> rusqlite::Result<Option<Move>> {
    c.query_row(
        "SELECT genie_id, from_provider, to_provider, new_agent_id, created_documents, created_numbers
         FROM genie_moves WHERE genie_id = ?1",
        [genie_id],
        |r| {
            Ok(Move {
                genie_id: r.get(0)?,
                from_provider: r.get(1)?,
                to_provider: r.get(2)?,
                new_agent_id: r.get(3)?,
                created_documents: json_list(r.get(4)?),
                created_numbers: json_list(r.get(5)?),
            })
        },
    )
    .optional()
}

/// Starts a move; false when one is already under way for the genie.
pub fn start_move(
    c: &Connection,
    genie_id: &str,
    from: &str,
    to: &str,
    now: &str,
) -> rusqlite::Result<bool> {
    let n = c.execute(
        "INSERT INTO genie_moves (genie_id, from_provider, to_provider, started_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?4) ON CONFLICT (genie_id) DO NOTHING",
        params![genie_id, from, to, now],
    )?;
    Ok(n == 1)
}

/// Records what the move has created so far.
pub fn save_move(c: &Connection, m: &Move, now: &str) -> rusqlite::Result<()> {
    c.execute(
        "UPDATE genie_moves SET new_agent_id = ?2, created_documents = ?3, created_numbers = ?4,
             updated_at = ?5 WHERE genie_id = ?1",
        params![
            m.genie_id,
            m.new_agent_id,
            Value::from(m.created_documents.clone()).to_string(),
            Value::from(m.created_numbers.clone()).to_string(),
            now
        ],
    )?;
    Ok(())
}

pub fn end_move(c: &Connection, genie_id: &str) -> rusqlite::Result<()> {
    c.execute("DELETE FROM genie_moves WHERE genie_id = ?1", [genie_id])?;
    Ok(())
}

/// A document's copy at `provider`: `(content_hash, external_id)`.
pub fn copy(
    c: &Connection,
    document_id: &str,
    provider: &str,
) -> rusqlite::Result<Option<(String, String)>> {
    c.query_row(
        "SELECT content_hash, external_id FROM provider_documents WHERE document_id = ?1 AND provider = ?2",
        [document_id, provider],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()
}

pub fn put_copy(
    c: &Connection,
    document_id: &str,
    provider: &str,
    content_hash: &str,
    external_id: &str,
    now: &str,
) -> rusqlite::Result<()> {
    c.execute(
        "INSERT INTO provider_documents (document_id, provider, content_hash, external_id, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (document_id, provider) DO UPDATE SET content_hash = excluded.content_hash,
             external_id = excluded.external_id, created_at = excluded.created_at",
        params![document_id, provider, content_hash, external_id, now],
    )?;
    Ok(())
}

/// A document's copies: `(provider, external_id)`.
pub fn copies(c: &Connection, document_id: &str) -> rusqlite::Result<Vec<(String, String)>> {
    let mut st = c.prepare(
        "SELECT provider, external_id FROM provider_documents WHERE document_id = ?1 ORDER BY provider",
    )?;
    st.query_map([document_id], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect()
}

pub fn delete_copy(c: &Connection, document_id: &str, provider: &str) -> rusqlite::Result<()> {
    c.execute(
        "DELETE FROM provider_documents WHERE document_id = ?1 AND provider = ?2",
        [document_id, provider],
    )?;
    Ok(())
}

/// Records a drift check: the changes found (`None`: the platform matched).
pub fn set_drift(
    c: &Connection,
    genie_id: &str,
    drift: Option<&Value>,
    now: &str,
) -> rusqlite::Result<()> {
    c.execute(
        "UPDATE genie_providers SET drift = ?2, drift_checked_at = ?3 WHERE genie_id = ?1",
        params![genie_id, drift.map(Value::to_string), now],
    )?;
    Ok(())
}

/// The drift the last check found (`null` when none) and when it ran.
pub fn drift(c: &Connection, genie_id: &str) -> rusqlite::Result<(Value, Option<String>)> {
    Ok(
        c.prepare_cached(
            "SELECT drift, drift_checked_at FROM genie_providers WHERE genie_id = ?1",
        )?
        .query_row([genie_id], |r| {
            let d: Option<String> = r.get(0)?;
            Ok((
                d.and_then(|d| serde_json::from_str(&d).ok())
                    .unwrap_or(Value::Null),
                r.get(1)?,
            ))
        })
        .optional()?
        .unwrap_or((Value::Null, None)),
    )
}

/// Genies with an agent at a platform other than `local`, for the scheduled drift check.
pub fn checkable(c: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut st = c.prepare(
        "SELECT g.id FROM genies g JOIN genie_providers p ON p.genie_id = g.id
         WHERE g.external_agent_id IS NOT NULL AND p.provider <> 'local'
           AND g.id NOT IN (SELECT genie_id FROM genie_moves)
         ORDER BY g.id",
    )?;
    st.query_map([], |r| r.get(0))?.collect()
}
