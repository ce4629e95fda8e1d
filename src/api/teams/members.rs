//! Who is in a team: list the members, leave, remove a member or change their role.

use serde::Deserialize;
use serde_json::json;

use super::invitable_role;
use crate::api::{ActionRequest, Ctx, Reply, parse_uuid};
use crate::error::{ApiError, ApiResult};
use crate::service::teams as service;

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MemberRef {
    #[serde(alias = "userId")]
    user_id: String,
    role: Option<String>,
}

pub(super) async fn members(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let members = service::members(&ctx.app, ctx.user_id(), &id).await?;
    Ok(Reply::ok(
        json!({"members": members, "count": members.len()}),
    ))
}

pub(super) async fn leave(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let name = service::leave(&ctx.app, ctx.user_id(), &id).await?;
    Ok(Reply::ok(json!({"team_id": id, "left": true})).summary(format!("left team '{name}'")))
}

pub(super) async fn remove_member(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let body: MemberRef = req.data()?;
    let target = parse_uuid(&body.user_id, "data.user_id")?;
    let (team, m) = service::remove_member(&ctx.app, ctx.user_id(), &id, &target).await?;
    let s = format!("removed {} from team '{}'", m.email, team.name);
    Ok(
        Reply::ok(json!({"team_id": team.id, "user_id": m.user_id, "removed": true}))
            .record(&team.id)
            .summary(s),
    )
}

pub(super) async fn update_member(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let body: MemberRef = req.data()?;
    let target = parse_uuid(&body.user_id, "data.user_id")?;
    let role = body
        .role
        .as_deref()
        .ok_or_else(|| ApiError::validation("data.role is required"))?;
    let role = invitable_role(Some(role))?;
    let (team, m) = service::set_member_role(&ctx.app, ctx.user_id(), &id, &target, role).await?;
    let s = format!(
        "made {} {} of team '{}'",
        m.email,
        m.role.as_str(),
        team.name
    );
    Ok(Reply::ok(json!({"member": m})).record(&team.id).summary(s))
}
