//! The Vapi adapter: a genie is a Vapi **assistant**; its documents are Vapi **files** joined
//! in one **query tool** (Vapi's documented way to give an assistant a knowledge base) whose
//! id sits in `model.toolIds` and in the assistant's `metadata.geniedKbToolId`; its phone
//! numbers are Vapi numbers; its calls are Vapi calls. Vapi replaces a nested object such as
//! `model` whole on PATCH, so every update resends the whole model, tool ids included.
//!
//! When `--vapi-webhook-secret` and a public URL are set, each assistant's `server` points at
//! `POST /v1/hooks/vapi` with the secret as a fixed `X-Vapi-Secret` header.

use std::time::Duration;

use async_trait::async_trait;
use reqwest::Method;
use serde_json::{Map, Value, json};

use super::http::{BearerClient, Body, is_gone, seg};
use super::*;
use crate::config::Secret;

/// Where Vapi sends an assistant's events, and the secret it echoes.
#[derive(Clone)]
pub struct ServerUrl {
    pub url: String,
    pub secret: Secret,
}

pub struct Vapi {
    api: BearerClient,
    server: Option<ServerUrl>,
}

/// The metadata key holding the id of the assistant's knowledge (query) tool.
const KB_TOOL_KEY: &str = "geniedKbToolId";

impl Vapi {
    pub fn new(
        base_url: &str,
        key: Secret,
        server: Option<ServerUrl>,
        retry_base: Duration,
    ) -> anyhow::Result<Vapi> {
        Ok(Vapi {
            api: BearerClient::new("Vapi", "--vapi-base-url", base_url, key, retry_base)?,
            server,
        })
    }

    /// A number on the team's SIP trunk: a `byo-sip-trunk` credential naming the trunk (its
    /// address as the gateway, its digest credentials for outbound calls), then a
    /// `byo-phone-number` on that credential, attached to the assistant. When the number
    /// cannot be made, the credential is deleted again.
    async fn import_sip(
        &self,
        agent_id: &str,
        label: &str,
        number: &str,
        termination_uri: &str,
        username: Option<&str>,
        password: Option<&str>,
    ) -> ProviderResult<ProvisionedNumber> {
        let (host, port) = sip_gateway(termination_uri);
        let mut gateway = json!({"ip": host, "inboundEnabled": true, "outboundEnabled": true});
        if let Some(p) = port {
            gateway["port"] = json!(p);
        }
        let mut cred = json!({
            "provider": "byo-sip-trunk",
            "name": truncate(label, 40),
            "gateways": [gateway],
        });
        if let Some(u) = username {
            let mut plan = json!({"authUsername": u});
            if let Some(p) = password {
                plan["authPassword"] = json!(p);
            }
            cred["outboundAuthenticationPlan"] = plan;
        }
        let c = self
            .api
            .call(Method::POST, "/credential", &[], Body::Json(cred))
            .await?;
        let cred_id = c["id"]
            .as_str()
            .ok_or_else(|| ProviderError::new("Vapi did not return a credential id"))?
            .to_string();
        let made = self
            .api
            .call(
                Method::POST,
                "/phone-number",
                &[],
                Body::Json(json!({
                    "provider": "byo-phone-number",
                    "number": number,
                    "credentialId": cred_id,
                    "numberE164CheckEnabled": true,
                    "assistantId": agent_id,
                    "name": truncate(label, 40),
                })),
            )
            .await;
        let v = match made {
            Ok(v) => v,
            Err(e) => {
                if let Err(d) = self
                    .api
                    .delete(&format!("/credential/{}", seg(&cred_id)))
                    .await
                {
                    tracing::warn!(error = %d, credential = %cred_id, "could not delete the SIP trunk credential of a number that was not made");
                }
                return Err(e);
            }
        };
        let id = v["id"]
            .as_str()
            .ok_or_else(|| ProviderError::new("Vapi did not return a phone number id"))?;
        Ok(ProvisionedNumber {
            number: number.to_string(),
            external_id: id.to_string(),
        })
    }

