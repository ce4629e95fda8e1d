//! Worker genies, their runs, credentials (ciphertext only) and durable memory. Every
//! user-reachable function filters by owner; the `*_any` functions are for the run
//! executor, the scheduler and the operator's key rotation.

use crate::db::sql::{Connection, OptionalExtension, Row, params};
use serde::Serialize;
use serde_json::{Value, json};

use super::{json_col, new_id, now};

#[derive(Debug, Clone, Serialize)]
pub struct WorkerGenie {
    pub id: String,
    #[serde(skip)]
    pub user_id: String,
    pub name: String,
    pub soul_prompt: String,
    pub trigger_type: String,
    pub schedule: Option<String>,
    pub timezone: String,
    pub event_type: Option<String>,
    pub credential_refs: Vec<String>,
    pub is_active: bool,
    pub llm_model: Option<String>,
    pub max_steps: i64,
    pub created_at: String,
    pub updated_at: String,
}

/// The writable fields of a worker genie, validated by the API layer.
#[derive(Debug, Clone)]
pub struct GenieFields {
    pub name: String,
    pub soul_prompt: String,
    pub trigger_type: String,
    pub schedule: Option<String>,
    pub timezone: String,
    pub event_type: Option<String>,
    pub credential_refs: Vec<String>,
    pub is_active: bool,
    pub llm_model: Option<String>,
    pub max_steps: i64,
}

const GCOLS: &str = "id, user_id, name, soul_prompt, trigger_type, schedule, timezone, event_type, credential_refs, \
                     is_active, llm_model, max_steps, created_at, updated_at";

fn genie_row(r: &Row) -> rusqlite::Result<WorkerGenie> {
    let refs = json_col(r.get(8)?, json!([]));
    Ok(WorkerGenie {
        id: r.get(0)?,
        user_id: r.get(1)?,
        name: r.get(2)?,
        soul_prompt: r.get(3)?,
        trigger_type: r.get(4)?,
        schedule: r.get(5)?,
        timezone: r.get(6)?,
        event_type: r.get(7)?,
        credential_refs: serde_json::from_value(refs).unwrap_or_default(),
        is_active: r.get(9)?,
        llm_model: r.get(10)?,
        max_steps: r.get(11)?,
        created_at: r.get(12)?,
        updated_at: r.get(13)?,
    })
}

pub fn insert_genie(
    c: &Connection,
    user_id: &str,
    f: &GenieFields,
) -> rusqlite::Result<WorkerGenie> {
    let id = new_id();
    let ts = now();
    c.execute(
        "INSERT INTO worker_genies (id, user_id, name, soul_prompt, trigger_type, schedule, timezone, event_type,
            credential_refs, is_active, llm_model, max_steps, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?13)",
        params![
            id,
            user_id,
            f.name,
            f.soul_prompt,
            f.trigger_type,
            f.schedule,
            f.timezone,
            f.event_type,
            json!(f.credential_refs).to_string(),
            f.is_active,
            f.llm_model,
            f.max_steps,
            ts
        ],
    )?;
    Ok(get_genie_any(c, &id)?.expect("row just inserted"))
}

pub fn update_genie(
    c: &Connection,
    user_id: &str,
    id: &str,
    f: &GenieFields,
) -> rusqlite::Result<Option<WorkerGenie>> {
    let n = c.execute(
        "UPDATE worker_genies SET name = ?3, soul_prompt = ?4, trigger_type = ?5, schedule = ?6, timezone = ?7,
            event_type = ?8, credential_refs = ?9, is_active = ?10, llm_model = ?11, max_steps = ?12, updated_at = ?13
         WHERE id = ?1 AND user_id = ?2",
        params![
            id,
            user_id,
            f.name,
            f.soul_prompt,
            f.trigger_type,
            f.schedule,
            f.timezone,
            f.event_type,
            json!(f.credential_refs).to_string(),
            f.is_active,
            f.llm_model,
            f.max_steps,
            now()
        ],
    )?;
    if n == 0 {
        return Ok(None);
    }
    get_genie(c, user_id, id)
}

pub fn get_genie(c: &Connection, user_id: &str, id: &str) -> rusqlite::Result<Option<WorkerGenie>> {
    c.query_row(
        &format!("SELECT {GCOLS} FROM worker_genies WHERE id = ?1 AND user_id = ?2"),
        [id, user_id],
        genie_row,
    )
    .optional()
}

