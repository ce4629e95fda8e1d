//! The `leads` resource: contacts captured in conversations, with status, priority and an
//! activity log. Regular users reach the leads of the agents they own (consumers: of the
//! agents assigned to them, read-only); another user's lead or agent is 403 `FORBIDDEN`, as
//! the spec says, and admin options used by non-admins are 403 as well.

use super::action::{Action, Handler, Resource, handler, named};
use rusqlite::Connection;
use rusqlite::types::Value as SqlValue;
use schemars::Schema;
use schemars::generate::SchemaGenerator;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::double_option;
use super::{ActionRequest, Ctx, Reply, page, parse_uuid};
use crate::auth::Principal;
use crate::db::leads::{self as repo, CONTACT_METHODS, Filter, Lead, PRIORITIES, STATUSES, Scope};
use crate::error::{ApiError, ApiResult};
use crate::events::Event;

#[derive(Deserialize, Default)]
struct FiltersIn {
    #[serde(rename = "agentId")]
    agent_id: Option<String>,
    #[serde(rename = "agentIds")]
    agent_ids: Option<Vec<String>>,
    status: Option<String>,
    priority: Option<String>,
    #[serde(rename = "searchTerm")]
    search_term: Option<String>,
    #[serde(rename = "dateRange")]
    date_range: Option<String>,
}

#[derive(Deserialize, Default)]
struct ListReq {
    #[serde(default)]
    filters: Option<FiltersIn>,
    limit: Option<i64>,
    offset: Option<i64>,
    #[serde(rename = "adminMode")]
    admin_mode: Option<bool>,
    #[serde(rename = "userId")]
    user_id: Option<String>,
}

/// Every lead field a client may send on create or update. `id` and `created_at` are
/// named so that sending them gets a clear error rather than "unknown field".
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct LeadIn {
    id: Option<Value>,
    created_at: Option<Value>,
    #[serde(alias = "agentId")]
    agent_id: Option<String>,
    #[serde(alias = "userId")]
    user_id: Option<String>,
    #[serde(default, with = "double_option")]
    name: Option<Option<String>>,
    #[serde(default, with = "double_option")]
    email: Option<Option<String>>,
    #[serde(default, with = "double_option")]
    phone: Option<Option<String>>,
    #[serde(default, with = "double_option")]
    status: Option<Option<String>>,
    #[serde(default, with = "double_option")]
    priority: Option<Option<String>>,
    #[serde(default, with = "double_option")]
    budget: Option<Option<String>>,
    #[serde(default, with = "double_option")]
    timeline: Option<Option<String>>,
    #[serde(default, with = "double_option")]
    address: Option<Option<Value>>,
    #[serde(default, with = "double_option")]
    notes: Option<Option<String>>,
    #[serde(default, with = "double_option")]
    assigned_to: Option<Option<String>>,
    #[serde(default, with = "double_option")]
    conversation_id: Option<Option<i64>>,
    #[serde(default, with = "double_option")]
    primary_lead_id: Option<Option<i64>>,
    #[serde(default, with = "double_option")]
    is_decision_maker: Option<Option<bool>>,
    #[serde(default, with = "double_option")]
    preferred_contact_method: Option<Option<String>>,
    #[serde(default, with = "double_option")]
    preferred_contact_time: Option<Option<String>>,
    #[serde(default, with = "double_option")]
    metadata: Option<Option<Value>>,
}

/// `get`'s reply, serialized without a `Value` in between (see `Reply::rendered`).
#[derive(Serialize)]
struct OneLead<'a> {
    lead: &'a Lead,
}

/// `all`'s reply.
#[derive(Serialize)]
struct LeadPage<'a> {
    leads: &'a [Lead],
    count: i64,
    limit: i64,
    offset: i64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LogIn {
    #[serde(rename = "type")]
    kind: String,
    description: Option<String>,
    metadata: Option<Value>,
}

#[derive(Deserialize, Default)]
struct LogsReq {
    limit: Option<i64>,
}

