//! `update`, and pushing a genie's documents to the provider.

use serde_json::json;

use super::input::{self, UpdateGenie};
use super::settings;
use super::{check_group, load_manageable, lock_genie, reload_updated};
use crate::api::{ActionRequest, Ctx, Reply};
use crate::db;
use crate::db::genies as repo;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::voice::KbDocRef;

/// The knowledge base the provider should hold for a genie: its active documents that
/// already have an external id.
pub(super) fn kb_refs(docs: &[repo::AttachedDoc]) -> Vec<KbDocRef> {
    docs.iter()
        .filter(|d| d.is_active)
        .filter_map(|d| {
            Some(KbDocRef {
                id: d.external_id.clone()?,
                name: d.name.clone(),
                doc_type: settings::kb_type(&d.doc_type).to_string(),
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

pub(super) async fn update(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
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
    let new_spec = settings::agent_spec(&row, kb_refs(&docs));
    let changed = serde_json::to_value(&new_spec)?
        != serde_json::to_value(settings::agent_spec(&old, kb_refs(&docs)))?;
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
    let genie = reload_updated(&ctx.app, &id, &row.user_id).await?;
    Ok(Reply::ok(json!({"genie": genie}))
        .record(&id)
        .summary(format!("updated genie '{}'", row.name)))
}
