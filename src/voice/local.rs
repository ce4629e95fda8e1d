//! The embedded voice provider: a complete provider with no external service. Agents,
//! knowledge-base documents, phone numbers and the conversations this service hosts itself
//! live in SQLite (tables `voice_local_*`, migration V2), so they survive restarts. Phone
//! numbers come from a configured E.164 pool (`--phone-pool`); the primary key on the number
//! makes handing one out twice impossible, and a released number returns to the pool.

use async_trait::async_trait;
use serde_json::{Value, json};

use super::*;
use crate::db::{self, Db};
use crate::error::ApiError;

pub struct LocalProvider {
    db: Db,
    pool: Vec<PoolRange>,
}

/// An inclusive range of numbers sharing the same digit count (`+1555...`).
#[derive(Debug, Clone, PartialEq)]
struct PoolRange {
    first: u64,
    last: u64,
    digits: usize,
}

impl PoolRange {
    fn numbers(&self) -> impl Iterator<Item = String> + '_ {
        (self.first..=self.last).map(move |n| format!("+{n:0width$}", width = self.digits))
    }
}

fn parse_e164(s: &str) -> anyhow::Result<(u64, usize)> {
    let s = s.trim();
    let digits = s
        .strip_prefix('+')
        .ok_or_else(|| anyhow::anyhow!("phone pool entry '{s}' must start with '+' (E.164)"))?;
    if !(8..=15).contains(&digits.len())
        || !digits.bytes().all(|b| b.is_ascii_digit())
        || digits.starts_with('0')
    {
        anyhow::bail!("phone pool entry '{s}' is not an E.164 number (+ and 8 to 15 digits)");
    }
    Ok((digits.parse()?, digits.len()))
}

/// Parses `--phone-pool`: comma-separated numbers or `FIRST-LAST` ranges.
fn parse_pool(spec: &str) -> anyhow::Result<Vec<PoolRange>> {
    let mut out = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a, b),
            None => (part, part),
        };
        let (first, digits) = parse_e164(a)?;
        let (last, digits2) = parse_e164(b)?;
        if digits != digits2 || last < first {
            anyhow::bail!(
                "phone pool range '{part}' must go from a lower to a higher number of the same length"
            );
        }
        out.push(PoolRange {
            first,
            last,
            digits,
        });
    }
    Ok(out)
}

impl From<ApiError> for ProviderError {
    fn from(e: ApiError) -> Self {
        ProviderError::new(format!("local provider storage: {}", e.message))
    }
}

fn local_id(prefix: &str) -> String {
    let id = uuid::Uuid::now_v7().simple().to_string();
    format!("{prefix}{}", &id[id.len() - (20 - prefix.len())..])
}

fn not_found(what: &str, id: &str) -> ProviderError {
    ProviderError {
        message: format!("{what} {id} not found"),
        status: Some(404),
    }
}

impl LocalProvider {
    pub fn new(db: Db, phone_pool: &str) -> anyhow::Result<LocalProvider> {
        Ok(LocalProvider {
            db,
            pool: parse_pool(phone_pool)?,
        })
    }

    /// Records (or replaces) a conversation the service hosted itself, e.g. a web call on a
    /// genie page. `turns` is the transcript; the conversation then shows up in
    /// `list_conversations` / `get_conversation` like one from an external platform.
    pub async fn record_conversation(&self, detail: ConversationDetail) -> ProviderResult<()> {
        let row = db::voice_local::Conversation {
            transcript: serde_json::to_string(&detail.transcript).map_err(ApiError::from)?,
            conversation_id: detail.conversation_id,
            agent_id: detail.agent_id,
            status: detail.status,
            start_time_unix: detail.start_time_unix_secs,
            duration_secs: detail.call_duration_secs,
            summary: detail.summary,
            metadata: detail.metadata,
        };
        self.db
            .write(move |c| Ok(db::voice_local::put_conversation(c, &row)?))
            .await?;
        Ok(())
    }

