//! The Retell AI adapter: a genie is a Retell **agent** whose response engine is a **Retell
//! LLM** (prompt, first message, model, knowledge bases) that genied creates beside it and
//! removes with it; each genie document is a Retell **knowledge base** holding its text; its
//! phone numbers are Retell numbers bound to the agent in both directions.
//!
//! An agent is two objects at Retell, so creating one is two calls: when the second fails
//! the first is deleted again, and the genie is left with no half-made agent.
//! With `--retell-webhook-secret` and a public URL, the agent's `webhook_url` points at
//! `POST /v1/hooks/retell`.

use std::time::Duration;

use async_trait::async_trait;
use reqwest::Method;
use serde_json::{Map, Value, json};

use super::http::{BearerClient, Body, is_gone, seg};
use super::*;
use crate::config::Secret;

pub struct Retell {
    api: BearerClient,
    webhook_url: Option<String>,
}

impl Retell {
    pub fn new(
        base_url: &str,
        key: Secret,
        webhook_url: Option<String>,
        retry_base: Duration,
    ) -> anyhow::Result<Retell> {
        Ok(Retell {
            api: BearerClient::new("Retell", "--retell-base-url", base_url, key, retry_base)?,
            webhook_url,
        })
    }

    async fn agent_json(&self, id: &str) -> ProviderResult<Value> {
        self.api
            .call(
                Method::GET,
                &format!("/get-agent/{}", seg(id)),
                &[],
                Body::None,
            )
            .await
    }

    async fn llm_of(&self, agent_id: &str) -> ProviderResult<String> {
        let a = self.agent_json(agent_id).await?;
        a["response_engine"]["llm_id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| {
                ProviderError::new(format!(
                    "Retell agent {agent_id} has no Retell LLM response engine (edited outside genied?)"
                ))
            })
    }

    async fn delete_llm(&self, llm_id: &str) -> ProviderResult<()> {
        self.api
            .delete(&format!("/delete-retell-llm/{}", seg(llm_id)))
            .await
    }
}

fn put(m: &mut Map<String, Value>, k: &str, v: Option<Value>) {
    if let Some(v) = v {
        m.insert(k.to_string(), v);
    }
}

/// Retell offers a fixed list of models; genied's model name becomes the nearest of them.
pub fn retell_model(model: &str) -> String {
    let m = model.to_ascii_lowercase();
    if m.starts_with("gpt-") {
        m
    } else if m.starts_with("claude") {
        "claude-4.5-sonnet".into()
    } else if m.starts_with("gemini") {
        "gemini-3.0-flash".into()
    } else {
        "gpt-4.1".into()
    }
}

/// Retell names voices `<provider>-<Name>`; an ElevenLabs id from genied's catalog becomes
/// Retell's ElevenLabs voice of the same name.
pub fn retell_voice(voice_id: Option<&str>) -> String {
    const PREFIXES: [&str; 7] = [
        "11labs-",
        "openai-",
        "deepgram-",
        "cartesia-",
        "minimax-",
        "retell-",
        "custom_voice_",
    ];
    let id = voice_id.unwrap_or(DEFAULT_VOICE_ID);
    if PREFIXES.iter().any(|p| id.starts_with(p)) {
        return id.to_string();
    }
    let name = catalog()
        .into_iter()
        .find(|v| v.voice_id == id)
        .map(|v| v.name)
        .unwrap_or_else(|| "Rachel".into());
    format!("11labs-{name}")
}

/// The Retell LLM's fields.
pub fn llm_body(spec: &AgentSpec) -> Value {
    let mut b = Map::new();
    put(
        &mut b,
        "general_prompt",
        spec.system_prompt.clone().map(Value::from),
    );
    match &spec.first_message {
        Some(m) => {
            b.insert("start_speaker".into(), json!("agent"));
            b.insert("begin_message".into(), json!(m));
        }
        None => {
            b.insert("start_speaker".into(), json!("user"));
        }
    }
    b.insert("model".into(), json!(retell_model(&spec.llm_model)));
    // Retell's range is 0–1 where genied allows 0–2.
    put(
        &mut b,
        "model_temperature",
        spec.temperature.map(|t| json!(t.clamp(0.0, 1.0))),
    );
    b.insert(
        "knowledge_base_ids".into(),
        json!(
            spec.knowledge_base
                .iter()
                .map(|d| d.id.clone())
                .collect::<Vec<_>>()
        ),
    );
    b.insert("general_tools".into(), Value::Array(general_tools(spec)));
    Value::Object(b)
}

