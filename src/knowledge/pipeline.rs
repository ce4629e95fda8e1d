//! The durable jobs that move a document's status. `document.extract` turns the source into
//! raw text (stored in the file store) and queues `document.optimize`, which cleans and
//! chunks the text, stores it with the provider (the 20-character external id) and marks the
//! document `completed`. `document.sync_genie` pushes a genie's document list to the provider
//! when an immediate push failed. Each step re-reads the document and does nothing when its
//! status moved on, so a job that runs twice (after a crash) is harmless.

use std::time::Duration;

use crate::db::sql::Connection;
use serde_json::json;

use super::crawl::{self, FetchError};
use super::extract::{self, text};
use crate::db::documents::{self as docs, Document, Scope};
use crate::document_store::ReadError;
use crate::error::{ApiError, ApiResult, Kind};
use crate::events::Event;
use crate::jobs::{self, Job};
use crate::state::AppState;

pub const EXTRACT: &str = "document.extract";
pub const OPTIMIZE: &str = "document.optimize";
pub const SYNC_GENIE: &str = "document.sync_genie";
/// Network failures of a source are retried this many times before the document fails.
pub const MAX_FETCH_ATTEMPTS: i64 = 3;
/// Characters per retrieval chunk.
pub const CHUNK_CHARS: usize = 1000;

/// Queues the first step; call inside the transaction that created the document.
pub fn enqueue_extract(c: &Connection, doc_id: &str) -> rusqlite::Result<i64> {
    jobs::enqueue(
        c,
        EXTRACT,
        &json!({"document_id": doc_id}),
        Duration::ZERO,
        None,
    )
}

/// Puts a failed document back into the pipeline, inside the caller's transaction: at
/// `pending_optimization` when the text extracted before the failure is still stored (the
/// source is not fetched or parsed again), else at `pending_extraction`. Returns the status.
pub fn requeue(
    c: &Connection,
    d: &Document,
    store: &super::store::Store,
) -> ApiResult<&'static str> {
    let (status, kind) = match &d.content_hash {
        Some(h) if store.exists(h)? => ("pending_optimization", OPTIMIZE),
        _ => ("pending_extraction", EXTRACT),
    };
    docs::set_status(c, &d.id, status, None)?;
    jobs::enqueue(c, kind, &json!({"document_id": d.id}), Duration::ZERO, None)?;
    Ok(status)
}

/// Runs one `document.*` job. An error leaves the job to the queue's retry: a source that
/// failed for now ([`FetchError::Transient`], within [`MAX_FETCH_ATTEMPTS`]) or the database;
/// whatever will not get better fails the document instead and ends the job.
pub async fn run(app: &AppState, job: &Job) -> ApiResult<()> {
    let id = |k: &str| {
        job.payload[k]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| ApiError::validation(format!("job payload lacks {k}")))
    };
    match job.kind.as_str() {
        EXTRACT => extract_step(app, &id("document_id")?, job.attempts).await,
        OPTIMIZE => optimize_step(app, &id("document_id")?).await,
        SYNC_GENIE => sync_genie(app, &id("genie_id")?).await,
        other => Err(ApiError::new(
            Kind::Internal,
            format!("unknown job kind '{other}'"),
        )),
    }
}

async fn load(app: &AppState, id: &str) -> ApiResult<Option<Document>> {
    let id = id.to_string();
    app.db.read(move |c| Ok(docs::get_any(c, &id)?)).await
}

async fn read_file(app: &AppState, hash: Option<String>) -> Result<Vec<u8>, FetchError> {
    let hash =
        hash.ok_or_else(|| FetchError::Permanent("the document has no stored source".into()))?;
    // A store that is down for now is retried like a source that is; a missing file is not
    // coming back.
    super::store(app).read(&hash).await.map_err(|e| match e {
        ReadError::Missing => {
            FetchError::Permanent(format!("the stored source could not be read: {e}"))
        }
        ReadError::Unavailable(m) => {
            FetchError::Transient(format!("the stored source could not be read: {m}"))
        }
    })
}

fn sandbox(app: &AppState) -> extract::sandbox::Sandbox {
    extract::sandbox::Sandbox::from_config(&app.config)
}

