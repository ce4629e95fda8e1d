//! Worker genies at run time: the executor that claims queued runs (bounded concurrency,
//! per-run timeout, cancellation), the triggers that enqueue them (cron schedules and
//! outbox events), the LLM tool loop (`runner`), the tools (`tools`) and the credential cipher
//! (`credentials`). Every trigger only enqueues a run; the executor is the only place that
//! runs one.

pub mod credentials;
pub mod runner;
pub mod scheduler;
pub mod tools;

use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::watch;

use crate::db::{self, Db};
use crate::error::ApiResult;
use crate::events::Event;
use crate::state::AppState;

/// Fails, with a clear error, the runs a dead process left `running`. With SQLite (one
/// instance, at its start) that is every running run. With PostgreSQL, where other live
/// instances may be running theirs, only runs of no owner, of this instance's id (a previous
/// life), or started longer ago than a run may last (`--worker-run-timeout-seconds`) plus a
/// job lease: their instance would have stopped them by then, so it is gone.
pub fn recover(db: &Db, config: &crate::config::Config, me: &str) -> anyhow::Result<()> {
    let n = db
        .write_blocking(|c| Ok(fail_orphaned(c, config, Some(me), !c.is_postgres())?))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    if n > 0 {
        tracing::warn!(
            count = n,
            "marked worker runs left running by a previous process as failed"
        );
    }
    Ok(())
}

/// `me`: this instance's id at its start (its runs are then of a previous life); `None` while
/// it runs, when its own running runs are live.
fn fail_orphaned(
    c: &crate::db::Connection,
    config: &crate::config::Config,
    me: Option<&str>,
    all: bool,
) -> rusqlite::Result<usize> {
    let limit = config
        .worker_run_timeout_seconds
        .saturating_add(config.job_lease_seconds);
    let before = chrono::Utc::now()
        - chrono::Duration::seconds(i64::try_from(limit).unwrap_or(i64::MAX / 2_000));
    db::workers::fail_interrupted(c, all, me, &db::fmt_time(before))
}

/// Queues a run of `genie` and wakes the executor.
pub async fn enqueue(
    app: &AppState,
    genie: db::workers::WorkerGenie,
    trigger: &str,
    input: Value,
) -> ApiResult<db::workers::Run> {
    let trigger = trigger.to_string();
    let run = app
        .db
        .write(move |c| Ok(db::workers::insert_run(c, &genie, &trigger, &input)?))
        .await?;
    app.workers.notify.notify_one();
    Ok(run)
}

/// Queues the scheduled run of `genie` due at `due_at`, once across instances (see
/// `db::workers::insert_scheduled_run`); `None` when another instance queued it first.
pub async fn enqueue_scheduled(
    app: &AppState,
    genie: db::workers::WorkerGenie,
    input: Value,
    due_at: String,
) -> ApiResult<Option<db::workers::Run>> {
    let run = app
        .db
        .write(move |c| {
            Ok(db::workers::insert_scheduled_run(
                c, &genie, &input, &due_at,
            )?)
        })
        .await?;
    if run.is_some() {
        app.workers.notify.notify_one();
    }
    Ok(run)
}

/// The background side of worker genies, started by `serve`: scheduler and executor, until
/// shutdown (event triggers queue their runs from the outbox dispatcher).
pub async fn run(app: AppState, mut stop: watch::Receiver<bool>) {
    if let Err(e) = scheduler::start(&app).await {
        tracing::error!(error = %e, "worker genie scheduler did not start; scheduled worker genies will not run");
    }
    let poll = Duration::from_millis(app.config.job_poll_ms.clamp(10, 1000));
    let mut last_resync = std::time::Instant::now();
    let mut last_sweep = std::time::Instant::now();
    let mut last_follow = std::time::Instant::now();
    loop {
        claim_and_spawn(&app).await;
        // With PostgreSQL an instance may die with runs in hand and nobody restart it: the
        // others fail those runs once they are past any run's time limit.
        if app.db.is_postgres() && last_sweep.elapsed() >= Duration::from_secs(60) {
            last_sweep = std::time::Instant::now();
            let config = app.config.clone();
            match app
                .db
                .write(move |c| Ok(fail_orphaned(c, &config, None, false)?))
                .await
            {
                Ok(0) => {}
                Ok(n) => tracing::warn!(count = n, "failed worker runs of an instance that died"),
                Err(e) => tracing::warn!(error = %e, "looking for worker runs of dead instances"),
            }
        }
        // Other instances change schedules too: follow them within seconds.
        if app.db.is_postgres() && last_follow.elapsed() >= scheduler::FOLLOW_EVERY {
            last_follow = std::time::Instant::now();
            scheduler::follow(&app).await;
        }
        // The scheduler fixes a time zone's UTC offset when a job is registered; registering
        // every schedule again each hour follows daylight-saving changes.
        if last_resync.elapsed() >= Duration::from_secs(3600) {
            last_resync = std::time::Instant::now();
            scheduler::resync_all(&app).await;
        }
        tokio::select! {
            _ = app.workers.notify.notified() => {}
            _ = tokio::time::sleep(poll) => {}
            _ = stop.changed() => break,
        }
    }
    scheduler::stop(&app).await;
    // Runs still in flight are stopped and recorded as such (not left `running`).
    let ids: Vec<String> = {
        let mut map = app
            .workers
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        map.drain()
            .map(|(id, h)| {
                h.abort();
                id
            })
            .collect()
    };
    for id in ids {
        let _ = app
            .db
            .write(move |c| {
                Ok(db::workers::finish_run(
                    c,
                    &id,
                    "failed",
                    None,
                    Some("stopped: the service shut down while this run was running"),
                )?)
            })
            .await;
    }
}

async fn claim_and_spawn(app: &AppState) {
    loop {
        let Ok(permit) = app.workers.slots.clone().try_acquire_owned() else {
            return;
        };
        let owner = app.jobs_lease.owner.clone();
        let run = match app
            .db
            .write(move |c| Ok(db::workers::claim_run(c, &owner)?))
            .await
        {
            Ok(Some(run)) => run,
            Ok(None) => return,
            Err(e) => {
                tracing::error!(error = %e, "claiming a worker run");
                return;
            }
        };
        let mut map = app
            .workers
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let id = run.id.clone();
        let a = app.clone();
        let handle = tokio::spawn(async move {
            let id = run.id.clone();
            runner::execute(&a, run).await;
            drop(permit);
            a.workers
                .running
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id);
            a.workers.notify.notify_one();
        });
        map.insert(id, handle.abort_handle());
    }
}

/// Event-triggered genies: queues a run, whose input carries the event, of each of the
/// event's user's active genies triggered by its type. Called by the outbox dispatcher inside
/// the transaction that marks the event dispatched, so each event starts each genie once.
pub fn queue_event_runs(c: &crate::db::Connection, event: &Event) -> rusqlite::Result<usize> {
    // Runs started by a run event do not start more runs with their own run events, so two
    // genies listening to each other cannot loop.
    if event.kind.starts_with("worker_run.")
        && event.data["trigger"] == "event"
        && event.data["input"]["event"]["type"]
            .as_str()
            .is_some_and(|t| t.starts_with("worker_run."))
    {
        return Ok(0);
    }
    let mut n = 0;
    for g in db::workers::event_genies(c, &event.user_id, &event.kind)? {
        // A genie never triggers itself through the events of its own runs.
        if event.data.get("worker_genie_id").and_then(Value::as_str) == Some(g.id.as_str()) {
            continue;
        }
        db::workers::insert_run(c, &g, "event", &json!({"event": event}))?;
        n += 1;
    }
    Ok(n)
}
