//! SQLite access: a small read pool and one writer connection. All database work runs on
//! tokio's blocking threads, so a slow query never stalls the async runtime, and every write
//! goes through the single writer inside `BEGIN IMMEDIATE`, so SQLite never answers BUSY in
//! the middle of a transaction.

pub mod accounts;
pub mod activities;
pub mod analytics;
pub mod api_keys;
pub mod auth_epoch;
mod baseline;
pub mod call_starts;
pub mod campaigns;
pub mod conversation_figures;
pub mod conversations;
pub mod document_folders;
pub mod documents;
pub mod email_logs;
pub mod events;
pub mod fts_rank;
pub mod genie_groups;
pub mod genie_moves;
pub mod genie_providers;
pub mod genie_tests;
pub mod genie_versions;
pub mod genies;
pub mod health;
pub mod jobs;
pub mod keys;
pub mod lead_notes;
pub mod leads;
pub mod marketplace;
pub mod notifications;
pub mod page_chat;
pub mod phone_imports;
pub mod provider_hooks;
pub mod qr_codes;
pub mod rate_limits;
pub mod sessions;
pub mod sync_runs;
pub mod teams;
pub mod telemetry;
pub mod users;
pub mod voice_collections;
pub mod voice_local;
pub mod voices;
pub mod webhooks;
pub mod workers;
pub mod workers_query;

pub mod pg;
pub mod sql;
pub mod storage_copy;
pub use sql::{Connection, Row, Statement};

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::{Arc, Mutex, mpsc};

use r2d2_sqlite::SqliteConnectionManager;
use rusqlite::{OpenFlags, Transaction, TransactionBehavior};

use crate::error::{ApiError, ApiResult};

mod embedded {
    refinery::embed_migrations!("migrations/sqlite");
}

/// Runs the pending migrations with foreign keys off, as SQLite's procedure for schema
/// changes asks: a migration that rebuilds a table others reference (V41 rebuilds `leads`,
/// `users` and `genies`) would otherwise delete every referencing row by cascade when it drops
/// the old table. `PRAGMA foreign_keys` does nothing inside a transaction, so it is set around
/// the runner, and `foreign_key_check` after it fails the start on any row left pointing
/// nowhere rather than serve from a database that lost its integrity.
fn run_migrations(conn: &mut rusqlite::Connection) -> anyhow::Result<()> {
    // Temporary storage on disk for the migrations: an index a migration builds is sorted
    // there, which `temp_store = MEMORY` kept in RAM (V41 at a million leads: 131 MB).
    conn.execute_batch("PRAGMA foreign_keys = OFF; PRAGMA temp_store = FILE;")?;
    let runner = embedded::migrations::runner();
    // A new database takes the schema of the first migrations in one step (see baseline);
    // the runner then applies those after it.
    let ran =
        baseline::apply_if_empty(conn, runner.get_migrations()).and_then(|_| Ok(runner.run(conn)?));
    // Only after a migration ran: the check reads every row of every table with a foreign
    // key (seconds at a million leads), too much for each start.
    let broken: Vec<(String, i64, String)> = match &ran {
        Ok(report) if !report.applied_migrations().is_empty() => conn
            .prepare("PRAGMA foreign_key_check")?
            .query_map([], |r| {
                Ok((
                    r.get(0)?,
                    r.get::<_, Option<i64>>(1)?.unwrap_or(0),
                    r.get(2)?,
                ))
            })?
            .collect::<rusqlite::Result<_>>()?,
        _ => Vec::new(),
    };
    conn.execute_batch("PRAGMA foreign_keys = ON; PRAGMA temp_store = MEMORY;")?;
    ran?;
    if let Some((table, rowid, parent)) = broken.first() {
        anyhow::bail!(
            "{} row(s) reference a missing parent after the migrations, the first in `{table}` \
             (rowid {rowid}) pointing into `{parent}`",
            broken.len()
        );
    }
    Ok(())
}

/// Applied on every connection; `busy_timeout` first so the others can wait for a lock.
const PRAGMAS: &str = "PRAGMA busy_timeout = 5000;
     PRAGMA journal_mode = WAL;
     PRAGMA synchronous = NORMAL;
     PRAGMA foreign_keys = ON;
     PRAGMA temp_store = MEMORY;";

/// Prepared statements kept per connection (`prepare_cached`); rusqlite's default is 16,
/// fewer than the hot statements of all resources together.
const STATEMENT_CACHE: usize = 128;

/// Least time between two background WAL checkpoints.
const CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// Most writes one group commit carries; bounds the latency a write can add to others.
const MAX_GROUP: usize = 64;

/// The database: SQLite (one writer thread, a read pool) or PostgreSQL (a pool; see
/// [`pg`]). db functions see the same [`Connection`] either way.
#[derive(Clone)]
pub struct Db(Engine);

#[derive(Clone)]
enum Engine {
    Sqlite(Lite),
    Postgres(pg::PgDb),
}

#[derive(Clone)]
struct Lite {
    read: r2d2::Pool<SqliteConnectionManager>,
    readers: Arc<Readers>,
    write: Arc<Mutex<rusqlite::Connection>>,
    writer: Arc<WriterThread>,
    auth: Arc<auth_epoch::EpochWatch>,
}

/// How a read runs (see `Db::read`, `read_snapshot`, `read_point`, `read_point_snapshot`).
#[derive(Clone, Copy)]
enum Read {
    Anywhere,
    Snapshot,
    Point,
    PointSnapshot,
}

impl Read {
    /// On the calling thread when a SQLite read connection is idle.
    fn point(self) -> bool {
        matches!(self, Read::Point | Read::PointSnapshot)
    }

    /// Every statement from one snapshot (a read transaction).
    fn snapshot(self) -> bool {
        matches!(self, Read::Snapshot | Read::PointSnapshot)
    }
}

