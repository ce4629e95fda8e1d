//! Typed requests of the genies resource, their range checks, and how they change a
//! `GenieRow`. How `settings` maps onto the columns and the provider's agent is in
//! `settings.rs`.

use serde::Deserialize;
use serde_json::{Value, json};

use super::checks::{DEFAULT_LLM, non_empty, object, positive_f, positive_i, range, turn_mode};
use super::settings::{P_LANG, P_SIM, P_SPEED, P_STAB, apply_settings, deep_merge, set_path};
use crate::api::double_option;
use crate::db::genies::GenieRow;
use crate::error::{ApiError, ApiResult};

/// `create` data (camelCase, as the spec's field table). Unknown members are ignored.
#[derive(Deserialize, Default, Debug, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "GenieCreate")]
pub struct CreateGenie {
    pub genie_name: Option<String>,
    /// The voice platform that runs the genie (`local`, `elevenlabs`, `vapi`, `retell`);
    /// default the service's `--voice-provider`. Only configured providers are accepted.
    pub provider: Option<String>,
    pub use_case: Option<String>,
    pub system_prompt: Option<String>,
    pub first_message: Option<String>,
    pub web_welcome_message: Option<String>,
    pub voice_id: Option<String>,
    pub llm_model: Option<String>,
    pub temperature: Option<f64>,
    pub max_tokens: Option<i64>,
    pub brand: Option<String>,
    pub category: Option<String>,
    pub description: Option<String>,
    pub support_emails: Option<Vec<String>>,
    pub send_conversation_reports: Option<bool>,
    pub attach_phone_number: Option<bool>,
    pub impersonated_user_id: Option<String>,
    pub multilingual: Option<bool>,
    pub voice_stability: Option<f64>,
    pub voice_similarity: Option<f64>,
    pub voice_speed: Option<f64>,
    pub language: Option<String>,
    pub max_duration_seconds: Option<i64>,
    pub turn_timeout_seconds: Option<f64>,
    pub silence_end_seconds: Option<f64>,
    pub turn_mode: Option<String>,
    pub max_calls: Option<i64>,
    /// Calls the genie may start in any 60 s, across its campaigns and `call` (1-600).
    pub max_calls_per_minute: Option<i64>,
    pub is_active: Option<bool>,
    pub setup_completed: Option<bool>,
    pub voice_disabled: Option<bool>,
    pub group_id: Option<String>,
    pub page_slug: Option<String>,
    pub settings: Option<Value>,
    pub branding: Option<Value>,
    /// Conversation tools: see `service::genie_tools`.
    #[serde(default)]
    pub tools: Option<Vec<Value>>,
    #[serde(default, alias = "allowed_origins")]
    pub allowed_origins: Option<Vec<String>>,
}

