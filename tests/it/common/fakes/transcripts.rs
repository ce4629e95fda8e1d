//! A stand-in for the YouTube timed-text endpoint: `GET /api/timedtext?v=<id>&lang=en`
//! answers the XML transcript of known videos and 404 for others. Records every query and
//! notes any request that is not such a GET.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};

pub const VIDEO_ID: &str = "dQw4w9WgXcQ";

#[derive(Clone, Default)]
pub struct TState {
    pub queries: Arc<Mutex<Vec<(String, String)>>>,
    pub problems: Arc<Mutex<Vec<String>>>,
}

pub struct Transcripts {
    pub base: String,
    pub state: TState,
}

impl Transcripts {
    pub async fn start() -> Transcripts {
        let state = TState::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new()
            .route("/api/timedtext", axum::routing::any(timedtext))
            .fallback(
                |m: Method, uri: axum::http::Uri, State(s): State<TState>| async move {
                    s.problems.lock().unwrap().push(format!("{m} {uri}"));
                    StatusCode::NOT_FOUND
                },
            )
            .with_state(state.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Transcripts {
            base: format!("http://{addr}"),
            state,
        }
    }
    /// The template for `--youtube-transcript-url`.
    pub fn template(&self) -> String {
        format!("{}/api/timedtext?lang=en&v={{video_id}}", self.base)
    }
}

async fn timedtext(
    m: Method,
    State(s): State<TState>,
    Query(q): Query<std::collections::HashMap<String, String>>,
) -> Response {
    if m != Method::GET {
        s.problems.lock().unwrap().push(format!("method {m}"));
    }
    let v = q.get("v").cloned().unwrap_or_default();
    let lang = q.get("lang").cloned().unwrap_or_default();
    s.queries.lock().unwrap().push((v.clone(), lang.clone()));
    if v != VIDEO_ID || lang != "en" {
        return (StatusCode::NOT_FOUND, "").into_response();
    }
    (
        [(header::CONTENT_TYPE, "text/xml; charset=UTF-8")],
        "<?xml version=\"1.0\" encoding=\"utf-8\" ?><transcript>\
         <text start=\"0.5\" dur=\"2.1\">Never gonna give you up</text>\
         <text start=\"2.6\" dur=\"2.0\">it&amp;#39;s about the marmalade &amp;amp; toast</text>\
         <text start=\"4.6\" dur=\"1.0\"></text>\
         </transcript>",
    )
        .into_response()
}