/// The genie's tools as the Retell LLM's `general_tools`: a webhook tool becomes a
/// `custom` tool with its arguments at the root of the body (as genied sends them);
/// `end_conversation` the `end_call` tool. A webhook tool that needs a stored credential is
/// left out (genied never hands a credential to a platform). `search_knowledge_base` is
/// Retell's own retrieval over `knowledge_base_ids`; `capture_lead` and `transfer_to_human`
/// have no tool there (a transfer needs a destination number genied does not hold): genied's
/// analysis of the transcript captures leads.
pub fn general_tools(spec: &AgentSpec) -> Vec<Value> {
    let mut out = Vec::new();
    for t in &spec.tools {
        match t {
            AgentTool::Webhook {
                name,
                description,
                parameters,
                url,
                method,
                timeout_seconds,
                needs_credential: false,
            } => out.push(json!({
                "type": "custom",
                "name": name,
                "description": description,
                "url": url,
                "method": method,
                "parameters": object_schema(parameters),
                "args_at_root": true,
                "speak_during_execution": false,
                "speak_after_execution": true,
                "timeout_ms": (timeout_seconds * 1000).clamp(1_000, 600_000),
            })),
            AgentTool::Builtin { name } if name == "end_conversation" => out.push(json!({
                "type": "end_call",
                "name": "end_call",
                "description": "End the call once the caller is done (after saying goodbye).",
            })),
            _ => {}
        }
    }
    out
}

fn text(v: &Value) -> Option<String> {
    v.as_str().map(str::to_string)
}

/// An agent and its Retell LLM (as Retell answers them, or the bodies genied sends) in
/// genied's terms.
pub fn spec_of(agent: &Value, llm: &Value) -> AgentSpec {
    let mut tools = Vec::new();
    for t in llm["general_tools"].as_array().into_iter().flatten() {
        match t["type"].as_str() {
            Some("custom") => tools.push(AgentTool::Webhook {
                name: t["name"].as_str().unwrap_or_default().to_string(),
                description: t["description"].as_str().unwrap_or_default().to_string(),
                parameters: object_schema(&t["parameters"]),
                url: t["url"].as_str().unwrap_or_default().to_string(),
                method: t["method"].as_str().unwrap_or("POST").to_string(),
                timeout_seconds: t["timeout_ms"].as_u64().map(|ms| ms / 1000).unwrap_or(120),
                needs_credential: false,
            }),
            Some("end_call") => tools.push(AgentTool::Builtin {
                name: "end_conversation".into(),
            }),
            _ => {}
        }
    }
    // Back from Retell's `11labs-Name` to the catalog's ElevenLabs id where there is one.
    let voice = agent["voice_id"].as_str().map(|v| {
        v.strip_prefix("11labs-")
            .and_then(|n| catalog().into_iter().find(|c| c.name == n))
            .map(|c| c.voice_id)
            .unwrap_or_else(|| v.to_string())
    });
    let lang = agent["language"].as_str();
    let ms = |k: &str| agent[k].as_f64().map(|ms| ms / 1000.0);
    AgentSpec {
        name: agent["agent_name"].as_str().unwrap_or_default().to_string(),
        system_prompt: text(&llm["general_prompt"]),
        first_message: if llm["start_speaker"] == json!("user") {
            None
        } else {
            text(&llm["begin_message"])
        },
        language: lang.filter(|l| *l != "multi").map(str::to_string),
        multilingual: lang == Some("multi"),
        voice_id: voice,
        llm_model: llm["model"].as_str().unwrap_or_default().to_string(),
        temperature: llm["model_temperature"].as_f64(),
        max_tokens: None,
        stability: None,
        similarity_boost: None,
        speed: agent["voice_speed"].as_f64(),
        max_duration_seconds: ms("max_call_duration_ms").map(|s| s as i64),
        turn_timeout_seconds: ms("reminder_trigger_ms"),
        silence_end_seconds: ms("end_call_after_silence_ms"),
        turn_mode: None,
        knowledge_base: llm["knowledge_base_ids"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|id| {
                Some(KbDocRef {
                    id: id.as_str()?.to_string(),
                    name: String::new(),
                    doc_type: "text".into(),
                })
            })
            .collect(),
        tools,
    }
}

