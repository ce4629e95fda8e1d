//! A small website for the crawler: linked pages with a loop, a robots.txt that disallows
//! `/private`, an off-site link, a page that fails with 503 until told otherwise, and a
//! redirect to loopback. Records every request path and checks each is a GET with genied's
//! user agent.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

#[derive(Clone, Default)]
pub struct SiteState {
    pub hits: Arc<Mutex<Vec<String>>>,
    /// Problems with requests (wrong method, missing user agent); tests assert it is empty.
    pub problems: Arc<Mutex<Vec<String>>>,
    pub flaky_failures_left: Arc<Mutex<u32>>,
    pub addr: Arc<Mutex<String>>,
}

pub struct Website {
    pub base: String,
    pub state: SiteState,
}

impl Website {
    pub async fn start() -> Website {
        let state = SiteState::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        *state.addr.lock().unwrap() = addr.to_string();
        let app = Router::new().fallback(serve).with_state(state.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Website {
            base: format!("http://{addr}"),
            state,
        }
    }
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
    pub fn hits(&self) -> Vec<String> {
        self.state.hits.lock().unwrap().clone()
    }
    pub fn hit_count(&self, path: &str) -> usize {
        self.hits().iter().filter(|p| *p == path).count()
    }
    pub fn problems(&self) -> Vec<String> {
        self.state.problems.lock().unwrap().clone()
    }
    pub fn fail_flaky(&self, times: u32) {
        *self.state.flaky_failures_left.lock().unwrap() = times;
    }
}

fn html(title: &str, body: &str) -> Response {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        format!(
            "<!doctype html><html><head><title>{title}</title><style>body{{color:red}}</style></head><body>\
             <nav><a href=\"/\">Home</a> <a href=\"/a\">Alpha</a> <a href=\"/b\">Beta</a> Navigation menu text</nav>\
             <main>{body}</main><footer>Copyright footer text</footer><script>var tracking = 1;</script></body></html>"
        ),
    )
        .into_response()
}

async fn serve(State(s): State<SiteState>, req: Request) -> Response {
    let path = req.uri().path().to_string();
    if req.method() != axum::http::Method::GET {
        s.problems
            .lock()
            .unwrap()
            .push(format!("{} {path}", req.method()));
    }
    let ua = req
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !ua.starts_with("genied/") {
        s.problems
            .lock()
            .unwrap()
            .push(format!("user agent '{ua}' on {path}"));
    }
    s.hits.lock().unwrap().push(path.clone());
    let addr = s.addr.lock().unwrap().clone();
    match path.as_str() {
        "/robots.txt" => "User-agent: *\nDisallow: /private\n".into_response(),
        "/" => html(
            "Home page",
            "<h1>Welcome to Zephyr Widgets</h1><p>Zephyr widgets are hand made in Lisbon.</p>\
             <a href=\"/a\">Alpha</a> <a href=\"/b#section\">Beta</a> <a href=\"/private/secret\">Secret</a>\
             <a href=\"http://other.invalid/page\">Elsewhere</a> <a href=\"mailto:x@example.com\">Mail</a>",
        ),
        "/a" => html(
            "Alpha",
            "<p>Alpha page explains the quartz gearbox.</p><a href=\"/\">Home</a><a href=\"/a/deep\">Deeper</a>",
        ),
        "/b" => html(
            "Beta",
            "<p>Beta page lists the cobalt springs.</p><a href=\"/a\">Alpha again</a><a href=\"/b\">Self</a>",
        ),
        "/a/deep" => html(
            "Deep",
            "<p>The deep page mentions obsidian levers.</p><a href=\"/a/deep/deeper\">Deeper</a>",
        ),
        "/a/deep/deeper" => html("Deeper", "<p>Too deep to be crawled with depth two.</p>"),
        "/private/secret" => html("Secret", "<p>Classified plutonium recipe.</p>"),
        "/plain.txt" => (
            [(header::CONTENT_TYPE, "text/plain")],
            "Plain text about saffron.",
        )
            .into_response(),
        "/flaky" => {
            let mut left = s.flaky_failures_left.lock().unwrap();
            if *left > 0 {
                *left -= 1;
                return (StatusCode::SERVICE_UNAVAILABLE, "try later").into_response();
            }
            html(
                "Flaky",
                "<p>The flaky page finally talks about tangerine dreams.</p>",
            )
        }
        "/to-loopback" => (
            StatusCode::FOUND,
            [(
                header::LOCATION,
                format!("http://127.0.0.1:{}/", addr.rsplit(':').next().unwrap()),
            )],
        )
            .into_response(),
        "/missing" => (StatusCode::NOT_FOUND, "nope").into_response(),
        _ => (StatusCode::NOT_FOUND, "not found").into_response(),
    }
}
