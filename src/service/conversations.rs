//! Conversation operations shared by the `conversations` actions and the code that runs
//! without a signed-in caller: recording a conversation the service hosted, storing what the
//! voice provider reports (polling `sync` and the post-call webhook), analysing it,
//! announcing it, and the `conversation.report` job.

use crate::db::sql::Connection;
use serde_json::{Map, Value, json};

use crate::analysis::{self, Analysis};
use crate::auth::Principal;
use crate::db::conversations::{self as repo, Conversation};
use crate::db::leads as leads_repo;
use crate::error::{ApiError, ApiResult};
use crate::events::{self, Event};
use crate::state::AppState;
use crate::voice::{ConversationDetail, Turn};

/// Job kind that mails (or records) the report of a finished conversation.
pub const REPORT_JOB: &str = "conversation.report";

/// A conversation the principal may reach: its owner, an admin, or (reading) a user the
/// genie is assigned to. Anything else reads as absent.
pub fn load(c: &Connection, p: &Principal, id: &str, write: bool) -> ApiResult<Conversation> {
    let conv = repo::get(c, id)?.ok_or_else(|| ApiError::not_found("conversation"))?;
    if p.is_admin() || conv.user_id == p.user_id {
        return Ok(conv);
    }
    if !write
        && let Some(g) = &conv.genie_id
        && repo::is_assigned(c, g, &p.user_id)?
    {
        return Ok(conv);
    }
    Err(ApiError::not_found("conversation"))
}

