//! The tools a genie may call during a conversation (genie field `tools`): how they are
//! checked when a genie is saved, how they are described to the model, and how a call runs.
//!
//! - `webhook` tools call the owner's HTTP endpoint with the model's arguments, validated
//!   against the tool's JSON Schema first, through the guarded outbound client (internal
//!   addresses refused, the reply bounded in size, the call bounded by `timeout_seconds`).
//!   A stored credential named by `credential_ref` is injected as in worker genies; its value
//!   never reaches the model, the transcript or the log (replies are redacted).
//! - built-ins: `search_knowledge_base`, `capture_lead`, `end_conversation`,
//!   `transfer_to_human`.
//!
//! A failing tool is an error the model reads, never a failed conversation.

use std::time::{Duration, Instant};

use reqwest::Method;
use reqwest::header::{HeaderMap, HeaderValue};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::db::{self, conversations as conv_repo, leads as leads_repo, page_chat::PageGenie};
use crate::error::{ApiError, ApiResult};
use crate::net::{Guarded, Limits};
use crate::state::AppState;
use crate::workers::tools::{Opened, redact, send_limited};

pub const SEARCH: &str = "search_knowledge_base";
pub const CAPTURE_LEAD: &str = "capture_lead";
pub const END: &str = "end_conversation";
pub const TRANSFER: &str = "transfer_to_human";
pub const BUILTINS: [&str; 4] = [SEARCH, CAPTURE_LEAD, END, TRANSFER];
const METHODS: [&str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];

pub const MAX_TOOLS: usize = 20;
pub const MAX_TIMEOUT_SECONDS: u64 = 30;
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 10;
/// Largest webhook reply read, and the part of it the model is given.
pub const REPLY_MAX_BYTES: usize = 64 * 1024;
pub const REPLY_SHOWN_CHARS: usize = 8 * 1024;
/// Passages `search_knowledge_base` returns.
const SEARCH_PASSAGES: i64 = 5;

