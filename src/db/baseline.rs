//! A new SQLite database starts from the schema the migrations up to [`VERSION`] make,
//! written out once (`migrations/sqlite_baseline.sql`), instead of replaying them: a first
//! start on an empty data directory spent some 175 ms in the 45 migrations (80 of them in
//! V40 and V41, whose column changes and table rebuilds make SQLite rewrite and re-read the
//! schema at each step), and so did every test app.
//!
//! The file is made from the migrations, never by hand: the test below builds a database
//! through them and one from the file, and fails on any difference in their schema or rows.
//! `GENIED_WRITE_BASELINE=1 cargo test --lib db::baseline` rewrites it; do that after
//! raising [`VERSION`]. Migrations after it run on a new database as they do on an old one,
//! so the baseline need only move when they make first starts slow again.

use anyhow::Context;

/// The last migration the baseline includes.
pub const VERSION: i32 = 46;

const SQL: &str = include_str!("../../migrations/sqlite_baseline.sql");

/// Refinery's own table of applied migrations (its name is refinery's default).
const HISTORY: &str = "refinery_schema_history";

/// On a database with nothing in it, creates the baseline's schema and rows and records
/// migrations 1 to [`VERSION`] as applied, as refinery would have, in one transaction:
/// a start killed half-way leaves the database empty. Returns whether it did.
pub fn apply_if_empty(
    conn: &mut rusqlite::Connection,
    migrations: &[refinery::Migration],
) -> anyhow::Result<bool> {
    let empty = |c: &rusqlite::Connection| -> rusqlite::Result<bool> {
        c.query_row("SELECT count(*) = 0 FROM sqlite_schema", [], |r| r.get(0))
    };
    // Asked first without a write lock, which a process that only reads (`admin check`)
    // must not wait for while the service writes; then again inside the write, which
    // another process starting on the same new file may have taken first.
    if !empty(conn)? {
        return Ok(false);
    }
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    if !empty(&tx)? {
        return Ok(false);
    }
    tx.execute_batch(SQL)
        .context("creating the baseline schema")?;
    // Refinery's applied_on, RFC 3339 in UTC, as it writes (and later parses) them.
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Nanos, true);
    {
        let mut insert = tx.prepare(&format!(
            "INSERT INTO {HISTORY} (version, name, applied_on, checksum) VALUES (?1, ?2, ?3, ?4)"
        ))?;
        let mut recorded = 0;
        for m in migrations.iter().filter(|m| m.version() <= VERSION) {
            insert.execute(rusqlite::params![
                m.version(),
                m.name(),
                now,
                m.checksum().to_string()
            ])?;
            recorded += 1;
        }
        // A migration removed or renumbered below the baseline would leave a gap that
        // refinery reports as missing on every later start: refuse now instead.
        anyhow::ensure!(
            recorded == VERSION,
            "the baseline covers migrations 1 to {VERSION}, but {recorded} of them are embedded"
        );
    }
    tx.commit()?;
    Ok(true)
}

/// The text of the baseline for a database the migrations made: every table (and virtual
/// table) in the order it was made, the rows the migrations left in them, then indexes,
/// views and triggers (after the rows, so that no trigger fires on them). The tables a
/// virtual table keeps its data in are made by it, and SQLite's own and refinery's rows are
/// left out (refinery's are written by [`apply_if_empty`]). Only the test that checks the
/// file (and rewrites it) calls this.
#[cfg(test)]
fn render(conn: &rusqlite::Connection) -> rusqlite::Result<String> {
    let mut out = format!(
        "-- The schema and rows of a new database as migrations V1 to V{VERSION} make them,\n\
         -- applied in one step on an empty database (src/db/baseline.rs). Generated from the\n\
         -- migrations by `GENIED_WRITE_BASELINE=1 cargo test --lib db::baseline`; do not edit.\n"
    );
    let tables: Vec<(String, String, bool)> = conn
        .prepare(
            "SELECT s.name, s.sql, l.type = 'table' FROM sqlite_schema s
               JOIN pragma_table_list l ON l.schema = 'main' AND l.name = s.name
              WHERE s.type = 'table' AND l.type IN ('table', 'virtual')
                AND s.name NOT LIKE 'sqlite\\_%' ESCAPE '\\'
              ORDER BY s.rowid",
        )?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<rusqlite::Result<_>>()?;
    out.push_str("\n-- Tables\n");
    for (_, sql, _) in &tables {
        out.push_str(&format!("{sql};\n"));
    }
    out.push_str("\n-- Rows\n");
    let ordinary = tables
        .iter()
        .filter(|(name, _, ordinary)| *ordinary && name != HISTORY)
        .map(|(name, _, _)| name.as_str());
    for table in ordinary.chain(["sqlite_sequence"]) {
        for row in rows(conn, table)? {
            out.push_str(&format!("INSERT INTO \"{table}\" VALUES({row});\n"));
        }
    }
    let schema = |kind: &str, title: &str| -> rusqlite::Result<String> {
        let mut part = format!("\n-- {title}\n");
        let mut stmt = conn.prepare(
            "SELECT sql FROM sqlite_schema WHERE type = ?1 AND sql IS NOT NULL ORDER BY rowid",
        )?;
        for sql in stmt.query_map([kind], |r| r.get::<_, String>(0))? {
            part.push_str(&format!("{};\n", sql?));
        }
        Ok(part)
    };
    out.push_str(&schema("index", "Indexes")?);
    out.push_str(&schema("view", "Views")?);
    // An FTS5 index the migrations rebuilt keeps a record of its (zero) averages where a
    // new one has an empty record; rebuilt here too, once the views it may read from exist,
    // it is the same to the byte.
    out.push_str("\n-- Full-text indexes\n");
    for (name, sql, _) in tables.iter().filter(|(_, _, ordinary)| !*ordinary) {
        let averages: Option<i64> = if sql.to_ascii_lowercase().contains("using fts5") {
            conn.query_row(
                &format!("SELECT length(block) FROM \"{name}_data\" WHERE id = 1"),
                [],
                |r| r.get(0),
            )
            .ok()
        } else {
            None
        };
        if averages.is_some_and(|n| n > 0) {
            out.push_str(&format!(
                "INSERT INTO \"{name}\"(\"{name}\") VALUES('rebuild');\n"
            ));
        }
    }
    out.push_str(&schema("trigger", "Triggers")?);
    Ok(out)
}

