//! In-memory token buckets (governor): per API key, per signed-in user, per client address
//! for sign-in attempts and for the public page's chat. A limit of 0 turns that bucket off.
//! They live in the application state, so they sit below `http/`, which only consults them.
//!
//! On PostgreSQL, where several instances serve one API, the per-key and per-user limits are
//! counted in the database instead ([`Shared`]), so that they hold across instances: a fixed
//! one-minute window per key, one `INSERT .. ON CONFLICT DO UPDATE .. RETURNING` per
//! request. The sign-in and public-chat limits stay per instance.

use std::net::IpAddr;
use std::num::NonZeroU32;

use governor::clock::{Clock, DefaultClock};
use governor::middleware::StateInformationMiddleware;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota, RateLimiter};

use crate::config::Config;
use crate::db::{self, Db};
use crate::error::{ApiError, ApiResult};

/// What a caller's requests are counted against: the API key it uses, or the signed-in user.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RateKey {
    ApiKey(String),
    User(String),
}

type Keyed<K> = RateLimiter<K, DefaultKeyedStateStore<K>, DefaultClock, StateInformationMiddleware>;

/// A bucket allowing `per_minute` requests, refilled evenly over the minute.
struct Bucket<K: std::hash::Hash + Eq + Clone> {
    limit: u32,
    limiter: Keyed<K>,
}

impl<K: std::hash::Hash + Eq + Clone> Bucket<K> {
    fn new(per_minute: u32) -> Option<Self> {
        let n = NonZeroU32::new(per_minute)?;
        Some(Self::with_quota(per_minute, Quota::per_minute(n)))
    }

    fn per_hour(per_hour: u32) -> Option<Self> {
        let n = NonZeroU32::new(per_hour)?;
        Some(Self::with_quota(per_hour, Quota::per_hour(n)))
    }

    fn with_quota(limit: u32, quota: Quota) -> Self {
        let limiter = RateLimiter::keyed(quota).with_middleware::<StateInformationMiddleware>();
        Bucket { limit, limiter }
    }

    fn check(&self, key: &K) -> Result<RateInfo, Limited> {
        match self.limiter.check_key(key) {
            Ok(snapshot) => Ok(RateInfo {
                limit: self.limit,
                remaining: snapshot.remaining_burst_capacity(),
            }),
            Err(not_until) => {
                let wait = not_until.wait_time_from(DefaultClock::default().now());
                Err(Limited {
                    error: ApiError::rate_limited(wait.as_secs_f64().ceil().max(1.0) as u64),
                    info: RateInfo {
                        limit: self.limit,
                        remaining: 0,
                    },
                })
            }
        }
    }
}

/// What a keyed response reports in `X-RateLimit-Limit` / `X-RateLimit-Remaining`.
#[derive(Debug, Clone, Copy)]
pub struct RateInfo {
    pub limit: u32,
    pub remaining: u32,
}

/// A refused request: the 429 to send and the headers to send with it.
#[derive(Debug, Clone)]
pub struct Limited {
    pub error: ApiError,
    pub info: RateInfo,
}

pub struct RateLimits {
    /// Set on PostgreSQL: `api_keys` and `users` are counted there.
    shared: Option<Shared>,
    api_keys: Option<Bucket<String>>,
    users: Option<Bucket<String>>,
    logins: Option<Bucket<IpAddr>>,
    /// Sign-in, forgot-password and reset attempts per email address or account (a
    /// lower-cased address, or `user:<id>`), so that one account cannot be guessed at from
    /// many addresses.
    accounts: Option<Bucket<String>>,
}

/// The per-key limits counted in the database: fixed windows of [`WINDOW_SECONDS`].
struct Shared {
    db: Db,
    api_keys: u32,
    users: u32,
}

/// The shared counters' window.
const WINDOW_SECONDS: i64 = 60;

