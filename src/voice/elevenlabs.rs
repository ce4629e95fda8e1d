//! The ElevenLabs Conversational AI ("Agents Platform") adapter: real HTTP calls to the
//! configured base URL with the `xi-api-key` header. Every non-2xx answer becomes a
//! `ProviderError` carrying the provider's status and its own message (`detail`), which
//! handlers surface as 502 `UPSTREAM_ERROR`.
//!
//! Phone numbers: ElevenLabs does not sell numbers through this API; they are imported with
//! the operator's Twilio or SIP-trunk credentials. This adapter therefore reports
//! `supports_phone_provisioning() == false` and `provision_number` fails with a message that
//! says so; `release_number` unassigns an (imported) number from its agent.

use std::time::Duration;

use async_trait::async_trait;
use reqwest::{Method, StatusCode};
use serde_json::{Map, Value, json};

use super::*;
use crate::config::Secret;
use crate::voice::http::{Attempt, retry_after, with_retries};

pub struct ElevenLabs {
    base: String,
    key: Secret,
    http: reqwest::Client,
    retry_base: Duration,
}

impl ElevenLabs {
    /// `retry_base`: the first backoff delay (`--provider-retry-base-ms`).
    pub fn new(base_url: &str, key: Secret, retry_base: Duration) -> anyhow::Result<ElevenLabs> {
        let base = base_url.trim().trim_end_matches('/').to_string();
        url::Url::parse(&base)
            .map_err(|e| anyhow::anyhow!("--elevenlabs-base-url '{base}': {e}"))?;
        Ok(ElevenLabs {
            base,
            key,
            http: crate::net::service_client(Duration::from_secs(30)),
            retry_base,
        })
    }

    /// One logical call, retried as Vapi's and Retell's are (`voice::http`): a 429 whatever
    /// the method, a 5xx or a failed connection only when it is not a POST, which may create
    /// twice. An empty 2xx body is `Null`.
    async fn call(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<Value>,
    ) -> ProviderResult<Value> {
        let idempotent = method != Method::POST;
        with_retries("elevenlabs", path, self.retry_base, idempotent, || {
            self.once(method.clone(), path, query, body.clone())
        })
        .await
    }

    async fn once(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<Value>,
    ) -> Result<Value, Attempt> {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("xi-api-key", &self.key.0);
        if !query.is_empty() {
            req = req.query(query);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let span = if crate::telemetry::trace::enabled() {
            tracing::info_span!("voice.request", provider = "elevenlabs")
        } else {
            tracing::Span::none()
        };
        let req = span.in_scope(|| crate::telemetry::trace::inject(req));
        let resp = tracing::Instrument::instrument(req.send(), span)
            .await
            .map_err(|e| Attempt {
                // reqwest's message names the URL but never the headers, so no key leaks.
                error: ProviderError::new(format!(
                    "request to ElevenLabs failed: {}",
                    e.without_url()
                )),
                retry_after: None,
                transient: true,
            })?;
        let status = resp.status();
        let retry_after = retry_after(&resp);
        let text = resp.text().await.unwrap_or_default();
        if !status.is_success() {
            return Err(Attempt {
                error: ProviderError {
                    message: error_message(status, &text),
                    status: Some(status.as_u16()),
                },
                retry_after,
                transient: status == StatusCode::REQUEST_TIMEOUT || status.is_server_error(),
            });
        }
        if text.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&text).map_err(|e| Attempt {
            error: ProviderError::new(format!("ElevenLabs answered with invalid JSON: {e}")),
            retry_after: None,
            transient: false,
        })
    }
}

