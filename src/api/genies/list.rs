//! `list`, `all` and `get`: reading genies, in the caller's scope.

use serde::Deserialize;
use serde_json::{Value, json};

use super::view::PageChat;
use super::{full_genie, role};
use crate::api::cursor;
use crate::api::{ActionRequest, Ctx, Reply, page, parse_uuid};
use crate::db::genies::{self as repo, GenieRow, ListFilter, Scope};
use crate::db::users::Role;
use crate::error::{ApiError, ApiResult};

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "GenieFilters")]
struct Filters {
    search_term: Option<String>,
    category: Option<String>,
    group_id: Option<String>,
    is_active: Option<bool>,
}

/// `list` and `all` data. Other members (REST query leftovers) are ignored.
#[derive(Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "GenieListRequest")]
pub(crate) struct ListReq {
    limit: Option<i64>,
    offset: Option<i64>,
    cursor: Option<String>,
    search_term: Option<String>,
    #[serde(default)]
    filters: Filters,
    #[serde(default)]
    admin_mode: bool,
    owner_id: Option<String>,
}

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "GenieGetRequest")]
pub(crate) struct AdminModeReq {
    #[serde(default)]
    admin_mode: bool,
}

/// The listing scope and whether owners are shown, from `adminMode` / `ownerId`.
fn scope(ctx: &Ctx, admin_mode: bool, owner_id: Option<&str>) -> ApiResult<(Scope, bool)> {
    let admin_mode = ctx.principal.admin_option("adminMode", admin_mode)?;
    let owner = match owner_id {
        Some(o) => {
            ctx.principal.admin_option("ownerId", true)?;
            Some(parse_uuid(o, "data.ownerId")?)
        }
        None => None,
    };
    let scope = match (owner, admin_mode) {
        (Some(o), _) => Scope::Owned(o),
        (None, true) => Scope::All,
        (None, false) if role(ctx) == Role::Consumer => Scope::Assigned(ctx.user_id().to_string()),
        (None, false) => Scope::Owned(ctx.user_id().to_string()),
    };
    Ok((scope, admin_mode))
}

fn filter(q: &ListReq) -> ApiResult<ListFilter> {
    let (term, field) = match &q.filters.search_term {
        Some(t) => (Some(t.clone()), "data.filters.searchTerm"),
        None => (q.search_term.clone(), "data.searchTerm"),
    };
    let search = crate::api::search_term(term, field, crate::api::SEARCH_TERM_MAX)?
        .map(|t| t.to_lowercase());
    let group_id = q
        .filters
        .group_id
        .as_deref()
        .map(|g| parse_uuid(g, "data.filters.groupId"))
        .transpose()?;
    Ok(ListFilter {
        search,
        category: q.filters.category.clone(),
        group_id,
        is_active: q.filters.is_active,
    })
}

fn summary(g: &GenieRow) -> Value {
    json!({
        "id": g.id, "name": g.name, "description": g.description, "use_case": g.use_case,
        "category": g.category, "is_active": g.is_active, "setup_completed": g.setup_completed,
        "voice_id": g.voice_id, "group_id": g.group_id, "sort_order": g.sort_order,
        "created_at": g.created_at, "updated_at": g.updated_at,
    })
}

pub(super) async fn list(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let q: ListReq = req.data()?;
    let (limit, offset) = page(q.limit, q.offset, 50, 500)?;
    let (scope, _) = scope(ctx, q.admin_mode, q.owner_id.as_deref())?;
    let f = filter(&q)?;
    let (rows, total) = ctx
        .db()
        .read(move |c| Ok(repo::list(c, &scope, &f, limit, offset)?))
        .await?;
    let genies: Vec<Value> = rows.iter().map(summary).collect();
    Ok(Reply::ok(
        json!({"genies": genies, "total": total, "limit": limit, "offset": offset}),
    ))
}

fn encode_cursor(id: &str) -> String {
    cursor::encode("g1", id)
}

fn decode_cursor(c: &str) -> ApiResult<String> {
    let id = cursor::decode(c.trim(), "g1")?;
    parse_uuid(&id, "data.cursor").map_err(|_| cursor::bad())
}

pub(super) async fn all(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let q: ListReq = req.data()?;
    let (limit, _) = page(q.limit, None, 100, 500)?;
    let after = q
        .cursor
        .as_deref()
        .filter(|c| !c.is_empty())
        .map(decode_cursor)
        .transpose()?;
    let (scope, admin_mode) = scope(ctx, q.admin_mode, q.owner_id.as_deref())?;
    let f = filter(&q)?;
    let base = ctx.app.config.public_base();
    let chat = PageChat::of(&ctx.app);
    // One snapshot: each genie's view is several statements (phones, group, documents,
    // provider), and a move or a document push commits between them.
    let (genies, next) = ctx
        .db()
        .read_snapshot(move |c| {
            let mut rows = repo::page_after(c, &scope, &f, after.as_deref(), limit)?;
            let more = rows.len() as i64 > limit;
            rows.truncate(limit as usize);
            let next = if more {
                rows.last().map(|g| encode_cursor(&g.id))
            } else {
                None
            };
            let genies = rows
                .iter()
                .map(|g| {
                    let mut v = full_genie(c, g, admin_mode, &base)?;
                    chat.apply(g, &mut v);
                    Ok(v)
                })
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok((genies, next))
        })
        .await?;
    Ok(Reply::ok(
        json!({"genies": genies, "hasMore": next.is_some(), "nextCursor": next}),
    ))
}

pub(super) async fn get(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let q: AdminModeReq = req.data()?;
    let admin_mode = ctx.principal.admin_option("adminMode", q.admin_mode)?;
    let (uid, role, base) = (
        ctx.user_id().to_string(),
        role(ctx),
        ctx.app.config.public_base(),
    );
    let chat = PageChat::of(&ctx.app);
    let genie = ctx
        .db()
        .read_point_snapshot(move |c| match repo::get_readable(c, &uid, role, &id)? {
            Some(g) => {
                let mut v = full_genie(c, &g, admin_mode, &base)?;
                chat.apply(&g, &mut v);
                Ok(v)
            }
            None => Err(ApiError::agent_not_found()),
        })
        .await?;
    Ok(Reply::ok(json!({"genie": genie})))
}
