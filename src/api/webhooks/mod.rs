//! The `webhooks` resource: a user's endpoints that receive signed events, and the
//! deliveries made to them. The checks and secrets live in `service::webhooks`, delivery
//! in `crate::webhooks`; these actions decode, call the service and render.
//!
//! `endpoints.rs`: the endpoints and their secrets; `deliveries.rs`: test, list and
//! replay deliveries.

mod deliveries;
mod endpoints;

use super::action::{Action, Resource, handler, schema};

/// Every `webhooks` action; see `api::action`.
pub const RESOURCE: Resource = Resource {
    name: "webhooks",
    list_action: "all",
    actions: &[
        Action::read("all", handler!(endpoints::list)),
        Action::read("list", handler!(endpoints::list)),
        Action::read("get", handler!(endpoints::get)).id(),
        Action::write("create", handler!(endpoints::create))
            .data(schema::<endpoints::CreateWebhook>)
            .conflict(),
        Action::write("update", handler!(endpoints::update))
            .id()
            .data(schema::<endpoints::UpdateWebhook>)
            .conflict(),
        Action::write("delete", handler!(endpoints::delete)).id(),
        Action::write("test", handler!(deliveries::test))
            .id()
            .upstream(),
        Action::read("deliveries", handler!(deliveries::deliveries))
            .id()
            .data(schema::<deliveries::Paging>),
        Action::write("redeliver", handler!(deliveries::redeliver)).id(),
        Action::write("rotate-secret", handler!(endpoints::rotate_secret)).id(),
    ],
};
