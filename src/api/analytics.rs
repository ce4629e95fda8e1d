//! The `analytics` resource: `overview` and `timeseries` over a `dateRange`, for the caller's
//! own genies (admins: every user's with `adminMode`), optionally for one genie. The sums
//! come from rollups the database keeps with every write (`service::analytics`).

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::action::{Action, Resource, handler, schema};
use super::{ActionRequest, Ctx, Reply, parse_uuid};
use crate::db::analytics::Scope;
use crate::error::{ApiError, ApiResult};
use crate::service::analytics::{self, Interval, Range};

/// `data` of `overview`.
#[derive(Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct OverviewReq {
    /// `24h`, `7d`, `30d` (default), `90d`, `all`, or `{from, to}` (RFC 3339, inclusive).
    #[serde(rename = "dateRange")]
    date_range: Option<Value>,
    /// Only this genie's conversations and leads.
    genie_id: Option<String>,
    /// Admins: every user's figures.
    #[serde(rename = "adminMode", default)]
    admin_mode: bool,
}

/// `data` of `timeseries`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TimeseriesReq {
    /// One of `conversations`, `average_duration_seconds`, `success_rate`, `leads`,
    /// `conversion_rate`, `tokens_in`, `tokens_out`, `tokens`, `cost`.
    metric: String,
    /// `hour` or `day`.
    interval: String,
    /// As in `overview`.
    #[serde(rename = "dateRange")]
    date_range: Option<Value>,
    genie_id: Option<String>,
    #[serde(rename = "adminMode", default)]
    admin_mode: bool,
}

fn range(v: Option<&Value>) -> ApiResult<Range> {
    const WANT: &str =
        "data.dateRange must be 24h, 7d, 30d, 90d, all, or {from, to} with RFC 3339 timestamps";
    let time = |v: &Value, name: &str| {
        v.as_str()
            .and_then(|s| chrono::DateTime::parse_from_rfc3339(s.trim()).ok())
            .map(|t| t.with_timezone(&chrono::Utc))
            .ok_or_else(|| {
                ApiError::validation(format!(
                    "data.dateRange.{name} must be an RFC 3339 timestamp"
                ))
            })
    };
    match v {
        None | Some(Value::Null) => Ok(Range::LastDays(30)),
        Some(Value::String(s)) => match s.as_str() {
            "24h" => Ok(Range::LastHours(24)),
            "7d" => Ok(Range::LastDays(7)),
            "30d" => Ok(Range::LastDays(30)),
            "90d" => Ok(Range::LastDays(90)),
            "all" => Ok(Range::All),
            _ => Err(ApiError::validation(format!("{WANT} (got '{s}')"))),
        },
        Some(Value::Object(m)) => {
            if let Some(k) = m.keys().find(|k| *k != "from" && *k != "to") {
                return Err(ApiError::validation(format!(
                    "data.dateRange: unknown member '{k}'; {WANT}"
                )));
            }
            let from = time(m.get("from").unwrap_or(&Value::Null), "from")?;
            let to = match m.get("to") {
                None | Some(Value::Null) => chrono::Utc::now(),
                Some(v) => time(v, "to")?,
            };
            Ok(Range::Between(from, to))
        }
        Some(_) => Err(ApiError::validation(WANT)),
    }
}

fn scope(ctx: &Ctx, admin_mode: bool) -> ApiResult<Scope> {
    Ok(if ctx.principal.admin_option("adminMode", admin_mode)? {
        Scope::All
    } else {
        Scope::Owner(ctx.user_id().to_string())
    })
}

fn genie(id: Option<String>) -> ApiResult<Option<String>> {
    id.map(|g| parse_uuid(&g, "data.genie_id")).transpose()
}

async fn overview(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let q: OverviewReq = req.data()?;
    let (scope, genie, range) = (
        scope(ctx, q.admin_mode)?,
        genie(q.genie_id)?,
        range(q.date_range.as_ref())?,
    );
    let data = analytics::overview(&ctx.app, scope, genie, range).await?;
    Ok(Reply::ok(json!({"overview": data})))
}

async fn timeseries(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let q: TimeseriesReq = req.data()?;
    let interval = match q.interval.as_str() {
        "hour" => Interval::Hour,
        "day" => Interval::Day,
        other => {
            return Err(ApiError::validation(format!(
                "data.interval must be hour or day (got '{other}')"
            )));
        }
    };
    let (scope, genie, range) = (
        scope(ctx, q.admin_mode)?,
        genie(q.genie_id)?,
        range(q.date_range.as_ref())?,
    );
    let data =
        analytics::timeseries(&ctx.app, scope, genie, range, q.metric.trim(), interval).await?;
    Ok(Reply::ok(json!({"timeseries": data})))
}

/// Every `analytics` action; see `api::action`.
pub const RESOURCE: Resource = Resource {
    name: "analytics",
    list_action: "overview",
    actions: &[
        Action::read("overview", handler!(overview)).data(schema::<OverviewReq>),
        Action::read("timeseries", handler!(timeseries)).data(schema::<TimeseriesReq>),
    ],
};
