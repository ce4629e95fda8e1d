//! The sums behind the `analytics` resource, read from the hourly and daily rollups
//! (migration `analytics_rollups`) that triggers keep in step with `conversations` and
//! `leads`. A range is read as [`Piece`]s: whole days from the daily tables, the partial
//! first and last days from the hourly ones, so a year costs a few thousand rows. Every query
//! reads one index range: (owner, time) for a user, (time) for the all-users view.

use crate::db::sql::types::Value as SqlValue;
use crate::db::sql::{Connection, params_from_iter};

/// Whose figures: one owner's, or everyone's (admins with `adminMode`).
#[derive(Debug, Clone)]
pub enum Scope {
    All,
    Owner(String),
}

/// A filter over the rollups: scope, optional genie, and an inclusive range of hours
/// (`YYYY-MM-DDTHH`).
#[derive(Debug, Clone)]
pub struct Filter {
    pub scope: Scope,
    pub genie_id: Option<String>,
    pub from_hour: String,
    pub to_hour: String,
}

/// Sums of the conversation rollup.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Totals {
    pub conversations: i64,
    pub duration_sum: i64,
    pub analyzed: i64,
    pub successes: i64,
    pub tokens_in: i64,
    pub tokens_out: i64,
    pub cost_micros: i64,
}

/// Which rollup a piece of a range is read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grain {
    Hour,
    Day,
}

/// Part of a range: inclusive bounds in the grain's form (`YYYY-MM-DDTHH` or `YYYY-MM-DD`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    pub grain: Grain,
    pub from: String,
    pub to: String,
}

impl Piece {
    fn tables(&self) -> (&'static str, &'static str, &'static str) {
        match self.grain {
            Grain::Hour => ("conversation_rollup", "lead_rollup", "hour"),
            Grain::Day => ("conversation_rollup_daily", "lead_rollup_daily", "day"),
        }
    }
}

fn next_day(day: &str, by: i64) -> String {
    chrono::NaiveDate::parse_from_str(day, "%Y-%m-%d")
        .map(|d| {
            (d + chrono::Duration::days(by))
                .format("%Y-%m-%d")
                .to_string()
        })
        .unwrap_or_else(|_| day.to_string())
}

impl Filter {
    /// The range as pieces: the first day's hours from `from_hour` (unless it starts at
    /// midnight), the whole days between, the last day's hours up to `to_hour` (unless it
    /// ends at 23h).
    pub fn pieces(&self) -> Vec<Piece> {
        let hours = |from: &str, to: &str| Piece {
            grain: Grain::Hour,
            from: from.to_string(),
            to: to.to_string(),
        };
        let (fd, td) = (
            &self.from_hour[..10.min(self.from_hour.len())],
            &self.to_hour[..10.min(self.to_hour.len())],
        );
        if fd >= td {
            return vec![hours(&self.from_hour, &self.to_hour)];
        }
        let mut out = Vec::new();
        let first_full = if self.from_hour.ends_with("T00") {
            fd.to_string()
        } else {
            out.push(hours(&self.from_hour, &format!("{fd}T23")));
            next_day(fd, 1)
        };
        let last_full = if self.to_hour.ends_with("T23") {
            td.to_string()
        } else {
            next_day(td, -1)
        };
        if first_full <= last_full {
            out.push(Piece {
                grain: Grain::Day,
                from: first_full,
                to: last_full,
            });
        }
        if !self.to_hour.ends_with("T23") {
            out.push(hours(&format!("{td}T00"), &self.to_hour));
        }
        out
    }
}

/// The rollups' condition for a piece. The lead rollups (`genie_col` `agent_id`) keep the
/// user's and genie's ids as keys, as the leads do (V41; db::keys).
fn where_clause(f: &Filter, piece: &Piece, genie_col: &str) -> (String, Vec<SqlValue>) {
    let col = piece.tables().2;
    let id = |v: &String| -> SqlValue {
        if genie_col == "agent_id" {
            super::keys::value(v)
        } else {
            v.clone().into()
        }
    };
    let mut w = vec![format!("{col} >= ?"), format!("{col} <= ?")];
    let mut p: Vec<SqlValue> = vec![piece.from.clone().into(), piece.to.clone().into()];
    if let Scope::Owner(u) = &f.scope {
        w.push("user_id = ?".into());
        p.push(id(u));
    }
    if let Some(g) = &f.genie_id {
        w.push(format!("{genie_col} = ?"));
        p.push(id(g));
    }
    (w.join(" AND "), p)
}

const SUMS: &str = "COALESCE(SUM(conversations), 0), COALESCE(SUM(duration_sum), 0),
    COALESCE(SUM(analyzed), 0), COALESCE(SUM(successes), 0), COALESCE(SUM(tokens_in), 0),
    COALESCE(SUM(tokens_out), 0), COALESCE(SUM(cost_micros), 0)";

fn totals_at(r: &crate::db::Row, at: usize) -> rusqlite::Result<Totals> {
    Ok(Totals {
        conversations: r.get(at)?,
        duration_sum: r.get(at + 1)?,
        analyzed: r.get(at + 2)?,
        successes: r.get(at + 3)?,
        tokens_in: r.get(at + 4)?,
        tokens_out: r.get(at + 5)?,
        cost_micros: r.get(at + 6)?,
    })
}

