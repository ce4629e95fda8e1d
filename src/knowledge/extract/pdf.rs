//! PDF text extraction with lopdf. Pages are separated by a form feed, so the optimiser can
//! recognise running headers and footers.

/// The text of every page, or a readable reason why there is none.
pub fn extract(bytes: &[u8]) -> Result<String, String> {
    if !bytes.starts_with(b"%PDF-")
        && !bytes
            .get(..1024)
            .unwrap_or(bytes)
            .windows(5)
            .any(|w| w == b"%PDF-")
    {
        return Err("the file is not a PDF (no %PDF- header)".into());
    }
    let doc = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        lopdf::Document::load_mem(bytes)
    }))
    .map_err(|_| "the PDF could not be parsed".to_string())?
    .map_err(|e| format!("the PDF could not be read: {e}"))?;
    if doc.is_encrypted() {
        return Err("the PDF is encrypted".into());
    }
    let pages: Vec<u32> = doc.get_pages().keys().copied().collect();
    if pages.is_empty() {
        return Err("the PDF has no pages".into());
    }
    let mut out = Vec::with_capacity(pages.len());
    for p in pages {
        let text =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| doc.extract_text(&[p])))
                .map_err(|_| format!("text extraction failed on page {p}"))?
                .map_err(|e| format!("text extraction failed on page {p}: {e}"))?;
        out.push(text);
    }
    Ok(out.join("\n\u{c}\n"))
}
