//! The `lead-notes` resource: notes on a lead, with pinning (pinned notes list first) and a
//! manual order. Only people with access to the lead reach its notes; as on leads, a note
//! on a lead the caller cannot reach is 403 `FORBIDDEN`.

mod notes;
mod order;

use crate::db::sql::Connection;
use serde_json::Value;

use super::action::{Action, Resource, handler, schema};
use crate::auth::Principal;
use crate::db::lead_notes::{self as repo, Note};
use crate::error::{ApiError, ApiResult};
use crate::service::leads::load as load_lead;

const MAX_CONTENT: usize = 20_000;

/// `leadId` (or `lead_id`) as a number or numeric string.
fn lead_id(v: &Option<Value>) -> ApiResult<i64> {
    match v {
        Some(Value::Number(n)) => n.as_i64(),
        Some(Value::String(s)) => s.trim().parse().ok(),
        _ => return Err(ApiError::validation("data.leadId is required")),
    }
    .ok_or_else(|| ApiError::validation("data.leadId must be an integer"))
}

fn check_content(s: &str) -> ApiResult<String> {
    let s = s.trim();
    if s.is_empty() {
        return Err(ApiError::validation("data.content must not be empty"));
    }
    if s.chars().count() > MAX_CONTENT {
        return Err(ApiError::validation(format!(
            "data.content must be at most {MAX_CONTENT} characters"
        )));
    }
    Ok(s.to_string())
}

/// A note the principal may reach through its lead.
fn load(c: &Connection, p: &Principal, id: &str, write: bool) -> ApiResult<Note> {
    let note = repo::get(c, id)?.ok_or_else(|| ApiError::not_found("lead note"))?;
    load_lead(c, p, note.lead_id, write)?;
    Ok(note)
}

/// Every `lead-notes` action; see `api::action`.
pub const RESOURCE: Resource = Resource {
    name: "lead-notes",
    list_action: "all",
    actions: &[
        Action::read("all", handler!(notes::list)).data(schema::<notes::LeadRef>),
        Action::read("list", handler!(notes::list)).data(schema::<notes::LeadRef>),
        Action::read("get", handler!(notes::get)).id(),
        Action::write("create", handler!(notes::create))
            .data(schema::<notes::CreateNote>)
            .conflict(),
        Action::write("update", handler!(notes::update))
            .id()
            .data(schema::<notes::UpdateNote>)
            .conflict(),
        Action::write("delete", handler!(notes::delete)).id(),
        Action::write("pin", handler!(order::pin)).id(),
        Action::write("unpin", handler!(order::unpin)).id(),
        Action::write("reorder", handler!(order::reorder)).data(schema::<order::Reorder>),
    ],
};
