//! Who is calling. Every request is authenticated here, by API key or session token, into a
//! `Principal` that reaches every handler; role checks live on `Principal` and nowhere else.

pub mod keys;
pub mod oidc;
pub mod passwords;
pub mod sessions;

use std::collections::HashMap;
use std::sync::RwLock;

use axum::http::{HeaderMap, header};

use crate::db::{self, Db, users::Role};
use crate::error::{ApiError, ApiResult};
use crate::secrets::Secrets;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Via {
    ApiKey { key_id: String },
    Session { session_id: String },
}

#[derive(Debug, Clone)]
pub struct Principal {
    pub user_id: String,
    pub role: Role,
    pub via: Via,
}

impl Principal {
    pub fn is_admin(&self) -> bool {
        self.role == Role::InternalAdmin
    }

    /// Admin-only request options (`adminMode`, `userId`, `impersonatedUserId`, ...): false
    /// when absent, an error naming the option when a non-admin sets it.
    pub fn admin_option(&self, name: &str, requested: bool) -> ApiResult<bool> {
        if requested && !self.is_admin() {
            return Err(ApiError::forbidden(format!(
                "'{name}' is only available to internal admins"
            )));
        }
        Ok(requested)
    }

    pub fn require_admin(&self) -> ApiResult<()> {
        if self.is_admin() {
            Ok(())
        } else {
            Err(ApiError::forbidden("only internal admins may do this"))
        }
    }

    /// Consumers have read-only access.
    pub fn can_write(&self) -> bool {
        self.role != Role::Consumer
    }

    /// The key that rate limiting counts against.
    pub fn rate_key(&self) -> RateKey {
        match &self.via {
            Via::ApiKey { key_id } => RateKey::ApiKey(key_id.clone()),
            Via::Session { .. } => RateKey::User(self.user_id.clone()),
        }
    }
}

pub use crate::limits::RateKey;

/// The credential a request presents, before it is checked.
#[derive(Debug)]
pub enum Credential {
    ApiKey(String),
    Token(String),
}

impl Credential {
    /// `X-API-Key` is always an API key. A bearer value is a session token when it has the
    /// three dot-separated parts of a JWT, and an API key otherwise.
    pub fn from_headers(h: &HeaderMap) -> ApiResult<Credential> {
        // A header that is present but unusable says what is wrong with it: "authentication
        // required" would send the client looking for a header it did send.
        let unusable = |message: &str| ApiError::new(crate::error::Kind::Unauthorized, message);
        if let Some(v) = h.get("x-api-key") {
            let v = v
                .to_str()
                .map_err(|_| unusable("the X-API-Key header must be visible ASCII text"))?
                .trim();
            if v.is_empty() {
                return Err(unusable("the X-API-Key header is empty"));
            }
            return Ok(Credential::ApiKey(v.to_string()));
        }
        let Some(v) = h.get(header::AUTHORIZATION) else {
            return Err(ApiError::unauthorized());
        };
        let v = v
            .to_str()
            .map_err(|_| unusable("the Authorization header must be visible ASCII text"))?
            .trim();
        let not_bearer =
            || unusable("the Authorization header must be 'Bearer <api key or access token>'");
        let Some((scheme, value)) = v.split_once(' ') else {
            return Err(not_bearer());
        };
        let value = value.trim();
        if !scheme.eq_ignore_ascii_case("bearer") || value.is_empty() {
            return Err(not_bearer());
        }
        if !value.starts_with("svc_") && value.split('.').count() == 3 {
            Ok(Credential::Token(value.to_string()))
        } else {
            Ok(Credential::ApiKey(value.to_string()))
        }
    }
}

/// Most entries each of the two maps holds; past this, entries of an older epoch are
/// dropped, and if that is not enough, all of them.
const CACHE_MAX: usize = 10_000;

