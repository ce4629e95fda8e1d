//! A fake of the Vapi API, built from its published OpenAPI document and docs (see
//! shared/reference/vapi.md). It checks `Authorization: Bearer`, the method, path, content
//! type and body of every call, refuses unknown top-level properties and out-of-range values
//! with Vapi's NestJS-style 400 (`message` as an array), keeps assistants, tools, files,
//! phone numbers and calls in memory, and records every request. `fail(op, status, times)`
//! makes the next `times` calls of an operation fail (429 answers like Vapi's rate limit).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::form;

pub const KEY: &str = "vapi-private-key-0123456789";

#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub query: String,
    pub authorization: Option<String>,
    pub content_type: Option<String>,
    pub body: Value,
    /// Multipart parts (name, file name, text), for uploads.
    pub parts: Vec<(String, Option<String>, String)>,
}

#[derive(Default)]
pub struct FakeState {
    pub requests: Vec<Recorded>,
    pub assistants: HashMap<String, Value>,
    pub tools: HashMap<String, Value>,
    pub files: HashMap<String, Value>,
    pub phone_numbers: HashMap<String, Value>,
    /// `byo-sip-trunk` credentials, without their write-only password.
    pub credentials: HashMap<String, Value>,
    pub calls: HashMap<String, Value>,
    /// Operation (`create_assistant`, `update_assistant`, ...) → (status, remaining times).
    pub failures: HashMap<String, (u16, u32)>,
    /// While set and false, `POST /call` creates the call but answers only once it turns
    /// true (`hold_calls` / `release_calls`): a platform whose events outrun its answers.
    call_gate: Option<tokio::sync::watch::Receiver<bool>>,
    call_gate_tx: Option<tokio::sync::watch::Sender<bool>>,
    seq: u64,
}

#[derive(Clone)]
pub struct FakeVapi {
    pub base: String,
    pub state: Arc<Mutex<FakeState>>,
}

fn nest(status: u16, message: Value) -> Response {
    let code = StatusCode::from_u16(status).unwrap();
    (
        code,
        axum::Json(json!({"message": message, "error": code.canonical_reason().unwrap_or(""), "statusCode": status})),
    )
        .into_response()
}

fn bad(messages: Vec<String>) -> Response {
    nest(400, json!(messages))
}

fn not_found(what: &str, id: &str) -> Response {
    nest(404, json!(format!("{what} with id {id} not found")))
}

fn created(v: Value) -> Response {
    (StatusCode::CREATED, axum::Json(v)).into_response()
}

