//! multipart/form-data bodies as the platform fakes read them (Vapi files, Retell knowledge
//! bases), parsed with multer so a malformed upload is refused the way a real server would.

use axum::body::Bytes;
use axum::http::HeaderMap;

#[derive(Debug, Clone)]
pub struct Part {
    pub name: String,
    pub file_name: Option<String>,
    pub content_type: Option<String>,
    pub data: Vec<u8>,
}

impl Part {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.data).into_owned()
    }
}

/// The parts of a multipart body; `Err` says why it is not one.
pub async fn parse(headers: &HeaderMap, body: Bytes) -> Result<Vec<Part>, String> {
    let ct = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let boundary = multer::parse_boundary(ct).map_err(|e| format!("not multipart: {e}"))?;
    let stream = futures::stream::once(async move { Ok::<Bytes, std::io::Error>(body) });
    let mut mp = multer::Multipart::new(stream, boundary);
    let mut parts = Vec::new();
    while let Some(field) = mp.next_field().await.map_err(|e| e.to_string())? {
        let name = field.name().unwrap_or("").to_string();
        let file_name = field.file_name().map(str::to_string);
        let content_type = field.content_type().map(|m| m.to_string());
        let data = field.bytes().await.map_err(|e| e.to_string())?.to_vec();
        parts.push(Part {
            name,
            file_name,
            content_type,
            data,
        });
    }
    Ok(parts)
}
