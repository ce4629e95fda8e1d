//! `POST /v1`: decode the envelope, authenticate, rate-limit, dispatch, and render
//! `{success: true, data}`. The REST adapter builds the same `Envelope` and calls `execute`.

use std::borrow::Cow;
use std::net::{IpAddr, SocketAddr};

use axum::body::Bytes;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::api::{self, ActionRequest, Ctx};
use crate::auth::{self, Credential};
use crate::db::{self, auth_epoch::Deferred};
use crate::error::{ApiError, ApiResult};
use crate::limits::RateInfo;
use crate::state::AppState;

#[derive(Debug, Clone)]
pub struct Envelope {
    pub resource: String,
    pub action: String,
    pub id: Option<Value>,
    pub data: Value,
}

/// Parses a request body into a JSON object; an empty body is an empty object when
/// `empty_ok` (REST routes), an error otherwise.
pub fn body_object(body: &[u8], empty_ok: bool) -> ApiResult<Map<String, Value>> {
    if body.iter().all(|b| b.is_ascii_whitespace()) {
        if empty_ok {
            return Ok(Map::new());
        }
        return Err(ApiError::validation(
            "request body must be a JSON object with 'resource' and 'action'",
        ));
    }
    match serde_json::from_slice::<Value>(body) {
        // Inside valid JSON a NUL can only be written as the escape `\u0000`: a body
        // without a backslash (most of them; found with memchr) needs no walk of its tree.
        Ok(Value::Object(m)) if !body.contains(&b'\\') => Ok(m),
        Ok(Value::Object(m)) => {
            for (k, v) in &m {
                if k.contains('\0') {
                    return Err(ApiError::validation(
                        "a member name must not contain NUL (U+0000)",
                    ));
                }
                api::input::refuse_nul(v, k)?;
            }
            Ok(m)
        }
        Ok(_) => Err(ApiError::validation("request body must be a JSON object")),
        Err(e) => Err(ApiError::validation(format!(
            "request body is not valid JSON: {e}"
        ))),
    }
}

fn take_string(m: &mut Map<String, Value>, name: &str) -> ApiResult<Option<String>> {
    match m.remove(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ApiError::validation(format!("{name} must be a string"))),
    }
}

pub fn take_id(m: &mut Map<String, Value>) -> ApiResult<Option<Value>> {
    match m.remove("id") {
        None | Some(Value::Null) => Ok(None),
        Some(v @ (Value::String(_) | Value::Number(_))) => Ok(Some(v)),
        Some(_) => Err(ApiError::validation("id must be a string or a number")),
    }
}

pub fn check_data(v: Value) -> ApiResult<Value> {
    match v {
        Value::Null => Ok(json!({})),
        Value::Object(_) => Ok(v),
        _ => Err(ApiError::validation("data must be an object")),
    }
}

impl Envelope {
    pub fn parse(body: &[u8]) -> ApiResult<Envelope> {
        Envelope::from_object(body_object(body, false)?)
    }

    fn from_object(mut m: Map<String, Value>) -> ApiResult<Envelope> {
        let resource = take_string(&mut m, "resource")?
            .ok_or_else(|| ApiError::validation("resource is required"))?;
        let action = take_string(&mut m, "action")?
            .ok_or_else(|| ApiError::validation("action is required"))?;
        let id = take_id(&mut m)?;
        let data = check_data(m.remove("data").unwrap_or(Value::Null))?;
        Ok(Envelope {
            resource,
            action,
            id,
            data,
        })
    }
}

pub async fn handle(
    State(app): State<AppState>,
    ConnectInfo(addr): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Response {
    let body = match body {
        Ok(b) => b,
        Err(e) => return body_rejection(&app, e).into_response(),
    };
    // One parse serves both: the resource named (so authentication can apply the
    // api-keys rule even to a request that will fail validation) and the envelope.
    let (hint, envelope) = match body_object(&body, false) {
        Ok(m) => {
            let hint = match m.get("resource") {
                Some(Value::String(r)) => Some(r.clone()),
                _ => None,
            };
            (hint, Envelope::from_object(m))
        }
        Err(e) => (None, Err(e)),
    };
    execute(&app, &headers, addr.ip(), hint.as_deref(), envelope).await
}

pub fn body_rejection(app: &AppState, e: axum::extract::rejection::BytesRejection) -> ApiError {
    if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::payload_too_large(app.config.max_body_bytes)
    } else {
        ApiError::validation(format!("could not read the request body: {e}"))
    }
}

/// Authenticate, count against the rate limit, then run the envelope. Authentication
/// comes first so that nothing about a request is revealed to an unauthenticated caller.
pub async fn execute(
    app: &AppState,
    headers: &HeaderMap,
    ip: IpAddr,
    resource_hint: Option<&str>,
    envelope: ApiResult<Envelope>,
) -> Response {
    let named = Named::of(resource_hint, &envelope);
    let labels = crate::telemetry::prom::enabled().then(|| named.labels());
    let session_only = named.resource.map(|r| r.name) == Some("api-keys");
    let principal = match Credential::from_headers(headers) {
        Ok(cred) if named.defers_auth_check() => {
            auth::authenticate_deferred(&app.db, &app.auth_cache, &app.secrets, cred, session_only)
                .await
        }
        Ok(cred) => auth::authenticate(&app.db, &app.auth_cache, &app.secrets, cred, session_only)
            .await
            .map(|p| (p, None)),
        Err(e) => Err(e),
    };
    let (principal, unchecked) = match principal {
        Ok(p) => p,
        Err(e) => return with_labels(e.into_response(), labels),
    };
    let again = Again {
        headers,
        session_only,
        epoch: unchecked,
    };
    let (mut resp, info) = match app.limits.check(&principal.rate_key()).await {
        Err(limited) => (limited.error.into_response(), Some(limited.info)),
        Ok(info) => (
            run(app, principal, ip, envelope, named, again)
                .await
                .unwrap_or_else(IntoResponse::into_response),
            info,
        ),
    };
    if let Some(RateInfo { limit, remaining }) = info {
        let h = resp.headers_mut();
        h.insert("x-ratelimit-limit", HeaderValue::from(limit));
        h.insert("x-ratelimit-remaining", HeaderValue::from(remaining));
    }
    with_labels(resp, labels)
}

