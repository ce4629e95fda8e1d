//! The HTTP side shared by the Bearer-key platforms (Vapi, Retell): one request builder, the
//! platform's error words turned into `ProviderError`, and retries with exponential backoff
//! (backon) for what is safe to repeat ([`with_retries`], which ElevenLabs uses too).
//!
//! What is retried: a 429 always (the platform refused before doing anything) and a 408,
//! 5xx or network failure only for requests that are idempotent (GET, PUT, DELETE and the
//! PATCHes these adapters send, which set absolute values). A POST that failed with a 5xx
//! may have created something, so it is not repeated blindly; the caller's own clean-up or
//! the durable sync job handles it.

use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use reqwest::{Method, StatusCode};
use serde_json::Value;

use super::{ProviderError, ProviderResult};
use crate::config::Secret;

/// How many times a failed call is repeated.
const MAX_RETRIES: usize = 4;
/// The longest wait a platform's `Retry-After` may impose on one retry.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

/// A body to send.
pub enum Body {
    None,
    Json(Value),
    /// Multipart parts are rebuilt for each attempt, since a form is consumed by sending it.
    Form(Box<dyn Fn() -> reqwest::multipart::Form + Send + Sync>),
}

pub struct BearerClient {
    /// For messages: `Vapi`, `Retell`.
    pub platform: &'static str,
    base: String,
    key: Secret,
    http: reqwest::Client,
    retry_base: Duration,
}

/// A failed attempt, with what the retry policy needs to know.
pub(super) struct Attempt {
    pub error: ProviderError,
    pub retry_after: Option<Duration>,
    pub transient: bool,
}

/// Runs `attempt` until it succeeds or the policy of this module says stop: a 429 always
/// retried, a transient failure only when `idempotent`; exponential backoff from
/// `retry_base` with jitter, the platform's `Retry-After` winning within reason.
pub(super) async fn with_retries<F, Fut>(
    platform: &'static str,
    path: &str,
    retry_base: Duration,
    idempotent: bool,
    attempt: F,
) -> ProviderResult<Value>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Value, Attempt>>,
{
    attempt
        .retry(
            ExponentialBuilder::default()
                .with_min_delay(retry_base)
                .with_max_delay(retry_base * 16)
                .with_max_times(MAX_RETRIES)
                .with_jitter(),
        )
        .when(|a: &Attempt| a.error.status == Some(429) || (idempotent && a.transient))
        .adjust(|a: &Attempt, d| match (a.retry_after, d) {
            (Some(ra), Some(_)) => Some(ra.min(MAX_RETRY_AFTER)),
            (_, d) => d,
        })
        .notify(|a: &Attempt, d| {
            tracing::warn!(platform, path, error = %a.error, delay_ms = d.as_millis() as u64, "voice platform call failed; retrying");
        })
        .await
        .map_err(|a| a.error)
}

/// A response's `Retry-After` in seconds, when it gives one.
pub(super) fn retry_after(resp: &reqwest::Response) -> Option<Duration> {
    resp.headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
}

impl BearerClient {
    pub fn new(
        platform: &'static str,
        flag: &str,
        base_url: &str,
        key: Secret,
        retry_base: Duration,
    ) -> anyhow::Result<BearerClient> {
        let base = base_url.trim().trim_end_matches('/').to_string();
        url::Url::parse(&base).map_err(|e| anyhow::anyhow!("{flag} '{base}': {e}"))?;
        Ok(BearerClient {
            platform,
            base,
            key,
            http: crate::net::service_client(Duration::from_secs(60)),
            retry_base,
        })
    }

    /// `DELETE path`, where a thing already gone ([`is_gone`]) counts as deleted: deleting
    /// is idempotent for genied whatever the platform answers for a second delete.
    pub async fn delete(&self, path: &str) -> ProviderResult<()> {
        match self.call(Method::DELETE, path, &[], Body::None).await {
            Err(e) if !is_gone(&e) => Err(e),
            _ => Ok(()),
        }
    }

