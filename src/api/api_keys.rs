//! The `api-keys` resource: a user's keys for external integrations. Reached with session
//! tokens only (enforced in `auth::authenticate`). The five-active-keys rule is
//! `service::api_keys`, shared with the admin CLI.

use super::action::{Action, Resource, handler, schema};
use serde::Deserialize;
use serde_json::json;

use super::{ActionRequest, Ctx, Reply};
use crate::db;
use crate::error::{ApiError, ApiResult};
use crate::service;

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateKey {
    name: String,
}

async fn list(ctx: &Ctx, _req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    let keys = ctx
        .db()
        .read(move |c| Ok(db::api_keys::list(c, &uid)?))
        .await?;
    Ok(Reply::ok(json!({"count": keys.len(), "api_keys": keys})))
}

async fn create(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let body: CreateKey = req.data()?;
    let name = body.name.trim();
    if name.is_empty() || name.chars().count() > 100 {
        return Err(ApiError::validation(
            "data.name is required and must be at most 100 characters",
        ));
    }
    let new = service::api_keys::create(&ctx.app, ctx.user_id(), name).await?;
    let mut shown = json!(new.record);
    shown["key"] = json!(new.secret);
    Ok(Reply::created(json!({"api_key": shown}))
        .record(&new.record.id)
        .summary(format!("created API key '{}'", new.record.name)))
}

async fn revoke(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let record = service::api_keys::revoke(&ctx.app, ctx.user_id(), &id).await?;
    Ok(Reply::ok(json!({"api_key": record})).summary(format!("revoked API key '{}'", record.name)))
}

async fn delete(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    let id = req.uuid()?;
    let id2 = id.clone();
    let gone = ctx
        .db()
        .write(move |c| Ok(db::api_keys::delete(c, &uid, &id2)?))
        .await?;
    if !gone {
        return Err(ApiError::not_found("API key"));
    }
    Ok(Reply::deleted(&id))
}

/// Every `api-keys` action; see `api::action`.
pub const RESOURCE: Resource = Resource {
    name: "api-keys",
    list_action: "list",
    actions: &[
        Action::read("all", handler!(list)),
        Action::read("list", handler!(list)),
        Action::write("create", handler!(create))
            .data(schema::<CreateKey>)
            .conflict(),
        Action::write("revoke", handler!(revoke)).id(),
        Action::write("delete", handler!(delete)).id(),
    ],
};
