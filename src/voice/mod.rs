//! Voice-agent platforms behind one trait. `local` is the embedded default, a complete
//! provider with no external service; `elevenlabs` talks to the ElevenLabs Agents API.
//! Handlers only ever see `dyn VoiceProvider` through `AppState::voice`.

pub mod elevenlabs;
pub mod http;
pub mod local;
pub mod retell;
pub mod vapi;

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
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
        #[serde(default)]
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

/// An outbound phone call to place from a genie's number.
#[derive(Debug, Clone, Serialize)]
pub struct OutboundCall {
    pub agent_id: String,
    /// The genie's number, E.164.
    pub from_number: String,
    /// The platform's id of that number.
    pub from_external_id: String,
    /// The callee, E.164.
    pub to: String,
    /// Values for `{{name}}` placeholders in the prompt and first message.
    pub variables: std::collections::BTreeMap<String, String>,
    /// Echoed back by the platform on the call (genie id, lead id).
    pub metadata: Value,
}

/// A number the team owns elsewhere, to import into a platform with its credentials.
#[derive(Clone)]
pub struct ImportedNumber {
    /// E.164.
    pub number: String,
    pub source: NumberSource,
}

/// Where an imported number lives. Debug never shows the secrets.
#[derive(Clone)]
pub enum NumberSource {
    /// A number of a Twilio account (`AC…` SID and auth token).
    Twilio {
        account_sid: String,
        auth_token: crate::config::Secret,
    },
    /// A SIP trunk (e.g. Twilio Elastic SIP Trunking): where calls are sent, and its
    /// digest credentials when it has them.
    Sip {
        termination_uri: String,
        username: Option<String>,
        password: Option<crate::config::Secret>,
    },
}

impl NumberSource {
    /// `twilio` or `sip`.
    pub fn kind(&self) -> &'static str {
        match self {
            NumberSource::Twilio { .. } => "twilio",
            NumberSource::Sip { .. } => "sip",
        }
    }
}

impl std::fmt::Debug for ImportedNumber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ImportedNumber({}, {})", self.number, self.source.kind())
    }
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
    /// `local`, `elevenlabs`, `vapi` or `retell`.
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
    /// Whether `start_call` can place outbound calls.
    fn supports_calls(&self) -> bool {
        false
    }
    /// Starts an outbound call; returns the platform's call id (the conversation id its
    /// webhooks and conversation listing will use).
    async fn start_call(&self, call: &OutboundCall) -> ProviderResult<String> {
        let _ = call;
        Err(ProviderError::new(format!(
            "the '{}' voice provider cannot place outbound calls",
            self.name()
        )))
    }
    /// The kinds of number (`twilio`, `sip`) `import_number` takes; none by default.
    fn number_import_kinds(&self) -> &'static [&'static str] {
        &[]
    }
    /// Imports a number the team owns and attaches it to the agent (inbound and outbound).
    async fn import_number(
        &self,
        agent_id: &str,
        label: &str,
        number: &ImportedNumber,
    ) -> ProviderResult<ProvisionedNumber> {
        let _ = (agent_id, label, number);
        Err(ProviderError::new(format!(
            "the '{}' voice provider cannot import phone numbers",
            self.name()
        )))
    }
    /// Reads the agent back as the platform holds it now, in genied's terms: what the drift
    /// check compares and what `pull` adopts.
    async fn get_agent(&self, agent_id: &str) -> ProviderResult<AgentSpec> {
        let _ = agent_id;
        Err(ProviderError::new(format!(
            "the '{}' voice provider cannot read its agents back",
            self.name()
        )))
    }
    /// `spec` as this platform holds it once genied has sent it: what it clamps, renames or
    /// cannot hold changed the way [`VoiceProvider::get_agent`] would read it back. Comparing
    /// this with `get_agent` shows only what was changed at the platform.
    fn as_held(&self, spec: &AgentSpec) -> AgentSpec {
        spec.clone()
    }
    /// Splits the agent's own traffic between versions at the platform, when it has a split
    /// of its own (ElevenLabs: a branch per version and a percentage deployment). `shares`
    /// empty gives all traffic back to the agent's main line. Returns the platform's split.
    async fn set_traffic(&self, agent_id: &str, shares: &[TrafficShare]) -> ProviderResult<Value> {
        let _ = (agent_id, shares);
        Err(ProviderError::new(format!(
            "the '{}' voice provider has no traffic split of its own",
            self.name()
        )))
    }
}

/// One version's share of a split mirrored at a platform.
#[derive(Debug, Clone)]
pub struct TrafficShare {
    pub version: i64,
    /// 0–100.
    pub weight: u64,
    pub spec: AgentSpec,
}

impl AgentTool {
    /// The tool's name as the drift check lists it.
    pub fn label(&self) -> &str {
        match self {
            AgentTool::Webhook { name, .. } | AgentTool::Builtin { name } => name,
        }
    }
}

