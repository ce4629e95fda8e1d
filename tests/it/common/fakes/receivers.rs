//! Webhook receivers on 127.0.0.1, one server for many endpoints (`/hook/{n}`), that check
//! every delivery as docs/api.md tells receivers to (POST, JSON, the `Genied-*` headers, the
//! signature under that endpoint's secret, the event type in the header and the body agree)
//! and record, per endpoint, the events they got; for counting deliveries by event id.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::Path;
use axum::http::{HeaderMap, Method, StatusCode};
use serde_json::Value;

/// One delivery an endpoint accepted.
#[derive(Debug, Clone)]
pub struct Delivered {
    pub endpoint: usize,
    /// `Genied-Delivery`: one per fan-out to an endpoint (a retry repeats it).
    pub delivery: String,
    pub event: Value,
}

#[derive(Clone, Default)]
pub struct Receivers {
    base: String,
    secrets: Arc<Mutex<HashMap<usize, String>>>,
    got: Arc<Mutex<Vec<Delivered>>>,
    problems: Arc<Mutex<Vec<String>>>,
}

impl Receivers {
    pub async fn start() -> Receivers {
        let r = Receivers::default();
        let me = r.clone();
        let app = axum::Router::new().route(
            "/hook/{n}",
            axum::routing::any(
                move |method: Method, Path(n): Path<usize>, headers: HeaderMap, body: String| {
                    let me = me.clone();
                    async move { me.receive(method, n, &headers, body) }
                },
            ),
        );
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", l.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
        Receivers { base, ..r }
    }

    /// Endpoint `n`'s URL.
    pub fn url(&self, n: usize) -> String {
        format!("{}/hook/{n}", self.base)
    }

    /// The signing secret genied gave endpoint `n` (deliveries before it is known are
    /// problems).
    pub fn set_secret(&self, n: usize, secret: &str) {
        self.secrets.lock().unwrap().insert(n, secret.to_string());
    }

    fn receive(&self, method: Method, n: usize, headers: &HeaderMap, body: String) -> StatusCode {
        let mut problems = Vec::new();
        if method != Method::POST {
            problems.push(format!("{method} instead of POST"));
        }
        let header = |h: &str| headers.get(h).and_then(|v| v.to_str().ok()).unwrap_or("");
        if header("content-type") != "application/json" {
            problems.push(format!("content-type {:?}", header("content-type")));
        }
        if header("genied-delivery").is_empty() {
            problems.push("no Genied-Delivery".into());
        }
        let secret = self.secrets.lock().unwrap().get(&n).cloned();
        match secret {
            Some(s) if verify(header("genied-signature"), &s, &body) => {}
            Some(_) => problems.push("the signature does not verify".into()),
            None => problems.push(format!("a delivery to endpoint {n} before it was created")),
        }
        let event: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        if event["type"].as_str() != Some(header("genied-event")) || !event["id"].is_string() {
            problems.push(format!("event and Genied-Event disagree: {body}"));
        }
        if problems.is_empty() {
            let delivery = header("genied-delivery").to_string();
            self.got.lock().unwrap().push(Delivered {
                endpoint: n,
                delivery,
                event,
            });
            StatusCode::OK
        } else {
            let mut p = self.problems.lock().unwrap();
            p.extend(problems.into_iter().map(|e| format!("endpoint {n}: {e}")));
            StatusCode::BAD_REQUEST
        }
    }

    /// Every accepted delivery, in arrival order.
    pub fn delivered(&self) -> Vec<Delivered> {
        self.got.lock().unwrap().clone()
    }

    /// How many times each (endpoint, event id) was delivered.
    pub fn per_event(&self) -> HashMap<(usize, String), usize> {
        let mut m = HashMap::new();
        for d in self.delivered() {
            let id = d.event["id"].as_str().unwrap_or_default().to_string();
            *m.entry((d.endpoint, id)).or_default() += 1;
        }
        m
    }

    /// The distinct deliveries (`Genied-Delivery`) each (endpoint, event id) got.
    pub fn deliveries_per_event(&self) -> HashMap<(usize, String), Vec<String>> {
        let mut m: HashMap<(usize, String), Vec<String>> = HashMap::new();
        for d in self.delivered() {
            let id = d.event["id"].as_str().unwrap_or_default().to_string();
            let ds = m.entry((d.endpoint, id)).or_default();
            if !ds.contains(&d.delivery) {
                ds.push(d.delivery);
            }
        }
        m
    }

    /// Fails the test on any delivery that broke the contract.
    pub fn assert_no_problems(&self) {
        let p = self.problems.lock().unwrap();
        assert!(p.is_empty(), "bad deliveries: {p:?}");
    }
}

/// Verifies a delivery's `genied-signature` header the way docs/api.md tells receivers to:
/// `t=<unix>,v1=<hex>`, HMAC-SHA256 of `"{t}.{body}"`, within five minutes. The one
/// test-side verifier (webhooks.rs uses it too).
pub fn verify(header: &str, secret: &str, body: &str) -> bool {
    let mut t = None;
    let mut v1 = None;
    for part in header.split(',') {
        match part.split_once('=') {
            Some(("t", v)) => t = v.parse::<i64>().ok(),
            Some(("v1", v)) => v1 = Some(v.to_string()),
            _ => {}
        }
    }
    let (Some(t), Some(v1)) = (t, v1) else {
        return false;
    };
    (chrono::Utc::now().timestamp() - t).abs() < 300
        && genied::webhooks::signature(secret, t, body) == v1
}