/// The agent's fields, without its response engine.
pub fn agent_fields(spec: &AgentSpec, webhook_url: Option<&str>) -> Map<String, Value> {
    let mut b = Map::new();
    b.insert(
        "agent_name".into(),
        json!(spec.name.chars().take(60).collect::<String>()),
    );
    b.insert(
        "voice_id".into(),
        json!(retell_voice(spec.voice_id.as_deref())),
    );
    put(
        &mut b,
        "voice_speed",
        spec.speed.map(|s| json!(s.clamp(0.5, 2.0))),
    );
    let lang = if spec.multilingual {
        Some("multi".to_string())
    } else {
        spec.language.clone().map(|l| locale(&l))
    };
    put(&mut b, "language", lang.map(Value::from));
    put(
        &mut b,
        "max_call_duration_ms",
        spec.max_duration_seconds
            .map(|s| json!((s * 1000).clamp(60_000, 7_200_000))),
    );
    put(
        &mut b,
        "end_call_after_silence_ms",
        spec.silence_end_seconds
            .map(|s| json!(((s * 1000.0) as i64).max(10_000))),
    );
    put(
        &mut b,
        "reminder_trigger_ms",
        spec.turn_timeout_seconds
            .map(|s| json!((s * 1000.0) as i64)),
    );
    if let Some(u) = webhook_url {
        b.insert("webhook_url".into(), json!(u));
    }
    b
}

/// Retell wants a locale (`en-US`); genied stores a language (`en`).
fn locale(lang: &str) -> String {
    if lang.contains('-') {
        return lang.to_string();
    }
    match lang {
        "en" => "en-US",
        "de" => "de-DE",
        "es" => "es-ES",
        "fr" => "fr-FR",
        "it" => "it-IT",
        "pt" => "pt-BR",
        "nl" => "nl-NL",
        "ja" => "ja-JP",
        "zh" => "zh-CN",
        "hi" => "hi-IN",
        "pl" => "pl-PL",
        "ko" => "ko-KR",
        "ru" => "ru-RU",
        "tr" => "tr-TR",
        other => return other.to_string(),
    }
    .to_string()
}

/// Retell's call status in genied's words.
pub fn conversation_status(call: &Value) -> &'static str {
    match call["call_status"].as_str().unwrap_or("ended") {
        "registered" => "initiated",
        "ongoing" => "in-progress",
        "not_connected" | "error" => "failed",
        _ => "done",
    }
}

/// A Retell call object as genied's conversation.
pub fn conversation_detail(call: &Value) -> ConversationDetail {
    let start_ms = call["start_timestamp"].as_i64();
    let transcript = call["transcript_object"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|t| {
            let role = match t["role"].as_str()? {
                "agent" => "agent",
                "user" => "user",
                _ => return None,
            };
            Some(Turn {
                role: role.into(),
                message: t["content"].as_str()?.to_string(),
                time_in_call_secs: t["words"][0]["start"].as_f64().unwrap_or(0.0),
            })
        })
        .collect();
    ConversationDetail {
        conversation_id: call["call_id"].as_str().unwrap_or("").to_string(),
        agent_id: call["agent_id"].as_str().unwrap_or("").to_string(),
        status: conversation_status(call).to_string(),
        start_time_unix_secs: start_ms.map(|ms| ms / 1000).unwrap_or(0),
        call_duration_secs: call["duration_ms"]
            .as_i64()
            .or_else(|| Some(call["end_timestamp"].as_i64()? - start_ms?))
            .map(|ms| ms / 1000)
            .unwrap_or(0),
        transcript,
        summary: call["call_analysis"]["call_summary"]
            .as_str()
            .map(str::to_string),
        metadata: json!({
            "disconnection_reason": call["disconnection_reason"],
            "call_analysis": call["call_analysis"],
            "call_type": call["call_type"],
            "direction": call["direction"],
            "from_number": call["from_number"],
            "to_number": call["to_number"],
            "metadata": call["metadata"],
        }),
    }
}

