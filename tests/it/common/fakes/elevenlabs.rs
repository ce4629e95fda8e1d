//! A fake of the ElevenLabs Agents Platform API. It checks the `xi-api-key` header, the
//! method, path and body of every call, keeps agents, documents and phone numbers in
//! memory, answers like the real API (including 401 and 422 `detail` errors) and records
//! every request. `fail(op, status)` makes the next calls of an operation fail.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post};
use serde_json::{Value, json};

pub const KEY: &str = "xi-test-key-0123456789";

#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub query: String,
    pub api_key: Option<String>,
    pub body: Value,
}

#[derive(Default)]
pub struct FakeState {
    pub requests: Vec<Recorded>,
    pub agents: HashMap<String, Value>,
    pub documents: HashMap<String, Value>,
    pub phone_numbers: HashMap<String, Value>,
    pub conversations: HashMap<String, Value>,
    /// Agent id → its branches (once versioning is on), and its deployed split.
    pub branches: HashMap<String, Vec<Value>>,
    pub deployments: HashMap<String, Value>,
    /// Operation name (`create_agent`, `update_agent`, `delete_agent`, ...) → status to answer.
    pub failures: HashMap<String, u16>,
    /// Operation → (status, how many more times to answer it before answering normally).
    pub failures_left: HashMap<String, (u16, u32)>,
    seq: u64,
}

#[derive(Clone)]
pub struct FakeElevenLabs {
    pub base: String,
    pub state: Arc<Mutex<FakeState>>,
}

type S = State<Arc<Mutex<FakeState>>>;

fn detail(status: u16, code: &str, message: &str) -> Response {
    (
        StatusCode::from_u16(status).unwrap(),
        axum::Json(json!({"detail": {"status": code, "message": message}})),
    )
        .into_response()
}

fn unprocessable(loc: &[&str], msg: &str) -> Response {
    (
        StatusCode::UNPROCESSABLE_ENTITY,
        axum::Json(json!({"detail": [{"loc": loc, "msg": msg, "type": "value_error"}]})),
    )
        .into_response()
}

