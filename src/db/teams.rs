//! Teams, their members (owner / admin / member), email invitations with one-time tokens
//! (only a SHA-256 hash is stored) and the genies that belong to a team.
//!
//! Other resources ask [`team_access`] whether a user reaches a genie through a team.

use crate::db::sql::{Connection, OptionalExtension, Row, params};
use serde::Serialize;

use super::{new_id, now};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TeamRole {
    Member,
    Admin,
    Owner,
}

impl TeamRole {
    pub fn as_str(self) -> &'static str {
        match self {
            TeamRole::Owner => "owner",
            TeamRole::Admin => "admin",
            TeamRole::Member => "member",
        }
    }
    pub fn parse(s: &str) -> Option<TeamRole> {
        match s {
            "owner" => Some(TeamRole::Owner),
            "admin" => Some(TeamRole::Admin),
            "member" => Some(TeamRole::Member),
            _ => None,
        }
    }
    /// Owners and admins manage the team's genies, members and invitations.
    pub fn can_manage(self) -> bool {
        self >= TeamRole::Admin
    }
}

/// The role through which `user_id` reaches `genie_id` via its team, or `None`.
/// Members may read the genie; `can_manage()` roles (team owner, admin) may change it.
pub fn team_access(
    c: &Connection,
    user_id: &str,
    genie_id: &str,
) -> rusqlite::Result<Option<TeamRole>> {
    let role: Option<String> = c
        .query_row(
            "SELECT m.role FROM team_genies tg JOIN team_members m ON m.team_id = tg.team_id
             WHERE tg.genie_id = ?1 AND m.user_id = ?2",
            [genie_id, user_id],
            |r| r.get(0),
        )
        .optional()?;
    Ok(role.as_deref().and_then(TeamRole::parse))
}

