//! `all`/`list` (the same action under two names), `get`, `create`, `update` and `delete`.

use serde::Deserialize;
use serde_json::{Value, json};

use super::{check_content, lead_id, load, load_lead};
use crate::api::{ActionRequest, Ctx, Reply};
use crate::db::lead_notes as repo;
use crate::error::ApiResult;

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

pub(super) async fn list(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let p = ctx.principal.clone();
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

pub(super) async fn get(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let p = ctx.principal.clone();
    let id = req.uuid()?;
    let note = ctx
        .db()
        .read_point(move |c| load(c, &p, &id, false))
        .await?;
    Ok(Reply::ok(json!({"note": note})))
}

pub(super) async fn create(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let p = ctx.principal.clone();
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

pub(super) async fn update(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let p = ctx.principal.clone();
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

pub(super) async fn delete(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let p = ctx.principal.clone();
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
