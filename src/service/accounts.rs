//! Accounts: the password policy applied wherever a password is set, password change and
//! reset, email change, invitations that create the account on acceptance, the admin's
//! users (disable, role, delete), and the account an OpenID sign-in lands in.
//!
//! Tokens (reset, email change, invitation) are 256 random bits, mailed or printed once;
//! only their SHA-256 is stored. A password change or reset revokes every session of the
//! user in the same transaction that sets the password.

use crate::db::sql::Connection;
use base64::Engine;
use rand::RngCore;

use crate::auth::{keys, passwords};
use crate::db::accounts::{self as repo, Account, Invitation};
use crate::db::users::{Role, User};
use crate::db::{self, activities};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

pub fn new_token() -> String {
    let mut b = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut b);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)
}

fn token_hash(token: &str) -> String {
    keys::hash(token.trim())
}

/// The console page a mailed or printed link opens: `<base>/console#<what>=<token>`.
pub fn console_link(base: &str, what: &str, token: &str) -> String {
    format!("{}/console#{what}={token}", base.trim_end_matches('/'))
}

/// A loose email check (one `@`, a dotted or `localhost` domain, no spaces); the mail server
/// is the judge of the rest.
pub fn valid_email(e: &str) -> bool {
    match e.split_once('@') {
        Some((l, d)) => {
            !l.is_empty()
                && !d.is_empty()
                && !d.contains('@')
                && (d.contains('.') || d == "localhost")
                && !d.starts_with('.')
                && !d.ends_with('.')
                && !e.contains(char::is_whitespace)
                && e.len() <= 254
        }
        None => false,
    }
}

/// The password policy (see `auth::passwords::check_policy`) as a validation error naming
/// `field`.
pub fn check_password(
    min_len: u16,
    field: &str,
    password: &str,
    context: &[&str],
) -> ApiResult<()> {
    passwords::check_policy(password, usize::from(min_len), context)
        .map_err(|why| ApiError::validation(format!("{field}: {why}")))
}

/// Hashes on a blocking thread: argon2 takes tens of milliseconds by design.
async fn hash(password: String) -> ApiResult<String> {
    db::run_blocking(move || passwords::hash(&password).map_err(ApiError::internal)).await
}

async fn verify(password: String, stored: String) -> ApiResult<bool> {
    db::run_blocking(move || Ok(passwords::verify(&password, &stored))).await
}

fn activity(
    c: &Connection,
    user_id: &str,
    action: &str,
    summary: &str,
    ip: Option<&str>,
) -> rusqlite::Result<()> {
    activities::insert(
        c,
        &activities::NewActivity {
            user_id,
            resource: "auth",
            action,
            record_id: Some(user_id),
            summary,
            ip,
        },
    )
}

fn expiry_minutes(minutes: u64) -> String {
    db::fmt_time(chrono::Utc::now() + chrono::Duration::minutes(minutes as i64))
}

/// Creates a one-time token inside the caller's transaction and returns it.
pub fn create_token(
    c: &Connection,
    user_id: &str,
    purpose: &str,
    new_email: Option<&str>,
    ttl_minutes: u64,
) -> rusqlite::Result<String> {
    let token = new_token();
    repo::insert_token(
        c,
        &token_hash(&token),
        user_id,
        purpose,
        new_email,
        &expiry_minutes(ttl_minutes),
    )?;
    Ok(token)
}

fn user(c: &Connection, user_id: &str) -> ApiResult<User> {
    db::users::get(c, user_id)?.ok_or_else(|| ApiError::not_found("user"))
}

// ---- passwords ----

