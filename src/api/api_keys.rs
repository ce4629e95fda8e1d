//! The `api-keys` resource: a user's keys for external integrations. Reached with session
//! tokens only (enforced in `auth::authenticate`). At most five active keys per user; the
//! check runs inside the writer's transaction, so concurrent creates cannot make a sixth.

use super::action::{Action, Handler, Resource, handler, schema};
use serde::Deserialize;
use serde_json::json;

use super::{ActionRequest, Ctx, Reply};
use crate::auth::keys;
use crate::db::{self, api_keys::MAX_ACTIVE_PER_USER};
use crate::error::{ApiError, ApiResult};
use crate::events::Event;

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateKey {
    name: String,
}

pub async fn handle(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    match req.action.as_str() {
        "all" | "list" => {
            let keys = ctx
                .db()
                .read(move |c| Ok(db::api_keys::list(c, &uid)?))
                .await?;
            Ok(Reply::ok(json!({"count": keys.len(), "api_keys": keys})))
        }
        "create" => {
            let body: CreateKey = req.data()?;
            let name = body.name.trim().to_string();
            if name.is_empty() || name.chars().count() > 100 {
                return Err(ApiError::validation(
                    "data.name is required and must be at most 100 characters",
                ));
            }
            let new = keys::generate(false);
            let (prefix, hash) = (new.display_prefix.clone(), new.hash.clone());
            let record = ctx
                .db()
                .write(move |c| {
                    if db::api_keys::count_active(c, &uid)? >= MAX_ACTIVE_PER_USER {
                        return Err(ApiError::validation(format!(
                            "at most {MAX_ACTIVE_PER_USER} active API keys per user; revoke an existing key first"
                        )));
                    }
                    Ok(db::api_keys::insert(c, &uid, &name, &prefix, &hash)?)
                })
                .await?;
            ctx.app
                .bus
                .emit(Event::new("api_key.created", ctx.user_id(), json!(record)));
            let mut shown = json!(record);
            shown["key"] = json!(new.secret);
            Ok(Reply::created(json!({"api_key": shown}))
                .record(&record.id)
                .summary(format!("created API key '{}'", record.name)))
        }
        "revoke" => {
            let id = req.uuid()?;
            let record = ctx
                .db()
                .write(move |c| {
                    db::api_keys::revoke(c, &uid, &id)?
                        .ok_or_else(|| ApiError::not_found("API key"))
                })
                .await?;
            ctx.app
                .bus
                .emit(Event::new("api_key.revoked", ctx.user_id(), json!(record)));
            Ok(Reply::ok(json!({"api_key": record}))
                .summary(format!("revoked API key '{}'", record.name)))
        }
        "delete" => {
            let id = req.uuid()?;
            let id2 = id.clone();
            let gone = ctx
                .db()
                .write(move |c| Ok(db::api_keys::delete(c, &uid, &id2)?))
                .await?;
            if !gone {
                return Err(ApiError::not_found("API key"));
            }
            Ok(Reply::deleted(&id))
        }
        other => Err(ApiError::invalid_action(req.resource, other)),
    }
}

/// Every `api-keys` action; see `api::action`.
pub const RESOURCE: Resource = Resource {
    name: "api-keys",
    list_action: "list",
    actions: &[
        Action::read("all", H),
        Action::read("list", H),
        Action::write("create", H)
            .data(schema::<CreateKey>)
            .conflict(),
        Action::write("revoke", H).id(),
        Action::write("delete", H).id(),
    ],
};

const H: Handler = handler!(handle);
