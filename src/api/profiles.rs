//! The `profiles` resource: the caller's own account data. Admins may read anyone's.

use super::action::{Access, Action, Resource, handler, schema};
use serde::Deserialize;
use serde_json::{Value, json};

use super::double_option;
use super::{ActionRequest, Ctx, Reply, page};
use crate::auth::sessions;
use crate::db::{self, users::ProfileUpdate};
use crate::error::{ApiError, ApiResult};
use crate::service::{self, accounts::EmailChange};

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpdateProfile {
    #[serde(default, deserialize_with = "double_option::deserialize")]
    #[schemars(with = "Option<String>")]
    full_name: Option<Option<String>>,
    #[serde(default, deserialize_with = "double_option::deserialize")]
    #[schemars(with = "Option<String>")]
    avatar_url: Option<Option<String>>,
    #[serde(default, deserialize_with = "double_option::deserialize")]
    #[schemars(with = "Option<String>")]
    timezone: Option<Option<String>>,
    preferences: Option<Value>,
}

#[derive(Deserialize, Default, schemars::JsonSchema)]
pub(crate) struct ListUsers {
    limit: Option<i64>,
    offset: Option<i64>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ChangePassword {
    current_password: String,
    new_password: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ChangeEmail {
    new_email: String,
    /// Required when the account has a password.
    current_password: Option<String>,
}

/// Changes the caller's password; every session of theirs (this one too) is revoked, and the
/// answer carries a new session so the caller stays signed in.
async fn change_password(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let body: ChangePassword = req.data()?;
    let revoked = service::accounts::change_password(
        &ctx.app,
        ctx.user_id(),
        body.current_password,
        body.new_password,
    )
    .await?;
    let c = &ctx.app.config;
    let pair = sessions::open(
        ctx.db(),
        &ctx.app.secrets.jwt_key,
        ctx.user_id(),
        ctx.principal.role,
        c.session_ttl_seconds,
        c.refresh_ttl_seconds,
    )
    .await?;
    Ok(
        Reply::ok(json!({"changed": true, "sessions_revoked": revoked, "session": pair}))
            .record(ctx.user_id())
            .summary(format!("changed the password; revoked {revoked} sessions")),
    )
}

async fn change_email(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let body: ChangeEmail = req.data()?;
    match service::accounts::change_email(
        &ctx.app,
        ctx.user_id(),
        &body.new_email,
        body.current_password,
    )
    .await?
    {
        EmailChange::Changed(user) => {
            let s = format!("changed the email to {}", user.email);
            Ok(Reply::ok(json!({"status": "changed", "profile": user}))
                .record(ctx.user_id())
                .summary(s))
        }
        EmailChange::Pending { email, expires_at } => {
            let s = format!("asked to change the email to {email} (confirmation mailed)");
            Ok(Reply::ok(
                json!({"status": "confirmation_sent", "email": email, "expires_at": expires_at}),
            )
            .record(ctx.user_id())
            .summary(s))
        }
    }
}

async fn get(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    // Without an id (or with one's own) a user reads their own profile.
    let target = match &req.id {
        None | Some(Value::Null) => ctx.user_id().to_string(),
        Some(_) => req.uuid()?,
    };
    if target != ctx.user_id() && !ctx.principal.is_admin() {
        return Err(ApiError::not_found("profile"));
    }
    let user = ctx
        .db()
        .read(move |c| Ok(db::users::get(c, &target)?))
        .await?;
    Ok(Reply::ok(
        json!({"profile": user.ok_or_else(|| ApiError::not_found("profile"))?}),
    ))
}

async fn list(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    ctx.principal.require_admin()?;
    let q: ListUsers = req.data()?;
    let (limit, offset) = page(q.limit, q.offset, 50, 500)?;
    let (users, total) = ctx
        .db()
        .read(move |c| Ok((db::users::list(c, limit, offset)?, db::users::count(c)?)))
        .await?;
    Ok(Reply::ok(
        json!({"profiles": users, "count": total, "limit": limit, "offset": offset}),
    ))
}

async fn update(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    if let Ok(id) = req.uuid()
        && id != ctx.user_id()
    {
        return Err(ApiError::forbidden(
            "profiles can only be updated by their owner",
        ));
    }
    let body: UpdateProfile = req.data()?;
    let update = validate(body)?;
    let uid = ctx.user_id().to_string();
    let user = ctx
        .db()
        .write(move |c| {
            db::users::update_profile(c, &uid, &update)?;
            Ok(db::users::get(c, &uid)?)
        })
        .await?
        .ok_or_else(|| ApiError::not_found("profile"))?;
    Ok(Reply::ok(json!({"profile": user}))
        .record(ctx.user_id())
        .summary("updated profile"))
}

fn validate(b: UpdateProfile) -> ApiResult<ProfileUpdate> {
    if let Some(Some(n)) = &b.full_name
        && n.chars().count() > 200
    {
        return Err(ApiError::validation(
            "data.full_name must be at most 200 characters",
        ));
    }
    if let Some(Some(u)) = &b.avatar_url
        && !(u.starts_with("https://") || u.starts_with("http://"))
    {
        return Err(ApiError::validation(
            "data.avatar_url must be an http(s) URL",
        ));
    }
    if let Some(Some(tz)) = &b.timezone
        && tz.parse::<chrono_tz::Tz>().is_err()
    {
        return Err(ApiError::validation(format!(
            "data.timezone: unknown time zone '{tz}' (use an IANA name such as Europe/Berlin)"
        )));
    }
    if let Some(p) = &b.preferences
        && !p.is_object()
    {
        return Err(ApiError::validation("data.preferences must be an object"));
    }
    Ok(ProfileUpdate {
        full_name: b.full_name,
        avatar_url: b.avatar_url,
        timezone: b.timezone,
        preferences: b.preferences,
    })
}

/// Every `profiles` action; see `api::action`.
pub const RESOURCE: Resource = Resource {
    name: "profiles",
    list_action: "all",
    actions: &[
        Action::read("all", handler!(list)).data(schema::<ListUsers>),
        Action::read("list", handler!(list)).data(schema::<ListUsers>),
        Action::read("get", handler!(get)).id(),
        Action::new("update", Access::ConsumerWrite, handler!(update))
            .optional_id()
            .data(schema::<UpdateProfile>)
            .conflict(),
        Action::new(
            "change-password",
            Access::ConsumerWrite,
            handler!(change_password),
        )
        .data(schema::<ChangePassword>),
        Action::new(
            "change-email",
            Access::ConsumerWrite,
            handler!(change_email),
        )
        .data(schema::<ChangeEmail>)
        .conflict()
        .upstream(),
    ],
};
