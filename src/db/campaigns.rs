//! Campaigns, the leads each one targets, and every call attempt it made. The rules (when a
//! lead is due, what an outcome means for it) are `service::campaigns`'; here only the rows.

use crate::db::sql::types::Value as SqlValue;
use crate::db::sql::{Connection, OptionalExtension, Row, params, params_from_iter};
use serde::Serialize;
use serde_json::Value;

use super::json_col;

#[derive(Debug, Clone, Serialize)]
pub struct Campaign {
    pub id: String,
    pub user_id: String,
    pub genie_id: String,
    pub name: String,
    pub status: String,
    pub filters: Value,
    pub concurrency: i64,
    pub calls_per_minute: i64,
    pub hours_start: String,
    pub hours_end: String,
    pub timezone: String,
    pub max_attempts: i64,
    pub retry_delay_seconds: i64,
    pub persona: Option<String>,
    pub variables: Value,
    pub waiting: Option<String>,
    pub tick_seq: i64,
    pub created_at: String,
    pub updated_at: String,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
}

const COLS: &str = "id, user_id, genie_id, name, status, filters, concurrency, calls_per_minute, \
    hours_start, hours_end, timezone, max_attempts, retry_delay_seconds, persona, variables, waiting, \
    tick_seq, created_at, updated_at, started_at, finished_at";

fn row(r: &Row) -> rusqlite::Result<Campaign> {
    Ok(Campaign {
        id: r.get(0)?,
        user_id: r.get(1)?,
        genie_id: r.get(2)?,
        name: r.get(3)?,
        status: r.get(4)?,
        filters: json_col(r.get(5)?, Value::Object(Default::default())),
        concurrency: r.get(6)?,
        calls_per_minute: r.get(7)?,
        hours_start: r.get(8)?,
        hours_end: r.get(9)?,
        timezone: r.get(10)?,
        max_attempts: r.get(11)?,
        retry_delay_seconds: r.get(12)?,
        persona: r.get(13)?,
        variables: json_col(r.get(14)?, Value::Object(Default::default())),
        waiting: r.get(15)?,
        tick_seq: r.get(16)?,
        created_at: r.get(17)?,
        updated_at: r.get(18)?,
        started_at: r.get(19)?,
        finished_at: r.get(20)?,
    })
}

pub fn insert(c: &Connection, k: &Campaign) -> rusqlite::Result<()> {
    c.execute(
        &format!(
            "INSERT INTO campaigns ({COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)"
        ),
        params![
            k.id,
            k.user_id,
            k.genie_id,
            k.name,
            k.status,
            k.filters.to_string(),
            k.concurrency,
            k.calls_per_minute,
            k.hours_start,
            k.hours_end,
            k.timezone,
            k.max_attempts,
            k.retry_delay_seconds,
            k.persona,
            k.variables.to_string(),
            k.waiting,
            k.tick_seq,
            k.created_at,
            k.updated_at,
            k.started_at,
            k.finished_at
        ],
    )?;
    Ok(())
}

/// Writes every editable member and the state back.
pub fn save(c: &Connection, k: &Campaign) -> rusqlite::Result<()> {
    c.execute(
        "UPDATE campaigns SET name = ?2, status = ?3, filters = ?4, concurrency = ?5, calls_per_minute = ?6,
             hours_start = ?7, hours_end = ?8, timezone = ?9, max_attempts = ?10, retry_delay_seconds = ?11,
             persona = ?12, variables = ?13, waiting = ?14, tick_seq = ?15, updated_at = ?16,
             started_at = ?17, finished_at = ?18
         WHERE id = ?1",
        params![
            k.id,
            k.name,
            k.status,
            k.filters.to_string(),
            k.concurrency,
            k.calls_per_minute,
            k.hours_start,
            k.hours_end,
            k.timezone,
            k.max_attempts,
            k.retry_delay_seconds,
            k.persona,
            k.variables.to_string(),
            k.waiting,
            k.tick_seq,
            k.updated_at,
            k.started_at,
            k.finished_at
        ],
    )?;
    Ok(())
}

pub fn get(c: &Connection, id: &str) -> rusqlite::Result<Option<Campaign>> {
    c.prepare_cached(&format!("SELECT {COLS} FROM campaigns WHERE id = ?1"))?
        .query_row([id], row)
        .optional()
}

