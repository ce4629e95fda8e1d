//! Test conversations of a genie: scripted user turns or a user simulated by the LLM, played
//! against one configuration of the genie (a version, the draft, or live) through the same
//! LLM client the page chat uses, then judged by criteria. Runs are asynchronous (the
//! `genie_test.run` job, queued in the transaction that stores the run) except the ones
//! `publish` with `require_tests` makes, which run in the request.

use serde_json::{Value, json};

use crate::db;
use crate::db::genie_tests::{self as store, RunRow, TestRow};
use crate::error::{ApiError, ApiResult, Kind};
use crate::events::Event;
use crate::llm::{ChatRequest, Llm, Message};
use crate::service::genie_versions::{self as versions, Which};
use crate::state::AppState;

/// Job kind that plays one run.
pub const RUN_JOB: &str = "genie_test.run";

pub const CRITERIA: &[&str] = &[
    "contains",
    "not_contains",
    "tool_called",
    "lead_captured",
    "llm_judge",
];
const MAX_TURNS: usize = 50;
const MAX_SIMULATED_TURNS: i64 = 20;
/// Model rounds one user turn may take when the model keeps calling tools.
const TOOL_ROUNDS: usize = 4;
/// What a tool call is answered with during a test: tools are recorded, never executed.
const TOOL_RESULT: &str = r#"{"ok": true, "note": "test run: the tool was not executed"}"#;
const JUDGE_PROMPT: &str = "You judge a conversation between a user and an AI agent against one criterion. \
    Answer with one JSON object and nothing else: {\"passed\": true or false, \"reason\": \"one sentence\"}.";
const SIMULATOR_PROMPT: &str = "You play the USER in a conversation with an AI agent, following the instructions \
    above. Reply with the user's next message only.";

/// A test's definition as given to `create` / `update`, checked.
pub struct Definition {
    pub name: String,
    pub turns: Option<Value>,
    pub simulated_user: Option<Value>,
    pub criteria: Value,
}

/// Checks a test's members; each refusal names the member.
pub fn check(
    name: &str,
    turns: Option<&Value>,
    sim: Option<&Value>,
    criteria: &Value,
) -> ApiResult<Definition> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 200 {
        return Err(ApiError::validation(
            "data.name is required and must be at most 200 characters",
        ));
    }
    let turns = turns.filter(|t| !t.is_null());
    let sim = sim.filter(|s| !s.is_null());
    match (turns, sim) {
        (Some(_), Some(_)) | (None, None) => {
            return Err(ApiError::validation(
                "data: give either turns (scripted user turns) or simulated_user, not both",
            ));
        }
        (Some(t), None) => {
            let list = t
                .as_array()
                .ok_or_else(|| ApiError::validation("data.turns must be an array of strings"))?;
            if list.is_empty() || list.len() > MAX_TURNS {
                return Err(ApiError::validation(format!(
                    "data.turns must have 1 to {MAX_TURNS} turns"
                )));
            }
            for (i, s) in list.iter().enumerate() {
                if !s
                    .as_str()
                    .is_some_and(|s| !s.trim().is_empty() && s.chars().count() <= 2000)
                {
                    return Err(ApiError::validation(format!(
                        "data.turns[{i}] must be a non-empty string of at most 2000 characters"
                    )));
                }
            }
        }
        (None, Some(s)) => {
            if s["prompt"].as_str().is_none_or(|p| p.trim().is_empty()) {
                return Err(ApiError::validation(
                    "data.simulated_user.prompt must be a non-empty string",
                ));
            }
            if !s["max_turns"]
                .as_i64()
                .is_some_and(|n| (1..=MAX_SIMULATED_TURNS).contains(&n))
            {
                return Err(ApiError::validation(format!(
                    "data.simulated_user.max_turns must be an integer from 1 to {MAX_SIMULATED_TURNS}"
                )));
            }
            if s.as_object()
                .is_some_and(|o| o.keys().any(|k| k != "prompt" && k != "max_turns"))
            {
                return Err(ApiError::validation(
                    "data.simulated_user has only prompt and max_turns",
                ));
            }
        }
    }
    let list = criteria
        .as_array()
        .filter(|l| !l.is_empty() && l.len() <= 20)
        .ok_or_else(|| {
            ApiError::validation("data.criteria must be an array of 1 to 20 criteria")
        })?;
    for (i, c) in list.iter().enumerate() {
        let ty = c["type"].as_str().unwrap_or("");
        if !CRITERIA.contains(&ty) {
            return Err(ApiError::validation(format!(
                "data.criteria[{i}].type must be one of: {}",
                CRITERIA.join(", ")
            )));
        }
        let value_ok = c["value"].as_str().is_some_and(|v| !v.trim().is_empty());
        let no_value_ok = ty == "lead_captured" && c.get("value").is_none_or(Value::is_null);
        if !(value_ok || no_value_ok) {
            return Err(ApiError::validation(format!(
                "data.criteria[{i}].value must be a non-empty string"
            )));
        }
    }
    Ok(Definition {
        name: name.to_string(),
        turns: turns.cloned(),
        simulated_user: sim.cloned(),
        criteria: criteria.clone(),
    })
}