#[async_trait]
impl VoiceProvider for Retell {
    fn name(&self) -> &'static str {
        "retell"
    }

    async fn create_agent(&self, spec: &AgentSpec) -> ProviderResult<String> {
        let llm = self
            .api
            .call(
                Method::POST,
                "/create-retell-llm",
                &[],
                Body::Json(llm_body(spec)),
            )
            .await?;
        let llm_id = llm["llm_id"]
            .as_str()
            .ok_or_else(|| ProviderError::new("Retell did not return an llm_id"))?
            .to_string();
        let mut body = agent_fields(spec, self.webhook_url.as_deref());
        body.insert(
            "response_engine".into(),
            json!({"type": "retell-llm", "llm_id": llm_id}),
        );
        let agent = self
            .api
            .call(
                Method::POST,
                "/create-agent",
                &[],
                Body::Json(Value::Object(body)),
            )
            .await;
        match agent.map(|a| a["agent_id"].as_str().map(str::to_string)) {
            Ok(Some(id)) => Ok(id),
            other => {
                if let Err(e) = self.delete_llm(&llm_id).await {
                    tracing::warn!(error = %e, "removing the Retell LLM of a failed agent failed");
                }
                match other {
                    Err(e) => Err(e),
                    _ => Err(ProviderError::new("Retell did not return an agent_id")),
                }
            }
        }
    }

    async fn update_agent(&self, agent_id: &str, spec: &AgentSpec) -> ProviderResult<()> {
        let llm_id = self.llm_of(agent_id).await?;
        self.api
            .call(
                Method::PATCH,
                &format!("/update-retell-llm/{}", seg(&llm_id)),
                &[],
                Body::Json(llm_body(spec)),
            )
            .await?;
        self.api
            .call(
                Method::PATCH,
                &format!("/update-agent/{}", seg(agent_id)),
                &[],
                Body::Json(Value::Object(agent_fields(
                    spec,
                    self.webhook_url.as_deref(),
                ))),
            )
            .await?;
        Ok(())
    }

    async fn delete_agent(&self, agent_id: &str) -> ProviderResult<()> {
        let llm = match self.agent_json(agent_id).await {
            Ok(a) => a["response_engine"]["llm_id"].as_str().map(str::to_string),
            Err(e) if is_gone(&e) => return Ok(()),
            Err(e) => return Err(e),
        };
        self.api
            .delete(&format!("/delete-agent/{}", seg(agent_id)))
            .await?;
        if let Some(l) = llm {
            self.delete_llm(&l).await?;
        }
        Ok(())
    }

    async fn set_agent_documents(&self, agent_id: &str, docs: &[KbDocRef]) -> ProviderResult<()> {
        let llm_id = self.llm_of(agent_id).await?;
        let ids: Vec<&str> = docs.iter().map(|d| d.id.as_str()).collect();
        self.api
            .call(
                Method::PATCH,
                &format!("/update-retell-llm/{}", seg(&llm_id)),
                &[],
                Body::Json(json!({"knowledge_base_ids": ids})),
            )
            .await?;
        Ok(())
    }

    async fn create_document(&self, name: &str, text: &str) -> ProviderResult<String> {
        // Retell limits knowledge-base names to under 40 characters.
        let kb_name: String = name.chars().take(39).collect();
        let texts = json!([{"title": name, "text": text}]).to_string();
        let form = move || {
            reqwest::multipart::Form::new()
                .text("knowledge_base_name", kb_name.clone())
                .text("knowledge_base_texts", texts.clone())
        };
        let v = self
            .api
            .call(
                Method::POST,
                "/create-knowledge-base",
                &[],
                Body::Form(Box::new(form)),
            )
            .await?;
        v["knowledge_base_id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| ProviderError::new("Retell did not return a knowledge_base_id"))
    }

    async fn delete_document(&self, doc_id: &str) -> ProviderResult<()> {
        self.api
            .delete(&format!("/delete-knowledge-base/{}", seg(doc_id)))
            .await
    }

    /// Buys a number from Retell and binds it to the agent for inbound and outbound calls.
    async fn provision_number(
        &self,
        agent_id: &str,
        label: &str,
    ) -> ProviderResult<ProvisionedNumber> {
        let binding = json!([{"agent_id": agent_id, "weight": 1}]);
        let v = self
            .api
            .call(
                Method::POST,
                "/create-phone-number",
                &[],
                Body::Json(json!({
                    "nickname": label,
                    "inbound_agents": binding,
                    "outbound_agents": binding,
                })),
            )
            .await?;
        let number = v["phone_number"]
            .as_str()
            .ok_or_else(|| ProviderError::new("Retell did not return the number it bought"))?;
        Ok(ProvisionedNumber {
            number: number.to_string(),
            external_id: number.to_string(),
        })
    }

    async fn release_number(&self, external_id: &str) -> ProviderResult<()> {
        self.api
            .delete(&format!("/delete-phone-number/{}", seg(external_id)))
            .await
    }

    fn supports_calls(&self) -> bool {
        true
    }

    fn number_import_kinds(&self) -> &'static [&'static str] {
        // Retell imports numbers over SIP; a Twilio number comes in through its Elastic SIP
        // trunk (a termination URI ending in .pstn.twilio.com).
        &["sip"]
    }

    async fn import_number(
        &self,
        agent_id: &str,
        label: &str,
        number: &ImportedNumber,
    ) -> ProviderResult<ProvisionedNumber> {
        let NumberSource::Sip {
            termination_uri,
            username,
            password,
        } = &number.source
        else {
            return Err(ProviderError::new(
                "Retell imports numbers over a SIP trunk (Twilio: its Elastic SIP trunk's termination URI)",
            ));
        };
        let binding = json!([{"agent_id": agent_id, "weight": 1}]);
        let mut body = json!({
            "phone_number": number.number,
            "termination_uri": termination_uri,
            "nickname": label,
            "inbound_agents": binding,
            "outbound_agents": binding,
        });
        if let Some(u) = username {
            body["sip_trunk_auth_username"] = json!(u);
        }
        if let Some(p) = password {
            body["sip_trunk_auth_password"] = json!(p.0);
        }
        let v = self
            .api
            .call(Method::POST, "/import-phone-number", &[], Body::Json(body))
            .await?;
        let got = v["phone_number"]
            .as_str()
            .ok_or_else(|| ProviderError::new("Retell did not return the number it imported"))?;
        Ok(ProvisionedNumber {
            number: got.to_string(),
            external_id: got.to_string(),
        })
    }

    async fn start_call(&self, call: &OutboundCall) -> ProviderResult<String> {
        let v = self
            .api
            .call(
                Method::POST,
                "/v2/create-phone-call",
                &[],
                Body::Json(json!({
                    "from_number": call.from_number,
                    "to_number": call.to,
                    "override_agent_id": call.agent_id,
                    "retell_llm_dynamic_variables": call.variables,
                    "metadata": call.metadata,
                })),
            )
            .await?;
        v["call_id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| ProviderError::new("Retell did not return a call_id"))
    }

    async fn get_agent(&self, agent_id: &str) -> ProviderResult<AgentSpec> {
        let agent = self.agent_json(agent_id).await?;
        let llm = match agent["response_engine"]["llm_id"].as_str() {
            Some(l) => {
                self.api
                    .call(
                        Method::GET,
                        &format!("/get-retell-llm/{}", seg(l)),
                        &[],
                        Body::None,
                    )
                    .await?
            }
            None => Value::Null,
        };
        Ok(spec_of(&agent, &llm))
    }

    fn as_held(&self, spec: &AgentSpec) -> AgentSpec {
        spec_of(&Value::Object(agent_fields(spec, None)), &llm_body(spec))
    }

    async fn list_voices(&self) -> ProviderResult<Vec<Voice>> {
        let v = self
            .api
            .call(Method::GET, "/list-voices", &[], Body::None)
            .await?;
        Ok(v.as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .filter_map(|item| {
                let id = item["voice_id"].as_str()?;
                Some(Voice {
                    voice_id: id.to_string(),
                    name: item["voice_name"].as_str().unwrap_or(id).to_string(),
                    category: item["provider"].as_str().map(str::to_string),
                    labels: json!({
                        "gender": item["gender"],
                        "accent": item["accent"],
                        "age": item["age"],
                        "provider": item["provider"],
                    }),
                    description: None,
                    preview_url: item["preview_audio_url"].as_str().map(str::to_string),
                })
            })
            .collect())
    }

    async fn list_conversations(
        &self,
        agent_id: &str,
        cursor: Option<&str>,
    ) -> ProviderResult<ConversationPage> {
        let mut body = json!({
            "filter_criteria": {"agent": [{"agent_id": agent_id}]},
            "limit": 100,
            "sort_order": "descending",
        });
        if let Some(c) = cursor {
            body["pagination_key"] = json!(c);
        }
        let v = self.api.read_post("/v3/list-calls", body).await?;
        let conversations = v["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .filter_map(|c| {
                let d = conversation_detail(c);
                (!d.conversation_id.is_empty()).then(|| ConversationSummary {
                    conversation_id: d.conversation_id,
                    agent_id: agent_id.to_string(),
                    start_time_unix_secs: d.start_time_unix_secs,
                    call_duration_secs: d.call_duration_secs,
                    status: d.status,
                })
            })
            .collect();
        let next_cursor = if v["has_more"] == json!(true) {
            v["pagination_key"].as_str().map(str::to_string)
        } else {
            None
        };
        Ok(ConversationPage {
            conversations,
            next_cursor,
        })
    }

    async fn get_conversation(&self, conversation_id: &str) -> ProviderResult<ConversationDetail> {
        let v = self
            .api
            .call(
                Method::GET,
                &format!("/v2/get-call/{}", seg(conversation_id)),
                &[],
                Body::None,
            )
            .await?;
        Ok(conversation_detail(&v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn voices_and_models_map_to_retells_names() {
        assert_eq!(retell_voice(None), "11labs-Rachel");
        assert_eq!(retell_voice(Some("pNInz6obpgDQGcFmaJgB")), "11labs-Adam");
        assert_eq!(retell_voice(Some("retell-Cimo")), "retell-Cimo");
        assert_eq!(retell_model("gemini-3-flash-preview"), "gemini-3.0-flash");
        assert_eq!(retell_model("gpt-4.1-mini"), "gpt-4.1-mini");
        assert_eq!(locale("de"), "de-DE");
    }

    #[test]
    fn calls_become_conversations() {
        let call = json!({"call_id": "call_1", "agent_id": "agent_1", "call_status": "ended",
            "start_timestamp": 1_700_000_000_000i64, "end_timestamp": 1_700_000_042_000i64,
            "transcript_object": [
                {"role": "agent", "content": "Hi", "words": [{"word": "Hi", "start": 0.2, "end": 0.4}]},
                {"role": "transfer_target", "content": "x", "words": []},
                {"role": "user", "content": "Hello", "words": [{"word": "Hello", "start": 1.5, "end": 1.9}]}],
            "call_analysis": {"call_summary": "Greetings."}});
        let d = conversation_detail(&call);
        assert_eq!(d.status, "done");
        assert_eq!(d.start_time_unix_secs, 1_700_000_000);
        assert_eq!(d.call_duration_secs, 42);
        assert_eq!(d.transcript.len(), 2);
        assert_eq!(d.transcript[1].time_in_call_secs, 1.5);
        assert_eq!(d.summary.as_deref(), Some("Greetings."));
    }
}
