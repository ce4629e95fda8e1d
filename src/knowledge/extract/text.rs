//! Plain-text handling: decoding bytes of unknown encoding, the optimisation pass
//! (whitespace, control characters, repeated boilerplate lines) and chunking for retrieval.

use std::collections::HashMap;

/// Decodes bytes as UTF-8 (BOM stripped), UTF-16 with a BOM, or else Windows-1252.
pub fn decode(bytes: &[u8]) -> String {
    if let Some(rest) = bytes.strip_prefix(&[0xEF, 0xBB, 0xBF]) {
        return String::from_utf8_lossy(rest).into_owned();
    }
    if bytes.len() >= 2 && (bytes[..2] == [0xFF, 0xFE] || bytes[..2] == [0xFE, 0xFF]) {
        let le = bytes[0] == 0xFF;
        let units: Vec<u16> = bytes[2..]
            .chunks_exact(2)
            .map(|p| {
                if le {
                    u16::from_le_bytes([p[0], p[1]])
                } else {
                    u16::from_be_bytes([p[0], p[1]])
                }
            })
            .collect();
        return String::from_utf16_lossy(&units);
    }
    match std::str::from_utf8(bytes) {
        Ok(s) => s.to_string(),
        Err(_) => bytes.iter().map(|&b| cp1252(b)).collect(),
    }
}

fn cp1252(b: u8) -> char {
    const HIGH: [char; 32] = [
        '€', '\u{81}', '‚', 'ƒ', '„', '…', '†', '‡', 'ˆ', '‰', 'Š', '‹', 'Œ', '\u{8d}', 'Ž',
        '\u{8f}', '\u{90}', '‘', '’', '“', '”', '•', '–', '—', '˜', '™', 'š', '›', 'œ', '\u{9d}',
        'ž', 'Ÿ',
    ];
    match b {
        0x80..=0x9F => HIGH[(b - 0x80) as usize],
        _ => b as char,
    }
}

/// An XML entity reference as text (`&amp;` → `&`, `&#39;` → `'`).
pub fn resolve_ref(r: &quick_xml::events::BytesRef) -> String {
    if let Ok(Some(ch)) = r.resolve_char_ref() {
        return ch.to_string();
    }
    match &*r.html_content() {
        "amp" => "&".into(),
        "lt" => "<".into(),
        "gt" => ">".into(),
        "quot" => "\"".into(),
        "apos" => "'".into(),
        "nbsp" => " ".into(),
        other => format!("&{other};"),
    }
}

