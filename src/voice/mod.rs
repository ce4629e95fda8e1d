//! Voice-agent platforms behind one trait. `local` is the embedded default, a complete
//! provider with no external service; `elevenlabs` talks to the ElevenLabs Agents API.
//! Handlers only ever see `dyn VoiceProvider` through `AppState::voice`.

pub mod elevenlabs;
pub mod local;

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ApiError;

/// A knowledge-base document as attached to an agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KbDocRef {
    /// The provider's document id (20 characters).
    pub id: String,
    pub name: String,
    /// `file`, `url` or `text`.
    #[serde(rename = "type")]
    pub doc_type: String,
}

/// Everything the provider needs to know about an agent.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AgentSpec {
    pub name: String,
    pub system_prompt: Option<String>,
    pub first_message: Option<String>,
    pub language: Option<String>,
    pub multilingual: bool,
    pub voice_id: Option<String>,
    pub llm_model: String,
    pub temperature: Option<f64>,
    pub max_tokens: Option<i64>,
    pub stability: Option<f64>,
    pub similarity_boost: Option<f64>,
    pub speed: Option<f64>,
    pub max_duration_seconds: Option<i64>,
    pub turn_timeout_seconds: Option<f64>,
    pub silence_end_seconds: Option<f64>,
    pub turn_mode: Option<String>,
    pub knowledge_base: Vec<KbDocRef>,
    /// The genie's conversation tools, for providers that run them in their own calls.
    pub tools: Vec<AgentTool>,
}

/// A genie tool as a voice provider sees it: never a credential.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentTool {
    /// An HTTP endpoint the provider calls itself.
    Webhook {
        name: String,
        description: String,
        parameters: Value,
        url: String,
        method: String,
        timeout_seconds: u64,
        /// The tool needs a stored credential, which genied never hands to a provider.
        needs_credential: bool,
    },
    /// `search_knowledge_base`, `capture_lead`, `end_conversation` or `transfer_to_human`.
    Builtin { name: String },
}

#[derive(Debug, Clone, Serialize)]
pub struct ProvisionedNumber {
    /// E.164, e.g. `+15550100123`.
    pub number: String,
    pub external_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Voice {
    pub voice_id: String,
    pub name: String,
    pub category: Option<String>,
    /// Free-form labels: `language`, `gender`, `accent`, `use_case`, ...
    pub labels: Value,
    pub description: Option<String>,
    pub preview_url: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ConversationSummary {
    pub conversation_id: String,
    pub agent_id: String,
    pub start_time_unix_secs: i64,
    pub call_duration_secs: i64,
    pub status: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct ConversationPage {
    pub conversations: Vec<ConversationSummary>,
    pub next_cursor: Option<String>,
}

pub use crate::db::conversations::Turn;

#[derive(Debug, Clone, Serialize)]
pub struct ConversationDetail {
    pub conversation_id: String,
    pub agent_id: String,
    /// `initiated`, `in-progress`, `processing`, `done` or `failed`.
    pub status: String,
    pub start_time_unix_secs: i64,
    pub call_duration_secs: i64,
    pub transcript: Vec<Turn>,
    pub summary: Option<String>,
    pub metadata: Value,
}

/// A provider call that failed. Its message is safe to show (no secrets).
#[derive(Debug, Clone)]
pub struct ProviderError {
    pub message: String,
    /// The provider's HTTP status, when it answered.
    pub status: Option<u16>,
}

impl ProviderError {
    pub fn new(message: impl Into<String>) -> Self {
        ProviderError {
            message: message.into(),
            status: None,
        }
    }
}

impl std::fmt::Display for ProviderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.status {
            Some(s) => write!(f, "voice provider answered {s}: {}", self.message),
            None => write!(f, "voice provider: {}", self.message),
        }
    }
}

impl From<ProviderError> for ApiError {
    fn from(e: ProviderError) -> Self {
        ApiError::upstream(e.to_string())
    }
}

pub type ProviderResult<T> = Result<T, ProviderError>;

#[async_trait]
pub trait VoiceProvider: Send + Sync {
    /// `local` or `elevenlabs`.
    fn name(&self) -> &'static str;
    /// Creates the agent; returns its external id.
    async fn create_agent(&self, spec: &AgentSpec) -> ProviderResult<String>;
    async fn update_agent(&self, agent_id: &str, spec: &AgentSpec) -> ProviderResult<()>;
    /// Deleting an agent that is already gone succeeds.
    async fn delete_agent(&self, agent_id: &str) -> ProviderResult<()>;
    /// Replaces the agent's whole knowledge-base list.
    async fn set_agent_documents(&self, agent_id: &str, docs: &[KbDocRef]) -> ProviderResult<()>;
    /// Stores a document's text; returns its 20-character external id.
    async fn create_document(&self, name: &str, text: &str) -> ProviderResult<String>;
    async fn delete_document(&self, doc_id: &str) -> ProviderResult<()>;
    async fn provision_number(
        &self,
        agent_id: &str,
        label: &str,
    ) -> ProviderResult<ProvisionedNumber>;
    async fn release_number(&self, external_id: &str) -> ProviderResult<()>;
    async fn list_voices(&self) -> ProviderResult<Vec<Voice>>;
    async fn list_conversations(
        &self,
        agent_id: &str,
        cursor: Option<&str>,
    ) -> ProviderResult<ConversationPage>;
    async fn get_conversation(&self, conversation_id: &str) -> ProviderResult<ConversationDetail>;
    /// Whether `provision_number` can hand out a number on its own. Platforms where numbers
    /// are imported with the operator's telephony credentials answer false, and callers
    /// refuse `attachPhoneNumber` with a validation error instead of calling the provider.
    fn supports_phone_provisioning(&self) -> bool {
        true
    }
}

pub type DynVoice = Arc<dyn VoiceProvider>;

/// The voice used when a genie names none: ElevenLabs' premade "Rachel", also the first
/// entry of the embedded catalog.
pub const DEFAULT_VOICE_ID: &str = "21m00Tcm4TlvDq8ikWAM";

/// The embedded voice catalog (`assets/voices.json`).
pub fn catalog() -> Vec<Voice> {
    serde_json::from_str(include_str!("../../assets/voices.json"))
        .expect("assets/voices.json is valid")
}

/// Builds the provider `--voice-provider` names.
pub fn from_config(config: &crate::config::Config, db: &crate::db::Db) -> anyhow::Result<DynVoice> {
    match config.voice_provider.as_str() {
        "local" => Ok(Arc::new(local::LocalProvider::new(
            db.clone(),
            &config.phone_pool,
        )?)),
        "elevenlabs" => {
            let key = config.elevenlabs_api_key.clone().filter(|k| !k.0.trim().is_empty()).ok_or_else(|| {
                anyhow::anyhow!("--voice-provider elevenlabs needs --elevenlabs-api-key (or GENIED_ELEVENLABS_API_KEY)")
            })?;
            Ok(Arc::new(elevenlabs::ElevenLabs::new(
                &config.elevenlabs_base_url,
                key,
            )?))
        }
        other => anyhow::bail!("unknown voice provider '{other}' (use local or elevenlabs)"),
    }
}