/// Records the call and checks the key; `Err` is the answer to give instead.
#[allow(clippy::result_large_err)] // the Err is the fake's whole HTTP answer, made once per call
fn begin(
    st: &mut FakeState,
    method: Method,
    path: &str,
    query: Option<String>,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Value, Response> {
    let api_key = headers
        .get("xi-api-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let parsed: Value = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(body).unwrap_or(json!({"__invalid_json": true}))
    };
    st.requests.push(Recorded {
        method: method.to_string(),
        path: path.to_string(),
        query: query.unwrap_or_default(),
        api_key: api_key.clone(),
        body: parsed.clone(),
    });
    if api_key.as_deref() != Some(KEY) {
        return Err(detail(401, "invalid_api_key", "Invalid API key"));
    }
    if matches!(method, Method::POST | Method::PATCH) {
        let ct = headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if !ct.starts_with("application/json")
            || !parsed.is_object()
            || parsed.get("__invalid_json").is_some()
        {
            return Err(unprocessable(
                &["body"],
                "Input should be a valid JSON object",
            ));
        }
    }
    Ok(parsed)
}

fn failing(st: &mut FakeState, op: &str) -> Option<Response> {
    if let Some((status, left)) = st.failures_left.get_mut(op)
        && *left > 0
    {
        *left -= 1;
        let r = if *status == 429 {
            let mut r = detail(429, "rate_limited", "Too many requests");
            r.headers_mut()
                .insert("retry-after", axum::http::HeaderValue::from_static("0"));
            r
        } else {
            detail(
                *status,
                "internal_error",
                &format!("{op} failed in the fake"),
            )
        };
        return Some(r);
    }
    st.failures
        .get(op)
        .map(|s| detail(*s, "internal_error", &format!("{op} failed in the fake")))
}

fn new_id(st: &mut FakeState, prefix: &str, len: usize) -> String {
    st.seq += 1;
    let raw = format!("{prefix}{:0width$}", st.seq, width = len - prefix.len());
    raw
}

/// Validates the parts of `conversation_config` the real API rejects with 422.
fn check_config(cfg: &Value) -> Option<Response> {
    let t = &cfg["agent"]["prompt"]["temperature"];
    if !t.is_null() && !t.as_f64().is_some_and(|t| (0.0..=2.0).contains(&t)) {
        return Some(unprocessable(
            &[
                "body",
                "conversation_config",
                "agent",
                "prompt",
                "temperature",
            ],
            "Input should be less than or equal to 2",
        ));
    }
    for k in ["stability", "similarity_boost"] {
        let v = &cfg["tts"][k];
        if !v.is_null() && !v.as_f64().is_some_and(|t| (0.0..=1.0).contains(&t)) {
            return Some(unprocessable(
                &["body", "conversation_config", "tts", k],
                "Input should be less than or equal to 1",
            ));
        }
    }
    let kb = &cfg["agent"]["prompt"]["knowledge_base"];
    if !kb.is_null() {
        let ok = kb.as_array().is_some_and(|a| {
            a.iter().all(|d| {
                d["id"].is_string()
                    && d["name"].is_string()
                    && ["file", "url", "text"].contains(&d["type"].as_str().unwrap_or(""))
            })
        });
        if !ok {
            return Some(unprocessable(
                &[
                    "body",
                    "conversation_config",
                    "agent",
                    "prompt",
                    "knowledge_base",
                ],
                "Invalid knowledge base entry",
            ));
        }
    }
    if let Some(tools) = cfg["agent"]["prompt"].get("tools") {
        let loc = ["body", "conversation_config", "agent", "prompt", "tools"];
        let Some(list) = tools.as_array() else {
            return Some(unprocessable(&loc, "Input should be a valid list"));
        };
        for t in list {
            if let Some(m) = check_tool(t) {
                return Some(unprocessable(&loc, &m));
            }
        }
    }
    None
}

/// The system tools the platform knows.
const SYSTEM_TOOLS: [&str; 7] = [
    "end_call",
    "language_detection",
    "transfer_to_agent",
    "transfer_to_number",
    "skip_turn",
    "play_keypad_touch_tone",
    "voicemail_detection",
];

/// What the real API refuses in a tool: server (`webhook`) tools need a name, a description
/// and an `api_schema` with an http(s) `url`, a `method` and, for bodies, an object
/// `request_body_schema` (`query_params_schema` with `properties` for GET/DELETE); system
/// tools must be one the platform has.
fn check_tool(t: &Value) -> Option<String> {
    let name = t["name"].as_str().unwrap_or("");
    if name.is_empty() {
        return Some("tool: name required".into());
    }
    match t["type"].as_str() {
        Some("webhook") => {
            let api = &t["api_schema"];
            let url = api["url"].as_str().unwrap_or("");
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                return Some(format!(
                    "tool {name}: api_schema.url must be an http(s) URL"
                ));
            }
            if t["description"].as_str().is_none_or(|d| d.is_empty()) {
                return Some(format!("tool {name}: description required"));
            }
            let method = api["method"].as_str().unwrap_or("");
            match method {
                "GET" | "DELETE" => {
                    if !api["query_params_schema"]["properties"].is_object()
                        || api.get("request_body_schema").is_some()
                    {
                        return Some(format!(
                            "tool {name}: {method} takes query_params_schema only"
                        ));
                    }
                }
                "POST" | "PUT" | "PATCH" => {
                    if api["request_body_schema"]["type"] != "object" {
                        return Some(format!(
                            "tool {name}: request_body_schema must be an object schema"
                        ));
                    }
                }
                _ => return Some(format!("tool {name}: method {method:?}")),
            }
            if !t["response_timeout_secs"]
                .as_u64()
                .is_some_and(|s| (1..=120).contains(&s))
            {
                return Some(format!("tool {name}: response_timeout_secs"));
            }
            None
        }
        Some("system") if SYSTEM_TOOLS.contains(&name) => None,
        Some("system") => Some(format!("unknown system tool {name}")),
        other => Some(format!("tool {name}: unknown type {other:?}")),
    }
}

/// `platform_settings.data_collection`: each item a typed, described value.
fn check_platform(p: &Value) -> Option<Response> {
    let dc = p.get("data_collection")?;
    let ok = dc.as_object().is_some_and(|m| {
        m.values().all(|v| {
            ["string", "boolean", "integer", "number"].contains(&v["type"].as_str().unwrap_or(""))
                && v["description"].as_str().is_some_and(|d| !d.is_empty())
        })
    });
    (!ok).then(|| {
        unprocessable(
            &["body", "platform_settings", "data_collection"],
            "Invalid data collection item",
        )
    })
}