/// A webhook tool as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Webhook {
    pub name: String,
    pub description: String,
    pub parameters: Value,
    pub url: String,
    pub method: String,
    pub credential_ref: Option<String>,
    pub timeout_seconds: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Tool {
    Webhook(Webhook),
    Builtin(&'static str),
}

impl Tool {
    pub fn name(&self) -> &str {
        match self {
            Tool::Webhook(w) => &w.name,
            Tool::Builtin(b) => b,
        }
    }
}

fn bad(field: &str, i: usize, name: Option<&str>, msg: impl std::fmt::Display) -> ApiError {
    match name {
        Some(n) => ApiError::validation(format!("{field}[{i}] ({n}): {msg}")),
        None => ApiError::validation(format!("{field}[{i}]: {msg}")),
    }
}

/// Checks a `tools` value from a request and returns it normalised (defaults filled in).
/// Every message names the bad tool by position and name.
pub fn validate(field: &str, v: &Value) -> ApiResult<Value> {
    let Some(list) = v.as_array() else {
        return Err(ApiError::validation(format!("{field} must be an array")));
    };
    if list.len() > MAX_TOOLS {
        return Err(ApiError::validation(format!(
            "{field} may hold at most {MAX_TOOLS} tools"
        )));
    }
    let mut out = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for (i, t) in list.iter().enumerate() {
        let Some(obj) = t.as_object() else {
            return Err(bad(field, i, None, "must be an object"));
        };
        let Some(kind) = obj.get("type").and_then(Value::as_str) else {
            return Err(bad(field, i, None, "type is required"));
        };
        let tool = if let Some(b) = BUILTINS.iter().find(|b| **b == kind) {
            if let Some(k) = obj.keys().find(|k| *k != "type") {
                return Err(bad(field, i, Some(b), format!("unknown member '{k}'")));
            }
            Tool::Builtin(b)
        } else if kind == "webhook" {
            Tool::Webhook(webhook(field, i, obj)?)
        } else {
            return Err(bad(
                field,
                i,
                None,
                format!(
                    "type '{kind}' is not one of webhook, {}",
                    BUILTINS.join(", ")
                ),
            ));
        };
        if names.iter().any(|n| n == tool.name()) {
            return Err(bad(
                field,
                i,
                Some(tool.name()),
                "another tool has this name",
            ));
        }
        names.push(tool.name().to_string());
        out.push(to_value(&tool));
    }
    Ok(Value::Array(out))
}

fn webhook(field: &str, i: usize, obj: &Map<String, Value>) -> ApiResult<Webhook> {
    const MEMBERS: [&str; 8] = [
        "type",
        "name",
        "description",
        "parameters",
        "url",
        "method",
        "credential_ref",
        "timeout_seconds",
    ];
    let name = obj.get("name").and_then(Value::as_str).unwrap_or("");
    let ok_name = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !ok_name {
        return Err(bad(
            field,
            i,
            None,
            "name is required: 1 to 64 characters of a-z, A-Z, 0-9, '_' and '-'",
        ));
    }
    let err = |m: String| bad(field, i, Some(name), m);
    if BUILTINS.contains(&name) {
        return Err(err(format!("'{name}' is the name of a built-in tool")));
    }
    if let Some(k) = obj.keys().find(|k| !MEMBERS.contains(&k.as_str())) {
        return Err(err(format!("unknown member '{k}'")));
    }
    let description = obj
        .get("description")
        .and_then(Value::as_str)
        .map(str::trim)
        .unwrap_or("");
    if description.is_empty() || description.chars().count() > 1000 {
        return Err(err(
            "description is required and must be at most 1000 characters".into(),
        ));
    }
    let parameters = obj
        .get("parameters")
        .cloned()
        .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
    if parameters.get("type").and_then(Value::as_str) != Some("object") {
        return Err(err(
            "parameters must be a JSON Schema with \"type\": \"object\"".into(),
        ));
    }
    if let Err(e) = jsonschema::validator_for(&parameters) {
        return Err(err(format!("parameters is not a valid JSON Schema: {e}")));
    }
    let url = obj.get("url").and_then(Value::as_str).unwrap_or("").trim();
    // Syntax here; the address is checked against the service's outbound rules by
    // `check_addresses` and again, resolved, at every call.
    let url = crate::net::check_url(url, true)
        .map_err(|e| err(format!("url: {e}")))?
        .to_string();
    let method = match obj.get("method") {
        None | Some(Value::Null) => "POST".to_string(),
        Some(Value::String(m)) if METHODS.contains(&m.to_ascii_uppercase().as_str()) => {
            m.to_ascii_uppercase()
        }
        Some(_) => {
            return Err(err(format!("method must be one of {}", METHODS.join(", "))));
        }
    };
    let credential_ref = match obj.get("credential_ref") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if !s.trim().is_empty() && s.len() <= 200 => {
            Some(s.trim().to_string())
        }
        Some(_) => {
            return Err(err(
                "credential_ref must be the name or id of a stored credential".into(),
            ));
        }
    };
    let timeout_seconds = match obj.get("timeout_seconds") {
        None | Some(Value::Null) => DEFAULT_TIMEOUT_SECONDS,
        Some(v) => match v.as_u64() {
            Some(n) if (1..=MAX_TIMEOUT_SECONDS).contains(&n) => n,
            _ => {
                return Err(err(format!(
                    "timeout_seconds must be a whole number from 1 to {MAX_TIMEOUT_SECONDS}"
                )));
            }
        },
    };
    Ok(Webhook {
        name: name.to_string(),
        description: description.to_string(),
        parameters,
        url,
        method,
        credential_ref,
        timeout_seconds,
    })
}

fn to_value(t: &Tool) -> Value {
    match t {
        Tool::Builtin(b) => json!({"type": b}),
        Tool::Webhook(w) => {
            let mut v = json!({
                "type": "webhook", "name": w.name, "description": w.description,
                "parameters": w.parameters, "url": w.url, "method": w.method,
                "timeout_seconds": w.timeout_seconds,
            });
            if let Some(c) = &w.credential_ref {
                v["credential_ref"] = json!(c);
            }
            v
        }
    }
}

/// The stored tools (already validated when saved; anything unreadable is skipped).
pub fn parse(v: &Value) -> Vec<Tool> {
    let Some(list) = v.as_array() else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|t| {
            let kind = t.get("type")?.as_str()?;
            if let Some(b) = BUILTINS.iter().find(|b| **b == kind) {
                return Some(Tool::Builtin(b));
            }
            webhook("tools", 0, t.as_object()?).ok().map(Tool::Webhook)
        })
        .collect()
}