impl Shared {
    async fn check(&self, key: &RateKey) -> Result<Option<RateInfo>, Limited> {
        let (limit, name) = match key {
            RateKey::ApiKey(k) => (self.api_keys, format!("key:{k}")),
            RateKey::User(u) => (self.users, format!("user:{u}")),
        };
        if limit == 0 {
            return Ok(None);
        }
        let now = chrono::Utc::now().timestamp();
        let start = now - now.rem_euclid(WINDOW_SECONDS);
        // A single-row upsert, atomic on its own: it runs outside the write lock (on a
        // pooled connection, autocommit), so counting never waits for other writes.
        let n = match self
            .db
            .read(move |c| Ok(db::rate_limits::count(c, &name, start)?))
            .await
        {
            Ok(n) => n,
            Err(e) => {
                // The request itself needs the database; refusing it here for the counter
                // alone would turn a counting hiccup into an outage.
                tracing::warn!(error = %e, "could not count a request against the rate limit; let through");
                return Ok(None);
            }
        };
        let used = u32::try_from(n).unwrap_or(u32::MAX);
        if used <= limit {
            return Ok(Some(RateInfo {
                limit,
                remaining: limit - used,
            }));
        }
        let wait = (start + WINDOW_SECONDS - now).max(1) as u64;
        Err(Limited {
            error: ApiError::rate_limited(wait),
            info: RateInfo {
                limit,
                remaining: 0,
            },
        })
    }
}

impl RateLimits {
    /// `db`: the database when it is PostgreSQL (several instances may share it), where the
    /// per-key and per-user limits are counted; `None` for the in-memory buckets.
    pub fn new(c: &Config, db: Option<Db>) -> RateLimits {
        RateLimits {
            shared: db.map(|db| Shared {
                db,
                api_keys: c.rate_limit_per_minute,
                users: c.session_rate_limit_per_minute,
            }),
            api_keys: Bucket::new(c.rate_limit_per_minute),
            users: Bucket::new(c.session_rate_limit_per_minute),
            logins: Bucket::new(c.login_rate_limit_per_minute),
            accounts: Bucket::per_hour(c.account_rate_limit_per_hour),
        }
    }

    /// Counts one request; `Ok(None)` when that kind of caller is not limited.
    pub async fn check(&self, key: &RateKey) -> Result<Option<RateInfo>, Limited> {
        if let Some(s) = &self.shared {
            return s.check(key).await;
        }
        match key {
            RateKey::ApiKey(k) => self.api_keys.as_ref().map(|b| b.check(k)).transpose(),
            RateKey::User(u) => self.users.as_ref().map(|b| b.check(u)).transpose(),
        }
    }

    pub fn check_login(&self, ip: IpAddr) -> ApiResult<()> {
        match self.logins.as_ref().map(|b| b.check(&ip)) {
            Some(Err(limited)) => Err(limited.error),
            _ => Ok(()),
        }
    }

    /// Counts one attempt against an email address or account (see `accounts`).
    pub fn check_account(&self, key: &str) -> ApiResult<()> {
        match self.accounts.as_ref().map(|b| b.check(&key.to_lowercase())) {
            Some(Err(limited)) => Err(limited.error),
            _ => Ok(()),
        }
    }

    /// Removes the shared counters of past windows (PostgreSQL).
    pub async fn prune(&self) {
        let Some(s) = &self.shared else { return };
        let before = chrono::Utc::now().timestamp() - 2 * WINDOW_SECONDS;
        if let Err(e) =
            s.db.read(move |c| Ok(db::rate_limits::prune(c, before)?))
                .await
        {
            tracing::warn!(error = %e, "could not remove old rate limit counters");
        }
    }

    /// Drops buckets that are full again, so memory tracks active callers only.
    pub fn shrink(&self) {
        if let Some(b) = &self.api_keys {
            b.limiter.retain_recent();
        }
        if let Some(b) = &self.users {
            b.limiter.retain_recent();
        }
        if let Some(b) = &self.logins {
            b.limiter.retain_recent();
        }
        if let Some(b) = &self.accounts {
            b.limiter.retain_recent();
        }
    }
}

/// Per-address limit on the public chat: it needs no account, and each message can cost an
/// LLM call.
pub struct ChatLimiter(Option<governor::DefaultKeyedRateLimiter<std::net::IpAddr>>);

impl ChatLimiter {
    pub fn new(per_minute: u32) -> ChatLimiter {
        ChatLimiter(
            std::num::NonZeroU32::new(per_minute)
                .map(|n| governor::RateLimiter::keyed(governor::Quota::per_minute(n))),
        )
    }

    pub fn check(&self, ip: std::net::IpAddr) -> ApiResult<()> {
        use governor::clock::{Clock, DefaultClock};
        match self.0.as_ref().map(|l| l.check_key(&ip)) {
            Some(Err(not_until)) => {
                let wait = not_until.wait_time_from(DefaultClock::default().now());
                Err(ApiError::rate_limited(wait.as_secs().max(1)))
            }
            _ => Ok(()),
        }
    }

    pub fn shrink(&self) {
        if let Some(l) = &self.0 {
            l.retain_recent();
        }
    }
}