/// A webhook tool's parameters as an object JSON Schema (what every platform wants).
pub fn object_schema(parameters: &Value) -> Value {
    serde_json::json!({
        "type": "object",
        "properties": parameters.get("properties").cloned().unwrap_or_else(|| serde_json::json!({})),
        "required": parameters.get("required").cloned().unwrap_or_else(|| serde_json::json!([])),
    })
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

/// Builds the provider called `name`.
pub fn build(
    name: &str,
    config: &crate::config::Config,
    db: &crate::db::Db,
) -> anyhow::Result<DynVoice> {
    match name {
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
                retry_base(config),
            )?))
        }
        "vapi" => {
            let key = config
                .vapi_api_key
                .clone()
                .filter(|k| !k.0.trim().is_empty())
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "--voice-provider vapi needs --vapi-api-key (or GENIED_VAPI_API_KEY)"
                    )
                })?;
            let server = config
                .vapi_webhook_secret
                .clone()
                .filter(|s| !s.0.is_empty())
                .map(|secret| vapi::ServerUrl {
                    url: format!("{}/v1/hooks/vapi", config.public_base()),
                    secret,
                });
            Ok(Arc::new(vapi::Vapi::new(
                &config.vapi_base_url,
                key,
                server,
                retry_base(config),
            )?))
        }
        "retell" => {
            let key = config
                .retell_api_key
                .clone()
                .filter(|k| !k.0.trim().is_empty())
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "--voice-provider retell needs --retell-api-key (or GENIED_RETELL_API_KEY)"
                    )
                })?;
            let hook = config
                .retell_webhook_secret
                .as_ref()
                .filter(|s| !s.0.is_empty())
                .map(|_| format!("{}/v1/hooks/retell", config.public_base()));
            Ok(Arc::new(retell::Retell::new(
                &config.retell_base_url,
                key,
                hook,
                retry_base(config),
            )?))
        }
        other => anyhow::bail!(
            "unknown voice provider '{other}' (use local, elevenlabs, vapi or retell)"
        ),
    }
}

/// Builds the provider `--voice-provider` names.
pub fn from_config(config: &crate::config::Config, db: &crate::db::Db) -> anyhow::Result<DynVoice> {
    build(&config.voice_provider, config, db)
}

/// Every provider this service can provision genies in: the default (`--voice-provider`),
/// `local` (always), and each platform whose API key is configured. A genie names its
/// provider; one without a name lives in the default.
#[derive(Clone)]
pub struct Voices {
    default: DynVoice,
    all: std::collections::BTreeMap<&'static str, DynVoice>,
}

impl Voices {
    /// The default from `--voice-provider` (or `default`, a test's fake), and the others
    /// from their keys.
    pub fn from_config(
        config: &crate::config::Config,
        db: &crate::db::Db,
        default: Option<DynVoice>,
    ) -> anyhow::Result<Voices> {
        let default = match default {
            Some(v) => v,
            None => from_config(config, db)?,
        };
        let mut all = std::collections::BTreeMap::new();
        all.insert(default.name(), default.clone());
        let keyed =
            |k: &Option<crate::config::Secret>| k.as_ref().is_some_and(|k| !k.0.trim().is_empty());
        for (name, configured) in [
            ("local", true),
            ("elevenlabs", keyed(&config.elevenlabs_api_key)),
            ("vapi", keyed(&config.vapi_api_key)),
            ("retell", keyed(&config.retell_api_key)),
        ] {
            if configured && !all.contains_key(name) {
                let v = build(name, config, db)?;
                all.insert(v.name(), v);
            }
        }
        Ok(Voices { default, all })
    }

    /// Only this provider (tests, tools).
    pub fn single(v: DynVoice) -> Voices {
        let mut all = std::collections::BTreeMap::new();
        all.insert(v.name(), v.clone());
        Voices { default: v, all }
    }

    /// The provider of genies that name none.
    pub fn default(&self) -> &DynVoice {
        &self.default
    }

    pub fn get(&self, name: &str) -> Option<&DynVoice> {
        self.all.get(name)
    }

    /// The provider a genie lives in: its own, else the default. A genie naming a provider
    /// that is no longer configured gets an error saying so rather than another platform.
    pub fn named(&self, provider: Option<&str>) -> ProviderResult<&DynVoice> {
        match provider {
            None => Ok(&self.default),
            Some(p) => self.get(p).ok_or_else(|| {
                ProviderError::new(format!(
                    "voice provider '{p}' is not configured on this service (configured: {})",
                    self.names().join(", ")
                ))
            }),
        }
    }

    /// Configured provider names, sorted.
    pub fn names(&self) -> Vec<&'static str> {
        self.all.keys().copied().collect()
    }
}

fn retry_base(config: &crate::config::Config) -> std::time::Duration {
    std::time::Duration::from_millis(config.provider_retry_base_ms.max(1))
}
