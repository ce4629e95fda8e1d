//! `clone` and `reorder`.

use serde_json::json;

use super::input::{self, CloneGenie};
use super::settings;
use super::{load_manageable, renderer, role};
use crate::api::{ActionRequest, Ctx, Reply};
use crate::db;
use crate::db::genies::{self as repo, GenieRow};
use crate::error::{ApiError, ApiResult};
use crate::service::genies;

pub(super) async fn clone(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
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
    let row = GenieRow {
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
    // A clone lives where its original does, with that platform's copies of the documents.
    let voice = crate::knowledge::agents::voice_for(&ctx.app, &src.id).await?;
    let (kb, _) = crate::knowledge::agents::kb_for(&ctx.app, &voice, &docs).await?;
    let spec = settings::agent_spec(&row, kb);
    let (row, genie) =
        genies::provision_clone(&ctx.app, &src.id, row, &spec, renderer(&ctx.app)).await?;
    Ok(Reply::created(json!({"genie": genie}))
        .record(&row.id)
        .summary(format!("cloned genie '{}' as '{}'", src.name, row.name)))
}

pub(super) async fn reorder(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let sort = crate::api::parse_sort(&req.data)?;
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