/// `update` data: partial. The spec's names (`name`, `description`, `settings`, `branding`,
/// `group_id`) plus the create fields, each accepted in camelCase or snake_case. `null`
/// clears a nullable field.
#[derive(Deserialize, Default, Debug, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(rename = "GenieUpdate")]
pub struct UpdateGenie {
    #[serde(alias = "genieName")]
    pub name: Option<String>,
    #[serde(default, deserialize_with = "double_option::deserialize")]
    #[schemars(with = "Option<String>")]
    pub description: Option<Option<String>>,
    pub settings: Option<Value>,
    pub branding: Option<Value>,
    #[serde(
        default,
        deserialize_with = "double_option::deserialize",
        alias = "group_id"
    )]
    #[schemars(with = "Option<String>")]
    pub group_id: Option<Option<String>>,
    #[serde(
        default,
        deserialize_with = "double_option::deserialize",
        alias = "use_case"
    )]
    #[schemars(with = "Option<String>")]
    pub use_case: Option<Option<String>>,
    #[serde(default, deserialize_with = "double_option::deserialize")]
    #[schemars(with = "Option<String>")]
    pub category: Option<Option<String>>,
    #[serde(default, deserialize_with = "double_option::deserialize")]
    #[schemars(with = "Option<String>")]
    pub brand: Option<Option<String>>,
    #[serde(
        default,
        deserialize_with = "double_option::deserialize",
        alias = "system_prompt"
    )]
    #[schemars(with = "Option<String>")]
    pub system_prompt: Option<Option<String>>,
    #[serde(
        default,
        deserialize_with = "double_option::deserialize",
        alias = "first_message"
    )]
    #[schemars(with = "Option<String>")]
    pub first_message: Option<Option<String>>,
    #[serde(
        default,
        deserialize_with = "double_option::deserialize",
        alias = "web_welcome_message"
    )]
    #[schemars(with = "Option<String>")]
    pub web_welcome_message: Option<Option<String>>,
    #[serde(alias = "voice_id")]
    pub voice_id: Option<String>,
    #[serde(alias = "llm_model")]
    pub llm_model: Option<String>,
    #[serde(default, deserialize_with = "double_option::deserialize")]
    #[schemars(with = "Option<f64>")]
    pub temperature: Option<Option<f64>>,
    #[serde(
        default,
        deserialize_with = "double_option::deserialize",
        alias = "max_tokens"
    )]
    #[schemars(with = "Option<i64>")]
    pub max_tokens: Option<Option<i64>>,
    #[serde(alias = "support_emails")]
    pub support_emails: Option<Vec<String>>,
    #[serde(alias = "send_conversation_reports")]
    pub send_conversation_reports: Option<bool>,
    #[serde(alias = "is_active")]
    pub is_active: Option<bool>,
    #[serde(alias = "setup_completed")]
    pub setup_completed: Option<bool>,
    #[serde(alias = "voice_disabled")]
    pub voice_disabled: Option<bool>,
    pub multilingual: Option<bool>,
    #[serde(alias = "voice_stability")]
    pub voice_stability: Option<f64>,
    #[serde(alias = "voice_similarity")]
    pub voice_similarity: Option<f64>,
    #[serde(alias = "voice_speed")]
    pub voice_speed: Option<f64>,
    pub language: Option<String>,
    #[serde(
        default,
        deserialize_with = "double_option::deserialize",
        alias = "max_duration_seconds"
    )]
    #[schemars(with = "Option<i64>")]
    pub max_duration_seconds: Option<Option<i64>>,
    #[serde(
        default,
        deserialize_with = "double_option::deserialize",
        alias = "turn_timeout_seconds"
    )]
    #[schemars(with = "Option<f64>")]
    pub turn_timeout_seconds: Option<Option<f64>>,
    #[serde(
        default,
        deserialize_with = "double_option::deserialize",
        alias = "silence_end_seconds"
    )]
    #[schemars(with = "Option<f64>")]
    pub silence_end_seconds: Option<Option<f64>>,
    #[serde(alias = "turn_mode")]
    pub turn_mode: Option<String>,
    #[serde(
        default,
        deserialize_with = "double_option::deserialize",
        alias = "max_calls"
    )]
    #[schemars(with = "Option<i64>")]
    pub max_calls: Option<Option<i64>>,
    /// Calls the genie may start in any 60 s (1-600); null removes the limit.
    #[serde(
        default,
        deserialize_with = "double_option::deserialize",
        alias = "max_calls_per_minute"
    )]
    #[schemars(with = "Option<i64>")]
    pub max_calls_per_minute: Option<Option<i64>>,
    #[serde(alias = "page_slug")]
    pub page_slug: Option<String>,
    /// Stage the change as the genie's draft instead of making it live (`publish` does).
    pub draft: Option<bool>,
    pub tools: Option<Vec<Value>>,
    #[serde(alias = "allowed_origins")]
    pub allowed_origins: Option<Vec<String>>,
}

#[derive(Deserialize, Debug, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "PromptReplacement")]
pub struct Replacement {
    pub from: String,
    pub to: String,
}

