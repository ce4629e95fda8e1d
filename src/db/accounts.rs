//! Accounts beyond the profile (migration V13): password hashes, the disabled flag,
//! one-time account tokens (password reset, email change; stored as hashes), account
//! invitations, and identities at OpenID providers.

use crate::db::sql::{Connection, OptionalExtension, Row, params};
use serde::Serialize;

use super::users::{Role, User};
use super::{new_id, now};

/// A user as the admin `users` resource shows it: the profile, whether the account is
/// disabled or being deleted, whether it has a password, and the OpenID providers it is
/// linked to.
#[derive(Debug, Clone, Serialize)]
pub struct Account {
    #[serde(flatten)]
    pub user: User,
    /// `active`, `disabled`, or `deleting` while its delete runs.
    pub status: &'static str,
    pub disabled_at: Option<String>,
    /// When its delete was asked for; set only while the delete runs.
    pub deleting_at: Option<String>,
    pub has_password: bool,
    pub identities: Vec<Identity>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Identity {
    pub issuer: String,
    pub subject: String,
    pub email: Option<String>,
    pub created_at: String,
    pub last_login_at: Option<String>,
}

/// What the `users` row says of an account beyond its profile.
#[derive(Debug, Clone, Default)]
pub struct Status {
    pub disabled_at: Option<String>,
    pub deleting_at: Option<String>,
    pub has_password: bool,
}

impl Status {
    /// `active`, `disabled`, or `deleting` (which is disabled too) while its delete runs.
    pub fn name(&self) -> &'static str {
        match (&self.disabled_at, &self.deleting_at) {
            (_, Some(_)) => "deleting",
            (Some(_), None) => "disabled",
            (None, None) => "active",
        }
    }
}

pub fn status(c: &Connection, user_id: &str) -> rusqlite::Result<Option<Status>> {
    c.query_row(
        "SELECT disabled_at, deleting_at, password_hash IS NOT NULL FROM users WHERE id = ?1",
        [user_id],
        |r| {
            Ok(Status {
                disabled_at: r.get(0)?,
                deleting_at: r.get(1)?,
                has_password: r.get(2)?,
            })
        },
    )
    .optional()
}

pub fn account(c: &Connection, user_id: &str) -> rusqlite::Result<Option<Account>> {
    let Some(user) = super::users::get(c, user_id)? else {
        return Ok(None);
    };
    let s = status(c, user_id)?.unwrap_or_default();
    Ok(Some(Account {
        status: s.name(),
        disabled_at: s.disabled_at,
        deleting_at: s.deleting_at,
        has_password: s.has_password,
        identities: identities(c, user_id)?,
        user,
    }))
}

/// A page of accounts, oldest first; `status` filters on `active` / `disabled` /
/// `deleting` (an account being deleted is disabled too, but listed as `deleting`).
pub fn accounts(
    c: &Connection,
    status: Option<&str>,
    limit: i64,
    offset: i64,
) -> rusqlite::Result<(Vec<Account>, i64)> {
    let filter = match status {
        Some("active") => "WHERE disabled_at IS NULL",
        Some("disabled") => "WHERE disabled_at IS NOT NULL AND deleting_at IS NULL",
        Some("deleting") => "WHERE deleting_at IS NOT NULL",
        _ => "",
    };
    let ids: Vec<String> = c
        .prepare(&format!(
            "SELECT id FROM users {filter} ORDER BY created_at, id LIMIT ?1 OFFSET ?2"
        ))?
        .query_map([limit, offset], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let total = c.query_row(&format!("SELECT COUNT(*) FROM users {filter}"), [], |r| {
        r.get(0)
    })?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(a) = account(c, &id)? {
            out.push(a);
        }
    }
    Ok((out, total))
}

pub fn set_password(c: &Connection, user_id: &str, hash: &str) -> rusqlite::Result<bool> {
    Ok(c.execute(
        "UPDATE users SET password_hash = ?2, updated_at = ?3 WHERE id = ?1",
        params![user_id, hash, now()],
    )? == 1)
}

pub fn password_hash(c: &Connection, user_id: &str) -> rusqlite::Result<Option<String>> {
    Ok(c.query_row(
        "SELECT password_hash FROM users WHERE id = ?1",
        [user_id],
        |r| r.get::<_, Option<String>>(0),
    )
    .optional()?
    .flatten())
}

