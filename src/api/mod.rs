//! Resources and their actions. `dispatch` maps a decoded envelope to one resource's
//! `handle`, enforces the consumer read-only rule, and writes the audit row for every
//! mutating action, so a new resource gets both without remembering to.

pub mod action;
pub mod activities;
pub mod analytics;
pub mod api_keys;
pub mod campaigns;
pub mod conversations;
pub mod cursor;
pub mod document_folders;
pub mod documents;
pub mod error;
pub mod genie_groups;
pub mod genie_tests;
pub mod genies;
pub mod input;
pub mod lead_notes;
pub mod leads;
pub mod marketplace;
pub mod notifications;
pub mod profiles;
pub mod qr_codes;
pub mod teams;
pub mod users;
pub mod voice_collections;
pub mod voices;
pub mod webhooks;
pub mod worker_genies;

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use self::action::{Action, Resource};
pub use self::input::{
    SEARCH_TERM_MAX, date_range_since, double_option, page, parse_sort, parse_uuid, parse_value,
    search_term,
};
use crate::auth::Principal;
use crate::db::{self, Db};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// Every resource's action table, in the order the OpenAPI document lists them
/// (`documents` is accepted as an alias of `knowledge-base`).
pub const RESOURCES: &[&Resource] = &[
    &genies::RESOURCE,
    &genie_groups::RESOURCE,
    &genie_tests::RESOURCE,
    &conversations::RESOURCE,
    &documents::RESOURCE,
    &document_folders::RESOURCE,
    &voices::RESOURCE,
    &voice_collections::RESOURCE,
    &leads::RESOURCE,
    &lead_notes::RESOURCE,
    &marketplace::RESOURCE,
    &profiles::RESOURCE,
    &teams::RESOURCE,
    &users::RESOURCE,
    &activities::RESOURCE,
    &api_keys::RESOURCE,
    &worker_genies::RESOURCE,
    &qr_codes::RESOURCE,
    &webhooks::RESOURCE,
    &notifications::RESOURCE,
    &analytics::RESOURCE,
    &campaigns::RESOURCE,
];

/// The table of a resource by its envelope name, or `None` when it is unknown.
pub fn resource(name: &str) -> Option<&'static Resource> {
    let name = if name == "documents" {
        "knowledge-base"
    } else {
        name
    };
    RESOURCES.iter().copied().find(|r| r.name == name)
}

/// The canonical name of a resource, or `None` when it is unknown.
pub fn canonical_resource(name: &str) -> Option<&'static str> {
    resource(name).map(|r| r.name)
}

/// One authenticated request, as every handler sees it.
pub struct Ctx {
    pub app: AppState,
    pub principal: Principal,
    /// The caller's address, written as text only into an audit row (a write's).
    pub ip: Option<std::net::IpAddr>,
}

impl Ctx {
    pub fn db(&self) -> &Db {
        &self.app.db
    }
    pub fn user_id(&self) -> &str {
        &self.principal.user_id
    }
}

/// A decoded envelope: `data` is always an object (empty when the client sent none).
#[derive(Debug, Clone)]
pub struct ActionRequest {
    pub resource: &'static str,
    pub action: String,
    pub id: Option<Value>,
    pub data: Value,
}

impl ActionRequest {
    /// Decodes `data` into the action's typed request; a mismatch becomes a
    /// `VALIDATION_ERROR` naming the member, e.g. `data.temperature: invalid type ...`.
    pub fn data<T: DeserializeOwned>(&self) -> ApiResult<T> {
        parse_value(&self.data, "data")
    }

    /// The `id` as text (numbers are accepted and rendered), or a validation error.
    pub fn id_str(&self) -> ApiResult<String> {
        match &self.id {
            Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.trim().to_string()),
            Some(Value::Number(n)) => Ok(n.to_string()),
            None | Some(Value::Null) => Err(ApiError::validation(format!(
                "id is required for action '{}'",
                self.action
            ))),
            Some(_) => Err(ApiError::validation("id must be a string or a number")),
        }
    }

    /// The `id` as a UUID in canonical lower-case form.
    pub fn uuid(&self) -> ApiResult<String> {
        parse_uuid(&self.id_str()?, "id")
    }

    /// The `id` as an integer (leads).
    pub fn int_id(&self) -> ApiResult<i64> {
        let s = self.id_str()?;
        s.parse::<i64>()
            .map_err(|_| ApiError::validation("id must be an integer"))
    }
}

/// A successful action: HTTP status and the envelope's `data`. `record_id` and `summary`
/// feed the audit row when the handler knows better than the defaults.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub data: Value,
    /// The whole success body, already serialized (see [`Reply::rendered`]); when set,
    /// `data` is null.
    pub rendered: Option<Vec<u8>>,
    pub record_id: Option<String>,
    pub summary: Option<String>,
}

/// What a rendered reply's buffer starts with: a lead with its fields filled in is about
/// 700 bytes of JSON; a page of them grows it from there.
const RENDERED_CAPACITY: usize = 1024;

/// The success envelope, written straight from the reply without an intermediate `Value`.
#[derive(Serialize)]
struct Success<'a, D: Serialize + ?Sized> {
    success: bool,
    data: &'a D,
}

