//! Campaigns: a genie calls a list of leads through its voice provider, a few at a time,
//! inside calling hours, at a bounded rate, retrying no-answer and busy, and writes each
//! lead's outcome to its activity log.
//!
//! Durability: the targets are rows (copied from the lead filter at `start`), and every dial
//! attempt is a `campaign_calls` row committed as `dialing` before the call is placed, in the
//! same transaction that counts the calls in flight, so the concurrency limit holds however
//! many tasks ask for work at once. A `campaign.tick` job on the durable queue keeps each
//! running campaign moving (a chain: each tick queues the next; `tick_seq` retires a chain
//! that pause/resume replaced). Calls run as tasks the service aborts when it stops; a call
//! found `dialing` at the next start was interrupted and is closed as `failed`, never placed
//! again (at most once: a platform may already have rung the phone). Outcomes of platform
//! calls arrive later through the provider webhooks (`provider_outcome`).
//!
//! The module is split along the seam between what a user does and what the dialing does:
//! here the resource (its view, `start`, `pause` / `resume` / `cancel`); `dialing` the tick
//! job that claims due leads and places their calls, and the end of each call; `hours` the
//! calling-window and phone-number arithmetic both use.

mod dialing;
mod hours;

use crate::db::sql::Connection;
use chrono::Utc;
use chrono_tz::Tz;
use serde_json::{Value, json};

use crate::db::campaigns::{self as repo, Call, Campaign};
use crate::db::{self, leads};
use crate::error::{ApiError, ApiResult};
use crate::events::Event;
use crate::state::AppState;

pub use dialing::{finish, keep_calls, platform_call_ended, provider_outcome, recover, tick_job};
pub use hours::{next_open, normalize_phone, parse_hm};

/// Job kind that moves a running campaign along.
pub const TICK_JOB: &str = "campaign.tick";
/// The longest a running campaign waits between ticks, so stale platform calls and calling
/// windows are noticed without anyone asking.
const TICK_MAX: std::time::Duration = std::time::Duration::from_secs(30);
/// At most this many leads in one campaign.
pub const MAX_TARGETS: i64 = 10_000;
/// A platform call with no end-of-call event after this long is closed as failed.
const PLATFORM_CALL_TIMEOUT_SECS: i64 = 2 * 3600;
/// Outcomes that are retried while attempts remain.
pub const RETRYABLE: &[&str] = &["no_answer", "busy"];

/// A campaign's states; see `transition`.
pub const STATES: &[&str] = &["draft", "running", "paused", "completed", "cancelled"];

/// The campaign as answered: its settings, state and counts.
pub fn view(c: &Connection, k: &Campaign) -> rusqlite::Result<Value> {
    let mut counts = json!({
        "targets": 0, "pending": 0, "calling": 0, "done": 0,
        "completed": 0, "no_answer": 0, "busy": 0, "failed": 0, "do_not_call": 0,
        "no_phone": 0, "cancelled": 0, "lead_deleted": 0,
    });
    let mut total = 0;
    for (k, n) in repo::target_counts(c, &k.id)? {
        match k.strip_prefix("outcome:") {
            Some(o) => counts[o] = json!(n),
            None => {
                total += n;
                counts[k.as_str()] = json!(n);
            }
        }
    }
    counts["targets"] = json!(total);
    let calls = repo::open_calls(c, &k.id)?.len();
    Ok(json!({
        "id": k.id,
        "name": k.name,
        "genie_id": k.genie_id,
        "user_id": k.user_id,
        "status": k.status,
        "filters": k.filters,
        "concurrency": k.concurrency,
        "calls_per_minute": k.calls_per_minute,
        "calling_hours": {"start": k.hours_start, "end": k.hours_end, "timezone": k.timezone},
        "retry": {"max_attempts": k.max_attempts, "delay_seconds": k.retry_delay_seconds},
        "persona": k.persona,
        "variables": k.variables,
        "waiting": if k.status == "running" { json!(k.waiting) } else { Value::Null },
        "calls_in_progress": calls,
        "counts": counts,
        "created_at": k.created_at,
        "updated_at": k.updated_at,
        "started_at": k.started_at,
        "finished_at": k.finished_at,
    }))
}

/// A call as `calls` answers it.
pub fn call_view(k: &Call, lead_name: Option<&str>) -> Value {
    json!({
        "id": k.id,
        "campaign_id": k.campaign_id,
        "lead_id": k.lead_id,
        "lead_name": lead_name,
        "phone": k.phone,
        "attempt": k.attempt,
        "status": k.status,
        "outcome": k.outcome,
        "provider": k.provider,
        "provider_call_id": k.provider_call_id,
        "conversation_id": k.conversation_id,
        "error": k.error,
        "started_at": k.started_at,
        "ended_at": k.ended_at,
    })
}

fn conflict_state(k: &Campaign, action: &str) -> ApiError {
    ApiError::conflict(format!(
        "cannot {action} campaign '{}': it is {}",
        k.name, k.status
    ))
}

/// Queues the next tick of a running campaign's chain.
fn queue_tick(c: &Connection, k: &Campaign, delay: std::time::Duration) -> rusqlite::Result<()> {
    crate::jobs::enqueue(
        c,
        TICK_JOB,
        &json!({"campaign_id": k.id, "seq": k.tick_seq}),
        delay,
        None,
    )?;
    Ok(())
}

