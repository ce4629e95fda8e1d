//! OpenTelemetry traces (`--otlp-endpoint URL`): the service's `tracing` spans become OTLP
//! spans exported over HTTP (protobuf, `URL/v1/traces`) by a batch processor on the tokio
//! runtime. A request's span (resource, action, status, request id) takes its parent from
//! an incoming `traceparent`, and outbound calls (LLM, voice provider, webhooks, fetches)
//! carry the current span's `traceparent` on. Off unless configured: then [`enabled`] is
//! false, no child span is created, and no header is added.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_opentelemetry::OpenTelemetrySpanExt;

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Whether traces are exported (set once at start).
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The exporter and provider of `endpoint` (the collector's base URL, e.g.
/// `http://collector:4318`; spans go to `{endpoint}/v1/traces`). Must run inside the tokio
/// runtime that will carry the exports. Shut the provider down at exit to flush.
pub fn provider(endpoint: &str) -> anyhow::Result<SdkTracerProvider> {
    let base = endpoint.trim_end_matches('/');
    let url = url::Url::parse(base)
        .map_err(|e| anyhow::anyhow!("--otlp-endpoint {endpoint}: not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        anyhow::bail!("--otlp-endpoint {endpoint}: must be an http or https URL");
    }
    let full = if base.ends_with("/v1/traces") {
        base.to_string()
    } else {
        format!("{base}/v1/traces")
    };
    // The collector is the operator's own service: no proxy from the environment, bounded.
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()?;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(client)
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_endpoint(full)
        .build()?;
    let batch = opentelemetry_sdk::trace::BatchConfigBuilder::default()
        .with_scheduled_delay(Duration::from_millis(500))
        .build();
    let processor =
        opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor::builder(
            exporter,
            opentelemetry_sdk::runtime::Tokio,
        )
        .with_batch_config(batch)
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(
            opentelemetry_sdk::Resource::builder()
                .with_service_name("genied")
                .build(),
        )
        .build();
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    ENABLED.store(true, Ordering::Relaxed);
    Ok(provider)
}

/// The `tracing` layer that hands spans to `provider`.
pub fn layer<S>(
    provider: &SdkTracerProvider,
) -> tracing_opentelemetry::OpenTelemetryLayer<S, opentelemetry_sdk::trace::SdkTracer>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    tracing_opentelemetry::layer().with_tracer(provider.tracer("genied"))
}

/// Makes the W3C trace context in `headers` (`traceparent`, `tracestate`) the parent of
/// `span`, when traces are on and the headers carry one.
pub fn adopt_parent(span: &tracing::Span, headers: &axum::http::HeaderMap) {
    if !enabled() || !headers.contains_key("traceparent") {
        return;
    }
    let carrier: HashMap<String, String> = ["traceparent", "tracestate"]
        .iter()
        .filter_map(|k| Some((k.to_string(), headers.get(*k)?.to_str().ok()?.to_string())))
        .collect();
    let cx = TraceContextPropagator::new().extract(&carrier);
    let _ = span.set_parent(cx);
}

/// Adds the current span's `traceparent` to an outbound request, when traces are on.
pub fn inject(mut req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    if !enabled() {
        return req;
    }
    let cx = tracing::Span::current().context();
    let mut carrier: HashMap<String, String> = HashMap::new();
    TraceContextPropagator::new().inject_context(&cx, &mut carrier);
    for (k, v) in carrier {
        req = req.header(k, v);
    }
    req
}