fn merge(target: &mut Value, patch: &Value) {
    match (target.as_object_mut(), patch.as_object()) {
        (Some(t), Some(p)) => {
            for (k, v) in p {
                if v.is_object() && t.get(k).is_some_and(Value::is_object) {
                    merge(t.get_mut(k).unwrap(), v);
                } else {
                    t.insert(k.clone(), v.clone());
                }
            }
        }
        _ => *target = patch.clone(),
    }
}

async fn create_agent(State(s): S, headers: HeaderMap, body: Bytes) -> Response {
    let mut st = s.lock().unwrap();
    let b = match begin(
        &mut st,
        Method::POST,
        "/v1/convai/agents/create",
        None,
        &headers,
        &body,
    ) {
        Ok(b) => b,
        Err(r) => return r,
    };
    if let Some(r) = failing(&mut st, "create_agent") {
        return r;
    }
    if !b["conversation_config"].is_object() {
        return unprocessable(&["body", "conversation_config"], "Field required");
    }
    if let Some(r) = check_config(&b["conversation_config"]) {
        return r;
    }
    if let Some(r) = b.get("platform_settings").and_then(check_platform) {
        return r;
    }
    let id = new_id(&mut st, "agent_", 32);
    let platform = b
        .get("platform_settings")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let agent = json!({"agent_id": id, "name": b["name"], "conversation_config": b["conversation_config"], "platform_settings": platform, "phone_numbers": [], "tags": b["tags"]});
    st.agents.insert(id.clone(), agent);
    axum::Json(json!({"agent_id": id})).into_response()
}

async fn agent(
    State(s): S,
    method: Method,
    Path(id): Path<String>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut st = s.lock().unwrap();
    let path = format!("/v1/convai/agents/{id}");
    let query: HashMap<String, String> =
        serde_urlencoded::from_str(q.as_deref().unwrap_or("")).unwrap_or_default();
    let b = match begin(&mut st, method.clone(), &path, q, &headers, &body) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let op = match method {
        Method::GET => "get_agent",
        Method::PATCH => "update_agent",
        _ => "delete_agent",
    };
    if let Some(r) = failing(&mut st, op) {
        return r;
    }
    if !st.agents.contains_key(&id) {
        return detail(404, "agent_not_found", &format!("Agent {id} not found"));
    }
    match method {
        Method::GET => axum::Json(st.agents[&id].clone()).into_response(),
        Method::PATCH => {
            if query
                .get("enable_versioning_if_not_enabled")
                .map(String::as_str)
                == Some("true")
                && st.agents[&id].get("version_id").is_none()
            {
                // Versioning on: a Main branch at a first version, for good.
                let v = new_id(&mut st, "agtvrsn_", 24);
                let main = new_id(&mut st, "agtbrch_", 24);
                st.branches
                    .entry(id.clone())
                    .or_default()
                    .push(json!({"id": main, "name": "Main", "version_id": v}));
                let a = st.agents.get_mut(&id).unwrap();
                a["version_id"] = json!(v);
                a["branch_id"] = json!(main);
            }
            if query.contains_key("branch_id") {
                return unprocessable(&["query", "branch_id"], "not used by genied's fake");
            }
            if let Some(cfg) = b.get("conversation_config")
                && let Some(r) = check_config(cfg)
            {
                return r;
            }
            if let Some(r) = b.get("platform_settings").and_then(check_platform) {
                return r;
            }
            let a = st.agents.get_mut(&id).unwrap();
            merge(a, &b);
            // Lists are replaced, not merged.
            if let Some(t) = b.pointer("/conversation_config/agent/prompt/tools") {
                a["conversation_config"]["agent"]["prompt"]["tools"] = t.clone();
            }
            // The provider replaces the knowledge-base list wholesale.
            if let Some(kb) = b.pointer("/conversation_config/agent/prompt/knowledge_base") {
                a["conversation_config"]["agent"]["prompt"]["knowledge_base"] = kb.clone();
            }
            axum::Json(a.clone()).into_response()
        }
        _ => {
            st.agents.remove(&id);
            StatusCode::OK.into_response()
        }
    }
}

