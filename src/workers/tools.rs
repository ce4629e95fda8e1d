//! The tools a worker genie may call during a run, their JSON schemas (sent to the model)
//! and their implementations. Results are JSON; a failed call returns `{"error": "..."}` to
//! the model instead of ending the run, so the model can react.
//!
//! Credential injection in `web_fetch`: each credential named in the genie's
//! `credential_refs` is injected into a request when its `url_prefix` is a prefix of the
//! request URL (both normalised by the URL parser, so `https://api.x.com` means
//! `https://api.x.com/` and never matches `https://api.x.com.evil.net/`). A credential
//! without `url_prefix` is injected into every `web_fetch` request of the genie. Injected
//! headers replace headers of the same name the model supplied. `bearer_token` sets
//! `Authorization: Bearer <value>`, `basic_auth` (value `user:password`) sets
//! `Authorization: Basic <base64>`, `api_key` sets the credential's `header_name`
//! (default `X-API-Key`). Secret values that appear in a response are replaced by
//! `[redacted]` before the model or the run history sees them.

use crate::db::sql::types::Value as Sql;
use base64::Engine;
use reqwest::Method;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};

use crate::db::{self, workers::Credential, workers::WorkerGenie, workers_query};
use crate::net::Limits;
use crate::state::AppState;

/// Largest response body `web_fetch` reads, and the part of it the model sees.
pub const FETCH_MAX_BYTES: usize = 512 * 1024;
pub const FETCH_SHOWN_CHARS: usize = 32 * 1024;
const MEMORY_VALUE_MAX: usize = 64 * 1024;
const MEMORY_KEY_MAX: usize = 200;
const MEMORY_KEYS_PER_SCOPE: i64 = 1000;

/// A credential opened for one run.
#[derive(Clone)]
pub struct Opened {
    pub meta: Credential,
    pub secret: String,
}

pub struct ToolCtx {
    pub app: AppState,
    pub genie: WorkerGenie,
    pub run_id: String,
    pub credentials: Vec<Opened>,
}

/// The tool definitions, in the OpenAI `tools` format.
pub fn schemas() -> Vec<Value> {
    let scope = json!({"type": "string", "enum": ["genie", "account"], "description": "genie: this worker genie's own memory (default); account: shared by all worker genies of the account"});
    vec![
        tool(
            "web_fetch",
            "Make an HTTP request. Stored credentials are added automatically to matching URLs; never put secrets in the request yourself.",
            json!({
                "type": "object",
                "properties": {
                    "url": {"type": "string", "description": "http(s) URL"},
                    "method": {"type": "string", "enum": ["GET", "POST", "PUT", "PATCH", "DELETE"], "description": "default GET"},
                    "headers": {"type": "object", "additionalProperties": {"type": "string"}},
                    "body": {"description": "request body: a string, or JSON (sent as application/json)"}
                },
                "required": ["url"]
            }),
        ),
        tool(
            "memory_read",
            "Read durable memory. With a key, returns its value; without, lists the stored keys.",
            json!({"type": "object", "properties": {"key": {"type": "string"}, "scope": scope}}),
        ),
        tool(
            "memory_write",
            "Store a JSON value under a key in durable memory; it persists across runs. A null value deletes the key.",
            json!({"type": "object", "properties": {"key": {"type": "string"}, "value": {}, "scope": scope}, "required": ["key", "value"]}),
        ),
        tool(
            "query_data",
            "Read the account's records (read-only). Equality filters on listed columns, newest first.",
            json!({
                "type": "object",
                "properties": {
                    "table": {"type": "string", "enum": workers_query::TABLES.iter().map(|t| t.name).collect::<Vec<_>>()},
                    "filters": {"type": "object", "description": "column -> exact value"},
                    "created_after": {"type": "string", "description": "RFC 3339 timestamp"},
                    "created_before": {"type": "string", "description": "RFC 3339 timestamp"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                    "offset": {"type": "integer", "minimum": 0}
                },
                "required": ["table"]
            }),
        ),
        tool(
            "notify_owner",
            "Send the account owner a notification (dashboard; email when the service has mail configured).",
            json!({
                "type": "object",
                "properties": {
                    "title": {"type": "string"},
                    "body": {"type": "string"},
                    "level": {"type": "string", "enum": ["info", "warning", "error"]}
                },
                "required": ["title"]
            }),
        ),
    ]
}

fn tool(name: &str, description: &str, parameters: Value) -> Value {
    json!({"type": "function", "function": {"name": name, "description": description, "parameters": parameters}})
}

/// Runs one tool call. `Err` is a message for the model.
pub async fn call(ctx: &ToolCtx, name: &str, args: &Value) -> Result<Value, String> {
    if !args.is_object() {
        return Err("arguments must be a JSON object".into());
    }
    match name {
        "web_fetch" => web_fetch(ctx, args).await,
        "memory_read" => memory_read(ctx, args).await,
        "memory_write" => memory_write(ctx, args).await,
        "query_data" => query_data(ctx, args).await,
        "notify_owner" => notify_owner(ctx, args).await,
        other => Err(format!("unknown tool '{other}'")),
    }
}

fn str_arg<'a>(args: &'a Value, key: &str) -> Result<Option<&'a str>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("'{key}' must be a string")),
    }
}