#[derive(Deserialize, Default, Debug, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(rename = "GenieClone")]
pub struct CloneGenie {
    pub name: Option<String>,
    #[serde(default)]
    pub prompt_replacements: Vec<Replacement>,
}

// ---- checks --------------------------------------------------------------------------

pub fn check_name(field: &str, name: &str) -> ApiResult<String> {
    let n = name.trim();
    if n.is_empty() || n.chars().count() > 200 {
        return Err(ApiError::validation(format!(
            "{field} is required and must be at most 200 characters"
        )));
    }
    Ok(n.to_string())
}

fn emails(field: &str, list: &[String]) -> ApiResult<Value> {
    let mut out = Vec::new();
    for (i, e) in list.iter().enumerate() {
        let e = e.trim();
        let ok = e.len() <= 254
            && e.split_once('@')
                .is_some_and(|(a, b)| !a.is_empty() && b.contains('.') && !b.starts_with('.'));
        if !ok || e.contains(char::is_whitespace) {
            return Err(ApiError::validation(format!(
                "{field}[{i}] is not an email address"
            )));
        }
        out.push(Value::from(e));
    }
    Ok(Value::Array(out))
}

pub fn check_slug(field: &str, s: &str) -> ApiResult<String> {
    let ok = (3..=64).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-');
    if !ok {
        return Err(ApiError::validation(format!(
            "{field} must be 3 to 64 characters of a-z, 0-9 and '-'"
        )));
    }
    Ok(s.to_string())
}

// ---- applying requests ---------------------------------------------------------------

/// Builds the row of a new genie from `create` data (no id-dependent parts yet).
pub fn new_row(b: &CreateGenie, id: String, owner: String, now: String) -> ApiResult<GenieRow> {
    let name = check_name("data.genieName", b.genie_name.as_deref().unwrap_or(""))?;
    let mut g = GenieRow {
        id,
        user_id: owner,
        external_agent_id: None,
        page_slug: Some(crate::db::genies::new_slug(&name)),
        name,
        description: None,
        use_case: None,
        category: None,
        brand: None,
        system_prompt: None,
        first_message: None,
        voice_id: Some(crate::voice::DEFAULT_VOICE_ID.into()),
        llm_model: DEFAULT_LLM.into(),
        temperature: None,
        max_tokens: None,
        is_active: true,
        setup_completed: false,
        send_conversation_reports: false,
        voice_disabled: false,
        multilingual: false,
        max_duration_seconds: None,
        turn_timeout_seconds: None,
        silence_end_seconds: None,
        turn_mode: "silence".into(),
        max_calls: None,
        max_calls_per_minute: None,
        settings: json!({}),
        branding: json!({}),
        support_emails: json!([]),
        tools: json!([]),
        allowed_origins: json!([]),
        web_welcome_message: None,
        group_id: None,
        sort_order: 0,
        created_at: now.clone(),
        updated_at: now,
    };
    if let Some(s) = &b.settings {
        apply_settings(&mut g, s)?;
    }
    if let Some(br) = &b.branding {
        object("data.branding", br)?;
        g.branding = br.clone();
    }
    let u = UpdateGenie {
        name: None,
        description: b.description.clone().map(Some),
        settings: None,
        branding: None,
        group_id: None,
        use_case: b.use_case.clone().map(Some),
        category: b.category.clone().map(Some),
        brand: b.brand.clone().map(Some),
        system_prompt: b.system_prompt.clone().map(Some),
        first_message: b.first_message.clone().map(Some),
        web_welcome_message: b.web_welcome_message.clone().map(Some),
        voice_id: b.voice_id.clone(),
        llm_model: b.llm_model.clone(),
        temperature: b.temperature.map(Some),
        max_tokens: b.max_tokens.map(Some),
        support_emails: b.support_emails.clone(),
        send_conversation_reports: b.send_conversation_reports,
        is_active: b.is_active,
        setup_completed: b.setup_completed,
        voice_disabled: b.voice_disabled,
        multilingual: b.multilingual,
        voice_stability: b.voice_stability,
        voice_similarity: b.voice_similarity,
        voice_speed: b.voice_speed,
        language: b.language.clone(),
        max_duration_seconds: b.max_duration_seconds.map(Some),
        turn_timeout_seconds: b.turn_timeout_seconds.map(Some),
        silence_end_seconds: b.silence_end_seconds.map(Some),
        turn_mode: b.turn_mode.clone(),
        max_calls: b.max_calls.map(Some),
        max_calls_per_minute: b.max_calls_per_minute.map(Some),
        page_slug: b.page_slug.clone(),
        draft: None,
        tools: b.tools.clone(),
        allowed_origins: b.allowed_origins.clone(),
    };
    apply_fields(&mut g, &u, true)?;
    Ok(g)
}

