//! Genie links: `attach` (duplicates skipped), `detach`, `replace` (the genie's set becomes
//! exactly the list) and `sync-with-agent` (move genies from one external document to
//! another). The genie must be the caller's (admins: any); the documents must be readable
//! by the caller (own or public). Every changed genie gets its list pushed to the provider.

use serde::Deserialize;
use serde_json::json;

use super::super::{ActionRequest, Ctx, Reply, parse_uuid};
use super::{doc_ref, scope};
use crate::db::documents::{self as docs, Scope};
use crate::error::{ApiError, ApiResult};
use crate::knowledge::pipeline;

#[derive(Deserialize, schemars::JsonSchema)]
#[schemars(rename = "DocumentLinkItem")]
struct DocItem {
    id: String,
    #[allow(dead_code)]
    name: Option<String>,
    #[serde(rename = "type")]
    doc_type: Option<String>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "DocumentLinkSet")]
pub(crate) struct SetReq {
    agent_id: String,
    documents: Vec<DocItem>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "DocumentDetach")]
pub(crate) struct DetachReq {
    agent_id: String,
    document_ids: Vec<String>,
}

fn genie(c: &rusqlite::Connection, ctx_user: &str, admin: bool, id: &str) -> ApiResult<String> {
    docs::owned_genie(c, ctx_user, admin, id)?
        .map(|g| g.0)
        .ok_or_else(ApiError::agent_not_found)
}

fn items(list: &[DocItem]) -> ApiResult<Vec<String>> {
    if list.len() > 500 {
        return Err(ApiError::validation(
            "data.documents may list at most 500 documents",
        ));
    }
    list.iter()
        .enumerate()
        .map(|(i, d)| {
            if let Some(t) = &d.doc_type
                && !matches!(t.as_str(), "file" | "url" | "text")
            {
                return Err(ApiError::validation(format!(
                    "data.documents[{i}].type must be 'file', 'url' or 'text'"
                )));
            }
            doc_ref(&d.id, &format!("data.documents[{i}].id"))
        })
        .collect()
}

/// Resolves references to document ids the scope reads; any unknown one fails the request.
fn resolve(c: &rusqlite::Connection, scope: &Scope, refs: &[String]) -> ApiResult<Vec<String>> {
    let mut out = Vec::new();
    for r in refs {
        let d = docs::find(c, scope, r)?.ok_or_else(|| {
            ApiError::new(
                crate::error::Kind::NotFound,
                format!("document {r} not found"),
            )
        })?;
        if !out.contains(&d.id) {
            out.push(d.id);
        }
    }
    Ok(out)
}

pub async fn attach(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let r: SetReq = req.data()?;
    let gid = parse_uuid(&r.agent_id, "data.agentId")?;
    let refs = items(&r.documents)?;
    let scope = scope(ctx, None)?;
    let admin = ctx.principal.is_admin();
    let g2 = gid.clone();
    let n = ctx
        .db()
        .write(move |c| {
            let g = genie(c, &scope.user_id, admin, &g2)?;
            let ids = resolve(c, &scope, &refs)?;
            let mut n = 0;
            for id in ids {
                if docs::link(c, &g, &id)? {
                    n += 1;
                }
            }
            Ok(n)
        })
        .await?;
    pipeline::push_genies(&ctx.app, std::slice::from_ref(&gid)).await;
    Ok(Reply::ok(
        json!({"message": format!("Attached {n} document(s) to the agent"), "attachedCount": n}),
    )
    .record(gid)
    .summary(format!("attached {n} document(s)")))
}

pub async fn detach(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let r: DetachReq = req.data()?;
    let gid = parse_uuid(&r.agent_id, "data.agentId")?;
    let refs = r
        .document_ids
        .iter()
        .enumerate()
        .map(|(i, d)| doc_ref(d, &format!("data.documentIds[{i}]")))
        .collect::<ApiResult<Vec<_>>>()?;
    let scope = scope(ctx, None)?;
    let admin = ctx.principal.is_admin();
    let g2 = gid.clone();
    let n = ctx
        .db()
        .write(move |c| {
            let g = genie(c, &scope.user_id, admin, &g2)?;
            let mut n = 0;
            for r in &refs {
                // Linked documents may have become private to their owner since; match by link.
                let id: Option<String> = c
                    .query_row(
                        "SELECT d.id FROM genie_documents gd JOIN documents d ON d.id = gd.document_id
                         WHERE gd.genie_id = ?1 AND (d.id = ?2 OR d.external_id = ?2)",
                        rusqlite::params![g, r],
                        |row| row.get(0),
                    )
                    .ok();
                if let Some(id) = id
                    && docs::unlink(c, &g, &id)?
                {
                    n += 1;
                }
            }
            Ok(n)
        })
        .await?;
    pipeline::push_genies(&ctx.app, std::slice::from_ref(&gid)).await;
    Ok(Reply::ok(
        json!({"message": format!("Detached {n} document(s) from the agent"), "detachedCount": n}),
    )
    .record(gid)
    .summary(format!("detached {n} document(s)")))
}

