//! The dialing: the `campaign.tick` job claims the due leads a running campaign has room for
//! (concurrency, its rate, the genie's `max_calls` and `max_calls_per_minute`, calling hours,
//! do_not_call) and places their calls on tasks; a call's end, simulated or reported by a
//! platform's webhook, is recorded and frees its slot for the next. See the parent module for
//! the durability rules.

use std::future::Future;
use std::pin::Pin;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde_json::{Value, json};

use super::hours::{next_open, open_now, parse_hm};
use super::{PLATFORM_CALL_TIMEOUT_SECS, RETRYABLE, TICK_MAX, call_view, queue_tick, record, view};
use crate::db::campaigns::{self as repo, Call, Campaign, Target};
use crate::db::sql::Connection;
use crate::db::{self, leads};
use crate::error::{ApiError, ApiResult};
use crate::events::Event;
use crate::jobs::Lease;
use crate::service::campaign_calls::Dial;
use crate::state::AppState;

/// The `campaign.tick` job: places the calls that are due, then queues the next tick while
/// the campaign runs. A tick of a retired chain (`seq` behind) does nothing.
pub async fn tick_job(app: &AppState, payload: &Value) -> ApiResult<()> {
    let id = payload["campaign_id"]
        .as_str()
        .ok_or_else(|| ApiError::validation("campaign.tick payload without campaign_id"))?
        .to_string();
    let seq = payload["seq"].as_i64().unwrap_or(-1);
    let wake = fill(app, &id, Some(seq)).await?;
    if let Some(at) = wake {
        let delay = (at - Utc::now())
            .to_std()
            .unwrap_or_default()
            .clamp(std::time::Duration::from_millis(50), TICK_MAX);
        app.db
            .write(move |c| {
                // Only the current chain continues; pause, cancel or completion end it.
                if let Some(k) = repo::get(c, &id)?
                    && k.status == "running"
                    && k.tick_seq == seq
                {
                    queue_tick(c, &k, delay)?;
                }
                Ok(())
            })
            .await?;
    }
    Ok(())
}

