//! `admin migrate-storage --to-database-url postgres://…`: the records of a stopped SQLite
//! data directory copied into an empty PostgreSQL database, in one transaction, then checked
//! table by table against the source. The SQL is in [`crate::db::storage_copy`]; this is the
//! order of the steps and the report.
//!
//! One transaction on the target: a copy that fails half-way leaves nothing behind but the
//! migrated, empty schema, so running it again is the way to resume. The source is read in
//! one read transaction, so the copy is of one moment even if something writes meanwhile;
//! the check afterwards reads the source again, so such a write shows as a mismatch.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use crate::config::DatabaseUrl;
use crate::db::storage_copy::{self as copy, Digest256, Plan, Table};
use crate::db::{Connection, Db};
use crate::error::{ApiError, Kind};

/// What the copy did, per table and in all.
#[derive(Serialize, Debug, Default)]
pub struct DatabaseCopy {
    /// The target, its password replaced by `***`.
    pub to: String,
    pub from: PathBuf,
    /// Whether this run only compared (`--verify-only`), copying nothing.
    pub verify_only: bool,
    pub tables: Vec<TableCopy>,
    pub rows: u64,
    pub bytes: u64,
    pub seconds: f64,
    /// Next value of each identity column's sequence, as set after the copy.
    pub sequences: Vec<Sequence>,
    /// SQLite tables this binary's PostgreSQL schema lacks, all empty (nothing to copy).
    pub empty_tables_not_in_target: Vec<String>,
    /// SQLite columns this binary's PostgreSQL schema lacks, NULL in every row (nothing to
    /// copy).
    pub null_columns_not_in_target: Vec<String>,
    /// PostgreSQL tables with no SQLite counterpart, left as the migrations made them.
    pub target_only_tables: Vec<String>,
    /// Tables whose rows differ between the source and the target after the copy.
    pub mismatches: Vec<Mismatch>,
}

#[derive(Serialize, Debug)]
pub struct TableCopy {
    pub name: String,
    pub rows: i64,
    /// Bytes of the rows' canonical forms (what the checksum covers).
    pub bytes: u64,
    /// The table's checksum, equal on both sides (see [`Digest256`]).
    pub checksum: String,
}

#[derive(Serialize, Debug)]
pub struct Sequence {
    pub column: String,
    pub next: i64,
}

#[derive(Serialize, Debug)]
pub struct Mismatch {
    pub table: String,
    pub source_rows: i64,
    pub target_rows: i64,
    pub source_checksum: String,
    pub target_checksum: String,
}

/// Removes the URL's password from `text`, as written and percent-decoded: errors of the
/// driver should never carry it, and this makes sure.
fn scrub(url: &str, text: &str) -> String {
    let Some(pw) = url::Url::parse(url)
        .ok()
        .and_then(|u| u.password().map(str::to_owned))
        .filter(|p| !p.is_empty())
    else {
        return text.to_string();
    };
    let mut out = text.replace(&pw, "***");
    if let Ok(decoded) = percent_encoding::percent_decode_str(&pw).decode_utf8()
        && !decoded.is_empty()
    {
        out = out.replace(decoded.as_ref(), "***");
    }
    out
}

/// A failed statement as the operator reads it: which step, and the database's words.
fn failed(what: &str) -> impl Fn(rusqlite::Error) -> ApiError + '_ {
    move |e| ApiError::new(Kind::Internal, format!("{what}: {e}"))
}

fn refusal(plan: &Plan) -> Option<String> {
    let mut why = Vec::new();
    let full: Vec<String> = plan
        .missing_tables
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(t, n)| format!("{t} ({n} rows)"))
        .collect();
    if !full.is_empty() {
        why.push(format!(
            "this binary's PostgreSQL schema has no table for {}; upgrade genied before migrating",
            full.join(", ")
        ));
    }
    if !plan.missing_columns.is_empty() {
        why.push(format!(
            "this binary's PostgreSQL schema lacks the columns {}; upgrade genied before migrating",
            plan.missing_columns.join(", ")
        ));
    }
    if !plan.cycle.is_empty() {
        why.push(format!(
            "the foreign keys between {} form a cycle the copy cannot order",
            plan.cycle.join(", ")
        ));
    }
    (!why.is_empty()).then(|| why.join("; "))
}

