//! One run of a worker genie: the LLM tool loop. The model gets the genie's soul prompt, the
//! trigger and its input, and the tool schemas; every model turn and every tool call (with
//! arguments and result) is a step saved to the run as it happens. The run ends when the
//! model answers without tool calls (`succeeded`, its text is the output), when it fails,
//! when `max_steps` model turns were used, or at the per-run timeout.

use std::time::Duration;

use serde_json::{Value, json};

use super::credentials;
use super::tools::{self, Opened, ToolCtx};
use crate::db::{self, workers::Run};
use crate::events::Event;
use crate::llm::{ChatRequest, Message, Usage};
use crate::state::AppState;

pub const NO_LLM: &str = "no LLM endpoint is configured: start genied with --llm-base-url <OpenAI-compatible base URL, e.g. http://127.0.0.1:11434/v1> (and --llm-api-key if the endpoint needs one), or set GENIED_LLM_BASE_URL";

/// Largest tool result (characters) passed to the model and kept in the run's steps.
const RESULT_MAX_CHARS: usize = 16 * 1024;

/// Runs a claimed (`running`) run to its end and records the outcome.
pub async fn execute(app: &AppState, run: Run) {
    let timeout = Duration::from_secs(app.config.worker_run_timeout_seconds.max(1));
    let mut state = Progress {
        steps: Vec::new(),
        usage: Usage::default(),
    };
    let outcome = match tokio::time::timeout(timeout, agent_loop(app, &run, &mut state)).await {
        Ok(r) => r,
        Err(_) => Err(format!(
            "timed out: the run took longer than {} s (--worker-run-timeout-seconds)",
            timeout.as_secs()
        )),
    };
    let (status, output, error) = match outcome {
        Ok(out) => ("succeeded", Some(out), None),
        Err(e) => ("failed", None, Some(e)),
    };
    crate::telemetry::prom::worker_run(status);
    let (id, steps, usage) = (run.id.clone(), json!(state.steps), state.usage.clone());
    let done = app
        .db
        .write(move |c| {
            db::workers::save_progress(c, &id, &steps, &usage)?;
            let Some(rec) =
                db::workers::finish_run(c, &id, status, output.as_deref(), error.as_deref())?
            else {
                return Ok(None);
            };
            let kind = if status == "succeeded" {
                "worker_run.succeeded"
            } else {
                "worker_run.failed"
            };
            let mut data = json!(rec);
            data.as_object_mut().map(|o| o.remove("steps"));
            Ok(Some(crate::events::record(
                c,
                Event::new(kind, &rec.user_id, data),
            )?))
        })
        .await;
    match done {
        Ok(Some(finished)) => app.bus.emit(finished),
        Ok(None) => {} // cancelled meanwhile: it keeps that state
        Err(e) => tracing::error!(run = %run.id, error = %e, "recording the end of a worker run"),
    }
}

struct Progress {
    steps: Vec<Value>,
    usage: Usage,
}

async fn save(app: &AppState, run_id: &str, p: &Progress) {
    let (id, steps, usage) = (run_id.to_string(), json!(p.steps), p.usage.clone());
    if let Err(e) = app
        .db
        .write(move |c| Ok(db::workers::save_progress(c, &id, &steps, &usage)?))
        .await
    {
        tracing::error!(run = %run_id, error = %e, "saving worker run steps");
    }
}

fn clip(s: String) -> String {
    if s.chars().count() <= RESULT_MAX_CHARS {
        return s;
    }
    let mut t: String = s.chars().take(RESULT_MAX_CHARS).collect();
    t.push_str("…[truncated]");
    t
}

