//! The PostgreSQL arm of the facade ([`super::sql`]): a pool of `postgres` clients (sync,
//! on the same blocking threads as SQLite's work), each with its prepared statements, the
//! rewriting of `?`/`?N` placeholders to `$N`, and the conversions that keep rusqlite's
//! types above: parameters arrive as rusqlite `ToSql` and are written as the type the
//! server inferred for them, and every column is read into a rusqlite `Value`, so
//! `FromSql` converts as it does on SQLite.

use std::cell::RefCell;
use std::collections::HashMap;
use std::error::Error as StdError;

use postgres::types::{IsNull, ToSql as PgToSql, Type, to_sql_checked};
use rusqlite::types::{ToSqlOutput, Value, ValueRef};

use crate::error::{ApiError, ApiResult};

mod embedded {
    refinery::embed_migrations!("migrations/postgres");
}

/// Key of the advisory lock every write transaction takes first (`pg_advisory_xact_lock`):
/// writes are serial across all instances, as they are on SQLite's single writer. Public
/// for the tests that hold it to make the database unwritable.
pub const WRITE_LOCK: i64 = 0x6765_6e69_6564_0001;
/// Longest wait for the write lock before the write fails: a session holding it (or a
/// write stuck inside it) shows as an error, as SQLite's busy timeout makes it, instead of
/// every write hanging. Longer than SQLite's 5 s, because on PostgreSQL this instance's own
/// writes queue on the lock too (SQLite queues them on its writer thread, unbounded).
const WRITE_LOCK_WAIT: &str = "30s";
/// Longest wait for this instance's turn to write (see [`PgDb::write`]), before the wait
/// for the lock itself.
const WRITE_TURN_WAIT: std::time::Duration = std::time::Duration::from_secs(30);
/// Key of the session lock held while migrations run, so that one instance applies them.
const MIGRATE_LOCK: i64 = 0x6765_6e69_6564_0002;
/// Prepared statements kept per connection; dynamic SQL beyond this starts a new cache.
const STATEMENT_CACHE: usize = 512;

/// A pooled client with its prepared statements (keyed by the SQL as the code wrote it).
pub struct PgClient {
    /// Always `Some` until dropped (see `Drop`).
    client: Option<postgres::Client>,
    stmts: HashMap<String, postgres::Statement>,
    /// Inside a transaction (a write, a snapshot read), where a failed prepare would abort
    /// the whole transaction: there a first prepare runs under a savepoint.
    in_tx: bool,
}

pub type PgSession = r2d2::PooledConnection<Manager>;

/// r2d2's manager for `PgClient` (r2d2_postgres hands out bare clients; the statement
/// cache must live with the connection it was prepared on).
pub struct Manager(postgres::Config);

impl r2d2::ManageConnection for Manager {
    type Connection = PgClient;
    type Error = postgres::Error;

    fn connect(&self) -> Result<PgClient, postgres::Error> {
        Ok(PgClient {
            client: Some(self.0.connect(postgres::NoTls)?),
            stmts: HashMap::new(),
            in_tx: false,
        })
    }

    fn is_valid(&self, c: &mut PgClient) -> Result<(), postgres::Error> {
        c.client().simple_query("").map(|_| ())
    }

    fn has_broken(&self, c: &mut PgClient) -> bool {
        c.client().is_closed()
    }
}

/// Closing a client blocks on its runtime, which tokio refuses on an async thread (where
/// the last `Db` of a test or a shutdown may go): there it closes on a thread of its own.
impl Drop for PgClient {
    fn drop(&mut self) {
        if let Some(c) = self.client.take()
            && tokio::runtime::Handle::try_current().is_ok()
        {
            let _ = std::thread::Builder::new().spawn(move || drop(c));
        }
    }
}

impl PgClient {
    pub(super) fn client(&mut self) -> &mut postgres::Client {
        self.client.as_mut().expect("present until dropped")
    }