/// The threads that run reads: the blocking pool of a runtime of their own, capped at the
/// size of the read pool. Reads queue here instead of each waking one of the many threads
/// of the shared blocking pool (where file and document work also runs): measured on
/// `leads get` at 64 concurrent clients on 2 cores, the server's CPU time per request fell
/// from 69 µs (one woken thread per read) to 48–52 µs (1–2 threads draining a queue).
struct Readers(Option<tokio::runtime::Runtime>);

impl Readers {
    fn new(threads: usize) -> std::io::Result<Readers> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .max_blocking_threads(threads)
            .thread_name("genied-read")
            .build()?;
        Ok(Readers(Some(rt)))
    }

    fn handle(&self) -> &tokio::runtime::Handle {
        self.0.as_ref().expect("present until dropped").handle()
    }
}

impl Drop for Readers {
    fn drop(&mut self) {
        // The last `Db` may go inside async code, where dropping a runtime would block.
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// A scoped thread's result; its panic, if it panicked, carries on in the caller.
fn joined<T>(h: std::thread::ScopedJoinHandle<'_, T>) -> T {
    h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
}

/// Read threads when the configuration does not say: one per CPU, 2 to 8.
fn default_read_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 8))
}

/// The writer thread and its queue. When the last `Db` goes, the queue closes, the threads
/// are joined and the WAL is emptied into the database file before the process exits.
struct WriterThread {
    jobs: mpsc::Sender<Queued>,
    /// Writes sent to the queue and not yet taken by the writer thread.
    queued: Arc<std::sync::atomic::AtomicUsize>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Wakes the checkpointer after a commit (a full channel means it is already due).
    checkpoint: mpsc::SyncSender<()>,
    checkpointer: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// The writer's connection, for the last checkpoint.
    conn: Arc<Mutex<rusqlite::Connection>>,
}

impl WriterThread {
    fn nudge_checkpointer(&self) {
        let _ = self.checkpoint.try_send(());
    }
}

fn join(slot: &Mutex<Option<std::thread::JoinHandle<()>>>) {
    let handle = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(h) = handle
        && h.thread().id() != std::thread::current().id()
    {
        let _ = h.join();
    }
}

impl Drop for WriterThread {
    fn drop(&mut self) {
        // Close the queues (replace each sender with one of a channel nobody reads), then
        // wait for the threads: the writer first, as it wakes the checkpointer.
        drop(std::mem::replace(&mut self.jobs, mpsc::channel().0));
        join(&self.thread);
        drop(std::mem::replace(
            &mut self.checkpoint,
            mpsc::sync_channel(1).0,
        ));
        join(&self.checkpointer);
        // The WAL emptied and truncated, so the next start has none to read. SQLite does this
        // itself only when the last connection to close can write, and the last ones here
        // are read-only (the auth epoch's, the read pool's): every clean stop left the WAL
        // behind, and the next open read all of it, frame by frame, to rebuild its index
        // before answering anything (2.6 s for the 94 MB a 100,000-lead seed left; seconds
        // more per million leads). Not on the writer thread itself (a `Db` dropped inside a
        // write), which holds the connection. Without waiting: another process (a CLI
        // command beside a running service) must not hold the other's writes up while its
        // readers finish; then the WAL stays for the process that goes last.
        if let Ok(conn) = self.conn.try_lock() {
            let _ = conn.busy_timeout(std::time::Duration::ZERO);
            match conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                r.get::<_, i64>(0)
            }) {
                Ok(0) => {}
                // Another process uses the database: the WAL stays, for it to empty.
                Ok(_) => tracing::debug!("the WAL was not emptied at close: in use elsewhere"),
                Err(e) => tracing::warn!(error = %e, "the last WAL checkpoint failed"),
            }
        }
    }
}

/// Copies committed WAL frames into the database file on its own connection, so that no
/// write request pays for a checkpoint (SQLite's automatic checkpoint runs inside the
/// commit that crosses 1000 WAL pages, adding milliseconds to that request). `PASSIVE`
/// never waits for readers or the writer; at most one runs per `CHECKPOINT_EVERY`.
///
/// Copying is not enough to keep the WAL small. SQLite writes it from its first frame again
/// only when a write begins with every frame copied and no reader using any of them, and
/// under steady requests there is nearly always a reader that began before the last copy
/// (the outbox's, a page's): the WAL grew without end (a gigabyte in ten seconds of
/// creates at one connection), every frame written to a page the file had never had, which
/// cost the filesystem more than the write itself. So once the WAL holds `RESTART_AT`
/// frames, a second pass runs with the writer's connection held (nothing is committed
/// meanwhile): `RESTART` copies what the first pass left and waits, briefly
/// ([`brief_wait`]), for the readers of the WAL to finish, after which new readers read
/// the database file and the next write starts the WAL over.
fn checkpointer_loop(
    conn: rusqlite::Connection,
    wake: mpsc::Receiver<()>,
    writer: Arc<Mutex<rusqlite::Connection>>,
) {
    if let Err(e) = conn.busy_handler(Some(brief_wait)) {
        tracing::warn!(error = %e, "the checkpointer's busy handler could not be set");
    }
    while wake.recv().is_ok() {
        if checkpoint(&conn, "PASSIVE").is_some_and(|frames| frames >= RESTART_AT) {
            let asked = std::time::Instant::now();
            let held = writer.lock().unwrap_or_else(|p| p.into_inner());
            let got = std::time::Instant::now();
            let frames = checkpoint(&conn, "RESTART");
            drop(held);
            // Every write waits while this pass holds the writer: its length is what a
            // request's tail can show (docs/performance.md, round thirty-four).
            tracing::debug!(
                waited_us = got.duration_since(asked).as_micros() as u64,
                held_us = got.elapsed().as_micros() as u64,
                frames = frames.unwrap_or(-1),
                "WAL checkpoint: restart pass"
            );
        }
        std::thread::sleep(CHECKPOINT_EVERY);
    }
}

