//! A client for OpenAI-compatible chat-completions endpoints (hosted models and local
//! servers alike), with tool calling. Used by worker genies, conversation analysis and the
//! public page's text chat. Absent unless `--llm-base-url` is set.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::{Config, Secret};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Message {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    pub fn new(role: &str, content: impl Into<String>) -> Message {
        Message {
            role: role.into(),
            content: Some(content.into()),
            tool_calls: None,
            tool_call_id: None,
        }
    }
    pub fn tool_result(call_id: &str, content: impl Into<String>) -> Message {
        Message {
            role: "tool".into(),
            content: Some(content.into()),
            tool_calls: None,
            tool_call_id: Some(call_id.into()),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ToolCall {
    /// Some local servers omit it; the caller then assigns one.
    #[serde(default)]
    pub id: String,
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    pub function: FunctionCall,
}

fn function_type() -> String {
    "function".into()
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FunctionCall {
    pub name: String,
    /// JSON text, as the API sends it (servers that send a JSON object are accepted too).
    #[serde(default, deserialize_with = "json_text")]
    pub arguments: String,
}

fn json_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::String(s) => s,
        Value::Null => "{}".to_string(),
        other => other.to_string(),
    })
}

#[derive(Debug, Clone, Serialize)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<Message>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<i64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Usage {
    #[serde(default)]
    pub prompt_tokens: i64,
    #[serde(default)]
    pub completion_tokens: i64,
    #[serde(default)]
    pub total_tokens: i64,
}

#[derive(Debug, Clone)]
pub struct ChatResponse {
    pub message: Message,
    pub finish_reason: Option<String>,
    pub usage: Usage,
}

#[derive(Deserialize)]
struct RawResponse {
    choices: Vec<RawChoice>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct RawChoice {
    message: Message,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Clone)]
pub struct Llm {
    base_url: String,
    api_key: Secret,
    pub default_model: String,
    client: reqwest::Client,
    /// Models the operator named (the default, the price table's): the only model names
    /// that become metric labels; any other is counted as `other`.
    labelled_models: std::sync::Arc<Vec<String>>,
}

impl Llm {
    /// `None` when no endpoint is configured.
    pub fn from_config(c: &Config) -> Option<Llm> {
        let base = c.llm_base_url.as_deref()?.trim_end_matches('/').to_string();
        Some(Llm {
            base_url: base,
            api_key: c.llm_api_key.clone().unwrap_or_default(),
            default_model: c.llm_model.clone(),
            client: crate::net::service_client(Duration::from_secs(c.llm_timeout_seconds)),
            labelled_models: std::sync::Arc::new(vec![c.llm_model.clone()]),
        })
    }

    /// Adds models (the price table's) whose names may be metric labels.
    pub fn label_models<'a>(mut self, models: impl Iterator<Item = &'a str>) -> Llm {
        let mut all = (*self.labelled_models).clone();
        all.extend(models.map(str::to_string));
        self.labelled_models = std::sync::Arc::new(all);
        self
    }

    /// `model` as a metric label: itself when the operator named it, else `other` (genies
    /// name their own models, which must not make label values unbounded).
    pub fn model_label<'a>(&self, model: &'a str) -> &'a str {
        if self.labelled_models.iter().any(|m| m == model) {
            model
        } else {
            "other"
        }
    }

    /// One chat-completions call. Errors are readable and never contain the API key.
    pub async fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, String> {
        let started = std::time::Instant::now();
        let out = if crate::telemetry::trace::enabled() {
            use tracing::Instrument;
            let span = tracing::info_span!("llm.chat", model = self.model_label(&req.model));
            self.call(req).instrument(span).await
        } else {
            self.call(req).await
        };
        if crate::telemetry::prom::enabled() {
            let (ok, usage) = match &out {
                Ok(r) => (true, r.usage.clone()),
                Err(_) => (false, Usage::default()),
            };
            crate::telemetry::prom::llm_request(
                self.model_label(&req.model),
                ok,
                started.elapsed(),
                usage.prompt_tokens,
                usage.completion_tokens,
            );
        }
        out
    }

    async fn call(&self, req: &ChatRequest) -> Result<ChatResponse, String> {
        let mut http = self
            .client
            .post(format!("{}/chat/completions", self.base_url))
            .json(req);
        if !self.api_key.0.is_empty() {
            http = http.bearer_auth(&self.api_key.0);
        }
        let http = crate::telemetry::trace::inject(http);
        let resp = http
            .send()
            .await
            .map_err(|e| format!("LLM endpoint unreachable: {e}"))?;
        let status = resp.status();
        let text = resp
            .text()
            .await
            .map_err(|e| format!("LLM endpoint: reading the answer: {e}"))?;
        if !status.is_success() {
            let excerpt: String = text.chars().take(300).collect();
            return Err(format!(
                "LLM endpoint answered {}: {excerpt}",
                status.as_u16()
            ));
        }
        let raw: RawResponse = serde_json::from_str(&text)
            .map_err(|e| format!("LLM endpoint sent an unexpected answer: {e}"))?;
        let choice = raw
            .choices
            .into_iter()
            .next()
            .ok_or("LLM endpoint sent no choices")?;
        Ok(ChatResponse {
            message: choice.message,
            finish_reason: choice.finish_reason,
            usage: raw.usage.unwrap_or_default(),
        })
    }
}

