//! Which genies a team shares: add one, remove one (the list is part of `get`).

use serde::Deserialize;
use serde_json::json;

use crate::api::{ActionRequest, Ctx, Reply, parse_uuid};
use crate::error::ApiResult;
use crate::service::teams as service;

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GenieRef {
    #[serde(alias = "genieId")]
    genie_id: String,
}

/// The reply of both actions; `genie_id` is echoed as the caller wrote it.
fn reply(team_id: &str, genie_id: &str, in_team: bool, summary: String) -> Reply {
    Reply::ok(json!({"team_id": team_id, "genie_id": genie_id, "in_team": in_team}))
        .record(team_id)
        .summary(summary)
}

pub(super) async fn add_genie(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let body: GenieRef = req.data()?;
    let gid = parse_uuid(&body.genie_id, "data.genie_id")?;
    let (team, gname) = service::add_genie(&ctx.app, ctx.user_id(), &id, &gid).await?;
    let s = format!("added genie '{gname}' to team '{}'", team.name);
    Ok(reply(&team.id, &body.genie_id, true, s))
}

pub(super) async fn remove_genie(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let body: GenieRef = req.data()?;
    let gid = parse_uuid(&body.genie_id, "data.genie_id")?;
    let (team, gname) = service::remove_genie(&ctx.app, ctx.user_id(), &id, &gid).await?;
    let s = format!("removed genie '{gname}' from team '{}'", team.name);
    Ok(reply(&team.id, &body.genie_id, false, s))
}
