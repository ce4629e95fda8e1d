//! The text chat of a genie's public page (`POST /g/{slug}/chat`): a visitor's message is
//! answered by the configured LLM with the genie's own prompt, model, temperature and
//! max_tokens, from passages of the genie's attached documents found by full-text search;
//! the conversation record (channel `web`) opens with the genie's first message, and each
//! answer keeps the passages it was given as `citations`. The page records its
//! conversations by its own rule, not by `conversations::record`: the record stays
//! `in-progress` while the visitor chats (so no report is queued and nothing is announced),
//! and its turns carry citations.

use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::db::{self, page_chat as store};
use crate::error::{ApiError, ApiResult};
use crate::llm::{ChatRequest, Message};
use crate::service::{genie_tools, genie_versions};
use crate::state::AppState;

pub use crate::db::page_chat::PageGenie;

/// What a visitor reads when the service has no language model: nothing about flags.
pub const UNAVAILABLE_REPLY: &str = "This assistant can't chat right now.";

/// What the operator and the genie's owner read about the same situation.
pub const UNAVAILABLE_WARNING: &str = "The page's text chat cannot answer: this service has no language model \
     configured (the operator sets --llm-base-url). Visitors are told the assistant can't chat \
     right now; their messages are still recorded.";

pub const MAX_MESSAGE_CHARS: usize = 2000;
pub const MAX_TURNS: usize = 200;
/// Passages of the knowledge base given to the model with each message.
pub const PASSAGES: i64 = 3;

/// The operator hears about a missing LLM once per process, not once per visitor message.
static WARNED_UNCONFIGURED: AtomicBool = AtomicBool::new(false);

/// A passage of the knowledge base an answer was given.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Citation {
    pub document_id: String,
    pub name: String,
    pub passage: String,
}

/// One turn of a page conversation as stored: the transcript shape of every conversation,
/// plus the citations of an answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct PageTurn {
    role: String,
    message: String,
    time_in_call_secs: f64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    citations: Vec<Citation>,
    /// The tools the genie called before this answer: name, arguments, result or error,
    /// duration. Never a credential (webhook replies are redacted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<genie_tools::ToolRecord>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Answer {
    pub conversation_id: String,
    pub reply: String,
    /// False when no LLM is configured and `reply` is [`UNAVAILABLE_REPLY`].
    pub configured: bool,
    pub citations: Vec<Citation>,
    /// The tools called for this answer, as the visitor sees them.
    pub tool_steps: Vec<ToolStep>,
    /// The conversation ended with this answer (the genie called `end_conversation`).
    pub ended: bool,
}

pub async fn find_active(app: &AppState, slug: &str) -> ApiResult<Option<PageGenie>> {
    let slug = slug.to_string();
    app.db
        .read(move |c| Ok(store::find_active(c, &slug)?))
        .await
}

/// The genie's first message, when it has one worth showing.
pub fn first_message(g: &PageGenie) -> Option<&str> {
    g.first_message
        .as_deref()
        .map(str::trim)
        .filter(|m| !m.is_empty())
}

fn system_prompt(g: &PageGenie, passages: &[Citation]) -> String {
    let mut system = g
        .system_prompt
        .clone()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| format!("You are {}, a helpful assistant.", g.name));
    if !passages.is_empty() {
        system.push_str(
            "\n\nAnswer from these passages of your knowledge base when they cover the question; \
             when they do not, say you are not sure rather than guessing.",
        );
        for (i, p) in passages.iter().enumerate() {
            system.push_str(&format!("\n\n[{}] {}:\n{}", i + 1, p.name, p.passage));
        }
    }
    system
}

/// Rounds of tool calls one visitor message may cause before the genie must answer.
pub const MAX_TOOL_ROUNDS: usize = 5;

/// Job kind: end a web conversation once it has been idle for the configured time.
pub const IDLE_JOB: &str = "conversation.idle";
/// Job kind: the follow-up of an ended conversation (analysis, `conversation.completed`).
pub const FINISH_JOB: &str = "conversation.finish";

/// What a streaming client is told while a turn is under way.
#[derive(Debug, Clone)]
pub enum Step {
    /// A piece of the reply, as the model sent it.
    Token(String),
    /// A tool call started ("looking up…").
    ToolStarted { name: String },
    /// A tool call finished.
    ToolFinished {
        name: String,
        ok: bool,
        duration_ms: u64,
    },
}

pub type Sink = tokio::sync::mpsc::UnboundedSender<Step>;