/// `{..test}` as answered.
pub fn view(t: &TestRow) -> Value {
    json!(t)
}

/// A run as answered: everything but the configuration it was played against.
pub fn run_view(r: &RunRow) -> Value {
    json!(r)
}

/// Which configuration a run plays and how it is labelled: the named version, else the draft
/// if there is one, else live.
fn target(
    c: &crate::db::Connection,
    genie_id: &str,
    which: Option<Which>,
) -> ApiResult<(String, Value)> {
    let which = match which {
        Some(w) => Some(w),
        None if db::genie_versions::draft(c, genie_id)?.is_some() => Some(Which::Draft),
        None => None,
    };
    match which {
        Some(w) => Ok((w.label(), versions::config(c, genie_id, w)?)),
        None => {
            let cfg = versions::current(c, genie_id)?.ok_or_else(ApiError::agent_not_found)?;
            Ok(("live".into(), cfg))
        }
    }
}

fn need_llm(app: &AppState) -> ApiResult<&Llm> {
    app.llm.as_ref().ok_or_else(|| {
        ApiError::validation("test runs need a language model: the operator sets --llm-base-url")
    })
}

/// Queues a run of each test (same configuration for all), one job each, in one
/// transaction. Returns the queued runs.
pub async fn queue(
    app: &AppState,
    by: &str,
    genie_id: &str,
    test_ids: Vec<String>,
    which: Option<Which>,
) -> ApiResult<Vec<Value>> {
    need_llm(app)?;
    let (gid, by) = (genie_id.to_string(), by.to_string());
    let runs = app
        .db
        .write(move |c| {
            let (label, cfg) = target(c, &gid, which)?;
            let mut out = Vec::new();
            for t in test_ids {
                let run = RunRow {
                    id: db::new_id(),
                    test_id: t,
                    genie_id: gid.clone(),
                    user_id: by.clone(),
                    target: label.clone(),
                    config: cfg.clone(),
                    status: "queued".into(),
                    passed: None,
                    transcript: json!([]),
                    results: json!([]),
                    tokens: 0,
                    error: None,
                    created_at: db::now(),
                    finished_at: None,
                };
                store::insert_run(c, &run)?;
                crate::jobs::enqueue(
                    c,
                    RUN_JOB,
                    &json!({"run_id": run.id}),
                    std::time::Duration::ZERO,
                    Some(3),
                )?;
                out.push(run_view(&run));
            }
            Ok(out)
        })
        .await?;
    app.wake_jobs();
    Ok(runs)
}

/// The `genie_test.run` job: plays the run and stores what it found. A failure of the LLM is
/// the run's `error`, not the job's: a test run is not retried behind the user's back.
pub async fn run_job(app: &AppState, payload: &Value) -> ApiResult<()> {
    let id = payload["run_id"]
        .as_str()
        .ok_or_else(|| ApiError::validation("genie_test.run payload without run_id"))?
        .to_string();
    let i2 = id.clone();
    let found = app
        .db
        .write(move |c| {
            let Some(run) = store::get_run(c, &i2)? else {
                return Ok(None);
            };
            let Some(test) = store::get(c, &run.test_id)? else {
                return Ok(None);
            };
            store::set_status(c, &i2, "running")?;
            Ok(Some((run, test)))
        })
        .await?;
    let Some((run, test)) = found else {
        return Ok(());
    };
    play_and_store(app, &run, &test).await?;
    Ok(())
}

