//! SQLite access: a small read pool and one writer connection. All database work runs on
//! tokio's blocking threads, so a slow query never stalls the async runtime, and every write
//! goes through the single writer inside `BEGIN IMMEDIATE`, so SQLite never answers BUSY in
//! the middle of a transaction.

pub mod activities;
pub mod api_keys;
pub mod conversations;
pub mod document_folders;
pub mod documents;
pub mod genie_groups;
pub mod genies;
pub mod lead_notes;
pub mod leads;
pub mod marketplace;
pub mod notifications;
pub mod qr_codes;
pub mod sessions;
pub mod teams;
pub mod users;
pub mod voice_collections;
pub mod voices;
pub mod webhooks;
pub mod workers;
pub mod workers_query;

use std::path::Path;
use std::sync::{Arc, Mutex};

use r2d2_sqlite::SqliteConnectionManager;
use rusqlite::{Connection, OpenFlags, Transaction, TransactionBehavior};

use crate::error::{ApiError, ApiResult};

mod embedded {
    refinery::embed_migrations!("migrations");
}

/// Applied on every connection; `busy_timeout` first so the others can wait for a lock.
const PRAGMAS: &str = "PRAGMA busy_timeout = 5000;
     PRAGMA journal_mode = WAL;
     PRAGMA synchronous = NORMAL;
     PRAGMA foreign_keys = ON;
     PRAGMA temp_store = MEMORY;";

#[derive(Clone)]
pub struct Db {
    read: r2d2::Pool<SqliteConnectionManager>,
    write: Arc<Mutex<Connection>>,
}

impl Db {
    /// Opens (creating if needed) the database and applies pending migrations.
    pub fn open(path: &Path) -> anyhow::Result<Db> {
        let mut writer = Connection::open(path)?;
        writer.execute_batch(PRAGMAS)?;
        embedded::migrations::runner().run(&mut writer)?;
        let manager = SqliteConnectionManager::file(path)
            .with_flags(
                OpenFlags::SQLITE_OPEN_READ_ONLY
                    | OpenFlags::SQLITE_OPEN_NO_MUTEX
                    | OpenFlags::SQLITE_OPEN_URI,
            )
            .with_init(|c| {
                c.execute_batch(PRAGMAS.replace("PRAGMA journal_mode = WAL;", "").as_str())
            });
        let read = r2d2::Pool::builder()
            .max_size(8)
            .min_idle(Some(1))
            .build(manager)?;
        Ok(Db {
            read,
            write: Arc::new(Mutex::new(writer)),
        })
    }

    /// Applies pending migrations and returns every applied version, oldest first.
    pub fn migrate(path: &Path) -> anyhow::Result<Vec<i32>> {
        let mut conn = Connection::open(path)?;
        conn.execute_batch(PRAGMAS)?;
        let runner = embedded::migrations::runner();
        runner.run(&mut conn)?;
        let mut versions: Vec<i32> = runner
            .get_applied_migrations(&mut conn)?
            .iter()
            .map(|m| m.version())
            .collect();
        versions.sort_unstable();
        Ok(versions)
    }

    /// Runs `f` on a pooled read-only connection, off the async threads.
    pub async fn read<T, F>(&self, f: F) -> ApiResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> ApiResult<T> + Send + 'static,
    {
        let pool = self.read.clone();
        run_blocking(move || {
            let conn = pool.get()?;
            f(&conn)
        })
        .await
    }

    /// Runs `f` inside one `BEGIN IMMEDIATE` transaction on the writer; commits when `f`
    /// returns `Ok`, rolls back otherwise, so a failed action changes nothing.
    pub async fn write<T, F>(&self, f: F) -> ApiResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Transaction) -> ApiResult<T> + Send + 'static,
    {
        let writer = self.write.clone();
        run_blocking(move || write_sync(&writer, f)).await
    }

    /// The same as `write`, for callers that are already on a blocking thread (the CLI).
    pub fn write_blocking<T>(&self, f: impl FnOnce(&Transaction) -> ApiResult<T>) -> ApiResult<T> {
        write_sync(&self.write, f)
    }

    pub fn read_blocking<T>(&self, f: impl FnOnce(&Connection) -> ApiResult<T>) -> ApiResult<T> {
        let conn = self.read.get()?;
        f(&conn)
    }

    /// Copies the live database into `out` with SQLite's online backup: consistent while
    /// the service keeps writing.
    pub fn backup_to(&self, out: &Path) -> anyhow::Result<()> {
        let src = self.read.get()?;
        let mut dst = Connection::open(out)?;
        let backup = rusqlite::backup::Backup::new(&src, &mut dst)?;
        backup.run_to_completion(256, std::time::Duration::from_millis(5), None)?;
        Ok(())
    }
}

fn write_sync<T>(
    writer: &Mutex<Connection>,
    f: impl FnOnce(&Transaction) -> ApiResult<T>,
) -> ApiResult<T> {
    // A panic inside a previous write poisons the mutex but leaves the connection usable:
    // its transaction was dropped, which rolled it back.
    let mut conn = writer.lock().unwrap_or_else(|p| p.into_inner());
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let out = f(&tx)?;
    tx.commit()?;
    Ok(out)
}

/// `spawn_blocking` that keeps the caller's tracing span and re-raises a panic on the async
/// side, where the panic layer turns it into a 500 envelope.
pub async fn run_blocking<T, F>(f: F) -> ApiResult<T>
where
    T: Send + 'static,
    F: FnOnce() -> ApiResult<T> + Send + 'static,
{
    let span = tracing::Span::current();
    match tokio::task::spawn_blocking(move || span.in_scope(f)).await {
        Ok(r) => r,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(ApiError::internal(format!("blocking task: {e}"))),
    }
}

/// Current time as stored and returned everywhere: RFC 3339, UTC, milliseconds.
pub fn now() -> String {
    fmt_time(chrono::Utc::now())
}

pub fn fmt_time(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
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