/// Decodes the HTML entities left in text that was escaped twice (transcripts do that).
pub fn unescape_entities(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        let Some(end) = tail[..tail.len().min(12)].find(';') else {
            out.push('&');
            rest = &tail[1..];
            continue;
        };
        let name = &tail[1..end];
        let rep = match name {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            "nbsp" => Some(' '),
            n if n.starts_with("#x") || n.starts_with("#X") => u32::from_str_radix(&n[2..], 16)
                .ok()
                .and_then(char::from_u32),
            n if n.starts_with('#') => n[1..].parse::<u32>().ok().and_then(char::from_u32),
            _ => None,
        };
        match rep {
            Some(ch) => {
                out.push(ch);
                rest = &tail[end + 1..];
            }
            None => {
                out.push('&');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Boilerplate a page section often starts or ends with.
const BOILERPLATE: &[&str] = &[
    "skip to content",
    "skip to main content",
    "toggle navigation",
    "cookie settings",
    "accept cookies",
];

/// The optimisation pass: one encoding (UTF-8, NFC-free but control-character-free), single
/// spaces, trimmed lines, at most one blank line in a row, page breaks removed, and lines
/// that repeat on three or more pages or sections (running headers, footers, menus) dropped.
pub fn optimize(raw: &str) -> String {
    let cleaned: String = raw
        .replace("\r\n", "\n")
        .replace('\r', "\n")
        .chars()
        .map(|ch| match ch {
            '\t' | '\u{a0}' | '\u{2007}' | '\u{202f}' | '\u{3000}' => ' ',
            '\u{c}' => '\u{c}',
            '\u{200b}' | '\u{feff}' | '\u{ad}' => '\0',
            c if c.is_control() && c != '\n' => '\0',
            c => c,
        })
        .filter(|c| *c != '\0')
        .collect();
    let lines: Vec<String> = cleaned
        .split('\n')
        .map(|l| {
            l.split(' ')
                .filter(|w| !w.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    // Count each short line once per section (sections: form feeds, or pages from a crawl).
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for section in lines.split(|l| l.contains('\u{c}') || l.starts_with("=== ")) {
        let mut uniq: Vec<&str> = section
            .iter()
            .map(|l| l.trim())
            .filter(|l| !l.is_empty() && l.len() <= 120)
            .collect();
        uniq.sort_unstable();
        uniq.dedup();
        for l in uniq {
            *seen.entry(l).or_default() += 1;
        }
    }
    let mut out = String::new();
    let mut blank = true;
    for l in &lines {
        let l = l.replace('\u{c}', "");
        let t = l.trim();
        let repeated = seen.get(t).is_some_and(|n| *n >= 3) && !t.starts_with("=== ");
        if t.is_empty() || repeated || BOILERPLATE.contains(&t.to_lowercase().as_str()) {
            if !blank && t.is_empty() {
                out.push('\n');
                blank = true;
            }
            continue;
        }
        out.push_str(t);
        out.push('\n');
        blank = false;
    }
    out.trim().to_string()
}

/// Splits text into chunks of at most about `max` characters, on paragraph, then line, then
/// sentence and word boundaries.
pub fn chunk(text: &str, max: usize) -> Vec<String> {
    let mut chunks = Vec::new();
    let mut cur = String::new();
    let push = |cur: &mut String, piece: &str, chunks: &mut Vec<String>| {
        if !cur.is_empty() && cur.chars().count() + piece.chars().count() + 2 > max {
            chunks.push(std::mem::take(cur));
        }
        if !cur.is_empty() {
            cur.push_str("\n\n");
        }
        cur.push_str(piece);
    };
    for para in text.split("\n\n").map(str::trim).filter(|p| !p.is_empty()) {
        if para.chars().count() <= max {
            push(&mut cur, para, &mut chunks);
            continue;
        }
        // A long paragraph: cut at word boundaries.
        let mut piece = String::new();
        for word in para.split_whitespace() {
            if !piece.is_empty() && piece.chars().count() + word.chars().count() + 1 > max {
                push(&mut cur, &std::mem::take(&mut piece), &mut chunks);
            }
            if !piece.is_empty() {
                piece.push(' ');
            }
            piece.push_str(word);
        }
        if !piece.is_empty() {
            push(&mut cur, &piece, &mut chunks);
        }
    }
    if !cur.is_empty() {
        chunks.push(cur);
    }
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optimize_drops_running_headers_and_normalises() {
        let raw = "ACME Confidential\nPage one  text\t here\n\u{c}\nACME Confidential\nSecond page\n\u{c}\nACME Confidential\nThird\r\n\r\n\r\nend";
        let out = optimize(raw);
        assert!(!out.contains("ACME Confidential"), "{out}");
        assert!(out.contains("Page one text here"));
        assert!(!out.contains("\n\n\n"));
    }

    #[test]
    fn chunks_respect_the_size() {
        let text = (0..200)
            .map(|i| format!("word{i}"))
            .collect::<Vec<_>>()
            .join(" ");
        let chunks = chunk(&text, 100);
        assert!(chunks.len() > 5);
        assert!(chunks.iter().all(|c| c.chars().count() <= 100));
    }

    #[test]
    fn decodes_cp1252_and_entities() {
        assert_eq!(decode(&[0x93, b'h', b'i', 0x94]), "“hi”");
        assert_eq!(
            unescape_entities("it&#39;s &amp; &lt;b&gt; &bogus; a&b"),
            "it's & <b> &bogus; a&b"
        );
    }
}
