//! HTML to readable text, and a page's links, with lol_html: a streaming tokenizer that builds
//! no tree and never recurses, so a page nested 20,000 levels deep costs a longer open-element
//! list (heap, inside the memory bound below), not stack. Scripts, styles, navigation,
//! headers, footers, forms and asides are skipped; block elements become line breaks.

use std::cell::RefCell;
use std::rc::Rc;

use lol_html::html_content::TextType;
use lol_html::{
    DocumentContentHandlers, ElementContentHandlers, HtmlRewriter, MemorySettings, Selector,
    Settings,
};
use url::Url;

/// What lol_html may hold at once (its buffers and open-element list); a page past it fails
/// with a readable error instead of growing the process. Far above any real page.
pub const MAX_PARSER_MEMORY: usize = 64 * 1024 * 1024;
/// Links taken from one page: the crawl visits at most `MAX_PAGES_CAP` pages, so more only
/// grow the frontier.
pub const MAX_LINKS: usize = 10_000;

const SKIP: &[&str] = &[
    "script",
    "style",
    "noscript",
    "template",
    "nav",
    "header",
    "footer",
    "aside",
    "form",
    "svg",
    "iframe",
    "button",
    "select",
    "head",
    "[hidden]",
    "[aria-hidden=\"true\"]",
    "[role=\"navigation\"]",
    "[role=\"banner\"]",
    "[role=\"contentinfo\"]",
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

#[derive(Default)]
struct State {
    out: String,
    /// The text node being read (lol_html may hand one over in several chunks).
    node: String,
    /// Set by the skip handlers for the current chunk; selector handlers run before the
    /// document handler for the same chunk (registration order in lol_html), and the unit
    /// tests below pin that.
    skip_chunk: bool,
    title: String,
    titles: u32,
}

fn selector(s: &str) -> Result<Selector, String> {
    s.parse()
        .map_err(|e| format!("internal selector '{s}': {e}"))
}

/// The selectors, parsed once: parsing them costs more than reading a small page.
struct Selectors {
    skip: Selector,
    block: Selector,
    title: Selector,
    link: Selector,
}

static SELECTORS: std::sync::LazyLock<Result<Selectors, String>> = std::sync::LazyLock::new(|| {
    Ok(Selectors {
        skip: selector(&SKIP.join(", "))?,
        block: selector(&BLOCK.join(", "))?,
        title: selector("title")?,
        link: selector("a[href]")?,
    })
});

fn selectors() -> Result<&'static Selectors, String> {
    SELECTORS.as_ref().map_err(Clone::clone)
}

fn run(html: &str, settings: Settings<'_, '_>) -> Result<(), String> {
    let settings = settings.with_strict(false).with_memory_settings(
        MemorySettings::new().with_max_allowed_memory_usage(MAX_PARSER_MEMORY),
    );
    let mut rewriter = HtmlRewriter::new(settings, |_: &[u8]| {});
    rewriter
        .write(html.as_bytes())
        .and_then(|()| rewriter.end())
        .map_err(|e| match e {
            lol_html::errors::RewritingError::MemoryLimitExceeded(_) => {
                "the HTML is too large or too deeply nested to read".to_string()
            }
            other => format!("the HTML could not be read: {other}"),
        })
}

/// `(title, text)` of an HTML page, or why it cannot be read (too big for the parser's
/// memory bound).
pub fn to_text(html: &str) -> Result<(Option<String>, String), String> {
    let sel = selectors()?;
    let st = Rc::new(RefCell::new(State::default()));
    let mut settings = Settings::new();
    // One selector list each: lol_html matches a list in one pass per element.
    {
        let st = st.clone();
        settings = settings.append_element_content_handler((
            std::borrow::Cow::Borrowed(&sel.skip),
            ElementContentHandlers::default().text(
                move |_: &mut lol_html::html_content::TextChunk| {
                    st.borrow_mut().skip_chunk = true;
                    Ok(())
                },
            ),
        ));
    }
    {
        let st = st.clone();
        settings = settings.append_element_content_handler((
            std::borrow::Cow::Borrowed(&sel.block),
            ElementContentHandlers::default().element(
                move |el: &mut lol_html::html_content::Element| {
                    st.borrow_mut().out.push('\n');
                    if el.can_have_content() {
                        let st = st.clone();
                        el.on_end_tag(lol_html::end_tag!(move |_| {
                            st.borrow_mut().out.push('\n');
                            Ok(())
                        }))?;
                    }
                    Ok(())
                },
            ),
        ));
    }
    {
        let (st_el, st_text) = (st.clone(), st.clone());
        settings = settings.append_element_content_handler((
            std::borrow::Cow::Borrowed(&sel.title),
            ElementContentHandlers::default()
                .element(move |_: &mut lol_html::html_content::Element| {
                    st_el.borrow_mut().titles += 1;
                    Ok(())
                })
                .text(move |t: &mut lol_html::html_content::TextChunk| {
                    let mut s = st_text.borrow_mut();
                    // The first <title> names the page, as a browser's tab does.
                    if s.titles == 1 && s.title.len() < 4096 {
                        s.title.push_str(t.as_str());
                    }
                    Ok(())
                }),
        ));
    }
    {
        let st = st.clone();
        settings =
            settings.append_document_content_handler(DocumentContentHandlers::default().text(
                move |t: &mut lol_html::html_content::TextChunk| {
                    let mut s = st.borrow_mut();
                    let skipped = std::mem::take(&mut s.skip_chunk);
                    if !skipped {
                        s.node.push_str(t.as_str());
                    }
                    if t.last_in_text_node() {
                        let node = std::mem::take(&mut s.node);
                        let decoded = match t.text_type() {
                            TextType::Data | TextType::RCData => decode_entities(&node),
                            _ => node,
                        };
                        s.out.push_str(&decoded);
                    }
                    Ok(())
                },
            ));
    }
    run(html, settings)?;
    let s = std::mem::take(&mut *st.borrow_mut());
    let title = decode_entities(&s.title)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    Ok(((!title.is_empty()).then_some(title), s.out))
}

