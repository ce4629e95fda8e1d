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

use std::future::Future;
use std::pin::Pin;

use crate::db::sql::Connection;
use chrono::{DateTime, NaiveTime, TimeZone, Utc};
use chrono_tz::Tz;
use serde_json::{Value, json};

use crate::db::campaigns::{self as repo, Call, Campaign, Target};
use crate::db::{self, leads};
use crate::error::{ApiError, ApiResult};
use crate::events::Event;
use crate::service::campaign_calls::Dial;
use crate::state::AppState;

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

/// `HH:MM`, 24-hour.
pub fn parse_hm(s: &str) -> Option<NaiveTime> {
    if s.len() != 5 {
        return None;
    }
    NaiveTime::parse_from_str(s, "%H:%M").ok()
}

/// Whether a local time of day lies in the window `[start, end)`; a window whose end is
/// before its start runs over midnight.
fn inside(t: NaiveTime, start: NaiveTime, end: NaiveTime) -> bool {
    if start <= end {
        start <= t && t < end
    } else {
        t >= start || t < end
    }
}

/// The first instant at or after `now` inside the daily window in `tz`.
pub fn next_open(now: DateTime<Utc>, tz: Tz, start: NaiveTime, end: NaiveTime) -> DateTime<Utc> {
    let local = now.with_timezone(&tz);
    if inside(local.time(), start, end) {
        return now;
    }
    let mut day = local.date_naive();
    if local.time() >= start {
        day = day.succ_opt().unwrap_or(day);
    }
    let naive = day.and_time(start);
    // A start inside a daylight-saving gap opens at the first valid instant after it.
    tz.from_local_datetime(&naive)
        .earliest()
        .or_else(|| {
            tz.from_local_datetime(&(naive + chrono::Duration::hours(1)))
                .earliest()
        })
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or(now + chrono::Duration::hours(1))
}

/// Whether a campaign's window is open now for a lead in `tz`.
fn open_now(k: &Campaign, tz: &str, now: DateTime<Utc>) -> bool {
    let (Some(s), Some(e)) = (parse_hm(&k.hours_start), parse_hm(&k.hours_end)) else {
        return true;
    };
    let tz: Tz = tz.parse().unwrap_or(chrono_tz::UTC);
    next_open(now, tz, s, e) <= now
}

/// Digits of a phone number with its `+`, without spaces, dashes, dots or brackets; `None`
/// when what is left is not E.164.
pub fn normalize_phone(p: &str) -> Option<String> {
    let s: String = p
        .chars()
        .filter(|c| !matches!(c, ' ' | '-' | '(' | ')' | '.'))
        .collect();
    let digits = s.strip_prefix('+')?;
    ((7..=15).contains(&digits.len())
        && digits.bytes().all(|b| b.is_ascii_digit())
        && !digits.starts_with('0'))
    .then_some(s)
}

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
            view(c, &k).map_err(ApiError::from)
        })
        .await?;
    app.wake_jobs();
    emit(app, "campaign.started", &v);
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
            view(c, &k).map_err(ApiError::from)
        })
        .await?;
    app.wake_jobs();
    let kind = match action {
        "pause" => "campaign.paused",
        "resume" => "campaign.resumed",
        _ => "campaign.cancelled",
    };
    emit(app, kind, &v);
    Ok(Changed { campaign: v })
}

fn emit(app: &AppState, kind: &str, campaign: &Value) {
    let owner = campaign["user_id"].as_str().unwrap_or_default();
    app.bus
        .emit(Event::new(kind, owner, json!({"campaign": campaign})));
}

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
    completed: Option<Value>,
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
            repo::insert_call(c, &call)?;
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
        out.completed = Some(view(c, &k)?);
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
    let out = app
        .db
        .write(move |c| fill_tx(c, &id2, seq, Utc::now(), default))
        .await?;
    for d in out.dials {
        let app2 = app.clone();
        app.tasks.spawn(run_call(app2, d));
    }
    if let Some(v) = &out.completed {
        emit(app, "campaign.completed", v);
    }
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
            Ok(Some((k, call_view(&call, name.as_deref()))))
        })
        .await?;
    let Some((k, v)) = ended else {
        return Ok(());
    };
    app.bus.emit(Event::new(
        "call.completed",
        &k.user_id,
        json!({"call": v, "campaign_id": k.id}),
    ));
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
/// progress. Platform calls in progress keep waiting for their end-of-call event.
pub fn recover(c: &Connection) -> rusqlite::Result<usize> {
    let mut n = 0;
    for call in repo::all_open_calls(c)? {
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
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows() {
        let t = |h, m| NaiveTime::from_hms_opt(h, m, 0).unwrap();
        assert!(inside(t(9, 0), t(9, 0), t(17, 0)));
        assert!(!inside(t(17, 0), t(9, 0), t(17, 0)));
        assert!(inside(t(23, 0), t(22, 0), t(6, 0)));
        assert!(inside(t(5, 59), t(22, 0), t(6, 0)));
        assert!(!inside(t(12, 0), t(22, 0), t(6, 0)));
        let now = Utc.with_ymd_and_hms(2026, 11, 23, 12, 30, 0).unwrap();
        // Inside: now. Before today's start: today. After: tomorrow.
        assert_eq!(next_open(now, chrono_tz::UTC, t(9, 0), t(17, 0)), now);
        assert_eq!(
            next_open(now, chrono_tz::UTC, t(14, 0), t(17, 0)),
            Utc.with_ymd_and_hms(2026, 11, 23, 14, 0, 0).unwrap()
        );
        assert_eq!(
            next_open(now, chrono_tz::UTC, t(8, 0), t(9, 0)),
            Utc.with_ymd_and_hms(2026, 11, 24, 8, 0, 0).unwrap()
        );
        // New York is UTC-5 in November: 09:00 there is 14:00 UTC.
        assert_eq!(
            next_open(now, chrono_tz::America::New_York, t(9, 0), t(17, 0)),
            Utc.with_ymd_and_hms(2026, 11, 23, 14, 0, 0).unwrap()
        );
    }

    #[test]
    fn phones() {
        assert_eq!(
            normalize_phone("+1 (415) 555-0123").as_deref(),
            Some("+14155550123")
        );
        assert_eq!(normalize_phone("4155550123"), None);
        assert_eq!(normalize_phone("+0123456789"), None);
    }
}
