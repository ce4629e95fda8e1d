//! A fake OpenAI-compatible `POST {base}/chat/completions` endpoint, scripted turn by turn,
//! serving both worker-genie runs and conversation analysis (the service has one LLM base
//! URL for both). Every request it receives is checked and recorded:
//! - always: method, path, JSON content type, bearer key, a `model` string, a non-empty
//!   `messages` array whose entries all have a role;
//! - worker turns (every request when started with [`Expect::Worker`], otherwise the ones
//!   that carry `tools`): the five worker tool schemas, and a message sequence of system,
//!   user, then assistant turns each followed by one tool result per tool call.
//!
//! - plain completions (no `tools`), once [`FakeOpenAi::expect_completion`] was called: the
//!   model, temperature and max_tokens expected, and every expected text in the system
//!   message (e.g. the knowledge-base passage a page chat must have been given).
//!
//! - genie test-conversation turns (requests with `tools` once
//!   [`FakeOpenAi::expect_agent_tools`] was called): exactly those tool names, each a
//!   well-formed function, and every assistant tool call answered by a tool result.
//! - several kinds of plain completion at once ([`FakeOpenAi::expect_completions`]): each
//!   request is checked against the expectation whose `select` text its system message
//!   contains (the genie's prompt, the judge's, the simulated user's); a request matching
//!   none is a problem.
//! - page chat turns with tools, once [`FakeOpenAi::expect_page_tools`] was called: exactly
//!   those tool names, each a function with an object schema, and every assistant tool call
//!   answered by a tool message with its id.
//! - streamed requests (`stream: true`) must ask for the usage (`stream_options.include_usage`);
//!   they are answered as Server-Sent Events in the OpenAI chunk format, the text in several
//!   pieces and tool calls split across chunks, as the real endpoint sends them.
//!
//! A request that fails a check is answered 400 and its problems are recorded.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use serde_json::{Value, json};

pub const API_KEY: &str = "test-llm-key";

/// What the fake expects of requests beyond the checks every request gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Every request is a worker-genie turn: it must carry the worker tools.
    Worker,
    /// Requests with `tools` are worker turns; those without are plain completions
    /// (conversation analysis).
    Any,
}

