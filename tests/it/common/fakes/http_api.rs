//! A fake third-party HTTP API for credential injection: each route expects one header with
//! one value and answers 401 otherwise. It records every request (method, path, headers,
//! body) and echoes the headers it got, so tests can check redaction too. Paths under
//! `/slow` answer after 20 s (tool timeouts).

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::IntoResponse;
use serde_json::{Value, json};

#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct St {
    /// (path prefix, header, expected value)
    expect: Vec<(String, String, String)>,
    seen: Vec<Seen>,
}

#[derive(Clone)]
pub struct FakeApi {
    pub base: String,
    st: Arc<Mutex<St>>,
}

impl FakeApi {
    pub async fn start() -> FakeApi {
        let st = Arc::new(Mutex::new(St::default()));
        let app = Router::new().fallback(handle).with_state(st.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        FakeApi {
            base: format!("http://{addr}"),
            st,
        }
    }
    /// Requests under `prefix` must carry `header: value`.
    pub fn expect(&self, prefix: &str, header: &str, value: &str) {
        self.st.lock().unwrap().expect.push((
            prefix.into(),
            header.to_ascii_lowercase(),
            value.into(),
        ));
    }
    pub fn seen(&self) -> Vec<Seen> {
        self.st.lock().unwrap().seen.clone()
    }
}

async fn handle(
    State(st): State<Arc<Mutex<St>>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> impl IntoResponse {
    let seen = Seen {
        method: method.to_string(),
        path: uri.path().to_string(),
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string()))
            .collect(),
        body: String::from_utf8_lossy(&body).into_owned(),
    };
    // A slow endpoint, for timeouts: answers after 20 s.
    if seen.path.starts_with("/slow") {
        st.lock().unwrap().seen.push(seen.clone());
        tokio::time::sleep(std::time::Duration::from_secs(20)).await;
        return (StatusCode::OK, axum::Json(json!({"late": true})));
    }
    let mut s = st.lock().unwrap();
    s.seen.push(seen.clone());
    let echo: Value = seen
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect::<serde_json::Map<_, _>>()
        .into();
    for (prefix, h, v) in &s.expect {
        if seen.path.starts_with(prefix.as_str()) && seen.header(h) != Some(v.as_str()) {
            return (
                StatusCode::UNAUTHORIZED,
                axum::Json(json!({"error": "bad credentials", "headers": echo})),
            );
        }
    }
    (
        StatusCode::OK,
        axum::Json(
            json!({"ok": true, "method": seen.method, "path": seen.path, "body": seen.body, "headers": echo}),
        ),
    )
}