pub fn get_genie_any(c: &Connection, id: &str) -> rusqlite::Result<Option<WorkerGenie>> {
    c.query_row(
        &format!("SELECT {GCOLS} FROM worker_genies WHERE id = ?1"),
        [id],
        genie_row,
    )
    .optional()
}

pub fn list_genies(c: &Connection, user_id: &str) -> rusqlite::Result<Vec<WorkerGenie>> {
    let mut st = c.prepare_cached(&format!(
        "SELECT {GCOLS} FROM worker_genies WHERE user_id = ?1 ORDER BY created_at DESC, id DESC"
    ))?;
    st.query_map([user_id], genie_row)?.collect()
}

/// Active genies with a trigger of `kind` (all users): what the scheduler and the event
/// listener act on.
pub fn active_by_trigger(c: &Connection, kind: &str) -> rusqlite::Result<Vec<WorkerGenie>> {
    let mut st = c.prepare_cached(&format!(
        "SELECT {GCOLS} FROM worker_genies WHERE trigger_type = ?1 AND is_active = 1 ORDER BY created_at"
    ))?;
    st.query_map([kind], genie_row)?.collect()
}

/// The schedules version (SQLite V32, PostgreSQL V10): bumped by triggers whenever a scheduled
/// genie is created, deleted, or its schedule, time zone, trigger or active flag changes.
pub fn schedules_version(c: &Connection) -> rusqlite::Result<i64> {
    c.prepare_cached("SELECT COALESCE(MAX(version), 0) FROM schedules_version")?
        .query_row([], |r| r.get(0))
}

pub fn event_genies(
    c: &Connection,
    user_id: &str,
    event_type: &str,
) -> rusqlite::Result<Vec<WorkerGenie>> {
    let mut st = c.prepare_cached(&format!(
        "SELECT {GCOLS} FROM worker_genies
         WHERE user_id = ?1 AND trigger_type = 'event' AND event_type = ?2 AND is_active = 1"
    ))?;
    st.query_map([user_id, event_type], genie_row)?.collect()
}

/// Whether `user_id` has an active worker genie triggered by `event_type` (what
/// [`event_genies`] would list, without loading it).
pub fn has_event_genie(c: &Connection, user_id: &str, event_type: &str) -> rusqlite::Result<bool> {
    c.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM worker_genies
         WHERE user_id = ?1 AND trigger_type = 'event' AND event_type = ?2 AND is_active = 1)",
    )?
    .query_row([user_id, event_type], |r| r.get(0))
}

/// Deletes the genie, its runs (cascade) and its genie-scoped memory.
pub fn delete_genie(c: &Connection, user_id: &str, id: &str) -> rusqlite::Result<bool> {
    let n = c.execute(
        "DELETE FROM worker_genies WHERE id = ?1 AND user_id = ?2",
        [id, user_id],
    )?;
    if n == 1 {
        c.execute(
            "DELETE FROM worker_memory WHERE user_id = ?1 AND genie_id = ?2",
            [user_id, id],
        )?;
    }
    Ok(n == 1)
}

/// Names of the user's genies that reference credential `name`.
pub fn genies_referencing(
    c: &Connection,
    user_id: &str,
    name: &str,
) -> rusqlite::Result<Vec<String>> {
    Ok(list_genies(c, user_id)?
        .into_iter()
        .filter(|g| g.credential_refs.iter().any(|r| r == name))
        .map(|g| g.name)
        .collect())
}

// ---------------------------------------------------------------- runs

#[derive(Debug, Clone, Serialize)]
pub struct Run {
    pub id: String,
    pub worker_genie_id: String,
    #[serde(skip)]
    pub user_id: String,
    pub status: String,
    pub trigger: String,
    pub input: Value,
    pub output: Option<String>,
    pub error: Option<String>,
    pub steps: Value,
    pub usage: Value,
    pub created_at: String,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub duration_ms: Option<i64>,
}

const RCOLS: &str = "id, worker_genie_id, user_id, status, trigger, input, output, error, steps, prompt_tokens, \
                     completion_tokens, total_tokens, created_at, started_at, finished_at, duration_ms";

