//! Genie versions: what "what a genie says and does" is (`config_of`, the one list of it),
//! recording a version in the transaction of the change, diffs, drafts, the traffic split
//! of new public-page conversations, and the per-version figures. The live configuration is
//! always the newest version: update, publish and rollback each append one.

use crate::db::sql::Connection;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::db;
use crate::db::genie_versions as store;
use crate::db::genies::{self as repo, AttachedDoc, GenieRow};
use crate::error::{ApiError, ApiResult, Kind};
use crate::state::AppState;

/// Members of `settings` that are configuration (voice fields without a column).
const LANGUAGE: &str = "/conversation_config/agent/language";
const STABILITY: &str = "/conversation_config/tts/stability";
const SIMILARITY: &str = "/conversation_config/tts/similarity_boost";
const SPEED: &str = "/conversation_config/tts/speed";
const SETTINGS_CONFIG: [(&str, &str); 4] = [
    ("language", LANGUAGE),
    ("stability", STABILITY),
    ("similarity_boost", SIMILARITY),
    ("speed", SPEED),
];

/// A version's configuration: everything the genie says and does. Adding a genie field
/// that changes what the agent does is one line here and one in [`apply_config`].
pub fn config_of(g: &GenieRow, docs: &[AttachedDoc]) -> Value {
    let mut c = json!({
        "system_prompt": g.system_prompt,
        "first_message": g.first_message,
        "voice_id": g.voice_id,
        "multilingual": g.multilingual,
        "llm_model": g.llm_model,
        "temperature": g.temperature,
        "max_tokens": g.max_tokens,
        "max_duration_seconds": g.max_duration_seconds,
        "turn_timeout_seconds": g.turn_timeout_seconds,
        "silence_end_seconds": g.silence_end_seconds,
        "turn_mode": g.turn_mode,
        "tools": g.tools,
        "documents": docs.iter().map(|d| json!({"id": d.id, "name": d.name})).collect::<Vec<_>>(),
    });
    for (name, ptr) in SETTINGS_CONFIG {
        c[name] = g.settings.pointer(ptr).cloned().unwrap_or(Value::Null);
    }
    c
}

