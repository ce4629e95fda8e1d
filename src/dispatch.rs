//! The job dispatcher: maps each job kind to the domain function that does it, and runs the
//! worker loop over the queue (`jobs`). Kept apart from the queue so that the queue stays at
//! the bottom (anything may enqueue) while this, which calls into the domain, sits above it.

use std::time::Duration;

use crate::db::sql::Connection;
use serde_json::Value;

use crate::error::{ApiError, ApiResult, Kind};
use crate::jobs::{self, Finished, Job, Lease, MAX_CRASH_RETRIES};
use crate::state::AppState;

/// `jobs::recover`, then tells what waited on each job it made `dead` (a document fails), in
/// the same transaction. Returns how many jobs were made due again.
pub fn recover(c: &Connection, lease: &Lease) -> rusqlite::Result<usize> {
    let recovered = jobs::recover(c, lease)?;
    bury(c, &recovered.dead)?;
    let closed = crate::service::campaigns::recover(c, lease)?;
    if closed > 0 {
        tracing::warn!(
            count = closed,
            "closed campaign calls a previous process left in progress (never placed again)"
        );
    }
    Ok(recovered.requeued)
}

/// `jobs::take_over` (the jobs of instances that died, once their lease ran out), then what
/// waited on each job it made `dead`, as `recover` does. Returns how many were made due again.
pub fn take_over(c: &Connection) -> rusqlite::Result<usize> {
    let taken = jobs::take_over(c)?;
    bury(c, &taken.dead)?;
    Ok(taken.requeued)
}

fn bury(c: &Connection, dead: &[Job]) -> rusqlite::Result<()> {
    for job in dead {
        tracing::error!(
            job = job.id,
            kind = %job.kind,
            payload = %job.payload,
            crashes = MAX_CRASH_RETRIES + 1,
            "job is dead: the service stopped every time it ran"
        );
        if job.kind.starts_with("document.") {
            crate::knowledge::pipeline::crashed_too_often(c, job)?;
        }
    }
    Ok(())
}

/// Runs one job by kind. Each resource that queues work adds its kind here.
async fn run(app: &AppState, job: &Job) -> ApiResult<()> {
    match job.kind.as_str() {
        "noop" => Ok(()),
        crate::webhooks::DELIVER_JOB => crate::webhooks::deliver_job(app, &job.payload).await,
        k if k.starts_with("document.") => crate::knowledge::pipeline::run(app, job).await,
        crate::service::genies::CLEANUP_JOB => {
            crate::service::genies::run_cleanup(app, &job.payload).await
        }
        crate::service::moving::RESOLVE_JOB => {
            crate::service::moving::resolve_job(app, &job.payload).await
        }
        crate::service::genie_tests::RUN_JOB => {
            crate::service::genie_tests::run_job(app, &job.payload).await
        }
        crate::service::page_chat::IDLE_JOB => {
            crate::service::page_chat::idle_job(app, &job.payload).await
        }
        crate::service::page_chat::FINISH_JOB => {
            crate::service::page_chat::finish_job(app, &job.payload).await
        }
        crate::service::conversations::SYNC_JOB => {
            crate::service::conversations::sync_job(app, &job.payload, job.attempts).await
        }
        crate::service::campaigns::TICK_JOB => {
            crate::service::campaigns::tick_job(app, &job.payload).await
        }
        crate::service::conversations::REPORT_JOB => {
            crate::service::conversations::report_job(app, &job.payload).await
        }
        other => Err(ApiError::new(
            Kind::Internal,
            format!("unknown job kind '{other}'"),
        )),
    }
}

/// Called once when a job with `max_attempts` has used them all.
async fn gave_up(app: &AppState, kind: &str, payload: &Value) {
    tracing::error!(kind, %payload, "job gave up after its last attempt");
    if kind == crate::webhooks::DELIVER_JOB
        && let Err(e) = crate::webhooks::delivery_exhausted(app, payload).await
    {
        tracing::error!(error = %e, "could not disable a failing webhook endpoint");
    }
}

/// Claims and runs every due job once; returns how many ran.
pub async fn run_due(app: &AppState) -> ApiResult<usize> {
    run_due_until(app, None).await
}

