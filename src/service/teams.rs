//! Team operations: the membership rules (owners and admins manage, only the owner deletes
//! the team or makes admins, the owner cannot leave), invitations with one-time tokens
//! (shown once, stored as a SHA-256 hash, expiring after `--team-invite-ttl-hours`), and
//! sharing genies into a team. Every check runs in the transaction of the change it guards.
//!
//! A team another user belongs to reads as absent to everyone else (404, not 403).

use crate::db::sql::Connection;
use rand::RngCore;
use sha2::{Digest, Sha256};

use crate::db;
use crate::db::teams::{self as repo, Invitation, Member, Team, TeamGenie, TeamRole};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// The team if `user_id` is a member.
fn load(c: &Connection, user_id: &str, team_id: &str) -> ApiResult<Team> {
    repo::get(c, user_id, team_id)?.ok_or_else(|| ApiError::not_found("team"))
}

fn manage(team: &Team) -> ApiResult<()> {
    if team.my_role.can_manage() {
        Ok(())
    } else {
        Err(ApiError::forbidden(
            "only the team's owner and admins may do this",
        ))
    }
}

fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.trim().as_bytes()))
}

fn new_token() -> String {
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    format!("tinv_{}", hex::encode(bytes))
}

pub async fn list(app: &AppState, user_id: &str) -> ApiResult<Vec<Team>> {
    let uid = user_id.to_string();
    app.db.read(move |c| Ok(repo::list(c, &uid)?)).await
}

/// A team with its members and genies, as one of its members sees it.
pub struct Detail {
    pub team: Team,
    pub members: Vec<Member>,
    pub genies: Vec<TeamGenie>,
}

pub async fn get(app: &AppState, user_id: &str, team_id: &str) -> ApiResult<Detail> {
    let (uid, id) = (user_id.to_string(), team_id.to_string());
    app.db
        .read(move |c| {
            Ok(Detail {
                team: load(c, &uid, &id)?,
                members: repo::members(c, &id)?,
                genies: repo::genies(c, &id)?,
            })
        })
        .await
}

pub async fn create(app: &AppState, owner_id: &str, name: &str) -> ApiResult<Team> {
    let (uid, name) = (owner_id.to_string(), name.to_string());
    app.db
        .write(move |c| Ok(repo::insert(c, &uid, &name)?))
        .await
}

/// Renames a team its owner or an admin manages; returns the old name and the team.
pub async fn rename(
    app: &AppState,
    user_id: &str,
    team_id: &str,
    name: &str,
) -> ApiResult<(String, Team)> {
    let (uid, id, name) = (user_id.to_string(), team_id.to_string(), name.to_string());
    app.db
        .write(move |c| {
            let t = load(c, &uid, &id)?;
            manage(&t)?;
            repo::rename(c, &id, &name)?;
            Ok((t.name, load(c, &uid, &id)?))
        })
        .await
}

/// Deletes a team (its memberships, invitations and genie links go with it); only its
/// owner may. Returns the team's name.
pub async fn delete(app: &AppState, user_id: &str, team_id: &str) -> ApiResult<String> {
    let (uid, id) = (user_id.to_string(), team_id.to_string());
    app.db
        .write(move |c| {
            let t = load(c, &uid, &id)?;
            if t.my_role != TeamRole::Owner {
                return Err(ApiError::forbidden("only the team's owner may delete it"));
            }
            repo::delete(c, &id)?;
            Ok(t.name)
        })
        .await
}

pub async fn members(app: &AppState, user_id: &str, team_id: &str) -> ApiResult<Vec<Member>> {
    let (uid, id) = (user_id.to_string(), team_id.to_string());
    app.db
        .read(move |c| {
            load(c, &uid, &id)?;
            Ok(repo::members(c, &id)?)
        })
        .await
}

/// The team's invitations, for its owner and admins.
pub async fn invitations(
    app: &AppState,
    user_id: &str,
    team_id: &str,
) -> ApiResult<Vec<Invitation>> {
    let (uid, id) = (user_id.to_string(), team_id.to_string());
    app.db
        .read(move |c| {
            manage(&load(c, &uid, &id)?)?;
            Ok(repo::invitations(c, &id)?)
        })
        .await
}

/// A new invitation and its token, which is shown this once and never stored.
pub struct Invited {
    pub team: Team,
    pub invitation: Invitation,
    pub token: String,
}

