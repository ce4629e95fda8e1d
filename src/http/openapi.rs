//! The OpenAPI 3.1 document of the whole API, served without auth at `GET /v1/openapi.json`.
//!
//! Request schemas come from the handlers' own typed requests (`#[derive(JsonSchema)]` next
//! to `#[derive(Deserialize)]`), so a changed member changes the document. `ACTIONS` is the
//! one table of every envelope action; `tests/it/openapi.rs` probes the dispatcher so an
//! action the server accepts but the table lacks fails the suite. Answers are described in
//! `records` (written by hand, since replies are built with `json!`) and checked against real
//! answers by the tests and by the generated client of `tests/client/check.sh`; the document
//! is shaped for typed-client generators: no boolean schemas, one name per model, one
//! operation per REST route and action.

use std::sync::OnceLock;

use axum::Json;
use axum::response::{IntoResponse, Response};
use schemars::generate::{SchemaGenerator, SchemaSettings};
use schemars::transform::ReplaceBoolSchemas;
use schemars::{JsonSchema, Schema};
use serde_json::{Map, Value, json};

mod records;

use crate::api::{self, activities, api_keys, conversations, document_folders, documents};
use crate::api::{genie_groups, genies, lead_notes, marketplace, notifications, profiles};
use crate::api::{qr_codes, teams, voice_collections, voices, webhooks, worker_genies};

/// Whether an action takes the envelope's `id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Id {
    No,
    Required,
    Optional,
}

type SchemaFn = fn(&mut SchemaGenerator) -> Schema;

/// One envelope action: resource, action, the schema of its `data` (`None`: an object the
/// action does not describe further) and whether it takes an `id`.
#[derive(Clone, Copy)]
pub struct Action {
    pub resource: &'static str,
    pub action: &'static str,
    pub data: Option<SchemaFn>,
    pub id: Id,
}

fn s<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    g.subschema_for::<T>()
}

const fn a(resource: &'static str, action: &'static str, data: Option<SchemaFn>, id: Id) -> Action {
    Action {
        resource,
        action,
        data,
        id,
    }
}

use Id::{No, Optional, Required};

