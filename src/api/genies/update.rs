//! `update`, and pushing a genie's documents to the provider.

use serde_json::json;

use super::input::{self, UpdateGenie};
use super::settings;
use super::{check_group, load_manageable, reload_updated};
use crate::api::{ActionRequest, Ctx, Reply};
use crate::db;
use crate::db::genies as repo;
use crate::error::{ApiError, ApiResult};
use crate::knowledge::agents::{kb_refs, lock_genie, voice_for};

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
    let voice = voice_for(&ctx.app, &id).await?;
    let docs = if crate::knowledge::agents::holds_documents(&ctx.app, &voice) {
        let id = id.clone();
        ctx.db().read(move |c| Ok(repo::documents(c, &id)?)).await?
    } else {
        Vec::new()
    };
    let new_spec = settings::agent_spec(&row, kb_refs(&docs));
    let changed = serde_json::to_value(&new_spec)?
        != serde_json::to_value(settings::agent_spec(&old, kb_refs(&docs)))?;
    if changed && let Some(agent) = &row.external_agent_id {
        voice.update_agent(agent, &new_spec).await?;
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