/// Recent successful authentications, so that a busy caller is not looked up in the
/// database on every request. Each entry carries the authentication epoch
/// ([`crate::db::auth_epoch`]) of the snapshot it was read from and is used only while the
/// committed epoch is still that one: a role change, revocation, logout or removal made by
/// any process (this one, `genied admin`, a sqlite3 shell) bumps the epoch in its own
/// transaction, so the next request after it looks the caller up again. Failures are never
/// cached.
#[derive(Default)]
pub struct AuthCache {
    keys: RwLock<HashMap<String, Cached<KeyEntry>>>,
    sessions: RwLock<HashMap<String, Cached<SessionEntry>>>,
}

struct Cached<T> {
    value: T,
    epoch: i64,
}

#[derive(Clone)]
struct KeyEntry {
    key_id: String,
    user_id: String,
    role: Role,
    last_used_at: Option<String>,
}

#[derive(Clone)]
struct SessionEntry {
    user_id: String,
    session_id: String,
    role: Role,
    /// The token's own `exp`: a cached token still expires on time.
    exp: i64,
}

impl AuthCache {
    /// The entry for `k` if it was read at the committed epoch ([`epoch_is`]). The epoch is
    /// read only when there is an entry, so unknown callers cost nothing extra.
    ///
    /// With `defer`, the entry is returned unchecked with its epoch, for the request's first
    /// database operation to check (`db::auth_epoch::Deferred`).
    async fn get<T: Clone>(
        db: &Db,
        map: &RwLock<HashMap<String, Cached<T>>>,
        k: &str,
        defer: bool,
    ) -> Option<(T, Option<i64>)> {
        let (value, epoch) = {
            let m = map.read().unwrap_or_else(|p| p.into_inner());
            let c = m.get(k)?;
            (c.value.clone(), c.epoch)
        };
        if defer {
            return Some((value, Some(epoch)));
        }
        epoch_is(db, epoch).await.then_some((value, None))
    }

    fn put<T>(map: &RwLock<HashMap<String, Cached<T>>>, k: String, value: T, epoch: i64) {
        let mut m = map.write().unwrap_or_else(|p| p.into_inner());
        if m.len() >= CACHE_MAX {
            m.retain(|_, c| c.epoch >= epoch);
            if m.len() >= CACHE_MAX {
                m.clear();
            }
        }
        m.insert(k, Cached { value, epoch });
    }
}

/// Whether the committed authentication epoch is still `epoch`. On PostgreSQL it is read
/// through the pool: another instance may have moved it a moment ago, and only a read after
/// that commit sees it (a notification could come later than the next request). That read
/// is a one-row primary-key lookup, cheaper than reading the key or session with its user
/// (docs/reliability.md).
pub async fn epoch_is(db: &Db, epoch: i64) -> bool {
    let now = if db.is_postgres() {
        db.read(|c| Ok(db::auth_epoch::committed(c)?)).await.ok()
    } else {
        db.auth_epoch()
    };
    now == Some(epoch)
}

/// Checks the credential. `session_only` is set for the api-keys resource, where the spec
/// answers any API key, valid or not, with `INVALID_TOKEN`.
pub async fn authenticate(
    db: &Db,
    cache: &AuthCache,
    secrets: &Secrets,
    cred: Credential,
    session_only: bool,
) -> ApiResult<Principal> {
    authenticate_as(db, cache, secrets, cred, session_only, false)
        .await
        .map(|(p, _)| p)
}

/// `authenticate`, except that a caller found in the cache is returned without reading the
/// authentication epoch, with the epoch its entry was read at: the caller runs the request
/// under `db::auth_epoch::deferred`, so that its first database operation checks it, and
/// authenticates again (with `authenticate`) if that finds it moved or no operation ran.
pub async fn authenticate_deferred(
    db: &Db,
    cache: &AuthCache,
    secrets: &Secrets,
    cred: Credential,
    session_only: bool,
) -> ApiResult<(Principal, Option<i64>)> {
    authenticate_as(db, cache, secrets, cred, session_only, true).await
}