/// WAL frames (4 KB each) past which the checkpointer makes the next write start it over.
/// Each restart costs writes twice: the pass holds the writer while it syncs (some 3 ms
/// here), and the first commit after it syncs the new WAL's header. At 1,000 frames, ten
/// restarts a second under one client's creates delayed about one create in a hundred,
/// which set their p99; at 8,000, two or three a second. The price is a WAL file of some
/// 50 MB instead of 20, whose frames a start after a crash reads before it answers (tens
/// of milliseconds more; docs/performance.md, round thirty-five).
const RESTART_AT: i64 = 8000;

/// The checkpointer's busy handler: waits some 5 ms in all (30 times 100 µs and the
/// timer's slack) for readers or another process's writer, then gives up until the next
/// round. Short, because the `RESTART` pass holds this process's writes while it waits;
/// long enough for a slow page of a list to finish.
fn brief_wait(attempt: i32) -> bool {
    if attempt >= 30 {
        return false;
    }
    std::thread::sleep(std::time::Duration::from_micros(100));
    true
}

/// One checkpoint in `mode`: the frames the WAL held, or `None` on error.
fn checkpoint(conn: &rusqlite::Connection, mode: &str) -> Option<i64> {
    match conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |r| r.get(1)) {
        Ok(frames) => Some(frames),
        Err(e) => {
            tracing::warn!(error = %e, mode, "WAL checkpoint failed");
            None
        }
    }
}

/// One queued write: runs the caller's closure inside the group's transaction (within its
/// own savepoint, unless it is the group's first) and returns whether it succeeded, plus how
/// to deliver its result once the group's fate is known.
/// Given the error instead of a transaction when the group could not begin.
type Job = Box<dyn FnOnce(Result<&Transaction, ApiError>) -> (bool, Deliver) + Send>;
/// Delivers a job's result; given an error when the group could not be committed.
type Deliver = Box<dyn FnOnce(Option<ApiError>) + Send>;

impl Db {
    /// Opens (creating if needed) the database and applies pending migrations.
    pub fn open(path: &Path) -> anyhow::Result<Db> {
        Db::open_with(path, None)
    }

    /// `open`, with this many read threads (and read connections); `None` for the default.
    pub fn open_with(path: &Path, read_threads: Option<usize>) -> anyhow::Result<Db> {
        Ok(Db(Engine::Sqlite(Lite::open_with(path, read_threads)?)))
    }

    /// Connects to PostgreSQL (`postgres://...`) and applies its pending migrations; the
    /// pool holds up to `connections` connections (default: twice the default read
    /// threads, as every write holds one for its transaction).
    pub fn open_postgres(url: &str, connections: Option<usize>) -> anyhow::Result<Db> {
        let size = connections
            .unwrap_or_else(|| default_read_threads() * 2)
            .max(2) as u32;
        Ok(Db(Engine::Postgres(pg::PgDb::open(url, size)?)))
    }

    /// Applies pending PostgreSQL migrations; every applied version, oldest first.
    pub fn migrate_postgres(url: &str) -> anyhow::Result<Vec<i32>> {
        pg::PgDb::migrate(url)
    }

    /// Whether the records are in PostgreSQL.
    pub fn is_postgres(&self) -> bool {
        matches!(self.0, Engine::Postgres(_))
    }

    /// Applies pending migrations and returns every applied version, oldest first.
    pub fn migrate(path: &Path) -> anyhow::Result<Vec<i32>> {
        Lite::migrate(path)
    }

    /// Runs `f` on a pooled read connection, off the async threads.
    pub async fn read<T, F>(&self, f: F) -> ApiResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection<'_>) -> ApiResult<T> + Send + 'static,
    {
        self.read_as(f, Read::Anywhere).await
    }

    /// `read`, with every statement of `f` answered from one snapshot of the database.
    ///
    /// A plain `read` runs each statement on its own (autocommit), so a view made of several
    /// queries can straddle a write committed between two of them: a campaign's counts from
    /// before a dial and its open calls from after it. Views whose parts must agree read
    /// here. On SQLite the snapshot is a deferred read transaction (no extra I/O, a WAL read
    /// mark held until the end); on PostgreSQL a `REPEATABLE READ, READ ONLY` transaction,
    /// two more round trips, which is why single-statement reads stay on `read`.
    pub async fn read_snapshot<T, F>(&self, f: F) -> ApiResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection<'_>) -> ApiResult<T> + Send + 'static,
    {
        self.read_as(f, Read::Snapshot).await
    }

    /// `read` for bounded work: a record found by its key and the few rows that hang off it
    /// (`leads get`, `genies get`). On SQLite it runs on the calling async thread when a read
    /// connection is idle, instead of on a read thread: such a read takes some tens of
    /// microseconds, and the hop to a read thread and back costs more than that in thread
    /// wake-ups (docs/performance.md, round eight). When every read connection is busy it
    /// takes the hop like any read. Never for a read whose cost grows with the data (a page,
    /// a search, a count, a scan): that would hold an async thread and every request queued
    /// behind it. On PostgreSQL (a network round trip) it is `read`.
    pub async fn read_point<T, F>(&self, f: F) -> ApiResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection<'_>) -> ApiResult<T> + Send + 'static,
    {
        self.read_as(f, Read::Point).await
    }

    /// `read_point` from one snapshot (see `read_snapshot`).
    pub async fn read_point_snapshot<T, F>(&self, f: F) -> ApiResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection<'_>) -> ApiResult<T> + Send + 'static,
    {
        self.read_as(f, Read::PointSnapshot).await
    }

