//! Worker genie operations behind the `worker-genies` actions: saving a genie (its
//! credential names must exist; the scheduler follows every change), deleting it (its
//! running runs stop), starting and cancelling runs, and storing and deleting the encrypted
//! credentials. Running a queued run and the triggers are `crate::workers`.

use crate::db::sql::Connection;
use serde_json::Value;

use crate::db::workers::{Run, WorkerGenie};
use crate::db::{self, workers::Credential, workers::GenieFields, workers::NewCredential};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::workers::credentials as cipher;
use crate::workers::{self, scheduler, tools::Opened};

/// Every credential a genie names must be one of its owner's.
fn check_refs(c: &Connection, owner_id: &str, f: &GenieFields) -> ApiResult<()> {
    for r in &f.credential_refs {
        if db::workers::credential_by_name(c, owner_id, r)?.is_none() {
            return Err(ApiError::validation(format!(
                "data.credential_refs: no stored credential named '{r}' (store it with store-credential first)"
            )));
        }
    }
    Ok(())
}

pub async fn create(app: &AppState, owner_id: &str, f: GenieFields) -> ApiResult<WorkerGenie> {
    let uid = owner_id.to_string();
    let g = app
        .db
        .write(move |c| {
            check_refs(c, &uid, &f)?;
            Ok(db::workers::insert_genie(c, &uid, &f)?)
        })
        .await?;
    scheduler::sync(app, &g.id).await;
    Ok(g)
}

/// Replaces the genie's fields with what `change` makes of the current genie, read in the
/// same transaction so that concurrent updates do not lose each other's changes.
pub async fn update<F>(
    app: &AppState,
    owner_id: &str,
    id: &str,
    change: F,
) -> ApiResult<WorkerGenie>
where
    F: FnOnce(&WorkerGenie) -> ApiResult<GenieFields> + Send + 'static,
{
    let (uid, id) = (owner_id.to_string(), id.to_string());
    let g = app
        .db
        .write(move |c| {
            let cur = db::workers::get_genie(c, &uid, &id)?
                .ok_or_else(|| ApiError::not_found("worker genie"))?;
            let f = change(&cur)?;
            check_refs(c, &uid, &f)?;
            db::workers::update_genie(c, &uid, &id, &f)?
                .ok_or_else(|| ApiError::not_found("worker genie"))
        })
        .await?;
    scheduler::sync(app, &g.id).await;
    Ok(g)
}

/// Deletes the genie with its run history; runs of it this process is running stop.
pub async fn delete(app: &AppState, owner_id: &str, id: &str) -> ApiResult<()> {
    let (uid, i2) = (owner_id.to_string(), id.to_string());
    let running = app
        .db
        .write(move |c| {
            let (runs, _) = db::workers::list_runs(c, &uid, Some(&i2), Some("running"), 1000, 0)?;
            if !db::workers::delete_genie(c, &uid, &i2)? {
                return Err(ApiError::not_found("worker genie"));
            }
            Ok(runs.into_iter().map(|r| r.id).collect::<Vec<_>>())
        })
        .await?;
    for r in running {
        app.workers.abort(&r);
    }
    scheduler::sync(app, id).await;
    Ok(())
}

/// Queues a run of one of `owner_id`'s genies, started by hand.
pub async fn start_run(app: &AppState, owner_id: &str, id: &str, input: Value) -> ApiResult<Run> {
    let (uid, i2) = (owner_id.to_string(), id.to_string());
    let g = app
        .db
        .read(move |c| {
            db::workers::get_genie(c, &uid, &i2)?.ok_or_else(|| ApiError::not_found("worker genie"))
        })
        .await?;
    workers::enqueue(app, g, "manual", input).await
}

/// Cancels a queued or running run (a finished one is a conflict) and stops it if this
/// process is running it.
pub async fn cancel_run(app: &AppState, owner_id: &str, run_id: &str) -> ApiResult<Run> {
    let (uid, i2) = (owner_id.to_string(), run_id.to_string());
    let run = app
        .db
        .write(move |c| {
            let run = db::workers::get_run(c, &uid, &i2)?
                .ok_or_else(|| ApiError::not_found("worker run"))?;
            if !matches!(run.status.as_str(), "queued" | "running") {
                return Err(ApiError::conflict(format!(
                    "the run is already {}; only queued or running runs can be cancelled",
                    run.status
                )));
            }
            Ok(
                db::workers::finish_run(c, &i2, "cancelled", None, Some("cancelled by the owner"))?
                    .unwrap_or(run),
            )
        })
        .await?;
    app.workers.abort(run_id);
    Ok(run)
}

/// A checked credential to store.
pub struct NewSecret {
    pub name: String,
    pub credential_type: String,
    pub value: String,
    pub url_prefix: Option<String>,
    pub header_name: Option<String>,
}

/// Stores a credential encrypted with the master key; names are unique per owner.
pub async fn store_credential(
    app: &AppState,
    owner_id: &str,
    s: NewSecret,
) -> ApiResult<Credential> {
    let (uid, app2) = (owner_id.to_string(), app.clone());
    app.db
        .write(move |tx| {
            if db::workers::credential_by_name(tx, &uid, &s.name)?.is_some() {
                return Err(ApiError::conflict(format!(
                    "a credential named '{}' already exists; delete it first",
                    s.name
                )));
            }
            let key = cipher::key_for_write(&app2, tx).map_err(ApiError::internal)?;
            let id = db::new_id();
            let (nonce, ct) = cipher::seal(&key, &id, s.value.as_bytes());
            Ok(db::workers::insert_credential(
                tx,
                &NewCredential {
                    id: &id,
                    user_id: &uid,
                    name: &s.name,
                    credential_type: &s.credential_type,
                    url_prefix: s.url_prefix.as_deref(),
                    header_name: s.header_name.as_deref(),
                    nonce: &nonce,
                    ciphertext: &ct,
                },
            )?)
        })
        .await
}

/// Deletes a credential no genie names any more; returns its name.
pub async fn delete_credential(app: &AppState, owner_id: &str, id: &str) -> ApiResult<String> {
    let (uid, i2) = (owner_id.to_string(), id.to_string());
    app.db
        .write(move |c| {
            let s = db::workers::credential_by_id(c, &uid, &i2)?
                .ok_or_else(|| ApiError::not_found("credential"))?;
            let users = db::workers::genies_referencing(c, &uid, &s.meta.name)?;
            if !users.is_empty() {
                return Err(ApiError::conflict(format!(
                    "credential '{}' is used by worker genies {}; remove it from their credential_refs first",
                    s.meta.name,
                    users.join(", ")
                )));
            }
            db::workers::delete_credential(c, &uid, &i2)?;
            Ok(s.meta.name)
        })
        .await
}

/// A stored credential by name, decrypted.
pub async fn open_credential(app: &AppState, owner_id: &str, name: &str) -> ApiResult<Opened> {
    let (uid, n) = (owner_id.to_string(), name.to_string());
    let sealed = app
        .db
        .read(move |c| Ok(db::workers::credential_by_name(c, &uid, &n)?))
        .await?
        .ok_or_else(|| ApiError::not_found("credential"))?;
    let secret = cipher::reveal(app, &sealed).ok_or_else(|| {
        ApiError::internal(format!(
            "credential {} does not open with the master key",
            sealed.meta.id
        ))
    })?;
    Ok(Opened {
        meta: sealed.meta,
        secret,
    })
}
