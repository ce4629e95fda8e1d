//! Moving a genie to another voice platform (`genies` action `move`). The new agent is
//! made beside the old one: its documents copied there, its tools mapped, new numbers
//! bought where the genie had numbers, the agent read back and compared with what was
//! sent; only then does the genie switch over (one transaction), and the old agent and
//! numbers are removed after (inline, and as a durable `genie.cleanup` job queued in that
//! same transaction). A failure part-way removes what the move made, leaves the old agent
//! serving, and records the provider state `failed` with the reason.
//!
//! Durable: the move records what it has made in `genie_moves` as it goes, and queues a
//! `genie.move_resolve` job when it starts. Should the service stop mid-move, that job
//! (run after restart) removes what the move made; a move that finishes ends its row, and
//! the job then finds nothing to do.

use std::time::Duration;

use serde_json::{Value, json};

use crate::db::genie_moves::{self as store, Move};
use crate::db::genies::{self as repo, PhoneRow};
use crate::db::{self, genie_providers};
use crate::error::{ApiError, ApiResult, Kind};
use crate::events::Event;
use crate::knowledge::agents::{kb_for, lock_genie, record_provider_state, voice_for};
use crate::service::drift;
use crate::service::genies::{CLEANUP_JOB, agent_spec};
use crate::state::AppState;
use crate::voice::DynVoice;

/// Job kind that undoes a move the service stopped in the middle of.
pub const RESOLVE_JOB: &str = "genie.move_resolve";

/// When the resolve job first runs: long after a move that is still running in this
/// process would normally have ended. If it has not, the job waits on the genie's lock.
const RESOLVE_DELAY: Duration = Duration::from_secs(120);

async fn save(app: &AppState, m: &Move) -> ApiResult<()> {
    let m = m.clone();
    app.db
        .write(move |c| Ok(store::save_move(c, &m, &crate::db::now())?))
        .await
}

