//! Drift: a genie's agent edited in its platform's own dashboard no longer matches genied.
//! The check reads the agent back (`VoiceProvider::get_agent`) and compares it, field by
//! field, with what genied would have the platform hold (`VoiceProvider::as_held` of the
//! genie's live configuration, so what a platform rounds or cannot hold never shows as a
//! change). `pull` adopts the platform's values as a new version; `push` restores
//! genied's. A scheduled loop (`--drift-check-interval-seconds`) checks every genie at a
//! platform and records what it finds on the genie's provider state.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::watch;

use crate::db::genies as repo;
use crate::error::{ApiError, ApiResult};
use crate::events::Event;
use crate::service::genies::{self, Changes, agent_spec};
use crate::state::AppState;
use crate::voice::AgentSpec;

/// Fields a drift check compares, as the genie's configuration names them. `pull` adopts
/// all of them but `documents` and `tools`, which genied keeps (a document or tool made in
/// a dashboard has no counterpart in genied).
const ADOPTABLE: [&str; 15] = [
    "name",
    "system_prompt",
    "first_message",
    "voice_id",
    "llm_model",
    "temperature",
    "max_tokens",
    "language",
    "stability",
    "similarity_boost",
    "speed",
    "max_duration_seconds",
    "turn_timeout_seconds",
    "silence_end_seconds",
    "turn_mode",
];

/// What a drift check compares of an agent.
pub fn view(s: &AgentSpec) -> Value {
    let mut docs: Vec<&str> = s.knowledge_base.iter().map(|d| d.id.as_str()).collect();
    docs.sort_unstable();
    let mut tools: Vec<&str> = s.tools.iter().map(|t| t.label()).collect();
    tools.sort_unstable();
    json!({
        "name": s.name,
        "system_prompt": s.system_prompt,
        "first_message": s.first_message,
        "voice_id": s.voice_id,
        "llm_model": (!s.llm_model.is_empty()).then_some(&s.llm_model),
        "temperature": s.temperature,
        "max_tokens": s.max_tokens,
        "language": s.language,
        "stability": s.stability,
        "similarity_boost": s.similarity_boost,
        "speed": s.speed,
        "max_duration_seconds": s.max_duration_seconds,
        "turn_timeout_seconds": s.turn_timeout_seconds,
        "silence_end_seconds": s.silence_end_seconds,
        "turn_mode": s.turn_mode,
        "documents": docs,
        "tools": tools,
    })
}

/// The fields where the platform differs from genied, `[{path, genied, platform}]`. A field
/// genied leaves unset is not compared: the platform's default stands there.
pub fn compare(genied: &Value, platform: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    let Some(fields) = genied.as_object() else {
        return out;
    };
    for (k, g) in fields {
        let p = platform.get(k).unwrap_or(&Value::Null);
        if g.is_null() || same(g, p) {
            continue;
        }
        out.push(json!({"path": k, "genied": g, "platform": p}));
    }
    out
}

/// Equal, numbers compared as numbers (a platform may answer `1` for `1.0`).
fn same(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => (x - y).abs() < 1e-9,
        _ => a == b,
    }
}

/// One drift check's outcome.
pub struct Report {
    pub provider: &'static str,
    pub agent_id: String,
    pub changes: Vec<Value>,
    /// The platform's agent, absent when it is gone.
    pub platform: Option<AgentSpec>,
}

impl Report {
    pub fn to_json(&self, checked_at: &str) -> Value {
        json!({
            "drift": !self.changes.is_empty(),
            "provider": self.provider,
            "agent_id": self.agent_id,
            "changes": self.changes,
            "checked_at": checked_at,
        })
    }
}

