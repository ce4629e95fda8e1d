//! The `webhooks` resource: a user's endpoints that receive signed events.

use super::action::{Action, Handler, Resource, handler, schema};
use serde::Deserialize;
use serde_json::json;

use super::{ActionRequest, Ctx, Reply, page};
use crate::db::{self, webhooks::Patch};
use crate::error::{ApiError, ApiResult};
use crate::events::Event;
use crate::webhooks;

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "WebhookCreate")]
pub(crate) struct CreateWebhook {
    url: String,
    description: Option<String>,
    event_types: Option<Vec<String>>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "WebhookUpdate")]
pub(crate) struct UpdateWebhook {
    url: Option<String>,
    #[serde(default, deserialize_with = "super::double_option::deserialize")]
    #[schemars(with = "Option<String>")]
    description: Option<Option<String>>,
    event_types: Option<Vec<String>>,
    is_active: Option<bool>,
}

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[schemars(rename = "WebhookPaging")]
pub(crate) struct Paging {
    limit: Option<i64>,
    offset: Option<i64>,
}

fn check_types(types: &[String]) -> ApiResult<()> {
    if types.is_empty() {
        return Err(ApiError::validation(
            "data.event_types must name at least one event type (or \"*\")",
        ));
    }
    match types.iter().find(|t| !webhooks::valid_pattern(t)) {
        Some(bad) => Err(ApiError::validation(format!(
            "data.event_types: unknown event type '{bad}'; use one of {} or a 'family.*' wildcard",
            crate::events::EVENT_TYPES.join(", ")
        ))),
        None => Ok(()),
    }
}

