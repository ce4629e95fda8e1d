//! The `voice-collections` resource: a user's named, ordered collections of saved voices.
//! `crud.rs`: list, get, create, update/rename, delete; `voices.rs`: add-voice,
//! remove-voice, reorder (a collection's voices, or the collections themselves). The rules
//! are `service::voice_collections`.

mod crud;
mod voices;

use serde_json::{Value, json};

use super::Ctx;
use super::action::{Action, Resource, handler, schema};
use super::voices::voice_json;
use crate::db::voice_collections::Collection;
use crate::service::voices::all_voices;

/// The collection with its voices expanded (unknown ids stay listed with `source: "unavailable"`).
async fn expanded(ctx: &Ctx, col: &Collection) -> Value {
    let voices = all_voices(&ctx.app).await;
    let items: Vec<Value> = col
        .voice_ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let mut j = match voices.iter().find(|(v, _)| &v.voice_id == id) {
                Some((v, s)) => voice_json(v, s, false),
                None => json!({"voice_id": id, "name": null, "source": "unavailable"}),
            };
            if let Some(o) = j.as_object_mut() {
                o.remove("is_favorite");
            }
            j["position"] = json!(i);
            j
        })
        .collect();
    let mut out = json!(col);
    out["voices"] = json!(items);
    out
}

/// Every `voice-collections` action; see `api::action`.
pub const RESOURCE: Resource = Resource {
    name: "voice-collections",
    list_action: "all",
    actions: &[
        Action::read("all", handler!(crud::list)),
        Action::read("list", handler!(crud::list)),
        Action::read("get", handler!(crud::get)).id(),
        Action::write("create", handler!(crud::create))
            .data(schema::<crud::Create>)
            .conflict(),
        Action::write("update", handler!(crud::update))
            .id()
            .data(schema::<crud::Update>)
            .conflict(),
        Action::write("rename", handler!(crud::update))
            .id()
            .data(schema::<crud::Update>)
            .conflict(),
        Action::write("delete", handler!(crud::delete)).id(),
        Action::write("add-voice", handler!(voices::add_voice))
            .id()
            .data(schema::<voices::VoiceRef>),
        Action::write("remove-voice", handler!(voices::remove_voice))
            .id()
            .data(schema::<voices::VoiceRef>),
        Action::write("reorder", handler!(voices::reorder))
            .optional_id()
            .data(schema::<voices::Reorder>),
    ],
};