    /// The one path of every read: where it runs (`Read::point`) and whether from one
    /// snapshot (`Read::snapshot`), on either engine.
    async fn read_as<T, F>(&self, f: F, how: Read) -> ApiResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection<'_>) -> ApiResult<T> + Send + 'static,
    {
        // A deferred authentication check (auth_epoch::Deferred) runs first; on SQLite in
        // the same read transaction as `f`, so that both take the WAL's read lock once.
        let expect = auth_epoch::take_deferred();
        let how = match how {
            Read::Anywhere if expect.is_some() && !self.is_postgres() => Read::Snapshot,
            Read::Point if expect.is_some() && !self.is_postgres() => Read::PointSnapshot,
            how => how,
        };
        let f = move |c: &Connection<'_>| auth_epoch::checked(c, expect, f);
        auth_epoch::settle(self.read_engine(f, how).await)
    }

    /// `read_as` on the engine, once the deferred check is part of `f`.
    async fn read_engine<T, F>(&self, f: F, how: Read) -> ApiResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection<'_>) -> ApiResult<T> + Send + 'static,
    {
        match &self.0 {
            Engine::Sqlite(l) if how.point() => l.read_here(f, how.snapshot()).await,
            Engine::Sqlite(l) => l.read_with(f, how.snapshot()).await,
            Engine::Postgres(p) => {
                let p = p.clone();
                let read = run_blocking(move || {
                    if how.snapshot() {
                        p.read_snapshot_now(f)
                    } else {
                        p.read_now(f)
                    }
                });
                if crate::telemetry::trace::enabled() {
                    use tracing::Instrument;
                    read.instrument(tracing::info_span!("db.read")).await
                } else {
                    read.await
                }
            }
        }
    }

    /// Runs `f` inside one write transaction; commits when `f` returns `Ok`, rolls back
    /// otherwise, so a failed action changes nothing. Writes never interleave: on SQLite
    /// they go through the one writer thread (group commit, see `Lite::write`); on
    /// PostgreSQL each takes a transaction-level advisory lock first, across instances.
    pub async fn write<T, F>(&self, f: F) -> ApiResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection<'_>) -> ApiResult<T> + Send + 'static,
    {
        self.write_how(f, false).await
    }

    /// `write`, for background work that writes in a loop (the lead search index's merge
    /// steps, an account's delete, the event outbox's batches): on SQLite always through the
    /// writer's queue, never on the calling thread. A write run on the calling thread is done
    /// by the time it is awaited, so such a loop never suspends and keeps its runtime thread,
    /// with the requests queued on it, until Tokio's cooperative budget (128) makes it yield:
    /// one lead create waited out seventeen merge steps that way, 62 ms (docs/performance.md,
    /// round thirty-three). In the queue, the loop waits for each write, and a request for
    /// one of the loop's writes at most. Such a write is committed in a group of its own,
    /// never with requests' writes, which would otherwise wait for it at the group's commit.
    pub async fn write_in_turn<T, F>(&self, f: F) -> ApiResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection<'_>) -> ApiResult<T> + Send + 'static,
    {
        self.write_how(f, true).await
    }

    async fn write_how<T, F>(&self, f: F, in_turn: bool) -> ApiResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection<'_>) -> ApiResult<T> + Send + 'static,
    {
        // A deferred authentication check (auth_epoch::Deferred) is the transaction's first
        // statement; when the epoch moved nothing else runs.
        let expect = auth_epoch::take_deferred();
        let f = move |c: &Connection<'_>| auth_epoch::checked(c, expect, f);
        auth_epoch::settle(self.write_engine(f, in_turn).await)
    }

    /// `write` on the engine, once the deferred check is part of `f`.
    async fn write_engine<T, F>(&self, f: F, in_turn: bool) -> ApiResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection<'_>) -> ApiResult<T> + Send + 'static,
    {
        match &self.0 {
            Engine::Sqlite(l) => l.write(f, in_turn).await,
            // The span covers the wait for the write lock too: on PostgreSQL that wait is
            // part of the write, as the queue before the writer thread is on SQLite.
            Engine::Postgres(p) => {
                let write = p.write(f);
                if crate::telemetry::trace::enabled() {
                    use tracing::Instrument;
                    write.instrument(tracing::info_span!("db.write")).await
                } else {
                    write.await
                }
            }
        }
    }