async fn source_text(app: &AppState, d: &Document) -> Result<String, FetchError> {
    let url = || {
        d.source_url
            .clone()
            .ok_or_else(|| FetchError::Permanent("the document has no source URL".into()))
    };
    match d.doc_type.as_str() {
        "text" => Ok(text::decode(
            &read_file(app, d.original_hash.clone()).await?,
        )),
        // Uploaded files are parsed in the extraction sandbox (a child process with limits),
        // so a file that crashes or runs away a parser fails alone.
        "pdf_upload" => {
            let bytes = read_file(app, d.original_hash.clone()).await?;
            sandbox(app)
                .file_to_text("upload.pdf", bytes)
                .await
                .map_err(FetchError::Permanent)
        }
        "file_upload" => {
            let bytes = read_file(app, d.original_hash.clone()).await?;
            let name = d.filename.clone().unwrap_or_default();
            sandbox(app)
                .file_to_text(&name, bytes)
                .await
                .map_err(FetchError::Permanent)
        }
        "url" => match crawl::fetch_page(&app.net, &sandbox(app), &url()?).await? {
            Some(p) => Ok(p.text),
            None => Err(FetchError::Permanent(
                "the page is not HTML, text or PDF".into(),
            )),
        },
        "website" => {
            let max_pages = d.options["max_pages"]
                .as_u64()
                .unwrap_or(crawl::DEFAULT_MAX_PAGES as u64) as u32;
            let max_depth = d.options["max_depth"]
                .as_u64()
                .unwrap_or(crawl::DEFAULT_MAX_DEPTH as u64) as u32;
            let pages = crawl::crawl(&app.net, &url()?, max_pages, max_depth).await?;
            Ok(crawl::join_pages(&pages))
        }
        "youtube" => {
            let src = url()?;
            let vid = extract::youtube::video_id(&src).ok_or_else(|| {
                FetchError::Permanent(format!("{src} is not a YouTube video URL"))
            })?;
            let t_url = extract::youtube::transcript_url(&app.config.youtube_transcript_url, &vid);
            let res = app
                .net
                .get(&t_url, crate::net::Limits::default())
                .await
                .map_err(|e| match e {
                    crate::net::NetError::Refused(m) => {
                        FetchError::Permanent(format!("the transcript source was refused: {m}"))
                    }
                    crate::net::NetError::Failed(m) => {
                        FetchError::Transient(format!("the transcript source failed: {m}"))
                    }
                })?;
            match res.status {
                200..=299 => {}
                404 => {
                    return Err(FetchError::Permanent(format!(
                        "no transcript is available for video {vid}"
                    )));
                }
                s if s >= 500 || s == 429 => {
                    return Err(FetchError::Transient(format!(
                        "the transcript source answered HTTP {s}"
                    )));
                }
                s => {
                    return Err(FetchError::Permanent(format!(
                        "the transcript source answered HTTP {s}"
                    )));
                }
            }
            let body = res.text();
            if body.trim().is_empty() {
                return Err(FetchError::Permanent(format!(
                    "no transcript is available for video {vid}"
                )));
            }
            extract::youtube::parse_transcript(&body).map_err(FetchError::Permanent)
        }
        other => Err(FetchError::Permanent(format!(
            "unknown document type '{other}'"
        ))),
    }
}

async fn extract_step(app: &AppState, id: &str, attempts: i64) -> ApiResult<()> {
    let Some(d) = load(app, id).await? else {
        return Ok(());
    };
    if d.status != "pending_extraction" {
        return Ok(());
    }
    let text = match source_text(app, &d).await {
        Ok(t) if t.trim().is_empty() => {
            return fail(app, id, "no text could be extracted from the source").await;
        }
        Ok(t) => t,
        Err(FetchError::Transient(m)) if attempts < MAX_FETCH_ATTEMPTS => {
            return Err(ApiError::upstream(m));
        }
        Err(e) => return fail(app, id, e.message()).await,
    };
    let store = super::store(app);
    let staged = store.stage(text.into_bytes()).await?;
    let id2 = id.to_string();
    let put = store.clone();
    let unused = app
        .db
        .write(move |c| {
            let Some(cur) = docs::get_any(c, &id2)? else {
                return Ok(None);
            };
            if cur.status != "pending_extraction" {
                return Ok(None);
            }
            let hash = put.commit(&staged)?;
            docs::set_content_hash(c, &id2, &hash)?;
            docs::set_status(c, &id2, "pending_optimization", None)?;
            jobs::enqueue(
                c,
                OPTIMIZE,
                &json!({"document_id": id2}),
                Duration::ZERO,
                None,
            )?;
            Ok(cur.content_hash.filter(|old| *old != hash))
        })
        .await?;
    app.wake_jobs();
    // The replaced text's file goes only now that the record no longer names it.
    store.collect(&app.db, unused.into_iter().collect()).await;
    Ok(())
}

async fn optimize_step(app: &AppState, id: &str) -> ApiResult<()> {
    let Some(d) = load(app, id).await? else {
        return Ok(());
    };
    if d.status != "pending_optimization" {
        return Ok(());
    }
    let raw = match read_file(app, d.content_hash.clone()).await {
        Ok(b) => text::decode(&b),
        Err(e) => return fail(app, id, e.message()).await,
    };
    let clean = text::optimize(&raw);
    if clean.is_empty() {
        return fail(app, id, "no text was left after removing boilerplate").await;
    }
    finalize(app, &d, clean).await.map(|_| ())
}

/// The error of a document whose pipeline step the process died in every time it ran.
pub const CRASHED_ERROR: &str = "the service stopped every time it processed this document \
     (it may be malformed or too complex), so it was not imported";

/// Called by `dispatch::recover`, in its transaction, for a `document.*` job it made `dead`: a
/// document still waiting on that step fails instead of staying pending for ever.
pub fn crashed_too_often(c: &Connection, job: &Job) -> rusqlite::Result<()> {
    if job.kind != EXTRACT && job.kind != OPTIMIZE {
        return Ok(());
    }
    let Some(id) = job.payload["document_id"].as_str() else {
        return Ok(());
    };
    if let Some(d) = docs::get_any(c, id)?
        && d.status.starts_with("pending_")
    {
        docs::set_status(c, id, "failed", Some(CRASHED_ERROR))?;
    }
    Ok(())
}

