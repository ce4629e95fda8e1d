//! `log` and `getLogs`: a lead's activity log.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::api::{ActionRequest, Ctx, Reply, page};
use crate::db::leads as repo;
use crate::error::{ApiError, ApiResult};
use crate::service::leads::load;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LogIn {
    #[serde(rename = "type")]
    kind: String,
    description: Option<String>,
    metadata: Option<Value>,
}

#[derive(Deserialize, Default)]
struct LogsReq {
    limit: Option<i64>,
}

pub(super) async fn log(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.int_id()?;
    let body: LogIn = req.data()?;
    let kind = body.kind.trim().to_string();
    if kind.is_empty() || kind.chars().count() > 100 {
        return Err(ApiError::validation(
            "data.type must be 1 to 100 characters",
        ));
    }
    if let Some(m) = &body.metadata
        && !m.is_object()
    {
        return Err(ApiError::validation("data.metadata must be an object"));
    }
    let p = ctx.principal.clone();
    let activity = ctx
        .db()
        .write(move |c| {
            load(c, &p, id, true)?;
            Ok(repo::log(
                c,
                id,
                Some(&p.user_id),
                &kind,
                body.description.as_deref(),
                body.metadata.as_ref(),
            )?)
        })
        .await?;
    let summary = format!("logged {} on lead {id}", activity.kind);
    Ok(Reply::created(json!({"activity": activity}))
        .record(id.to_string())
        .summary(summary))
}

pub(super) async fn get_logs(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.int_id()?;
    let q: LogsReq = req.data()?;
    let (limit, _) = page(q.limit, None, 50, 500)?;
    let p = ctx.principal.clone();
    let activities = ctx
        .db()
        .read(move |c| {
            load(c, &p, id, false)?;
            Ok(repo::logs(c, id, limit)?)
        })
        .await?;
    Ok(Reply::ok(json!({"activities": activities})))
}