    /// The prepared statement for `sql` (as written for SQLite), preparing it once. The
    /// server infers each parameter's type from where it stands; where it cannot (SQLite's
    /// `?1 IS NULL OR col = ?1` names `$1` first where any type fits), the types of the
    /// values of this first call are declared instead.
    fn prepare(&mut self, sql: &str, p: &[Param<'_>]) -> rusqlite::Result<postgres::Statement> {
        use postgres::error::SqlState;
        if let Some(st) = self.stmts.get(sql) {
            return Ok(st.clone());
        }
        let text = placeholders(sql);
        // A statement that fails to prepare aborts the transaction it is in; under a
        // savepoint only the savepoint is lost (one more round trip, on a cache miss only).
        let guard = self.in_tx;
        if guard {
            self.savepoint("SAVEPOINT genied_prepare", sql)?;
        }
        let first = self.client().prepare(&text);
        if guard {
            let end = match first {
                Ok(_) => "RELEASE SAVEPOINT genied_prepare",
                Err(_) => "ROLLBACK TO SAVEPOINT genied_prepare",
            };
            self.savepoint(end, sql)?;
        }
        let st = match first {
            Ok(st) => st,
            // 42P18 where a parameter has no type at all, 42P08 where its uses disagree
            // (`$1 IS NULL OR col = $1`).
            Err(e)
                if e.code() == Some(&SqlState::INDETERMINATE_DATATYPE)
                    || e.code() == Some(&SqlState::AMBIGUOUS_PARAMETER) =>
            {
                let types: Vec<Type> = p.iter().map(Param::pg_type).collect();
                self.client()
                    .prepare_typed(&text, &types)
                    .map_err(|e| error(e, sql))?
            }
            Err(e) => return Err(error(e, sql)),
        };
        if self.stmts.len() >= STATEMENT_CACHE {
            self.stmts.clear();
        }
        self.stmts.insert(sql.to_owned(), st.clone());
        Ok(st)
    }

    fn savepoint(&mut self, cmd: &str, sql: &str) -> rusqlite::Result<()> {
        self.client().batch_execute(cmd).map_err(|e| error(e, sql))
    }

    pub(super) fn execute(
        &mut self,
        sql: &str,
        params: &[&dyn rusqlite::ToSql],
    ) -> rusqlite::Result<usize> {
        let p = values(params)?;
        let st = self.prepare(sql, &p)?;
        let refs: Vec<&(dyn PgToSql + Sync)> = p.iter().map(|v| v as _).collect();
        let n = self
            .client()
            .execute(&st, &refs)
            .map_err(|e| error(e, sql))?;
        Ok(n as usize)
    }

    pub(super) fn query(
        &mut self,
        sql: &str,
        params: &[&dyn rusqlite::ToSql],
    ) -> rusqlite::Result<PgRows> {
        let p = values(params)?;
        let st = self.prepare(sql, &p)?;
        let refs: Vec<&(dyn PgToSql + Sync)> = p.iter().map(|v| v as _).collect();
        let rows = self.client().query(&st, &refs).map_err(|e| error(e, sql))?;
        let names: std::sync::Arc<[String]> =
            st.columns().iter().map(|c| c.name().to_owned()).collect();
        let rows = rows
            .iter()
            .map(|r| {
                (0..r.len())
                    .map(|i| column(r, i))
                    .collect::<rusqlite::Result<Vec<Value>>>()
                    .map(|vals| PgRow {
                        names: names.clone(),
                        vals,
                    })
            })
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(PgRows(rows.into_iter()))
    }
}

/// A row read whole: its values as SQLite would hold them, and the column names.
pub struct PgRow {
    names: std::sync::Arc<[String]>,
    vals: Vec<Value>,
}

impl PgRow {
    pub(super) fn value(&self, i: usize) -> rusqlite::Result<&Value> {
        self.vals
            .get(i)
            .ok_or(rusqlite::Error::InvalidColumnIndex(i))
    }

    pub(super) fn index(&self, name: &str) -> rusqlite::Result<usize> {
        self.names
            .iter()
            .position(|n| n.eq_ignore_ascii_case(name))
            .ok_or_else(|| rusqlite::Error::InvalidColumnName(name.to_owned()))
    }
}

pub struct PgRows(std::vec::IntoIter<PgRow>);

impl PgRows {
    pub(super) fn next(&mut self) -> Option<PgRow> {
        self.0.next()
    }
}

/// SQLite's SQL as PostgreSQL reads it: `?` and `?N` outside string literals and quoted
/// names become `$N`, and `LIKE` becomes `ILIKE` (SQLite's LIKE ignores case).
pub fn placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut next = 0u32;
    let mut chars = sql.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(ch) = chars.next() {
        match quote {
            Some(q) => {
                out.push(ch);
                if ch == q {
                    quote = None;
                }
            }
            None if ch == '\'' || ch == '"' => {
                quote = Some(ch);
                out.push(ch);
            }
            None if ch == '?' => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                let n = match digits.parse::<u32>() {
                    Ok(n) => n,
                    Err(_) => next + 1,
                };
                next = next.max(n);
                out.push('$');
                out.push_str(&n.to_string());
            }
            None if ch.is_ascii_alphabetic() || ch == '_' => {
                let mut word = String::from(ch);
                while let Some(w) = chars
                    .peek()
                    .filter(|w| w.is_ascii_alphanumeric() || **w == '_')
                {
                    word.push(*w);
                    chars.next();
                }
                if word.eq_ignore_ascii_case("LIKE") {
                    out.push_str("ILIKE");
                } else {
                    out.push_str(&word);
                }
            }
            None => out.push(ch),
        }
    }
    out
}