/// The tools as a template carries them: no credential reference (a credential belongs to
/// its owner's account and never travels with a copy).
pub fn without_secrets(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(list) = v.as_array_mut() {
        for t in list {
            if let Some(o) = t.as_object_mut() {
                o.remove("credential_ref");
            }
        }
    }
    v
}

/// Refuses webhook URLs the service's outbound client would refuse (internal addresses
/// unless the operator allows them), so the owner hears it when saving, not at call time.
pub fn check_addresses(net: &Guarded, field: &str, tools: &Value) -> ApiResult<()> {
    for (i, t) in parse(tools).iter().enumerate() {
        if let Tool::Webhook(w) = t {
            net.check(&w.url)
                .map_err(|e| bad(field, i, Some(&w.name), format!("url: {e}")))?;
        }
    }
    Ok(())
}

/// Refuses a `credential_ref` that names no credential of the owner.
pub async fn check_credentials(
    app: &AppState,
    owner: &str,
    field: &str,
    tools: &Value,
) -> ApiResult<()> {
    for (i, t) in parse(tools).iter().enumerate() {
        if let Tool::Webhook(w) = t
            && let Some(r) = &w.credential_ref
        {
            let (uid, r2) = (owner.to_string(), r.clone());
            let found = app
                .db
                .read(move |c| Ok(find_credential(c, &uid, &r2)?.is_some()))
                .await?;
            if !found {
                return Err(bad(
                    field,
                    i,
                    Some(&w.name),
                    format!("credential_ref '{r}' names no stored credential of the genie's owner"),
                ));
            }
        }
    }
    Ok(())
}

fn find_credential(
    c: &crate::db::Connection,
    user_id: &str,
    r: &str,
) -> rusqlite::Result<Option<db::workers::Sealed>> {
    match db::workers::credential_by_name(c, user_id, r)? {
        Some(s) => Ok(Some(s)),
        None => db::workers::credential_by_id(c, user_id, r),
    }
}

/// The tool as the voice provider is told about it.
pub fn agent_tool(t: &Tool) -> crate::voice::AgentTool {
    match t {
        Tool::Webhook(w) => crate::voice::AgentTool::Webhook {
            name: w.name.clone(),
            description: w.description.clone(),
            parameters: w.parameters.clone(),
            url: w.url.clone(),
            method: w.method.clone(),
            timeout_seconds: w.timeout_seconds,
            needs_credential: w.credential_ref.is_some(),
        },
        Tool::Builtin(b) => crate::voice::AgentTool::Builtin {
            name: b.to_string(),
        },
    }
}

fn function(name: &str, description: &str, parameters: Value) -> Value {
    json!({"type": "function", "function": {"name": name, "description": description, "parameters": parameters}})
}

/// The tools in the OpenAI `tools` format.
pub fn llm_tools(tools: &[Tool]) -> Vec<Value> {
    tools
        .iter()
        .map(|t| match t {
            Tool::Webhook(w) => function(&w.name, &w.description, w.parameters.clone()),
            Tool::Builtin(SEARCH) => function(
                SEARCH,
                "Search your knowledge base (the documents attached to you) for passages about a question.",
                json!({"type": "object", "properties": {"query": {"type": "string", "description": "what to look for"}}, "required": ["query"]}),
            ),
            Tool::Builtin(CAPTURE_LEAD) => function(
                CAPTURE_LEAD,
                "Save the caller's contact details as a lead once they have given them.",
                json!({"type": "object", "properties": {
                    "name": {"type": "string"}, "email": {"type": "string"}, "phone": {"type": "string"},
                    "budget": {"type": "string"}, "timeline": {"type": "string"}, "notes": {"type": "string"}
                }}),
            ),
            Tool::Builtin(END) => function(
                END,
                "End the conversation once the caller is done (after saying goodbye).",
                json!({"type": "object", "properties": {"reason": {"type": "string"}}}),
            ),
            Tool::Builtin(_) => function(
                TRANSFER,
                "Hand the conversation over to a human: the owner is notified and will follow up.",
                json!({"type": "object", "properties": {"reason": {"type": "string", "description": "why the caller needs a person"}}, "required": ["reason"]}),
            ),
        })
        .collect()
}