/// One streamed turn: the whole answer as `chat` returns it, and its timings, kept together
/// so a turn's figures (first token, total, `usage`) can be recorded in one place.
#[derive(Debug, Clone)]
pub struct StreamedTurn {
    pub response: ChatResponse,
    /// From sending the request to the first content token (none when the turn only called
    /// tools).
    pub first_token: Option<std::time::Duration>,
    pub total: std::time::Duration,
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<ChunkChoice>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    #[serde(default)]
    delta: Delta,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Vec<ToolCallDelta>,
}

#[derive(Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: usize,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

impl Llm {
    /// A chat-completions call with `stream: true`: `on_token` gets each piece of content as
    /// the endpoint sends it; tool calls arrive in pieces and are put together. The usage of
    /// the turn is asked for (`stream_options.include_usage`).
    pub async fn chat_stream(
        &self,
        req: &ChatRequest,
        on_token: impl FnMut(&str),
    ) -> Result<StreamedTurn, String> {
        // Counted and traced as `chat` is (the same metrics, span and trace header).
        let started = std::time::Instant::now();
        let out = if crate::telemetry::trace::enabled() {
            use tracing::Instrument;
            let span = tracing::info_span!("llm.chat", model = self.model_label(&req.model));
            self.stream_call(req, on_token).instrument(span).await
        } else {
            self.stream_call(req, on_token).await
        };
        if crate::telemetry::prom::enabled() {
            let (ok, usage) = match &out {
                Ok(t) => (true, t.response.usage.clone()),
                Err(_) => (false, Usage::default()),
            };
            crate::telemetry::prom::llm_request(
                self.model_label(&req.model),
                ok,
                started.elapsed(),
                usage.prompt_tokens,
                usage.completion_tokens,
            );
        }
        out
    }

    async fn stream_call(
        &self,
        req: &ChatRequest,
        mut on_token: impl FnMut(&str),
    ) -> Result<StreamedTurn, String> {
        use eventsource_stream::Eventsource;
        use futures_util::StreamExt;
        let started = std::time::Instant::now();
        let mut body = serde_json::to_value(req).map_err(|e| e.to_string())?;
        body["stream"] = Value::Bool(true);
        body["stream_options"] = serde_json::json!({"include_usage": true});
        let mut http = self
            .client
            .post(format!("{}/chat/completions", self.base_url))
            .json(&body);
        if !self.api_key.0.is_empty() {
            http = http.bearer_auth(&self.api_key.0);
        }
        let http = crate::telemetry::trace::inject(http);
        let resp = http
            .send()
            .await
            .map_err(|e| format!("LLM endpoint unreachable: {e}"))?;
        let status = resp.status();
        if !status.is_success() {
            let text = resp.text().await.unwrap_or_default();
            let excerpt: String = text.chars().take(300).collect();
            return Err(format!(
                "LLM endpoint answered {}: {excerpt}",
                status.as_u16()
            ));
        }
        let mut events = resp.bytes_stream().eventsource();
        let mut content = String::new();
        let mut calls: Vec<ToolCall> = Vec::new();
        let mut finish_reason = None;
        let mut usage = Usage::default();
        let mut first_token = None;
        while let Some(ev) = events.next().await {
            let ev = ev.map_err(|e| format!("LLM endpoint: reading the stream: {e}"))?;
            if ev.data.trim() == "[DONE]" {
                break;
            }
            let chunk: Chunk = serde_json::from_str(&ev.data)
                .map_err(|e| format!("LLM endpoint sent an unexpected stream event: {e}"))?;
            if let Some(u) = chunk.usage {
                usage = u;
            }
            for ch in chunk.choices {
                if let Some(t) = ch.delta.content.filter(|t| !t.is_empty()) {
                    first_token.get_or_insert_with(|| started.elapsed());
                    on_token(&t);
                    content.push_str(&t);
                }
                for d in ch.delta.tool_calls {
                    while calls.len() <= d.index.min(63) {
                        calls.push(ToolCall {
                            id: String::new(),
                            kind: function_type(),
                            function: FunctionCall {
                                name: String::new(),
                                arguments: String::new(),
                            },
                        });
                    }
                    let c = &mut calls[d.index.min(63)];
                    if let Some(id) = d.id {
                        c.id.push_str(&id);
                    }
                    if let Some(f) = d.function {
                        c.function.name.push_str(&f.name.unwrap_or_default());
                        c.function
                            .arguments
                            .push_str(&f.arguments.unwrap_or_default());
                    }
                }
                if ch.finish_reason.is_some() {
                    finish_reason = ch.finish_reason;
                }
            }
        }
        calls.retain(|c| !c.function.name.is_empty());
        Ok(StreamedTurn {
            response: ChatResponse {
                message: Message {
                    role: "assistant".into(),
                    content: (!content.is_empty()).then_some(content),
                    tool_calls: (!calls.is_empty()).then_some(calls),
                    tool_call_id: None,
                },
                finish_reason,
                usage,
            },
            first_token,
            total: started.elapsed(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_tool_calls_without_ids_and_with_object_arguments() {
        let raw: RawResponse = serde_json::from_value(serde_json::json!({
            "choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
                {"function": {"name": "memory_read", "arguments": {"key": "k"}}},
                {"id": "c2", "type": "function", "function": {"name": "memory_read", "arguments": "{\"key\":\"j\"}"}}
            ]}}]
        }))
        .unwrap();
        let calls = raw.choices[0].message.tool_calls.clone().unwrap();
        assert_eq!(calls[0].id, "");
        assert_eq!(calls[0].function.arguments, r#"{"key":"k"}"#);
        assert_eq!(calls[1].function.arguments, r#"{"key":"j"}"#);
    }
}
