//! The `voices` resource: discovery over the active provider's voices merged with the
//! shipped catalog (`assets/voice_catalog.json`), usage by the caller's genies, favorites.
//! Voice ids are provider ids (strings), not UUIDs.

use super::action::{Action, Handler, Resource, handler, schema};
use std::sync::LazyLock;

use serde::Deserialize;
use serde_json::{Value, json};

use super::{ActionRequest, Ctx, Reply, page};
use crate::db;
use crate::error::{ApiError, ApiResult};
use crate::voice::Voice;

static CATALOG: LazyLock<Vec<Voice>> = LazyLock::new(|| {
    serde_json::from_str(include_str!("../../assets/voice_catalog.json"))
        .expect("assets/voice_catalog.json is valid")
});

/// The shipped catalog (also used by `voice-collections` to check voice ids).
pub fn catalog() -> &'static [Voice] {
    &CATALOG
}

/// Provider voices first, then catalog voices the provider does not already list.
/// A provider failure falls back to the catalog alone (logged), so discovery keeps working.
pub async fn all_voices(ctx: &Ctx) -> Vec<(Voice, &'static str)> {
    let provider = match ctx.app.voice.list_voices().await {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(error = %e, "voice provider could not list voices; showing the catalog only");
            vec![]
        }
    };
    let mut out: Vec<(Voice, &'static str)> =
        provider.into_iter().map(|v| (v, "provider")).collect();
    for v in catalog() {
        if !out.iter().any(|(p, _)| p.voice_id == v.voice_id) {
            out.push((v.clone(), "catalog"));
        }
    }
    out
}

pub async fn find_voice(ctx: &Ctx, voice_id: &str) -> Option<(Voice, &'static str)> {
    all_voices(ctx)
        .await
        .into_iter()
        .find(|(v, _)| v.voice_id == voice_id)
}

pub fn voice_json(v: &Voice, source: &str, favorite: bool) -> Value {
    json!({
        "voice_id": v.voice_id,
        "name": v.name,
        "category": v.category,
        "labels": v.labels,
        "language": label(v, "language"),
        "gender": label(v, "gender"),
        "accent": label(v, "accent"),
        "use_case": label(v, "use_case"),
        "description": v.description,
        "preview_url": v.preview_url,
        "source": source,
        "is_favorite": favorite,
    })
}

fn label(v: &Voice, name: &str) -> Option<String> {
    v.labels
        .get(name)
        .and_then(Value::as_str)
        .map(str::to_string)
}

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[schemars(rename = "VoiceFilters")]
struct Filters {
    language: Option<String>,
    gender: Option<String>,
    accent: Option<String>,
    #[serde(alias = "useCase")]
    use_case: Option<String>,
    #[serde(alias = "searchTerm")]
    search: Option<String>,
    #[serde(alias = "favoritesOnly")]
    favorites_only: Option<bool>,
}

#[derive(Deserialize, Default, schemars::JsonSchema)]
pub(crate) struct ListVoices {
    #[serde(flatten)]
    top: Filters,
    filters: Option<Filters>,
    limit: Option<i64>,
    offset: Option<i64>,
}

fn matches(v: &Voice, f: &Filters) -> bool {
    let eq = |want: &Option<String>, name: &str| {
        want.as_deref()
            .is_none_or(|w| label(v, name).is_some_and(|l| l.eq_ignore_ascii_case(w.trim())))
    };
    let search_ok = f.search.as_deref().map(str::trim).is_none_or(|s| {
        let s = s.to_lowercase();
        let hay = format!(
            "{} {} {} {}",
            v.name,
            v.description.as_deref().unwrap_or(""),
            v.labels
                .as_object()
                .map(|m| m
                    .values()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(" "))
                .unwrap_or_default(),
            v.voice_id
        )
        .to_lowercase();
        hay.contains(&s)
    });
    eq(&f.language, "language")
        && eq(&f.gender, "gender")
        && eq(&f.accent, "accent")
        && eq(&f.use_case, "use_case")
        && search_ok
}

fn voice_id(req: &ActionRequest) -> ApiResult<String> {
    let id = req.id_str()?;
    if id.chars().count() > 200 {
        return Err(ApiError::validation("id must be at most 200 characters"));
    }
    Ok(id)
}

