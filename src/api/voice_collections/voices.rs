//! The voices in a collection: add-voice, remove-voice, and reorder (one collection's voices
//! with an id, or the caller's collections without one).

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{Value, json};

use super::expanded;
use crate::api::{ActionRequest, Ctx, Reply, parse_uuid};
use crate::error::{ApiError, ApiResult};
use crate::service::voice_collections as collections;

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct VoiceRef {
    #[serde(alias = "voiceId")]
    voice_id: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "VoiceCollectionReorder")]
pub(crate) struct Reorder {
    #[serde(default, alias = "voiceIds")]
    voice_ids: Option<Vec<String>>,
    sort: Option<HashMap<String, i64>>,
}

pub(super) async fn add_voice(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let body: VoiceRef = req.data()?;
    let col = collections::add_voice(&ctx.app, ctx.user_id(), &id, &body.voice_id).await?;
    let summary = format!(
        "added voice '{}' to collection '{}'",
        body.voice_id, col.name
    );
    Ok(Reply::ok(json!({"collection": expanded(ctx, &col).await})).summary(summary))
}

pub(super) async fn remove_voice(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let body: VoiceRef = req.data()?;
    let col = collections::remove_voice(&ctx.app, ctx.user_id(), &id, &body.voice_id).await?;
    let summary = format!(
        "removed voice '{}' from collection '{}'",
        body.voice_id, col.name
    );
    Ok(Reply::ok(json!({"collection": expanded(ctx, &col).await})).summary(summary))
}

pub(super) async fn reorder(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let body: Reorder = req.data()?;
    match (&req.id, body.voice_ids, body.sort) {
        (Some(Value::String(_)) | Some(Value::Number(_)), Some(order), None) => {
            let id = req.uuid()?;
            let col = collections::reorder_voices(&ctx.app, ctx.user_id(), &id, order).await?;
            let summary = format!("reordered the voices of collection '{}'", col.name);
            Ok(Reply::ok(json!({"collection": expanded(ctx, &col).await})).summary(summary))
        }
        (None | Some(Value::Null), None, Some(sort)) => {
            let mut items: Vec<(String, i64)> = Vec::new();
            for (k, pos) in sort {
                if pos < 0 {
                    return Err(ApiError::validation(format!(
                        "data.sort.{k} must be 0 or more"
                    )));
                }
                items.push((parse_uuid(&k, &format!("data.sort key '{k}'"))?, pos));
            }
            let n = items.len();
            collections::sort(&ctx.app, ctx.user_id(), items).await?;
            Ok(
                Reply::ok(json!({"updated": n}))
                    .summary(format!("reordered {n} voice collections")),
            )
        }
        _ => Err(ApiError::validation(
            "reorder takes either an id with data.voice_ids, or no id with data.sort",
        )),
    }
}
