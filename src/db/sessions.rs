//! Sign-in sessions. An access token names its session (`sid`); revoking the session
//! invalidates the token before it expires. Refresh tokens are stored as hashes and rotate.

use crate::db::sql::{Connection, OptionalExtension, params};

use super::now;
use crate::db::users::Role;

pub fn insert(
    c: &Connection,
    id: &str,
    user_id: &str,
    refresh_hash: Option<&str>,
    refresh_expires_at: Option<&str>,
) -> rusqlite::Result<()> {
    c.execute(
        "INSERT INTO sessions (id, user_id, refresh_hash, refresh_expires_at, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![id, user_id, refresh_hash, refresh_expires_at, now()],
    )?;
    Ok(())
}

/// The user's current role if the session is still live, with the authentication epoch of
/// the same snapshot (see `db::auth_epoch`).
pub fn live_role(
    c: &Connection,
    session_id: &str,
    user_id: &str,
) -> rusqlite::Result<Option<(Role, i64)>> {
    let mut st = c.prepare_cached(
        "SELECT u.role, (SELECT epoch FROM auth_epoch WHERE id = 1)
         FROM sessions s JOIN users u ON u.id = s.user_id
         WHERE s.id = ?1 AND s.user_id = ?2 AND s.revoked_at IS NULL AND u.disabled_at IS NULL",
    )?;
    st.query_row([session_id, user_id], |r| {
        let role: String = r.get(0)?;
        Ok((Role::parse(&role).unwrap_or(Role::Consumer), r.get(1)?))
    })
    .optional()
}

/// Swaps the refresh token of a live session; returns (session id, user id, role) when
/// `old_hash` was the session's current, unexpired refresh token.
pub fn rotate_refresh(
    c: &Connection,
    old_hash: &str,
    new_hash: &str,
    new_expires_at: &str,
) -> rusqlite::Result<Option<(String, String, Role)>> {
    let found = c
        .query_row(
            "SELECT s.id, s.user_id, u.role FROM sessions s JOIN users u ON u.id = s.user_id
             WHERE s.refresh_hash = ?1 AND s.revoked_at IS NULL AND s.refresh_expires_at > ?2
               AND u.disabled_at IS NULL",
            [old_hash, &now()],
            |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                ))
            },
        )
        .optional()?;
    let Some((sid, uid, role)) = found else {
        return Ok(None);
    };
    c.execute(
        "UPDATE sessions SET refresh_hash = ?2, refresh_expires_at = ?3 WHERE id = ?1",
        params![sid, new_hash, new_expires_at],
    )?;
    Ok(Some((
        sid,
        uid,
        Role::parse(&role).unwrap_or(Role::Consumer),
    )))
}

pub fn revoke(c: &Connection, session_id: &str) -> rusqlite::Result<()> {
    c.execute(
        "UPDATE sessions SET revoked_at = ?2, refresh_hash = NULL WHERE id = ?1 AND revoked_at IS NULL",
        [session_id, &now()],
    )?;
    Ok(())
}