/// Applies the plain fields of an update (everything but `settings`, `branding` and
/// `group_id`, which the caller handles). `create` names the fields in camelCase.
pub fn apply_fields(g: &mut GenieRow, u: &UpdateGenie, create: bool) -> ApiResult<()> {
    let f = |camel: &str, snake: &str| format!("data.{}", if create { camel } else { snake });
    if let Some(n) = &u.name {
        g.name = check_name("data.name", n)?;
    }
    if let Some(v) = &u.description {
        g.description = v.clone();
    }
    if let Some(v) = &u.use_case {
        g.use_case = v.clone();
    }
    if let Some(v) = &u.category {
        g.category = v.clone();
    }
    if let Some(v) = &u.brand {
        g.brand = v.clone();
    }
    if let Some(v) = &u.system_prompt {
        g.system_prompt = v.clone();
    }
    if let Some(v) = &u.first_message {
        g.first_message = v.clone();
    }
    if let Some(v) = &u.web_welcome_message {
        g.web_welcome_message = v.clone();
    }
    if let Some(v) = &u.voice_id {
        g.voice_id = Some(non_empty(&f("voiceId", "voice_id"), v)?);
    }
    if let Some(v) = &u.llm_model {
        g.llm_model = non_empty(&f("llmModel", "llm_model"), v)?;
    }
    if let Some(v) = u.temperature {
        g.temperature = v
            .map(|t| range("data.temperature", t, 0.0, 2.0))
            .transpose()?;
    }
    if let Some(v) = u.max_tokens {
        g.max_tokens = v
            .map(|t| positive_i(&f("maxTokens", "max_tokens"), t))
            .transpose()?;
    }
    if let Some(v) = &u.support_emails {
        g.support_emails = emails(&f("supportEmails", "support_emails"), v)?;
    }
    if let Some(v) = u.send_conversation_reports {
        g.send_conversation_reports = v;
    }
    if let Some(v) = u.is_active {
        g.is_active = v;
    }
    if let Some(v) = u.setup_completed {
        g.setup_completed = v;
    }
    if let Some(v) = u.voice_disabled {
        g.voice_disabled = v;
    }
    if let Some(v) = u.multilingual {
        g.multilingual = v;
    }
    if let Some(v) = u.voice_stability {
        set_path(
            &mut g.settings,
            &P_STAB,
            json!(range("data.voiceStability", v, 0.0, 1.0)?),
        );
    }
    if let Some(v) = u.voice_similarity {
        set_path(
            &mut g.settings,
            &P_SIM,
            json!(range("data.voiceSimilarity", v, 0.0, 1.0)?),
        );
    }
    if let Some(v) = u.voice_speed {
        set_path(
            &mut g.settings,
            &P_SPEED,
            json!(range("data.voiceSpeed", v, 0.5, 2.0)?),
        );
    }
    if let Some(v) = &u.language {
        set_path(
            &mut g.settings,
            &P_LANG,
            json!(non_empty("data.language", v)?),
        );
    }
    if let Some(v) = u.max_duration_seconds {
        g.max_duration_seconds = v
            .map(|t| positive_i("data.maxDurationSeconds", t))
            .transpose()?;
    }
    if let Some(v) = u.turn_timeout_seconds {
        g.turn_timeout_seconds = v
            .map(|t| positive_f("data.turnTimeoutSeconds", t))
            .transpose()?;
    }
    if let Some(v) = u.silence_end_seconds {
        g.silence_end_seconds = v
            .map(|t| positive_f("data.silenceEndSeconds", t))
            .transpose()?;
    }
    if let Some(v) = &u.turn_mode {
        g.turn_mode = turn_mode("data.turnMode", v)?;
    }
    if let Some(v) = u.max_calls {
        g.max_calls = v.map(|t| positive_i("data.maxCalls", t)).transpose()?;
    }
    if let Some(v) = u.max_calls_per_minute {
        g.max_calls_per_minute = v
            .map(|t| match t {
                1..=600 => Ok(t),
                _ => Err(ApiError::validation(
                    "data.maxCallsPerMinute must be an integer from 1 to 600",
                )),
            })
            .transpose()?;
    }
    if let Some(v) = &u.page_slug {
        g.page_slug = Some(check_slug("data.pageSlug", v)?);
    }
    if let Some(v) = &u.tools {
        g.tools = crate::service::genie_tools::validate("data.tools", &Value::Array(v.clone()))?;
    }
    if let Some(v) = &u.allowed_origins {
        g.allowed_origins = origins(&f("allowedOrigins", "allowed_origins"), v)?;
    }
    Ok(())
}

