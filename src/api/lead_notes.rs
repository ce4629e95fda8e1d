//! The `lead-notes` resource: notes on a lead, with pinning (pinned notes list first) and a
//! manual order. Only people with access to the lead reach its notes; as on leads, a note
//! on a lead the caller cannot reach is 403 `FORBIDDEN`.

use super::action::{Action, Handler, Resource, handler, schema};
use std::collections::HashMap;

use rusqlite::Connection;
use serde::Deserialize;
use serde_json::{Value, json};

use super::leads::load as load_lead;
use super::{ActionRequest, Ctx, Reply};
use crate::auth::Principal;
use crate::db::lead_notes::{self as repo, Note};
use crate::error::{ApiError, ApiResult};

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

#[derive(Deserialize, schemars::JsonSchema)]
pub(crate) struct LeadRef {
    #[serde(alias = "lead_id", rename = "leadId")]
    lead_id: Option<Value>,
}

#[derive(Deserialize, schemars::JsonSchema)]
pub(crate) struct CreateNote {
    #[serde(alias = "lead_id", rename = "leadId")]
    lead_id: Option<Value>,
    content: Option<String>,
    #[serde(alias = "isPinned")]
    is_pinned: Option<bool>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpdateNote {
    content: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[schemars(rename = "LeadNoteReorder")]
pub(crate) struct Reorder {
    #[serde(alias = "lead_id", rename = "leadId")]
    lead_id: Option<Value>,
    sort: HashMap<String, i64>,
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

pub async fn handle(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let p = ctx.principal.clone();
    match req.action.as_str() {
        "all" | "list" => {
            let q: LeadRef = req.data()?;
            let lead = lead_id(&q.lead_id)?;
            let notes = ctx
                .db()
                .read(move |c| {
                    load_lead(c, &p, lead, false)?;
                    Ok(repo::list(c, lead)?)
                })
                .await?;
            let count = notes.len();
            Ok(Reply::ok(json!({"notes": notes, "count": count})))
        }
        "get" => {
            let id = req.uuid()?;
            let note = ctx.db().read(move |c| load(c, &p, &id, false)).await?;
            Ok(Reply::ok(json!({"note": note})))
        }
        "create" => {
            let q: CreateNote = req.data()?;
            let lead = lead_id(&q.lead_id)?;
            let content = check_content(q.content.as_deref().unwrap_or(""))?;
            let pinned = q.is_pinned.unwrap_or(false);
            let note = ctx
                .db()
                .write(move |c| {
                    load_lead(c, &p, lead, true)?;
                    Ok(repo::insert(c, lead, &p.user_id, &content, pinned)?)
                })
                .await?;
            let summary = format!("added a note to lead #{}", note.lead_id);
            Ok(Reply::created(json!({"note": note}))
                .record(note.id.clone())
                .summary(summary))
        }
        "update" => {
            let id = req.uuid()?;
            let q: UpdateNote = req.data()?;
            let content = check_content(&q.content)?;
            let note = ctx
                .db()
                .write(move |c| {
                    load(c, &p, &id, true)?;
                    repo::set_content(c, &id, &content)?;
                    Ok(repo::get(c, &id)?.expect("note exists"))
                })
                .await?;
            Ok(Reply::ok(json!({"note": note}))
                .record(note.id.clone())
                .summary("updated a lead note"))
        }
        "pin" | "unpin" => {
            let id = req.uuid()?;
            let pinned = req.action == "pin";
            let note = ctx
                .db()
                .write(move |c| {
                    load(c, &p, &id, true)?;
                    repo::set_pinned(c, &id, pinned)?;
                    Ok(repo::get(c, &id)?.expect("note exists"))
                })
                .await?;
            let summary = format!("{} a lead note", if pinned { "pinned" } else { "unpinned" });
            Ok(Reply::ok(json!({"note": note}))
                .record(note.id.clone())
                .summary(summary))
        }
        "reorder" => {
            let q: Reorder = req.data()?;
            let lead = lead_id(&q.lead_id)?;
            let mut sort = Vec::with_capacity(q.sort.len());
            for (id, pos) in q.sort {
                let id = super::parse_uuid(&id, "data.sort key")?;
                if pos < 0 {
                    return Err(ApiError::validation(
                        "data.sort positions must be 0 or more",
                    ));
                }
                sort.push((id, pos));
            }
            let updated = ctx
                .db()
                .write(move |c| {
                    load_lead(c, &p, lead, true)?;
                    for (id, pos) in &sort {
                        if !repo::set_position(c, lead, id, *pos)? {
                            return Err(ApiError::validation(format!(
                                "data.sort: note {id} is not a note of lead {lead}"
                            )));
                        }
                    }
                    Ok(sort.len())
                })
                .await?;
            Ok(Reply::ok(json!({"updated": updated}))
                .record(lead.to_string())
                .summary(format!("reordered notes of lead #{lead}")))
        }
        "delete" => {
            let id = req.uuid()?;
            let rid = id.clone();
            ctx.db()
                .write(move |c| {
                    load(c, &p, &id, true)?;
                    Ok(repo::delete(c, &id)?)
                })
                .await?;
            Ok(Reply::deleted(&rid).summary("deleted a lead note"))
        }
        other => Err(ApiError::invalid_action(req.resource, other)),
    }
}

/// Every `lead-notes` action; see `api::action`.
pub const RESOURCE: Resource = Resource {
    name: "lead-notes",
    list_action: "all",
    actions: &[
        Action::read("all", H).data(schema::<LeadRef>),
        Action::read("list", H).data(schema::<LeadRef>),
        Action::read("get", H).id(),
        Action::write("create", H)
            .data(schema::<CreateNote>)
            .conflict(),
        Action::write("update", H)
            .id()
            .data(schema::<UpdateNote>)
            .conflict(),
        Action::write("delete", H).id(),
        Action::write("pin", H).id(),
        Action::write("unpin", H).id(),
        Action::write("reorder", H).data(schema::<Reorder>),
    ],
};

const H: Handler = handler!(handle);
