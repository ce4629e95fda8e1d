//! The `knowledge-base` resource (alias `documents`): listing with filters and full-text
//! search, reading by UUID or external id, metadata and content updates, deletion, the
//! genie links (attach, detach, replace, sync-with-agent) and chunk search for retrieval.
//! Creation lives in `create`, the links in `links`, the multipart route in `http::upload`.

pub(crate) mod create;
pub(crate) mod links;

use super::action::{Action, Resource, handler, schema};
use serde::Deserialize;
use serde_json::{Value, json};

use super::double_option;
use super::{ActionRequest, Ctx, Reply, page, parse_uuid};
use crate::db::document_folders;
use crate::db::documents::{self as docs, Document, ListFilter, MetaUpdate, Scope};
use crate::error::{ApiError, ApiResult};
use crate::knowledge::{self, pipeline};

/// What the caller reads: own and public documents, or everything for an admin in admin mode.
pub(crate) fn scope(ctx: &Ctx, admin_mode: Option<bool>) -> ApiResult<Scope> {
    let all = ctx
        .principal
        .admin_option("adminMode", admin_mode.unwrap_or(false))?;
    Ok(Scope {
        user_id: ctx.user_id().to_string(),
        all,
    })
}

/// A UUID or a 20-character external document id.
pub(crate) fn doc_ref(raw: &str, field: &str) -> ApiResult<String> {
    let raw = raw.trim();
    if let Ok(u) = uuid::Uuid::parse_str(raw) {
        return Ok(u.to_string());
    }
    if raw.chars().count() == 20
        && raw
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Ok(raw.to_string());
    }
    Err(ApiError::validation(format!(
        "{field} must be a document UUID or a 20-character external document id"
    )))
}

/// A document the caller may change: their own, or any for an admin in admin mode. Public
/// documents of others are read-only (403); invisible ones are absent (404).
pub(crate) fn writable(c: &crate::db::Connection, scope: &Scope, id: &str) -> ApiResult<Document> {
    let d = docs::find(c, scope, id)?.ok_or_else(|| ApiError::not_found("document"))?;
    if !scope.all && d.user_id != scope.user_id {
        return Err(ApiError::forbidden(
            "public documents of other users are read-only",
        ));
    }
    Ok(d)
}

pub(crate) fn check_folder(
    c: &crate::db::Connection,
    owner: &str,
    folder: Option<&str>,
) -> ApiResult<()> {
    if let Some(f) = folder
        && document_folders::get(c, owner, f)?.is_none()
    {
        return Err(ApiError::not_found("folder"));
    }
    Ok(())
}

pub(crate) async fn record(ctx: &Ctx, d: Document, scope: &Scope) -> ApiResult<Value> {
    let (id, s) = (d.id.clone(), scope.clone());
    let agents = ctx
        .db()
        .read(move |c| Ok(docs::dependent_agents(c, &id, &s)?))
        .await?;
    Ok(knowledge::render(&d, agents, scope.all))
}

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "DocumentFilters")]
struct Filters {
    search_term: Option<String>,
    selected_privacy: Option<String>,
    selected_type: Option<String>,
    folder_id: Option<String>,
}

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "DocumentListRequest")]
pub(crate) struct AllReq {
    limit: Option<i64>,
    offset: Option<i64>,
    #[serde(default)]
    filters: Option<Filters>,
    admin_mode: Option<bool>,
    owner_id: Option<String>,
}

