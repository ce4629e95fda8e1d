//! The public genie page's SQL: the active genie behind a slug, its web conversation in
//! progress, and the passages of the documents attached to it that match a visitor's words.

use crate::db::sql::{Connection, OptionalExtension, params};
use serde_json::{Value, json};

use super::documents::{self, Hit};

/// What the page and its chat use of a genie.
#[derive(Debug, Clone)]
pub struct PageGenie {
    pub id: String,
    pub user_id: String,
    pub name: String,
    pub slug: String,
    pub welcome: Option<String>,
    pub first_message: Option<String>,
    pub branding: Value,
    pub external_agent_id: Option<String>,
    pub system_prompt: Option<String>,
    pub llm_model: String,
    pub temperature: Option<f64>,
    pub max_tokens: Option<i64>,
    /// The genie's language (BCP 47, e.g. `de`) and voice speed, for the page's talk mode.
    pub language: Option<String>,
    pub speed: Option<f64>,
    /// Origins allowed to embed the chat (JSON array of strings).
    pub allowed_origins: Value,
}

pub fn find_active(c: &Connection, slug: &str) -> rusqlite::Result<Option<PageGenie>> {
    c.query_row(
        "SELECT id, user_id, name, page_slug, web_welcome_message, first_message, branding, external_agent_id,
                system_prompt, llm_model, temperature, max_tokens,
                json_extract(settings, '$.conversation_config.agent.language'),
                json_extract(settings, '$.conversation_config.tts.speed'), allowed_origins
         FROM genies WHERE page_slug = ?1 AND is_active = 1",
        [slug],
        |r| {
            Ok(PageGenie {
                id: r.get(0)?,
                user_id: r.get(1)?,
                name: r.get(2)?,
                slug: r.get(3)?,
                welcome: r.get(4)?,
                first_message: r.get(5)?,
                branding: super::json_col(r.get(6)?, json!({})),
                external_agent_id: r.get(7)?,
                system_prompt: r.get(8)?,
                llm_model: r.get(9)?,
                temperature: r.get(10)?,
                max_tokens: r.get(11)?,
                language: r.get::<_, Option<String>>(12).unwrap_or(None),
                speed: number(r.get_ref(13)?),
                allowed_origins: super::json_col(r.get(14)?, json!([])),
            })
        },
    )
    .optional()
}

/// A number `json_extract` found: SQLite answers a JSON number as a number, PostgreSQL's
/// `json_extract` (migration V2) as its text; anything else is no number.
fn number(v: rusqlite::types::ValueRef<'_>) -> Option<f64> {
    use rusqlite::types::ValueRef;
    match v {
        ValueRef::Real(f) => Some(f),
        ValueRef::Integer(i) => Some(i as f64),
        ValueRef::Text(t) => std::str::from_utf8(t).ok()?.trim().parse().ok(),
        _ => None,
    }
}

/// A web conversation of the page still in progress.
#[derive(Debug, Clone)]
pub struct OpenChat {
    pub id: String,
    pub started_at: String,
    /// The stored transcript, as JSON text.
    pub transcript: String,
    /// The genie version that serves it.
    pub version: Option<i64>,
}

pub fn open_chat(c: &Connection, id: &str, genie_id: &str) -> rusqlite::Result<Option<OpenChat>> {
    c.query_row(
        "SELECT id, started_at, transcript, version FROM conversations
         WHERE id = ?1 AND genie_id = ?2 AND channel = 'web' AND status = 'in-progress'",
        [id, genie_id],
        |r| {
            Ok(OpenChat {
                id: r.get(0)?,
                started_at: r.get(1)?,
                transcript: r.get(2)?,
                version: r.get(3)?,
            })
        },
    )
    .optional()
}

pub struct NewChat<'a> {
    pub id: &'a str,
    pub user_id: &'a str,
    pub genie_id: &'a str,
    pub started_at: &'a str,
    pub transcript: &'a str,
    pub metadata: &'a str,
    pub version: Option<i64>,
}

pub fn insert_chat(c: &Connection, n: &NewChat) -> rusqlite::Result<()> {
    c.execute(
        "INSERT INTO conversations (id, user_id, genie_id, channel, status, started_at, duration_seconds,
             transcript, metadata, created_at, updated_at, version)
         VALUES (?1, ?2, ?3, 'web', 'in-progress', ?4, 0, ?5, ?6, ?7, ?7, ?8)",
        params![
            n.id,
            n.user_id,
            n.genie_id,
            n.started_at,
            n.transcript,
            n.metadata,
            super::now(),
            n.version
        ],
    )?;
    Ok(())
}

pub fn update_chat(
    c: &Connection,
    id: &str,
    transcript: &str,
    duration_seconds: i64,
) -> rusqlite::Result<()> {
    c.execute(
        "UPDATE conversations SET transcript = ?2, duration_seconds = ?3, updated_at = ?4 WHERE id = ?1",
        params![id, transcript, duration_seconds, super::now()],
    )?;
    Ok(())
}