async fn authenticate_as(
    db: &Db,
    cache: &AuthCache,
    secrets: &Secrets,
    cred: Credential,
    session_only: bool,
    defer: bool,
) -> ApiResult<(Principal, Option<i64>)> {
    match cred {
        Credential::ApiKey(_) if session_only => Err(ApiError::invalid_token(
            "the api-keys resource accepts session tokens only, not API keys",
        )),
        Credential::ApiKey(key) => {
            if !keys::has_valid_prefix(&key) {
                return Err(ApiError::invalid_key_prefix());
            }
            let hash = keys::hash(&key);
            let (entry, unchecked) = match AuthCache::get(db, &cache.keys, &hash, defer).await {
                Some(e) => e,
                None => {
                    let h = hash.clone();
                    let owner = db
                        .read_point(move |c| Ok(db::api_keys::find_by_hash(c, &h)?))
                        .await?
                        .filter(|o| o.active)
                        .ok_or_else(ApiError::key_not_found)?;
                    let e = KeyEntry {
                        key_id: owner.key_id,
                        user_id: owner.user_id,
                        role: owner.role,
                        last_used_at: owner.last_used_at,
                    };
                    AuthCache::put(&cache.keys, hash.clone(), e.clone(), owner.epoch);
                    (e, None)
                }
            };
            if touch_key(db, &entry.key_id, entry.last_used_at.as_deref()) {
                // Remember the touch, so the requests until it commits do not repeat it.
                let mut m = cache.keys.write().unwrap_or_else(|p| p.into_inner());
                if let Some(c) = m.get_mut(&hash) {
                    c.value.last_used_at = Some(db::now());
                }
            }
            let principal = Principal {
                user_id: entry.user_id,
                role: entry.role,
                via: Via::ApiKey {
                    key_id: entry.key_id,
                },
            };
            Ok((principal, unchecked))
        }
        Credential::Token(token) => {
            // Keyed by the token's hash, so a cached token skips the signature check too; the
            // map never holds a usable token.
            let token_hash = keys::hash(&token);
            let (entry, unchecked) =
                match AuthCache::get(db, &cache.sessions, &token_hash, defer).await {
                    Some(e) => e,
                    None => {
                        let claims = sessions::decode(&secrets.jwt_key, &token)?;
                        let (sid, uid) = (claims.sid.clone(), claims.sub.clone());
                        let (role, epoch) = db
                            .read_point(move |c| Ok(db::sessions::live_role(c, &sid, &uid)?))
                            .await?
                            .ok_or_else(|| ApiError::invalid_token("session has been revoked"))?;
                        let e = SessionEntry {
                            user_id: claims.sub,
                            session_id: claims.sid,
                            role,
                            exp: claims.exp,
                        };
                        AuthCache::put(&cache.sessions, token_hash, e.clone(), epoch);
                        (e, None)
                    }
                };
            if sessions::is_expired(entry.exp) {
                return Err(ApiError::invalid_token("access token has expired"));
            }
            let principal = Principal {
                user_id: entry.user_id,
                role: entry.role,
                via: Via::Session {
                    session_id: entry.session_id,
                },
            };
            Ok((principal, unchecked))
        }
    }
}

/// Records `last_used_at` at most once a minute per key, off the request path, so that
/// a busy key does not turn every read into a write. Returns whether it did.
fn touch_key(db: &Db, key_id: &str, last_used_at: Option<&str>) -> bool {
    let now = chrono::Utc::now();
    let fresh = last_used_at
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .is_some_and(|t| now.signed_duration_since(t) < chrono::Duration::seconds(60));
    if fresh {
        return false;
    }
    let (db, id, at) = (db.clone(), key_id.to_string(), db::fmt_time(now));
    tokio::spawn(async move {
        if let Err(e) = db
            .write(move |c| Ok(db::api_keys::touch(c, &id, &at)?))
            .await
        {
            tracing::warn!(error = %e, "could not record API key use");
        }
    });
    true
}
