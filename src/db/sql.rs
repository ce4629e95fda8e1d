//! The one SQL facade every db function uses: rusqlite's API and types (`Connection`,
//! `Statement`, `Row`, `params!`, `ToSql`, `FromSql`, `rusqlite::Result`), whichever engine
//! sits below. Keeping rusqlite's types means porting a module is a rename of its imports,
//! and the SQLite arm is one enum match around the rusqlite call: no allocation and no
//! copy of parameters or rows.

use std::cell::RefCell;

use rusqlite::types::{FromSql, FromSqlError, ValueRef};

use super::pg::{PgRow, PgRows, PgSession};

pub use rusqlite::{Error, OptionalExtension, Result, ToSql, params, types};

/// A connection as db functions see it: a pooled read connection or the write transaction.
pub struct Connection<'a>(Conn<'a>);

enum Conn<'a> {
    Sqlite(&'a rusqlite::Connection),
    Pg(&'a RefCell<PgSession>),
}

impl<'a> Connection<'a> {
    /// A SQLite connection (or a transaction on one, which derefs to it).
    #[inline]
    pub fn sqlite(c: &'a rusqlite::Connection) -> Connection<'a> {
        Connection(Conn::Sqlite(c))
    }

    /// A pooled PostgreSQL connection (inside its transaction, for writes).
    pub(super) fn postgres(c: &'a RefCell<PgSession>) -> Connection<'a> {
        Connection(Conn::Pg(c))
    }

    /// Whether statements run on PostgreSQL, for the few db functions that must branch.
    #[inline]
    pub fn is_postgres(&self) -> bool {
        match self.0 {
            Conn::Sqlite(_) => false,
            Conn::Pg(_) => true,
        }
    }

    #[inline]
    pub fn execute<P: Params>(&self, sql: &str, p: P) -> Result<usize> {
        match self.0 {
            Conn::Sqlite(c) => c.execute(sql, p.lite()),
            Conn::Pg(c) => p.with_refs(|p| c.borrow_mut().execute(sql, p)),
        }
    }

    /// Runs several `;`-separated statements without parameters.
    #[inline]
    pub fn execute_batch(&self, sql: &str) -> Result<()> {
        match self.0 {
            Conn::Sqlite(c) => c.execute_batch(sql),
            Conn::Pg(c) => c
                .borrow_mut()
                .client()
                .batch_execute(sql)
                .map_err(|e| super::pg::error(e, sql)),
        }
    }

    #[inline]
    pub fn query_row<T, P, F>(&self, sql: &str, p: P, f: F) -> Result<T>
    where
        P: Params,
        F: FnOnce(&Row<'_>) -> Result<T>,
    {
        match self.0 {
            Conn::Sqlite(c) => c.query_row(sql, p.lite(), |r| f(&Row(RowRef::Sqlite(r)))),
            Conn::Pg(c) => {
                let mut rows = p.with_refs(|p| c.borrow_mut().query(sql, p))?;
                match rows.next() {
                    Some(r) => f(&Row(RowRef::Pg(&r))),
                    None => Err(Error::QueryReturnedNoRows),
                }
            }
        }
    }

    #[inline]
    pub fn prepare(&self, sql: &str) -> Result<Statement<'a>> {
        match self.0 {
            Conn::Sqlite(c) => Ok(Statement(Stmt::Sqlite(c.prepare(sql)?))),
            Conn::Pg(c) => Statement::pg(c, sql),
        }
    }

    #[inline]
    pub fn prepare_cached(&self, sql: &str) -> Result<Statement<'a>> {
        match self.0 {
            Conn::Sqlite(c) => Ok(Statement(Stmt::SqliteCached(c.prepare_cached(sql)?))),
            Conn::Pg(c) => Statement::pg(c, sql),
        }
    }

    /// The integer key of the last row inserted (SQLite only; write `RETURNING` instead in
    /// SQL that must run on PostgreSQL).
    #[inline]
    pub fn last_insert_rowid(&self) -> i64 {
        match self.0 {
            Conn::Sqlite(c) => c.last_insert_rowid(),
            Conn::Pg(_) => panic!("last_insert_rowid on PostgreSQL: use RETURNING"),
        }
    }
}

/// A prepared statement.
pub struct Statement<'c>(Stmt<'c>);

enum Stmt<'c> {
    Sqlite(rusqlite::Statement<'c>),
    SqliteCached(rusqlite::CachedStatement<'c>),
    Pg(&'c RefCell<PgSession>, String),
}

impl<'c> Statement<'c> {
    /// Prepared (and cached) on first use, when the parameters' types are known.
    fn pg(c: &'c RefCell<PgSession>, sql: &str) -> Result<Statement<'c>> {
        Ok(Statement(Stmt::Pg(c, sql.to_owned())))
    }

    #[inline]
    fn lite(&mut self) -> std::result::Result<&mut rusqlite::Statement<'c>, PgStmt<'_, 'c>> {
        match &mut self.0 {
            Stmt::Sqlite(s) => Ok(s),
            Stmt::SqliteCached(s) => Ok(s),
            Stmt::Pg(c, sql) => Err(PgStmt(c, sql)),
        }
    }

    #[inline]
    pub fn execute<P: Params>(&mut self, p: P) -> Result<usize> {
        match self.lite() {
            Ok(s) => s.execute(p.lite()),
            Err(PgStmt(c, sql)) => p.with_refs(|p| c.borrow_mut().execute(sql, p)),
        }
    }

    #[inline]
    pub fn query_row<T, P, F>(&mut self, p: P, f: F) -> Result<T>
    where
        P: Params,
        F: FnOnce(&Row<'_>) -> Result<T>,
    {
        match self.lite() {
            Ok(s) => s.query_row(p.lite(), |r| f(&Row(RowRef::Sqlite(r)))),
            Err(PgStmt(c, sql)) => {
                let mut rows = p.with_refs(|p| c.borrow_mut().query(sql, p))?;
                match rows.next() {
                    Some(r) => f(&Row(RowRef::Pg(&r))),
                    None => Err(Error::QueryReturnedNoRows),
                }
            }
        }
    }

    #[inline]
    pub fn query<P: Params>(&mut self, p: P) -> Result<Rows<'_>> {
        match self.lite() {
            Ok(s) => Ok(Rows(RowsInner::Sqlite(s.query(p.lite())?))),
            Err(PgStmt(c, sql)) => {
                let rows = p.with_refs(|p| c.borrow_mut().query(sql, p))?;
                Ok(Rows(RowsInner::Pg(rows, None)))
            }
        }
    }

    #[inline]
    pub fn query_map<T, P, F>(&mut self, p: P, f: F) -> Result<MappedRows<'_, F>>
    where
        P: Params,
        F: FnMut(&Row<'_>) -> Result<T>,
    {
        Ok(MappedRows {
            rows: self.query(p)?,
            map: f,
        })
    }

    /// Whether the query returns at least one row.
    #[inline]
    pub fn exists<P: Params>(&mut self, p: P) -> Result<bool> {
        match self.lite() {
            Ok(s) => s.exists(p.lite()),
            Err(PgStmt(c, sql)) => {
                let mut rows = p.with_refs(|p| c.borrow_mut().query(sql, p))?;
                Ok(rows.next().is_some())
            }
        }
    }
}

/// A PostgreSQL statement: its connection and its SQL (prepared, and cached by it).
struct PgStmt<'s, 'c>(&'c RefCell<PgSession>, &'s str);

/// The rows of a query, read one at a time.
pub struct Rows<'s>(RowsInner<'s>);

enum RowsInner<'s> {
    Sqlite(rusqlite::Rows<'s>),
    Pg(PgRows, Option<PgRow>),
}

impl Rows<'_> {
    /// The next row, or `None` after the last.
    #[allow(clippy::should_implement_trait)]
    #[inline]
    pub fn next(&mut self) -> Result<Option<Row<'_>>> {
        match &mut self.0 {
            RowsInner::Sqlite(r) => Ok(r.next()?.map(|r| Row(RowRef::Sqlite(r)))),
            RowsInner::Pg(rows, cur) => {
                *cur = rows.next();
                Ok(cur.as_ref().map(|r| Row(RowRef::Pg(r))))
            }
        }
    }
}

/// `query_map`'s iterator: each row through the caller's function.
pub struct MappedRows<'s, F> {
    rows: Rows<'s>,
    map: F,
}

