//! A collection itself: list, get, create, update (also as `rename`), delete.

use serde::Deserialize;
use serde_json::json;

use super::expanded;
use crate::api::{ActionRequest, Ctx, Reply, double_option};
use crate::db;
use crate::error::{ApiError, ApiResult};
use crate::service::voice_collections::check_voice;

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "VoiceCollectionCreate")]
pub(crate) struct Create {
    name: String,
    description: Option<String>,
    #[serde(default, alias = "voiceIds")]
    voice_ids: Vec<String>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "VoiceCollectionUpdate")]
pub(crate) struct Update {
    name: Option<String>,
    #[serde(default, deserialize_with = "double_option::deserialize")]
    #[schemars(with = "Option<String>")]
    description: Option<Option<String>>,
}

fn check_name(name: &str) -> ApiResult<String> {
    let n = name.trim();
    if n.is_empty() || n.chars().count() > 100 {
        return Err(ApiError::validation(
            "data.name is required and must be at most 100 characters",
        ));
    }
    Ok(n.to_string())
}

fn check_description(d: Option<&str>) -> ApiResult<()> {
    if d.is_some_and(|d| d.chars().count() > 1000) {
        return Err(ApiError::validation(
            "data.description must be at most 1000 characters",
        ));
    }
    Ok(())
}

pub(super) async fn list(ctx: &Ctx, _req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    let cols = ctx
        .db()
        .read(move |c| Ok(db::voice_collections::list(c, &uid)?))
        .await?;
    Ok(Reply::ok(json!({"collections": cols, "count": cols.len()})))
}

pub(super) async fn get(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    let id = req.uuid()?;
    let col = ctx
        .db()
        .read(move |c| Ok(db::voice_collections::get(c, &uid, &id)?))
        .await?;
    let col = col.ok_or_else(|| ApiError::not_found("voice collection"))?;
    Ok(Reply::ok(json!({"collection": expanded(ctx, &col).await})))
}

pub(super) async fn create(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    let body: Create = req.data()?;
    let name = check_name(&body.name)?;
    check_description(body.description.as_deref())?;
    let mut voices: Vec<String> = Vec::new();
    for v in body.voice_ids {
        check_voice(&ctx.app, &v).await?;
        if !voices.contains(&v) {
            voices.push(v);
        }
    }
    let col = ctx
        .db()
        .write(move |c| {
            Ok(db::voice_collections::insert(
                c,
                &uid,
                &name,
                body.description.as_deref(),
                &voices,
            )?)
        })
        .await?;
    let summary = format!("created voice collection '{}'", col.name);
    Ok(
        Reply::created(json!({"collection": expanded(ctx, &col).await}))
            .record(&col.id)
            .summary(summary),
    )
}

pub(super) async fn update(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    let id = req.uuid()?;
    let body: Update = req.data()?;
    let name = body.name.as_deref().map(check_name).transpose()?;
    if name.is_none() && body.description.is_none() {
        return Err(ApiError::validation(
            "data must name at least one of name, description",
        ));
    }
    check_description(body.description.as_ref().and_then(|d| d.as_deref()))?;
    let col = ctx
        .db()
        .write(move |c| {
            Ok(db::voice_collections::update(
                c,
                &uid,
                &id,
                name.as_deref(),
                body.description.as_ref().map(|d| d.as_deref()),
            )?)
        })
        .await?
        .ok_or_else(|| ApiError::not_found("voice collection"))?;
    let summary = format!("updated voice collection '{}'", col.name);
    Ok(Reply::ok(json!({"collection": expanded(ctx, &col).await})).summary(summary))
}

pub(super) async fn delete(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    let id = req.uuid()?;
    let id2 = id.clone();
    if !ctx
        .db()
        .write(move |c| Ok(db::voice_collections::delete(c, &uid, &id2)?))
        .await?
    {
        return Err(ApiError::not_found("voice collection"));
    }
    Ok(Reply::deleted(&id).summary("deleted a voice collection"))
}