    async fn get_assistant(&self, id: &str) -> ProviderResult<Value> {
        self.api
            .call(
                Method::GET,
                &format!("/assistant/{}", seg(id)),
                &[],
                Body::None,
            )
            .await
    }

    /// Makes the assistant's query tool list exactly `docs`: creates, updates or deletes it.
    /// Returns the tool id to attach, if any.
    async fn sync_kb_tool(
        &self,
        existing: Option<&str>,
        docs: &[KbDocRef],
    ) -> ProviderResult<Option<String>> {
        if docs.is_empty() {
            if let Some(id) = existing {
                self.delete_tool(id).await?;
            }
            return Ok(None);
        }
        let kb = json!([{
            "provider": "google",
            "name": "genied-knowledge",
            "description": format!(
                "Documents of this assistant: {}",
                docs.iter().map(|d| d.name.as_str()).collect::<Vec<_>>().join(", ")
            ),
            "fileIds": docs.iter().map(|d| d.id.clone()).collect::<Vec<_>>(),
        }]);
        if let Some(id) = existing {
            match self
                .api
                .call(
                    Method::PATCH,
                    &format!("/tool/{}", seg(id)),
                    &[],
                    Body::Json(json!({"knowledgeBases": kb})),
                )
                .await
            {
                Ok(_) => return Ok(Some(id.to_string())),
                // Deleted in the dashboard: make a new one below.
                Err(e) if is_gone(&e) => {}
                Err(e) => return Err(e),
            }
        }
        let v = self
            .api
            .call(
                Method::POST,
                "/tool",
                &[],
                Body::Json(json!({"type": "query", "knowledgeBases": kb})),
            )
            .await?;
        v["id"]
            .as_str()
            .map(|s| Some(s.to_string()))
            .ok_or_else(|| ProviderError::new("Vapi did not return a tool id"))
    }

    async fn delete_tool(&self, id: &str) -> ProviderResult<()> {
        self.api.delete(&format!("/tool/{}", seg(id))).await
    }

    fn assistant_body(&self, spec: &AgentSpec, kb_tool: Option<&str>) -> Value {
        assistant_body(spec, kb_tool, self.server.as_ref())
    }
}

fn put(m: &mut Map<String, Value>, k: &str, v: Option<Value>) {
    if let Some(v) = v {
        m.insert(k.to_string(), v);
    }
}

/// Vapi wants the model's vendor beside the model name; genied names only the model.
pub fn llm_provider(model: &str) -> &'static str {
    let m = model.to_ascii_lowercase();
    if m.starts_with("claude") {
        "anthropic"
    } else if m.starts_with("gemini") {
        "google"
    } else if m.starts_with("grok") {
        "xai"
    } else if m.starts_with("deepseek") {
        "deep-seek"
    } else if m.starts_with("llama") || m.starts_with("mixtral") {
        "groq"
    } else {
        "openai"
    }
}