/// The figures of one LLM turn of a page chat, together at its end: first token and total
/// time (the streamed path), and the endpoint's token usage.
#[derive(Debug, Clone, Default)]
pub struct TurnFigures {
    pub first_token: Option<std::time::Duration>,
    pub total: std::time::Duration,
    pub usage: crate::llm::Usage,
    pub tool_calls: usize,
}

/// A tool step as the visitor sees it: which tool, and whether it worked (never its data).
#[derive(Debug, Clone, Serialize)]
pub struct ToolStep {
    pub name: String,
    pub ok: bool,
}

/// Answers one visitor message on the page of `slug`, appending to the conversation
/// `conversation_id` (a web conversation of this genie still in progress) or opening one.
pub async fn chat(
    app: &AppState,
    slug: String,
    conversation_id: Option<String>,
    message: &str,
) -> ApiResult<Answer> {
    chat_with(app, slug, conversation_id, message, None).await
}

/// [`chat`], telling `sink` each token and tool step as it happens (the SSE path).
pub async fn chat_with(
    app: &AppState,
    slug: String,
    conversation_id: Option<String>,
    message: &str,
    sink: Option<Sink>,
) -> ApiResult<Answer> {
    let message = message.trim().to_string();
    if message.is_empty() || message.chars().count() > MAX_MESSAGE_CHARS {
        return Err(ApiError::validation(format!(
            "message must be 1 to {MAX_MESSAGE_CHARS} characters"
        )));
    }
    let configured = app.llm.is_some();
    let m2 = message.clone();
    let new_id = db::new_id();
    let n2 = new_id.clone();
    let index = app.doc_index.clone();
    let (genie, open, passages, tools_json, version) = app
        .db
        .read(move |c| {
            let mut g = store::find_active(c, &slug)?.ok_or_else(ApiError::agent_not_found)?;
            let open = match conversation_id {
                None => None,
                Some(id) => Some(
                    store::open_chat(c, &id, &g.id)?
                        .ok_or_else(|| ApiError::not_found("conversation"))?,
                ),
            };
            // The version serving this conversation (the traffic split picks it for a new one).
            let id = open.as_ref().map(|o| o.id.clone()).unwrap_or(n2);
            let serving = genie_versions::serving(c, &g.id, &id, open.as_ref().map(|o| o.version))?;
            genie_versions::serve_with(&mut g, &serving.config);
            // No model to give them to: no search either.
            let hits = if configured {
                store::passages(c, index.as_deref(), &g, &m2, PASSAGES)?
            } else {
                Vec::new()
            };
            // A version's tools serve its conversations (configurations from before tools
            // existed have none recorded: the genie's own then).
            let tools = match serving.config.get("tools") {
                Some(t) if t.is_array() => t.clone(),
                _ => store::tools(c, &g.id)?,
            };
            Ok((g, open, hits, tools, serving.version))
        })
        .await?;
    let tools = genie_tools::parse(&tools_json);
    let citations: Vec<Citation> = passages
        .into_iter()
        .map(|h| Citation {
            document_id: h.document_id,
            name: h.document_name,
            passage: h.content,
        })
        .collect();
    let now = chrono::Utc::now();
    let mut transcript: Vec<PageTurn> = match &open {
        Some(o) => serde_json::from_str(&o.transcript).unwrap_or_default(),
        // A new conversation opens with the greeting the page showed.
        None => first_message(&genie)
            .map(|m| PageTurn {
                role: "agent".into(),
                message: m.to_string(),
                time_in_call_secs: 0.0,
                citations: Vec::new(),
                tool_calls: Vec::new(),
            })
            .into_iter()
            .collect(),
    };
    if transcript.len() + 2 > MAX_TURNS {
        return Err(ApiError::validation(format!(
            "this conversation has reached {MAX_TURNS} turns; start a new one"
        )));
    }
    let started_at = open
        .as_ref()
        .map(|o| o.started_at.clone())
        .unwrap_or_else(|| db::fmt_time(now));
    let secs = (elapsed_secs(&started_at, now) * 10.0).round() / 10.0;
    let history = transcript.clone();
    transcript.push(PageTurn {
        role: "user".into(),
        message: message.clone(),
        time_in_call_secs: secs,
        citations: Vec::new(),
        tool_calls: Vec::new(),
    });
    // The visitor's message is stored before the model is asked: it is not lost if the
    // model fails, and the conversation exists for the tools that act on it.
    let id = match &open {
        Some(o) => {
            save_transcript(app, &o.id, &transcript, &started_at).await?;
            o.id.clone()
        }
        None => {
            let new = NewConversation {
                id: new_id,
                version,
                configured,
            };
            open_conversation(app, &genie, &started_at, &transcript, new).await?
        }
    };
    let mut steps = Vec::new();
    let mut records = Vec::new();
    let mut end = false;
    let mut recorded = None;
    let reply = match &app.llm {
        None => {
            if !WARNED_UNCONFIGURED.swap(true, Ordering::Relaxed) {
                tracing::warn!(genie = %genie.id, "{UNAVAILABLE_WARNING}");
            }
            None
        }
        Some(llm) => {
            let mut messages = vec![Message::new("system", system_prompt(&genie, &citations))];
            for t in &history {
                let role = if t.role == "user" {
                    "user"
                } else {
                    "assistant"
                };
                messages.push(Message::new(role, t.message.clone()));
            }
            messages.push(Message::new("user", message.clone()));
            let model = Some(genie.llm_model.trim())
                .filter(|m| !m.is_empty())
                .map(str::to_string)
                .unwrap_or_else(|| llm.default_model.clone());
            let ctx = genie_tools::CallCtx {
                app,
                genie: &genie,
                conversation_id: &id,
            };
            let mut figures = TurnFigures::default();
            let mut text = String::new();
            for round in 0..=MAX_TOOL_ROUNDS {
                // The last round offers no tools: the genie must answer.
                let offer = round < MAX_TOOL_ROUNDS && !tools.is_empty();
                let req = ChatRequest {
                    model: model.clone(),
                    messages: messages.clone(),
                    tools: offer.then(|| genie_tools::llm_tools(&tools)),
                    temperature: genie.temperature,
                    max_tokens: genie.max_tokens,
                };
                let round_started = std::time::Instant::now();
                let out = match &sink {
                    None => llm.chat(&req).await.inspect(|_| {
                        // Not streamed: the first token comes with the whole answer.
                        let took = round_started.elapsed();
                        if figures.first_token.is_none() {
                            figures.first_token = Some(figures.total + took);
                        }
                        figures.total += took;
                    }),
                    Some(s) => {
                        let s = s.clone();
                        llm.chat_stream(&req, move |t| {
                            let _ = s.send(Step::Token(t.to_string()));
                        })
                        .await
                        .map(|t| {
                            if figures.first_token.is_none() {
                                figures.first_token = t.first_token.map(|f| figures.total + f);
                            }
                            figures.total += t.total;
                            t.response
                        })
                    }
                };
                let out = out.map_err(|e| {
                    tracing::warn!(genie = %genie.id, error = %e, "public page chat: LLM call failed");
                    ApiError::upstream("the genie could not answer right now; try again")
                })?;
                figures.usage.prompt_tokens += out.usage.prompt_tokens;
                figures.usage.completion_tokens += out.usage.completion_tokens;
                figures.usage.total_tokens += out.usage.total_tokens;
                let calls = out.message.tool_calls.clone().unwrap_or_default();
                if calls.is_empty() || !offer {
                    text = out.message.content.unwrap_or_default().trim().to_string();
                    break;
                }
                let mut assistant = out.message.clone();
                let calls: Vec<_> = calls
                    .into_iter()
                    .enumerate()
                    .map(|(k, mut c)| {
                        if c.id.is_empty() {
                            c.id = format!("call_{round}_{k}");
                        }
                        c
                    })
                    .collect();
                assistant.tool_calls = Some(calls.clone());
                messages.push(assistant);
                for c in &calls {
                    if let Some(s) = &sink {
                        let _ = s.send(Step::ToolStarted {
                            name: c.function.name.clone(),
                        });
                    }
                    let o = genie_tools::run(&ctx, &tools, &c.function.name, &c.function.arguments)
                        .await;
                    if let Some(s) = &sink {
                        let _ = s.send(Step::ToolFinished {
                            name: o.record.name.clone(),
                            ok: o.record.error.is_none(),
                            duration_ms: o.record.duration_ms,
                        });
                    }
                    end |= o.end;
                    steps.push(ToolStep {
                        name: o.record.name.clone(),
                        ok: o.record.error.is_none(),
                    });
                    messages.push(Message::tool_result(&c.id, o.content));
                    records.push(o.record);
                }
                figures.tool_calls = records.len();
            }
            tracing::debug!(genie = %genie.id, ?figures, "page chat turn");
            recorded = Some(super::conversation_figures::TurnFigures {
                model: model.clone(),
                first_token_ms: figures.first_token.unwrap_or(figures.total).as_millis() as i64,
                total_ms: figures.total.as_millis() as i64,
                tokens_in: figures.usage.prompt_tokens,
                tokens_out: figures.usage.completion_tokens,
                tool_calls: figures.tool_calls as i64,
            });
            if text.is_empty() {
                if end {
                    text = "Goodbye!".to_string();
                } else {
                    return Err(ApiError::upstream(
                        "the genie sent an empty answer; try again",
                    ));
                }
            }
            Some(text)
        }
    };
    if let Some(r) = &reply {
        let turn = PageTurn {
            role: "agent".into(),
            message: r.clone(),
            time_in_call_secs: secs,
            citations: citations.clone(),
            tool_calls: records,
        };
        append_turn(app, &id, turn, recorded).await?;
    }
    if end {
        end_conversation(app, &id, "genie").await?;
    }
    tracing::debug!(conversation = %id, "public page chat recorded");
    Ok(Answer {
        conversation_id: id,
        configured: reply.is_some(),
        reply: reply.unwrap_or_else(|| UNAVAILABLE_REPLY.to_string()),
        citations,
        tool_steps: steps,
        ended: end,
    })
}