/// Every action the dispatcher accepts, with the typed request of its `data`; leads get the
/// spec's members (`lead_fields` and friends). `None`: the action reads no `data` members.
pub const ACTIONS: &[Action] = &[
    a(
        "activities",
        "all",
        Some(s::<activities::ListActivities>),
        No,
    ),
    a(
        "activities",
        "list",
        Some(s::<activities::ListActivities>),
        No,
    ),
    a("api-keys", "all", None, No),
    a("api-keys", "list", None, No),
    a("api-keys", "create", Some(s::<api_keys::CreateKey>), No),
    a("api-keys", "revoke", None, Required),
    a("api-keys", "delete", None, Required),
    a(
        "conversations",
        "all",
        Some(s::<conversations::ListReq>),
        No,
    ),
    a(
        "conversations",
        "list",
        Some(s::<conversations::ListReq>),
        No,
    ),
    a("conversations", "get", None, Required),
    a(
        "conversations",
        "create",
        Some(s::<conversations::CreateReq>),
        No,
    ),
    a(
        "conversations",
        "update",
        Some(s::<conversations::UpdateReq>),
        Required,
    ),
    a("conversations", "delete", None, Required),
    a(
        "conversations",
        "sync",
        Some(s::<conversations::SyncReq>),
        No,
    ),
    a(
        "conversations",
        "analyze",
        Some(s::<conversations::AnalyzeReq>),
        Required,
    ),
    a("document-folders", "all", None, No),
    a("document-folders", "list", None, No),
    a("document-folders", "get", None, Required),
    a(
        "document-folders",
        "create",
        Some(s::<document_folders::CreateReq>),
        No,
    ),
    a(
        "document-folders",
        "update",
        Some(s::<document_folders::UpdateReq>),
        Required,
    ),
    a("document-folders", "delete", None, Required),
    a("genie-groups", "all", None, No),
    a("genie-groups", "list", None, No),
    a("genie-groups", "get", None, Required),
    a(
        "genie-groups",
        "create",
        Some(s::<genie_groups::CreateGroup>),
        No,
    ),
    a(
        "genie-groups",
        "update",
        Some(s::<genie_groups::UpdateGroup>),
        Required,
    ),
    a("genie-groups", "delete", None, Required),
    a("genie-groups", "reorder", Some(sort_req), No),
    a("genies", "all", Some(s::<genies::list::ListReq>), No),
    a("genies", "list", Some(s::<genies::list::ListReq>), No),
    a(
        "genies",
        "get",
        Some(s::<genies::list::AdminModeReq>),
        Required,
    ),
    a(
        "genies",
        "create",
        Some(s::<genies::input::CreateGenie>),
        No,
    ),
    a(
        "genies",
        "update",
        Some(s::<genies::input::UpdateGenie>),
        Required,
    ),
    a("genies", "delete", None, Required),
    a(
        "genies",
        "clone",
        Some(s::<genies::input::CloneGenie>),
        Required,
    ),
    a(
        "genies",
        "assign",
        Some(s::<genies::assign::AssignReq>),
        Required,
    ),
    a(
        "genies",
        "unassign",
        Some(s::<genies::assign::AssignReq>),
        Required,
    ),
    a("genies", "attach-phone", None, Required),
    a("genies", "release-phone", None, Required),
    a("genies", "reorder", Some(sort_req), No),
    a("knowledge-base", "all", Some(s::<documents::AllReq>), No),
    a("knowledge-base", "list", Some(s::<documents::AllReq>), No),
    a(
        "knowledge-base",
        "get",
        Some(s::<documents::GetReq>),
        Required,
    ),
    a(
        "knowledge-base",
        "create",
        Some(s::<documents::create::CreateReq>),
        No,
    ),
    a("knowledge-base", "update", None, Required),
    a(
        "knowledge-base",
        "bulk-update",
        Some(s::<documents::BulkReq>),
        No,
    ),
    a("knowledge-base", "delete", None, Required),
    a(
        "knowledge-base",
        "attach",
        Some(s::<documents::links::SetReq>),
        No,
    ),
    a(
        "knowledge-base",
        "detach",
        Some(s::<documents::links::DetachReq>),
        No,
    ),
    a(
        "knowledge-base",
        "replace",
        Some(s::<documents::links::SetReq>),
        No,
    ),
    a(
        "knowledge-base",
        "sync-with-agent",
        Some(s::<documents::links::SyncReq>),
        No,
    ),
    a(
        "knowledge-base",
        "search",
        Some(s::<documents::SearchReq>),
        No,
    ),
    a(
        "knowledge-base",
        "retry",
        Some(s::<documents::RetryReq>),
        Required,
    ),
    a("lead-notes", "all", Some(s::<lead_notes::LeadRef>), No),
    a("lead-notes", "list", Some(s::<lead_notes::LeadRef>), No),
    a("lead-notes", "get", None, Required),
    a(
        "lead-notes",
        "create",
        Some(s::<lead_notes::CreateNote>),
        No,
    ),
    a(
        "lead-notes",
        "update",
        Some(s::<lead_notes::UpdateNote>),
        Required,
    ),
    a("lead-notes", "delete", None, Required),
    a("lead-notes", "pin", None, Required),
    a("lead-notes", "unpin", None, Required),
    a("lead-notes", "reorder", Some(s::<lead_notes::Reorder>), No),
    a("leads", "stats", Some(leads_filters_req), No),
    a("leads", "all", Some(leads_list_req), No),
    a("leads", "list", Some(leads_list_req), No),
    a("leads", "get", None, Required),
    a("leads", "create", Some(lead_fields), No),
    a("leads", "update", Some(lead_fields), Required),
    a("leads", "delete", None, Required),
    a("leads", "log", Some(lead_log), Required),
    a("leads", "getLogs", Some(lead_logs_req), Required),
    a("marketplace", "all", Some(s::<marketplace::BrowseIn>), No),
    a("marketplace", "list", Some(s::<marketplace::BrowseIn>), No),
    a(
        "marketplace",
        "search",
        Some(s::<marketplace::BrowseIn>),
        No,
    ),
    a("marketplace", "get", None, Required),
    a("marketplace", "create", Some(s::<marketplace::Publish>), No),
    a(
        "marketplace",
        "publish",
        Some(s::<marketplace::Publish>),
        No,
    ),
    a(
        "marketplace",
        "update",
        Some(s::<marketplace::Update>),
        Required,
    ),
    a("marketplace", "delete", None, Required),
    a("marketplace", "unpublish", None, Required),
    a(
        "marketplace",
        "install",
        Some(s::<marketplace::Install>),
        Required,
    ),
    a("marketplace", "feature", None, Required),
    a("marketplace", "unfeature", None, Required),
    a("marketplace", "hide", None, Required),
    a("marketplace", "unhide", None, Required),
    a(
        "notifications",
        "all",
        Some(s::<notifications::ListNotifications>),
        No,
    ),
    a(
        "notifications",
        "list",
        Some(s::<notifications::ListNotifications>),
        No,
    ),
    a("notifications", "unread-count", None, No),
    a("notifications", "mark-read", None, Required),
    a("notifications", "mark-all-read", None, No),
    a("profiles", "all", Some(s::<profiles::ListUsers>), No),
    a("profiles", "list", Some(s::<profiles::ListUsers>), No),
    a("profiles", "get", None, Required),
    a(
        "profiles",
        "update",
        Some(s::<profiles::UpdateProfile>),
        Optional,
    ),
    a("qr-code", "all", Some(s::<qr_codes::All>), No),
    a("qr-code", "list", Some(s::<qr_codes::All>), No),
    a("qr-code", "get", None, Required),
    a("qr-code", "create", Some(s::<qr_codes::Create>), No),
    a("qr-code", "delete", None, Required),
    a(
        "qr-code",
        "increment-download",
        Some(s::<qr_codes::Increment>),
        Required,
    ),
    a("teams", "all", None, No),
    a("teams", "list", None, No),
    a("teams", "get", None, Required),
    a("teams", "create", Some(s::<teams::Named>), No),
    a("teams", "update", Some(s::<teams::Named>), Required),
    a("teams", "rename", Some(s::<teams::Named>), Required),
    a("teams", "delete", None, Required),
    a("teams", "invite", Some(s::<teams::Invite>), Required),
    a("teams", "accept", Some(s::<teams::Token>), No),
    a("teams", "decline", Some(s::<teams::Token>), No),
    a("teams", "revoke", Some(s::<teams::InvitationRef>), Required),
    a("teams", "invitations", None, Required),
    a("teams", "members", None, Required),
    a("teams", "leave", None, Required),
    a(
        "teams",
        "remove-member",
        Some(s::<teams::MemberRef>),
        Required,
    ),
    a(
        "teams",
        "update-member",
        Some(s::<teams::MemberRef>),
        Required,
    ),
    a("teams", "add-genie", Some(s::<teams::GenieRef>), Required),
    a(
        "teams",
        "remove-genie",
        Some(s::<teams::GenieRef>),
        Required,
    ),
    a("voice-collections", "all", None, No),
    a("voice-collections", "list", None, No),
    a("voice-collections", "get", None, Required),
    a(
        "voice-collections",
        "create",
        Some(s::<voice_collections::Create>),
        No,
    ),
    a(
        "voice-collections",
        "update",
        Some(s::<voice_collections::Update>),
        Required,
    ),
    a(
        "voice-collections",
        "rename",
        Some(s::<voice_collections::Update>),
        Required,
    ),
    a("voice-collections", "delete", None, Required),
    a(
        "voice-collections",
        "add-voice",
        Some(s::<voice_collections::VoiceRef>),
        Required,
    ),
    a(
        "voice-collections",
        "remove-voice",
        Some(s::<voice_collections::VoiceRef>),
        Required,
    ),
    a(
        "voice-collections",
        "reorder",
        Some(s::<voice_collections::Reorder>),
        Optional,
    ),
    a("voices", "all", Some(s::<voices::ListVoices>), No),
    a("voices", "list", Some(s::<voices::ListVoices>), No),
    a("voices", "get", None, Required),
    a("voices", "favorites", None, No),
    a("voices", "favorite", None, Required),
    a("voices", "unfavorite", None, Required),
    a("voices", "usage", None, Required),
    a("webhooks", "all", None, No),
    a("webhooks", "list", None, No),
    a("webhooks", "get", None, Required),
    a("webhooks", "create", Some(s::<webhooks::CreateWebhook>), No),
    a(
        "webhooks",
        "update",
        Some(s::<webhooks::UpdateWebhook>),
        Required,
    ),
    a("webhooks", "delete", None, Required),
    a("webhooks", "test", None, Required),
    a(
        "webhooks",
        "deliveries",
        Some(s::<webhooks::Paging>),
        Required,
    ),
    a("webhooks", "redeliver", None, Required),
    a("webhooks", "rotate-secret", None, Required),
    a("worker-genies", "all", None, No),
    a("worker-genies", "list", None, No),
    a("worker-genies", "get", None, Required),
    a(
        "worker-genies",
        "create",
        Some(s::<worker_genies::GenieInput>),
        No,
    ),
    a("worker-genies", "update", None, Required),
    a("worker-genies", "delete", None, Required),
    a("worker-genies", "run", None, Required),
    a("worker-genies", "runs", None, Optional),
    a("worker-genies", "cancel", None, Required),
    a(
        "worker-genies",
        "store-credential",
        Some(s::<worker_genies::credentials::StoreInput>),
        No,
    ),
    a("worker-genies", "list-credentials", None, No),
    a("worker-genies", "delete-credential", None, Required),
    a(
        "worker-genies",
        "test-credential",
        Some(s::<worker_genies::credentials::TestInput>),
        No,
    ),
];