/// Changes the caller's password after checking the current one; every session of the user
/// is revoked. Returns how many sessions were.
pub async fn change_password(
    app: &AppState,
    user_id: &str,
    current: String,
    new: String,
) -> ApiResult<usize> {
    app.limits.check_account(&format!("user:{user_id}"))?;
    let uid = user_id.to_string();
    let (u, stored) = app
        .db
        .read(move |c| Ok((user(c, &uid)?, repo::password_hash(c, &uid)?)))
        .await?;
    let Some(stored) = stored else {
        return Err(ApiError::validation(
            "data.current_password: this account has no password (it signs in with single \
             sign-on or issued tokens); set one with auth/forgot-password",
        ));
    };
    if !verify(current, stored).await? {
        return Err(ApiError::validation(
            "data.current_password is not the account's password",
        ));
    }
    let name = u.full_name.clone().unwrap_or_default();
    check_password(
        app.config.password_min_length,
        "data.new_password",
        &new,
        &[&u.email, &name],
    )?;
    let h = hash(new).await?;
    let uid = user_id.to_string();
    app.db
        .write(move |c| {
            repo::set_password(c, &uid, &h)?;
            repo::spend_tokens(c, &uid)?;
            Ok(repo::revoke_sessions(c, &uid)?)
        })
        .await
}

/// Starts a reset for `email`: when an active account has it, a one-time link is mailed (in
/// the background, so the answer takes the same time either way). The caller answers the
/// same whatever happens here.
pub async fn forgot_password(app: &AppState, email: &str, ip: Option<String>) -> ApiResult<()> {
    app.limits.check_account(email)?;
    let e = email.to_string();
    let found = app
        .db
        .read(move |c| Ok(db::users::credentials(c, &e)?))
        .await?;
    let Some((u, _, false)) = found else {
        return Ok(());
    };
    if !app.mail.smtp_configured() {
        tracing::warn!(
            "a password reset was asked for, but no --smtp-url is configured to mail it; an \
             operator can print a link with `genied admin reset-password`"
        );
        return Ok(());
    }
    let ttl = app.config.password_reset_ttl_minutes;
    let uid = u.id.clone();
    let token = app
        .db
        .write(move |c| {
            let t = create_token(c, &uid, repo::PASSWORD_RESET, None, ttl)?;
            activity(
                c,
                &uid,
                "forgot-password",
                "asked for a password reset link",
                ip.as_deref(),
            )?;
            Ok(t)
        })
        .await?;
    let link = console_link(&app.config.public_base(), "reset-password", &token);
    let body = format!(
        "Someone (hopefully you) asked to reset the password of your genied account {}.\n\n\
         Choose a new password here (the link works once, for {ttl} minutes):\n{link}\n\n\
         Or send POST /v1/auth/reset-password {{\"token\": \"{token}\", \"new_password\": \"...\"}}.\n\n\
         If you did not ask for this, ignore this message: your password stays as it is.\n",
        u.email
    );
    let app = app.clone();
    tokio::spawn(async move {
        if let Err(e) = app
            .mail
            .email_secret(
                &u.id,
                &u.email,
                "Reset your genied password",
                &body,
                &body.replace(&token, "<token>"),
            )
            .await
        {
            tracing::warn!(error = %e.message, "could not record the password reset mail");
        }
    });
    Ok(())
}

/// Sets a new password with a reset token; the token is spent and every session revoked.
pub async fn reset_password(
    app: &AppState,
    token: &str,
    new: String,
    ip: Option<String>,
) -> ApiResult<()> {
    let invalid = || ApiError::validation("token: the reset link is invalid, used or expired");
    let th = token_hash(token);
    let t2 = th.clone();
    let u = app
        .db
        .read(move |c| {
            Ok(match repo::token_user(c, &t2)? {
                Some(uid) => db::users::get(c, &uid)?,
                None => None,
            })
        })
        .await?
        .ok_or_else(invalid)?;
    app.limits.check_account(&format!("user:{}", u.id))?;
    let name = u.full_name.clone().unwrap_or_default();
    check_password(
        app.config.password_min_length,
        "new_password",
        &new,
        &[&u.email, &name],
    )?;
    let h = hash(new).await?;
    app.db
        .write(move |c| {
            let Some((uid, _)) = repo::take_token(c, &th, repo::PASSWORD_RESET)? else {
                return Err(invalid());
            };
            repo::set_password(c, &uid, &h)?;
            repo::spend_tokens(c, &uid)?;
            let n = repo::revoke_sessions(c, &uid)?;
            activity(
                c,
                &uid,
                "reset-password",
                &format!("reset the password with a one-time link; revoked {n} sessions"),
                ip.as_deref(),
            )?;
            Ok(())
        })
        .await
}