/// A user's campaigns (every user's with `user` None), optionally of one genie or in one
/// state, oldest first; and how many there are.
pub fn list(
    c: &Connection,
    user: Option<&str>,
    genie: Option<&str>,
    status: Option<&str>,
    limit: i64,
    offset: i64,
) -> rusqlite::Result<(Vec<Campaign>, i64)> {
    // Only the filters given become conditions (no `? IS NULL` tricks, which PostgreSQL
    // cannot type).
    let mut w = vec!["1 = 1".to_string()];
    let mut p: Vec<SqlValue> = Vec::new();
    for (col, v) in [("user_id", user), ("genie_id", genie), ("status", status)] {
        if let Some(v) = v {
            p.push(v.to_string().into());
            w.push(format!("{col} = ?{}", p.len()));
        }
    }
    let w = w.join(" AND ");
    let count = c.query_row(
        &format!("SELECT COUNT(*) FROM campaigns WHERE {w}"),
        params_from_iter(p.iter()),
        |r| r.get(0),
    )?;
    let n = p.len();
    p.push(limit.into());
    p.push(offset.into());
    let items = c
        .prepare(&format!(
            "SELECT {COLS} FROM campaigns WHERE {w} ORDER BY id LIMIT ?{} OFFSET ?{}",
            n + 1,
            n + 2
        ))?
        .query_map(params_from_iter(p.iter()), row)?
        .collect::<Result<Vec<_>, _>>()?;
    Ok((items, count))
}

pub fn delete(c: &Connection, id: &str) -> rusqlite::Result<bool> {
    Ok(c.execute("DELETE FROM campaigns WHERE id = ?1", [id])? == 1)
}

/// Running campaigns of a genie.
pub fn running_of_genie(c: &Connection, genie_id: &str) -> rusqlite::Result<Vec<String>> {
    c.prepare_cached(
        "SELECT id FROM campaigns WHERE genie_id = ?1 AND status = 'running' ORDER BY id",
    )?
    .query_map([genie_id], |r| r.get(0))?
    .collect()
}

/// Calls not ended yet of every campaign of a genie.
pub fn open_calls_of_genie(c: &Connection, genie_id: &str) -> rusqlite::Result<i64> {
    c.prepare_cached(
        "SELECT COUNT(*) FROM campaign_calls k JOIN campaigns p ON p.id = k.campaign_id
         WHERE p.genie_id = ?1 AND k.status <> 'ended'",
    )?
    .query_row([genie_id], |r| r.get(0))
}

/// Campaigns in this state (every user's).
pub fn ids_in_state(c: &Connection, status: &str) -> rusqlite::Result<Vec<String>> {
    c.prepare("SELECT id FROM campaigns WHERE status = ?1 ORDER BY id")?
        .query_map([status], |r| r.get(0))?
        .collect()
}

// ---- targets ------------------------------------------------------------------------------

/// One lead of a campaign.
#[derive(Debug, Clone, Serialize)]
pub struct Target {
    pub lead_id: i64,
    pub phone: Option<String>,
    pub timezone: String,
    /// `pending`, `calling` or `done`.
    pub status: String,
    pub attempts: i64,
    pub next_at: String,
    pub outcome: Option<String>,
}

const TARGET_COLS: &str = "lead_id, phone, timezone, status, attempts, next_at, outcome";

fn target_row(r: &Row) -> rusqlite::Result<Target> {
    Ok(Target {
        lead_id: r.get(0)?,
        phone: r.get(1)?,
        timezone: r.get(2)?,
        status: r.get(3)?,
        attempts: r.get(4)?,
        next_at: r.get(5)?,
        outcome: r.get(6)?,
    })
}

#[allow(clippy::too_many_arguments)]
pub fn insert_target(
    c: &Connection,
    campaign: &str,
    lead_id: i64,
    phone: Option<&str>,
    timezone: &str,
    status: &str,
    next_at: &str,
    outcome: Option<&str>,
) -> rusqlite::Result<()> {
    c.prepare_cached(
        "INSERT INTO campaign_targets (campaign_id, lead_id, phone, timezone, status, attempts, next_at, outcome)
         VALUES (?1, ?2, ?3, ?4, ?5, 0, ?6, ?7)
         ON CONFLICT (campaign_id, lead_id) DO NOTHING",
    )?
    .execute(params![campaign, lead_id, phone, timezone, status, next_at, outcome])?;
    Ok(())
}

