//! The OpenAPI 3.1 document of the whole API, served without auth at `GET /v1/openapi.json`.
//!
//! Request schemas come from the handlers' own typed requests (`#[derive(JsonSchema)]` next
//! to `#[derive(Deserialize)]`), so a changed member changes the document. `ACTIONS` is the
//! one table of every envelope action; `tests/it/openapi.rs` probes the dispatcher so an
//! action the server accepts but the table lacks fails the suite.

use std::sync::OnceLock;

use axum::Json;
use axum::response::{IntoResponse, Response};
use schemars::generate::{SchemaGenerator, SchemaSettings};
use schemars::{JsonSchema, Schema};
use serde_json::{Map, Value, json};

use crate::api::{self, activities, api_keys, conversations, document_folders, documents};
use crate::api::{genie_groups, lead_notes, notifications, profiles, qr_codes, teams};
use crate::api::{voice_collections, voices, worker_genies};

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

/// Every action the dispatcher accepts. Genies, marketplace and webhooks requests are
/// described as plain objects (their typed requests are not annotated yet); leads get the
/// spec's members (`leads_schemas`).
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
    a("genie-groups", "reorder", None, No),
    a("genies", "all", None, No),
    a("genies", "list", None, No),
    a("genies", "get", None, Required),
    a("genies", "create", None, No),
    a("genies", "update", None, Required),
    a("genies", "delete", None, Required),
    a("genies", "clone", None, Required),
    a("genies", "assign", None, Required),
    a("genies", "unassign", None, Required),
    a("genies", "attach-phone", None, Required),
    a("genies", "release-phone", None, Required),
    a("genies", "reorder", None, No),
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
    a("marketplace", "all", None, No),
    a("marketplace", "list", None, No),
    a("marketplace", "search", None, No),
    a("marketplace", "get", None, Required),
    a("marketplace", "create", None, No),
    a("marketplace", "publish", None, No),
    a("marketplace", "update", None, Required),
    a("marketplace", "delete", None, Required),
    a("marketplace", "unpublish", None, Required),
    a("marketplace", "install", None, Required),
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
    a("webhooks", "create", None, No),
    a("webhooks", "update", None, Required),
    a("webhooks", "delete", None, Required),
    a("webhooks", "test", None, Required),
    a("webhooks", "deliveries", None, Required),
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

