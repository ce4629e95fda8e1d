//! Webhooks in from the voice platform: `POST /v1/hooks/elevenlabs` receives post-call
//! transcriptions, so a finished call becomes a conversation at once and polling `sync` is
//! only a fallback. The caller is authenticated by `ElevenLabs-Signature: t=<unix>,v0=<hex>`,
//! the HMAC-SHA256 of `"{t}.{raw body}"` under `--elevenlabs-webhook-secret`; stale
//! timestamps (over 30 minutes), forged signatures and exact replays get 401.
//! `POST /v1/hooks/vapi` (Vapi's server-URL events, `X-Vapi-Secret`) and `POST
//! /v1/hooks/retell` (`x-retell-signature`) feed the same conversations the same way.

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
use crate::service::{campaign_calls, campaigns, conversations};
use crate::state::AppState;
use crate::voice::{ConversationDetail, Turn};

/// How old a signed timestamp may be (the provider's own rule), and how far in the future.
const MAX_AGE_SECS: i64 = 30 * 60;
const MAX_SKEW_SECS: i64 = 5 * 60;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/hooks/elevenlabs", post(elevenlabs))
        .route("/v1/hooks/vapi", post(vapi))
        .route("/v1/hooks/retell", post(retell))
}

/// A platform's (signature-checked) body as JSON, any NUL removed from its text
/// (`api::input::strip_nul`).
fn body_json(body: &[u8]) -> ApiResult<Value> {
    let mut v: Value =
        serde_json::from_slice(body).map_err(|e| ApiError::validation(format!("body: {e}")))?;
    crate::api::input::strip_nul(&mut v);
    Ok(v)
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
    answer(receive(&app, &headers, &body).await)
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

    fresh_receipt(app, header.as_bytes()).await?;

    let hook: Hook = serde_json::from_value(body_json(body)?)
        .map_err(|e| ApiError::validation(format!("body: {e}")))?;
    if hook.kind != "post_call_transcription" {
        return Ok(
            json!({"received": true, "ignored": format!("event type '{}' is not handled", hook.kind)}),
        );
    }
    let call: PostCall = crate::api::parse_value(&hook.data, "data")?;
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
    ingest(app, detail).await
}

/// Refuses a signed request seen before (by its signature, or whatever else identifies it
/// exactly); receipts older than any signature's validity are forgotten.
async fn fresh_receipt(app: &AppState, identity: &[u8]) -> ApiResult<()> {
    let receipt = hex::encode(Sha256::digest(identity));
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
    if fresh {
        Ok(())
    } else {
        Err(refused("this signed request was already received (replay)"))
    }
}

/// Stores a finished (or progressing) call of one of our genies as its conversation, and
/// once it is done analyses and announces it, as for every provider.
async fn ingest(app: &AppState, detail: ConversationDetail) -> ApiResult<Value> {
    let agent = detail.agent_id.clone();
    let Some(genie) = app
        .db
        .read(move |c| Ok(db::conversations::genie_by_agent(c, &agent)?))
        .await?
    else {
        // Answered 200 so the platform does not retry a call for an agent we do not have.
        return Ok(
            json!({"received": true, "ignored": format!("no genie is provisioned as agent {}", detail.agent_id)}),
        );
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

fn answer(r: ApiResult<Value>) -> Response {
    r.map_or_else(IntoResponse::into_response, |v| {
        Json(json!({"success": true, "data": v})).into_response()
    })
}

/// Vapi's server-URL events. Vapi signs nothing by default; genied sets a fixed
/// `X-Vapi-Secret` header on each assistant's server (see `voice::vapi`) and compares it in
/// constant time. Every event carries `message.timestamp` (epoch ms): one older than 30
/// minutes or more than 5 minutes ahead is refused, and so is the same body twice.
async fn vapi(State(app): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    answer(receive_vapi(&app, &headers, &body).await)
}

async fn receive_vapi(app: &AppState, headers: &HeaderMap, body: &[u8]) -> ApiResult<Value> {
    let Some(secret) = app
        .config
        .vapi_webhook_secret
        .as_ref()
        .filter(|s| !s.0.is_empty())
    else {
        return Err(ApiError::not_found(
            "provider webhook endpoint (set --vapi-webhook-secret to enable it)",
        ));
    };
    let given = headers
        .get("x-vapi-secret")
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| refused("missing X-Vapi-Secret header"))?;
    // Comparing digests keeps the comparison constant-time whatever the lengths.
    let (a, b) = (
        Sha256::digest(given.as_bytes()),
        Sha256::digest(secret.0.as_bytes()),
    );
    if !subtle_eq(&a, &b) {
        return Err(refused("X-Vapi-Secret does not match"));
    }
    let v = body_json(body)?;
    let msg = &v["message"];
    let ts_ms = msg["timestamp"]
        .as_i64()
        .or_else(|| msg["timestamp"].as_f64().map(|f| f as i64))
        .ok_or_else(|| refused("message.timestamp is missing"))?;
    let now = chrono::Utc::now().timestamp();
    let t = ts_ms / 1000;
    if now - t > MAX_AGE_SECS || t - now > MAX_SKEW_SECS {
        return Err(refused("message.timestamp is outside the accepted window"));
    }
    fresh_receipt(app, &[b"vapi:".as_slice(), body].concat()).await?;
    let kind = msg["type"].as_str().unwrap_or("");
    if kind != "end-of-call-report" {
        return Ok(
            json!({"received": true, "ignored": format!("event type '{kind}' is not handled")}),
        );
    }
    // The report's own fields complete the call it names.
    let mut call = msg["call"].clone();
    if !call.is_object() {
        return Err(ApiError::validation("message.call: required"));
    }
    for k in [
        "artifact",
        "analysis",
        "endedReason",
        "startedAt",
        "endedAt",
        "cost",
    ] {
        if !msg[k].is_null() {
            call[k] = msg[k].clone();
        }
    }
    if call["assistantId"].is_null() {
        call["assistantId"] = msg["assistant"]["id"].clone();
    }
    call["status"] = json!("ended");
    let detail = crate::voice::vapi::conversation_detail(&call);
    if detail.conversation_id.is_empty() || detail.agent_id.is_empty() {
        return Err(ApiError::validation(
            "message.call: id and assistantId are required",
        ));
    }
    let (pid, reason) = (
        detail.conversation_id.clone(),
        call["endedReason"].as_str().unwrap_or("").to_string(),
    );
    let out = ingest(app, detail).await?;
    campaigns::platform_call_ended(
        app,
        &pid,
        campaign_calls::vapi_outcome(&reason),
        out["conversation_id"].as_str(),
    )
    .await;
    Ok(out)
}

fn subtle_eq(a: &[u8], b: &[u8]) -> bool {
    // HMAC's verify is the constant-time comparison this crate already trusts.
    let mut mac = Hmac::<Sha256>::new_from_slice(b"genied-compare").expect("any key length");
    mac.update(a);
    let tag = mac.finalize().into_bytes();
    let mut mac = Hmac::<Sha256>::new_from_slice(b"genied-compare").expect("any key length");
    mac.update(b);
    mac.verify_slice(&tag).is_ok()
}

/// How old a Retell signature may be, either way (the SDK's own rule).
const RETELL_WINDOW_MS: i64 = 5 * 60 * 1000;

/// Checks `v=<unix ms>,d=<hex>` (Retell's `x-retell-signature`): HMAC-SHA256 under the
/// webhook key of the raw body followed by the timestamp digits.
pub fn verify_retell(key: &str, header: &str, body: &[u8], now_ms: i64) -> ApiResult<i64> {
    let (mut v, mut d) = (None, None);
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("v", x)) => v = x.parse::<i64>().ok(),
            Some(("d", x)) => d = Some(x.to_ascii_lowercase()),
            _ => {}
        }
    }
    let (Some(v), Some(d)) = (v, d) else {
        return Err(refused(
            "x-retell-signature is not v=<timestamp>,d=<digest>",
        ));
    };
    if (now_ms - v).abs() > RETELL_WINDOW_MS {
        return Err(refused(
            "signature timestamp is outside the accepted window",
        ));
    }
    let mut mac =
        Hmac::<Sha256>::new_from_slice(key.as_bytes()).expect("HMAC takes keys of any length");
    mac.update(body);
    mac.update(v.to_string().as_bytes());
    match hex::decode(&d) {
        Ok(raw) if raw.len() == 32 && mac.verify_slice(&raw).is_ok() => Ok(v),
        _ => Err(refused("signature does not match")),
    }
}

