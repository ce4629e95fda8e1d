//! The `campaigns` resource: a genie calls the leads a filter selects (the filters of `leads
//! all`), a few at a time, inside calling hours, at a bounded rate, retrying no-answer and
//! busy. A campaign belongs to its creator and its genie; another user's reads as 404.
//! States: draft → running ⇄ paused → completed | cancelled; a move the state does not allow
//! is 409 naming the state. Running, the calls and outcomes are `service::campaigns`'.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value, json};

use super::action::{Action, Resource, handler, schema};
use super::{ActionRequest, Ctx, Reply, SEARCH_TERM_MAX, page, parse_uuid, search_term};
use crate::db::campaigns::{self as repo, Campaign};
use crate::db::{self, Connection, genies, leads};
use crate::error::{ApiError, ApiResult};
use crate::service::campaigns as svc;

#[derive(Deserialize, Default, Clone, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "CampaignLeadFilters")]
pub(crate) struct FiltersIn {
    #[serde(rename = "agentId")]
    agent_id: Option<String>,
    #[serde(rename = "agentIds")]
    agent_ids: Option<Vec<String>>,
    status: Option<String>,
    priority: Option<String>,
    #[serde(rename = "searchTerm")]
    search_term: Option<String>,
    /// `7d`, `30d`, `90d` or `all`, counted back from `start`.
    #[serde(rename = "dateRange")]
    date_range: Option<String>,
}

#[derive(Deserialize, Clone, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
// `…Input`: generators name the record's inline `calling_hours` and `retry` without it.
#[schemars(rename = "CampaignCallingHoursInput")]
pub(crate) struct HoursIn {
    /// `HH:MM`, 24-hour, local time of the lead (default 09:00).
    start: Option<String>,
    /// `HH:MM`; before `start` for a window over midnight (default 20:00).
    end: Option<String>,
    /// IANA name used for leads without their own `metadata.timezone`; default the
    /// owner's profile time zone, else UTC.
    timezone: Option<String>,
}

#[derive(Deserialize, Clone, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "CampaignRetryInput")]
pub(crate) struct RetryIn {
    /// Attempts per lead in all, 1 to 10 (default 3); only no-answer and busy are retried.
    max_attempts: Option<i64>,
    /// Seconds between attempts, 0 to 604800 (default 3600).
    delay_seconds: Option<i64>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "CampaignCreate")]
pub(crate) struct CreateReq {
    #[serde(alias = "genieId")]
    genie_id: String,
    name: String,
    filters: Option<FiltersIn>,
    /// Calls at once, 1 to 50 (default 1).
    concurrency: Option<i64>,
    /// Calls started per minute, 1 to 600 (default 10).
    calls_per_minute: Option<i64>,
    calling_hours: Option<HoursIn>,
    retry: Option<RetryIn>,
    /// Who the simulated callee is (local provider), at most 2000 characters.
    persona: Option<String>,
    /// Values for `{{name}}` placeholders in the genie's prompt and first message.
    variables: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "CampaignUpdate")]
pub(crate) struct UpdateReq {
    name: Option<String>,
    filters: Option<FiltersIn>,
    concurrency: Option<i64>,
    calls_per_minute: Option<i64>,
    calling_hours: Option<HoursIn>,
    retry: Option<RetryIn>,
    #[serde(default, deserialize_with = "crate::api::double_option::deserialize")]
    #[schemars(with = "Option<String>")]
    persona: Option<Option<String>>,
    variables: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "CampaignListRequest")]
pub(crate) struct ListReq {
    #[serde(alias = "genieId")]
    genie_id: Option<String>,
    status: Option<String>,
    limit: Option<i64>,
    offset: Option<i64>,
    #[serde(default, rename = "adminMode")]
    admin_mode: bool,
}

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "CampaignCallsRequest")]
pub(crate) struct CallsReq {
    #[serde(alias = "leadId")]
    lead_id: Option<i64>,
    limit: Option<i64>,
    offset: Option<i64>,
}