/// What one pass over a campaign found to do.
struct Fill {
    dials: Vec<Dial>,
    /// When the campaign next needs a look (None: it is not running).
    wake: Option<DateTime<Utc>>,
    /// Targets closed without a call (do_not_call, deleted leads), for the events.
    closed: Vec<(i64, &'static str)>,
    completed: Option<crate::events::Recorded>,
}

/// Claims the due targets a running campaign has room for and marks their calls `dialing`;
/// closes targets that may no longer be called; completes the campaign when nothing is left.
/// One write transaction, so concurrent passes never exceed the limits together.
fn fill_tx(
    c: &Connection,
    id: &str,
    seq: Option<i64>,
    now: DateTime<Utc>,
    default_provider: &str,
    lease: &Lease,
) -> ApiResult<Fill> {
    let mut out = Fill {
        dials: Vec::new(),
        wake: None,
        closed: Vec::new(),
        completed: None,
    };
    let Some(mut k) = repo::get(c, id)? else {
        return Ok(out);
    };
    if k.status != "running" || seq.is_some_and(|s| s != k.tick_seq) {
        return Ok(out);
    }
    let now_s = db::fmt_time(now);
    let provider = db::genie_providers::get(c, &k.genie_id)?
        .provider
        .unwrap_or_else(|| default_provider.to_string());
    // A platform call whose end was never reported frees its slot after a while.
    let stale = db::fmt_time(now - chrono::Duration::seconds(PLATFORM_CALL_TIMEOUT_SECS));
    for call in repo::open_calls(c, id)? {
        if call.provider != "local" && call.started_at < stale {
            close_call(
                c,
                &k,
                &call,
                "failed",
                None,
                Some("no end-of-call event arrived from the platform within 2 hours"),
                now,
            )?;
        }
    }
    let in_flight = repo::open_calls(c, id)?.len() as i64;
    let recent = repo::started_since(c, id, &db::fmt_time(now - chrono::Duration::seconds(60)))?;
    let mut room = (k.concurrency - in_flight).min(k.calls_per_minute - recent.len() as i64);
    // The genie's own limit (`max_calls`: calls at once) holds across all its campaigns.
    let genie_cap = db::genies::find(c, &k.genie_id)?.and_then(|g| g.max_calls);
    let mut genie_full = false;
    if let Some(cap) = genie_cap {
        let free = cap - repo::open_calls_of_genie(c, &k.genie_id)?;
        genie_full = free <= 0;
        room = room.min(free);
    }
    // The genie's call rate (`max_calls_per_minute`) counts its calls of every campaign and
    // of `genies call` together; a call it holds back stays pending, never dropped.
    let genie_rate = crate::service::calls::rate(c, &k.genie_id, now)?;
    room = room.min(genie_rate.room);
    let (Some(hs), Some(he)) = (parse_hm(&k.hours_start), parse_hm(&k.hours_end)) else {
        return Err(ApiError::internal("campaign with unreadable calling hours"));
    };
    if room > 0 {
        for t in repo::due_targets(c, id, &now_s, (room * 4).max(50))? {
            if out.dials.len() as i64 >= room {
                break;
            }
            let Some(lead) = leads::get(c, t.lead_id)? else {
                repo::set_target(
                    c,
                    id,
                    t.lead_id,
                    "done",
                    t.attempts,
                    &now_s,
                    Some("lead_deleted"),
                )?;
                out.closed.push((t.lead_id, "lead_deleted"));
                continue;
            };
            let phone = t.phone.clone().unwrap_or_default();
            if lead.do_not_call || leads::phone_is_do_not_call(c, &k.user_id, &phone)? {
                repo::set_target(
                    c,
                    id,
                    t.lead_id,
                    "done",
                    t.attempts,
                    &now_s,
                    Some("do_not_call"),
                )?;
                leads::log(
                    c,
                    t.lead_id,
                    Some(&k.user_id),
                    "call",
                    Some(&format!(
                        "Campaign '{}' did not call {phone}: the lead is marked do_not_call",
                        k.name
                    )),
                    Some(&json!({"campaign_id": k.id, "outcome": "do_not_call"})),
                )?;
                out.closed.push((t.lead_id, "do_not_call"));
                continue;
            }
            let tz: Tz = t.timezone.parse().unwrap_or(chrono_tz::UTC);
            let opens = next_open(now, tz, hs, he);
            if opens > now {
                repo::set_target(
                    c,
                    id,
                    t.lead_id,
                    "pending",
                    t.attempts,
                    &db::fmt_time(opens),
                    None,
                )?;
                continue;
            }
            let call = Call {
                id: db::new_id(),
                campaign_id: k.id.clone(),
                lead_id: t.lead_id,
                attempt: t.attempts + 1,
                phone,
                provider: provider.clone(),
                provider_call_id: None,
                status: "dialing".into(),
                outcome: None,
                conversation_id: None,
                error: None,
                started_at: now_s.clone(),
                ended_at: None,
            };
            repo::insert_call(c, &call, &lease.owner, &lease.until())?;
            crate::service::calls::record_start(c, &call.id, &k.genie_id, Some(&k.id), now)?;
            repo::set_target(c, id, t.lead_id, "calling", call.attempt, &now_s, None)?;
            out.dials.push(Dial {
                call,
                campaign: k.clone(),
            });
        }
    }
    let next_pending = repo::next_pending_at(c, id)?;
    let open = in_flight + out.dials.len() as i64;
    if next_pending.is_none() && open == 0 {
        k.status = "completed".into();
        k.finished_at = Some(now_s.clone());
        k.updated_at = now_s;
        k.waiting = None;
        repo::save(c, &k)?;
        out.completed = Some(record(c, "campaign.completed", &view(c, &k)?)?);
        return Ok(out);
    }
    let next_due = next_pending
        .as_deref()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&Utc));
    let rate_full = k.calls_per_minute - (recent.len() + out.dials.len()) as i64 <= 0;
    let genie_rate_full = genie_rate.room - (out.dials.len() as i64) <= 0;
    let waiting = if !out.dials.is_empty() || open >= k.concurrency {
        None
    } else if genie_full {
        Some(format!(
            "the genie's limit of {} calls at once (max_calls) is reached",
            genie_cap.unwrap_or_default()
        ))
    } else if genie_rate_full {
        Some(format!(
            "the genie's limit of {} calls a minute (max_calls_per_minute) is reached",
            genie_rate.limit.unwrap_or_default()
        ))
    } else if rate_full {
        Some(format!(
            "the call rate limit ({} a minute) is reached",
            k.calls_per_minute
        ))
    } else {
        match next_due {
            Some(t) if t > now => {
                let first = repo::due_targets(c, id, &db::fmt_time(t), 1)?;
                let hours = first
                    .first()
                    .is_some_and(|t: &Target| !open_now(&k, &t.timezone, now));
                Some(if hours {
                    format!(
                        "outside calling hours; the next call is due at {}",
                        db::fmt_time(t)
                    )
                } else {
                    format!(
                        "waiting to retry; the next call is due at {}",
                        db::fmt_time(t)
                    )
                })
            }
            _ => None,
        }
    };
    if waiting != k.waiting {
        k.waiting = waiting;
        repo::save(c, &k)?;
    }
    // With every slot taken a finishing call asks for the next; otherwise the next look is
    // when the rate limit frees a start or the next lead falls due.
    let latest = now + chrono::Duration::from_std(TICK_MAX).unwrap_or_default();
    let wake = if open >= k.concurrency {
        latest
    } else if genie_rate_full {
        genie_rate
            .frees_at
            .unwrap_or(now + chrono::Duration::seconds(60))
            .min(latest)
    } else if rate_full {
        recent
            .first()
            .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
            .map(|t| t.with_timezone(&Utc) + chrono::Duration::seconds(60))
            .unwrap_or(latest)
            .min(latest)
    } else {
        next_due.unwrap_or(latest).min(latest)
    };
    out.wake = Some(wake);
    Ok(out)
}