/// Queues the report of a finished conversation when its genie asks for reports.
pub fn queue_report(
    c: &Connection,
    conv_id: &str,
    genie: Option<&repo::GenieRef>,
) -> rusqlite::Result<bool> {
    match genie {
        Some(g) if g.send_reports && !g.support_emails.is_empty() => {
            crate::jobs::enqueue(
                c,
                REPORT_JOB,
                &json!({"conversation_id": conv_id}),
                std::time::Duration::ZERO,
                Some(5),
            )?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// Emits `conversation.completed` with the whole record: transcript, analysis, and the lead
/// linked to it (or null). Recorded in a transaction of its own, after the storing and the
/// analysis it reports on (see docs/reliability.md).
pub async fn emit_completed(app: &AppState, conversation_id: &str) -> ApiResult<()> {
    let id = conversation_id.to_string();
    let recorded = app
        .db
        .write(move |c| {
            let Some(conv) = repo::get(c, &id)? else {
                return Ok(None);
            };
            let mut data = json!(conv);
            data["lead"] = json!(leads_repo::get_by_conversation(c, &id)?);
            let e = Event::new("conversation.completed", &conv.user_id, data);
            Ok(Some(events::record(c, e)?))
        })
        .await?;
    app.bus.emit_all(recorded);
    Ok(())
}

/// What storing one provider conversation did.
pub struct Stored {
    pub conversation: Conversation,
    pub created: bool,
    /// It reached `done` just now: its report is queued and `conversation.completed` is due.
    pub became_done: bool,
}

/// Inserts or refreshes the conversation the provider reported for genie `g`, keyed by the
/// provider's conversation id (so it is idempotent), and queues the report when it just
/// finished. Shared by `sync` (polling) and the provider's post-call webhook.
pub async fn store_provider_conversation(
    app: &AppState,
    g: &repo::GenieRef,
    d: ConversationDetail,
) -> ApiResult<Stored> {
    let started = chrono::DateTime::from_timestamp(d.start_time_unix_secs, 0).unwrap_or_default();
    let started = crate::db::fmt_time(started);
    let genie = g.clone();
    app.db
        .write(move |c| {
            let known = repo::by_external(c, &d.conversation_id)?;
            if let Some(k) = &known
                && k.user_id != genie.user_id
            {
                return Err(ApiError::conflict(format!(
                    "conversation {} belongs to another account",
                    d.conversation_id
                )));
            }
            let known_status = known.as_ref().map(|k| k.status.clone());
            let id = match known {
                Some(k) => {
                    repo::refresh_external(
                        c,
                        &k.id,
                        &d.status,
                        &started,
                        d.call_duration_secs,
                        &d.transcript,
                        d.summary.as_deref(),
                        &d.metadata,
                    )?;
                    k.id
                }
                None => repo::insert(
                    c,
                    &repo::NewConversation {
                        user_id: &genie.user_id,
                        genie_id: Some(&genie.id),
                        external_id: Some(&d.conversation_id),
                        channel: "phone",
                        status: &d.status,
                        started_at: &started,
                        duration_seconds: d.call_duration_secs,
                        transcript: &d.transcript,
                        summary: d.summary.as_deref(),
                        metadata: &json!({"provider": d.metadata}),
                        tags: &json!([]),
                    },
                )?,
            };
            let became_done = d.status == "done" && known_status.as_deref() != Some("done");
            if became_done {
                queue_report(c, &id, Some(&genie))?;
            }
            Ok(Stored {
                conversation: repo::get(c, &id)?.expect("row just written"),
                created: known_status.is_none(),
                became_done,
            })
        })
        .await
}

/// Who asks for an analysis, which decides which conversations it may reach and who the lead
/// log names: a signed-in caller (the rules of `load` for a write), or background code
/// acting for the conversation's owner (the provider's post-call webhook), which reaches
/// that owner's conversations only.
#[derive(Debug, Clone)]
pub enum By {
    Caller(Principal),
    Owner(String),
}

impl By {
    fn user_id(&self) -> &str {
        match self {
            By::Caller(p) => &p.user_id,
            By::Owner(u) => u,
        }
    }

    fn load(&self, c: &Connection, id: &str) -> ApiResult<Conversation> {
        match self {
            By::Caller(p) => load(c, p, id, true),
            By::Owner(u) => repo::get(c, id)?
                .filter(|conv| &conv.user_id == u)
                .ok_or_else(|| ApiError::not_found("conversation")),
        }
    }
}

/// What an analysis did: the updated conversation, and the lead it created or filled in.
pub struct Analyzed {
    pub conversation: Conversation,
    pub lead: Option<leads_repo::Lead>,
    /// `created`, `updated` or `none`.
    pub lead_action: &'static str,
    /// How the analysis was made (`llm` or `deterministic`).
    pub method: String,
}

/// Analyses a stored conversation for its owner (summary, intent, contact details, the lead
/// with `createLead` on), as background code does once a call is done.
pub async fn analyze_stored(
    app: &AppState,
    owner_id: &str,
    conversation_id: &str,
) -> ApiResult<Analyzed> {
    analyze(app, By::Owner(owner_id.to_string()), conversation_id, true).await
}

/// Analyses a conversation `by` may write, stores the analysis, creates or fills in the lead
/// it names (when `create_lead`), and announces `conversation.analyzed` and the lead change.
pub async fn analyze(app: &AppState, by: By, id: &str, create_lead: bool) -> ApiResult<Analyzed> {
    let (b, id) = (by.clone(), id.to_string());
    let conv = app.db.read(move |c| b.load(c, &id)).await?;
    let turns = conv.turns();
    let provider_summary = conv.metadata["provider_summary"]
        .as_str()
        .map(str::to_string)
        .or(conv.summary.clone());
    let a: Analysis = analysis::analyze(
        app.llm.as_ref(),
        &analysis::Input {
            channel: &conv.channel,
            duration_seconds: conv.duration_seconds,
            transcript: &turns,
            provider_summary: if conv.analysis.is_some() {
                None
            } else {
                provider_summary.as_deref()
            },
        },
    )
    .await;
    let analysis_json = json!(a);
    let (conv_id, me) = (conv.id.clone(), by.user_id().to_string());
    let (conv, lead, lead_action, raised) = app
        .db
        .write(move |c| {
            let conv = by.load(c, &conv_id)?;
            repo::set_analysis(c, &conv_id, &a.summary, &analysis_json)?;
            let mut lead_action = "none";
            let mut lead = None;
            if create_lead
                && let Some(genie_id) = &conv.genie_id
            {
                let contact = &a.contact;
                let meta = json!({"source": "conversation_analysis", "conversation_id": conv_id, "intent": a.intent, "sentiment": a.sentiment, "method": a.method});
                match leads_repo::get_by_conversation(c, &conv_id)? {
                    Some(existing) => {
                        // Fill only what the lead does not have yet: people's edits win.
                        let mut fields: leads_repo::Fields = Vec::new();
                        for (col, have, found) in [
                            ("name", &existing.name, &contact.name),
                            ("email", &existing.email, &contact.email),
                            ("phone", &existing.phone, &contact.phone),
                            ("budget", &existing.budget, &contact.budget),
                            ("timeline", &existing.timeline, &contact.timeline),
                        ] {
                            if have.is_none()
                                && let Some(v) = found
                            {
                                fields.push((col, v.clone().into()));
                            }
                        }
                        if !fields.is_empty() {
                            leads_repo::update(c, existing.id, &fields)?;
                            leads_repo::log(c, existing.id, Some(&me), "conversation_analyzed", Some("Filled from conversation analysis"), Some(&meta))?;
                            lead_action = "updated";
                        }
                        lead = leads_repo::get(c, existing.id)?;
                    }
                    None if contact.reachable() => {
                        let s = |v: &Option<String>| v.clone().map(rusqlite::types::Value::from).unwrap_or(rusqlite::types::Value::Null);
                        let fields: leads_repo::Fields = vec![
                            ("agent_id", genie_id.clone().into()),
                            ("user_id", conv.user_id.clone().into()),
                            ("name", s(&contact.name)),
                            ("email", s(&contact.email)),
                            ("phone", s(&contact.phone)),
                            ("budget", s(&contact.budget)),
                            ("timeline", s(&contact.timeline)),
                            ("status", "new".to_string().into()),
                            ("metadata", meta.to_string().into()),
                            ("conversation_ref", conv_id.clone().into()),
                        ];
                        let lid = leads_repo::insert(c, &fields)?;
                        leads_repo::log(c, lid, Some(&me), "created", Some("Lead created from conversation analysis"), Some(&meta))?;
                        lead = leads_repo::get(c, lid)?;
                        lead_action = "created";
                    }
                    None => {}
                }
            }
            let conv = repo::get(c, &conv_id)?.expect("conversation exists");
            let mut raised = vec![events::record(c, Event::new(
                "conversation.analyzed",
                &conv.user_id,
                json!({"conversation": conv, "analysis": conv.analysis}),
            ))?];
            let kind = match lead_action {
                "created" => Some("lead.created"),
                "updated" => Some("lead.updated"),
                _ => None,
            };
            if let (Some(l), Some(kind)) = (&lead, kind) {
                raised.push(events::record(c, Event::new(kind, &l.user_id, json!(l)))?);
            }
            Ok((conv, lead, lead_action, raised))
        })
        .await?;
    app.bus.emit_all(raised);
    let method = conv
        .analysis
        .as_ref()
        .and_then(|a| a["method"].as_str())
        .unwrap_or("")
        .to_string();
    Ok(Analyzed {
        conversation: conv,
        lead,
        lead_action,
        method,
    })
}

/// The `conversation.report` job: mails the conversation's report to its genie's support
/// emails (or records it as a dashboard notification; see `mail`).
pub async fn report_job(app: &AppState, payload: &Value) -> ApiResult<()> {
    let id = payload["conversation_id"]
        .as_str()
        .ok_or_else(|| ApiError::validation("payload has no conversation_id"))?
        .to_string();
    let found = app
        .db
        .read(move |c| {
            let Some(conv) = repo::get(c, &id)? else {
                return Ok(None);
            };
            let genie = match &conv.genie_id {
                Some(g) => repo::genie(c, g)?,
                None => None,
            };
            Ok(Some((conv, genie)))
        })
        .await?;
    // Deleted since, or reports switched off since: nothing to send.
    let Some((conv, Some(genie))) = found else {
        return Ok(());
    };
    if !genie.send_reports || genie.support_emails.is_empty() {
        return Ok(());
    }
    let turns = conv.turns();
    let summary = match &conv.summary {
        Some(s) => s.clone(),
        None => {
            analysis::deterministic(&analysis::Input {
                channel: &conv.channel,
                duration_seconds: conv.duration_seconds,
                transcript: &turns,
                provider_summary: None,
            })
            .summary
        }
    };
    let subject = format!("Conversation report: {} ({})", genie.name, conv.started_at);
    let mut transcript = analysis::transcript_text(&turns);
    if transcript.chars().count() > 20_000 {
        transcript = transcript.chars().take(20_000).collect::<String>() + "\n[…]";
    }
    let body = format!(
        "Genie: {}\nChannel: {}\nStarted: {}\nDuration: {} s\nStatus: {}\n\nSummary:\n{}\n\nTranscript:\n{}\n",
        genie.name,
        conv.channel,
        conv.started_at,
        conv.duration_seconds,
        conv.status,
        summary,
        transcript
    );
    app.mail
        .send(
            &conv.user_id,
            &genie.support_emails,
            &subject,
            &body,
            "conversation_report",
            json!({"conversation_id": conv.id, "genie_id": genie.id}),
        )
        .await?;
    Ok(())
}

/// A conversation the service hosted itself, checked by the caller, for [`record`].
pub struct NewRecord {
    pub genie_id: String,
    pub channel: String,
    pub status: String,
    pub started_at: String,
    pub duration_seconds: i64,
    pub transcript: Vec<Turn>,
    pub summary: Option<String>,
    pub metadata: Value,
    pub tags: Value,
}

/// Records a conversation under a genie `p` owns (an admin: any genie). A finished one
/// (`done`) queues its report in the same transaction and is announced as
/// `conversation.completed`.
pub async fn record(app: &AppState, p: &Principal, r: NewRecord) -> ApiResult<Conversation> {
    let p = p.clone();
    let conv = app
        .db
        .write(move |c| {
            let genie = repo::genie(c, &r.genie_id)?
                .filter(|g| p.is_admin() || g.user_id == p.user_id)
                .ok_or_else(ApiError::agent_not_found)?;
            let id = repo::insert(
                c,
                &repo::NewConversation {
                    user_id: &genie.user_id,
                    genie_id: Some(&genie.id),
                    external_id: None,
                    channel: &r.channel,
                    status: &r.status,
                    started_at: &r.started_at,
                    duration_seconds: r.duration_seconds,
                    transcript: &r.transcript,
                    summary: r.summary.as_deref(),
                    metadata: &r.metadata,
                    tags: &r.tags,
                },
            )?;
            if r.status == "done" {
                queue_report(c, &id, Some(&genie))?;
            }
            Ok(repo::get(c, &id)?.expect("row just inserted"))
        })
        .await?;
    if conv.status == "done" {
        emit_completed(app, &conv.id).await?;
        app.wake_jobs();
    }
    Ok(conv)
}

/// Changes a conversation's metadata and tags. Metadata is merged member by member; a
/// member set to null is removed. `tags` replaces the list.
pub async fn update_meta(
    app: &AppState,
    p: &Principal,
    id: &str,
    metadata: Option<Value>,
    tags: Option<Value>,
) -> ApiResult<Conversation> {
    let (p, id) = (p.clone(), id.to_string());
    app.db
        .write(move |c| {
            let before = load(c, &p, &id, true)?;
            let metadata = metadata.map(|m| {
                let mut merged: Map<String, Value> =
                    before.metadata.as_object().cloned().unwrap_or_default();
                for (k, v) in m.as_object().cloned().unwrap_or_default() {
                    if v.is_null() {
                        merged.remove(&k);
                    } else {
                        merged.insert(k, v);
                    }
                }
                Value::Object(merged)
            });
            repo::set_meta(c, &id, metadata.as_ref(), tags.as_ref())?;
            Ok(repo::get(c, &id)?.expect("conversation exists"))
        })
        .await
}

/// Job kind of a background `conversations sync` run.
pub const SYNC_JOB: &str = "conversations.sync";
/// Attempts of a sync job; a provider error on the last one is recorded against the genie
/// and the run goes on with the next.
pub const SYNC_ATTEMPTS: i64 = 3;
/// Requests a second sync runs make to the voice platform, all runs of the process together
/// (the platforms rate-limit an account; a sync must not starve calls and provisioning).
pub const PROVIDER_REQUESTS_PER_SECOND: u32 = 10;

pub use crate::db::sync_runs::SyncRun;

/// Statuses after which a conversation no longer changes at the provider.
const FINAL: &[&str] = &["done", "failed"];

/// Starts pulling `user_id`'s conversations from the voice platform in the background: of
/// the genie `genie_id` (which they must own and which must be provisioned), or of every
/// provisioned genie of theirs. The run and its job commit together; the run's record
/// (`sync-status`) tells its progress.
pub async fn start_sync(
    app: &AppState,
    user_id: &str,
    genie_id: Option<String>,
) -> ApiResult<SyncRun> {
    let me = user_id.to_string();
    let run = app
        .db
        .write(move |c| {
            let genies = match &genie_id {
                Some(g) => {
                    let genie = repo::genie(c, g)?
                        .filter(|g| g.user_id == me)
                        .ok_or_else(ApiError::agent_not_found)?;
                    if genie.external_agent_id.is_none() {
                        return Err(ApiError::validation(
                            "data.genieId: this genie is not provisioned on the voice platform",
                        ));
                    }
                    1
                }
                None => repo::syncable_genies(c, &me)?.len() as i64,
            };
            let run = crate::db::sync_runs::insert(c, &me, genie_id.as_deref(), genies)?;
            crate::jobs::enqueue(
                c,
                SYNC_JOB,
                &json!({"run_id": run.id}),
                std::time::Duration::ZERO,
                Some(SYNC_ATTEMPTS),
            )?;
            Ok(run)
        })
        .await?;
    app.wake_jobs();
    Ok(run)
}

/// A sync run of `user_id`'s.
pub async fn sync_status(app: &AppState, user_id: &str, id: &str) -> ApiResult<SyncRun> {
    let (uid, id) = (user_id.to_string(), id.to_string());
    app.db
        .read(move |c| Ok(crate::db::sync_runs::get(c, &uid, &id)?))
        .await?
        .ok_or_else(|| ApiError::not_found("sync run"))
}

fn provider_limiter() -> &'static governor::DefaultDirectRateLimiter {
    static L: std::sync::OnceLock<governor::DefaultDirectRateLimiter> = std::sync::OnceLock::new();
    L.get_or_init(|| {
        let n = std::num::NonZeroU32::new(PROVIDER_REQUESTS_PER_SECOND).expect("non-zero");
        governor::RateLimiter::direct(governor::Quota::per_second(n))
    })
}

async fn paced() {
    provider_limiter().until_ready().await;
}

async fn save_run(app: &AppState, run: &SyncRun) -> ApiResult<()> {
    let r = run.clone();
    app.db
        .write(move |c| Ok(crate::db::sync_runs::save(c, &r)?))
        .await
}

/// The `conversations.sync` job (`attempt` counts from 1): pages through each genie's
/// conversations at the provider in a stable order, saving the counts and the position
/// after every page, so a run that stops (restart, provider error) resumes from there.
/// Storing is keyed by the provider's conversation id, so nothing is stored twice.
pub async fn sync_job(app: &AppState, payload: &Value, attempt: i64) -> ApiResult<()> {
    let id = payload["run_id"]
        .as_str()
        .ok_or_else(|| ApiError::validation("payload has no run_id"))?
        .to_string();
    let Some(mut run) = app
        .db
        .read(move |c| Ok(crate::db::sync_runs::get_any(c, &id)?))
        .await?
    else {
        return Ok(());
    };
    if run.status == "succeeded" || run.status == "failed" {
        return Ok(());
    }
    let (uid, gid) = (run.user_id.clone(), run.genie_id.clone());
    let mut genies = app
        .db
        .read(move |c| {
            Ok(match gid {
                Some(g) => repo::genie(c, &g)?
                    .filter(|g| g.user_id == uid && g.external_agent_id.is_some())
                    .into_iter()
                    .collect(),
                None => repo::syncable_genies(c, &uid)?,
            })
        })
        .await?;
    genies.sort_by(|a, b| a.id.cmp(&b.id));
    run.status = "running".into();
    let from_genie = run.position["genie_id"].as_str().map(str::to_string);
    let mut cursor = run.position["cursor"].as_str().map(str::to_string);
    for g in genies
        .iter()
        .filter(|g| from_genie.as_ref().is_none_or(|f| &g.id >= f))
    {
        if from_genie.as_ref() != Some(&g.id) {
            cursor = None;
        }
        run.position = json!({"genie_id": g.id, "cursor": cursor});
        save_run(app, &run).await?;
        match sync_genie(app, g, &mut run, cursor.take()).await {
            Ok(()) => {}
            // Try again later from the saved position, unless this was the last attempt.
            Err(e) if attempt < SYNC_ATTEMPTS && !e.is(crate::error::Kind::Validation) => {
                return Err(e);
            }
            Err(e) => {
                if let Some(list) = run.errors.as_array_mut() {
                    list.push(json!({"genie_id": g.id, "message": e.message}));
                }
            }
        }
        run.genies_done += 1;
    }
    let errors = run.errors.as_array().map_or(0, Vec::len) as i64;
    run.status =
        if run.genies > 0 && errors >= run.genies && run.created + run.updated + run.unchanged == 0
        {
            "failed".into()
        } else {
            "succeeded".into()
        };
    run.position = json!({"genie_id": null, "cursor": null, "done": true});
    run.finished_at = Some(crate::db::now());
    save_run(app, &run).await
}

/// Pages through one genie's conversations on the platform from `cursor`. Each
/// conversation is stored in its own transaction and announced when it just finished; the
/// run's progress is saved after each page.
async fn sync_genie(
    app: &AppState,
    g: &repo::GenieRef,
    run: &mut SyncRun,
    mut cursor: Option<String>,
) -> ApiResult<()> {
    let agent = g.external_agent_id.clone().unwrap_or_default();
    let voice = crate::knowledge::agents::voice_for(app, &g.id).await?;
    for _ in 0..1000 {
        paced().await;
        let page = voice.list_conversations(&agent, cursor.as_deref()).await?;
        for s in &page.conversations {
            let ext = s.conversation_id.clone();
            let known = app
                .db
                .read(move |c| Ok(repo::by_external(c, &ext)?))
                .await?;
            if let Some(k) = &known {
                if k.user_id != g.user_id {
                    if let Some(list) = run.errors.as_array_mut() {
                        list.push(json!({"genie_id": g.id, "message": format!("conversation {} belongs to another account", s.conversation_id)}));
                    }
                    continue;
                }
                if k.status == s.status
                    && k.duration_seconds == s.call_duration_secs
                    && FINAL.contains(&k.status.as_str())
                {
                    run.unchanged += 1;
                    continue;
                }
            }
            paced().await;
            let d = voice.get_conversation(&s.conversation_id).await?;
            let stored = store_provider_conversation(app, g, d).await?;
            if stored.created {
                run.created += 1;
            } else {
                run.updated += 1;
            }
            if stored.became_done {
                emit_completed(app, &stored.conversation.id).await?;
                app.wake_jobs();
            }
        }
        cursor = page.next_cursor.filter(|c| !c.is_empty());
        run.position = json!({"genie_id": g.id, "cursor": cursor});
        save_run(app, run).await?;
        if cursor.is_none() {
            break;
        }
    }
    Ok(())
}
