//! YouTube transcripts: the video id from any of the usual URL forms, and the timed-text XML
//! (`<transcript><text start dur>…</text></transcript>`) the transcript source answers with.
//! The source URL is configuration (`--youtube-transcript-url`, `{video_id}` placeholder).

use quick_xml::events::Event;
use url::Url;

/// The 11-character video id of a YouTube URL, or `None` when it is not one.
pub fn video_id(raw: &str) -> Option<String> {
    let url = Url::parse(raw.trim()).ok()?;
    let host = url.host_str()?.to_ascii_lowercase();
    let host = host
        .strip_prefix("www.")
        .or_else(|| host.strip_prefix("m."))
        .unwrap_or(&host)
        .to_string();
    let id = match host.as_str() {
        "youtu.be" => url.path_segments()?.next().map(str::to_string),
        "youtube.com" | "music.youtube.com" | "youtube-nocookie.com" => {
            let mut segs = url.path_segments()?;
            match segs.next() {
                Some("watch") => url
                    .query_pairs()
                    .find(|(k, _)| k == "v")
                    .map(|(_, v)| v.into_owned()),
                Some("shorts" | "embed" | "live" | "v") => segs.next().map(str::to_string),
                _ => None,
            }
        }
        _ => None,
    }?;
    (id.len() == 11
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'))
    .then_some(id)
}

/// The transcript URL for a video.
pub fn transcript_url(template: &str, video_id: &str) -> String {
    template.replace("{video_id}", video_id)
}

/// The spoken text of a timed-text document, one line per caption.
pub fn parse_transcript(xml: &str) -> Result<String, String> {
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut out = String::new();
    let mut in_text = false;
    let mut any = false;
    let mut line = String::new();
    loop {
        match reader
            .read_event()
            .map_err(|e| format!("the transcript is not valid timed-text XML: {e}"))?
        {
            Event::Start(e) if e.local_name().as_ref() == "text" => {
                in_text = true;
                any = true;
                line.clear();
            }
            Event::End(e) if e.local_name().as_ref() == "text" => {
                in_text = false;
                let l = super::text::unescape_entities(&line);
                let l = l.split_whitespace().collect::<Vec<_>>().join(" ");
                if !l.is_empty() {
                    out.push_str(&l);
                    out.push('\n');
                }
            }
            Event::Text(t) if in_text => line.push_str(&t.xml10_content()),
            Event::GeneralRef(r) if in_text => line.push_str(&super::text::resolve_ref(&r)),
            Event::Eof => break,
            _ => {}
        }
    }
    if !any {
        return Err("the transcript has no captions".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn video_ids() {
        assert_eq!(
            video_id("https://www.youtube.com/watch?v=dQw4w9WgXcQ&t=1").as_deref(),
            Some("dQw4w9WgXcQ")
        );
        assert_eq!(
            video_id("https://youtu.be/dQw4w9WgXcQ").as_deref(),
            Some("dQw4w9WgXcQ")
        );
        assert_eq!(
            video_id("https://youtube.com/shorts/dQw4w9WgXcQ").as_deref(),
            Some("dQw4w9WgXcQ")
        );
        assert_eq!(video_id("https://example.com/watch?v=dQw4w9WgXcQ"), None);
        assert_eq!(video_id("https://youtube.com/watch?v=short"), None);
    }
}