// Leads' request members, written from interface.md's leads tables (src/api/leads.rs is
// not annotated yet).
fn leads_filters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "agentId": {"type": "string"},
            "agentIds": {"type": "array", "items": {"type": "string"}},
            "status": {"type": "string"},
            "priority": {"type": "string"},
            "searchTerm": {"type": "string"},
            "dateRange": {"enum": ["7d", "30d", "90d", "all"]},
        },
    })
}
fn from(v: Value) -> Schema {
    Schema::try_from(v).expect("a literal schema is an object")
}
fn leads_filters_req(_: &mut SchemaGenerator) -> Schema {
    from(json!({"type": "object", "properties": {"filters": leads_filters()}}))
}
fn leads_list_req(_: &mut SchemaGenerator) -> Schema {
    from(json!({"type": "object", "properties": {
        "filters": leads_filters(),
        "limit": {"type": "integer"},
        "offset": {"type": "integer"},
        "adminMode": {"type": "boolean"},
        "userId": {"type": "string"},
    }}))
}
fn lead_fields(_: &mut SchemaGenerator) -> Schema {
    let text = json!({"type": ["string", "null"]});
    from(json!({"type": "object", "properties": {
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
    }}))
}
fn lead_log(_: &mut SchemaGenerator) -> Schema {
    from(json!({"type": "object", "properties": {
        "type": {"type": "string"},
        "description": {"type": "string"},
        "metadata": {"type": ["object", "null"]},
    }}))
}
fn lead_logs_req(_: &mut SchemaGenerator) -> Schema {
    from(json!({"type": "object", "properties": {"limit": {"type": "integer"}}}))
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

fn responses(success: &[&str], secured: bool) -> Value {
    let mut m = Map::new();
    for s in success {
        m.insert(
            s.to_string(),
            json!({"description": "Success envelope",
                   "content": {"application/json": {"schema": r("Success")}}}),
        );
    }
    for (status, desc) in ERROR_STATUSES {
        if !secured && (*status == "401" || *status == "403") {
            continue;
        }
        m.insert(
            status.to_string(),
            json!({"description": desc, "content": {"application/json": {"schema": r("Error")}}}),
        );
    }
    Value::Object(m)
}

fn object_body(schema: Value) -> Value {
    json!({"required": true, "content": {"application/json": {"schema": schema}}})
}

fn build() -> Value {
    let mut settings = SchemaSettings::draft2020_12();
    settings.definitions_path = "/components/schemas".into();
    settings.meta_schema = None;
    let mut g = SchemaGenerator::new(settings);

    // One envelope schema per action.
    let mut envelopes = Vec::new();
    for act in ACTIONS {
        let data = match act.data {
            Some(f) => f(&mut g).to_value(),
            None => json!({"type": "object"}),
        };
        let mut required = vec!["resource", "action"];
        if act.id == Id::Required {
            required.push("id");
        }
        envelopes.push(json!({
            "title": format!("{} {}", act.resource, act.action),
            "type": "object",
            "properties": {
                "resource": {"const": act.resource},
                "action": {"const": act.action},
                "id": r("RecordId"),
                "data": data,
            },
            "required": required,
        }));
    }

    let mut schemas: Map<String, Value> = g.take_definitions(true).into_iter().collect();
    let login = g.subschema_for::<super::auth_routes::Login>().to_value();
    let refresh = g.subschema_for::<super::auth_routes::Refresh>().to_value();
    schemas.extend(g.take_definitions(true));
    schemas.insert(
        "RecordId".into(),
        json!({"description": "A UUID, or a lead's integer id", "type": ["string", "integer"]}),
    );
    schemas.insert(
        "Success".into(),
        json!({"type": "object", "required": ["success", "data"],
               "properties": {"success": {"const": true}, "data": {}}}),
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
    schemas.insert("Envelope".into(), json!({"oneOf": envelopes}));

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

    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "genied",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Self-hosted platform for managing voice AI agents. Every action is \
                `POST /v1` with the envelope `{resource, action, id?, data}`; the REST routes \
                map onto the same actions. Generated from the server's own request types.",
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
        "paths": {
            "/v1": {"post": {
                "operationId": "envelope",
                "summary": "Run one action on one resource",
                "requestBody": object_body(r("Envelope")),
                "responses": responses(&["200", "201", "202"], true),
            }},
            "/v1/{resource}": {
                "parameters": [res_param],
                "get": {"operationId": "restList", "summary": "`list` (or `all`)",
                        "responses": responses(&["200"], true)},
                "post": {"operationId": "restCreate", "summary": "The body's action (default `create`)",
                         "requestBody": object_body(any_object.clone()),
                         "responses": responses(&["200", "201", "202"], true)},
            },
            "/v1/{resource}/{id}": {
                "parameters": [res_param, id_param],
                "get": {"operationId": "restGet", "responses": responses(&["200"], true)},
                "patch": {"operationId": "restUpdate",
                          "requestBody": object_body(any_object.clone()),
                          "responses": responses(&["200"], true)},
                "delete": {"operationId": "restDelete", "responses": responses(&["200"], true)},
            },
            "/v1/{resource}/{id}/{action}": {
                "parameters": [res_param, id_param, action_param],
                "post": {"operationId": "restAction",
                         "requestBody": {"required": false, "content": {"application/json": {"schema": any_object}}},
                         "responses": responses(&["200", "201", "202"], true)},
            },
            "/v1/auth/login": {"post": {
                "operationId": "login", "security": [],
                "requestBody": object_body(login),
                "responses": responses(&["200"], false),
            }},
            "/v1/auth/refresh": {"post": {
                "operationId": "refresh", "security": [],
                "requestBody": object_body(refresh),
                "responses": responses(&["200"], true),
            }},
            "/v1/auth/logout": {"post": {
                "operationId": "logout",
                "responses": responses(&["200"], true),
            }},
            "/v1/openapi.json": {"get": {
                "operationId": "openapi", "security": [],
                "responses": {"200": {"description": "This document",
                    "content": {"application/json": {"schema": {"type": "object"}}}}},
            }},
            "/healthz": {"get": {"operationId": "healthz", "security": [],
                "responses": {"200": {"description": "Alive",
                    "content": {"application/json": {"schema": {"type": "object",
                        "properties": {"status": {"const": "ok"}}}}}}}}},
            "/readyz": {"get": {"operationId": "readyz", "security": [],
                "responses": {
                    "200": {"description": "Database reachable",
                        "content": {"application/json": {"schema": {"type": "object"}}}},
                    "503": {"description": "Database unreachable",
                        "content": {"application/json": {"schema": {"type": "object"}}}}}}},
        },
    })
}

/// The document, built once.
pub fn document() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(build)
}

pub async fn serve() -> Response {
    Json(document()).into_response()
}
