//! Schedule triggers on tokio-cron-scheduler. Every active genie with `trigger_type`
//! `schedule` has one cron job; it is registered at start and re-registered on every create,
//! update and delete (`sync`). With PostgreSQL, where other instances change schedules too,
//! each instance polls the schedules version every [`FOLLOW_EVERY`] and, when it moved,
//! brings its jobs in line with the table (`follow`). A firing job only enqueues a run, keyed
//! by the due time the schedule computes (not the clock at firing): every instance sharing a
//! database fires for the same due time, and only the first insert of that (genie, due time)
//! makes a run.
//!
//! Expressions have 5 fields (minute hour day-of-month month day-of-week) and are read in the
//! genie's `timezone`. The scheduler library wants a seconds field, so `0 ` is put in front.
//! With `--worker-allow-seconds-cron` (meant for tests) a 6-field expression whose first
//! field is seconds is accepted as well.

use std::collections::HashMap;
use std::sync::Arc;

use croner::parser::{CronParser, Seconds};
use serde_json::json;
use tokio_cron_scheduler::{Job, JobScheduler};

use crate::db;
use crate::state::{AppInner, AppState};
use crate::worker_pool::Scheduler;

/// The scheduler's form of a user's expression, or a message naming the problem.
pub fn to_cron(expr: &str, allow_seconds: bool) -> Result<String, String> {
    let fields: Vec<&str> = expr.split_whitespace().collect();
    let cron = match fields.len() {
        5 => format!("0 {}", fields.join(" ")),
        6 if allow_seconds => fields.join(" "),
        _ => {
            return Err("must be a cron expression with 5 fields (minute hour day-of-month month day-of-week), e.g. '0 9 * * 1-5'".into());
        }
    };
    let parsed = CronParser::builder()
        .seconds(Seconds::Required)
        .dom_and_dow(true)
        .build()
        .parse(&cron)
        .map_err(|_| format!("'{expr}' is not a valid cron expression"))?;
    // Checked before the scheduler sees it: for an expression nothing satisfies (a minute
    // list of only commas, or the last day of a month that is also its second Sunday), its
    // search for the next run steps minute by minute or day by day up to the year 5000 (from
    // seconds to hours of CPU on the request's thread), and the job would never run anyway.
    if !fires_at_some_time(&parsed) {
        return Err(format!(
            "'{expr}' never runs: no time of day or no date matches all of its fields"
        ));
    }
    Job::new_async_tz(cron.as_str(), chrono_tz::UTC, |_, _| Box::pin(async {}))
        .map_err(|_| format!("'{expr}' is not a valid cron expression"))?;
    Ok(cron)
}

/// Whether some second, minute and hour match and some date matches. Which days of a month
/// match depends only on the month, its length and the weekday it starts on, and every such
/// shape occurs within one 400-year Gregorian cycle; so each distinct shape is checked once
/// (under 200 of them).
fn fires_at_some_time(cron: &croner::Cron) -> bool {
    use chrono::{Datelike, NaiveDate};
    let p = &cron.pattern;
    if !(0..60).any(|v| p.second_match(v).unwrap_or(false))
        || !(0..60).any(|v| p.minute_match(v).unwrap_or(false))
        || !(0..24).any(|v| p.hour_match(v).unwrap_or(false))
    {
        return false;
    }
    let mut seen = std::collections::HashSet::new();
    for year in 2000..2400 {
        for month in 1..=12u32 {
            if !p.month_match(month).unwrap_or(false) {
                continue;
            }
            let Some(first) = NaiveDate::from_ymd_opt(year, month, 1) else {
                continue;
            };
            let len = first
                .checked_add_months(chrono::Months::new(1))
                .and_then(|next| next.pred_opt())
                .map_or(28, |last| last.day());
            if !seen.insert((month, first.weekday(), len)) {
                continue;
            }
            if (1..=len).any(|day| p.day_match(year, month, day).unwrap_or(false)) {
                return true;
            }
        }
    }
    false
}

pub async fn start(app: &AppState) -> anyhow::Result<()> {
    let sched = JobScheduler::new().await?;
    sched.start().await?;
    *app.workers.scheduler.lock().await = Some(Scheduler {
        sched,
        jobs: HashMap::new(),
        version: None,
    });
    resync_all(app).await;
    Ok(())
}

/// How often an instance sharing a PostgreSQL database looks whether another one changed a
/// schedule (one read of one row).
pub const FOLLOW_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// Registers every schedule again (see `workers::run`: daylight-saving changes), and drops
/// the jobs of genies no longer scheduled.
pub async fn resync_all(app: &AppState) {
    resync(app, true).await;
}

/// Follows the schedule changes other instances made: when the schedules version moved
/// since this instance last synced, brings its jobs in line with the table (those added,
/// changed or removed elsewhere). Changes made here were synced at once (`sync`).
pub async fn follow(app: &AppState) {
    let known = match app.workers.scheduler.lock().await.as_ref() {
        Some(s) => s.version,
        None => return,
    };
    match app
        .db
        .read(|c| Ok(db::workers::schedules_version(c)?))
        .await
    {
        Ok(v) if Some(v) == known => {}
        Ok(_) => resync(app, false).await,
        Err(e) => tracing::warn!(error = %e, "reading the worker genie schedules version"),
    }
}