/// One pass (see `fill_tx`), then the calls it claimed are placed on their own tasks.
/// Returns when the campaign next needs a look.
async fn fill(app: &AppState, id: &str, seq: Option<i64>) -> ApiResult<Option<DateTime<Utc>>> {
    let (id2, default) = (id.to_string(), app.voice.default().name());
    let lease = app.jobs_lease.clone();
    let out = app
        .db
        .write(move |c| fill_tx(c, &id2, seq, Utc::now(), default, &lease))
        .await?;
    for d in out.dials {
        let app2 = app.clone();
        app.tasks.spawn(run_call(app2, d));
    }
    app.bus.emit_all(out.completed);
    Ok(out.wake)
}

/// Places one call and records how it ended (a platform call ends later, through its
/// webhook). Boxed: a finished call asks `fill` for the next, which spawns calls in turn.
fn run_call(app: AppState, d: Dial) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        let call_id = d.call.id.clone();
        let end = if d.call.provider == "local" {
            Some(crate::service::campaign_calls::simulate(&app, &d).await)
        } else {
            crate::service::campaign_calls::place(&app, &d).await
        };
        if let Some(end) = end
            && let Err(e) = finish(
                &app,
                &call_id,
                &end.outcome,
                end.conversation_id.as_deref(),
                end.error.as_deref(),
            )
            .await
        {
            tracing::error!(error = %e, call = %call_id, "could not record a campaign call's outcome");
        }
    })
}

/// Ends a call in the database: its target is retried later (no-answer and busy while
/// attempts remain and the campaign is not cancelled) or closed with the outcome, and the
/// lead's activity log says what happened. Returns false when the call had already ended.
fn close_call(
    c: &Connection,
    k: &Campaign,
    call: &Call,
    outcome: &str,
    conversation_id: Option<&str>,
    error: Option<&str>,
    now: DateTime<Utc>,
) -> rusqlite::Result<bool> {
    let now_s = db::fmt_time(now);
    if !repo::end_call(c, &call.id, outcome, conversation_id, error, &now_s)? {
        return Ok(false);
    }
    let retry = RETRYABLE.contains(&outcome)
        && call.attempt < k.max_attempts
        && matches!(k.status.as_str(), "running" | "paused");
    let retry_at =
        retry.then(|| db::fmt_time(now + chrono::Duration::seconds(k.retry_delay_seconds)));
    match &retry_at {
        Some(at) => repo::set_target(c, &k.id, call.lead_id, "pending", call.attempt, at, None)?,
        None => repo::set_target(
            c,
            &k.id,
            call.lead_id,
            "done",
            call.attempt,
            &now_s,
            Some(outcome),
        )?,
    }
    let mut desc = format!(
        "Campaign '{}': call {} to {} ended: {}",
        k.name,
        call.attempt,
        call.phone,
        outcome.replace('_', " ")
    );
    if let Some(at) = &retry_at {
        desc.push_str(&format!("; calling again at {at}"));
    }
    if let Some(e) = error {
        desc.push_str(&format!(" ({e})"));
    }
    leads::log(
        c,
        call.lead_id,
        Some(&k.user_id),
        "call",
        Some(&desc),
        Some(&json!({
            "campaign_id": k.id,
            "call_id": call.id,
            "attempt": call.attempt,
            "outcome": outcome,
            "conversation_id": conversation_id,
            "provider": call.provider,
            "provider_call_id": call.provider_call_id,
            "retry_at": retry_at,
        })),
    )?;
    Ok(true)
}