impl<T, F> Iterator for MappedRows<'_, F>
where
    F: FnMut(&Row<'_>) -> Result<T>,
{
    type Item = Result<T>;

    #[inline]
    fn next(&mut self) -> Option<Result<T>> {
        match self.rows.next() {
            Ok(Some(r)) => Some((self.map)(&r)),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }
    }
}

/// One result row.
pub struct Row<'r>(RowRef<'r>);

enum RowRef<'r> {
    Sqlite(&'r rusqlite::Row<'r>),
    Pg(&'r PgRow),
}

impl Row<'_> {
    /// The column at `idx` (a position or a name), converted with rusqlite's `FromSql`.
    #[inline]
    pub fn get<I: ColumnIndex, T: FromSql>(&self, idx: I) -> Result<T> {
        match self.0 {
            RowRef::Sqlite(r) => r.get(idx),
            RowRef::Pg(r) => {
                let i = idx.pg_index(r)?;
                let v = ValueRef::from(r.value(i)?);
                T::column_result(v).map_err(|e| match e {
                    FromSqlError::InvalidType => {
                        Error::InvalidColumnType(i, String::new(), v.data_type())
                    }
                    FromSqlError::OutOfRange(n) => Error::IntegralValueOutOfRange(i, n),
                    e => Error::FromSqlConversionFailure(i, v.data_type(), Box::new(e)),
                })
            }
        }
    }

    /// The column at `idx` as it is stored, without conversion.
    #[inline]
    pub fn get_ref<I: ColumnIndex>(&self, idx: I) -> Result<ValueRef<'_>> {
        match self.0 {
            RowRef::Sqlite(r) => r.get_ref(idx),
            RowRef::Pg(r) => Ok(ValueRef::from(r.value(idx.pg_index(r)?)?)),
        }
    }
}