/// Pending targets due at `now`, in lead order.
pub fn due_targets(
    c: &Connection,
    campaign: &str,
    now: &str,
    limit: i64,
) -> rusqlite::Result<Vec<Target>> {
    c.prepare_cached(&format!(
        "SELECT {TARGET_COLS} FROM campaign_targets
         WHERE campaign_id = ?1 AND status = 'pending' AND next_at <= ?2
         ORDER BY next_at, lead_id LIMIT ?3"
    ))?
    .query_map(params![campaign, now, limit], target_row)?
    .collect()
}

pub fn target(c: &Connection, campaign: &str, lead_id: i64) -> rusqlite::Result<Option<Target>> {
    c.prepare_cached(&format!(
        "SELECT {TARGET_COLS} FROM campaign_targets WHERE campaign_id = ?1 AND lead_id = ?2"
    ))?
    .query_row(params![campaign, lead_id], target_row)
    .optional()
}

/// Sets a target's state, attempts, next time and outcome.
pub fn set_target(
    c: &Connection,
    campaign: &str,
    lead_id: i64,
    status: &str,
    attempts: i64,
    next_at: &str,
    outcome: Option<&str>,
) -> rusqlite::Result<()> {
    c.prepare_cached(
        "UPDATE campaign_targets SET status = ?3, attempts = ?4, next_at = ?5, outcome = ?6
         WHERE campaign_id = ?1 AND lead_id = ?2",
    )?
    .execute(params![
        campaign, lead_id, status, attempts, next_at, outcome
    ])?;
    Ok(())
}

/// Marks every pending target `done` with this outcome (a cancelled campaign); returns them.
pub fn close_pending(c: &Connection, campaign: &str, outcome: &str) -> rusqlite::Result<Vec<i64>> {
    c.prepare(
        "UPDATE campaign_targets SET status = 'done', outcome = ?2
         WHERE campaign_id = ?1 AND status = 'pending' RETURNING lead_id",
    )?
    .query_map(params![campaign, outcome], |r| r.get(0))?
    .collect()
}

/// The earliest `next_at` of a pending target.
pub fn next_pending_at(c: &Connection, campaign: &str) -> rusqlite::Result<Option<String>> {
    c.prepare_cached(
        "SELECT MIN(next_at) FROM campaign_targets WHERE campaign_id = ?1 AND status = 'pending'",
    )?
    .query_row([campaign], |r| r.get(0))
}

