//! Conversation records (calls and web chats) with their transcripts. Records pulled from
//! the voice platform are keyed by `external_id`, so syncing twice never duplicates one.

use crate::db::sql::types::Value as SqlValue;
use crate::db::sql::{Connection, OptionalExtension, Row, params, params_from_iter};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{json_col, new_id, now};

/// One line of a transcript, as providers report it and as it is stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Turn {
    /// `user` or `agent`.
    pub role: String,
    pub message: String,
    pub time_in_call_secs: f64,
}

/// Statuses a conversation can have (the voice platform's vocabulary).
pub const STATUSES: &[&str] = &["initiated", "in-progress", "processing", "done", "failed"];
pub const CHANNELS: &[&str] = &["phone", "web"];

#[derive(Debug, Clone, Serialize)]
pub struct Conversation {
    pub id: String,
    pub user_id: String,
    pub genie_id: Option<String>,
    /// `{id, name}` or null when the genie was deleted.
    pub genie: Value,
    pub external_id: Option<String>,
    pub channel: String,
    pub status: String,
    pub started_at: String,
    pub duration_seconds: i64,
    pub turn_count: i64,
    pub summary: Option<String>,
    pub analysis: Option<Value>,
    pub metadata: Value,
    pub tags: Value,
    pub created_at: String,
    pub updated_at: String,
    /// The genie version that served it (public page chats), when known.
    pub version: Option<i64>,
    /// Only in `get` (and create/update/analyze answers): `[{role, message, text, time_in_call_secs}]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transcript: Option<Value>,
    /// With the transcript: turns, duration, LLM latency, tokens, tool calls and cost
    /// (`db::conversation_figures::figures`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub figures: Option<Value>,
}

impl Conversation {
    pub fn turns(&self) -> Vec<Turn> {
        self.transcript
            .as_ref()
            .and_then(|t| serde_json::from_value(t.clone()).ok())
            .unwrap_or_default()
    }
}

const COLS: &str = "c.id, c.user_id, c.genie_id, g.name, c.external_id, c.channel, c.status, c.started_at,
    c.duration_seconds, json_array_length(c.transcript), c.summary, c.analysis, c.metadata, c.tags, c.created_at,
    c.updated_at, c.version";

fn from_row(r: &Row, with_transcript: bool) -> rusqlite::Result<Conversation> {
    let genie_id: Option<String> = r.get(2)?;
    let genie_name: Option<String> = r.get(3)?;
    let transcript = if with_transcript {
        let raw = json_col(r.get(17)?, json!([]));
        let turns: Vec<Value> = raw
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|t| {
                        let mut t = t.clone();
                        t["text"] = t["message"].clone();
                        t
                    })
                    .collect()
            })
            .unwrap_or_default();
        Some(Value::Array(turns))
    } else {
        None
    };
    let turn_count = r.get::<_, Option<i64>>(9)?.unwrap_or(0);
    let duration_seconds: i64 = r.get(8)?;
    let figures = if with_transcript {
        Some(super::conversation_figures::figures(
            r,
            18,
            turn_count,
            duration_seconds,
        )?)
    } else {
        None
    };
    Ok(Conversation {
        id: r.get(0)?,
        user_id: r.get(1)?,
        genie: match (&genie_id, genie_name) {
            (Some(id), Some(name)) => json!({"id": id, "name": name}),
            _ => Value::Null,
        },
        genie_id,
        external_id: r.get(4)?,
        channel: r.get(5)?,
        status: r.get(6)?,
        started_at: r.get(7)?,
        duration_seconds,
        turn_count,
        summary: r.get(10)?,
        analysis: r
            .get::<_, Option<String>>(11)?
            .map(|s| json_col(Some(s), Value::Null))
            .filter(|v| !v.is_null()),
        metadata: json_col(r.get(12)?, json!({})),
        tags: json_col(r.get(13)?, json!([])),
        created_at: r.get(14)?,
        updated_at: r.get(15)?,
        version: r.get(16)?,
        transcript,
        figures,
    })
}

/// Whose conversations a listing covers.
#[derive(Debug, Clone)]
pub enum Scope {
    All,
    /// The user's own, plus those of genies assigned to them.
    Readable(String),
}