fn run_row(r: &Row) -> rusqlite::Result<Run> {
    Ok(Run {
        id: r.get(0)?,
        worker_genie_id: r.get(1)?,
        user_id: r.get(2)?,
        status: r.get(3)?,
        trigger: r.get(4)?,
        input: json_col(r.get(5)?, json!({})),
        output: r.get(6)?,
        error: r.get(7)?,
        steps: json_col(r.get(8)?, json!([])),
        usage: json!({
            "prompt_tokens": r.get::<_, i64>(9)?,
            "completion_tokens": r.get::<_, i64>(10)?,
            "total_tokens": r.get::<_, i64>(11)?,
        }),
        created_at: r.get(12)?,
        started_at: r.get(13)?,
        finished_at: r.get(14)?,
        duration_ms: r.get(15)?,
    })
}

pub fn insert_run(
    c: &Connection,
    genie: &WorkerGenie,
    trigger: &str,
    input: &Value,
) -> rusqlite::Result<Run> {
    let id = new_id();
    c.execute(
        "INSERT INTO worker_runs (id, worker_genie_id, user_id, status, trigger, input, created_at)
         VALUES (?1, ?2, ?3, 'queued', ?4, ?5, ?6)",
        params![
            id,
            genie.id,
            genie.user_id,
            trigger,
            input.to_string(),
            now()
        ],
    )?;
    Ok(get_run_any(c, &id)?.expect("row just inserted"))
}

/// Queues the scheduled run of `genie` due at `due_at` (the time its schedule computed),
/// unless one for that due time exists: every instance's scheduler fires for the same due
/// time, and the unique (genie, due time) index lets only the first insert through. `None`
/// for the others.
pub fn insert_scheduled_run(
    c: &Connection,
    genie: &WorkerGenie,
    input: &Value,
    due_at: &str,
) -> rusqlite::Result<Option<Run>> {
    let id = new_id();
    let inserted = c.execute(
        "INSERT INTO worker_runs (id, worker_genie_id, user_id, status, trigger, input, created_at, due_at)
         VALUES (?1, ?2, ?3, 'queued', 'schedule', ?4, ?5, ?6)
         ON CONFLICT DO NOTHING",
        params![id, genie.id, genie.user_id, input.to_string(), now(), due_at],
    )?;
    if inserted == 0 {
        return Ok(None);
    }
    get_run_any(c, &id)
}

pub fn get_run_any(c: &Connection, id: &str) -> rusqlite::Result<Option<Run>> {
    c.query_row(
        &format!("SELECT {RCOLS} FROM worker_runs WHERE id = ?1"),
        [id],
        run_row,
    )
    .optional()
}

pub fn get_run(c: &Connection, user_id: &str, id: &str) -> rusqlite::Result<Option<Run>> {
    c.query_row(
        &format!("SELECT {RCOLS} FROM worker_runs WHERE id = ?1 AND user_id = ?2"),
        [id, user_id],
        run_row,
    )
    .optional()
}

/// A page of the user's runs, newest first, optionally of one genie and one status; and the
/// total number of matches.
pub fn list_runs(
    c: &Connection,
    user_id: &str,
    genie_id: Option<&str>,
    status: Option<&str>,
    limit: i64,
    offset: i64,
) -> rusqlite::Result<(Vec<Run>, i64)> {
    let filter =
        "user_id = ?1 AND (?2 IS NULL OR worker_genie_id = ?2) AND (?3 IS NULL OR status = ?3)";
    let mut st = c.prepare_cached(&format!(
        "SELECT {RCOLS} FROM worker_runs WHERE {filter} ORDER BY created_at DESC, id DESC LIMIT ?4 OFFSET ?5"
    ))?;
    let items = st
        .query_map(params![user_id, genie_id, status, limit, offset], run_row)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let total = c.query_row(
        &format!("SELECT COUNT(*) FROM worker_runs WHERE {filter}"),
        params![user_id, genie_id, status],
        |r| r.get(0),
    )?;
    Ok((items, total))
}

/// Whether the genie has a run waiting in the queue (a schedule then skips a firing).
pub fn has_queued_run(c: &Connection, genie_id: &str) -> rusqlite::Result<bool> {
    c.query_row(
        "SELECT EXISTS (SELECT 1 FROM worker_runs WHERE worker_genie_id = ?1 AND status = 'queued')",
        [genie_id],
        |r| r.get(0),
    )
}

/// Claims the oldest queued run for instance `owner`: it becomes `running` with
/// `started_at` set.
pub fn claim_run(c: &Connection, owner: &str) -> rusqlite::Result<Option<Run>> {
    let id: Option<String> = c
        .query_row(
            "UPDATE worker_runs SET status = 'running', started_at = ?1, owner = ?2
             WHERE id = (SELECT id FROM worker_runs WHERE status = 'queued' ORDER BY created_at, id LIMIT 1)
             RETURNING id",
            params![now(), owner],
            |r| r.get(0),
        )
        .optional()?;
    match id {
        Some(id) => get_run_any(c, &id),
        None => Ok(None),
    }
}

