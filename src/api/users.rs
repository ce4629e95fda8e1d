//! The `users` resource: the internal admin's page of accounts. List and read accounts
//! (with their status and linked identity providers), invite someone (the account is made
//! when they accept, with the password they choose), disable and enable, change a role, and
//! delete an account with everything it owns. The rules live in `service::accounts`.

use serde::Deserialize;
use serde_json::json;

use super::action::{Action, Resource, handler, schema};
use super::{ActionRequest, Ctx, Reply, page, parse_uuid};
use crate::db::users::Role;
use crate::error::{ApiError, ApiResult};
use crate::service::accounts as service;

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UsersList {
    limit: Option<i64>,
    offset: Option<i64>,
    /// `active`, `disabled` or `deleting`; all when absent.
    status: Option<String>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UsersInvite {
    email: String,
    /// `internal_admin`, `standard_user` (default) or `consumer`.
    role: Option<String>,
    full_name: Option<String>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UsersSetRole {
    role: String,
}

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UsersInvitations {
    /// `pending`, `accepted` or `revoked`; all when absent.
    status: Option<String>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UsersInvitationRef {
    #[serde(alias = "invitationId")]
    invitation_id: String,
}

fn role(s: Option<&str>) -> ApiResult<Role> {
    match s {
        None => Ok(Role::StandardUser),
        Some(r) => Role::parse(r).ok_or_else(|| {
            ApiError::validation(
                "data.role must be 'internal_admin', 'standard_user' or 'consumer'",
            )
        }),
    }
}

async fn list(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let q: UsersList = req.data()?;
    ctx.principal.require_admin()?;
    if let Some(s) = &q.status
        && !["active", "disabled", "deleting"].contains(&s.as_str())
    {
        return Err(ApiError::validation(
            "data.status must be 'active', 'disabled' or 'deleting'",
        ));
    }
    let (limit, offset) = page(q.limit, q.offset, 50, 500)?;
    let (users, total) = service::accounts(&ctx.app, q.status, limit, offset).await?;
    Ok(Reply::ok(
        json!({"users": users, "count": total, "limit": limit, "offset": offset}),
    ))
}

async fn get(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    ctx.principal.require_admin()?;
    let user = service::account(&ctx.app, &req.uuid()?).await?;
    Ok(Reply::ok(json!({"user": user})))
}

async fn invite(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let body: UsersInvite = req.data()?;
    ctx.principal.require_admin()?;
    let role = role(body.role.as_deref())?;
    if let Some(n) = &body.full_name
        && n.chars().count() > 200
    {
        return Err(ApiError::validation(
            "data.full_name must be at most 200 characters",
        ));
    }
    let new = service::invite(&ctx.app, ctx.user_id(), &body.email, role, body.full_name).await?;
    let s = format!(
        "invited {} as {}",
        new.invitation.email,
        new.invitation.role.as_str()
    );
    Ok(Reply::created(json!({
        "invitation": new.invitation,
        "token": new.token,
        "link": new.link,
        "mail": new.mail,
    }))
    .record(&new.invitation.id)
    .summary(s))
}

async fn invitations(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let q: UsersInvitations = req.data()?;
    ctx.principal.require_admin()?;
    let inv = service::invitations(&ctx.app, q.status).await?;
    Ok(Reply::ok(json!({"invitations": inv, "count": inv.len()})))
}

async fn revoke_invitation(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let body: UsersInvitationRef = req.data()?;
    ctx.principal.require_admin()?;
    let id = parse_uuid(&body.invitation_id, "data.invitation_id")?;
    let inv = service::revoke_invitation(&ctx.app, &id).await?;
    let s = format!("revoked the invitation of {}", inv.email);
    Ok(Reply::ok(json!({"invitation": inv}))
        .record(&inv.id)
        .summary(s))
}

async fn disable(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    ctx.principal.require_admin()?;
    let u = service::set_disabled(&ctx.app, ctx.user_id(), &req.uuid()?, true).await?;
    let s = format!("disabled {}", u.user.email);
    Ok(Reply::ok(json!({"user": u})).summary(s))
}

async fn enable(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    ctx.principal.require_admin()?;
    let u = service::set_disabled(&ctx.app, ctx.user_id(), &req.uuid()?, false).await?;
    let s = format!("enabled {}", u.user.email);
    Ok(Reply::ok(json!({"user": u})).summary(s))
}

async fn set_role(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let body: UsersSetRole = req.data()?;
    ctx.principal.require_admin()?;
    let role = role(Some(&body.role))?;
    let u = service::set_role(&ctx.app, ctx.user_id(), &req.uuid()?, role).await?;
    let s = format!("made {} {}", u.user.email, role.as_str());
    Ok(Reply::ok(json!({"user": u})).summary(s))
}

/// 200 when the account and all it owned are gone; 202 when its delete goes on after
/// `--account-delete-wait-seconds` (`users get` says `deleting` until it answers 404).
async fn delete(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    ctx.principal.require_admin()?;
    let id = req.uuid()?;
    let d = service::delete(&ctx.app, ctx.user_id(), &id).await?;
    let email = &d.user.email;
    let reply = if d.done {
        Reply::ok(json!({"id": id, "deleted": true, "status": "deleted"})).summary(format!(
            "deleted the account {email} and everything it owned"
        ))
    } else {
        Reply::accepted(json!({"id": id, "deleted": false, "status": "deleting"})).summary(format!(
            "began deleting the account {email} and everything it owned"
        ))
    };
    Ok(reply.record(&id))
}

/// Every `users` action; see `api::action`. All of them are for internal admins.
pub const RESOURCE: Resource = Resource {
    name: "users",
    list_action: "all",
    actions: &[
        Action::read("all", handler!(list)).data(schema::<UsersList>),
        Action::read("list", handler!(list)).data(schema::<UsersList>),
        Action::read("get", handler!(get)).id(),
        Action::write("invite", handler!(invite))
            .data(schema::<UsersInvite>)
            .conflict(),
        Action::read("invitations", handler!(invitations)).data(schema::<UsersInvitations>),
        Action::write("revoke-invitation", handler!(revoke_invitation))
            .data(schema::<UsersInvitationRef>)
            .conflict(),
        Action::write("disable", handler!(disable)).id().conflict(),
        Action::write("enable", handler!(enable)).id().conflict(),
        Action::write("set-role", handler!(set_role))
            .id()
            .data(schema::<UsersSetRole>)
            .conflict(),
        Action::write("delete", handler!(delete)).id().conflict(),
    ],
};
