//! Finding voices: `all`/`list` (filtered, paged), `get` (with its usage) and `usage`.

use serde::Deserialize;
use serde_json::{Value, json};

use super::{label, voice_id, voice_json};
use crate::api::{self, ActionRequest, Ctx, Reply, page};
use crate::db;
use crate::error::{ApiError, ApiResult};
use crate::service::voices::{all_voices, find_voice};
use crate::voice::Voice;

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

pub(super) async fn list(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
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
        search: api::search_term(f.search.or(t.search), "data.search", api::SEARCH_TERM_MAX)?,
        favorites_only: f.favorites_only.or(t.favorites_only),
    };
    let favs = ctx
        .db()
        .read(move |c| Ok(db::voices::favorites(c, &uid)?))
        .await?;
    let is_fav = |id: &str| favs.iter().any(|(v, _)| v == id);
    let matched: Vec<Value> = all_voices(&ctx.app)
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

pub(super) async fn get(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    let id = voice_id(req)?;
    let (v, source) = find_voice(&ctx.app, &id)
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

pub(super) async fn usage(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
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
    let voices = all_voices(&ctx.app).await;
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

fn usage_json(voice_id: &str, u: Option<db::voices::VoiceUsage>) -> Value {
    match u {
        Some(u) => json!(u),
        None => {
            json!({"voice_id": voice_id, "genie_count": 0, "genies": [], "conversation_count": 0, "last_used_at": null})
        }
    }
}