/// The document ids a configuration names.
pub fn documents_of(config: &Value) -> Vec<String> {
    config["documents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["id"].as_str().map(str::to_string))
        .collect()
}

fn str_of(v: &Value) -> Option<String> {
    v.as_str().map(str::to_string)
}

/// Lays a configuration over a genie row (the inverse of [`config_of`], documents aside).
/// Members the configuration lacks are left as they are.
pub fn apply_config(g: &mut GenieRow, c: &Value) {
    let has = |k: &str| c.get(k).is_some();
    if has("system_prompt") {
        g.system_prompt = str_of(&c["system_prompt"]);
    }
    if has("first_message") {
        g.first_message = str_of(&c["first_message"]);
    }
    if has("voice_id") {
        g.voice_id = str_of(&c["voice_id"]);
    }
    if let Some(b) = c["multilingual"].as_bool() {
        g.multilingual = b;
    }
    if let Some(m) = c["llm_model"].as_str() {
        g.llm_model = m.to_string();
    }
    if has("temperature") {
        g.temperature = c["temperature"].as_f64();
    }
    if has("max_tokens") {
        g.max_tokens = c["max_tokens"].as_i64();
    }
    if c["tools"].is_array() {
        g.tools = c["tools"].clone();
    }
    if has("max_duration_seconds") {
        g.max_duration_seconds = c["max_duration_seconds"].as_i64();
    }
    if has("turn_timeout_seconds") {
        g.turn_timeout_seconds = c["turn_timeout_seconds"].as_f64();
    }
    if has("silence_end_seconds") {
        g.silence_end_seconds = c["silence_end_seconds"].as_f64();
    }
    if let Some(m) = c["turn_mode"].as_str() {
        g.turn_mode = m.to_string();
    }
    for (name, ptr) in SETTINGS_CONFIG {
        if let Some(v) = c.get(name) {
            set_pointer(&mut g.settings, ptr, v.clone());
        }
    }
}

/// Sets `ptr` in `v` (creating objects on the way); `null` removes it and the objects it
/// leaves empty, so that "never set" and "cleared" compare equal.
fn set_pointer(v: &mut Value, ptr: &str, val: Value) {
    let keys: Vec<&str> = ptr.trim_start_matches('/').split('/').collect();
    if !v.is_object() {
        *v = json!({});
    }
    fn go(cur: &mut Value, keys: &[&str], val: Value) {
        let Some(m) = cur.as_object_mut() else { return };
        if keys.len() == 1 {
            if val.is_null() {
                m.remove(keys[0]);
            } else {
                m.insert(keys[0].to_string(), val);
            }
            return;
        }
        if val.is_null() && !m.contains_key(keys[0]) {
            return;
        }
        let next = m.entry(keys[0].to_string()).or_insert_with(|| json!({}));
        if !next.is_object() {
            *next = json!({});
        }
        go(next, &keys[1..], val);
        if next.as_object().is_some_and(Map::is_empty) {
            m.remove(keys[0]);
        }
    }
    go(v, &keys, val);
}

/// The row with its configuration blanked: two rows whose projections are equal differ in
/// configuration only (drafts hold nothing else).
fn non_config(g: &GenieRow) -> GenieRow {
    let mut p = g.clone();
    let blank: Value = config_of(g, &[])
        .as_object()
        .map(|m| {
            m.keys()
                .filter(|k| *k != "documents")
                .map(|k| (k.clone(), Value::Null))
                .collect::<Map<_, _>>()
        })
        .map(Value::Object)
        .unwrap_or_default();
    apply_config(&mut p, &blank);
    p.llm_model.clear();
    p.multilingual = false;
    p.turn_mode.clear();
    p.updated_at.clear();
    p
}

/// Field-by-field changes from `a` to `b`: objects are walked member by member (paths
/// joined with `.`), anything else is compared whole.
pub fn diff(a: &Value, b: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    fn walk(path: &str, a: &Value, b: &Value, out: &mut Vec<Value>) {
        match (a.as_object(), b.as_object()) {
            (Some(x), Some(y)) => {
                let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
                keys.sort();
                keys.dedup();
                for k in keys {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    walk(
                        &p,
                        x.get(k).unwrap_or(&Value::Null),
                        y.get(k).unwrap_or(&Value::Null),
                        out,
                    );
                }
            }
            _ if a != b => out.push(json!({"path": path, "from": a, "to": b})),
            _ => {}
        }
    }
    walk("", a, b, &mut out);
    out
}

/// "changed system_prompt, temperature": what a version's summary says when no note was
/// given.
fn describe(before: &Value, after: &Value) -> String {
    let paths: Vec<String> = diff(before, after)
        .iter()
        .filter_map(|c| c["path"].as_str().map(str::to_string))
        .collect();
    if paths.is_empty() {
        "no configuration change".into()
    } else {
        format!("changed {}", paths.join(", "))
    }
}

/// Records the genie's configuration after a change, in the caller's transaction: a new
/// version when it differs from the newest one (or `always`). A genie from before versions
/// existed first gets its configuration before the change (`before`) as version 1, so the
/// first change can be rolled back. Returns the new version, if one was recorded.
pub fn record(
    c: &Connection,
    genie_id: &str,
    before: Option<&Value>,
    after: &Value,
    by: Option<&str>,
    note: Option<&str>,
    always: bool,
) -> ApiResult<Option<i64>> {
    let at = db::now();
    // Its text kept for the insert below, which stores the new version as an edit of it.
    let newest = store::latest_text(c, genie_id)?;
    let latest = match &newest {
        Some((_, text)) => Some(store::parse(text)?),
        None => match before {
            Some(b) if b != after => {
                store::insert(c, genie_id, b, by, "configuration before versioning", &at)?;
                Some(b.clone())
            }
            _ => None,
        },
    };
    if !always && latest.as_ref() == Some(after) {
        return Ok(None);
    }
    let summary = match (note, &latest) {
        (Some(n), _) if !n.trim().is_empty() => n.trim().to_string(),
        (_, None) => "created".to_string(),
        (_, Some(l)) => describe(l, after),
    };
    let version = match &newest {
        Some((v, text)) => store::insert_after(c, genie_id, (*v, text), after, by, &summary, &at)?,
        None => store::insert(c, genie_id, after, by, &summary, &at)?,
    };
    Ok(Some(version))
}

/// The genie's configuration as stored now (inside a transaction), for [`record`]'s
/// `before`.
pub fn current(c: &Connection, genie_id: &str) -> ApiResult<Option<Value>> {
    let Some(g) = repo::find(c, genie_id)? else {
        return Ok(None);
    };
    let docs = repo::documents(c, genie_id)?;
    Ok(Some(config_of(&g, &docs)))
}

/// Records a version if the genie's stored configuration differs from its newest version
/// (after a change made in this transaction outside `service::genies::apply`, e.g. documents
/// attached); `before` is its configuration before that change.
pub fn record_current(
    c: &Connection,
    genie_id: &str,
    before: Option<&Value>,
    by: Option<&str>,
) -> ApiResult<Option<i64>> {
    match current(c, genie_id)? {
        Some(after) => record(c, genie_id, before, &after, by, None, false),
        None => Ok(None),
    }
}

// ---- reading versions ------------------------------------------------------------------

/// A version named in a request: a number, or `"draft"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    Number(i64),
    Draft,
}

