//! The embedded voice provider's tables (`voice_local_*`): its agents, knowledge-base
//! documents, phone numbers and hosted conversations. The provider (`voice::local`) turns
//! these rows into its own types.

use crate::db::sql::{Connection, OptionalExtension, params};
use serde_json::{Value, json};

use super::{json_col, now};

/// A hosted conversation as stored; `transcript` is the turns as JSON text.
pub struct Conversation {
    pub conversation_id: String,
    pub agent_id: String,
    pub status: String,
    pub start_time_unix: i64,
    pub duration_secs: i64,
    pub transcript: String,
    pub summary: Option<String>,
    pub metadata: Value,
}

/// A hosted conversation in a listing.
pub struct Listed {
    pub conversation_id: String,
    pub agent_id: String,
    pub start_time_unix: i64,
    pub duration_secs: i64,
    pub status: String,
}

/// Records a conversation, replacing one with the same id.
pub fn put_conversation(c: &Connection, v: &Conversation) -> rusqlite::Result<()> {
    c.execute(
        "INSERT INTO voice_local_conversations
         (conversation_id, agent_id, status, start_time_unix, duration_secs, transcript, summary, metadata)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT (conversation_id) DO UPDATE SET agent_id = excluded.agent_id,
             status = excluded.status, start_time_unix = excluded.start_time_unix,
             duration_secs = excluded.duration_secs, transcript = excluded.transcript,
             summary = excluded.summary, metadata = excluded.metadata",
        params![
            v.conversation_id,
            v.agent_id,
            v.status,
            v.start_time_unix,
            v.duration_secs,
            v.transcript,
            v.summary,
            v.metadata.to_string()
        ],
    )?;
    Ok(())
}

/// An agent's conversations with ids after `after`, by id (at most `limit`).
pub fn list_conversations(
    c: &Connection,
    agent_id: &str,
    after: &str,
    limit: i64,
) -> rusqlite::Result<Vec<Listed>> {
    let mut st = c.prepare_cached(
        "SELECT conversation_id, agent_id, start_time_unix, duration_secs, status FROM voice_local_conversations
         WHERE agent_id = ?1 AND conversation_id > ?2 ORDER BY conversation_id LIMIT ?3",
    )?;
    st.query_map(params![agent_id, after, limit], |r| {
        Ok(Listed {
            conversation_id: r.get(0)?,
            agent_id: r.get(1)?,
            start_time_unix: r.get(2)?,
            duration_secs: r.get(3)?,
            status: r.get(4)?,
        })
    })?
    .collect()
}

pub fn get_conversation(c: &Connection, id: &str) -> rusqlite::Result<Option<Conversation>> {
    c.query_row(
        "SELECT conversation_id, agent_id, status, start_time_unix, duration_secs, transcript, summary, metadata
         FROM voice_local_conversations WHERE conversation_id = ?1",
        [id],
        |r| {
            Ok(Conversation {
                conversation_id: r.get(0)?,
                agent_id: r.get(1)?,
                status: r.get(2)?,
                start_time_unix: r.get(3)?,
                duration_secs: r.get(4)?,
                transcript: r.get(5)?,
                summary: r.get(6)?,
                metadata: json_col(r.get(7)?, json!({})),
            })
        },
    )
    .optional()
}

/// An agent's spec and knowledge base (JSON text in, values out).
pub fn agent(c: &Connection, agent_id: &str) -> rusqlite::Result<Option<(Value, Value)>> {
    c.query_row(
        "SELECT spec, knowledge_base FROM voice_local_agents WHERE agent_id = ?1",
        [agent_id],
        |r| {
            Ok((
                json_col(r.get(0)?, json!({})),
                json_col(r.get(1)?, json!([])),
            ))
        },
    )
    .optional()
}

pub fn agent_exists(c: &Connection, agent_id: &str) -> rusqlite::Result<bool> {
    c.query_row(
        "SELECT EXISTS(SELECT 1 FROM voice_local_agents WHERE agent_id = ?1)",
        [agent_id],
        |r| r.get(0),
    )
}

pub fn insert_agent(c: &Connection, agent_id: &str, spec: &str, kb: &str) -> rusqlite::Result<()> {
    c.execute(
        "INSERT INTO voice_local_agents (agent_id, spec, knowledge_base, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?4)",
        params![agent_id, spec, kb, now()],
    )?;
    Ok(())
}

/// Replaces an agent's spec; returns how many agents had the id (0 or 1).
pub fn set_agent_spec(c: &Connection, agent_id: &str, spec: &str) -> rusqlite::Result<usize> {
    c.execute(
        "UPDATE voice_local_agents SET spec = ?2, updated_at = ?3 WHERE agent_id = ?1",
        params![agent_id, spec, now()],
    )
}

/// Replaces an agent's knowledge base; returns how many agents had the id (0 or 1).
pub fn set_agent_knowledge_base(
    c: &Connection,
    agent_id: &str,
    kb: &str,
) -> rusqlite::Result<usize> {
    c.execute(
        "UPDATE voice_local_agents SET knowledge_base = ?2, updated_at = ?3 WHERE agent_id = ?1",
        params![agent_id, kb, now()],
    )
}

pub fn delete_agent(c: &Connection, agent_id: &str) -> rusqlite::Result<()> {
    c.execute(
        "DELETE FROM voice_local_agents WHERE agent_id = ?1",
        [agent_id],
    )?;
    Ok(())
}

pub fn insert_document(c: &Connection, id: &str, name: &str, text: &str) -> rusqlite::Result<()> {
    c.execute(
        "INSERT INTO voice_local_documents (id, name, text, created_at) VALUES (?1, ?2, ?3, ?4)",
        params![id, name, text, now()],
    )?;
    Ok(())
}

pub fn delete_document(c: &Connection, id: &str) -> rusqlite::Result<()> {
    c.execute("DELETE FROM voice_local_documents WHERE id = ?1", [id])?;
    Ok(())
}

pub fn number_taken(c: &Connection, number: &str) -> rusqlite::Result<bool> {
    c.prepare_cached("SELECT EXISTS(SELECT 1 FROM voice_local_numbers WHERE number = ?1)")?
        .query_row([number], |r| r.get(0))
}

pub fn insert_number(
    c: &Connection,
    number: &str,
    external_id: &str,
    agent_id: &str,
    label: &str,
) -> rusqlite::Result<()> {
    c.execute(
        "INSERT INTO voice_local_numbers (number, external_id, agent_id, label, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![number, external_id, agent_id, label, now()],
    )?;
    Ok(())
}

pub fn delete_number(c: &Connection, external_id: &str) -> rusqlite::Result<()> {
    c.execute(
        "DELETE FROM voice_local_numbers WHERE external_id = ?1",
        [external_id],
    )?;
    Ok(())
}