/// Moves the genie to `to`. The caller checked that the user may manage it. Returns what
/// moved and the genie as `render` makes it, which `genie.updated` (after `genie.moved`,
/// both recorded with the switch) carries.
pub async fn move_genie(
    app: &AppState,
    genie_id: &str,
    to: &str,
    render: crate::service::genies::Render,
) -> ApiResult<(Value, Value)> {
    let _guard = lock_genie(genie_id).await;
    let id = genie_id.to_string();
    let (row, docs, phones) = app
        .db
        .read(move |c| {
            let g = repo::find(c, &id)?.ok_or_else(ApiError::agent_not_found)?;
            Ok((g, repo::documents(c, &id)?, repo::phones(c, &id)?))
        })
        .await?;
    let from = voice_for(app, genie_id).await?;
    let target = app.voice.get(to).cloned().ok_or_else(|| {
        ApiError::validation(format!(
            "data.provider: '{to}' is not a voice provider configured on this service (configured: {})",
            app.voice.names().join(", ")
        ))
    })?;
    if target.name() == from.name() {
        return Err(ApiError::validation(format!(
            "data.provider: the genie already lives at '{to}'"
        )));
    }
    let old_agent = row.external_agent_id.clone().ok_or_else(|| {
        ApiError::conflict("this genie has no agent at its voice platform to move")
    })?;
    if !phones.is_empty() && !target.supports_phone_provisioning() {
        return Err(ApiError::conflict(format!(
            "the genie has phone numbers ({}) and '{}' cannot provide numbers through its API; release them first",
            phones
                .iter()
                .map(|p| p.number.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            target.name()
        )));
    }
    let (gid, f, t) = (genie_id.to_string(), from.name(), target.name());
    let started = app
        .db
        .write(move |c| {
            let now = crate::db::now();
            if !store::start_move(c, &gid, f, t, &now)? {
                return Ok(false);
            }
            crate::jobs::enqueue(
                c,
                RESOLVE_JOB,
                &json!({"genie_id": gid}),
                RESOLVE_DELAY,
                None,
            )?;
            Ok(true)
        })
        .await?;
    if !started {
        return Err(ApiError::conflict(
            "a move of this genie is already under way",
        ));
    }
    let mut m = Move {
        genie_id: genie_id.to_string(),
        from_provider: from.name().to_string(),
        to_provider: target.name().to_string(),
        new_agent_id: None,
        created_documents: Vec::new(),
        created_numbers: Vec::new(),
    };
    let mut new_phones = Vec::new();
    let outcome: Result<(), (String, ApiError)> = async {
        let (kb, made) = kb_for(app, &target, &docs)
            .await
            .map_err(|e| ("copying the documents".to_string(), e))?;
        m.created_documents = made;
        save(app, &m)
            .await
            .map_err(|e| ("recording the move".into(), e))?;
        let spec = agent_spec(&row, kb);
        let agent = target
            .create_agent(&spec)
            .await
            .map_err(|e| ("creating the agent".to_string(), e.into()))?;
        m.new_agent_id = Some(agent.clone());
        save(app, &m)
            .await
            .map_err(|e| ("recording the move".into(), e))?;
        // The new agent must answer, holding what was sent, before anything switches.
        let held = target
            .get_agent(&agent)
            .await
            .map_err(|e| ("reading the new agent back".to_string(), e.into()))?;
        let diff = drift::compare(&drift::view(&target.as_held(&spec)), &drift::view(&held));
        if !diff.is_empty() {
            let paths: Vec<&str> = diff.iter().filter_map(|c| c["path"].as_str()).collect();
            return Err((
                "checking the new agent".to_string(),
                ApiError::upstream(format!("it does not hold {}", paths.join(", "))),
            ));
        }
        for p in &phones {
            let n = target
                .provision_number(&agent, &row.name)
                .await
                .map_err(|e| {
                    (
                        format!("getting a number to replace {}", p.number),
                        e.into(),
                    )
                })?;
            m.created_numbers.push(n.external_id.clone());
            save(app, &m)
                .await
                .map_err(|e| ("recording the move".into(), e))?;
            new_phones.push(n);
        }
        Ok(())
    }
    .await;
    if let Err((step, e)) = outcome {
        let reason = abandon(app, &m, &target, from.name(), &step, &e).await;
        return Err(match e.kind {
            Kind::Validation | Kind::Conflict => ApiError::new(e.kind, reason),
            _ => ApiError::upstream(reason),
        });
    }
    // Switch over: the genie names its new platform, agent and numbers; the old agent and
    // numbers are queued for removal in the same transaction.
    let new_agent = m.new_agent_id.clone().expect("made above");
    let old_numbers: Vec<String> = phones
        .iter()
        .filter_map(|p| p.external_id.clone())
        .collect();
    let cleanup = json!({"genie_id": genie_id, "provider": from.name(), "agent_id": old_agent, "number_ids": old_numbers});
    let (gid, to_name, na, cl) = (
        genie_id.to_string(),
        target.name(),
        new_agent.clone(),
        cleanup.clone(),
    );
    let old_phones: Vec<PhoneRow> = phones.clone();
    let np = new_phones.clone();
    let moved = Event::new(
        "genie.moved",
        &row.user_id,
        json!({"genie_id": genie_id, "from": from.name(), "to": target.name(), "agent_id": new_agent}),
    );
    let switched = app
        .db
        .write(move |c| {
            let now = crate::db::now();
            let Some(mut g) = repo::find(c, &gid)? else {
                return Ok(None);
            };
            g.external_agent_id = Some(na);
            g.updated_at = now.clone();
            repo::save(c, &g)?;
            for p in &old_phones {
                repo::delete_phone(c, &p.id)?;
            }
            for n in np {
                repo::insert_phone(
                    c,
                    &PhoneRow {
                        id: crate::db::new_id(),
                        genie_id: gid.clone(),
                        number: n.number,
                        external_id: Some(n.external_id),
                        status: "active".into(),
                        created_at: now.clone(),
                    },
                )?;
            }
            crate::db::genie_providers::set_provider(c, &gid, to_name, &now)?;
            crate::db::genie_providers::set_state(c, &gid, to_name, "in_sync", None, &now)?;
            crate::db::genie_moves::set_drift(c, &gid, None, &now)?;
            store::end_move(c, &gid)?;
            crate::jobs::enqueue(c, CLEANUP_JOB, &cl, Duration::from_secs(30), None)?;
            let moved = crate::events::record(c, moved)?;
            let (genie, updated) = crate::service::genies::announce_updated(c, &gid, render)?;
            Ok(Some((genie, [moved, updated])))
        })
        .await;
    let switched = match switched {
        Ok(Some(s)) => Ok(s),
        Ok(None) => Err(ApiError::agent_not_found()),
        Err(e) => Err(e),
    };
    let (genie, raised) = match switched {
        Ok(s) => s,
        Err(e) => {
            abandon(app, &m, &target, from.name(), "switching over", &e).await;
            return Err(e);
        }
    };
    app.bus.emit_all(raised);
    // The old agent goes only now; the queued job repeats this if it fails here.
    if let Err(e) = crate::service::genies::run_cleanup(app, &cleanup).await {
        tracing::warn!(genie = %genie_id, error = %e, "removing the old agent failed; the clean-up job retries");
    }
    Ok((
        json!({"from": from.name(), "to": target.name(), "agent_id": new_agent,
              "numbers": new_phones.iter().map(|n| n.number.clone()).collect::<Vec<_>>()}),
        genie,
    ))
}

/// A move that failed at `step` with `e`: what it made is removed and the genie's provider
/// state records `failed` with the reason, which is returned. Should the removal fail, the
/// state is recorded on its own and the move's row is left for the resolve job.
async fn abandon(
    app: &AppState,
    m: &Move,
    target: &DynVoice,
    from: &str,
    step: &str,
    e: &ApiError,
) -> String {
    let reason = format!(
        "moving to '{}' failed while {step}: {}; the genie still runs on '{from}'",
        target.name(),
        e.message,
    );
    if let Err(ce) = undo(app, m, target, reason.clone()).await {
        tracing::warn!(genie = %m.genie_id, error = %ce, "could not remove all a failed move made; the resolve job retries");
        record_provider_state(app, &m.genie_id, "failed", Some(reason.clone())).await;
    }
    reason
}

/// Removes what a move made at its target (numbers, agent, document copies), then ends its
/// row and records the provider state `failed` with `reason` in one transaction, so no
/// reader sees the move gone and the genie's state not yet saying why. An error leaves the
/// row (and what is left) for the resolve job.
async fn undo(app: &AppState, m: &Move, target: &DynVoice, reason: String) -> ApiResult<()> {
    for n in &m.created_numbers {
        target.release_number(n).await?;
    }
    if let Some(a) = &m.new_agent_id {
        target.delete_agent(a).await?;
    }
    for d in &m.created_documents {
        let (id, p) = (d.clone(), target.name());
        let copy = app.db.read(move |c| Ok(store::copy(c, &id, p)?)).await?;
        if let Some((_, ext)) = copy {
            target.delete_document(&ext).await?;
            let (id, p) = (d.clone(), target.name());
            app.db
                .write(move |c| Ok(store::delete_copy(c, &id, p)?))
                .await?;
        }
    }
    let gid = m.genie_id.clone();
    let default = app.voice.default().name();
    app.db
        .write(move |c| {
            store::end_move(c, &gid)?;
            genie_providers::set_state(c, &gid, default, "failed", Some(&reason), &db::now())?;
            Ok(())
        })
        .await
}

/// The `genie.move_resolve` job: a move row still there once no move holds the genie's lock
/// was cut short (the service stopped): what it made is removed and the genie, still on
/// its old platform, records why.
pub async fn resolve_job(app: &AppState, payload: &Value) -> ApiResult<()> {
    let Some(genie_id) = payload["genie_id"].as_str() else {
        return Ok(());
    };
    let _guard = lock_genie(genie_id).await;
    let id = genie_id.to_string();
    let Some(m) = app.db.read(move |c| Ok(store::get_move(c, &id)?)).await? else {
        return Ok(());
    };
    let target = app.voice.named(Some(&m.to_provider))?.clone();
    let reason = format!(
        "moving to '{}' was interrupted (the service stopped); what it made there was removed and the genie still runs on '{}'",
        m.to_provider, m.from_provider
    );
    undo(app, &m, &target, reason).await
}
