//! `create` and `delete`, and the clean-up that keeps the provider free of orphans when
//! either side fails.

use std::time::Duration;

use serde_json::{Value, json};

use super::input::{self, CreateGenie};
use super::settings;
use super::{check_group, load_manageable, phones_of, reload};
use crate::api::{ActionRequest, Ctx, Reply, parse_uuid, parse_value};
use crate::db;
use crate::db::genies::{self as repo, GenieRow, PhoneRow};
use crate::error::{ApiError, ApiResult};
use crate::events::Event;
use crate::service::genies::{CLEANUP_JOB, lock_genie, run_cleanup};
use crate::state::AppState;

pub(super) async fn create(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let body: CreateGenie = req.data()?;
    let owner = match body.impersonated_user_id.as_deref() {
        None => ctx.user_id().to_string(),
        Some(u) => {
            ctx.principal.admin_option("impersonatedUserId", true)?;
            let uid = parse_uuid(u, "data.impersonatedUserId")?;
            let u2 = uid.clone();
            if ctx
                .db()
                .read(move |c| Ok(db::users::get(c, &u2)?))
                .await?
                .is_none()
            {
                return Err(ApiError::validation(
                    "data.impersonatedUserId: no such user",
                ));
            }
            uid
        }
    };
    let row = create_row(&ctx.app, &owner, &body).await?;
    let genie = reload(&ctx.app, &row.id, false).await?;
    Ok(Reply::created(json!({"genie": genie}))
        .record(&row.id)
        .summary(format!("created genie '{}'", row.name)))
}

/// Creates a genie owned by `owner_id` from `create` data (the same members as the API's
/// `create`; `impersonatedUserId` is ignored) and returns the full genie object. The
/// marketplace's install uses this. Emits `genie.created`; not audited (the caller's own
/// action is).
pub async fn create_genie_for(app: &AppState, owner_id: &str, input: Value) -> ApiResult<Value> {
    let body: CreateGenie = parse_value(&input, "data")?;
    let row = create_row(app, owner_id, &body).await?;
    reload(app, &row.id, false).await
}

async fn create_row(app: &AppState, owner: &str, body: &CreateGenie) -> ApiResult<GenieRow> {
    let mut row = input::new_row(body, db::new_id(), owner.to_string(), db::now())?;
    if let Some(g) = &body.group_id {
        row.group_id = Some(check_group(app, owner, g, "data.groupId").await?);
    }
    let want_phone = body.attach_phone_number.unwrap_or(false);
    if want_phone && !app.voice.supports_phone_provisioning() {
        return Err(phone_unsupported(app));
    }
    // 1. The provider first: a genie exists only if the provider accepted it.
    let agent_id = app
        .voice
        .create_agent(&settings::agent_spec(&row, vec![]))
        .await?;
    row.external_agent_id = Some(agent_id.clone());
    let mut phone = None;
    if want_phone {
        match app.voice.provision_number(&agent_id, &row.name).await {
            Ok(p) => phone = Some(p),
            Err(e) => {
                cleanup_or_queue(app, Some(agent_id), vec![]).await;
                return Err(e.into());
            }
        }
    }
    // 2. Then the row, in one transaction with its phone number.
    let (r, p) = (row.clone(), phone.clone());
    let stored = app
        .db
        .write(move |c| {
            let mut r = r;
            r.sort_order = repo::next_sort_order(c, &r.user_id)?;
            if let Some(slug) = &r.page_slug
                && repo::slug_taken(c, slug, &r.id)?
            {
                return Err(ApiError::conflict(format!(
                    "data.pageSlug '{slug}' is already used by another genie"
                )));
            }
            repo::insert(c, &r)?;
            if let Some(p) = p {
                repo::insert_phone(
                    c,
                    &PhoneRow {
                        id: db::new_id(),
                        genie_id: r.id.clone(),
                        number: p.number,
                        external_id: Some(p.external_id),
                        status: "active".into(),
                        created_at: r.created_at.clone(),
                    },
                )?;
            }
            Ok(r)
        })
        .await;
    let row = match stored {
        Ok(r) => r,
        Err(e) => {
            cleanup_or_queue(
                app,
                Some(agent_id),
                phone.into_iter().map(|p| p.external_id).collect(),
            )
            .await;
            return Err(e);
        }
    };
    let full = reload(app, &row.id, false).await?;
    app.bus
        .emit(Event::new("genie.created", &row.user_id, full));
    Ok(row)
}

pub(super) fn phone_unsupported(app: &AppState) -> ApiError {
    ApiError::validation(format!(
        "data.attachPhoneNumber: the '{}' voice provider cannot provision phone numbers; numbers are imported into the \
         provider with your own telephony (Twilio or SIP trunk) credentials",
        app.voice.name()
    ))
}

/// Removes an agent and releases numbers at the provider; if that fails, queues a durable
/// `genie.cleanup` job that retries with backoff until it succeeds.
pub(super) async fn cleanup_or_queue(
    app: &AppState,
    agent_id: Option<String>,
    number_ids: Vec<String>,
) {
    let payload = json!({"agent_id": agent_id, "number_ids": number_ids});
    if let Err(e) = run_cleanup(app, &payload).await {
        tracing::warn!(error = %e, "voice provider clean-up failed; queued for retry");
        let res = app
            .db
            .write(move |c| {
                Ok(crate::jobs::enqueue(
                    c,
                    CLEANUP_JOB,
                    &payload,
                    retry_delay(),
                    None,
                )?)
            })
            .await;
        if let Err(e) = res {
            tracing::error!(error = %e, "could not queue the voice provider clean-up");
        }
    }
}

/// The first retry of a clean-up that just failed inline.
fn retry_delay() -> Duration {
    Duration::from_secs(30)
}

pub(super) async fn delete(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let _guard = lock_genie(&id).await;
    let row = load_manageable(ctx, &id).await?;
    let phones = phones_of(ctx, &id).await?;
    let payload = json!({
        "genie_id": id,
        "agent_id": row.external_agent_id,
        "number_ids": phones.iter().filter_map(|p| p.external_id.clone()).collect::<Vec<_>>(),
    });
    let provider = run_cleanup(&ctx.app, &payload).await;
    let queued = provider.is_err();
    if let Err(e) = &provider {
        tracing::warn!(genie = %id, error = %e, "voice provider clean-up failed; queued for retry");
    }
    let id2 = id.clone();
    ctx.db()
        .write(move |c| {
            if !repo::delete(c, &id2)? {
                return Err(ApiError::agent_not_found());
            }
            if queued {
                crate::jobs::enqueue(c, CLEANUP_JOB, &payload, retry_delay(), None)?;
            }
            Ok(())
        })
        .await?;
    ctx.app.bus.emit(Event::new(
        "genie.deleted",
        &row.user_id,
        json!({"id": id, "name": row.name}),
    ));
    Ok(Reply::deleted(&id).summary(format!("deleted genie '{}'", row.name)))
}
