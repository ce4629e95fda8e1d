//! The SQL of `admin migrate-storage --to-database-url`: copying every table of a SQLite
//! database into a PostgreSQL one that has the same schema (its own migrations applied), and
//! checking the two against each other afterwards.
//!
//! Generic over the tables, so a table added later is copied without a change here: the
//! tables and columns come from SQLite's catalogue, the order from PostgreSQL's foreign keys.
//! Both sides are read through the one facade, so a value is compared as the same rusqlite
//! `Value` whichever engine held it.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rusqlite::types::Value;
use sha2::{Digest, Sha256};

use super::sql::{Connection, params_from_iter};

/// Rows read or written per statement: keeps memory flat on tables of any size and each
/// INSERT well under PostgreSQL's 65,535 parameters.
const PAGE: usize = 1000;
/// Most parameters one INSERT carries.
const MAX_PARAMS: usize = 30_000;

/// Tables the PostgreSQL migrations fill themselves (the one row of the authentication
/// epoch); their rows are replaced by the source's, and they do not make a target "not
/// empty".
const SEEDED: &[&str] = &["auth_epoch"];

/// The suffixes of the shadow tables SQLite's FTS5 keeps beside a virtual table.
const FTS_SHADOWS: &[&str] = &["data", "idx", "content", "docsize", "config"];

/// One table to copy: its columns (those both sides have, in SQLite's order) and its primary
/// key, which orders every read.
#[derive(Debug, Clone)]
pub struct Table {
    pub name: String,
    pub columns: Vec<String>,
    pub key: Vec<String>,
    /// Columns referencing the table itself (a folder's parent): written after all its rows.
    pub self_refs: Vec<String>,
}

impl Table {
    /// Where each key column stands among `columns`.
    fn key_positions(&self) -> Vec<usize> {
        self.key
            .iter()
            .map(|k| {
                self.columns
                    .iter()
                    .position(|c| c == k)
                    .expect("key column")
            })
            .collect()
    }
}

/// What the two catalogues say, before anything is written.
#[derive(Debug, Default)]
pub struct Plan {
    /// In an order in which every referenced table comes before its referrers.
    pub tables: Vec<Table>,
    /// SQLite tables PostgreSQL lacks: `(name, rows)`. The copy is refused when any has rows.
    pub missing_tables: Vec<(String, i64)>,
    /// SQLite columns PostgreSQL lacks that hold values: `table.column (n values)`. The copy
    /// is refused when there are any.
    pub missing_columns: Vec<String>,
    /// SQLite columns PostgreSQL lacks that are NULL in every row: nothing to copy, left out.
    pub unused_columns: Vec<String>,
    /// PostgreSQL tables with no SQLite counterpart (left as the migrations made them).
    pub target_only: Vec<String>,
    /// Target tables that already hold rows: `(name, rows)`. The copy is refused when any.
    pub not_empty: Vec<(String, i64)>,
    /// Tables whose foreign keys form a cycle the copy cannot order (none today).
    pub cycle: Vec<String>,
}

/// Row count and checksum of one table: the sum, modulo 2^256, of the SHA-256 of each row's
/// canonical form (every value with its type and length). Order-independent, so each engine
/// reads in its own order and collation; any changed, added or lost row changes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Digest256 {
    pub rows: i64,
    pub bytes: u64,
    sum: [u8; 32],
}

impl Digest256 {
    fn add(&mut self, row: &[u8]) {
        let h = Sha256::digest(row);
        let mut carry = 0u16;
        for i in (0..32).rev() {
            let s = u16::from(self.sum[i]) + u16::from(h[i]) + carry;
            self.sum[i] = s as u8;
            carry = s >> 8;
        }
        self.rows += 1;
        self.bytes += row.len() as u64;
    }

    pub fn hex(&self) -> String {
        hex::encode(self.sum)
    }
}

fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `"a", "b", …`: a column list for SQL.
fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|c| quote(c))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The tables of the SQLite database that hold records: not SQLite's own, not refinery's
/// history (each engine has its own), not the full-text indexes (virtual tables and their
/// shadow tables; PostgreSQL derives its `tsvector` from the copied rows).
fn sqlite_tables(c: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut st =
        c.prepare("SELECT name, COALESCE(sql, '') FROM sqlite_master WHERE type = 'table'")?;
    let all: Vec<(String, String)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let virtual_tables: Vec<&str> = all
        .iter()
        .filter(|(_, sql)| {
            sql.trim_start()
                .to_ascii_uppercase()
                .starts_with("CREATE VIRTUAL")
        })
        .map(|(n, _)| n.as_str())
        .collect();
    let mut out: Vec<String> = all
        .iter()
        .map(|(n, _)| n)
        .filter(|n| !n.starts_with("sqlite_") && n.as_str() != "refinery_schema_history")
        // What the documents' search index outside SQLite has yet to take in (V49): nothing
        // to PostgreSQL, whose full-text index is a column kept by the database.
        .filter(|n| n.as_str() != "document_search_queue")
        .filter(|n| {
            !virtual_tables.iter().any(|v| {
                n.as_str() == *v || FTS_SHADOWS.iter().any(|s| n.as_str() == format!("{v}_{s}"))
            })
        })
        .cloned()
        .collect();
    out.sort();
    Ok(out)
}

/// A SQLite table's columns in order, and its primary key columns in key order.
fn sqlite_columns(c: &Connection, table: &str) -> rusqlite::Result<(Vec<String>, Vec<String>)> {
    let mut st = c.prepare("SELECT name, pk FROM pragma_table_info(?1) ORDER BY cid")?;
    let cols: Vec<(String, i64)> = st
        .query_map([table], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let mut key: Vec<(i64, String)> = cols
        .iter()
        .filter(|(_, pk)| *pk > 0)
        .map(|(n, pk)| (*pk, n.clone()))
        .collect();
    key.sort();
    Ok((
        cols.into_iter().map(|(n, _)| n).collect(),
        key.into_iter().map(|(_, n)| n).collect(),
    ))
}

pub fn count(c: &Connection, table: &str) -> rusqlite::Result<i64> {
    c.query_row(&format!("SELECT COUNT(*) FROM {}", quote(table)), [], |r| {
        r.get(0)
    })
}

/// The PostgreSQL catalogue: writable columns per table (generated ones left out), and the
/// foreign keys as `(table, referenced table, column)`.
struct PgCatalogue {
    columns: HashMap<String, BTreeSet<String>>,
    fks: Vec<(String, String, String)>,
}

fn pg_catalogue(c: &Connection) -> rusqlite::Result<PgCatalogue> {
    let mut st = c.prepare(
        "SELECT c.table_name, c.column_name FROM information_schema.columns c
         JOIN information_schema.tables t
           ON t.table_schema = c.table_schema AND t.table_name = c.table_name
         WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'
           AND c.is_generated = 'NEVER'",
    )?;
    let mut columns: HashMap<String, BTreeSet<String>> = HashMap::new();
    for row in st.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))? {
        let (t, col) = row?;
        columns.entry(t).or_default().insert(col);
    }
    let mut st = c.prepare(
        "SELECT src.relname, dst.relname, a.attname FROM pg_constraint k
         JOIN pg_class src ON src.oid = k.conrelid
         JOIN pg_class dst ON dst.oid = k.confrelid
         JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = ANY (k.conkey)
         WHERE k.contype = 'f' AND k.connamespace = current_schema()::regnamespace",
    )?;
    let fks = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<rusqlite::Result<_>>()?;
    Ok(PgCatalogue { columns, fks })
}