impl Which {
    pub fn parse(v: &Value, field: &str) -> ApiResult<Which> {
        match v {
            Value::Number(n) if n.as_i64().is_some_and(|n| n > 0) => {
                Ok(Which::Number(n.as_i64().expect("checked")))
            }
            Value::String(s) if s == "draft" => Ok(Which::Draft),
            Value::String(s) if s.parse::<i64>().is_ok_and(|n| n > 0) => {
                Ok(Which::Number(s.parse().expect("checked")))
            }
            _ => Err(ApiError::validation(format!(
                "{field} must be a version number (1, 2, ...) or \"draft\""
            ))),
        }
    }
    pub fn label(self) -> String {
        match self {
            Which::Number(n) => n.to_string(),
            Which::Draft => "draft".into(),
        }
    }
}

/// The newest version number of a genie, if it has any.
pub fn live_version(c: &Connection, genie_id: &str) -> ApiResult<Option<i64>> {
    Ok(store::latest_version(c, genie_id)?)
}

/// `{version, created_at, created_by, summary, live, config}` of one version, or the draft
/// (`version: "draft"`). 404 `NOT_FOUND` when there is none.
pub fn read(c: &Connection, genie_id: &str, which: Which) -> ApiResult<Value> {
    match which {
        Which::Number(n) => {
            let (m, cfg) = store::get(c, genie_id, n)?
                .ok_or_else(|| ApiError::new(Kind::NotFound, format!("version {n} not found")))?;
            let live = live_version(c, genie_id)? == Some(n);
            Ok(json!({
                "version": m.version, "created_at": m.created_at, "created_by": m.created_by,
                "summary": m.summary, "live": live, "config": cfg,
            }))
        }
        Which::Draft => {
            let d = store::draft(c, genie_id)?
                .ok_or_else(|| ApiError::new(Kind::NotFound, "this genie has no draft"))?;
            let mut cfg = d.config;
            // A draft stages what an update can change; the documents are the live ones.
            cfg["documents"] = current(c, genie_id)?
                .map(|l| l["documents"].clone())
                .unwrap_or_default();
            Ok(json!({
                "version": "draft", "created_at": d.updated_at, "created_by": d.created_by,
                "summary": format!("draft based on version {}", d.base_version.map(|v| v.to_string()).unwrap_or_else(|| "-".into())),
                "live": false, "base_version": d.base_version, "config": cfg,
            }))
        }
    }
}

/// The configuration of a version or of the draft.
pub fn config(c: &Connection, genie_id: &str, which: Which) -> ApiResult<Value> {
    Ok(read(c, genie_id, which)?["config"].take())
}

/// `versions`: every version, newest first, and the draft if there is one.
pub async fn list(app: &AppState, genie_id: &str) -> ApiResult<Value> {
    let id = genie_id.to_string();
    app.db
        .read(move |c| {
            let rows = store::list(c, &id)?;
            let live = rows.first().map(|r| r.version);
            let versions: Vec<Value> = rows
                .into_iter()
                .map(|m| {
                    json!({"version": m.version, "created_at": m.created_at, "created_by": m.created_by,
                           "summary": m.summary, "live": Some(m.version) == live})
                })
                .collect();
            let draft = match store::draft(c, &id)? {
                Some(d) => json!({"base_version": d.base_version, "created_by": d.created_by, "updated_at": d.updated_at}),
                None => Value::Null,
            };
            let traffic = store::traffic(c, &id)?;
            Ok(json!({"count": versions.len(), "versions": versions, "draft": draft, "traffic": traffic}))
        })
        .await
}