/// `GET` and `POST /v1/convai/agents/{id}/branches`: branches exist once versioning is on;
/// a new one names its parent version, a unique name (≤ 140) and a description.
async fn branches(
    State(s): S,
    method: Method,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut st = s.lock().unwrap();
    let path = format!("/v1/convai/agents/{id}/branches");
    let b = match begin(&mut st, method.clone(), &path, None, &headers, &body) {
        Ok(b) => b,
        Err(r) => return r,
    };
    if let Some(r) = failing(&mut st, "branches") {
        return r;
    }
    let Some(agent) = st.agents.get(&id).cloned() else {
        return detail(404, "agent_not_found", &format!("Agent {id} not found"));
    };
    if agent.get("version_id").is_none() {
        return detail(
            400,
            "versioning_disabled",
            "Versioning is not enabled for this agent",
        );
    }
    if method == Method::GET {
        let list = st.branches.get(&id).cloned().unwrap_or_default();
        return axum::Json(json!({"results": list, "meta": {"total": list.len()}})).into_response();
    }
    let name = b["name"].as_str().unwrap_or("");
    if name.is_empty() || name.chars().count() > 140 {
        return unprocessable(&["body", "name"], "String should have 1 to 140 characters");
    }
    if !b["description"].is_string() {
        return unprocessable(&["body", "description"], "Field required");
    }
    let known_version = st
        .branches
        .get(&id)
        .into_iter()
        .flatten()
        .any(|x| x["version_id"] == b["parent_version_id"]);
    if !known_version {
        return unprocessable(&["body", "parent_version_id"], "Unknown version");
    }
    if st
        .branches
        .get(&id)
        .into_iter()
        .flatten()
        .any(|x| x["name"] == json!(name))
    {
        return detail(
            409,
            "branch_exists",
            "A branch with this name already exists",
        );
    }
    if let Some(cfg) = b.get("conversation_config")
        && let Some(r) = check_config(cfg)
    {
        return r;
    }
    let bid = new_id(&mut st, "agtbrch_", 24);
    let vid = new_id(&mut st, "agtvrsn_", 24);
    st.branches.entry(id).or_default().push(json!({
        "id": bid, "name": name, "description": b["description"], "version_id": vid,
        "conversation_config": b["conversation_config"], "platform_settings": b["platform_settings"],
    }));
    axum::Json(json!({"created_branch_id": bid, "created_version_id": vid})).into_response()
}

/// `POST /v1/convai/agents/{id}/deployments`: percentages (0–1) over known branches,
/// summing to 1.
async fn deployments(
    State(s): S,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut st = s.lock().unwrap();
    let path = format!("/v1/convai/agents/{id}/deployments");
    let b = match begin(&mut st, Method::POST, &path, None, &headers, &body) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let known = st.branches.get(&id).cloned().unwrap_or_default();
    let Some(reqs) = b["deployment_request"]["requests"].as_array() else {
        return unprocessable(
            &["body", "deployment_request", "requests"],
            "Field required",
        );
    };
    let mut map = serde_json::Map::new();
    let mut sum = 0.0;
    for r in reqs {
        let strategy = &r["deployment_strategy"];
        let pct = strategy["traffic_percentage"].as_f64().unwrap_or(-1.0);
        if strategy["type"] != json!("percentage") || !(0.0..=1.0).contains(&pct) {
            return unprocessable(
                &["body", "deployment_request"],
                "Invalid deployment strategy",
            );
        }
        let bid = r["branch_id"].as_str().unwrap_or("");
        if !known.iter().any(|x| x["id"] == json!(bid)) {
            return detail(404, "branch_not_found", &format!("Branch {bid} not found"));
        }
        sum += pct;
        map.insert(bid.to_string(), json!(pct));
    }
    if (sum - 1.0).abs() > 1e-9 {
        return unprocessable(&["body", "deployment_request"], "Traffic must total 100%");
    }
    st.deployments.insert(id, Value::Object(map.clone()));
    axum::Json(json!({"traffic_percentage_branch_id_map": map})).into_response()
}