fn ok(v: Value) -> Response {
    axum::Json(v).into_response()
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn new_id(st: &mut FakeState) -> String {
    st.seq += 1;
    format!("00000000-0000-4000-8000-{:012}", st.seq)
}

const ASSISTANT_FIELDS: &[&str] = &[
    "name",
    "firstMessage",
    "firstMessageMode",
    "model",
    "voice",
    "transcriber",
    "maxDurationSeconds",
    "silenceTimeoutSeconds",
    "hooks",
    "metadata",
    "server",
    "serverMessages",
    "startSpeakingPlan",
    "stopSpeakingPlan",
    "endCallMessage",
    "endCallPhrases",
    "analysisPlan",
    "artifactPlan",
    "voicemailDetection",
    "voicemailMessage",
    "backgroundSound",
    "monitorPlan",
    "credentialIds",
];

const LLM_PROVIDERS: &[&str] = &[
    "openai",
    "anthropic",
    "anthropic-bedrock",
    "google",
    "groq",
    "xai",
    "deep-seek",
    "openrouter",
    "together-ai",
    "deepinfra",
    "perplexity-ai",
    "cerebras",
    "custom-llm",
    "vapi",
];

fn range(errs: &mut Vec<String>, v: &Value, path: &str, lo: f64, hi: f64) {
    if v.is_null() {
        return;
    }
    match v.as_f64() {
        Some(x) if x < lo => errs.push(format!("{path} must not be less than {lo}")),
        Some(x) if x > hi => errs.push(format!("{path} must not be greater than {hi}")),
        Some(_) => {}
        None => errs.push(format!("{path} must be a number")),
    }
}

/// What Vapi's validation pipe says about an assistant body (create or update).
fn check_assistant(st: &FakeState, b: &Value) -> Vec<String> {
    let mut errs = Vec::new();
    let Some(o) = b.as_object() else {
        return vec!["body must be an object".into()];
    };
    for k in o.keys() {
        if !ASSISTANT_FIELDS.contains(&k.as_str()) {
            errs.push(format!("property {k} should not exist"));
        }
    }
    if let Some(name) = b["name"].as_str()
        && name.chars().count() > 40
    {
        errs.push("name must be shorter than or equal to 40 characters".into());
    }
    let m = &b["model"];
    if !m.is_null() {
        if !m["provider"]
            .as_str()
            .is_some_and(|p| LLM_PROVIDERS.contains(&p))
        {
            errs.push("model.provider must be one of the following values: openai, anthropic, google, ...".into());
        }
        if !m["model"].is_string() {
            errs.push("model.model must be a string".into());
        }
        range(&mut errs, &m["temperature"], "model.temperature", 0.0, 2.0);
        range(&mut errs, &m["maxTokens"], "model.maxTokens", 50.0, 10000.0);
        if let Some(msgs) = m["messages"].as_array() {
            for msg in msgs {
                if !["system", "user", "assistant", "tool", "function"]
                    .contains(&msg["role"].as_str().unwrap_or(""))
                    || !msg["content"].is_string()
                {
                    errs.push("model.messages each value must be a valid message".into());
                }
            }
        }
        if let Some(tools) = m.get("tools") {
            for t in tools.as_array().into_iter().flatten() {
                match t["type"].as_str() {
                    Some("endCall") => {}
                    Some("apiRequest") => {
                        let name = t["name"].as_str().unwrap_or("");
                        if name.is_empty()
                            || name.chars().count() > 40
                            || !name
                                .chars()
                                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                        {
                            errs.push("model.tools.name must be a-z, A-Z, 0-9, _ or -, at most 40".into());
                        }
                        if !t["url"].as_str().is_some_and(|u| u.starts_with("http")) {
                            errs.push("model.tools.url must be a URL address".into());
                        }
                        if !["POST", "GET", "PUT", "PATCH", "DELETE"]
                            .contains(&t["method"].as_str().unwrap_or(""))
                        {
                            errs.push("model.tools.method must be one of the following values: POST, GET, PUT, PATCH, DELETE".into());
                        }
                        if !t["body"].is_null() && t["body"]["type"] != json!("object") {
                            errs.push("model.tools.body must be a JSON schema object".into());
                        }
                        range(&mut errs, &t["timeoutSeconds"], "model.tools.timeoutSeconds", 1.0, 300.0);
                    }
                    _ => errs.push("model.tools.type must be one of the following values: apiRequest, endCall, function, ...".into()),
                }
            }
            if !tools.is_array() {
                errs.push("model.tools must be an array".into());
            }
        }
        if let Some(ids) = m["toolIds"].as_array() {
            for id in ids {
                if !id.as_str().is_some_and(|i| st.tools.contains_key(i)) {
                    errs.push(format!("model.toolIds: tool {id} does not exist"));
                }
            }
        }
    }
    let v = &b["voice"];
    if !v.is_null() {
        if !v["provider"].is_string() || !v["voiceId"].is_string() {
            errs.push("voice.provider and voice.voiceId must be strings".into());
        }
        range(&mut errs, &v["stability"], "voice.stability", 0.0, 1.0);
        range(
            &mut errs,
            &v["similarityBoost"],
            "voice.similarityBoost",
            0.0,
            1.0,
        );
        range(&mut errs, &v["speed"], "voice.speed", 0.7, 1.2);
    }
    if !b["transcriber"].is_null() && !b["transcriber"]["provider"].is_string() {
        errs.push("transcriber.provider must be a string".into());
    }
    range(
        &mut errs,
        &b["maxDurationSeconds"],
        "maxDurationSeconds",
        10.0,
        43200.0,
    );
    range(
        &mut errs,
        &b["silenceTimeoutSeconds"],
        "silenceTimeoutSeconds",
        5.0,
        3600.0,
    );
    if !b["server"].is_null() && !b["server"]["url"].is_string() {
        errs.push("server.url must be a URL address".into());
    }
    errs
}

fn merge_top(target: &mut Value, patch: &Value) {
    // Vapi replaces nested objects (such as `model`) whole on PATCH.
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
    query: RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let is_call = method == Method::POST && uri.path() == "/call";
    let resp = respond(State(s.clone()), method, uri, query, headers, body).await;
    let gate = if is_call {
        s.lock().unwrap().call_gate.clone()
    } else {
        None
    };
    if let Some(mut gate) = gate {
        let _ = gate.wait_for(|open| *open).await;
    }
    resp
}

async fn respond(
    State(s): State<Arc<Mutex<FakeState>>>,
    method: Method,
    uri: Uri,
    RawQuery(query): RawQuery,
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
        query: query.clone().unwrap_or_default(),
        authorization: auth.clone(),
        content_type: ct.clone(),
        body: parsed.clone(),
        parts: parts
            .as_ref()
            .map(|ps| {
                ps.iter()
                    .map(|p| (p.name.clone(), p.file_name.clone(), p.text()))
                    .collect()
            })
            .unwrap_or_default(),
    });
    if auth.as_deref() != Some(&format!("Bearer {KEY}")) {
        return nest(
            401,
            json!(
                "Invalid Key. Hot tip, you may be using the private key instead of the public key, or vice versa."
            ),
        );
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
        (&Method::POST, ["assistant"]) => "create_assistant",
        (&Method::GET, ["assistant", _]) => "get_assistant",
        (&Method::PATCH, ["assistant", _]) => "update_assistant",
        (&Method::DELETE, ["assistant", _]) => "delete_assistant",
        (&Method::POST, ["tool"]) => "create_tool",
        (&Method::GET, ["tool", _]) => "get_tool",
        (&Method::PATCH, ["tool", _]) => "update_tool",
        (&Method::DELETE, ["tool", _]) => "delete_tool",
        (&Method::POST, ["file"]) => "create_file",
        (&Method::DELETE, ["file", _]) => "delete_file",
        (&Method::POST, ["phone-number"]) => "create_phone_number",
        (&Method::PATCH, ["phone-number", _]) => "update_phone_number",
        (&Method::DELETE, ["phone-number", _]) => "delete_phone_number",
        (&Method::POST, ["credential"]) => "create_credential",
        (&Method::DELETE, ["credential", _]) => "delete_credential",
        (&Method::GET, ["call"]) => "list_calls",
        (&Method::POST, ["call"]) => "create_call",
        (&Method::GET, ["call", _]) => "get_call",
        _ => return nest(404, json!(format!("Cannot {method} {path}"))),
    };
    if let Some((status, left)) = st.failures.get_mut(op)
        && *left > 0
    {
        *left -= 1;
        let status = *status;
        return if status == 429 {
            nest(429, json!("Rate limit exceeded"))
        } else {
            nest(status, json!(format!("{op} failed in the fake")))
        };
    }
    let json_body = matches!(method, Method::POST | Method::PATCH) && op != "create_file";
    if json_body
        && (!ct
            .as_deref()
            .is_some_and(|c| c.starts_with("application/json"))
            || !parsed.is_object())
    {
        return bad(vec!["body must be a JSON object".into()]);
    }
    let id = segs.get(1).map(|s| s.to_string()).unwrap_or_default();
    match op {
        "create_assistant" => {
            let errs = check_assistant(&st, &parsed);
            if !errs.is_empty() {
                return bad(errs);
            }
            let id = new_id(&mut st);
            let mut a = parsed.clone();
            a["id"] = json!(id);
            a["orgId"] = json!("org-1");
            a["createdAt"] = json!(now());
            a["updatedAt"] = json!(now());
            st.assistants.insert(id, a.clone());
            created(a)
        }
        "get_assistant" => match st.assistants.get(&id) {
            Some(a) => ok(a.clone()),
            None => not_found("Assistant", &id),
        },
        "update_assistant" => {
            if !st.assistants.contains_key(&id) {
                return not_found("Assistant", &id);
            }
            let errs = check_assistant(&st, &parsed);
            if !errs.is_empty() {
                return bad(errs);
            }
            let a = st.assistants.get_mut(&id).unwrap();
            merge_top(a, &parsed);
            a["updatedAt"] = json!(now());
            ok(a.clone())
        }
        "delete_assistant" => match st.assistants.remove(&id) {
            Some(a) => ok(a),
            None => not_found("Assistant", &id),
        },
        "create_tool" => {
            let mut errs = Vec::new();
            for k in parsed.as_object().unwrap().keys() {
                if ![
                    "type",
                    "knowledgeBases",
                    "function",
                    "server",
                    "messages",
                    "async",
                ]
                .contains(&k.as_str())
                {
                    errs.push(format!("property {k} should not exist"));
                }
            }
            if parsed["type"] != json!("query") {
                errs.push("type must be one of the following values: query, function, ...".into());
            }
            check_kbs(&st, &parsed["knowledgeBases"], &mut errs);
            if !errs.is_empty() {
                return bad(errs);
            }
            let id = new_id(&mut st);
            let mut t = parsed.clone();
            t["id"] = json!(id);
            t["orgId"] = json!("org-1");
            t["createdAt"] = json!(now());
            st.tools.insert(id, t.clone());
            created(t)
        }
        "update_tool" => {
            if !st.tools.contains_key(&id) {
                return not_found("Tool", &id);
            }
            let mut errs = Vec::new();
            if parsed.get("type").is_some() {
                errs.push("property type should not exist".into());
            }
            check_kbs(&st, &parsed["knowledgeBases"], &mut errs);
            if !errs.is_empty() {
                return bad(errs);
            }
            let t = st.tools.get_mut(&id).unwrap();
            merge_top(t, &parsed);
            ok(t.clone())
        }
        "get_tool" => match st.tools.get(&id) {
            Some(t) => ok(t.clone()),
            None => not_found("Tool", &id),
        },
        "delete_tool" => match st.tools.remove(&id) {
            Some(t) => ok(t),
            None => not_found("Tool", &id),
        },
        "create_file" => {
            let Ok(parts) = parts else {
                return nest(400, json!("Invalid file"));
            };
            let Some(f) = parts
                .iter()
                .find(|p| p.name == "file" && p.file_name.is_some())
            else {
                return nest(400, json!("Invalid file"));
            };
            if parts
                .iter()
                .any(|p| p.name != "file" && p.name != "purpose" && p.name != "metadata")
            {
                return bad(vec!["an unknown form field was sent".into()]);
            }
            let id = new_id(&mut st);
            let file = json!({"id": id, "orgId": "org-1", "object": "file", "status": "done",
                "name": f.file_name, "originalName": f.file_name, "bytes": f.data.len(),
                "mimetype": f.content_type, "text": f.text(), "createdAt": now(), "updatedAt": now()});
            st.files.insert(id, file.clone());
            created(file)
        }
        "delete_file" => match st.files.remove(&id) {
            Some(f) => ok(f),
            None => not_found("File", &id),
        },
        "create_credential" => {
            let errs = check_sip_credential(&parsed);
            if !errs.is_empty() {
                return bad(errs);
            }
            let id = new_id(&mut st);
            let mut c = parsed.clone();
            if let Some(plan) = c["outboundAuthenticationPlan"].as_object_mut() {
                // Secrets are write-only at Vapi.
                plan.remove("authPassword");
            }
            c["id"] = json!(id);
            c["orgId"] = json!("org-1");
            c["createdAt"] = json!(now());
            st.credentials.insert(id, c.clone());
            created(c)
        }
        "delete_credential" => {
            if st
                .phone_numbers
                .values()
                .any(|n| n["credentialId"] == json!(id))
            {
                return bad(vec![format!("Credential {id} is in use by a phone number")]);
            }
            match st.credentials.remove(&id) {
                Some(c) => ok(c),
                None => not_found("Credential", &id),
            }
        }
        "create_phone_number" => {
            let mut errs = Vec::new();
            if !["vapi", "twilio", "vonage", "telnyx", "byo-phone-number"]
                .contains(&parsed["provider"].as_str().unwrap_or(""))
            {
                errs.push("provider must be one of the following values: vapi, twilio, vonage, telnyx, byo-phone-number".into());
            }
            if let Some(a) = parsed["assistantId"].as_str()
                && !st.assistants.contains_key(a)
            {
                errs.push(format!(
                    "Couldn't Get Assistant. `assistantId` {a} Does Not Exist."
                ));
            }
            if parsed["provider"] == json!("twilio")
                && (!parsed["number"].is_string() || !parsed["twilioAccountSid"].is_string())
            {
                errs.push("number and twilioAccountSid are required for twilio".into());
            }
            if parsed["provider"] == json!("byo-phone-number") {
                for k in parsed.as_object().unwrap().keys() {
                    if ![
                        "provider",
                        "number",
                        "credentialId",
                        "numberE164CheckEnabled",
                        "name",
                        "assistantId",
                        "squadId",
                        "server",
                        "fallbackDestination",
                    ]
                    .contains(&k.as_str())
                    {
                        errs.push(format!("property {k} should not exist"));
                    }
                }
                match parsed["credentialId"].as_str() {
                    Some(c) if st.credentials.contains_key(c) => {}
                    other => errs.push(format!(
                        "Couldn't Find Credential. `credentialId` {other:?} Does Not Exist."
                    )),
                }
                let e164 = parsed["number"]
                    .as_str()
                    .and_then(|n| n.strip_prefix('+'))
                    .is_some_and(|d| {
                        (7..=15).contains(&d.len()) && d.bytes().all(|c| c.is_ascii_digit())
                    });
                if parsed["numberE164CheckEnabled"] != json!(false) && !e164 {
                    errs.push("number must be a valid phone number in the E.164 format".into());
                }
                if !parsed["numberE164CheckEnabled"].is_null()
                    && !parsed["numberE164CheckEnabled"].is_boolean()
                {
                    errs.push("numberE164CheckEnabled must be a boolean value".into());
                }
            }
            if !errs.is_empty() {
                return bad(errs);
            }
            let id = new_id(&mut st);
            let number = parsed["number"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| format!("+1415555{:04}", st.seq % 10000));
            let mut n = parsed.clone();
            if let Some(o) = n.as_object_mut() {
                // Credentials are write-only at Vapi.
                o.remove("twilioAuthToken");
            }
            n["id"] = json!(id);
            n["number"] = json!(number);
            n["status"] = json!("active");
            n["orgId"] = json!("org-1");
            st.phone_numbers.insert(id, n.clone());
            created(n)
        }
        "update_phone_number" => {
            if !st.phone_numbers.contains_key(&id) {
                return not_found("PhoneNumber", &id);
            }
            let n = st.phone_numbers.get_mut(&id).unwrap();
            merge_top(n, &parsed);
            ok(n.clone())
        }
        "delete_phone_number" => match st.phone_numbers.remove(&id) {
            Some(n) => ok(n),
            None => not_found("PhoneNumber", &id),
        },
        "list_calls" => {
            let q: HashMap<String, String> =
                serde_urlencoded::from_str(query.as_deref().unwrap_or("")).unwrap_or_default();
            let limit: usize = match q.get("limit").map(|l| l.parse::<usize>()) {
                None => 100,
                Some(Ok(l)) if (1..=1000).contains(&l) => l,
                _ => return bad(vec!["limit must not be greater than 1000".into()]),
            };
            let mut calls: Vec<Value> = st
                .calls
                .values()
                .filter(|c| {
                    q.get("assistantId")
                        .is_none_or(|a| c["assistantId"].as_str() == Some(a))
                })
                .filter(|c| {
                    q.get("createdAtLt")
                        .is_none_or(|lt| c["createdAt"].as_str().is_some_and(|t| t < lt.as_str()))
                })
                .cloned()
                .collect();
            calls.sort_by(|a, b| b["createdAt"].as_str().cmp(&a["createdAt"].as_str()));
            calls.truncate(limit);
            ok(json!(calls))
        }
        "create_call" => {
            let mut errs = Vec::new();
            for k in parsed.as_object().unwrap().keys() {
                if ![
                    "assistantId",
                    "assistant",
                    "assistantOverrides",
                    "phoneNumberId",
                    "phoneNumber",
                    "customer",
                    "customers",
                    "name",
                    "schedulePlan",
                ]
                .contains(&k.as_str())
                {
                    errs.push(format!("property {k} should not exist"));
                }
            }
            let a = parsed["assistantId"].as_str().unwrap_or("");
            if !st.assistants.contains_key(a) {
                errs.push(format!(
                    "Couldn't Get Assistant. `assistantId` {a} Does Not Exist."
                ));
            }
            if !parsed["phoneNumberId"]
                .as_str()
                .is_some_and(|p| st.phone_numbers.contains_key(p))
            {
                errs.push(
                    "Couldn't Get Phone Number. Need Either `phoneNumberId` Or `phoneNumber`."
                        .into(),
                );
            }
            let n = parsed["customer"]["number"].as_str().unwrap_or("");
            if !(n.starts_with('+') && n.len() > 7) {
                errs.push(
                    "customer.number must be a valid phone number in the E.164 format".into(),
                );
            }
            if let Some(o) = parsed.get("assistantOverrides")
                && !o["variableValues"].is_object()
            {
                errs.push("assistantOverrides.variableValues must be an object".into());
            }
            if !errs.is_empty() {
                return bad(errs);
            }
            let id = new_id(&mut st);
            let mut call = parsed.clone();
            call["id"] = json!(id);
            call["type"] = json!("outboundPhoneCall");
            call["status"] = json!("queued");
            call["createdAt"] = json!(now());
            st.calls.insert(id, call.clone());
            call["subscriptionLimits"] = json!({"concurrencyBlocked": false, "concurrencyLimit": 10, "remainingConcurrentCalls": 9});
            created(call)
        }
        "get_call" => match st.calls.get(&id) {
            Some(c) => ok(c.clone()),
            None => not_found("Call", &id),
        },
        _ => unreachable!(),
    }
}

