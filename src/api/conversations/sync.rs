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

pub(super) async fn sync(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let q: SyncReq = req.data()?;
    let genie_id = match q.genie_id {
        Some(g) => Some(parse_uuid(&g, "data.genieId")?),
        None => None,
    };
    let n = service::sync(&ctx.app, ctx.user_id(), genie_id).await?;
    let summary = format!(
        "synced conversations: {} new, {} updated",
        n.created, n.updated
    );
    Ok(Reply::ok(json!({
        "genies": n.genies,
        "created": n.created,
        "updated": n.updated,
        "unchanged": n.unchanged,
        "errors": n.errors,
    }))
    .summary(summary))
}
