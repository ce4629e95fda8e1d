//! The `notifications` resource: the caller's dashboard notifications.

use super::action::{Action, Resource, handler, schema};
use serde::Deserialize;
use serde_json::json;

use super::{ActionRequest, Ctx, Reply, page};
use crate::db;
use crate::error::{ApiError, ApiResult};

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ListNotifications {
    limit: Option<i64>,
    offset: Option<i64>,
    #[serde(default)]
    unread_only: bool,
}

async fn list(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    let q: ListNotifications = req.data()?;
    let (limit, offset) = page(q.limit, q.offset, 50, 500)?;
    let (rows, total, unread) = ctx
        .db()
        .read(move |c| {
            let (rows, total) = db::notifications::list(c, &uid, q.unread_only, limit, offset)?;
            Ok((rows, total, db::notifications::unread_count(c, &uid)?))
        })
        .await?;
    Ok(Reply::ok(
        json!({"notifications": rows, "count": total, "unread": unread, "limit": limit, "offset": offset}),
    ))
}

async fn unread_count(ctx: &Ctx, _req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    let unread = ctx
        .db()
        .read(move |c| Ok(db::notifications::unread_count(c, &uid)?))
        .await?;
    Ok(Reply::ok(json!({"unread": unread})))
}

async fn mark_read(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    let id = req.uuid()?;
    let n = ctx
        .db()
        .write(move |c| Ok(db::notifications::mark_read(c, &uid, &id)?))
        .await?;
    Ok(Reply::ok(
        json!({"notification": n.ok_or_else(|| ApiError::not_found("notification"))?}),
    ))
}

async fn mark_all_read(ctx: &Ctx, _req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    let n = ctx
        .db()
        .write(move |c| Ok(db::notifications::mark_all_read(c, &uid)?))
        .await?;
    Ok(Reply::ok(json!({"updated": n})).summary(format!("marked {n} notifications read")))
}

/// Every `notifications` action; see `api::action`.
pub const RESOURCE: Resource = Resource {
    name: "notifications",
    list_action: "all",
    actions: &[
        Action::read("all", handler!(list)).data(schema::<ListNotifications>),
        Action::read("list", handler!(list)).data(schema::<ListNotifications>),
        Action::read("unread-count", handler!(unread_count)),
        Action::write("mark-read", handler!(mark_read)).id(),
        Action::write("mark-all-read", handler!(mark_all_read)),
    ],
};