async fn kb_text(State(s): S, headers: HeaderMap, body: Bytes) -> Response {
    let mut st = s.lock().unwrap();
    let b = match begin(
        &mut st,
        Method::POST,
        "/v1/convai/knowledge-base/text",
        None,
        &headers,
        &body,
    ) {
        Ok(b) => b,
        Err(r) => return r,
    };
    if let Some(r) = failing(&mut st, "create_document") {
        return r;
    }
    if !b["text"].is_string() {
        return unprocessable(&["body", "text"], "Field required");
    }
    let id = new_id(&mut st, "doc", 20);
    st.documents.insert(id.clone(), b.clone());
    axum::Json(json!({"id": id, "name": b["name"]})).into_response()
}

async fn kb_delete(
    State(s): S,
    Path(id): Path<String>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut st = s.lock().unwrap();
    if let Err(r) = begin(
        &mut st,
        Method::DELETE,
        &format!("/v1/convai/knowledge-base/{id}"),
        q,
        &headers,
        &body,
    ) {
        return r;
    }
    if st.documents.remove(&id).is_none() {
        return detail(404, "document_not_found", "Document not found");
    }
    StatusCode::OK.into_response()
}

/// What ElevenLabs' request model says of a SIP trunk import (`CreateSipTrunkPhoneNumberRequest`
/// and its inbound / outbound trunk configs): the problems, empty when it is valid.
fn sip_trunk_problems(b: &Value) -> Vec<String> {
    let mut p = Vec::new();
    let only = |v: &Value, at: &str, allowed: &[&str], p: &mut Vec<String>| {
        for k in v.as_object().into_iter().flatten().map(|(k, _)| k) {
            if !allowed.contains(&k.as_str()) {
                p.push(format!("{at}{k}: extra field"));
            }
        }
    };
    only(
        b,
        "",
        &[
            "provider",
            "phone_number",
            "label",
            "supports_inbound",
            "supports_outbound",
            "inbound_trunk_config",
            "outbound_trunk_config",
            "livekit_stack",
        ],
        &mut p,
    );
    for k in ["supports_inbound", "supports_outbound"] {
        if !b[k].is_null() && !b[k].is_boolean() {
            p.push(format!("{k}: not a boolean"));
        }
    }
    let creds = |c: &Value, at: &str, p: &mut Vec<String>| {
        if c.is_null() {
            return;
        }
        only(c, at, &["username", "password"], p);
        if c["username"].as_str().is_none_or(str::is_empty) {
            p.push(format!("{at}username: required"));
        }
        if !c["password"].is_null() && !c["password"].is_string() {
            p.push(format!("{at}password: not a string"));
        }
    };
    let enc = ["disabled", "allowed", "required"];
    let out = &b["outbound_trunk_config"];
    if !out.is_null() {
        only(
            out,
            "outbound_trunk_config.",
            &[
                "address",
                "transport",
                "media_encryption",
                "headers",
                "credentials",
            ],
            &mut p,
        );
        if out["address"].as_str().is_none_or(str::is_empty) {
            p.push("outbound_trunk_config.address: required".into());
        }
        if !out["transport"].is_null()
            && !["auto", "udp", "tcp", "tls"].contains(&out["transport"].as_str().unwrap_or(""))
        {
            p.push("outbound_trunk_config.transport: not a transport".into());
        }
        if !out["media_encryption"].is_null()
            && !enc.contains(&out["media_encryption"].as_str().unwrap_or(""))
        {
            p.push("outbound_trunk_config.media_encryption: not an encryption mode".into());
        }
        creds(
            &out["credentials"],
            "outbound_trunk_config.credentials.",
            &mut p,
        );
    }
    let inb = &b["inbound_trunk_config"];
    if !inb.is_null() {
        only(
            inb,
            "inbound_trunk_config.",
            &[
                "allowed_addresses",
                "allowed_numbers",
                "media_encryption",
                "credentials",
                "remote_domains",
            ],
            &mut p,
        );
        creds(
            &inb["credentials"],
            "inbound_trunk_config.credentials.",
            &mut p,
        );
    }
    p
}

