//! The `marketplace` resource: genies published as template listings. A listing copies the
//! genie's prompt, settings, voice, category and description at publish time; never its
//! phone number, leads, documents or tools. `install` creates a new genie for the caller
//! from a listing, provisioned with the voice provider first (all-or-nothing).

use super::action::{Action, Handler, Resource, handler, schema};
use serde::Deserialize;
use serde_json::{Value, json};

use super::double_option;
use super::{ActionRequest, Ctx, Reply, genies, page, parse_uuid};
use crate::db::{
    self,
    marketplace::{Browse, Listing, ListingUpdate, Scope},
};
use crate::error::{ApiError, ApiResult};

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "MarketplacePublish")]
pub(crate) struct Publish {
    #[serde(alias = "genieId")]
    genie_id: String,
    name: Option<String>,
    description: Option<String>,
    category: Option<String>,
    tags: Option<Vec<String>>,
}

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

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "MarketplaceUpdate")]
pub(crate) struct Update {
    name: Option<String>,
    #[serde(default, deserialize_with = "double_option::deserialize")]
    #[schemars(with = "Option<String>")]
    description: Option<Option<String>>,
    #[serde(default, deserialize_with = "double_option::deserialize")]
    #[schemars(with = "Option<String>")]
    category: Option<Option<String>>,
    tags: Option<Vec<String>>,
    #[serde(default, deserialize_with = "double_option::deserialize")]
    #[schemars(with = "Option<String>")]
    system_prompt: Option<Option<String>>,
    #[serde(default, deserialize_with = "double_option::deserialize")]
    #[schemars(with = "Option<String>")]
    first_message: Option<Option<String>>,
    status: Option<String>,
}

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "MarketplaceInstall")]
pub(crate) struct Install {
    name: Option<String>,
}

/// Settings keys a template never carries (phone, knowledge base, tools and webhooks).
const PRIVATE_KEYS: &[&str] = &[
    "knowledge_base",
    "phone",
    "phone_number",
    "phone_numbers",
    "tools",
    "webhook",
    "webhooks",
    "rag",
    "documents",
];

fn strip_private(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|k, _| !PRIVATE_KEYS.contains(&k.as_str()));
            m.values_mut().for_each(strip_private);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_private),
        _ => {}
    }
}

fn text(field: &str, v: Option<String>, max: usize) -> ApiResult<Option<String>> {
    let v = v.map(|s| s.trim().to_string()).filter(|s| !s.is_empty());
    if v.as_ref().is_some_and(|s| s.chars().count() > max) {
        return Err(ApiError::validation(format!(
            "data.{field} must be at most {max} characters"
        )));
    }
    Ok(v)
}

fn tags(v: Vec<String>) -> ApiResult<Value> {
    if v.len() > 20
        || v.iter()
            .any(|t| t.trim().is_empty() || t.chars().count() > 40)
    {
        return Err(ApiError::validation(
            "data.tags must be at most 20 non-empty tags of at most 40 characters",
        ));
    }
    Ok(json!(
        v.iter().map(|t| t.trim().to_string()).collect::<Vec<_>>()
    ))
}

/// Owners see their listing's source genie; everyone else does not.
fn shown(l: &Listing, viewer: &str) -> Value {
    let mut v = json!(l);
    v["is_mine"] = json!(l.user_id == viewer);
    if l.user_id != viewer {
        v.as_object_mut().map(|o| o.remove("source_genie_id"));
    }
    v
}

fn visible(l: &Listing, ctx: &Ctx) -> bool {
    (l.status == "published" && !l.is_hidden)
        || l.user_id == ctx.user_id()
        || ctx.principal.is_admin()
}

async fn own(ctx: &Ctx, id: String) -> ApiResult<Listing> {
    let uid = ctx.user_id().to_string();
    ctx.db()
        .read(move |c| Ok(db::marketplace::get_any(c, &id)?))
        .await?
        .filter(|l| l.user_id == uid)
        .ok_or_else(|| ApiError::not_found("listing"))
}