/// Brings the jobs in line with the table: the version and the scheduled genies are read in
/// one transaction, so a change committed after it moves the version past the one kept.
/// `force`: register every job again even when unchanged.
async fn resync(app: &AppState, force: bool) {
    let read = app
        .db
        .read(|c| {
            Ok((
                db::workers::schedules_version(c)?,
                db::workers::active_by_trigger(c, "schedule")?,
            ))
        })
        .await;
    let (version, genies) = match read {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(error = %e, "reloading worker genie schedules");
            return;
        }
    };
    let mut guard = app.workers.scheduler.lock().await;
    let Some(s) = guard.as_mut() else { return };
    let wanted: HashMap<&str, String> = genies
        .iter()
        .map(|g| (g.id.as_str(), fingerprint(g)))
        .collect();
    let stale: Vec<String> = s
        .jobs
        .iter()
        .filter(|(id, (_, fp))| force || wanted.get(id.as_str()) != Some(fp))
        .map(|(id, _)| id.clone())
        .collect();
    for id in stale {
        if let Some((job, _)) = s.jobs.remove(&id) {
            let _ = s.sched.remove(&job).await;
        }
    }
    for g in &genies {
        if !s.jobs.contains_key(&g.id) {
            register(app, s, g).await;
        }
    }
    s.version = Some(version);
}

pub async fn stop(app: &AppState) {
    if let Some(mut s) = app.workers.scheduler.lock().await.take() {
        let _ = s.sched.shutdown().await;
    }
}

/// What a genie's cron job is made from: a change to it needs the job registered again.
fn fingerprint(g: &db::workers::WorkerGenie) -> String {
    format!(
        "{}\n{}",
        g.schedule.as_deref().unwrap_or_default(),
        g.timezone
    )
}

/// Brings the cron job of genie `id` in line with its stored record (removed when the genie
/// is gone, inactive or not scheduled).
pub async fn sync(app: &AppState, id: &str) {
    let mut guard = app.workers.scheduler.lock().await;
    let Some(s) = guard.as_mut() else { return };
    if let Some((job, _)) = s.jobs.remove(id) {
        let _ = s.sched.remove(&job).await;
    }
    let gid = id.to_string();
    let genie = match app
        .db
        .read(move |c| Ok(db::workers::get_genie_any(c, &gid)?))
        .await
    {
        Ok(Some(g)) if g.is_active && g.trigger_type == "schedule" => g,
        Ok(_) => return,
        Err(e) => {
            tracing::error!(error = %e, "loading a scheduled worker genie");
            return;
        }
    };
    register(app, s, &genie).await;
}

/// Adds the cron job of a scheduled `genie` (not registered yet).
async fn register(app: &AppState, s: &mut Scheduler, genie: &db::workers::WorkerGenie) {
    let Some(expr) = genie.schedule.clone() else {
        return;
    };
    let cron = match to_cron(&expr, app.config.worker_allow_seconds_cron) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(genie = %genie.id, error = %e, "stored schedule is not usable");
            return;
        }
    };
    let tz: chrono_tz::Tz = genie.timezone.parse().unwrap_or(chrono_tz::UTC);
    let Some(pattern) = parse(&cron) else { return };
    let weak = Arc::downgrade(app);
    let gid = genie.id.clone();
    let job = Job::new_async_tz(cron.as_str(), tz, move |_, _| {
        let weak: std::sync::Weak<AppInner> = weak.clone();
        let gid = gid.clone();
        let due = due_time(&pattern, tz, chrono::Utc::now());
        Box::pin(async move {
            let Some(app) = weak.upgrade() else { return };
            match due {
                Some(due) => fire(&app, &gid, due).await,
                None => {
                    tracing::error!(genie = %gid, "schedule fired but no due time precedes now")
                }
            }
        })
    });
    match job {
        Ok(job) => match s.sched.add(job).await {
            Ok(uuid) => {
                s.jobs.insert(genie.id.clone(), (uuid, fingerprint(genie)));
            }
            Err(e) => {
                tracing::error!(genie = %genie.id, error = %e, "registering a worker genie schedule")
            }
        },
        Err(e) => {
            tracing::error!(genie = %genie.id, error = %e, "building a worker genie schedule")
        }
    }
}

fn parse(cron: &str) -> Option<croner::Cron> {
    CronParser::builder()
        .seconds(Seconds::Required)
        .dom_and_dow(true)
        .build()
        .parse(cron)
        .ok()
}

/// The due time a firing at `now` is for: the latest time of the schedule at or before
/// `now`. The scheduler fires at or after a due time, never before (it checks every half
/// second), so every instance computes the same one unless it fires later than the
/// schedule's next time.
pub fn due_time(
    pattern: &croner::Cron,
    tz: chrono_tz::Tz,
    now: chrono::DateTime<chrono::Utc>,
) -> Option<chrono::DateTime<chrono::Utc>> {
    pattern
        .find_previous_occurrence(&now.with_timezone(&tz), true)
        .ok()
        .map(|t| t.with_timezone(&chrono::Utc))
}

async fn fire(app: &AppState, id: &str, due: chrono::DateTime<chrono::Utc>) {
    let gid = id.to_string();
    let found = app
        .db
        .read(move |c| {
            Ok((
                db::workers::get_genie_any(c, &gid)?,
                db::workers::has_queued_run(c, &gid)?,
            ))
        })
        .await;
    let genie = match found {
        Ok((Some(g), false)) if g.is_active && g.trigger_type == "schedule" => g,
        Ok((Some(g), true)) => {
            tracing::info!(genie = %g.id, "schedule fired while a run of the genie is still queued; skipped");
            return;
        }
        _ => return,
    };
    // Second precision: the due time is the run's key across instances.
    let due_at = due.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let input =
        json!({"scheduled_at": due_at, "schedule": genie.schedule, "timezone": genie.timezone});
    let gid = genie.id.clone();
    match super::enqueue_scheduled(app, genie, input, due_at.clone()).await {
        Ok(Some(_)) => {}
        Ok(None) => {
            tracing::debug!(genie = %gid, due_at, "scheduled run already queued by another instance")
        }
        Err(e) => tracing::error!(error = %e, "enqueueing a scheduled worker run"),
    }
}