/// What Vapi's validation pipe says about a `byo-sip-trunk` credential (`CreateByoSipTrunkCredentialDTO`).
fn check_sip_credential(b: &Value) -> Vec<String> {
    let mut errs = Vec::new();
    for k in b.as_object().unwrap().keys() {
        if ![
            "provider",
            "name",
            "gateways",
            "outboundAuthenticationPlan",
            "outboundLeadingPlusEnabled",
            "techPrefix",
            "sipDiversionHeader",
            "sbcConfiguration",
        ]
        .contains(&k.as_str())
        {
            errs.push(format!("property {k} should not exist"));
        }
    }
    if b["provider"] != json!("byo-sip-trunk") {
        errs.push("provider must be one of the following values: byo-sip-trunk, ...".into());
    }
    if let Some(n) = b["name"].as_str()
        && n.chars().count() > 40
    {
        errs.push("name must be shorter than or equal to 40 characters".into());
    }
    match b["gateways"].as_array() {
        Some(gs) if !gs.is_empty() => {
            for g in gs {
                for k in g.as_object().into_iter().flatten().map(|(k, _)| k) {
                    if ![
                        "ip",
                        "port",
                        "netmask",
                        "inboundEnabled",
                        "outboundEnabled",
                        "outboundProtocol",
                        "optionsPingEnabled",
                    ]
                    .contains(&k.as_str())
                    {
                        errs.push(format!("gateways.property {k} should not exist"));
                    }
                }
                if g["ip"].as_str().is_none_or(str::is_empty) {
                    errs.push("gateways.ip must be an IP address or a domain name".into());
                }
                if !g["port"].is_null()
                    && !g["port"].as_u64().is_some_and(|p| (1..=65535).contains(&p))
                {
                    errs.push("gateways.port must not be greater than 65535".into());
                }
                for k in ["inboundEnabled", "outboundEnabled"] {
                    if !g[k].is_null() && !g[k].is_boolean() {
                        errs.push(format!("gateways.{k} must be a boolean value"));
                    }
                }
            }
        }
        _ => errs.push("gateways must contain at least 1 elements".into()),
    }
    let plan = &b["outboundAuthenticationPlan"];
    if !plan.is_null() {
        for k in plan.as_object().into_iter().flatten().map(|(k, _)| k) {
            if !["authUsername", "authPassword", "sipRegisterPlan"].contains(&k.as_str()) {
                errs.push(format!(
                    "outboundAuthenticationPlan.property {k} should not exist"
                ));
            }
        }
        if !plan["authUsername"].is_string() {
            errs.push("outboundAuthenticationPlan.authUsername must be a string".into());
        }
        if !plan["authPassword"].is_null() && !plan["authPassword"].is_string() {
            errs.push("outboundAuthenticationPlan.authPassword must be a string".into());
        }
    }
    errs
}