async fn agent_loop(app: &AppState, run: &Run, p: &mut Progress) -> Result<String, String> {
    let llm = app.llm.as_ref().ok_or(NO_LLM)?;
    let gid = run.worker_genie_id.clone();
    let genie = app
        .db
        .read(move |c| Ok(db::workers::get_genie_any(c, &gid)?))
        .await
        .map_err(|e| e.message)?
        .ok_or("the worker genie no longer exists")?;
    let credentials = open_credentials(app, &genie).await?;
    let ctx = ToolCtx {
        app: app.clone(),
        genie: genie.clone(),
        run_id: run.id.clone(),
        credentials,
    };
    let model = genie
        .llm_model
        .clone()
        .unwrap_or_else(|| llm.default_model.clone());
    let system = format!(
        "{}\n\n---\nYou are the worker genie \"{}\", running in the background for your owner (run {}, trigger: {}). \
         Use the tools to act; when you are done, answer with a short report of what you did, without calling a tool.",
        genie.soul_prompt, genie.name, run.id, run.trigger
    );
    let user = format!(
        "Run started at {} by trigger '{}'. Input:\n{}",
        run.started_at.as_deref().unwrap_or(""),
        run.trigger,
        serde_json::to_string_pretty(&run.input).unwrap_or_default()
    );
    let mut messages = vec![Message::new("system", system), Message::new("user", user)];
    let schemas = tools::schemas();
    for turn in 1..=genie.max_steps {
        let req = ChatRequest {
            model: model.clone(),
            messages: messages.clone(),
            tools: Some(schemas.clone()),
            temperature: None,
            max_tokens: None,
        };
        let started = std::time::Instant::now();
        let resp = llm.chat(&req).await?;
        p.usage.prompt_tokens += resp.usage.prompt_tokens;
        p.usage.completion_tokens += resp.usage.completion_tokens;
        p.usage.total_tokens += resp.usage.total_tokens;
        let mut message = resp.message.clone();
        // Servers that omit tool call ids get generated ones, so results can be matched.
        if let Some(calls) = message.tool_calls.as_mut() {
            for (k, c) in calls.iter_mut().enumerate() {
                if c.id.is_empty() {
                    c.id = format!("call_{turn}_{k}");
                }
            }
        }
        let calls = message.tool_calls.clone().unwrap_or_default();
        p.steps.push(json!({
            "type": "llm",
            "turn": turn,
            "at": db::now(),
            "model": model,
            "duration_ms": started.elapsed().as_millis() as u64,
            "finish_reason": resp.finish_reason,
            "content": resp.message.content,
            "tool_calls": calls.iter().map(|c| json!({"id": c.id, "name": c.function.name, "arguments": c.function.arguments})).collect::<Vec<_>>(),
            "usage": resp.usage,
        }));
        if calls.is_empty() {
            save(app, &run.id, p).await;
            return Ok(resp.message.content.unwrap_or_default());
        }
        let mut assistant = message;
        assistant.role = "assistant".into();
        messages.push(assistant);
        for call in calls {
            let started = std::time::Instant::now();
            let raw = if call.function.arguments.trim().is_empty() {
                "{}"
            } else {
                call.function.arguments.as_str()
            };
            let args: Result<Value, String> =
                serde_json::from_str(raw).map_err(|e| format!("arguments are not valid JSON: {e}"));
            let result = match &args {
                Ok(a) => tools::call(&ctx, &call.function.name, a).await,
                Err(e) => Err(e.clone()),
            };
            let ok = result.is_ok();
            let result = result.unwrap_or_else(|e| json!({"error": e}));
            let text = clip(tools::redact(&result.to_string(), &ctx.credentials));
            let stored: Value = serde_json::from_str(&text).unwrap_or(Value::String(text.clone()));
            p.steps.push(json!({
                "type": "tool",
                "turn": turn,
                "at": db::now(),
                "tool": call.function.name,
                "call_id": call.id,
                "arguments": args.clone().unwrap_or(Value::String(call.function.arguments.clone())),
                "ok": ok,
                "duration_ms": started.elapsed().as_millis() as u64,
                "result": stored,
            }));
            messages.push(Message::tool_result(&call.id, text));
        }
        save(app, &run.id, p).await;
    }
    Err(format!(
        "step limit reached: the model was still calling tools after {} turns (max_steps)",
        genie.max_steps
    ))
}

async fn open_credentials(
    app: &AppState,
    genie: &db::workers::WorkerGenie,
) -> Result<Vec<Opened>, String> {
    let (uid, names) = (genie.user_id.clone(), genie.credential_refs.clone());
    let sealed = app
        .db
        .read(move |c| {
            let mut out = Vec::new();
            for n in &names {
                out.push((n.clone(), db::workers::credential_by_name(c, &uid, n)?));
            }
            Ok(out)
        })
        .await
        .map_err(|e| e.message)?;
    let mut opened = Vec::new();
    for (name, s) in sealed {
        let s = s.ok_or_else(|| {
            format!("credential '{name}' named in credential_refs no longer exists")
        })?;
        let secret = credentials::reveal(app, &s).ok_or_else(|| {
            format!("credential '{name}' cannot be decrypted with the current master key")
        })?;
        opened.push(Opened {
            meta: s.meta,
            secret,
        });
    }
    Ok(opened)
}
