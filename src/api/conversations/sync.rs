//! `sync`: pulls the caller's conversations from the voice platform.

use serde::Deserialize;
use serde_json::json;

use crate::api::{ActionRequest, Ctx, Reply, parse_uuid};
use crate::error::ApiResult;
use crate::service::conversations as service;

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[schemars(rename = "ConversationSync")]
pub(crate) struct SyncReq {
    #[serde(rename = "genieId", alias = "genie_id", alias = "agentId")]
    genie_id: Option<String>,
}

/// Starts the run in the background and answers at once (202) with the run and where to
/// read its progress.
pub(super) async fn sync(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let q: SyncReq = req.data()?;
    let genie_id = match q.genie_id {
        Some(g) => Some(parse_uuid(&g, "data.genieId")?),
        None => None,
    };
    let run = service::start_sync(&ctx.app, ctx.user_id(), genie_id).await?;
    let summary = format!("started a conversation sync of {} genies", run.genies);
    Ok(Reply::accepted(json!({
        "sync": run,
        "progress": {"resource": "conversations", "action": "sync-status", "id": run.id},
    }))
    .summary(summary))
}

/// `sync-status` (`id`: the run's id): the run's progress.
pub(super) async fn status(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let run = service::sync_status(&ctx.app, ctx.user_id(), &id).await?;
    Ok(Reply::ok(json!({"sync": run})))
}
