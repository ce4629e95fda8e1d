//! The `marketplace` resource: genies published as template listings, and installing one
//! as a new genie. What a listing copies, who sees it and the install live in
//! `service::marketplace`; these actions decode, check the caller's role and render.
//!
//! `browse.rs`: finding listings; `listings.rs`: a publisher's own listings;
//! `moderation.rs`: the admins' flags; `install.rs`: making a genie from a listing.

mod browse;
mod install;
mod listings;
mod moderation;

use serde_json::{Value, json};

use super::action::{Action, Resource, handler, schema};
use crate::db::marketplace::Listing;
use crate::error::{ApiError, ApiResult};

fn text(field: &str, v: Option<String>, max: usize) -> ApiResult<Option<String>> {
    let v = v.map(|s| s.trim().to_string()).filter(|s| !s.is_empty());
    if v.as_ref().is_some_and(|s| s.chars().count() > max) {
        return Err(ApiError::validation(format!(
            "data.{field} must be at most {max} characters"
        )));
    }
    Ok(v)
}

fn tags(v: Vec<String>) -> ApiResult<Value> {
    if v.len() > 20
        || v.iter()
            .any(|t| t.trim().is_empty() || t.chars().count() > 40)
    {
        return Err(ApiError::validation(
            "data.tags must be at most 20 non-empty tags of at most 40 characters",
        ));
    }
    Ok(json!(
        v.iter().map(|t| t.trim().to_string()).collect::<Vec<_>>()
    ))
}

/// Owners see their listing's source genie; everyone else does not.
fn shown(l: &Listing, viewer: &str) -> Value {
    let mut v = json!(l);
    v["is_mine"] = json!(l.user_id == viewer);
    if l.user_id != viewer {
        v.as_object_mut().map(|o| o.remove("source_genie_id"));
    }
    v
}

/// Every `marketplace` action; see `api::action`.
pub const RESOURCE: Resource = Resource {
    name: "marketplace",
    list_action: "all",
    actions: &[
        Action::read("all", handler!(browse::browse)).data(schema::<browse::BrowseIn>),
        Action::read("list", handler!(browse::browse)).data(schema::<browse::BrowseIn>),
        Action::read("search", handler!(browse::browse)).data(schema::<browse::BrowseIn>),
        Action::read("get", handler!(browse::get)).id(),
        Action::write("create", handler!(listings::publish))
            .data(schema::<listings::Publish>)
            .conflict(),
        Action::write("publish", handler!(listings::publish))
            .data(schema::<listings::Publish>)
            .conflict(),
        Action::write("update", handler!(listings::update))
            .id()
            .data(schema::<listings::Update>)
            .conflict(),
        Action::write("delete", handler!(listings::delete)).id(),
        Action::write("unpublish", handler!(listings::unpublish)).id(),
        Action::write("install", handler!(install::install))
            .id()
            .data(schema::<install::Install>)
            .conflict()
            .upstream(),
        Action::write("feature", handler!(moderation::feature)).id(),
        Action::write("unfeature", handler!(moderation::unfeature)).id(),
        Action::write("hide", handler!(moderation::hide)).id(),
        Action::write("unhide", handler!(moderation::unhide)).id(),
    ],
};
