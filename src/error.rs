//! The one error type below the API. Every failure a client can see is an `ApiError`: a
//! [`Kind`] that says what went wrong in the product's terms, and a message for people. The
//! HTTP status and the envelope's error code are chosen from the kind at the API edge
//! (`api::error`), and nowhere else; code below the API branches on the kind, never on text.

/// What went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The input is malformed or breaks a rule; the message names the member.
    Validation,
    /// The envelope names no known resource.
    InvalidResource,
    /// The resource has no such action (or sub-action).
    InvalidAction,
    /// No credentials, or credentials of an unusable shape.
    Unauthorized,
    /// An API key without a known prefix.
    InvalidKeyPrefix,
    /// An API key that is unknown or revoked.
    KeyNotFound,
    /// An access or refresh token that is invalid, expired or revoked.
    InvalidToken,
    /// Wrong email or password.
    InvalidCredentials,
    /// The caller may not do this.
    Forbidden,
    /// The record does not exist, or is not the caller's to see.
    NotFound,
    /// The genie does not exist or is not the caller's (the spec's own code for genies).
    AgentNotFound,
    /// A uniqueness or state rule refuses the change.
    Conflict,
    /// The request body or an uploaded file is over its limit.
    PayloadTooLarge,
    /// Too many requests; `retry_after` says when to come back.
    RateLimited,
    /// The genie has started as many calls in the last minute as its `max_calls_per_minute`
    /// allows; `retry_after` says when the next may start.
    CallRateLimited,
    /// A configured outside service (voice provider, LLM, a remote address) failed.
    Upstream,
    /// A fault of ours; the detail is in the log, not in the message.
    Internal,
    /// The service cannot do its work right now (readiness: the database cannot be
    /// written, the job worker has stalled).
    Unavailable,
}

#[derive(Debug, Clone)]
pub struct ApiError {
    pub kind: Kind,
    pub message: String,
    /// Seconds a rate-limited client should wait; rendered as `Retry-After`.
    pub retry_after: Option<u64>,
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn new(kind: Kind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            retry_after: None,
        }
    }
    pub fn is(&self, kind: Kind) -> bool {
        self.kind == kind
    }
    pub fn validation(message: impl Into<String>) -> Self {
        Self::new(Kind::Validation, message)
    }
    pub fn invalid_resource(resource: &str) -> Self {
        Self::new(
            Kind::InvalidResource,
            format!("unknown resource '{resource}'"),
        )
    }
    pub fn invalid_action(resource: &str, action: &str) -> Self {
        Self::new(
            Kind::InvalidAction,
            format!("unknown action '{action}' for resource '{resource}'"),
        )
    }
    /// `what` names the record kind, e.g. `not_found("api key")`.
    pub fn not_found(what: &str) -> Self {
        Self::new(Kind::NotFound, format!("{what} not found"))
    }
    pub fn agent_not_found() -> Self {
        Self::new(Kind::AgentNotFound, "genie not found or access denied")
    }
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(Kind::Forbidden, message)
    }
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(Kind::Conflict, message)
    }
    pub fn unauthorized() -> Self {
        Self::new(
            Kind::Unauthorized,
            "authentication required: send 'Authorization: Bearer <api key or access token>' or the 'X-API-Key: <api key>' header",
        )
    }
    pub fn invalid_key_prefix() -> Self {
        Self::new(
            Kind::InvalidKeyPrefix,
            "API key must start with 'svc_live_' or 'svc_admin_'",
        )
    }
    pub fn key_not_found() -> Self {
        Self::new(Kind::KeyNotFound, "API key is unknown or revoked")
    }
    pub fn invalid_token(message: impl Into<String>) -> Self {
        Self::new(Kind::InvalidToken, message)
    }
    pub fn invalid_credentials() -> Self {
        Self::new(Kind::InvalidCredentials, "email or password is wrong")
    }
    pub fn payload_too_large(limit: usize) -> Self {
        Self::new(
            Kind::PayloadTooLarge,
            format!("request body is larger than the limit of {limit} bytes"),
        )
    }
    pub fn rate_limited(retry_after: u64) -> Self {
        let mut e = Self::new(
            Kind::RateLimited,
            format!("rate limit exceeded; retry in {retry_after} s"),
        );
        e.retry_after = Some(retry_after);
        e
    }
    /// A genie's call rate is used up for now; the next call may start in `retry_after` s.
    pub fn call_rate_limited(message: impl Into<String>, retry_after: u64) -> Self {
        let mut e = Self::new(Kind::CallRateLimited, message);
        e.retry_after = Some(retry_after);
        e
    }
    /// A configured external service failed; `message` must not carry secrets.
    pub fn upstream(message: impl Into<String>) -> Self {
        Self::new(Kind::Upstream, message)
    }
    /// The detail goes to the log (inside the request's span, so with its request id); the
    /// client only learns that something broke.
    pub fn internal(detail: impl std::fmt::Display) -> Self {
        tracing::error!(error = %detail, "internal error");
        Self::new(Kind::Internal, "internal server error")
    }
}

/// The message alone: what background code stores (a document's or a run's `error`) and
/// logs, in words a person reads.
impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ApiError {}

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