fn elapsed_secs(started_at: &str, now: chrono::DateTime<chrono::Utc>) -> f64 {
    chrono::DateTime::parse_from_rfc3339(started_at)
        .map(|t| {
            (now - t.with_timezone(&chrono::Utc))
                .num_milliseconds()
                .max(0) as f64
                / 1000.0
        })
        .unwrap_or(0.0)
}

/// A page conversation about to open: its id (the traffic split was decided on it), the
/// genie version that serves it, and whether a model answers.
struct NewConversation {
    id: String,
    version: Option<i64>,
    configured: bool,
}

fn idle_delay(app: &AppState) -> std::time::Duration {
    std::time::Duration::from_secs(app.config.conversation_idle_timeout_seconds)
}

/// Opens the web conversation of a page visit, with its first turns: the one place a page
/// conversation is created. Its idle ending is queued in the same transaction.
async fn open_conversation(
    app: &AppState,
    genie: &PageGenie,
    started_at: &str,
    transcript: &[PageTurn],
    new: NewConversation,
) -> ApiResult<String> {
    let text = serde_json::to_string(transcript)?;
    let NewConversation {
        id,
        version,
        configured,
    } = new;
    let (id2, gid, uid, started_at) = (
        id.clone(),
        genie.id.clone(),
        genie.user_id.clone(),
        started_at.to_string(),
    );
    let delay = idle_delay(app);
    app.db
        .write(move |c| {
            let meta = json!({"source": "public_page", "llm_configured": configured}).to_string();
            store::insert_chat(
                c,
                &store::NewChat {
                    id: &id2,
                    user_id: &uid,
                    genie_id: &gid,
                    started_at: &started_at,
                    transcript: &text,
                    metadata: &meta,
                    version,
                },
            )?;
            queue_idle(c, &id2, delay)?;
            Ok(())
        })
        .await?;
    Ok(id)
}

