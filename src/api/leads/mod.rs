//! The `leads` resource: contacts captured in conversations, with status, priority and an
//! activity log. Regular users reach the leads of the agents they own (consumers: of the
//! agents assigned to them, read-only); another user's lead or agent is 403 `FORBIDDEN`, as
//! the spec says, and admin options used by non-admins are 403 as well. The access rule and
//! the writes that need the database's checks are `service::leads`'.

mod edit;
mod list;
mod logs;
mod schemas;

use super::action::{Action, Resource, handler};
use crate::error::{ApiError, ApiResult};
use schemas::*;

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

/// Every `leads` action; see `api::action`.
pub const RESOURCE: Resource = Resource {
    name: "leads",
    list_action: "list",
    actions: &[
        Action::read("stats", handler!(list::stats)).data(schema_leads_filters_req),
        Action::read("all", handler!(list::all)).data(schema_leads_list_req),
        Action::read("list", handler!(list::list)).data(schema_leads_list_req),
        Action::read("get", handler!(list::get)).id(),
        Action::write("create", handler!(edit::create))
            .data(schema_lead_fields)
            .conflict(),
        Action::write("update", handler!(edit::update))
            .id()
            .data(schema_lead_fields)
            .conflict(),
        Action::write("delete", handler!(edit::delete)).id(),
        Action::write("log", handler!(logs::log))
            .id()
            .data(schema_lead_log),
        Action::read("getLogs", handler!(logs::get_logs))
            .id()
            .data(schema_lead_logs_req),
    ],
};
