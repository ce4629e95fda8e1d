//! A publisher's own listings: publish (`create`), update, unpublish, delete.

use serde::Deserialize;
use serde_json::json;

use super::{shown, tags, text};
use crate::api::{ActionRequest, Ctx, Reply, double_option, parse_uuid};
use crate::db::marketplace::ListingUpdate;
use crate::error::{ApiError, ApiResult};
use crate::service::marketplace as service;

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "MarketplacePublish")]
pub(crate) struct Publish {
    #[serde(alias = "genieId")]
    genie_id: String,
    name: Option<String>,
    description: Option<String>,
    category: Option<String>,
    tags: Option<Vec<String>>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "MarketplaceUpdate")]
pub(crate) struct Update {
    name: Option<String>,
    #[serde(default, deserialize_with = "double_option::deserialize")]
    #[schemars(with = "Option<String>")]
    description: Option<Option<String>>,
    #[serde(default, deserialize_with = "double_option::deserialize")]
    #[schemars(with = "Option<String>")]
    category: Option<Option<String>>,
    tags: Option<Vec<String>>,
    #[serde(default, deserialize_with = "double_option::deserialize")]
    #[schemars(with = "Option<String>")]
    system_prompt: Option<Option<String>>,
    #[serde(default, deserialize_with = "double_option::deserialize")]
    #[schemars(with = "Option<String>")]
    first_message: Option<Option<String>>,
    status: Option<String>,
}

/// `publish` and `create`.
pub(super) async fn publish(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let body: Publish = req.data()?;
    let gid = parse_uuid(&body.genie_id, "data.genie_id")?;
    let p = service::Publish {
        name: text("name", body.name, 100)?,
        description: text("description", body.description, 5000)?,
        category: text("category", body.category, 100)?,
        tags: tags(body.tags.unwrap_or_default())?,
    };
    let l = service::publish(&ctx.app, ctx.user_id(), &gid, p).await?;
    let s = format!("published genie template '{}' to the marketplace", l.name);
    Ok(Reply::created(json!({"listing": shown(&l, ctx.user_id())}))
        .record(&l.id)
        .summary(s))
}

pub(super) async fn update(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let b: Update = req.data()?;
    let name = match b.name {
        Some(n) => Some(
            text("name", Some(n), 100)?
                .ok_or_else(|| ApiError::validation("data.name must not be empty"))?,
        ),
        None => None,
    };
    if let Some(s) = &b.status
        && s != "published"
        && s != "unpublished"
    {
        return Err(ApiError::validation(
            "data.status must be 'published' or 'unpublished'",
        ));
    }
    let opt = |f: &str, v: Option<Option<String>>, max| -> ApiResult<Option<Option<String>>> {
        v.map(|v| text(f, v, max)).transpose()
    };
    let u = ListingUpdate {
        name,
        description: opt("description", b.description, 5000)?,
        category: opt("category", b.category, 100)?,
        tags: b.tags.map(tags).transpose()?,
        system_prompt: opt("system_prompt", b.system_prompt, 50_000)?,
        first_message: opt("first_message", b.first_message, 2000)?,
        status: b.status,
    };
    let l = service::update(&ctx.app, ctx.user_id(), &id, u).await?;
    let s = format!("updated listing '{}'", l.name);
    Ok(Reply::ok(json!({"listing": shown(&l, ctx.user_id())})).summary(s))
}

pub(super) async fn unpublish(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let u = ListingUpdate {
        name: None,
        description: None,
        category: None,
        tags: None,
        system_prompt: None,
        first_message: None,
        status: Some("unpublished".into()),
    };
    let l = service::update(&ctx.app, ctx.user_id(), &id, u).await?;
    let s = format!("unpublished listing '{}'", l.name);
    Ok(Reply::ok(json!({"listing": shown(&l, ctx.user_id())})).summary(s))
}

pub(super) async fn delete(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let l = service::delete(&ctx.app, ctx.user_id(), &id).await?;
    Ok(Reply::deleted(&id).summary(format!("deleted listing '{}'", l.name)))
}