fn queue_idle(
    c: &crate::db::Connection,
    id: &str,
    delay: std::time::Duration,
) -> rusqlite::Result<()> {
    crate::jobs::enqueue(
        c,
        IDLE_JOB,
        &json!({"conversation_id": id}),
        // A little after the deadline, so the check finds it passed.
        delay + std::time::Duration::from_millis(200),
        None,
    )?;
    Ok(())
}

async fn save_transcript(
    app: &AppState,
    id: &str,
    transcript: &[PageTurn],
    started_at: &str,
) -> ApiResult<()> {
    let text = serde_json::to_string(transcript)?;
    let duration = elapsed_secs(started_at, chrono::Utc::now()).round() as i64;
    let id = id.to_string();
    app.db
        .write(move |c| {
            store::update_chat(c, &id, &text, duration)?;
            Ok(())
        })
        .await
}

/// Adds the genie's answer to the stored transcript (read in the same transaction, so a
/// turn written meanwhile is kept).
/// Appends the genie's turn, with the figures of the LLM turn that made it (latency,
/// tokens, tool calls, cost) in the same transaction.
async fn append_turn(
    app: &AppState,
    id: &str,
    turn: PageTurn,
    figures: Option<super::conversation_figures::TurnFigures>,
) -> ApiResult<()> {
    let (id, app2) = (id.to_string(), app.clone());
    app.db
        .write(move |c| {
            let Some(t) = store::transcript(c, &id)? else {
                return Ok(());
            };
            let mut turns: Vec<PageTurn> = serde_json::from_str(&t).unwrap_or_default();
            turns.push(turn);
            store::set_transcript(c, &id, &serde_json::to_string(&turns)?)?;
            if let Some(f) = &figures {
                super::conversation_figures::record_in(c, &app2.prices, &id, f)?;
            }
            Ok(())
        })
        .await
}

