//! Webhook endpoint operations: creating and changing a user's endpoints (the address
//! guard and the event-type catalogue checked once, here), their signing secrets (shown
//! once, stored sealed with the master key), a test delivery answered on the spot, and
//! replaying a past delivery. Delivering events is the engine's (`crate::webhooks`).

use serde_json::json;

use crate::db;
use crate::db::webhooks::{self as repo, Delivery, NewWebhook, Patch, Webhook};
use crate::error::{ApiError, ApiResult};
use crate::events::{EVENT_TYPES, Event};
use crate::state::AppState;
use crate::webhooks::{self as engine, AttemptResult};

fn check_types(types: &[String]) -> ApiResult<()> {
    if types.is_empty() {
        return Err(ApiError::validation(
            "data.event_types must name at least one event type (or \"*\")",
        ));
    }
    match types.iter().find(|t| !engine::valid_pattern(t)) {
        Some(bad) => Err(ApiError::validation(format!(
            "data.event_types: unknown event type '{bad}'; use one of {} or a 'family.*' wildcard",
            EVENT_TYPES.join(", ")
        ))),
        None => Ok(()),
    }
}

/// The address guard at create and update, with the name resolved now: a receiver on an
/// internal address is refused here rather than retried for hours by the delivery job.
async fn check_url(app: &AppState, url: &str) -> ApiResult<String> {
    let u = app
        .net
        .check_resolved(url)
        .await
        .map_err(|e| ApiError::validation(format!("data.url: {e}")))?;
    Ok(u.to_string())
}

fn check_description(d: Option<&str>) -> ApiResult<()> {
    if d.is_some_and(|d| d.chars().count() > 500) {
        return Err(ApiError::validation(
            "data.description must be at most 500 characters",
        ));
    }
    Ok(())
}

pub async fn list(app: &AppState, user_id: &str) -> ApiResult<Vec<Webhook>> {
    let uid = user_id.to_string();
    app.db.read(move |c| Ok(repo::list(c, &uid)?)).await
}

/// One of the user's endpoints; anyone else's reads as absent.
pub async fn get(app: &AppState, user_id: &str, id: &str) -> ApiResult<Webhook> {
    let (uid, id) = (user_id.to_string(), id.to_string());
    app.db
        .read(move |c| Ok(repo::get(c, &uid, &id)?))
        .await?
        .ok_or_else(|| ApiError::not_found("webhook"))
}

/// Creates an endpoint for `event_types` (every event when `None`); returns it and its
/// signing secret, which is not shown again.
pub async fn create(
    app: &AppState,
    user_id: &str,
    url: &str,
    description: Option<String>,
    event_types: Option<Vec<String>>,
) -> ApiResult<(Webhook, String)> {
    let url = check_url(app, url).await?;
    let types = event_types.unwrap_or_else(|| vec!["*".into()]);
    check_types(&types)?;
    check_description(description.as_deref())?;
    let id = db::new_id();
    let secret = engine::new_secret();
    let prefix = engine::secret_prefix(&secret);
    let (uid, plain, state) = (user_id.to_string(), secret.clone(), app.clone());
    let hook = app
        .db
        .write(move |c| {
            let sealed = engine::seal_secret(&state, c, &id, &plain)?;
            repo::insert(
                c,
                &NewWebhook {
                    id: &id,
                    user_id: &uid,
                    url: &url,
                    description: description.as_deref(),
                    event_types: &types,
                    sealed: &sealed,
                    secret_prefix: &prefix,
                },
            )?;
            Ok(repo::get(c, &uid, &id)?.expect("row just inserted"))
        })
        .await?;
    Ok((hook, secret))
}

/// Changes an endpoint of the user's; a new `url` passes the address guard first.
pub async fn update(
    app: &AppState,
    user_id: &str,
    id: &str,
    mut patch: Patch,
) -> ApiResult<Webhook> {
    if let Some(u) = patch.url.take() {
        patch.url = Some(check_url(app, &u).await?);
    }
    if let Some(t) = &patch.event_types {
        check_types(t)?;
    }
    check_description(patch.description.as_ref().and_then(|d| d.as_deref()))?;
    let (uid, id) = (user_id.to_string(), id.to_string());
    app.db
        .write(move |c| {
            if !repo::update(c, &uid, &id, &patch)? {
                return Err(ApiError::not_found("webhook"));
            }
            Ok(repo::get(c, &uid, &id)?.expect("row exists"))
        })
        .await
}