/// `POST /v1/convai/phone-numbers`: imports a Twilio number (`provider`, `phone_number`,
/// `label`, `sid`, `token` required) or a SIP trunk number (`provider: sip_trunk`,
/// `phone_number`, `label`, the trunk configs); tokens and passwords are write-only.
async fn phone_create(State(s): S, headers: HeaderMap, body: Bytes) -> Response {
    let mut st = s.lock().unwrap();
    let b = match begin(
        &mut st,
        Method::POST,
        "/v1/convai/phone-numbers",
        None,
        &headers,
        &body,
    ) {
        Ok(b) => b,
        Err(r) => return r,
    };
    if let Some(r) = failing(&mut st, "create_phone") {
        return r;
    }
    let e164 = b["phone_number"]
        .as_str()
        .and_then(|n| n.strip_prefix('+'))
        .is_some_and(|d| (7..=15).contains(&d.len()) && d.bytes().all(|c| c.is_ascii_digit()));
    if b["provider"] == json!("sip_trunk") {
        let mut p = sip_trunk_problems(&b);
        if !e164 || b["label"].as_str().is_none_or(str::is_empty) {
            p.push("phone_number (E.164) and label are required".into());
        }
        if !p.is_empty() {
            return detail(422, "invalid_request", &p.join("; "));
        }
        let id = new_id(&mut st, "phnum_", 20);
        let mut out = b["outbound_trunk_config"].clone();
        if let Some(c) = out["credentials"].as_object_mut() {
            c.remove("password");
        }
        let p = json!({"phone_number_id": id, "phone_number": b["phone_number"], "label": b["label"],
                       "provider": "sip_trunk", "supports_inbound": b["supports_inbound"],
                       "supports_outbound": b["supports_outbound"],
                       "outbound_trunk": out, "assigned_agent": null});
        st.phone_numbers.insert(id.clone(), p);
        return axum::Json(json!({"phone_number_id": id})).into_response();
    }
    let strings = ["label", "sid", "token"]
        .iter()
        .all(|k| b[*k].as_str().is_some_and(|v| !v.is_empty()));
    if b["provider"] != json!("twilio") || !e164 || !strings {
        return detail(
            422,
            "invalid_request",
            "provider twilio, phone_number (E.164), label, sid and token are required",
        );
    }
    let id = new_id(&mut st, "phnum_", 20);
    let p = json!({"phone_number_id": id, "phone_number": b["phone_number"], "label": b["label"],
                   "provider": "twilio", "assigned_agent": null});
    st.phone_numbers.insert(id.clone(), p);
    axum::Json(json!({"phone_number_id": id})).into_response()
}

async fn phone(State(s): S, Path(id): Path<String>, headers: HeaderMap, body: Bytes) -> Response {
    let mut st = s.lock().unwrap();
    let b = match begin(
        &mut st,
        Method::PATCH,
        &format!("/v1/convai/phone-numbers/{id}"),
        None,
        &headers,
        &body,
    ) {
        Ok(b) => b,
        Err(r) => return r,
    };
    if let Some(r) = failing(&mut st, "update_phone") {
        return r;
    }
    let Some(p) = st.phone_numbers.get_mut(&id) else {
        return detail(404, "phone_number_not_found", "Phone number not found");
    };
    p["assigned_agent"] = b["agent_id"].clone();
    axum::Json(p.clone()).into_response()
}

async fn voices(State(s): S, RawQuery(q): RawQuery, headers: HeaderMap) -> Response {
    let mut st = s.lock().unwrap();
    let q2 = q.clone().unwrap_or_default();
    if let Err(r) = begin(
        &mut st,
        Method::GET,
        "/v2/voices",
        q,
        &headers,
        &Bytes::new(),
    ) {
        return r;
    }
    let voice = |id: &str, name: &str| json!({"voice_id": id, "name": name, "category": "premade", "labels": {"accent": "american"}, "description": null, "preview_url": format!("https://example.test/{id}.mp3")});
    if q2.contains("next_page_token=p2") {
        axum::Json(
            json!({"voices": [voice("v3", "Three")], "has_more": false, "next_page_token": null}),
        )
        .into_response()
    } else {
        axum::Json(json!({"voices": [voice("v1", "One"), voice("v2", "Two")], "has_more": true, "next_page_token": "p2"})).into_response()
    }
}

async fn conversations(State(s): S, RawQuery(q): RawQuery, headers: HeaderMap) -> Response {
    let mut st = s.lock().unwrap();
    let q2 = q.clone().unwrap_or_default();
    if let Err(r) = begin(
        &mut st,
        Method::GET,
        "/v1/convai/conversations",
        q,
        &headers,
        &Bytes::new(),
    ) {
        return r;
    }
    let list: Vec<Value> = st
        .conversations
        .values()
        .filter(|c| q2.contains(&format!("agent_id={}", c["agent_id"].as_str().unwrap_or("-"))))
        .map(|c| json!({"agent_id": c["agent_id"], "conversation_id": c["conversation_id"], "start_time_unix_secs": c["metadata"]["start_time_unix_secs"], "call_duration_secs": c["metadata"]["call_duration_secs"], "message_count": 2, "status": c["status"], "call_successful": "success", "transcript_summary": c["analysis"]["transcript_summary"]}))
        .collect();
    axum::Json(json!({"conversations": list, "next_cursor": null, "has_more": false}))
        .into_response()
}