    /// The same as `write`, for callers that are already on a blocking thread (the CLI).
    pub fn write_blocking<T: Send>(
        &self,
        f: impl FnOnce(&Connection<'_>) -> ApiResult<T> + Send,
    ) -> ApiResult<T> {
        match &self.0 {
            Engine::Sqlite(l) => l.write_blocking(f),
            Engine::Postgres(p) => p.write_blocking(f),
        }
    }

    pub fn read_blocking<T: Send>(
        &self,
        f: impl FnOnce(&Connection<'_>) -> ApiResult<T> + Send,
    ) -> ApiResult<T> {
        match &self.0 {
            Engine::Sqlite(l) => l.read_blocking(f),
            Engine::Postgres(p) => p.read_blocking(f),
        }
    }

    /// The committed authentication epoch ([`auth_epoch`]), read on the calling thread
    /// without waiting; `None` when it cannot be answered at once (callers then read it
    /// through the pool). Always `None` on PostgreSQL (`PgDb::auth_epoch` says why).
    pub fn auth_epoch(&self) -> Option<i64> {
        match &self.0 {
            Engine::Sqlite(l) => l.auth.now(),
            Engine::Postgres(p) => p.auth_epoch(),
        }
    }

    /// Copies the live SQLite database into `out` with SQLite's online backup: consistent
    /// while the service keeps writing. PostgreSQL is backed up with its own tools.
    pub fn backup_to(&self, out: &Path) -> anyhow::Result<()> {
        match &self.0 {
            Engine::Sqlite(l) => l.backup_to(out),
            Engine::Postgres(_) => anyhow::bail!(
                "genied admin backup copies a SQLite database; back up PostgreSQL with \
                 pg_dump (or your provider's snapshots)"
            ),
        }
    }

    /// Rewrites the SQLite file without the space deleted rows and dropped columns left
    /// behind, and truncates the WAL (see [`Vacuumed`]). Takes the write lock for the whole
    /// run: `admin vacuum` runs it with the service stopped.
    pub fn vacuum(&self) -> anyhow::Result<Vacuumed> {
        match &self.0 {
            Engine::Sqlite(l) => l.vacuum(),
            Engine::Postgres(_) => anyhow::bail!(
                "genied admin vacuum rewrites a SQLite database; PostgreSQL reclaims space with \
                 its own autovacuum (VACUUM FULL, with psql, gives it back to the disk)"
            ),
        }
    }
}

/// What [`Db::vacuum`] did: the database's size (pages in use and free, times the page size)
/// before and after, and how many of the pages before were free (on the free list).
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Vacuumed {
    pub bytes_before: u64,
    pub free_bytes_before: u64,
    pub bytes_after: u64,
}

impl Lite {
    fn open_with(path: &Path, read_threads: Option<usize>) -> anyhow::Result<Lite> {
        let read_threads = read_threads.unwrap_or_else(default_read_threads).max(1);
        let mut writer = rusqlite::Connection::open(path)?;
        writer.execute_batch(PRAGMAS)?;
        run_migrations(&mut writer)?;
        writer.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        leads::register_functions(&writer)?;
        fts_rank::register(&writer)?;
        let manager = SqliteConnectionManager::file(path)
            .with_flags(
                OpenFlags::SQLITE_OPEN_READ_ONLY
                    | OpenFlags::SQLITE_OPEN_NO_MUTEX
                    | OpenFlags::SQLITE_OPEN_URI,
            )
            .with_init(|c| {
                c.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
                leads::register_functions(c)?;
                fts_rank::register(c)?;
                c.execute_batch(PRAGMAS.replace("PRAGMA journal_mode = WAL;", "").as_str())
            });
        // A connection parses the whole schema before its first statement (some 3 ms at
        // V45, docs/performance.md): the others a start needs are opened side by side, not
        // one after another. The pool opens its first connection on r2d2's own thread.
        let (auth, ckpt_conn, read) = std::thread::scope(|s| {
            let auth = s.spawn(|| auth_epoch::EpochWatch::open(path));
            // Checkpoints run on their own thread and connection, not inside a commit.
            let ckpt = s.spawn(|| -> rusqlite::Result<rusqlite::Connection> {
                let c = rusqlite::Connection::open(path)?;
                c.execute_batch(PRAGMAS)?;
                Ok(c)
            });
            // A SQLite connection does not go stale: no liveness query on every checkout.
            let read = r2d2::Pool::builder()
                .test_on_check_out(false)
                .max_size(read_threads as u32)
                .min_idle(Some(1))
                .build(manager);
            (joined(auth), joined(ckpt), read)
        });
        let (auth, ckpt_conn, read) = (Arc::new(auth?), ckpt_conn?, read?);
        writer.execute_batch("PRAGMA wal_autocheckpoint = 0;")?;
        let (checkpoint, wake) = mpsc::sync_channel::<()>(1);
        let write = Arc::new(Mutex::new(writer));
        let held = write.clone();
        let checkpointer = std::thread::Builder::new()
            .name("genied-checkpoint".into())
            .spawn(move || checkpointer_loop(ckpt_conn, wake, held))?;
        let (jobs, queue) = mpsc::channel::<Queued>();
        let queued = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (w, c, q) = (write.clone(), checkpoint.clone(), queued.clone());
        let thread = std::thread::Builder::new()
            .name("genied-writer".into())
            .spawn(move || writer_loop(&w, queue, &q, c))?;
        let conn = write.clone();
        Ok(Lite {
            read,
            readers: Arc::new(Readers::new(read_threads)?),
            write,
            writer: Arc::new(WriterThread {
                jobs,
                queued,
                thread: Mutex::new(Some(thread)),
                checkpoint,
                checkpointer: Mutex::new(Some(checkpointer)),
                conn,
            }),
            auth,
        })
    }

    fn migrate(path: &Path) -> anyhow::Result<Vec<i32>> {
        let mut conn = rusqlite::Connection::open(path)?;
        conn.execute_batch(PRAGMAS)?;
        run_migrations(&mut conn)?;
        let runner = embedded::migrations::runner();
        let mut versions: Vec<i32> = runner
            .get_applied_migrations(&mut conn)?
            .iter()
            .map(|m| m.version())
            .collect();
        versions.sort_unstable();
        Ok(versions)
    }

    /// Runs `f` on a pooled read-only connection, off the async threads; inside one
    /// deferred transaction when `snapshot` (see `Db::read_snapshot`).
    async fn read_with<T, F>(&self, f: F, snapshot: bool) -> ApiResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection<'_>) -> ApiResult<T> + Send + 'static,
    {
        let pool = self.read.clone();
        let read = run_blocking_on(self.readers.handle(), move || {
            let conn = pool.get()?;
            read_on(&conn, f, snapshot)
        });
        if crate::telemetry::trace::enabled() {
            use tracing::Instrument;
            read.instrument(tracing::info_span!("db.read")).await
        } else {
            read.await
        }
    }

    /// `read_with` on the calling thread when a read connection is idle (see
    /// `Db::read_point`); on a read thread, as `read_with`, when none is.
    async fn read_here<T, F>(&self, f: F, snapshot: bool) -> ApiResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection<'_>) -> ApiResult<T> + Send + 'static,
    {
        // `try_get` never waits: every connection busy means reads are queueing, and this
        // one queues with them rather than hold an async thread until a connection frees.
        let Some(conn) = self.read.try_get() else {
            return self.read_with(f, snapshot).await;
        };
        let _span = crate::telemetry::trace::enabled()
            .then(|| tracing::info_span!("db.read", here = true).entered());
        read_on(&conn, f, snapshot)
    }

    /// Runs `f` inside a `BEGIN IMMEDIATE` transaction on the writer; commits when `f`
    /// returns `Ok`, rolls back otherwise, so a failed action changes nothing.
    ///
    /// Writes run on one dedicated writer thread, off the async threads. Writes queued while
    /// the writer is busy are committed together (group commit): in queue order in one shared
    /// transaction, each after the first inside its own savepoint, so a failing write is
    /// rolled back alone (a failing first one with the transaction, the others then run in a
    /// new one), and no caller hears `Ok` before the transaction holding its write committed.
    /// `in_turn`: never on the calling thread (`Db::write_in_turn` says why).
    async fn write<T, F>(&self, f: F, in_turn: bool) -> ApiResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection<'_>) -> ApiResult<T> + Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel::<std::thread::Result<ApiResult<T>>>();
        let span = if crate::telemetry::trace::enabled() {
            tracing::info_span!("db.write")
        } else {
            tracing::Span::current()
        };
        let request = crate::telemetry::context::current();
        // The closure may use the runtime (as it could under `spawn_blocking`).
        let rt = tokio::runtime::Handle::try_current().ok();
        let job: Job = Box::new(move |c: Result<&Transaction, ApiError>| {
            let _rt = rt.as_ref().map(tokio::runtime::Handle::enter);
            let out = match c {
                Ok(c) => crate::telemetry::context::within(request, || {
                    span.in_scope(|| catch_unwind(AssertUnwindSafe(|| f(&Connection::sqlite(c)))))
                }),
                Err(e) => Ok(Err(e)),
            };
            let ok = matches!(out, Ok(Ok(_)));
            let deliver: Deliver = Box::new(move |failed: Option<ApiError>| {
                let out = match (out, failed) {
                    (Ok(Ok(_)), Some(e)) => Ok(Err(e)),
                    (out, _) => out,
                };
                let _ = tx.send(out);
            });
            (ok, deliver)
        });
        if in_turn {
            self.enqueue(Queued { job, alone: true })?;
        } else if let Some(job) = self.write_here(job) {
            self.enqueue(Queued { job, alone: false })?;
        }
        match rx.await {
            Ok(Ok(r)) => r,
            Ok(Err(panic)) => std::panic::resume_unwind(panic),
            Err(_) => Err(ApiError::internal("the database writer dropped a write")),
        }
    }

    /// Runs `job` on the calling thread when the writer is idle (nothing queued, its
    /// connection free) and this is a worker of a multi-threaded runtime; hands the job back
    /// otherwise, for the queue. When other requests are in flight, `block_in_place` first
    /// hands the worker's other tasks to another thread for the while; when this is the only
    /// one, there is nothing to hand over, and the hand-over's thread wake-up is saved.
    ///
    /// The queue costs a write two thread wake-ups, the writer's and then the caller's: at
    /// one client on a 2-core VM, where a wake-up takes tens of microseconds, they were
    /// much of a lead create's latency (docs/performance.md, rounds six and nine). A write
    /// run here is a group of one, committed exactly as the writer thread would; under load
    /// the queue is rarely empty and writes still go to the writer, grouped. Committing on
    /// the worker without the hand-over under load cost 18% of creates at 64 connections
    /// (round eight): the writer is often idle between groups, and a worker held by a
    /// commit stalls the connections queued on it.
    fn write_here(&self, job: Job) -> Option<Job> {
        use tokio::runtime::{Handle, RuntimeFlavor};
        let multi =
            Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread);
        if !multi
            || self
                .writer
                .queued
                .load(std::sync::atomic::Ordering::Acquire)
                != 0
        {
            return Some(job);
        }
        let Ok(mut conn) = self.write.try_lock() else {
            return Some(job);
        };
        let carry = if crate::telemetry::load::requests_in_flight() <= 1 {
            run_group(&mut conn, vec![job])
        } else {
            tokio::task::block_in_place(|| run_group(&mut conn, vec![job]))
        };
        drop(conn);
        self.writer.nudge_checkpointer();
        carry.into_iter().next()
    }

