//! `update` (metadata and tags) and `delete`.

use serde::Deserialize;
use serde_json::{Value, json};

use super::check_tags;
use crate::api::{ActionRequest, Ctx, Reply};
use crate::db::conversations as repo;
use crate::error::{ApiError, ApiResult};
use crate::service::conversations::{load, update_meta};

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "ConversationUpdate")]
pub(crate) struct UpdateReq {
    metadata: Option<Value>,
    tags: Option<Vec<String>>,
}

pub(super) async fn update(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let q: UpdateReq = req.data()?;
    let tags = match q.tags {
        Some(t) => Some(check_tags(t)?),
        None => None,
    };
    if let Some(m) = &q.metadata
        && !m.is_object()
    {
        return Err(ApiError::validation("data.metadata must be an object"));
    }
    let conv = update_meta(&ctx.app, &ctx.principal, &id, q.metadata, tags).await?;
    Ok(Reply::ok(json!({"conversation": conv}))
        .record(conv.id.clone())
        .summary("updated a conversation"))
}

pub(super) async fn delete(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let (p, rid) = (ctx.principal.clone(), id.clone());
    ctx.db()
        .write(move |c| {
            load(c, &p, &id, true)?;
            Ok(repo::delete(c, &id)?)
        })
        .await?;
    Ok(Reply::deleted(&rid).summary("deleted a conversation"))
}
