//! The admins' flags on any listing: hide, unhide, feature, unfeature.

use serde_json::json;

use super::shown;
use crate::api::{ActionRequest, Ctx, Reply};
use crate::error::ApiResult;
use crate::service::marketplace::{self as service, Flag};

async fn moderate(ctx: &Ctx, req: &ActionRequest, flag: Flag, on: bool) -> ApiResult<Reply> {
    ctx.principal.require_admin()?;
    let id = req.uuid()?;
    let l = service::moderate(&ctx.app, &id, flag, on).await?;
    let s = format!("moderation: {} listing '{}'", req.action, l.name);
    Ok(Reply::ok(json!({"listing": shown(&l, ctx.user_id())})).summary(s))
}

pub(super) async fn hide(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    moderate(ctx, req, Flag::Hidden, true).await
}

pub(super) async fn unhide(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    moderate(ctx, req, Flag::Hidden, false).await
}

pub(super) async fn feature(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    moderate(ctx, req, Flag::Featured, true).await
}

pub(super) async fn unfeature(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    moderate(ctx, req, Flag::Featured, false).await
}
