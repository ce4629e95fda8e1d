//! Events out: every event the outbox dispatches is matched against the owner's active
//! webhook endpoints, and each match becomes a delivery row plus a durable job, in the
//! dispatcher's transaction. The job POSTs the event, signed, through the guarded client; failures are
//! retried with backoff by the job queue, and an endpoint whose delivery used up every attempt
//! is disabled and its owner notified. Receivers verify
//! `Genied-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "{t}.{body}">`.

use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use reqwest::Method;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use serde_json::{Value, json};
use sha2::Sha256;

use crate::db::{self, webhooks::Attempt};
use crate::error::{ApiError, ApiResult};
use crate::events::{EVENT_TYPES, Event, matches};
use crate::state::AppState;
use crate::workers::credentials;
use crate::{jobs, net};

pub const DELIVER_JOB: &str = "webhook.deliver";

/// The test event a webhook's `test` action sends, on top of the event catalogue.
pub const TEST_EVENT: &str = "webhook.test";

fn known_type(t: &str) -> bool {
    t == TEST_EVENT || EVENT_TYPES.contains(&t)
}

/// Checks a subscription pattern: an exact type, `family.*`, or `*`.
pub fn valid_pattern(p: &str) -> bool {
    p == "*"
        || known_type(p)
        || p.strip_suffix(".*").is_some_and(|fam| {
            EVENT_TYPES
                .iter()
                .chain([&TEST_EVENT])
                .any(|t| t.split('.').next() == Some(fam))
        })
}

/// The hex HMAC-SHA256 of `"{t}.{body}"` under the endpoint's secret.
pub fn signature(secret: &str, t: i64, body: &str) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes keys of any length");
    mac.update(format!("{t}.{body}").as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

pub fn new_secret() -> String {
    use base64::Engine;
    use rand::RngCore;
    let mut b = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut b);
    format!(
        "whsec_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)
    )
}

/// Seals a signing secret for webhook `id` with the live master key; inside the writer's
/// transaction, like credentials, so a concurrent key rotation cannot miss it.
pub fn seal_secret(
    app: &AppState,
    c: &crate::db::Connection,
    id: &str,
    secret: &str,
) -> ApiResult<Vec<u8>> {
    let key = credentials::key_for_write(app, c).map_err(ApiError::internal)?;
    let (nonce, ct) = credentials::seal(&key, id, secret.as_bytes());
    Ok(db::webhooks::join_sealed(&nonce, &ct))
}

pub fn secret_prefix(secret: &str) -> String {
    secret.chars().take(12).collect()
}

/// Queues a delivery of `event_body` to one endpoint; inside the caller's transaction.
pub fn queue(
    c: &crate::db::Connection,
    webhook_id: &str,
    event_id: &str,
    event_type: &str,
    body: &str,
    max_attempts: i64,
) -> rusqlite::Result<String> {
    let id = db::new_id();
    db::webhooks::insert_delivery(c, &id, webhook_id, event_id, event_type, body)?;
    jobs::enqueue(
        c,
        DELIVER_JOB,
        &json!({"delivery_id": id}),
        Duration::ZERO,
        Some(max_attempts),
    )?;
    Ok(id)
}

/// Turns one event into a delivery for every matching active endpoint of its user. Called
/// by the outbox dispatcher inside the transaction that marks the event dispatched, so each
/// event becomes its deliveries exactly once.
pub fn fan_out(
    c: &crate::db::Connection,
    event: &Event,
    max_attempts: i64,
) -> rusqlite::Result<usize> {
    let hooks: Vec<String> = db::webhooks::active_for_user(c, &event.user_id)?
        .into_iter()
        .filter(|(_, patterns)| matches(patterns, &event.kind))
        .map(|(id, _)| id)
        .collect();
    if hooks.is_empty() {
        return Ok(0);
    }
    let body = serde_json::to_string(event)
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
    for hook in &hooks {
        queue(c, hook, &event.id, &event.kind, &body, max_attempts)?;
    }
    Ok(hooks.len())
}

/// The result of one POST to a receiver.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AttemptResult {
    pub status_code: Option<u16>,
    pub latency_ms: i64,
    pub response_excerpt: Option<String>,
    pub error: Option<String>,
    pub succeeded: bool,
    /// The address guard refused the receiver's address: no later attempt would pass.
    #[serde(skip)]
    pub refused: bool,
}