/// One scripted answer.
#[derive(Clone, Debug)]
pub enum Turn {
    /// Call these tools: (name, arguments).
    Tools(Vec<(&'static str, Value)>),
    /// Answer with this text (no tool calls).
    Answer(&'static str),
    /// Wait, then answer with the inner turn.
    Slow(Duration, Box<Turn>),
    /// Answer with this status and body as they are, e.g. an error.
    Raw(u16, Value),
    /// Streamed only: send these pieces of text, waiting this long before each.
    Paced(Duration, Vec<&'static str>),
}

/// One request as received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: HeaderMap,
    /// The JSON body, `Null` when it was not JSON.
    pub body: Value,
    /// What failed the checks; empty when the request was fine.
    pub problems: Vec<String>,
}

/// What a plain completion (a request without `tools`) must carry.
#[derive(Clone, Debug, Default)]
pub struct Completion {
    pub model: String,
    /// `None`: the request must not send one.
    pub temperature: Option<f64>,
    pub max_tokens: Option<i64>,
    /// Texts the system message (the first message) must contain.
    pub system_contains: Vec<String>,
    /// Texts no message may contain.
    pub nowhere: Vec<String>,
    /// Which requests this expectation is for: those whose system message contains this
    /// text; `None`: every request.
    pub select: Option<String>,
}

#[derive(Default)]
struct St {
    completions: Vec<Completion>,
    agent_tools: Option<Vec<String>>,
    script: VecDeque<Turn>,
    requests: Vec<Recorded>,
    calls: usize,
}

#[derive(Clone)]
pub struct FakeOpenAi {
    /// What to pass as the LLM base URL: `http://127.0.0.1:<port>/v1`.
    pub base: String,
    expect: Expect,
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
    pub async fn start(expect: Expect) -> FakeOpenAi {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let fake = FakeOpenAi {
            base: format!("http://{addr}/v1"),
            expect,
            st: Arc::default(),
        };
        // A fallback, not a route, so that wrong methods and paths are recorded as problems.
        let app = Router::new().fallback(chat).with_state(fake.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        fake
    }

    /// From now on, every plain completion is checked against `c`.
    pub fn expect_completion(&self, c: Completion) {
        self.st.lock().unwrap().completions = vec![c];
    }

    /// From now on, every plain completion (and agent turn) is checked against the
    /// expectation its system message selects.
    pub fn expect_completions(&self, cs: Vec<Completion>) {
        self.st.lock().unwrap().completions = cs;
    }

    /// From now on, requests with `tools` are a genie's test-conversation turns offering
    /// exactly these tools (not worker turns).
    pub fn expect_agent_tools(&self, names: &[&str]) {
        self.st.lock().unwrap().agent_tools = Some(names.iter().map(|n| n.to_string()).collect());
    }

    /// From now on, requests with `tools` are page chat turns offering exactly these tools
    /// (checked as genie turns, like test conversations).
    pub fn expect_page_tools(&self, names: &[&str]) {
        self.expect_agent_tools(names);
    }

    pub fn push(&self, turns: impl IntoIterator<Item = Turn>) {
        self.st.lock().unwrap().script.extend(turns);
    }
    pub fn requests(&self) -> Vec<Recorded> {
        self.st.lock().unwrap().requests.clone()
    }
    /// The problems of every request so far, in order.
    pub fn problems(&self) -> Vec<String> {
        let st = self.st.lock().unwrap();
        st.requests
            .iter()
            .flat_map(|r| r.problems.iter().cloned())
            .collect()
    }
    /// Points a config at this fake.
    pub fn configure(&self, c: &mut genied::Config) {
        c.llm_base_url = Some(self.base.clone());
        c.llm_api_key = Some(genied::config::Secret(API_KEY.into()));
        c.llm_model = "fake-model".into();
    }
}

fn check(
    expect: Expect,
    agent_tools: bool,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &Value,
) -> Vec<String> {
    let mut p = Vec::new();
    if method != Method::POST {
        p.push(format!("method {method}, want POST"));
    }
    if uri.path() != "/v1/chat/completions" {
        p.push(format!("path {}, want /v1/chat/completions", uri.path()));
    }
    let ct = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !ct.starts_with("application/json") {
        p.push(format!("content-type {ct:?}"));
    }
    if headers.get("authorization").and_then(|v| v.to_str().ok())
        != Some(&format!("Bearer {API_KEY}"))
    {
        p.push("missing or wrong bearer key".to_string());
    }
    if body["model"].as_str().is_none_or(|m| m.is_empty()) {
        p.push("no model".into());
    }
    let msgs = body["messages"].as_array().cloned().unwrap_or_default();
    if msgs.is_empty() || msgs.iter().any(|m| m["role"].as_str().is_none()) {
        p.push("body.messages missing, empty or a message without role".into());
    }
    if body.get("stream").is_some() {
        if body["stream"] != json!(true) {
            p.push(format!("stream {}", body["stream"]));
        }
        if body["stream_options"]["include_usage"] != json!(true) {
            p.push("a streamed request must ask for stream_options.include_usage".into());
        }
    }
    if expect == Expect::Worker || (body.get("tools").is_some() && !agent_tools) {
        check_worker_turn(body, &msgs, &mut p);
    }
    p
}

/// A genie's test-conversation turn with tools: the expected names, well-formed functions,
/// every assistant tool call followed by one tool result per call, with its id.
fn check_agent_turn(names: &[String], body: &Value, p: &mut Vec<String>) {
    let tools = body["tools"].as_array().cloned().unwrap_or_default();
    let got: Vec<&str> = tools
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    if got != names {
        p.push(format!("agent tool names {got:?}, want {names:?}"));
    }
    for t in &tools {
        if t["type"] != "function"
            || t["function"]["parameters"]["type"] != "object"
            || !t["function"]["description"].is_string()
        {
            p.push(format!("bad tool schema {t}"));
        }
    }
    let msgs = body["messages"].as_array().cloned().unwrap_or_default();
    if msgs.first().is_none_or(|m| m["role"] != "system") {
        p.push("genie turns must start with system".into());
    }
    for (i, m) in msgs.iter().enumerate() {
        let calls = m["tool_calls"].as_array().cloned().unwrap_or_default();
        for (k, c) in calls.iter().enumerate() {
            let t = msgs.get(i + 1 + k).cloned().unwrap_or(Value::Null);
            if t["role"] != "tool" || t["tool_call_id"] != c["id"] || !t["content"].is_string() {
                p.push(format!("tool result for {} missing", c["id"]));
            }
        }
    }
}

fn check_completion(c: &Completion, body: &Value, p: &mut Vec<String>) {
    if body["model"] != json!(c.model) {
        p.push(format!("model {}, want {:?}", body["model"], c.model));
    }
    let temp = body.get("temperature").and_then(Value::as_f64);
    let temp_ok = match (temp, c.temperature) {
        (Some(got), Some(want)) => (got - want).abs() < 1e-9,
        (None, None) => true,
        _ => false,
    };
    if !temp_ok {
        p.push(format!(
            "temperature {:?}, want {:?}",
            body.get("temperature"),
            c.temperature
        ));
    }
    if body.get("max_tokens").and_then(Value::as_i64) != c.max_tokens {
        p.push(format!(
            "max_tokens {:?}, want {:?}",
            body.get("max_tokens"),
            c.max_tokens
        ));
    }
    let msgs = body["messages"].as_array().cloned().unwrap_or_default();
    let system = msgs
        .first()
        .filter(|m| m["role"] == "system")
        .and_then(|m| m["content"].as_str())
        .unwrap_or("");
    for want in &c.system_contains {
        if !system.contains(want.as_str()) {
            p.push(format!("system message lacks {want:?}: {system:?}"));
        }
    }
    for bad in &c.nowhere {
        if msgs.iter().any(|m| {
            m["content"]
                .as_str()
                .is_some_and(|t| t.contains(bad.as_str()))
        }) {
            p.push(format!("a message contains {bad:?}"));
        }
    }
}

fn check_worker_turn(body: &Value, msgs: &[Value], p: &mut Vec<String>) {
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
}

/// The completion for `turn`, the `n`th request; `model` is echoed as a real endpoint does.
fn answer(turn: &Turn, n: usize, model: &Value) -> (StatusCode, Value) {
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
        Turn::Slow(_, inner) => return answer(inner, n, model),
        Turn::Raw(status, body) => return (StatusCode::from_u16(*status).unwrap(), body.clone()),
        Turn::Paced(_, pieces) => json!({"role": "assistant", "content": pieces.concat()}),
    };
    let finish = if matches!(turn, Turn::Tools(_)) {
        "tool_calls"
    } else {
        "stop"
    };
    let body = json!({
        "id": format!("chatcmpl-{n}"), "object": "chat.completion", "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    });
    (StatusCode::OK, body)
}

async fn chat(
    State(fake): State<FakeOpenAi>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let agent_tools = fake.st.lock().unwrap().agent_tools.clone();
    let mut problems = check(
        fake.expect,
        agent_tools.is_some(),
        &method,
        &uri,
        &headers,
        &json,
    );
    let model = json["model"].clone();
    let streamed = json["stream"] == json!(true);
    let (turn, n) = {
        let mut s = fake.st.lock().unwrap();
        let tools = json.get("tools").is_some();
        if let (Some(names), true) = (&agent_tools, tools) {
            check_agent_turn(names, &json, &mut problems);
        }
        if !s.completions.is_empty() && (!tools || agent_tools.is_some()) {
            let system = json["messages"][0]["content"].as_str().unwrap_or("");
            match s.completions.iter().find(|c| {
                c.select
                    .as_ref()
                    .is_none_or(|t| system.contains(t.as_str()))
            }) {
                Some(c) => check_completion(c, &json, &mut problems),
                None => problems.push(format!("no expectation selects system message {system:?}")),
            }
        }
        s.requests.push(Recorded {
            method: method.to_string(),
            path: uri.path().to_string(),
            headers,
            body: json,
            problems: problems.clone(),
        });
        s.calls += 1;
        if !problems.is_empty() {
            // A bad request does not use up a scripted answer.
            return (
                StatusCode::BAD_REQUEST,
                Json(json!({"error": {"message": problems.join("; ")}})),
            )
                .into_response();
        }
        (
            s.script
                .pop_front()
                .unwrap_or(Turn::Answer("nothing more scripted")),
            s.calls,
        )
    };
    if let Turn::Slow(d, _) = &turn {
        tokio::time::sleep(*d).await;
    }
    if streamed && !matches!(turn, Turn::Raw(..)) {
        return stream(turn, n, model);
    }
    let (status, body) = answer(&turn, n, &model);
    (status, Json(body)).into_response()
}

/// The turn as an OpenAI stream: content in pieces (words, or the paced pieces), tool calls
/// split across chunks (name and id first, the arguments in two halves), the finish reason,
/// a usage chunk, then `[DONE]`.
fn stream(turn: Turn, n: usize, model: Value) -> Response {
    let chunk = |choices: Value, usage: Option<Value>| {
        let mut c = json!({"id": format!("chatcmpl-{n}"), "object": "chat.completion.chunk", "model": model, "choices": choices});
        if let Some(u) = usage {
            c["usage"] = u;
        }
        format!("data: {c}\n\n")
    };
    let turn = match turn {
        Turn::Slow(_, inner) => *inner,
        t => t,
    };
    let mut events: Vec<(Duration, String)> = Vec::new();
    let delta = |d: Value| json!([{"index": 0, "delta": d, "finish_reason": null}]);
    let finish = match &turn {
        Turn::Answer(text) => {
            events.push((
                Duration::ZERO,
                chunk(delta(json!({"role": "assistant", "content": ""})), None),
            ));
            for w in text.split_inclusive(' ') {
                events.push((Duration::ZERO, chunk(delta(json!({"content": w})), None)));
            }
            "stop"
        }
        Turn::Paced(wait, pieces) => {
            for p in pieces {
                events.push((*wait, chunk(delta(json!({"content": p})), None)));
            }
            "stop"
        }
        Turn::Tools(calls) => {
            for (k, (name, args)) in calls.iter().enumerate() {
                let a = args.to_string();
                let (x, y) = a.split_at(a.len() / 2);
                events.push((Duration::ZERO, chunk(delta(json!({"tool_calls": [{"index": k, "id": format!("call_{n}_{k}"), "type": "function", "function": {"name": name, "arguments": ""}}]})), None)));
                events.push((
                    Duration::ZERO,
                    chunk(
                        delta(json!({"tool_calls": [{"index": k, "function": {"arguments": x}}]})),
                        None,
                    ),
                ));
                events.push((
                    Duration::ZERO,
                    chunk(
                        delta(json!({"tool_calls": [{"index": k, "function": {"arguments": y}}]})),
                        None,
                    ),
                ));
            }
            "tool_calls"
        }
        Turn::Slow(..) | Turn::Raw(..) => unreachable!(),
    };
    events.push((
        Duration::ZERO,
        chunk(
            json!([{"index": 0, "delta": {}, "finish_reason": finish}]),
            None,
        ),
    ));
    events.push((
        Duration::ZERO,
        chunk(
            json!([]),
            Some(json!({"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15})),
        ),
    ));
    events.push((Duration::ZERO, "data: [DONE]\n\n".to_string()));
    let body = futures::stream::unfold(events.into_iter(), |mut it| async move {
        let (wait, text) = it.next()?;
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        Some((Ok::<_, std::convert::Infallible>(text), it))
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(axum::body::Body::from_stream(body))
        .unwrap()
}