/// Compares the genie's agent at its platform with its live configuration (the caller
/// holds the genie's lock, or accepts a race with a change under way).
pub async fn check(app: &AppState, genie_id: &str) -> ApiResult<Report> {
    let id = genie_id.to_string();
    let (row, docs) = app
        .db
        .read(move |c| {
            let g = repo::find(c, &id)?.ok_or_else(ApiError::agent_not_found)?;
            Ok((g, repo::documents(c, &id)?))
        })
        .await?;
    let agent = row.external_agent_id.clone().ok_or_else(|| {
        ApiError::conflict("this genie has no agent at its voice platform to compare with")
    })?;
    let voice = crate::knowledge::agents::voice_for(app, genie_id).await?;
    let (kb, _) = crate::knowledge::agents::kb_for(app, &voice, &docs).await?;
    let expected = view(&voice.as_held(&agent_spec(&row, kb)));
    match voice.get_agent(&agent).await {
        Ok(spec) => Ok(Report {
            provider: voice.name(),
            agent_id: agent,
            changes: compare(&expected, &view(&spec)),
            platform: Some(spec),
        }),
        Err(e) if crate::voice::http::is_gone(&e) => Ok(Report {
            provider: voice.name(),
            agent_id: agent.clone(),
            changes: vec![json!({"path": "agent", "genied": agent, "platform": null})],
            platform: None,
        }),
        Err(e) => Err(e.into()),
    }
}

/// Stores what a check found on the genie's provider state and, when the platform has
/// newly drifted (or drifted differently), emits `genie.drift_detected` to the owner.
pub async fn record(app: &AppState, genie_id: &str, owner: &str, report: &Report) -> String {
    let now = crate::db::now();
    let changes = (!report.changes.is_empty()).then(|| Value::Array(report.changes.clone()));
    let (id, at, c2) = (genie_id.to_string(), now.clone(), changes.clone());
    let event = |ch: &Value| {
        Event::new(
            "genie.drift_detected",
            owner,
            json!({"genie_id": genie_id, "provider": report.provider,
                   "agent_id": report.agent_id, "changes": ch}),
        )
    };
    let detected = changes.as_ref().map(event);
    let recorded = app
        .db
        .write(move |c| {
            let (before, _) = crate::db::genie_moves::drift(c, &id)?;
            crate::db::genie_moves::set_drift(c, &id, c2.as_ref(), &at)?;
            Ok(match (c2, detected) {
                (Some(ch), Some(e)) if before != ch => Some(crate::events::record(c, e)?),
                _ => None,
            })
        })
        .await;
    match recorded {
        Ok(recorded) => app.bus.emit_all(recorded),
        Err(e) => tracing::warn!(genie = %genie_id, error = %e, "could not record a drift check"),
    }
    now
}

/// `check-drift`: checks and records.
pub async fn check_and_record(app: &AppState, genie_id: &str, owner: &str) -> ApiResult<Value> {
    let report = check(app, genie_id).await?;
    let at = record(app, genie_id, owner, &report).await;
    Ok(report.to_json(&at))
}

/// `push`: makes the platform's agent genied's live configuration again (a new agent when
/// the old one was deleted at the platform). Returns what it restored.
pub async fn push(app: &AppState, genie_id: &str, owner: &str) -> ApiResult<Value> {
    let _guard = crate::knowledge::agents::lock_genie(genie_id).await;
    let report = check(app, genie_id).await?;
    let id = genie_id.to_string();
    let (row, docs) = app
        .db
        .read(move |c| {
            let g = repo::find(c, &id)?.ok_or_else(ApiError::agent_not_found)?;
            Ok((g, repo::documents(c, &id)?))
        })
        .await?;
    let voice = crate::knowledge::agents::voice_for(app, genie_id).await?;
    let (kb, _) = crate::knowledge::agents::kb_for(app, &voice, &docs).await?;
    let spec = agent_spec(&row, kb);
    if report.platform.is_some() {
        voice.update_agent(&report.agent_id, &spec).await?;
    } else {
        let agent = voice.create_agent(&spec).await?;
        let (id, a2) = (genie_id.to_string(), agent.clone());
        let saved = app
            .db
            .write(move |c| {
                let Some(mut g) = repo::find(c, &id)? else {
                    return Ok(false);
                };
                g.external_agent_id = Some(a2);
                Ok(repo::save(c, &g)?)
            })
            .await;
        if !matches!(saved, Ok(true)) {
            genies::cleanup_or_queue(app, voice.name(), Some(agent), vec![]).await;
            saved?;
            return Err(ApiError::agent_not_found());
        }
    }
    let restored = Report {
        provider: report.provider,
        agent_id: report.agent_id.clone(),
        changes: Vec::new(),
        platform: None,
    };
    record(app, genie_id, owner, &restored).await;
    crate::knowledge::agents::record_provider_state(app, genie_id, "in_sync", None).await;
    Ok(
        json!({"genie_id": genie_id, "provider": report.provider, "pushed": true, "changes": report.changes}),
    )
}

