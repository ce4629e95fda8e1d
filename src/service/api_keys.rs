//! API keys: the five-active-keys rule, for keys made through the API and by the admin CLI
//! alike. The count and the insert share the writer's transaction, so concurrent creates
//! cannot make a sixth.

use crate::db::sql::Connection;
use serde_json::json;

use crate::auth::keys::{self, NewKey};
use crate::db::{self, Db, api_keys::ApiKey, api_keys::MAX_ACTIVE_PER_USER};
use crate::error::{ApiError, ApiResult};
use crate::events::{self, Event};
use crate::state::AppState;

/// A new key: its record, and the full secret, which is shown this once and never stored.
pub struct Created {
    pub record: ApiKey,
    pub secret: String,
}

/// Creates a user key (not an admin key) and records `api_key.created`.
pub async fn create(app: &AppState, user_id: &str, name: &str) -> ApiResult<Created> {
    let new = keys::generate(false);
    let (uid, name, prefix, hash) = (
        user_id.to_string(),
        name.to_string(),
        new.display_prefix.clone(),
        new.hash.clone(),
    );
    let (record, created) = app
        .db
        .write(move |c| {
            let record = insert(c, &uid, &name, &prefix, &hash)?;
            let e = Event::new("api_key.created", &uid, json!(record));
            Ok((record, events::record(c, e)?))
        })
        .await?;
    app.bus.emit(created);
    Ok(Created {
        record,
        secret: new.secret,
    })
}

/// For the admin CLI, which has a database but no running service (so no bus); `admin`
/// makes an admin key.
pub fn create_blocking(db: &Db, user_id: &str, name: &str, admin: bool) -> ApiResult<Created> {
    let NewKey {
        secret,
        hash,
        display_prefix,
    } = keys::generate(admin);
    let record = db.write_blocking(|c| insert(c, user_id, name, &display_prefix, &hash))?;
    Ok(Created { record, secret })
}

fn insert(
    c: &Connection,
    user_id: &str,
    name: &str,
    prefix: &str,
    hash: &str,
) -> ApiResult<ApiKey> {
    if db::api_keys::count_active(c, user_id)? >= MAX_ACTIVE_PER_USER {
        return Err(ApiError::validation(format!(
            "at most {MAX_ACTIVE_PER_USER} active API keys per user; revoke an existing key first"
        )));
    }
    Ok(db::api_keys::insert(c, user_id, name, prefix, hash)?)
}

/// Revokes one of `user_id`'s keys and records `api_key.revoked`.
pub async fn revoke(app: &AppState, user_id: &str, id: &str) -> ApiResult<ApiKey> {
    let (uid, id) = (user_id.to_string(), id.to_string());
    let (record, revoked) = app
        .db
        .write(move |c| {
            let record = db::api_keys::revoke(c, &uid, &id)?
                .ok_or_else(|| ApiError::not_found("API key"))?;
            let e = Event::new("api_key.revoked", &uid, json!(record));
            Ok((record, events::record(c, e)?))
        })
        .await?;
    app.bus.emit(revoked);
    Ok(record)
}
