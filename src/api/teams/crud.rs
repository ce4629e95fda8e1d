//! The team itself: list, get, create, rename, delete.

use serde::Deserialize;
use serde_json::json;

use super::check_name;
use crate::api::{ActionRequest, Ctx, Reply};
use crate::error::ApiResult;
use crate::service::teams as service;

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "TeamName")]
pub(crate) struct Named {
    name: String,
}

pub(super) async fn list(ctx: &Ctx, _req: &ActionRequest) -> ApiResult<Reply> {
    let teams = service::list(&ctx.app, ctx.user_id()).await?;
    Ok(Reply::ok(json!({"teams": teams, "count": teams.len()})))
}

pub(super) async fn get(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let d = service::get(&ctx.app, ctx.user_id(), &id).await?;
    let mut out = json!(d.team);
    out["members"] = json!(d.members);
    out["genies"] = json!(d.genies);
    Ok(Reply::ok(json!({"team": out})))
}

pub(super) async fn create(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let body: Named = req.data()?;
    let name = check_name(&body.name)?;
    let team = service::create(&ctx.app, ctx.user_id(), &name).await?;
    let s = format!("created team '{}' (owner)", team.name);
    Ok(Reply::created(json!({"team": team}))
        .record(&team.id)
        .summary(s))
}

/// `update` and `rename`: a team has nothing else to change.
pub(super) async fn rename(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let body: Named = req.data()?;
    let name = check_name(&body.name)?;
    let (old, team) = service::rename(&ctx.app, ctx.user_id(), &id, &name).await?;
    let s = format!("renamed team '{old}' to '{}'", team.name);
    Ok(Reply::ok(json!({"team": team})).summary(s))
}

pub(super) async fn delete(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let name = service::delete(&ctx.app, ctx.user_id(), &id).await?;
    Ok(Reply::deleted(&id).summary(format!("deleted team '{name}' and all its memberships")))
}