pub fn set_email(c: &Connection, user_id: &str, email: &str) -> rusqlite::Result<bool> {
    Ok(c.execute(
        "UPDATE users SET email = ?2, updated_at = ?3 WHERE id = ?1",
        params![user_id, email, now()],
    )? == 1)
}

/// Disables (`true`) or enables the user; false when there is no such user.
pub fn set_disabled(c: &Connection, user_id: &str, disabled: bool) -> rusqlite::Result<bool> {
    let at = disabled.then(now);
    Ok(c.execute(
        "UPDATE users SET disabled_at = ?2, updated_at = ?3 WHERE id = ?1",
        params![user_id, at, now()],
    )? == 1)
}

/// Marks the account's delete as asked for (kept if it was already); false when there is no
/// such user.
pub fn mark_deleting(c: &Connection, user_id: &str) -> rusqlite::Result<bool> {
    Ok(c.execute(
        "UPDATE users SET deleting_at = COALESCE(deleting_at, ?2) WHERE id = ?1",
        params![user_id, now()],
    )? == 1)
}

/// The accounts whose delete was asked for and has not finished (a crash or a stop cut it
/// short), by the partial index `users_deleting`.
pub fn deleting(c: &Connection) -> rusqlite::Result<Vec<String>> {
    c.prepare("SELECT id FROM users WHERE deleting_at IS NOT NULL ORDER BY deleting_at")?
        .query_map([], |r| r.get(0))?
        .collect()
}

pub fn delete_user(c: &Connection, user_id: &str) -> rusqlite::Result<bool> {
    Ok(c.execute("DELETE FROM users WHERE id = ?1", [user_id])? == 1)
}

/// Rows [`delete_owned_batch`] removes at most, per kind. A lead's delete costs 35–45 µs of
/// the writer's time with its indexes, triggers and search entry, whatever the batch (50 to
/// 2,000 at a time, 100,000 leads of one user), a conversation about 30 µs, a document with
/// its chunks and their search entries about 140 µs: a batch holds the single writer for a
/// few milliseconds. Larger batches write fewer WAL pages a lead (1.4 at 100, 1.1 at 500)
/// but make every other write wait longer.
pub const OWNED_BATCH: i64 = 100;
const DOCUMENTS_BATCH: i64 = 25;

/// Deletes one batch of what the user owns in bulk (leads, then the leads others made on the
/// user's genies, conversations, documents, genies), largest kind first, with what cascades
/// from each; returns how many rows it deleted, 0 when none of those is left. An account's
/// delete runs this until 0, each batch in a transaction of its own, then deletes the user's
/// row with the rest (`delete_user`): one statement over an account with a million leads
/// held the writer, and every other user's write, for 47 s (docs/performance.md, round
/// twenty-nine).
pub fn delete_owned_batch(c: &Connection, user_id: &str) -> rusqlite::Result<usize> {
    let key = super::keys::Key::of(user_id);
    let n = c.execute(
        "DELETE FROM leads WHERE id IN (SELECT id FROM leads WHERE user_id = ?1 LIMIT ?2)",
        params![key, OWNED_BATCH],
    )?;
    if n > 0 {
        return Ok(n);
    }
    let n = c.execute(
        "DELETE FROM leads WHERE id IN (SELECT l.id FROM genies g JOIN leads l ON l.agent_id = g.key
                                        WHERE g.user_id = ?1 LIMIT ?2)",
        params![user_id, OWNED_BATCH],
    )?;
    if n > 0 {
        return Ok(n);
    }
    for (table, limit) in [
        ("conversations", OWNED_BATCH),
        ("documents", DOCUMENTS_BATCH),
        ("genies", OWNED_BATCH),
    ] {
        let n = c.execute(
            &format!(
                "DELETE FROM {table} WHERE id IN (SELECT id FROM {table} WHERE user_id = ?1 LIMIT ?2)"
            ),
            params![user_id, limit],
        )?;
        if n > 0 {
            return Ok(n);
        }
    }
    Ok(0)
}

pub fn admin_count(c: &Connection) -> rusqlite::Result<i64> {
    c.query_row(
        "SELECT COUNT(*) FROM users WHERE role = 'internal_admin' AND disabled_at IS NULL",
        [],
        |r| r.get(0),
    )
}