async fn all(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let r: AllReq = req.data()?;
    let (limit, offset) = page(r.limit, r.offset, 50, 500)?;
    let scope = scope(ctx, r.admin_mode)?;
    let f = r.filters.unwrap_or_default();
    let mut filter = ListFilter {
        search: super::search_term(
            f.search_term,
            "data.filters.searchTerm",
            super::SEARCH_TERM_MAX,
        )?,
        ..Default::default()
    };
    filter.public = match f.selected_privacy.as_deref().map(str::trim) {
        None | Some("" | "all") => None,
        Some("public") => Some(true),
        Some("private") => Some(false),
        Some(_) => {
            return Err(ApiError::validation(
                "data.filters.selectedPrivacy must be 'public', 'private' or 'all'",
            ));
        }
    };
    filter.doc_type = match f.selected_type.as_deref().map(str::trim) {
        None | Some("" | "all") => None,
        Some(t) if knowledge::TYPES.contains(&t) => Some(t.to_string()),
        Some(_) => {
            return Err(ApiError::validation(format!(
                "data.filters.selectedType must be one of {} or 'all'",
                knowledge::TYPES.join(", ")
            )));
        }
    };
    filter.folder_id = match f.folder_id.as_deref().map(str::trim) {
        None | Some("") => None,
        Some("root") => Some(None),
        Some(id) => Some(Some(parse_uuid(id, "data.filters.folderId")?)),
    };
    if let Some(owner) = r.owner_id {
        if !scope.all {
            return Err(ApiError::forbidden(
                "'ownerId' needs adminMode (internal admins only)",
            ));
        }
        filter.owner_id = Some(parse_uuid(&owner, "data.ownerId")?);
    }
    let s = scope.clone();
    let (list, total) = ctx
        .db()
        .read(move |c| {
            let (list, total) = docs::list(c, &s, &filter, limit, offset)?;
            let mut out = Vec::with_capacity(list.len());
            for d in list {
                let agents = docs::dependent_agents(c, &d.id, &s)?;
                out.push(knowledge::render(&d, agents, s.all));
            }
            Ok((out, total))
        })
        .await?;
    Ok(Reply::ok(
        json!({"documents": list, "total": total, "limit": limit, "offset": offset}),
    ))
}

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "DocumentGetRequest")]
pub(crate) struct GetReq {
    admin_mode: Option<bool>,
}

async fn get(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = doc_ref(&req.id_str()?, "id")?;
    let r: GetReq = req.data()?;
    let scope = scope(ctx, r.admin_mode)?;
    let s = scope.clone();
    // The document and the genies using it from one snapshot: a push or a detach between
    // two reads would answer a list that was never true of the document.
    let (d, agents) = ctx
        .db()
        .read_point_snapshot(move |c| {
            let d = docs::find(c, &s, &id)?.ok_or_else(|| ApiError::not_found("document"))?;
            let agents = docs::dependent_agents(c, &d.id, &s)?;
            Ok((d, agents))
        })
        .await?;
    Ok(Reply::ok(
        json!({"document": knowledge::render(&d, agents, scope.all)}),
    ))
}

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "DocumentMetaFields")]
struct MetaFields {
    name: Option<String>,
    is_active: Option<bool>,
    is_public: Option<bool>,
    #[serde(default, deserialize_with = "double_option::deserialize")]
    #[schemars(with = "Option<String>")]
    folder_id: Option<Option<String>>,
}

impl MetaFields {
    fn into_update(self, field: &str) -> ApiResult<MetaUpdate> {
        let name = match self.name.map(|n| n.trim().to_string()) {
            Some(n) if n.is_empty() || n.chars().count() > 255 => {
                return Err(ApiError::validation(format!(
                    "{field}.name must be 1 to 255 characters"
                )));
            }
            n => n,
        };
        let folder_id = match self.folder_id {
            Some(Some(f)) if !f.trim().is_empty() => {
                Some(Some(parse_uuid(&f, &format!("{field}.folder_id"))?))
            }
            Some(_) => Some(None),
            None => None,
        };
        Ok(MetaUpdate {
            name,
            is_active: self.is_active,
            is_public: self.is_public,
            folder_id,
        })
    }
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
struct ContentUpdate {
    content: String,
    #[serde(default)]
    is_optimized: bool,
}

async fn update(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = doc_ref(&req.id_str()?, "id")?;
    let mut data = req.data.clone();
    let obj = data.as_object_mut().expect("data is an object");
    let mode = match obj.remove("mode") {
        None | Some(Value::Null) => "data".to_string(),
        Some(Value::String(m)) => m,
        Some(_) => {
            return Err(ApiError::validation(
                "data.mode must be 'data' or 'content'",
            ));
        }
    };
    let admin_mode = obj.remove("adminMode").and_then(|v| v.as_bool());
    let scope = scope(ctx, admin_mode)?;
    match mode.as_str() {
        "data" => {
            let m: MetaFields = super::parse_value(&data, "data")?;
            let upd = m.into_update("data")?;
            if upd.is_empty() {
                return Err(ApiError::validation(
                    "data must carry at least one of name, is_active, is_public, folder_id",
                ));
            }
            let s = scope.clone();
            let (d, genies) = ctx
                .db()
                .write(move |c| {
                    let d = writable(c, &s, &id)?;
                    check_folder(c, &d.user_id, upd.folder_id.clone().flatten().as_deref())?;
                    docs::update_meta(c, &d.id, &upd)?;
                    let genies = if upd.name.is_some() || upd.is_active.is_some() {
                        docs::linked_genies(c, &d.id)?
                    } else {
                        vec![]
                    };
                    Ok((docs::get_any(c, &d.id)?.expect("present"), genies))
                })
                .await?;
            pipeline::push_genies(&ctx.app, &genies).await;
            let summary = format!("updated document '{}'", d.name);
            let id = d.id.clone();
            Ok(
                Reply::ok(json!({"document": record(ctx, d, &scope).await?}))
                    .record(id)
                    .summary(summary),
            )
        }
        "content" => {
            let m: ContentUpdate = super::parse_value(&data, "data")?;
            if m.content.trim().is_empty() {
                return Err(ApiError::validation("data.content must not be empty"));
            }
            if m.content.len() > ctx.app.config.max_upload_bytes {
                return Err(ApiError::payload_too_large(ctx.app.config.max_upload_bytes));
            }
            let s = scope.clone();
            let d = ctx.db().read(move |c| writable(c, &s, &id)).await?;
            let text = if m.is_optimized {
                m.content.trim().to_string()
            } else {
                knowledge::extract::text::optimize(&m.content)
            };
            if text.is_empty() {
                return Err(ApiError::validation(
                    "data.content has no text left after clean-up",
                ));
            }
            let d = pipeline::finalize(&ctx.app, &d, text).await?;
            let summary = format!("replaced the content of document '{}'", d.name);
            let id = d.id.clone();
            Ok(
                Reply::ok(json!({"document": record(ctx, d, &scope).await?}))
                    .record(id)
                    .summary(summary),
            )
        }
        other => Err(ApiError::validation(format!(
            "data.mode must be 'data' or 'content', not '{other}'"
        ))),
    }
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "DocumentBulkUpdate")]
pub(crate) struct BulkReq {
    document_ids: Vec<String>,
    updates: MetaFields,
    admin_mode: Option<bool>,
}