#[derive(Debug, Clone)]
pub struct Filter {
    pub scope: Scope,
    pub genie_id: Option<String>,
    pub status: Option<String>,
    pub channel: Option<String>,
    pub since: Option<String>,
    pub until: Option<String>,
    /// Keyset position: only conversations listed after this `(started_at, id)`, i.e. that
    /// started earlier, or at the same time with a smaller id (a cursor). Applies to `list`,
    /// not to `count`.
    pub after: Option<(String, String)>,
}

/// The conditions every arm of a listing shares (not the scope), with their parameters.
fn filter_conds(f: &Filter, with_cursor: bool) -> (Vec<&'static str>, Vec<SqlValue>) {
    let mut w: Vec<&'static str> = Vec::new();
    let mut p: Vec<SqlValue> = Vec::new();
    for (cond, v) in [
        ("c.genie_id = ?", &f.genie_id),
        ("c.status = ?", &f.status),
        ("c.channel = ?", &f.channel),
        ("c.started_at >= ?", &f.since),
        ("c.started_at <= ?", &f.until),
    ] {
        if let Some(v) = v {
            w.push(cond);
            p.push(v.clone().into());
        }
    }
    if with_cursor && let Some((at, id)) = &f.after {
        // The `<=` bound lets the time index start its walk at the cursor; the rest breaks
        // ties between conversations that started in the same millisecond.
        w.push("c.started_at <= ? AND (c.started_at < ? OR c.id < ?)");
        p.push(at.clone().into());
        p.push(at.clone().into());
        p.push(id.clone().into());
    }
    (w, p)
}

/// The arms a listing is the union of, each one a walk that an index orders by time:
/// everything (admin), or the user's own conversations and, apart, those of the genies
/// assigned to them that they do not own (driven from the assignments, a few rows). One
/// `OR` of the two is answered by reading every match and sorting: at 100,000
/// conversations a page took 1.5 s (docs/storage.md). Each arm: `FROM ... WHERE ...` and
/// its parameters.
fn arms(f: &Filter, with_cursor: bool) -> Vec<(String, Vec<SqlValue>)> {
    let scopes: Vec<(&str, Option<&str>, Vec<SqlValue>)> = match &f.scope {
        Scope::All => vec![("conversations c", None, vec![])],
        Scope::Readable(u) => vec![
            (
                "conversations c",
                Some("c.user_id = ?"),
                vec![u.clone().into()],
            ),
            (
                // CROSS JOIN: SQLite keeps this order (assignments outside), whatever its
                // statistics say; PostgreSQL reads it as an inner join.
                "genie_assignments a CROSS JOIN conversations c",
                Some("a.user_id = ? AND c.genie_id = a.genie_id AND c.user_id <> ?"),
                vec![u.clone().into(), u.clone().into()],
            ),
        ],
    };
    scopes
        .into_iter()
        .map(|(from, scope, mut p)| {
            let (mut w, fp) = filter_conds(f, with_cursor);
            if let Some(scope) = scope {
                w.insert(0, scope);
            }
            p.extend(fp);
            let sql = if w.is_empty() {
                format!("FROM {from}")
            } else {
                format!("FROM {from} WHERE {}", w.join(" AND "))
            };
            (sql, p)
        })
        .collect()
}

/// One page, latest first. Each arm yields its first `offset + limit` ids from an index
/// (no rows read, no transcript parsed); only the page's rows are then loaded.
pub fn list(
    c: &Connection,
    f: &Filter,
    limit: i64,
    offset: i64,
) -> rusqlite::Result<Vec<Conversation>> {
    let mut p: Vec<SqlValue> = Vec::new();
    let mut parts = Vec::new();
    for (i, (arm, ap)) in arms(f, true).into_iter().enumerate() {
        parts.push(format!(
            "SELECT * FROM (SELECT c.id, c.started_at {arm}
               ORDER BY c.started_at DESC, c.id DESC LIMIT ?) a{i}"
        ));
        p.extend(ap);
        p.push((offset + limit).into());
    }
    p.push(limit.into());
    p.push(offset.into());
    let mut st = c.prepare_cached(&format!(
        "SELECT {COLS} FROM conversations c LEFT JOIN genies g ON g.id = c.genie_id
         WHERE c.id IN (SELECT k.id FROM ({}) k ORDER BY k.started_at DESC, k.id DESC LIMIT ? OFFSET ?)
         ORDER BY c.started_at DESC, c.id DESC",
        parts.join(" UNION ALL ")
    ))?;
    st.query_map(params_from_iter(p), |r| from_row(r, false))?
        .collect()
}

