//! Webhooks in from the voice platform: `POST /v1/hooks/elevenlabs` receives post-call
//! transcriptions, so a finished call becomes a conversation at once and polling `sync` is
//! only a fallback. The caller is authenticated by `ElevenLabs-Signature: t=<unix>,v0=<hex>`,
//! the HMAC-SHA256 of `"{t}.{raw body}"` under `--elevenlabs-webhook-secret`; stale
//! timestamps (over 30 minutes), forged signatures and exact replays get 401.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use hmac::{Hmac, Mac};
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::db;
use crate::error::{ApiError, ApiResult};
use crate::service::conversations;
use crate::state::AppState;
use crate::voice::{ConversationDetail, Turn};

/// How old a signed timestamp may be (the provider's own rule), and how far in the future.
const MAX_AGE_SECS: i64 = 30 * 60;
const MAX_SKEW_SECS: i64 = 5 * 60;

pub fn routes() -> Router<AppState> {
    Router::new().route("/v1/hooks/elevenlabs", post(elevenlabs))
}

fn refused(why: &str) -> ApiError {
    ApiError::new(
        crate::error::Kind::Unauthorized,
        format!("webhook refused: {why}"),
    )
}

/// Checks `t=<unix>,v0=<hex>` against the body; returns the timestamp.
pub fn verify(secret: &str, header: &str, body: &[u8], now: i64) -> ApiResult<i64> {
    let mut t = None;
    let mut sigs = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", v)) => t = v.parse::<i64>().ok(),
            Some(("v0", v)) => sigs.push(v.to_string()),
            _ => {}
        }
    }
    let t = t.ok_or_else(|| refused("signature header has no timestamp"))?;
    if now - t > MAX_AGE_SECS || t - now > MAX_SKEW_SECS {
        return Err(refused(
            "signature timestamp is outside the accepted window",
        ));
    }
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes keys of any length");
    mac.update(format!("{t}.").as_bytes());
    mac.update(body);
    // verify_slice compares in constant time.
    if sigs
        .iter()
        .any(|s| hex::decode(s).is_ok_and(|raw| mac.clone().verify_slice(&raw).is_ok()))
    {
        Ok(t)
    } else {
        Err(refused("signature does not match"))
    }
}

#[derive(Deserialize)]
struct Hook {
    #[serde(rename = "type")]
    kind: String,
    data: Value,
}

#[derive(Deserialize)]
struct PostCall {
    agent_id: String,
    conversation_id: String,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    transcript: Vec<RawTurn>,
    #[serde(default)]
    metadata: Value,
    #[serde(default)]
    analysis: Value,
}

#[derive(Deserialize)]
struct RawTurn {
    role: String,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    time_in_call_secs: f64,
}

async fn elevenlabs(State(app): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    receive(&app, &headers, &body)
        .await
        .map_or_else(IntoResponse::into_response, |v| {
            Json(json!({"success": true, "data": v})).into_response()
        })
}

async fn receive(app: &AppState, headers: &HeaderMap, body: &[u8]) -> ApiResult<Value> {
    let Some(secret) = app
        .config
        .elevenlabs_webhook_secret
        .as_ref()
        .filter(|s| !s.0.is_empty())
    else {
        return Err(ApiError::not_found(
            "provider webhook endpoint (set --elevenlabs-webhook-secret to enable it)",
        ));
    };
    let header = headers
        .get("elevenlabs-signature")
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| refused("missing ElevenLabs-Signature header"))?;
    verify(&secret.0, header, body, chrono::Utc::now().timestamp())?;

    // The signature is valid: refuse it if it was already used once.
    let receipt = hex::encode(Sha256::digest(header.as_bytes()));
    let window =
        db::fmt_time(chrono::Utc::now() - chrono::Duration::seconds(MAX_AGE_SECS + MAX_SKEW_SECS));
    let fresh = app
        .db
        .write(move |c| {
            Ok(db::provider_hooks::record_receipt(
                c,
                &receipt,
                &window,
                &db::now(),
            )?)
        })
        .await?;
    if !fresh {
        return Err(refused("this signed request was already received (replay)"));
    }

    let hook: Hook =
        serde_json::from_slice(body).map_err(|e| ApiError::validation(format!("body: {e}")))?;
    if hook.kind != "post_call_transcription" {
        return Ok(
            json!({"received": true, "ignored": format!("event type '{}' is not handled", hook.kind)}),
        );
    }
    let call: PostCall = crate::api::parse_value(&hook.data, "data")?;
    let agent = call.agent_id.clone();
    let Some(genie) = app
        .db
        .read(move |c| Ok(db::conversations::genie_by_agent(c, &agent)?))
        .await?
    else {
        // Answered 200 so the platform does not retry a call for an agent we do not have.
        return Ok(
            json!({"received": true, "ignored": format!("no genie is provisioned as agent {}", call.agent_id)}),
        );
    };
    let detail = ConversationDetail {
        conversation_id: call.conversation_id.clone(),
        agent_id: call.agent_id.clone(),
        status: call.status.unwrap_or_else(|| "done".into()),
        start_time_unix_secs: call.metadata["start_time_unix_secs"]
            .as_i64()
            .unwrap_or_else(|| chrono::Utc::now().timestamp()),
        call_duration_secs: call.metadata["call_duration_secs"].as_i64().unwrap_or(0),
        transcript: call
            .transcript
            .into_iter()
            .filter_map(|t| {
                Some(Turn {
                    role: t.role,
                    message: t.message?,
                    time_in_call_secs: t.time_in_call_secs,
                })
            })
            .collect(),
        summary: call.analysis["transcript_summary"]
            .as_str()
            .map(str::to_string),
        metadata: call.metadata,
    };
    let stored = conversations::store_provider_conversation(app, &genie, detail).await?;
    let conv_id = stored.conversation.id.clone();
    if stored.became_done {
        app.wake_jobs();
        // Analyse it for its owner (summary, intent, contact details, the lead), then
        // announce it with all of that attached.
        if let Err(e) = conversations::analyze_stored(app, &genie.user_id, &conv_id).await {
            tracing::warn!(error = %e, conversation = %conv_id, "analysis after the post-call webhook failed");
        }
        conversations::emit_completed(app, &conv_id).await?;
    }
    Ok(json!({"received": true, "conversation_id": conv_id, "created": stored.created}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures() {
        // HMAC-SHA256("whsec", "100.{}") as Python's hmac module computes it.
        let good = "t=100,v0=3d4f993db69ebdb801664fd32cc8bd93853aae0ef6ead7e6ec5f38f7c3dfb68c";
        assert_eq!(verify("whsec", good, b"{}", 100).unwrap(), 100);
        assert!(verify("other", good, b"{}", 100).is_err(), "wrong secret");
        assert!(verify("whsec", good, b"{ }", 100).is_err(), "altered body");
        assert!(
            verify("whsec", good, b"{}", 100 + MAX_AGE_SECS + 1).is_err(),
            "stale"
        );
        assert!(
            verify("whsec", good, b"{}", 100 - MAX_SKEW_SECS - 1).is_err(),
            "from the future"
        );
        assert!(
            verify("whsec", "v0=3d4f", b"{}", 100).is_err(),
            "no timestamp"
        );
    }
}
