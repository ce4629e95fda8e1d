//! The `conversations` resource: records of calls and web chats with their transcripts.
//! `sync` pulls them from the voice platform (idempotent by external id), `create` records
//! one the service hosted itself, `analyze` extracts a summary, intent, sentiment and contact
//! details and creates or fills the conversation's lead. Another user's conversation reads
//! as absent (404). The operations behind the writes are `service::conversations`'.

mod analyze;
mod create;
mod edit;
mod list;
mod sync;

use serde_json::{Value, json};

use super::action::{Action, Resource, handler, schema};
use crate::error::{ApiError, ApiResult};

fn check_tags(tags: Vec<String>) -> ApiResult<Value> {
    if tags.len() > 50 {
        return Err(ApiError::validation("data.tags must hold at most 50 tags"));
    }
    let mut out: Vec<String> = Vec::new();
    for t in tags {
        let t = t.trim().to_string();
        if t.is_empty() || t.chars().count() > 50 {
            return Err(ApiError::validation(
                "data.tags: each tag must be 1 to 50 characters",
            ));
        }
        if !out.contains(&t) {
            out.push(t);
        }
    }
    Ok(json!(out))
}

fn parse_time(s: &str, field: &str) -> ApiResult<String> {
    chrono::DateTime::parse_from_rfc3339(s.trim())
        .map(|t| crate::db::fmt_time(t.with_timezone(&chrono::Utc)))
        .map_err(|_| ApiError::validation(format!("{field} must be an RFC 3339 timestamp")))
}

/// Every `conversations` action; see `api::action`.
pub const RESOURCE: Resource = Resource {
    name: "conversations",
    list_action: "all",
    actions: &[
        Action::read("all", handler!(list::list)).data(schema::<list::ListReq>),
        Action::read("list", handler!(list::list)).data(schema::<list::ListReq>),
        Action::read("get", handler!(list::get)).id(),
        Action::write("create", handler!(create::create))
            .data(schema::<create::CreateReq>)
            .conflict(),
        Action::write("update", handler!(edit::update))
            .id()
            .data(schema::<edit::UpdateReq>)
            .conflict(),
        Action::write("delete", handler!(edit::delete)).id(),
        Action::write("sync", handler!(sync::sync)).data(schema::<sync::SyncReq>),
        Action::read("sync-status", handler!(sync::status)).id(),
        Action::write("analyze", handler!(analyze::analyze))
            .id()
            .data(schema::<analyze::AnalyzeReq>)
            .conflict()
            .upstream(),
    ],
};
