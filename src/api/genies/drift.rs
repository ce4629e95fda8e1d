//! Drift and moving between platforms: `check-drift`, `pull`, `push`, `move`. The rules are
//! `service::drift`'s and `service::moving`'s; each needs the right to manage the genie.

use serde::Deserialize;
use serde_json::json;

use super::{load_manageable, reload, renderer};
use crate::api::{ActionRequest, Ctx, Reply};
use crate::error::ApiResult;
use crate::service::{drift, moving};

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "GenieMoveRequest")]
pub(crate) struct MoveReq {
    /// The voice platform to move to: `local`, `elevenlabs`, `vapi` or `retell` (one
    /// configured on this service).
    provider: String,
}

pub(super) async fn check_drift(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let g = load_manageable(ctx, &id).await?;
    let out = drift::check_and_record(&ctx.app, &id, &g.user_id).await?;
    let n = out["changes"].as_array().map(Vec::len).unwrap_or(0);
    Ok(Reply::ok(out).record(&id).summary(format!(
        "checked genie '{}' for drift at its platform ({n} changed)",
        g.name
    )))
}

pub(super) async fn pull(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let g = load_manageable(ctx, &id).await?;
    let render = renderer(&ctx.app);
    let mut out = drift::pull(&ctx.app, ctx.user_id(), &id, &g.user_id, render).await?;
    out["genie"] = reload(&ctx.app, &id, false).await?;
    let summary = match out["version"].as_i64() {
        Some(v) => format!("pulled genie '{}' from its platform as version {v}", g.name),
        None => format!("pulled genie '{}' from its platform (no change)", g.name),
    };
    Ok(Reply::ok(out).record(&id).summary(summary))
}

pub(super) async fn push(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let g = load_manageable(ctx, &id).await?;
    let out = drift::push(&ctx.app, &id, &g.user_id).await?;
    Ok(Reply::ok(out)
        .record(&id)
        .summary(format!("pushed genie '{}' to its platform", g.name)))
}

pub(super) async fn move_genie(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let body: MoveReq = req.data()?;
    let g = load_manageable(ctx, &id).await?;
    let (moved, genie) =
        moving::move_genie(&ctx.app, &id, body.provider.trim(), renderer(&ctx.app)).await?;
    let summary = format!(
        "moved genie '{}' from {} to {}",
        g.name,
        moved["from"].as_str().unwrap_or("?"),
        moved["to"].as_str().unwrap_or("?")
    );
    Ok(Reply::ok(json!({"genie": genie, "move": moved}))
        .record(&id)
        .summary(summary))
}