/// Ends a web conversation of a page that is still in progress (`by`: `visitor`, `genie`
/// or `idle`): its status, duration and who ended it are committed together with the jobs
/// that follow it up (analysis and `conversation.completed`, and the report when the genie
/// asks for reports), so a crash after this loses none of them. False when it had already
/// ended.
pub async fn end_conversation(app: &AppState, id: &str, by: &str) -> ApiResult<bool> {
    let (id, by) = (id.to_string(), by.to_string());
    let ended = app.db.write(move |c| end_in(c, &id, &by)).await?;
    if ended {
        app.wake_jobs();
    }
    Ok(ended)
}

/// [`end_conversation`]'s transaction.
pub fn end_in(c: &crate::db::Connection, id: &str, by: &str) -> ApiResult<bool> {
    let Some(open) = store::in_progress(c, id)? else {
        return Ok(false);
    };
    let now = chrono::Utc::now();
    let duration = elapsed_secs(&open.started_at, now).round() as i64;
    let mut meta = open.metadata.clone();
    if !meta.is_object() {
        meta = json!({});
    }
    meta["ended_by"] = json!(by);
    meta["ended_at"] = json!(db::fmt_time(now));
    store::finish_chat(c, id, duration, &meta)?;
    crate::jobs::enqueue(
        c,
        FINISH_JOB,
        &json!({"conversation_id": id}),
        std::time::Duration::ZERO,
        Some(10),
    )?;
    let genie = match &open.genie_id {
        Some(g) => crate::db::conversations::genie(c, g)?,
        None => None,
    };
    crate::service::conversations::queue_report(c, id, genie.as_ref())?;
    Ok(true)
}

/// Ends the conversation a visitor names, on the page of `slug`.
pub async fn visitor_ends(
    app: &AppState,
    slug: String,
    conversation_id: String,
) -> ApiResult<bool> {
    let cid = conversation_id.clone();
    let known = app
        .db
        .read(move |c| {
            let g = store::find_active(c, &slug)?.ok_or_else(ApiError::agent_not_found)?;
            Ok(store::belongs(c, &cid, &g.id)?)
        })
        .await?;
    if !known {
        return Err(ApiError::not_found("conversation"));
    }
    end_conversation(app, &conversation_id, "visitor").await
}

/// The `conversation.idle` job: ends the conversation when no message came for the idle
/// timeout. One per conversation, queued when it opens: finding newer activity, it queues
/// itself again for when the conversation would next be idle.
pub async fn idle_job(app: &AppState, payload: &Value) -> ApiResult<()> {
    let id = payload["conversation_id"]
        .as_str()
        .ok_or_else(|| ApiError::validation("payload has no conversation_id"))?
        .to_string();
    let limit = app.config.conversation_idle_timeout_seconds as i64;
    let ended = app
        .db
        .write(move |c| {
            let Some(open) = store::in_progress(c, &id)? else {
                return Ok(false);
            };
            let last = chrono::DateTime::parse_from_rfc3339(&open.updated_at)
                .map(|t| t.with_timezone(&chrono::Utc))
                .unwrap_or_else(|_| chrono::Utc::now());
            let quiet = (chrono::Utc::now() - last).num_milliseconds();
            if quiet < limit * 1000 {
                let left = std::time::Duration::from_millis((limit * 1000 - quiet) as u64);
                queue_idle(c, &id, left)?;
                return Ok(false);
            }
            end_in(c, &id, "idle")
        })
        .await?;
    if ended {
        app.wake_jobs();
    }
    Ok(())
}

/// The `conversation.finish` job: analyses an ended conversation (which creates or fills in
/// its lead) and announces `conversation.completed`.
pub async fn finish_job(app: &AppState, payload: &Value) -> ApiResult<()> {
    let id = payload["conversation_id"]
        .as_str()
        .ok_or_else(|| ApiError::validation("payload has no conversation_id"))?
        .to_string();
    let i2 = id.clone();
    let owner = app
        .db
        .read(move |c| Ok(crate::db::conversations::get(c, &i2)?.map(|c| c.user_id)))
        .await?;
    // Deleted since: nothing to follow up.
    let Some(owner) = owner else {
        return Ok(());
    };
    crate::service::conversations::analyze_stored(app, &owner, &id).await?;
    crate::service::conversations::emit_completed(app, &id).await
}
