//! The `voice-collections` resource: a user's named, ordered collections of saved voices.

use super::action::{Action, Handler, Resource, handler, schema};
use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{Value, json};

use super::double_option;
use super::voices::{all_voices, voice_json};
use super::{ActionRequest, Ctx, Reply};
use crate::db::{self, voice_collections::Collection};
use crate::error::{ApiError, ApiResult};

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

/// The collection with its voices expanded (unknown ids stay listed with `source: "unavailable"`).
async fn expanded(ctx: &Ctx, col: &Collection) -> Value {
    let voices = all_voices(ctx).await;
    let items: Vec<Value> = col
        .voice_ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let mut j = match voices.iter().find(|(v, _)| &v.voice_id == id) {
                Some((v, s)) => voice_json(v, s, false),
                None => json!({"voice_id": id, "name": null, "source": "unavailable"}),
            };
            if let Some(o) = j.as_object_mut() {
                o.remove("is_favorite");
            }
            j["position"] = json!(i);
            j
        })
        .collect();
    let mut out = json!(col);
    out["voices"] = json!(items);
    out
}

async fn check_voice(ctx: &Ctx, id: &str) -> ApiResult<()> {
    if id.trim().is_empty() || id.chars().count() > 200 {
        return Err(ApiError::validation(
            "data.voice_id must be 1 to 200 characters",
        ));
    }
    if all_voices(ctx).await.iter().any(|(v, _)| v.voice_id == id) {
        Ok(())
    } else {
        Err(ApiError::not_found("voice"))
    }
}

pub async fn handle(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    match req.action.as_str() {
        "all" | "list" => {
            let cols = ctx
                .db()
                .read(move |c| Ok(db::voice_collections::list(c, &uid)?))
                .await?;
            Ok(Reply::ok(json!({"collections": cols, "count": cols.len()})))
        }
        "get" => {
            let id = req.uuid()?;
            let col = ctx
                .db()
                .read(move |c| Ok(db::voice_collections::get(c, &uid, &id)?))
                .await?;
            let col = col.ok_or_else(|| ApiError::not_found("voice collection"))?;
            Ok(Reply::ok(json!({"collection": expanded(ctx, &col).await})))
        }
        "create" => {
            let body: Create = req.data()?;
            let name = check_name(&body.name)?;
            check_description(body.description.as_deref())?;
            let mut voices: Vec<String> = Vec::new();
            for v in body.voice_ids {
                check_voice(ctx, &v).await?;
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
        "update" | "rename" => {
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
        "delete" => {
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
        "add-voice" | "remove-voice" => {
            let id = req.uuid()?;
            let body: VoiceRef = req.data()?;
            let adding = req.action == "add-voice";
            if adding {
                check_voice(ctx, &body.voice_id).await?;
            }
            let vid = body.voice_id.clone();
            let col = ctx
                .db()
                .write(move |c| {
                    db::voice_collections::get(c, &uid, &id)?
                        .ok_or_else(|| ApiError::not_found("voice collection"))?;
                    if adding {
                        db::voice_collections::add_voice(c, &id, &vid)?;
                    } else if !db::voice_collections::remove_voice(c, &id, &vid)? {
                        return Err(ApiError::not_found("voice in this collection"));
                    }
                    db::voice_collections::touch(c, &id)?;
                    Ok(db::voice_collections::get(c, &uid, &id)?.expect("checked above"))
                })
                .await?;
            let summary = if adding {
                format!(
                    "added voice '{}' to collection '{}'",
                    body.voice_id, col.name
                )
            } else {
                format!(
                    "removed voice '{}' from collection '{}'",
                    body.voice_id, col.name
                )
            };
            Ok(Reply::ok(json!({"collection": expanded(ctx, &col).await})).summary(summary))
        }
        "reorder" => {
            let body: Reorder = req.data()?;
            match (&req.id, body.voice_ids, body.sort) {
                (Some(Value::String(_)) | Some(Value::Number(_)), Some(order), None) => {
                    let id = req.uuid()?;
                    let col = ctx
                        .db()
                        .write(move |c| {
                            let col = db::voice_collections::get(c, &uid, &id)?.ok_or_else(|| ApiError::not_found("voice collection"))?;
                            let mut a = order.clone();
                            let mut b = col.voice_ids.clone();
                            a.sort();
                            b.sort();
                            if a != b {
                                return Err(ApiError::validation(
                                    "data.voice_ids must list every voice of the collection exactly once",
                                ));
                            }
                            db::voice_collections::set_voice_order(c, &id, &order)?;
                            db::voice_collections::touch(c, &id)?;
                            Ok(db::voice_collections::get(c, &uid, &id)?.expect("checked above"))
                        })
                        .await?;
                    let summary = format!("reordered the voices of collection '{}'", col.name);
                    Ok(
                        Reply::ok(json!({"collection": expanded(ctx, &col).await}))
                            .summary(summary),
                    )
                }
                (None | Some(Value::Null), None, Some(sort)) => {
                    let mut items: Vec<(String, i64)> = Vec::new();
                    for (k, pos) in sort {
                        if pos < 0 {
                            return Err(ApiError::validation(format!(
                                "data.sort.{k} must be 0 or more"
                            )));
                        }
                        items.push((super::parse_uuid(&k, &format!("data.sort key '{k}'"))?, pos));
                    }
                    let n = items.len();
                    ctx.db()
                        .write(move |c| {
                            for (id, pos) in &items {
                                if !db::voice_collections::set_sort_order(c, &uid, id, *pos)? {
                                    return Err(ApiError::not_found("voice collection"));
                                }
                            }
                            Ok(())
                        })
                        .await?;
                    Ok(Reply::ok(json!({"updated": n}))
                        .summary(format!("reordered {n} voice collections")))
                }
                _ => Err(ApiError::validation(
                    "reorder takes either an id with data.voice_ids, or no id with data.sort",
                )),
            }
        }
        other => Err(ApiError::invalid_action(req.resource, other)),
    }
}

/// Every `voice-collections` action; see `api::action`.
pub const RESOURCE: Resource = Resource {
    name: "voice-collections",
    list_action: "all",
    actions: &[
        Action::read("all", H),
        Action::read("list", H),
        Action::read("get", H).id(),
        Action::write("create", H).data(schema::<Create>).conflict(),
        Action::write("update", H)
            .id()
            .data(schema::<Update>)
            .conflict(),
        Action::write("rename", H)
            .id()
            .data(schema::<Update>)
            .conflict(),
        Action::write("delete", H).id(),
        Action::write("add-voice", H).id().data(schema::<VoiceRef>),
        Action::write("remove-voice", H)
            .id()
            .data(schema::<VoiceRef>),
        Action::write("reorder", H)
            .optional_id()
            .data(schema::<Reorder>),
    ],
};

const H: Handler = handler!(handle);