/// Revokes every live session of the user; returns how many. Each revocation bumps the
/// authentication epoch (V10), so the revoked access tokens stop on their next request.
pub fn revoke_sessions(c: &Connection, user_id: &str) -> rusqlite::Result<usize> {
    c.execute(
        "UPDATE sessions SET revoked_at = ?2, refresh_hash = NULL
         WHERE user_id = ?1 AND revoked_at IS NULL",
        [user_id, &now()],
    )
}

// ---- one-time account tokens ----

pub const PASSWORD_RESET: &str = "password_reset";
pub const EMAIL_CHANGE: &str = "email_change";

/// Stores a token's hash. Earlier unused tokens of the same purpose stop working, so only
/// the newest link mailed or printed is valid.
pub fn insert_token(
    c: &Connection,
    token_hash: &str,
    user_id: &str,
    purpose: &str,
    new_email: Option<&str>,
    expires_at: &str,
) -> rusqlite::Result<()> {
    let ts = now();
    c.execute(
        "UPDATE account_tokens SET used_at = ?3
         WHERE user_id = ?1 AND purpose = ?2 AND used_at IS NULL",
        params![user_id, purpose, ts],
    )?;
    c.execute(
        "INSERT INTO account_tokens (token_hash, user_id, purpose, new_email, expires_at, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![token_hash, user_id, purpose, new_email, expires_at, ts],
    )?;
    Ok(())
}

/// Spends a token: when `token_hash` names an unused, unexpired token of `purpose`, marks it
/// used and returns `(user_id, new_email)`.
pub fn take_token(
    c: &Connection,
    token_hash: &str,
    purpose: &str,
) -> rusqlite::Result<Option<(String, Option<String>)>> {
    let ts = now();
    let found = c
        .query_row(
            "SELECT user_id, new_email FROM account_tokens
             WHERE token_hash = ?1 AND purpose = ?2 AND used_at IS NULL AND expires_at > ?3",
            params![token_hash, purpose, ts],
            |r| Ok((r.get::<_, String>(0)?, r.get::<_, Option<String>>(1)?)),
        )
        .optional()?;
    if found.is_some() {
        c.execute(
            "UPDATE account_tokens SET used_at = ?2 WHERE token_hash = ?1",
            params![token_hash, ts],
        )?;
    }
    Ok(found)
}

/// The user a token (of any purpose, spent or not) belongs to; the caller spends it with
/// [`take_token`], which checks purpose, use and expiry.
pub fn token_user(c: &Connection, token_hash: &str) -> rusqlite::Result<Option<String>> {
    c.query_row(
        "SELECT user_id FROM account_tokens WHERE token_hash = ?1",
        [token_hash],
        |r| r.get(0),
    )
    .optional()
}

/// Marks every unused token of the user used (after a password change or reset).
pub fn spend_tokens(c: &Connection, user_id: &str) -> rusqlite::Result<()> {
    c.execute(
        "UPDATE account_tokens SET used_at = ?2 WHERE user_id = ?1 AND used_at IS NULL",
        [user_id, &now()],
    )?;
    Ok(())
}

// ---- account invitations ----

#[derive(Debug, Clone, Serialize)]
pub struct Invitation {
    pub id: String,
    pub email: String,
    pub role: Role,
    pub full_name: Option<String>,
    pub status: String,
    pub invited_by: String,
    pub expires_at: String,
    pub created_at: String,
    pub responded_at: Option<String>,
    pub user_id: Option<String>,
}

const INV_COLS: &str =
    "id, email, role, full_name, status, invited_by, expires_at, created_at, responded_at, user_id";

fn inv_row(r: &Row) -> rusqlite::Result<Invitation> {
    let role: String = r.get(2)?;
    Ok(Invitation {
        id: r.get(0)?,
        email: r.get(1)?,
        role: Role::parse(&role).unwrap_or(Role::Consumer),
        full_name: r.get(3)?,
        status: r.get(4)?,
        invited_by: r.get(5)?,
        expires_at: r.get(6)?,
        created_at: r.get(7)?,
        responded_at: r.get(8)?,
        user_id: r.get(9)?,
    })
}