/// Compares the two catalogues and orders the tables; reads both sides, writes nothing.
pub fn plan(src: &Connection, dst: &Connection) -> rusqlite::Result<Plan> {
    let cat = pg_catalogue(dst)?;
    let mut plan = Plan::default();
    let mut found: BTreeMap<String, Table> = BTreeMap::new();
    let names = sqlite_tables(src)?;
    for name in &names {
        let Some(target) = cat.columns.get(name) else {
            plan.missing_tables.push((name.clone(), count(src, name)?));
            continue;
        };
        let (mut columns, key) = sqlite_columns(src, name)?;
        let mut kept = Vec::with_capacity(columns.len());
        for col in columns.drain(..) {
            if target.contains(&col) {
                kept.push(col);
                continue;
            }
            let used: i64 = src.query_row(
                &format!(
                    "SELECT COUNT(*) FROM {} WHERE {} IS NOT NULL",
                    quote(name),
                    quote(&col)
                ),
                [],
                |r| r.get(0),
            )?;
            if used > 0 {
                plan.missing_columns
                    .push(format!("{name}.{col} ({used} values)"));
            } else {
                plan.unused_columns.push(format!("{name}.{col}"));
            }
        }
        let columns = kept;
        let self_refs = cat
            .fks
            .iter()
            .filter(|(t, r, _)| t == name && r == name)
            .map(|(_, _, col)| col.clone())
            .collect();
        // A table without a declared key (none today) is read in the order of all its
        // columns: identical rows are interchangeable for the copy and the checksum.
        let key = if key.is_empty() { columns.clone() } else { key };
        found.insert(
            name.clone(),
            Table {
                name: name.clone(),
                columns,
                key,
                self_refs,
            },
        );
    }
    let mut target_only: Vec<String> = cat
        .columns
        .keys()
        .filter(|t| !names.contains(t) && t.as_str() != "refinery_schema_history")
        .cloned()
        .collect();
    target_only.sort();
    plan.target_only = target_only;
    for t in found.keys().chain(plan.target_only.iter()) {
        let n = count(dst, t)?;
        let seeded = SEEDED.contains(&t.as_str()) && n <= 1;
        if n > 0 && !seeded {
            plan.not_empty.push((t.clone(), n));
        }
    }
    // Parents first (Kahn's algorithm, alphabetical among equals so runs repeat exactly).
    let mut deps: BTreeMap<String, BTreeSet<String>> = found
        .keys()
        .map(|t| {
            let parents = cat
                .fks
                .iter()
                .filter(|(s, r, _)| s == t && r != t && found.contains_key(r))
                .map(|(_, r, _)| r.clone())
                .collect();
            (t.clone(), parents)
        })
        .collect();
    while !deps.is_empty() {
        let ready: Vec<String> = deps
            .iter()
            .filter(|(_, p)| p.is_empty())
            .map(|(t, _)| t.clone())
            .collect();
        if ready.is_empty() {
            plan.cycle = deps.keys().cloned().collect();
            return Ok(plan);
        }
        for t in ready {
            deps.remove(&t);
            for p in deps.values_mut() {
                p.remove(&t);
            }
            plan.tables.push(found.remove(&t).expect("planned table"));
        }
    }
    Ok(plan)
}

/// Reads `table` in key order, `PAGE` rows at a time (keyset pagination, the same SQL on
/// both engines), handing each row's values to `f`.
pub fn scan(
    c: &Connection,
    t: &Table,
    mut f: impl FnMut(Vec<Value>) -> rusqlite::Result<()>,
) -> rusqlite::Result<()> {
    let cols = quoted(&t.columns);
    let key_cols = quoted(&t.key);
    let key_at = t.key_positions();
    let first = format!(
        "SELECT {cols} FROM {} ORDER BY {key_cols} LIMIT {PAGE}",
        quote(&t.name)
    );
    let marks = (1..=t.key.len())
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(", ");
    let next = format!(
        "SELECT {cols} FROM {} WHERE ({key_cols}) > ({marks}) ORDER BY {key_cols} LIMIT {PAGE}",
        quote(&t.name)
    );
    let mut after: Option<Vec<Value>> = None;
    loop {
        let mut st = c.prepare(if after.is_some() { &next } else { &first })?;
        let mut rows = match &after {
            Some(k) => st.query(params_from_iter(k.iter()))?,
            None => st.query([])?,
        };
        let mut n = 0;
        let mut last: Option<Vec<Value>> = None;
        while let Some(r) = rows.next()? {
            let vals = (0..t.columns.len())
                .map(|i| r.get::<_, Value>(i))
                .collect::<rusqlite::Result<Vec<Value>>>()?;
            last = Some(key_at.iter().map(|&i| vals[i].clone()).collect());
            f(vals)?;
            n += 1;
        }
        if n < PAGE {
            return Ok(());
        }
        after = last;
    }
}