    fn enqueue(&self, job: Queued) -> ApiResult<()> {
        use std::sync::atomic::Ordering;
        // Counted before it is sent, so the writer never takes it off the count first.
        crate::telemetry::prom::db_queue(1.0);
        self.writer.queued.fetch_add(1, Ordering::AcqRel);
        self.writer.jobs.send(job).map_err(|_| {
            crate::telemetry::prom::db_queue(-1.0);
            self.writer.queued.fetch_sub(1, Ordering::AcqRel);
            ApiError::internal("the database writer has stopped")
        })
    }

    fn write_blocking<T>(&self, f: impl FnOnce(&Connection<'_>) -> ApiResult<T>) -> ApiResult<T> {
        let mut conn = self.write.lock().unwrap_or_else(|p| p.into_inner());
        let out = (|| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let out = f(&Connection::sqlite(&tx))?;
            tx.commit()?;
            Ok(out)
        })();
        self.writer.nudge_checkpointer();
        out
    }

    fn read_blocking<T>(&self, f: impl FnOnce(&Connection<'_>) -> ApiResult<T>) -> ApiResult<T> {
        let conn = self.read.get()?;
        f(&Connection::sqlite(&conn))
    }

    fn vacuum(&self) -> anyhow::Result<Vacuumed> {
        let conn = self.write.lock().unwrap_or_else(|p| p.into_inner());
        let size = |c: &rusqlite::Connection| -> rusqlite::Result<(u64, u64)> {
            let page: u64 = c.query_row("PRAGMA page_size", [], |r| r.get(0))?;
            let pages: u64 = c.query_row("PRAGMA page_count", [], |r| r.get(0))?;
            let free: u64 = c.query_row("PRAGMA freelist_count", [], |r| r.get(0))?;
            Ok((pages * page, free * page))
        };
        let (bytes_before, free_bytes_before) = size(&conn)?;
        // VACUUM builds the new database in temporary storage before copying it back; with
        // the service's `temp_store = MEMORY` that would hold the whole database in RAM.
        conn.execute_batch("PRAGMA temp_store = FILE; VACUUM; PRAGMA temp_store = MEMORY;")?;
        // The copy back went through the WAL: the file shrinks when it is checkpointed.
        // While another connection runs a checkpoint of its own (a `serve` that just stopped
        // writing, a backup), TRUNCATE answers busy at once, without its busy handler: that
        // one takes milliseconds, so it is asked again, for five seconds in all (a reader
        // holding the WAL makes each ask wait out the busy timeout: once is enough then).
        // `Err(())` is busy; a failed statement ends the retries as `Ok(Err(e))`.
        use backon::BlockingRetryable;
        let truncate = || match conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
            r.get::<_, i64>(0)
        }) {
            Ok(0) => Ok(Ok(())),
            Ok(_) => Err(()),
            Err(e) => Ok(Err(e)),
        };
        let every = backon::ConstantBuilder::default()
            .with_delay(std::time::Duration::from_millis(50))
            .without_max_times();
        let started = std::time::Instant::now();
        let retried = truncate
            .retry(every)
            .sleep(std::thread::sleep)
            .when(|_| started.elapsed() < std::time::Duration::from_secs(5))
            .call();
        match retried {
            Ok(done) => done?,
            Err(()) => anyhow::bail!(
                "vacuumed, but another connection kept the WAL from being checkpointed; \
                 the file shrinks at the service's next checkpoint"
            ),
        }
        let (bytes_after, _) = size(&conn)?;
        Ok(Vacuumed {
            bytes_before,
            free_bytes_before,
            bytes_after,
        })
    }

    /// Copies the live database into `out` with SQLite's online backup: consistent while
    /// the service keeps writing.
    ///
    /// In one step (one read transaction over the whole file): a backup taken in steps starts
    /// over whenever another connection writes between two of them, so under steady writes a
    /// stepped backup of a large database need never end, and its pauses alone cost seconds
    /// per gigabyte. A reader holds up no writer in WAL mode.
    fn backup_to(&self, out: &Path) -> anyhow::Result<()> {
        let src = self.read.get()?;
        let mut dst = rusqlite::Connection::open(out)?;
        let backup = rusqlite::backup::Backup::new(&src, &mut dst)?;
        // rusqlite takes a positive page count: more pages than any database has is one step.
        backup.run_to_completion(i32::MAX, std::time::Duration::ZERO, None)?;
        Ok(())
    }
}