/// The genie's conversation tools (JSON array).
pub fn tools(c: &Connection, genie_id: &str) -> rusqlite::Result<Value> {
    let t: Option<String> = c
        .query_row("SELECT tools FROM genies WHERE id = ?1", [genie_id], |r| {
            r.get(0)
        })
        .optional()?;
    Ok(super::json_col(t, json!([])))
}

/// The stored transcript of a conversation (JSON text).
pub fn transcript(c: &Connection, id: &str) -> rusqlite::Result<Option<String>> {
    c.query_row(
        "SELECT transcript FROM conversations WHERE id = ?1",
        [id],
        |r| r.get(0),
    )
    .optional()
}

pub fn set_transcript(c: &Connection, id: &str, transcript: &str) -> rusqlite::Result<()> {
    c.execute(
        "UPDATE conversations SET transcript = ?2, updated_at = ?3 WHERE id = ?1",
        params![id, transcript, super::now()],
    )?;
    Ok(())
}

/// Whether `id` is a web conversation of the genie (ended or not).
pub fn belongs(c: &Connection, id: &str, genie_id: &str) -> rusqlite::Result<bool> {
    c.query_row(
        "SELECT EXISTS(SELECT 1 FROM conversations WHERE id = ?1 AND genie_id = ?2 AND channel = 'web')",
        [id, genie_id],
        |r| r.get(0),
    )
}

/// A web conversation still in progress, as its ending needs it.
#[derive(Debug, Clone)]
pub struct InProgress {
    pub genie_id: Option<String>,
    pub started_at: String,
    /// The last change: the last message.
    pub updated_at: String,
    pub metadata: Value,
}

pub fn in_progress(c: &Connection, id: &str) -> rusqlite::Result<Option<InProgress>> {
    c.query_row(
        "SELECT genie_id, started_at, updated_at, metadata FROM conversations
         WHERE id = ?1 AND channel = 'web' AND status = 'in-progress'",
        [id],
        |r| {
            Ok(InProgress {
                genie_id: r.get(0)?,
                started_at: r.get(1)?,
                updated_at: r.get(2)?,
                metadata: super::json_col(r.get(3)?, json!({})),
            })
        },
    )
    .optional()
}

/// Marks a web conversation `done` with its duration and metadata.
pub fn finish_chat(
    c: &Connection,
    id: &str,
    duration_seconds: i64,
    metadata: &Value,
) -> rusqlite::Result<()> {
    c.execute(
        "UPDATE conversations SET status = 'done', duration_seconds = ?2, metadata = ?3, updated_at = ?4
         WHERE id = ?1",
        params![id, duration_seconds, metadata.to_string(), super::now()],
    )?;
    Ok(())
}

/// Words too common to say what a question is about.
const FUNCTION_WORDS: &[&str] = &[
    "about", "all", "and", "any", "are", "but", "can", "could", "did", "does", "for", "from",
    "had", "has", "have", "her", "his", "how", "its", "may", "not", "our", "she", "should", "that",
    "the", "their", "them", "then", "there", "these", "they", "this", "was", "were", "what",
    "when", "where", "which", "who", "why", "will", "with", "would", "you", "your",
];

/// An FTS5 query matching chunks with ANY of the message's telling words (bm25 then ranks
/// the chunks with more and rarer ones first). The documents' own search requires every
/// word, which a visitor's question ("what time do you open on sundays?") rarely meets.
pub fn any_word_query(text: &str) -> Option<String> {
    let mut words: Vec<String> = Vec::new();
    for w in text.split(|ch: char| !ch.is_alphanumeric()) {
        let w = w.to_lowercase();
        if w.chars().count() < 3 || FUNCTION_WORDS.contains(&w.as_str()) || words.contains(&w) {
            continue;
        }
        words.push(w);
        if words.len() == 32 {
            break;
        }
    }
    if words.is_empty() {
        return None;
    }
    Some(
        words
            .iter()
            .map(|w| format!("\"{w}\""))
            .collect::<Vec<_>>()
            .join(" OR "),
    )
}

/// The best passages for `text` among the documents attached to the genie that are
/// completed, active and readable by its owner (theirs, or public ones).
pub fn passages(
    c: &Connection,
    index: Option<&crate::doc_index::DocIndex>,
    genie: &PageGenie,
    text: &str,
    limit: i64,
) -> rusqlite::Result<Vec<Hit>> {
    let Some(q) = any_word_query(text) else {
        return Ok(Vec::new());
    };
    documents::search(c, index, &genie.user_id, &q, Some(&genie.id), limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_become_any_word_queries() {
        assert_eq!(
            any_word_query("What time do you open on Sundays? Sundays!").as_deref(),
            Some("\"time\" OR \"open\" OR \"sundays\"")
        );
        assert_eq!(any_word_query("is it ok?"), None);
        assert_eq!(
            any_word_query("a \"quoted\" word").as_deref(),
            Some("\"quoted\" OR \"word\"")
        );
    }
}