/// A campaign the caller may read (`manage`: change): its owner, or an admin.
async fn load(ctx: &Ctx, id: &str) -> ApiResult<Campaign> {
    let (id, uid, admin) = (
        id.to_string(),
        ctx.user_id().to_string(),
        ctx.principal.is_admin(),
    );
    ctx.db().read(move |c| readable(c, &id, &uid, admin)).await
}

/// `load`'s check, inside a read of the caller's.
fn readable(c: &Connection, id: &str, uid: &str, admin: bool) -> ApiResult<Campaign> {
    repo::get(c, id)?
        .filter(|k| admin || k.user_id == uid)
        .ok_or_else(|| ApiError::not_found("campaign"))
}

/// The campaign as it is now: its row, counts and open calls read in one snapshot, so they
/// agree with each other while dialing goes on (a dial moves a target to `calling` and opens
/// its call in one transaction).
async fn reply_view(ctx: &Ctx, k: Campaign) -> ApiResult<Value> {
    ctx.db()
        .read_snapshot(move |c| {
            // Removed since it was loaded: answer it as it was.
            let k = repo::get(c, &k.id)?.unwrap_or(k);
            Ok(svc::view(c, &k)?)
        })
        .await
}

fn check_range(field: &str, v: i64, lo: i64, hi: i64) -> ApiResult<i64> {
    if (lo..=hi).contains(&v) {
        Ok(v)
    } else {
        Err(ApiError::validation(format!(
            "{field} must be an integer from {lo} to {hi}"
        )))
    }
}

fn check_name(name: &str) -> ApiResult<String> {
    let n = name.trim();
    if n.is_empty() || n.chars().count() > 200 {
        return Err(ApiError::validation(
            "data.name is required and must be at most 200 characters",
        ));
    }
    Ok(n.to_string())
}

/// Checks the filters (each agent a genie of `owner`) and returns them as stored.
async fn check_filters(ctx: &Ctx, owner: &str, f: FiltersIn) -> ApiResult<Value> {
    let mut agents = Vec::new();
    if let Some(a) = &f.agent_id {
        agents.push(parse_uuid(a, "data.filters.agentId")?);
    }
    for (i, a) in f.agent_ids.iter().flatten().enumerate() {
        agents.push(parse_uuid(a, &format!("data.filters.agentIds[{i}]"))?);
    }
    if let Some(s) = &f.status
        && !leads::STATUSES.contains(&s.as_str())
    {
        return Err(ApiError::validation(format!(
            "data.filters.status must be one of {}",
            leads::STATUSES.join(", ")
        )));
    }
    if let Some(p) = &f.priority
        && !leads::PRIORITIES.contains(&p.as_str())
    {
        return Err(ApiError::validation(format!(
            "data.filters.priority must be one of {}",
            leads::PRIORITIES.join(", ")
        )));
    }
    super::date_range_since(f.date_range.as_deref(), "data.filters.dateRange")?;
    let search = search_term(f.search_term, "data.filters.searchTerm", SEARCH_TERM_MAX)?;
    let (ids, me) = (agents.clone(), owner.to_string());
    ctx.db()
        .read(move |c| {
            for id in &ids {
                match genies::find(c, id)? {
                    Some(g) if g.user_id == me => {}
                    _ => return Err(ApiError::agent_not_found()),
                }
            }
            Ok(())
        })
        .await?;
    agents.dedup();
    let mut out = serde_json::Map::new();
    if !agents.is_empty() {
        out.insert("agentIds".into(), json!(agents));
    }
    for (k, v) in [
        ("status", f.status),
        ("priority", f.priority),
        ("searchTerm", search),
        ("dateRange", f.date_range),
    ] {
        if let Some(v) = v {
            out.insert(k.into(), json!(v));
        }
    }
    Ok(Value::Object(out))
}