/// Every match, whatever the cursor: the arms are disjoint, so their counts add up.
///
/// With no filter but the status, the first arm (every conversation, or the user's own) is
/// read from `conversation_counts`, kept by triggers per user and status, instead of counted.
pub fn count(c: &Connection, f: &Filter) -> rusqlite::Result<i64> {
    let kept =
        f.genie_id.is_none() && f.channel.is_none() && f.since.is_none() && f.until.is_none();
    let mut p: Vec<SqlValue> = Vec::new();
    let mut parts = Vec::new();
    for (i, (arm, ap)) in arms(f, false).into_iter().enumerate() {
        if kept && i == 0 {
            let mut w = Vec::new();
            if let Scope::Readable(u) = &f.scope {
                w.push("k.user_id = ?");
                p.push(u.clone().into());
            }
            if let Some(s) = &f.status {
                w.push("k.status = ?");
                p.push(s.clone().into());
            }
            let w = if w.is_empty() {
                String::new()
            } else {
                format!(" WHERE {}", w.join(" AND "))
            };
            parts.push(format!(
                "(SELECT CAST(COALESCE(SUM(k.n), 0) AS BIGINT) FROM conversation_counts k{w})"
            ));
            continue;
        }
        parts.push(format!("(SELECT COUNT(*) {arm})"));
        p.extend(ap);
    }
    c.prepare_cached(&format!("SELECT {}", parts.join(" + ")))?
        .query_row(params_from_iter(p), |r| r.get(0))
}

/// One conversation with its transcript, whoever owns it (callers check access).
pub fn get(c: &Connection, id: &str) -> rusqlite::Result<Option<Conversation>> {
    c.query_row(
        &format!(
            "SELECT {COLS}, c.transcript, {} FROM conversations c LEFT JOIN genies g ON g.id = c.genie_id WHERE c.id = ?1",
            super::conversation_figures::COLS
        ),
        [id],
        |r| from_row(r, true),
    )
    .optional()
}

pub fn is_assigned(c: &Connection, genie_id: &str, user: &str) -> rusqlite::Result<bool> {
    c.query_row(
        "SELECT EXISTS (SELECT 1 FROM genie_assignments WHERE genie_id = ?1 AND user_id = ?2)",
        [genie_id, user],
        |r| r.get(0),
    )
}

/// A genie as conversations need it.
#[derive(Debug, Clone)]
pub struct GenieRef {
    pub id: String,
    pub user_id: String,
    pub name: String,
    pub external_agent_id: Option<String>,
    pub send_reports: bool,
    pub support_emails: Vec<String>,
}

const GENIE_COLS: &str =
    "id, user_id, name, external_agent_id, send_conversation_reports, support_emails";

fn genie_row(r: &Row) -> rusqlite::Result<GenieRef> {
    Ok(GenieRef {
        id: r.get(0)?,
        user_id: r.get(1)?,
        name: r.get(2)?,
        external_agent_id: r.get(3)?,
        send_reports: r.get(4)?,
        support_emails: serde_json::from_str(&r.get::<_, String>(5)?).unwrap_or_default(),
    })
}

pub fn genie(c: &Connection, id: &str) -> rusqlite::Result<Option<GenieRef>> {
    c.query_row(
        &format!("SELECT {GENIE_COLS} FROM genies WHERE id = ?1"),
        [id],
        genie_row,
    )
    .optional()
}

/// The genie provisioned on the voice platform as `agent_id`.
pub fn genie_by_agent(c: &Connection, agent_id: &str) -> rusqlite::Result<Option<GenieRef>> {
    c.query_row(
        &format!("SELECT {GENIE_COLS} FROM genies WHERE external_agent_id = ?1"),
        [agent_id],
        genie_row,
    )
    .optional()
}