/// Whether credential `c` applies to `url` (already normalised).
pub fn matches(c: &Credential, url: &str) -> bool {
    c.url_prefix.as_deref().is_none_or(|p| url.starts_with(p))
}

/// The header a credential sets.
pub fn credential_header(c: &Opened) -> Result<(HeaderName, HeaderValue), String> {
    let bad = |_| {
        format!(
            "credential '{}' holds characters not allowed in an HTTP header",
            c.meta.name
        )
    };
    match c.meta.credential_type.as_str() {
        "bearer_token" => Ok((
            reqwest::header::AUTHORIZATION,
            HeaderValue::from_str(&format!("Bearer {}", c.secret)).map_err(bad)?,
        )),
        "basic_auth" => {
            let enc = base64::engine::general_purpose::STANDARD.encode(c.secret.as_bytes());
            Ok((
                reqwest::header::AUTHORIZATION,
                HeaderValue::from_str(&format!("Basic {enc}")).map_err(bad)?,
            ))
        }
        _ => {
            let name = c.meta.header_name.as_deref().unwrap_or("X-API-Key");
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("credential '{}' has an invalid header_name", c.meta.name))?;
            Ok((name, HeaderValue::from_str(&c.secret).map_err(bad)?))
        }
    }
}

/// Replaces every secret (and its basic-auth encoding) in `text` with `[redacted]`.
pub fn redact(text: &str, creds: &[Opened]) -> String {
    let mut out = text.to_string();
    for c in creds {
        if c.secret.len() >= 4 {
            out = out.replace(&c.secret, "[redacted]");
            let enc = base64::engine::general_purpose::STANDARD.encode(c.secret.as_bytes());
            out = out.replace(&enc, "[redacted]");
        }
    }
    out
}

/// One request through the guarded client with the matching credentials injected; shared
/// by the `web_fetch` tool and `test-credential`. Returns the response and the names of the
/// credentials injected.
pub async fn send(
    app: &AppState,
    method: Method,
    url: &str,
    headers: HeaderMap,
    body: Option<Vec<u8>>,
    creds: &[Opened],
) -> Result<(crate::net::Fetched, Vec<String>), String> {
    let limits = Limits {
        max_bytes: FETCH_MAX_BYTES,
        timeout: std::time::Duration::from_secs(30),
    };
    send_limited(app, method, url, headers, body, creds, limits).await
}

/// [`send`] within the caller's size and time bounds (a genie's webhook tool has its own).
pub async fn send_limited(
    app: &AppState,
    method: Method,
    url: &str,
    mut headers: HeaderMap,
    body: Option<Vec<u8>>,
    creds: &[Opened],
    limits: Limits,
) -> Result<(crate::net::Fetched, Vec<String>), String> {
    let parsed = app.net.check(url).map_err(|e| e.to_string())?;
    let normal = parsed.as_str().to_string();
    let mut injected = Vec::new();
    let mut matching: Vec<&Opened> = creds.iter().filter(|c| matches(&c.meta, &normal)).collect();
    // The most specific binding wins when two credentials set the same header.
    matching.sort_by_key(|c| std::cmp::Reverse(c.meta.url_prefix.as_ref().map_or(0, |p| p.len())));
    let mut set = std::collections::HashSet::new();
    for c in matching {
        let (name, value) = credential_header(c)?;
        if set.insert(name.clone()) {
            headers.insert(name, value);
            injected.push(c.meta.name.clone());
        }
    }
    let fetched = app
        .net
        .fetch(method, &normal, headers, body, limits)
        .await
        .map_err(|e| e.to_string())?;
    Ok((fetched, injected))
}

