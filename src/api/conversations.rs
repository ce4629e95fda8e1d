//! The `conversations` resource: records of calls and web chats with their transcripts.
//! `sync` pulls them from the voice platform (idempotent by external id), `create` records
//! one the service hosted itself, `analyze` extracts a summary, intent, sentiment and contact
//! details and creates or fills the conversation's lead. Another user's conversation reads
//! as absent (404).

use super::action::{Action, Handler, Resource, handler, schema};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{ActionRequest, Ctx, Reply, page, parse_uuid};
use crate::db::conversations::{self as repo, CHANNELS, Conversation, Filter, STATUSES, Scope};
use crate::error::{ApiError, ApiResult};
use crate::service::conversations::{
    self as service, emit_completed, load, queue_report, store_provider_conversation,
};
use crate::state::AppState;
use crate::voice::Turn;

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[schemars(rename = "ConversationListRequest")]
pub(crate) struct ListReq {
    limit: Option<i64>,
    offset: Option<i64>,
    #[serde(rename = "adminMode")]
    admin_mode: Option<bool>,
    #[serde(rename = "genieId", alias = "genie_id", alias = "agentId")]
    genie_id: Option<String>,
    status: Option<String>,
    channel: Option<String>,
    #[serde(rename = "dateRange")]
    date_range: Option<String>,
    from: Option<String>,
    to: Option<String>,
    /// The same members may also come under `data.filters` (as for leads, and from REST
    /// query strings); top-level members win.
    filters: Option<Box<ListReq>>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[schemars(rename = "ConversationTurn")]
struct TurnIn {
    role: String,
    message: Option<String>,
    text: Option<String>,
    #[serde(alias = "timeInCallSecs", alias = "time")]
    time_in_call_secs: Option<f64>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "ConversationCreate")]
pub(crate) struct CreateReq {
    #[serde(rename = "genieId", alias = "genie_id", alias = "agentId")]
    genie_id: String,
    channel: Option<String>,
    status: Option<String>,
    #[serde(rename = "startedAt", alias = "started_at")]
    started_at: Option<String>,
    #[serde(rename = "durationSeconds", alias = "duration_seconds")]
    duration_seconds: Option<i64>,
    #[serde(default)]
    transcript: Vec<TurnIn>,
    summary: Option<String>,
    metadata: Option<Value>,
    tags: Option<Vec<String>>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "ConversationUpdate")]
pub(crate) struct UpdateReq {
    metadata: Option<Value>,
    tags: Option<Vec<String>>,
}

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[schemars(rename = "ConversationSync")]
pub(crate) struct SyncReq {
    #[serde(rename = "genieId", alias = "genie_id", alias = "agentId")]
    genie_id: Option<String>,
}

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[schemars(rename = "ConversationAnalyze")]
pub(crate) struct AnalyzeReq {
    #[serde(rename = "createLead", alias = "create_lead")]
    create_lead: Option<bool>,
}

