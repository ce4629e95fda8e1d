//! The one SQL facade every db function uses: rusqlite's API and types (`Connection`,
//! `Statement`, `Row`, `params!`, `ToSql`, `FromSql`, `rusqlite::Result`), whichever engine
//! sits below. Keeping rusqlite's types means porting a module is a rename of its imports,
//! and the SQLite arm is one enum match around the rusqlite call: no allocation and no
//! copy of parameters or rows.

use rusqlite::types::{FromSql, ValueRef};

pub use rusqlite::{Error, OptionalExtension, Result, ToSql, params, types};

/// A connection as db functions see it: a pooled read connection or the write transaction.
pub struct Connection<'a>(Conn<'a>);

enum Conn<'a> {
    Sqlite(&'a rusqlite::Connection),
}

impl<'a> Connection<'a> {
    /// A SQLite connection (or a transaction on one, which derefs to it).
    #[inline]
    pub fn sqlite(c: &'a rusqlite::Connection) -> Connection<'a> {
        Connection(Conn::Sqlite(c))
    }

    /// Whether statements run on PostgreSQL, for the few db functions that must branch.
    #[inline]
    pub fn is_postgres(&self) -> bool {
        match self.0 {
            Conn::Sqlite(_) => false,
        }
    }

    #[inline]
    pub fn execute<P: Params>(&self, sql: &str, p: P) -> Result<usize> {
        match self.0 {
            Conn::Sqlite(c) => c.execute(sql, p.lite()),
        }
    }

    /// Runs several `;`-separated statements without parameters.
    #[inline]
    pub fn execute_batch(&self, sql: &str) -> Result<()> {
        match self.0 {
            Conn::Sqlite(c) => c.execute_batch(sql),
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
        }
    }

    #[inline]
    pub fn prepare(&self, sql: &str) -> Result<Statement<'a>> {
        match self.0 {
            Conn::Sqlite(c) => Ok(Statement(Stmt::Sqlite(c.prepare(sql)?))),
        }
    }

    #[inline]
    pub fn prepare_cached(&self, sql: &str) -> Result<Statement<'a>> {
        match self.0 {
            Conn::Sqlite(c) => Ok(Statement(Stmt::SqliteCached(c.prepare_cached(sql)?))),
        }
    }

    /// The integer key of the last row inserted (SQLite only; write `RETURNING` instead in
    /// SQL that must run on PostgreSQL).
    #[inline]
    pub fn last_insert_rowid(&self) -> i64 {
        match self.0 {
            Conn::Sqlite(c) => c.last_insert_rowid(),
        }
    }
}

/// A prepared statement.
pub struct Statement<'c>(Stmt<'c>);

enum Stmt<'c> {
    Sqlite(rusqlite::Statement<'c>),
    SqliteCached(rusqlite::CachedStatement<'c>),
}

impl<'c> Statement<'c> {
    #[inline]
    fn lite(&mut self) -> &mut rusqlite::Statement<'c> {
        match &mut self.0 {
            Stmt::Sqlite(s) => s,
            Stmt::SqliteCached(s) => s,
        }
    }

    #[inline]
    pub fn execute<P: Params>(&mut self, p: P) -> Result<usize> {
        self.lite().execute(p.lite())
    }

    #[inline]
    pub fn query_row<T, P, F>(&mut self, p: P, f: F) -> Result<T>
    where
        P: Params,
        F: FnOnce(&Row<'_>) -> Result<T>,
    {
        self.lite()
            .query_row(p.lite(), |r| f(&Row(RowRef::Sqlite(r))))
    }

    #[inline]
    pub fn query<P: Params>(&mut self, p: P) -> Result<Rows<'_>> {
        Ok(Rows(RowsInner::Sqlite(self.lite().query(p.lite())?)))
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
        self.lite().exists(p.lite())
    }
}

/// The rows of a query, read one at a time.
pub struct Rows<'s>(RowsInner<'s>);

enum RowsInner<'s> {
    Sqlite(rusqlite::Rows<'s>),
}

impl Rows<'_> {
    /// The next row, or `None` after the last.
    #[allow(clippy::should_implement_trait)]
    #[inline]
    pub fn next(&mut self) -> Result<Option<Row<'_>>> {
        match &mut self.0 {
            RowsInner::Sqlite(r) => Ok(r.next()?.map(|r| Row(RowRef::Sqlite(r)))),
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
}

impl Row<'_> {
    /// The column at `idx` (a position or a name), converted with rusqlite's `FromSql`.
    #[inline]
    pub fn get<I: ColumnIndex, T: FromSql>(&self, idx: I) -> Result<T> {
        match self.0 {
            RowRef::Sqlite(r) => r.get(idx),
        }
    }

    /// The column at `idx` as it is stored, without conversion.
    #[inline]
    pub fn get_ref<I: ColumnIndex>(&self, idx: I) -> Result<ValueRef<'_>> {
        match self.0 {
            RowRef::Sqlite(r) => r.get_ref(idx),
        }
    }
}

/// A column position or name (rusqlite's `RowIndex`, which is sealed).
pub trait ColumnIndex: rusqlite::RowIndex {}

impl ColumnIndex for usize {}
impl ColumnIndex for &str {}

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
