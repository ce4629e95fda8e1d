//! The knowledge base behind the `knowledge-base` resource: the file store, extraction per
//! source format, same-site crawling, and the durable pipeline that moves a document from
//! `pending_extraction` through `pending_optimization` to `completed` (or `failed`).

pub mod agents;
pub mod crawl;
pub mod extract;
pub mod index_build;
pub mod pipeline;
pub mod search_index;
pub mod store;

use serde_json::{Value, json};

use crate::db::documents::Document;
use crate::state::AppState;

pub const TYPES: &[&str] = &[
    "text",
    "url",
    "website",
    "youtube",
    "pdf_upload",
    "file_upload",
];
pub const STATUSES: &[&str] = &[
    "pending_extraction",
    "pending_optimization",
    "completed",
    "failed",
];

pub fn store(app: &AppState) -> store::Store {
    store::Store::new(app.documents.clone())
}

/// The document record of the contract. `owner` only when asked for (admin mode).
pub fn render(d: &Document, agents: Vec<Value>, with_owner: bool) -> Value {
    let mut v = json!({
        "id": d.id,
        "external_id": d.external_id,
        "el_doc_id": d.external_id,
        "name": d.name,
        "type": d.doc_type,
        "status": d.status,
        "error": d.error,
        "is_active": d.is_active,
        "is_public": d.is_public,
        "folder_id": d.folder_id,
        "folder": d.folder_id.as_ref().map(|id| json!({"id": id, "name": d.folder_name})),
        "size_bytes": d.size_bytes,
        "source_url": d.source_url,
        "dependent_agents": agents,
        "created_at": d.created_at,
        "updated_at": d.updated_at,
    });
    if with_owner {
        v["owner"] = d.owner.clone().unwrap_or(Value::Null);
    }
    v
}