pub async fn replace(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let r: SetReq = req.data()?;
    let gid = parse_uuid(&r.agent_id, "data.agentId")?;
    let refs = items(&r.documents)?;
    let scope = scope(ctx, None)?;
    let admin = ctx.principal.is_admin();
    let g2 = gid.clone();
    let n = ctx
        .db()
        .write(move |c| {
            let g = genie(c, &scope.user_id, admin, &g2)?;
            let ids = resolve(c, &scope, &refs)?;
            for old in docs::genie_document_ids(c, &g)? {
                if !ids.contains(&old) {
                    docs::unlink(c, &g, &old)?;
                }
            }
            for id in &ids {
                docs::link(c, &g, id)?;
            }
            Ok(ids.len())
        })
        .await?;
    pipeline::push_genies(&ctx.app, std::slice::from_ref(&gid)).await;
    Ok(Reply::ok(
        json!({"message": format!("The agent now has {n} document(s)"), "replacedCount": n}),
    )
    .record(gid)
    .summary(format!(
        "replaced the documents of an agent with {n} document(s)"
    )))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "DocumentSyncWithAgent")]
pub(crate) struct SyncReq {
    old_doc_id: String,
    new_doc_id: String,
    #[serde(default)]
    prevent_deletion: bool,
}

/// Every genie of the caller linked to the document with external id `oldDocId` is linked
/// to the document with external id `newDocId` instead; unless `preventDeletion`, the old
/// external document is then deleted at the provider (the old record keeps its metadata and
/// loses its external id). Both documents must be readable; the old one, when it is to be
/// deleted, must be the caller's.
pub async fn sync_with_agent(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let r: SyncReq = req.data()?;
    let old_ref = doc_ref(&r.old_doc_id, "data.oldDocId")?;
    let new_ref = doc_ref(&r.new_doc_id, "data.newDocId")?;
    let scope = scope(ctx, None)?;
    let admin = ctx.principal.is_admin();
    let prevent = r.prevent_deletion;
    let (genies, delete_ext) = ctx
        .db()
        .write(move |c| {
            let old = docs::find(c, &scope, &old_ref)?.ok_or_else(|| ApiError::not_found("document (oldDocId)"))?;
            let new = docs::find(c, &scope, &new_ref)?.ok_or_else(|| ApiError::not_found("document (newDocId)"))?;
            if new.external_id.is_none() {
                return Err(ApiError::conflict("the new document is not completed yet (it has no external id)"));
            }
            let mut genies = Vec::new();
            for g in docs::linked_genies(c, &old.id)? {
                if docs::owned_genie(c, &scope.user_id, admin, &g)?.is_some() {
                    if old.id != new.id {
                        docs::unlink(c, &g, &old.id)?;
                        docs::link(c, &g, &new.id)?;
                    }
                    genies.push(g);
                }
            }
            let mut delete_ext = None;
            if !prevent && old.id != new.id {
                if old.user_id != scope.user_id && !admin {
                    return Err(ApiError::forbidden(
                        "only the owner may delete the old document's provider copy; set preventDeletion",
                    ));
                }
                delete_ext = old.external_id.clone();
                docs::set_external_id(c, &old.id, None)?;
            }
            Ok((genies, delete_ext))
        })
        .await?;
    if let Some(ext) = &delete_ext
        && let Err(e) = ctx.app.voice.delete_document(ext).await
    {
        tracing::warn!(external = %ext, error = %e, "could not delete the old provider document");
    }
    pipeline::push_genies(&ctx.app, &genies).await;
    let n = genies.len();
    Ok(Reply::ok(json!({
        "message": format!("Synced {n} agent(s) to the new document"),
        "syncedCount": n,
        "oldDocumentDeleted": delete_ext.is_some(),
    }))
    .summary(format!("synced {n} agent(s) to a new document")))
}
