//! Finding listings: browse and search (`all`, `list`, `search`) and `get`.

use serde::Deserialize;
use serde_json::{Value, json};

use super::{shown, text};
use crate::api::{ActionRequest, Ctx, Reply, SEARCH_TERM_MAX, page, search_term};
use crate::db::marketplace::{self as repo, Browse, Scope};
use crate::error::{ApiError, ApiResult};
use crate::service::marketplace as service;

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[schemars(rename = "MarketplaceBrowse")]
pub(crate) struct BrowseIn {
    #[serde(alias = "searchTerm")]
    search: Option<String>,
    category: Option<String>,
    sort: Option<String>,
    mine: Option<bool>,
    #[serde(rename = "adminMode")]
    admin_mode: Option<bool>,
    filters: Option<Box<BrowseIn>>,
    limit: Option<i64>,
    offset: Option<i64>,
}

/// `all`, `list` and `search`: one page of listings, the public ones unless the caller
/// asks for their own (`mine`) or, as an admin, for every listing (`adminMode`).
pub(super) async fn browse(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let mut b: BrowseIn = req.data()?;
    if let Some(f) = b.filters.take() {
        b.search = b.search.or(f.search);
        b.category = b.category.or(f.category);
        b.sort = b.sort.or(f.sort);
        b.mine = b.mine.or(f.mine);
    }
    let admin = ctx
        .principal
        .admin_option("adminMode", b.admin_mode.unwrap_or(false))?;
    let (limit, offset) = page(b.limit, b.offset, 50, 200)?;
    let sort = b.sort.unwrap_or_else(|| "featured".into());
    if !["featured", "installs", "newest", "name"].contains(&sort.as_str()) {
        return Err(ApiError::validation(
            "data.sort must be one of featured, installs, newest, name",
        ));
    }
    let search = search_term(b.search, "data.search", SEARCH_TERM_MAX)?;
    let category = text("category", b.category, 100)?;
    let mine = b.mine.unwrap_or(false);
    let viewer = ctx.user_id().to_string();
    let (items, total) = ctx
        .db()
        .read(move |c| {
            let scope = if mine {
                Scope::Mine(&viewer)
            } else if admin {
                Scope::All
            } else {
                Scope::Public
            };
            Ok(repo::browse(
                c,
                &Browse {
                    scope,
                    search,
                    category,
                    sort: &sort,
                    limit,
                    offset,
                },
            )?)
        })
        .await?;
    let listings: Vec<Value> = items.iter().map(|l| shown(l, ctx.user_id())).collect();
    Ok(Reply::ok(
        json!({"listings": listings, "total": total, "limit": limit, "offset": offset}),
    ))
}

pub(super) async fn get(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let l = service::get(&ctx.app, ctx.user_id(), ctx.principal.is_admin(), &id).await?;
    Ok(Reply::ok(json!({"listing": shown(&l, ctx.user_id())})))
}
