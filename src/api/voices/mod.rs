//! The `voices` resource: discovery over the active provider's voices merged with the
//! shipped catalog (`service::voices`), usage by the caller's genies (`browse.rs`), and
//! favorites (`favorites.rs`). Voice ids are provider ids (strings), not UUIDs.

mod browse;
mod favorites;

use serde_json::{Value, json};

use super::ActionRequest;
use super::action::{Action, Resource, handler, schema};
use crate::error::{ApiError, ApiResult};
use crate::voice::Voice;

/// A voice as the API shows it (also in `voice-collections`).
pub fn voice_json(v: &Voice, source: &str, favorite: bool) -> Value {
    json!({
        "voice_id": v.voice_id,
        "name": v.name,
        "category": v.category,
        "labels": v.labels,
        "language": label(v, "language"),
        "gender": label(v, "gender"),
        "accent": label(v, "accent"),
        "use_case": label(v, "use_case"),
        "description": v.description,
        "preview_url": v.preview_url,
        "source": source,
        "is_favorite": favorite,
    })
}

fn label(v: &Voice, name: &str) -> Option<String> {
    v.labels
        .get(name)
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// The envelope's `id`, a provider voice id.
fn voice_id(req: &ActionRequest) -> ApiResult<String> {
    let id = req.id_str()?;
    if id.chars().count() > 200 {
        return Err(ApiError::validation("id must be at most 200 characters"));
    }
    Ok(id)
}

/// Every `voices` action; see `api::action`.
pub const RESOURCE: Resource = Resource {
    name: "voices",
    list_action: "all",
    actions: &[
        Action::read("all", handler!(browse::list))
            .data(schema::<browse::ListVoices>)
            .upstream(),
        Action::read("list", handler!(browse::list))
            .data(schema::<browse::ListVoices>)
            .upstream(),
        Action::read("get", handler!(browse::get)).id().upstream(),
        Action::read("favorites", handler!(favorites::favorites)).upstream(),
        Action::write("favorite", handler!(favorites::favorite))
            .id()
            .upstream(),
        Action::write("unfavorite", handler!(favorites::unfavorite))
            .id()
            .upstream(),
        Action::read("usage", handler!(browse::usage))
            .id()
            .upstream(),
    ],
};