/// A write in the writer's queue. `alone`: a background write (`Db::write_in_turn`),
/// committed in a group of its own.
struct Queued {
    job: Job,
    alone: bool,
}

/// The writer thread: takes the next write, and with it every write already queued (up to
/// `MAX_GROUP`), and commits them as one transaction. Ends when every `Db` is dropped.
///
/// A background write (`alone`) is never grouped with others: a group's writers all hear
/// back at its commit, so a request grouped with a merge step of the lead search index
/// would wait for the step's few milliseconds even when its own write ran first
/// (docs/performance.md, round thirty-four).
fn writer_loop(
    writer: &Mutex<rusqlite::Connection>,
    queue: mpsc::Receiver<Queued>,
    queued: &std::sync::atomic::AtomicUsize,
    checkpoint: mpsc::SyncSender<()>,
) {
    let mut carry: Vec<Job> = Vec::new();
    // A background write taken off the queue while a group was being gathered: the next
    // group, alone.
    let mut held: Option<Queued> = None;
    loop {
        let mut group = std::mem::take(&mut carry);
        // Carried jobs left the queue in an earlier round; count only the ones taken now.
        let mut taken = 0usize;
        let mut alone = false;
        if group.is_empty() {
            let next = match held.take() {
                Some(q) => q,
                None => match queue.recv() {
                    Ok(q) => {
                        taken += 1;
                        q
                    }
                    Err(_) => return,
                },
            };
            alone = next.alone;
            group.push(next.job);
        }
        // Nothing more is gathered while a background write is held: it runs next.
        while !alone && held.is_none() && group.len() < MAX_GROUP {
            let Ok(q) = queue.try_recv() else { break };
            taken += 1;
            if q.alone {
                held = Some(q);
            } else {
                group.push(q.job);
            }
        }
        crate::telemetry::prom::db_queue(-(taken as f64));
        queued.fetch_sub(taken, std::sync::atomic::Ordering::AcqRel);
        // A panic inside a previous write poisons nothing here (each job catches its own),
        // but `write_blocking` callers may have; the connection stays usable either way.
        let mut conn = writer.lock().unwrap_or_else(|p| p.into_inner());
        carry = run_group(&mut conn, group);
        drop(conn);
        let _ = checkpoint.try_send(());
    }
}