/// Plays `run` and stores its outcome; returns whether it passed. Emits
/// `genie_test.completed` to the genie's owner.
async fn play_and_store(app: &AppState, run: &RunRow, test: &TestRow) -> ApiResult<bool> {
    let outcome = match app.llm.as_ref() {
        Some(llm) => play(llm, &run.config, test).await,
        None => Outcome::error("no language model is configured (--llm-base-url)".into()),
    };
    let status = match (&outcome.error, outcome.passed) {
        (Some(_), _) => "error",
        (None, true) => "passed",
        (None, false) => "failed",
    };
    let (rid, o) = (run.id.clone(), outcome.clone());
    let (tid, tname) = (test.id.clone(), test.name.clone());
    let finished = app
        .db
        .write(move |c| {
            store::finish(
                c,
                &rid,
                &store::Finish {
                    status,
                    passed: Some(o.passed && o.error.is_none()),
                    transcript: &o.transcript,
                    results: &o.results,
                    tokens: o.tokens,
                    error: o.error.as_deref(),
                    at: &db::now(),
                },
            )?;
            let owner = db::genies::find(c, &rid_genie(c, &rid)?)?.map(|g| g.user_id);
            Ok(match (store::get_run(c, &rid)?, owner) {
                (Some(r), Some(owner)) => Some(crate::events::record(
                    c,
                    Event::new(
                        "genie_test.completed",
                        &owner,
                        json!({"run": run_view(&r), "test": {"id": tid, "name": tname}}),
                    ),
                )?),
                _ => None,
            })
        })
        .await?;
    app.bus.emit_all(finished);
    Ok(outcome.passed && outcome.error.is_none())
}

fn rid_genie(c: &crate::db::Connection, run_id: &str) -> ApiResult<String> {
    store::get_run(c, run_id)?
        .map(|r| r.genie_id)
        .ok_or_else(|| ApiError::new(Kind::NotFound, "run not found"))
}

/// Runs every test of the genie against `config` (the draft `publish` is about to make
/// live), in the request; returns the names of the tests that did not pass.
pub async fn run_for_publish(
    app: &AppState,
    by: &str,
    genie_id: &str,
    config: &Value,
) -> ApiResult<Vec<String>> {
    let gid = genie_id.to_string();
    let tests = app.db.read(move |c| Ok(store::of_genie(c, &gid)?)).await?;
    if tests.is_empty() {
        return Ok(Vec::new());
    }
    need_llm(app)?;
    let mut failed = Vec::new();
    for t in tests {
        let run = RunRow {
            id: db::new_id(),
            test_id: t.id.clone(),
            genie_id: genie_id.to_string(),
            user_id: by.to_string(),
            target: "draft".into(),
            config: config.clone(),
            status: "running".into(),
            passed: None,
            transcript: json!([]),
            results: json!([]),
            tokens: 0,
            error: None,
            created_at: db::now(),
            finished_at: None,
        };
        let r2 = run.clone();
        app.db
            .write(move |c| Ok(store::insert_run(c, &r2)?))
            .await?;
        if !play_and_store(app, &run, &t).await? {
            failed.push(t.name.clone());
        }
    }
    Ok(failed)
}

// ---- playing a test --------------------------------------------------------------------

#[derive(Debug, Clone, Default)]
struct Outcome {
    transcript: Value,
    results: Value,
    passed: bool,
    tokens: i64,
    error: Option<String>,
}

impl Outcome {
    fn error(e: String) -> Outcome {
        Outcome {
            transcript: json!([]),
            results: json!([]),
            error: Some(e),
            ..Outcome::default()
        }
    }
}

/// The version's tools as function definitions (when its configuration has a `tools`
/// array), and the function name of each by the tool's `type`.
fn tools_of(config: &Value) -> Vec<(String, String, Value)> {
    config["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            let ty = t["type"].as_str().unwrap_or("webhook").to_string();
            let name = t["name"].as_str().map(str::to_string).unwrap_or_else(|| ty.clone());
            let def = json!({"type": "function", "function": {
                "name": name,
                "description": t["description"].as_str().unwrap_or(&ty),
                "parameters": if t["parameters"].is_object() { t["parameters"].clone() } else { json!({"type": "object", "properties": {}}) },
            }});
            (name, ty, def)
        })
        .collect()
}

struct Chat<'a> {
    llm: &'a Llm,
    tokens: i64,
}

impl Chat<'_> {
    async fn call(&mut self, req: &ChatRequest) -> Result<Message, String> {
        let out = self.llm.chat(req).await?;
        self.tokens += out.usage.total_tokens;
        Ok(out.message)
    }
}

