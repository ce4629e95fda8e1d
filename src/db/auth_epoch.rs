//! The authentication epoch (migration V10): a counter that triggers bump in the same
//! transaction as every change to a role, an API key's status, a session's revocation or a
//! user's removal, made by any process on the database. Caches of authentication results
//! compare it on every request instead of trusting an entry for some time.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, TryLockError};

use rusqlite::{Connection, OpenFlags};

const SELECT: &str = "SELECT epoch FROM auth_epoch WHERE id = 1";

/// The epoch as the connection's current snapshot sees it; used inside lookups, so that the
/// looked-up rows and the epoch come from one snapshot.
pub fn current(c: &Connection) -> rusqlite::Result<i64> {
    c.prepare_cached(SELECT)?.query_row([], |r| r.get(0))
}

/// The committed epoch through the facade, on a pooled connection: PostgreSQL's check before
/// a cached authentication is trusted (`auth::AuthCache`). One primary-key read of a one-row
/// table in a statement of its own, so it sees every change committed before it began.
pub fn committed(c: &super::sql::Connection) -> rusqlite::Result<i64> {
    c.prepare_cached(SELECT)?.query_row([], |r| r.get(0))
}

/// Read-only connections of their own that answer "what is the epoch now" on the request
/// path, where a cached authentication is about to be trusted.
///
/// They run on the async threads, unlike other SQL, because they cannot wait: `busy_timeout`
/// is 0, so when SQLite cannot start a read at once (another connection is recovering the
/// WAL) the answer is `None` and the caller takes the slow path through the read pool. The
/// check costs some 4,600 instructions (and two `fcntl` calls) per request
/// (docs/benchmarks.md, round seven); through `db.read` it would cost the hop to a read
/// thread on top.
///
/// There are several connections, one per CPU at least, each behind its own lock, and a
/// caller takes the first free one (`try_lock`): with a single connection every async
/// thread queued on one mutex held across SQLite's work and two system calls, and a thread
/// descheduled while holding it (a busy machine) stalled all the others.
pub struct EpochWatch {
    conns: Vec<Mutex<Connection>>,
    next: AtomicUsize,
}

impl EpochWatch {
    pub fn open(path: &Path) -> rusqlite::Result<EpochWatch> {
        let n = std::thread::available_parallelism()
            .map_or(2, std::num::NonZero::get)
            .clamp(2, 16);
        let open = || -> rusqlite::Result<Mutex<Connection>> {
            let c = Connection::open_with_flags(
                path,
                OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )?;
            c.execute_batch("PRAGMA busy_timeout = 0;")?;
            current(&c)?;
            Ok(Mutex::new(c))
        };
        // Side by side: each parses the whole schema first (one per CPU, up to 16).
        let conns = std::thread::scope(|s| {
            let opening: Vec<_> = (0..n).map(|_| s.spawn(open)).collect();
            opening
                .into_iter()
                .map(super::joined)
                .collect::<rusqlite::Result<Vec<_>>>()
        })?;
        Ok(EpochWatch {
            conns,
            next: AtomicUsize::new(0),
        })
    }

    /// The committed epoch, or `None` when SQLite could not answer without waiting.
    pub fn now(&self) -> Option<i64> {
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let n = self.conns.len();
        let free = (0..n).find_map(|i| match self.conns[(start + i) % n].try_lock() {
            Ok(c) => Some(c),
            Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        });
        // All busy (more async threads than connections): wait for one.
        let c = match free {
            Some(c) => c,
            None => self.conns[start % n]
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        };
        match current(&c) {
            Ok(e) => Some(e),
            Err(e) => {
                tracing::debug!(error = %e, "auth epoch check fell back to the read pool");
                None
            }
        }
    }
}

/// A request whose caller was taken from the authentication cache without reading the epoch
/// first (`auth::authenticate_deferred`): the request's first database operation reads it
/// inside its own transaction, before anything else, and does nothing when it moved. For a
/// point read that is one read transaction a request instead of two; for a write, whose
/// transaction is open anyway, a key lookup instead of a read transaction of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deferred {
    /// No database operation has run yet; the epoch the cached entry was read at.
    Pending(i64),
    /// The first operation found the epoch where it was.
    Held,
    /// The first operation found that it moved, and did nothing: authenticate again.
    Moved,
}

tokio::task_local! {
    static DEFERRED: std::cell::Cell<Deferred>;
}

/// Runs `f` (a request's handler) with the epoch check deferred to its first database
/// operation; returns what became of the check.
pub async fn deferred<F: std::future::Future>(epoch: i64, f: F) -> (F::Output, Deferred) {
    let check = std::cell::Cell::new(Deferred::Pending(epoch));
    DEFERRED
        .scope(check, async move {
            let out = f.await;
            (out, DEFERRED.with(std::cell::Cell::get))
        })
        .await
}

/// The epoch the current task's first database operation must find, handed out once.
pub(super) fn take_deferred() -> Option<i64> {
    DEFERRED
        .try_with(|d| match d.get() {
            Deferred::Pending(e) => {
                d.set(Deferred::Held);
                Some(e)
            }
            _ => None,
        })
        .ok()
        .flatten()
}

/// What an operation answers instead of running when the epoch moved.
pub(super) struct Moved;

/// Runs `f` unless the epoch is no longer `expect` (both in the caller's transaction).
pub(super) fn checked<T>(
    c: &super::sql::Connection,
    expect: Option<i64>,
    f: impl FnOnce(&super::sql::Connection) -> crate::error::ApiResult<T>,
) -> crate::error::ApiResult<Result<T, Moved>> {
    if let Some(e) = expect
        && committed(c)? != e
    {
        return Ok(Err(Moved));
    }
    f(c).map(Ok)
}

/// The operation's result; when the epoch had moved, the task's check says so and the
/// operation fails (its caller gives up; the request is authenticated again and run again).
pub(super) fn settle<T>(
    out: crate::error::ApiResult<Result<T, Moved>>,
) -> crate::error::ApiResult<T> {
    match out {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(Moved)) => {
            let _ = DEFERRED.try_with(|d| d.set(Deferred::Moved));
            Err(crate::error::ApiError::new(
                crate::error::Kind::Internal,
                "the caller's authentication changed during the request",
            ))
        }
        Err(e) => Err(e),
    }
}