    /// The stored spec and knowledge base of an agent (tests and diagnostics).
    pub async fn agent(&self, agent_id: &str) -> ProviderResult<Option<(Value, Value)>> {
        let id = agent_id.to_string();
        Ok(self
            .db
            .read(move |c| Ok(db::voice_local::agent(c, &id)?))
            .await?)
    }
}

#[async_trait]
impl VoiceProvider for LocalProvider {
    fn name(&self) -> &'static str {
        "local"
    }

    async fn get_agent(&self, agent_id: &str) -> ProviderResult<AgentSpec> {
        let Some((spec, kb)) = self.agent(agent_id).await? else {
            return Err(ProviderError {
                message: format!("agent {agent_id} not found"),
                status: Some(404),
            });
        };
        let mut spec: AgentSpec = serde_json::from_value(spec)
            .map_err(|e| ProviderError::new(format!("stored agent {agent_id}: {e}")))?;
        spec.knowledge_base = serde_json::from_value(kb).unwrap_or_default();
        Ok(spec)
    }

    async fn create_agent(&self, spec: &AgentSpec) -> ProviderResult<String> {
        let id = local_id("agent_");
        let (agent_id, spec_json, kb) = (
            id.clone(),
            serde_json::to_string(spec).unwrap_or_default(),
            json!(spec.knowledge_base).to_string(),
        );
        self.db
            .write(move |c| {
                Ok(db::voice_local::insert_agent(
                    c, &agent_id, &spec_json, &kb,
                )?)
            })
            .await?;
        Ok(id)
    }

    async fn update_agent(&self, agent_id: &str, spec: &AgentSpec) -> ProviderResult<()> {
        let (id, spec_json) = (
            agent_id.to_string(),
            serde_json::to_string(spec).unwrap_or_default(),
        );
        let n = self
            .db
            .write(move |c| Ok(db::voice_local::set_agent_spec(c, &id, &spec_json)?))
            .await?;
        if n == 0 {
            Err(not_found("agent", agent_id))
        } else {
            Ok(())
        }
    }

    async fn delete_agent(&self, agent_id: &str) -> ProviderResult<()> {
        let id = agent_id.to_string();
        self.db
            .write(move |c| Ok(db::voice_local::delete_agent(c, &id)?))
            .await?;
        Ok(())
    }

    async fn set_agent_documents(&self, agent_id: &str, docs: &[KbDocRef]) -> ProviderResult<()> {
        let (id, kb) = (agent_id.to_string(), json!(docs).to_string());
        let n = self
            .db
            .write(move |c| Ok(db::voice_local::set_agent_knowledge_base(c, &id, &kb)?))
            .await?;
        if n == 0 {
            Err(not_found("agent", agent_id))
        } else {
            Ok(())
        }
    }

    async fn create_document(&self, name: &str, text: &str) -> ProviderResult<String> {
        let id = local_id("kb");
        let (doc_id, name, text) = (id.clone(), name.to_string(), text.to_string());
        self.db
            .write(move |c| Ok(db::voice_local::insert_document(c, &doc_id, &name, &text)?))
            .await?;
        Ok(id)
    }

    async fn delete_document(&self, doc_id: &str) -> ProviderResult<()> {
        let id = doc_id.to_string();
        self.db
            .write(move |c| Ok(db::voice_local::delete_document(c, &id)?))
            .await?;
        Ok(())
    }

    async fn provision_number(
        &self,
        agent_id: &str,
        label: &str,
    ) -> ProviderResult<ProvisionedNumber> {
        let pool = self.pool.clone();
        let (agent, label) = (agent_id.to_string(), label.to_string());
        self.db
            .write(move |c| {
                if !db::voice_local::agent_exists(c, &agent)? {
                    return Ok(Err(not_found("agent", &agent)));
                }
                for range in &pool {
                    for number in range.numbers() {
                        if db::voice_local::number_taken(c, &number)? {
                            continue;
                        }
                        let external_id = local_id("phnum_");
                        db::voice_local::insert_number(c, &number, &external_id, &agent, &label)?;
                        return Ok(Ok(ProvisionedNumber {
                            number,
                            external_id,
                        }));
                    }
                }
                Ok(Err(ProviderError::new(
                    "the phone number pool is exhausted; widen --phone-pool or release a number",
                )))
            })
            .await?
    }

    async fn release_number(&self, external_id: &str) -> ProviderResult<()> {
        let id = external_id.to_string();
        self.db
            .write(move |c| Ok(db::voice_local::delete_number(c, &id)?))
            .await?;
        Ok(())
    }

    async fn list_voices(&self) -> ProviderResult<Vec<Voice>> {
        Ok(catalog())
    }

    async fn list_conversations(
        &self,
        agent_id: &str,
        cursor: Option<&str>,
    ) -> ProviderResult<ConversationPage> {
        const PAGE: usize = 100;
        // The cursor is the last conversation id of the previous page (ordered by id).
        let (agent, after) = (agent_id.to_string(), cursor.unwrap_or("").to_string());
        let mut rows: Vec<ConversationSummary> = self
            .db
            .read(move |c| {
                Ok(db::voice_local::list_conversations(
                    c,
                    &agent,
                    &after,
                    (PAGE + 1) as i64,
                )?)
            })
            .await?
            .into_iter()
            .map(|r| ConversationSummary {
                conversation_id: r.conversation_id,
                agent_id: r.agent_id,
                start_time_unix_secs: r.start_time_unix,
                call_duration_secs: r.duration_secs,
                status: r.status,
            })
            .collect();
        let more = rows.len() > PAGE;
        rows.truncate(PAGE);
        let next_cursor = if more {
            rows.last().map(|r| r.conversation_id.clone())
        } else {
            None
        };
        Ok(ConversationPage {
            conversations: rows,
            next_cursor,
        })
    }

    async fn get_conversation(&self, conversation_id: &str) -> ProviderResult<ConversationDetail> {
        let id = conversation_id.to_string();
        let found = self
            .db
            .read(move |c| Ok(db::voice_local::get_conversation(c, &id)?))
            .await?;
        let r = found.ok_or_else(|| not_found("conversation", conversation_id))?;
        Ok(ConversationDetail {
            conversation_id: r.conversation_id,
            agent_id: r.agent_id,
            status: r.status,
            start_time_unix_secs: r.start_time_unix,
            call_duration_secs: r.duration_secs,
            transcript: serde_json::from_str(&r.transcript).unwrap_or_default(),
            summary: r.summary,
            metadata: r.metadata,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pools() {
        let p = parse_pool("+15555550100-+15555550102, +442079460000").unwrap();
        let all: Vec<String> = p
            .iter()
            .flat_map(|r| r.numbers().collect::<Vec<_>>())
            .collect();
        assert_eq!(
            all,
            [
                "+15555550100",
                "+15555550101",
                "+15555550102",
                "+442079460000"
            ]
        );
        assert!(parse_pool("15555550100").is_err());
        assert!(parse_pool("+15555550199-+15555550100").is_err());
        assert!(parse_pool("+1555-+15555550100").is_err());
    }
}

/// Whether a simulated callee picks up: decided by the number, so that campaigns can be
/// tried and tested with every outcome. A number ending in 7 never answers, one ending in 8
/// is always busy, one ending in 9 is busy on the first attempt and answers later; any
/// other number answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pickup {
    Answered,
    NoAnswer,
    Busy,
}

pub fn simulated_pickup(to: &str, attempt: i64) -> Pickup {
    match to.chars().last() {
        Some('7') => Pickup::NoAnswer,
        Some('8') => Pickup::Busy,
        Some('9') if attempt <= 1 => Pickup::Busy,
        _ => Pickup::Answered,
    }
}
