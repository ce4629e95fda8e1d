//! The HTTP surface: routes, and the layers every request passes through (request id,
//! tracing, panic capture, timeout, body limit). Whatever goes wrong, the client gets the
//! JSON error envelope: `fix_envelope` rewrites any non-JSON error a layer or axum made.

pub mod auth_routes;
pub mod console;
pub mod envelope;
pub mod hooks;
pub mod openapi;
pub mod prometheus;
pub mod public_page;
mod repoll;
pub mod rest;
pub mod server;
pub mod upload;

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::{Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router, middleware};
use serde_json::json;
use tower::ServiceBuilder;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

use crate::error::ApiError;
use crate::state::AppState;

/// Every route of the service; `extra` adds routes on top of them (tests mount handlers that
/// misbehave on purpose). The whole HTTP surface is wired here, not in the composition root.
pub fn router(app: AppState, extra: Router<AppState>) -> Router {
    let c = &app.config;
    let (max_body, timeout) = (
        c.max_body_bytes,
        Duration::from_secs(c.request_timeout_seconds),
    );
    let metrics = crate::telemetry::prom::enabled();
    let routes = Router::new()
        .route("/healthz", get(|| async { Json(json!({"status": "ok"})) }))
        .route("/readyz", get(readyz))
        .route("/v1", post(envelope::handle))
        .route("/v1/auth/login", post(auth_routes::login))
        .route("/v1/auth/refresh", post(auth_routes::refresh))
        .route("/v1/auth/logout", post(auth_routes::logout))
        .route("/v1/auth/forgot-password", post(auth_routes::forgot_password))
        .route("/v1/auth/reset-password", post(auth_routes::reset_password))
        .route("/v1/auth/confirm-email", post(auth_routes::confirm_email))
        .route("/v1/auth/accept-invitation", post(auth_routes::accept_invitation))
        .route("/v1/auth/config", get(auth_routes::config))
        .route("/v1/auth/oidc/authorize", get(auth_routes::oidc_authorize))
        .route("/v1/auth/oidc/callback", get(auth_routes::oidc_callback))
        .route("/v1/auth/oidc/exchange", post(auth_routes::oidc_exchange))
        .route("/v1/openapi.json", get(openapi::serve))
        .route("/v1/{resource}", get(rest::list).post(rest::create))
        .route("/v1/{resource}/{id}", get(rest::get).patch(rest::update).delete(rest::delete))
        .route("/v1/{resource}/{id}/{action}", post(rest::action))
        .merge(public_page::routes())
        .merge(console::routes())
        .merge(upload::routes())
        .merge(hooks::routes())
        .merge(extra)
        .fallback(|| async { crate::api::error::rejection(StatusCode::NOT_FOUND, None) })
        .method_not_allowed_fallback(|| async { crate::api::error::rejection(StatusCode::METHOD_NOT_ALLOWED, None) })
        .layer(DefaultBodyLimit::max(max_body))
        .with_state(app)
        .layer(
            ServiceBuilder::new()
                .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
                .layer(InFlightLayer)
                .layer(TraceLayer::new_for_http().make_span_with(|req: &Request<_>| {
                    // The span is the request's trace, made only while traces are exported;
                    // otherwise a log line learns its request from `InFlightLayer`'s context.
                    if !crate::telemetry::trace::enabled() {
                        return tracing::Span::none();
                    }
                    let id = req.headers().get("x-request-id").and_then(|v| v.to_str().ok()).unwrap_or("-");
                    // `resource` and `action` are filled in by the envelope handler.
                    let span = tracing::info_span!("request", request_id = %id, method = %req.method(), path = %req.uri().path(), resource = tracing::field::Empty, action = tracing::field::Empty, status = tracing::field::Empty);
                    crate::telemetry::trace::adopt_parent(&span, req.headers());
                    span
                }).on_response(|resp: &Response<_>, _: Duration, span: &tracing::Span| {
                    if crate::telemetry::trace::enabled() {
                        span.record("status", resp.status().as_u16());
                    }
                }))
                .layer(PropagateRequestIdLayer::x_request_id())
                .layer(tower::util::AndThenLayer::new(fix_envelope))
                .layer(CatchPanicLayer::custom(|_: Box<dyn std::any::Any + Send>| {
                    ApiError::internal("a handler panicked").into_response()
                }))
                .layer(TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, timeout)),
        );
    // Only with metrics on: off, a request pays nothing for them.
    if metrics {
        routes.layer(middleware::from_fn(prometheus::track))
    } else {
        routes
    }
}

/// The layer that counts each request in `telemetry::load` until its answer is made (or it
/// is dropped), and serves it as a `telemetry::context` request: the log lines written
/// meanwhile, from the layers inside this one (the panic catcher's, the failure log) down to
/// the handler's, carry its id, method, path and, once named, resource and action. While
/// traces are exported the request's span does that instead. A `tower` layer rather than
/// `middleware::from_fn`, which boxes the inner service and its future for every request.
#[derive(Clone, Copy)]
struct InFlightLayer;