fn apply_hours(k: &mut Campaign, h: HoursIn) -> ApiResult<()> {
    if let Some(s) = h.start {
        svc::parse_hm(&s).ok_or_else(|| {
            ApiError::validation("data.calling_hours.start must be HH:MM (24-hour)")
        })?;
        k.hours_start = s;
    }
    if let Some(e) = h.end {
        svc::parse_hm(&e).ok_or_else(|| {
            ApiError::validation("data.calling_hours.end must be HH:MM (24-hour)")
        })?;
        k.hours_end = e;
    }
    if k.hours_start == k.hours_end {
        return Err(ApiError::validation(
            "data.calling_hours: start and end must differ",
        ));
    }
    if let Some(tz) = h.timezone {
        if tz.parse::<chrono_tz::Tz>().is_err() {
            return Err(ApiError::validation(format!(
                "data.calling_hours.timezone: '{tz}' is not an IANA time zone (e.g. Europe/Berlin)"
            )));
        }
        k.timezone = tz;
    }
    Ok(())
}

fn apply_retry(k: &mut Campaign, r: RetryIn) -> ApiResult<()> {
    if let Some(n) = r.max_attempts {
        k.max_attempts = check_range("data.retry.max_attempts", n, 1, 10)?;
    }
    if let Some(d) = r.delay_seconds {
        k.retry_delay_seconds = check_range("data.retry.delay_seconds", d, 0, 604_800)?;
    }
    Ok(())
}

fn apply_common(
    k: &mut Campaign,
    concurrency: Option<i64>,
    cpm: Option<i64>,
    variables: Option<BTreeMap<String, String>>,
) -> ApiResult<()> {
    if let Some(n) = concurrency {
        k.concurrency = check_range("data.concurrency", n, 1, 50)?;
    }
    if let Some(n) = cpm {
        k.calls_per_minute = check_range("data.calls_per_minute", n, 1, 600)?;
    }
    if let Some(v) = variables {
        if v.len() > 50
            || v.iter()
                .any(|(n, x)| n.is_empty() || n.len() > 100 || x.len() > 2000)
        {
            return Err(ApiError::validation(
                "data.variables: at most 50 names of 1-100 characters with values of at most 2000",
            ));
        }
        k.variables = json!(v);
    }
    Ok(())
}

fn check_persona(p: &str) -> ApiResult<()> {
    if p.chars().count() > 2000 {
        return Err(ApiError::validation(
            "data.persona must be at most 2000 characters",
        ));
    }
    Ok(())
}

async fn all(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let q: ListReq = req.data()?;
    let admin = ctx.principal.admin_option("adminMode", q.admin_mode)?;
    let (limit, offset) = page(q.limit, q.offset, 50, 500)?;
    let genie = q
        .genie_id
        .as_deref()
        .map(|g| parse_uuid(g, "data.genie_id"))
        .transpose()?;
    if let Some(s) = &q.status
        && !svc::STATES.contains(&s.as_str())
    {
        return Err(ApiError::validation(format!(
            "data.status must be one of {}",
            svc::STATES.join(", ")
        )));
    }
    let user = (!admin).then(|| ctx.user_id().to_string());
    let (items, count) = ctx
        .db()
        .read_snapshot(move |c| {
            let (list, count) = repo::list(
                c,
                user.as_deref(),
                genie.as_deref(),
                q.status.as_deref(),
                limit,
                offset,
            )?;
            let items = list
                .iter()
                .map(|k| svc::view(c, k))
                .collect::<Result<Vec<_>, _>>()?;
            Ok((items, count))
        })
        .await?;
    Ok(Reply::ok(
        json!({"campaigns": items, "count": count, "limit": limit, "offset": offset}),
    ))
}

async fn get(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let (id, uid, admin) = (
        req.uuid()?,
        ctx.user_id().to_string(),
        ctx.principal.is_admin(),
    );
    // The check and the view in one snapshot: one read of the row, not `load` then
    // `reply_view`'s second.
    let v = ctx
        .db()
        .read_snapshot(move |c| Ok(svc::view(c, &readable(c, &id, &uid, admin)?)?))
        .await?;
    Ok(Reply::ok(json!({"campaign": v})))
}

