//! Knowledge-base operations on genie links: attach, detach, replace a genie's set, and move
//! genies from one provider document to another. The genie must be the caller's (admins:
//! any); the documents must be readable in `scope`. Every changed genie gets its document
//! list pushed to the provider afterwards.

use crate::db::sql::Connection;

use crate::db::documents::{self as docs, Scope};
use crate::error::{ApiError, ApiResult, Kind};
use crate::knowledge::pipeline;
use crate::state::AppState;

/// The genie `id` when `user_id` owns it (or `admin`); else `AGENT_NOT_FOUND`.
fn genie(c: &Connection, user_id: &str, admin: bool, id: &str) -> ApiResult<String> {
    docs::owned_genie(c, user_id, admin, id)?
        .map(|g| g.0)
        .ok_or_else(ApiError::agent_not_found)
}

/// Resolves references to document ids the scope reads; any unknown one fails the request.
fn resolve(c: &Connection, scope: &Scope, refs: &[String]) -> ApiResult<Vec<String>> {
    let mut out = Vec::new();
    for r in refs {
        let d = docs::find(c, scope, r)?
            .ok_or_else(|| ApiError::new(Kind::NotFound, format!("document {r} not found")))?;
        if !out.contains(&d.id) {
            out.push(d.id);
        }
    }
    Ok(out)
}

/// Changes one genie's links in one write, with the genie checked first (`change` gets the
/// connection, the scope and the genie id), then pushes its new list to the provider.
async fn relink<F>(
    app: &AppState,
    scope: Scope,
    admin: bool,
    genie_id: &str,
    change: F,
) -> ApiResult<usize>
where
    F: FnOnce(&Connection, &Scope, &str) -> ApiResult<usize> + Send + 'static,
{
    let g2 = genie_id.to_string();
    let n = app
        .db
        .write(move |c| {
            let g = genie(c, &scope.user_id, admin, &g2)?;
            let before = crate::service::genie_versions::current(c, &g)?;
            let n = change(c, &scope, &g)?;
            // Attached documents are part of what the genie says: a version, same transaction.
            crate::service::genie_versions::record_current(
                c,
                &g,
                before.as_ref(),
                Some(&scope.user_id),
            )?;
            Ok(n)
        })
        .await?;
    pipeline::push_genies(app, &[genie_id.to_string()]).await;
    Ok(n)
}

/// Links the documents `refs` to the genie, skipping links that exist; returns how many
/// were added.
pub async fn attach(
    app: &AppState,
    scope: Scope,
    admin: bool,
    genie_id: &str,
    refs: Vec<String>,
) -> ApiResult<usize> {
    relink(app, scope, admin, genie_id, move |c, scope, g| {
        let mut n = 0;
        for id in resolve(c, scope, &refs)? {
            if docs::link(c, g, &id)? {
                n += 1;
            }
        }
        Ok(n)
    })
    .await
}

/// Unlinks the documents `refs` (ids or external ids) from the genie; returns how many
/// links went.
pub async fn detach(
    app: &AppState,
    scope: Scope,
    admin: bool,
    genie_id: &str,
    refs: Vec<String>,
) -> ApiResult<usize> {
    relink(app, scope, admin, genie_id, move |c, _, g| {
        let mut n = 0;
        for r in &refs {
            if let Some(id) = docs::linked_document(c, g, r)?
                && docs::unlink(c, g, &id)?
            {
                n += 1;
            }
        }
        Ok(n)
    })
    .await
}

/// Makes the genie's documents exactly `refs`; returns how many it has now.
pub async fn replace(
    app: &AppState,
    scope: Scope,
    admin: bool,
    genie_id: &str,
    refs: Vec<String>,
) -> ApiResult<usize> {
    relink(app, scope, admin, genie_id, move |c, scope, g| {
        let ids = resolve(c, scope, &refs)?;
        for old in docs::genie_document_ids(c, g)? {
            if !ids.contains(&old) {
                docs::unlink(c, g, &old)?;
            }
        }
        for id in &ids {
            docs::link(c, g, id)?;
        }
        Ok(ids.len())
    })
    .await
}

/// What [`move_links`] did.
pub struct Moved {
    /// The genies now linked to the new document.
    pub genies: Vec<String>,
    /// The old document's provider copy was deleted.
    pub old_deleted: bool,
}

/// Every genie of the caller linked to the document `old_ref` is linked to `new_ref`
/// instead (which must be completed: it has an external id). Unless `prevent_deletion`,
/// the old provider document is then deleted (the old record keeps its metadata and loses
/// its external id); only its owner (or an admin) may do that.
pub async fn move_links(
    app: &AppState,
    scope: Scope,
    admin: bool,
    old_ref: String,
    new_ref: String,
    prevent_deletion: bool,
) -> ApiResult<Moved> {
    let (genies, delete_ext) = app
        .db
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
            if !prevent_deletion && old.id != new.id {
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
        && let Err(e) = app.voice.default().delete_document(ext).await
    {
        tracing::warn!(external = %ext, error = %e, "could not delete the old provider document");
    }
    pipeline::push_genies(app, &genies).await;
    Ok(Moved {
        genies,
        old_deleted: delete_ext.is_some(),
    })
}
