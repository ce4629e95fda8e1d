//! The web console: a single-page app of plain ES modules and CSS under `assets/console/`,
//! embedded at build time and served at `/console` (`GET /` redirects there). It talks to the
//! same public API as any client (`/v1`, `/v1/auth/*`, the multipart upload); nothing here
//! reads the database. Static files live under `/console/static/`; every other path under
//! `/console` answers the app's HTML shell, so client-side routes survive a reload.
//!
//! Every console response carries a strict Content-Security-Policy: scripts and styles only
//! from this origin (no inline code), requests only to this origin, no frames, no plugins.

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

use crate::state::AppState;

/// The policy of every console response. `img-src blob: data:` lets the page show QR images it
/// fetched with its own credentials; nothing else may come from anywhere but this origin.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self' blob: data:; connect-src 'self'; font-src 'self'; manifest-src 'self'; \
    base-uri 'none'; form-action 'self'; frame-ancestors 'none'; object-src 'none'";

const INDEX: &str = include_str!("../../assets/console/index.html");

/// The embedded files: name under `/console/static/`, content type, body.
pub const FILES: &[(&str, &str, &str)] = &[
    ("app.js", JS, include_str!("../../assets/console/app.js")),
    ("api.js", JS, include_str!("../../assets/console/api.js")),
    ("ui.js", JS, include_str!("../../assets/console/ui.js")),
    (
        "genies.js",
        JS,
        include_str!("../../assets/console/genies.js"),
    ),
    (
        "documents.js",
        JS,
        include_str!("../../assets/console/documents.js"),
    ),
    (
        "leads.js",
        JS,
        include_str!("../../assets/console/leads.js"),
    ),
    ("keys.js", JS, include_str!("../../assets/console/keys.js")),
    (
        "notifications.js",
        JS,
        include_str!("../../assets/console/notifications.js"),
    ),
    (
        "conversations.js",
        JS,
        include_str!("../../assets/console/conversations.js"),
    ),
    ("more.js", JS, include_str!("../../assets/console/more.js")),
    (
        "versions.js",
        JS,
        include_str!("../../assets/console/versions.js"),
    ),
    (
        "analytics.js",
        JS,
        include_str!("../../assets/console/analytics.js"),
    ),
    (
        "console.css",
        CSS,
        include_str!("../../assets/console/console.css"),
    ),
    (
        "icon.svg",
        SVG,
        include_str!("../../assets/console/icon.svg"),
    ),
];

const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const SVG: &str = "image/svg+xml";

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(|| async { Redirect::to("/console") }))
        .route("/console", get(shell))
        .route("/console/", get(shell))
        .route("/console/static/{file}", get(file))
        .route("/console/{*path}", get(shell))
}

fn secure(mut resp: Response, cache: &'static str) -> Response {
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    resp
}

async fn shell() -> Response {
    secure(
        ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], INDEX).into_response(),
        "no-store",
    )
}

async fn file(Path(name): Path<String>) -> Response {
    match FILES.iter().find(|(n, _, _)| *n == name) {
        // Short-lived cache: a new binary may ship new files under the same names.
        Some((_, ct, body)) => secure(
            ([(header::CONTENT_TYPE, *ct)], *body).into_response(),
            "public, max-age=60",
        ),
        None => crate::api::error::rejection(StatusCode::NOT_FOUND, None),
    }
}
