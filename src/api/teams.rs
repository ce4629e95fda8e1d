//! The `teams` resource: teams with owner / admin / member roles, email invitations with
//! one-time tokens (shown once, stored hashed, expiring after `--team-invite-ttl-hours`),
//! and team genies (members read them, owners and admins manage them). Every membership
//! change is a mutating action, so dispatch writes its activity row with a clear summary.

use super::action::{Action, Handler, Resource, handler, schema};
use rand::RngCore;
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::{ActionRequest, Ctx, Reply, parse_uuid};
use crate::db::{self, teams::Team, teams::TeamRole};
use crate::error::{ApiError, ApiResult};

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "TeamName")]
pub(crate) struct Named {
    name: String,
}

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

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MemberRef {
    #[serde(alias = "userId")]
    user_id: String,
    role: Option<String>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GenieRef {
    #[serde(alias = "genieId")]
    genie_id: String,
}

fn check_name(name: &str) -> ApiResult<String> {
    let n = name.trim();
    if n.is_empty() || n.chars().count() > 100 {
        return Err(ApiError::validation(
            "data.name is required and must be at most 100 characters",
        ));
    }
    Ok(n.to_string())
}

fn invitable_role(role: Option<&str>) -> ApiResult<TeamRole> {
    match role.unwrap_or("member") {
        "member" => Ok(TeamRole::Member),
        "admin" => Ok(TeamRole::Admin),
        _ => Err(ApiError::validation(
            "data.role must be 'admin' or 'member'",
        )),
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

/// The team if the caller is a member (404 otherwise: another user's record is absent).
fn load(c: &rusqlite::Connection, uid: &str, team_id: &str) -> ApiResult<Team> {
    db::teams::get(c, uid, team_id)?.ok_or_else(|| ApiError::not_found("team"))
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

pub async fn handle(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    match req.action.as_str() {
        "all" | "list" => {
            let teams = ctx
                .db()
                .read(move |c| Ok(db::teams::list(c, &uid)?))
                .await?;
            Ok(Reply::ok(json!({"teams": teams, "count": teams.len()})))
        }
        "get" => {
            let id = req.uuid()?;
            let (team, members, genies) = ctx
                .db()
                .read(move |c| {
                    let t = load(c, &uid, &id)?;
                    Ok((t, db::teams::members(c, &id)?, db::teams::genies(c, &id)?))
                })
                .await?;
            let mut out = json!(team);
            out["members"] = json!(members);
            out["genies"] = json!(genies);
            Ok(Reply::ok(json!({"team": out})))
        }
        "create" => {
            let body: Named = req.data()?;
            let name = check_name(&body.name)?;
            let team = ctx
                .db()
                .write(move |c| Ok(db::teams::insert(c, &uid, &name)?))
                .await?;
            let s = format!("created team '{}' (owner)", team.name);
            Ok(Reply::created(json!({"team": team}))
                .record(&team.id)
                .summary(s))
        }
        "update" | "rename" => {
            let id = req.uuid()?;
            let body: Named = req.data()?;
            let name = check_name(&body.name)?;
            let (old, team) = ctx
                .db()
                .write(move |c| {
                    let t = load(c, &uid, &id)?;
                    manage(&t)?;
                    db::teams::rename(c, &id, &name)?;
                    Ok((t.name, load(c, &uid, &id)?))
                })
                .await?;
            let s = format!("renamed team '{old}' to '{}'", team.name);
            Ok(Reply::ok(json!({"team": team})).summary(s))
        }
        "delete" => {
            let id = req.uuid()?;
            let id2 = id.clone();
            let name = ctx
                .db()
                .write(move |c| {
                    let t = load(c, &uid, &id2)?;
                    if t.my_role != TeamRole::Owner {
                        return Err(ApiError::forbidden("only the team's owner may delete it"));
                    }
                    db::teams::delete(c, &id2)?;
                    Ok(t.name)
                })
                .await?;
            Ok(Reply::deleted(&id)
                .summary(format!("deleted team '{name}' and all its memberships")))
        }
        "members" => {
            let id = req.uuid()?;
            let members = ctx
                .db()
                .read(move |c| {
                    load(c, &uid, &id)?;
                    Ok(db::teams::members(c, &id)?)
                })
                .await?;
            Ok(Reply::ok(
                json!({"members": members, "count": members.len()}),
            ))
        }
        "invitations" => {
            let id = req.uuid()?;
            let inv = ctx
                .db()
                .read(move |c| {
                    manage(&load(c, &uid, &id)?)?;
                    Ok(db::teams::invitations(c, &id)?)
                })
                .await?;
            Ok(Reply::ok(json!({"invitations": inv, "count": inv.len()})))
        }
        "invite" => {
            let id = req.uuid()?;
            let body: Invite = req.data()?;
            let email = body.email.trim().to_lowercase();
            if !valid_email(&email) {
                return Err(ApiError::validation("data.email must be an email address"));
            }
            let role = invitable_role(body.role.as_deref())?;
            let token = new_token();
            let hash = token_hash(&token);
            let ttl = ctx.app.config.team_invite_ttl_hours.min(24 * 365) as i64;
            let expires = db::fmt_time(chrono::Utc::now() + chrono::Duration::hours(ttl));
            let (team, inv) = ctx
                .db()
                .write(move |c| {
                    let t = load(c, &uid, &id)?;
                    manage(&t)?;
                    if role == TeamRole::Admin && t.my_role != TeamRole::Owner {
                        return Err(ApiError::forbidden(
                            "only the team's owner may invite admins",
                        ));
                    }
                    if db::teams::is_member_email(c, &id, &email)? {
                        return Err(ApiError::conflict(format!(
                            "{email} is already a member of this team"
                        )));
                    }
                    Ok((
                        t.clone(),
                        db::teams::invite(c, &id, &email, role, &hash, &uid, &expires)?,
                    ))
                })
                .await?;
            let s = format!(
                "invited {} to team '{}' as {}",
                inv.email,
                team.name,
                inv.role.as_str()
            );
            Ok(Reply::created(json!({"invitation": inv, "token": token}))
                .record(&inv.id)
                .summary(s))
        }
        "accept" | "decline" => {
            let body: Token = req.data()?;
            if body.token.trim().is_empty() {
                return Err(ApiError::validation("data.token is required"));
            }
            let hash = token_hash(&body.token);
            let accepting = req.action == "accept";
            let (inv, team_name, team) = ctx
                .db()
                .write(move |c| {
                    let inv = db::teams::invitation_by_hash(c, &hash)?
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
                    let email = db::teams::user_email(c, &uid)?.unwrap_or_default();
                    if !email.eq_ignore_ascii_case(&inv.email) {
                        return Err(ApiError::forbidden(
                            "this invitation was sent to another email address",
                        ));
                    }
                    let name: String = c.query_row(
                        "SELECT name FROM teams WHERE id = ?1",
                        [&inv.team_id],
                        |r| r.get(0),
                    )?;
                    if !accepting {
                        db::teams::respond(c, &inv.id, "declined")?;
                        return Ok((
                            db::teams::invitation(c, &inv.id)?.expect("exists"),
                            name,
                            None,
                        ));
                    }
                    if db::teams::member(c, &inv.team_id, &uid)?.is_some() {
                        return Err(ApiError::conflict("you are already a member of this team"));
                    }
                    db::teams::respond(c, &inv.id, "accepted")?;
                    db::teams::add_member(c, &inv.team_id, &uid, inv.role)?;
                    let team = load(c, &uid, &inv.team_id)?;
                    Ok((
                        db::teams::invitation(c, &inv.id)?.expect("exists"),
                        name,
                        Some(team),
                    ))
                })
                .await?;
            match team {
                Some(team) => {
                    let s = format!(
                        "joined team '{team_name}' as {} (accepted invitation)",
                        inv.role.as_str()
                    );
                    Ok(Reply::ok(json!({"team": team, "invitation": inv}))
                        .record(&team.id)
                        .summary(s))
                }
                None => {
                    let s = format!("declined the invitation to team '{team_name}'");
                    Ok(Reply::ok(json!({"invitation": inv}))
                        .record(&inv.id)
                        .summary(s))
                }
            }
        }
        "revoke" => {
            let id = req.uuid()?;
            let body: InvitationRef = req.data()?;
            let inv_id = parse_uuid(&body.invitation_id, "data.invitation_id")?;
            let (team, inv) = ctx
                .db()
                .write(move |c| {
                    let t = load(c, &uid, &id)?;
                    manage(&t)?;
                    let inv = db::teams::invitation(c, &inv_id)?
                        .filter(|i| i.team_id == id)
                        .ok_or_else(|| ApiError::not_found("invitation"))?;
                    if !db::teams::respond(c, &inv.id, "revoked")? {
                        return Err(ApiError::conflict(format!(
                            "this invitation was already {}",
                            inv.status
                        )));
                    }
                    Ok((t, db::teams::invitation(c, &inv.id)?.expect("exists")))
                })
                .await?;
            let s = format!(
                "revoked the invitation of {} to team '{}'",
                inv.email, team.name
            );
            Ok(Reply::ok(json!({"invitation": inv})).summary(s))
        }
        "leave" => {
            let id = req.uuid()?;
            let id2 = id.clone();
            let name = ctx
                .db()
                .write(move |c| {
                    let t = load(c, &uid, &id2)?;
                    if t.my_role == TeamRole::Owner {
                        return Err(ApiError::conflict(
                            "the owner cannot leave the team; delete it instead",
                        ));
                    }
                    db::teams::remove_member(c, &id2, &uid)?;
                    Ok(t.name)
                })
                .await?;
            Ok(Reply::ok(json!({"team_id": id, "left": true}))
                .summary(format!("left team '{name}'")))
        }
        "remove-member" | "update-member" => {
            let id = req.uuid()?;
            let body: MemberRef = req.data()?;
            let target = parse_uuid(&body.user_id, "data.user_id")?;
            let removing = req.action == "remove-member";
            let new_role = if removing {
                None
            } else {
                Some(invitable_role(Some(body.role.as_deref().ok_or_else(
                    || ApiError::validation("data.role is required"),
                )?))?)
            };
            let (team, m) = ctx
                .db()
                .write(move |c| {
                    let t = load(c, &uid, &id)?;
                    manage(&t)?;
                    if target == uid {
                        return Err(ApiError::validation(
                            "data.user_id is yourself; use 'leave' to leave a team",
                        ));
                    }
                    let m = db::teams::member(c, &id, &target)?
                        .ok_or_else(|| ApiError::not_found("team member"))?;
                    // Owners manage everyone; admins manage plain members only.
                    if m.role == TeamRole::Owner
                        || (t.my_role != TeamRole::Owner
                            && (m.role != TeamRole::Member || new_role == Some(TeamRole::Admin)))
                    {
                        return Err(ApiError::forbidden(
                            "your team role does not allow changing this member",
                        ));
                    }
                    match new_role {
                        None => {
                            db::teams::remove_member(c, &id, &target)?;
                            Ok((t, m))
                        }
                        Some(r) => {
                            db::teams::set_role(c, &id, &target, r)?;
                            Ok((t, db::teams::member(c, &id, &target)?.expect("exists")))
                        }
                    }
                })
                .await?;
            if removing {
                let s = format!("removed {} from team '{}'", m.email, team.name);
                Ok(
                    Reply::ok(json!({"team_id": team.id, "user_id": m.user_id, "removed": true}))
                        .record(&team.id)
                        .summary(s),
                )
            } else {
                let s = format!(
                    "made {} {} of team '{}'",
                    m.email,
                    m.role.as_str(),
                    team.name
                );
                Ok(Reply::ok(json!({"member": m})).record(&team.id).summary(s))
            }
        }
        "add-genie" | "remove-genie" => {
            let id = req.uuid()?;
            let body: GenieRef = req.data()?;
            let gid = parse_uuid(&body.genie_id, "data.genie_id")?;
            let adding = req.action == "add-genie";
            let (team, gname) = ctx
                .db()
                .write(move |c| {
                    let t = load(c, &uid, &id)?;
                    let (gname, owner) =
                        db::teams::genie_owner(c, &gid)?.ok_or_else(ApiError::agent_not_found)?;
                    if adding {
                        // Only the genie's owner can share it, and only into a team they manage.
                        if owner != uid {
                            return Err(ApiError::agent_not_found());
                        }
                        manage(&t)?;
                        db::teams::add_genie(c, &id, &gid, &uid)?;
                    } else {
                        if owner != uid && !t.my_role.can_manage() {
                            return Err(ApiError::forbidden(
                                "only the genie's owner or a team admin may remove it",
                            ));
                        }
                        if !db::teams::remove_genie(c, &id, &gid)? {
                            return Err(ApiError::agent_not_found());
                        }
                    }
                    Ok((t, gname))
                })
                .await?;
            let s = if adding {
                format!("added genie '{gname}' to team '{}'", team.name)
            } else {
                format!("removed genie '{gname}' from team '{}'", team.name)
            };
            Ok(
                Reply::ok(
                    json!({"team_id": team.id, "genie_id": body.genie_id, "in_team": adding}),
                )
                .record(&team.id)
                .summary(s),
            )
        }
        other => Err(ApiError::invalid_action(req.resource, other)),
    }
}

/// Every `teams` action; see `api::action`.
pub const RESOURCE: Resource = Resource {
    name: "teams",
    list_action: "all",
    actions: &[
        Action::read("all", H),
        Action::read("list", H),
        Action::read("get", H).id(),
        Action::write("create", H).data(schema::<Named>).conflict(),
        Action::write("update", H)
            .id()
            .data(schema::<Named>)
            .conflict(),
        Action::write("rename", H)
            .id()
            .data(schema::<Named>)
            .conflict(),
        Action::write("delete", H).id(),
        Action::write("invite", H)
            .id()
            .data(schema::<Invite>)
            .conflict(),
        Action::write("accept", H).data(schema::<Token>).conflict(),
        Action::write("decline", H).data(schema::<Token>),
        Action::write("revoke", H)
            .id()
            .data(schema::<InvitationRef>),
        Action::read("invitations", H).id(),
        Action::read("members", H).id(),
        Action::write("leave", H).id(),
        Action::write("remove-member", H)
            .id()
            .data(schema::<MemberRef>)
            .conflict(),
        Action::write("update-member", H)
            .id()
            .data(schema::<MemberRef>)
            .conflict(),
        Action::write("add-genie", H)
            .id()
            .data(schema::<GenieRef>)
            .conflict(),
        Action::write("remove-genie", H)
            .id()
            .data(schema::<GenieRef>),
    ],
};

const H: Handler = handler!(handle);