/// Records a call's end, announces `call.completed`, and fills the freed slot.
pub async fn finish(
    app: &AppState,
    call_id: &str,
    outcome: &str,
    conversation_id: Option<&str>,
    error: Option<&str>,
) -> ApiResult<()> {
    let (cid, o, conv, err) = (
        call_id.to_string(),
        outcome.to_string(),
        conversation_id.map(str::to_string),
        error.map(str::to_string),
    );
    let ended = app
        .db
        .write(move |c| {
            let Some(call) = repo::get_call(c, &cid)? else {
                return Ok(None);
            };
            let Some(k) = repo::get(c, &call.campaign_id)? else {
                return Ok(None);
            };
            if !close_call(
                c,
                &k,
                &call,
                &o,
                conv.as_deref(),
                err.as_deref(),
                Utc::now(),
            )? {
                return Ok(None);
            }
            let call = repo::get_call(c, &cid)?.expect("call just ended");
            let name = leads::get(c, call.lead_id)?.and_then(|l| l.name);
            let v = call_view(&call, name.as_deref());
            let e = Event::new(
                "call.completed",
                &k.user_id,
                json!({"call": v, "campaign_id": k.id}),
            );
            Ok(Some((k, crate::events::record(c, e)?)))
        })
        .await?;
    let Some((k, completed)) = ended else {
        return Ok(());
    };
    app.bus.emit(completed);
    fill(app, &k.id, None).await?;
    // A slot of the genie's own limit may be what its other campaigns wait for.
    let (gid, kid) = (k.genie_id.clone(), k.id.clone());
    let others = app
        .db
        .read(move |c| Ok(repo::running_of_genie(c, &gid)?))
        .await?;
    for other in others.into_iter().filter(|o| *o != kid) {
        fill(app, &other, None).await?;
    }
    Ok(())
}

/// An end-of-call event from a platform (Vapi, Retell) for the call it knows by
/// `provider_call_id`: when it is a campaign call, records its outcome. Returns whether it was.
/// An id no call holds yet may be a campaign call whose platform answered the call request
/// after sending this event: the outcome is kept by the id, and the call takes it when its
/// id is saved (`campaign_calls::place`), so it does not wait for the timeout.
pub async fn provider_outcome(
    app: &AppState,
    provider_call_id: &str,
    outcome: &str,
    conversation_id: Option<&str>,
    error: Option<&str>,
) -> ApiResult<bool> {
    let (pid, o, conv, err) = (
        provider_call_id.to_string(),
        outcome.to_string(),
        conversation_id.map(str::to_string),
        error.map(str::to_string),
    );
    let call = app
        .db
        .write(move |c| {
            let call = repo::call_by_provider_id(c, &pid)?;
            if call.is_none() {
                let now = Utc::now();
                repo::keep_early_outcome(
                    c,
                    &pid,
                    &o,
                    conv.as_deref(),
                    err.as_deref(),
                    &db::fmt_time(now),
                    &db::fmt_time(now - chrono::Duration::seconds(PLATFORM_CALL_TIMEOUT_SECS)),
                )?;
            }
            Ok(call)
        })
        .await?;
    let Some(call) = call else {
        return Ok(false);
    };
    finish(app, &call.id, outcome, conversation_id, error).await?;
    Ok(true)
}