/// Invites `email` (lower-case) into a team the caller manages; only the owner invites
/// admins. An earlier pending invitation to the same address is revoked.
pub async fn invite(
    app: &AppState,
    user_id: &str,
    team_id: &str,
    email: &str,
    role: TeamRole,
) -> ApiResult<Invited> {
    let token = new_token();
    let hash = token_hash(&token);
    let ttl = app.config.team_invite_ttl_hours.min(24 * 365) as i64;
    let expires = db::fmt_time(chrono::Utc::now() + chrono::Duration::hours(ttl));
    let (uid, id, email) = (user_id.to_string(), team_id.to_string(), email.to_string());
    let (team, invitation) = app
        .db
        .write(move |c| {
            let t = load(c, &uid, &id)?;
            manage(&t)?;
            if role == TeamRole::Admin && t.my_role != TeamRole::Owner {
                return Err(ApiError::forbidden(
                    "only the team's owner may invite admins",
                ));
            }
            if repo::is_member_email(c, &id, &email)? {
                return Err(ApiError::conflict(format!(
                    "{email} is already a member of this team"
                )));
            }
            let inv = repo::invite(c, &id, &email, role, &hash, &uid, &expires)?;
            Ok((t, inv))
        })
        .await?;
    Ok(Invited {
        team,
        invitation,
        token,
    })
}

/// The pending, unexpired invitation `token` names, addressed to `user_id`'s email, and
/// the name of its team.
fn addressed_to(c: &Connection, user_id: &str, token: &str) -> ApiResult<(Invitation, String)> {
    let inv = repo::invitation_by_hash(c, &token_hash(token))?
        .ok_or_else(|| ApiError::not_found("invitation"))?;
    if inv.status != "pending" {
        return Err(ApiError::conflict(format!(
            "this invitation was already {}",
            inv.status
        )));
    }
    if inv.expires_at.as_str() <= db::now().as_str() {
        return Err(ApiError::validation(
            "data.token: this invitation has expired; ask for a new one",
        ));
    }
    let email = repo::user_email(c, user_id)?.unwrap_or_default();
    if !email.eq_ignore_ascii_case(&inv.email) {
        return Err(ApiError::forbidden(
            "this invitation was sent to another email address",
        ));
    }
    let name = repo::name(c, &inv.team_id)?;
    Ok((inv, name))
}

/// An accepted invitation and the team the caller joined through it.
pub struct Joined {
    pub invitation: Invitation,
    pub team: Team,
}

/// Joins the team an invitation `token` names, with the invitation's role.
pub async fn accept(app: &AppState, user_id: &str, token: &str) -> ApiResult<Joined> {
    let (uid, token) = (user_id.to_string(), token.to_string());
    app.db
        .write(move |c| {
            let (inv, _) = addressed_to(c, &uid, &token)?;
            if repo::member(c, &inv.team_id, &uid)?.is_some() {
                return Err(ApiError::conflict("you are already a member of this team"));
            }
            repo::respond(c, &inv.id, "accepted")?;
            repo::add_member(c, &inv.team_id, &uid, inv.role)?;
            Ok(Joined {
                team: load(c, &uid, &inv.team_id)?,
                invitation: repo::invitation(c, &inv.id)?.expect("exists"),
            })
        })
        .await
}

/// Declines an invitation; returns it and its team's name (the invitee is no member).
pub async fn decline(
    app: &AppState,
    user_id: &str,
    token: &str,
) -> ApiResult<(Invitation, String)> {
    let (uid, token) = (user_id.to_string(), token.to_string());
    app.db
        .write(move |c| {
            let (inv, name) = addressed_to(c, &uid, &token)?;
            repo::respond(c, &inv.id, "declined")?;
            Ok((repo::invitation(c, &inv.id)?.expect("exists"), name))
        })
        .await
}

/// Revokes a pending invitation of a team the caller manages.
pub async fn revoke(
    app: &AppState,
    user_id: &str,
    team_id: &str,
    invitation_id: &str,
) -> ApiResult<(Team, Invitation)> {
    let (uid, id, inv_id) = (
        user_id.to_string(),
        team_id.to_string(),
        invitation_id.to_string(),
    );
    app.db
        .write(move |c| {
            let t = load(c, &uid, &id)?;
            manage(&t)?;
            let inv = repo::invitation(c, &inv_id)?
                .filter(|i| i.team_id == id)
                .ok_or_else(|| ApiError::not_found("invitation"))?;
            if !repo::respond(c, &inv.id, "revoked")? {
                return Err(ApiError::conflict(format!(
                    "this invitation was already {}",
                    inv.status
                )));
            }
            Ok((t, repo::invitation(c, &inv.id)?.expect("exists")))
        })
        .await
}