pub fn conversation_totals(c: &Connection, f: &Filter, piece: &Piece) -> rusqlite::Result<Totals> {
    let (w, p) = where_clause(f, piece, "genie_id");
    let table = piece.tables().0;
    c.prepare_cached(&format!("SELECT {SUMS} FROM {table} WHERE {w}"))?
        .query_row(params_from_iter(p), |r| totals_at(r, 0))
}

/// The bucket column: the piece's own grain, or its day when `day`.
fn bucket(piece: &Piece, day: bool) -> &'static str {
    match (piece.grain, day) {
        (Grain::Hour, true) => "substr(hour, 1, 10)",
        (Grain::Hour, false) => "hour",
        (Grain::Day, _) => "day",
    }
}

/// The conversation sums per hour, or per day when `day` (a `Grain::Day` piece is always by
/// day): `(bucket, totals)` in time order, buckets with no conversation left out.
pub fn conversation_series(
    c: &Connection,
    f: &Filter,
    piece: &Piece,
    day: bool,
) -> rusqlite::Result<Vec<(String, Totals)>> {
    let (w, p) = where_clause(f, piece, "genie_id");
    let (bucket, table) = (bucket(piece, day), piece.tables().0);
    c.prepare_cached(&format!(
        "SELECT {bucket}, {SUMS} FROM {table} WHERE {w} GROUP BY 1 ORDER BY 1"
    ))?
    .query_map(params_from_iter(p), |r| Ok((r.get(0)?, totals_at(r, 1)?)))?
    .collect()
}

/// Leads created in the range, by current status (`''` for none).
pub fn lead_statuses(
    c: &Connection,
    f: &Filter,
    piece: &Piece,
) -> rusqlite::Result<Vec<(String, i64)>> {
    let (w, p) = where_clause(f, piece, "agent_id");
    let table = piece.tables().1;
    c.prepare_cached(&format!(
        "SELECT status, SUM(n) FROM {table} WHERE {w} GROUP BY status ORDER BY status"
    ))?
    .query_map(params_from_iter(p), |r| Ok((r.get(0)?, r.get(1)?)))?
    .collect()
}

/// Leads created per hour or day: `(bucket, all, converted)`.
pub fn lead_series(
    c: &Connection,
    f: &Filter,
    piece: &Piece,
    day: bool,
) -> rusqlite::Result<Vec<(String, i64, i64)>> {
    let (w, p) = where_clause(f, piece, "agent_id");
    let (bucket, table) = (bucket(piece, day), piece.tables().1);
    c.prepare_cached(&format!(
        "SELECT {bucket}, SUM(n), TOTAL(CASE status WHEN 'converted' THEN n END) FROM {table}
         WHERE {w} GROUP BY 1 ORDER BY 1"
    ))?
    .query_map(params_from_iter(p), |r| {
        Ok((r.get(0)?, r.get(1)?, r.get::<_, f64>(2)? as i64))
    })?
    .collect()
}

/// The earliest hour with a conversation or lead in scope (what `dateRange: all` starts at).
pub fn earliest_hour(c: &Connection, scope: &Scope) -> rusqlite::Result<Option<String>> {
    match scope {
        Scope::All => c.query_row(
            "SELECT MIN(h) FROM (SELECT MIN(hour) AS h FROM conversation_rollup
                                 UNION ALL SELECT MIN(hour) FROM lead_rollup)",
            [],
            |r| r.get(0),
        ),
        Scope::Owner(u) => c.query_row(
            "SELECT MIN(h) FROM (SELECT MIN(hour) AS h FROM conversation_rollup WHERE user_id = ?1
                                 UNION ALL SELECT MIN(hour) FROM lead_rollup WHERE user_id = ?2)",
            crate::db::sql::params![u, super::keys::Key::of(u)],
            |r| r.get(0),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(from: &str, to: &str) -> Vec<(Grain, String, String)> {
        Filter {
            scope: Scope::All,
            genie_id: None,
            from_hour: from.into(),
            to_hour: to.into(),
        }
        .pieces()
        .into_iter()
        .map(|p| (p.grain, p.from, p.to))
        .collect()
    }

    #[test]
    fn ranges_split_into_whole_days_and_edge_hours() {
        let h = |a: &str, b: &str| (Grain::Hour, a.to_string(), b.to_string());
        let d = |a: &str, b: &str| (Grain::Day, a.to_string(), b.to_string());
        assert_eq!(
            pieces("2026-01-10T08", "2026-01-10T12"),
            [h("2026-01-10T08", "2026-01-10T12")]
        );
        assert_eq!(
            pieces("2026-01-10T00", "2026-01-11T23"),
            [d("2026-01-10", "2026-01-11")]
        );
        assert_eq!(
            pieces("2026-01-10T05", "2026-01-13T02"),
            [
                h("2026-01-10T05", "2026-01-10T23"),
                d("2026-01-11", "2026-01-12"),
                h("2026-01-13T00", "2026-01-13T02")
            ]
        );
        assert_eq!(
            pieces("2026-01-10T05", "2026-01-11T02"),
            [
                h("2026-01-10T05", "2026-01-10T23"),
                h("2026-01-11T00", "2026-01-11T02")
            ]
        );
    }
}
