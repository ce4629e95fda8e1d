//! `update`: live at once (pushed to the provider and recorded as a version, through
//! `service::genies::apply`), or staged as the genie's draft with `data.draft: true`.

use serde_json::json;

use super::input::{self, UpdateGenie};
use super::{check_group, load_manageable, reload, renderer};
use crate::api::{ActionRequest, Ctx, Reply};
use crate::error::ApiResult;
use crate::service::{genie_versions, genies};

pub(super) async fn update(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let body: UpdateGenie = req.data()?;
    let draft = req.data.get("draft").and_then(|d| d.as_bool()) == Some(true);
    // The genie as it is before the write, read once and only when something below needs it
    // (tools, a group, a draft); any other update is checked for access in its own write
    // (`Changes::manager`), without a read first.
    let before = tokio::sync::OnceCell::new();
    let old = async || before.get_or_try_init(|| load_manageable(ctx, &id)).await;
    if body.tools.is_some() {
        let old = old().await?;
        // Checked on the update as it would apply; the edit itself runs in the write.
        let mut probe = old.clone();
        input::apply_update(&mut probe, &body)?;
        let tools = &probe.tools;
        crate::service::genie_tools::check_addresses(&ctx.app.net, "data.tools", tools)?;
        crate::service::genie_tools::check_credentials(&ctx.app, &old.user_id, "data.tools", tools)
            .await?;
    }
    // The group is checked before the genie's lock is taken (it reads another table).
    let group = match &body.group_id {
        None => None,
        Some(None) => Some(None),
        Some(Some(g)) => Some(Some(
            check_group(&ctx.app, &old().await?.user_id, g, "data.group_id").await?,
        )),
    };
    let edit = move |row: &mut crate::db::genies::GenieRow| {
        input::apply_update(row, &body)?;
        if let Some(g) = &group {
            row.group_id = g.clone();
        }
        Ok(())
    };
    if draft {
        let summary = format!("staged a draft of genie '{}'", old().await?.name);
        let staged = genie_versions::stage(&ctx.app, ctx.user_id(), &id, edit).await?;
        return Ok(Reply::ok(staged).record(&id).summary(summary));
    }
    let mut changes = genies::Changes::edit(edit);
    changes.manager = Some((ctx.user_id().to_string(), ctx.principal.role));
    changes.audit_summary = Some(Box::new(updated_summary));
    // The answer is rendered in the update's own transaction (what was just written, without
    // a second trip to read it back), which records `genie.updated` carrying it.
    changes.render = Some(renderer(&ctx.app));
    let applied = genies::apply(&ctx.app, ctx.user_id(), &id, changes).await?;
    let genie = match applied.rendered {
        Some(genie) => genie,
        None => reload(&ctx.app, &id, false).await?,
    };
    Ok(Reply::ok(json!({"genie": genie}))
        .record(&id)
        .summary(updated_summary(&applied.row, applied.version)))
}

fn updated_summary(g: &crate::db::genies::GenieRow, version: Option<i64>) -> String {
    match version {
        Some(v) => format!("updated genie '{}' (version {v})", g.name),
        None => format!("updated genie '{}'", g.name),
    }
}