    /// One logical call, retried as the module comment says. An empty 2xx body is `Null`.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Body,
    ) -> ProviderResult<Value> {
        let idempotent = method != Method::POST;
        self.call_as(method, path, query, body, idempotent).await
    }

    /// A POST that only reads (a search), so repeating it after a 5xx is as safe as a GET.
    pub async fn read_post(&self, path: &str, body: Value) -> ProviderResult<Value> {
        self.call_as(Method::POST, path, &[], Body::Json(body), true)
            .await
    }

    async fn call_as(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Body,
        idempotent: bool,
    ) -> ProviderResult<Value> {
        with_retries(self.platform, path, self.retry_base, idempotent, || {
            self.once(method.clone(), path, query, &body)
        })
        .await
    }

    async fn once(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: &Body,
    ) -> Result<Value, Attempt> {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.key.0);
        if !query.is_empty() {
            req = req.query(query);
        }
        match body {
            Body::None => {}
            Body::Json(v) => req = req.json(v),
            Body::Form(f) => req = req.multipart(f()),
        }
        let resp = req.send().await.map_err(|e| Attempt {
            // reqwest's message without the URL names no header, so the key never leaks.
            error: ProviderError::new(format!(
                "request to {} failed: {}",
                self.platform,
                e.without_url()
            )),
            retry_after: None,
            transient: true,
        })?;
        let status = resp.status();
        let retry_after = retry_after(&resp);
        let text = resp.text().await.unwrap_or_default();
        if !status.is_success() {
            return Err(Attempt {
                error: ProviderError {
                    message: error_message(status, &text),
                    status: Some(status.as_u16()),
                },
                retry_after,
                transient: status == StatusCode::REQUEST_TIMEOUT || status.is_server_error(),
            });
        }
        if text.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&text).map_err(|e| Attempt {
            error: ProviderError::new(format!("{} answered with invalid JSON: {e}", self.platform)),
            retry_after: None,
            transient: false,
        })
    }
}

/// The platform's own words: `message` as a string (Retell, Nest) or a list of strings
/// (Nest validation errors), else a short piece of the body.
pub fn error_message(status: StatusCode, body: &str) -> String {
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let msg = match &v["message"] {
        Value::String(s) => Some(s.clone()),
        Value::Array(items) => {
            let parts: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
            (!parts.is_empty()).then(|| parts.join("; "))
        }
        _ => v["error"].as_str().map(str::to_string),
    };
    msg.unwrap_or_else(|| {
        let snippet: String = body.chars().take(200).collect();
        if snippet.trim().is_empty() {
            status.canonical_reason().unwrap_or("error").to_string()
        } else {
            snippet
        }
    })
}

/// A path segment, percent-encoded (ids are opaque; Retell's phone numbers start with `+`).
pub fn seg(id: &str) -> String {
    const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'~');
    percent_encoding::utf8_percent_encode(id, SEGMENT).to_string()
}

/// Whether an error means the thing is already gone (Retell answers 422 "Cannot find
/// requested asset" where others answer 404).
pub fn is_gone(e: &ProviderError) -> bool {
    e.status == Some(404)
        || (e.status == Some(422) && e.message.to_ascii_lowercase().contains("cannot find"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages_use_the_platforms_words() {
        assert_eq!(
            error_message(
                StatusCode::BAD_REQUEST,
                r#"{"message":["name must be shorter","model should not be empty"],"error":"Bad Request","statusCode":400}"#
            ),
            "name must be shorter; model should not be empty"
        );
        assert_eq!(
            error_message(
                StatusCode::TOO_MANY_REQUESTS,
                r#"{"status":"error","message":"Account rate limited, please throttle your requests."}"#
            ),
            "Account rate limited, please throttle your requests."
        );
        assert_eq!(error_message(StatusCode::BAD_GATEWAY, ""), "Bad Gateway");
        assert_eq!(seg("+14155550100"), "%2B14155550100");
        assert_eq!(seg("agent_a-1.x"), "agent_a-1.x");
        assert_eq!(seg("a/b"), "a%2Fb");
    }
}