async fn web_fetch(ctx: &ToolCtx, args: &Value) -> Result<Value, String> {
    let url = str_arg(args, "url")?.ok_or("'url' is required")?;
    let method = match str_arg(args, "method")?
        .unwrap_or("GET")
        .to_ascii_uppercase()
        .as_str()
    {
        "GET" => Method::GET,
        "POST" => Method::POST,
        "PUT" => Method::PUT,
        "PATCH" => Method::PATCH,
        "DELETE" => Method::DELETE,
        other => {
            return Err(format!(
                "method '{other}' is not allowed; use GET, POST, PUT, PATCH or DELETE"
            ));
        }
    };
    let mut headers = HeaderMap::new();
    match args.get("headers") {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            for (k, v) in map {
                let v = v
                    .as_str()
                    .ok_or_else(|| format!("header '{k}' must be a string"))?;
                let name = HeaderName::from_bytes(k.as_bytes())
                    .map_err(|_| format!("'{k}' is not a valid header name"))?;
                let value = HeaderValue::from_str(v)
                    .map_err(|_| format!("header '{k}' has an invalid value"))?;
                headers.insert(name, value);
            }
        }
        Some(_) => return Err("'headers' must be an object of strings".into()),
    }
    let body = match args.get("body") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone().into_bytes()),
        Some(v) => {
            if !headers.contains_key(reqwest::header::CONTENT_TYPE) {
                headers.insert(
                    reqwest::header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
            }
            Some(v.to_string().into_bytes())
        }
    };
    let (f, injected) = send(&ctx.app, method, url, headers, body, &ctx.credentials).await?;
    let text = f.text();
    let shown: String = text.chars().take(FETCH_SHOWN_CHARS).collect();
    let truncated = f.truncated || shown.len() < text.len();
    let body_value = if f.content_type().contains("json") && !truncated {
        serde_json::from_str::<Value>(&shown).unwrap_or(Value::String(shown))
    } else {
        Value::String(shown)
    };
    Ok(json!({
        "status": f.status,
        "url": f.url.as_str(),
        "content_type": f.content_type(),
        "body": body_value,
        "truncated": truncated,
        "credentials_injected": injected,
    }))
}

fn scope_of(ctx: &ToolCtx, args: &Value) -> Result<String, String> {
    match str_arg(args, "scope")?.unwrap_or("genie") {
        "genie" => Ok(ctx.genie.id.clone()),
        "account" => Ok(String::new()),
        other => Err(format!(
            "scope '{other}' is not allowed; use 'genie' or 'account'"
        )),
    }
}

async fn memory_read(ctx: &ToolCtx, args: &Value) -> Result<Value, String> {
    let scope = scope_of(ctx, args)?;
    let key = str_arg(args, "key")?.map(str::to_string);
    let uid = ctx.genie.user_id.clone();
    let scope_name = if scope.is_empty() { "account" } else { "genie" };
    match key {
        Some(key) => {
            let k = key.clone();
            let found = ctx
                .app
                .db
                .read(move |c| Ok(db::workers::memory_get(c, &uid, &scope, &k)?))
                .await
                .map_err(|e| e.message)?;
            Ok(match found {
                Some((value, updated_at)) => {
                    json!({"key": key, "scope": scope_name, "found": true, "value": value, "updated_at": updated_at})
                }
                None => json!({"key": key, "scope": scope_name, "found": false, "value": null}),
            })
        }
        None => {
            let keys = ctx
                .app
                .db
                .read(move |c| Ok(db::workers::memory_keys(c, &uid, &scope, 200)?))
                .await
                .map_err(|e| e.message)?;
            Ok(json!({"scope": scope_name, "keys": keys}))
        }
    }
}

async fn memory_write(ctx: &ToolCtx, args: &Value) -> Result<Value, String> {
    let scope = scope_of(ctx, args)?;
    let key = str_arg(args, "key")?
        .ok_or("'key' is required")?
        .trim()
        .to_string();
    if key.is_empty() || key.chars().count() > MEMORY_KEY_MAX {
        return Err(format!("'key' must be 1 to {MEMORY_KEY_MAX} characters"));
    }
    let value = args.get("value").cloned().ok_or("'value' is required")?;
    if value.to_string().len() > MEMORY_VALUE_MAX {
        return Err(format!("'value' is larger than {MEMORY_VALUE_MAX} bytes"));
    }
    let value = match value {
        Value::String(s) => Value::String(redact(&s, &ctx.credentials)),
        v => serde_json::from_str(&redact(&v.to_string(), &ctx.credentials)).unwrap_or(Value::Null),
    };
    let uid = ctx.genie.user_id.clone();
    let k = key.clone();
    let scope_name = if scope.is_empty() { "account" } else { "genie" };
    let deleted = value.is_null();
    ctx.app
        .db
        .write(move |c| {
            if value.is_null() {
                db::workers::memory_delete(c, &uid, &scope, &k)?;
                return Ok(());
            }
            if db::workers::memory_get(c, &uid, &scope, &k)?.is_none()
                && db::workers::memory_count(c, &uid, &scope)? >= MEMORY_KEYS_PER_SCOPE
            {
                return Err(crate::error::ApiError::validation(format!(
                    "memory is full: at most {MEMORY_KEYS_PER_SCOPE} keys per scope"
                )));
            }
            Ok(db::workers::memory_put(c, &uid, &scope, &k, &value)?)
        })
        .await
        .map_err(|e| e.message)?;
    Ok(json!({"key": key, "scope": scope_name, "written": !deleted, "deleted": deleted}))
}