pub async fn handle(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    match req.action.as_str() {
        "all" | "list" | "search" => {
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
            let search = super::search_term(b.search, "data.search", super::SEARCH_TERM_MAX)?;
            let category = text("category", b.category, 100)?;
            let mine = b.mine.unwrap_or(false);
            let viewer = uid.clone();
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
                    Ok(db::marketplace::browse(
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
            let listings: Vec<Value> = items.iter().map(|l| shown(l, &uid)).collect();
            Ok(Reply::ok(
                json!({"listings": listings, "total": total, "limit": limit, "offset": offset}),
            ))
        }
        "get" => {
            let id = req.uuid()?;
            let l = ctx
                .db()
                .read(move |c| Ok(db::marketplace::get_any(c, &id)?))
                .await?;
            let l = l
                .filter(|l| visible(l, ctx))
                .ok_or_else(|| ApiError::not_found("listing"))?;
            Ok(Reply::ok(json!({"listing": shown(&l, &uid)})))
        }
        "publish" | "create" => {
            let body: Publish = req.data()?;
            let gid = parse_uuid(&body.genie_id, "data.genie_id")?;
            let name = text("name", body.name, 100)?;
            let description = text("description", body.description, 5000)?;
            let category = text("category", body.category, 100)?;
            let tags = tags(body.tags.unwrap_or_default())?;
            let l = ctx
                .db()
                .write(move |c| {
                    let mut t = db::marketplace::genie_template(c, &uid, &gid)?
                        .ok_or_else(ApiError::agent_not_found)?;
                    strip_private(&mut t.settings);
                    t.name = name.unwrap_or(t.name);
                    t.description = description.or(t.description);
                    t.category = category.or(t.category);
                    Ok(db::marketplace::insert(c, &uid, &gid, &t, &tags)?)
                })
                .await?;
            let s = format!("published genie template '{}' to the marketplace", l.name);
            Ok(Reply::created(json!({"listing": shown(&l, ctx.user_id())}))
                .record(&l.id)
                .summary(s))
        }
        "update" | "unpublish" => {
            let id = req.uuid()?;
            let u = if req.action == "unpublish" {
                ListingUpdate {
                    name: None,
                    description: None,
                    category: None,
                    tags: None,
                    system_prompt: None,
                    first_message: None,
                    status: Some("unpublished".into()),
                }
            } else {
                let b: Update = req.data()?;
                let name = match b.name {
                    Some(n) => Some(
                        text("name", Some(n), 100)?
                            .ok_or_else(|| ApiError::validation("data.name must not be empty"))?,
                    ),
                    None => None,
                };
                if let Some(s) = &b.status
                    && s != "published"
                    && s != "unpublished"
                {
                    return Err(ApiError::validation(
                        "data.status must be 'published' or 'unpublished'",
                    ));
                }
                let opt = |f: &str,
                           v: Option<Option<String>>,
                           max|
                 -> ApiResult<Option<Option<String>>> {
                    v.map(|v| text(f, v, max)).transpose()
                };
                ListingUpdate {
                    name,
                    description: opt("description", b.description, 5000)?,
                    category: opt("category", b.category, 100)?,
                    tags: b.tags.map(tags).transpose()?,
                    system_prompt: opt("system_prompt", b.system_prompt, 50_000)?,
                    first_message: opt("first_message", b.first_message, 2000)?,
                    status: b.status,
                }
            };
            own(ctx, id.clone()).await?;
            let l = ctx
                .db()
                .write(move |c| {
                    let l = db::marketplace::get_any(c, &id)?
                        .filter(|l| l.user_id == uid)
                        .ok_or_else(|| ApiError::not_found("listing"))?;
                    db::marketplace::update(c, &l.id, &u)?;
                    Ok(db::marketplace::get_any(c, &id)?.expect("exists"))
                })
                .await?;
            let s = if req.action == "unpublish" {
                format!("unpublished listing '{}'", l.name)
            } else {
                format!("updated listing '{}'", l.name)
            };
            Ok(Reply::ok(json!({"listing": shown(&l, ctx.user_id())})).summary(s))
        }
        "delete" => {
            let id = req.uuid()?;
            let l = own(ctx, id.clone()).await?;
            let id2 = id.clone();
            ctx.db()
                .write(move |c| Ok(db::marketplace::delete(c, &id2)?))
                .await?;
            Ok(Reply::deleted(&id).summary(format!("deleted listing '{}'", l.name)))
        }
        "hide" | "unhide" | "feature" | "unfeature" => {
            ctx.principal.require_admin()?;
            let id = req.uuid()?;
            let (col, val) = match req.action.as_str() {
                "hide" => ("is_hidden", true),
                "unhide" => ("is_hidden", false),
                "feature" => ("is_featured", true),
                _ => ("is_featured", false),
            };
            let l = ctx
                .db()
                .write(move |c| {
                    if !db::marketplace::set_flag(c, &id, col, val)? {
                        return Err(ApiError::not_found("listing"));
                    }
                    Ok(db::marketplace::get_any(c, &id)?.expect("exists"))
                })
                .await?;
            let s = format!("moderation: {} listing '{}'", req.action, l.name);
            Ok(Reply::ok(json!({"listing": shown(&l, ctx.user_id())})).summary(s))
        }
        "install" => {
            let id = req.uuid()?;
            let body: Install = req.data()?;
            let name_in = text("name", body.name, 100)?;
            let lid = id.clone();
            let l = ctx
                .db()
                .read(move |c| Ok(db::marketplace::get_any(c, &lid)?))
                .await?;
            // Unpublished or hidden listings install only for their publisher.
            let l = l
                .filter(|l| (l.status == "published" && !l.is_hidden) || l.user_id == uid)
                .ok_or_else(|| ApiError::not_found("listing"))?;
            let name = name_in.unwrap_or_else(|| l.name.clone());
            // The genies module creates it: provisioned first, nothing left behind on a
            // provider failure, `genie.created` emitted. Never a phone, leads or documents.
            let input = json!({
                "genieName": name, "description": l.description, "category": l.category,
                "systemPrompt": l.system_prompt, "firstMessage": l.first_message,
                "webWelcomeMessage": l.web_welcome_message, "voiceId": l.voice_id,
                "llmModel": l.llm_model, "temperature": l.temperature, "maxTokens": l.max_tokens,
                "settings": l.settings, "setupCompleted": true,
            });
            let genie = genies::create_genie_for(&ctx.app, &uid, input).await?;
            let gid = genie["id"].as_str().unwrap_or_default().to_string();
            let (lid, g2) = (l.id.clone(), gid.clone());
            let count = ctx
                .db()
                .write(move |c| Ok(db::marketplace::record_install(c, &lid, &uid, &g2)?))
                .await?;
            let s = format!(
                "installed genie '{name}' from marketplace listing '{}'",
                l.name
            );
            Ok(
                Reply::created(json!({"genie": genie, "listing_id": l.id, "install_count": count}))
                    .record(&gid)
                    .summary(s),
            )
        }
        other => Err(ApiError::invalid_action(req.resource, other)),
    }
}

/// Every `marketplace` action; see `api::action`.
pub const RESOURCE: Resource = Resource {
    name: "marketplace",
    list_action: "all",
    actions: &[
        Action::read("all", H).data(schema::<BrowseIn>),
        Action::read("list", H).data(schema::<BrowseIn>),
        Action::read("search", H).data(schema::<BrowseIn>),
        Action::read("get", H).id(),
        Action::write("create", H)
            .data(schema::<Publish>)
            .conflict(),
        Action::write("publish", H)
            .data(schema::<Publish>)
            .conflict(),
        Action::write("update", H)
            .id()
            .data(schema::<Update>)
            .conflict(),
        Action::write("delete", H).id(),
        Action::write("unpublish", H).id(),
        Action::write("install", H)
            .id()
            .data(schema::<Install>)
            .conflict()
            .upstream(),
        Action::write("feature", H).id(),
        Action::write("unfeature", H).id(),
        Action::write("hide", H).id(),
        Action::write("unhide", H).id(),
    ],
};

const H: Handler = handler!(handle);