/// The assistant as genied sets it; fields genied has no value for are left out so Vapi
/// keeps its defaults.
pub fn assistant_body(
    spec: &AgentSpec,
    kb_tool: Option<&str>,
    server: Option<&ServerUrl>,
) -> Value {
    let mut model = Map::new();
    model.insert("provider".into(), json!(llm_provider(&spec.llm_model)));
    model.insert("model".into(), json!(spec.llm_model));
    put(&mut model, "temperature", spec.temperature.map(Value::from));
    put(
        &mut model,
        "maxTokens",
        spec.max_tokens.map(|t| json!(t.clamp(50, 10_000))),
    );
    if let Some(p) = &spec.system_prompt {
        model.insert("messages".into(), json!([{"role": "system", "content": p}]));
    }
    // The knowledge tool is a saved tool (its files change apart from the assistant); the
    // genie's own tools go inline in `model.tools`, so they come and go with the assistant.
    let tool_ids: Vec<&str> = kb_tool.into_iter().collect();
    model.insert("toolIds".into(), json!(tool_ids));
    let tools = inline_tools(spec);
    if !tools.is_empty() {
        model.insert("tools".into(), Value::Array(tools));
    }

    let mut voice = Map::new();
    voice.insert("provider".into(), json!("11labs"));
    voice.insert(
        "voiceId".into(),
        json!(
            spec.voice_id
                .clone()
                .unwrap_or_else(|| DEFAULT_VOICE_ID.into())
        ),
    );
    put(&mut voice, "stability", spec.stability.map(Value::from));
    put(
        &mut voice,
        "similarityBoost",
        spec.similarity_boost.map(Value::from),
    );
    put(
        &mut voice,
        "speed",
        spec.speed.map(|s| json!(s.clamp(0.7, 1.2))),
    );
    if spec.multilingual {
        voice.insert("model".into(), json!("eleven_turbo_v2_5"));
        put(
            &mut voice,
            "language",
            spec.language.clone().map(Value::from),
        );
    }

    let mut transcriber = Map::new();
    transcriber.insert("provider".into(), json!("deepgram"));
    transcriber.insert("model".into(), json!("nova-3"));
    let lang = if spec.multilingual {
        Some("multi".to_string())
    } else {
        spec.language.clone()
    };
    put(&mut transcriber, "language", lang.map(Value::from));

    let mut body = Map::new();
    body.insert("name".into(), json!(truncate(&spec.name, 40)));
    put(
        &mut body,
        "firstMessage",
        spec.first_message.clone().map(Value::from),
    );
    if spec.first_message.is_none() {
        body.insert("firstMessageMode".into(), json!("assistant-waits-for-user"));
    }
    body.insert("model".into(), Value::Object(model));
    body.insert("voice".into(), Value::Object(voice));
    body.insert("transcriber".into(), Value::Object(transcriber));
    put(
        &mut body,
        "maxDurationSeconds",
        spec.max_duration_seconds
            .map(|s| json!(s.clamp(10, 43_200))),
    );
    put(
        &mut body,
        "silenceTimeoutSeconds",
        spec.silence_end_seconds
            .map(|s| json!(s.clamp(5.0, 3600.0))),
    );
    if let Some(t) = spec.turn_timeout_seconds {
        body.insert(
            "hooks".into(),
            json!([{
                "on": "customer.speech.timeout",
                "options": {"timeoutSeconds": t.clamp(1.0, 1000.0)},
                "do": [{"type": "say", "exact": "Are you still there?"}],
            }]),
        );
    }
    let collect = structured_data(spec);
    if !collect.is_empty() {
        body.insert(
            "analysisPlan".into(),
            json!({"structuredDataPlan": {"enabled": true, "schema": {"type": "object", "properties": collect}}}),
        );
    }
    let mut metadata = Map::new();
    metadata.insert("managedBy".into(), json!("genied"));
    put(&mut metadata, KB_TOOL_KEY, kb_tool.map(Value::from));
    body.insert("metadata".into(), Value::Object(metadata));
    if let Some(s) = server {
        body.insert(
            "server".into(),
            json!({"url": s.url, "headers": {"X-Vapi-Secret": s.secret.0}}),
        );
        body.insert(
            "serverMessages".into(),
            json!(["status-update", "end-of-call-report"]),
        );
    }
    Value::Object(body)
}

/// The genie's tools as Vapi inline tools: a webhook tool becomes an `apiRequest` tool
/// (Vapi calls the URL itself with the arguments as the JSON body, as genied does; a
/// `function` tool would send Vapi's own `tool-calls` envelope, which the tool's endpoint
/// does not speak); `end_conversation` the `endCall` tool. A webhook tool that needs a
/// stored credential is left out: genied never hands a credential to a platform.
/// `search_knowledge_base` is the knowledge (query) tool, attached whenever the genie has
/// documents; `capture_lead` and `transfer_to_human` are structured data (see
/// [`structured_data`]).
fn inline_tools(spec: &AgentSpec) -> Vec<Value> {
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
                "type": "apiRequest",
                "name": truncate(name, 40),
                "description": description,
                "method": method,
                "url": url,
                "body": object_schema(parameters),
                "timeoutSeconds": timeout_seconds,
            })),
            AgentTool::Builtin { name } if name == "end_conversation" => {
                out.push(json!({"type": "endCall"}))
            }
            _ => {}
        }
    }
    out
}

