//! A worker genie itself: list, get (with its recent runs), create, update, delete.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::api::{ActionRequest, Ctx, Reply, parse_value};
use crate::db::{self, workers::GenieFields};
use crate::error::{ApiError, ApiResult};
use crate::events::EVENT_TYPES;
use crate::service::worker_genies as service;
use crate::workers::scheduler;

/// Runs shown with `get`.
const RECENT_RUNS: i64 = 10;

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "WorkerGenieInput")]
pub(crate) struct GenieInput {
    name: String,
    soul_prompt: String,
    #[serde(default = "manual")]
    trigger_type: String,
    #[serde(default)]
    schedule: Option<String>,
    #[serde(default)]
    timezone: Option<String>,
    #[serde(default)]
    event_type: Option<String>,
    #[serde(default)]
    credential_refs: Vec<String>,
    #[serde(default = "yes")]
    is_active: bool,
    #[serde(default)]
    llm_model: Option<String>,
    #[serde(default)]
    max_steps: Option<i64>,
}

fn manual() -> String {
    "manual".into()
}
fn yes() -> bool {
    true
}

/// Checks everything but the credential names (checked in the transaction).
fn validate(i: GenieInput, allow_seconds: bool) -> ApiResult<GenieFields> {
    let name = i.name.trim().to_string();
    if name.is_empty() || name.chars().count() > 100 {
        return Err(ApiError::validation(
            "data.name is required and must be at most 100 characters",
        ));
    }
    if i.soul_prompt.trim().is_empty() || i.soul_prompt.chars().count() > 20_000 {
        return Err(ApiError::validation(
            "data.soul_prompt is required and must be at most 20000 characters",
        ));
    }
    let timezone = i
        .timezone
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| "UTC".into());
    if timezone.parse::<chrono_tz::Tz>().is_err() {
        return Err(ApiError::validation(format!(
            "data.timezone '{timezone}' is not an IANA time zone (e.g. 'Europe/Berlin')"
        )));
    }
    let (mut schedule, mut event_type) = (None, None);
    match i.trigger_type.as_str() {
        "manual" => {}
        "schedule" => {
            let s = i
                .schedule
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty());
            let s = s.ok_or_else(|| {
                ApiError::validation("data.schedule is required when trigger_type is 'schedule'")
            })?;
            scheduler::to_cron(&s, allow_seconds)
                .map_err(|e| ApiError::validation(format!("data.schedule {e}")))?;
            schedule = Some(s);
        }
        "event" => {
            let e = i
                .event_type
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty());
            let e = e.ok_or_else(|| {
                ApiError::validation("data.event_type is required when trigger_type is 'event'")
            })?;
            if !EVENT_TYPES.contains(&e.as_str()) {
                return Err(ApiError::validation(format!(
                    "data.event_type must be one of {}",
                    EVENT_TYPES.join(", ")
                )));
            }
            event_type = Some(e);
        }
        _ => {
            return Err(ApiError::validation(
                "data.trigger_type must be 'manual', 'schedule' or 'event'",
            ));
        }
    }
    let max_steps = i.max_steps.unwrap_or(10);
    if !(1..=50).contains(&max_steps) {
        return Err(ApiError::validation(
            "data.max_steps must be between 1 and 50",
        ));
    }
    let llm_model = i
        .llm_model
        .map(|m| m.trim().to_string())
        .filter(|m| !m.is_empty());
    if llm_model.as_ref().is_some_and(|m| m.len() > 200) {
        return Err(ApiError::validation(
            "data.llm_model must be at most 200 characters",
        ));
    }
    let mut refs: Vec<String> = Vec::new();
    for r in i.credential_refs {
        let r = r.trim().to_string();
        if r.is_empty() {
            return Err(ApiError::validation(
                "data.credential_refs must hold credential names",
            ));
        }
        if !refs.contains(&r) {
            refs.push(r);
        }
    }
    Ok(GenieFields {
        name,
        soul_prompt: i.soul_prompt,
        trigger_type: i.trigger_type,
        schedule,
        timezone,
        event_type,
        credential_refs: refs,
        is_active: i.is_active,
        llm_model,
        max_steps,
    })
}

pub(super) async fn list(ctx: &Ctx, _req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    let items = ctx
        .db()
        .read(move |c| Ok(db::workers::list_genies(c, &uid)?))
        .await?;
    Ok(Reply::ok(json!({"items": items, "count": items.len()})))
}

pub(super) async fn get(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    let id = req.uuid()?;
    let (g, runs) = ctx
        .db()
        .read(move |c| {
            let g = db::workers::get_genie(c, &uid, &id)?
                .ok_or_else(|| ApiError::not_found("worker genie"))?;
            let (runs, _) = db::workers::list_runs(c, &uid, Some(&id), None, RECENT_RUNS, 0)?;
            Ok((g, runs))
        })
        .await?;
    Ok(Reply::ok(json!({"worker_genie": g, "recent_runs": runs})))
}

pub(super) async fn create(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let f = validate(req.data()?, ctx.app.config.worker_allow_seconds_cron)?;
    let g = service::create(&ctx.app, ctx.user_id(), f).await?;
    Ok(Reply::created(json!({"worker_genie": g}))
        .record(&g.id)
        .summary(format!("created worker genie '{}'", g.name)))
}

/// `data` holds the members to change; the rest are kept and the whole is checked again.
pub(super) async fn update(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let Value::Object(changes) = &req.data else {
        return Err(ApiError::validation("data must be an object"));
    };
    let changes = changes.clone();
    let allow = ctx.app.config.worker_allow_seconds_cron;
    let g = service::update(&ctx.app, ctx.user_id(), &id, move |cur| {
        let mut merged: Map<String, Value> = match json!(cur) {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        for k in ["id", "created_at", "updated_at"] {
            merged.remove(k);
        }
        for (k, v) in changes {
            if !merged.contains_key(&k) {
                return Err(ApiError::validation(format!(
                    "data.{k} is not a field of a worker genie"
                )));
            }
            merged.insert(k, v);
        }
        validate(parse_value(&Value::Object(merged), "data")?, allow)
    })
    .await?;
    Ok(Reply::ok(json!({"worker_genie": g}))
        .record(&g.id)
        .summary(format!("updated worker genie '{}'", g.name)))
}

pub(super) async fn delete(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    service::delete(&ctx.app, ctx.user_id(), &id).await?;
    Ok(Reply::deleted(&id).summary("deleted worker genie and its run history"))
}