pub async fn handle(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    match req.action.as_str() {
        "stats" => {
            let f = filter(ctx, req).await?;
            let (total, by) = ctx.db().read(move |c| Ok(repo::stats(c, &f)?)).await?;
            Ok(Reply::ok(json!({"stats": {
                "total": total,
                "by_status": {"new": by[0], "contacted": by[1], "qualified": by[2], "converted": by[3]},
            }})))
        }
        "all" | "list" => {
            let q: ListReq = req.data()?;
            let (limit, offset) = page(q.limit, q.offset, 50, 500)?;
            let f = filter(ctx, req).await?;
            let (leads, count) = ctx
                .db()
                .read(move |c| Ok((repo::list(c, &f, limit, offset)?, repo::count(c, &f)?)))
                .await?;
            if req.action == "list" {
                let leads: Vec<Value> = leads.iter().map(Lead::summary).collect();
                Ok(Reply::ok(json!({"leads": leads, "count": count})))
            } else {
                Reply::rendered(&LeadPage {
                    leads: &leads,
                    count,
                    limit,
                    offset,
                })
            }
        }
        "get" => {
            let id = req.int_id()?;
            let p = ctx.principal.clone();
            let lead = ctx.db().read(move |c| load(c, &p, id, false)).await?;
            Reply::rendered(&OneLead { lead: &lead })
        }
        "create" => create(ctx, req).await,
        "update" => update(ctx, req).await,
        "delete" => {
            let id = req.int_id()?;
            let p = ctx.principal.clone();
            let lead = ctx
                .db()
                .write(move |c| {
                    let lead = load(c, &p, id, true)?;
                    repo::delete(c, id)?;
                    Ok(lead)
                })
                .await?;
            let label = lead.name.clone().unwrap_or_else(|| format!("#{id}"));
            Ok(
                Reply::ok(json!({"message": format!("Lead {id} deleted permanently")}))
                    .record(id.to_string())
                    .summary(format!("deleted lead {label}")),
            )
        }
        "log" => {
            let id = req.int_id()?;
            let body: LogIn = req.data()?;
            let kind = body.kind.trim().to_string();
            if kind.is_empty() || kind.chars().count() > 100 {
                return Err(ApiError::validation(
                    "data.type must be 1 to 100 characters",
                ));
            }
            if let Some(m) = &body.metadata
                && !m.is_object()
            {
                return Err(ApiError::validation("data.metadata must be an object"));
            }
            let p = ctx.principal.clone();
            let activity = ctx
                .db()
                .write(move |c| {
                    load(c, &p, id, true)?;
                    Ok(repo::log(
                        c,
                        id,
                        Some(&p.user_id),
                        &kind,
                        body.description.as_deref(),
                        body.metadata.as_ref(),
                    )?)
                })
                .await?;
            let summary = format!("logged {} on lead {id}", activity.kind);
            Ok(Reply::created(json!({"activity": activity}))
                .record(id.to_string())
                .summary(summary))
        }
        "getLogs" => {
            let id = req.int_id()?;
            let q: LogsReq = req.data()?;
            let (limit, _) = page(q.limit, None, 50, 500)?;
            let p = ctx.principal.clone();
            let activities = ctx
                .db()
                .read(move |c| {
                    load(c, &p, id, false)?;
                    Ok(repo::logs(c, id, limit)?)
                })
                .await?;
            Ok(Reply::ok(json!({"activities": activities})))
        }
        other => Err(ApiError::invalid_action(req.resource, other)),
    }
}

/// Loads a lead the principal may reach: 404 when it does not exist, 403 when it belongs to
/// an agent the caller does not own (or, for reads, is not assigned to).
pub fn load(c: &Connection, p: &Principal, id: i64, write: bool) -> ApiResult<Lead> {
    let lead = repo::get(c, id)?.ok_or_else(|| ApiError::not_found("lead"))?;
    if p.is_admin() || lead.agent_owner.as_deref() == Some(p.user_id.as_str()) {
        return Ok(lead);
    }
    if !write && repo::is_assigned(c, &lead.agent_id, &p.user_id)? {
        return Ok(lead);
    }
    Err(ApiError::forbidden(
        "you do not have access to this lead's agent",
    ))
}

fn check_enum(field: &str, v: &str, allowed: &[&str]) -> ApiResult<()> {
    if allowed.contains(&v) {
        Ok(())
    } else {
        Err(ApiError::validation(format!(
            "{field} must be one of {}",
            allowed.join(", ")
        )))
    }
}