/// At start, before the job worker: closes the calls a stopped process left `dialing` (it
/// may have placed them, so they are never placed again) and local simulations it left in
/// progress. Platform calls in progress keep waiting for their end-of-call event. With
/// SQLite (one instance) that is every such call; with PostgreSQL only those of no owner,
/// of this instance's own id (a previous life) or whose lease ran out: the calls of another
/// live instance go on.
pub fn recover(c: &Connection, lease: &Lease) -> rusqlite::Result<usize> {
    let orphans = repo::orphaned_calls(c, !c.is_postgres(), Some(&lease.owner), &db::now())?;
    let (n, _) = close_orphans(c, orphans)?;
    // Each running campaign gets a fresh tick chain now (the old one may be waiting up to
    // TICK_MAX), retiring the old chain so chains never multiply across restarts.
    for id in repo::ids_in_state(c, "running")? {
        if let Some(mut k) = repo::get(c, &id)? {
            k.tick_seq += 1;
            repo::save(c, &k)?;
            queue_tick(c, &k, std::time::Duration::ZERO)?;
        }
    }
    Ok(n)
}

/// Closes the calls of `orphans` that their dead instance may have been placing (see
/// `recover`); returns how many, and their campaigns.
fn close_orphans(c: &Connection, orphans: Vec<Call>) -> rusqlite::Result<(usize, Vec<String>)> {
    let (mut n, mut campaigns) = (0, Vec::new());
    for call in orphans {
        if call.status == "in_progress" && call.provider != "local" {
            continue;
        }
        let Some(k) = repo::get(c, &call.campaign_id)? else {
            continue;
        };
        let why = if call.provider == "local" {
            "interrupted: the service stopped during the simulated call; not called again"
        } else {
            "interrupted: the service stopped while placing the call, which may have been placed; not called again"
        };
        if close_call(c, &k, &call, "failed", None, Some(why), Utc::now())? {
            n += 1;
            if !campaigns.contains(&k.id) {
                campaigns.push(k.id);
            }
        }
    }
    Ok((n, campaigns))
}

/// While the service runs with PostgreSQL (where other instances share the calls): renews
/// the lease on the calls this instance holds every third of a lease, and closes the calls
/// of instances whose lease ran out (they died while placing them), then fills the slots
/// that frees. With SQLite, one instance closed every open call at its start and no other
/// instance can hold one, so nothing runs.
pub async fn keep_calls(app: AppState, mut stop: tokio::sync::watch::Receiver<bool>) {
    if !app.db.is_postgres() {
        return;
    }
    let every = app.jobs_lease.renew_every();
    loop {
        let lease = app.jobs_lease.clone();
        let res = app
            .db
            .write(move |c| {
                repo::renew_calls(c, &lease.owner, &lease.until())?;
                let orphans = repo::orphaned_calls(c, false, None, &db::now())?;
                Ok(close_orphans(c, orphans)?)
            })
            .await;
        match res {
            Ok((0, _)) => {}
            Ok((n, campaigns)) => {
                tracing::warn!(
                    count = n,
                    "closed campaign calls of an instance whose lease ran out (never placed again)"
                );
                for id in campaigns {
                    if let Err(e) = fill(&app, &id, None).await {
                        tracing::warn!(error = %e, campaign = %id, "filling a campaign after closing a dead instance's calls");
                    }
                }
            }
            // The lease may run out meanwhile; then another instance closes these calls as
            // a dead instance's, and their ends here are dropped (`close_call` ends a call once).
            Err(e) => tracing::warn!(error = %e, "could not renew the lease on campaign calls"),
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Records the outcome of a platform's end-of-call event when the call was a campaign's.
pub async fn platform_call_ended(
    app: &AppState,
    provider_call_id: &str,
    outcome: (&'static str, Option<String>),
    conversation_id: Option<&str>,
) {
    if let Err(e) = provider_outcome(
        app,
        provider_call_id,
        outcome.0,
        conversation_id,
        outcome.1.as_deref(),
    )
    .await
    {
        tracing::error!(error = %e, call = %provider_call_id, "could not record a campaign call's outcome");
    }
}
