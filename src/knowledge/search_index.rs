//! Keeps the documents' search index (`doc_index`, SQLite only) in step with the database:
//! at a start it checks the index against the queue (migration V49) and rebuilds it when it
//! is new, behind or ahead; then it takes queued changes in batches, re-indexes each queued
//! document whole, and deletes the queue rows the index's commit covers.
//!
//! Searches read the index only once it was checked and while nothing is queued
//! (`db::documents::search`), so how far behind this runs changes which engine answers, and
//! how fast, never what a search may find.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::db::{self, documents as repo};
use crate::doc_index::DocIndex;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// Queue rows taken a batch: one commit of the index each (some 15 ms), one document's rows
/// many (a row per chunk added or removed).
const BATCH: i64 = 2000;

/// How often an idle indexer looks at the queue: the longest a search answers from FTS5
/// after a document's change.
const POLL: Duration = Duration::from_millis(250);

/// How long the indexer waits after a failure before it tries again.
const RETRY: Duration = Duration::from_secs(5);

/// Runs until `stop`; with no index (PostgreSQL, or one that could not be opened), waits
/// for it.
pub async fn run(app: AppState, mut stop: watch::Receiver<bool>) {
    let Some(ix) = app.doc_index.clone() else {
        let _ = stop.wait_for(|stopped| *stopped).await;
        return;
    };
    loop {
        match check(&app, &ix).await {
            Ok(()) => break,
            Err(e) => {
                tracing::warn!(error = %e.message, "documents search index: could not check it against the database")
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(RETRY) => {}
            _ = stop.changed() => return,
        }
    }
    ix.set_ready();
    loop {
        let drained = drain(&app, &ix, &stop).await;
        // `drain` closes the writer after each batch; it is still open after a failed step,
        // or after a rebuild's empty commit (`check`) with nothing queued behind it. Its
        // memory back while there is nothing to index.
        let closing = ix.clone();
        if let Err(e) = db::run_blocking(move || closing.close_writer().map_err(failed)).await {
            tracing::warn!(error = %e.message, "documents search index: closing the writer");
        }
        if *stop.borrow() {
            return;
        }
        // After a failure (logged), not four times a second: FTS5 answers meanwhile.
        let pause = if drained { POLL } else { RETRY };
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = stop.changed() => {}
        }
    }
}

/// Makes the index whole again when it does not cover the queue exactly: its last commit
/// must cover every row before the first still queued (or every row given, when none is),
/// and no row the database never gave (an index newer than a restored database).
async fn check(app: &AppState, ix: &Arc<DocIndex>) -> ApiResult<()> {
    let reading = ix.clone();
    let through = db::run_blocking(move || reading.through().map_err(failed)).await?;
    let (given, first) = app.db.read(|c| Ok(repo::search_queue_state(c)?)).await?;
    let covered = first.map_or(given, |f| f - 1);
    if through.is_some_and(|t| t >= covered && t <= given) {
        return Ok(());
    }
    tracing::info!(
        index_through = ?through,
        queue_given = given,
        dir = %ix.dir().display(),
        "documents search index: building it from the database"
    );
    let before = app
        .db
        .write_in_turn(|c| Ok(repo::search_queue_all(c)?))
        .await?;
    let building = ix.clone();
    db::run_blocking(move || building.apply(&[], before, true).map_err(failed)).await?;
    // The rows before the documents just queued: each is for a document queued again above,
    // or one the emptied index rightly leaves out.
    app.db
        .write_in_turn(move |c| Ok(repo::search_queue_done(c, before)?))
        .await?;
    Ok(())
}

/// Indexes queued changes batch by batch until none is left or `stop`; false when a step
/// failed (logged).
async fn drain(app: &AppState, ix: &Arc<DocIndex>, stop: &watch::Receiver<bool>) -> bool {
    while !*stop.borrow() {
        let next = app
            .db
            .read_snapshot(|c| Ok(repo::search_queue_next(c, BATCH)?))
            .await;
        let (through, docs) = match next {
            Ok(Some(next)) => next,
            Ok(None) => return true,
            Err(e) => {
                tracing::warn!(error = %e.message, "documents search index: could not read the queue");
                return false;
            }
        };
        let started = std::time::Instant::now();
        let documents = docs.len();
        let applying = ix.clone();
        let applied =
            db::run_blocking(move || applying.apply(&docs, through, false).map_err(failed)).await;
        if let Err(e) = applied {
            tracing::warn!(error = %e.message, "documents search index: could not index");
            return false;
        }
        tracing::debug!(
            documents,
            through,
            took_us = started.elapsed().as_micros() as u64,
            "documents search index: committed"
        );
        // Closed after each batch, not only when the queue is empty: what a batch leaves in
        // the writer threads' arenas is given back before the next (a rebuild's batches
        // otherwise piled up to a high-water mark of 145 MB; docs/performance.md).
        let closing = ix.clone();
        if let Err(e) = db::run_blocking(move || closing.close_writer().map_err(failed)).await {
            tracing::warn!(error = %e.message, "documents search index: closing the writer");
            return false;
        }
        // In turn: a background loop's write never shares a request's commit.
        let done = app
            .db
            .write_in_turn(move |c| Ok(repo::search_queue_done(c, through)?))
            .await;
        if let Err(e) = done {
            // Indexed again next time: a document re-indexed is the same.
            tracing::warn!(error = %e.message, "documents search index: could not drop the indexed rows");
            return false;
        }
    }
    true
}

fn failed(e: tantivy::TantivyError) -> ApiError {
    ApiError::internal(format!("documents search index: {e}"))
}
