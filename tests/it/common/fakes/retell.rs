//! A fake of the Retell AI API, built from its SDKs and OpenAPI document (see
//! shared/reference/retell.md). It checks `Authorization: Bearer`, the method, path, content
//! type and body of every call, answers Retell's `{"status":"error","message"}` errors
//! (422 "Cannot find requested asset" for unknown ids, 400 for out-of-range fields, 429 for
//! the rate limit), keeps LLMs, agents, knowledge bases, numbers and calls in memory, and
//! records every request. `fail(op, status, times)` makes the next calls of an operation fail.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::form;

pub const KEY: &str = "key_retell_test_0123456789";

#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub authorization: Option<String>,
    pub content_type: Option<String>,
    pub body: Value,
    /// Multipart parts (name, text), for uploads.
    pub parts: Vec<(String, String)>,
}

#[derive(Default)]
pub struct FakeState {
    pub requests: Vec<Recorded>,
    pub llms: HashMap<String, Value>,
    pub agents: HashMap<String, Value>,
    pub knowledge_bases: HashMap<String, Value>,
    pub phone_numbers: HashMap<String, Value>,
    pub calls: HashMap<String, Value>,
    pub failures: HashMap<String, (u16, u32)>,
    seq: u64,
}

#[derive(Clone)]
pub struct FakeRetell {
    pub base: String,
    pub state: Arc<Mutex<FakeState>>,
}

fn err(status: u16, message: &str) -> Response {
    (
        StatusCode::from_u16(status).unwrap(),
        axum::Json(json!({"status": "error", "message": message})),
    )
        .into_response()
}

fn missing() -> Response {
    err(422, "Cannot find requested asset under given api key.")
}

fn created(v: Value) -> Response {
    (StatusCode::CREATED, axum::Json(v)).into_response()
}

fn ok(v: Value) -> Response {
    axum::Json(v).into_response()
}

fn no_content() -> Response {
    StatusCode::NO_CONTENT.into_response()
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

fn new_id(st: &mut FakeState, prefix: &str) -> String {
    st.seq += 1;
    format!("{prefix}{:024x}", st.seq)
}

fn range(errs: &mut Vec<String>, b: &Value, k: &str, lo: f64, hi: f64) {
    let v = &b[k];
    if v.is_null() {
        return;
    }
    if !v.as_f64().is_some_and(|x| (lo..=hi).contains(&x)) {
        errs.push(format!("{k} must be between {lo} and {hi}"));
    }
}

const LLM_FIELDS: &[&str] = &[
    "general_prompt",
    "begin_message",
    "start_speaker",
    "model",
    "model_temperature",
    "knowledge_base_ids",
    "general_tools",
    "states",
    "default_dynamic_variables",
    "kb_config",
];
const AGENT_FIELDS: &[&str] = &[
    "response_engine",
    "voice_id",
    "agent_name",
    "voice_speed",
    "voice_temperature",
    "language",
    "max_call_duration_ms",
    "end_call_after_silence_ms",
    "reminder_trigger_ms",
    "reminder_max_count",
    "webhook_url",
    "webhook_events",
    "interruption_sensitivity",
    "responsiveness",
    "post_call_analysis_data",
];

fn check(st: &FakeState, b: &Value, fields: &[&str]) -> Vec<String> {
    let mut errs = Vec::new();
    for k in b.as_object().into_iter().flat_map(|o| o.keys()) {
        if !fields.contains(&k.as_str()) {
            errs.push(format!("Unknown field {k}"));
        }
    }
    range(&mut errs, b, "model_temperature", 0.0, 1.0);
    range(&mut errs, b, "voice_speed", 0.5, 2.0);
    range(&mut errs, b, "max_call_duration_ms", 60_000.0, 7_200_000.0);
    range(
        &mut errs,
        b,
        "end_call_after_silence_ms",
        10_000.0,
        f64::MAX,
    );
    if let Some(s) = b.get("start_speaker")
        && !["agent", "user"].contains(&s.as_str().unwrap_or(""))
    {
        errs.push("start_speaker must be agent or user".into());
    }
    if let Some(ids) = b["knowledge_base_ids"].as_array() {
        for id in ids {
            if !id
                .as_str()
                .is_some_and(|i| st.knowledge_bases.contains_key(i))
            {
                errs.push(format!("knowledge base {id} not found"));
            }
        }
    }
    if let Some(tools) = b.get("general_tools") {
        let mut names = Vec::new();
        for t in tools.as_array().into_iter().flatten() {
            let name = t["name"].as_str().unwrap_or("");
            if name.is_empty()
                || name.len() > 64
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                errs.push(format!("general_tools: invalid tool name {name:?}"));
            }
            if names.contains(&name) {
                errs.push(format!("general_tools: tool name {name} is not unique"));
            }
            names.push(name);
            match t["type"].as_str() {
                Some("end_call") => {}
                Some("custom") => {
                    if !t["url"].as_str().is_some_and(|u| u.starts_with("http")) {
                        errs.push(format!("general_tools: {name}: url must be a URL"));
                    }
                    if !["GET", "POST", "PUT", "PATCH", "DELETE"]
                        .contains(&t["method"].as_str().unwrap_or("POST"))
                    {
                        errs.push(format!("general_tools: {name}: method"));
                    }
                    if !t["parameters"].is_null() && t["parameters"]["type"] != json!("object") {
                        errs.push(format!(
                            "general_tools: {name}: parameters must be an object schema"
                        ));
                    }
                    if !t["timeout_ms"]
                        .as_u64()
                        .is_none_or(|ms| (1_000..=600_000).contains(&ms))
                    {
                        errs.push(format!("general_tools: {name}: timeout_ms"));
                    }
                }
                other => errs.push(format!("general_tools: unknown tool type {other:?}")),
            }
        }
        if !tools.is_array() {
            errs.push("general_tools must be an array".into());
        }
    }
    if let Some(v) = b.get("voice_id")
        && !v.as_str().is_some_and(|v| v.contains('-'))
    {
        errs.push("voice_id is not a valid voice".into());
    }
    errs
}