/// The user's genies that live on the voice platform.
pub fn syncable_genies(c: &Connection, user_id: &str) -> rusqlite::Result<Vec<GenieRef>> {
    let mut st = c.prepare(&format!(
        "SELECT {GENIE_COLS} FROM genies WHERE user_id = ?1 AND external_agent_id IS NOT NULL ORDER BY created_at"
    ))?;
    st.query_map([user_id], genie_row)?.collect()
}

pub struct NewConversation<'a> {
    pub user_id: &'a str,
    pub genie_id: Option<&'a str>,
    pub external_id: Option<&'a str>,
    pub channel: &'a str,
    pub status: &'a str,
    pub started_at: &'a str,
    pub duration_seconds: i64,
    pub transcript: &'a [Turn],
    pub summary: Option<&'a str>,
    pub metadata: &'a Value,
    pub tags: &'a Value,
}

pub fn insert(c: &Connection, n: &NewConversation) -> rusqlite::Result<String> {
    let (id, ts) = (new_id(), now());
    c.execute(
        "INSERT INTO conversations (id, user_id, genie_id, external_id, channel, status, started_at, duration_seconds,
             transcript, summary, metadata, tags, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?13)",
        params![
            id,
            n.user_id,
            n.genie_id,
            n.external_id,
            n.channel,
            n.status,
            n.started_at,
            n.duration_seconds,
            serde_json::to_string(n.transcript).unwrap_or_else(|_| "[]".into()),
            n.summary,
            n.metadata.to_string(),
            n.tags.to_string(),
            ts
        ],
    )?;
    Ok(id)
}

/// What sync knows of a stored external conversation.
pub struct Known {
    pub id: String,
    pub user_id: String,
    pub status: String,
    pub duration_seconds: i64,
}

pub fn by_external(c: &Connection, external_id: &str) -> rusqlite::Result<Option<Known>> {
    c.query_row(
        "SELECT id, user_id, status, duration_seconds FROM conversations WHERE external_id = ?1",
        [external_id],
        |r| {
            Ok(Known {
                id: r.get(0)?,
                user_id: r.get(1)?,
                status: r.get(2)?,
                duration_seconds: r.get(3)?,
            })
        },
    )
    .optional()
}

/// Refreshes a synced conversation from the platform; the user's metadata, tags and
/// analysis stay, the platform's metadata goes under `metadata.provider`.
#[allow(clippy::too_many_arguments)]
pub fn refresh_external(
    c: &Connection,
    id: &str,
    status: &str,
    started_at: &str,
    duration: i64,
    transcript: &[Turn],
    provider_summary: Option<&str>,
    provider_meta: &Value,
) -> rusqlite::Result<()> {
    c.execute(
        "UPDATE conversations SET status = ?2, started_at = ?3, duration_seconds = ?4, transcript = ?5,
             summary = COALESCE(summary, ?6), metadata = json_set(metadata, '$.provider', json(?7)), updated_at = ?8
         WHERE id = ?1",
        params![
            id,
            status,
            started_at,
            duration,
            serde_json::to_string(transcript).unwrap_or_else(|_| "[]".into()),
            provider_summary,
            provider_meta.to_string(),
            now()
        ],
    )?;
    Ok(())
}

pub fn set_meta(
    c: &Connection,
    id: &str,
    metadata: Option<&Value>,
    tags: Option<&Value>,
) -> rusqlite::Result<()> {
    c.execute(
        "UPDATE conversations SET metadata = COALESCE(?2, metadata), tags = COALESCE(?3, tags), updated_at = ?4 WHERE id = ?1",
        params![id, metadata.map(|m| m.to_string()), tags.map(|t| t.to_string()), now()],
    )?;
    Ok(())
}

pub fn set_analysis(
    c: &Connection,
    id: &str,
    summary: &str,
    analysis: &Value,
) -> rusqlite::Result<()> {
    c.execute(
        "UPDATE conversations SET summary = ?2, analysis = ?3, updated_at = ?4 WHERE id = ?1",
        params![id, summary, analysis.to_string(), now()],
    )?;
    Ok(())
}

pub fn delete(c: &Connection, id: &str) -> rusqlite::Result<bool> {
    Ok(c.execute("DELETE FROM conversations WHERE id = ?1", [id])? == 1)
}