/// What `change-email` did: changed it at once (no SMTP) or mailed a confirmation link to
/// the new address.
pub enum EmailChange {
    Changed(User),
    Pending { email: String, expires_at: String },
}

pub async fn change_email(
    app: &AppState,
    user_id: &str,
    new_email: &str,
    current_password: Option<String>,
) -> ApiResult<EmailChange> {
    let email = new_email.trim().to_string();
    if !valid_email(&email) {
        return Err(ApiError::validation(
            "data.new_email must be an email address",
        ));
    }
    app.limits.check_account(&format!("user:{user_id}"))?;
    let (uid, e2) = (user_id.to_string(), email.clone());
    let (stored, taken) = app
        .db
        .read(move |c| {
            Ok((
                repo::password_hash(c, &uid)?,
                db::users::by_email(c, &e2)?.is_some(),
            ))
        })
        .await?;
    // Someone holding a stolen session must not be able to move the account elsewhere (and
    // then reset its password): an account with a password proves it first.
    if let Some(stored) = stored {
        let Some(pw) = current_password else {
            return Err(ApiError::validation(
                "data.current_password is required to change the email",
            ));
        };
        if !verify(pw, stored).await? {
            return Err(ApiError::validation(
                "data.current_password is not the account's password",
            ));
        }
    }
    if taken {
        return Err(ApiError::conflict(format!(
            "another account already uses {email}"
        )));
    }
    let uid = user_id.to_string();
    if !app.mail.smtp_configured() {
        let u = app
            .db
            .write(move |c| {
                if !repo::set_email(c, &uid, &email)? {
                    return Err(ApiError::not_found("user"));
                }
                user(c, &uid)
            })
            .await?;
        return Ok(EmailChange::Changed(u));
    }
    let ttl = app.config.password_reset_ttl_minutes;
    let e2 = email.clone();
    let token = app
        .db
        .write(move |c| Ok(create_token(c, &uid, repo::EMAIL_CHANGE, Some(&e2), ttl)?))
        .await?;
    let link = console_link(&app.config.public_base(), "confirm-email", &token);
    let body = format!(
        "Confirm that {email} is the new address of your genied account (the link works once, \
         for {ttl} minutes):\n{link}\n\nOr send POST /v1/auth/confirm-email {{\"token\": \
         \"{token}\"}}.\n\nIf you did not ask for this, ignore this message.\n"
    );
    let sent = app
        .mail
        .email_secret(
            user_id,
            &email,
            "Confirm your new genied email address",
            &body,
            &body.replace(&token, "<token>"),
        )
        .await?;
    if let Some(o) = sent.filter(|o| o.status != "sent") {
        return Err(ApiError::upstream(format!(
            "the confirmation mail could not be sent: {}",
            o.error.unwrap_or_default()
        )));
    }
    Ok(EmailChange::Pending {
        email,
        expires_at: expiry_minutes(ttl),
    })
}

/// Finishes an email change with the token mailed to the new address.
pub async fn confirm_email(app: &AppState, token: &str, ip: Option<String>) -> ApiResult<User> {
    let th = token_hash(token);
    app.db
        .write(move |c| {
            let Some((uid, Some(email))) = repo::take_token(c, &th, repo::EMAIL_CHANGE)? else {
                return Err(ApiError::validation(
                    "token: the confirmation link is invalid, used or expired",
                ));
            };
            if db::users::by_email(c, &email)?.is_some() {
                return Err(ApiError::conflict(format!(
                    "another account already uses {email}"
                )));
            }
            repo::set_email(c, &uid, &email)?;
            activity(
                c,
                &uid,
                "confirm-email",
                &format!("changed the account's email to {email}"),
                ip.as_deref(),
            )?;
            user(c, &uid)
        })
        .await
}