/// `pull`: adopts the platform's values of the fields that differ as a new version of the
/// genie (summary "pulled from <platform>: …"); documents and tools stay genied's and are
/// pushed back. Returns the version and the changes adopted. When it adopted any,
/// `genie.updated` carries the genie as `render` makes it.
pub async fn pull(
    app: &AppState,
    by: &str,
    genie_id: &str,
    owner: &str,
    render: genies::Render,
) -> ApiResult<Value> {
    let report = {
        let _guard = crate::knowledge::agents::lock_genie(genie_id).await;
        check(app, genie_id).await?
    };
    let Some(platform) = &report.platform else {
        return Err(ApiError::conflict(format!(
            "the agent {} is gone at '{}': nothing to pull (push recreates it)",
            report.agent_id, report.provider
        )));
    };
    let pv = view(platform);
    let mut adopt = serde_json::Map::new();
    let mut paths = Vec::new();
    for ch in &report.changes {
        let Some(path) = ch["path"].as_str() else {
            continue;
        };
        if ADOPTABLE.contains(&path) {
            adopt.insert(path.to_string(), pv[path].clone());
            paths.push(path.to_string());
        }
    }
    let version = if adopt.is_empty() {
        None
    } else {
        let note = format!("pulled from {}: {}", report.provider, paths.join(", "));
        let adopt = Value::Object(adopt);
        let mut changes = Changes::edit(move |g| {
            if let Some(n) = adopt["name"].as_str() {
                g.name = n.to_string();
            }
            crate::service::genie_versions::apply_config(g, &adopt);
            Ok(())
        });
        changes.note = Some(note);
        changes.render = Some(render);
        genies::apply(app, by, genie_id, changes).await?.version
    };
    // What genied keeps (documents, tools) goes back to the platform.
    let rest = report.changes.len() > paths.len();
    if rest {
        push(app, genie_id, owner).await?;
    } else {
        let done = Report {
            provider: report.provider,
            agent_id: report.agent_id.clone(),
            changes: Vec::new(),
            platform: None,
        };
        record(app, genie_id, owner, &done).await;
    }
    Ok(json!({"version": version, "adopted": paths, "changes": report.changes}))
}

/// The scheduled check: every `interval`, every genie at a platform other than `local`.
/// A platform that fails is logged and tried again next round.
pub async fn run(app: AppState, mut stop: watch::Receiver<bool>) {
    let secs = app.config.drift_check_interval_seconds;
    if secs == 0 {
        return;
    }
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(secs)) => {}
            _ = stop.changed() => return,
        }
        let ids = match app
            .db
            .read(|c| Ok(crate::db::genie_moves::checkable(c)?))
            .await
        {
            Ok(ids) => ids,
            Err(e) => {
                tracing::warn!(error = %e, "drift check: could not list genies");
                continue;
            }
        };
        for id in ids {
            if *stop.borrow() {
                return;
            }
            let g = id.clone();
            let owner = match app
                .db
                .read(move |c| Ok(repo::find(c, &g)?.map(|r| r.user_id)))
                .await
            {
                Ok(Some(o)) => o,
                _ => continue,
            };
            let report = {
                let _guard = crate::knowledge::agents::lock_genie(&id).await;
                check(&app, &id).await
            };
            match report {
                Ok(r) => {
                    record(&app, &id, &owner, &r).await;
                }
                Err(e) => tracing::warn!(genie = %id, error = %e, "drift check failed"),
            }
        }
    }
}
