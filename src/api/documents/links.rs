//! Genie links: `attach` (duplicates skipped), `detach`, `replace` (the genie's set becomes
//! exactly the list) and `sync-with-agent` (move genies from one external document to
//! another). The genie must be the caller's (admins: any); the documents must be readable
//! by the caller (own or public). The operations are `service::documents`'.

use serde::Deserialize;
use serde_json::json;

use super::{doc_ref, scope};
use crate::api::{ActionRequest, Ctx, Reply, parse_uuid};
use crate::error::{ApiError, ApiResult};
use crate::service::documents as service;

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

pub(super) async fn attach(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let r: SetReq = req.data()?;
    let gid = parse_uuid(&r.agent_id, "data.agentId")?;
    let refs = items(&r.documents)?;
    let scope = scope(ctx, None)?;
    let admin = ctx.principal.is_admin();
    let n = service::attach(&ctx.app, scope, admin, &gid, refs).await?;
    Ok(Reply::ok(
        json!({"message": format!("Attached {n} document(s) to the agent"), "attachedCount": n}),
    )
    .record(gid)
    .summary(format!("attached {n} document(s)")))
}

pub(super) async fn detach(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
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
    let n = service::detach(&ctx.app, scope, admin, &gid, refs).await?;
    Ok(Reply::ok(
        json!({"message": format!("Detached {n} document(s) from the agent"), "detachedCount": n}),
    )
    .record(gid)
    .summary(format!("detached {n} document(s)")))
}

pub(super) async fn replace(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let r: SetReq = req.data()?;
    let gid = parse_uuid(&r.agent_id, "data.agentId")?;
    let refs = items(&r.documents)?;
    let scope = scope(ctx, None)?;
    let admin = ctx.principal.is_admin();
    let n = service::replace(&ctx.app, scope, admin, &gid, refs).await?;
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

/// Moves the caller's genies from the document `oldDocId` to `newDocId`; see
/// `service::documents::move_links`.
pub(super) async fn sync_with_agent(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let r: SyncReq = req.data()?;
    let old_ref = doc_ref(&r.old_doc_id, "data.oldDocId")?;
    let new_ref = doc_ref(&r.new_doc_id, "data.newDocId")?;
    let scope = scope(ctx, None)?;
    let admin = ctx.principal.is_admin();
    let moved =
        service::move_links(&ctx.app, scope, admin, old_ref, new_ref, r.prevent_deletion).await?;
    let n = moved.genies.len();
    Ok(Reply::ok(json!({
        "message": format!("Synced {n} agent(s) to the new document"),
        "syncedCount": n,
        "oldDocumentDeleted": moved.old_deleted,
    }))
    .summary(format!("synced {n} agent(s) to a new document")))
}