/// A column position or name (rusqlite's `RowIndex`, which is sealed).
pub trait ColumnIndex: rusqlite::RowIndex {
    fn pg_index(&self, r: &PgRow) -> Result<usize>;
}

impl ColumnIndex for usize {
    fn pg_index(&self, r: &PgRow) -> Result<usize> {
        r.value(*self).map(|_| *self)
    }
}

impl ColumnIndex for &str {
    fn pg_index(&self, r: &PgRow) -> Result<usize> {
        r.index(self)
    }
}

/// Statement parameters in every shape rusqlite takes them (`params!`, `[]`, arrays,
/// tuples, `params_from_iter`), passed to the engine without being copied.
pub trait Params {
    type Lite: rusqlite::Params;

    /// The same parameters for rusqlite.
    fn lite(self) -> Self::Lite;

    /// Calls `f` with the parameters in order.
    fn with_refs<R>(self, f: impl FnOnce(&[&dyn ToSql]) -> R) -> R;
}

impl Params for () {
    type Lite = Self;
    #[inline]
    fn lite(self) -> Self {
        self
    }
    fn with_refs<R>(self, f: impl FnOnce(&[&dyn ToSql]) -> R) -> R {
        f(&[])
    }
}

impl<'a> Params for &'a [&'a dyn ToSql] {
    type Lite = Self;
    #[inline]
    fn lite(self) -> Self {
        self
    }
    fn with_refs<R>(self, f: impl FnOnce(&[&dyn ToSql]) -> R) -> R {
        f(self)
    }
}

impl<T: ToSql, const N: usize> Params for [T; N]
where
    [T; N]: rusqlite::Params,
{
    type Lite = Self;
    #[inline]
    fn lite(self) -> Self {
        self
    }
    fn with_refs<R>(self, f: impl FnOnce(&[&dyn ToSql]) -> R) -> R {
        let refs = self.each_ref().map(|v| v as &dyn ToSql);
        f(&refs)
    }
}

impl<'a, T: ToSql + ?Sized, const N: usize> Params for &'a [&'a T; N]
where
    &'a [&'a T; N]: rusqlite::Params,
{
    type Lite = Self;
    #[inline]
    fn lite(self) -> Self {
        self
    }
    fn with_refs<R>(self, f: impl FnOnce(&[&dyn ToSql]) -> R) -> R {
        let refs: Vec<&dyn ToSql> = self.iter().map(|v| v as &dyn ToSql).collect();
        f(&refs)
    }
}

macro_rules! tuple_params {
    ($($n:tt $t:ident),+) => {
        impl<$($t: ToSql),+> Params for ($($t,)+) {
            type Lite = Self;
            #[inline]
            fn lite(self) -> Self {
                self
            }
            fn with_refs<R>(self, f: impl FnOnce(&[&dyn ToSql]) -> R) -> R {
                f(&[$(&self.$n as &dyn ToSql),+])
            }
        }
    };
}

tuple_params!(0 A);
tuple_params!(0 A, 1 B);
tuple_params!(0 A, 1 B, 2 C);
tuple_params!(0 A, 1 B, 2 C, 3 D);
tuple_params!(0 A, 1 B, 2 C, 3 D, 4 E);
tuple_params!(0 A, 1 B, 2 C, 3 D, 4 E, 5 F);
tuple_params!(0 A, 1 B, 2 C, 3 D, 4 E, 5 F, 6 G);
tuple_params!(0 A, 1 B, 2 C, 3 D, 4 E, 5 F, 6 G, 7 H);

/// Parameters from an iterator of values (as rusqlite's `params_from_iter`).
pub struct ParamsFromIter<I>(I);

pub fn params_from_iter<I>(iter: I) -> ParamsFromIter<I>
where
    I: IntoIterator,
    I::Item: ToSql,
{
    ParamsFromIter(iter)
}

impl<I> Params for ParamsFromIter<I>
where
    I: IntoIterator,
    I::Item: ToSql,
{
    type Lite = rusqlite::ParamsFromIter<I>;
    #[inline]
    fn lite(self) -> Self::Lite {
        rusqlite::params_from_iter(self.0)
    }
    fn with_refs<R>(self, f: impl FnOnce(&[&dyn ToSql]) -> R) -> R {
        let vals: Vec<I::Item> = self.0.into_iter().collect();
        let refs: Vec<&dyn ToSql> = vals.iter().map(|v| v as &dyn ToSql).collect();
        f(&refs)
    }
}
