//! A user's endpoints: list, get, create, update, delete, rotate-secret.

use serde::Deserialize;
use serde_json::json;

use crate::api::{ActionRequest, Ctx, Reply, double_option};
use crate::db::webhooks::Patch;
use crate::error::ApiResult;
use crate::service::webhooks as service;

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "WebhookCreate")]
pub(crate) struct CreateWebhook {
    url: String,
    description: Option<String>,
    event_types: Option<Vec<String>>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "WebhookUpdate")]
pub(crate) struct UpdateWebhook {
    url: Option<String>,
    #[serde(default, deserialize_with = "double_option::deserialize")]
    #[schemars(with = "Option<String>")]
    description: Option<Option<String>>,
    event_types: Option<Vec<String>>,
    is_active: Option<bool>,
}

pub(super) async fn list(ctx: &Ctx, _req: &ActionRequest) -> ApiResult<Reply> {
    let hooks = service::list(&ctx.app, ctx.user_id()).await?;
    Ok(Reply::ok(json!({"count": hooks.len(), "webhooks": hooks})))
}

pub(super) async fn get(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let hook = service::get(&ctx.app, ctx.user_id(), &id).await?;
    Ok(Reply::ok(json!({"webhook": hook})))
}

pub(super) async fn create(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let body: CreateWebhook = req.data()?;
    let (hook, secret) = service::create(
        &ctx.app,
        ctx.user_id(),
        &body.url,
        body.description,
        body.event_types,
    )
    .await?;
    let mut shown = json!(hook);
    shown["secret"] = json!(secret);
    Ok(Reply::created(json!({"webhook": shown}))
        .record(&hook.id)
        .summary(format!("created webhook to {}", hook.url)))
}

pub(super) async fn update(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let body: UpdateWebhook = req.data()?;
    let patch = Patch {
        url: body.url,
        description: body.description,
        event_types: body.event_types,
        is_active: body.is_active,
    };
    let hook = service::update(&ctx.app, ctx.user_id(), &id, patch).await?;
    Ok(Reply::ok(json!({"webhook": hook})))
}

pub(super) async fn delete(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    service::delete(&ctx.app, ctx.user_id(), &id).await?;
    Ok(Reply::deleted(&id))
}

pub(super) async fn rotate_secret(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let (hook, secret) = service::rotate_secret(&ctx.app, ctx.user_id(), &id).await?;
    Ok(Reply::ok(json!({"webhook": hook, "secret": secret}))
        .summary("rotated a webhook signing secret"))
}
