//! `POST /v1/knowledge-base/upload`: multipart upload for files too large for base64 in JSON.
//! Authentication happens before the body is read; the parsed form then becomes an ordinary
//! `create` envelope (sub-action `upload-pdf` or `extract-document`) run through
//! `envelope::execute`, so rate limiting, the consumer rule and the audit row are the same as
//! for every other action. Form fields: `file` (required), `action`, `name`, `agentId`,
//! `folder_id`, `is_public`.

use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{Map, Value, json};

use super::envelope::{self, Envelope};
use crate::auth::{self, Credential};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

pub fn routes() -> axum::Router<AppState> {
    axum::Router::new().route("/v1/knowledge-base/upload", axum::routing::post(upload))
}

pub async fn upload(
    State(app): State<AppState>,
    ConnectInfo(addr): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let authed = match Credential::from_headers(&headers) {
        Ok(cred) => auth::authenticate(&app.db, &app.auth_cache, &app.secrets, cred, false).await,
        Err(e) => Err(e),
    };
    if let Err(e) = authed {
        return e.into_response();
    }
    let env = parse(&app, &headers, body).await;
    envelope::execute(&app, &headers, addr.ip(), Some("knowledge-base"), env).await
}

fn too_large(max: usize) -> ApiError {
    ApiError::new(
        crate::error::Kind::PayloadTooLarge,
        format!("the uploaded file is larger than the limit of {max} bytes"),
    )
}

fn multer_err(e: multer::Error, max: usize) -> ApiError {
    match e {
        multer::Error::StreamSizeExceeded { .. } | multer::Error::FieldSizeExceeded { .. } => {
            too_large(max)
        }
        other => ApiError::validation(format!("the multipart body could not be read: {other}")),
    }
}

async fn parse(app: &AppState, headers: &HeaderMap, body: Body) -> ApiResult<Envelope> {
    let max = app.config.max_upload_bytes;
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let boundary = multer::parse_boundary(ct).map_err(|_| {
        ApiError::validation("the body must be multipart/form-data with a boundary")
    })?;
    let limits = multer::Constraints::new().size_limit(
        multer::SizeLimit::new()
            .whole_stream((max + 1024 * 1024) as u64)
            .per_field(max as u64),
    );
    let mut form = multer::Multipart::with_constraints(body.into_data_stream(), boundary, limits);
    let mut file: Option<(String, Vec<u8>)> = None;
    let mut fields = Map::new();
    while let Some(field) = form.next_field().await.map_err(|e| multer_err(e, max))? {
        let name = field.name().unwrap_or("").to_string();
        if name == "file" {
            let filename = field.file_name().unwrap_or("").to_string();
            let bytes = field.bytes().await.map_err(|e| multer_err(e, max))?;
            if bytes.len() > max {
                return Err(too_large(max));
            }
            file = Some((filename, bytes.to_vec()));
        } else if matches!(
            name.as_str(),
            "action" | "name" | "agentId" | "folder_id" | "is_public"
        ) {
            let text = field.text().await.map_err(|e| multer_err(e, max))?;
            let v = if name == "is_public" {
                Value::Bool(text.trim() == "true")
            } else {
                Value::String(text)
            };
            fields.insert(name, v);
        }
    }
    let (filename, bytes) =
        file.ok_or_else(|| ApiError::validation("the form must carry a 'file' field"))?;
    if filename.trim().is_empty() {
        return Err(ApiError::validation(
            "the 'file' field must carry a file name",
        ));
    }
    // As in a JSON body (`api::input::refuse_nul`); the fields by their form names.
    if filename.contains('\0') {
        return Err(ApiError::validation(
            "the 'file' field's file name must not contain NUL (U+0000)",
        ));
    }
    for (k, v) in &fields {
        crate::api::input::refuse_nul(v, k)?;
    }
    let sub = match fields.remove("action") {
        Some(Value::String(a)) if !a.trim().is_empty() => a,
        _ if filename.to_ascii_lowercase().ends_with(".pdf") => "upload-pdf".into(),
        _ => "extract-document".into(),
    };
    let mut inner = json!({"filename": filename, "content_base64": base64::engine::general_purpose::STANDARD.encode(&bytes)});
    for (k, v) in fields {
        inner[k] = v;
    }
    Ok(Envelope {
        resource: "knowledge-base".into(),
        action: "create".into(),
        id: None,
        data: json!({"action": sub, "data": inner}),
    })
}
