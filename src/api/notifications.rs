//! The `notifications` resource: the caller's dashboard notifications.

use super::action::{Action, Handler, Resource, handler, schema};
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

pub async fn handle(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    match req.action.as_str() {
        "all" | "list" => {
            let q: ListNotifications = req.data()?;
            let (limit, offset) = page(q.limit, q.offset, 50, 500)?;
            let (rows, total, unread) = ctx
                .db()
                .read(move |c| {
                    let (rows, total) =
                        db::notifications::list(c, &uid, q.unread_only, limit, offset)?;
                    Ok((rows, total, db::notifications::unread_count(c, &uid)?))
                })
                .await?;
            Ok(Reply::ok(
                json!({"notifications": rows, "count": total, "unread": unread, "limit": limit, "offset": offset}),
            ))
        }
        "unread-count" => {
            let unread = ctx
                .db()
                .read(move |c| Ok(db::notifications::unread_count(c, &uid)?))
                .await?;
            Ok(Reply::ok(json!({"unread": unread})))
        }
        "mark-read" => {
            let id = req.uuid()?;
            let n = ctx
                .db()
                .write(move |c| Ok(db::notifications::mark_read(c, &uid, &id)?))
                .await?;
            Ok(Reply::ok(
                json!({"notification": n.ok_or_else(|| ApiError::not_found("notification"))?}),
            ))
        }
        "mark-all-read" => {
            let n = ctx
                .db()
                .write(move |c| Ok(db::notifications::mark_all_read(c, &uid)?))
                .await?;
            Ok(Reply::ok(json!({"updated": n})).summary(format!("marked {n} notifications read")))
        }
        other => Err(ApiError::invalid_action(req.resource, other)),
    }
}

/// Every `notifications` action; see `api::action`.
pub const RESOURCE: Resource = Resource {
    name: "notifications",
    list_action: "all",
    actions: &[
        Action::read("all", H).data(schema::<ListNotifications>),
        Action::read("list", H).data(schema::<ListNotifications>),
        Action::read("unread-count", H),
        Action::write("mark-read", H).id(),
        Action::write("mark-all-read", H),
    ],
};

const H: Handler = handler!(handle);
