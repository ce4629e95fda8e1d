//! Keeps the documents' search index (`doc_index`, SQLite only) in step with the database:
//! at a start it checks the index against the queue (migration V49) and rebuilds it when it
//! is new, behind or ahead; then it takes queued changes in batches, re-indexes each queued
//! document whole, and deletes the queue rows the index's commit covers.
//!
//! Searches read the index only once it was checked and while nothing is queued
//! (`db::documents::search`), so how far behind this runs changes which engine answers, and
//! how fast, never what a search may find.
//!
//! A start's rebuild with documents to index, or a backlog of more than a batch (found at a
//! start or built up since), runs in a process of its own when `serve` has an executable for
//! it (`index_build`): what indexing leaves in the allocator's arenas then leaves with that
//! process, not with the server.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::index_build;
use crate::db::{self, Db, documents as repo};
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
        // A stop does not wait for a build: dropped, its child is killed, and the index and
        // the queue stay as they were after the last batch, for the next start.
        let started = tokio::select! {
            started = start(&app, &ix) => started,
            _ = stop.changed() => return,
        };
        match started {
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
        // A backlog of more than a batch that built up since (an import of thousands of
        // documents) goes to a child as a start's does; what it leaves, `drain` takes.
        if app.config.index_exe.is_some() && backlog(&app.db).await > BATCH {
            let handed = tokio::select! {
                handed = start(&app, &ix) => handed,
                _ = stop.changed() => return,
            };
            if let Err(e) = handed {
                tracing::warn!(error = %e.message, "documents search index: could not hand the backlog over");
            }
        }
        let drained = drain(&app.db, &ix, &stop).await;
        // `drain` closes the writer after each batch; it is still open after a failed step,
        // or after a rebuild's empty commit (`rebuild`) with nothing queued behind it. Its
        // memory back while there is nothing to index.
        let closing = ix.clone();
        if let Err(e) = db::run_blocking(move || closing.close_writer().map_err(failed)).await {
            tracing::warn!(error = %e.message, "documents search index: closing the writer");
        }
        if *stop.borrow() {
            return;
        }
        // After a failure (logged), not four times a second: FTS5 answers meanwhile.
        let pause = if drained.is_some() { POLL } else { RETRY };
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = stop.changed() => {}
        }
    }
}

/// Makes the index whole at a start (`rebuild`) when it does not cover the queue exactly.
/// The build, or a backlog of more than a batch (a build a stop or a crash cut short, an
/// import), runs in a child process when there is an executable for it and something to
/// index; whatever that leaves (it failed, or documents changed meanwhile), the server does.
async fn start(app: &AppState, ix: &Arc<DocIndex>) -> ApiResult<()> {
    let step = in_step(&app.db, ix).await?;
    if step.whole && step.backlog <= BATCH {
        return Ok(());
    }
    // A rebuild with no document to index is one empty commit.
    let worth_a_child = step.whole || app.db.read(|c| Ok(repo::any_searchable(c)?)).await?;
    if let Some(exe) = &app.config.index_exe
        && worth_a_child
    {
        let config = &app.config;
        let started = std::time::Instant::now();
        match index_build::in_child(exe, &config.db_path(), &config.doc_index_dir()).await {
            Ok(built) => {
                tracing::info!(
                    documents = built.documents,
                    chunks = built.chunks,
                    peak_rss_kb = built.peak_rss_kb,
                    took_ms = started.elapsed().as_millis() as u64,
                    "documents search index: built in a process of its own"
                );
                let reloading = ix.clone();
                db::run_blocking(move || reloading.reload().map_err(failed)).await?;
            }
            Err(e) => tracing::warn!(
                error = %e,
                "documents search index: the build process failed; indexing here"
            ),
        }
    }
    // What is queued behind a whole index is `run`'s to drain.
    if in_step(&app.db, ix).await?.whole {
        return Ok(());
    }
    rebuild(&app.db, ix).await
}

/// Queue rows after the first still queued, at most; 0 when the queue cannot be read (the
/// indexer's own read says why).
async fn backlog(db: &Db) -> i64 {
    match db.read(|c| Ok(repo::search_queue_state(c)?)).await {
        Ok((given, first)) => first.map_or(0, |f| given - f + 1),
        Err(_) => 0,
    }
}