/// Saves the steps and token usage of a running run.
pub fn save_progress(
    c: &Connection,
    id: &str,
    steps: &Value,
    usage: &crate::llm::Usage,
) -> rusqlite::Result<()> {
    c.execute(
        "UPDATE worker_runs SET steps = ?2, prompt_tokens = ?3, completion_tokens = ?4, total_tokens = ?5
         WHERE id = ?1 AND status = 'running'",
        params![id, steps.to_string(), usage.prompt_tokens, usage.completion_tokens, usage.total_tokens],
    )?;
    Ok(())
}

/// Ends a run that is still queued or running; a run already ended (e.g. cancelled) keeps
/// its state. Returns the record when this call ended it.
pub fn finish_run(
    c: &Connection,
    id: &str,
    status: &str,
    output: Option<&str>,
    error: Option<&str>,
) -> rusqlite::Result<Option<Run>> {
    let ts = chrono::Utc::now();
    let n = c.execute(
        "UPDATE worker_runs SET status = ?2, output = ?3, error = ?4, finished_at = ?5,
            duration_ms = CAST(ROUND((julianday(?5) - julianday(COALESCE(started_at, created_at))) * 86400000) AS INTEGER)
         WHERE id = ?1 AND status IN ('queued', 'running')",
        params![id, status, output, error, super::fmt_time(ts)],
    )?;
    if n == 0 {
        return Ok(None);
    }
    get_run_any(c, id)
}

/// Fails the running runs of dead processes: all of them (`all`), or those of no owner, of
/// owner `me`, or started before `started_before`; returns how many.
pub fn fail_interrupted(
    c: &Connection,
    all: bool,
    me: Option<&str>,
    started_before: &str,
) -> rusqlite::Result<usize> {
    c.execute(
        "UPDATE worker_runs SET status = 'failed', finished_at = ?1,
            error = 'interrupted: the service stopped while this run was running (crash or restart); it was not retried'
         WHERE status = 'running'
           AND (?2 = 1 OR owner IS NULL OR owner = ?3 OR started_at < ?4)",
        params![now(), i64::from(all), me, started_before],
    )
}

// ---------------------------------------------------------------- credentials

#[derive(Debug, Clone, Serialize)]
pub struct Credential {
    pub id: String,
    pub name: String,
    pub credential_type: String,
    pub url_prefix: Option<String>,
    pub header_name: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

/// A credential with its ciphertext, for decryption.
#[derive(Debug, Clone)]
pub struct Sealed {
    pub meta: Credential,
    pub nonce: Vec<u8>,
    pub ciphertext: Vec<u8>,
}

const CCOLS: &str =
    "id, name, credential_type, url_prefix, header_name, created_at, updated_at, nonce, ciphertext";

fn sealed_row(r: &Row) -> rusqlite::Result<Sealed> {
    Ok(Sealed {
        meta: Credential {
            id: r.get(0)?,
            name: r.get(1)?,
            credential_type: r.get(2)?,
            url_prefix: r.get(3)?,
            header_name: r.get(4)?,
            created_at: r.get(5)?,
            updated_at: r.get(6)?,
        },
        nonce: r.get(7)?,
        ciphertext: r.get(8)?,
    })
}

pub struct NewCredential<'a> {
    pub id: &'a str,
    pub user_id: &'a str,
    pub name: &'a str,
    pub credential_type: &'a str,
    pub url_prefix: Option<&'a str>,
    pub header_name: Option<&'a str>,
    pub nonce: &'a [u8],
    pub ciphertext: &'a [u8],
}

pub fn insert_credential(c: &Connection, n: &NewCredential) -> rusqlite::Result<Credential> {
    let ts = now();
    c.execute(
        "INSERT INTO credentials (id, user_id, name, credential_type, url_prefix, header_name, nonce, ciphertext,
            created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)",
        params![n.id, n.user_id, n.name, n.credential_type, n.url_prefix, n.header_name, n.nonce, n.ciphertext, ts],
    )?;
    Ok(credential_by_name(c, n.user_id, n.name)?
        .expect("row just inserted")
        .meta)
}