/// Each row of `table` as SQL literals, comma-separated (SQLite's `quote()`), in the
/// table's order; none when the table does not exist.
#[cfg(test)]
fn rows(conn: &rusqlite::Connection, table: &str) -> rusqlite::Result<Vec<String>> {
    let columns: Vec<String> = conn
        .prepare("SELECT name FROM pragma_table_info(?1) ORDER BY cid")?
        .query_map([table], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    if columns.is_empty() {
        return Ok(Vec::new());
    }
    let literals = columns
        .iter()
        .map(|c| format!("quote(\"{c}\")"))
        .collect::<Vec<_>>()
        .join(" || ',' || ");
    conn.prepare(&format!("SELECT {literals} FROM \"{table}\""))?
        .query_map([], |r| r.get(0))?
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a database holds, for comparing two: every schema entry, and every table's rows
    /// (refinery's without the time each migration was applied).
    fn contents(conn: &rusqlite::Connection) -> Vec<String> {
        let mut out: Vec<String> = conn
            .prepare("SELECT type, name, tbl_name, sql FROM sqlite_schema")
            .unwrap()
            .query_map([], |r| {
                Ok(format!(
                    "{} {} on {}: {}",
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, Option<String>>(3)?.unwrap_or_default()
                ))
            })
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        let tables: Vec<String> = conn
            .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        for table in tables {
            let rows = if table == HISTORY {
                conn.prepare(&format!(
                    "SELECT version || ' ' || name || ' ' || checksum FROM {HISTORY}"
                ))
                .unwrap()
                .query_map([], |r| r.get(0))
                .unwrap()
                .collect::<rusqlite::Result<Vec<String>>>()
                .unwrap()
            } else {
                rows(conn, &table).unwrap()
            };
            out.extend(rows.into_iter().map(|row| format!("row of {table}: {row}")));
        }
        for pragma in ["user_version", "application_id", "auto_vacuum", "page_size"] {
            let v: i64 = conn
                .query_row(&format!("PRAGMA {pragma}"), [], |r| r.get(0))
                .unwrap();
            out.push(format!("{pragma} = {v}"));
        }
        out.sort();
        out
    }

    fn migrations() -> Vec<refinery::Migration> {
        super::super::embedded::migrations::runner()
            .get_migrations()
            .clone()
    }

    #[test]
    fn the_baseline_is_what_the_migrations_make() {
        let dir = tempfile::tempdir().unwrap();
        let mut migrated = rusqlite::Connection::open(dir.path().join("migrated.db")).unwrap();
        migrated
            .execute_batch("PRAGMA foreign_keys = OFF; PRAGMA journal_mode = WAL;")
            .unwrap();
        super::super::embedded::migrations::runner()
            .set_target(refinery::Target::Version(VERSION))
            .run(&mut migrated)
            .unwrap();
        let rendered = render(&migrated).unwrap();
        if std::env::var_os("GENIED_WRITE_BASELINE").is_some() {
            let path = concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/migrations/sqlite_baseline.sql"
            );
            std::fs::write(path, &rendered).unwrap();
        } else {
            let first = rendered
                .lines()
                .zip(SQL.lines().chain(std::iter::repeat("(end of file)")))
                .position(|(made, kept)| made != kept);
            assert!(
                rendered == SQL,
                "migrations/sqlite_baseline.sql is not what migrations V1 to V{VERSION} make \
                 (first difference at line {}); rewrite it with \
                 `GENIED_WRITE_BASELINE=1 cargo test --lib db::baseline`",
                first.map_or(SQL.lines().count(), |i| i) + 1
            );
        }

        let mut fresh = rusqlite::Connection::open(dir.path().join("fresh.db")).unwrap();
        fresh.execute_batch("PRAGMA journal_mode = WAL;").unwrap();
        assert!(apply_if_empty(&mut fresh, &migrations()).unwrap());
        let (want, got) = (contents(&migrated), contents(&fresh));
        assert!(want.len() > 300, "the comparison saw the schema: {want:?}");
        let missing: Vec<_> = want.iter().filter(|l| !got.contains(l)).collect();
        let extra: Vec<_> = got.iter().filter(|l| !want.contains(l)).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "missing from the baseline's database: {missing:#?}\nonly in it: {extra:#?}"
        );

        // Refinery takes the recorded migrations as its own: nothing left to apply, nothing
        // divergent or missing.
        let report = super::super::embedded::migrations::runner()
            .set_target(refinery::Target::Version(VERSION))
            .run(&mut fresh)
            .unwrap();
        assert!(report.applied_migrations().is_empty());
        // And a database with anything in it is left alone.
        assert!(!apply_if_empty(&mut fresh, &migrations()).unwrap());
        assert!(!apply_if_empty(&mut migrated, &migrations()).unwrap());
    }
}