/// Absolute http(s) links of a page, fragments removed, at most [`MAX_LINKS`]; none when the
/// page cannot be read.
pub fn links(html: &str, base: &Url) -> Vec<Url> {
    let found = Rc::new(RefCell::new(Vec::new()));
    let f = found.clone();
    let Ok(sel) = selectors() else {
        return vec![];
    };
    let settings = Settings::new().append_element_content_handler((
        std::borrow::Cow::Borrowed(&sel.link),
        ElementContentHandlers::default().element(
            move |el: &mut lol_html::html_content::Element| {
                let mut f = f.borrow_mut();
                if f.len() < MAX_LINKS
                    && let Some(h) = el.get_attribute("href")
                    && let Ok(mut u) = base.join(decode_entities(&h).trim())
                    && matches!(u.scheme(), "http" | "https")
                {
                    u.set_fragment(None);
                    f.push(u);
                }
                Ok(())
            },
        ),
    ));
    if run(html, settings).is_err() {
        return vec![];
    }
    found.take()
}

/// Decodes character references (`&amp;`, `&eacute;`, `&#39;`, `&#x27;`); anything that is not
/// one stays as written. lol_html hands text and attribute values over as in the source.
pub fn decode_entities(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        // The longest named reference is 32 characters with its `&` and `;`.
        let window = &tail[..tail.char_indices().nth(40).map_or(tail.len(), |(j, _)| j)];
        let resolved = window.find(';').and_then(|end| {
            let name = &tail[1..end];
            let text = if let Some(num) = name.strip_prefix('#') {
                let n = match num.strip_prefix(['x', 'X']) {
                    Some(hex) => u32::from_str_radix(hex, 16).ok(),
                    None => num.parse::<u32>().ok(),
                }?;
                // Invalid code points become U+FFFD, as the HTML standard says.
                char::from_u32(n)
                    .filter(|c| *c != '\0')
                    .unwrap_or('\u{fffd}')
                    .to_string()
            } else {
                quick_xml::escape::resolve_html5_entity(name)?.to_string()
            };
            Some((text, end))
        });
        match resolved {
            Some((text, end)) => {
                out.push_str(&text);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn text(html: &str) -> String {
        to_text(html).unwrap().1
    }

    #[test]
    fn skips_boilerplate_and_keeps_the_body() {
        let html = "<html><head><title> My  &amp; Page </title><style>p{}</style></head><body>\
            <nav>Menu</nav><header>Top</header><p>Otters &amp; seals &#39;hold&#x27; hands&nbsp;&eacute;.</p>\
            <div hidden>Secret</div><div aria-hidden=\"true\">Aria</div><div role=\"navigation\">Nav2</div>\
            <script>var x = '&amp;';</script><footer>Foot</footer>Tail &bogus; a&b</body></html>";
        let (title, body) = to_text(html).unwrap();
        assert_eq!(title.as_deref(), Some("My & Page"));
        assert!(
            body.contains("Otters & seals 'hold' hands\u{a0}é."),
            "{body:?}"
        );
        assert!(body.contains("Tail &bogus; a&b"), "{body:?}");
        for gone in [
            "Menu", "Top", "Secret", "Aria", "Nav2", "var x", "Foot", "p{}",
        ] {
            assert!(!body.contains(gone), "{gone} in {body:?}");
        }
    }

    #[test]
    fn blocks_break_lines_and_unclosed_elements_keep_their_text() {
        let body = text("<p>one<p>two<div>three</div>four<br>five<ul><li>six<li>seven</ul>");
        let lines: Vec<&str> = body.lines().filter(|l| !l.is_empty()).collect();
        assert_eq!(
            lines,
            ["one", "two", "three", "four", "five", "six", "seven"]
        );
        // An element skipped but never closed hides the rest, as in a browser's tree.
        assert!(!text("<p>a</p><nav>menu<p>b").contains("menu"));
    }

    #[test]
    fn twenty_thousand_levels_deep_is_read_on_a_small_stack() {
        let depth = 20_000;
        let html = format!(
            "{}deep text{}",
            "<div><span>".repeat(depth),
            "</span></div>".repeat(depth)
        );
        // 64 KiB of stack: a recursive walk or tree drop needs megabytes at this depth.
        let t = std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(move || {
                (
                    text(&html),
                    links(&html, &"http://x.test/".parse().unwrap()),
                )
            })
            .unwrap()
            .join()
            .unwrap();
        assert!(t.0.contains("deep text"));
        assert!(t.1.is_empty());
    }

    #[test]
    fn links_are_absolute_http_without_fragments_and_bounded() {
        let base: Url = "https://site.test/dir/page".parse().unwrap();
        let l = links(
            "<a href=' next?a=1&amp;b=2#frag '>n</a><a href='mailto:x@y'>m</a><a>none</a>\
             <a href='/root'>r</a><a href='javascript:alert(1)'>j</a>",
            &base,
        );
        let l: Vec<String> = l.iter().map(Url::to_string).collect();
        assert_eq!(
            l,
            [
                "https://site.test/dir/next?a=1&b=2",
                "https://site.test/root"
            ]
        );
        let many = "<a href='/x'>x</a>".repeat(MAX_LINKS + 50);
        assert_eq!(links(&many, &base).len(), MAX_LINKS);
    }
}
