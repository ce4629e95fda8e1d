//! The authentication epoch (migration V10): a counter that triggers bump in the same
//! transaction as every change to a role, an API key's status, a session's revocation or a
//! user's removal, made by any process on the database. Caches of authentication results
//! compare it on every request instead of trusting an entry for some time.

use std::path::Path;
use std::sync::Mutex;

use rusqlite::{Connection, OpenFlags};

const SELECT: &str = "SELECT epoch FROM auth_epoch WHERE id = 1";

/// The epoch as the connection's current snapshot sees it; used inside lookups, so that the
/// looked-up rows and the epoch come from one snapshot.
pub fn current(c: &Connection) -> rusqlite::Result<i64> {
    c.prepare_cached(SELECT)?.query_row([], |r| r.get(0))
}

/// A read-only connection of its own that answers "what is the epoch now" on the request
/// path, where a cached authentication is about to be trusted.
///
/// It runs on the async thread, unlike other SQL, because it cannot wait: `busy_timeout` is
/// 0, so when SQLite cannot start a read at once (another connection is recovering the WAL)
/// it answers `None` and the caller takes the slow path through the read pool. The check
/// costs 5–15 µs of server CPU per request (README, Performance); through `db.read` it would
/// cost the hop to a read thread on top (82 µs against 15 µs inline in a debug-build loop).
pub struct EpochWatch(Mutex<Connection>);

impl EpochWatch {
    pub fn open(path: &Path) -> rusqlite::Result<EpochWatch> {
        let c = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        c.execute_batch("PRAGMA busy_timeout = 0;")?;
        current(&c)?;
        Ok(EpochWatch(Mutex::new(c)))
    }

    /// The committed epoch, or `None` when SQLite could not answer without waiting.
    pub fn now(&self) -> Option<i64> {
        let c = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match current(&c) {
            Ok(e) => Some(e),
            Err(e) => {
                tracing::debug!(error = %e, "auth epoch check fell back to the read pool");
                None
            }
        }
    }
}
