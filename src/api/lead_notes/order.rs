//! `pin`, `unpin` and `reorder`: pinned notes list first, then the manual order.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{Value, json};

use super::{lead_id, load, load_lead};
use crate::api::{ActionRequest, Ctx, Reply, parse_uuid};
use crate::db::lead_notes as repo;
use crate::error::{ApiError, ApiResult};

#[derive(Deserialize, schemars::JsonSchema)]
#[schemars(rename = "LeadNoteReorder")]
pub(crate) struct Reorder {
    #[serde(alias = "lead_id", rename = "leadId")]
    lead_id: Option<Value>,
    sort: HashMap<String, i64>,
}

pub(super) async fn pin(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    set_pinned(ctx, req, true).await
}

pub(super) async fn unpin(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    set_pinned(ctx, req, false).await
}

async fn set_pinned(ctx: &Ctx, req: &ActionRequest, pinned: bool) -> ApiResult<Reply> {
    let p = ctx.principal.clone();
    let id = req.uuid()?;
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

pub(super) async fn reorder(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let p = ctx.principal.clone();
    let q: Reorder = req.data()?;
    let lead = lead_id(&q.lead_id)?;
    let mut sort = Vec::with_capacity(q.sort.len());
    for (id, pos) in q.sort {
        let id = parse_uuid(&id, "data.sort key")?;
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
