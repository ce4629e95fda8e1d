//! Knowledge-base helpers shared by the documents tests.

use base64::Engine;

use super::TestApp;

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
