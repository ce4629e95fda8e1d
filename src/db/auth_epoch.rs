//! The authentication epoch (migration V10): a counter that triggers bump in the same
//! transaction as every change to a role, an API key's status, a session's revocation or a
//! user's removal, made by any process on the database. Caches of authentication results
//! compare it on every request instead of trusting an entry for some time.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, TryLockError};

use postgres::fallible_iterator::FallibleIterator;
use rusqlite::{Connection, OpenFlags};

const SELECT: &str = "SELECT epoch FROM auth_epoch WHERE id = 1";

/// The epoch as the connection's current snapshot sees it; used inside lookups, so that the
/// looked-up rows and the epoch come from one snapshot.
pub fn current(c: &Connection) -> rusqlite::Result<i64> {
    c.prepare_cached(SELECT)?.query_row([], |r| r.get(0))
}

/// Read-only connections of their own that answer "what is the epoch now" on the request
/// path, where a cached authentication is about to be trusted.
///
/// They run on the async threads, unlike other SQL, because they cannot wait: `busy_timeout`
/// is 0, so when SQLite cannot start a read at once (another connection is recovering the
/// WAL) the answer is `None` and the caller takes the slow path through the read pool. The
/// check costs some 4,600 instructions (and two `fcntl` calls) per request (README,
/// Performance); through `db.read` it would cost the hop to a read thread on top.
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
        let conns = (0..n)
            .map(|_| {
                let c = Connection::open_with_flags(
                    path,
                    OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
                )?;
                c.execute_batch("PRAGMA busy_timeout = 0;")?;
                current(&c)?;
                Ok(Mutex::new(c))
            })
            .collect::<rusqlite::Result<Vec<_>>>()?;
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

/// The epoch as one PostgreSQL instance knows it, kept by a thread of its own that LISTENs
/// on the channel the epoch triggers notify (`genied_auth`, migration V1): so that the auth
/// cache works on PostgreSQL too, and a revocation or role change made on any instance drops
/// the cached authentications of every other as soon as the notification arrives.
///
/// The epoch only grows, so the instance keeps the highest committed value it has seen:
/// from the listener (read after each burst of notifications) and from this instance's own
/// write transactions, which read it just before they commit ([`PgEpochListener::observe`];
/// so a change made here is seen by this instance's next request, with no wait for the
/// notification). It is known only while the listener is connected and not between a
/// notification and the read that follows it; meanwhile, and while the connection is down
/// (it reconnects with backoff), callers read the epoch through the pool on every request,
/// as if there were no cache. A notification is sent once its transaction commits, so the
/// window in which another instance may still trust an entry is the notification's trip
/// (well under a millisecond on one network), not a cache lifetime.
pub struct PgEpochListener {
    /// The highest committed epoch seen.
    epoch: std::sync::atomic::AtomicI64,
    /// Connected and no notification waiting to be read.
    current: std::sync::atomic::AtomicBool,
}

const CHANNEL: &str = "genied_auth";

impl PgEpochListener {
    /// Starts the listener thread; it ends within a second of the last handle going.
    pub fn start(config: postgres::Config) -> std::sync::Arc<PgEpochListener> {
        let me = std::sync::Arc::new(PgEpochListener {
            epoch: std::sync::atomic::AtomicI64::new(i64::MIN),
            current: std::sync::atomic::AtomicBool::new(false),
        });
        let weak = std::sync::Arc::downgrade(&me);
        let spawned = std::thread::Builder::new()
            .name("genied-auth-listen".into())
            .spawn(move || listen(&config, &weak));
        if let Err(e) = spawned {
            // Without the thread the epoch stays unknown: every request reads it.
            tracing::warn!(error = %e, "could not start the auth epoch listener");
        }
        me
    }

    /// The committed epoch, or `None` when it is not known right now.
    pub fn now(&self) -> Option<i64> {
        if !self.current.load(Ordering::SeqCst) {
            return None;
        }
        let e = self.epoch.load(Ordering::SeqCst);
        // Read again: a notification that arrived meanwhile makes the value unsure.
        (self.current.load(Ordering::SeqCst) && e != i64::MIN).then_some(e)
    }

    /// An epoch this instance saw committed (its own write transaction read it before
    /// committing; writes are serial across instances, so it was the committed one).
    pub fn observe(&self, e: i64) {
        self.epoch.fetch_max(e, Ordering::SeqCst);
    }

    fn set_current(&self, yes: bool) {
        self.current.store(yes, Ordering::SeqCst);
    }
}

fn read_epoch(c: &mut postgres::Client) -> Result<i64, postgres::Error> {
    c.query_one(SELECT, &[]).map(|r| r.get(0))
}

fn listen(config: &postgres::Config, me: &std::sync::Weak<PgEpochListener>) {
    use backon::BackoffBuilder;
    let new_backoff = || {
        backon::ExponentialBuilder::default()
            .with_min_delay(std::time::Duration::from_millis(100))
            .with_max_delay(std::time::Duration::from_secs(10))
            .with_jitter()
            .without_max_times()
            .build()
    };
    let mut backoff = new_backoff();
    loop {
        let err = match connected(config, me, &mut || backoff = new_backoff()) {
            Ok(()) => return,
            Err(e) => e,
        };
        let Some(l) = me.upgrade() else { return };
        l.set_current(false);
        drop(l);
        let wait = backoff.next().unwrap_or(std::time::Duration::from_secs(10));
        tracing::warn!(error = %err, retry_in_ms = wait.as_millis() as u64, "auth epoch listener lost its connection; requests read the epoch meanwhile");
        std::thread::sleep(wait);
    }
}

/// One connection's life: LISTEN, then the epoch (read after LISTEN, so no change falls
/// between), then one re-read per burst of notifications. `Ok` once the listener is gone.
fn connected(
    config: &postgres::Config,
    me: &std::sync::Weak<PgEpochListener>,
    reset_backoff: &mut dyn FnMut(),
) -> Result<(), postgres::Error> {
    let mut c = config.connect(postgres::NoTls)?;
    c.batch_execute(&format!("LISTEN {CHANNEL}"))?;
    let e = read_epoch(&mut c)?;
    match me.upgrade() {
        Some(l) => {
            l.observe(e);
            l.set_current(true);
        }
        None => return Ok(()),
    }
    reset_backoff();
    loop {
        let got = c
            .notifications()
            .timeout_iter(std::time::Duration::from_secs(1))
            .next()?
            .is_some();
        let Some(l) = me.upgrade() else { return Ok(()) };
        if got {
            // Unsure first: until the new epoch is read, requests take the slow path
            // rather than trust an entry of the old one.
            l.set_current(false);
            // Whatever else has arrived is covered by the one read below.
            while c.notifications().iter().next()?.is_some() {}
            let e = read_epoch(&mut c)?;
            l.observe(e);
            l.set_current(true);
        }
    }
}