async fn play(llm: &Llm, config: &Value, test: &TestRow) -> Outcome {
    let mut chat = Chat { llm, tokens: 0 };
    let tools = tools_of(config);
    let defs: Vec<Value> = tools.iter().map(|t| t.2.clone()).collect();
    let model = config["llm_model"]
        .as_str()
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| llm.default_model.clone());
    let system = config["system_prompt"]
        .as_str()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or("You are a helpful assistant.")
        .to_string();
    let mut messages = vec![Message::new("system", system)];
    let mut transcript: Vec<Value> = Vec::new();
    let mut calls: Vec<String> = Vec::new();
    if let Some(first) = config["first_message"]
        .as_str()
        .filter(|m| !m.trim().is_empty())
    {
        transcript.push(json!({"role": "agent", "message": first}));
        messages.push(Message::new("assistant", first));
    }
    let scripted: Vec<String> = test
        .turns
        .as_ref()
        .and_then(Value::as_array)
        .map(|l| {
            l.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let rounds = match &test.simulated_user {
        Some(s) => s["max_turns"].as_i64().unwrap_or(1) as usize,
        None => scripted.len(),
    };
    for i in 0..rounds {
        let user = match &test.simulated_user {
            None => scripted.get(i).cloned().unwrap_or_default(),
            Some(s) => match simulate(&mut chat, s, &transcript).await {
                Ok(u) => u,
                Err(e) => return failed_with(e, transcript, chat.tokens),
            },
        };
        transcript.push(json!({"role": "user", "message": user}));
        messages.push(Message::new("user", user));
        let mut answered = false;
        for _ in 0..TOOL_ROUNDS {
            let req = ChatRequest {
                model: model.clone(),
                messages: messages.clone(),
                tools: (!defs.is_empty()).then(|| defs.clone()),
                temperature: config["temperature"].as_f64(),
                max_tokens: config["max_tokens"].as_i64(),
            };
            let msg = match chat.call(&req).await {
                Ok(m) => m,
                Err(e) => return failed_with(e, transcript, chat.tokens),
            };
            let tool_calls = msg.tool_calls.clone().unwrap_or_default();
            if !tool_calls.is_empty() {
                messages.push(msg.clone());
                for (k, call) in tool_calls.iter().enumerate() {
                    let id = if call.id.is_empty() {
                        format!("call_{i}_{k}")
                    } else {
                        call.id.clone()
                    };
                    calls.push(call.function.name.clone());
                    transcript.push(json!({"role": "tool_call", "name": call.function.name, "arguments": call.function.arguments}));
                    messages.push(Message::tool_result(&id, TOOL_RESULT));
                }
                continue;
            }
            let text = msg.content.unwrap_or_default().trim().to_string();
            transcript.push(json!({"role": "agent", "message": text}));
            messages.push(Message::new("assistant", text));
            answered = true;
            break;
        }
        if !answered {
            return failed_with(
                format!("the model was still calling tools after {TOOL_ROUNDS} rounds"),
                transcript,
                chat.tokens,
            );
        }
    }
    let mut results = Vec::new();
    let criteria = test.criteria.as_array().cloned().unwrap_or_default();
    for c in &criteria {
        let (passed, reason) = judge_one(&mut chat, c, &transcript, &tools, &calls).await;
        results.push(
            json!({"type": c["type"], "value": c["value"], "passed": passed, "reason": reason}),
        );
    }
    let passed = results.iter().all(|r| r["passed"] == json!(true));
    Outcome {
        transcript: Value::Array(transcript),
        results: Value::Array(results),
        passed,
        tokens: chat.tokens,
        error: None,
    }
}

fn failed_with(e: String, transcript: Vec<Value>, tokens: i64) -> Outcome {
    Outcome {
        transcript: Value::Array(transcript),
        results: json!([]),
        passed: false,
        tokens,
        error: Some(format!("the LLM call failed: {e}")),
    }
}

/// The simulated user's next message: the LLM plays the user, with the roles of the
/// conversation so far swapped.
async fn simulate(
    chat: &mut Chat<'_>,
    sim: &Value,
    transcript: &[Value],
) -> Result<String, String> {
    let prompt = format!(
        "{}\n\n{SIMULATOR_PROMPT}",
        sim["prompt"].as_str().unwrap_or("")
    );
    let mut messages = vec![Message::new("system", prompt)];
    for t in transcript {
        match t["role"].as_str() {
            Some("agent") => {
                messages.push(Message::new("user", t["message"].as_str().unwrap_or("")))
            }
            Some("user") => messages.push(Message::new(
                "assistant",
                t["message"].as_str().unwrap_or(""),
            )),
            _ => {}
        }
    }
    if messages.len() == 1 {
        messages.push(Message::new(
            "user",
            "(the agent is listening; start the conversation)",
        ));
    }
    let req = ChatRequest {
        model: chat.llm.default_model.clone(),
        messages,
        tools: None,
        temperature: None,
        max_tokens: None,
    };
    let m = chat.call(&req).await?;
    let text = m.content.unwrap_or_default().trim().to_string();
    if text.is_empty() {
        return Err("the simulated user sent an empty message".into());
    }
    Ok(text)
}

fn agent_text(transcript: &[Value]) -> Vec<String> {
    transcript
        .iter()
        .filter(|t| t["role"] == "agent")
        .filter_map(|t| t["message"].as_str().map(str::to_lowercase))
        .collect()
}

async fn judge_one(
    chat: &mut Chat<'_>,
    c: &Value,
    transcript: &[Value],
    tools: &[(String, String, Value)],
    calls: &[String],
) -> (bool, String) {
    let value = c["value"].as_str().unwrap_or("").to_string();
    match c["type"].as_str().unwrap_or("") {
        "contains" => {
            let hit = agent_text(transcript)
                .iter()
                .any(|t| t.contains(&value.to_lowercase()));
            let reason = if hit {
                format!("an agent turn contains '{value}'")
            } else {
                format!("no agent turn contains '{value}'")
            };
            (hit, reason)
        }
        "not_contains" => {
            let hit = agent_text(transcript)
                .iter()
                .any(|t| t.contains(&value.to_lowercase()));
            let reason = if hit {
                format!("an agent turn contains '{value}'")
            } else {
                format!("no agent turn contains '{value}'")
            };
            (!hit, reason)
        }
        "tool_called" => {
            if !tools.iter().any(|t| t.0 == value) {
                return (false, format!("the genie has no tool named '{value}'"));
            }
            let n = calls.iter().filter(|c| **c == value).count();
            if n > 0 {
                (true, format!("'{value}' was called {n} time(s)"))
            } else {
                (false, format!("'{value}' was never called"))
            }
        }
        "lead_captured" => {
            let Some(tool) = tools.iter().find(|t| t.1 == "capture_lead") else {
                return (
                    false,
                    "the genie has no capture_lead tool, so it cannot capture a lead".into(),
                );
            };
            if calls.contains(&tool.0) {
                (true, format!("'{}' was called", tool.0))
            } else {
                (false, format!("'{}' was never called", tool.0))
            }
        }
        _ => judge(chat, &value, transcript).await,
    }
}

/// `llm_judge`: the LLM reads the transcript and the criterion and answers
/// `{passed, reason}`; an answer that is not that is a failed criterion saying so.
async fn judge(chat: &mut Chat<'_>, criterion: &str, transcript: &[Value]) -> (bool, String) {
    let lines: Vec<String> = transcript
        .iter()
        .map(|t| match t["role"].as_str() {
            Some("tool_call") => {
                format!("(agent called tool {})", t["name"].as_str().unwrap_or(""))
            }
            Some(r) => format!("{r}: {}", t["message"].as_str().unwrap_or("")),
            None => String::new(),
        })
        .collect();
    let req = ChatRequest {
        model: chat.llm.default_model.clone(),
        messages: vec![
            Message::new("system", JUDGE_PROMPT),
            Message::new(
                "user",
                format!(
                    "Criterion: {criterion}\n\nTranscript:\n{}",
                    lines.join("\n")
                ),
            ),
        ],
        tools: None,
        temperature: Some(0.0),
        max_tokens: None,
    };
    let text = match chat.call(&req).await {
        Ok(m) => m.content.unwrap_or_default(),
        Err(e) => return (false, format!("the judge could not be asked: {e}")),
    };
    let json = text
        .find('{')
        .zip(text.rfind('}'))
        .and_then(|(a, b)| serde_json::from_str::<Value>(&text[a..=b]).ok());
    match json {
        Some(v) if v["passed"].is_boolean() => (
            v["passed"].as_bool().unwrap_or(false),
            v["reason"].as_str().unwrap_or("").to_string(),
        ),
        _ => (
            false,
            format!(
                "the judge's answer was not {{passed, reason}}: {}",
                text.chars().take(200).collect::<String>()
            ),
        ),
    }
}

/// Reads a test the caller may read (`manage`: may manage) through its genie.
pub async fn load(
    app: &AppState,
    user_id: &str,
    role: db::users::Role,
    id: &str,
    manage: bool,
) -> ApiResult<TestRow> {
    let (uid, id) = (user_id.to_string(), id.to_string());
    app.db
        .read(move |c| {
            let t = store::get(c, &id)?.ok_or_else(|| ApiError::not_found("genie test"))?;
            let ok = if manage {
                db::genies::can_manage_genie(c, &uid, role, &t.genie_id)?
            } else {
                db::genies::can_read_genie(c, &uid, role, &t.genie_id)?
            };
            if !ok {
                return Err(ApiError::not_found("genie test"));
            }
            Ok(t)
        })
        .await
}