/// One tool call as recorded in the conversation: never a credential.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ToolRecord {
    pub name: String,
    pub arguments: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub duration_ms: u64,
}

/// What a call did: its record, what the model reads, and whether it ends the conversation.
pub struct Outcome {
    pub record: ToolRecord,
    pub content: String,
    pub end: bool,
}

/// The conversation a call happens in.
pub struct CallCtx<'a> {
    pub app: &'a AppState,
    pub genie: &'a PageGenie,
    pub conversation_id: &'a str,
}

/// Runs the tool `name` with the model's `arguments` (JSON text).
pub async fn run(ctx: &CallCtx<'_>, tools: &[Tool], name: &str, arguments: &str) -> Outcome {
    let started = Instant::now();
    let args: Value = serde_json::from_str(if arguments.trim().is_empty() {
        "{}"
    } else {
        arguments
    })
    .unwrap_or(Value::Null);
    let mut end = false;
    let result = match (tools.iter().find(|t| t.name() == name), &args) {
        (None, _) => Err(format!("unknown tool '{name}'")),
        (_, a) if !a.is_object() => Err("arguments must be a JSON object".to_string()),
        (Some(Tool::Webhook(w)), _) => call_webhook(ctx, w, &args).await,
        (Some(Tool::Builtin(SEARCH)), _) => search(ctx, &args).await,
        (Some(Tool::Builtin(CAPTURE_LEAD)), _) => capture_lead(ctx, &args).await,
        (Some(Tool::Builtin(END)), _) => {
            end = true;
            Ok(json!({"ended": true}))
        }
        (Some(Tool::Builtin(_)), _) => transfer(ctx, &args).await,
    };
    let duration_ms = started.elapsed().as_millis() as u64;
    let (result, error) = match result {
        Ok(v) => (Some(v), None),
        Err(e) => (None, Some(e)),
    };
    let content = match (&result, &error) {
        (Some(v), _) => v.to_string(),
        (_, Some(e)) => json!({"error": e}).to_string(),
        _ => "{}".into(),
    };
    Outcome {
        record: ToolRecord {
            name: name.to_string(),
            arguments: args,
            result,
            error,
            duration_ms,
        },
        content,
        end,
    }
}

fn schema_errors(schema: &Value, args: &Value) -> Option<String> {
    let v = jsonschema::validator_for(schema).ok()?;
    let errors: Vec<String> = v
        .iter_errors(args)
        .take(5)
        .map(|e| {
            let path = e.instance_path().to_string();
            if path.is_empty() {
                e.to_string()
            } else {
                format!("{path}: {e}")
            }
        })
        .collect();
    (!errors.is_empty()).then(|| errors.join("; "))
}

async fn open_credential(ctx: &CallCtx<'_>, r: &str) -> Result<Opened, String> {
    let (uid, r2) = (ctx.genie.user_id.clone(), r.to_string());
    let sealed = ctx
        .app
        .db
        .read(move |c| Ok(find_credential(c, &uid, &r2)?))
        .await
        .map_err(|e| e.message)?
        .ok_or_else(|| format!("the tool's credential '{r}' no longer exists"))?;
    let secret = crate::workers::credentials::reveal(ctx.app, &sealed)
        .ok_or_else(|| format!("the tool's credential '{r}' cannot be opened"))?;
    Ok(Opened {
        meta: sealed.meta,
        secret,
    })
}

