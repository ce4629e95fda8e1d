//! The `worker-genies` resource: background LLM agents (CRUD), their runs (`run`, `runs`,
//! `cancel`) and the encrypted credentials they use (`credentials.rs`). Triggers and the
//! executor live in `crate::workers`.

pub(crate) mod credentials;

use super::action::{Action, Handler, Resource, handler, schema};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{ActionRequest, Ctx, Reply, page};
use crate::db::{self, workers::GenieFields, workers::WorkerGenie};
use crate::error::{ApiError, ApiResult};
use crate::workers::{self, scheduler};

/// Event types a worker genie may be triggered by: the bus catalogue.
pub use crate::events::EVENT_TYPES;

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

fn check_refs(c: &rusqlite::Connection, uid: &str, f: &GenieFields) -> ApiResult<()> {
    for r in &f.credential_refs {
        if db::workers::credential_by_name(c, uid, r)?.is_none() {
            return Err(ApiError::validation(format!(
                "data.credential_refs: no stored credential named '{r}' (store it with store-credential first)"
            )));
        }
    }
    Ok(())
}

fn shown(g: &WorkerGenie) -> Value {
    json!(g)
}

pub async fn handle(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    match req.action.as_str() {
        "all" | "list" => {
            let items = ctx
                .db()
                .read(move |c| Ok(db::workers::list_genies(c, &uid)?))
                .await?;
            Ok(Reply::ok(json!({"items": items, "count": items.len()})))
        }
        "get" => {
            let id = req.uuid()?;
            let (g, runs) = ctx
                .db()
                .read(move |c| {
                    let g = db::workers::get_genie(c, &uid, &id)?
                        .ok_or_else(|| ApiError::not_found("worker genie"))?;
                    let (runs, _) =
                        db::workers::list_runs(c, &uid, Some(&id), None, RECENT_RUNS, 0)?;
                    Ok((g, runs))
                })
                .await?;
            Ok(Reply::ok(
                json!({"worker_genie": shown(&g), "recent_runs": runs}),
            ))
        }
        "create" => {
            let f = validate(req.data()?, ctx.app.config.worker_allow_seconds_cron)?;
            let g = ctx
                .db()
                .write(move |c| {
                    check_refs(c, &uid, &f)?;
                    Ok(db::workers::insert_genie(c, &uid, &f)?)
                })
                .await?;
            scheduler::sync(&ctx.app, &g.id).await;
            Ok(Reply::created(json!({"worker_genie": shown(&g)}))
                .record(&g.id)
                .summary(format!("created worker genie '{}'", g.name)))
        }
        "update" => {
            let id = req.uuid()?;
            let Value::Object(changes) = &req.data else {
                return Err(ApiError::validation("data must be an object"));
            };
            let changes = changes.clone();
            let allow = ctx.app.config.worker_allow_seconds_cron;
            let g = ctx
                .db()
                .write(move |c| {
                    let cur = db::workers::get_genie(c, &uid, &id)?
                        .ok_or_else(|| ApiError::not_found("worker genie"))?;
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
                    let f = validate(super::parse_value(&Value::Object(merged), "data")?, allow)?;
                    check_refs(c, &uid, &f)?;
                    db::workers::update_genie(c, &uid, &id, &f)?
                        .ok_or_else(|| ApiError::not_found("worker genie"))
                })
                .await?;
            scheduler::sync(&ctx.app, &g.id).await;
            Ok(Reply::ok(json!({"worker_genie": shown(&g)}))
                .record(&g.id)
                .summary(format!("updated worker genie '{}'", g.name)))
        }
        "delete" => {
            let id = req.uuid()?;
            let i2 = id.clone();
            let running = ctx
                .db()
                .write(move |c| {
                    let (runs, _) =
                        db::workers::list_runs(c, &uid, Some(&i2), Some("running"), 1000, 0)?;
                    if !db::workers::delete_genie(c, &uid, &i2)? {
                        return Err(ApiError::not_found("worker genie"));
                    }
                    Ok(runs.into_iter().map(|r| r.id).collect::<Vec<_>>())
                })
                .await?;
            for r in running {
                ctx.app.workers.abort(&r);
            }
            scheduler::sync(&ctx.app, &id).await;
            Ok(Reply::deleted(&id).summary("deleted worker genie and its run history"))
        }
        "run" => {
            let id = req.uuid()?;
            let i2 = id.clone();
            let g = ctx
                .db()
                .read(move |c| {
                    db::workers::get_genie(c, &uid, &i2)?
                        .ok_or_else(|| ApiError::not_found("worker genie"))
                })
                .await?;
            let input = json!({"data": req.data});
            let run = workers::enqueue(&ctx.app, g, "manual", input).await?;
            Ok(Reply::accepted(json!({"run": run}))
                .record(&run.id)
                .summary(format!("queued a run of worker genie {id}")))
        }
        "runs" => {
            #[derive(Deserialize, schemars::JsonSchema)]
            #[serde(deny_unknown_fields)]
            struct RunsQuery {
                limit: Option<i64>,
                offset: Option<i64>,
                status: Option<String>,
            }
            let q: RunsQuery = req.data()?;
            let (limit, offset) = page(q.limit, q.offset, 50, 200)?;
            if let Some(s) = &q.status
                && !["queued", "running", "succeeded", "failed", "cancelled"].contains(&s.as_str())
            {
                return Err(ApiError::validation(
                    "data.status must be queued, running, succeeded, failed or cancelled",
                ));
            }
            let genie = match &req.id {
                None | Some(Value::Null) => None,
                Some(_) => Some(req.uuid()?),
            };
            let (items, total) = ctx
                .db()
                .read(move |c| {
                    if let Some(g) = &genie
                        && db::workers::get_genie(c, &uid, g)?.is_none()
                    {
                        return Err(ApiError::not_found("worker genie"));
                    }
                    Ok(db::workers::list_runs(
                        c,
                        &uid,
                        genie.as_deref(),
                        q.status.as_deref(),
                        limit,
                        offset,
                    )?)
                })
                .await?;
            Ok(Reply::ok(
                json!({"items": items, "count": total, "limit": limit, "offset": offset}),
            ))
        }
        "cancel" => {
            let id = req.uuid()?;
            let i2 = id.clone();
            let run = ctx
                .db()
                .write(move |c| {
                    let run = db::workers::get_run(c, &uid, &i2)?
                        .ok_or_else(|| ApiError::not_found("worker run"))?;
                    if !matches!(run.status.as_str(), "queued" | "running") {
                        return Err(ApiError::conflict(format!(
                            "the run is already {}; only queued or running runs can be cancelled",
                            run.status
                        )));
                    }
                    Ok(db::workers::finish_run(
                        c,
                        &i2,
                        "cancelled",
                        None,
                        Some("cancelled by the owner"),
                    )?
                    .unwrap_or(run))
                })
                .await?;
            ctx.app.workers.abort(&id);
            Ok(Reply::ok(json!({"run": run}))
                .record(&id)
                .summary("cancelled a worker run"))
        }
        "store-credential" => credentials::store(ctx, req).await,
        "list-credentials" => credentials::list(ctx).await,
        "delete-credential" => credentials::delete(ctx, req).await,
        "test-credential" => credentials::test(ctx, req).await,
        other => Err(ApiError::invalid_action(req.resource, other)),
    }
}

/// Every `worker-genies` action; see `api::action`.
pub const RESOURCE: Resource = Resource {
    name: "worker-genies",
    list_action: "list",
    actions: &[
        Action::read("all", H),
        Action::read("list", H),
        Action::read("get", H).id(),
        Action::write("create", H)
            .data(schema::<GenieInput>)
            .conflict(),
        Action::write("update", H).id().conflict(),
        Action::write("delete", H).id(),
        Action::write("run", H).id(),
        Action::read("runs", H).optional_id(),
        Action::write("cancel", H).id().conflict(),
        Action::write("store-credential", H)
            .data(schema::<credentials::StoreInput>)
            .conflict(),
        Action::read("list-credentials", H),
        Action::write("delete-credential", H).id(),
        Action::write("test-credential", H)
            .data(schema::<credentials::TestInput>)
            .upstream(),
    ],
};

const H: Handler = handler!(handle);
