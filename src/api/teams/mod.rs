//! The `teams` resource: teams with owner / admin / member roles, email invitations with
//! one-time tokens, and team genies (members read them, owners and admins manage them).
//! The rules live in `service::teams`; these actions decode, call it and say what changed:
//! every membership change is a mutating action, so dispatch writes its activity row with
//! the summary given here.
//!
//! `crud.rs`: the team itself; `members.rs`: who is in it; `invitations.rs`: who is asked
//! in; `genies.rs`: which genies it shares.

mod crud;
mod genies;
mod invitations;
mod members;

use super::action::{Action, Resource, handler, schema};
use crate::db::teams::TeamRole;
use crate::error::{ApiError, ApiResult};

fn check_name(name: &str) -> ApiResult<String> {
    let n = name.trim();
    if n.is_empty() || n.chars().count() > 100 {
        return Err(ApiError::validation(
            "data.name is required and must be at most 100 characters",
        ));
    }
    Ok(n.to_string())
}

/// The roles one can be invited or moved to; nobody becomes a second owner.
fn invitable_role(role: Option<&str>) -> ApiResult<TeamRole> {
    match role.unwrap_or("member") {
        "member" => Ok(TeamRole::Member),
        "admin" => Ok(TeamRole::Admin),
        _ => Err(ApiError::validation(
            "data.role must be 'admin' or 'member'",
        )),
    }
}

/// Every `teams` action; see `api::action`.
pub const RESOURCE: Resource = Resource {
    name: "teams",
    list_action: "all",
    actions: &[
        Action::read("all", handler!(crud::list)),
        Action::read("list", handler!(crud::list)),
        Action::read("get", handler!(crud::get)).id(),
        Action::write("create", handler!(crud::create))
            .data(schema::<crud::Named>)
            .conflict(),
        Action::write("update", handler!(crud::rename))
            .id()
            .data(schema::<crud::Named>)
            .conflict(),
        Action::write("rename", handler!(crud::rename))
            .id()
            .data(schema::<crud::Named>)
            .conflict(),
        Action::write("delete", handler!(crud::delete)).id(),
        Action::write("invite", handler!(invitations::invite))
            .id()
            .data(schema::<invitations::Invite>)
            .conflict(),
        Action::write("accept", handler!(invitations::accept))
            .data(schema::<invitations::Token>)
            .conflict(),
        Action::write("decline", handler!(invitations::decline)).data(schema::<invitations::Token>),
        Action::write("revoke", handler!(invitations::revoke))
            .id()
            .data(schema::<invitations::InvitationRef>),
        Action::read("invitations", handler!(invitations::invitations)).id(),
        Action::read("members", handler!(members::members)).id(),
        Action::write("leave", handler!(members::leave)).id(),
        Action::write("remove-member", handler!(members::remove_member))
            .id()
            .data(schema::<members::MemberRef>)
            .conflict(),
        Action::write("update-member", handler!(members::update_member))
            .id()
            .data(schema::<members::MemberRef>)
            .conflict(),
        Action::write("add-genie", handler!(genies::add_genie))
            .id()
            .data(schema::<genies::GenieRef>)
            .conflict(),
        Action::write("remove-genie", handler!(genies::remove_genie))
            .id()
            .data(schema::<genies::GenieRef>),
    ],
};
