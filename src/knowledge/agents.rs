//! What each genie's agent holds at the provider: the per-genie lock every
//! read-provider-write of a genie takes, and the push of a genie's document list. Below
//! `service/` so that the document pipeline, which pushes after finishing a document, needs
//! nothing above it.

use crate::db::genies as repo;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::voice::KbDocRef;

/// One async lock per genie id, held by every action that reads a genie, talks to the
/// provider and writes it back, so two concurrent updates cannot lose each other's changes
/// or leave the provider with the older version. The service is one process, so this is
/// enough; entries nobody holds are dropped.
static LOCKS: std::sync::LazyLock<
    std::sync::Mutex<std::collections::HashMap<String, std::sync::Arc<tokio::sync::Mutex<()>>>>,
> = std::sync::LazyLock::new(Default::default);

pub async fn lock_genie(id: &str) -> tokio::sync::OwnedMutexGuard<()> {
    let m = {
        let mut map = LOCKS.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|_, v| std::sync::Arc::strong_count(v) > 1);
        map.entry(id.to_string()).or_default().clone()
    };
    m.lock_owned().await
}

/// The document's type as the provider's knowledge base names it.
pub fn kb_type(doc_type: &str) -> &'static str {
    match doc_type {
        "url" | "website" => "url",
        "pdf_upload" | "file_upload" => "file",
        _ => "text",
    }
}

/// The knowledge base the provider should hold for a genie: its active documents that
/// already have an external id.
pub fn kb_refs(docs: &[repo::AttachedDoc]) -> Vec<KbDocRef> {
    docs.iter()
        .filter(|d| d.is_active)
        .filter_map(|d| {
            Some(KbDocRef {
                id: d.external_id.clone()?,
                name: d.name.clone(),
                doc_type: kb_type(&d.doc_type).to_string(),
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
            .default()
            .set_agent_documents(agent, &kb_refs(&docs))
            .await?;
    }
    Ok(())
}