async fn call_webhook(ctx: &CallCtx<'_>, w: &Webhook, args: &Value) -> Result<Value, String> {
    if let Some(e) = schema_errors(&w.parameters, args) {
        return Err(format!("invalid arguments: {e}"));
    }
    let creds = match &w.credential_ref {
        Some(r) => vec![open_credential(ctx, r).await?],
        None => Vec::new(),
    };
    let method = Method::from_bytes(w.method.as_bytes()).unwrap_or(Method::POST);
    let mut headers = HeaderMap::new();
    headers.insert(
        reqwest::header::ACCEPT,
        HeaderValue::from_static("application/json"),
    );
    let (url, body) = if method == Method::GET || method == Method::DELETE {
        let mut u = reqwest::Url::parse(&w.url).map_err(|e| e.to_string())?;
        if let Some(obj) = args.as_object().filter(|o| !o.is_empty()) {
            let mut q = u.query_pairs_mut();
            for (k, v) in obj {
                match v {
                    Value::String(s) => q.append_pair(k, s),
                    other => q.append_pair(k, &other.to_string()),
                };
            }
        }
        (u.to_string(), None)
    } else {
        headers.insert(
            reqwest::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        (w.url.clone(), Some(args.to_string().into_bytes()))
    };
    // The client's own bound is looser: the tool's timeout below is the one that applies.
    let limits = Limits {
        max_bytes: REPLY_MAX_BYTES,
        timeout: Duration::from_secs(w.timeout_seconds + 5),
    };
    // The whole call, DNS included, within the tool's timeout.
    let sent = tokio::time::timeout(
        Duration::from_secs(w.timeout_seconds),
        send_limited(ctx.app, method, &url, headers, body, &creds, limits),
    )
    .await
    .map_err(|_| format!("the tool did not answer within {} s", w.timeout_seconds))?;
    let (f, _) = sent.map_err(|e| redact(&e, &creds))?;
    let text = redact(&f.text(), &creds);
    let shown: String = text.chars().take(REPLY_SHOWN_CHARS).collect();
    let truncated = f.truncated || shown.len() < text.len();
    if !(200..300).contains(&f.status) {
        let excerpt: String = shown.chars().take(300).collect();
        return Err(format!(
            "the tool's endpoint answered {}: {excerpt}",
            f.status
        ));
    }
    let body = if f.content_type().contains("json") && !truncated {
        serde_json::from_str::<Value>(&shown).unwrap_or(Value::String(shown))
    } else {
        Value::String(shown)
    };
    if truncated {
        Ok(json!({"body": body, "truncated": true}))
    } else {
        Ok(body)
    }
}

fn str_arg(args: &Value, key: &str) -> Option<String> {
    args.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.chars().take(500).collect())
}

async fn search(ctx: &CallCtx<'_>, args: &Value) -> Result<Value, String> {
    let q = str_arg(args, "query").ok_or("'query' is required")?;
    let g = ctx.genie.clone();
    let index = ctx.app.doc_index.clone();
    let hits = ctx
        .app
        .db
        .read(move |c| {
            Ok(db::page_chat::passages(
                c,
                index.as_deref(),
                &g,
                &q,
                SEARCH_PASSAGES,
            )?)
        })
        .await
        .map_err(|e| e.message)?;
    Ok(json!({"passages": hits.into_iter().map(|h| json!({
        "document_id": h.document_id, "document": h.document_name, "passage": h.content
    })).collect::<Vec<_>>()}))
}