/// How the index stands against the queue.
struct Step {
    /// Its last commit covers every row before the first still queued (or every row given,
    /// when none is), and no row the database never gave (an index newer than a restored
    /// database).
    whole: bool,
    /// Queue rows after the first still queued, at most (rows can be missing in between).
    backlog: i64,
}

async fn in_step(db: &Db, ix: &Arc<DocIndex>) -> ApiResult<Step> {
    let reading = ix.clone();
    let through = db::run_blocking(move || reading.through().map_err(failed)).await?;
    let (given, first) = db.read(|c| Ok(repo::search_queue_state(c)?)).await?;
    let covered = first.map_or(given, |f| f - 1);
    Ok(Step {
        whole: through.is_some_and(|t| t >= covered && t <= given),
        backlog: first.map_or(0, |f| given - f + 1),
    })
}

/// Empties the index, covering the queue so far, and queues every document that may be
/// searched again for `drain`.
async fn rebuild(db: &Db, ix: &Arc<DocIndex>) -> ApiResult<()> {
    tracing::info!(
        dir = %ix.dir().display(),
        "documents search index: building it from the database"
    );
    let before = db.write_in_turn(|c| Ok(repo::search_queue_all(c)?)).await?;
    let building = ix.clone();
    db::run_blocking(move || building.apply(&[], before, true).map_err(failed)).await?;
    // The rows before the documents just queued: each is for a document queued again above,
    // or one the emptied index rightly leaves out.
    db.write_in_turn(move |c| Ok(repo::search_queue_done(c, before)?))
        .await?;
    Ok(())
}

/// The build process: `genied index-worker --database D --index I` (`index_build`).
pub fn child_main(database: &Path, index: &Path) -> anyhow::Result<()> {
    index_build::exit_with_the_server();
    let db = Db::open_with(database, Some(1))?;
    let ix = Arc::new(DocIndex::open(index)?);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let documents = runtime
        .block_on(build(&db, &ix))
        .map_err(|e| anyhow::anyhow!("{}", e.message))?;
    index_build::report(documents, ix.chunks())
}

/// What the build process does: the index made whole (rebuilt if it is not in step) and
/// the queue drained; the documents indexed.
async fn build(db: &Db, ix: &Arc<DocIndex>) -> ApiResult<usize> {
    if !in_step(db, ix).await?.whole {
        rebuild(db, ix).await?;
    }
    let (_, never) = watch::channel(false);
    drain(db, ix, &never)
        .await
        .ok_or_else(|| ApiError::internal("documents search index: a batch failed (logged)"))
}

/// Indexes queued changes batch by batch until none is left or `stop`; the documents
/// indexed, `None` when a step failed (logged).
async fn drain(db: &Db, ix: &Arc<DocIndex>, stop: &watch::Receiver<bool>) -> Option<usize> {
    let mut indexed = 0;
    while !*stop.borrow() {
        let next = db
            .read_snapshot(|c| Ok(repo::search_queue_next(c, BATCH)?))
            .await;
        let (through, docs) = match next {
            Ok(Some(next)) => next,
            Ok(None) => return Some(indexed),
            Err(e) => {
                tracing::warn!(error = %e.message, "documents search index: could not read the queue");
                return None;
            }
        };
        let started = std::time::Instant::now();
        let documents = docs.len();
        let applying = ix.clone();
        let applied =
            db::run_blocking(move || applying.apply(&docs, through, false).map_err(failed)).await;
        if let Err(e) = applied {
            tracing::warn!(error = %e.message, "documents search index: could not index");
            return None;
        }
        indexed += documents;
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
            return None;
        }
        // In turn: a background loop's write never shares a request's commit.
        let done = db
            .write_in_turn(move |c| Ok(repo::search_queue_done(c, through)?))
            .await;
        if let Err(e) = done {
            // Indexed again next time: a document re-indexed is the same.
            tracing::warn!(error = %e.message, "documents search index: could not drop the indexed rows");
            return None;
        }
    }
    Some(indexed)
}

fn failed(e: tantivy::TantivyError) -> ApiError {
    ApiError::internal(format!("documents search index: {e}"))
}
