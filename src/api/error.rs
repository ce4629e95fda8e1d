//! The API edge of errors: a domain [`Kind`] becomes an HTTP status and an envelope code
//! (interface.md's error table) here and nowhere else, and every error leaves the service as
//! `{success: false, error: {code, message, status}}`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::error::{ApiError, Kind};

/// The HTTP status of a kind.
pub fn status(kind: Kind) -> StatusCode {
    match kind {
        Kind::Validation | Kind::InvalidResource | Kind::InvalidAction => StatusCode::BAD_REQUEST,
        Kind::Unauthorized
        | Kind::InvalidKeyPrefix
        | Kind::KeyNotFound
        | Kind::InvalidToken
        | Kind::InvalidCredentials => StatusCode::UNAUTHORIZED,
        Kind::Forbidden => StatusCode::FORBIDDEN,
        Kind::NotFound | Kind::AgentNotFound => StatusCode::NOT_FOUND,
        Kind::Conflict => StatusCode::CONFLICT,
        Kind::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        Kind::RateLimited | Kind::CallRateLimited => StatusCode::TOO_MANY_REQUESTS,
        Kind::Upstream => StatusCode::BAD_GATEWAY,
        Kind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        Kind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// The envelope's error code of a kind.
pub fn code(kind: Kind) -> &'static str {
    match kind {
        Kind::Validation => "VALIDATION_ERROR",
        Kind::InvalidResource => "INVALID_RESOURCE",
        Kind::InvalidAction => "INVALID_ACTION",
        Kind::Unauthorized => "UNAUTHORIZED",
        Kind::InvalidKeyPrefix => "INVALID_KEY_PREFIX",
        Kind::KeyNotFound => "KEY_NOT_FOUND",
        Kind::InvalidToken => "INVALID_TOKEN",
        Kind::InvalidCredentials => "INVALID_CREDENTIALS",
        Kind::Forbidden => "FORBIDDEN",
        Kind::NotFound => "NOT_FOUND",
        Kind::AgentNotFound => "AGENT_NOT_FOUND",
        Kind::Conflict => "CONFLICT",
        Kind::PayloadTooLarge => "PAYLOAD_TOO_LARGE",
        Kind::RateLimited => "RATE_LIMIT_EXCEEDED",
        Kind::CallRateLimited => "CALL_RATE_LIMIT_EXCEEDED",
        Kind::Upstream => "UPSTREAM_ERROR",
        Kind::Internal => "INTERNAL_ERROR",
        Kind::Unavailable => "SERVICE_UNAVAILABLE",
    }
}

impl ApiError {
    /// The envelope code this error is sent with.
    pub fn code(&self) -> &'static str {
        code(self.kind)
    }
    pub fn status(&self) -> StatusCode {
        status(self.kind)
    }
}

fn envelope(status: StatusCode, code: &str, message: &str) -> Response {
    let body = json!({
        "success": false,
        "error": {"code": code, "message": message, "status": status.as_u16()},
    });
    (status, axum::Json(body)).into_response()
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut resp = envelope(self.status(), self.code(), &self.message);
        if let Some(secs) = self.retry_after {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        resp
    }
}

/// The envelope for an HTTP status produced outside our handlers (unknown path, wrong
/// method, a tower layer's timeout, an extractor's rejection); `message` replaces the
/// generic one when the rejection named the problem. Server errors are all 500.
pub fn rejection(status: StatusCode, message: Option<String>) -> Response {
    let (code, generic) = match status.as_u16() {
        400 => ("VALIDATION_ERROR", "bad request"),
        401 => ("UNAUTHORIZED", "authentication required"),
        403 => ("FORBIDDEN", "forbidden"),
        404 => ("NOT_FOUND", "Resource not found"),
        405 => ("METHOD_NOT_ALLOWED", "method not allowed on this path"),
        408 => ("REQUEST_TIMEOUT", "request took too long"),
        413 => ("PAYLOAD_TOO_LARGE", "request body too large"),
        415 => ("VALIDATION_ERROR", "content type must be application/json"),
        422 => ("VALIDATION_ERROR", "request could not be processed"),
        429 => ("RATE_LIMIT_EXCEEDED", "rate limit exceeded"),
        s if s >= 500 => ("INTERNAL_ERROR", "internal server error"),
        _ => ("VALIDATION_ERROR", "request failed"),
    };
    let status = if status.is_server_error() {
        StatusCode::INTERNAL_SERVER_ERROR
    } else {
        status
    };
    envelope(status, code, message.as_deref().unwrap_or(generic))
}
