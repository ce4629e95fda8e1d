//! `stats`, `all`, `list` and `get`.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::check_enum;
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
    let (leads, count, limit, offset) = page_of(ctx, req).await?;
    Reply::rendered(&LeadPage {
        leads: &leads,
        count,
        limit,
        offset,
    })
}

/// Lead summaries.
pub(super) async fn list(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let (leads, count, _, _) = page_of(ctx, req).await?;
    let leads: Vec<Value> = leads.iter().map(Lead::summary).collect();
    Ok(Reply::ok(json!({"leads": leads, "count": count})))
}

async fn page_of(ctx: &Ctx, req: &ActionRequest) -> ApiResult<(Vec<Lead>, i64, i64, i64)> {
    let q: ListReq = req.data()?;
    let (limit, offset) = page(q.limit, q.offset, 50, 500)?;
    let f = filter(ctx, req).await?;
    let (leads, count) = ctx
        .db()
        .read(move |c| Ok((repo::list(c, &f, limit, offset)?, repo::count(c, &f)?)))
        .await?;
    Ok((leads, count, limit, offset))
}

pub(super) async fn get(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.int_id()?;
    let p = ctx.principal.clone();
    let lead = ctx.db().read(move |c| load(c, &p, id, false)).await?;
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
    })
}
