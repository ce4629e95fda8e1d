//! `create`: records a conversation the service hosted itself.

use serde::Deserialize;
use serde_json::{Value, json};

use super::{check_tags, parse_time};
use crate::api::{ActionRequest, Ctx, Reply, parse_uuid};
use crate::db::conversations::{CHANNELS, STATUSES};
use crate::error::{ApiError, ApiResult};
use crate::service::conversations::{self as service, NewRecord};
use crate::voice::Turn;

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

pub(super) async fn create(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
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
    let conv = service::record(
        &ctx.app,
        &ctx.principal,
        NewRecord {
            genie_id,
            channel,
            status,
            started_at,
            duration_seconds: duration,
            transcript: turns,
            summary: q.summary,
            metadata,
            tags,
        },
    )
    .await?;
    Ok(Reply::created(json!({"conversation": conv}))
        .record(conv.id.clone())
        .summary("recorded a conversation"))
}
