//! A fake OpenAI-compatible endpoint for simulated phone calls: it answers each request by
//! the role its system message gives it (the genie on the call, the simulated callee, the
//! conversation analysis), so any number of calls can run at once without a script.
//!
//! Every request is checked: `POST /v1/chat/completions`, JSON, the bearer key, a model
//! (the genie's own for genie turns), a system message first and roles that alternate
//! after it, ending with the other side's line; genie turns must carry the genie's prompt
//! and the call's context; callee turns the callee's name, number and the campaign's
//! persona. A request that fails is answered 400 and its problems are recorded.
//!
//! It also measures: how many calls were open at once (a call opens with the callee's first
//! line and closes when its transcript arrives for analysis, both inside the service's call
//! slot), and how many times each number's callee picked up.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use serde_json::{Value, json};

pub const API_KEY: &str = "test-call-llm-key";
const CALLEE_MARK: &str = "You play the person who answers an outbound phone call";
const ANALYSIS_MARK: &str = "You analyse transcripts";

#[derive(Default)]
struct St {
    problems: Vec<String>,
    requests: usize,
    /// Open calls by callee name.
    open: HashMap<String, ()>,
    max_open: usize,
    /// First callee lines by number: how often each number's callee picked up.
    pickups: HashMap<String, usize>,
    analyses: usize,
}

#[derive(Clone)]
pub struct FakeCallLlm {
    /// What to pass as the LLM base URL.
    pub base: String,
    genie_prompt: String,
    genie_model: String,
    persona: Option<String>,
    delay: Arc<Mutex<Duration>>,
    st: Arc<Mutex<St>>,
}

impl FakeCallLlm {
    /// `genie_prompt`: text every genie turn's system message must hold; `genie_model` the
    /// model genie turns must ask for; `persona`: text every callee turn must hold.
    pub async fn start(
        genie_prompt: &str,
        genie_model: &str,
        persona: Option<&str>,
    ) -> FakeCallLlm {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let fake = FakeCallLlm {
            base: format!("http://{addr}/v1"),
            genie_prompt: genie_prompt.into(),
            genie_model: genie_model.into(),
            persona: persona.map(str::to_string),
            delay: Arc::new(Mutex::new(Duration::from_millis(5))),
            st: Arc::default(),
        };
        let app = Router::new().fallback(chat).with_state(fake.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        fake
    }

    /// How long each answer takes from now on.
    pub fn set_delay(&self, d: Duration) {
        *self.delay.lock().unwrap() = d;
    }
    pub fn configure(&self, c: &mut genied::Config) {
        c.llm_base_url = Some(self.base.clone());
        c.llm_api_key = Some(genied::config::Secret(API_KEY.into()));
        c.llm_model = "fake-default".into();
    }
    pub fn problems(&self) -> Vec<String> {
        self.st.lock().unwrap().problems.clone()
    }
    pub fn requests(&self) -> usize {
        self.st.lock().unwrap().requests
    }
    pub fn max_open_calls(&self) -> usize {
        self.st.lock().unwrap().max_open
    }
    pub fn pickups(&self) -> HashMap<String, usize> {
        self.st.lock().unwrap().pickups.clone()
    }
    pub fn analyses(&self) -> usize {
        self.st.lock().unwrap().analyses
    }
}

/// `"You are <name>, answering your phone (<number>)."` → (name, number).
fn callee_of(system: &str) -> Option<(String, String)> {
    let rest = system.split("You are ").nth(1)?;
    let (name, rest) = rest.split_once(", answering your phone (")?;
    let (number, _) = rest.split_once(')')?;
    Some((name.to_string(), number.to_string()))
}

/// The callee's name in an analysed transcript: the line "user: Hi, this is <name>. …".
fn name_in_transcript(text: &str) -> Option<String> {
    let rest = text.split("user: Hi, this is ").nth(1)?;
    Some(rest.split(". Who is calling?").next()?.to_string())
}

async fn chat(
    State(fake): State<FakeCallLlm>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let delay = *fake.delay.lock().unwrap();
    let mut p = Vec::new();
    if method != Method::POST || uri.path() != "/v1/chat/completions" {
        p.push(format!(
            "{method} {}, want POST /v1/chat/completions",
            uri.path()
        ));
    }
    if !headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
    {
        p.push("content-type is not JSON".into());
    }
    if headers.get("authorization").and_then(|v| v.to_str().ok())
        != Some(&format!("Bearer {API_KEY}"))
    {
        p.push("wrong or missing bearer key".into());
    }
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let msgs = v["messages"].as_array().cloned().unwrap_or_default();
    if v["model"].as_str().is_none_or(str::is_empty) {
        p.push("no model".into());
    }
    let system = msgs
        .first()
        .filter(|m| m["role"] == "system")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string();
    if system.is_empty() {
        p.push("the first message is not a system message".into());
    }
    let rest = &msgs[1.min(msgs.len())..];
    for (i, m) in rest.iter().enumerate() {
        let want = if (rest.len() - i) % 2 == 1 {
            "user"
        } else {
            "assistant"
        };
        if m["role"] != want || m["content"].as_str().is_none_or(str::is_empty) {
            p.push(format!(
                "message {} is {} (want a {want} line)",
                i + 1,
                m["role"]
            ));
        }
    }
    let answer: String = if system.starts_with(ANALYSIS_MARK) {
        let text = rest
            .first()
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_string();
        if !text.contains("Transcript:") {
            p.push("an analysis without a transcript".into());
        }
        let mut st = fake.st.lock().unwrap();
        st.analyses += 1;
        if let Some(name) = name_in_transcript(&text) {
            st.open.remove(&name);
        }
        json!({"summary": "The callee heard the offer and will think about it.", "intent": "information",
               "sentiment": "positive", "contact": {"name": null, "email": null, "phone": null, "budget": null, "timeline": null}})
        .to_string()
    } else if system.starts_with(CALLEE_MARK) {
        match callee_of(&system) {
            None => {
                p.push("a callee turn without the callee's name and number".into());
                String::new()
            }
            Some((name, number)) => {
                if let Some(persona) = &fake.persona
                    && !system.contains(persona.as_str())
                {
                    p.push("a callee turn without the campaign's persona".into());
                }
                let spoken = rest.iter().filter(|m| m["role"] == "assistant").count();
                if spoken == 0 {
                    let mut st = fake.st.lock().unwrap();
                    *st.pickups.entry(number).or_default() += 1;
                    st.open.insert(name.clone(), ());
                    st.max_open = st.max_open.max(st.open.len());
                }
                match spoken {
                    0 => format!("Hi, this is {name}. Who is calling?"),
                    1 => "Sounds interesting, tell me more.".into(),
                    _ => "Thanks, that is all I need. Goodbye.".into(),
                }
            }
        }
    } else {
        if !system.contains(&fake.genie_prompt) || !system.contains("outbound phone call") {
            p.push("a genie turn without the genie's prompt and the call's context".into());
        }
        if v["model"] != json!(fake.genie_model) {
            p.push(format!("genie turn asked for model {}", v["model"]));
        }
        "We install solar panels; may I send you a quote?".into()
    };
    tokio::time::sleep(delay).await;
    let mut st = fake.st.lock().unwrap();
    st.requests += 1;
    if !p.is_empty() {
        st.problems.extend(p.iter().cloned());
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": {"message": p.join("; ")}})),
        )
            .into_response();
    }
    Json(json!({
        "id": format!("chatcmpl-{}", st.requests),
        "object": "chat.completion",
        "model": v["model"],
        "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }))
    .into_response()
}