async fn bulk_update(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let r: BulkReq = req.data()?;
    if r.document_ids.is_empty() || r.document_ids.len() > 500 {
        return Err(ApiError::validation(
            "data.documentIds must list 1 to 500 documents",
        ));
    }
    if r.updates.name.is_some() {
        return Err(ApiError::validation(
            "data.updates.name cannot be bulk-updated; bulk-update changes is_active, is_public and folder_id",
        ));
    }
    let upd = r.updates.into_update("data.updates")?;
    if upd.is_empty() {
        return Err(ApiError::validation(
            "data.updates must carry at least one of is_active, is_public, folder_id",
        ));
    }
    let ids = r
        .document_ids
        .iter()
        .enumerate()
        .map(|(i, id)| doc_ref(id, &format!("data.documentIds[{i}]")))
        .collect::<ApiResult<Vec<_>>>()?;
    let scope = scope(ctx, r.admin_mode)?;
    let (count, genies) = ctx
        .db()
        .write(move |c| {
            let mut count = 0;
            let mut genies = Vec::new();
            let mut done = std::collections::HashSet::new();
            for id in &ids {
                let d = writable(c, &scope, id)?;
                if !done.insert(d.id.clone()) {
                    continue;
                }
                check_folder(c, &d.user_id, upd.folder_id.clone().flatten().as_deref())?;
                docs::update_meta(c, &d.id, &upd)?;
                if upd.is_active.is_some() {
                    genies.extend(docs::linked_genies(c, &d.id)?);
                }
                count += 1;
            }
            genies.sort();
            genies.dedup();
            Ok((count, genies))
        })
        .await?;
    pipeline::push_genies(&ctx.app, &genies).await;
    Ok(Reply::ok(json!({"success": true, "message": format!("Updated {count} document(s)"), "updatedCount": count}))
        .summary(format!("bulk-updated {count} document(s)")))
}

async fn delete(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = doc_ref(&req.id_str()?, "id")?;
    let admin_mode = req.data.get("adminMode").and_then(Value::as_bool);
    let scope = scope(ctx, admin_mode)?;
    let store = knowledge::store(&ctx.app);
    let (d, genies, copies) = ctx
        .db()
        .write(move |c| {
            let d = writable(c, &scope, &id)?;
            let genies = docs::linked_genies(c, &d.id)?;
            let copies = crate::db::genie_moves::copies(c, &d.id)?;
            docs::delete(c, &d.id)?;
            Ok((d, genies, copies))
        })
        .await?;
    // Files go after the commit, so a crash cannot leave the record without them.
    let files = [d.original_hash.clone(), d.content_hash.clone()];
    store
        .collect(&ctx.app.db, files.into_iter().flatten().collect())
        .await;
    if let Some(ext) = &d.external_id
        && let Err(e) = ctx.app.voice.default().delete_document(ext).await
    {
        tracing::warn!(document = %d.id, error = %e, "could not delete the provider document");
    }
    pipeline::push_genies(&ctx.app, &genies).await;
    // Its copies at other platforms go once no agent lists them any more.
    for (provider, ext) in &copies {
        let res = match ctx.app.voice.get(provider) {
            Some(v) => v.delete_document(ext).await.map_err(|e| e.to_string()),
            None => Err(format!("provider '{provider}' is no longer configured")),
        };
        if let Err(e) = res {
            tracing::warn!(document = %d.id, provider, error = %e, "could not delete a copy of the document");
        }
    }
    Ok(Reply::deleted(&d.id).summary(format!("deleted document '{}'", d.name)))
}

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct RetryReq {
    admin_mode: Option<bool>,
}