/// Retell's call webhooks: `call_ended` and `call_analyzed` become the genie's
/// conversation; other events are acknowledged and ignored.
async fn retell(State(app): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    answer(receive_retell(&app, &headers, &body).await)
}

async fn receive_retell(app: &AppState, headers: &HeaderMap, body: &[u8]) -> ApiResult<Value> {
    let Some(key) = app
        .config
        .retell_webhook_secret
        .as_ref()
        .filter(|s| !s.0.is_empty())
    else {
        return Err(ApiError::not_found(
            "provider webhook endpoint (set --retell-webhook-secret to enable it)",
        ));
    };
    let header = headers
        .get("x-retell-signature")
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| refused("missing x-retell-signature header"))?;
    verify_retell(&key.0, header, body, chrono::Utc::now().timestamp_millis())?;
    fresh_receipt(app, header.as_bytes()).await?;
    let v = body_json(body)?;
    let event = v["event"].as_str().unwrap_or("");
    if !matches!(event, "call_ended" | "call_analyzed") {
        return Ok(
            json!({"received": true, "ignored": format!("event type '{event}' is not handled")}),
        );
    }
    let detail = crate::voice::retell::conversation_detail(&v["call"]);
    if detail.conversation_id.is_empty() || detail.agent_id.is_empty() {
        return Err(ApiError::validation(
            "call: call_id and agent_id are required",
        ));
    }
    let (pid, reason) = (
        detail.conversation_id.clone(),
        v["call"]["disconnection_reason"]
            .as_str()
            .unwrap_or("")
            .to_string(),
    );
    let out = ingest(app, detail).await?;
    campaigns::platform_call_ended(
        app,
        &pid,
        campaign_calls::retell_outcome(&reason),
        out["conversation_id"].as_str(),
    )
    .await;
    Ok(out)
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

    #[test]
    fn retell_signatures() {
        let body = br#"{"event":"call_ended"}"#;
        let mut mac = Hmac::<Sha256>::new_from_slice(b"key_1").unwrap();
        mac.update(body);
        mac.update(b"1700000000000");
        let d = hex::encode(mac.finalize().into_bytes());
        let h = format!("v=1700000000000,d={d}");
        assert_eq!(
            verify_retell("key_1", &h, body, 1_700_000_000_000).unwrap(),
            1_700_000_000_000
        );
        assert!(
            verify_retell("key_2", &h, body, 1_700_000_000_000).is_err(),
            "wrong key"
        );
        assert!(
            verify_retell("key_1", &h, b"{}", 1_700_000_000_000).is_err(),
            "altered body"
        );
        assert!(
            verify_retell("key_1", &h, body, 1_700_000_000_000 + RETELL_WINDOW_MS + 1).is_err(),
            "stale"
        );
        assert!(
            verify_retell("key_1", "d=00", body, 1).is_err(),
            "no timestamp"
        );
        assert!(subtle_eq(b"abc", b"abc") && !subtle_eq(b"abc", b"abd"));
    }
}