// ---- traffic ---------------------------------------------------------------------------

/// Which bucket (0..100) a new conversation falls in: the first bytes of SHA-256 of its id.
/// Deterministic per conversation (as the ElevenLabs branch split is), uniform over ids.
pub fn bucket(conversation_id: &str) -> u64 {
    let h = Sha256::digest(conversation_id.as_bytes());
    u64::from_be_bytes(h[..8].try_into().expect("8 bytes")) % 100
}

/// The version a bucket picks from `[{version, weight}]` (weights summing to 100).
pub fn pick(traffic: &[(i64, u64)], bucket: u64) -> Option<i64> {
    let mut acc = 0;
    for (v, w) in traffic {
        acc += w;
        if bucket < acc {
            return Some(*v);
        }
    }
    traffic.last().map(|(v, _)| *v)
}

fn parse_traffic(t: &Value) -> Vec<(i64, u64)> {
    t.as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| Some((e["version"].as_i64()?, e["weight"].as_u64()?)))
        .collect()
}

/// What serves a conversation: the version and its configuration.
#[derive(Debug, Clone)]
pub struct Serving {
    pub version: Option<i64>,
    pub config: Value,
}

/// The version that serves a conversation of the genie. A new one (`existing` `None`) is
/// split by the genie's traffic (when set) on its id; an existing one keeps the version that
/// opened it. Without a split, or for a version gone, the live configuration (the row).
pub fn serving(
    c: &Connection,
    genie_id: &str,
    conversation_id: &str,
    existing: Option<Option<i64>>,
) -> ApiResult<Serving> {
    let chosen = match existing {
        Some(v) => v,
        None => store::traffic(c, genie_id)?
            .and_then(|t| pick(&parse_traffic(&t), bucket(conversation_id))),
    };
    if let Some(v) = chosen
        && let Some((_, cfg)) = store::get(c, genie_id, v)?
    {
        return Ok(Serving {
            version: Some(v),
            config: cfg,
        });
    }
    let cfg = current(c, genie_id)?.ok_or_else(ApiError::agent_not_found)?;
    Ok(Serving {
        version: live_version(c, genie_id)?,
        config: cfg,
    })
}

/// Lays the serving configuration's prompt, first message and LLM settings over what the
/// page chat reads of a genie.
pub fn serve_with(g: &mut db::page_chat::PageGenie, config: &Value) {
    g.system_prompt = str_of(&config["system_prompt"]);
    g.first_message = str_of(&config["first_message"]);
    if let Some(m) = config["llm_model"].as_str() {
        g.llm_model = m.to_string();
    }
    g.temperature = config["temperature"].as_f64();
    g.max_tokens = config["max_tokens"].as_i64();
}

/// `set-traffic`: validates `[{version, weight}]` (existing versions, each once, integer
/// weights summing to 100); an empty list removes the split. With `mirror`, the platform's
/// own split is set first (ElevenLabs only; see [`mirror_traffic`]) and a failure there
/// changes nothing.
pub async fn set_traffic(
    app: &AppState,
    genie_id: &str,
    traffic: Vec<(i64, i64)>,
    mirror: bool,
) -> ApiResult<Value> {
    let mut seen = Vec::new();
    for (i, (v, w)) in traffic.iter().enumerate() {
        if !(0..=100).contains(w) {
            return Err(ApiError::validation(format!(
                "data.traffic[{i}].weight must be an integer from 0 to 100"
            )));
        }
        if seen.contains(v) {
            return Err(ApiError::validation(format!(
                "data.traffic[{i}].version: version {v} is listed twice"
            )));
        }
        seen.push(*v);
    }
    let sum: i64 = traffic.iter().map(|(_, w)| w).sum();
    if !traffic.is_empty() && sum != 100 {
        return Err(ApiError::validation(format!(
            "data.traffic: weights must sum to 100 (they sum to {sum})"
        )));
    }
    let provider_split = if mirror {
        Some(mirror_traffic(app, genie_id, &traffic).await?)
    } else {
        None
    };
    let id = genie_id.to_string();
    app.db
        .write(move |c| {
            for (i, (v, _)) in traffic.iter().enumerate() {
                if store::get(c, &id, *v)?.is_none() {
                    return Err(ApiError::validation(format!(
                        "data.traffic[{i}].version: this genie has no version {v}"
                    )));
                }
            }
            let value = (!traffic.is_empty()).then(|| {
                Value::Array(
                    traffic
                        .iter()
                        .map(|(v, w)| json!({"version": v, "weight": w}))
                        .collect(),
                )
            });
            store::set_traffic(c, &id, value.as_ref(), &db::now())?;
            Ok(json!({"traffic": value.unwrap_or_else(|| json!([])), "provider_split": provider_split}))
        })
        .await
}

