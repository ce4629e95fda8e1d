//! Lead operations: who may reach a lead (also the rule of its notes), and creating and
//! updating one with the checks that need the database (the agent a lead is put under, the
//! user it is assigned to, its primary lead), the activity log and the `lead.*` events.

use crate::db::sql::Connection;
use serde_json::json;

use crate::auth::Principal;
use crate::db::leads::{self as repo, Fields, Lead};
use crate::error::{ApiError, ApiResult};
use crate::events;
use crate::state::AppState;

/// Loads a lead the principal may reach: 404 when it does not exist, 403 when it belongs to
/// an agent the caller does not own (or, for reads, is not assigned to).
pub fn load(c: &Connection, p: &Principal, id: i64, write: bool) -> ApiResult<Lead> {
    let lead = repo::get(c, id)?.ok_or_else(|| ApiError::not_found("lead"))?;
    if p.is_admin() || lead.agent_owner.as_deref() == Some(p.user_id.as_str()) {
        return Ok(lead);
    }
    if !write && repo::is_assigned(c, &lead.agent_id, &p.user_id)? {
        return Ok(lead);
    }
    Err(ApiError::forbidden(
        "you do not have access to this lead's agent",
    ))
}

/// Checks the agent a lead is put under: it exists (else `AGENT_NOT_FOUND`) and a
/// non-admin owns it (else `FORBIDDEN`).
fn check_agent(c: &Connection, p: &Principal, agent_id: &str) -> ApiResult<repo::AgentRef> {
    let a = repo::agent(c, agent_id, &p.user_id)?.ok_or_else(ApiError::agent_not_found)?;
    if !p.is_admin() && a.owner != p.user_id {
        return Err(ApiError::forbidden("you do not own this agent"));
    }
    Ok(a)
}

/// A supplied `user_id`: a non-admin may name only themself; the user must exist.
fn check_user(c: &Connection, p: &Principal, user_id: &str) -> ApiResult<()> {
    if user_id != p.user_id && !p.is_admin() {
        return Err(ApiError::forbidden(
            "only internal admins may assign a lead to another user",
        ));
    }
    if !repo::user_exists(c, user_id)? {
        return Err(ApiError::validation("data.user_id: no such user"));
    }
    Ok(())
}

fn check_primary(
    c: &Connection,
    p: &Principal,
    primary: Option<i64>,
    own_id: Option<i64>,
) -> ApiResult<()> {
    if let Some(pid) = primary {
        if Some(pid) == own_id {
            return Err(ApiError::validation(
                "data.primary_lead_id cannot be the lead itself",
            ));
        }
        load(c, p, pid, false)
            .map_err(|_| ApiError::validation("data.primary_lead_id: no such lead"))?;
    }
    Ok(())
}

/// Creates a lead under the agent `agent_id` from checked `fields`. Its user is `user_id`
/// when given (a non-admin may name only themself), else the agent's owner, else the caller.
/// Logs `created` and emits `lead.created`. When it carries out a `leads` action, the
/// action's audit row is written in the same transaction.
pub async fn create(
    app: &AppState,
    p: &Principal,
    mut fields: Fields,
    agent_id: String,
    user_id: Option<String>,
    primary_lead_id: Option<i64>,
) -> ApiResult<Lead> {
    let (p, supplied) = (p.clone(), user_id);
    let audit = crate::db::activities::claim("leads");
    let observed = app.bus.observed();
    let lead = app
        .db
        .write(move |c| {
            if let Some(u) = &supplied {
                check_user(c, &p, u)?;
            }
            let agent = check_agent(c, &p, &agent_id)?;
            check_primary(c, &p, primary_lead_id, None)?;
            // user_id: the supplied one, then the agent's owner, then the caller.
            let user_id = supplied
                .or(Some(agent.owner.clone()))
                .filter(|o| !o.is_empty())
                .unwrap_or_else(|| p.user_id.clone());
            // The "created" log entry lives on the row (db::leads::CREATED_ENTRY); who
            // created the lead is stored only when it is not the lead's own user (V38).
            let created_by = (user_id != p.user_id).then(|| p.user_id.clone());
            fields.push(("agent_id", agent_id.into()));
            fields.push(("user_id", user_id.into()));
            fields.push(("created_log_id", repo::next_activity_id(c)?.into()));
            fields.push(("created_by", created_by.into()));
            let lead = repo::insert_returning(c, &fields, &agent)?;
            if let Some(a) = audit {
                a.insert(c, Some(&lead.id.to_string()), &created_summary(&lead))?;
            }
            let created =
                events::record_lazy(c, observed, "lead.created", &lead.user_id, || json!(lead))?;
            Ok((created, lead))
        })
        .await?;
    let (created, lead) = lead;
    app.bus.emit_all(created);
    Ok(lead)
}

/// The audit summary of a lead's creation.
pub fn created_summary(lead: &Lead) -> String {
    match &lead.name {
        Some(n) => format!("created lead {n}"),
        None => format!("created lead #{}", lead.id),
    }
}