/// Sends a `failed` document through the pipeline again, from the step that failed.
async fn retry(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = doc_ref(&req.id_str()?, "id")?;
    let r: RetryReq = req.data()?;
    let scope = scope(ctx, r.admin_mode)?;
    let (s, store) = (scope.clone(), knowledge::store(&ctx.app));
    let d = ctx
        .db()
        .write(move |c| {
            let d = writable(c, &s, &id)?;
            if d.status != "failed" {
                return Err(ApiError::conflict(format!(
                    "only a failed document can be retried; this one is '{}'",
                    d.status
                )));
            }
            pipeline::requeue(c, &d, &store)?;
            Ok(docs::get_any(c, &d.id)?.expect("present"))
        })
        .await?;
    ctx.app.wake_jobs();
    let summary = format!("retried document '{}'", d.name);
    let id = d.id.clone();
    Ok(
        Reply::accepted(json!({"document": record(ctx, d, &scope).await?}))
            .record(id)
            .summary(summary),
    )
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "DocumentSearch")]
pub(crate) struct SearchReq {
    query: String,
    agent_id: Option<String>,
    limit: Option<i64>,
}

async fn search(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let r: SearchReq = req.data()?;
    let query = super::search_term(Some(r.query.clone()), "data.query", 1000)?;
    let fts = docs::fts_query(query.as_deref().unwrap_or(""))
        .ok_or_else(|| ApiError::validation("data.query must contain at least one word"))?;
    let (limit, _) = page(r.limit, None, 5, 50)?;
    let genie = r
        .agent_id
        .map(|a| parse_uuid(&a, "data.agentId"))
        .transpose()?;
    // An admin's search, too, is of their own and public documents (no `adminMode`).
    let user_id = ctx.user_id().to_string();
    let any_owner = ctx.principal.is_admin();
    let index = ctx.app.doc_index.clone();
    let hits = ctx
        .db()
        .read(move |c| {
            if let Some(g) = &genie
                && docs::owned_genie(c, &user_id, any_owner, g)?.is_none()
            {
                return Err(ApiError::agent_not_found());
            }
            Ok(docs::search(
                c,
                index.as_deref(),
                &user_id,
                &fts,
                genie.as_deref(),
                limit,
            )?)
        })
        .await?;
    Ok(Reply::ok(
        json!({"query": r.query, "results": hits, "count": hits.len()}),
    ))
}

/// Every `knowledge-base` action; see `api::action`.
pub const RESOURCE: Resource = Resource {
    name: "knowledge-base",
    list_action: "all",
    actions: &[
        Action::read("all", handler!(all)).data(schema::<AllReq>),
        Action::read("list", handler!(all)).data(schema::<AllReq>),
        Action::read("get", handler!(get))
            .id()
            .data(schema::<GetReq>),
        Action::write("create", handler!(create::create))
            .data(schema::<create::CreateReq>)
            .conflict()
            .upstream()
            .unavailable(),
        Action::write("update", handler!(update))
            .id()
            .conflict()
            .upstream(),
        Action::write("bulk-update", handler!(bulk_update)).data(schema::<BulkReq>),
        Action::write("delete", handler!(delete)).id().upstream(),
        Action::write("attach", handler!(links::attach))
            .data(schema::<links::SetReq>)
            .upstream(),
        Action::write("detach", handler!(links::detach))
            .data(schema::<links::DetachReq>)
            .upstream(),
        Action::write("replace", handler!(links::replace))
            .data(schema::<links::SetReq>)
            .upstream(),
        Action::write("sync-with-agent", handler!(links::sync_with_agent))
            .data(schema::<links::SyncReq>)
            .conflict()
            .upstream(),
        Action::read("search", handler!(search)).data(schema::<SearchReq>),
        Action::write("retry", handler!(retry))
            .id()
            .data(schema::<RetryReq>)
            .unavailable(),
    ],
};
