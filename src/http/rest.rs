//! REST-style routes, each turned into the same envelope `POST /v1` takes:
//! `GET /v1/{r}` → list (or all), `GET /v1/{r}/{id}` → get, `POST /v1/{r}` → the body's
//! action (default create), `POST /v1/{r}/{id}/{action}`, `PATCH /v1/{r}/{id}` → update
//! (revoke on api-keys), `DELETE /v1/{r}/{id}` → delete.

use std::net::SocketAddr;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{ConnectInfo, Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::{Map, Value};

use super::envelope::{Envelope, body_object, body_rejection, check_data, execute, take_id};
use crate::api;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// Query members that steer paging and options rather than filter; all others are also
/// copied under `data.filters`, where list actions look for filters.
const NOT_FILTERS: &[&str] = &[
    "limit",
    "offset",
    "cursor",
    "adminMode",
    "ownerId",
    "userId",
];

/// `?limit=10&status=new&agentIds=a&agentIds=b` → `{limit: 10, status: "new", agentIds: [..],
/// filters: {status: "new", agentIds: [..]}}`.
pub fn query_to_data(query: Option<&str>) -> ApiResult<Value> {
    // serde_urlencoded turns bytes that are not UTF-8 into U+FFFD, so a search for `%FF`
    // would quietly become a search for `�`; such a member is refused instead.
    for pair in query.unwrap_or("").split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let decode = |s: &str| {
            let plus = s.replace('+', " ");
            percent_encoding::percent_decode_str(&plus)
                .decode_utf8()
                .map(|c| c.into_owned())
        };
        let key = decode(key).map_err(|_| {
            ApiError::validation("query string: a parameter name is not valid UTF-8")
        })?;
        match decode(value) {
            Err(_) => {
                return Err(ApiError::validation(format!(
                    "query string: {key} is not valid UTF-8"
                )));
            }
            // As in a JSON body (`api::input::refuse_nul`).
            Ok(v) if v.contains('\0') || key.contains('\0') => {
                return Err(ApiError::validation(format!(
                    "query string: {} must not contain NUL (U+0000)",
                    key.replace('\0', "\\0")
                )));
            }
            Ok(_) => {}
        }
    }
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query.unwrap_or(""))
        .map_err(|e| ApiError::validation(format!("query string: {e}")))?;
    let mut data = Map::new();
    for (k, v) in pairs {
        let value = if matches!(k.as_str(), "limit" | "offset") {
            v.parse::<i64>()
                .map(Value::from)
                .unwrap_or(Value::String(v))
        } else if v == "true" || v == "false" {
            Value::Bool(v == "true")
        } else {
            Value::String(v)
        };
        match data.get_mut(&k) {
            Some(Value::Array(items)) => items.push(value),
            Some(prev) => *prev = Value::Array(vec![prev.clone(), value]),
            None if k.ends_with("Ids") => {
                data.insert(k, Value::Array(vec![value]));
            }
            None => {
                data.insert(k, value);
            }
        }
    }
    let filters: Map<String, Value> = data
        .iter()
        .filter(|(k, _)| !NOT_FILTERS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if !filters.is_empty() && !data.contains_key("filters") {
        data.insert("filters".into(), Value::Object(filters));
    }
    Ok(Value::Object(data))
}

/// A REST body: `data` when it has one, else its members other than `resource`, `action`
/// and `id`.
fn body_envelope(
    body: &[u8],
    resource: &str,
    action: Option<String>,
    id: Option<Value>,
) -> ApiResult<Envelope> {
    let mut m = body_object(body, true)?;
    m.remove("resource");
    let body_action = match m.remove("action") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(_) => return Err(ApiError::validation("action must be a string")),
    };
    let body_id = take_id(&mut m)?;
    let data = match m.remove("data") {
        Some(d) => check_data(d)?,
        None => Value::Object(m),
    };
    Ok(Envelope {
        resource: resource.to_string(),
        action: action.or(body_action).unwrap_or_else(|| "create".into()),
        id: id.or(body_id),
        data,
    })
}

/// The REST body adapter on its own (what `POST/PATCH /v1/{resource}[/{id}[/{action}]]` does
/// with the body before dispatch); public for the fuzz targets in tests/fuzz.
pub fn parse_body(
    body: &[u8],
    resource: &str,
    action: Option<String>,
    id: Option<Value>,
) -> ApiResult<Envelope> {
    body_envelope(body, resource, action, id)
}

/// An unknown resource in the path is an unknown path.
fn unknown_path() -> Response {
    api::error::rejection(axum::http::StatusCode::NOT_FOUND, None)
}

pub async fn list(
    State(app): State<AppState>,
    ConnectInfo(addr): ConnectInfo<SocketAddr>,
    Path(resource): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let Some(canonical) = api::canonical_resource(&resource) else {
        return unknown_path();
    };
    let env = query_to_data(query.as_deref()).map(|data| Envelope {
        resource: resource.clone(),
        action: api::resource(canonical)
            .map_or("all", |r| r.list_action)
            .to_string(),
        id: None,
        data,
    });
    execute(&app, &headers, addr.ip(), Some(&resource), env).await
}

pub async fn get(
    State(app): State<AppState>,
    ConnectInfo(addr): ConnectInfo<SocketAddr>,
    Path((resource, id)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    if api::canonical_resource(&resource).is_none() {
        return unknown_path();
    }
    let env = query_to_data(query.as_deref()).map(|data| Envelope {
        resource: resource.clone(),
        action: "get".into(),
        id: Some(Value::String(id)),
        data,
    });
    execute(&app, &headers, addr.ip(), Some(&resource), env).await
}

pub async fn create(
    State(app): State<AppState>,
    ConnectInfo(addr): ConnectInfo<SocketAddr>,
    Path(resource): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    with_body(app, addr, resource, headers, body, None, None).await
}

pub async fn action(
    State(app): State<AppState>,
    ConnectInfo(addr): ConnectInfo<SocketAddr>,
    Path((resource, id, action)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    with_body(app, addr, resource, headers, body, Some(action), Some(id)).await
}

pub async fn update(
    State(app): State<AppState>,
    ConnectInfo(addr): ConnectInfo<SocketAddr>,
    Path((resource, id)): Path<(String, String)>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let action = if api::canonical_resource(&resource) == Some("api-keys") {
        "revoke"
    } else {
        "update"
    };
    with_body(
        app,
        addr,
        resource,
        headers,
        body,
        Some(action.into()),
        Some(id),
    )
    .await
}

pub async fn delete(
    State(app): State<AppState>,
    ConnectInfo(addr): ConnectInfo<SocketAddr>,
    Path((resource, id)): Path<(String, String)>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    with_body(
        app,
        addr,
        resource,
        headers,
        body,
        Some("delete".into()),
        Some(id),
    )
    .await
}

async fn with_body(
    app: AppState,
    addr: SocketAddr,
    resource: String,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
    action: Option<String>,
    id: Option<String>,
) -> Response {
    if api::canonical_resource(&resource).is_none() {
        return unknown_path();
    }
    let env = match body {
        Ok(b) => body_envelope(&b, &resource, action, id.map(Value::String)),
        Err(e) => Err(body_rejection(&app, e)),
    };
    execute(&app, &headers, addr.ip(), Some(&resource), env).await
}