pub async fn handle(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    match req.action.as_str() {
        "all" | "list" => {
            let q: ListReq = req.data()?;
            let (limit, offset) = page(q.limit, q.offset, 50, 500)?;
            let f = filter(ctx, q)?;
            let (items, count) = ctx
                .db()
                .read(move |c| Ok((repo::list(c, &f, limit, offset)?, repo::count(c, &f)?)))
                .await?;
            Ok(Reply::ok(
                json!({"conversations": items, "count": count, "limit": limit, "offset": offset}),
            ))
        }
        "get" => {
            let id = req.uuid()?;
            let p = ctx.principal.clone();
            let conv = ctx.db().read(move |c| load(c, &p, &id, false)).await?;
            Ok(Reply::ok(json!({"conversation": conv})))
        }
        "create" => create(ctx, req).await,
        "update" => {
            let id = req.uuid()?;
            let q: UpdateReq = req.data()?;
            let tags = match q.tags {
                Some(t) => Some(check_tags(t)?),
                None => None,
            };
            if let Some(m) = &q.metadata
                && !m.is_object()
            {
                return Err(ApiError::validation("data.metadata must be an object"));
            }
            let p = ctx.principal.clone();
            let conv = ctx
                .db()
                .write(move |c| {
                    let before = load(c, &p, &id, true)?;
                    // Metadata is merged member by member; a member set to null is removed.
                    let metadata = q.metadata.map(|m| {
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
                .await?;
            Ok(Reply::ok(json!({"conversation": conv}))
                .record(conv.id.clone())
                .summary("updated a conversation"))
        }
        "delete" => {
            let id = req.uuid()?;
            let (p, rid) = (ctx.principal.clone(), id.clone());
            ctx.db()
                .write(move |c| {
                    load(c, &p, &id, true)?;
                    Ok(repo::delete(c, &id)?)
                })
                .await?;
            Ok(Reply::deleted(&rid).summary("deleted a conversation"))
        }
        "sync" => sync(ctx, req).await,
        "analyze" => analyze(ctx, req).await,
        other => Err(ApiError::invalid_action(req.resource, other)),
    }
}

fn check_tags(tags: Vec<String>) -> ApiResult<Value> {
    if tags.len() > 50 {
        return Err(ApiError::validation("data.tags must hold at most 50 tags"));
    }
    let mut out: Vec<String> = Vec::new();
    for t in tags {
        let t = t.trim().to_string();
        if t.is_empty() || t.chars().count() > 50 {
            return Err(ApiError::validation(
                "data.tags: each tag must be 1 to 50 characters",
            ));
        }
        if !out.contains(&t) {
            out.push(t);
        }
    }
    Ok(json!(out))
}

fn parse_time(s: &str, field: &str) -> ApiResult<String> {
    chrono::DateTime::parse_from_rfc3339(s.trim())
        .map(|t| crate::db::fmt_time(t.with_timezone(&chrono::Utc)))
        .map_err(|_| ApiError::validation(format!("{field} must be an RFC 3339 timestamp")))
}

fn filter(ctx: &Ctx, mut q: ListReq) -> ApiResult<Filter> {
    if let Some(f) = q.filters.take() {
        q.genie_id = q.genie_id.or(f.genie_id);
        q.status = q.status.or(f.status);
        q.channel = q.channel.or(f.channel);
        q.date_range = q.date_range.or(f.date_range);
        q.from = q.from.or(f.from);
        q.to = q.to.or(f.to);
    }
    let admin_mode = ctx
        .principal
        .admin_option("adminMode", q.admin_mode.unwrap_or(false))?;
    let scope = if admin_mode {
        Scope::All
    } else {
        Scope::Readable(ctx.user_id().to_string())
    };
    if let Some(s) = &q.status
        && !STATUSES.contains(&s.as_str())
    {
        return Err(ApiError::validation(format!(
            "data.status must be one of {}",
            STATUSES.join(", ")
        )));
    }
    if let Some(s) = &q.channel
        && !CHANNELS.contains(&s.as_str())
    {
        return Err(ApiError::validation(format!(
            "data.channel must be one of {}",
            CHANNELS.join(", ")
        )));
    }
    let mut since = super::date_range_since(q.date_range.as_deref(), "data.dateRange")?;
    if let Some(f) = &q.from {
        since = Some(parse_time(f, "data.from")?);
    }
    let until = match &q.to {
        Some(t) => Some(parse_time(t, "data.to")?),
        None => None,
    };
    let genie_id = match &q.genie_id {
        Some(g) => Some(parse_uuid(g, "data.genieId")?),
        None => None,
    };
    Ok(Filter {
        scope,
        genie_id,
        status: q.status,
        channel: q.channel,
        since,
        until,
    })
}

async fn create(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let q: CreateReq = req.data()?;
    let genie_id = parse_uuid(&q.genie_id, "data.genieId")?;
    let channel = q.channel.unwrap_or_else(|| "web".into());
    if !CHANNELS.contains(&channel.as_str()) {
        return Err(ApiError::validation(format!(
            "data.channel must be one of {}",
            CHANNELS.join(", ")
        )));
    }
    let status = q.status.unwrap_or_else(|| "done".into());
    if !STATUSES.contains(&status.as_str()) {
        return Err(ApiError::validation(format!(
            "data.status must be one of {}",
            STATUSES.join(", ")
        )));
    }
    let started_at = match &q.started_at {
        Some(s) => parse_time(s, "data.startedAt")?,
        None => crate::db::now(),
    };
    let mut turns = Vec::with_capacity(q.transcript.len());
    for (i, t) in q.transcript.into_iter().enumerate() {
        let role = t.role.trim().to_lowercase();
        if !["user", "agent"].contains(&role.as_str()) {
            return Err(ApiError::validation(format!(
                "data.transcript[{i}].role must be user or agent"
            )));
        }
        let message = t.message.or(t.text).ok_or_else(|| {
            ApiError::validation(format!("data.transcript[{i}].message is required"))
        })?;
        let time = t.time_in_call_secs.unwrap_or(0.0);
        if !time.is_finite() || time < 0.0 {
            return Err(ApiError::validation(format!(
                "data.transcript[{i}].time_in_call_secs must be 0 or more"
            )));
        }
        turns.push(Turn {
            role,
            message,
            time_in_call_secs: time,
        });
    }
    let duration = match q.duration_seconds {
        Some(d) if d < 0 => {
            return Err(ApiError::validation(
                "data.durationSeconds must be 0 or more",
            ));
        }
        Some(d) => d,
        None => turns
            .iter()
            .map(|t| t.time_in_call_secs)
            .fold(0.0, f64::max)
            .ceil() as i64,
    };
    let metadata = q.metadata.unwrap_or_else(|| json!({}));
    if !metadata.is_object() {
        return Err(ApiError::validation("data.metadata must be an object"));
    }
    let tags = check_tags(q.tags.unwrap_or_default())?;
    let p = ctx.principal.clone();
    let conv = ctx
        .db()
        .write(move |c| {
            let genie = repo::genie(c, &genie_id)?
                .filter(|g| p.is_admin() || g.user_id == p.user_id)
                .ok_or_else(ApiError::agent_not_found)?;
            let id = repo::insert(
                c,
                &repo::NewConversation {
                    user_id: &genie.user_id,
                    genie_id: Some(&genie.id),
                    external_id: None,
                    channel: &channel,
                    status: &status,
                    started_at: &started_at,
                    duration_seconds: duration,
                    transcript: &turns,
                    summary: q.summary.as_deref(),
                    metadata: &metadata,
                    tags: &tags,
                },
            )?;
            if status == "done" {
                queue_report(c, &id, Some(&genie))?;
            }
            Ok(repo::get(c, &id)?.expect("row just inserted"))
        })
        .await?;
    if conv.status == "done" {
        emit_completed(&ctx.app, &conv.id).await?;
        ctx.app.wake_jobs();
    }
    Ok(Reply::created(json!({"conversation": conv}))
        .record(conv.id.clone())
        .summary("recorded a conversation"))
}

#[derive(Default)]
struct SyncCounts {
    created: i64,
    updated: i64,
    unchanged: i64,
    completed: Vec<Conversation>,
    errors: Vec<Value>,
}

const FINAL: &[&str] = &["done", "failed"];

async fn sync(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let q: SyncReq = req.data()?;
    let me = ctx.user_id().to_string();
    let genies = match q.genie_id {
        Some(g) => {
            let g = parse_uuid(&g, "data.genieId")?;
            let genie = ctx
                .db()
                .read(move |c| Ok(repo::genie(c, &g)?.filter(|g| g.user_id == me)))
                .await?
                .ok_or_else(ApiError::agent_not_found)?;
            if genie.external_agent_id.is_none() {
                return Err(ApiError::validation(
                    "data.genieId: this genie is not provisioned on the voice platform",
                ));
            }
            vec![genie]
        }
        None => {
            ctx.db()
                .read(move |c| Ok(repo::syncable_genies(c, &me)?))
                .await?
        }
    };
    let mut n = SyncCounts::default();
    for g in &genies {
        if let Err(e) = sync_genie(&ctx.app, g, &mut n).await {
            n.errors
                .push(json!({"genie_id": g.id, "message": e.message}));
        }
    }
    if !genies.is_empty()
        && n.errors.len() == genies.len()
        && n.created + n.updated + n.unchanged == 0
    {
        return Err(ApiError::upstream(format!(
            "sync failed: {}",
            n.errors[0]["message"].as_str().unwrap_or("")
        )));
    }
    for conv in &n.completed {
        emit_completed(&ctx.app, &conv.id).await?;
    }
    if !n.completed.is_empty() {
        ctx.app.wake_jobs();
    }
    let summary = format!(
        "synced conversations: {} new, {} updated",
        n.created, n.updated
    );
    Ok(Reply::ok(json!({
        "genies": genies.len(),
        "created": n.created,
        "updated": n.updated,
        "unchanged": n.unchanged,
        "errors": n.errors,
    }))
    .summary(summary))
}

/// Pages through one genie's conversations on the platform. Each conversation is stored in
/// its own transaction, so an interrupted sync keeps what it stored and the next one skips
/// what has not changed.
async fn sync_genie(app: &AppState, g: &repo::GenieRef, n: &mut SyncCounts) -> ApiResult<()> {
    let agent = g.external_agent_id.clone().unwrap_or_default();
    let mut cursor: Option<String> = None;
    for _ in 0..1000 {
        let page = app
            .voice
            .list_conversations(&agent, cursor.as_deref())
            .await?;
        for s in &page.conversations {
            let ext = s.conversation_id.clone();
            let known = app
                .db
                .read(move |c| Ok(repo::by_external(c, &ext)?))
                .await?;
            if let Some(k) = &known {
                if k.user_id != g.user_id {
                    n.errors.push(json!({"genie_id": g.id, "message": format!("conversation {} belongs to another account", s.conversation_id)}));
                    continue;
                }
                if k.status == s.status
                    && k.duration_seconds == s.call_duration_secs
                    && FINAL.contains(&k.status.as_str())
                {
                    n.unchanged += 1;
                    continue;
                }
            }
            let d = app.voice.get_conversation(&s.conversation_id).await?;
            let stored = store_provider_conversation(app, g, d).await?;
            if stored.created {
                n.created += 1;
            } else {
                n.updated += 1;
            }
            if stored.became_done {
                n.completed.push(stored.conversation);
            }
        }
        match page.next_cursor {
            Some(c) if !c.is_empty() => cursor = Some(c),
            _ => break,
        }
    }
    Ok(())
}

async fn analyze(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let q: AnalyzeReq = req.data()?;
    let by = service::By::Caller(ctx.principal.clone());
    let a = service::analyze(&ctx.app, by, &id, q.create_lead.unwrap_or(true)).await?;
    let conv = a.conversation;
    Ok(Reply::ok(json!({
        "conversation": conv,
        "analysis": conv.analysis,
        "method": a.method,
        "lead": a.lead,
        "lead_action": a.lead_action,
    }))
    .record(conv.id.clone())
    .summary(format!("analyzed a conversation ({})", a.method)))
}

/// Every `conversations` action; see `api::action`.
pub const RESOURCE: Resource = Resource {
    name: "conversations",
    list_action: "all",
    actions: &[
        Action::read("all", H).data(schema::<ListReq>),
        Action::read("list", H).data(schema::<ListReq>),
        Action::read("get", H).id(),
        Action::write("create", H)
            .data(schema::<CreateReq>)
            .conflict(),
        Action::write("update", H)
            .id()
            .data(schema::<UpdateReq>)
            .conflict(),
        Action::write("delete", H).id(),
        Action::write("sync", H).data(schema::<SyncReq>).upstream(),
        Action::write("analyze", H)
            .id()
            .data(schema::<AnalyzeReq>)
            .conflict()
            .upstream(),
    ],
};

const H: Handler = handler!(handle);