async fn create(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let body: CreateReq = req.data()?;
    let name = check_name(&body.name)?;
    let gid = parse_uuid(&body.genie_id, "data.genie_id")?;
    let (uid, role, g2) = (ctx.user_id().to_string(), ctx.principal.role, gid.clone());
    let (genie, owner_tz) = ctx
        .db()
        .read(move |c| {
            let g = genies::get_manageable(c, &uid, role, &g2)?
                .ok_or_else(ApiError::agent_not_found)?;
            let tz = db::users::get(c, &g.user_id)?.and_then(|u| u.timezone);
            Ok((g, tz))
        })
        .await?;
    // The campaign belongs to the genie's owner, whose leads it calls.
    let owner = genie.user_id.clone();
    let filters = check_filters(ctx, &owner, body.filters.unwrap_or_default()).await?;
    let now = db::now();
    let mut k = Campaign {
        id: db::new_id(),
        user_id: owner,
        genie_id: genie.id.clone(),
        name,
        status: "draft".into(),
        filters,
        concurrency: 1,
        calls_per_minute: 10,
        hours_start: "09:00".into(),
        hours_end: "20:00".into(),
        timezone: owner_tz
            .filter(|t| t.parse::<chrono_tz::Tz>().is_ok())
            .unwrap_or_else(|| "UTC".into()),
        max_attempts: 3,
        retry_delay_seconds: 3600,
        persona: None,
        variables: json!({}),
        waiting: None,
        tick_seq: 0,
        created_at: now.clone(),
        updated_at: now.clone(),
        started_at: None,
        finished_at: None,
    };
    apply_common(
        &mut k,
        body.concurrency,
        body.calls_per_minute,
        body.variables,
    )?;
    if let Some(h) = body.calling_hours {
        apply_hours(&mut k, h)?;
    }
    if let Some(r) = body.retry {
        apply_retry(&mut k, r)?;
    }
    if let Some(p) = body.persona {
        check_persona(&p)?;
        k.persona = Some(p);
    }
    let k2 = k.clone();
    ctx.db().write(move |c| Ok(repo::insert(c, &k2)?)).await?;
    let (id, name) = (k.id.clone(), k.name.clone());
    Ok(
        Reply::created(json!({"campaign": reply_view(ctx, k).await?}))
            .record(&id)
            .summary(format!(
                "created campaign '{name}' for genie '{}'",
                genie.name
            )),
    )
}

async fn update(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let body: UpdateReq = req.data()?;
    let mut k = load(ctx, &id).await?;
    if !matches!(k.status.as_str(), "draft" | "paused") {
        return Err(ApiError::conflict(format!(
            "cannot update campaign '{}': it is {} (a draft or a paused campaign can change)",
            k.name, k.status
        )));
    }
    if let Some(n) = &body.name {
        k.name = check_name(n)?;
    }
    if let Some(f) = body.filters {
        if k.status != "draft" {
            return Err(ApiError::conflict(format!(
                "cannot change the filters of campaign '{}': it is {} (its leads were chosen when it started)",
                k.name, k.status
            )));
        }
        k.filters = check_filters(ctx, &k.user_id.clone(), f).await?;
    }
    apply_common(
        &mut k,
        body.concurrency,
        body.calls_per_minute,
        body.variables,
    )?;
    if let Some(h) = body.calling_hours {
        apply_hours(&mut k, h)?;
    }
    if let Some(r) = body.retry {
        apply_retry(&mut k, r)?;
    }
    if let Some(p) = body.persona {
        if let Some(p) = &p {
            check_persona(p)?;
        }
        k.persona = p;
    }
    k.updated_at = db::now();
    let (k2, state) = (k.clone(), k.status.clone());
    ctx.db()
        .write(move |c| {
            // Only if nobody moved it on meanwhile (a start, a cancel).
            let now = repo::get(c, &k2.id)?.ok_or_else(|| ApiError::not_found("campaign"))?;
            if now.status != state {
                return Err(ApiError::conflict(format!(
                    "cannot update campaign '{}': it is {}",
                    now.name, now.status
                )));
            }
            let mut k3 = k2.clone();
            k3.tick_seq = now.tick_seq;
            k3.waiting = now.waiting;
            Ok(repo::save(c, &k3)?)
        })
        .await?;
    let name = k.name.clone();
    Ok(Reply::ok(json!({"campaign": reply_view(ctx, k).await?}))
        .record(&id)
        .summary(format!("updated campaign '{name}'")))
}

