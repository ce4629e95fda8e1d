//! The `settings` of a genie. Voice fields without a column (stability, similarity, speed,
//! language) are stored in `settings.conversation_config`; the columns are the truth for the
//! rest and are overlaid onto `settings` when a genie is shown. Also what the voice provider
//! is told about a genie.

use serde_json::{Map, Value, json};

use super::checks::{DEFAULT_LLM, non_empty, object, positive_f, positive_i, range, turn_mode};
use crate::db::genies::GenieRow;
use crate::error::{ApiError, ApiResult};
use crate::voice::{AgentSpec, KbDocRef};

/// RFC 7386 merge: objects merge member by member, `null` removes a member, anything else
/// replaces.
pub fn deep_merge(target: &mut Value, patch: &Value) {
    match (target.as_object_mut(), patch.as_object()) {
        (Some(t), Some(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else if v.is_object() && t.get(k).is_some_and(Value::is_object) {
                    deep_merge(t.get_mut(k).expect("checked"), v);
                } else {
                    t.insert(k.clone(), v.clone());
                }
            }
        }
        _ => *target = patch.clone(),
    }
}

pub fn get_path<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, k| cur.get(k))
}

pub fn set_path(v: &mut Value, path: &[&str], val: Value) {
    let mut cur = v;
    for (i, k) in path.iter().enumerate() {
        if !cur.is_object() {
            *cur = Value::Object(Map::new());
        }
        let m = cur.as_object_mut().expect("object");
        if i == path.len() - 1 {
            m.insert(k.to_string(), val);
            return;
        }
        cur = m.entry(k.to_string()).or_insert_with(|| json!({}));
    }
}

const CC: &str = "conversation_config";
const P_FIRST: [&str; 3] = [CC, "agent", "first_message"];
pub(super) const P_LANG: [&str; 3] = [CC, "agent", "language"];
const P_PROMPT: [&str; 4] = [CC, "agent", "prompt", "prompt"];
const P_LLM: [&str; 4] = [CC, "agent", "prompt", "llm"];
const P_TEMP: [&str; 4] = [CC, "agent", "prompt", "temperature"];
const P_MAXTOK: [&str; 4] = [CC, "agent", "prompt", "max_tokens"];
const P_VOICE: [&str; 3] = [CC, "tts", "voice_id"];
pub(super) const P_STAB: [&str; 3] = [CC, "tts", "stability"];
pub(super) const P_SIM: [&str; 3] = [CC, "tts", "similarity_boost"];
pub(super) const P_SPEED: [&str; 3] = [CC, "tts", "speed"];
const P_TURN_TIMEOUT: [&str; 3] = [CC, "turn", "turn_timeout"];
const P_SILENCE: [&str; 3] = [CC, "turn", "silence_end_call_timeout"];
const P_MODE: [&str; 3] = [CC, "turn", "mode"];
const P_MAXDUR: [&str; 3] = [CC, "conversation", "max_duration_seconds"];

fn fname(path: &[&str]) -> String {
    format!("data.settings.{}", path.join("."))
}

fn opt_str(path: &[&str], v: &Value) -> ApiResult<Option<String>> {
    match v {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        _ => Err(ApiError::validation(format!(
            "{} must be a string",
            fname(path)
        ))),
    }
}

fn opt_num(path: &[&str], v: &Value) -> ApiResult<Option<f64>> {
    match v {
        Value::Null => Ok(None),
        Value::Number(n) => Ok(n.as_f64()),
        _ => Err(ApiError::validation(format!(
            "{} must be a number",
            fname(path)
        ))),
    }
}

fn opt_int(path: &[&str], v: &Value) -> ApiResult<Option<i64>> {
    match v {
        Value::Null => Ok(None),
        Value::Number(n) if n.as_i64().is_some() => Ok(n.as_i64()),
        _ => Err(ApiError::validation(format!(
            "{} must be an integer",
            fname(path)
        ))),
    }
}