/// A rusqlite parameter, written as whatever type the server inferred for its place.
#[derive(Debug)]
struct Param<'a>(ToSqlOutput<'a>);

fn values<'a>(params: &'a [&'a dyn rusqlite::ToSql]) -> rusqlite::Result<Vec<Param<'a>>> {
    params.iter().map(|p| p.to_sql().map(Param)).collect()
}

type BoxError = Box<dyn StdError + Sync + Send>;

impl Param<'_> {
    fn value(&self) -> Option<ValueRef<'_>> {
        match &self.0 {
            ToSqlOutput::Borrowed(v) => Some(*v),
            ToSqlOutput::Owned(v) => Some(ValueRef::from(v)),
            _ => None,
        }
    }

    /// The type to declare for this value where the server cannot infer one.
    fn pg_type(&self) -> Type {
        match self.value() {
            Some(ValueRef::Integer(_)) => Type::INT8,
            Some(ValueRef::Real(_)) => Type::FLOAT8,
            Some(ValueRef::Blob(_)) => Type::BYTEA,
            _ => Type::TEXT,
        }
    }
}

impl PgToSql for Param<'_> {
    fn to_sql(&self, ty: &Type, out: &mut bytes::BytesMut) -> Result<IsNull, BoxError> {
        let Some(v) = self.value() else {
            return Err("unsupported parameter".into());
        };
        match v {
            ValueRef::Null => Ok(IsNull::Yes),
            ValueRef::Integer(i) => match *ty {
                Type::INT8 => i.to_sql(ty, out),
                Type::INT4 => i32::try_from(i)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(i)?.to_sql(ty, out),
                Type::BOOL => (i != 0).to_sql(ty, out),
                Type::FLOAT8 => (i as f64).to_sql(ty, out),
                Type::FLOAT4 => (i as f32).to_sql(ty, out),
                Type::NUMERIC => rust_decimal::Decimal::from(i).to_sql(ty, out),
                _ => i.to_string().to_sql(ty, out),
            },
            ValueRef::Real(f) => match *ty {
                Type::FLOAT8 => f.to_sql(ty, out),
                Type::FLOAT4 => (f as f32).to_sql(ty, out),
                Type::NUMERIC => rust_decimal::Decimal::try_from(f)?.to_sql(ty, out),
                Type::INT8 => (f as i64).to_sql(ty, out),
                Type::INT4 => (f as i32).to_sql(ty, out),
                _ => f.to_string().to_sql(ty, out),
            },
            ValueRef::Text(b) => {
                let s = std::str::from_utf8(b)?;
                match *ty {
                    // SQLite's integer affinity: numeric text in an integer place.
                    Type::INT8 => s.trim().parse::<i64>()?.to_sql(ty, out),
                    Type::INT4 => s.trim().parse::<i32>()?.to_sql(ty, out),
                    Type::FLOAT8 => s.trim().parse::<f64>()?.to_sql(ty, out),
                    Type::BYTEA => b.to_sql(ty, out),
                    // jsonb's binary form is a version byte, then the text.
                    Type::JSONB => {
                        out.extend_from_slice(&[1]);
                        out.extend_from_slice(b);
                        Ok(IsNull::No)
                    }
                    Type::JSON => {
                        out.extend_from_slice(b);
                        Ok(IsNull::No)
                    }
                    _ => s.to_sql(ty, out),
                }
            }
            ValueRef::Blob(b) => match *ty {
                Type::BYTEA => b.to_sql(ty, out),
                _ => std::str::from_utf8(b)?.to_sql(ty, out),
            },
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// Column `i` as the value SQLite would hold: integers (and booleans as 0/1), reals
/// (integral NUMERIC results of `SUM` as integers, as SQLite's), text and blobs.
fn column(r: &postgres::Row, i: usize) -> rusqlite::Result<Value> {
    let conv = |e: postgres::Error| {
        rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Null, Box::new(e))
    };
    let ty = r.columns()[i].type_().clone();
    Ok(match ty {
        Type::BOOL => opt(r.try_get::<_, Option<bool>>(i).map_err(conv)?, |b| {
            Value::Integer(b.into())
        }),
        Type::INT2 => opt(r.try_get::<_, Option<i16>>(i).map_err(conv)?, |n| {
            Value::Integer(n.into())
        }),
        Type::INT4 => opt(r.try_get::<_, Option<i32>>(i).map_err(conv)?, |n| {
            Value::Integer(n.into())
        }),
        Type::INT8 => opt(
            r.try_get::<_, Option<i64>>(i).map_err(conv)?,
            Value::Integer,
        ),
        Type::FLOAT4 => opt(r.try_get::<_, Option<f32>>(i).map_err(conv)?, |f| {
            Value::Real(f.into())
        }),
        Type::FLOAT8 => opt(r.try_get::<_, Option<f64>>(i).map_err(conv)?, Value::Real),
        Type::NUMERIC => opt(
            r.try_get::<_, Option<rust_decimal::Decimal>>(i)
                .map_err(conv)?,
            |d| {
                use rust_decimal::prelude::ToPrimitive;
                match (d.fract().is_zero(), d.to_i64()) {
                    (true, Some(n)) => Value::Integer(n),
                    _ => Value::Real(d.to_f64().unwrap_or(f64::NAN)),
                }
            },
        ),
        Type::BYTEA => opt(
            r.try_get::<_, Option<Vec<u8>>>(i).map_err(conv)?,
            Value::Blob,
        ),
        _ => opt(
            r.try_get::<_, Option<String>>(i).map_err(conv)?,
            Value::Text,
        ),
    })
}

fn opt<T>(v: Option<T>, f: impl FnOnce(T) -> Value) -> Value {
    v.map_or(Value::Null, f)
}

/// A PostgreSQL error as the rusqlite error the code above already handles: constraint
/// violations as SQLite's (a unique violation is a 409, a missing reference a 400).
pub fn error(e: postgres::Error, sql: &str) -> rusqlite::Error {
    use postgres::error::SqlState;
    use rusqlite::ffi;
    let code = e.code().map(|c| {
        if *c == SqlState::UNIQUE_VIOLATION {
            ffi::SQLITE_CONSTRAINT_UNIQUE
        } else if *c == SqlState::FOREIGN_KEY_VIOLATION {
            ffi::SQLITE_CONSTRAINT_FOREIGNKEY
        } else if *c == SqlState::NOT_NULL_VIOLATION {
            ffi::SQLITE_CONSTRAINT_NOTNULL
        } else if *c == SqlState::CHECK_VIOLATION {
            ffi::SQLITE_CONSTRAINT_CHECK
        } else {
            ffi::SQLITE_ERROR
        }
    });
    let msg = match e.as_db_error() {
        Some(d) => {
            tracing::debug!(sql, error = %d, "PostgreSQL statement failed");
            d.message().to_owned()
        }
        None => e.to_string(),
    };
    rusqlite::Error::SqliteFailure(
        ffi::Error::new(code.unwrap_or(ffi::SQLITE_IOERR)),
        Some(msg),
    )
}

/// The PostgreSQL side of [`super::Db`].
#[derive(Clone)]
pub struct PgDb {
    pool: r2d2::Pool<Manager>,
    /// This instance's turn to write: one permit (see [`PgDb::write`]).
    turn: std::sync::Arc<tokio::sync::Semaphore>,
}

impl PgDb {
    /// Connects, and applies pending migrations under a session advisory lock (one
    /// instance migrates; the others wait and find nothing left to do).
    pub fn open(url: &str, size: u32) -> anyhow::Result<PgDb> {
        let config: postgres::Config = url
            .parse()
            .map_err(|_| anyhow::anyhow!("--database-url is not a valid PostgreSQL URL"))?;
        off_runtime(|| PgDb::migrate_with(&config))?;
        let pool = r2d2::Pool::builder()
            .max_size(size)
            .min_idle(Some(1))
            .test_on_check_out(false)
            .build(Manager(config))?;
        Ok(PgDb {
            pool,
            turn: std::sync::Arc::new(tokio::sync::Semaphore::new(1)),
        })
    }

    fn migrate_with(config: &postgres::Config) -> anyhow::Result<Vec<i32>> {
        let mut client = config.connect(postgres::NoTls)?;
        client.execute("SELECT pg_advisory_lock($1)", &[&MIGRATE_LOCK])?;
        let runner = embedded::migrations::runner();
        let out = runner
            .run(&mut client)
            .map_err(anyhow::Error::from)
            .and_then(|_| {
                let mut v: Vec<i32> = runner
                    .get_applied_migrations(&mut client)?
                    .iter()
                    .map(|m| m.version())
                    .collect();
                v.sort_unstable();
                Ok(v)
            });
        let _ = client.execute("SELECT pg_advisory_unlock($1)", &[&MIGRATE_LOCK]);
        out
    }

    pub fn migrate(url: &str) -> anyhow::Result<Vec<i32>> {
        let config: postgres::Config = url
            .parse()
            .map_err(|_| anyhow::anyhow!("--database-url is not a valid PostgreSQL URL"))?;
        off_runtime(|| PgDb::migrate_with(&config))
    }

    /// Never known without a read: another instance may have moved the epoch a moment ago,
    /// and a notification of it (LISTEN/NOTIFY) can arrive after the next request, which
    /// would then be served from a stale cache entry. So on PostgreSQL the auth cache reads
    /// the epoch through the pool before it trusts an entry (`auth::AuthCache::get`): a
    /// revocation or role change made on any instance holds for every instance's next
    /// request, at the price of that one-row read.
    pub fn auth_epoch(&self) -> Option<i64> {
        None
    }

    /// `read_now` from any thread (see [`off_runtime`]).
    pub fn read_blocking<T: Send>(
        &self,
        f: impl FnOnce(&super::Connection<'_>) -> ApiResult<T> + Send,
    ) -> ApiResult<T> {
        off_runtime(|| self.read_now(f))
    }

    /// `write_now` from any thread (see [`off_runtime`]).
    pub fn write_blocking<T: Send>(
        &self,
        f: impl FnOnce(&super::Connection<'_>) -> ApiResult<T> + Send,
    ) -> ApiResult<T> {
        off_runtime(|| self.write_now(f))
    }

    /// Runs `f` on a pooled connection (autocommit); on a blocking thread.
    pub fn read_now<T>(
        &self,
        f: impl FnOnce(&super::Connection<'_>) -> ApiResult<T>,
    ) -> ApiResult<T> {
        let s = RefCell::new(self.pool.get()?);
        f(&super::Connection::postgres(&s))
    }

    /// `read_now` with every statement in one `REPEATABLE READ, READ ONLY` transaction: one
    /// snapshot (see `Db::read_snapshot`). Ended with a rollback, which a read-only
    /// transaction loses nothing by, also when `f` fails or panics.
    pub fn read_snapshot_now<T>(
        &self,
        f: impl FnOnce(&super::Connection<'_>) -> ApiResult<T>,
    ) -> ApiResult<T> {
        let mut s = self.pool.get()?;
        begin(&mut s, "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")?;
        run_and_end(s, false, f)
    }

    /// `write_now` for async callers, in this instance's turn. Writes are serial anyway (the
    /// advisory lock), so this instance's writes queue here, in memory, and only the one
    /// whose turn it is takes a pooled connection to wait for the lock. Without the turn
    /// every queued write held a connection of its own while it waited, and reads found the
    /// pool empty behind a write that another instance (or a stuck session) held up.
    /// A caller that gives up (a timeout dropping this future) leaves nothing behind while
    /// it waits for the turn; once the write has started it runs to its end, holding the
    /// turn until then. The `_blocking` path (start-up, the CLI) takes no turn.
    pub async fn write<T, F>(&self, f: F) -> ApiResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&super::Connection<'_>) -> ApiResult<T> + Send + 'static,
    {
        let waiting = Waiting::start();
        let turn =
            match tokio::time::timeout(WRITE_TURN_WAIT, self.turn.clone().acquire_owned()).await {
                Ok(Ok(turn)) => turn,
                Ok(Err(_)) => return Err(ApiError::internal("database: the write turn is closed")),
                Err(_) => {
                    return Err(ApiError::internal(format!(
                        "database: no turn to write within {} s (the write before it is still \
                     waiting for PostgreSQL's write lock or still running)",
                        WRITE_TURN_WAIT.as_secs()
                    )));
                }
            };
        let this = self.clone();
        super::run_blocking(move || {
            let _turn = turn;
            this.write_waiting(f, waiting)
        })
        .await
    }

    /// One transaction on a pooled connection, after the write lock: what SQLite's single
    /// writer guarantees (writes never interleave), across every instance.
    ///
    /// Metrics as on SQLite, with the meaning this engine gives them: a write is in
    /// `genied_db_write_queue_depth` while it waits its turn (this instance's turn, a
    /// pooled connection, then the write lock), as a SQLite write is while queued for the
    /// writer thread; and `genied_db_commit_duration_seconds` takes the time of each
    /// transaction's COMMIT (one write per commit here, where SQLite commits a group). Both
    /// are in-process counters around statements that run anyway: no extra round trip.
    pub fn write_now<T>(
        &self,
        f: impl FnOnce(&super::Connection<'_>) -> ApiResult<T>,
    ) -> ApiResult<T> {
        self.write_waiting(f, Waiting::start())
    }

    /// `write_now` for a write already counted as waiting.
    fn write_waiting<T>(
        &self,
        f: impl FnOnce(&super::Connection<'_>) -> ApiResult<T>,
        waiting: Waiting,
    ) -> ApiResult<T> {
        let mut s = self.pool.get()?;
        begin(
            &mut s,
            &format!(
                "BEGIN; SET LOCAL lock_timeout = '{WRITE_LOCK_WAIT}'; \
                 SELECT pg_advisory_xact_lock({WRITE_LOCK}); SET LOCAL lock_timeout TO DEFAULT"
            ),
        )?;
        // The lock is held: this write has started.
        drop(waiting);
        run_and_end(s, true, f)
    }
}

/// Opens a transaction with `sql` (`BEGIN …`); on failure the connection goes back to the
/// pool outside any transaction.
fn begin(s: &mut PgSession, sql: &str) -> ApiResult<()> {
    if let Err(e) = s.client().batch_execute(sql) {
        let _ = s.client().batch_execute("ROLLBACK");
        return Err(ApiError::from(error(e, "BEGIN")));
    }
    Ok(())
}

/// Runs `f` in the transaction `s` is in and ends it: COMMIT when `commit` and `f` returned
/// `Ok`, ROLLBACK otherwise, also when `f` panics (before the panic goes on), so a pooled
/// connection never goes back inside a transaction.
fn run_and_end<T>(
    mut s: PgSession,
    commit: bool,
    f: impl FnOnce(&super::Connection<'_>) -> ApiResult<T>,
) -> ApiResult<T> {
    s.in_tx = true;
    let cell = RefCell::new(s);
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        f(&super::Connection::postgres(&cell))
    }));
    let mut s = cell.into_inner();
    s.in_tx = false;
    let ok = commit && matches!(out, Ok(Ok(_)));
    let end = if ok { "COMMIT" } else { "ROLLBACK" };
    let committing = ok.then(std::time::Instant::now);
    let ended = s.client().batch_execute(end);
    if let Some(started) = committing {
        crate::telemetry::prom::db_commit(started.elapsed());
    }
    match out {
        Ok(Ok(v)) => match ended {
            Ok(()) => Ok(v),
            Err(e) => Err(ApiError::from(error(e, end))),
        },
        Ok(Err(e)) => Err(e),
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// A write counted in `genied_db_write_queue_depth` from before it asks for a connection
/// until it holds the write lock. Taken off when dropped, so a write that gives up (no
/// connection, the lock's timeout, a panic) leaves the gauge as it found it.
struct Waiting;

impl Waiting {
    fn start() -> Waiting {
        crate::telemetry::prom::db_queue(1.0);
        Waiting
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        crate::telemetry::prom::db_queue(-1.0);
    }
}

/// Runs `f` where the sync `postgres` client may block: that client drives a runtime of
/// its own, which tokio refuses to start on a thread that runs async tasks (the callers of
/// the `_blocking` functions at startup are). Inside any runtime, `f` runs on a scoped
/// thread of its own; elsewhere (the CLI, tokio's blocking threads) right here.
fn off_runtime<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    if tokio::runtime::Handle::try_current().is_err() {
        return f();
    }
    std::thread::scope(|s| match s.spawn(f).join() {
        Ok(v) => v,
        Err(panic) => std::panic::resume_unwind(panic),
    })
}

#[cfg(test)]
mod tests {
    use super::placeholders;

    #[test]
    fn rewrites_placeholders_outside_literals() {
        assert_eq!(
            placeholders("SELECT a FROM t WHERE b = ?1 AND c = '?2' AND d = ?2"),
            "SELECT a FROM t WHERE b = $1 AND c = '?2' AND d = $2"
        );
        assert_eq!(
            placeholders("VALUES (?, ?, \"x?\")"),
            "VALUES ($1, $2, \"x?\")"
        );
    }
}
