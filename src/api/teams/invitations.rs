//! Who is asked into a team: list, invite, accept, decline, revoke.

use serde::Deserialize;
use serde_json::json;

use super::invitable_role;
use crate::api::{ActionRequest, Ctx, Reply, parse_uuid};
use crate::error::{ApiError, ApiResult};
use crate::service::teams as service;

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Invite {
    email: String,
    role: Option<String>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "TeamInvitationToken")]
pub(crate) struct Token {
    token: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct InvitationRef {
    #[serde(alias = "invitationId")]
    invitation_id: String,
}

fn valid_email(e: &str) -> bool {
    let e = e.trim();
    match e.split_once('@') {
        Some((l, d)) => {
            !l.is_empty()
                && d.contains('.')
                && !d.starts_with('.')
                && !d.ends_with('.')
                && !e.contains(char::is_whitespace)
                && e.len() <= 254
        }
        None => false,
    }
}

fn token(req: &ActionRequest) -> ApiResult<String> {
    let body: Token = req.data()?;
    if body.token.trim().is_empty() {
        return Err(ApiError::validation("data.token is required"));
    }
    Ok(body.token)
}

pub(super) async fn invitations(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let inv = service::invitations(&ctx.app, ctx.user_id(), &id).await?;
    Ok(Reply::ok(json!({"invitations": inv, "count": inv.len()})))
}

pub(super) async fn invite(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let body: Invite = req.data()?;
    let email = body.email.trim().to_lowercase();
    if !valid_email(&email) {
        return Err(ApiError::validation("data.email must be an email address"));
    }
    let role = invitable_role(body.role.as_deref())?;
    let new = service::invite(&ctx.app, ctx.user_id(), &id, &email, role).await?;
    let inv = new.invitation;
    let s = format!(
        "invited {} to team '{}' as {}",
        inv.email,
        new.team.name,
        inv.role.as_str()
    );
    Ok(
        Reply::created(json!({"invitation": inv, "token": new.token}))
            .record(&inv.id)
            .summary(s),
    )
}

pub(super) async fn accept(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let token = token(req)?;
    let j = service::accept(&ctx.app, ctx.user_id(), &token).await?;
    let s = format!(
        "joined team '{}' as {} (accepted invitation)",
        j.team.name,
        j.invitation.role.as_str()
    );
    Ok(
        Reply::ok(json!({"team": j.team, "invitation": j.invitation}))
            .record(&j.team.id)
            .summary(s),
    )
}

pub(super) async fn decline(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let token = token(req)?;
    let (inv, team_name) = service::decline(&ctx.app, ctx.user_id(), &token).await?;
    let s = format!("declined the invitation to team '{team_name}'");
    Ok(Reply::ok(json!({"invitation": inv}))
        .record(&inv.id)
        .summary(s))
}

pub(super) async fn revoke(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let body: InvitationRef = req.data()?;
    let inv_id = parse_uuid(&body.invitation_id, "data.invitation_id")?;
    let (team, inv) = service::revoke(&ctx.app, ctx.user_id(), &id, &inv_id).await?;
    let s = format!(
        "revoked the invitation of {} to team '{}'",
        inv.email, team.name
    );
    Ok(Reply::ok(json!({"invitation": inv})).summary(s))
}