/// The provider's own words: `detail` as a string, `detail.message`, or the `msg` of each
/// 422 validation item (with its location).
fn error_message(status: StatusCode, body: &str) -> String {
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let detail = &v["detail"];
    let msg = match detail {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => o.get("message").and_then(Value::as_str).map(str::to_string),
        Value::Array(items) => {
            let parts: Vec<String> = items
                .iter()
                .filter_map(|i| {
                    let msg = i["msg"].as_str()?;
                    let loc: Vec<String> = i["loc"]
                        .as_array()
                        .map(|l| {
                            l.iter()
                                .map(|p| {
                                    p.as_str()
                                        .map(str::to_string)
                                        .unwrap_or_else(|| p.to_string())
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    Some(if loc.is_empty() {
                        msg.to_string()
                    } else {
                        format!("{}: {msg}", loc.join("."))
                    })
                })
                .collect();
            (!parts.is_empty()).then(|| parts.join("; "))
        }
        _ => None,
    };
    msg.unwrap_or_else(|| {
        let snippet: String = body.chars().take(200).collect();
        if snippet.trim().is_empty() {
            status.canonical_reason().unwrap_or("error").to_string()
        } else {
            snippet
        }
    })
}

fn put(m: &mut Map<String, Value>, k: &str, v: Option<Value>) {
    if let Some(v) = v {
        m.insert(k.to_string(), v);
    }
}

/// The `conversation_config` of the provider's create/update body; unset members are left
/// out so the provider keeps its defaults.
fn conversation_config(spec: &AgentSpec) -> Value {
    let mut prompt = Map::new();
    put(
        &mut prompt,
        "prompt",
        spec.system_prompt.clone().map(Value::from),
    );
    put(
        &mut prompt,
        "llm",
        Some(Value::from(spec.llm_model.clone())),
    );
    put(
        &mut prompt,
        "temperature",
        spec.temperature.map(Value::from),
    );
    put(&mut prompt, "max_tokens", spec.max_tokens.map(Value::from));
    prompt.insert("knowledge_base".into(), json!(spec.knowledge_base));
    let (tools, rag) = server_tools(spec);
    prompt.insert("tools".into(), Value::Array(tools));
    if rag {
        prompt.insert("rag".into(), json!({"enabled": true}));
    }
    let mut agent = Map::new();
    put(
        &mut agent,
        "first_message",
        spec.first_message.clone().map(Value::from),
    );
    put(
        &mut agent,
        "language",
        spec.language.clone().map(Value::from),
    );
    agent.insert("prompt".into(), Value::Object(prompt));
    let mut tts = Map::new();
    put(&mut tts, "voice_id", spec.voice_id.clone().map(Value::from));
    put(&mut tts, "stability", spec.stability.map(Value::from));
    put(
        &mut tts,
        "similarity_boost",
        spec.similarity_boost.map(Value::from),
    );
    put(&mut tts, "speed", spec.speed.map(Value::from));
    if spec.multilingual {
        // Non-English agents need a multilingual TTS model.
        tts.insert("model_id".into(), json!("eleven_turbo_v2_5"));
    }
    let mut turn = Map::new();
    put(
        &mut turn,
        "turn_timeout",
        spec.turn_timeout_seconds.map(Value::from),
    );
    put(
        &mut turn,
        "silence_end_call_timeout",
        spec.silence_end_seconds.map(Value::from),
    );
    put(&mut turn, "mode", spec.turn_mode.clone().map(Value::from));
    let mut conversation = Map::new();
    put(
        &mut conversation,
        "max_duration_seconds",
        spec.max_duration_seconds.map(Value::from),
    );
    json!({"agent": agent, "tts": tts, "turn": turn, "conversation": conversation})
}

/// The genie's tools as ElevenLabs tools: webhook tools become its server (`webhook`)
/// tools, which its platform calls itself; `end_conversation` its `end_call` system tool;
/// `search_knowledge_base` turns on retrieval over the agent's knowledge base (the second
/// value). `capture_lead` and `transfer_to_human` have no tool there: they become data
/// collection items (see [`data_collection`]). A webhook tool that needs a stored credential
/// is left out: genied never hands a credential to a provider.
fn server_tools(spec: &AgentSpec) -> (Vec<Value>, bool) {
    let mut tools = Vec::new();
    let mut rag = false;
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
            } => {
                let mut api = json!({"url": url, "method": method});
                let mut schema = object_schema(parameters);
                schema["description"] = json!(description);
                if method == "GET" || method == "DELETE" {
                    api["query_params_schema"] =
                        json!({"properties": schema["properties"], "required": schema["required"]});
                } else {
                    api["request_body_schema"] = schema;
                }
                tools.push(json!({
                    "type": "webhook", "name": name, "description": description,
                    "response_timeout_secs": timeout_seconds, "api_schema": api,
                }));
            }
            AgentTool::Webhook { .. } => {}
            AgentTool::Builtin { name } if name == "end_conversation" => tools.push(json!({
                "type": "system", "name": "end_call",
                "description": "End the call once the caller is done (after saying goodbye).",
            })),
            AgentTool::Builtin { name } if name == "search_knowledge_base" => rag = true,
            AgentTool::Builtin { .. } => {}
        }
    }
    (tools, rag)
}

/// `capture_lead` and `transfer_to_human` as data collection: the platform extracts these
/// from each call, and they reach genied with the conversation (post-call webhook, sync),
/// where the analysis makes the lead.
fn data_collection(spec: &AgentSpec) -> Map<String, Value> {
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

fn agent_body(spec: &AgentSpec) -> Value {
    let mut body = json!({"name": spec.name, "conversation_config": conversation_config(spec), "tags": ["genied"]});
    let collect = data_collection(spec);
    if !collect.is_empty() {
        body["platform_settings"] = json!({"data_collection": collect});
    }
    body
}

fn text(v: &Value) -> Option<String> {
    v.as_str().map(str::to_string)
}

/// An agent as ElevenLabs holds it (`GET /v1/convai/agents/{id}`, or the body genied sends)
/// in genied's terms; the inverse of [`agent_body`].
pub fn spec_of(agent: &Value) -> AgentSpec {
    let cc = &agent["conversation_config"];
    let p = &cc["agent"]["prompt"];
    let mut tools = Vec::new();
    for t in p["tools"].as_array().into_iter().flatten() {
        let name = t["name"].as_str().unwrap_or_default().to_string();
        match t["type"].as_str() {
            Some("webhook") => {
                let api = &t["api_schema"];
                let schema = if api["request_body_schema"].is_object() {
                    &api["request_body_schema"]
                } else {
                    &api["query_params_schema"]
                };
                tools.push(AgentTool::Webhook {
                    name,
                    description: t["description"].as_str().unwrap_or_default().to_string(),
                    parameters: object_schema(schema),
                    url: api["url"].as_str().unwrap_or_default().to_string(),
                    method: api["method"].as_str().unwrap_or("POST").to_string(),
                    timeout_seconds: t["response_timeout_secs"].as_u64().unwrap_or(20),
                    needs_credential: false,
                });
            }
            Some("system") if name == "end_call" => tools.push(AgentTool::Builtin {
                name: "end_conversation".into(),
            }),
            _ => {}
        }
    }
    if p["rag"]["enabled"] == json!(true) {
        tools.push(AgentTool::Builtin {
            name: "search_knowledge_base".into(),
        });
    }
    let dc = &agent["platform_settings"]["data_collection"];
    for (key, tool) in [
        ("lead_name", "capture_lead"),
        ("transfer_to_human", "transfer_to_human"),
    ] {
        if dc.get(key).is_some() {
            tools.push(AgentTool::Builtin { name: tool.into() });
        }
    }
    let model = cc["tts"]["model_id"].as_str().unwrap_or_default();
    AgentSpec {
        name: agent["name"].as_str().unwrap_or_default().to_string(),
        system_prompt: text(&p["prompt"]),
        first_message: text(&cc["agent"]["first_message"]),
        language: text(&cc["agent"]["language"]),
        multilingual: model.contains("multilingual") || model.ends_with("v2_5"),
        voice_id: text(&cc["tts"]["voice_id"]),
        llm_model: p["llm"].as_str().unwrap_or_default().to_string(),
        temperature: p["temperature"].as_f64(),
        max_tokens: p["max_tokens"].as_i64(),
        stability: cc["tts"]["stability"].as_f64(),
        similarity_boost: cc["tts"]["similarity_boost"].as_f64(),
        speed: cc["tts"]["speed"].as_f64(),
        max_duration_seconds: cc["conversation"]["max_duration_seconds"].as_i64(),
        turn_timeout_seconds: cc["turn"]["turn_timeout"].as_f64(),
        silence_end_seconds: cc["turn"]["silence_end_call_timeout"].as_f64(),
        turn_mode: text(&cc["turn"]["mode"]),
        knowledge_base: serde_json::from_value(p["knowledge_base"].clone()).unwrap_or_default(),
        tools,
    }
}

fn seg(id: &str) -> String {
    url::form_urlencoded::byte_serialize(id.as_bytes()).collect()
}

#[async_trait]
impl VoiceProvider for ElevenLabs {
    fn name(&self) -> &'static str {
        "elevenlabs"
    }

    async fn create_agent(&self, spec: &AgentSpec) -> ProviderResult<String> {
        let v = self
            .call(
                Method::POST,
                "/v1/convai/agents/create",
                &[],
                Some(agent_body(spec)),
            )
            .await?;
        v["agent_id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| ProviderError::new("ElevenLabs did not return an agent_id"))
    }

    async fn update_agent(&self, agent_id: &str, spec: &AgentSpec) -> ProviderResult<()> {
        self.call(
            Method::PATCH,
            &format!("/v1/convai/agents/{}", seg(agent_id)),
            &[],
            Some(agent_body(spec)),
        )
        .await?;
        Ok(())
    }

    async fn delete_agent(&self, agent_id: &str) -> ProviderResult<()> {
        match self
            .call(
                Method::DELETE,
                &format!("/v1/convai/agents/{}", seg(agent_id)),
                &[],
                None,
            )
            .await
        {
            Err(e) if e.status == Some(404) => Ok(()),
            r => r.map(|_| ()),
        }
    }

    async fn set_agent_documents(&self, agent_id: &str, docs: &[KbDocRef]) -> ProviderResult<()> {
        let body = json!({"conversation_config": {"agent": {"prompt": {"knowledge_base": docs}}}});
        self.call(
            Method::PATCH,
            &format!("/v1/convai/agents/{}", seg(agent_id)),
            &[],
            Some(body),
        )
        .await?;
        Ok(())
    }

    async fn create_document(&self, name: &str, text: &str) -> ProviderResult<String> {
        let v = self
            .call(
                Method::POST,
                "/v1/convai/knowledge-base/text",
                &[],
                Some(json!({"text": text, "name": name})),
            )
            .await?;
        v["id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| ProviderError::new("ElevenLabs did not return a document id"))
    }

    async fn delete_document(&self, doc_id: &str) -> ProviderResult<()> {
        let path = format!("/v1/convai/knowledge-base/{}", seg(doc_id));
        match self
            .call(Method::DELETE, &path, &[("force", "true".into())], None)
            .await
        {
            Err(e) if e.status == Some(404) => Ok(()),
            r => r.map(|_| ()),
        }
    }

    fn supports_phone_provisioning(&self) -> bool {
        false
    }

    async fn provision_number(
        &self,
        _agent_id: &str,
        _label: &str,
    ) -> ProviderResult<ProvisionedNumber> {
        Err(ProviderError::new(
            "ElevenLabs cannot provision phone numbers: numbers are imported into ElevenLabs with your Twilio or SIP-trunk \
             credentials and assigned to the agent there",
        ))
    }

    fn number_import_kinds(&self) -> &'static [&'static str] {
        &["twilio", "sip"]
    }

    /// `POST /v1/convai/phone-numbers` (provider `twilio`), then the number is assigned to
    /// the agent; if that fails the number is deleted again, so nothing is left half-made.
    async fn import_number(
        &self,
        agent_id: &str,
        label: &str,
        number: &ImportedNumber,
    ) -> ProviderResult<ProvisionedNumber> {
        let body = match &number.source {
            NumberSource::Twilio {
                account_sid,
                auth_token,
            } => json!({
                "provider": "twilio",
                "phone_number": number.number,
                "label": label,
                "sid": account_sid,
                "token": auth_token.0,
            }),
            // Outbound calls go to the trunk's address with its digest credentials; inbound
            // calls from the trunk are taken with ElevenLabs' defaults (no inbound config).
            NumberSource::Sip {
                termination_uri,
                username,
                password,
            } => {
                let mut outbound = json!({"address": termination_uri});
                if let Some(u) = username {
                    let mut cred = json!({"username": u});
                    if let Some(p) = password {
                        cred["password"] = json!(p.0);
                    }
                    outbound["credentials"] = cred;
                }
                json!({
                    "provider": "sip_trunk",
                    "phone_number": number.number,
                    "label": label,
                    "supports_inbound": true,
                    "supports_outbound": true,
                    "outbound_trunk_config": outbound,
                })
            }
        };
        let v = self
            .call(Method::POST, "/v1/convai/phone-numbers", &[], Some(body))
            .await?;
        let id = v["phone_number_id"]
            .as_str()
            .ok_or_else(|| ProviderError::new("ElevenLabs did not return a phone_number_id"))?
            .to_string();
        let path = format!("/v1/convai/phone-numbers/{}", seg(&id));
        if let Err(e) = self
            .call(
                Method::PATCH,
                &path,
                &[],
                Some(json!({"agent_id": agent_id})),
            )
            .await
        {
            if let Err(d) = self.call(Method::DELETE, &path, &[], None).await {
                tracing::warn!(error = %d, number = %id, "could not delete an imported number whose assignment failed");
            }
            return Err(e);
        }
        Ok(ProvisionedNumber {
            number: number.number.clone(),
            external_id: id,
        })
    }

    async fn release_number(&self, external_id: &str) -> ProviderResult<()> {
        let path = format!("/v1/convai/phone-numbers/{}", seg(external_id));
        match self
            .call(Method::PATCH, &path, &[], Some(json!({"agent_id": null})))
            .await
        {
            Err(e) if e.status == Some(404) => Ok(()),
            r => r.map(|_| ()),
        }
    }

    async fn get_agent(&self, agent_id: &str) -> ProviderResult<AgentSpec> {
        let v = self
            .call(
                Method::GET,
                &format!("/v1/convai/agents/{}", seg(agent_id)),
                &[],
                None,
            )
            .await?;
        Ok(spec_of(&v))
    }

    fn as_held(&self, spec: &AgentSpec) -> AgentSpec {
        spec_of(&agent_body(spec))
    }

    /// Turns agent versioning on (which ElevenLabs cannot turn off again: the caller asked
    /// for it explicitly), makes a branch `genied-v<n>` per version from that version's
    /// configuration (once: a genied version never changes), and deploys the percentages.
    /// No shares: the `Main` branch gets all traffic back.
    async fn set_traffic(&self, agent_id: &str, shares: &[TrafficShare]) -> ProviderResult<Value> {
        let agent_path = format!("/v1/convai/agents/{}", seg(agent_id));
        self.call(
            Method::PATCH,
            &agent_path,
            &[("enable_versioning_if_not_enabled", "true".into())],
            Some(json!({})),
        )
        .await?;
        let agent = self.call(Method::GET, &agent_path, &[], None).await?;
        let parent = agent["version_id"]
            .as_str()
            .ok_or_else(|| ProviderError::new("ElevenLabs did not return the agent's version_id"))?
            .to_string();
        let branches_path = format!("{agent_path}/branches");
        let listed = self.call(Method::GET, &branches_path, &[], None).await?;
        let branches = listed["results"].as_array().cloned().unwrap_or_default();
        let find = |name: &str| {
            branches
                .iter()
                .find(|b| b["name"] == json!(name))
                .and_then(|b| b["id"].as_str())
                .map(str::to_string)
        };
        let share = |branch: String, weight: u64| json!({"branch_id": branch, "deployment_strategy": {"type": "percentage", "traffic_percentage": weight as f64 / 100.0}});
        let mut requests = Vec::new();
        if shares.is_empty() {
            let main = find("Main").ok_or_else(|| {
                ProviderError::new("ElevenLabs lists no Main branch for the agent")
            })?;
            requests.push(share(main, 100));
        }
        for s in shares {
            let name = format!("genied-v{}", s.version);
            let id = match find(&name) {
                Some(id) => id,
                None => {
                    let body = agent_body(&s.spec);
                    let mut req = json!({
                        "parent_version_id": parent,
                        "name": name,
                        "description": format!("genied version {}", s.version),
                        "conversation_config": body["conversation_config"],
                    });
                    if let Some(p) = body.get("platform_settings") {
                        req["platform_settings"] = p.clone();
                    }
                    let v = self
                        .call(Method::POST, &branches_path, &[], Some(req))
                        .await?;
                    v["created_branch_id"]
                        .as_str()
                        .ok_or_else(|| ProviderError::new("ElevenLabs did not return a branch id"))?
                        .to_string()
                }
            };
            requests.push(share(id, s.weight));
        }
        let v = self
            .call(
                Method::POST,
                &format!("{agent_path}/deployments"),
                &[],
                Some(json!({"deployment_request": {"requests": requests}})),
            )
            .await?;
        Ok(v["traffic_percentage_branch_id_map"].clone())
    }

    async fn list_voices(&self) -> ProviderResult<Vec<Voice>> {
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        // Bounded: 50 pages of 100 voices.
        for _ in 0..50 {
            let mut q = vec![("page_size", "100".to_string())];
            if let Some(t) = &token {
                q.push(("next_page_token", t.clone()));
            }
            let v = self.call(Method::GET, "/v2/voices", &q, None).await?;
            for item in v["voices"].as_array().cloned().unwrap_or_default() {
                let Some(id) = item["voice_id"].as_str() else {
                    continue;
                };
                out.push(Voice {
                    voice_id: id.to_string(),
                    name: item["name"].as_str().unwrap_or(id).to_string(),
                    category: item["category"].as_str().map(str::to_string),
                    labels: if item["labels"].is_object() {
                        item["labels"].clone()
                    } else {
                        json!({})
                    },
                    description: item["description"].as_str().map(str::to_string),
                    preview_url: item["preview_url"].as_str().map(str::to_string),
                });
            }
            token = v["next_page_token"].as_str().map(str::to_string);
            if v["has_more"] != json!(true) || token.is_none() {
                break;
            }
        }
        Ok(out)
    }

    async fn list_conversations(
        &self,
        agent_id: &str,
        cursor: Option<&str>,
    ) -> ProviderResult<ConversationPage> {
        let mut q = vec![
            ("agent_id", agent_id.to_string()),
            ("page_size", "100".to_string()),
        ];
        if let Some(c) = cursor {
            q.push(("cursor", c.to_string()));
        }
        let v = self
            .call(Method::GET, "/v1/convai/conversations", &q, None)
            .await?;
        let conversations = v["conversations"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .filter_map(|c| {
                Some(ConversationSummary {
                    conversation_id: c["conversation_id"].as_str()?.to_string(),
                    agent_id: c["agent_id"].as_str().unwrap_or(agent_id).to_string(),
                    start_time_unix_secs: c["start_time_unix_secs"].as_i64().unwrap_or(0),
                    call_duration_secs: c["call_duration_secs"].as_i64().unwrap_or(0),
                    status: c["status"].as_str().unwrap_or("done").to_string(),
                })
            })
            .collect();
        let next_cursor = if v["has_more"] == json!(true) {
            v["next_cursor"].as_str().map(str::to_string)
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
            .call(
                Method::GET,
                &format!("/v1/convai/conversations/{}", seg(conversation_id)),
                &[],
                None,
            )
            .await?;
        let transcript = v["transcript"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|t| Turn {
                role: t["role"].as_str().unwrap_or("agent").to_string(),
                message: t["message"].as_str().unwrap_or("").to_string(),
                time_in_call_secs: t["time_in_call_secs"].as_f64().unwrap_or(0.0),
            })
            .collect();
        Ok(ConversationDetail {
            conversation_id: v["conversation_id"]
                .as_str()
                .unwrap_or(conversation_id)
                .to_string(),
            agent_id: v["agent_id"].as_str().unwrap_or("").to_string(),
            status: v["status"].as_str().unwrap_or("done").to_string(),
            start_time_unix_secs: v["metadata"]["start_time_unix_secs"].as_i64().unwrap_or(0),
            call_duration_secs: v["metadata"]["call_duration_secs"].as_i64().unwrap_or(0),
            transcript,
            summary: v["analysis"]["transcript_summary"]
                .as_str()
                .map(str::to_string),
            metadata: json!({"metadata": v["metadata"], "analysis": v["analysis"]}),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages_use_the_providers_words() {
        let s = StatusCode::UNPROCESSABLE_ENTITY;
        let m = error_message(
            s,
            r#"{"detail":[{"loc":["body","conversation_config"],"msg":"Field required","type":"missing"}]}"#,
        );
        assert_eq!(m, "body.conversation_config: Field required");
        assert_eq!(
            error_message(
                StatusCode::UNAUTHORIZED,
                r#"{"detail":{"status":"invalid_api_key","message":"Invalid API key"}}"#
            ),
            "Invalid API key"
        );
        assert_eq!(
            error_message(StatusCode::NOT_FOUND, r#"{"detail":"Agent not found"}"#),
            "Agent not found"
        );
        assert_eq!(error_message(StatusCode::BAD_GATEWAY, ""), "Bad Gateway");
    }
}
