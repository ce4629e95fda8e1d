//! The one error type of the service. Every failure a client can see is an `ApiError`, and
//! this is the only place that turns one into the `{success: false, error: {...}}` envelope.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// Seconds a rate-limited client should wait; rendered as `Retry-After`.
    pub retry_after: Option<u64>,
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }
    pub fn validation(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "VALIDATION_ERROR", message)
    }
    pub fn invalid_resource(resource: &str) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "INVALID_RESOURCE",
            format!("unknown resource '{resource}'"),
        )
    }
    pub fn invalid_action(resource: &str, action: &str) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "INVALID_ACTION",
            format!("unknown action '{action}' for resource '{resource}'"),
        )
    }
    /// `what` names the record kind, e.g. `not_found("api key")`.
    pub fn not_found(what: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "NOT_FOUND",
            format!("{what} not found"),
        )
    }
    pub fn agent_not_found() -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "AGENT_NOT_FOUND",
            "genie not found or access denied",
        )
    }
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "FORBIDDEN", message)
    }
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "CONFLICT", message)
    }
    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "UNAUTHORIZED",
            "authentication required: send 'Authorization: Bearer <api key or access token>' or the 'X-API-Key: <api key>' header",
        )
    }
    pub fn invalid_key_prefix() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "INVALID_KEY_PREFIX",
            "API key must start with 'svc_live_' or 'svc_admin_'",
        )
    }
    pub fn key_not_found() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "KEY_NOT_FOUND",
            "API key is unknown or revoked",
        )
    }
    pub fn invalid_token(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "INVALID_TOKEN", message)
    }
    pub fn invalid_credentials() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "INVALID_CREDENTIALS",
            "email or password is wrong",
        )
    }
    pub fn payload_too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "PAYLOAD_TOO_LARGE",
            format!("request body is larger than the limit of {limit} bytes"),
        )
    }
    pub fn rate_limited(retry_after: u64) -> Self {
        let mut e = Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            "RATE_LIMIT_EXCEEDED",
            format!("rate limit exceeded; retry in {retry_after} s"),
        );
        e.retry_after = Some(retry_after);
        e
    }
    /// A configured external service failed; `message` must not carry secrets.
    pub fn upstream(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_GATEWAY, "UPSTREAM_ERROR", message)
    }
    /// The detail goes to the log (inside the request's span, so with its request id); the
    /// client only learns that something broke.
    pub fn internal(detail: impl std::fmt::Display) -> Self {
        tracing::error!(error = %detail, "internal error");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "INTERNAL_ERROR",
            "internal server error",
        )
    }

    /// The envelope for an HTTP status that was produced outside our handlers (unknown path,
    /// wrong method, a tower layer's timeout, ...).
    pub fn from_status(status: StatusCode) -> Self {
        let (code, message) = match status.as_u16() {
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
        let status = if status.as_u16() >= 500 {
            StatusCode::INTERNAL_SERVER_ERROR
        } else {
            status
        };
        Self::new(status, code, message)
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            self.code,
            self.status.as_u16(),
            self.message
        )
    }
}

impl std::error::Error for ApiError {}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({
            "success": false,
            "error": {"code": self.code, "message": self.message, "status": self.status.as_u16()},
        });
        let mut resp = (self.status, axum::Json(body)).into_response();
        if let Some(secs) = self.retry_after {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        resp
    }
}

impl From<rusqlite::Error> for ApiError {
    fn from(err: rusqlite::Error) -> Self {
        use rusqlite::ffi;
        if let rusqlite::Error::SqliteFailure(e, _) = &err {
            match e.extended_code {
                ffi::SQLITE_CONSTRAINT_UNIQUE | ffi::SQLITE_CONSTRAINT_PRIMARYKEY => {
                    return ApiError::conflict("a record with these values already exists");
                }
                ffi::SQLITE_CONSTRAINT_FOREIGNKEY => {
                    return ApiError::validation("a referenced record does not exist");
                }
                _ => {}
            }
        }
        ApiError::internal(format!("database: {err}"))
    }
}

impl From<r2d2::Error> for ApiError {
    fn from(err: r2d2::Error) -> Self {
        ApiError::internal(format!("connection pool: {err}"))
    }
}

impl From<serde_json::Error> for ApiError {
    fn from(err: serde_json::Error) -> Self {
        ApiError::internal(format!("json: {err}"))
    }
}