fn check_kbs(st: &FakeState, kbs: &Value, errs: &mut Vec<String>) {
    let Some(list) = kbs.as_array() else {
        errs.push("knowledgeBases must be an array".into());
        return;
    };
    for kb in list {
        if kb["provider"] != json!("google") || !kb["name"].is_string() {
            errs.push("knowledgeBases.provider must be google and name a string".into());
        }
        for f in kb["fileIds"].as_array().cloned().unwrap_or_default() {
            if !f.as_str().is_some_and(|f| st.files.contains_key(f)) {
                errs.push(format!("knowledgeBases.fileIds: file {f} does not exist"));
            }
        }
    }
}

impl FakeVapi {
    pub async fn start() -> FakeVapi {
        let state = Arc::new(Mutex::new(FakeState::default()));
        let app = Router::new().fallback(handle).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeVapi {
            base: format!("http://{addr}"),
            state,
        }
    }

    /// The next `times` calls of `op` answer `status`.
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
    pub fn assistant(&self, id: &str) -> Option<Value> {
        self.state.lock().unwrap().assistants.get(id).cloned()
    }
    /// Changes an assistant as the Vapi dashboard would.
    pub fn edit_assistant(&self, id: &str, f: impl FnOnce(&mut Value)) {
        f(self
            .state
            .lock()
            .unwrap()
            .assistants
            .get_mut(id)
            .expect("assistant"));
    }
    /// Adds an assistant made elsewhere (a move cut short); returns its id.
    pub fn add_assistant(&self, mut a: Value) -> String {
        let mut st = self.state.lock().unwrap();
        let id = new_id(&mut st);
        a["id"] = json!(id);
        st.assistants.insert(id.clone(), a);
        id
    }
    pub fn file_count(&self) -> usize {
        self.state.lock().unwrap().files.len()
    }
    pub fn assistant_count(&self) -> usize {
        self.state.lock().unwrap().assistants.len()
    }
    pub fn tool(&self, id: &str) -> Option<Value> {
        self.state.lock().unwrap().tools.get(id).cloned()
    }
    pub fn tool_count(&self) -> usize {
        self.state.lock().unwrap().tools.len()
    }
    pub fn file(&self, id: &str) -> Option<Value> {
        self.state.lock().unwrap().files.get(id).cloned()
    }
    pub fn phone(&self, id: &str) -> Option<Value> {
        self.state.lock().unwrap().phone_numbers.get(id).cloned()
    }
    pub fn credential(&self, id: &str) -> Option<Value> {
        self.state.lock().unwrap().credentials.get(id).cloned()
    }
    pub fn credential_count(&self) -> usize {
        self.state.lock().unwrap().credentials.len()
    }
    pub fn call_count(&self) -> usize {
        self.state.lock().unwrap().calls.len()
    }
    /// The ids of the calls created so far.
    pub fn call_ids(&self) -> Vec<String> {
        self.state.lock().unwrap().calls.keys().cloned().collect()
    }
    /// From now on `POST /call` creates the call at once but answers only after
    /// `release_calls`.
    pub fn hold_calls(&self) {
        let (tx, rx) = tokio::sync::watch::channel(false);
        let mut st = self.state.lock().unwrap();
        st.call_gate = Some(rx);
        st.call_gate_tx = Some(tx);
    }
    /// Answers the held call requests, and the next ones at once.
    pub fn release_calls(&self) {
        let mut st = self.state.lock().unwrap();
        if let Some(tx) = st.call_gate_tx.take() {
            let _ = tx.send(true);
        }
        st.call_gate = None;
    }
    pub fn add_call(&self, c: Value) {
        let id = c["id"].as_str().unwrap().to_string();
        self.state.lock().unwrap().calls.insert(id, c);
    }
}
