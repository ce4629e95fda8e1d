//! A fake OpenAI-compatible endpoint: `POST {base}/chat/completions`. It checks every
//! request (method, path, JSON content type, bearer key when one is expected, a `model`
//! string and a non-empty `messages` array), records it, and answers with the next scripted
//! response. A request that fails a check is answered 400 and recorded with `ok: false`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
    /// Whether the request passed the checks.
    pub ok: bool,
    pub problem: Option<String>,
}

#[derive(Default)]
struct Inner {
    requests: Vec<Recorded>,
    script: VecDeque<(u16, Value)>,
}

#[derive(Clone)]
pub struct FakeLlm {
    /// What to pass as `--llm-base-url`: `http://127.0.0.1:<port>/v1`.
    pub base_url: String,
    expected_key: Option<String>,
    inner: Arc<Mutex<Inner>>,
}

impl FakeLlm {
    /// Starts the server; with `expected_key` every request must carry `Bearer <key>`.
    pub async fn start(expected_key: Option<&str>) -> FakeLlm {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let fake = FakeLlm {
            base_url: format!("http://{addr}/v1"),
            expected_key: expected_key.map(str::to_string),
            inner: Arc::default(),
        };
        let app = Router::new().fallback(handle).with_state(fake.clone());
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        fake
    }

    /// Queues an assistant answer whose `content` is `text`.
    pub fn reply_content(&self, text: &str) {
        self.reply_raw(
            200,
            json!({
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }),
        );
    }

    /// Queues an assistant answer that calls one tool.
    pub fn reply_tool_call(&self, call_id: &str, name: &str, arguments: &Value) {
        self.reply_raw(
            200,
            json!({
                "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": [
                    {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments.to_string()}}
                ]}, "finish_reason": "tool_calls"}],
            }),
        );
    }

    /// Queues any answer, e.g. an error status.
    pub fn reply_raw(&self, status: u16, body: Value) {
        self.inner.lock().unwrap().script.push_back((status, body));
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.inner.lock().unwrap().requests.clone()
    }
}

fn check(
    fake: &FakeLlm,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &Value,
) -> Result<(), String> {
    if method != Method::POST {
        return Err(format!("method {method}, want POST"));
    }
    if uri.path() != "/v1/chat/completions" {
        return Err(format!("path {}, want /v1/chat/completions", uri.path()));
    }
    let ct = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !ct.starts_with("application/json") {
        return Err(format!("content-type {ct:?}"));
    }
    if let Some(key) = &fake.expected_key {
        let auth = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if auth != format!("Bearer {key}") {
            return Err("missing or wrong bearer key".into());
        }
    }
    if body["model"].as_str().is_none_or(|m| m.is_empty()) {
        return Err("body.model missing".into());
    }
    let msgs = body["messages"].as_array().ok_or("body.messages missing")?;
    if msgs.is_empty() || msgs.iter().any(|m| m["role"].as_str().is_none()) {
        return Err("body.messages empty or a message without role".into());
    }
    Ok(())
}

async fn handle(
    State(fake): State<FakeLlm>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let verdict = check(&fake, &method, &uri, &headers, &json);
    let mut inner = fake.inner.lock().unwrap();
    inner.requests.push(Recorded {
        method: method.to_string(),
        path: uri.path().to_string(),
        headers,
        body: json,
        ok: verdict.is_ok(),
        problem: verdict.clone().err(),
    });
    if let Err(p) = verdict {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"error": {"message": p}})),
        )
            .into_response();
    }
    match inner.script.pop_front() {
        Some((status, body)) => {
            (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response()
        }
        None => (
            StatusCode::INTERNAL_SERVER_ERROR,
            axum::Json(json!({"error": {"message": "no scripted response"}})),
        )
            .into_response(),
    }
}