/// Parses `data.filters` and the admin options into one SQL filter.
async fn filter(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Filter> {
    let q: ListReq = req.data()?;
    let p = &ctx.principal;
    let admin_mode = p.admin_option("adminMode", q.admin_mode.unwrap_or(false))?;
    let scope = if let Some(u) = &q.user_id {
        p.admin_option("userId", true)?;
        Scope::User(parse_uuid(u, "data.userId")?)
    } else if admin_mode {
        Scope::All
    } else {
        Scope::AgentsOf(p.user_id.clone())
    };
    let f = q.filters.unwrap_or_default();
    let mut agent_ids = Vec::new();
    if let Some(a) = &f.agent_id {
        agent_ids.push(parse_uuid(a, "data.filters.agentId")?);
    }
    for (i, a) in f.agent_ids.iter().flatten().enumerate() {
        agent_ids.push(parse_uuid(a, &format!("data.filters.agentIds[{i}]"))?);
    }
    if let Some(s) = &f.status {
        check_enum("data.filters.status", s, STATUSES)?;
    }
    if let Some(s) = &f.priority {
        check_enum("data.filters.priority", s, PRIORITIES)?;
    }
    let since = super::date_range_since(f.date_range.as_deref(), "data.filters.dateRange")?;
    // A regular user naming an agent must own it (or be assigned to it).
    if !p.is_admin() && !agent_ids.is_empty() {
        let (ids, me) = (agent_ids.clone(), p.user_id.clone());
        ctx.db()
            .read(move |c| {
                for id in &ids {
                    let a = repo::agent(c, id, &me)?.ok_or_else(ApiError::agent_not_found)?;
                    if a.owner != me && !a.assigned {
                        return Err(ApiError::forbidden(
                            "you do not have access to this agent's leads",
                        ));
                    }
                }
                Ok(())
            })
            .await?;
    }
    let search = super::search_term(
        f.search_term,
        "data.filters.searchTerm",
        super::SEARCH_TERM_MAX,
    )?;
    Ok(Filter {
        scope,
        agent_ids,
        status: f.status,
        priority: f.priority,
        search,
        since,
    })
}

fn opt_text(v: Option<String>) -> SqlValue {
    v.map(SqlValue::from).unwrap_or(SqlValue::Null)
}

/// Validates the lead fields and turns them into column values (not `agent_id`/`user_id`,
/// which need the database).
fn lead_fields(b: &LeadIn, creating: bool) -> ApiResult<repo::Fields> {
    if b.id.is_some() {
        return Err(ApiError::validation("data.id cannot be set or changed"));
    }
    if b.created_at.is_some() {
        return Err(ApiError::validation(
            "data.created_at cannot be set or changed",
        ));
    }
    let mut out: repo::Fields = Vec::new();
    let texts: [(&'static str, &Option<Option<String>>, usize); 8] = [
        ("name", &b.name, 500),
        ("email", &b.email, 320),
        ("phone", &b.phone, 50),
        ("budget", &b.budget, 200),
        ("timeline", &b.timeline, 200),
        ("notes", &b.notes, 20_000),
        ("assigned_to", &b.assigned_to, 500),
        ("preferred_contact_time", &b.preferred_contact_time, 200),
    ];
    for (col, v, max) in texts {
        if let Some(v) = v {
            if let Some(s) = v
                && s.chars().count() > max
            {
                return Err(ApiError::validation(format!(
                    "data.{col} must be at most {max} characters"
                )));
            }
            if col == "email"
                && let Some(s) = v
                && !s.is_empty()
                && !s.contains('@')
            {
                return Err(ApiError::validation("data.email must be an email address"));
            }
            out.push((col, opt_text(v.clone())));
        }
    }
    type EnumField<'a> = (
        &'static str,
        &'a Option<Option<String>>,
        &'static [&'static str],
    );
    let enums: [EnumField; 3] = [
        ("status", &b.status, STATUSES),
        ("priority", &b.priority, PRIORITIES),
        (
            "preferred_contact_method",
            &b.preferred_contact_method,
            CONTACT_METHODS,
        ),
    ];
    for (col, v, allowed) in enums {
        match v {
            Some(Some(s)) => {
                check_enum(&format!("data.{col}"), s, allowed)?;
                out.push((col, s.clone().into()));
            }
            Some(None) => out.push((col, SqlValue::Null)),
            None if creating && col == "status" => out.push((col, "new".to_string().into())),
            None => {}
        }
    }
    for (col, v) in [("address", &b.address), ("metadata", &b.metadata)] {
        match v {
            Some(Some(Value::Null)) | Some(None) => out.push((col, SqlValue::Null)),
            Some(Some(o)) if o.is_object() => out.push((col, o.to_string().into())),
            Some(Some(_)) => {
                return Err(ApiError::validation(format!(
                    "data.{col} must be an object or null"
                )));
            }
            None => {}
        }
    }
    for (col, v) in [
        ("conversation_id", &b.conversation_id),
        ("primary_lead_id", &b.primary_lead_id),
    ] {
        if let Some(v) = v {
            out.push((col, v.map(SqlValue::from).unwrap_or(SqlValue::Null)));
        }
    }
    if let Some(v) = b.is_decision_maker {
        out.push((
            "is_decision_maker",
            v.map(|b| SqlValue::from(b as i64))
                .unwrap_or(SqlValue::Null),
        ));
    }
    Ok(out)
}

