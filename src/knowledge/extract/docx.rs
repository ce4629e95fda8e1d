//! DOCX text extraction: the `word/document.xml` part of the zip, paragraphs as lines.

use std::io::Read;

use quick_xml::events::Event;

pub fn extract(bytes: &[u8]) -> Result<String, String> {
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes))
        .map_err(|e| format!("the file is not a DOCX (zip) document: {e}"))?;
    let mut xml = String::new();
    {
        let part = zip
            .by_name("word/document.xml")
            .map_err(|_| "the DOCX has no word/document.xml part".to_string())?;
        if part.size() > 64 * 1024 * 1024 {
            return Err("the DOCX text part is too large".into());
        }
        part.take(64 * 1024 * 1024)
            .read_to_string(&mut xml)
            .map_err(|e| match e.kind() {
                // The extraction process's memory limit (see `sandbox`).
                std::io::ErrorKind::OutOfMemory => {
                    "the DOCX needs more memory than extraction may use".to_string()
                }
                _ => format!("the DOCX could not be read: {e}"),
            })?;
    }
    paragraphs(&xml)
}

fn paragraphs(xml: &str) -> Result<String, String> {
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut out = String::new();
    let mut in_text = false;
    loop {
        match reader
            .read_event()
            .map_err(|e| format!("the DOCX XML is malformed: {e}"))?
        {
            Event::Start(e) if e.local_name().as_ref() == "t" => in_text = true,
            Event::End(e) => match e.local_name().as_ref() {
                "t" => in_text = false,
                "p" => out.push('\n'),
                _ => {}
            },
            Event::Empty(e) => match e.local_name().as_ref() {
                "tab" => out.push('\t'),
                "br" | "cr" => out.push('\n'),
                "p" => out.push('\n'),
                _ => {}
            },
            Event::Text(t) if in_text => out.push_str(&t.xml10_content()),
            Event::GeneralRef(r) if in_text => out.push_str(&super::text::resolve_ref(&r)),
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(out)
}