async fn delete(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let k = load(ctx, &id).await?;
    let i2 = id.clone();
    ctx.db()
        .write(move |c| {
            let k = repo::get(c, &i2)?.ok_or_else(|| ApiError::not_found("campaign"))?;
            if k.status == "running" {
                return Err(ApiError::conflict(format!(
                    "cannot delete campaign '{}': it is running (pause or cancel it first)",
                    k.name
                )));
            }
            if !repo::open_calls(c, &i2)?.is_empty() {
                return Err(ApiError::conflict(format!(
                    "cannot delete campaign '{}': calls are still in progress",
                    k.name
                )));
            }
            Ok(repo::delete(c, &i2)?)
        })
        .await?;
    Ok(Reply::deleted(&id).summary(format!("deleted campaign '{}'", k.name)))
}

async fn start(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let k = load(ctx, &id).await?;
    let changed = svc::start(&ctx.app, &id).await?;
    Ok(Reply::ok(json!({"campaign": changed.campaign}))
        .record(&id)
        .summary(format!("started campaign '{}'", k.name)))
}

async fn move_to(ctx: &Ctx, req: &ActionRequest, action: &str) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let k = load(ctx, &id).await?;
    let changed = svc::transition(&ctx.app, &id, action).await?;
    let done = match action {
        "pause" => "paused",
        "resume" => "resumed",
        _ => "cancelled",
    };
    Ok(Reply::ok(json!({"campaign": changed.campaign}))
        .record(&id)
        .summary(format!("{done} campaign '{}'", k.name)))
}

async fn pause(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    move_to(ctx, req, "pause").await
}
async fn resume(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    move_to(ctx, req, "resume").await
}
async fn cancel(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    move_to(ctx, req, "cancel").await
}

async fn calls(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let q: CallsReq = req.data()?;
    let (limit, offset) = page(q.limit, q.offset, 100, 1000)?;
    load(ctx, &id).await?;
    let (items, count) = ctx
        .db()
        .read(move |c| Ok(repo::calls(c, &id, q.lead_id, limit, offset)?))
        .await?;
    let items: Vec<Value> = items
        .iter()
        .map(|(k, name)| svc::call_view(k, name.as_deref()))
        .collect();
    Ok(Reply::ok(
        json!({"calls": items, "count": count, "limit": limit, "offset": offset}),
    ))
}

/// Every `campaigns` action; see `api::action`.
pub const RESOURCE: Resource = Resource {
    name: "campaigns",
    list_action: "all",
    actions: &[
        Action::read("all", handler!(all)).data(schema::<ListReq>),
        Action::read("get", handler!(get)).id(),
        Action::write("create", handler!(create)).data(schema::<CreateReq>),
        Action::write("update", handler!(update))
            .id()
            .data(schema::<UpdateReq>)
            .conflict(),
        Action::write("delete", handler!(delete)).id().conflict(),
        Action::write("start", handler!(start))
            .id()
            .conflict()
            .upstream(),
        Action::write("pause", handler!(pause)).id().conflict(),
        Action::write("resume", handler!(resume)).id().conflict(),
        Action::write("cancel", handler!(cancel)).id().conflict(),
        Action::read("calls", handler!(calls))
            .id()
            .data(schema::<CallsReq>),
    ],
};