/// Marks the document failed with a readable error and records `document.failed`.
async fn fail(app: &AppState, id: &str, error: &str) -> ApiResult<()> {
    let (id2, err) = (id.to_string(), error.to_string());
    let failed = app
        .db
        .write(move |c| {
            docs::set_status(c, &id2, "failed", Some(&err))?;
            let Some(d) = docs::get_any(c, &id2)? else {
                return Ok(None);
            };
            let e = Event::new(
                "document.failed",
                &d.user_id,
                super::render(&d, vec![], false),
            );
            Ok(Some(crate::events::record(c, e)?))
        })
        .await?;
    if let Some(failed) = failed {
        tracing::info!(document = %id, error, "document failed");
        app.bus.emit(failed);
    }
    Ok(())
}

/// Stores the final text: the provider gets a new document (the old external one, if any,
/// is deleted afterwards), chunks are replaced, the status becomes `completed`, and every
/// genie using the document gets its list pushed with the new external id.
pub async fn finalize(app: &AppState, d: &Document, text: String) -> ApiResult<Document> {
    let external = app.voice.default().create_document(&d.name, &text).await?;
    if external.chars().count() != 20 {
        tracing::warn!(document = %d.id, external = %external, "provider document id is not 20 characters");
    }
    let chunks = text::chunk(&text, CHUNK_CHARS);
    let store = super::store(app);
    let put = store.clone();
    let size = text.len() as i64;
    let staged = match store.stage(text.into_bytes()).await {
        Ok(s) => s,
        Err(e) => {
            let _ = app.voice.default().delete_document(&external).await;
            return Err(e);
        }
    };
    let (id, ext2) = (d.id.clone(), external.clone());
    let sized = d.doc_type == "text"
        || d.doc_type == "url"
        || d.doc_type == "website"
        || d.doc_type == "youtube";
    let updated = app
        .db
        .write(move |c| {
            let Some(cur) = docs::get_any(c, &id)? else {
                return Ok(None);
            };
            let hash = put.commit(&staged)?;
            docs::set_content_hash(c, &id, &hash)?;
            docs::set_external_id(c, &id, Some(&ext2))?;
            docs::set_status(c, &id, "completed", None)?;
            if sized {
                docs::set_size(c, &id, size)?;
            }
            docs::replace_chunks(c, &id, &chunks)?;
            let doc = docs::get_any(c, &id)?.expect("present");
            let scope = Scope {
                user_id: doc.user_id.clone(),
                all: true,
            };
            let agents = docs::dependent_agents(c, &id, &scope)?;
            let e = Event::new(
                "document.completed",
                &doc.user_id,
                super::render(&doc, agents, false),
            );
            Ok(Some((
                doc,
                docs::linked_genies(c, &id)?,
                cur.content_hash.filter(|old| *old != hash),
                crate::events::record(c, e)?,
            )))
        })
        .await;
    let (doc, genies, unused, completed) = match updated {
        Ok(Some(x)) => x,
        Ok(None) => {
            // Deleted meanwhile: do not leave the provider copy behind.
            let _ = app.voice.default().delete_document(&external).await;
            return Err(ApiError::not_found("document"));
        }
        Err(e) => {
            let _ = app.voice.default().delete_document(&external).await;
            return Err(e);
        }
    };
    push_genies(app, &genies).await;
    if let Some(old) = d.external_id.as_deref().filter(|o| *o != external)
        && let Err(e) = app.voice.default().delete_document(old).await
    {
        tracing::warn!(document = %d.id, old, error = %e, "could not delete the old provider document");
    }
    app.bus.emit(completed);
    // The replaced text's file goes only now that the committed record no longer names it.
    store.collect(&app.db, unused.into_iter().collect()).await;
    Ok(doc)
}

/// Pushes one genie's full document list to the provider (no-op without an external agent).
pub async fn sync_genie(app: &AppState, genie_id: &str) -> ApiResult<()> {
    match super::agents::sync_agent_documents(app, genie_id).await {
        // A genie deleted since the push was queued has nothing left to push.
        Err(e) if e.is(Kind::AgentNotFound) => Ok(()),
        other => other,
    }
}

/// Pushes every genie's list now; a push that fails is queued as a durable retry.
pub async fn push_genies(app: &AppState, genies: &[String]) {
    for g in genies {
        if let Err(e) = sync_genie(app, g).await {
            tracing::warn!(genie = %g, error = %e, "document list push failed; queued for retry");
            let (g2, base) = (g.clone(), app.config.job_backoff_base_ms);
            let _ = app
                .db
                .write(move |c| {
                    Ok(jobs::enqueue(
                        c,
                        SYNC_GENIE,
                        &json!({"genie_id": g2}),
                        jobs::backoff(1, base),
                        Some(20),
                    )?)
                })
                .await;
        }
    }
}
