//! Turning a source into plain text: one module per format, plus the text clean-up and
//! chunking the optimisation step applies to all of them.

pub mod docx;
pub mod html;
pub mod pdf;
pub mod sandbox;
pub mod text;
pub mod youtube;

/// The formats `extract-document` accepts, by file extension.
pub const DOCUMENT_EXTENSIONS: &[&str] = &["docx", "txt", "md", "markdown", "html", "htm", "pdf"];

/// Lower-case extension of a file name, if any.
pub fn extension(filename: &str) -> Option<String> {
    let name = filename.rsplit(['/', '\\']).next().unwrap_or(filename);
    let (stem, ext) = name.rsplit_once('.')?;
    if stem.is_empty() || ext.is_empty() {
        return None;
    }
    Some(ext.to_ascii_lowercase())
}

/// Extracts the text of an uploaded file by its extension. Runs on a blocking thread.
pub fn file_to_text(filename: &str, bytes: &[u8]) -> Result<String, String> {
    match extension(filename).as_deref() {
        Some("pdf") => pdf::extract(bytes),
        Some("docx") => docx::extract(bytes),
        Some("html" | "htm") => Ok(html::to_text(&text::decode(bytes))?.1),
        Some("txt" | "md" | "markdown") => Ok(text::decode(bytes)),
        other => Err(format!(
            "unsupported document format '{}'",
            other.unwrap_or("")
        )),
    }
}