/// Updates a lead `p` may write with checked `fields`, moving it to `agent_id` or `user_id`
/// when given. A status change is logged (`status_change`) and announced
/// (`lead.status_changed`) besides `lead.updated`.
pub async fn update(
    app: &AppState,
    p: &Principal,
    id: i64,
    mut fields: Fields,
    agent_id: Option<String>,
    user_id: Option<String>,
    primary_lead_id: Option<i64>,
) -> ApiResult<Lead> {
    let p = p.clone();
    let changed_by = p.user_id.clone();
    let audit = crate::db::activities::claim("leads");
    let observed = app.bus.observed();
    let changed = app
        .db
        .write(move |c| {
            let before = load(c, &p, id, true)?;
            if let Some(a) = agent_id {
                check_agent(c, &p, &a)?;
                fields.push(("agent_id", a.into()));
            }
            if let Some(u) = user_id {
                if u != before.user_id {
                    check_user(c, &p, &u)?;
                }
                fields.push(("user_id", u.into()));
            }
            check_primary(c, &p, primary_lead_id, Some(id))?;
            repo::update(c, id, &fields)?;
            let after = repo::get(c, id)?.expect("lead exists");
            if before.status != after.status {
                let (from, to) = (before.status.clone(), after.status.clone());
                let label = |s: &Option<String>| s.clone().unwrap_or_else(|| "none".into());
                repo::log(
                    c,
                    id,
                    Some(&p.user_id),
                    "status_change",
                    Some(&format!(
                        "Status changed from {} to {}",
                        label(&from),
                        label(&to)
                    )),
                    Some(&json!({"from": from, "to": to, "changed_by": p.user_id})),
                )?;
            }
            if let Some(a) = audit {
                a.insert(c, Some(&id.to_string()), &format!("updated lead #{id}"))?;
            }
            let user = &after.user_id;
            let mut raised = Vec::from_iter(events::record_lazy(
                c,
                observed,
                "lead.updated",
                user,
                || json!(after),
            )?);
            if before.status != after.status {
                raised.extend(events::record_lazy(c, observed, "lead.status_changed", user, || {
                    json!({"lead": after, "from": before.status, "to": after.status, "changed_by": changed_by})
                })?);
            }
            Ok((after, raised))
        })
        .await?;
    let (after, raised) = changed;
    app.bus.emit_all(raised);
    Ok(after)
}

/// Leads indexed for search per transaction. One FTS5 segment a batch instead of one a lead.
const SEARCH_BATCH: i64 = 1000;

/// Pages of merged output in one step of the search index's merges, each its own
/// transaction: a step costs the writer about 2 ms of CPU (4.7 ms at the median from asking
/// to done, with its wait in the writer's queue), where FTS5's own merges held it up to
/// 47 ms; steps of 8 pages cost more CPU a create and shortened nothing (migration V48;
/// docs/performance.md, round thirty-three).
const MERGE_STEP_PAGES: i64 = 16;

/// Indexes new and renamed leads for search in batches, half a second apart, until `stop`
/// (see migration V11: a lead create no longer writes the search index itself). Searches
/// find pending leads all the same, so how far behind this runs changes only their cost.
/// After each batch, and every half second for the segments deletes and renames write, it
/// merges the index's segments in bounded steps (migration V48).
///
/// A backlog is worked off batch after batch, and `stop` is looked at before each: a stop
/// waits for the batch in hand only, never for the backlog (a million pending leads kept a
/// stopping `serve` busy for over ten minutes). What is left is indexed after the next start.
pub async fn search_indexer(app: AppState, mut stop: tokio::sync::watch::Receiver<bool>) {
    if app.db.is_postgres() {
        // Its trigram indexes follow each write: nothing is ever pending or merged here.
        let _ = stop.wait_for(|stopped| *stopped).await;
        return;
    }
    loop {
        while !*stop.borrow() {
            match app.db.read(|c| Ok(repo::search_pending(c)?)).await {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "lead search indexer: could not read");
                    break;
                }
            }
            // In turn, as the merge steps: a batch is a group of its own, so that no
            // request committed with it waits for it.
            match app
                .db
                .write_in_turn(|c| Ok(repo::index_pending(c, SEARCH_BATCH)?))
                .await
            {
                // A backlog: merged batch by batch, so that its segments never pile up into
                // one of the large merges FTS5 makes of a level that holds too many. The
                // last batch's are merged below, with the deletes' and renames'.
                Ok(n) if n as i64 == SEARCH_BATCH => merge_search_index(&app, &stop).await,
                Ok(_) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "lead search indexer: could not index");
                    break;
                }
            }
        }
        merge_search_index(&app, &stop).await;
        tokio::select! {
            _ = tokio::time::sleep(std::time::Duration::from_millis(500)) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Merges the lead search index's segments step by step until no level needs it, or `stop`.
/// Each step is a write of its own, in the writer's queue, so writes queued meanwhile go
/// between them.
async fn merge_search_index(app: &AppState, stop: &tokio::sync::watch::Receiver<bool>) {
    while !*stop.borrow() {
        let started = std::time::Instant::now();
        match app
            .db
            .write_in_turn(|c| Ok(repo::merge_search_step(c, MERGE_STEP_PAGES)?))
            .await
        {
            Ok(true) => {
                tracing::debug!(
                    took_us = started.elapsed().as_micros() as u64,
                    "lead search index: merge step"
                );
            }
            Ok(false) => break,
            Err(e) => {
                tracing::warn!(error = %e, "lead search indexer: could not merge");
                break;
            }
        }
    }
}
