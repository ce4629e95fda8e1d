//! `all`/`list` (the same action under two names) and `get`.

use serde::Deserialize;
use serde_json::json;

use super::parse_time;
use crate::api::{ActionRequest, Ctx, Reply, date_range_since, page, parse_uuid};
use crate::db::conversations::{self as repo, CHANNELS, Filter, STATUSES, Scope};
use crate::error::{ApiError, ApiResult};
use crate::service::conversations::load;

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[schemars(rename = "ConversationListRequest")]
pub(crate) struct ListReq {
    limit: Option<i64>,
    offset: Option<i64>,
    #[serde(rename = "adminMode")]
    admin_mode: Option<bool>,
    #[serde(rename = "genieId", alias = "genie_id", alias = "agentId")]
    genie_id: Option<String>,
    status: Option<String>,
    channel: Option<String>,
    #[serde(rename = "dateRange")]
    date_range: Option<String>,
    from: Option<String>,
    to: Option<String>,
    /// The same members may also come under `data.filters` (as for leads, and from REST
    /// query strings); top-level members win.
    filters: Option<Box<ListReq>>,
}

pub(super) async fn list(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let q: ListReq = req.data()?;
    let (limit, offset) = page(q.limit, q.offset, 50, 500)?;
    let f = filter(ctx, q)?;
    let (items, count) = ctx
        .db()
        .read(move |c| Ok((repo::list(c, &f, limit, offset)?, repo::count(c, &f)?)))
        .await?;
    Ok(Reply::ok(
        json!({"conversations": items, "count": count, "limit": limit, "offset": offset}),
    ))
}

pub(super) async fn get(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let p = ctx.principal.clone();
    let conv = ctx.db().read(move |c| load(c, &p, &id, false)).await?;
    Ok(Reply::ok(json!({"conversation": conv})))
}

fn filter(ctx: &Ctx, mut q: ListReq) -> ApiResult<Filter> {
    if let Some(f) = q.filters.take() {
        q.genie_id = q.genie_id.or(f.genie_id);
        q.status = q.status.or(f.status);
        q.channel = q.channel.or(f.channel);
        q.date_range = q.date_range.or(f.date_range);
        q.from = q.from.or(f.from);
        q.to = q.to.or(f.to);
    }
    let admin_mode = ctx
        .principal
        .admin_option("adminMode", q.admin_mode.unwrap_or(false))?;
    let scope = if admin_mode {
        Scope::All
    } else {
        Scope::Readable(ctx.user_id().to_string())
    };
    if let Some(s) = &q.status
        && !STATUSES.contains(&s.as_str())
    {
        return Err(ApiError::validation(format!(
            "data.status must be one of {}",
            STATUSES.join(", ")
        )));
    }
    if let Some(s) = &q.channel
        && !CHANNELS.contains(&s.as_str())
    {
        return Err(ApiError::validation(format!(
            "data.channel must be one of {}",
            CHANNELS.join(", ")
        )));
    }
    let mut since = date_range_since(q.date_range.as_deref(), "data.dateRange")?;
    if let Some(f) = &q.from {
        since = Some(parse_time(f, "data.from")?);
    }
    let until = match &q.to {
        Some(t) => Some(parse_time(t, "data.to")?),
        None => None,
    };
    let genie_id = match &q.genie_id {
        Some(g) => Some(parse_uuid(g, "data.genieId")?),
        None => None,
    };
    Ok(Filter {
        scope,
        genie_id,
        status: q.status,
        channel: q.channel,
        since,
        until,
    })
}
