//! Analytics over a date range: an overview (conversations, average duration, the share
//! analysed as a success, leads by status and the share converted, LLM tokens and cost) and
//! one metric over time by hour or day. Everything is summed from the hourly and daily rollups the
//! database keeps with every write (`db::analytics`), so the cost of an answer grows with
//! the hours in the range, not with the conversations in it.

use chrono::{DateTime, Duration, NaiveDateTime, Utc};
use serde_json::{Value, json};

use crate::db::analytics::{self as repo, Filter, Scope, Totals};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// Most points one `timeseries` answer holds.
pub const MAX_POINTS: i64 = 10_000;

/// The metrics `timeseries` can chart.
pub const METRICS: &[&str] = &[
    "conversations",
    "average_duration_seconds",
    "success_rate",
    "leads",
    "conversion_rate",
    "tokens_in",
    "tokens_out",
    "tokens",
    "cost",
];

/// A date range before it is resolved against the data: the last `days`, everything, or two
/// instants (inclusive).
#[derive(Debug, Clone, Copy)]
pub enum Range {
    LastDays(i64),
    LastHours(i64),
    All,
    Between(DateTime<Utc>, DateTime<Utc>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interval {
    Hour,
    Day,
}

fn hour_of(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H").to_string()
}

fn parse_hour(h: &str) -> Option<DateTime<Utc>> {
    NaiveDateTime::parse_from_str(&format!("{h}:00"), "%Y-%m-%dT%H:%M")
        .ok()
        .map(|n| n.and_utc())
}

fn share(part: i64, whole: i64) -> Value {
    if whole <= 0 {
        Value::Null
    } else {
        json!(((part as f64 / whole as f64) * 10_000.0).round() / 10_000.0)
    }
}

fn average(sum: i64, n: i64) -> Value {
    if n <= 0 {
        Value::Null
    } else {
        json!(((sum as f64 / n as f64) * 10.0).round() / 10.0)
    }
}

/// Checks the genie (it must be the owner's, or exist for the all-users view) and resolves
/// the range to whole hours.
async fn filter(
    app: &AppState,
    scope: Scope,
    genie_id: Option<String>,
    range: Range,
) -> ApiResult<Filter> {
    let now = Utc::now();
    let (g, s, all) = (genie_id.clone(), scope.clone(), matches!(range, Range::All));
    let earliest = app
        .db
        .read(move |c| {
            if let Some(g) = &g {
                let genie = crate::db::conversations::genie(c, g)?;
                let visible = match (&genie, &s) {
                    (None, _) => false,
                    (Some(_), Scope::All) => true,
                    (Some(genie), Scope::Owner(u)) => &genie.user_id == u,
                };
                if !visible {
                    return Err(ApiError::agent_not_found());
                }
            }
            if all {
                Ok(repo::earliest_hour(c, &s)?)
            } else {
                Ok(None)
            }
        })
        .await?;
    let (from, to) = match range {
        Range::LastDays(d) => (now - Duration::days(d), now),
        Range::LastHours(h) => (now - Duration::hours(h), now),
        Range::All => (earliest.as_deref().and_then(parse_hour).unwrap_or(now), now),
        Range::Between(a, b) => (a, b),
    };
    if from > to {
        return Err(ApiError::validation(
            "data.dateRange: from must not be after to",
        ));
    }
    Ok(Filter {
        scope,
        genie_id,
        from_hour: hour_of(from),
        to_hour: hour_of(to),
    })
}

fn bounds(f: &Filter) -> (String, String) {
    (
        format!("{}:00:00.000Z", f.from_hour),
        format!("{}:59:59.999Z", f.to_hour),
    )
}

/// The overview of `scope` over `range`, optionally for one genie.
pub async fn overview(
    app: &AppState,
    scope: Scope,
    genie_id: Option<String>,
    range: Range,
) -> ApiResult<Value> {
    let f = filter(app, scope, genie_id, range).await?;
    let f2 = f.clone();
    // One snapshot: an analysis stores the conversation's figures and the lead it made in
    // one transaction, and the rates below divide one by the other.
    let (t, statuses) = app
        .db
        .read_snapshot(move |c| {
            let mut t = Totals::default();
            let mut statuses: std::collections::BTreeMap<String, i64> = Default::default();
            for piece in f2.pieces() {
                let p = repo::conversation_totals(c, &f2, &piece)?;
                t.conversations += p.conversations;
                t.duration_sum += p.duration_sum;
                t.analyzed += p.analyzed;
                t.successes += p.successes;
                t.tokens_in += p.tokens_in;
                t.tokens_out += p.tokens_out;
                t.cost_micros += p.cost_micros;
                for (s, n) in repo::lead_statuses(c, &f2, &piece)? {
                    *statuses.entry(s).or_default() += n;
                }
            }
            statuses.retain(|_, n| *n > 0);
            Ok((t, statuses))
        })
        .await?;
    let leads: i64 = statuses.values().sum();
    let converted = statuses.get("converted").copied().unwrap_or(0);
    let by_status: serde_json::Map<String, Value> = statuses
        .into_iter()
        .map(|(s, n)| (if s.is_empty() { "none".into() } else { s }, json!(n)))
        .collect();
    let (from, to) = bounds(&f);
    Ok(json!({
        "from": from,
        "to": to,
        "genie_id": f.genie_id,
        "conversations": t.conversations,
        "average_duration_seconds": average(t.duration_sum, t.conversations),
        "analyzed": t.analyzed,
        "successes": t.successes,
        "success_rate": share(t.successes, t.analyzed),
        "leads": {
            "total": leads,
            "by_status": by_status,
            "converted": converted,
            "conversion_rate": share(converted, leads),
        },
        "llm": {
            "tokens_in": t.tokens_in,
            "tokens_out": t.tokens_out,
            "estimated_cost": cost(app, t.cost_micros),
        },
    }))
}

fn cost(app: &AppState, micros: i64) -> Value {
    json!({"amount": micros as f64 / 1e6, "currency": if app.prices.currency.is_empty() { "USD" } else { app.prices.currency.as_str() }})
}

/// One metric per hour or day over `range`; every bucket of the range is present (zero, or
/// null for an average or share with nothing to average).
pub async fn timeseries(
    app: &AppState,
    scope: Scope,
    genie_id: Option<String>,
    range: Range,
    metric: &str,
    interval: Interval,
) -> ApiResult<Value> {
    if !METRICS.contains(&metric) {
        return Err(ApiError::validation(format!(
            "data.metric must be one of {} (got '{metric}')",
            METRICS.join(", ")
        )));
    }
    let f = filter(app, scope, genie_id, range).await?;
    let day = interval == Interval::Day;
    let step = if day {
        Duration::days(1)
    } else {
        Duration::hours(1)
    };
    let key = |t: DateTime<Utc>| {
        if day {
            t.format("%Y-%m-%d").to_string()
        } else {
            hour_of(t)
        }
    };
    let start = parse_hour(&f.from_hour).unwrap_or_default();
    let start = if day {
        start
            .date_naive()
            .and_hms_opt(0, 0, 0)
            .unwrap_or_default()
            .and_utc()
    } else {
        start
    };
    let end = parse_hour(&f.to_hour).unwrap_or_default();
    let points = (end - start).num_seconds() / step.num_seconds() + 1;
    if points > MAX_POINTS {
        return Err(ApiError::validation(format!(
            "data.interval: the range holds {points} {}s, more than {MAX_POINTS}; choose a shorter dateRange or interval day",
            if day { "day" } else { "hour" }
        )));
    }
    let leads_metric = matches!(metric, "leads" | "conversion_rate");
    let f2 = f.clone();
    let (conv, leads) = app
        .db
        .read(move |c| {
            // By the hour, the hourly rollup alone; by the day, whole days from the daily one.
            let pieces = if day {
                f2.pieces()
            } else {
                vec![repo::Piece {
                    grain: repo::Grain::Hour,
                    from: f2.from_hour.clone(),
                    to: f2.to_hour.clone(),
                }]
            };
            let (mut conv, mut leads) = (Vec::new(), Vec::new());
            for piece in &pieces {
                if leads_metric {
                    leads.extend(repo::lead_series(c, &f2, piece, day)?);
                } else {
                    conv.extend(repo::conversation_series(c, &f2, piece, day)?);
                }
            }
            Ok((conv, leads))
        })
        .await?;
    let mut conv_by: std::collections::HashMap<String, Totals> = Default::default();
    for (b, t) in conv {
        let e = conv_by.entry(b).or_default();
        e.conversations += t.conversations;
        e.duration_sum += t.duration_sum;
        e.analyzed += t.analyzed;
        e.successes += t.successes;
        e.tokens_in += t.tokens_in;
        e.tokens_out += t.tokens_out;
        e.cost_micros += t.cost_micros;
    }
    let conv = conv_by;
    let mut leads_by: std::collections::HashMap<String, (i64, i64)> = Default::default();
    for (b, n, k) in leads {
        let e = leads_by.entry(b).or_default();
        e.0 += n;
        e.1 += k;
    }
    let leads = leads_by;
    let zero = Totals::default();
    let mut out = Vec::with_capacity(points.max(0) as usize);
    let mut t = start;
    while t <= end {
        let k = key(t);
        let c = conv.get(&k).unwrap_or(&zero);
        let (n, converted) = leads.get(&k).copied().unwrap_or((0, 0));
        let value = match metric {
            "conversations" => json!(c.conversations),
            "average_duration_seconds" => average(c.duration_sum, c.conversations),
            "success_rate" => share(c.successes, c.analyzed),
            "leads" => json!(n),
            "conversion_rate" => share(converted, n),
            "tokens_in" => json!(c.tokens_in),
            "tokens_out" => json!(c.tokens_out),
            "tokens" => json!(c.tokens_in + c.tokens_out),
            _ => json!(c.cost_micros as f64 / 1e6),
        };
        out.push(json!({"t": crate::db::fmt_time(t), "value": value}));
        t += step;
    }
    let (from, to) = bounds(&f);
    Ok(json!({
        "metric": metric,
        "interval": if day { "day" } else { "hour" },
        "from": from,
        "to": to,
        "genie_id": f.genie_id,
        "points": out,
    }))
}