/// `run_due`, stopping before the next claim once `stop` says so: on shutdown the job in hand
/// finishes (each is bounded by its own timeouts), the rest stay queued for the next start
/// instead of holding SIGTERM up for the whole backlog.
async fn run_due_until(
    app: &AppState,
    stop: Option<&tokio::sync::watch::Receiver<bool>>,
) -> ApiResult<usize> {
    let mut n = 0;
    loop {
        if stop.is_some_and(|s| *s.borrow()) {
            break;
        }
        let lease = app.jobs_lease.clone();
        let Some(job) = app.db.write(move |c| Ok(jobs::claim(c, &lease)?)).await? else {
            break;
        };
        // On its own task, so that a job that panics fails like any other instead of ending
        // the worker loop with the job left `running`.
        let (app2, job2) = (app.clone(), job.clone());
        let span = if crate::telemetry::trace::enabled() {
            tracing::info_span!(parent: None, "job", kind = %job.kind, attempt = job.attempts)
        } else {
            tracing::Span::none()
        };
        let task = tracing::Instrument::instrument(async move { run(&app2, &job2).await }, span);
        let outcome = match run_leased(app, &job, tokio::spawn(task)).await {
            Some(Ok(r)) => r,
            Some(Err(e)) if e.is_panic() => Err(ApiError::new(
                Kind::Internal,
                "the job panicked (a bug; see the log)",
            )),
            Some(Err(e)) => Err(ApiError::new(
                Kind::Internal,
                format!("the job did not finish: {e}"),
            )),
            None => {
                app.worker_beat.beat();
                continue;
            }
        };
        if let Err(e) = &outcome {
            tracing::warn!(job = job.id, kind = %job.kind, attempt = job.attempts, error = %e, "job failed");
        }
        let base = app.config.job_backoff_base_ms;
        let (kind, payload) = (job.kind.clone(), job.payload.clone());
        let lease = app.jobs_lease.clone();
        let id = job.id;
        let finished = app
            .db
            .write(move |c| {
                // The job's stored `last_error` is the error's message, in words a person reads.
                let stored = outcome.as_ref().map(|_| ()).map_err(|e| e.message.as_str());
                Ok(jobs::finish(c, &job, &lease, stored, base)?)
            })
            .await?;
        if finished == Finished::Lost {
            tracing::warn!(
                job = id,
                kind = %kind,
                "job finished after its lease ran out and another instance took it over; its outcome here is dropped"
            );
        }
        if finished == Finished::Dead {
            gave_up(app, &kind, &payload).await;
        }
        app.worker_beat.beat();
        n += 1;
    }
    Ok(n)
}

/// Waits for a claimed job's task while renewing its lease every third of it. `None` when
/// the lease was lost (the instance stalled past it and another took the job over): the
/// task is aborted, since the job now runs elsewhere.
async fn run_leased(
    app: &AppState,
    job: &Job,
    mut task: tokio::task::JoinHandle<ApiResult<()>>,
) -> Option<Result<ApiResult<()>, tokio::task::JoinError>> {
    let every = app.jobs_lease.renew_every();
    loop {
        tokio::select! {
            r = &mut task => return Some(r),
            _ = tokio::time::sleep(every) => {
                let (lease, j) = (app.jobs_lease.clone(), job.clone());
                match app.db.write(move |c| Ok(jobs::renew(c, &j, &lease)?)).await {
                    Ok(true) => {}
                    Ok(false) => {
                        tracing::warn!(job = job.id, kind = %job.kind, "lost the lease on a running job (another instance took it over); stopping it here");
                        task.abort();
                        return None;
                    }
                    // The database is unreachable: the lease may run out, and then another
                    // instance runs the job as well; the next renewal tells.
                    Err(e) => tracing::warn!(job = job.id, error = %e, "could not renew a job's lease"),
                }
            }
        }
    }
}

/// The worker loop: runs due jobs whenever woken (`AppState::jobs_notify`) or every
/// `job_poll_ms`, until shutdown.
pub async fn worker(app: AppState, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    let poll = Duration::from_millis(app.config.job_poll_ms.max(10));
    let mut written: Option<std::time::Instant> = None;
    // Only PostgreSQL can hold another live instance's jobs; SQLite took back every running
    // job at start, so an expired lease there is this instance's own job, still running.
    let take_over_every = app
        .db
        .is_postgres()
        .then(|| (app.jobs_lease.length / 4).max(Duration::from_millis(250)));
    let mut taken_over: Option<std::time::Instant> = None;
    // Beside this loop, not in it: a long job here would let the calls' leases run out.
    let calls = tokio::spawn(crate::service::campaigns::keep_calls(
        app.clone(),
        shutdown.clone(),
    ));
    loop {
        app.worker_beat.beat();
        if let Some(every) = take_over_every
            && taken_over.is_none_or(|t| t.elapsed() >= every)
        {
            taken_over = Some(std::time::Instant::now());
            match app.db.write(|c| Ok(take_over(c)?)).await {
                Ok(0) => {}
                Ok(n) => tracing::warn!(
                    count = n,
                    "took over jobs of an instance whose lease ran out"
                ),
                Err(e) => tracing::warn!(error = %e, "looking for jobs of dead instances"),
            }
        }
        if written.is_none_or(|w| w.elapsed() >= jobs::BEAT_EVERY) {
            written = Some(std::time::Instant::now());
            write_beat(&app, false).await;
        }
        if let Err(e) = run_due_until(&app, Some(&shutdown)).await {
            tracing::error!(error = %e, "job worker");
        }
        tokio::select! {
            _ = app.jobs_notify.notified() => {}
            _ = tokio::time::sleep(poll) => {}
            _ = shutdown.changed() => {
                // A clean stop: `admin check` tells it from a stall.
                write_beat(&app, true).await;
                let _ = calls.await;
                return;
            }
        }
    }
}

/// Records the worker's last beat in the database, for `admin check` in another process.
async fn write_beat(app: &AppState, stopped: bool) {
    let at = crate::db::fmt_time(app.worker_beat.last());
    let res = app
        .db
        .write(move |c| Ok(crate::db::telemetry::beat(c, &at, stopped)?))
        .await;
    if let Err(e) = res {
        tracing::warn!(error = %e, "could not record the job worker's heartbeat");
    }
}
