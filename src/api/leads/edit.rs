//! `create`, `update` and `delete`.

use crate::db::sql::types::Value as SqlValue;
use serde::Deserialize;
use serde_json::{Value, json};

use super::check_enum;
use crate::api::{ActionRequest, Ctx, Reply, double_option, parse_uuid};
use crate::db::leads::{self as repo, CONTACT_METHODS, PRIORITIES, STATUSES};
use crate::error::{ApiError, ApiResult};
use crate::service::leads::{self as service, load};

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
    #[serde(alias = "doNotCall")]
    do_not_call: Option<bool>,
    #[serde(default, with = "double_option")]
    preferred_contact_method: Option<Option<String>>,
    #[serde(default, with = "double_option")]
    preferred_contact_time: Option<Option<String>>,
    #[serde(default, with = "double_option")]
    metadata: Option<Option<Value>>,
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
    if let Some(v) = b.do_not_call {
        out.push(("do_not_call", SqlValue::from(v as i64)));
    }
    Ok(out)
}

pub(super) async fn create(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let body: LeadIn = req.data()?;
    let fields = lead_fields(&body, true)?;
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
    let lead = service::create(
        &ctx.app,
        &ctx.principal,
        fields,
        agent_id,
        supplied,
        body.primary_lead_id.flatten(),
    )
    .await?;
    // Serialized once, straight from the typed lead (the audit row is already written in
    // the create's transaction; record and summary serve only if it was not).
    let mut reply = Reply::rendered(&json_lead(&lead))?
        .record(lead.id.to_string())
        .summary(service::created_summary(&lead));
    reply.status = axum::http::StatusCode::CREATED;
    Ok(reply)
}

/// `{"lead": lead}`, as `Reply::rendered` serializes it.
#[derive(serde::Serialize)]
struct JsonLead<'a> {
    lead: &'a repo::Lead,
}

fn json_lead(lead: &repo::Lead) -> JsonLead<'_> {
    JsonLead { lead }
}

pub(super) async fn update(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.int_id()?;
    let body: LeadIn = req.data()?;
    let fields = lead_fields(&body, false)?;
    let agent_id = match &body.agent_id {
        Some(a) => Some(parse_uuid(a, "data.agent_id")?),
        None => None,
    };
    let user_id = match &body.user_id {
        Some(u) => Some(parse_uuid(u, "data.user_id")?),
        None => None,
    };
    let after = service::update(
        &ctx.app,
        &ctx.principal,
        id,
        fields,
        agent_id,
        user_id,
        body.primary_lead_id.flatten(),
    )
    .await?;
    Ok(Reply::ok(json!({"lead": after}))
        .record(id.to_string())
        .summary(format!("updated lead #{id}")))
}

pub(super) async fn delete(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.int_id()?;
    let p = ctx.principal.clone();
    let audit = crate::db::activities::claim("leads");
    let summary = ctx
        .db()
        .write(move |c| {
            let lead = load(c, &p, id, true)?;
            repo::delete(c, id)?;
            let label = lead.name.clone().unwrap_or_else(|| format!("#{id}"));
            let summary = format!("deleted lead {label}");
            if let Some(a) = audit {
                a.insert(c, Some(&id.to_string()), &summary)?;
            }
            Ok(summary)
        })
        .await?;
    Ok(
        Reply::ok(json!({"message": format!("Lead {id} deleted permanently")}))
            .record(id.to_string())
            .summary(summary),
    )
}