/// Checks the agent a lead is put under: it exists (else `AGENT_NOT_FOUND`) and a
/// non-admin owns it (else `FORBIDDEN`). Returns its owner.
fn check_agent(c: &Connection, p: &Principal, agent_id: &str) -> ApiResult<String> {
    let a = repo::agent(c, agent_id, &p.user_id)?.ok_or_else(ApiError::agent_not_found)?;
    if !p.is_admin() && a.owner != p.user_id {
        return Err(ApiError::forbidden("you do not own this agent"));
    }
    Ok(a.owner)
}

/// A supplied `user_id`: a non-admin may name only themself; the user must exist.
fn check_user(c: &Connection, p: &Principal, user_id: &str) -> ApiResult<()> {
    if user_id != p.user_id && !p.is_admin() {
        return Err(ApiError::forbidden(
            "only internal admins may assign a lead to another user",
        ));
    }
    if !repo::user_exists(c, user_id)? {
        return Err(ApiError::validation("data.user_id: no such user"));
    }
    Ok(())
}

fn check_primary(
    c: &Connection,
    p: &Principal,
    v: &Option<Option<i64>>,
    own_id: Option<i64>,
) -> ApiResult<()> {
    if let Some(Some(pid)) = v {
        if Some(*pid) == own_id {
            return Err(ApiError::validation(
                "data.primary_lead_id cannot be the lead itself",
            ));
        }
        load(c, p, *pid, false)
            .map_err(|_| ApiError::validation("data.primary_lead_id: no such lead"))?;
    }
    Ok(())
}

async fn create(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let body: LeadIn = req.data()?;
    let mut fields = lead_fields(&body, true)?;
    let agent_id = parse_uuid(
        body.agent_id
            .as_deref()
            .ok_or_else(|| ApiError::validation("data.agent_id is required"))?,
        "data.agent_id",
    )?;
    let supplied = match &body.user_id {
        Some(u) => Some(parse_uuid(u, "data.user_id")?),
        None => None,
    };
    let p = ctx.principal.clone();
    let lead = ctx
        .db()
        .write(move |c| {
            if let Some(u) = &supplied {
                check_user(c, &p, u)?;
            }
            let owner = check_agent(c, &p, &agent_id)?;
            check_primary(c, &p, &body.primary_lead_id, None)?;
            // user_id: the supplied one, then the agent's owner, then the caller.
            let user_id = supplied
                .or(Some(owner))
                .filter(|o| !o.is_empty())
                .unwrap_or_else(|| p.user_id.clone());
            fields.push(("agent_id", agent_id.into()));
            fields.push(("user_id", user_id.into()));
            let id = repo::insert(c, &fields)?;
            repo::log(
                c,
                id,
                Some(&p.user_id),
                "created",
                Some("Lead created"),
                None,
            )?;
            Ok(repo::get(c, id)?.expect("row just inserted"))
        })
        .await?;
    ctx.app
        .bus
        .emit(Event::new("lead.created", &lead.user_id, json!(lead)));
    let summary = format!(
        "created lead {}",
        lead.name.clone().unwrap_or_else(|| format!("#{}", lead.id))
    );
    Ok(Reply::created(json!({"lead": lead}))
        .record(lead.id.to_string())
        .summary(summary))
}

async fn update(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.int_id()?;
    let body: LeadIn = req.data()?;
    let mut fields = lead_fields(&body, false)?;
    let agent_id = match &body.agent_id {
        Some(a) => Some(parse_uuid(a, "data.agent_id")?),
        None => None,
    };
    let user_id = match &body.user_id {
        Some(u) => Some(parse_uuid(u, "data.user_id")?),
        None => None,
    };
    let p = ctx.principal.clone();
    let (before, after) = ctx
        .db()
        .write(move |c| {
            let before = load(c, &p, id, true)?;
            if let Some(a) = agent_id {
                check_agent(c, &p, &a)?;
                fields.push(("agent_id", a.into()));
            }
            if let Some(u) = user_id {
                if u != before.user_id {
                    check_user(c, &p, &u)?;
                }
                fields.push(("user_id", u.into()));
            }
            check_primary(c, &p, &body.primary_lead_id, Some(id))?;
            repo::update(c, id, &fields)?;
            let after = repo::get(c, id)?.expect("lead exists");
            if before.status != after.status {
                let (from, to) = (before.status.clone(), after.status.clone());
                let label = |s: &Option<String>| s.clone().unwrap_or_else(|| "none".into());
                repo::log(
                    c,
                    id,
                    Some(&p.user_id),
                    "status_change",
                    Some(&format!(
                        "Status changed from {} to {}",
                        label(&from),
                        label(&to)
                    )),
                    Some(&json!({"from": from, "to": to, "changed_by": p.user_id})),
                )?;
            }
            Ok((before, after))
        })
        .await?;
    ctx.app
        .bus
        .emit(Event::new("lead.updated", &after.user_id, json!(after)));
    if before.status != after.status {
        ctx.app.bus.emit(Event::new(
            "lead.status_changed",
            &after.user_id,
            json!({"lead": after, "from": before.status, "to": after.status, "changed_by": ctx.user_id()}),
        ));
    }
    Ok(Reply::ok(json!({"lead": after}))
        .record(id.to_string())
        .summary(format!("updated lead #{id}")))
}