// ---- invitations ----

/// A new invitation; the token is shown this once (and mailed when SMTP is configured).
pub struct Invited {
    pub invitation: Invitation,
    pub token: String,
    pub link: String,
    /// `sent`, `failed`, or `not_configured` (no SMTP: hand the link over yourself).
    pub mail: &'static str,
}

pub async fn invite(
    app: &AppState,
    by: &str,
    email: &str,
    role: Role,
    full_name: Option<String>,
) -> ApiResult<Invited> {
    let email = email.trim().to_lowercase();
    if !valid_email(&email) {
        return Err(ApiError::validation("data.email must be an email address"));
    }
    let token = new_token();
    let th = token_hash(&token);
    let ttl = app.config.team_invite_ttl_hours.min(24 * 365) as i64;
    let expires = db::fmt_time(chrono::Utc::now() + chrono::Duration::hours(ttl));
    let (by2, e2) = (by.to_string(), email.clone());
    let invitation = app
        .db
        .write(move |c| {
            if db::users::by_email(c, &e2)?.is_some() {
                return Err(ApiError::conflict(format!("{e2} already has an account")));
            }
            Ok(repo::invite(
                c,
                &e2,
                role,
                full_name.as_deref(),
                &th,
                &by2,
                &expires,
            )?)
        })
        .await?;
    let link = console_link(&app.config.public_base(), "accept-invitation", &token);
    let body = format!(
        "You are invited to genied, as {}. Choose your password and sign in here (the link \
         works once, until {}):\n{link}\n\nOr send POST /v1/auth/accept-invitation \
         {{\"token\": \"{token}\", \"password\": \"...\"}}.\n",
        role.as_str(),
        invitation.expires_at
    );
    let mail = match app
        .mail
        .email_secret(
            by,
            &email,
            "You are invited to genied",
            &body,
            &body.replace(&token, "<token>"),
        )
        .await?
    {
        None => "not_configured",
        Some(o) if o.status == "sent" => "sent",
        Some(_) => "failed",
    };
    Ok(Invited {
        invitation,
        token,
        link,
        mail,
    })
}

pub async fn invitations(app: &AppState, status: Option<String>) -> ApiResult<Vec<Invitation>> {
    app.db
        .read(move |c| Ok(repo::invitations(c, status.as_deref())?))
        .await
}

pub async fn revoke_invitation(app: &AppState, id: &str) -> ApiResult<Invitation> {
    let id = id.to_string();
    app.db
        .write(move |c| {
            let inv = repo::invitation(c, &id)?.ok_or_else(|| ApiError::not_found("invitation"))?;
            if !repo::respond(c, &id, "revoked", None)? {
                return Err(ApiError::conflict(format!(
                    "this invitation was already {}",
                    inv.status
                )));
            }
            Ok(repo::invitation(c, &id)?.expect("exists"))
        })
        .await
}

/// What accepting an invitation made: the new account, and the team it joined when the
/// token was a team invitation.
pub struct Accepted {
    pub user: User,
    pub team_id: Option<String>,
}