async fn conversation(State(s): S, Path(id): Path<String>, headers: HeaderMap) -> Response {
    let mut st = s.lock().unwrap();
    if let Err(r) = begin(
        &mut st,
        Method::GET,
        &format!("/v1/convai/conversations/{id}"),
        None,
        &headers,
        &Bytes::new(),
    ) {
        return r;
    }
    match st.conversations.get(&id) {
        Some(c) => axum::Json(c.clone()).into_response(),
        None => detail(404, "conversation_not_found", "Conversation not found"),
    }
}

impl FakeElevenLabs {
    pub async fn start() -> FakeElevenLabs {
        let state = Arc::new(Mutex::new(FakeState::default()));
        let app = Router::new()
            .route("/v1/convai/agents/create", post(create_agent))
            .route(
                "/v1/convai/agents/{id}",
                get(agent).patch(agent).delete(agent),
            )
            .route(
                "/v1/convai/agents/{id}/branches",
                get(branches).post(branches),
            )
            .route("/v1/convai/agents/{id}/deployments", post(deployments))
            .route("/v1/convai/knowledge-base/text", post(kb_text))
            .route(
                "/v1/convai/knowledge-base/{id}",
                axum::routing::delete(kb_delete),
            )
            .route("/v1/convai/phone-numbers", post(phone_create))
            .route("/v1/convai/phone-numbers/{id}", patch(phone))
            .route("/v2/voices", get(voices))
            .route("/v1/convai/conversations", get(conversations))
            .route("/v1/convai/conversations/{id}", get(conversation))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeElevenLabs {
            base: format!("http://{addr}"),
            state,
        }
    }

    pub fn fail(&self, op: &str, status: u16) {
        self.state
            .lock()
            .unwrap()
            .failures
            .insert(op.to_string(), status);
    }
    /// Answers `op` with `status` the next `times` times only (a 429 with `Retry-After: 0`).
    pub fn fail_times(&self, op: &str, status: u16, times: u32) {
        self.state
            .lock()
            .unwrap()
            .failures_left
            .insert(op.to_string(), (status, times));
    }
    pub fn heal(&self, op: &str) {
        self.state.lock().unwrap().failures.remove(op);
    }
    pub fn requests(&self) -> Vec<Recorded> {
        self.state.lock().unwrap().requests.clone()
    }
    pub fn agent(&self, id: &str) -> Option<Value> {
        self.state.lock().unwrap().agents.get(id).cloned()
    }
    /// Changes an agent as the ElevenLabs dashboard would.
    pub fn edit_agent(&self, id: &str, f: impl FnOnce(&mut Value)) {
        f(self
            .state
            .lock()
            .unwrap()
            .agents
            .get_mut(id)
            .expect("agent"));
    }
    pub fn branches(&self, agent: &str) -> Vec<Value> {
        self.state
            .lock()
            .unwrap()
            .branches
            .get(agent)
            .cloned()
            .unwrap_or_default()
    }
    pub fn deployment(&self, agent: &str) -> Option<Value> {
        self.state.lock().unwrap().deployments.get(agent).cloned()
    }
    pub fn agent_count(&self) -> usize {
        self.state.lock().unwrap().agents.len()
    }
    pub fn add_phone_number(&self, id: &str, number: &str) {
        self.state.lock().unwrap().phone_numbers.insert(id.into(), json!({"phone_number_id": id, "phone_number": number, "provider": "twilio", "assigned_agent": null}));
    }
    pub fn add_conversation(&self, c: Value) {
        let id = c["conversation_id"].as_str().unwrap().to_string();
        self.state.lock().unwrap().conversations.insert(id, c);
    }
    pub fn phone(&self, id: &str) -> Option<Value> {
        self.state.lock().unwrap().phone_numbers.get(id).cloned()
    }
}