fn merge_top(target: &mut Value, patch: &Value) {
    if let (Some(t), Some(p)) = (target.as_object_mut(), patch.as_object()) {
        for (k, v) in p {
            t.insert(k.clone(), v.clone());
        }
    }
}

async fn handle(
    State(s): State<Arc<Mutex<FakeState>>>,
    method: Method,
    uri: Uri,
    RawQuery(_query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    let ct = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let is_multipart = ct
        .as_deref()
        .is_some_and(|c| c.starts_with("multipart/form-data"));
    let parts = if is_multipart {
        form::parse(&headers, body.clone()).await
    } else {
        Ok(Vec::new())
    };
    let parsed: Value = if body.is_empty() || is_multipart {
        Value::Null
    } else {
        serde_json::from_slice(&body).unwrap_or(json!({"__invalid_json": true}))
    };
    let mut st = s.lock().unwrap();
    st.requests.push(Recorded {
        method: method.to_string(),
        path: path.clone(),
        authorization: auth.clone(),
        content_type: ct.clone(),
        body: parsed.clone(),
        parts: parts
            .as_ref()
            .map(|ps| ps.iter().map(|p| (p.name.clone(), p.text())).collect())
            .unwrap_or_default(),
    });
    if auth.as_deref() != Some(&format!("Bearer {KEY}")) {
        return err(401, "Unauthorized: API key is invalid.");
    }
    let decoded: Vec<String> = path
        .trim_start_matches('/')
        .split('/')
        .map(|p| {
            percent_encoding::percent_decode_str(p)
                .decode_utf8_lossy()
                .into_owned()
        })
        .collect();
    let segs: Vec<&str> = decoded.iter().map(String::as_str).collect();
    let op = match (&method, segs.as_slice()) {
        (&Method::POST, ["create-retell-llm"]) => "create_llm",
        (&Method::GET, ["get-retell-llm", _]) => "get_llm",
        (&Method::PATCH, ["update-retell-llm", _]) => "update_llm",
        (&Method::DELETE, ["delete-retell-llm", _]) => "delete_llm",
        (&Method::POST, ["create-agent"]) => "create_agent",
        (&Method::GET, ["get-agent", _]) => "get_agent",
        (&Method::PATCH, ["update-agent", _]) => "update_agent",
        (&Method::DELETE, ["delete-agent", _]) => "delete_agent",
        (&Method::POST, ["create-knowledge-base"]) => "create_kb",
        (&Method::DELETE, ["delete-knowledge-base", _]) => "delete_kb",
        (&Method::POST, ["create-phone-number"]) => "create_phone_number",
        (&Method::POST, ["import-phone-number"]) => "import_phone_number",
        (&Method::DELETE, ["delete-phone-number", _]) => "delete_phone_number",
        (&Method::GET, ["list-voices"]) => "list_voices",
        (&Method::POST, ["v3", "list-calls"]) => "list_calls",
        (&Method::GET, ["v2", "get-call", _]) => "get_call",
        (&Method::POST, ["v2", "create-phone-call"]) => "create_phone_call",
        _ => return err(404, &format!("Cannot {method} {path}")),
    };
    if let Some((status, left)) = st.failures.get_mut(op)
        && *left > 0
    {
        *left -= 1;
        let status = *status;
        return if status == 429 {
            err(429, "Account rate limited, please throttle your requests.")
        } else {
            err(status, &format!("{op} failed in the fake"))
        };
    }
    let json_body = matches!(method, Method::POST | Method::PATCH) && op != "create_kb";
    if json_body
        && (!ct
            .as_deref()
            .is_some_and(|c| c.starts_with("application/json"))
            || !parsed.is_object())
    {
        return err(400, "Request body must be a JSON object");
    }
    let id = segs.last().map(|s| s.to_string()).unwrap_or_default();
    match op {
        "create_llm" => {
            let errs = check(&st, &parsed, LLM_FIELDS);
            if !errs.is_empty() {
                return err(400, &errs.join("; "));
            }
            let id = new_id(&mut st, "llm_");
            let mut l = parsed.clone();
            l["llm_id"] = json!(id);
            l["version"] = json!(0);
            l["is_published"] = json!(false);
            l["last_modification_timestamp"] = json!(now_ms());
            st.llms.insert(id, l.clone());
            created(l)
        }
        "get_llm" => st.llms.get(&id).cloned().map_or_else(missing, ok),
        "update_llm" => {
            if !st.llms.contains_key(&id) {
                return missing();
            }
            let errs = check(&st, &parsed, LLM_FIELDS);
            if !errs.is_empty() {
                return err(400, &errs.join("; "));
            }
            let l = st.llms.get_mut(&id).unwrap();
            merge_top(l, &parsed);
            ok(l.clone())
        }
        "delete_llm" => {
            if st
                .agents
                .values()
                .any(|a| a["response_engine"]["llm_id"] == json!(id))
            {
                return err(409, "Retell LLM is in use by an agent");
            }
            st.llms.remove(&id).map_or_else(missing, |_| no_content())
        }
        "create_agent" => {
            let mut errs = check(&st, &parsed, AGENT_FIELDS);
            let re = &parsed["response_engine"];
            if re.is_null() || parsed["voice_id"].is_null() {
                errs.push("response_engine and voice_id are required".into());
            } else if re["type"] != json!("retell-llm")
                || !re["llm_id"]
                    .as_str()
                    .is_some_and(|l| st.llms.contains_key(l))
            {
                errs.push("response_engine must name an existing Retell LLM".into());
            }
            if !errs.is_empty() {
                return err(400, &errs.join("; "));
            }
            let id = new_id(&mut st, "agent_");
            let mut a = parsed.clone();
            a["agent_id"] = json!(id);
            a["version"] = json!(0);
            a["is_published"] = json!(false);
            a["last_modification_timestamp"] = json!(now_ms());
            st.agents.insert(id, a.clone());
            created(a)
        }
        "get_agent" => st.agents.get(&id).cloned().map_or_else(missing, ok),
        "update_agent" => {
            if !st.agents.contains_key(&id) {
                return missing();
            }
            let errs = check(&st, &parsed, AGENT_FIELDS);
            if !errs.is_empty() {
                return err(400, &errs.join("; "));
            }
            let a = st.agents.get_mut(&id).unwrap();
            merge_top(a, &parsed);
            ok(a.clone())
        }
        "delete_agent" => st.agents.remove(&id).map_or_else(missing, |_| no_content()),
        "create_kb" => {
            let Ok(parts) = parts else {
                return err(400, "Request body must be multipart/form-data");
            };
            let field = |n: &str| parts.iter().find(|p| p.name == n).map(|p| p.text());
            let Some(name) = field("knowledge_base_name") else {
                return err(400, "knowledge_base_name is required");
            };
            if name.chars().count() >= 40 {
                return err(400, "knowledge_base_name must be less than 40 characters");
            }
            let texts: Value = match field("knowledge_base_texts") {
                Some(t) => match serde_json::from_str::<Value>(&t) {
                    Ok(v)
                        if v.as_array().is_some_and(|a| {
                            a.iter()
                                .all(|x| x["title"].is_string() && x["text"].is_string())
                        }) =>
                    {
                        v
                    }
                    _ => {
                        return err(
                            400,
                            "knowledge_base_texts must be a JSON list of {title, text}",
                        );
                    }
                },
                None => json!([]),
            };
            let id = new_id(&mut st, "knowledge_base_");
            let kb = json!({"knowledge_base_id": id, "knowledge_base_name": name,
                "status": "in_progress", "texts": texts, "enable_auto_refresh": false});
            st.knowledge_bases.insert(id, kb.clone());
            created(kb)
        }
        "delete_kb" => st
            .knowledge_bases
            .remove(&id)
            .map_or_else(missing, |_| no_content()),
        "create_phone_number" => {
            for key in ["inbound_agents", "outbound_agents"] {
                if let Some(list) = parsed[key].as_array() {
                    let weights: f64 = list.iter().filter_map(|a| a["weight"].as_f64()).sum();
                    let known = list.iter().all(|a| {
                        a["agent_id"]
                            .as_str()
                            .is_some_and(|i| st.agents.contains_key(i))
                    });
                    if (weights - 1.0).abs() > 1e-9 || !known {
                        return err(
                            400,
                            &format!("{key} must name existing agents with weights summing to 1"),
                        );
                    }
                }
            }
            st.seq += 1;
            let number = format!("+1415777{:04}", st.seq % 10000);
            let mut n = parsed.clone();
            n["phone_number"] = json!(number);
            n["phone_number_type"] = json!("retell-twilio");
            n["last_modification_timestamp"] = json!(now_ms());
            st.phone_numbers.insert(number, n.clone());
            created(n)
        }
        "import_phone_number" => {
            // Required: the number (E.164) and where to send calls; the agents as at create.
            let number = parsed["phone_number"].as_str().unwrap_or("");
            let e164 = number.strip_prefix('+').is_some_and(|d| {
                (7..=15).contains(&d.len()) && d.bytes().all(|b| b.is_ascii_digit())
            });
            if !e164 || parsed["termination_uri"].as_str().is_none_or(str::is_empty) {
                return err(400, "phone_number (E.164) and termination_uri are required");
            }
            let allowed = [
                "phone_number",
                "termination_uri",
                "sip_trunk_auth_username",
                "sip_trunk_auth_password",
                "transport",
                "nickname",
                "inbound_agents",
                "outbound_agents",
                "inbound_webhook_url",
            ];
            if let Some(k) = parsed
                .as_object()
                .unwrap()
                .keys()
                .find(|k| !allowed.contains(&k.as_str()))
            {
                return err(400, &format!("unknown field {k}"));
            }
            for key in ["inbound_agents", "outbound_agents"] {
                let list = parsed[key].as_array().cloned().unwrap_or_default();
                let weights: f64 = list.iter().filter_map(|a| a["weight"].as_f64()).sum();
                let known = list.iter().all(|a| {
                    a["agent_id"]
                        .as_str()
                        .is_some_and(|i| st.agents.contains_key(i))
                });
                if !list.is_empty() && ((weights - 1.0).abs() > 1e-9 || !known) {
                    return err(
                        400,
                        &format!("{key} must name existing agents with weights summing to 1"),
                    );
                }
            }
            if st.phone_numbers.contains_key(number) {
                return err(409, "phone number already exists");
            }
            // The password is write-only at Retell.
            let n = json!({
                "phone_number": number, "phone_number_type": "custom", "nickname": parsed["nickname"],
                "inbound_agents": parsed["inbound_agents"], "outbound_agents": parsed["outbound_agents"],
                "sip_outbound_trunk_config": {"termination_uri": parsed["termination_uri"],
                    "auth_username": parsed["sip_trunk_auth_username"], "transport": "TCP"},
                "last_modification_timestamp": now_ms(),
            });
            st.phone_numbers.insert(number.to_string(), n.clone());
            created(n)
        }
        "delete_phone_number" => st
            .phone_numbers
            .remove(&id)
            .map_or_else(missing, |_| no_content()),
        "list_voices" => ok(json!([
            {"voice_id": "11labs-Adrian", "voice_name": "Adrian", "provider": "elevenlabs", "gender": "male", "accent": "American", "age": "Young", "preview_audio_url": "https://retell.example/adrian.mp3"},
            {"voice_id": "openai-Alloy", "voice_name": "Alloy", "provider": "openai", "gender": "female"}
        ])),
        "list_calls" => {
            let agents: Vec<String> = parsed["filter_criteria"]["agent"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x["agent_id"].as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            let limit = parsed["limit"].as_u64().unwrap_or(50) as usize;
            if limit == 0 || limit > 1000 {
                return err(400, "limit must be between 1 and 1000");
            }
            let mut calls: Vec<Value> = st
                .calls
                .values()
                .filter(|c| {
                    agents.is_empty() || agents.iter().any(|a| c["agent_id"].as_str() == Some(a))
                })
                .cloned()
                .collect();
            calls.sort_by_key(|c| std::cmp::Reverse(c["start_timestamp"].as_i64()));
            let skip: usize = parsed["pagination_key"]
                .as_str()
                .and_then(|k| k.strip_prefix("page-"))
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            let page: Vec<Value> = calls
                .iter()
                .skip(skip)
                .take(limit)
                .map(|c| {
                    let mut c = c.clone();
                    if let Some(o) = c.as_object_mut() {
                        // Listings leave the transcript fields out.
                        o.remove("transcript_object");
                        o.remove("transcript");
                    }
                    c
                })
                .collect();
            let has_more = skip + limit < calls.len();
            ok(json!({"items": page, "has_more": has_more,
                "pagination_key": if has_more { json!(format!("page-{}", skip + limit)) } else { Value::Null }}))
        }
        "get_call" => st.calls.get(&id).cloned().map_or_else(missing, ok),
        "create_phone_call" => {
            let from = parsed["from_number"].as_str().unwrap_or("");
            let to = parsed["to_number"].as_str().unwrap_or("");
            if !st.phone_numbers.contains_key(from) {
                return err(
                    400,
                    "from_number must be a number bought from or imported into Retell",
                );
            }
            if !(to.starts_with('+') && to.len() > 7) {
                return err(400, "to_number must be in E.164 format");
            }
            if let Some(a) = parsed["override_agent_id"].as_str()
                && !st.agents.contains_key(a)
            {
                return missing();
            }
            let vars_ok = parsed["retell_llm_dynamic_variables"]
                .as_object()
                .is_none_or(|o| o.values().all(Value::is_string));
            if !vars_ok {
                return err(400, "retell_llm_dynamic_variables values must be strings");
            }
            let id = new_id(&mut st, "call_");
            let call = json!({"call_id": id, "call_type": "phone_call", "call_status": "registered",
                "agent_id": parsed["override_agent_id"], "from_number": from, "to_number": to,
                "direction": "outbound", "metadata": parsed["metadata"],
                "retell_llm_dynamic_variables": parsed["retell_llm_dynamic_variables"]});
            st.calls.insert(id, call.clone());
            created(call)
        }
        _ => unreachable!(),
    }
}

impl FakeRetell {
    pub async fn start() -> FakeRetell {
        let state = Arc::new(Mutex::new(FakeState::default()));
        let app = Router::new().fallback(handle).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeRetell {
            base: format!("http://{addr}"),
            state,
        }
    }

    pub fn fail(&self, op: &str, status: u16, times: u32) {
        self.state
            .lock()
            .unwrap()
            .failures
            .insert(op.to_string(), (status, times));
    }
    pub fn requests(&self) -> Vec<Recorded> {
        self.state.lock().unwrap().requests.clone()
    }
    pub fn clear_requests(&self) {
        self.state.lock().unwrap().requests.clear();
    }
    pub fn agent(&self, id: &str) -> Option<Value> {
        self.state.lock().unwrap().agents.get(id).cloned()
    }
    /// Changes an agent as the Retell dashboard would.
    pub fn edit_agent(&self, id: &str, f: impl FnOnce(&mut Value)) {
        f(self
            .state
            .lock()
            .unwrap()
            .agents
            .get_mut(id)
            .expect("agent"));
    }
    /// Changes a Retell LLM as the dashboard would.
    pub fn edit_llm(&self, id: &str, f: impl FnOnce(&mut Value)) {
        f(self.state.lock().unwrap().llms.get_mut(id).expect("llm"));
    }
    pub fn llm(&self, id: &str) -> Option<Value> {
        self.state.lock().unwrap().llms.get(id).cloned()
    }
    pub fn counts(&self) -> (usize, usize) {
        let st = self.state.lock().unwrap();
        (st.agents.len(), st.llms.len())
    }
    pub fn knowledge_base(&self, id: &str) -> Option<Value> {
        self.state.lock().unwrap().knowledge_bases.get(id).cloned()
    }
    pub fn phone(&self, number: &str) -> Option<Value> {
        self.state
            .lock()
            .unwrap()
            .phone_numbers
            .get(number)
            .cloned()
    }
    pub fn call(&self, id: &str) -> Option<Value> {
        self.state.lock().unwrap().calls.get(id).cloned()
    }
    pub fn add_call(&self, c: Value) {
        let id = c["call_id"].as_str().unwrap().to_string();
        self.state.lock().unwrap().calls.insert(id, c);
    }
}