/// `capture_lead` and `transfer_to_human` as Vapi's structured data: extracted from each
/// call after it ends and sent with the end-of-call report.
fn structured_data(spec: &AgentSpec) -> Map<String, Value> {
    let mut items = Map::new();
    for t in &spec.tools {
        let AgentTool::Builtin { name } = t else {
            continue;
        };
        match name.as_str() {
            "capture_lead" => {
                for (k, d) in [
                    ("lead_name", "The caller's name, if they gave it"),
                    ("lead_email", "The caller's email address, if they gave it"),
                    ("lead_phone", "The caller's phone number, if they gave it"),
                ] {
                    items.insert(k.into(), json!({"type": "string", "description": d}));
                }
            }
            "transfer_to_human" => {
                items.insert(
                    "transfer_to_human".into(),
                    json!({"type": "boolean", "description": "Whether the caller asked to speak to a person"}),
                );
            }
            _ => {}
        }
    }
    items
}

fn text(v: &Value) -> Option<String> {
    v.as_str().map(str::to_string)
}

/// An assistant (as Vapi answers it, or the body genied sends) in genied's terms; the
/// knowledge tool's file ids are passed in, since they live on the tool.
pub fn spec_of(a: &Value, files: &[String]) -> AgentSpec {
    let m = &a["model"];
    let system = m["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|x| x["role"] == json!("system"))
        .and_then(|x| text(&x["content"]));
    let mut tools = Vec::new();
    for t in m["tools"].as_array().into_iter().flatten() {
        match t["type"].as_str() {
            Some("apiRequest") => tools.push(AgentTool::Webhook {
                name: t["name"].as_str().unwrap_or_default().to_string(),
                description: t["description"].as_str().unwrap_or_default().to_string(),
                parameters: object_schema(&t["body"]),
                url: t["url"].as_str().unwrap_or_default().to_string(),
                method: t["method"].as_str().unwrap_or("POST").to_string(),
                timeout_seconds: t["timeoutSeconds"].as_f64().map(|s| s as u64).unwrap_or(20),
                needs_credential: false,
            }),
            Some("endCall") => tools.push(AgentTool::Builtin {
                name: "end_conversation".into(),
            }),
            _ => {}
        }
    }
    let schema = &a["analysisPlan"]["structuredDataPlan"]["schema"]["properties"];
    for (key, tool) in [
        ("lead_name", "capture_lead"),
        ("transfer_to_human", "transfer_to_human"),
    ] {
        if schema.get(key).is_some() {
            tools.push(AgentTool::Builtin { name: tool.into() });
        }
    }
    let heard = a["transcriber"]["language"].as_str();
    let multilingual = heard == Some("multi");
    let turn_timeout = a["hooks"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|h| h["on"] == json!("customer.speech.timeout"))
        .and_then(|h| h["options"]["timeoutSeconds"].as_f64());
    AgentSpec {
        name: a["name"].as_str().unwrap_or_default().to_string(),
        system_prompt: system,
        first_message: text(&a["firstMessage"]),
        language: if multilingual {
            text(&a["voice"]["language"])
        } else {
            heard.map(str::to_string)
        },
        multilingual,
        voice_id: text(&a["voice"]["voiceId"]),
        llm_model: m["model"].as_str().unwrap_or_default().to_string(),
        temperature: m["temperature"].as_f64(),
        max_tokens: m["maxTokens"].as_i64(),
        stability: a["voice"]["stability"].as_f64(),
        similarity_boost: a["voice"]["similarityBoost"].as_f64(),
        speed: a["voice"]["speed"].as_f64(),
        max_duration_seconds: a["maxDurationSeconds"].as_f64().map(|s| s as i64),
        turn_timeout_seconds: turn_timeout,
        silence_end_seconds: a["silenceTimeoutSeconds"].as_f64(),
        turn_mode: None,
        knowledge_base: files
            .iter()
            .map(|f| KbDocRef {
                id: f.clone(),
                name: String::new(),
                doc_type: "file".into(),
            })
            .collect(),
        tools,
    }
}

/// A trunk's termination URI (`example.pstn.twilio.com`, `sip:1.2.3.4:5060;transport=tcp`) as
/// Vapi's gateway: the host (a name or an IP address) and the port when one is given.
fn sip_gateway(uri: &str) -> (String, Option<u16>) {
    let s = uri.trim();
    let s = s
        .strip_prefix("sips:")
        .or_else(|| s.strip_prefix("sip:"))
        .unwrap_or(s);
    let s = s.split(';').next().unwrap_or(s);
    let s = s.rsplit('@').next().unwrap_or(s);
    match s.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => match port.parse::<u16>() {
            Ok(p) => (host.to_string(), Some(p)),
            Err(_) => (s.to_string(), None),
        },
        _ => (s.to_string(), None),
    }
}