/// A pending invitation; an earlier pending one to the same address is revoked.
pub fn invite(
    c: &Connection,
    email: &str,
    role: Role,
    full_name: Option<&str>,
    token_hash: &str,
    invited_by: &str,
    expires_at: &str,
) -> rusqlite::Result<Invitation> {
    let (id, ts) = (new_id(), now());
    c.execute(
        "UPDATE account_invitations SET status = 'revoked', responded_at = ?2
         WHERE email = ?1 AND status = 'pending'",
        params![email, ts],
    )?;
    c.execute(
        "INSERT INTO account_invitations
           (id, email, role, full_name, token_hash, status, invited_by, expires_at, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, 'pending', ?6, ?7, ?8)",
        params![
            id,
            email,
            role.as_str(),
            full_name,
            token_hash,
            invited_by,
            expires_at,
            ts
        ],
    )?;
    Ok(invitation(c, &id)?.expect("row just inserted"))
}

pub fn invitation(c: &Connection, id: &str) -> rusqlite::Result<Option<Invitation>> {
    c.query_row(
        &format!("SELECT {INV_COLS} FROM account_invitations WHERE id = ?1"),
        [id],
        inv_row,
    )
    .optional()
}

/// The pending, unexpired invitation a token names.
pub fn live_invitation_by_hash(
    c: &Connection,
    token_hash: &str,
) -> rusqlite::Result<Option<Invitation>> {
    c.query_row(
        &format!(
            "SELECT {INV_COLS} FROM account_invitations
             WHERE token_hash = ?1 AND status = 'pending' AND expires_at > ?2"
        ),
        [token_hash, &now()],
        inv_row,
    )
    .optional()
}

pub fn invitations(c: &Connection, status: Option<&str>) -> rusqlite::Result<Vec<Invitation>> {
    let mut st = c.prepare(&format!(
        "SELECT {INV_COLS} FROM account_invitations
         WHERE ?1 IS NULL OR status = ?1 ORDER BY created_at DESC, id DESC"
    ))?;
    st.query_map([status], inv_row)?.collect()
}

/// Moves a pending invitation to `status`; false when it was no longer pending.
pub fn respond(
    c: &Connection,
    id: &str,
    status: &str,
    user_id: Option<&str>,
) -> rusqlite::Result<bool> {
    Ok(c.execute(
        "UPDATE account_invitations SET status = ?2, responded_at = ?3, user_id = ?4
         WHERE id = ?1 AND status = 'pending'",
        params![id, status, now(), user_id],
    )? == 1)
}

// ---- identities at OpenID providers ----

pub fn identities(c: &Connection, user_id: &str) -> rusqlite::Result<Vec<Identity>> {
    let mut st = c.prepare_cached(
        "SELECT issuer, subject, email, created_at, last_login_at FROM user_identities
         WHERE user_id = ?1 ORDER BY created_at",
    )?;
    st.query_map([user_id], |r| {
        Ok(Identity {
            issuer: r.get(0)?,
            subject: r.get(1)?,
            email: r.get(2)?,
            created_at: r.get(3)?,
            last_login_at: r.get(4)?,
        })
    })?
    .collect()
}

/// The user linked to `(issuer, subject)`, recording the sign-in.
pub fn identity_user(
    c: &Connection,
    issuer: &str,
    subject: &str,
) -> rusqlite::Result<Option<String>> {
    let uid: Option<String> = c
        .query_row(
            "SELECT user_id FROM user_identities WHERE issuer = ?1 AND subject = ?2",
            [issuer, subject],
            |r| r.get(0),
        )
        .optional()?;
    if uid.is_some() {
        c.execute(
            "UPDATE user_identities SET last_login_at = ?3 WHERE issuer = ?1 AND subject = ?2",
            params![issuer, subject, now()],
        )?;
    }
    Ok(uid)
}

pub fn link_identity(
    c: &Connection,
    issuer: &str,
    subject: &str,
    user_id: &str,
    email: Option<&str>,
) -> rusqlite::Result<()> {
    let ts = now();
    c.execute(
        "INSERT INTO user_identities (issuer, subject, user_id, email, created_at, last_login_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
        params![issuer, subject, user_id, email, ts],
    )?;
    Ok(())
}