/// Sets the split at the genie's platform: each listed version's configuration (with the
/// genie's current documents, which are not versioned per split) as the platform holds it.
/// Only ElevenLabs has a split of its own; anything else is 400.
async fn mirror_traffic(
    app: &AppState,
    genie_id: &str,
    traffic: &[(i64, i64)],
) -> ApiResult<Value> {
    let voice = crate::knowledge::agents::voice_for(app, genie_id).await?;
    if voice.name() != "elevenlabs" {
        return Err(ApiError::validation(format!(
            "data.mirror_at_provider: the '{}' voice provider has no traffic split of its own (only elevenlabs has)",
            voice.name()
        )));
    }
    let (id, versions) = (genie_id.to_string(), traffic.to_vec());
    let (row, docs, configs) = app
        .db
        .read(move |c| {
            let g = repo::find(c, &id)?.ok_or_else(ApiError::agent_not_found)?;
            let mut configs = Vec::new();
            for (i, (v, w)) in versions.iter().enumerate() {
                let (_, cfg) = store::get(c, &id, *v)?.ok_or_else(|| {
                    ApiError::validation(format!(
                        "data.traffic[{i}].version: this genie has no version {v}"
                    ))
                })?;
                configs.push((*v, *w, cfg));
            }
            Ok((g, repo::documents(c, &id)?, configs))
        })
        .await?;
    let agent = row
        .external_agent_id
        .clone()
        .ok_or_else(|| ApiError::conflict("this genie has no agent at its voice platform"))?;
    let (kb, _) = crate::knowledge::agents::kb_for(app, &voice, &docs).await?;
    let shares: Vec<crate::voice::TrafficShare> = configs
        .into_iter()
        .map(|(v, w, cfg)| {
            let mut g = row.clone();
            apply_config(&mut g, &cfg);
            crate::voice::TrafficShare {
                version: v,
                weight: w.max(0) as u64,
                spec: agent_spec(&g, kb.clone()),
            }
        })
        .collect();
    Ok(voice.set_traffic(&agent, &shares).await?)
}

/// `version-stats`.
pub async fn stats(app: &AppState, genie_id: &str) -> ApiResult<Value> {
    let id = genie_id.to_string();
    app.db
        .read(move |c| Ok(json!({"stats": store::stats(c, &id)?})))
        .await
}

// ---- drafts ----------------------------------------------------------------------------

/// Stages a change as the genie's draft (on top of the draft there is, else of live),
/// without touching the live genie or the provider. Only configuration may change in a
/// draft; anything else (name, page, branding, …) is refused, as it has no version.
pub async fn stage<F>(app: &AppState, by: &str, genie_id: &str, edit: F) -> ApiResult<Value>
where
    F: FnOnce(&mut GenieRow) -> ApiResult<()> + Send + 'static,
{
    let _guard = crate::knowledge::agents::lock_genie(genie_id).await;
    let (id, by) = (genie_id.to_string(), by.to_string());
    app.db
        .write(move |c| {
            let live = repo::find(c, &id)?.ok_or_else(ApiError::agent_not_found)?;
            let docs = repo::documents(c, &id)?;
            let prior = store::draft(c, &id)?;
            let mut base = live.clone();
            if let Some(d) = &prior {
                apply_config(&mut base, &d.config);
            }
            let mut next = base.clone();
            edit(&mut next)?;
            if non_config(&next) != non_config(&base) {
                return Err(ApiError::validation(
                    "data: a draft stages configuration only (prompt, first message, voice, LLM and conversation \
                     settings); change other fields with an update without draft",
                ));
            }
            let cfg = config_of(&next, &docs);
            let base_version = match &prior {
                Some(d) => d.base_version,
                None => live_version(c, &id)?,
            };
            store::save_draft(
                c,
                &id,
                &store::Draft {
                    config: cfg.clone(),
                    base_version,
                    created_by: Some(by),
                    updated_at: db::now(),
                },
            )?;
            let live_cfg = config_of(&live, &docs);
            Ok(json!({"draft": read(c, &id, Which::Draft)?, "changes": diff(&live_cfg, &cfg)}))
        })
        .await
}