/// The leads a campaign's filters select, as the owner's `leads all` would list them.
fn select_leads(c: &Connection, k: &Campaign) -> ApiResult<Vec<leads::Lead>> {
    let f = &k.filters;
    let strs = |key: &str| f[key].as_str().map(str::to_string);
    let since = match f["dateRange"].as_str() {
        None | Some("all") => None,
        Some(r) => {
            let days = r.trim_end_matches('d').parse::<i64>().unwrap_or(0);
            Some(db::fmt_time(Utc::now() - chrono::Duration::days(days)))
        }
    };
    let filter = leads::Filter {
        scope: leads::Scope::User(k.user_id.clone()),
        agent_ids: f["agentIds"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        status: strs("status"),
        priority: strs("priority"),
        search: strs("searchTerm"),
        since,
        after: None,
    };
    let mut filter = filter;
    let mut out = Vec::new();
    loop {
        // Keyset pages: each starts after the last lead of the one before, however many of
        // that page the owner check below kept.
        let page = leads::list(c, &filter, 500, 0)?;
        let n = page.len();
        filter.after = page.last().map(|l| (l.created_at.clone(), l.id));
        out.extend(
            page.into_iter()
                .filter(|l| l.agent_owner.as_deref().is_none_or(|o| o == k.user_id)),
        );
        if n < 500 {
            break;
        }
        if out.len() as i64 > MAX_TARGETS {
            return Err(ApiError::validation(format!(
                "the campaign's filters select more than {MAX_TARGETS} leads; narrow them"
            )));
        }
    }
    Ok(out)
}

/// The lead's own time zone (`metadata.timezone`, an IANA name), else the campaign's.
fn lead_timezone(l: &leads::Lead, k: &Campaign) -> String {
    l.metadata
        .as_ref()
        .and_then(|m| m["timezone"].as_str())
        .filter(|t| t.parse::<Tz>().is_ok())
        .unwrap_or(&k.timezone)
        .to_string()
}

/// What a state change did, for the reply and the events.
pub struct Changed {
    pub campaign: Value,
}

/// `start`: draft → running. Copies the leads the filters select into the campaign's
/// targets (a lead without a usable number is closed at once as `no_phone`) and starts the
/// tick chain.
pub async fn start(app: &AppState, id: &str) -> ApiResult<Changed> {
    let id2 = id.to_string();
    let k = app
        .db
        .read(move |c| repo::get(c, &id2)?.ok_or_else(|| ApiError::not_found("campaign")))
        .await?;
    if k.status != "draft" {
        return Err(conflict_state(&k, "start"));
    }
    crate::service::campaign_calls::preflight(app, &k).await?;
    let id2 = id.to_string();
    let v = app
        .db
        .write(move |c| {
            let mut k = repo::get(c, &id2)?.ok_or_else(|| ApiError::not_found("campaign"))?;
            if k.status != "draft" {
                return Err(conflict_state(&k, "start"));
            }
            let now = db::now();
            let selected = select_leads(c, &k)?;
            for l in &selected {
                let phone = l.phone.as_deref().and_then(normalize_phone);
                let (status, outcome) = match &phone {
                    Some(_) => ("pending", None),
                    None => ("done", Some("no_phone")),
                };
                repo::insert_target(
                    c,
                    &k.id,
                    l.id,
                    phone.as_deref(),
                    &lead_timezone(l, &k),
                    status,
                    &now,
                    outcome,
                )?;
            }
            k.status = "running".into();
            k.started_at = Some(now.clone());
            k.updated_at = now;
            k.tick_seq += 1;
            repo::save(c, &k)?;
            queue_tick(c, &k, std::time::Duration::ZERO)?;
            let v = view(c, &k)?;
            Ok((record(c, "campaign.started", &v)?, v))
        })
        .await?;
    app.wake_jobs();
    let (started, v) = v;
    app.bus.emit(started);
    Ok(Changed { campaign: v })
}

/// `pause` (running → paused), `resume` (paused → running), `cancel` (draft, running or
/// paused → cancelled: targets not called yet are closed as `cancelled`; calls in progress
/// end and are recorded, but nothing is retried).
pub async fn transition(app: &AppState, id: &str, action: &str) -> ApiResult<Changed> {
    let (id2, act) = (id.to_string(), action.to_string());
    let v = app
        .db
        .write(move |c| {
            let mut k = repo::get(c, &id2)?.ok_or_else(|| ApiError::not_found("campaign"))?;
            let next = match (act.as_str(), k.status.as_str()) {
                ("pause", "running") => "paused",
                ("resume", "paused") => "running",
                ("cancel", "draft" | "running" | "paused") => "cancelled",
                _ => return Err(conflict_state(&k, &act)),
            };
            let now = db::now();
            k.status = next.into();
            k.updated_at = now.clone();
            k.waiting = None;
            if next == "cancelled" {
                k.finished_at = Some(now.clone());
                for lead in repo::close_pending(c, &k.id, "cancelled")? {
                    leads::log(
                        c,
                        lead,
                        Some(&k.user_id),
                        "call",
                        Some(&format!(
                            "Campaign '{}' cancelled before this lead was called",
                            k.name
                        )),
                        Some(&json!({"campaign_id": k.id, "outcome": "cancelled"})),
                    )?;
                }
            }
            if next == "running" {
                k.tick_seq += 1;
                queue_tick(c, &k, std::time::Duration::ZERO)?;
            }
            repo::save(c, &k)?;
            let v = view(c, &k)?;
            let kind = match next {
                "paused" => "campaign.paused",
                "running" => "campaign.resumed",
                _ => "campaign.cancelled",
            };
            Ok((record(c, kind, &v)?, v))
        })
        .await?;
    app.wake_jobs();
    let (changed, v) = v;
    app.bus.emit(changed);
    Ok(Changed { campaign: v })
}

/// Records a campaign event carrying its view, in the transaction that changed it.
fn record(
    c: &Connection,
    kind: &str,
    campaign: &Value,
) -> rusqlite::Result<crate::events::Recorded> {
    let owner = campaign["user_id"].as_str().unwrap_or_default();
    crate::events::record(c, Event::new(kind, owner, json!({"campaign": campaign})))
}