/// Accepts an account invitation, or a team invitation sent to an address with no account
/// yet: the account is created with the chosen password (and, for a team, joins it).
pub async fn accept_invitation(
    app: &AppState,
    token: &str,
    password: String,
    full_name: Option<String>,
    ip: Option<String>,
) -> ApiResult<Accepted> {
    let invalid = || ApiError::validation("token: the invitation is invalid, used or expired");
    let th = token_hash(token);
    let t2 = th.clone();
    // Which invitation, and for which address: the policy checks the password against it.
    let (email, name) = app
        .db
        .read(move |c| {
            if let Some(i) = repo::live_invitation_by_hash(c, &t2)? {
                return Ok(Some((i.email, i.full_name)));
            }
            Ok(db::teams::invitation_by_hash(c, &t2)?
                .filter(|i| i.status == "pending" && i.expires_at > db::now())
                .map(|i| (i.email, None)))
        })
        .await?
        .ok_or_else(invalid)?;
    app.limits.check_account(&email)?;
    let full_name = full_name.or(name);
    check_password(
        app.config.password_min_length,
        "password",
        &password,
        &[&email, full_name.as_deref().unwrap_or("")],
    )?;
    let h = hash(password).await?;
    app.db
        .write(move |c| {
            let exists = |c: &Connection, email: &str| -> ApiResult<()> {
                if db::users::by_email(c, email)?.is_some() {
                    return Err(ApiError::conflict(format!(
                        "{email} already has an account: sign in and accept the invitation \
                         from there"
                    )));
                }
                Ok(())
            };
            if let Some(inv) = repo::live_invitation_by_hash(c, &th)? {
                exists(c, &inv.email)?;
                let u = db::users::insert(c, &inv.email, full_name.as_deref(), inv.role, Some(&h))?;
                repo::respond(c, &inv.id, "accepted", Some(&u.id))?;
                activity(
                    c,
                    &u.id,
                    "accept-invitation",
                    &format!(
                        "created the account by accepting an invitation as {}",
                        inv.role.as_str()
                    ),
                    ip.as_deref(),
                )?;
                return Ok(Accepted {
                    user: u,
                    team_id: None,
                });
            }
            let inv = db::teams::invitation_by_hash(c, &th)?
                .filter(|i| i.status == "pending" && i.expires_at > db::now())
                .ok_or_else(invalid)?;
            exists(c, &inv.email)?;
            let u = db::users::insert(
                c,
                &inv.email,
                full_name.as_deref(),
                Role::StandardUser,
                Some(&h),
            )?;
            db::teams::respond(c, &inv.id, "accepted")?;
            db::teams::add_member(c, &inv.team_id, &u.id, inv.role)?;
            activity(
                c,
                &u.id,
                "accept-invitation",
                "created the account by accepting a team invitation",
                ip.as_deref(),
            )?;
            Ok(Accepted {
                user: u,
                team_id: Some(inv.team_id),
            })
        })
        .await
}

// ---- the admin's users ----

pub async fn accounts(
    app: &AppState,
    status: Option<String>,
    limit: i64,
    offset: i64,
) -> ApiResult<(Vec<Account>, i64)> {
    app.db
        .read(move |c| Ok(repo::accounts(c, status.as_deref(), limit, offset)?))
        .await
}

pub async fn account(app: &AppState, id: &str) -> ApiResult<Account> {
    let id = id.to_string();
    app.db
        .read(move |c| repo::account(c, &id)?.ok_or_else(|| ApiError::not_found("user")))
        .await
}

fn not_self(admin_id: &str, id: &str, what: &str) -> ApiResult<()> {
    if admin_id == id {
        return Err(ApiError::conflict(format!(
            "you cannot {what} your own account; ask another admin"
        )));
    }
    Ok(())
}

/// Disables or enables an account. Disabling revokes its sessions; its API keys stop
/// working while it is disabled (and work again when it is enabled).
pub async fn set_disabled(
    app: &AppState,
    admin_id: &str,
    id: &str,
    disabled: bool,
) -> ApiResult<Account> {
    not_self(admin_id, id, if disabled { "disable" } else { "enable" })?;
    let id = id.to_string();
    app.db
        .write(move |c| {
            let deleting = repo::status(c, &id)?.is_some_and(|s| s.deleting_at.is_some());
            if !disabled && deleting {
                return Err(ApiError::conflict(
                    "the account is being deleted; it cannot be enabled",
                ));
            }
            if !repo::set_disabled(c, &id, disabled)? {
                return Err(ApiError::not_found("user"));
            }
            if disabled {
                repo::revoke_sessions(c, &id)?;
            }
            repo::account(c, &id)?.ok_or_else(|| ApiError::not_found("user"))
        })
        .await
}

