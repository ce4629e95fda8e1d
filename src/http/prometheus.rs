//! Metrics over HTTP: the layer that counts and times every request (added only with
//! `--metrics-listen`), and the second listener's router, which serves `GET /metrics` and
//! nothing else, so the figures never share a port with the API.

use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::envelope::RouteLabels;
use crate::db;
use crate::state::AppState;
use crate::telemetry::prom;

/// Counts and times one request, labelled by the resource and action the envelope handler
/// found in the action tables, or by the family of route for the other routes.
pub async fn track(req: Request, next: Next) -> Response {
    let started = Instant::now();
    let family = route_family(req.uri().path());
    let resp = next.run(req).await;
    let (resource, action) = match resp.extensions().get::<RouteLabels>() {
        Some(l) => (l.resource, l.action),
        None => ("http", family),
    };
    prom::http_request(resource, action, resp.status().as_u16(), started.elapsed());
    resp
}

/// A fixed name for each group of routes outside the envelope (never the path itself,
/// which holds ids and slugs).
fn route_family(path: &str) -> &'static str {
    match path {
        "/healthz" => "healthz",
        "/readyz" => "readyz",
        "/v1" => "envelope",
        "/v1/openapi.json" => "openapi",
        "/v1/knowledge-base/upload" => "upload",
        p if p.starts_with("/v1/auth/") => "auth",
        p if p.starts_with("/v1/hooks/") => "hooks",
        p if p.starts_with("/v1/qr-code/") && p.contains("/image.") => "qr_image",
        p if p.starts_with("/v1/") => "rest",
        p if p.starts_with("/g/") => "public_page",
        p if p == "/" || p.starts_with("/console") => "console",
        _ => "other",
    }
}

/// The router of `--metrics-listen`.
pub fn router(app: AppState) -> Router {
    Router::new()
        .route("/metrics", get(scrape))
        .fallback(|| async { crate::api::error::rejection(StatusCode::NOT_FOUND, None) })
        .method_not_allowed_fallback(|| async {
            crate::api::error::rejection(StatusCode::METHOD_NOT_ALLOWED, None)
        })
        .with_state(app)
}

/// Refreshes the gauges read from the database (the job queue, conversations under way),
/// then renders every metric.
async fn scrape(State(app): State<AppState>) -> Response {
    let now = chrono::Utc::now();
    let stamp = db::fmt_time(now);
    let read = app
        .db
        .read(move |c| {
            Ok((
                db::telemetry::job_counts(c, &stamp)?,
                db::telemetry::active_conversations(c)?,
            ))
        })
        .await;
    match read {
        Ok((jobs, active)) => {
            let gauges: Vec<prom::JobGauge> = jobs
                .into_iter()
                .map(|j| prom::JobGauge {
                    oldest_due_age_seconds: j
                        .oldest_due
                        .as_deref()
                        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                        .map_or(0.0, |t| {
                            (now - t.with_timezone(&chrono::Utc))
                                .to_std()
                                .unwrap_or(Duration::ZERO)
                                .as_secs_f64()
                        }),
                    kind: j.kind,
                    state: j.state,
                    count: j.count,
                })
                .collect();
            prom::set_jobs(&gauges);
            prom::set_conversations_active(active);
        }
        // The rest of the figures are still worth having; the log says why these are stale.
        Err(e) => tracing::warn!(error = %e, "metrics: could not read the job queue"),
    }
    match prom::render() {
        Some(text) => (
            [(
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        None => crate::api::error::rejection(StatusCode::NOT_FOUND, None),
    }
}

/// Serves the metrics router on `listener` until `stop` says so, draining histogram samples
/// every few seconds in between scrapes.
pub async fn serve(
    app: AppState,
    listener: tokio::net::TcpListener,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut stop2 = stop.clone();
    let upkeep = tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(5)) => prom::upkeep(),
                _ = stop2.changed() => return,
            }
        }
    });
    let served = axum::serve(listener, router(app))
        .with_graceful_shutdown(async move {
            let _ = stop.changed().await;
        })
        .await;
    if let Err(e) = served {
        tracing::error!(error = %e, "metrics listener");
    }
    let _ = upkeep.await;
}
