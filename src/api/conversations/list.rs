//! `all`/`list` (the same action under two names) and `get`.

use serde::Deserialize;
use serde_json::json;

use super::parse_time;
use crate::api::cursor;
use crate::api::{ActionRequest, Ctx, Reply, date_range_since, page, parse_uuid};
use crate::db::conversations::{self as repo, CHANNELS, Conversation, Filter, STATUSES, Scope};
use crate::error::{ApiError, ApiResult};
use crate::service::conversations::load;

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[schemars(rename = "ConversationListRequest")]
pub(crate) struct ListReq {
    limit: Option<i64>,
    offset: Option<i64>,
    /// Keyset pagination: `nextCursor` of the previous page (instead of `offset`).
    cursor: Option<String>,
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
    let after = match q.cursor.as_deref().map(str::trim).filter(|c| !c.is_empty()) {
        Some(_) if offset > 0 => {
            return Err(ApiError::validation(
                "data.cursor and data.offset cannot be used together",
            ));
        }
        Some(c) => Some(decode_cursor(c)?),
        None => None,
    };
    let mut f = filter(ctx, q)?;
    f.after = after;
    let (mut items, count) = ctx
        .db()
        .read(move |c| Ok((repo::list(c, &f, limit + 1, offset)?, repo::count(c, &f)?)))
        .await?;
    // One conversation more than the page tells whether there is a next page.
    let next = if items.len() as i64 > limit {
        items.truncate(limit as usize);
        items.last().map(encode_cursor)
    } else {
        None
    };
    Ok(Reply::ok(json!({
        "conversations": items,
        "count": count,
        "limit": limit,
        "offset": offset,
        "nextCursor": next,
    })))
}

/// Opaque to clients: the listing order's key of the last conversation of a page.
fn encode_cursor(c: &Conversation) -> String {
    cursor::encode_at("c1", &c.id, &c.started_at)
}

fn decode_cursor(c: &str) -> ApiResult<(String, String)> {
    let (id, at) = cursor::decode_at(c, "c1")?;
    uuid::Uuid::parse_str(&id).map_err(|_| cursor::bad())?;
    Ok((at, id))
}

pub(super) async fn get(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let p = ctx.principal.clone();
    let conv = ctx
        .db()
        .read_point(move |c| load(c, &p, &id, false))
        .await?;
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
        after: None,
    })
}