fn truncate(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

fn kb_tool_of(assistant: &Value) -> Option<String> {
    assistant["metadata"][KB_TOOL_KEY]
        .as_str()
        .map(str::to_string)
}

/// Vapi's call status in genied's words.
pub fn conversation_status(status: &str) -> &'static str {
    match status {
        "ended" => "done",
        "in-progress" | "forwarding" => "in-progress",
        _ => "initiated",
    }
}

fn rfc3339_secs(v: &Value) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(v.as_str()?)
        .ok()
        .map(|t| t.timestamp())
}

/// The transcript of a call or an end-of-call report (`artifact.messages`, or the older
/// top-level `messages`). Vapi names the assistant `bot` in real payloads and `assistant`
/// in its docs; both become `agent`. System and tool entries are left out.
pub fn transcript(call: &Value) -> Vec<Turn> {
    let msgs = call["artifact"]["messages"]
        .as_array()
        .or_else(|| call["messages"].as_array())
        .cloned()
        .unwrap_or_default();
    msgs.iter()
        .filter_map(|m| {
            let role = match m["role"].as_str()? {
                "bot" | "assistant" => "agent",
                "user" => "user",
                _ => return None,
            };
            Some(Turn {
                role: role.into(),
                message: m["message"].as_str()?.to_string(),
                time_in_call_secs: m["secondsFromStart"].as_f64().unwrap_or(0.0),
            })
        })
        .collect()
}

/// A Vapi call (from `GET /call/{id}` or an end-of-call report's `call` merged with the
/// report) as genied's conversation.
pub fn conversation_detail(call: &Value) -> ConversationDetail {
    let started = rfc3339_secs(&call["startedAt"]).or_else(|| rfc3339_secs(&call["createdAt"]));
    let ended = rfc3339_secs(&call["endedAt"]);
    ConversationDetail {
        conversation_id: call["id"].as_str().unwrap_or("").to_string(),
        agent_id: call["assistantId"].as_str().unwrap_or("").to_string(),
        status: conversation_status(call["status"].as_str().unwrap_or("ended")).to_string(),
        start_time_unix_secs: started.unwrap_or(0),
        call_duration_secs: match (started, ended) {
            (Some(s), Some(e)) if e >= s => e - s,
            _ => 0,
        },
        transcript: transcript(call),
        summary: call["analysis"]["summary"].as_str().map(str::to_string),
        metadata: json!({
            "endedReason": call["endedReason"],
            "analysis": call["analysis"],
            "customer": call["customer"],
            "cost": call["cost"],
            "type": call["type"],
        }),
    }
}