/// Leaves a team; its owner cannot (they delete it instead). Returns the team's name.
pub async fn leave(app: &AppState, user_id: &str, team_id: &str) -> ApiResult<String> {
    let (uid, id) = (user_id.to_string(), team_id.to_string());
    app.db
        .write(move |c| {
            let t = load(c, &uid, &id)?;
            if t.my_role == TeamRole::Owner {
                return Err(ApiError::conflict(
                    "the owner cannot leave the team; delete it instead",
                ));
            }
            repo::remove_member(c, &id, &uid)?;
            Ok(t.name)
        })
        .await
}

/// The team and the member `target` when the caller may remove them or give them
/// `new_role`: owners manage everyone, admins plain members only (and make no admins),
/// nobody the owner, and nobody themselves (that is leaving).
fn changeable(
    c: &Connection,
    user_id: &str,
    team_id: &str,
    target: &str,
    new_role: Option<TeamRole>,
) -> ApiResult<(Team, Member)> {
    let t = load(c, user_id, team_id)?;
    manage(&t)?;
    if target == user_id {
        return Err(ApiError::validation(
            "data.user_id is yourself; use 'leave' to leave a team",
        ));
    }
    let m = repo::member(c, team_id, target)?.ok_or_else(|| ApiError::not_found("team member"))?;
    if m.role == TeamRole::Owner
        || (t.my_role != TeamRole::Owner
            && (m.role != TeamRole::Member || new_role == Some(TeamRole::Admin)))
    {
        return Err(ApiError::forbidden(
            "your team role does not allow changing this member",
        ));
    }
    Ok((t, m))
}

/// Removes a member; returns the team and the member as they were.
pub async fn remove_member(
    app: &AppState,
    user_id: &str,
    team_id: &str,
    target: &str,
) -> ApiResult<(Team, Member)> {
    let (uid, id, target) = (user_id.to_string(), team_id.to_string(), target.to_string());
    app.db
        .write(move |c| {
            let (t, m) = changeable(c, &uid, &id, &target, None)?;
            repo::remove_member(c, &id, &target)?;
            Ok((t, m))
        })
        .await
}

/// Gives a member another role; returns the team and the member as they are now.
pub async fn set_member_role(
    app: &AppState,
    user_id: &str,
    team_id: &str,
    target: &str,
    role: TeamRole,
) -> ApiResult<(Team, Member)> {
    let (uid, id, target) = (user_id.to_string(), team_id.to_string(), target.to_string());
    app.db
        .write(move |c| {
            let (t, _) = changeable(c, &uid, &id, &target, Some(role))?;
            repo::set_role(c, &id, &target, role)?;
            Ok((t, repo::member(c, &id, &target)?.expect("exists")))
        })
        .await
}

/// Shares a genie into a team (moving it from another team, if any): only the genie's
/// owner, and only into a team they manage. Returns the team and the genie's name.
pub async fn add_genie(
    app: &AppState,
    user_id: &str,
    team_id: &str,
    genie_id: &str,
) -> ApiResult<(Team, String)> {
    let (uid, id, gid) = (
        user_id.to_string(),
        team_id.to_string(),
        genie_id.to_string(),
    );
    app.db
        .write(move |c| {
            let t = load(c, &uid, &id)?;
            let (gname, owner) =
                repo::genie_owner(c, &gid)?.ok_or_else(ApiError::agent_not_found)?;
            if owner != uid {
                return Err(ApiError::agent_not_found());
            }
            manage(&t)?;
            repo::add_genie(c, &id, &gid, &uid)?;
            Ok((t, gname))
        })
        .await
}

/// Takes a genie out of a team: its owner or a team admin may. Returns the team and the
/// genie's name.
pub async fn remove_genie(
    app: &AppState,
    user_id: &str,
    team_id: &str,
    genie_id: &str,
) -> ApiResult<(Team, String)> {
    let (uid, id, gid) = (
        user_id.to_string(),
        team_id.to_string(),
        genie_id.to_string(),
    );
    app.db
        .write(move |c| {
            let t = load(c, &uid, &id)?;
            let (gname, owner) =
                repo::genie_owner(c, &gid)?.ok_or_else(ApiError::agent_not_found)?;
            if owner != uid && !t.my_role.can_manage() {
                return Err(ApiError::forbidden(
                    "only the genie's owner or a team admin may remove it",
                ));
            }
            if !repo::remove_genie(c, &id, &gid)? {
                return Err(ApiError::agent_not_found());
            }
            Ok((t, gname))
        })
        .await
}
