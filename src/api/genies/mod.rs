//! The `genies` resource: voice agents. Every genie exists in the configured voice provider
//! too: create provisions it there first and stores the row only when the provider accepted
//! it; delete removes it there and, when the provider fails, leaves a durable
//! `genie.cleanup` job that retries until the provider agrees, so neither side keeps an
//! orphan. Other resources use `create_genie_for` (marketplace install) and
//! `sync_agent_documents` (knowledge base), and check access with
//! `db::genies::can_read_genie` / `can_manage_genie`.

pub mod input;
mod view;

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ActionRequest, Ctx, Reply, page, parse_uuid, parse_value};
use crate::app::AppState;
use crate::db::genies::{self as repo, GenieRow, ListFilter, PhoneRow, Scope};
use crate::db::{self, users::Role};
use crate::error::{ApiError, ApiResult};
use crate::events::Event;
use crate::voice::KbDocRef;
use input::{CloneGenie, CreateGenie, UpdateGenie};

pub use view::full_genie;

pub const CLEANUP_JOB: &str = "genie.cleanup";

/// One async lock per genie id, held by every action that reads a genie, talks to the
/// provider and writes it back, so two concurrent updates cannot lose each other's changes
/// or leave the provider with the older version. The service is one process, so this is
/// enough; entries nobody holds are dropped.
static LOCKS: std::sync::LazyLock<
    std::sync::Mutex<std::collections::HashMap<String, std::sync::Arc<tokio::sync::Mutex<()>>>>,
> = std::sync::LazyLock::new(Default::default);

async fn lock_genie(id: &str) -> tokio::sync::OwnedMutexGuard<()> {
    let m = {
        let mut map = LOCKS.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|_, v| std::sync::Arc::strong_count(v) > 1);
        map.entry(id.to_string()).or_default().clone()
    };
    m.lock_owned().await
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Filters {
    search_term: Option<String>,
    category: Option<String>,
    group_id: Option<String>,
    is_active: Option<bool>,
}