pub async fn delete(app: &AppState, user_id: &str, id: &str) -> ApiResult<()> {
    let (uid, id) = (user_id.to_string(), id.to_string());
    if !app
        .db
        .write(move |c| Ok(repo::delete(c, &uid, &id)?))
        .await?
    {
        return Err(ApiError::not_found("webhook"));
    }
    Ok(())
}

/// Gives an endpoint a new signing secret (the old one stops working at once); returns
/// the endpoint and the secret, which is not shown again.
pub async fn rotate_secret(
    app: &AppState,
    user_id: &str,
    id: &str,
) -> ApiResult<(Webhook, String)> {
    let secret = engine::new_secret();
    let prefix = engine::secret_prefix(&secret);
    let (uid, id, plain, state) = (
        user_id.to_string(),
        id.to_string(),
        secret.clone(),
        app.clone(),
    );
    let hook = app
        .db
        .write(move |c| {
            repo::get(c, &uid, &id)?.ok_or_else(|| ApiError::not_found("webhook"))?;
            let sealed = engine::seal_secret(&state, c, &id, &plain)?;
            repo::set_secret(c, &id, &sealed, &prefix)?;
            Ok(repo::get(c, &uid, &id)?.expect("row exists"))
        })
        .await?;
    Ok((hook, secret))
}

/// Sends a `webhook.test` event to an endpoint once, now, so the caller sees what their
/// receiver answered; a failed test is not retried. Returns the delivery and the attempt.
pub async fn test(
    app: &AppState,
    user_id: &str,
    id: &str,
) -> ApiResult<(Option<Delivery>, AttemptResult)> {
    let event = Event::new(
        engine::TEST_EVENT,
        user_id,
        json!({"message": "This is a test event from genied.", "webhook_id": id}),
    );
    let body = serde_json::to_string(&event)?;
    let (uid, id) = (user_id.to_string(), id.to_string());
    let delivery = app
        .db
        .write(move |c| {
            repo::get(c, &uid, &id)?.ok_or_else(|| ApiError::not_found("webhook"))?;
            let d = db::new_id();
            repo::insert_delivery(c, &d, &id, &event.id, &event.kind, &body)?;
            Ok(d)
        })
        .await?;
    let result = engine::attempt(app, &delivery).await?;
    if !result.succeeded {
        let d = delivery.clone();
        app.db
            .write(move |c| Ok(repo::fail_delivery(c, &d).map(|_| ())?))
            .await?;
    }
    let uid = user_id.to_string();
    let record = app
        .db
        .read_snapshot(move |c| Ok(repo::delivery(c, &uid, &delivery)?))
        .await?;
    Ok((record, result))
}

/// One page of an endpoint's deliveries, newest first, and their total.
pub async fn deliveries(
    app: &AppState,
    user_id: &str,
    id: &str,
    limit: i64,
    offset: i64,
) -> ApiResult<(Vec<Delivery>, i64)> {
    let (uid, id) = (user_id.to_string(), id.to_string());
    // One snapshot: a delivery's row and its attempt log are separate statements, and the
    // delivery job records attempts meanwhile.
    app.db
        .read_snapshot(move |c| {
            repo::get(c, &uid, &id)?.ok_or_else(|| ApiError::not_found("webhook"))?;
            Ok(repo::list_deliveries(c, &id, limit, offset)?)
        })
        .await
}

/// Queues a delivery of the user's to go out again, as a new delivery of the same event
/// to the same endpoint, and wakes the worker. Returns the new delivery's id and record.
pub async fn redeliver(
    app: &AppState,
    user_id: &str,
    delivery_id: &str,
) -> ApiResult<(String, Option<Delivery>)> {
    let max = app.config.webhook_max_attempts;
    let (uid, id) = (user_id.to_string(), delivery_id.to_string());
    let new_id = app
        .db
        .write(move |c| {
            repo::delivery(c, &uid, &id)?.ok_or_else(|| ApiError::not_found("webhook delivery"))?;
            let (hook, event_id, ty, body) = repo::delivery_body(c, &id)?.expect("delivery exists");
            Ok(engine::queue(c, &hook, &event_id, &ty, &body, max)?)
        })
        .await?;
    app.wake_jobs();
    let (uid, n2) = (user_id.to_string(), new_id.clone());
    let record = app
        .db
        .read_snapshot(move |c| Ok(repo::delivery(c, &uid, &n2)?))
        .await?;
    Ok((new_id, record))
}