/// One row's canonical form: each value tagged with its type, text and blobs with their
/// length, so no two different rows share a form.
pub fn canonical(vals: &[Value], out: &mut Vec<u8>) {
    out.clear();
    for v in vals {
        match v {
            Value::Null => out.extend_from_slice(b"N;"),
            Value::Integer(i) => out.extend_from_slice(format!("I{i};").as_bytes()),
            Value::Real(f) => out.extend_from_slice(format!("R{:016x};", f.to_bits()).as_bytes()),
            Value::Text(s) => {
                out.extend_from_slice(format!("T{}:", s.len()).as_bytes());
                out.extend_from_slice(s.as_bytes());
                out.push(b';');
            }
            Value::Blob(b) => {
                out.extend_from_slice(format!("B{}:", b.len()).as_bytes());
                out.extend_from_slice(b);
                out.push(b';');
            }
        }
    }
}

/// Row count and checksum of `t` as `c` holds it.
pub fn checksum(c: &Connection, t: &Table) -> rusqlite::Result<Digest256> {
    let mut d = Digest256::default();
    let mut buf = Vec::new();
    scan(c, t, |vals| {
        canonical(&vals, &mut buf);
        d.add(&buf);
        Ok(())
    })?;
    Ok(d)
}

/// Readies the target for the copy inside its transaction: user triggers off (the counts and
/// roll-ups they keep are copied as the source has them, and must not be counted twice), and
/// the rows the migrations seeded removed.
pub fn prepare_target(dst: &Connection, tables: &[Table]) -> rusqlite::Result<()> {
    for t in tables {
        dst.execute_batch(&format!(
            "ALTER TABLE {} DISABLE TRIGGER USER",
            quote(&t.name)
        ))?;
        if SEEDED.contains(&t.name.as_str()) {
            dst.execute(&format!("DELETE FROM {}", quote(&t.name)), [])?;
        }
    }
    Ok(())
}

/// Triggers back on; in the copy's transaction, so a failed copy never leaves them off.
pub fn finish_target(dst: &Connection, tables: &[Table]) -> rusqlite::Result<()> {
    for t in tables {
        dst.execute_batch(&format!(
            "ALTER TABLE {} ENABLE TRIGGER USER",
            quote(&t.name)
        ))?;
    }
    Ok(())
}