pub async fn set_role(app: &AppState, admin_id: &str, id: &str, role: Role) -> ApiResult<Account> {
    not_self(admin_id, id, "change the role of")?;
    let id = id.to_string();
    app.db
        .write(move |c| {
            if db::users::get(c, &id)?.is_none() {
                return Err(ApiError::not_found("user"));
            }
            db::users::set_role(c, &id, role)?;
            repo::account(c, &id)?.ok_or_else(|| ApiError::not_found("user"))
        })
        .await
}

/// Deletes an account and everything it owns (see docs/api.md, `users`): the rows that
/// reference the user cascade; the activity log keeps its rows.
///
/// The account is disabled and marked as being deleted first, in a transaction of its own,
/// so that nothing of the user's arrives while the rest goes and a start finishes the delete
/// if this process does not ([`resume_deletes`]); then what it owns goes in batches
/// ([`drain`]). The answer waits for the drain at most `--account-delete-wait-seconds`
/// (and half the request timeout); after that the delete goes on without it.
pub async fn delete(app: &AppState, admin_id: &str, id: &str) -> ApiResult<Deletion> {
    not_self(admin_id, id, "delete")?;
    let id = id.to_string();
    let uid = id.clone();
    let user = app
        .db
        .write(move |c| {
            let a = repo::account(c, &uid)?.ok_or_else(|| ApiError::not_found("user"))?;
            if a.disabled_at.is_none() {
                repo::set_disabled(c, &uid, true)?;
            }
            repo::revoke_sessions(c, &uid)?;
            repo::mark_deleting(c, &uid)?;
            Ok(a.user)
        })
        .await?;
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    let drained = {
        let (app, id) = (app.clone(), id.clone());
        async move {
            let result = drain(&app, &id).await;
            if let Err(e) = &result {
                // Said here too: the request may have been answered 202 already.
                tracing::warn!(user = %id, error = %e.message, "an account's delete stopped; the next start tries again");
            }
            let _ = done_tx.send(result);
        }
    };
    // On the service's task set, so a stop ends the drain between batches and the next start
    // resumes it from the mark.
    app.tasks.spawn(drained);
    let c = &app.config;
    let wait = std::time::Duration::from_secs(
        c.account_delete_wait_seconds
            .min(c.request_timeout_seconds / 2),
    );
    let done = match tokio::time::timeout(wait, done_rx).await {
        Ok(Ok(result)) => {
            result?;
            true
        }
        // Still running; or the service is stopping and dropped the drain, which the next
        // start resumes.
        Ok(Err(_)) | Err(_) => false,
    };
    Ok(Deletion { user, done })
}

/// What `users delete` answers: the account, and whether its delete is done or goes on.
pub struct Deletion {
    pub user: User,
    pub done: bool,
}

/// Deletes what the account owns in batches ([`repo::delete_owned_batch`]), each its own
/// write in the writer's turn (`Db::write_in_turn`), so that other users' writes wait for one
/// batch at most and not for the whole account (47 s for one with a million leads); then
/// the user's row with what is left.
/// Running it twice at once, or over an account half drained, is harmless: each batch
/// deletes what is there.
async fn drain(app: &AppState, id: &str) -> ApiResult<()> {
    let (t, mut rows, mut batches) = (std::time::Instant::now(), 0, 0);
    loop {
        let uid = id.to_string();
        let n = app
            .db
            .write_in_turn(move |c| Ok(repo::delete_owned_batch(c, &uid)?))
            .await?;
        if n == 0 {
            break;
        }
        (rows, batches) = (rows + n, batches + 1);
    }
    let uid = id.to_string();
    app.db
        .write(move |c| Ok(repo::delete_user(c, &uid)?))
        .await?;
    tracing::info!(
        user = %id,
        rows,
        batches,
        ms = t.elapsed().as_millis() as u64,
        "deleted an account with its records in batches"
    );
    Ok(())
}

