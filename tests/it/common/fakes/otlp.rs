//! A fake OpenTelemetry collector: `POST /v1/traces` with an OTLP/HTTP protobuf body, as
//! genied's exporter sends with `--otlp-endpoint`. Every request is checked (method, path,
//! content type, a body that decodes as `ExportTraceServiceRequest`), and the spans it
//! carries are recorded flat, with their ids in hex and their attributes as text.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use prost::Message;

#[derive(Debug, Clone)]
pub struct Span {
    pub name: String,
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    pub attributes: BTreeMap<String, String>,
    /// The service name of the resource the span came with.
    pub service: String,
}

#[derive(Default)]
struct St {
    spans: Vec<Span>,
    problems: Vec<String>,
}

#[derive(Clone)]
pub struct FakeCollector {
    /// What to pass as `--otlp-endpoint`.
    pub base: String,
    st: Arc<Mutex<St>>,
}

fn text(v: &Option<opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match v.as_ref().and_then(|v| v.value.as_ref()) {
        Some(AnyValue::StringValue(s)) => s.clone(),
        Some(AnyValue::IntValue(i)) => i.to_string(),
        Some(AnyValue::BoolValue(b)) => b.to_string(),
        Some(AnyValue::DoubleValue(d)) => d.to_string(),
        other => format!("{other:?}"),
    }
}

impl FakeCollector {
    pub async fn start() -> FakeCollector {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let fake = FakeCollector {
            base: format!("http://{}", listener.local_addr().unwrap()),
            st: Arc::default(),
        };
        // A fallback, not a route, so that wrong methods and paths are recorded as problems.
        let app = Router::new().fallback(receive).with_state(fake.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        fake
    }

    pub fn spans(&self) -> Vec<Span> {
        self.st.lock().unwrap().spans.clone()
    }

    pub fn problems(&self) -> Vec<String> {
        self.st.lock().unwrap().problems.clone()
    }
}

async fn receive(
    State(fake): State<FakeCollector>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let mut problems = Vec::new();
    if method != Method::POST {
        problems.push(format!("method {method}, want POST"));
    }
    if uri.path() != "/v1/traces" {
        problems.push(format!("path {}, want /v1/traces", uri.path()));
    }
    let ct = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if ct != "application/x-protobuf" {
        problems.push(format!("content-type {ct:?}, want application/x-protobuf"));
    }
    let req = match ExportTraceServiceRequest::decode(body.as_ref()) {
        Ok(r) => r,
        Err(e) => {
            problems.push(format!("body is not an ExportTraceServiceRequest: {e}"));
            ExportTraceServiceRequest::default()
        }
    };
    let mut st = fake.st.lock().unwrap();
    for rs in req.resource_spans {
        let service = rs
            .resource
            .as_ref()
            .and_then(|r| r.attributes.iter().find(|a| a.key == "service.name"))
            .map(|a| text(&a.value))
            .unwrap_or_default();
        for ss in rs.scope_spans {
            for s in ss.spans {
                st.spans.push(Span {
                    name: s.name,
                    trace_id: hex::encode(&s.trace_id),
                    span_id: hex::encode(&s.span_id),
                    parent_span_id: hex::encode(&s.parent_span_id),
                    attributes: s
                        .attributes
                        .iter()
                        .map(|a| (a.key.clone(), text(&a.value)))
                        .collect(),
                    service: service.clone(),
                });
            }
        }
    }
    let bad = !problems.is_empty();
    st.problems.extend(problems);
    if bad {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    }
}
