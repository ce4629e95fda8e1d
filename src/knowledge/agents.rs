//! What each genie's agent holds at the provider: the per-genie lock every
//! read-provider-write of a genie takes, and the push of a genie's document list. Below
//! `service/` so that the document pipeline, which pushes after finishing a document, needs
//! nothing above it.

use crate::db::genies as repo;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::voice::{DynVoice, KbDocRef};

/// The provider a genie lives in (its own, else the service's default).
pub async fn voice_for(app: &AppState, genie_id: &str) -> ApiResult<DynVoice> {
    let id = genie_id.to_string();
    let p = app
        .db
        .read(move |c| Ok(crate::db::genie_providers::get(c, &id)?))
        .await?;
    Ok(app.voice.named(p.provider.as_deref())?.clone())
}

/// Whether documents' own external ids belong to `voice`: documents are stored at the
/// default provider; a genie at another one is given copies ([`kb_for`]).
pub fn holds_documents(app: &AppState, voice: &DynVoice) -> bool {
    voice.name() == app.voice.default().name()
}

/// Records whether the genie's provider holds what genied holds: `in_sync`, or `pending` /
/// `failed` with the reason. Failing to record it is only logged: the caller's own outcome
/// matters more.
pub async fn record_provider_state(
    app: &AppState,
    genie_id: &str,
    state: &str,
    error: Option<String>,
) {
    let (id, st) = (genie_id.to_string(), state.to_string());
    let default = app.voice.default().name();
    let res = app
        .db
        .write(move |c| {
            Ok(crate::db::genie_providers::set_state(
                c,
                &id,
                default,
                &st,
                error.as_deref(),
                &crate::db::now(),
            )?)
        })
        .await;
    if let Err(e) = res {
        tracing::warn!(genie = %genie_id, error = %e, "could not record the provider state");
    }
}

/// One async lock per genie id, held exclusively by every action that reads a genie, talks
/// to the provider and writes it back, so two concurrent updates cannot lose each other's
/// changes or leave the provider with the older version. A change made entirely inside one
/// write transaction (read, edit and store, no provider call) holds it shared: the writer
/// already serialises those among themselves, so many may run, and be committed together,
/// at once, while none can slip between an exclusive holder's read and its write. The
/// service is one process, so this is enough; entries nobody holds are dropped.
type GenieLock = std::sync::Arc<tokio::sync::RwLock<()>>;
static LOCKS: std::sync::LazyLock<std::sync::Mutex<std::collections::HashMap<String, GenieLock>>> =
    std::sync::LazyLock::new(Default::default);

fn genie_lock(id: &str) -> GenieLock {
    let mut map = LOCKS.lock().unwrap_or_else(|p| p.into_inner());
    map.retain(|_, v| std::sync::Arc::strong_count(v) > 1);
    map.entry(id.to_string()).or_default().clone()
}

/// The genie's lock, exclusively.
pub async fn lock_genie(id: &str) -> tokio::sync::OwnedRwLockWriteGuard<()> {
    genie_lock(id).write_owned().await
}

/// The genie's lock, shared with other changes made in one write transaction.
pub async fn share_genie(id: &str) -> tokio::sync::OwnedRwLockReadGuard<()> {
    genie_lock(id).read_owned().await
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

/// The knowledge base `voice` should hold for these documents: at the default provider the
/// documents' own external ids; at any other, copies made there from the stored text
/// (made once per document, provider and content, and kept in `provider_documents`).
/// Returns the refs and the ids of the documents whose copy this call made.
pub async fn kb_for(
    app: &AppState,
    voice: &DynVoice,
    docs: &[repo::AttachedDoc],
) -> ApiResult<(Vec<KbDocRef>, Vec<String>)> {
    if holds_documents(app, voice) {
        return Ok((kb_refs(docs), Vec::new()));
    }
    let provider = voice.name();
    let mut out = Vec::new();
    let mut made = Vec::new();
    for d in docs
        .iter()
        .filter(|d| d.is_active && d.external_id.is_some())
    {
        let id = d.id.clone();
        let (doc, copy) = app
            .db
            .read(move |c| {
                Ok((
                    crate::db::documents::get_any(c, &id)?,
                    crate::db::genie_moves::copy(c, &id, provider)?,
                ))
            })
            .await?;
        let Some(hash) = doc.and_then(|x| x.content_hash) else {
            continue;
        };
        let external = match copy {
            Some((h, ext)) if h == hash => ext,
            old => {
                let bytes = super::store(app)
                    .read(&hash)
                    .await
                    .map_err(|e| ApiError::internal(e.to_string()))?;
                let text = String::from_utf8_lossy(&bytes).into_owned();
                let ext = voice.create_document(&d.name, &text).await?;
                let (id, e2, h2) = (d.id.clone(), ext.clone(), hash.clone());
                app.db
                    .write(move |c| {
                        Ok(crate::db::genie_moves::put_copy(
                            c,
                            &id,
                            provider,
                            &h2,
                            &e2,
                            &crate::db::now(),
                        )?)
                    })
                    .await?;
                made.push(d.id.clone());
                // The copy of the older text is no longer anyone's.
                if let Some((_, stale)) = old
                    && let Err(e) = voice.delete_document(&stale).await
                {
                    tracing::warn!(document = %d.id, error = %e, "could not delete an outdated document copy");
                }
                ext
            }
        };
        out.push(KbDocRef {
            id: external,
            name: d.name.clone(),
            doc_type: kb_type(&d.doc_type).to_string(),
        });
    }
    Ok((out, made))
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
        let voice = voice_for(app, genie_id).await?;
        let refs = match kb_for(app, &voice, &docs).await {
            Ok((refs, _)) => refs,
            Err(e) => {
                record_provider_state(app, genie_id, "pending", Some(e.to_string())).await;
                return Err(e);
            }
        };
        match voice.set_agent_documents(agent, &refs).await {
            Ok(()) => record_provider_state(app, genie_id, "in_sync", None).await,
            Err(e) => {
                // The platform holds an older document list until a retry gets through.
                record_provider_state(app, genie_id, "pending", Some(e.to_string())).await;
                return Err(e.into());
            }
        }
    }
    Ok(())
}