/// Finishes the deletes that a crash or a stop cut short: every account marked as being
/// deleted, one after the other, on the service's task set. Run once at each start.
pub async fn resume_deletes(app: AppState) {
    let ids = match app.db.read(|c| Ok(repo::deleting(c)?)).await {
        Ok(ids) => ids,
        Err(e) => {
            tracing::warn!(error = %e.message, "could not look for unfinished account deletes");
            return;
        }
    };
    if ids.is_empty() {
        return;
    }
    tracing::info!(
        accounts = ids.len(),
        "finishing account deletes that did not finish before the last stop"
    );
    let runner = app.clone();
    app.tasks.spawn(async move {
        for id in ids {
            if let Err(e) = drain(&runner, &id).await {
                tracing::warn!(user = %id, error = %e.message, "an account's delete stopped; the next start tries again");
            }
        }
    });
}

// ---- OpenID Connect ----

/// What a validated ID token says about who signed in.
pub struct OidcLogin {
    pub issuer: String,
    pub subject: String,
    pub email: Option<String>,
    pub email_verified: bool,
    pub name: Option<String>,
    /// The role the claim mapping gives, when a value mapped.
    pub mapped_role: Option<Role>,
}

/// The account an OpenID sign-in lands in: the one linked to (issuer, subject); else, with
/// `link_by_email`, the account with the same verified email, now linked; else, with
/// `create_users`, a new one. A mapped role is applied at every sign-in.
pub async fn oidc_user(app: &AppState, login: OidcLogin, ip: Option<String>) -> ApiResult<User> {
    let c = &app.config;
    let (create, by_email) = (c.oidc_create_users, c.oidc_link_by_email);
    let default_role = Role::parse(&c.oidc_default_role).unwrap_or(Role::StandardUser);
    app.db
        .write(move |c| {
            let linked = repo::identity_user(c, &login.issuer, &login.subject)?;
            let uid = match linked {
                Some(uid) => uid,
                None => {
                    let email = login
                        .email
                        .clone()
                        .map(|e| e.trim().to_lowercase())
                        .filter(|e| valid_email(e));
                    let existing = match &email {
                        Some(e) => db::users::by_email(c, e)?,
                        None => None,
                    };
                    match existing {
                        Some(u) if by_email && login.email_verified => {
                            repo::link_identity(
                                c,
                                &login.issuer,
                                &login.subject,
                                &u.id,
                                email.as_deref(),
                            )?;
                            activity(
                                c,
                                &u.id,
                                "oidc-link",
                                &format!(
                                    "linked the account to {} by its verified email",
                                    login.issuer
                                ),
                                ip.as_deref(),
                            )?;
                            u.id
                        }
                        Some(_) => {
                            return Err(ApiError::forbidden(
                                "an account with this email exists but is not linked to this \
                                 identity provider; ask an admin",
                            ));
                        }
                        None if create => {
                            let Some(email) = email else {
                                return Err(ApiError::forbidden(
                                    "the identity provider gave no usable email, which a new \
                                     account needs",
                                ));
                            };
                            let role = login.mapped_role.unwrap_or(default_role);
                            let u =
                                db::users::insert(c, &email, login.name.as_deref(), role, None)?;
                            repo::link_identity(
                                c,
                                &login.issuer,
                                &login.subject,
                                &u.id,
                                Some(&email),
                            )?;
                            activity(
                                c,
                                &u.id,
                                "oidc-create",
                                &format!(
                                    "created the account at its first sign-in through {}",
                                    login.issuer
                                ),
                                ip.as_deref(),
                            )?;
                            u.id
                        }
                        None => {
                            return Err(ApiError::forbidden(
                                "no genied account is linked to this identity and this service \
                                 does not create accounts at sign-in; ask an admin for an \
                                 invitation",
                            ));
                        }
                    }
                }
            };
            let disabled = repo::status(c, &uid)?.and_then(|s| s.disabled_at);
            if disabled.is_some() {
                return Err(ApiError::forbidden("this account is disabled"));
            }
            if let Some(role) = login.mapped_role {
                let u = user(c, &uid)?;
                if u.role != role {
                    db::users::set_role(c, &uid, role)?;
                }
            }
            activity(
                c,
                &uid,
                "oidc-login",
                &format!("signed in through {}", login.issuer),
                ip.as_deref(),
            )?;
            user(c, &uid)
        })
        .await
}