// Leads' request members, written from interface.md's leads tables (src/api/leads.rs
// decodes them with serde's double options, which schemars cannot describe).

/// Registers `schema` as the component `name` and refers to it, so the envelope and the REST
/// body share one model.
fn named(g: &mut SchemaGenerator, name: &str, schema: Value) -> Schema {
    g.definitions_mut().insert(name.to_string(), schema);
    from(json!({"$ref": format!("#/components/schemas/{name}")}))
}
fn leads_filters(g: &mut SchemaGenerator) -> Value {
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
                "searchTerm": {"type": "string", "maxLength": crate::api::SEARCH_TERM_MAX,
                               "description": "Literal text; control characters are refused"},
                "dateRange": {"enum": ["7d", "30d", "90d", "all"]},
            },
        }),
    )
    .to_value()
}
fn from(v: Value) -> Schema {
    Schema::try_from(v).expect("a literal schema is an object")
}
fn leads_filters_req(g: &mut SchemaGenerator) -> Schema {
    let filters = leads_filters(g);
    named(
        g,
        "LeadStatsRequest",
        json!({"type": "object", "properties": {"filters": filters}}),
    )
}
fn leads_list_req(g: &mut SchemaGenerator) -> Schema {
    let filters = leads_filters(g);
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
fn lead_fields(g: &mut SchemaGenerator) -> Schema {
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
fn lead_log(g: &mut SchemaGenerator) -> Schema {
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
fn sort_req(g: &mut SchemaGenerator) -> Schema {
    named(
        g,
        "SortRequest",
        json!({"type": "object", "required": ["sort"], "properties": {
            "sort": {"type": "object", "description": "Record id → zero-based position",
                     "additionalProperties": {"type": "integer", "minimum": 0}},
        }}),
    )
}
fn lead_logs_req(g: &mut SchemaGenerator) -> Schema {
    named(
        g,
        "LeadLogsRequest",
        json!({"type": "object", "properties": {"limit": {"type": "integer"}}}),
    )
}

/// Every error code the server sends (docs/api.md's error table, plus `AGENT_NOT_FOUND`).
pub const ERROR_CODES: &[&str] = &[
    "VALIDATION_ERROR",
    "INVALID_RESOURCE",
    "INVALID_ACTION",
    "UNAUTHORIZED",
    "INVALID_TOKEN",
    "INVALID_CREDENTIALS",
    "INVALID_KEY_PREFIX",
    "KEY_NOT_FOUND",
    "FORBIDDEN",
    "NOT_FOUND",
    "AGENT_NOT_FOUND",
    "METHOD_NOT_ALLOWED",
    "REQUEST_TIMEOUT",
    "CONFLICT",
    "PAYLOAD_TOO_LARGE",
    "RATE_LIMIT_EXCEEDED",
    "INTERNAL_ERROR",
    "UPSTREAM_ERROR",
];

const ERROR_STATUSES: &[(&str, &str)] = &[
    (
        "400",
        "Invalid input (VALIDATION_ERROR, INVALID_RESOURCE, INVALID_ACTION)",
    ),
    ("401", "Missing or invalid credentials"),
    ("403", "Not allowed"),
    ("404", "Record or route absent"),
    ("405", "Method not allowed"),
    ("408", "Request timed out"),
    ("409", "Conflict"),
    ("413", "Payload too large"),
    ("429", "Rate limit exceeded (see Retry-After)"),
    ("500", "Internal error"),
    ("502", "Upstream service failed"),
];

fn r(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

/// Error responses for the given statuses.
fn errors(statuses: &[&str]) -> Map<String, Value> {
    ERROR_STATUSES
        .iter()
        .filter(|(s, _)| statuses.contains(s))
        .map(|(s, desc)| {
            (
                s.to_string(),
                json!({"description": desc, "content": {"application/json": {"schema": r("Error")}}}),
            )
        })
        .collect()
}

/// The generic routes answer every documented status.
fn responses(success: &[&str]) -> Value {
    let mut m = Map::new();
    for s in success {
        m.insert(
            s.to_string(),
            json!({"description": "Success envelope",
                   "content": {"application/json": {"schema": r("Success")}}}),
        );
    }
    let all: Vec<&str> = ERROR_STATUSES.iter().map(|(s, _)| *s).collect();
    m.extend(errors(&all));
    Value::Object(m)
}

/// The error statuses one action really answers: every authenticated action can meet
/// 400 (input), 401 (credentials), 403 (role, admin options, consumers writing), 404 (the
/// record or a record it names), 408 (request timeout), 429 (per-key rate limit) and 500;
/// 413 needs a body; 409 and 502 only where a uniqueness/state rule or a provider is involved.
fn action_errors(resource: &str, action: &str, body: bool) -> Vec<&'static str> {
    let mut out = vec!["400", "401", "403", "404", "408", "429", "500"];
    if body {
        out.push("413");
    }
    let conflict = matches!(
        action,
        "create"
            | "update"
            | "rename"
            | "publish"
            | "install"
            | "store-credential"
            | "attach-phone"
            | "release-phone"
            | "invite"
            | "accept"
            | "add-genie"
            | "update-member"
            | "remove-member"
            | "analyze"
            | "sync-with-agent"
            | "cancel"
    );
    if conflict {
        out.push("409");
    }
    let upstream = matches!(
        (resource, action),
        (
            "genies",
            "create" | "update" | "delete" | "clone" | "attach-phone" | "release-phone"
        ) | (
            "knowledge-base",
            "create" | "update" | "delete" | "attach" | "detach" | "replace" | "sync-with-agent"
        ) | ("conversations", "sync" | "analyze")
            | ("voices", _)
            | ("worker-genies", "test-credential")
            | ("webhooks", "test")
            | ("marketplace", "install")
    );
    if upstream {
        out.push("502");
    }
    out.sort_unstable();
    out
}

fn pascal(s: &str) -> String {
    s.split(['-', '_'])
        .map(|w| {
            let mut c = w.chars();
            match c.next() {
                Some(f) => f.to_uppercase().chain(c).collect(),
                None => String::new(),
            }
        })
        .collect()
}

fn snake(s: &str) -> String {
    let mut out = String::new();
    for ch in s.chars() {
        match ch {
            '-' => out.push('_'),
            c if c.is_ascii_uppercase() => {
                out.push('_');
                out.push(c.to_ascii_lowercase());
            }
            c => out.push(c),
        }
    }
    out
}

/// `{Resource}{Action}` in PascalCase, the stem of an action's component names.
fn stem(act: &Action) -> String {
    format!("{}{}", pascal(act.resource), pascal(act.action))
}

fn json_body(schema: Value, required: bool) -> Value {
    json!({"required": required, "content": {"application/json": {"schema": schema}}})
}

/// Follows one `$ref` (and an `anyOf` of a ref and null, how schemars writes `Option<T>`).
fn resolve<'a>(schemas: &'a Map<String, Value>, v: &'a Value) -> &'a Value {
    if let Some(name) = v["$ref"]
        .as_str()
        .and_then(|r| r.strip_prefix("#/components/schemas/"))
    {
        return schemas.get(name).unwrap_or(v);
    }
    if let Some(inner) = v["anyOf"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x.get("$ref").is_some()))
    {
        return resolve(schemas, inner);
    }
    v
}

/// Query parameters of a REST `GET`: the scalar (and scalar-array) members of the action's
/// data and of its `filters`, which the REST adapter fills from the query string.
fn query_params(schemas: &Map<String, Value>, data: &Value) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    let mut add = |props: &Map<String, Value>| {
        for (name, p) in props {
            let p = resolve(schemas, p);
            let ty = |v: &Value| match &v["type"] {
                Value::String(t) => Some(t.clone()),
                Value::Array(ts) => ts
                    .iter()
                    .filter_map(Value::as_str)
                    .find(|t| *t != "null")
                    .map(str::to_string),
                _ => None,
            };
            let schema = match ty(p).as_deref() {
                Some(t @ ("string" | "integer" | "number" | "boolean")) => json!({"type": t}),
                Some("array") => match ty(&p["items"]).as_deref() {
                    Some(t @ ("string" | "integer")) => {
                        json!({"type": "array", "items": {"type": t}})
                    }
                    _ => continue,
                },
                _ => continue,
            };
            if out.iter().any(|q| q["name"] == name.as_str()) {
                continue;
            }
            out.push(json!({"name": name, "in": "query", "required": false, "schema": schema}));
        }
    };
    let data = resolve(schemas, data);
    if let Some(props) = data["properties"].as_object() {
        add(props);
        if let Some(f) = props.get("filters")
            && let Some(fp) = resolve(schemas, f)["properties"].as_object()
        {
            add(fp);
        }
    }
    out
}

/// The success and error responses of one action, typed where `records::response` knows
/// its data.
fn action_responses(act: &Action, body: bool) -> Value {
    let mut m = Map::new();
    match records::response(act.resource, act.action) {
        Some((status, _)) => {
            m.insert(
                status.into(),
                json!({"description": "Success",
                       "content": {"application/json": {"schema": r(&format!("{}Response", stem(act)))}}}),
            );
        }
        None => {
            m.insert(
                records::success_status(act.resource, act.action).into(),
                json!({"description": "Success",
                       "content": {"application/json": {"schema": r("Success")}}}),
            );
        }
    }
    m.extend(errors(&action_errors(act.resource, act.action, body)));
    Value::Object(m)
}

/// One action's REST body: its `data` under `data` (the REST adapter's explicit form, so a
/// data member named `action` or `id` stays data).
fn rest_body(act: &Action, data: &Value, with_action: bool) -> Value {
    let mut props = Map::new();
    let mut required = vec!["data"];
    if with_action {
        props.insert("action".into(), json!({"const": act.action}));
        required.insert(0, "action");
    }
    props.insert("data".into(), data.clone());
    json!({"title": format!("{}Body", stem(act)), "type": "object",
           "required": required, "properties": props})
}

/// The REST-style operations of every resource, each with its typed request and response:
/// `GET /v1/{r}` (list), `POST /v1/{r}` (create and the other actions without an id),
/// `GET|PATCH|DELETE /v1/{r}/{id}` and `POST /v1/{r}/{id}/{action}`.
fn rest_paths(
    paths: &mut Map<String, Value>,
    schemas: &mut Map<String, Value>,
    data: &[(Action, Value)],
) {
    for resource in api::RESOURCES {
        let acts: Vec<&(Action, Value)> = data
            .iter()
            .filter(|(a, _)| a.resource == *resource)
            .collect();
        let find = |name: &str| acts.iter().find(|(a, _)| a.action == name).copied();
        let tag = json!([resource]);
        let ep = |a: &Action| snake(&format!("{}_{}", a.resource, a.action));
        let id_param = json!({"name": "id", "in": "path", "required": true,
                              "schema": {"type": "string"}});

        // GET /v1/{r}
        let mut collection = Map::new();
        if let Some((act, d)) = find(api::default_list_action(resource)) {
            collection.insert(
                "get".into(),
                json!({"operationId": ep(act), "tags": tag,
                       "summary": format!("`{}` {}", resource, act.action),
                       "parameters": query_params(schemas, d),
                       "responses": action_responses(act, false)}),
            );
        }
        // POST /v1/{r}: every action without an id; the body's `action` picks it.
        let no_id: Vec<&&(Action, Value)> =
            acts.iter().filter(|(a, _)| a.id != Id::Required).collect();
        if !no_id.is_empty() {
            let mut variants = Vec::new();
            let mut ok: Map<String, Value> = Map::new();
            let mut ok_variants: Vec<(usize, String, Value)> = Vec::new();
            for (act, d) in &no_id {
                let name = format!("{}Body", stem(act));
                schemas.insert(name.clone(), rest_body(act, d, true));
                variants.push(r(&name));
                let (status, schema) = match records::response(act.resource, act.action) {
                    Some((s, _)) => (s, r(&format!("{}Response", stem(act)))),
                    None => (
                        records::success_status(act.resource, act.action),
                        r("Success"),
                    ),
                };
                let weight = match records::response(act.resource, act.action) {
                    Some((_, d)) => d["required"].as_array().map_or(0, Vec::len) + 1,
                    None => 0,
                };
                ok_variants.push((weight, status.to_string(), schema));
            }
            // Most specific answer first: a client decoding a union tries them in order.
            ok_variants.sort_by_key(|v| std::cmp::Reverse(v.0));
            for (_, status, schema) in ok_variants {
                let entry = ok.entry(status).or_insert_with(|| json!({"oneOf": []}));
                let list = entry["oneOf"].as_array_mut().expect("oneOf");
                if !list.contains(&schema) {
                    list.push(schema);
                }
            }
            let mut resp = Map::new();
            for (status, v) in ok {
                let schema = match v["oneOf"].as_array() {
                    Some(a) if a.len() == 1 => a[0].clone(),
                    _ => v,
                };
                resp.insert(
                    status,
                    json!({"description": "Success",
                    "content": {"application/json": {"schema": schema}}}),
                );
            }
            let mut errs = std::collections::BTreeSet::new();
            for (act, _) in &no_id {
                errs.extend(action_errors(act.resource, act.action, true));
            }
            let errs: Vec<&str> = errs.into_iter().collect();
            resp.extend(errors(&errs));
            let body = if variants.len() == 1 {
                variants.remove(0)
            } else {
                json!({"oneOf": variants})
            };
            let names: Vec<&str> = no_id.iter().map(|(a, _)| a.action).collect();
            collection.insert(
                "post".into(),
                json!({"operationId": snake(&format!("{resource}_post")), "tags": tag,
                       "summary": format!("`{resource}` {}: the body's `action` picks one", names.join(", ")),
                       "requestBody": json_body(body, true),
                       "responses": resp}),
            );
        }
        if !collection.is_empty() {
            paths.insert(format!("/v1/{resource}"), Value::Object(collection));
        }

        // /v1/{r}/{id}
        let mut record = Map::new();
        if let Some((act, d)) = find("get").filter(|(a, _)| a.id != Id::No) {
            let mut params = vec![id_param.clone()];
            params.extend(query_params(schemas, d));
            record.insert(
                "get".into(),
                json!({"operationId": ep(act), "tags": tag, "parameters": params,
                       "responses": action_responses(act, false)}),
            );
        }
        let patch = if *resource == "api-keys" {
            "revoke"
        } else {
            "update"
        };
        if let Some((act, d)) = find(patch).filter(|(a, _)| a.id != Id::No) {
            let body = rest_body(act, d, false);
            record.insert(
                "patch".into(),
                json!({"operationId": ep(act), "tags": tag, "parameters": [id_param.clone()],
                       "requestBody": json_body(body, act.data.is_some()),
                       "responses": action_responses(act, true)}),
            );
        }
        if let Some((act, _)) = find("delete").filter(|(a, _)| a.id != Id::No) {
            record.insert(
                "delete".into(),
                json!({"operationId": ep(act), "tags": tag, "parameters": [id_param.clone()],
                       "responses": action_responses(act, false)}),
            );
        }
        if !record.is_empty() {
            paths.insert(format!("/v1/{resource}/{{id}}"), Value::Object(record));
        }

        // POST /v1/{r}/{id}/{action}
        for (act, d) in &acts {
            if act.id == Id::No || ["get", "delete", patch].contains(&act.action) {
                continue;
            }
            let mut op = json!({"operationId": ep(act), "tags": tag,
                                "parameters": [id_param.clone()],
                                "responses": action_responses(act, act.data.is_some())});
            if act.data.is_some() {
                op["requestBody"] = json_body(rest_body(act, d, false), false);
            }
            paths.insert(
                format!("/v1/{resource}/{{id}}/{}", act.action),
                json!({"post": op}),
            );
        }
    }
}

fn build() -> Value {
    let mut settings = SchemaSettings::draft2020_12();
    settings.definitions_path = "/components/schemas".into();
    settings.meta_schema = None;
    // `true` schemas (what schemars writes for `serde_json::Value`) are valid JSON Schema but
    // typed-client generators refuse them; `{}` says the same.
    let mut no_bools = ReplaceBoolSchemas::default();
    no_bools.skip_additional_properties = true;
    settings.transforms.push(Box::new(no_bools));
    let mut g = SchemaGenerator::new(settings);

    // One envelope schema per action, and each action's data schema for the REST routes.
    let mut envelopes = Vec::new();
    let mut envelope_schemas = Map::new();
    let mut data_schemas: Vec<(Action, Value)> = Vec::new();
    for act in ACTIONS {
        let data = match act.data {
            Some(f) => f(&mut g).to_value(),
            None => json!({"type": "object"}),
        };
        let mut required = vec!["resource", "action"];
        if act.id == Id::Required {
            required.push("id");
        }
        let name = format!("{}Request", stem(act));
        envelope_schemas.insert(
            name.clone(),
            json!({
                "title": name,
                "type": "object",
                "properties": {
                    "resource": {"const": act.resource},
                    "action": {"const": act.action},
                    "id": r("RecordId"),
                    "data": data,
                },
                "required": required,
            }),
        );
        envelopes.push(r(&name));
        data_schemas.push((*act, data));
    }

    let mut schemas: Map<String, Value> = g.take_definitions(true).into_iter().collect();
    let login = g.subschema_for::<super::auth_routes::Login>().to_value();
    let refresh = g.subschema_for::<super::auth_routes::Refresh>().to_value();
    schemas.extend(g.take_definitions(true));
    schemas.extend(envelope_schemas);
    schemas.insert(
        "RecordId".into(),
        json!({"description": "A UUID, or a lead's integer id", "type": ["string", "integer"]}),
    );
    schemas.insert(
        "Success".into(),
        json!({"type": "object", "required": ["success", "data"],
               "properties": {"success": {"const": true}, "data": {"type": "object"}}}),
    );
    schemas.insert(
        "Error".into(),
        json!({"type": "object", "required": ["success", "error"],
               "properties": {"success": {"const": false},
                   "error": {"type": "object", "required": ["code", "message", "status"],
                       "properties": {"code": {"enum": ERROR_CODES},
                                      "message": {"type": "string"},
                                      "status": {"type": "integer"}}}}}),
    );
    schemas.insert(
        "Tokens".into(),
        json!({"type": "object", "required": ["success", "data"], "properties": {
            "success": {"const": true},
            "data": {"type": "object",
                "required": ["access_token", "refresh_token", "token_type", "expires_in"],
                "properties": {"access_token": {"type": "string"},
                               "refresh_token": {"type": "string"},
                               "token_type": {"const": "Bearer"},
                               "expires_in": {"type": "integer"}}}}}),
    );
    schemas.insert("Envelope".into(), json!({"oneOf": envelopes}));
    schemas.extend(records::records());
    for act in ACTIONS {
        if let Some((_, data)) = records::response(act.resource, act.action) {
            schemas.insert(
                format!("{}Response", stem(act)),
                json!({"type": "object", "required": ["success", "data"],
                       "properties": {"success": {"const": true}, "data": data}}),
            );
        }
    }

    let resources: Vec<&str> = api::RESOURCES.to_vec();
    let res_param = json!({"name": "resource", "in": "path", "required": true,
                           "schema": {"enum": resources}});
    let id_param =
        json!({"name": "id", "in": "path", "required": true, "schema": {"type": "string"}});
    let mut actions: Vec<&str> = ACTIONS.iter().map(|a| a.action).collect();
    actions.sort_unstable();
    actions.dedup();
    let action_param = json!({"name": "action", "in": "path", "required": true,
                              "schema": {"enum": actions}});
    let any_object = json!({"type": "object"});
    let generic = json!(["generic"]);

    let mut paths: Map<String, Value> = serde_json::from_value(json!({
        "/v1": {"post": {
            "operationId": "envelope", "tags": generic,
            "summary": "Run one action on one resource",
            "requestBody": json_body(r("Envelope"), true),
            "responses": responses(&["200", "201", "202"]),
        }},
        "/v1/{resource}": {
            "parameters": [res_param],
            "get": {"operationId": "rest_list", "tags": generic, "summary": "`list` (or `all`)",
                    "responses": responses(&["200"])},
            "post": {"operationId": "rest_create", "tags": generic,
                     "summary": "The body's action (default `create`)",
                     "requestBody": json_body(any_object.clone(), true),
                     "responses": responses(&["200", "201", "202"])},
        },
        "/v1/{resource}/{id}": {
            "parameters": [res_param, id_param],
            "get": {"operationId": "rest_get", "tags": generic, "responses": responses(&["200"])},
            "patch": {"operationId": "rest_update", "tags": generic,
                      "requestBody": json_body(any_object.clone(), true),
                      "responses": responses(&["200"])},
            "delete": {"operationId": "rest_delete", "tags": generic,
                       "responses": responses(&["200"])},
        },
        "/v1/{resource}/{id}/{action}": {
            "parameters": [res_param, id_param, action_param],
            "post": {"operationId": "rest_action", "tags": generic,
                     "requestBody": json_body(any_object, false),
                     "responses": responses(&["200", "201", "202"])},
        },
        "/v1/auth/login": {"post": {
            "operationId": "login", "tags": ["auth"], "security": [],
            "requestBody": json_body(login, true),
            "responses": auth_responses(&["400", "401", "408", "413", "429", "500"]),
        }},
        "/v1/auth/refresh": {"post": {
            "operationId": "refresh", "tags": ["auth"], "security": [],
            "requestBody": json_body(refresh, true),
            "responses": auth_responses(&["400", "401", "408", "413", "500"]),
        }},
        "/v1/auth/logout": {"post": {
            "operationId": "logout", "tags": ["auth"],
            "responses": {
                "200": {"description": "Session revoked",
                        "content": {"application/json": {"schema": r("Success")}}},
                "401": errors(&["401"])["401"],
                "408": errors(&["408"])["408"],
                "500": errors(&["500"])["500"],
            },
        }},
        "/v1/openapi.json": {"get": {
            "operationId": "openapi", "tags": ["meta"], "security": [],
            "responses": {"200": {"description": "This document",
                "content": {"application/json": {"schema": {"type": "object"}}}}},
        }},
        "/healthz": {"get": {"operationId": "healthz", "tags": ["meta"], "security": [],
            "responses": {"200": {"description": "Alive",
                "content": {"application/json": {"schema": {"type": "object",
                    "properties": {"status": {"const": "ok"}}}}}}}}},
        "/readyz": {"get": {"operationId": "readyz", "tags": ["meta"], "security": [],
            "responses": {
                "200": {"description": "Database reachable",
                    "content": {"application/json": {"schema": {"type": "object"}}}},
                "503": {"description": "Database unreachable",
                    "content": {"application/json": {"schema": {"type": "object"}}}}}}},
    }))
    .expect("paths are an object");
    rest_paths(&mut paths, &mut schemas, &data_schemas);

    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "genied",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Self-hosted platform for managing voice AI agents. Every action is \
                `POST /v1` with the envelope `{resource, action, id?, data}` (the `Envelope` \
                union); the REST routes map onto the same actions and are listed per resource \
                with their typed requests and answers. Generated from the server's own request \
                types.",
        },
        "servers": [{"url": "/"}],
        "security": [{"bearer": []}, {"apiKey": []}],
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer",
                           "description": "A session access token or an API key"},
                "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
            },
        },
        "paths": paths,
    })
}

/// Login and refresh: the token pair, or the listed errors.
fn auth_responses(statuses: &[&str]) -> Value {
    let mut m = Map::new();
    m.insert(
        "200".into(),
        json!({"description": "A new token pair",
               "content": {"application/json": {"schema": r("Tokens")}}}),
    );
    m.extend(errors(statuses));
    Value::Object(m)
}

/// The document, built once.
pub fn document() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(build)
}

pub async fn serve() -> Response {
    Json(document()).into_response()
}