/// Copies every row of `t` from `src` to `dst` in batches; returns the rows and the bytes
/// of their canonical forms. Self-referencing columns are written NULL first and set once
/// every row of the table is in, so a row may name one after it.
pub fn copy_table(src: &Connection, dst: &Connection, t: &Table) -> rusqlite::Result<(u64, u64)> {
    let width = t.columns.len();
    let per_insert = (MAX_PARAMS / width.max(1)).clamp(1, PAGE);
    let cols = quoted(&t.columns);
    let self_at: Vec<usize> = t
        .self_refs
        .iter()
        .filter_map(|s| t.columns.iter().position(|c| c == s))
        .collect();
    let key_at = t.key_positions();
    let insert = |rows: &[Vec<Value>]| -> rusqlite::Result<()> {
        let mut sql = format!("INSERT INTO {} ({cols}) VALUES ", quote(&t.name));
        let mut n = 0;
        for (i, _) in rows.iter().enumerate() {
            if i > 0 {
                sql.push_str(", ");
            }
            sql.push('(');
            for j in 0..width {
                n += 1;
                if j > 0 {
                    sql.push_str(", ");
                }
                sql.push_str(&format!("?{n}"));
            }
            sql.push(')');
        }
        dst.execute(&sql, params_from_iter(rows.iter().flatten()))?;
        Ok(())
    };
    let mut batch: Vec<Vec<Value>> = Vec::with_capacity(per_insert);
    let mut later: Vec<(Vec<Value>, Vec<Value>)> = Vec::new();
    let (mut rows, mut bytes) = (0u64, 0u64);
    let mut buf = Vec::new();
    scan(src, t, |mut vals| {
        canonical(&vals, &mut buf);
        bytes += buf.len() as u64;
        rows += 1;
        if self_at.iter().any(|&i| vals[i] != Value::Null) {
            let refs = self_at.iter().map(|&i| vals[i].clone()).collect();
            let key = key_at.iter().map(|&i| vals[i].clone()).collect();
            later.push((key, refs));
            for &i in &self_at {
                vals[i] = Value::Null;
            }
        }
        batch.push(vals);
        if batch.len() == per_insert {
            insert(&batch)?;
            batch.clear();
        }
        Ok(())
    })?;
    if !batch.is_empty() {
        insert(&batch)?;
    }
    if !later.is_empty() {
        let mut n = 0;
        let set = t
            .self_refs
            .iter()
            .map(|c| {
                n += 1;
                format!("{} = ?{n}", quote(c))
            })
            .collect::<Vec<_>>()
            .join(", ");
        let cond = t
            .key
            .iter()
            .map(|c| {
                n += 1;
                format!("{} = ?{n}", quote(c))
            })
            .collect::<Vec<_>>()
            .join(" AND ");
        let sql = format!("UPDATE {} SET {set} WHERE {cond}", quote(&t.name));
        for (key, refs) in later {
            dst.execute(&sql, params_from_iter(refs.iter().chain(key.iter())))?;
        }
    }
    Ok((rows, bytes))
}

/// Moves each identity column's sequence past the highest id copied, and past SQLite's
/// AUTOINCREMENT high-water mark (ids of deleted rows are not handed out again). Returns
/// `(table.column, next value)`.
pub fn set_sequences(src: &Connection, dst: &Connection) -> rusqlite::Result<Vec<(String, i64)>> {
    let mut st = dst.prepare(
        "SELECT table_name, column_name FROM information_schema.columns
         WHERE table_schema = current_schema()
           AND (is_identity = 'YES' OR column_default LIKE 'nextval(%')
         ORDER BY table_name, column_name",
    )?;
    let cols: Vec<(String, String)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let has_sequence_table = src
        .query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE name = 'sqlite_sequence'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map(|n| n > 0)?;
    let mut out = Vec::new();
    for (table, col) in cols {
        let max: i64 = dst.query_row(
            &format!(
                "SELECT COALESCE(MAX({}), 0) FROM {}",
                quote(&col),
                quote(&table)
            ),
            [],
            |r| r.get(0),
        )?;
        let seen: i64 = if has_sequence_table {
            src.query_row(
                "SELECT COALESCE(MAX(seq), 0) FROM sqlite_sequence WHERE name = ?1",
                [&table],
                |r| r.get(0),
            )?
        } else {
            0
        };
        let next = max.max(seen) + 1;
        dst.query_row(
            "SELECT setval(pg_get_serial_sequence(?1, ?2), ?3, false)",
            rusqlite::params![quote(&table), col, next],
            |r| r.get::<_, i64>(0),
        )?;
        out.push((format!("{table}.{col}"), next));
    }
    Ok(out)
}

/// Opens the SQLite file for reading, inside one read transaction: every table is read from
/// the same snapshot, whatever is written after the first read.
pub fn open_source(path: &std::path::Path) -> rusqlite::Result<rusqlite::Connection> {
    let c =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    c.execute_batch("PRAGMA busy_timeout = 5000; BEGIN")?;
    Ok(c)
}
