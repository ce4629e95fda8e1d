//! A fake OpenAI-compatible `/chat/completions` endpoint, scripted turn by turn. It checks
//! every request it receives (method, path, bearer key, model, the five worker tool
//! schemas, the message sequence) and records problems and requests for the test.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Value, json};

pub const API_KEY: &str = "test-llm-key";

/// One scripted answer.
#[derive(Clone, Debug)]
pub enum Turn {
    /// Call these tools: (name, arguments).
    Tools(Vec<(&'static str, Value)>),
    /// Answer with this text (no tool calls).
    Answer(&'static str),
    /// Wait, then answer with the inner turn.
    Slow(Duration, Box<Turn>),
}

#[derive(Default)]
struct St {
    script: VecDeque<Turn>,
    requests: Vec<Value>,
    problems: Vec<String>,
    calls: usize,
}

#[derive(Clone)]
pub struct FakeOpenAi {
    pub base: String,
    st: Arc<Mutex<St>>,
}

const TOOLS: [&str; 5] = [
    "web_fetch",
    "memory_read",
    "memory_write",
    "query_data",
    "notify_owner",
];

impl FakeOpenAi {
    pub async fn start() -> FakeOpenAi {
        let st = Arc::new(Mutex::new(St::default()));
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .with_state(st.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        FakeOpenAi {
            base: format!("http://{addr}/v1"),
            st,
        }
    }

    pub fn push(&self, turns: impl IntoIterator<Item = Turn>) {
        self.st.lock().unwrap().script.extend(turns);
    }
    pub fn requests(&self) -> Vec<Value> {
        self.st.lock().unwrap().requests.clone()
    }
    pub fn problems(&self) -> Vec<String> {
        self.st.lock().unwrap().problems.clone()
    }
    /// Points a config at this fake.
    pub fn configure(&self, c: &mut genied::Config) {
        c.llm_base_url = Some(self.base.clone());
        c.llm_api_key = Some(genied::config::Secret(API_KEY.into()));
        c.llm_model = "fake-model".into();
    }
}

fn check(headers: &HeaderMap, body: &Value) -> Vec<String> {
    let mut p = Vec::new();
    if headers.get("authorization").and_then(|v| v.to_str().ok())
        != Some(&format!("Bearer {API_KEY}"))
    {
        p.push("missing or wrong bearer key".to_string());
    }
    if body["model"].as_str().is_none_or(|m| m.is_empty()) {
        p.push("no model".into());
    }
    let tools = body["tools"].as_array().cloned().unwrap_or_default();
    let names: Vec<&str> = tools
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    if names != TOOLS {
        p.push(format!("tool names {names:?}"));
    }
    for t in &tools {
        if t["type"] != "function"
            || t["function"]["parameters"]["type"] != "object"
            || !t["function"]["description"].is_string()
        {
            p.push(format!("bad tool schema {t}"));
        }
    }
    let fetch = tools.iter().find(|t| t["function"]["name"] == "web_fetch");
    if fetch.is_none_or(|t| {
        t["function"]["parameters"]["required"] != json!(["url"])
            || t["function"]["parameters"]["properties"]["method"]["enum"]
                != json!(["GET", "POST", "PUT", "PATCH", "DELETE"])
    }) {
        p.push("web_fetch schema".into());
    }
    let qd = tools.iter().find(|t| t["function"]["name"] == "query_data");
    if qd.is_none_or(|t| {
        t["function"]["parameters"]["properties"]["table"]["enum"]
            != json!([
                "conversations",
                "call_logs",
                "leads",
                "agents",
                "lead_activities",
                "documents",
                "email_logs"
            ])
    }) {
        p.push("query_data schema".into());
    }
    let msgs = body["messages"].as_array().cloned().unwrap_or_default();
    if msgs.len() < 2 || msgs[0]["role"] != "system" || msgs[1]["role"] != "user" {
        p.push("messages must start with system, user".into());
    }
    // Every assistant tool call is answered by a tool message with its id, in order.
    let mut i = 2;
    while i < msgs.len() {
        let m = &msgs[i];
        if m["role"] != "assistant" {
            p.push(format!("message {i} should be assistant: {m}"));
            break;
        }
        let calls = m["tool_calls"].as_array().cloned().unwrap_or_default();
        for (k, c) in calls.iter().enumerate() {
            let t = &msgs.get(i + 1 + k).cloned().unwrap_or(Value::Null);
            if t["role"] != "tool" || t["tool_call_id"] != c["id"] || !t["content"].is_string() {
                p.push(format!("tool result for {} missing", c["id"]));
            }
        }
        i += 1 + calls.len();
    }
    p
}

fn answer(turn: &Turn, n: usize) -> Value {
    let message = match turn {
        Turn::Answer(text) => json!({"role": "assistant", "content": text}),
        Turn::Tools(calls) => json!({
            "role": "assistant",
            "content": null,
            "tool_calls": calls.iter().enumerate().map(|(k, (name, args))| json!({
                "id": format!("call_{n}_{k}"), "type": "function",
                "function": {"name": name, "arguments": args.to_string()}
            })).collect::<Vec<_>>()
        }),
        Turn::Slow(_, inner) => return answer(inner, n),
    };
    let finish = if matches!(turn, Turn::Tools(_)) {
        "tool_calls"
    } else {
        "stop"
    };
    json!({
        "id": format!("chatcmpl-{n}"), "object": "chat.completion", "model": "fake-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    })
}

async fn chat(
    State(st): State<Arc<Mutex<St>>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let problems = check(&headers, &body);
    let (turn, n) = {
        let mut s = st.lock().unwrap();
        s.requests.push(body.clone());
        s.problems.extend(problems.iter().cloned());
        s.calls += 1;
        (
            s.script
                .pop_front()
                .unwrap_or(Turn::Answer("nothing more scripted")),
            s.calls,
        )
    };
    if !problems.is_empty() {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": {"message": problems.join("; ")}})),
        );
    }
    if let Turn::Slow(d, _) = &turn {
        tokio::time::sleep(*d).await;
    }
    (StatusCode::OK, Json(answer(&turn, n)))
}
