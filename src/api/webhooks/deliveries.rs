//! Deliveries to an endpoint: send a test, list them, replay one.

use serde::Deserialize;
use serde_json::json;

use crate::api::{ActionRequest, Ctx, Reply, page};
use crate::error::ApiResult;
use crate::service::webhooks as service;

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[schemars(rename = "WebhookPaging")]
pub(crate) struct Paging {
    limit: Option<i64>,
    offset: Option<i64>,
}

pub(super) async fn test(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let (record, result) = service::test(&ctx.app, ctx.user_id(), &id).await?;
    Ok(Reply::ok(json!({"delivery": record, "result": result})))
}

pub(super) async fn deliveries(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let p: Paging = req.data()?;
    let (limit, offset) = page(p.limit, p.offset, 50, 500)?;
    let (rows, total) = service::deliveries(&ctx.app, ctx.user_id(), &id, limit, offset).await?;
    Ok(Reply::ok(
        json!({"deliveries": rows, "count": total, "limit": limit, "offset": offset}),
    ))
}

/// `id` is the delivery to replay, not the endpoint.
pub(super) async fn redeliver(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let (new_id, record) = service::redeliver(&ctx.app, ctx.user_id(), &id).await?;
    Ok(Reply::accepted(json!({"delivery": record})).record(new_id))
}