/// `(status or outcome, count)` pairs: the targets by state, and the finished ones by outcome.
pub fn target_counts(c: &Connection, campaign: &str) -> rusqlite::Result<Vec<(String, i64)>> {
    let mut out: Vec<(String, i64)> = c
        .prepare_cached(
            "SELECT status, COUNT(*) FROM campaign_targets WHERE campaign_id = ?1 GROUP BY status",
        )?
        .query_map([campaign], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    let outcomes: Vec<(String, i64)> = c
        .prepare_cached(
            "SELECT COALESCE(outcome, ''), COUNT(*) FROM campaign_targets
             WHERE campaign_id = ?1 AND status = 'done' GROUP BY outcome",
        )?
        .query_map([campaign], |r| {
            Ok((format!("outcome:{}", r.get::<_, String>(0)?), r.get(1)?))
        })?
        .collect::<Result<_, _>>()?;
    out.extend(outcomes);
    Ok(out)
}

// ---- calls --------------------------------------------------------------------------------

/// One dial attempt.
#[derive(Debug, Clone, Serialize)]
pub struct Call {
    pub id: String,
    pub campaign_id: String,
    pub lead_id: i64,
    pub attempt: i64,
    pub phone: String,
    pub provider: String,
    pub provider_call_id: Option<String>,
    /// `dialing` (written before the call is placed), `in_progress` (the platform took it;
    /// its end-of-call event will say how it ended) or `ended`.
    pub status: String,
    /// `completed`, `no_answer`, `busy` or `failed` once ended.
    pub outcome: Option<String>,
    pub conversation_id: Option<String>,
    pub error: Option<String>,
    pub started_at: String,
    pub ended_at: Option<String>,
}

const CALL_COLS: &str = "id, campaign_id, lead_id, attempt, phone, provider, provider_call_id, status, outcome, \
    conversation_id, error, started_at, ended_at";

fn call_row(r: &Row) -> rusqlite::Result<Call> {
    Ok(Call {
        id: r.get(0)?,
        campaign_id: r.get(1)?,
        lead_id: r.get(2)?,
        attempt: r.get(3)?,
        phone: r.get(4)?,
        provider: r.get(5)?,
        provider_call_id: r.get(6)?,
        status: r.get(7)?,
        outcome: r.get(8)?,
        conversation_id: r.get(9)?,
        error: r.get(10)?,
        started_at: r.get(11)?,
        ended_at: r.get(12)?,
    })
}

/// Inserts a call held by instance `owner` until `lease_until` (see [`renew_calls`]).
pub fn insert_call(
    c: &Connection,
    k: &Call,
    owner: &str,
    lease_until: &str,
) -> rusqlite::Result<()> {
    c.prepare_cached(&format!(
        "INSERT INTO campaign_calls ({CALL_COLS}, owner, lease_until)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)"
    ))?
    .execute(params![
        k.id,
        k.campaign_id,
        k.lead_id,
        k.attempt,
        k.phone,
        k.provider,
        k.provider_call_id,
        k.status,
        k.outcome,
        k.conversation_id,
        k.error,
        k.started_at,
        k.ended_at,
        owner,
        lease_until
    ])?;
    Ok(())
}

/// Extends the lease on every open call instance `owner` holds; returns how many.
pub fn renew_calls(c: &Connection, owner: &str, lease_until: &str) -> rusqlite::Result<usize> {
    c.prepare_cached(
        "UPDATE campaign_calls SET lease_until = ?2 WHERE owner = ?1 AND status <> 'ended'",
    )?
    .execute(params![owner, lease_until])
}

/// Open calls whose instance is gone: every one (`all`: SQLite, one instance, at its start),
/// or those of no owner (rows from before owners), of `me` (this instance's id from a
/// previous life: given at start only, since while it runs its own calls are live) or whose
/// lease ran out before `now`. The same rule as `jobs::Orphans`.
pub fn orphaned_calls(
    c: &Connection,
    all: bool,
    me: Option<&str>,
    now: &str,
) -> rusqlite::Result<Vec<Call>> {
    c.prepare(&format!(
        "SELECT {CALL_COLS} FROM campaign_calls
         WHERE status <> 'ended'
           AND (?1 = 1 OR owner IS NULL OR owner = ?2 OR lease_until IS NULL OR lease_until < ?3)
         ORDER BY started_at"
    ))?
    .query_map(params![i64::from(all), me, now], call_row)?
    .collect()
}

pub fn get_call(c: &Connection, id: &str) -> rusqlite::Result<Option<Call>> {
    c.prepare_cached(&format!(
        "SELECT {CALL_COLS} FROM campaign_calls WHERE id = ?1"
    ))?
    .query_row([id], call_row)
    .optional()
}

/// The call a platform knows by this id.
pub fn call_by_provider_id(
    c: &Connection,
    provider_call_id: &str,
) -> rusqlite::Result<Option<Call>> {
    c.prepare_cached(&format!(
        "SELECT {CALL_COLS} FROM campaign_calls WHERE provider_call_id = ?1"
    ))?
    .query_row([provider_call_id], call_row)
    .optional()
}

/// The platform accepted the call: its id, and the call is in progress.
pub fn call_placed(c: &Connection, id: &str, provider_call_id: &str) -> rusqlite::Result<()> {
    c.prepare_cached(
        "UPDATE campaign_calls SET provider_call_id = ?2, status = 'in_progress' WHERE id = ?1 AND status = 'dialing'",
    )?
    .execute(params![id, provider_call_id])?;
    Ok(())
}

/// Ends a call that has not ended yet; false when it already had.
pub fn end_call(
    c: &Connection,
    id: &str,
    outcome: &str,
    conversation_id: Option<&str>,
    error: Option<&str>,
    now: &str,
) -> rusqlite::Result<bool> {
    Ok(c.prepare_cached(
        "UPDATE campaign_calls SET status = 'ended', outcome = ?2, conversation_id = ?3, error = ?4, ended_at = ?5
         WHERE id = ?1 AND status <> 'ended'",
    )?
    .execute(params![id, outcome, conversation_id, error, now])?
        == 1)
}

/// Calls of a campaign not ended yet.
pub fn open_calls(c: &Connection, campaign: &str) -> rusqlite::Result<Vec<Call>> {
    c.prepare_cached(&format!(
        "SELECT {CALL_COLS} FROM campaign_calls WHERE campaign_id = ?1 AND status <> 'ended' ORDER BY started_at"
    ))?
    .query_map([campaign], call_row)?
    .collect()
}

/// Calls of a campaign started at or after `since`.
pub fn started_since(c: &Connection, campaign: &str, since: &str) -> rusqlite::Result<Vec<String>> {
    c.prepare_cached(
        "SELECT started_at FROM campaign_calls WHERE campaign_id = ?1 AND started_at >= ?2 ORDER BY started_at",
    )?
    .query_map(params![campaign, since], |r| r.get(0))?
    .collect()
}

/// Calls with their lead's name, and how many calls match in all.
pub type CallPage = (Vec<(Call, Option<String>)>, i64);

/// A page of a campaign's calls (of one lead with `lead`), in the order they started, with
/// the lead's name; and how many there are.
pub fn calls(
    c: &Connection,
    campaign: &str,
    lead: Option<i64>,
    limit: i64,
    offset: i64,
) -> rusqlite::Result<CallPage> {
    let cols = CALL_COLS
        .split(", ")
        .map(|k| format!("k.{}", k.trim()))
        .collect::<Vec<_>>()
        .join(", ");
    let (w, mut p): (&str, Vec<SqlValue>) = match lead {
        Some(l) => (
            "k.campaign_id = ?1 AND k.lead_id = ?2",
            vec![campaign.to_string().into(), l.into()],
        ),
        None => ("k.campaign_id = ?1", vec![campaign.to_string().into()]),
    };
    let count = c.query_row(
        &format!("SELECT COUNT(*) FROM campaign_calls k WHERE {w}"),
        params_from_iter(p.iter()),
        |r| r.get(0),
    )?;
    let n = p.len();
    p.push(limit.into());
    p.push(offset.into());
    let items = c
        .prepare(&format!(
            "SELECT {cols}, l.name FROM campaign_calls k LEFT JOIN leads l ON l.id = k.lead_id
             WHERE {w} ORDER BY k.started_at, k.id LIMIT ?{} OFFSET ?{}",
            n + 1,
            n + 2
        ))?
        .query_map(params_from_iter(p.iter()), |r| {
            Ok((call_row(r)?, r.get(13)?))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok((items, count))
}

// ---- end-of-call events that came before the call's id -------------------------------------

/// How a platform says a call ended: outcome, conversation, error.
pub type EarlyOutcome = (String, Option<String>, Option<String>);

/// Keeps an end-of-call event for a call id no campaign call holds yet (the first event
/// wins, as it would have on the call), and forgets those received before `forget_before`.
pub fn keep_early_outcome(
    c: &Connection,
    provider_call_id: &str,
    outcome: &str,
    conversation_id: Option<&str>,
    error: Option<&str>,
    now: &str,
    forget_before: &str,
) -> rusqlite::Result<()> {
    c.prepare_cached("DELETE FROM early_call_outcomes WHERE received_at < ?1")?
        .execute([forget_before])?;
    c.prepare_cached(
        "INSERT INTO early_call_outcomes (provider_call_id, outcome, conversation_id, error, received_at)
         VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (provider_call_id) DO NOTHING",
    )?
    .execute(params![provider_call_id, outcome, conversation_id, error, now])?;
    Ok(())
}

/// Takes (and removes) the end-of-call event kept for this call id.
pub fn take_early_outcome(
    c: &Connection,
    provider_call_id: &str,
) -> rusqlite::Result<Option<EarlyOutcome>> {
    c.prepare_cached(
        "DELETE FROM early_call_outcomes WHERE provider_call_id = ?1
         RETURNING outcome, conversation_id, error",
    )?
    .query_row([provider_call_id], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
    })
    .optional()
}