impl Reply {
    pub fn ok(data: Value) -> Reply {
        Reply {
            status: StatusCode::OK,
            data,
            rendered: None,
            record_id: None,
            summary: None,
        }
    }

    /// A read reply serialized from typed data, skipping the `Value` tree that `json!` would
    /// build; for the hot read paths (a lead, a page of leads). Not for mutating actions:
    /// the audit row looks for the record id in `data`.
    ///
    /// The envelope is written around it in the same pass, into one buffer sized for a
    /// record, so the record's text is neither grown step by step nor copied again.
    pub fn rendered<T: Serialize>(data: &T) -> ApiResult<Reply> {
        let mut body = Vec::with_capacity(RENDERED_CAPACITY);
        serde_json::to_writer(
            &mut body,
            &Success {
                success: true,
                data,
            },
        )
        .map_err(|e| ApiError::internal(format!("could not encode the reply: {e}")))?;
        Ok(Reply {
            rendered: Some(body),
            ..Reply::ok(Value::Null)
        })
    }

    /// The HTTP response: `{"success": true, "data": ...}` with the reply's status.
    pub fn into_envelope(self) -> Response {
        let body = match self.rendered {
            Some(body) => Ok(body),
            None => serde_json::to_vec(&Success {
                success: true,
                data: &self.data,
            }),
        };
        match body {
            Ok(b) => (self.status, [(header::CONTENT_TYPE, "application/json")], b).into_response(),
            Err(e) => {
                ApiError::internal(format!("could not encode the reply: {e}")).into_response()
            }
        }
    }
    pub fn created(data: Value) -> Reply {
        Reply {
            status: StatusCode::CREATED,
            ..Reply::ok(data)
        }
    }
    pub fn accepted(data: Value) -> Reply {
        Reply {
            status: StatusCode::ACCEPTED,
            ..Reply::ok(data)
        }
    }
    pub fn deleted(id: &str) -> Reply {
        Reply::ok(json!({"id": id, "deleted": true})).record(id)
    }
    pub fn record(mut self, id: impl Into<String>) -> Reply {
        self.record_id = Some(id.into());
        self
    }
    pub fn summary(mut self, s: impl Into<String>) -> Reply {
        self.summary = Some(s.into());
        self
    }
}

/// Runs one action: the resource's table names it (else `INVALID_ACTION`), its access rule
/// is checked, its handler runs, and a write leaves an audit row.
pub async fn dispatch(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let action = resource(req.resource).and_then(|r| r.action(&req.action));
    dispatch_to(ctx, action, req).await
}

/// [`dispatch`] for a caller that looked the action up already: `action` is the resource's
/// table entry for `req.action`, `None` when the table does not name it.
pub async fn dispatch_to(
    ctx: &Ctx,
    action: Option<&'static Action>,
    req: &ActionRequest,
) -> ApiResult<Reply> {
    let action = action.ok_or_else(|| ApiError::invalid_action(req.resource, &req.action))?;
    action.access.check(&ctx.principal)?;
    if !action.access.writes() {
        return (action.handler)(ctx, req).await;
    }
    // The write that carries the action out may take its audit row into its own
    // transaction (`db::activities::claim`); otherwise it is written here, after.
    let pending = db::activities::Pending {
        user_id: ctx.user_id().to_string(),
        resource: req.resource,
        action: req.action.clone(),
        ip: ctx.ip.map(|ip| ip.to_string()),
    };
    let (reply, unclaimed) = db::activities::offer(pending, (action.handler)(ctx, req)).await;
    let reply = reply?;
    if unclaimed.is_some() {
        audit(ctx, req, &reply).await;
    }
    Ok(reply)
}

/// The shared audit helper: one activity row per successful mutating action whose write did
/// not record it itself.
async fn audit(ctx: &Ctx, req: &ActionRequest, reply: &Reply) {
    let record_id = reply
        .record_id
        .clone()
        .or_else(|| req.id_str().ok())
        .or_else(|| find_record_id(&reply.data));
    let summary = reply
        .summary
        .clone()
        .unwrap_or_else(|| format!("{} {}", req.action, req.resource));
    let (user, resource, action, ip) = (
        ctx.user_id().to_string(),
        req.resource,
        req.action.clone(),
        ctx.ip.map(|ip| ip.to_string()),
    );
    let res = ctx
        .db()
        .write(move |c| {
            Ok(db::activities::insert(
                c,
                &db::activities::NewActivity {
                    user_id: &user,
                    resource,
                    action: &action,
                    record_id: record_id.as_deref(),
                    summary: &summary,
                    ip: ip.as_deref(),
                },
            )?)
        })
        .await;
    if let Err(e) = res {
        tracing::error!(error = %e, "could not write the activity row");
    }
}

/// The id of the record a reply carries: `data.id`, or the `id` of its single object member
/// (`{api_key: {id, ...}}`).
fn find_record_id(data: &Value) -> Option<String> {
    let obj = data.as_object()?;
    if let Some(Value::String(id)) = obj.get("id") {
        return Some(id.clone());
    }
    obj.values().find_map(|v| match v.get("id")? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    })
}