async fn capture_lead(ctx: &CallCtx<'_>, args: &Value) -> Result<Value, String> {
    let fields: Vec<(&'static str, String)> =
        ["name", "email", "phone", "budget", "timeline", "notes"]
            .into_iter()
            .filter_map(|k| str_arg(args, k).map(|v| (k, v)))
            .collect();
    if fields.is_empty() {
        return Err("give at least one of name, email, phone, budget, timeline, notes".into());
    }
    if !fields
        .iter()
        .any(|(k, _)| matches!(*k, "name" | "email" | "phone"))
    {
        return Err("give the caller's name, email or phone".into());
    }
    let (conv, gid, uid) = (
        ctx.conversation_id.to_string(),
        ctx.genie.id.clone(),
        ctx.genie.user_id.clone(),
    );
    let (lead, action, recorded) = ctx
        .app
        .db
        .write(move |c| {
            let meta = json!({"source": "capture_lead", "conversation_id": conv});
            let set: leads_repo::Fields = fields
                .iter()
                .map(|(k, v)| (*k, rusqlite::types::Value::from(v.clone())))
                .collect();
            let (id, action) = match leads_repo::get_by_conversation(c, &conv)? {
                Some(l) => {
                    leads_repo::update(c, l.id, &set)?;
                    leads_repo::log(
                        c,
                        l.id,
                        None,
                        "updated",
                        Some("Updated by the genie during the conversation"),
                        Some(&meta),
                    )?;
                    (l.id, "updated")
                }
                None => {
                    let mut all = set;
                    all.extend([
                        ("agent_id", gid.clone().into()),
                        ("user_id", uid.clone().into()),
                        ("status", "new".to_string().into()),
                        ("metadata", meta.to_string().into()),
                        ("conversation_ref", conv.clone().into()),
                    ]);
                    let id = leads_repo::insert(c, &all)?;
                    leads_repo::log(
                        c,
                        id,
                        None,
                        "created",
                        Some("Captured by the genie during the conversation"),
                        Some(&meta),
                    )?;
                    (id, "created")
                }
            };
            let lead = leads_repo::get(c, id)?.expect("lead just written");
            let kind = if action == "created" {
                "lead.created"
            } else {
                "lead.updated"
            };
            let e = crate::events::Event::new(kind, &lead.user_id, json!(lead));
            Ok((lead, action, crate::events::record(c, e)?))
        })
        .await
        .map_err(|e| e.message)?;
    ctx.app.bus.emit(recorded);
    Ok(json!({"lead_id": lead.id, "saved": action}))
}

async fn transfer(ctx: &CallCtx<'_>, args: &Value) -> Result<Value, String> {
    let reason = str_arg(args, "reason").unwrap_or_else(|| "the caller asked for a person".into());
    let (conv, uid, name) = (
        ctx.conversation_id.to_string(),
        ctx.genie.user_id.clone(),
        ctx.genie.name.clone(),
    );
    let r2 = reason.clone();
    ctx.app
        .db
        .write(move |c| {
            let Some(found) = conv_repo::get(c, &conv)? else {
                return Err(ApiError::not_found("conversation"));
            };
            let mut meta = found.metadata.clone();
            if !meta.is_object() {
                meta = json!({});
            }
            meta["transfer_requested"] = json!({"reason": r2, "at": db::now()});
            conv_repo::set_meta(c, &conv, Some(&meta), None)?;
            db::notifications::insert(
                c,
                &uid,
                "conversation.transfer_requested",
                &format!("{name}: a caller asks for a person"),
                &r2,
                &json!({"conversation_id": conv, "genie_id": found.genie_id}),
            )?;
            Ok(())
        })
        .await
        .map_err(|e| e.message)?;
    Ok(json!({"transferred": true, "message": "The owner has been notified and will follow up."}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_names_the_bad_tool() {
        let ok = validate(
            "data.tools",
            &json!([{"type": "webhook", "name": "lookup", "description": "d", "url": "https://x.example/a",
                     "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}},
                    {"type": "end_conversation"}]),
        )
        .unwrap();
        assert_eq!(ok[0]["method"], "POST");
        assert_eq!(ok[0]["timeout_seconds"], DEFAULT_TIMEOUT_SECONDS);
        let e = validate(
            "data.tools",
            &json!([{"type": "end_conversation"}, {"type": "webhook", "name": "lookup", "description": "d",
                     "url": "ftp://x", "parameters": {"type": "object"}}]),
        )
        .unwrap_err();
        assert!(
            e.message.contains("data.tools[1] (lookup): url"),
            "{}",
            e.message
        );
        let e = validate(
            "data.tools",
            &json!([{"type": "webhook", "name": "t", "description": "d", "url": "https://x.example",
                     "parameters": {"type": "object", "properties": {"a": {"type": 12}}}}]),
        )
        .unwrap_err();
        assert!(e.message.contains("(t): parameters"), "{}", e.message);
        let e = validate("data.tools", &json!([{"type": "teleport"}])).unwrap_err();
        assert!(
            e.message.contains("data.tools[0]: type 'teleport'"),
            "{}",
            e.message
        );
        let e = validate(
            "data.tools",
            &json!([{"type": "capture_lead"}, {"type": "capture_lead"}]),
        )
        .unwrap_err();
        assert!(e.message.contains("another tool has this name"));
    }

    #[test]
    fn templates_drop_credential_refs() {
        let t = json!([{"type": "webhook", "name": "a", "credential_ref": "k"}]);
        assert_eq!(
            without_secrets(&t),
            json!([{"type": "webhook", "name": "a"}])
        );
    }

    #[test]
    fn arguments_are_checked_against_the_schema() {
        let s =
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
        assert!(schema_errors(&s, &json!({"n": 3})).is_none());
        assert!(
            schema_errors(&s, &json!({"n": "x"}))
                .unwrap()
                .contains("/n")
        );
        assert!(schema_errors(&s, &json!({})).is_some());
    }
}