async fn query_data(ctx: &ToolCtx, args: &Value) -> Result<Value, String> {
    let name = str_arg(args, "table")?.ok_or("'table' is required")?;
    let names: Vec<&str> = workers_query::TABLES.iter().map(|t| t.name).collect();
    let table = workers_query::table(name)
        .ok_or_else(|| format!("unknown table '{name}'; use one of {}", names.join(", ")))?;
    let mut filters = Vec::new();
    match args.get("filters") {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            for (k, v) in map {
                let col = table
                    .columns
                    .iter()
                    .find(|c| **c == k.as_str())
                    .ok_or_else(|| {
                        format!(
                            "'{k}' is not a column of {name}; columns: {}",
                            table.columns.join(", ")
                        )
                    })?;
                let v = match v {
                    Value::String(s) => Sql::Text(s.clone()),
                    Value::Bool(b) => Sql::Integer(*b as i64),
                    Value::Number(n) if n.is_i64() => Sql::Integer(n.as_i64().unwrap_or_default()),
                    Value::Number(n) => Sql::Real(n.as_f64().unwrap_or_default()),
                    Value::Null => Sql::Null,
                    _ => return Err(format!("filter '{k}' must be a string, number or boolean")),
                };
                filters.push((*col, table.bind(col, v)?));
            }
        }
        Some(_) => return Err("'filters' must be an object".into()),
    }
    let time = |key: &str| -> Result<Option<String>, String> {
        match str_arg(args, key)? {
            None => Ok(None),
            Some(s) => chrono::DateTime::parse_from_rfc3339(s)
                .map(|t| Some(db::fmt_time(t.with_timezone(&chrono::Utc))))
                .map_err(|_| format!("'{key}' must be an RFC 3339 timestamp")),
        }
    };
    let int = |key: &str, default: i64, min: i64, max: i64| -> Result<i64, String> {
        match args.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(v) => v
                .as_i64()
                .filter(|n| (min..=max).contains(n))
                .ok_or_else(|| format!("'{key}' must be an integer from {min} to {max}")),
        }
    };
    let q = workers_query::Query {
        table,
        filters,
        created_after: time("created_after")?,
        created_before: time("created_before")?,
        limit: int("limit", 20, 1, 100)?,
        offset: int("offset", 0, 0, 1_000_000)?,
    };
    let uid = ctx.genie.user_id.clone();
    let (rows, total) = ctx
        .app
        .db
        .read(move |c| Ok(workers_query::run(c, &uid, &q)?))
        .await
        .map_err(|e| e.message)?;
    Ok(json!({"table": name, "rows": rows, "count": rows.len(), "total": total}))
}

async fn notify_owner(ctx: &ToolCtx, args: &Value) -> Result<Value, String> {
    let title = str_arg(args, "title")?
        .ok_or("'title' is required")?
        .trim()
        .to_string();
    if title.is_empty() || title.chars().count() > 200 {
        return Err("'title' must be 1 to 200 characters".into());
    }
    let body = str_arg(args, "body")?.unwrap_or("").to_string();
    if body.chars().count() > 10_000 {
        return Err("'body' must be at most 10000 characters".into());
    }
    let level = str_arg(args, "level")?.unwrap_or("info").to_string();
    if !["info", "warning", "error"].contains(&level.as_str()) {
        return Err("'level' must be info, warning or error".into());
    }
    let (title, body) = (
        redact(&title, &ctx.credentials),
        redact(&body, &ctx.credentials),
    );
    let data = json!({"worker_genie_id": ctx.genie.id, "worker_genie_name": ctx.genie.name, "run_id": ctx.run_id, "level": level});
    let uid = ctx.genie.user_id.clone();
    let (t2, b2) = (title.clone(), body.clone());
    let id = ctx
        .app
        .db
        .write(move |c| {
            Ok(db::notifications::insert(
                c,
                &uid,
                "worker_genie",
                &t2,
                &b2,
                &data,
            )?)
        })
        .await
        .map_err(|e| e.message)?;
    // Email too when SMTP is configured; the dashboard notification is there either way.
    let uid = ctx.genie.user_id.clone();
    let owner = ctx
        .app
        .db
        .read(move |c| Ok(db::users::get(c, &uid)?))
        .await
        .map_err(|e| e.message)?;
    let email = match owner {
        Some(u) => ctx
            .app
            .mail
            .email_only(&u.id, &u.email, &title, &body)
            .await
            .map_err(|e| e.message)?,
        None => None,
    };
    Ok(json!({
        "notification_id": id,
        "dashboard": true,
        "email": email.as_ref().is_some_and(|o| o.status == "sent"),
        "email_error": email.and_then(|o| o.error),
    }))
}
