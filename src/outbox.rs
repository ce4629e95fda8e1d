//! The outbox dispatcher: fans out the events recorded in `event_outbox` (see `events`) to
//! webhook deliveries and event-triggered worker runs. Each batch is ONE write transaction:
//! the events are marked dispatched and their deliveries and runs queued together, so a crash
//! mid-way rolls everything back and the next dispatcher (this instance after a restart, or
//! another one) starts the batch again from scratch: no event is lost and none is fanned out
//! twice. The transaction is the claim; no lease is needed since nothing in it waits on the
//! network. On PostgreSQL every write transaction holds the cluster-wide write lock
//! (`db::pg`), so the dispatchers of several instances take turns and events are fanned out
//! in the order they were recorded; the conditional marking (`db::events::mark_dispatched`)
//! keeps each event to one fan-out even without that lock.

use std::time::Duration;

use tokio::sync::watch;

use crate::db::{self, sql::Connection};
use crate::error::ApiResult;
use crate::events::Event;
use crate::state::AppState;

/// Events fanned out per transaction: bounds how long one holds the writer.
const BATCH: i64 = 64;

/// How long a dispatched event stays in the outbox before housekeeping deletes it (its
/// deliveries keep their own copy of the body).
pub const RETAIN: Duration = Duration::from_secs(24 * 3600);

/// What one batch did.
#[derive(Debug, Default, Clone, Copy)]
pub struct Dispatched {
    pub events: usize,
    pub deliveries: usize,
    pub runs: usize,
    /// Whether the batch was full (more may be waiting).
    pub full: bool,
}

/// Fans out up to `limit` pending events, oldest first, inside the caller's transaction.
pub fn dispatch_batch(
    c: &Connection,
    webhook_max_attempts: i64,
    limit: i64,
) -> rusqlite::Result<Dispatched> {
    let now = db::now();
    let pending = db::events::pending(c, limit)?;
    let mut d = Dispatched {
        full: pending.len() as i64 >= limit,
        ..Dispatched::default()
    };
    for p in pending {
        if !db::events::mark_dispatched(c, p.seq, &now)? {
            continue;
        }
        let event = Event {
            id: p.id,
            kind: p.kind,
            created_at: p.created_at,
            user_id: p.user_id,
            data: p.data,
        };
        d.deliveries += crate::webhooks::fan_out(c, &event, webhook_max_attempts)?;
        d.runs += crate::workers::queue_event_runs(c, &event)?;
        d.events += 1;
    }
    Ok(d)
}

/// Dispatches every pending event, a batch per transaction, and wakes the job worker and the
/// worker-genie executor for what was queued; how many events it fanned out. The batches go
/// in the writer's turn (`Db::write_in_turn`): a backlog (a start after a crash, a burst of
/// events) is a loop of writes that would otherwise hold its runtime thread, and the
/// requests queued on it, for up to 128 batches.
pub async fn dispatch_pending(app: &AppState) -> ApiResult<usize> {
    let mut n = 0;
    loop {
        let max = app.config.webhook_max_attempts;
        let d = app
            .db
            .write_in_turn(move |c| Ok(dispatch_batch(c, max, BATCH)?))
            .await?;
        n += d.events;
        if d.deliveries > 0 {
            app.wake_jobs();
        }
        if d.runs > 0 {
            app.workers.notify.notify_one();
        }
        if !d.full {
            return Ok(n);
        }
    }
}

/// The dispatcher loop, started by `serve`: runs when an event is emitted on this instance
/// (`Bus::emit`) and every `--job-poll-ms` otherwise (events recorded by a process that died
/// before dispatching them, or on another instance whose dispatcher is down), until shutdown.
pub async fn run(app: AppState, mut stop: watch::Receiver<bool>) {
    let poll = Duration::from_millis(app.config.job_poll_ms.max(10));
    let mut emitted = true; // at start, events a previous process left are looked for at once
    loop {
        // On a poll, a read first: an idle instance then does not take the writer (on
        // PostgreSQL, the cluster-wide write lock) every poll only to find nothing.
        let waiting = emitted
            || app
                .db
                .read(|c| Ok(!db::events::pending(c, 1)?.is_empty()))
                .await
                .unwrap_or(true);
        if waiting && let Err(e) = dispatch_pending(&app).await {
            tracing::error!(error = %e, "dispatching events; retried at the next poll");
        }
        emitted = tokio::select! {
            _ = app.bus.dispatch.notified() => true,
            _ = tokio::time::sleep(poll) => false,
            _ = stop.changed() => return,
        };
    }
}

/// Deletes events dispatched longer than [`RETAIN`] ago (housekeeping); how many.
pub async fn prune(app: &AppState) -> ApiResult<usize> {
    let before =
        db::fmt_time(chrono::Utc::now() - chrono::Duration::from_std(RETAIN).unwrap_or_default());
    app.db
        .write(move |c| Ok(db::events::prune(c, &before)?))
        .await
}
