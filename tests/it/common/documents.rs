//! Knowledge-base helpers shared by the documents tests.

use base64::Engine;
use serde_json::{Value, json};

use super::{TestApp, User, wait_until};

/// Creates a text document of `u`'s; its id.
pub async fn create_text(app: &TestApp, u: &User, title: &str, content: &str) -> String {
    app.call(
        &u.token,
        "knowledge-base",
        "create",
        None,
        json!({"title": title, "content": content}),
    )
    .await
    .ok(201)["document"]["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Polls `get` until the document is `completed` or `failed` (`wait_until`'s deadline); the
/// document as it then is.
pub async fn settle(app: &TestApp, token: &str, id: &str) -> Value {
    wait_until(&format!("document {id} to settle"), async || {
        let r = app
            .call(token, "knowledge-base", "get", Some(json!(id)), json!({}))
            .await;
        let d = r.ok(200)["document"].clone();
        (d["status"] == "completed" || d["status"] == "failed").then_some(d)
    })
    .await
}

pub fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A document's chunk text, in order, joined by newlines ("" when it has none).
pub async fn chunks(app: &TestApp, id: &str) -> String {
    let id = id.to_string();
    app.state
        .db
        .read(move |c| {
            let parts = c
                .prepare("SELECT content FROM document_chunks WHERE document_id = ?1 ORDER BY seq")?
                .query_map([id], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(parts.join("\n"))
        })
        .await
        .unwrap()
}

/// How many document files the app's store holds: files under `documents/` of its data
/// directory, or objects under its prefix of the test bucket (`GENIED_TEST_DOCUMENT_STORE=s3`).
pub async fn stored_files(app: &TestApp) -> usize {
    match &app.state.config.document_store {
        genied::config::DocumentStoreUrl::S3 { prefix, .. } => {
            super::s3::objects(prefix).await.len()
        }
        genied::config::DocumentStoreUrl::File => walk(&app.dir.path().join("documents")),
    }
}

fn walk(p: &std::path::Path) -> usize {
    std::fs::read_dir(p)
        .map(|rd| {
            rd.flatten()
                .map(|e| {
                    if e.path().is_dir() {
                        walk(&e.path())
                    } else {
                        1
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}

/// The stored file of `hash` in a file store at `dir` (`data-dir/documents`), if there.
pub fn stored_file(dir: &std::path::Path, hash: &str) -> Option<Vec<u8>> {
    std::fs::read(dir.join(&hash[..2]).join(hash)).ok()
}

/// Waits until the documents' search index answers searches (SQLite): checked at this start
/// and nothing queued for it (`db::documents::search`). Nothing to wait for on PostgreSQL.
pub async fn search_index_caught_up(app: &TestApp) {
    let Some(ix) = app.state.doc_index.clone() else {
        return;
    };
    wait_until("the documents search index to catch up", async || {
        let queued = app.count("document_search_queue").await;
        (ix.ready() && queued == 0).then_some(())
    })
    .await
}