#[async_trait]
impl VoiceProvider for Vapi {
    fn name(&self) -> &'static str {
        "vapi"
    }

    async fn create_agent(&self, spec: &AgentSpec) -> ProviderResult<String> {
        let tool = self.sync_kb_tool(None, &spec.knowledge_base).await?;
        let created = self
            .api
            .call(
                Method::POST,
                "/assistant",
                &[],
                Body::Json(self.assistant_body(spec, tool.as_deref())),
            )
            .await;
        match created.map(|v| v["id"].as_str().map(str::to_string)) {
            Ok(Some(id)) => Ok(id),
            other => {
                // Leave nothing behind at Vapi when the assistant did not come to be.
                if let Some(t) = &tool
                    && let Err(e) = self.delete_tool(t).await
                {
                    tracing::warn!(error = %e, "removing the knowledge tool of a failed assistant failed");
                }
                match other {
                    Err(e) => Err(e),
                    _ => Err(ProviderError::new("Vapi did not return an assistant id")),
                }
            }
        }
    }

    async fn update_agent(&self, agent_id: &str, spec: &AgentSpec) -> ProviderResult<()> {
        let current = self.get_assistant(agent_id).await?;
        let tool = self
            .sync_kb_tool(kb_tool_of(&current).as_deref(), &spec.knowledge_base)
            .await?;
        self.api
            .call(
                Method::PATCH,
                &format!("/assistant/{}", seg(agent_id)),
                &[],
                Body::Json(self.assistant_body(spec, tool.as_deref())),
            )
            .await?;
        Ok(())
    }

    async fn delete_agent(&self, agent_id: &str) -> ProviderResult<()> {
        let current = match self.get_assistant(agent_id).await {
            Ok(v) => v,
            Err(e) if is_gone(&e) => return Ok(()),
            Err(e) => return Err(e),
        };
        self.api
            .delete(&format!("/assistant/{}", seg(agent_id)))
            .await?;
        if let Some(t) = kb_tool_of(&current) {
            self.delete_tool(&t).await?;
        }
        Ok(())
    }

    async fn set_agent_documents(&self, agent_id: &str, docs: &[KbDocRef]) -> ProviderResult<()> {
        let current = self.get_assistant(agent_id).await?;
        let old = kb_tool_of(&current);
        let tool = self.sync_kb_tool(old.as_deref(), docs).await?;
        if tool == old {
            return Ok(());
        }
        // The model object is replaced whole: resend it with the new tool list.
        let mut model = current["model"].clone();
        let mut ids: Vec<Value> = model["toolIds"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|v| old.as_deref().is_none_or(|o| v.as_str() != Some(o)))
            .collect();
        if let Some(t) = &tool {
            ids.push(json!(t));
        }
        if let Some(m) = model.as_object_mut() {
            m.insert("toolIds".into(), Value::Array(ids));
        }
        let mut metadata = current["metadata"].as_object().cloned().unwrap_or_default();
        match &tool {
            Some(t) => metadata.insert(KB_TOOL_KEY.into(), json!(t)),
            None => metadata.remove(KB_TOOL_KEY),
        };
        self.api
            .call(
                Method::PATCH,
                &format!("/assistant/{}", seg(agent_id)),
                &[],
                Body::Json(json!({"model": model, "metadata": metadata})),
            )
            .await?;
        Ok(())
    }

    async fn create_document(&self, name: &str, text: &str) -> ProviderResult<String> {
        let file_name = format!("{}.txt", truncate(name, 80));
        let text = text.to_string();
        let form = move || {
            let part = reqwest::multipart::Part::text(text.clone())
                .file_name(file_name.clone())
                .mime_str("text/plain")
                .expect("static mime type");
            reqwest::multipart::Form::new().part("file", part)
        };
        let v = self
            .api
            .call(Method::POST, "/file", &[], Body::Form(Box::new(form)))
            .await?;
        v["id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| ProviderError::new("Vapi did not return a file id"))
    }

    async fn delete_document(&self, doc_id: &str) -> ProviderResult<()> {
        self.api.delete(&format!("/file/{}", seg(doc_id))).await
    }

    /// A free Vapi number bound to the assistant (US only, no international calls).
    async fn provision_number(
        &self,
        agent_id: &str,
        label: &str,
    ) -> ProviderResult<ProvisionedNumber> {
        let v = self
            .api
            .call(
                Method::POST,
                "/phone-number",
                &[],
                Body::Json(json!({"provider": "vapi", "assistantId": agent_id, "name": truncate(label, 40)})),
            )
            .await?;
        let id = v["id"]
            .as_str()
            .ok_or_else(|| ProviderError::new("Vapi did not return a phone number id"))?;
        let number = v["number"]
            .as_str()
            .or_else(|| v["sipUri"].as_str())
            .ok_or_else(|| ProviderError::new("Vapi did not return the number it assigned"))?;
        Ok(ProvisionedNumber {
            number: number.to_string(),
            external_id: id.to_string(),
        })
    }

    async fn release_number(&self, external_id: &str) -> ProviderResult<()> {
        let deleted = match self
            .api
            .call(
                Method::DELETE,
                &format!("/phone-number/{}", seg(external_id)),
                &[],
                Body::None,
            )
            .await
        {
            Ok(v) => v,
            Err(e) if is_gone(&e) => return Ok(()),
            Err(e) => return Err(e),
        };
        // A SIP number brought its own trunk credential (made for it by `import_number`);
        // Vapi answers the deletion with the number, which names it.
        if deleted["provider"] == json!("byo-phone-number")
            && let Some(cred) = deleted["credentialId"].as_str()
        {
            self.api
                .delete(&format!("/credential/{}", seg(cred)))
                .await?;
        }
        Ok(())
    }

    fn supports_calls(&self) -> bool {
        true
    }

    fn number_import_kinds(&self) -> &'static [&'static str] {
        &["twilio", "sip"]
    }

    async fn import_number(
        &self,
        agent_id: &str,
        label: &str,
        number: &ImportedNumber,
    ) -> ProviderResult<ProvisionedNumber> {
        let (account_sid, auth_token) = match &number.source {
            NumberSource::Twilio {
                account_sid,
                auth_token,
            } => (account_sid, auth_token),
            NumberSource::Sip {
                termination_uri,
                username,
                password,
            } => {
                return self
                    .import_sip(
                        agent_id,
                        label,
                        &number.number,
                        termination_uri,
                        username.as_deref(),
                        password.as_ref().map(|p| p.0.as_str()),
                    )
                    .await;
            }
        };
        let v = self
            .api
            .call(
                Method::POST,
                "/phone-number",
                &[],
                Body::Json(json!({
                    "provider": "twilio",
                    "number": number.number,
                    "twilioAccountSid": account_sid,
                    "twilioAuthToken": auth_token.0,
                    "assistantId": agent_id,
                    "name": truncate(label, 40),
                })),
            )
            .await?;
        let id = v["id"]
            .as_str()
            .ok_or_else(|| ProviderError::new("Vapi did not return a phone number id"))?;
        Ok(ProvisionedNumber {
            number: number.number.clone(),
            external_id: id.to_string(),
        })
    }

    async fn start_call(&self, call: &OutboundCall) -> ProviderResult<String> {
        let mut body = json!({
            "assistantId": call.agent_id,
            "phoneNumberId": call.from_external_id,
            "customer": {"number": call.to},
        });
        if !call.variables.is_empty() {
            body["assistantOverrides"] = json!({"variableValues": call.variables});
        }
        // A POST: a 5xx is not repeated, since the call may already be ringing.
        let v = self
            .api
            .call(Method::POST, "/call", &[], Body::Json(body))
            .await?;
        v["id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| ProviderError::new("Vapi did not return a call id"))
    }

    async fn get_agent(&self, agent_id: &str) -> ProviderResult<AgentSpec> {
        let a = self.get_assistant(agent_id).await?;
        let mut files = Vec::new();
        if let Some(t) = kb_tool_of(&a) {
            match self
                .api
                .call(Method::GET, &format!("/tool/{}", seg(&t)), &[], Body::None)
                .await
            {
                Ok(tool) => {
                    for kb in tool["knowledgeBases"].as_array().into_iter().flatten() {
                        files.extend(
                            kb["fileIds"]
                                .as_array()
                                .into_iter()
                                .flatten()
                                .filter_map(text),
                        );
                    }
                }
                // Deleted in the dashboard: the assistant holds no documents.
                Err(e) if is_gone(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(spec_of(&a, &files))
    }

    fn as_held(&self, spec: &AgentSpec) -> AgentSpec {
        let files: Vec<String> = spec.knowledge_base.iter().map(|d| d.id.clone()).collect();
        spec_of(&assistant_body(spec, None, None), &files)
    }

    /// Vapi has no voice catalog of its own: it speaks through ElevenLabs voices by id, so
    /// the embedded catalog is the list.
    async fn list_voices(&self) -> ProviderResult<Vec<Voice>> {
        Ok(catalog())
    }

    /// Newest first; the cursor is the `createdAt` of the last call of the previous page.
    async fn list_conversations(
        &self,
        agent_id: &str,
        cursor: Option<&str>,
    ) -> ProviderResult<ConversationPage> {
        const PAGE: usize = 100;
        let mut q = vec![
            ("assistantId", agent_id.to_string()),
            ("limit", PAGE.to_string()),
        ];
        if let Some(c) = cursor {
            q.push(("createdAtLt", c.to_string()));
        }
        let v = self.api.call(Method::GET, "/call", &q, Body::None).await?;
        let calls = v.as_array().cloned().unwrap_or_default();
        let conversations: Vec<ConversationSummary> = calls
            .iter()
            .filter_map(|c| {
                let d = conversation_detail(c);
                (!d.conversation_id.is_empty()).then(|| ConversationSummary {
                    conversation_id: d.conversation_id,
                    agent_id: if d.agent_id.is_empty() {
                        agent_id.to_string()
                    } else {
                        d.agent_id
                    },
                    start_time_unix_secs: d.start_time_unix_secs,
                    call_duration_secs: d.call_duration_secs,
                    status: d.status,
                })
            })
            .collect();
        let next_cursor = if calls.len() >= PAGE {
            calls
                .last()
                .and_then(|c| c["createdAt"].as_str())
                .map(str::to_string)
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
                &format!("/call/{}", seg(conversation_id)),
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
    fn sip_gateways() {
        assert_eq!(
            sip_gateway("example.pstn.twilio.com"),
            ("example.pstn.twilio.com".into(), None)
        );
        assert_eq!(
            sip_gateway("sip:1.2.3.4:5080;transport=tcp"),
            ("1.2.3.4".into(), Some(5080))
        );
        assert_eq!(
            sip_gateway("sips:trunk@sip.example.com"),
            ("sip.example.com".into(), None)
        );
    }

    #[test]
    fn models_get_their_vendor() {
        assert_eq!(llm_provider("gpt-4o"), "openai");
        assert_eq!(llm_provider("claude-sonnet-4-5-20250929"), "anthropic");
        assert_eq!(llm_provider("gemini-3-flash-preview"), "google");
    }

    #[test]
    fn transcripts_accept_both_assistant_role_names() {
        let call = json!({"artifact": {"messages": [
            {"role": "system", "message": "You help."},
            {"role": "bot", "message": "Hi!", "secondsFromStart": 0.5},
            {"role": "user", "message": "Hello", "secondsFromStart": 2.0},
            {"role": "assistant", "message": "Bye", "secondsFromStart": 3.0},
        ]}});
        let t = transcript(&call);
        assert_eq!(t.len(), 3);
        assert_eq!(
            (t[0].role.as_str(), t[0].message.as_str()),
            ("agent", "Hi!")
        );
        assert_eq!(t[1].role, "user");
        assert_eq!(t[2].role, "agent");
    }
}