/// `discard-draft`: 409 `CONFLICT` when there is none.
pub async fn discard(app: &AppState, genie_id: &str) -> ApiResult<()> {
    let id = genie_id.to_string();
    app.db
        .write(move |c| {
            if !store::delete_draft(c, &id)? {
                return Err(ApiError::conflict("this genie has no draft to discard"));
            }
            Ok(())
        })
        .await
}

/// What the voice provider is told about this genie.
pub fn agent_spec(
    g: &GenieRow,
    knowledge_base: Vec<crate::voice::KbDocRef>,
) -> crate::voice::AgentSpec {
    let num = |p: &str| g.settings.pointer(p).and_then(serde_json::Value::as_f64);
    crate::voice::AgentSpec {
        name: g.name.clone(),
        system_prompt: g.system_prompt.clone(),
        first_message: g.first_message.clone(),
        language: g
            .settings
            .pointer("/conversation_config/agent/language")
            .and_then(serde_json::Value::as_str)
            .map(str::to_string),
        multilingual: g.multilingual,
        voice_id: g.voice_id.clone(),
        llm_model: g.llm_model.clone(),
        temperature: g.temperature,
        max_tokens: g.max_tokens,
        stability: num("/conversation_config/tts/stability"),
        similarity_boost: num("/conversation_config/tts/similarity_boost"),
        speed: num("/conversation_config/tts/speed"),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pick_follows_the_weights_bucket_by_bucket() {
        let t = [(3, 70), (2, 30)];
        let picks: Vec<i64> = (0..100).map(|b| pick(&t, b).unwrap()).collect();
        assert_eq!(picks.iter().filter(|v| **v == 3).count(), 70);
        assert_eq!(picks[69], 3);
        assert_eq!(picks[70], 2);
        assert_eq!(pick(&[(1, 0), (2, 100)], 0), Some(2));
        assert_eq!(pick(&[], 5), None);
    }

    #[test]
    fn buckets_are_stable_and_spread() {
        assert_eq!(bucket("abc"), bucket("abc"));
        let mut counts = [0u32; 100];
        for i in 0..10_000 {
            counts[bucket(&format!("conv-{i}")) as usize] += 1;
        }
        // 100 per bucket expected; 10 standard deviations either side is still far from 0.
        assert!(counts.iter().all(|n| (1..=200).contains(n)), "{counts:?}");
    }

    #[test]
    fn diff_walks_objects_and_compares_the_rest_whole() {
        let a = json!({"p": "x", "t": 1.0, "docs": [1], "s": {"a": 1}});
        let b = json!({"p": "y", "t": 1.0, "docs": [1, 2], "s": {"a": 2, "b": 3}});
        assert_eq!(
            diff(&a, &b),
            vec![
                json!({"path": "docs", "from": [1], "to": [1, 2]}),
                json!({"path": "p", "from": "x", "to": "y"}),
                json!({"path": "s.a", "from": 1, "to": 2}),
                json!({"path": "s.b", "from": null, "to": 3}),
            ]
        );
    }

    #[test]
    fn set_pointer_prunes_what_it_empties() {
        let mut v = json!({"conversation_config": {"tts": {"speed": 1.0}}, "x": 1});
        set_pointer(&mut v, SPEED, Value::Null);
        assert_eq!(v, json!({"x": 1}));
        set_pointer(&mut v, STABILITY, json!(0.5));
        assert_eq!(v["conversation_config"]["tts"]["stability"], json!(0.5));
    }
}