/// Merges a `settings` patch into the genie: validates the paths that have a meaning, moves
/// the column-backed ones into their columns, and deep-merges the rest into `settings`.
pub fn apply_settings(g: &mut GenieRow, patch: &Value) -> ApiResult<()> {
    object("data.settings", patch)?;
    let mut patch = patch.clone();
    if let Some(v) = get_path(&patch, &P_FIRST) {
        g.first_message = opt_str(&P_FIRST, v)?;
    }
    if let Some(v) = get_path(&patch, &P_PROMPT) {
        g.system_prompt = opt_str(&P_PROMPT, v)?;
    }
    if let Some(v) = get_path(&patch, &P_LLM) {
        g.llm_model = opt_str(&P_LLM, v)?
            .map(|s| non_empty(&fname(&P_LLM), &s))
            .transpose()?
            .unwrap_or_else(|| DEFAULT_LLM.into());
    }
    if let Some(v) = get_path(&patch, &P_TEMP) {
        g.temperature = opt_num(&P_TEMP, v)?
            .map(|t| range(&fname(&P_TEMP), t, 0.0, 2.0))
            .transpose()?;
    }
    if let Some(v) = get_path(&patch, &P_MAXTOK) {
        g.max_tokens = opt_int(&P_MAXTOK, v)?
            .map(|t| positive_i(&fname(&P_MAXTOK), t))
            .transpose()?;
    }
    if let Some(v) = get_path(&patch, &P_VOICE) {
        g.voice_id = opt_str(&P_VOICE, v)?
            .map(|s| non_empty(&fname(&P_VOICE), &s))
            .transpose()?;
    }
    for p in [&P_STAB[..], &P_SIM[..]] {
        if let Some(v) = get_path(&patch, p) {
            opt_num(p, v)?
                .map(|t| range(&fname(p), t, 0.0, 1.0))
                .transpose()?;
        }
    }
    if let Some(v) = get_path(&patch, &P_SPEED) {
        opt_num(&P_SPEED, v)?
            .map(|t| range(&fname(&P_SPEED), t, 0.5, 2.0))
            .transpose()?;
    }
    if let Some(v) = get_path(&patch, &P_LANG) {
        opt_str(&P_LANG, v)?;
    }
    if let Some(v) = get_path(&patch, &P_TURN_TIMEOUT) {
        g.turn_timeout_seconds = opt_num(&P_TURN_TIMEOUT, v)?
            .map(|t| positive_f(&fname(&P_TURN_TIMEOUT), t))
            .transpose()?;
    }
    if let Some(v) = get_path(&patch, &P_SILENCE) {
        g.silence_end_seconds = opt_num(&P_SILENCE, v)?
            .map(|t| positive_f(&fname(&P_SILENCE), t))
            .transpose()?;
    }
    if let Some(v) = get_path(&patch, &P_MODE) {
        g.turn_mode = opt_str(&P_MODE, v)?
            .map(|m| turn_mode(&fname(&P_MODE), &m))
            .transpose()?
            .unwrap_or_else(|| "silence".into());
    }
    if let Some(v) = get_path(&patch, &P_MAXDUR) {
        g.max_duration_seconds = opt_int(&P_MAXDUR, v)?
            .map(|t| positive_i(&fname(&P_MAXDUR), t))
            .transpose()?;
    }
    // Column-backed members are not kept twice: drop them from the stored copy.
    for p in [
        &P_FIRST[..],
        &P_PROMPT,
        &P_LLM,
        &P_TEMP,
        &P_MAXTOK,
        &P_VOICE,
        &P_TURN_TIMEOUT,
        &P_SILENCE,
        &P_MODE,
        &P_MAXDUR,
    ] {
        remove_path(&mut patch, p);
    }
    deep_merge(&mut g.settings, &patch);
    Ok(())
}

fn remove_path(v: &mut Value, path: &[&str]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = v;
    for k in parents {
        match cur.get_mut(*k) {
            Some(next) => cur = next,
            None => return,
        }
    }
    if let Some(m) = cur.as_object_mut() {
        m.remove(*last);
    }
}

/// `settings` as shown: the stored settings with the column-backed values laid over them.
pub fn effective_settings(g: &GenieRow) -> Value {
    let mut s = if g.settings.is_object() {
        g.settings.clone()
    } else {
        json!({})
    };
    set_path(&mut s, &P_FIRST, json!(g.first_message));
    set_path(&mut s, &P_PROMPT, json!(g.system_prompt));
    set_path(&mut s, &P_LLM, json!(g.llm_model));
    set_path(&mut s, &P_TEMP, json!(g.temperature));
    set_path(&mut s, &P_MAXTOK, json!(g.max_tokens));
    set_path(&mut s, &P_VOICE, json!(g.voice_id));
    set_path(&mut s, &P_TURN_TIMEOUT, json!(g.turn_timeout_seconds));
    set_path(&mut s, &P_SILENCE, json!(g.silence_end_seconds));
    set_path(&mut s, &P_MODE, json!(g.turn_mode));
    set_path(&mut s, &P_MAXDUR, json!(g.max_duration_seconds));
    s
}

/// What the voice provider is told about this genie.
pub fn agent_spec(g: &GenieRow, knowledge_base: Vec<KbDocRef>) -> AgentSpec {
    let num = |p: &[&str]| get_path(&g.settings, p).and_then(Value::as_f64);
    AgentSpec {
        name: g.name.clone(),
        system_prompt: g.system_prompt.clone(),
        first_message: g.first_message.clone(),
        language: get_path(&g.settings, &P_LANG)
            .and_then(Value::as_str)
            .map(str::to_string),
        multilingual: g.multilingual,
        voice_id: g.voice_id.clone(),
        llm_model: g.llm_model.clone(),
        temperature: g.temperature,
        max_tokens: g.max_tokens,
        stability: num(&P_STAB),
        similarity_boost: num(&P_SIM),
        speed: num(&P_SPEED),
        max_duration_seconds: g.max_duration_seconds,
        turn_timeout_seconds: g.turn_timeout_seconds,
        silence_end_seconds: g.silence_end_seconds,
        turn_mode: Some(g.turn_mode.clone()),
        knowledge_base,
        tools: crate::service::genie_tools::parse(&g.tools)
            .iter()
            .map(crate::service::genie_tools::agent_tool)
            .collect(),
    }
}
