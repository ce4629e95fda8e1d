//! The caller's favorite voices: `favorites`, `favorite`, `unfavorite`.

use serde_json::{Value, json};

use super::{voice_id, voice_json};
use crate::api::{ActionRequest, Ctx, Reply};
use crate::db;
use crate::error::{ApiError, ApiResult};
use crate::service::voices::{all_voices, find_voice};

pub(super) async fn favorites(ctx: &Ctx, _req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    let favs = ctx
        .db()
        .read(move |c| Ok(db::voices::favorites(c, &uid)?))
        .await?;
    let voices = all_voices(&ctx.app).await;
    let items: Vec<Value> = favs
        .iter()
        .map(|(id, at)| {
            let mut j = match voices.iter().find(|(v, _)| &v.voice_id == id) {
                Some((v, s)) => voice_json(v, s, true),
                // A voice the provider no longer offers stays listed, marked unavailable.
                None => {
                    json!({"voice_id": id, "name": null, "source": "unavailable", "is_favorite": true})
                }
            };
            j["favorited_at"] = json!(at);
            j
        })
        .collect();
    Ok(Reply::ok(json!({"voices": items, "count": items.len()})))
}

pub(super) async fn favorite(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    let id = voice_id(req)?;
    let (v, _) = find_voice(&ctx.app, &id)
        .await
        .ok_or_else(|| ApiError::not_found("voice"))?;
    let vid = id.clone();
    let at = ctx
        .db()
        .write(move |c| Ok(db::voices::favorite(c, &uid, &vid)?))
        .await?;
    Ok(
        Reply::ok(json!({"voice_id": id, "is_favorite": true, "favorited_at": at}))
            .record(&id)
            .summary(format!("added voice '{}' to favorites", v.name)),
    )
}

pub(super) async fn unfavorite(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    let id = voice_id(req)?;
    let vid = id.clone();
    let was = ctx
        .db()
        .write(move |c| Ok(db::voices::unfavorite(c, &uid, &vid)?))
        .await?;
    if !was {
        return Err(ApiError::not_found("favorite voice"));
    }
    Ok(Reply::ok(json!({"voice_id": id, "is_favorite": false}))
        .record(&id)
        .summary(format!("removed voice '{id}' from favorites")))
}