pub fn credential_by_name(
    c: &Connection,
    user_id: &str,
    name: &str,
) -> rusqlite::Result<Option<Sealed>> {
    c.query_row(
        &format!("SELECT {CCOLS} FROM credentials WHERE user_id = ?1 AND name = ?2"),
        [user_id, name],
        sealed_row,
    )
    .optional()
}

pub fn credential_by_id(
    c: &Connection,
    user_id: &str,
    id: &str,
) -> rusqlite::Result<Option<Sealed>> {
    c.query_row(
        &format!("SELECT {CCOLS} FROM credentials WHERE user_id = ?1 AND id = ?2"),
        [user_id, id],
        sealed_row,
    )
    .optional()
}

pub fn list_credentials(c: &Connection, user_id: &str) -> rusqlite::Result<Vec<Credential>> {
    let mut st = c.prepare_cached(&format!(
        "SELECT {CCOLS} FROM credentials WHERE user_id = ?1 ORDER BY name"
    ))?;
    st.query_map([user_id], |r| sealed_row(r).map(|s| s.meta))?
        .collect()
}

pub fn all_sealed(c: &Connection) -> rusqlite::Result<Vec<Sealed>> {
    let mut st = c.prepare(&format!("SELECT {CCOLS} FROM credentials ORDER BY id"))?;
    st.query_map([], sealed_row)?.collect()
}

/// One stored credential, the first by id: a probe of which key the stored values open with.
pub fn first_sealed(c: &Connection) -> rusqlite::Result<Option<Sealed>> {
    c.query_row(
        &format!("SELECT {CCOLS} FROM credentials ORDER BY id LIMIT 1"),
        [],
        sealed_row,
    )
    .optional()
}

pub fn set_ciphertext(
    c: &Connection,
    id: &str,
    nonce: &[u8],
    ciphertext: &[u8],
) -> rusqlite::Result<()> {
    c.execute(
        "UPDATE credentials SET nonce = ?2, ciphertext = ?3 WHERE id = ?1",
        params![id, nonce, ciphertext],
    )?;
    Ok(())
}

pub fn delete_credential(c: &Connection, user_id: &str, id: &str) -> rusqlite::Result<bool> {
    Ok(c.execute(
        "DELETE FROM credentials WHERE id = ?1 AND user_id = ?2",
        [id, user_id],
    )? == 1)
}

// ---------------------------------------------------------------- memory

/// `genie_id` '' is the account scope.
pub fn memory_get(
    c: &Connection,
    user_id: &str,
    genie_id: &str,
    key: &str,
) -> rusqlite::Result<Option<(Value, String)>> {
    c.query_row(
        "SELECT value, updated_at FROM worker_memory WHERE user_id = ?1 AND genie_id = ?2 AND key = ?3",
        [user_id, genie_id, key],
        |r| Ok((json_col(r.get(0)?, Value::Null), r.get(1)?)),
    )
    .optional()
}

pub fn memory_keys(
    c: &Connection,
    user_id: &str,
    genie_id: &str,
    limit: i64,
) -> rusqlite::Result<Vec<String>> {
    let mut st = c.prepare_cached(
        "SELECT key FROM worker_memory WHERE user_id = ?1 AND genie_id = ?2 ORDER BY key LIMIT ?3",
    )?;
    st.query_map(params![user_id, genie_id, limit], |r| r.get(0))?
        .collect()
}

pub fn memory_count(c: &Connection, user_id: &str, genie_id: &str) -> rusqlite::Result<i64> {
    c.query_row(
        "SELECT COUNT(*) FROM worker_memory WHERE user_id = ?1 AND genie_id = ?2",
        [user_id, genie_id],
        |r| r.get(0),
    )
}

pub fn memory_put(
    c: &Connection,
    user_id: &str,
    genie_id: &str,
    key: &str,
    value: &Value,
) -> rusqlite::Result<()> {
    c.execute(
        "INSERT INTO worker_memory (user_id, genie_id, key, value, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (user_id, genie_id, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        params![user_id, genie_id, key, value.to_string(), now()],
    )?;
    Ok(())
}

pub fn memory_delete(
    c: &Connection,
    user_id: &str,
    genie_id: &str,
    key: &str,
) -> rusqlite::Result<bool> {
    Ok(c.execute(
        "DELETE FROM worker_memory WHERE user_id = ?1 AND genie_id = ?2 AND key = ?3",
        [user_id, genie_id, key],
    )? == 1)
}
