//! Genie operations: provisioning a new genie or a clone (the provider first, then the row,
//! and no orphan on either side when one fails), deleting one, the provider clean-up a
//! deleted genie leaves (run inline, then as the `genie.cleanup` job). The `genies`
//! actions, the marketplace install and the job dispatcher share them; the per-genie lock
//! and the knowledge-base push live below, in `knowledge::agents`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::db;
use crate::db::genies::{self as repo, GenieRow, PhoneRow};
use crate::error::{ApiError, ApiResult};
use crate::events::Event;
use crate::state::AppState;
use crate::voice::AgentSpec;

/// Job kind that removes a deleted genie's agent and numbers from the provider.
pub const CLEANUP_JOB: &str = "genie.cleanup";

/// The `genie.cleanup` job: releases the numbers, then deletes the agent. Both steps are
/// idempotent, so a retry after a partial success is safe.
pub async fn run_cleanup(app: &AppState, payload: &Value) -> ApiResult<()> {
    // Payloads queued before genies named their provider carry none: the default.
    let voice = app.voice.named(payload["provider"].as_str())?;
    for n in payload["number_ids"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        voice.release_number(n).await?;
    }
    if let Some(a) = payload["agent_id"].as_str() {
        voice.delete_agent(a).await?;
    }
    Ok(())
}

/// Provisions a new genie: its agent (and a phone number when `want_phone`) at the provider
/// first, so that a genie exists only if the provider accepted it, then the row with its
/// number in one transaction. When the row cannot be stored the provider side is removed
/// (or the removal queued). `provider` names a configured provider (the caller checked).
/// Returns the stored row; the caller announces it.
pub async fn provision(
    app: &AppState,
    mut row: GenieRow,
    spec: &AgentSpec,
    want_phone: bool,
    provider: &str,
) -> ApiResult<GenieRow> {
    let voice = app.voice.named(Some(provider))?.clone();
    let provider = voice.name();
    if want_phone && !voice.supports_phone_provisioning() {
        return Err(phone_unsupported(provider));
    }
    let agent_id = voice.create_agent(spec).await?;
    row.external_agent_id = Some(agent_id.clone());
    let mut phone = None;
    if want_phone {
        match voice.provision_number(&agent_id, &row.name).await {
            Ok(p) => phone = Some(p),
            Err(e) => {
                cleanup_or_queue(app, provider, Some(agent_id), vec![]).await;
                return Err(e.into());
            }
        }
    }
    let (r, p) = (row, phone.clone());
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
            crate::db::genie_providers::set_provider(c, &r.id, provider, &r.created_at)?;
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
    match stored {
        Ok(r) => Ok(r),
        Err(e) => {
            cleanup_or_queue(
                app,
                provider,
                Some(agent_id),
                phone.into_iter().map(|p| p.external_id).collect(),
            )
            .await;
            Err(e)
        }
    }
}

/// Provisions `row`, a copy of the genie `src_id`, with the same attached documents: the
/// agent at the provider first, then the row and its document links in one transaction;
/// when that fails the agent is removed again (or its removal queued).
pub async fn provision_clone(
    app: &AppState,
    src_id: &str,
    mut row: GenieRow,
    spec: &AgentSpec,
) -> ApiResult<GenieRow> {
    // A clone lives where its original does.
    let voice = crate::knowledge::agents::voice_for(app, src_id).await?;
    let provider = voice.name();
    let agent_id = voice.create_agent(spec).await?;
    row.external_agent_id = Some(agent_id.clone());
    let (r, src_id) = (row, src_id.to_string());
    let stored = app
        .db
        .write(move |c| {
            let mut r = r;
            r.sort_order = repo::next_sort_order(c, &r.user_id)?;
            repo::insert(c, &r)?;
            repo::copy_documents(c, &src_id, &r.id, &r.created_at)?;
            crate::db::genie_providers::set_provider(c, &r.id, provider, &r.created_at)?;
            Ok(r)
        })
        .await;
    match stored {
        Ok(r) => Ok(r),
        Err(e) => {
            cleanup_or_queue(app, provider, Some(agent_id), vec![]).await;
            Err(e)
        }
    }
}

/// Deletes a genie the caller may manage (the caller holds its lock): removes its agent
/// and numbers at the provider, then the row; when the provider fails, the row goes anyway
/// and a durable `genie.cleanup` job retries until the provider agrees. Emits
/// `genie.deleted`.
pub async fn delete(app: &AppState, row: &GenieRow) -> ApiResult<()> {
    let id = row.id.clone();
    let (phones, provider) = {
        let id = id.clone();
        app.db
            .read(move |c| {
                Ok((
                    repo::phones(c, &id)?,
                    crate::db::genie_providers::get(c, &id)?.provider,
                ))
            })
            .await?
    };
    let payload = json!({
        "genie_id": id,
        "provider": provider,
        "agent_id": row.external_agent_id,
        "number_ids": phones.iter().filter_map(|p| p.external_id.clone()).collect::<Vec<_>>(),
    });
    let provider = run_cleanup(app, &payload).await;
    let queued = provider.is_err();
    if let Err(e) = &provider {
        tracing::warn!(genie = %id, error = %e, "voice provider clean-up failed; queued for retry");
    }
    let id2 = id.clone();
    app.db
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
    app.bus.emit(Event::new(
        "genie.deleted",
        &row.user_id,
        json!({"id": id, "name": row.name}),
    ));
    Ok(())
}

/// The refusal of a phone number when the provider cannot provision one.
pub fn phone_unsupported(provider: &str) -> ApiError {
    ApiError::validation(format!(
        "data.attachPhoneNumber: the '{}' voice provider cannot provision phone numbers; numbers are imported into the \
         provider with your own telephony (Twilio or SIP trunk) credentials",
        provider
    ))
}

/// Removes an agent and releases numbers at the provider; if that fails, queues a durable
/// `genie.cleanup` job that retries with backoff until it succeeds.
pub async fn cleanup_or_queue(
    app: &AppState,
    provider: &str,
    agent_id: Option<String>,
    number_ids: Vec<String>,
) {
    let payload = json!({"provider": provider, "agent_id": agent_id, "number_ids": number_ids});
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