impl<S> tower::Layer<S> for InFlightLayer {
    type Service = InFlight<S>;
    fn layer(&self, inner: S) -> InFlight<S> {
        InFlight(inner)
    }
}

#[derive(Clone)]
struct InFlight<S>(S);

impl<S, B> tower::Service<Request<B>> for InFlight<S>
where
    S: tower::Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Counted<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        use crate::telemetry::context::{self, RequestContext};
        let counted = crate::telemetry::load::Request::begin();
        let request = (!crate::telemetry::trace::enabled()).then(|| {
            RequestContext::new(req.headers().get("x-request-id"), req.method(), req.uri())
        });
        Counted {
            _counted: counted,
            inner: context::scope(request, self.0.call(req)),
        }
    }
}

pin_project_lite::pin_project! {
    /// A request's future, counted in flight while it lives.
    struct Counted<F> {
        _counted: crate::telemetry::load::Request,
        #[pin]
        inner: crate::telemetry::context::Scoped<F>,
    }
}

impl<F: Future> Future for Counted<F> {
    type Output = F::Output;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.project().inner.poll(cx)
    }
}

/// Ready when the database takes a write and the job worker is not stalled
/// (`jobs::stalled`); otherwise 503 with the envelope saying which.
async fn readyz(State(app): State<AppState>) -> Response {
    match ready(&app).await {
        Ok(()) => Json(json!({"status": "ready"})).into_response(),
        Err(e) => e.into_response(),
    }
}

/// How long readiness waits for the database before it says it cannot write.
const READY_WRITE_LIMIT: Duration = Duration::from_secs(5);

async fn ready(app: &AppState) -> Result<(), ApiError> {
    use crate::error::Kind;
    let unavailable = |m: String| ApiError::new(Kind::Unavailable, m);
    // A real write (the worker's heartbeat row, with the beat it holds), so a read-only or
    // full disk, a lock held by another process or a stopped writer all show here.
    let at = crate::db::fmt_time(app.worker_beat.last());
    let write = app
        .db
        .write(move |c| Ok(crate::db::telemetry::beat(c, &at, false)?));
    match tokio::time::timeout(READY_WRITE_LIMIT, write).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "readiness: the database cannot be written");
            return Err(unavailable(
                "the database cannot be written (see the service log)".into(),
            ));
        }
        Err(_) => {
            return Err(unavailable(format!(
                "the database did not take a write within {} s",
                READY_WRITE_LIMIT.as_secs()
            )));
        }
    }
    let now = chrono::Utc::now();
    let stamp = crate::db::fmt_time(now);
    let due = app
        .db
        .read(move |c| Ok(crate::db::telemetry::oldest_due(c, &stamp)?))
        .await
        .map_err(|e| unavailable(format!("the database cannot be read: {}", e.message)))?;
    let due = due
        .as_deref()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&chrono::Utc));
    let stall = Duration::from_secs(app.config.job_stall_seconds);
    match crate::jobs::stalled(due, Some(app.worker_beat.last()), now, stall) {
        Some(why) => Err(unavailable(why)),
        None => Ok(()),
    }
}

/// The future of `fix_envelope`: ready at once for a response that needs no fixing (nearly
/// all), boxed only for one whose body must be read first.
type Fixed = futures_util::future::Either<
    std::future::Ready<Result<Response, Infallible>>,
    futures_util::future::BoxFuture<'static, Result<Response, Infallible>>,
>;

/// Any error response that is not already JSON becomes the envelope for its status. Run by
/// `tower`'s `and_then` rather than `middleware::map_response`, which boxes every request's
/// future to allow for the rare response that needs an `await`.
fn fix_envelope<B>(resp: Response<B>) -> Fixed
where
    B: axum::body::HttpBody<Data = axum::body::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    use futures_util::future::Either;
    let resp = resp.map(axum::body::Body::new);
    // The public genie page (`/g/{slug}`) answers browsers with HTML, its 404 included.
    if resp.extensions().get::<public_page::KeepBody>().is_some() {
        return Either::Left(std::future::ready(Ok(resp)));
    }
    let status = resp.status();
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return Either::Left(std::future::ready(Ok(resp)));
    }
    Either::Right(Box::pin(async move {
        let allow = resp.headers().get(header::ALLOW).cloned();
        let mut fixed = crate::api::error::rejection(status, rejection_text(resp).await);
        if let Some(allow) = allow {
            fixed.headers_mut().insert(header::ALLOW, allow);
        }
        Ok(fixed)
    }))
}

/// The reason axum gave for refusing a request (its extractor rejections answer 4xx with
/// a short `text/plain` body such as "Invalid URL: Invalid UTF-8 in `id`"), so the
/// envelope names the problem instead of saying "bad request". Server errors keep the
/// generic message: their text may be internal.
async fn rejection_text(resp: Response) -> Option<String> {
    const MAX: usize = 1024;
    let is_text = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/plain"));
    if !resp.status().is_client_error() || !is_text {
        return None;
    }
    let bytes = axum::body::to_bytes(resp.into_body(), MAX).await.ok()?;
    let text = std::str::from_utf8(&bytes).ok()?.trim();
    (!text.is_empty()).then(|| text.to_string())
}