/// Copies the SQLite database at `sqlite` into the PostgreSQL database at `url` (migrated
/// first; refused unless empty), then compares every table; with `verify_only`, only
/// compares. Mismatches are in the report, not an error: the caller decides the exit code.
pub fn copy_database(sqlite: &Path, url: &str, verify_only: bool) -> anyhow::Result<DatabaseCopy> {
    let shown = DatabaseUrl::redact(url);
    let started = Instant::now();
    let target = Db::open_postgres(url, Some(2))
        .map_err(|e| anyhow::anyhow!("{shown}: {}", scrub(url, &format!("{e:#}"))))?;
    let fail = |e: ApiError| anyhow::anyhow!("{shown}: {}", scrub(url, &e.message));
    let mut report = DatabaseCopy {
        to: shown.clone(),
        from: sqlite.to_path_buf(),
        verify_only,
        ..Default::default()
    };
    let path = sqlite.to_path_buf();
    let plan = if verify_only {
        target
            .read_blocking(move |dst| {
                let src =
                    copy::open_source(&path).map_err(failed("opening the SQLite database"))?;
                copy::plan(&Connection::sqlite(&src), dst).map_err(failed("reading the schemas"))
            })
            .map_err(fail)?
    } else {
        let copied = target
            .write_blocking(move |dst| {
                let src =
                    copy::open_source(&path).map_err(failed("opening the SQLite database"))?;
                let src = Connection::sqlite(&src);
                let plan = copy::plan(&src, dst).map_err(failed("reading the schemas"))?;
                if let Some(why) = refusal(&plan) {
                    return Err(ApiError::new(Kind::Conflict, why));
                }
                if !plan.not_empty.is_empty() {
                    let held: Vec<String> = plan
                        .not_empty
                        .iter()
                        .map(|(t, n)| format!("{t} ({n} rows)"))
                        .collect();
                    return Err(ApiError::new(
                        Kind::Conflict,
                        format!(
                            "the target database is not empty ({}); migrate into a new, empty \
                             database (a failed copy leaves it empty, so it can be run again)",
                            held.join(", ")
                        ),
                    ));
                }
                copy::prepare_target(dst, &plan.tables).map_err(failed("preparing the target"))?;
                let mut sizes = Vec::with_capacity(plan.tables.len());
                for t in &plan.tables {
                    let what = format!("copying {}", t.name);
                    sizes.push(copy::copy_table(&src, dst, t).map_err(failed(&what))?);
                }
                let seqs = copy::set_sequences(&src, dst).map_err(failed("setting sequences"))?;
                copy::finish_target(dst, &plan.tables).map_err(failed("re-enabling triggers"))?;
                Ok((plan, sizes, seqs))
            })
            .map_err(fail)?;
        let (plan, sizes, seqs) = copied;
        for (_, (rows, bytes)) in plan.tables.iter().zip(&sizes) {
            report.rows += rows;
            report.bytes += bytes;
        }
        report.sequences = seqs
            .into_iter()
            .map(|(column, next)| Sequence { column, next })
            .collect();
        plan
    };
    if verify_only && let Some(why) = refusal(&plan) {
        anyhow::bail!("{why}");
    }
    report.empty_tables_not_in_target =
        plan.missing_tables.iter().map(|(t, _)| t.clone()).collect();
    report.null_columns_not_in_target = plan.unused_columns.clone();
    report.target_only_tables = plan.target_only.clone();
    // The check reads the source again, in a new snapshot: a write since the copy's shows.
    let tables: Vec<Table> = plan.tables.clone();
    let path = sqlite.to_path_buf();
    let sums: Vec<(Digest256, Digest256)> = target
        .read_blocking(move |dst| {
            let src = copy::open_source(&path).map_err(failed("opening the SQLite database"))?;
            let src = Connection::sqlite(&src);
            tables
                .iter()
                .map(|t| {
                    let what = format!("checking {}", t.name);
                    Ok((
                        copy::checksum(&src, t).map_err(failed(&what))?,
                        copy::checksum(dst, t).map_err(failed(&what))?,
                    ))
                })
                .collect()
        })
        .map_err(fail)?;
    for (t, (s, d)) in plan.tables.iter().zip(sums) {
        if s != d {
            report.mismatches.push(Mismatch {
                table: t.name.clone(),
                source_rows: s.rows,
                target_rows: d.rows,
                source_checksum: s.hex(),
                target_checksum: d.hex(),
            });
        }
        if verify_only {
            report.rows += s.rows as u64;
            report.bytes += s.bytes;
        }
        report.tables.push(TableCopy {
            name: t.name.clone(),
            rows: s.rows,
            bytes: s.bytes,
            checksum: s.hex(),
        });
    }
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

impl DatabaseCopy {
    pub fn text(&self) -> String {
        let verb = if self.verify_only {
            "compared"
        } else {
            "copied"
        };
        let mut out = format!(
            "records: {verb} {} tables, {} rows, {} bytes from {} into {} in {:.1} s",
            self.tables.len(),
            self.rows,
            self.bytes,
            self.from.display(),
            self.to,
            self.seconds
        );
        let empty = self.tables.iter().filter(|t| t.rows == 0).count();
        for t in self.tables.iter().filter(|t| t.rows > 0) {
            out.push_str(&format!(
                "\n  {}: {} rows, {} bytes, checksum {}",
                t.name,
                t.rows,
                t.bytes,
                &t.checksum[..16]
            ));
        }
        if empty > 0 {
            out.push_str(&format!("\n  ({empty} empty tables)"));
        }
        if !self.sequences.is_empty() {
            let s: Vec<String> = self
                .sequences
                .iter()
                .map(|s| format!("{} next {}", s.column, s.next))
                .collect();
            out.push_str(&format!("\nsequences: {}", s.join(", ")));
        }
        if !self.empty_tables_not_in_target.is_empty() {
            out.push_str(&format!(
                "\nempty in SQLite and not in this PostgreSQL schema (nothing to copy): {}",
                self.empty_tables_not_in_target.join(", ")
            ));
        }
        if !self.null_columns_not_in_target.is_empty() {
            out.push_str(&format!(
                "\nNULL in every SQLite row and not in this PostgreSQL schema (nothing to copy): {}",
                self.null_columns_not_in_target.join(", ")
            ));
        }
        if !self.target_only_tables.is_empty() {
            out.push_str(&format!(
                "\nonly in PostgreSQL (left empty): {}",
                self.target_only_tables.join(", ")
            ));
        }
        if self.mismatches.is_empty() {
            out.push_str(
                "\nverified: every table's row count and checksum (SHA-256 of each row, summed) \
                 match the source",
            );
        } else {
            out.push_str(&format!(
                "\nMISMATCH in {} tables (source and target differ; did something write to the \
                 data directory during the copy?):",
                self.mismatches.len()
            ));
            for m in &self.mismatches {
                out.push_str(&format!(
                    "\n  {}: SQLite {} rows (checksum {}), PostgreSQL {} rows (checksum {})",
                    m.table,
                    m.source_rows,
                    &m.source_checksum[..16],
                    m.target_rows,
                    &m.target_checksum[..16]
                ));
            }
        }
        if !self.verify_only {
            out.push_str(
                "\nnothing was switched: start `genied serve --database-url <the same URL>` with \
                 this data directory's secrets/ to use it",
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::scrub;

    #[test]
    fn scrub_removes_the_password_as_written_and_decoded() {
        let url = "postgres://genied:p%40ss%2Fw0rd@db:5432/genied";
        assert_eq!(scrub(url, "a p%40ss%2Fw0rd b p@ss/w0rd c"), "a *** b *** c");
        assert_eq!(scrub("postgres://genied@db/x", "nothing"), "nothing");
    }
}