#[derive(Debug, Clone, Serialize)]
pub struct Team {
    pub id: String,
    pub name: String,
    pub owner_id: String,
    pub my_role: TeamRole,
    pub member_count: i64,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Member {
    pub user_id: String,
    pub email: String,
    pub full_name: Option<String>,
    pub role: TeamRole,
    pub joined_at: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Invitation {
    pub id: String,
    pub team_id: String,
    pub email: String,
    pub role: TeamRole,
    pub status: String,
    pub invited_by: String,
    pub expires_at: String,
    pub created_at: String,
    pub responded_at: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TeamGenie {
    pub id: String,
    pub name: String,
    pub is_active: bool,
    pub owner_id: String,
    pub added_at: String,
}

fn team_row(r: &Row) -> rusqlite::Result<Team> {
    let role: String = r.get(3)?;
    Ok(Team {
        id: r.get(0)?,
        name: r.get(1)?,
        owner_id: r.get(2)?,
        my_role: TeamRole::parse(&role).unwrap_or(TeamRole::Member),
        member_count: r.get(4)?,
        created_at: r.get(5)?,
        updated_at: r.get(6)?,
    })
}

const TEAM_SELECT: &str = "SELECT t.id, t.name, t.owner_id, m.role,
        (SELECT COUNT(*) FROM team_members x WHERE x.team_id = t.id), t.created_at, t.updated_at
     FROM teams t JOIN team_members m ON m.team_id = t.id AND m.user_id = ?1";

/// The team as `user_id` sees it; `None` unless they are a member.
pub fn get(c: &Connection, user_id: &str, id: &str) -> rusqlite::Result<Option<Team>> {
    c.query_row(
        &format!("{TEAM_SELECT} WHERE t.id = ?2"),
        [user_id, id],
        team_row,
    )
    .optional()
}

pub fn list(c: &Connection, user_id: &str) -> rusqlite::Result<Vec<Team>> {
    let mut st = c.prepare_cached(&format!("{TEAM_SELECT} ORDER BY t.created_at, t.id"))?;
    st.query_map([user_id], team_row)?.collect()
}

pub fn insert(c: &Connection, owner_id: &str, name: &str) -> rusqlite::Result<Team> {
    let id = new_id();
    let at = now();
    c.execute(
        "INSERT INTO teams (id, name, owner_id, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?4)",
        params![id, name, owner_id, at],
    )?;
    add_member(c, &id, owner_id, TeamRole::Owner)?;
    Ok(get(c, owner_id, &id)?.expect("row just inserted"))
}

/// The name of a team, whoever asks (an invitation names the team to its invitee).
pub fn name(c: &Connection, id: &str) -> rusqlite::Result<String> {
    c.query_row("SELECT name FROM teams WHERE id = ?1", [id], |r| r.get(0))
}

pub fn rename(c: &Connection, id: &str, name: &str) -> rusqlite::Result<()> {
    c.execute(
        "UPDATE teams SET name = ?2, updated_at = ?3 WHERE id = ?1",
        params![id, name, now()],
    )?;
    Ok(())
}

pub fn delete(c: &Connection, id: &str) -> rusqlite::Result<bool> {
    Ok(c.execute("DELETE FROM teams WHERE id = ?1", [id])? == 1)
}

pub fn add_member(
    c: &Connection,
    team_id: &str,
    user_id: &str,
    role: TeamRole,
) -> rusqlite::Result<()> {
    c.execute(
        "INSERT INTO team_members (team_id, user_id, role, joined_at) VALUES (?1, ?2, ?3, ?4)",
        params![team_id, user_id, role.as_str(), now()],
    )?;
    Ok(())
}

pub fn member(c: &Connection, team_id: &str, user_id: &str) -> rusqlite::Result<Option<Member>> {
    c.query_row(
        "SELECT m.user_id, u.email, u.full_name, m.role, m.joined_at FROM team_members m JOIN users u ON u.id = m.user_id
         WHERE m.team_id = ?1 AND m.user_id = ?2",
        [team_id, user_id],
        member_row,
    )
    .optional()
}

fn member_row(r: &Row) -> rusqlite::Result<Member> {
    let role: String = r.get(3)?;
    Ok(Member {
        user_id: r.get(0)?,
        email: r.get(1)?,
        full_name: r.get(2)?,
        role: TeamRole::parse(&role).unwrap_or(TeamRole::Member),
        joined_at: r.get(4)?,
    })
}

pub fn members(c: &Connection, team_id: &str) -> rusqlite::Result<Vec<Member>> {
    let mut st = c.prepare_cached(
        "SELECT m.user_id, u.email, u.full_name, m.role, m.joined_at FROM team_members m JOIN users u ON u.id = m.user_id
         WHERE m.team_id = ?1
         ORDER BY CASE m.role WHEN 'owner' THEN 0 WHEN 'admin' THEN 1 ELSE 2 END, m.joined_at, u.email",
    )?;
    st.query_map([team_id], member_row)?.collect()
}

pub fn set_role(
    c: &Connection,
    team_id: &str,
    user_id: &str,
    role: TeamRole,
) -> rusqlite::Result<bool> {
    Ok(c.execute(
        "UPDATE team_members SET role = ?3 WHERE team_id = ?1 AND user_id = ?2",
        params![team_id, user_id, role.as_str()],
    )? == 1)
}

pub fn remove_member(c: &Connection, team_id: &str, user_id: &str) -> rusqlite::Result<bool> {
    Ok(c.execute(
        "DELETE FROM team_members WHERE team_id = ?1 AND user_id = ?2",
        [team_id, user_id],
    )? == 1)
}

pub fn is_member_email(c: &Connection, team_id: &str, email: &str) -> rusqlite::Result<bool> {
    c.query_row(
        "SELECT EXISTS(SELECT 1 FROM team_members m JOIN users u ON u.id = m.user_id
                       WHERE m.team_id = ?1 AND lower(u.email) = lower(?2))",
        [team_id, email],
        |r| r.get(0),
    )
}

const INV_COLS: &str =
    "id, team_id, email, role, status, invited_by, expires_at, created_at, responded_at";

fn inv_row(r: &Row) -> rusqlite::Result<Invitation> {
    let role: String = r.get(3)?;
    Ok(Invitation {
        id: r.get(0)?,
        team_id: r.get(1)?,
        email: r.get(2)?,
        role: TeamRole::parse(&role).unwrap_or(TeamRole::Member),
        status: r.get(4)?,
        invited_by: r.get(5)?,
        expires_at: r.get(6)?,
        created_at: r.get(7)?,
        responded_at: r.get(8)?,
    })
}

/// Creates a pending invitation; an earlier pending one to the same address is revoked.
pub fn invite(
    c: &Connection,
    team_id: &str,
    email: &str,
    role: TeamRole,
    token_hash: &str,
    by: &str,
    expires_at: &str,
) -> rusqlite::Result<Invitation> {
    let at = now();
    c.execute(
        "UPDATE team_invitations SET status = 'revoked', responded_at = ?3
         WHERE team_id = ?1 AND email = ?2 AND status = 'pending'",
        params![team_id, email, at],
    )?;
    let id = new_id();
    c.execute(
        "INSERT INTO team_invitations (id, team_id, email, role, token_hash, status, invited_by, expires_at, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, 'pending', ?6, ?7, ?8)",
        params![id, team_id, email, role.as_str(), token_hash, by, expires_at, at],
    )?;
    Ok(invitation(c, &id)?.expect("row just inserted"))
}

pub fn invitation(c: &Connection, id: &str) -> rusqlite::Result<Option<Invitation>> {
    c.query_row(
        &format!("SELECT {INV_COLS} FROM team_invitations WHERE id = ?1"),
        [id],
        inv_row,
    )
    .optional()
}

pub fn invitation_by_hash(
    c: &Connection,
    token_hash: &str,
) -> rusqlite::Result<Option<Invitation>> {
    c.query_row(
        &format!("SELECT {INV_COLS} FROM team_invitations WHERE token_hash = ?1"),
        [token_hash],
        inv_row,
    )
    .optional()
}

pub fn invitations(c: &Connection, team_id: &str) -> rusqlite::Result<Vec<Invitation>> {
    let mut st = c.prepare_cached(&format!(
        "SELECT {INV_COLS} FROM team_invitations WHERE team_id = ?1 ORDER BY created_at DESC, id DESC"
    ))?;
    st.query_map([team_id], inv_row)?.collect()
}

/// Moves a pending invitation to `status`; false when it was no longer pending.
pub fn respond(c: &Connection, id: &str, status: &str) -> rusqlite::Result<bool> {
    Ok(c.execute(
        "UPDATE team_invitations SET status = ?2, responded_at = ?3 WHERE id = ?1 AND status = 'pending'",
        params![id, status, now()],
    )? == 1)
}

pub fn genies(c: &Connection, team_id: &str) -> rusqlite::Result<Vec<TeamGenie>> {
    let mut st = c.prepare_cached(
        "SELECT g.id, g.name, g.is_active, g.user_id, tg.created_at FROM team_genies tg JOIN genies g ON g.id = tg.genie_id
         WHERE tg.team_id = ?1 ORDER BY g.name_lower, g.id",
    )?;
    st.query_map([team_id], |r| {
        Ok(TeamGenie {
            id: r.get(0)?,
            name: r.get(1)?,
            is_active: r.get(2)?,
            owner_id: r.get(3)?,
            added_at: r.get(4)?,
        })
    })?
    .collect()
}

/// Puts the genie in the team (moving it from another team, if any).
pub fn add_genie(c: &Connection, team_id: &str, genie_id: &str, by: &str) -> rusqlite::Result<()> {
    c.execute(
        "INSERT INTO team_genies (genie_id, team_id, added_by, created_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (genie_id) DO UPDATE SET team_id = excluded.team_id, added_by = excluded.added_by,
             created_at = excluded.created_at",
        params![genie_id, team_id, by, now()],
    )?;
    Ok(())
}

pub fn remove_genie(c: &Connection, team_id: &str, genie_id: &str) -> rusqlite::Result<bool> {
    Ok(c.execute(
        "DELETE FROM team_genies WHERE team_id = ?1 AND genie_id = ?2",
        [team_id, genie_id],
    )? == 1)
}

/// `(name, owner)` of a genie, for checks.
pub fn genie_owner(c: &Connection, genie_id: &str) -> rusqlite::Result<Option<(String, String)>> {
    c.query_row(
        "SELECT name, user_id FROM genies WHERE id = ?1",
        [genie_id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()
}

pub fn user_email(c: &Connection, user_id: &str) -> rusqlite::Result<Option<String>> {
    c.query_row("SELECT email FROM users WHERE id = ?1", [user_id], |r| {
        r.get(0)
    })
    .optional()
}
