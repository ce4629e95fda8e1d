//! HTML to readable text with scraper: scripts, styles, navigation, headers, footers, forms
//! and asides are skipped; block elements become line breaks.

use scraper::{ElementRef, Html, Node, Selector};
use url::Url;

const SKIP: &[&str] = &[
    "script", "style", "noscript", "template", "nav", "header", "footer", "aside", "form", "svg",
    "iframe", "button", "select", "head",
];
const BLOCK: &[&str] = &[
    "p",
    "div",
    "section",
    "article",
    "main",
    "li",
    "ul",
    "ol",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "br",
    "tr",
    "table",
    "blockquote",
    "pre",
    "dd",
    "dt",
    "hr",
    "figcaption",
    "body",
];

/// `(title, text)` of an HTML page.
pub fn to_text(html: &str) -> (Option<String>, String) {
    let doc = Html::parse_document(html);
    let title = Selector::parse("title")
        .ok()
        .and_then(|s| doc.select(&s).next())
        .map(|t| {
            t.text()
                .collect::<String>()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        })
        .filter(|t| !t.is_empty());
    let mut out = String::new();
    walk(doc.root_element(), &mut out);
    (title, out)
}

fn walk(el: ElementRef, out: &mut String) {
    for child in el.children() {
        match child.value() {
            Node::Text(t) => out.push_str(t),
            Node::Element(e) => {
                let name = e.name();
                if SKIP.contains(&name)
                    || e.attr("hidden").is_some()
                    || e.attr("aria-hidden") == Some("true")
                {
                    continue;
                }
                if e.attr("role")
                    .is_some_and(|r| r == "navigation" || r == "banner" || r == "contentinfo")
                {
                    continue;
                }
                let block = BLOCK.contains(&name);
                if block {
                    out.push('\n');
                }
                if let Some(child_el) = ElementRef::wrap(child) {
                    walk(child_el, out);
                }
                if block {
                    out.push('\n');
                }
            }
            _ => {}
        }
    }
}

/// Absolute http(s) links of a page, fragments removed.
pub fn links(html: &str, base: &Url) -> Vec<Url> {
    let doc = Html::parse_document(html);
    let Ok(sel) = Selector::parse("a[href]") else {
        return vec![];
    };
    doc.select(&sel)
        .filter_map(|a| a.value().attr("href"))
        .filter_map(|h| base.join(h.trim()).ok())
        .filter(|u| matches!(u.scheme(), "http" | "https"))
        .map(|mut u| {
            u.set_fragment(None);
            u
        })
        .collect()
}

/// True when a response is HTML by its content type (or, without one, by its first bytes).
pub fn is_html(content_type: &str, body: &[u8]) -> bool {
    let ct = content_type.to_ascii_lowercase();
    if ct.contains("html") {
        return true;
    }
    if !ct.is_empty() {
        return false;
    }
    let head = String::from_utf8_lossy(&body[..body.len().min(512)]).to_ascii_lowercase();
    head.contains("<html") || head.contains("<!doctype html")
}