pub async fn handle(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    match req.action.as_str() {
        "all" | "list" => {
            let body: ListVoices = req.data()?;
            let (limit, offset) = page(body.limit, body.offset, 100, 500)?;
            // Members may sit at the top level or under `filters` (REST query strings fill both).
            let f = body.filters.unwrap_or_default();
            let t = body.top;
            let f = Filters {
                language: f.language.or(t.language),
                gender: f.gender.or(t.gender),
                accent: f.accent.or(t.accent),
                use_case: f.use_case.or(t.use_case),
                search: super::search_term(
                    f.search.or(t.search),
                    "data.search",
                    super::SEARCH_TERM_MAX,
                )?,
                favorites_only: f.favorites_only.or(t.favorites_only),
            };
            let favs = ctx
                .db()
                .read(move |c| Ok(db::voices::favorites(c, &uid)?))
                .await?;
            let is_fav = |id: &str| favs.iter().any(|(v, _)| v == id);
            let matched: Vec<Value> = all_voices(ctx)
                .await
                .iter()
                .filter(|(v, _)| {
                    matches(v, &f) && (!f.favorites_only.unwrap_or(false) || is_fav(&v.voice_id))
                })
                .map(|(v, s)| voice_json(v, s, is_fav(&v.voice_id)))
                .collect();
            let total = matched.len();
            let voices: Vec<Value> = matched
                .into_iter()
                .skip(offset as usize)
                .take(limit as usize)
                .collect();
            Ok(Reply::ok(
                json!({"voices": voices, "total": total, "limit": limit, "offset": offset}),
            ))
        }
        "get" => {
            let id = voice_id(req)?;
            let (v, source) = find_voice(ctx, &id)
                .await
                .ok_or_else(|| ApiError::not_found("voice"))?;
            let vid = id.clone();
            let (fav, usage) = ctx
                .db()
                .read(move |c| {
                    let fav = db::voices::favorites(c, &uid)?
                        .into_iter()
                        .any(|(f, _)| f == vid);
                    Ok((fav, db::voices::usage(c, &uid, Some(&vid))?))
                })
                .await?;
            let mut out = voice_json(&v, source, fav);
            out["usage"] = usage_json(&id, usage.into_iter().next());
            Ok(Reply::ok(json!({"voice": out})))
        }
        "usage" => {
            let one = match &req.id {
                None | Some(Value::Null) => None,
                Some(_) => Some(voice_id(req)?),
            };
            let q = one.clone();
            let usage = ctx
                .db()
                .read(move |c| Ok(db::voices::usage(c, &uid, q.as_deref())?))
                .await?;
            if let Some(id) = one {
                return Ok(Reply::ok(
                    json!({"usage": usage_json(&id, usage.into_iter().next())}),
                ));
            }
            let voices = all_voices(ctx).await;
            let items: Vec<Value> = usage
                .into_iter()
                .map(|u| {
                    let name = voices
                        .iter()
                        .find(|(v, _)| v.voice_id == u.voice_id)
                        .map(|(v, _)| v.name.clone());
                    let id = u.voice_id.clone();
                    let mut j = usage_json(&id, Some(u));
                    j["name"] = json!(name);
                    j
                })
                .collect();
            Ok(Reply::ok(json!({"usage": items, "count": items.len()})))
        }
        "favorite" => {
            let id = voice_id(req)?;
            let (v, _) = find_voice(ctx, &id)
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
        "unfavorite" => {
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
        "favorites" => {
            let favs = ctx
                .db()
                .read(move |c| Ok(db::voices::favorites(c, &uid)?))
                .await?;
            let voices = all_voices(ctx).await;
            let items: Vec<Value> = favs
                .iter()
                .map(|(id, at)| {
                    let mut j = match voices.iter().find(|(v, _)| &v.voice_id == id) {
                        Some((v, s)) => voice_json(v, s, true),
                        // A voice the provider no longer offers stays listed, marked unavailable.
                        None => json!({"voice_id": id, "name": null, "source": "unavailable", "is_favorite": true}),
                    };
                    j["favorited_at"] = json!(at);
                    j
                })
                .collect();
            Ok(Reply::ok(json!({"voices": items, "count": items.len()})))
        }
        other => Err(ApiError::invalid_action(req.resource, other)),
    }
}

fn usage_json(voice_id: &str, u: Option<db::voices::VoiceUsage>) -> Value {
    match u {
        Some(u) => json!(u),
        None => {
            json!({"voice_id": voice_id, "genie_count": 0, "genies": [], "conversation_count": 0, "last_used_at": null})
        }
    }
}

/// Every `voices` action; see `api::action`.
pub const RESOURCE: Resource = Resource {
    name: "voices",
    list_action: "all",
    actions: &[
        Action::read("all", H).data(schema::<ListVoices>).upstream(),
        Action::read("list", H)
            .data(schema::<ListVoices>)
            .upstream(),
        Action::read("get", H).id().upstream(),
        Action::read("favorites", H).upstream(),
        Action::write("favorite", H).id().upstream(),
        Action::write("unfavorite", H).id().upstream(),
        Action::read("usage", H).id().upstream(),
    ],
};

const H: Handler = handler!(handle);
