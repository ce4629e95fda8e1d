//! HTML → text, link discovery, and the file dispatcher on arbitrary input.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let s = String::from_utf8_lossy(data);
    let _ = genied::knowledge::extract::html::to_text(&s);
    let base = url::Url::parse("https://example.com/a/b").unwrap();
    for l in genied::knowledge::extract::html::links(&s, &base) {
        assert!(matches!(l.scheme(), "http" | "https"), "{l}");
    }
    let _ = genied::knowledge::extract::html::is_html("text/html", data);
    let _ = genied::knowledge::extract::file_to_text("f.html", data);
    let _ = genied::knowledge::extract::file_to_text("f.txt", data);
});