/// POSTs one signed delivery and records the attempt.
pub async fn attempt(app: &AppState, delivery_id: &str) -> ApiResult<AttemptResult> {
    let id = delivery_id.to_string();
    let target = app
        .db
        .read(move |c| Ok(db::webhooks::target(c, &id)?))
        .await?
        .ok_or_else(|| ApiError::not_found("webhook delivery"))?;
    let (nonce, ct) = target.sealed.split_at(target.sealed.len().min(12));
    let secret = credentials::open_live(app, &target.webhook_id, nonce, ct)
        .and_then(|s| String::from_utf8(s).ok())
        .ok_or_else(|| ApiError::internal("webhook secret does not open with the master key"))?;
    let t = chrono::Utc::now().timestamp();
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let sig = format!("t={t},v1={}", signature(&secret, t, &target.body));
    for (name, value) in [
        ("genied-signature", sig.as_str()),
        ("genied-event", &target.event_type),
        ("genied-delivery", &target.delivery_id),
    ] {
        headers.insert(
            name,
            HeaderValue::from_str(value).map_err(ApiError::internal)?,
        );
    }
    let limits = net::Limits {
        max_bytes: 4096,
        timeout: Duration::from_secs(app.config.webhook_timeout_seconds),
    };
    let started = Instant::now();
    let sent = app
        .net
        .fetch(
            Method::POST,
            &target.url,
            headers,
            Some(target.body.clone().into_bytes()),
            limits,
        )
        .await;
    let latency_ms = started.elapsed().as_millis() as i64;
    let result = match sent {
        Ok(resp) => {
            let excerpt: String = resp.text().chars().take(500).collect();
            let ok = (200..300).contains(&resp.status);
            AttemptResult {
                status_code: Some(resp.status),
                latency_ms,
                response_excerpt: Some(excerpt),
                error: (!ok).then(|| format!("receiver answered {}", resp.status)),
                succeeded: ok,
                refused: false,
            }
        }
        Err(e) => AttemptResult {
            status_code: None,
            latency_ms,
            response_excerpt: None,
            refused: matches!(e, net::NetError::Refused(_)),
            error: Some(e.to_string()),
            succeeded: false,
        },
    };
    let (id, r) = (target.delivery_id.clone(), result.clone());
    app.db
        .write(move |c| {
            let a = Attempt {
                status_code: r.status_code,
                latency_ms: r.latency_ms,
                response_excerpt: r.response_excerpt.as_deref(),
                error: r.error.as_deref(),
                succeeded: r.succeeded,
            };
            Ok(db::webhooks::record_attempt(c, &id, &a)?)
        })
        .await?;
    Ok(result)
}

/// The job: one attempt; an error makes the queue retry it later.
pub async fn deliver_job(app: &AppState, payload: &Value) -> ApiResult<()> {
    let id = payload["delivery_id"]
        .as_str()
        .ok_or_else(|| ApiError::validation("delivery job without delivery_id"))?;
    let result = if crate::telemetry::trace::enabled() {
        use tracing::Instrument;
        attempt(app, id)
            .instrument(tracing::info_span!("webhook.deliver"))
            .await?
    } else {
        attempt(app, id).await?
    };
    crate::telemetry::prom::webhook_delivery(if result.succeeded {
        "delivered"
    } else if result.refused {
        "refused"
    } else {
        "failed"
    });
    let error = result.error.unwrap_or_else(|| "delivery failed".into());
    if result.succeeded {
        Ok(())
    } else if result.refused {
        // The guard refuses the address on every attempt (a receiver stored before the check
        // at create, an operator who turned the guard on, a name whose DNS now answers an
        // internal address): retrying for hours helps nobody, so give up now.
        give_up(app, id, &format!("its address was refused: {error}")).await
    } else {
        Err(ApiError::upstream(error))
    }
}

/// A delivery used every attempt: mark it failed, disable its endpoint, tell the owner.
pub async fn delivery_exhausted(app: &AppState, payload: &Value) -> ApiResult<()> {
    let id = payload["delivery_id"].as_str().unwrap_or_default();
    let attempts = app.config.webhook_max_attempts;
    give_up(
        app,
        id,
        &format!("a delivery failed {attempts} times in a row"),
    )
    .await
}

/// Marks a delivery failed, disables its endpoint with `reason` and notifies the owner.
async fn give_up(app: &AppState, delivery_id: &str, reason: &str) -> ApiResult<()> {
    let (id, reason) = (delivery_id.to_string(), reason.to_string());
    app.db
        .write(move |c| {
            let Some(hook) = db::webhooks::fail_delivery(c, &id)? else { return Ok(()) };
            if let Some((user, url)) = db::webhooks::disable(c, &hook, &reason)? {
                db::notifications::insert(
                    c,
                    &user,
                    "webhook.disabled",
                    "A webhook endpoint was disabled",
                    &format!("Deliveries to {url} were given up ({reason}). Fix the receiver, then set is_active to true."),
                    &json!({"webhook_id": hook, "delivery_id": id}),
                )?;
            }
            Ok(())
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        let p = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(matches(&p(&["*"]), "lead.created"));
        assert!(matches(&p(&["lead.*"]), "lead.status_changed"));
        assert!(!matches(&p(&["lead.*"]), "genie.created"));
        assert!(matches(
            &p(&["genie.deleted", "lead.created"]),
            "lead.created"
        ));
        assert!(!matches(&p(&["lead.created"]), "lead.updated"));
        assert!(
            valid_pattern("worker_run.*") && valid_pattern("*") && valid_pattern("api_key.revoked")
        );
        assert!(
            !valid_pattern("lead.exploded")
                && !valid_pattern("nothing.*")
                && !valid_pattern("lead*")
        );
    }

    #[test]
    fn signature_matches_a_known_vector() {
        // HMAC-SHA256("key", "1.{}") as Python's hmac module computes it.
        assert_eq!(
            signature("key", 1, "{}"),
            "1ba6b8171186efc613e8bcc0cbdab2748f24984d7c5a84faa2637afa0e40d224"
        );
        assert_ne!(signature("key", 2, "{}"), signature("key", 1, "{}"));
    }
}
