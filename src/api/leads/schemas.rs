//! The OpenAPI models of the leads requests, written from interface.md's leads tables: the
//! handlers decode them with serde's double options, which schemars cannot describe.

use schemars::Schema;
use schemars::generate::SchemaGenerator;
use serde_json::{Value, json};

use crate::api::SEARCH_TERM_MAX;
use crate::api::action::named;

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
                "searchTerm": {"type": "string", "maxLength": SEARCH_TERM_MAX,
                               "description": "Literal text; control characters are refused"},
                "dateRange": {"enum": ["7d", "30d", "90d", "all"]},
            },
        }),
    )
    .to_value()
}
pub(super) fn schema_leads_filters_req(g: &mut SchemaGenerator) -> Schema {
    let filters = schema_leads_filters(g);
    named(
        g,
        "LeadStatsRequest",
        json!({"type": "object", "properties": {"filters": filters}}),
    )
}
pub(super) fn schema_leads_list_req(g: &mut SchemaGenerator) -> Schema {
    let filters = schema_leads_filters(g);
    named(
        g,
        "LeadListRequest",
        json!({"type": "object", "properties": {
            "filters": filters,
            "limit": {"type": "integer"},
            "offset": {"type": "integer"},
            "cursor": {"type": "string", "description": "nextCursor of the previous page (keyset pagination); not with offset"},
            "adminMode": {"type": "boolean"},
            "userId": {"type": "string"},
        }}),
    )
}
pub(super) fn schema_lead_fields(g: &mut SchemaGenerator) -> Schema {
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
            "do_not_call": {"type": "boolean"},
            "preferred_contact_method": {"enum": ["email", "phone", "sms", null]},
            "preferred_contact_time": text,
            "metadata": {"type": ["object", "null"]},
        }}),
    )
}
pub(super) fn schema_lead_log(g: &mut SchemaGenerator) -> Schema {
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
pub(super) fn schema_lead_logs_req(g: &mut SchemaGenerator) -> Schema {
    named(
        g,
        "LeadLogsRequest",
        json!({"type": "object", "properties": {"limit": {"type": "integer"}}}),
    )
}