/// `list` and `all` data. Other members (REST query leftovers) are ignored.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ListReq {
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

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct AdminModeReq {
    #[serde(default)]
    admin_mode: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AssignReq {
    user_id: String,
}

pub async fn handle(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    match req.action.as_str() {
        "list" => list(ctx, req).await,
        "all" => all(ctx, req).await,
        "get" => get(ctx, req).await,
        "create" => create(ctx, req).await,
        "update" => update(ctx, req).await,
        "delete" => delete(ctx, req).await,
        "clone" => clone(ctx, req).await,
        "reorder" => reorder(ctx, req).await,
        "attach-phone" => attach_phone(ctx, req).await,
        "release-phone" => release_phone(ctx, req).await,
        "assign" | "unassign" => assign(ctx, req).await,
        other => Err(ApiError::invalid_action(req.resource, other)),
    }
}

fn role(ctx: &Ctx) -> Role {
    ctx.principal.role
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
    let term = q
        .filters
        .search_term
        .clone()
        .or_else(|| q.search_term.clone());
    let search = term
        .map(|t| t.trim().to_lowercase())
        .filter(|t| !t.is_empty());
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

async fn list(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
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
    URL_SAFE_NO_PAD.encode(format!("g1:{id}"))
}

fn decode_cursor(c: &str) -> ApiResult<String> {
    let bad = || ApiError::validation("data.cursor is not a cursor returned by this service");
    let raw = URL_SAFE_NO_PAD.decode(c.trim()).map_err(|_| bad())?;
    let s = String::from_utf8(raw).map_err(|_| bad())?;
    let id = s.strip_prefix("g1:").ok_or_else(bad)?;
    parse_uuid(id, "data.cursor").map_err(|_| bad())
}

async fn all(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
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
    let (genies, next) = ctx
        .db()
        .read(move |c| {
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
                .map(|g| full_genie(c, g, admin_mode, &base))
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok((genies, next))
        })
        .await?;
    Ok(Reply::ok(
        json!({"genies": genies, "hasMore": next.is_some(), "nextCursor": next}),
    ))
}

async fn get(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let q: AdminModeReq = req.data()?;
    let admin_mode = ctx.principal.admin_option("adminMode", q.admin_mode)?;
    let (uid, role, base) = (
        ctx.user_id().to_string(),
        role(ctx),
        ctx.app.config.public_base(),
    );
    let genie = ctx
        .db()
        .read(move |c| match repo::get_readable(c, &uid, role, &id)? {
            Some(g) => Ok(full_genie(c, &g, admin_mode, &base)?),
            None => Err(ApiError::agent_not_found()),
        })
        .await?;
    Ok(Reply::ok(json!({"genie": genie})))
}

/// Reads the full object of a genie the caller just changed.
async fn reload(app: &AppState, id: &str, with_owner: bool) -> ApiResult<Value> {
    let (id, base) = (id.to_string(), app.config.public_base());
    app.db
        .read(move |c| match repo::find(c, &id)? {
            Some(g) => Ok(full_genie(c, &g, with_owner, &base)?),
            None => Err(ApiError::agent_not_found()),
        })
        .await
}

async fn load_manageable(ctx: &Ctx, id: &str) -> ApiResult<GenieRow> {
    let (uid, role, id) = (ctx.user_id().to_string(), role(ctx), id.to_string());
    ctx.db()
        .read(move |c| {
            repo::get_manageable(c, &uid, role, &id)?.ok_or_else(ApiError::agent_not_found)
        })
        .await
}

/// Checks that `group_id` names a group of `owner`.
async fn check_group(
    app: &AppState,
    owner: &str,
    group_id: &str,
    field: &str,
) -> ApiResult<String> {
    let gid = parse_uuid(group_id, field)?;
    let (o, g) = (owner.to_string(), gid.clone());
    let found = app
        .db
        .read(move |c| Ok(db::genie_groups::get(c, &o, &g)?))
        .await?;
    if found.is_none() {
        return Err(ApiError::validation(format!(
            "{field}: genie group not found"
        )));
    }
    Ok(gid)
}

async fn create(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let body: CreateGenie = req.data()?;
    let owner = match body.impersonated_user_id.as_deref() {
        None => ctx.user_id().to_string(),
        Some(u) => {
            ctx.principal.admin_option("impersonatedUserId", true)?;
            let uid = parse_uuid(u, "data.impersonatedUserId")?;
            let u2 = uid.clone();
            if ctx
                .db()
                .read(move |c| Ok(db::users::get(c, &u2)?))
                .await?
                .is_none()
            {
                return Err(ApiError::validation(
                    "data.impersonatedUserId: no such user",
                ));
            }
            uid
        }
    };
    let row = create_row(&ctx.app, &owner, &body).await?;
    let genie = reload(&ctx.app, &row.id, false).await?;
    Ok(Reply::created(json!({"genie": genie}))
        .record(&row.id)
        .summary(format!("created genie '{}'", row.name)))
}

/// Creates a genie owned by `owner_id` from `create` data (the same members as the API's
/// `create`; `impersonatedUserId` is ignored) and returns the full genie object. The
/// marketplace's install uses this. Emits `genie.created`; not audited (the caller's own
/// action is).
pub async fn create_genie_for(app: &AppState, owner_id: &str, input: Value) -> ApiResult<Value> {
    let body: CreateGenie = parse_value(&input, "data")?;
    let row = create_row(app, owner_id, &body).await?;
    reload(app, &row.id, false).await
}

async fn create_row(app: &AppState, owner: &str, body: &CreateGenie) -> ApiResult<GenieRow> {
    let mut row = input::new_row(body, db::new_id(), owner.to_string(), db::now())?;
    if let Some(g) = &body.group_id {
        row.group_id = Some(check_group(app, owner, g, "data.groupId").await?);
    }
    let want_phone = body.attach_phone_number.unwrap_or(false);
    if want_phone && !app.voice.supports_phone_provisioning() {
        return Err(phone_unsupported(app));
    }
    // 1. The provider first: a genie exists only if the provider accepted it.
    let agent_id = app
        .voice
        .create_agent(&input::agent_spec(&row, vec![]))
        .await?;
    row.external_agent_id = Some(agent_id.clone());
    let mut phone = None;
    if want_phone {
        match app.voice.provision_number(&agent_id, &row.name).await {
            Ok(p) => phone = Some(p),
            Err(e) => {
                cleanup_or_queue(app, Some(agent_id), vec![]).await;
                return Err(e.into());
            }
        }
    }
    // 2. Then the row, in one transaction with its phone number.
    let (r, p) = (row.clone(), phone.clone());
    let stored = app
        .db
        .write(move |c| {
            let mut r = r;
            r.sort_order = repo::next_sort_order(c, &r.user_id)?;
            if let Some(slug) = &r.page_slug
                && repo::slug_taken(c, slug, &r.id)?
            {
                return Err(ApiError::conflict(format!(
                    "data.pageSlug '{slug}' is already used by another genie"
                )));
            }
            repo::insert(c, &r)?;
            if let Some(p) = p {
                repo::insert_phone(
                    c,
                    &PhoneRow {
                        id: db::new_id(),
                        genie_id: r.id.clone(),
                        number: p.number,
                        external_id: Some(p.external_id),
                        status: "active".into(),
                        created_at: r.created_at.clone(),
                    },
                )?;
            }
            Ok(r)
        })
        .await;
    let row = match stored {
        Ok(r) => r,
        Err(e) => {
            cleanup_or_queue(
                app,
                Some(agent_id),
                phone.into_iter().map(|p| p.external_id).collect(),
            )
            .await;
            return Err(e);
        }
    };
    let full = reload(app, &row.id, false).await?;
    app.bus
        .emit(Event::new("genie.created", &row.user_id, full));
    Ok(row)
}

fn phone_unsupported(app: &AppState) -> ApiError {
    ApiError::validation(format!(
        "data.attachPhoneNumber: the '{}' voice provider cannot provision phone numbers; numbers are imported into the \
         provider with your own telephony (Twilio or SIP trunk) credentials",
        app.voice.name()
    ))
}

/// Removes an agent and releases numbers at the provider; if that fails, queues a durable
/// `genie.cleanup` job that retries with backoff until it succeeds.
async fn cleanup_or_queue(app: &AppState, agent_id: Option<String>, number_ids: Vec<String>) {
    let payload = json!({"agent_id": agent_id, "number_ids": number_ids});
    if let Err(e) = run_cleanup(app, &payload).await {
        tracing::warn!(error = %e, "voice provider clean-up failed; queued for retry");
        let res = app
            .db
            .write(move |c| {
                Ok(crate::jobs::enqueue(
                    c,
                    CLEANUP_JOB,
                    &payload,
                    retry_delay(),
                    None,
                )?)
            })
            .await;
        if let Err(e) = res {
            tracing::error!(error = %e, "could not queue the voice provider clean-up");
        }
    }
}

/// The first retry of a clean-up that just failed inline.
fn retry_delay() -> Duration {
    Duration::from_secs(30)
}

/// The `genie.cleanup` job: releases the numbers, then deletes the agent. Both steps are
/// idempotent, so a retry after a partial success is safe.
pub async fn run_cleanup(app: &AppState, payload: &Value) -> Result<(), String> {
    for n in payload["number_ids"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        app.voice
            .release_number(n)
            .await
            .map_err(|e| e.to_string())?;
    }
    if let Some(a) = payload["agent_id"].as_str() {
        app.voice.delete_agent(a).await.map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The knowledge base the provider should hold for a genie: its active documents that
/// already have an external id.
fn kb_refs(docs: &[repo::AttachedDoc]) -> Vec<KbDocRef> {
    docs.iter()
        .filter(|d| d.is_active)
        .filter_map(|d| {
            Some(KbDocRef {
                id: d.external_id.clone()?,
                name: d.name.clone(),
                doc_type: input::kb_type(&d.doc_type).to_string(),
            })
        })
        .collect()
}

/// Pushes the genie's current document list (active documents with an external id) to the
/// provider. The knowledge-base resource calls this after attaching, detaching or replacing
/// documents. A provider failure is a 502 `UPSTREAM_ERROR`.
pub async fn sync_agent_documents(app: &AppState, genie_id: &str) -> ApiResult<()> {
    let _guard = lock_genie(genie_id).await;
    let id = genie_id.to_string();
    let (row, docs) = app
        .db
        .read(move |c| {
            let g = repo::find(c, &id)?.ok_or_else(ApiError::agent_not_found)?;
            let docs = repo::documents(c, &id)?;
            Ok((g, docs))
        })
        .await?;
    if let Some(agent) = &row.external_agent_id {
        app.voice
            .set_agent_documents(agent, &kb_refs(&docs))
            .await?;
    }
    Ok(())
}

async fn update(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let body: UpdateGenie = req.data()?;
    let _guard = lock_genie(&id).await;
    let old = load_manageable(ctx, &id).await?;
    let mut row = old.clone();
    input::apply_update(&mut row, &body)?;
    if let Some(g) = &body.group_id {
        row.group_id = match g {
            None => None,
            Some(g) => Some(check_group(&ctx.app, &old.user_id, g, "data.group_id").await?),
        };
    }
    row.updated_at = db::now();
    let docs = {
        let id = id.clone();
        ctx.db().read(move |c| Ok(repo::documents(c, &id)?)).await?
    };
    let new_spec = input::agent_spec(&row, kb_refs(&docs));
    let changed = serde_json::to_value(&new_spec)?
        != serde_json::to_value(input::agent_spec(&old, kb_refs(&docs)))?;
    if changed && let Some(agent) = &row.external_agent_id {
        ctx.app.voice.update_agent(agent, &new_spec).await?;
    }
    let r = row.clone();
    ctx.db()
        .write(move |c| {
            if let Some(slug) = &r.page_slug
                && repo::slug_taken(c, slug, &r.id)?
            {
                return Err(ApiError::conflict(format!(
                    "data.page_slug '{slug}' is already used by another genie"
                )));
            }
            if !repo::save(c, &r)? {
                return Err(ApiError::agent_not_found());
            }
            Ok(())
        })
        .await?;
    let genie = reload(&ctx.app, &id, false).await?;
    ctx.app
        .bus
        .emit(Event::new("genie.updated", &row.user_id, genie.clone()));
    Ok(Reply::ok(json!({"genie": genie}))
        .record(&id)
        .summary(format!("updated genie '{}'", row.name)))
}

async fn delete(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let _guard = lock_genie(&id).await;
    let row = load_manageable(ctx, &id).await?;
    let phones = {
        let id = id.clone();
        ctx.db().read(move |c| Ok(repo::phones(c, &id)?)).await?
    };
    let payload = json!({
        "genie_id": id,
        "agent_id": row.external_agent_id,
        "number_ids": phones.iter().filter_map(|p| p.external_id.clone()).collect::<Vec<_>>(),
    });
    let provider = run_cleanup(&ctx.app, &payload).await;
    let queued = provider.is_err();
    if let Err(e) = &provider {
        tracing::warn!(genie = %id, error = %e, "voice provider clean-up failed; queued for retry");
    }
    let id2 = id.clone();
    ctx.db()
        .write(move |c| {
            if !repo::delete(c, &id2)? {
                return Err(ApiError::agent_not_found());
            }
            if queued {
                crate::jobs::enqueue(c, CLEANUP_JOB, &payload, retry_delay(), None)?;
            }
            Ok(())
        })
        .await?;
    ctx.app.bus.emit(Event::new(
        "genie.deleted",
        &row.user_id,
        json!({"id": id, "name": row.name}),
    ));
    Ok(Reply::deleted(&id).summary(format!("deleted genie '{}'", row.name)))
}

async fn clone(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let body: CloneGenie = req.data()?;
    input::check_replacements(&body.prompt_replacements)?;
    let src = load_manageable(ctx, &id).await?;
    let name = match &body.name {
        Some(n) => input::check_name("data.name", n)?,
        None => input::check_name("data.name", &format!("Copy of {}", src.name))?,
    };
    let docs = {
        let id = id.clone();
        ctx.db().read(move |c| Ok(repo::documents(c, &id)?)).await?
    };
    let now = db::now();
    let mut row = GenieRow {
        id: db::new_id(),
        external_agent_id: None,
        page_slug: Some(repo::new_slug(&name)),
        system_prompt: input::replace_all(&src.system_prompt, &body.prompt_replacements),
        first_message: input::replace_all(&src.first_message, &body.prompt_replacements),
        name,
        created_at: now.clone(),
        updated_at: now,
        ..src.clone()
    };
    let agent_id = ctx
        .app
        .voice
        .create_agent(&input::agent_spec(&row, kb_refs(&docs)))
        .await?;
    row.external_agent_id = Some(agent_id.clone());
    let (r, src_id) = (row.clone(), src.id.clone());
    let stored = ctx
        .db()
        .write(move |c| {
            let mut r = r;
            r.sort_order = repo::next_sort_order(c, &r.user_id)?;
            repo::insert(c, &r)?;
            repo::copy_documents(c, &src_id, &r.id, &r.created_at)?;
            Ok(r)
        })
        .await;
    let row = match stored {
        Ok(r) => r,
        Err(e) => {
            cleanup_or_queue(&ctx.app, Some(agent_id), vec![]).await;
            return Err(e);
        }
    };
    let genie = reload(&ctx.app, &row.id, false).await?;
    ctx.app
        .bus
        .emit(Event::new("genie.created", &row.user_id, genie.clone()));
    Ok(Reply::created(json!({"genie": genie}))
        .record(&row.id)
        .summary(format!("cloned genie '{}' as '{}'", src.name, row.name)))
}

async fn reorder(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let sort = input::parse_sort(&req.data)?;
    let (uid, role) = (ctx.user_id().to_string(), role(ctx));
    let n = ctx
        .db()
        .write(move |c| {
            let at = db::now();
            for (id, pos) in &sort {
                if repo::get_manageable(c, &uid, role, id)?.is_none() {
                    return Err(ApiError::agent_not_found());
                }
                repo::set_sort_order(c, id, *pos, &at)?;
            }
            Ok(sort.len())
        })
        .await?;
    Ok(Reply::ok(json!({"updated": n})).summary(format!("reordered {n} genies")))
}

async fn attach_phone(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let _guard = lock_genie(&id).await;
    let row = load_manageable(ctx, &id).await?;
    if !ctx.app.voice.supports_phone_provisioning() {
        return Err(phone_unsupported(&ctx.app));
    }
    let existing = {
        let id = id.clone();
        ctx.db().read(move |c| Ok(repo::phones(c, &id)?)).await?
    };
    if !existing.is_empty() {
        return Err(ApiError::conflict(
            "the genie already has a phone number; release it first",
        ));
    }
    let agent = row
        .external_agent_id
        .clone()
        .ok_or_else(|| ApiError::upstream("the genie has no agent at the voice provider"))?;
    let p = ctx.app.voice.provision_number(&agent, &row.name).await?;
    let (gid, pnum) = (id.clone(), p.clone());
    let stored = ctx
        .db()
        .write(move |c| {
            if repo::find(c, &gid)?.is_none() {
                return Err(ApiError::agent_not_found());
            }
            // A concurrent attach-phone may have won the race since the check above.
            if !repo::phones(c, &gid)?.is_empty() {
                return Err(ApiError::conflict(
                    "the genie already has a phone number; release it first",
                ));
            }
            repo::insert_phone(
                c,
                &PhoneRow {
                    id: db::new_id(),
                    genie_id: gid,
                    number: pnum.number,
                    external_id: Some(pnum.external_id),
                    status: "active".into(),
                    created_at: db::now(),
                },
            )?;
            Ok(())
        })
        .await;
    if let Err(e) = stored {
        cleanup_or_queue(&ctx.app, None, vec![p.external_id]).await;
        return Err(e);
    }
    let genie = reload(&ctx.app, &id, false).await?;
    ctx.app
        .bus
        .emit(Event::new("genie.updated", &row.user_id, genie.clone()));
    Ok(Reply::ok(json!({"genie": genie}))
        .record(&id)
        .summary(format!(
            "attached phone number {} to genie '{}'",
            p.number, row.name
        )))
}

async fn release_phone(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let _guard = lock_genie(&id).await;
    let row = load_manageable(ctx, &id).await?;
    let phones = {
        let id = id.clone();
        ctx.db().read(move |c| Ok(repo::phones(c, &id)?)).await?
    };
    if phones.is_empty() {
        return Err(ApiError::not_found("phone number"));
    }
    for p in &phones {
        if let Some(ext) = &p.external_id {
            ctx.app.voice.release_number(ext).await?;
        }
    }
    let ids: Vec<String> = phones.iter().map(|p| p.id.clone()).collect();
    ctx.db()
        .write(move |c| {
            for pid in &ids {
                repo::delete_phone(c, pid)?;
            }
            Ok(())
        })
        .await?;
    let genie = reload(&ctx.app, &id, false).await?;
    ctx.app
        .bus
        .emit(Event::new("genie.updated", &row.user_id, genie.clone()));
    let numbers: Vec<&str> = phones.iter().map(|p| p.number.as_str()).collect();
    Ok(Reply::ok(json!({"genie": genie}))
        .record(&id)
        .summary(format!(
            "released {} from genie '{}'",
            numbers.join(", "),
            row.name
        )))
}

async fn assign(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let body: AssignReq = req.data()?;
    let target = parse_uuid(&body.user_id, "data.userId")?;
    let row = load_manageable(ctx, &id).await?;
    let assigning = req.action == "assign";
    if target == row.user_id {
        return Err(ApiError::validation("data.userId is the genie's owner"));
    }
    let (gid, uid) = (id.clone(), target.clone());
    ctx.db()
        .write(move |c| {
            if db::users::get(c, &uid)?.is_none() {
                return Err(ApiError::validation("data.userId: no such user"));
            }
            if assigning {
                repo::assign(c, &gid, &uid, &db::now())?;
            } else if !repo::unassign(c, &gid, &uid)? {
                return Err(ApiError::not_found("assignment"));
            }
            Ok(())
        })
        .await?;
    let verb = if assigning { "assigned" } else { "unassigned" };
    Ok(
        Reply::ok(json!({"genie_id": id, "user_id": target, "assigned": assigning}))
            .record(&id)
            .summary(format!(
                "{verb} genie '{}' {} user {target}",
                row.name,
                if assigning { "to" } else { "from" }
            )),
    )
}