/// The address guard at create and update, with the name resolved now: a receiver on an
/// internal address is refused here rather than retried for hours by the delivery job.
async fn check_url(ctx: &Ctx, url: &str) -> ApiResult<String> {
    let u = ctx
        .app
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

pub async fn handle(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    match req.action.as_str() {
        "all" | "list" => {
            let hooks = ctx
                .db()
                .read(move |c| Ok(db::webhooks::list(c, &uid)?))
                .await?;
            Ok(Reply::ok(json!({"count": hooks.len(), "webhooks": hooks})))
        }
        "get" => {
            let id = req.uuid()?;
            let hook = ctx
                .db()
                .read(move |c| Ok(db::webhooks::get(c, &uid, &id)?))
                .await?;
            Ok(Reply::ok(
                json!({"webhook": hook.ok_or_else(|| ApiError::not_found("webhook"))?}),
            ))
        }
        "create" => {
            let body: CreateWebhook = req.data()?;
            let url = check_url(ctx, &body.url).await?;
            let types = body.event_types.unwrap_or_else(|| vec!["*".into()]);
            check_types(&types)?;
            check_description(body.description.as_deref())?;
            let id = db::new_id();
            let secret = webhooks::new_secret();
            let secret_for_db = secret.clone();
            let prefix = webhooks::secret_prefix(&secret);
            let (id2, app) = (id.clone(), ctx.app.clone());
            let hook = ctx
                .db()
                .write(move |c| {
                    let sealed = webhooks::seal_secret(&app, c, &id2, &secret_for_db)?;
                    db::webhooks::insert(
                        c,
                        &db::webhooks::NewWebhook {
                            id: &id2,
                            user_id: &uid,
                            url: &url,
                            description: body.description.as_deref(),
                            event_types: &types,
                            sealed: &sealed,
                            secret_prefix: &prefix,
                        },
                    )?;
                    Ok(db::webhooks::get(c, &uid, &id2)?.expect("row just inserted"))
                })
                .await?;
            let mut shown = json!(hook);
            shown["secret"] = json!(secret);
            Ok(Reply::created(json!({"webhook": shown}))
                .record(&id)
                .summary(format!("created webhook to {}", hook.url)))
        }
        "update" => {
            let id = req.uuid()?;
            let body: UpdateWebhook = req.data()?;
            let url = match body.url.as_deref() {
                Some(u) => Some(check_url(ctx, u).await?),
                None => None,
            };
            if let Some(t) = &body.event_types {
                check_types(t)?;
            }
            check_description(body.description.as_ref().and_then(|d| d.as_deref()))?;
            let patch = Patch {
                url,
                description: body.description,
                event_types: body.event_types,
                is_active: body.is_active,
            };
            let hook = ctx
                .db()
                .write(move |c| {
                    if !db::webhooks::update(c, &uid, &id, &patch)? {
                        return Err(ApiError::not_found("webhook"));
                    }
                    Ok(db::webhooks::get(c, &uid, &id)?.expect("row exists"))
                })
                .await?;
            Ok(Reply::ok(json!({"webhook": hook})))
        }
        "delete" => {
            let id = req.uuid()?;
            let id2 = id.clone();
            if !ctx
                .db()
                .write(move |c| Ok(db::webhooks::delete(c, &uid, &id2)?))
                .await?
            {
                return Err(ApiError::not_found("webhook"));
            }
            Ok(Reply::deleted(&id))
        }
        "rotate-secret" => {
            let id = req.uuid()?;
            let secret = webhooks::new_secret();
            let (plain, app) = (secret.clone(), ctx.app.clone());
            let prefix = webhooks::secret_prefix(&secret);
            let hook = ctx
                .db()
                .write(move |c| {
                    db::webhooks::get(c, &uid, &id)?
                        .ok_or_else(|| ApiError::not_found("webhook"))?;
                    let sealed = webhooks::seal_secret(&app, c, &id, &plain)?;
                    db::webhooks::set_secret(c, &id, &sealed, &prefix)?;
                    Ok(db::webhooks::get(c, &uid, &id)?.expect("row exists"))
                })
                .await?;
            Ok(Reply::ok(json!({"webhook": hook, "secret": secret}))
                .summary("rotated a webhook signing secret"))
        }
        "test" => {
            let id = req.uuid()?;
            let event = Event::new(
                "webhook.test",
                ctx.user_id(),
                json!({"message": "This is a test event from genied.", "webhook_id": id}),
            );
            let body = serde_json::to_string(&event)?;
            let delivery = ctx
                .db()
                .write(move |c| {
                    db::webhooks::get(c, &uid, &id)?
                        .ok_or_else(|| ApiError::not_found("webhook"))?;
                    let d = db::new_id();
                    db::webhooks::insert_delivery(c, &d, &id, &event.id, &event.kind, &body)?;
                    Ok(d)
                })
                .await?;
            // One attempt, answered now, so the caller sees what their receiver said.
            let result = webhooks::attempt(&ctx.app, &delivery).await?;
            let (uid, d2) = (ctx.user_id().to_string(), delivery.clone());
            if !result.succeeded {
                ctx.db()
                    .write(move |c| Ok(db::webhooks::fail_delivery(c, &d2).map(|_| ())?))
                    .await?;
            }
            let record = ctx
                .db()
                .read(move |c| Ok(db::webhooks::delivery(c, &uid, &delivery)?))
                .await?;
            Ok(Reply::ok(json!({"delivery": record, "result": result})))
        }
        "deliveries" => {
            let id = req.uuid()?;
            let p: Paging = req.data()?;
            let (limit, offset) = page(p.limit, p.offset, 50, 500)?;
            let (rows, total) = ctx
                .db()
                .read(move |c| {
                    db::webhooks::get(c, &uid, &id)?
                        .ok_or_else(|| ApiError::not_found("webhook"))?;
                    Ok(db::webhooks::list_deliveries(c, &id, limit, offset)?)
                })
                .await?;
            Ok(Reply::ok(
                json!({"deliveries": rows, "count": total, "limit": limit, "offset": offset}),
            ))
        }
        "redeliver" => {
            // `id` is the delivery to replay; it goes out again as a new delivery of the same event.
            let id = req.uuid()?;
            let max = ctx.app.config.webhook_max_attempts;
            let new_id = ctx
                .db()
                .write(move |c| {
                    db::webhooks::delivery(c, &uid, &id)?
                        .ok_or_else(|| ApiError::not_found("webhook delivery"))?;
                    let (hook, event_id, ty, body) =
                        db::webhooks::delivery_body(c, &id)?.expect("delivery exists");
                    Ok(webhooks::queue(c, &hook, &event_id, &ty, &body, max)?)
                })
                .await?;
            ctx.app.wake_jobs();
            let uid = ctx.user_id().to_string();
            let n2 = new_id.clone();
            let record = ctx
                .db()
                .read(move |c| Ok(db::webhooks::delivery(c, &uid, &n2)?))
                .await?;
            Ok(Reply::accepted(json!({"delivery": record})).record(new_id))
        }
        other => Err(ApiError::invalid_action(req.resource, other)),
    }
}

/// Every `webhooks` action; see `api::action`.
pub const RESOURCE: Resource = Resource {
    name: "webhooks",
    list_action: "all",
    actions: &[
        Action::read("all", H),
        Action::read("list", H),
        Action::read("get", H).id(),
        Action::write("create", H)
            .data(schema::<CreateWebhook>)
            .conflict(),
        Action::write("update", H)
            .id()
            .data(schema::<UpdateWebhook>)
            .conflict(),
        Action::write("delete", H).id(),
        Action::write("test", H).id().upstream(),
        Action::read("deliveries", H).id().data(schema::<Paging>),
        Action::write("redeliver", H).id(),
        Action::write("rotate-secret", H).id(),
    ],
};

const H: Handler = handler!(handle);