// The OpenAPI models of the requests above, written from interface.md's leads tables: the
// handlers decode them with serde's double options, which schemars cannot describe.

fn schema_leads_filters(g: &mut SchemaGenerator) -> Value {
    named(
        g,
        "LeadFilters",
        json!({
            "type": "object",
            "properties": {
                "agentId": {"type": "string"},
                "agentIds": {"type": "array", "items": {"type": "string"}},
                "status": {"type": "string"},
                "priority": {"type": "string"},
                "searchTerm": {"type": "string", "maxLength": super::SEARCH_TERM_MAX,
                               "description": "Literal text; control characters are refused"},
                "dateRange": {"enum": ["7d", "30d", "90d", "all"]},
            },
        }),
    )
    .to_value()
}
fn schema_leads_filters_req(g: &mut SchemaGenerator) -> Schema {
    let filters = schema_leads_filters(g);
    named(
        g,
        "LeadStatsRequest",
        json!({"type": "object", "properties": {"filters": filters}}),
    )
}
fn schema_leads_list_req(g: &mut SchemaGenerator) -> Schema {
    let filters = schema_leads_filters(g);
    named(
        g,
        "LeadListRequest",
        json!({"type": "object", "properties": {
            "filters": filters,
            "limit": {"type": "integer"},
            "offset": {"type": "integer"},
            "adminMode": {"type": "boolean"},
            "userId": {"type": "string"},
        }}),
    )
}
fn schema_lead_fields(g: &mut SchemaGenerator) -> Schema {
    let text = json!({"type": ["string", "null"]});
    named(
        g,
        "LeadFields",
        json!({"type": "object", "properties": {
            "agent_id": {"type": "string"},
            "user_id": {"type": "string"},
            "userId": {"type": "string"},
            "name": text, "email": text, "phone": text,
            "status": {"enum": ["new", "contacted", "qualified", "converted", null]},
            "priority": {"enum": ["low", "medium", "high", null]},
            "budget": text, "timeline": text,
            "address": {"type": ["object", "null"]},
            "notes": text, "assigned_to": text,
            "conversation_id": {"type": ["integer", "null"]},
            "primary_lead_id": {"type": ["integer", "null"]},
            "is_decision_maker": {"type": ["boolean", "null"]},
            "preferred_contact_method": {"enum": ["email", "phone", "sms", null]},
            "preferred_contact_time": text,
            "metadata": {"type": ["object", "null"]},
        }}),
    )
}
fn schema_lead_log(g: &mut SchemaGenerator) -> Schema {
    named(
        g,
        "LeadLog",
        json!({"type": "object", "properties": {
            "type": {"type": "string"},
            "description": {"type": "string"},
            "metadata": {"type": ["object", "null"]},
        }}),
    )
}
fn schema_lead_logs_req(g: &mut SchemaGenerator) -> Schema {
    named(
        g,
        "LeadLogsRequest",
        json!({"type": "object", "properties": {"limit": {"type": "integer"}}}),
    )
}

/// Every `leads` action; see `api::action`.
pub const RESOURCE: Resource = Resource {
    name: "leads",
    list_action: "list",
    actions: &[
        Action::read("stats", H).data(schema_leads_filters_req),
        Action::read("all", H).data(schema_leads_list_req),
        Action::read("list", H).data(schema_leads_list_req),
        Action::read("get", H).id(),
        Action::write("create", H)
            .data(schema_lead_fields)
            .conflict(),
        Action::write("update", H)
            .id()
            .data(schema_lead_fields)
            .conflict(),
        Action::write("delete", H).id(),
        Action::write("log", H).id().data(schema_lead_log),
        Action::read("getLogs", H).id().data(schema_lead_logs_req),
    ],
};

const H: Handler = handler!(handle);
