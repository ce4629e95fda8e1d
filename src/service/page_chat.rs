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
use serde_json::json;

use crate::db::{self, page_chat as store};
use crate::error::{ApiError, ApiResult};
use crate::llm::{ChatRequest, Message};
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
}

#[derive(Debug, Clone, Serialize)]
pub struct Answer {
    pub conversation_id: String,
    pub reply: String,
    /// False when no LLM is configured and `reply` is [`UNAVAILABLE_REPLY`].
    pub configured: bool,
    pub citations: Vec<Citation>,
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

/// Answers one visitor message on the page of `slug`, appending to the conversation
/// `conversation_id` (a web conversation of this genie still in progress) or opening one.
pub async fn chat(
    app: &AppState,
    slug: String,
    conversation_id: Option<String>,
    message: &str,
) -> ApiResult<Answer> {
    let message = message.trim().to_string();
    if message.is_empty() || message.chars().count() > MAX_MESSAGE_CHARS {
        return Err(ApiError::validation(format!(
            "message must be 1 to {MAX_MESSAGE_CHARS} characters"
        )));
    }
    let configured = app.llm.is_some();
    let m2 = message.clone();
    let (genie, open, passages) = app
        .db
        .read(move |c| {
            let g = store::find_active(c, &slug)?.ok_or_else(ApiError::agent_not_found)?;
            let open = match conversation_id {
                None => None,
                Some(id) => Some(
                    store::open_chat(c, &id, &g.id)?
                        .ok_or_else(|| ApiError::not_found("conversation"))?,
                ),
            };
            // No model to give them to: no search either.
            let hits = if configured {
                store::passages(c, &g, &m2, PASSAGES)?
            } else {
                Vec::new()
            };
            Ok((g, open, hits))
        })
        .await?;
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
    let elapsed = chrono::DateTime::parse_from_rfc3339(&started_at)
        .map(|t| {
            (now - t.with_timezone(&chrono::Utc))
                .num_milliseconds()
                .max(0) as f64
                / 1000.0
        })
        .unwrap_or(0.0);
    let mut figures = None;
    let reply = match &app.llm {
        None => {
            if !WARNED_UNCONFIGURED.swap(true, Ordering::Relaxed) {
                tracing::warn!(genie = %genie.id, "{UNAVAILABLE_WARNING}");
            }
            None
        }
        Some(llm) => {
            let mut messages = vec![Message::new("system", system_prompt(&genie, &citations))];
            for t in &transcript {
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
            let req = ChatRequest {
                model,
                messages,
                tools: None,
                temperature: genie.temperature,
                max_tokens: genie.max_tokens,
            };
            let started = std::time::Instant::now();
            let out = llm.chat(&req).await.map_err(|e| {
                tracing::warn!(genie = %genie.id, error = %e, "public page chat: LLM call failed");
                ApiError::upstream("the genie could not answer right now; try again")
            })?;
            let ms = started.elapsed().as_millis() as i64;
            figures = Some(super::conversation_figures::TurnFigures {
                model: req.model.clone(),
                first_token_ms: ms,
                total_ms: ms,
                tokens_in: out.usage.prompt_tokens,
                tokens_out: out.usage.completion_tokens,
                tool_calls: out
                    .message
                    .tool_calls
                    .as_ref()
                    .map_or(0, |t| t.len() as i64),
            });
            let text = out.message.content.unwrap_or_default().trim().to_string();
            if text.is_empty() {
                return Err(ApiError::upstream(
                    "the genie sent an empty answer; try again",
                ));
            }
            Some(text)
        }
    };
    let secs = (elapsed * 10.0).round() / 10.0;
    transcript.push(PageTurn {
        role: "user".into(),
        message,
        time_in_call_secs: secs,
        citations: Vec::new(),
    });
    if let Some(r) = &reply {
        transcript.push(PageTurn {
            role: "agent".into(),
            message: r.clone(),
            time_in_call_secs: secs,
            citations: citations.clone(),
        });
    }
    let text = serde_json::to_string(&transcript)?;
    let id = open
        .as_ref()
        .map(|o| o.id.clone())
        .unwrap_or_else(db::new_id);
    let (id2, gid, uid, is_new) = (
        id.clone(),
        genie.id.clone(),
        genie.user_id.clone(),
        open.is_none(),
    );
    let duration = elapsed.round() as i64;
    let app2 = app.clone();
    app.db
        .write(move |c| {
            if is_new {
                let meta =
                    json!({"source": "public_page", "llm_configured": configured}).to_string();
                store::insert_chat(
                    c,
                    &store::NewChat {
                        id: &id2,
                        user_id: &uid,
                        genie_id: &gid,
                        started_at: &started_at,
                        transcript: &text,
                        metadata: &meta,
                    },
                )?;
            } else {
                store::update_chat(c, &id2, &text, duration)?;
            }
            if let Some(f) = &figures {
                super::conversation_figures::record_in(c, &app2.prices, &id2, f)?;
            }
            Ok(())
        })
        .await?;
    tracing::debug!(conversation = %id, turns = transcript.len(), "public page chat recorded");
    Ok(Answer {
        conversation_id: id,
        configured: reply.is_some(),
        reply: reply.unwrap_or_else(|| UNAVAILABLE_REPLY.to_string()),
        citations,
    })
}
