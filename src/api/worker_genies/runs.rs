//! A worker genie's runs: `run` (queue one by hand), `runs` (history, of one genie or all the
//! caller's), `cancel`.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::api::{ActionRequest, Ctx, Reply, page};
use crate::db;
use crate::error::{ApiError, ApiResult};
use crate::service::worker_genies as service;

pub(super) async fn run(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let input = json!({"data": req.data});
    let run = service::start_run(&ctx.app, ctx.user_id(), &id, input).await?;
    Ok(Reply::accepted(json!({"run": run}))
        .record(&run.id)
        .summary(format!("queued a run of worker genie {id}")))
}

pub(super) async fn runs(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    #[derive(Deserialize, schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct RunsQuery {
        limit: Option<i64>,
        offset: Option<i64>,
        status: Option<String>,
    }
    let uid = ctx.user_id().to_string();
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

pub(super) async fn cancel(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let run = service::cancel_run(&ctx.app, ctx.user_id(), &id).await?;
    Ok(Reply::ok(json!({"run": run}))
        .record(&id)
        .summary("cancelled a worker run"))
}
