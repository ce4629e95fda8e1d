//! `stats`, `all`, `list` and `get`.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::check_enum;
use crate::api::cursor;
use crate::api::{
    ActionRequest, Ctx, Reply, SEARCH_TERM_MAX, date_range_since, page, parse_uuid, search_term,
};
use crate::db::leads::{self as repo, Filter, Lead, PRIORITIES, STATUSES, Scope};
use crate::error::{ApiError, ApiResult};
use crate::service::leads::load;

#[derive(Deserialize, Default)]
struct FiltersIn {
    #[serde(rename = "agentId")]
    agent_id: Option<String>,
    #[serde(rename = "agentIds")]
    agent_ids: Option<Vec<String>>,
    status: Option<String>,
    priority: Option<String>,
    #[serde(rename = "searchTerm")]
    search_term: Option<String>,
    #[serde(rename = "dateRange")]
    date_range: Option<String>,
}

#[derive(Deserialize, Default)]
struct ListReq {
    #[serde(default)]
    filters: Option<FiltersIn>,
    limit: Option<i64>,
    offset: Option<i64>,
    /// Keyset pagination: `nextCursor` of the previous page (instead of `offset`).
    cursor: Option<String>,
    #[serde(rename = "adminMode")]
    admin_mode: Option<bool>,
    #[serde(rename = "userId")]
    user_id: Option<String>,
}

/// `get`'s reply, serialized without a `Value` in between (see `Reply::rendered`).
#[derive(Serialize)]
struct OneLead<'a> {
    lead: &'a Lead,
}

/// `all`'s reply.
#[derive(Serialize)]
struct LeadPage<'a> {
    leads: &'a [Lead],
    count: i64,
    limit: i64,
    offset: i64,
    /// The cursor of the next page (the same filters, from the lead after this page's last),
    /// or null when this page is the last.
    #[serde(rename = "nextCursor")]
    next_cursor: Option<String>,
}

pub(super) async fn stats(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let f = filter(ctx, req).await?;
    let (total, by) = ctx.db().read(move |c| Ok(repo::stats(c, &f)?)).await?;
    Ok(Reply::ok(json!({"stats": {
        "total": total,
        "by_status": {"new": by[0], "contacted": by[1], "qualified": by[2], "converted": by[3]},
    }})))
}

/// Full leads, with the page's `limit` and `offset`.
pub(super) async fn all(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let (leads, count, limit, offset, next_cursor) = page_of(ctx, req).await?;
    Reply::rendered(&LeadPage {
        leads: &leads,
        count,
        limit,
        offset,
        next_cursor,
    })
}

/// Lead summaries.
pub(super) async fn list(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let (leads, count, _, _, _) = page_of(ctx, req).await?;
    let leads: Vec<Value> = leads.iter().map(Lead::summary).collect();
    Ok(Reply::ok(json!({"leads": leads, "count": count})))
}

/// One page: the leads, the count of every match, the applied limit and offset, and the
/// cursor of the next page.
type Page = (Vec<Lead>, i64, i64, i64, Option<String>);

async fn page_of(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Page> {
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
    let mut f = filter(ctx, req).await?;
    f.after = after;
    let (mut leads, count) = ctx
        .db()
        .read(move |c| Ok((repo::list(c, &f, limit + 1, offset)?, repo::count(c, &f)?)))
        .await?;
    // One lead more than the page tells whether there is a next page.
    let next = if leads.len() as i64 > limit {
        leads.truncate(limit as usize);
        leads.last().map(encode_cursor)
    } else {
        None
    };
    Ok((leads, count, limit, offset, next))
}

/// Opaque to clients: the listing order's key of the last lead of a page.
fn encode_cursor(l: &Lead) -> String {
    cursor::encode_at("l1", l.id, &l.created_at)
}

fn decode_cursor(c: &str) -> ApiResult<(String, i64)> {
    let (id, at) = cursor::decode_at(c, "l1")?;
    let id = id.parse::<i64>().map_err(|_| cursor::bad())?;
    Ok((at, id))
}

pub(super) async fn get(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.int_id()?;
    let p = ctx.principal.clone();
    let lead = ctx.db().read_point(move |c| load(c, &p, id, false)).await?;
    Reply::rendered(&OneLead { lead: &lead })
}

/// Parses `data.filters` and the admin options into one SQL filter.
async fn filter(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Filter> {
    let q: ListReq = req.data()?;
    let p = &ctx.principal;
    let admin_mode = p.admin_option("adminMode", q.admin_mode.unwrap_or(false))?;
    let scope = if let Some(u) = &q.user_id {
        p.admin_option("userId", true)?;
        Scope::User(parse_uuid(u, "data.userId")?)
    } else if admin_mode {
        Scope::All
    } else {
        Scope::AgentsOf(p.user_id.clone())
    };
    let f = q.filters.unwrap_or_default();
    let mut agent_ids = Vec::new();
    if let Some(a) = &f.agent_id {
        agent_ids.push(parse_uuid(a, "data.filters.agentId")?);
    }
    for (i, a) in f.agent_ids.iter().flatten().enumerate() {
        agent_ids.push(parse_uuid(a, &format!("data.filters.agentIds[{i}]"))?);
    }
    if let Some(s) = &f.status {
        check_enum("data.filters.status", s, STATUSES)?;
    }
    if let Some(s) = &f.priority {
        check_enum("data.filters.priority", s, PRIORITIES)?;
    }
    let since = date_range_since(f.date_range.as_deref(), "data.filters.dateRange")?;
    // A regular user naming an agent must own it (or be assigned to it).
    if !p.is_admin() && !agent_ids.is_empty() {
        let (ids, me) = (agent_ids.clone(), p.user_id.clone());
        ctx.db()
            .read(move |c| {
                for id in &ids {
                    let a = repo::agent(c, id, &me)?.ok_or_else(ApiError::agent_not_found)?;
                    if a.owner != me && !a.assigned {
                        return Err(ApiError::forbidden(
                            "you do not have access to this agent's leads",
                        ));
                    }
                }
                Ok(())
            })
            .await?;
    }
    let search = search_term(f.search_term, "data.filters.searchTerm", SEARCH_TERM_MAX)?;
    Ok(Filter {
        scope,
        agent_ids,
        status: f.status,
        priority: f.priority,
        search,
        since,
        after: None,
    })
}