/// Runs one group in one transaction; returns the jobs it could not start (when SQLite
/// rolled the whole transaction back under them), to run in the next group.
fn run_group(conn: &mut rusqlite::Connection, group: Vec<Job>) -> Vec<Job> {
    let tx = match conn.transaction_with_behavior(TransactionBehavior::Immediate) {
        Ok(tx) => tx,
        Err(e) => {
            let msg = e.to_string();
            for job in group {
                job(Err(ApiError::internal(format!("database: {msg}")))).1(None);
            }
            return Vec::new();
        }
    };
    let mut done: Vec<Deliver> = Vec::with_capacity(group.len());
    let mut jobs = group.into_iter();
    // The group's first write runs without a savepoint: should it fail, rolling the whole
    // transaction back takes nothing else with it, and the rest of the group starts over in
    // a new one. Inside a savepoint SQLite first copies every page a write changes into its
    // sub-journal (in memory, in 1 KB allocations: about fifteen pages a lead create), so a
    // group of one, which every write at one connection is, no longer pays for that.
    let mut first = true;
    while let Some(job) = jobs.next() {
        let savepoint = !std::mem::take(&mut first);
        // Cached, as every write runs them: compiling each cost more than running it.
        if savepoint
            && let Err(e) = tx
                .prepare_cached("SAVEPOINT genied_write")
                .and_then(|mut st| st.execute([]))
        {
            job(Err(ApiError::from(e))).1(None);
            continue;
        }
        let (ok, deliver) = job(Ok(&tx));
        if tx.is_autocommit() {
            // SQLite rolled the whole transaction back (I/O error, disk full, ...): the
            // writes before this one are lost with it.
            let e = || ApiError::internal("database: the transaction was rolled back");
            for d in done {
                d(Some(e()));
            }
            deliver(Some(e()));
            return jobs.collect();
        }
        if !savepoint {
            if ok {
                done.push(deliver);
                continue;
            }
            // Nothing but this write is in the transaction yet.
            if let Err(e) = tx.rollback() {
                tracing::warn!(error = %e, "could not roll back a failed write");
            }
            deliver(None);
            return jobs.collect();
        }
        let ended = if ok {
            tx.prepare_cached("RELEASE genied_write")
                .and_then(|mut st| st.execute([]).map(drop))
        } else {
            tx.execute_batch("ROLLBACK TO genied_write; RELEASE genied_write")
        };
        match ended {
            Ok(()) if ok => done.push(deliver),
            Ok(()) => deliver(None),
            Err(e) => deliver(Some(ApiError::from(e))),
        }
    }
    let started = std::time::Instant::now();
    let committed = tx.commit();
    crate::telemetry::prom::db_commit(started.elapsed());
    match committed {
        Ok(()) => done.into_iter().for_each(|d| d(None)),
        Err(e) => {
            let msg = e.to_string();
            for d in done {
                d(Some(ApiError::internal(format!("database: {msg}"))));
            }
        }
    }
    Vec::new()
}

/// Runs `f` on a read connection, inside one deferred transaction when `snapshot`.
fn read_on<T>(
    conn: &rusqlite::Connection,
    f: impl FnOnce(&Connection<'_>) -> ApiResult<T>,
    snapshot: bool,
) -> ApiResult<T> {
    if snapshot {
        // BEGIN and its end as cached statements: `Connection::transaction` parses both
        // from text on every read, which cost a point read more than the read lock it saves
        // (docs/performance.md, round twelve).
        conn.prepare_cached("BEGIN")?.execute([])?;
        let _end = EndRead(conn);
        f(&Connection::sqlite(conn))
    } else {
        f(&Connection::sqlite(conn))
    }
}

/// Ends a read transaction when dropped (a rollback, also on a panic): nothing to keep, and
/// the pooled connection never goes back holding an old snapshot.
struct EndRead<'a>(&'a rusqlite::Connection);

impl Drop for EndRead<'_> {
    fn drop(&mut self) {
        if !self.0.is_autocommit()
            && let Err(e) = self
                .0
                .prepare_cached("ROLLBACK")
                .and_then(|mut s| s.execute([]))
        {
            tracing::warn!(error = %e, "could not end a read transaction");
        }
    }
}

/// `spawn_blocking` that keeps the caller's tracing span and request (`telemetry::context`)
/// and re-raises a panic on the async side, where the panic layer turns it into a 500 envelope.
pub async fn run_blocking<T, F>(f: F) -> ApiResult<T>
where
    T: Send + 'static,
    F: FnOnce() -> ApiResult<T> + Send + 'static,
{
    run_blocking_on(&tokio::runtime::Handle::current(), f).await
}

/// `run_blocking` on the blocking pool of `pool`'s runtime. The closure still runs in the
/// caller's runtime context, so it may use the runtime as it could under `spawn_blocking`.
async fn run_blocking_on<T, F>(pool: &tokio::runtime::Handle, f: F) -> ApiResult<T>
where
    T: Send + 'static,
    F: FnOnce() -> ApiResult<T> + Send + 'static,
{
    let span = tracing::Span::current();
    let request = crate::telemetry::context::current();
    let rt = tokio::runtime::Handle::try_current().ok();
    let job = pool.spawn_blocking(move || {
        let _rt = rt.as_ref().map(tokio::runtime::Handle::enter);
        crate::telemetry::context::within(request, || span.in_scope(f))
    });
    match job.await {
        Ok(r) => r,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(ApiError::internal(format!("blocking task: {e}"))),
    }
}

/// A statement that touches no table: the database answers (readiness).
pub fn ping(c: &Connection) -> rusqlite::Result<()> {
    c.query_row("SELECT 1", [], |r| r.get::<_, i64>(0))?;
    Ok(())
}

/// Current time as returned everywhere, and stored in most tables: RFC 3339, UTC,
/// milliseconds. The audit log and leads store [`now_ms`] instead (issue #16: bytes).
pub fn now() -> String {
    fmt_time(chrono::Utc::now())
}

pub fn fmt_time(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Current time as a compact column stores it: milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// A stored time in milliseconds as the API writes it ([`now`]'s form).
pub fn ms_text(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(fmt_time)
        .unwrap_or_default()
}

/// An RFC 3339 time (a filter's bound, a cursor's position) as compact columns compare with
/// it.
pub fn text_ms(s: &str) -> rusqlite::Result<i64> {
    chrono::DateTime::parse_from_rfc3339(s)
        .map(|t| t.timestamp_millis())
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
}

/// Time-ordered record id (UUID v7): good locality in indexes and usable in keyset cursors.
pub fn new_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// Parses a JSON column, tolerating NULL and garbage as `default`.
pub fn json_col(s: Option<String>, default: serde_json::Value) -> serde_json::Value {
    s.and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or(default)
}