/// The resource and action an envelope request names, looked up once in the action tables
/// (`None` for names the tables do not have). Without an envelope (it did not parse), the
/// resource is the one the body named, if any.
#[derive(Clone, Copy)]
struct Named {
    resource: Option<&'static api::action::Resource>,
    action: Option<&'static api::action::Action>,
}

impl Named {
    fn of(hint: Option<&str>, envelope: &ApiResult<Envelope>) -> Named {
        let (resource, action) = match envelope {
            Ok(e) => (Some(e.resource.as_str()), Some(e.action.as_str())),
            Err(_) => (hint, None),
        };
        let resource = resource.and_then(api::resource);
        let action = resource.zip(action).and_then(|(r, a)| r.action(a));
        Named { resource, action }
    }

    /// The metric labels: `unknown` for what the tables do not name (client input never
    /// becomes a label).
    fn labels(self) -> RouteLabels {
        RouteLabels {
            resource: self.resource.map_or("unknown", |r| r.name),
            action: self.action.map_or("unknown", |a| a.name),
        }
    }

    /// Actions whose handlers begin with a database operation (after checking their input),
    /// so that a caller found in the authentication cache can be checked by that operation,
    /// in its own transaction, instead of by a read of its own before the handler
    /// (`db::auth_epoch::Deferred`). The busiest actions; every other keeps the check first.
    fn defers_auth_check(self) -> bool {
        matches!(
            (self.resource.map(|r| r.name), self.action.map(|a| a.name)),
            (
                Some("leads"),
                Some("get" | "all" | "list" | "stats" | "create" | "update")
            ) | (Some("genies"), Some("get" | "update"))
        )
    }
}

fn with_labels(mut resp: Response, labels: Option<RouteLabels>) -> Response {
    if let Some(l) = labels {
        resp.extensions_mut().insert(l);
    }
    resp
}

/// The resource and action of an envelope request, for the HTTP metrics layer.
#[derive(Debug, Clone, Copy)]
pub struct RouteLabels {
    pub resource: &'static str,
    pub action: &'static str,
}

/// What it takes to authenticate a request again when its deferred check found the
/// authentication epoch moved: the epoch its cached caller was read at (`None`: checked
/// already), and the credential's headers.
struct Again<'a> {
    headers: &'a HeaderMap,
    session_only: bool,
    epoch: Option<i64>,
}

async fn run(
    app: &AppState,
    principal: auth::Principal,
    ip: IpAddr,
    envelope: ApiResult<Envelope>,
    named: Named,
    again: Again<'_>,
) -> ApiResult<Response> {
    let env = envelope?;
    let resource = named
        .resource
        .map(|r| r.name)
        .ok_or_else(|| ApiError::invalid_resource(&env.resource))?;
    if env.action.trim().is_empty() {
        return Err(ApiError::validation("action must not be empty"));
    }
    let ctx = Ctx {
        app: app.clone(),
        principal,
        ip: Some(ip),
    };
    let req = ActionRequest {
        resource,
        action: env.action,
        id: env.id,
        data: env.data,
    };
    if crate::telemetry::trace::enabled() {
        let span = tracing::Span::current();
        span.record("resource", resource);
        span.record("action", req.action.as_str());
    } else {
        let action = match named.action {
            Some(a) => Cow::Borrowed(a.name),
            None => Cow::Owned(req.action.clone()),
        };
        crate::telemetry::context::name(resource, action);
    }
    let Some(epoch) = again.epoch else {
        return Ok(api::dispatch_to(&ctx, named.action, &req)
            .await?
            .into_envelope());
    };
    let (reply, check) =
        db::auth_epoch::deferred(epoch, api::dispatch_to(&ctx, named.action, &req)).await;
    let moved = match check {
        Deferred::Held => false,
        Deferred::Moved => true,
        // No database operation ran (the input was refused first): the check runs now.
        Deferred::Pending(epoch) => !auth::epoch_is(&app.db, epoch).await,
    };
    if !moved {
        return Ok(reply?.into_envelope());
    }
    // The caller as the database says now, and the request again: the first run did
    // nothing (its first database operation gave up before anything else).
    let cred = Credential::from_headers(again.headers)?;
    let principal = auth::authenticate(
        &app.db,
        &app.auth_cache,
        &app.secrets,
        cred,
        again.session_only,
    )
    .await?;
    let ctx = Ctx { principal, ..ctx };
    Ok(api::dispatch_to(&ctx, named.action, &req)
        .await?
        .into_envelope())
}
