//! The `activities` resource: the audit log, read-only. Users see their own entries;
//! admins see everyone's with `adminMode` (optionally narrowed by `userId`).

use super::action::{Action, Resource, handler, schema};
use serde::Deserialize;
use serde_json::json;

use super::{ActionRequest, Ctx, Reply, page};
use crate::db::{self, activities::Filter};
use crate::error::{ApiError, ApiResult};

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ListActivities {
    limit: Option<i64>,
    offset: Option<i64>,
    #[serde(default)]
    admin_mode: bool,
    user_id: Option<String>,
    #[serde(default)]
    filters: Filters,
}

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "ActivityFilters")]
struct Filters {
    resource: Option<String>,
    action: Option<String>,
    /// `7d`, `30d`, `90d` or `all`, as on leads.
    date_range: Option<String>,
    /// RFC 3339 bounds, inclusive.
    from: Option<String>,
    to: Option<String>,
}

async fn list(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let q: ListActivities = req.data()?;
    let admin_mode = ctx.principal.admin_option("adminMode", q.admin_mode)?;
    ctx.principal.admin_option("userId", q.user_id.is_some())?;
    let (limit, offset) = page(q.limit, q.offset, 50, 500)?;
    let user_id = match (admin_mode, q.user_id) {
        (_, Some(u)) => Some(super::parse_uuid(&u, "data.userId")?),
        (true, None) => None,
        (false, None) => Some(ctx.user_id().to_string()),
    };
    let mut from = parse_bound(q.filters.from.as_deref(), "data.filters.from")?;
    if let Some(since) =
        super::date_range_since(q.filters.date_range.as_deref(), "data.filters.dateRange")?
    {
        from = Some(since);
    }
    let filter = Filter {
        user_id,
        resource: q.filters.resource,
        action: q.filters.action,
        from,
        to: parse_bound(q.filters.to.as_deref(), "data.filters.to")?,
    };
    let (rows, total) = ctx
        .db()
        .read(move |c| Ok(db::activities::list(c, &filter, limit, offset)?))
        .await?;
    Ok(Reply::ok(
        json!({"activities": rows, "count": total, "limit": limit, "offset": offset}),
    ))
}

fn parse_bound(v: Option<&str>, field: &str) -> ApiResult<Option<String>> {
    v.map(|s| {
        chrono::DateTime::parse_from_rfc3339(s)
            .map(|t| db::fmt_time(t.with_timezone(&chrono::Utc)))
            .map_err(|_| ApiError::validation(format!("{field} must be an RFC 3339 timestamp")))
    })
    .transpose()
}

/// Every `activities` action; see `api::action`.
pub const RESOURCE: Resource = Resource {
    name: "activities",
    list_action: "list",
    actions: &[
        Action::read("all", handler!(list)).data(schema::<ListActivities>),
        Action::read("list", handler!(list)).data(schema::<ListActivities>),
    ],
};