/// Web origins (`scheme://host[:port]`, nothing after) allowed to embed the chat widget.
pub fn origins(field: &str, list: &[String]) -> ApiResult<Value> {
    if list.len() > 50 {
        return Err(ApiError::validation(format!(
            "{field} may hold at most 50 origins"
        )));
    }
    let mut out: Vec<Value> = Vec::new();
    for (i, o) in list.iter().enumerate() {
        let o = o.trim().trim_end_matches('/');
        let parsed = url::Url::parse(o).ok().filter(|u| {
            matches!(u.scheme(), "http" | "https")
                && u.host_str().is_some()
                && u.username().is_empty()
                && u.path() == "/"
                && u.query().is_none()
                && u.fragment().is_none()
        });
        let Some(u) = parsed else {
            return Err(ApiError::validation(format!(
                "{field}[{i}] must be an origin such as https://www.example.com (scheme, host and port only)"
            )));
        };
        let origin = u.origin().ascii_serialization();
        if !out.iter().any(|v| v == &Value::from(origin.as_str())) {
            out.push(Value::from(origin));
        }
    }
    Ok(Value::Array(out))
}

/// Applies an update's `settings` and `branding` (both deep-merged), then its plain fields,
/// which win over the same values given inside `settings`.
pub fn apply_update(g: &mut GenieRow, u: &UpdateGenie) -> ApiResult<()> {
    if let Some(s) = &u.settings {
        apply_settings(g, s)?;
    }
    if let Some(b) = &u.branding {
        object("data.branding", b)?;
        if !g.branding.is_object() {
            g.branding = json!({});
        }
        deep_merge(&mut g.branding, b);
    }
    apply_fields(g, u, false)
}

/// `promptReplacements` applied to the system prompt and the first message.
pub fn replace_all(text: &Option<String>, reps: &[Replacement]) -> Option<String> {
    text.as_ref().map(|t| {
        reps.iter()
            .fold(t.clone(), |acc, r| acc.replace(&r.from, &r.to))
    })
}

pub fn check_replacements(reps: &[Replacement]) -> ApiResult<()> {
    for (i, r) in reps.iter().enumerate() {
        if r.from.is_empty() {
            return Err(ApiError::validation(format!(
                "data.promptReplacements[{i}].from must not be empty"
            )));
        }
    }
    Ok(())
}
