//! The sums behind the `analytics` resource, read from the hourly rollups (migration
//! `analytics_rollups`) that triggers keep in step with `conversations` and `leads`. Every
//! query reads one index range: (owner, hour) for a user, (hour) for the all-users view.

use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, params_from_iter};

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

fn where_clause(f: &Filter, genie_col: &str) -> (String, Vec<SqlValue>) {
    let mut w = vec!["hour >= ?".to_string(), "hour <= ?".to_string()];
    let mut p: Vec<SqlValue> = vec![f.from_hour.clone().into(), f.to_hour.clone().into()];
    if let Scope::Owner(u) = &f.scope {
        w.push("user_id = ?".into());
        p.push(u.clone().into());
    }
    if let Some(g) = &f.genie_id {
        w.push(format!("{genie_col} = ?"));
        p.push(g.clone().into());
    }
    (w.join(" AND "), p)
}

const SUMS: &str = "COALESCE(SUM(conversations), 0), COALESCE(SUM(duration_sum), 0),
    COALESCE(SUM(analyzed), 0), COALESCE(SUM(successes), 0), COALESCE(SUM(tokens_in), 0),
    COALESCE(SUM(tokens_out), 0), COALESCE(SUM(cost_micros), 0)";

fn totals_at(r: &rusqlite::Row, at: usize) -> rusqlite::Result<Totals> {
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

pub fn conversation_totals(c: &Connection, f: &Filter) -> rusqlite::Result<Totals> {
    let (w, p) = where_clause(f, "genie_id");
    c.prepare_cached(&format!("SELECT {SUMS} FROM conversation_rollup WHERE {w}"))?
        .query_row(params_from_iter(p), |r| totals_at(r, 0))
}

/// The conversation sums per hour, or per day when `day`: `(bucket, totals)` in time order,
/// buckets with no conversation left out.
pub fn conversation_series(
    c: &Connection,
    f: &Filter,
    day: bool,
) -> rusqlite::Result<Vec<(String, Totals)>> {
    let (w, p) = where_clause(f, "genie_id");
    let bucket = if day { "substr(hour, 1, 10)" } else { "hour" };
    c.prepare_cached(&format!(
        "SELECT {bucket}, {SUMS} FROM conversation_rollup WHERE {w} GROUP BY 1 ORDER BY 1"
    ))?
    .query_map(params_from_iter(p), |r| Ok((r.get(0)?, totals_at(r, 1)?)))?
    .collect()
}

/// Leads created in the range, by current status (`''` for none).
pub fn lead_statuses(c: &Connection, f: &Filter) -> rusqlite::Result<Vec<(String, i64)>> {
    let (w, p) = where_clause(f, "agent_id");
    c.prepare_cached(&format!(
        "SELECT status, SUM(n) FROM lead_rollup WHERE {w} GROUP BY status HAVING SUM(n) > 0 ORDER BY status"
    ))?
    .query_map(params_from_iter(p), |r| Ok((r.get(0)?, r.get(1)?)))?
    .collect()
}

/// Leads created per hour or day: `(bucket, all, converted)`.
pub fn lead_series(
    c: &Connection,
    f: &Filter,
    day: bool,
) -> rusqlite::Result<Vec<(String, i64, i64)>> {
    let (w, p) = where_clause(f, "agent_id");
    let bucket = if day { "substr(hour, 1, 10)" } else { "hour" };
    c.prepare_cached(&format!(
        "SELECT {bucket}, SUM(n), TOTAL(CASE status WHEN 'converted' THEN n END) FROM lead_rollup
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
                                 UNION ALL SELECT MIN(hour) FROM lead_rollup WHERE user_id = ?1)",
            [u],
            |r| r.get(0),
        ),
    }
}
