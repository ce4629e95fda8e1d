//! Fuzz smoke: the eight cargo-fuzz target bodies (`tests/fuzz/targets.rs`, the very same
//! functions the `cargo fuzz` binaries call) run on the checked-in seed corpus
//! (`tests/fuzz/corpus/<target>/`), on seeded mutations of every seed and on seeded random
//! inputs. This is a deterministic smoke, not coverage-guided fuzzing: it needs no nightly
//! flags or libFuzzer and takes seconds, so it runs in CI; the long coverage-guided runs are
//! the documented `cargo fuzz` command (docs/reliability.md, "Fuzzing").
//!
//! Bytes become a target's typed input exactly as `libfuzzer_sys::fuzz_target!` makes them
//! (`Arbitrary::arbitrary_take_rest` over `Unstructured`), so a failing input written here
//! reproduces with `cargo fuzz run <target> <file>`.

#[path = "../fuzz/targets.rs"]
mod targets;

use std::cell::{Cell, RefCell};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use arbitrary::{Arbitrary, Unstructured};

use crate::hostile_documents::inputs as hostile;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz/corpus")
        .join(target)
}

/// What `fuzz_target!` does with the bytes: too short for the type or not decodable is
/// skipped (false), anything else runs the body.
fn feed<'a, T: Arbitrary<'a>>(bytes: &'a [u8], body: fn(T)) -> bool {
    if bytes.len() < T::size_hint(0).0 {
        return false;
    }
    match T::arbitrary_take_rest(Unstructured::new(bytes)) {
        Ok(input) => {
            body(input);
            true
        }
        Err(_) => false,
    }
}

thread_local! {
    /// Set while this thread runs a target body: its panics are counted and kept instead of
    /// printed (the library's own `catch_unwind` may swallow them; cargo fuzz would not).
    static IN_BODY: Cell<bool> = const { Cell::new(false) };
    static PANICS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// Chains a panic hook once for the whole test binary; other tests' panics print as usual.
fn install_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if IN_BODY.with(Cell::get) {
                let at = info
                    .location()
                    .map(|l| format!(" at {}:{}", l.file(), l.line()))
                    .unwrap_or_default();
                let msg = info
                    .payload()
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| info.payload().downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                PANICS.with(|p| p.borrow_mut().push(format!("{msg}{at}")));
            } else {
                prev(info);
            }
        }));
    });
}

/// Runs one input; any panic inside the body (escaping or caught by genied itself, which
/// libFuzzer's abort-on-panic hook would report as a crash) fails the test with the input
/// and the command that reproduces it.
fn check(target: &str, input: &[u8], run: fn(&[u8]) -> bool) -> bool {
    IN_BODY.with(|f| f.set(true));
    PANICS.with(|p| p.borrow_mut().clear());
    let outcome = catch_unwind(AssertUnwindSafe(|| run(input)));
    IN_BODY.with(|f| f.set(false));
    let panics = PANICS.with(|p| std::mem::take(&mut *p.borrow_mut()));
    if let Ok(decoded) = outcome
        && panics.is_empty()
    {
        return decoded;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-smoke");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("crash-{target}-{}", hex::encode(sha(input))));
    std::fs::write(&file, input).unwrap();
    panic!(
        "fuzz smoke: target `{target}` panicked ({}; {}) on the {}-byte input\n  {}\n\
         written to {}\n\
         reproduce: cd tests/fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run --fuzz-dir . -s none -O {target} {}",
        if outcome.is_err() {
            "escaped"
        } else {
            "caught inside genied"
        },
        panics.join(" | "),
        input.len(),
        hex::encode(input),
        file.display(),
        file.display(),
    );
}

fn sha(b: &[u8]) -> [u8; 8] {
    use sha2::Digest;
    sha2::Sha256::digest(b)[..8].try_into().unwrap()
}

/// Bytes that tend to matter to the parsers under test.
const INTERESTING: &[&[u8]] = &[
    b"\0",
    b"\xff",
    b"\x7f",
    b"\x80",
    b"\xc3",
    b"\xf0\x9f",
    b"\"",
    b"\\",
    b"\\u",
    b"{",
    b"}",
    b"[",
    b"]",
    b":",
    b",",
    b"=",
    b"&",
    b"%",
    b"%zz",
    b"+",
    b".",
    b" ",
    b"\t",
    b"\n",
    b"\r\n",
    b"*",
    b"/",
    b"-",
    b"?",
    b"<",
    b">",
    b"</",
    b"&#",
    b"1e999",
    b"-0",
    b"99999999999999999999",
    b"null",
    b"obj",
    b"endobj",
    b"stream",
    b"xref",
    b"PK\x03\x04",
    b"<w:t>",
];

/// One to four stacked byte-level mutations of `seed` (flips, interesting values,
/// insertions, deletions, truncation, duplication, splices with another seed).
fn mutate(rng: &mut StdRng, seed: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..rng.gen_range(1..=4) {
        let at = |rng: &mut StdRng, len: usize| rng.gen_range(0..=len);
        match rng.gen_range(0..8) {
            0 if !v.is_empty() => {
                let i = rng.gen_range(0..v.len());
                v[i] ^= 1 << rng.gen_range(0..8);
            }
            1 if !v.is_empty() => {
                let i = rng.gen_range(0..v.len());
                v[i] = [0u8, 0xff, 0x7f, 0x80, b'"', b'\\', b'%', b'<'][rng.gen_range(0..8)];
            }
            2 => {
                let i = at(rng, v.len());
                let ins = INTERESTING[rng.gen_range(0..INTERESTING.len())];
                v.splice(i..i, ins.iter().copied());
            }
            3 if !v.is_empty() => {
                let i = rng.gen_range(0..v.len());
                let n = rng.gen_range(1..=(v.len() - i).min(16));
                v.drain(i..i + n);
            }
            4 => {
                let n = at(rng, v.len());
                v.truncate(n);
            }
            5 if !v.is_empty() => {
                let i = rng.gen_range(0..v.len());
                let n = rng.gen_range(1..=(v.len() - i).min(64));
                let chunk = v[i..i + n].to_vec();
                let j = at(rng, v.len());
                v.splice(j..j, chunk);
            }
            6 => {
                let keep = at(rng, v.len());
                let from = at(rng, other.len());
                v.truncate(keep);
                v.extend_from_slice(&other[from..]);
            }
            _ => {
                let i = at(rng, v.len());
                let b: u8 = rng.r#gen();
                v.insert(i, b);
            }
        }
    }
    v
}

/// A random input: raw bytes, or text from the characters the parsers care about.
fn random_input(rng: &mut StdRng, max_len: usize) -> Vec<u8> {
    const TEXT: &[u8] = b"abcxyzAZ09 \t\n*/,-?#LW{}[]\":,.=&%+<>/!\\_svc_liveBearer0123456789";
    let len = rng.gen_range(0..=max_len);
    if rng.gen_bool(0.5) {
        (0..len).map(|_| rng.r#gen()).collect()
    } else {
        (0..len)
            .map(|_| TEXT[rng.gen_range(0..TEXT.len())])
            .collect()
    }
}

struct Budget {
    mutations_per_seed: usize,
    random: usize,
    max_random_len: usize,
}

fn smoke(target: &str, run: fn(&[u8]) -> bool, budget: Budget) {
    install_hook();
    let mut seeds: Vec<(String, Vec<u8>)> = std::fs::read_dir(corpus_dir(target))
        .unwrap_or_else(|e| panic!("seed corpus of `{target}`: {e}"))
        .map(|e| {
            let p = e.unwrap().path();
            (p.display().to_string(), std::fs::read(&p).unwrap())
        })
        .collect();
    seeds.sort();
    assert!(seeds.len() >= 3, "`{target}` has {} seeds", seeds.len());
    for (name, bytes) in &seeds {
        // A seed that does not even decode into the typed input would seed nothing.
        assert!(
            check(target, bytes, run),
            "seed {name} does not decode into the input type of `{target}`"
        );
    }
    // Seeded from the name, so every run (and every machine) tries the same inputs.
    let mut rng = StdRng::seed_from_u64(u64::from_le_bytes(sha(target.as_bytes())));
    let (mut mutations, mut ran) = (0, seeds.len());
    for (_, seed) in &seeds {
        for _ in 0..budget.mutations_per_seed {
            let other = &seeds[rng.gen_range(0..seeds.len())].1;
            let input = mutate(&mut rng, seed, other);
            mutations += 1;
            ran += usize::from(check(target, &input, run));
        }
    }
    for _ in 0..budget.random {
        let input = random_input(&mut rng, budget.max_random_len);
        ran += usize::from(check(target, &input, run));
    }
    println!(
        "fuzz smoke {target}: {} seeds, {mutations} mutations, {} random inputs; {ran} decoded and ran, 0 panics",
        seeds.len(),
        budget.random
    );
}

#[test]
fn envelope() {
    smoke(
        "envelope",
        |b| feed(b, targets::envelope),
        Budget {
            mutations_per_seed: 400,
            random: 3000,
            max_random_len: 256,
        },
    );
}

#[test]
fn rest() {
    smoke(
        "rest",
        |b| feed(b, targets::rest),
        Budget {
            mutations_per_seed: 400,
            random: 3000,
            max_random_len: 256,
        },
    );
}

#[test]
fn jwt() {
    smoke(
        "jwt",
        |b| feed(b, targets::jwt),
        Budget {
            mutations_per_seed: 400,
            random: 3000,
            max_random_len: 256,
        },
    );
}

#[test]
fn credential() {
    smoke(
        "credential",
        |b| feed(b, targets::credential),
        Budget {
            mutations_per_seed: 400,
            random: 3000,
            max_random_len: 256,
        },
    );
}

#[test]
fn cron() {
    smoke(
        "cron",
        |b| feed(b, targets::cron),
        Budget {
            mutations_per_seed: 400,
            random: 3000,
            max_random_len: 128,
        },
    );
}

#[test]
fn pdf() {
    smoke(
        "pdf",
        |b| feed(b, targets::pdf),
        Budget {
            mutations_per_seed: 300,
            random: 2000,
            max_random_len: 512,
        },
    );
}

#[test]
fn docx() {
    smoke(
        "docx",
        |b| feed(b, targets::docx),
        Budget {
            mutations_per_seed: 300,
            random: 2000,
            max_random_len: 512,
        },
    );
}

#[test]
fn html() {
    smoke(
        "html",
        |b| feed(b, targets::html),
        Budget {
            mutations_per_seed: 300,
            random: 2000,
            max_random_len: 512,
        },
    );
}

#[test]
#[should_panic(expected = "reproduce: cd tests/fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run")]
fn a_panic_escaping_a_body_fails_with_the_input_and_how_to_reproduce() {
    install_hook();
    check("envelope", b"{}", |_| panic!("boom"));
}

#[test]
#[should_panic(expected = "caught inside genied")]
fn a_panic_caught_inside_a_body_fails_too() {
    install_hook();
    check("pdf", b"%PDF-", |_| {
        std::panic::catch_unwind(|| panic!("boom")).is_err()
    });
}

/// Found by fuzzing: an expression nothing satisfies made the scheduler search for its next
/// run up to the year 5000 before validation accepted it (never to run). Day fields no date
/// satisfies (the last day of a month that is also its second Sunday; this smoke) cost
/// seconds of CPU; a minute list of only a comma (`cargo fuzz`, past its 10 s timeout)
/// stepped minute by minute, some 1.5 billion steps.
#[test]
fn schedules_that_never_run_are_refused() {
    use genied::workers::scheduler::to_cron;
    for never in [
        "5/10 */2 L * SUN#2",
        "0 9 31 2 *",
        "0 9 30 2 MON",
        "0 0 0 31 4,6,9,11 *",
        ", * * * *",
        "0 , * * * *",
        "0 0 , * * *",
        "* * , * *",
        "* * * , *",
        "* * * * ,",
    ] {
        let seconds = never.split_whitespace().count() == 6;
        let err = to_cron(never, seconds).unwrap_err();
        assert!(err.contains("never runs"), "{never}: {err}");
    }
    // Rare is not never: 29 February on a Monday comes every 28 years or so.
    for rare in [
        "0 9 29 2 MON",
        "0 0 L * FRI",
        "0 0 1 * MON#1",
        "0 9 * * 1-5",
    ] {
        assert_eq!(to_cron(rare, false), Ok(format!("0 {rare}")));
    }
}

// ---- The seed corpus ----------------------------------------------------------------------

/// Bytes that `arbitrary` decodes into a tuple of length-prefixed parts: contents are taken
/// from the front, lengths from the back (in the order they are read), one byte each while
/// the input is at most 256 bytes long.
#[derive(Default)]
struct Typed {
    front: Vec<u8>,
    lengths: Vec<u8>,
}

impl Typed {
    /// A `&str`/`&[u8]`/`String` that is not the last element.
    fn sized(mut self, b: &[u8]) -> Self {
        self.front.extend_from_slice(b);
        self.lengths.push(u8::try_from(b.len()).unwrap());
        self
    }
    fn flag(mut self, on: bool) -> Self {
        self.front.push(u8::from(on));
        self
    }
    fn opt(self, v: Option<&str>) -> Self {
        match v {
            Some(s) => self.flag(true).sized(s.as_bytes()),
            None => self.flag(false),
        }
    }
    fn bytes(self) -> Vec<u8> {
        let mut out = self.front;
        out.extend(self.lengths.iter().rev());
        assert!(out.len() <= 256, "one-byte lengths only");
        out
    }
}

fn docx_fixture(paragraphs: &[&str], deflate: bool) -> Vec<u8> {
    use std::io::Write;
    let mut buf = std::io::Cursor::new(Vec::new());
    {
        let mut z = zip::ZipWriter::new(&mut buf);
        let opt = zip::write::SimpleFileOptions::default().compression_method(if deflate {
            zip::CompressionMethod::Deflated
        } else {
            zip::CompressionMethod::Stored
        });
        z.start_file("[Content_Types].xml", opt).unwrap();
        z.write_all(br#"<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>"#)
            .unwrap();
        z.start_file("word/document.xml", opt).unwrap();
        let body: String = paragraphs
            .iter()
            .map(|p| format!("<w:p><w:r><w:t xml:space=\"preserve\">{p}</w:t></w:r><w:r><w:tab/><w:br/></w:r></w:p>"))
            .collect();
        write!(
            z,
            r#"<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>{body}</w:body></w:document>"#
        )
        .unwrap();
        z.finish().unwrap();
    }
    buf.into_inner()
}

fn jwt_with(key: &[u8], exp_offset: i64) -> String {
    let now = chrono::Utc::now().timestamp();
    genied::auth::sessions::encode(
        key,
        &genied::auth::sessions::Claims {
            sub: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b".into(),
            sid: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c".into(),
            role: genied::db::users::Role::StandardUser,
            iat: now,
            exp: now + exp_offset,
        },
    )
}

/// The checked-in seeds, by target and file name.
fn seed_corpus() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let s = |t: &'static str| t.as_bytes().to_vec();
    let rest = |q: &str, body: &str, action: Option<&str>, id: Option<&str>| {
        Typed::default()
            .sized(q.as_bytes())
            .sized(body.as_bytes())
            .opt(action)
            .opt(id)
            .bytes()
    };
    let credential = |auth: &str, key: &str, with_key: bool| {
        Typed::default()
            .sized(auth.as_bytes())
            .sized(key.as_bytes())
            .flag(with_key)
            .bytes()
    };
    let cron = |expr: &str, seconds: bool| {
        Typed::default()
            .sized(expr.as_bytes())
            .flag(seconds)
            .bytes()
    };
    let b64 = |v: &str| {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v)
    };
    let valid = jwt_with(b"another-key-than-the-fuzz-key-0123456789abcdef", 3600);
    let (head, rest_of) = valid.split_once('.').unwrap();
    let (claims, _) = rest_of.split_once('.').unwrap();
    vec![
        (
            "envelope",
            "list.json",
            s(r#"{"resource":"genies","action":"list","data":{"limit":20,"offset":0}}"#),
        ),
        (
            "envelope",
            "create.json",
            s(
                r#"{"resource":"genies","action":"create","data":{"name":"Ada","language":"en","tags":["a","b"],"nested":{"x":[1,2.5,-3e2,null,true]}}}"#,
            ),
        ),
        (
            "envelope",
            "get-id.json",
            s(
                r#"{"resource":"lead-notes","action":"get","id":"0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"}"#,
            ),
        ),
        (
            "envelope",
            "numeric-id.json",
            s(
                r#"{"resource":"leads","action":"update","id":42,"data":{"status":"won","note":"caf\u00e9 \ud83d\ude00"}}"#,
            ),
        ),
        (
            "envelope",
            "data-not-object.json",
            s(r#"{"resource":"genies","action":"list","data":[1,2]}"#),
        ),
        (
            "envelope",
            "id-object.json",
            s(r#"{"resource":"genies","action":"delete","id":{"x":1},"data":null}"#),
        ),
        (
            "envelope",
            "truncated.json",
            s(r#"{"resource":"genies","action":"crea"#),
        ),
        ("envelope", "whitespace.json", s(" \n\t ")),
        (
            "rest",
            "list-query",
            rest(
                "limit=10&offset=20&status=active&tagIds=a&tagIds=b&q=caf%C3%A9+x",
                "",
                None,
                None,
            ),
        ),
        (
            "rest",
            "create-body",
            rest(
                "",
                r#"{"name":"Ada","voice":{"id":"v1"}}"#,
                Some("create"),
                None,
            ),
        ),
        (
            "rest",
            "data-body",
            rest(
                "filters=x&archived=true",
                r#"{"data":{"name":"B"},"resource":"x","action":"y","id":3}"#,
                Some("update"),
                Some("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"),
            ),
        ),
        (
            "rest",
            "bad-query",
            rest("a=%zz&&=&b", "[1,2,3]", Some(""), Some("")),
        ),
        ("jwt", "wrong-key", valid.clone().into_bytes()),
        (
            "jwt",
            "expired",
            jwt_with(b"another-key-than-the-fuzz-key-0123456789abcdef", -7200).into_bytes(),
        ),
        (
            "jwt",
            "alg-none",
            format!("{}.{claims}.", b64(r#"{"alg":"none","typ":"JWT"}"#)).into_bytes(),
        ),
        (
            "jwt",
            "bad-header",
            format!(
                "{}.{claims}.c2ln",
                b64(r#"{"alg":"HS256","typ":"JWT","kid":[1]}"#)
            )
            .into_bytes(),
        ),
        ("jwt", "two-parts", format!("{head}.{claims}").into_bytes()),
        (
            "credential",
            "bearer-jwt",
            credential(&format!("Bearer {}", &valid[..60]), "", false),
        ),
        (
            "credential",
            "bearer-key",
            credential("bearer svc_live_0123456789abcdefABCDEF", "", false),
        ),
        (
            "credential",
            "x-api-key",
            credential("Basic dXNlcjpwYXNz", "svc_admin_0123456789abcdefXYZ", true),
        ),
        (
            "credential",
            "empty-key",
            credential("Bearer  ", "  ", true),
        ),
        (
            "credential",
            "non-ascii",
            credential("Bearer caf\u{e9}.a.b", "svc_live_\u{e9}\u{1f600}", true),
        ),
        ("cron", "five-fields", cron("0 9 * * 1-5", false)),
        (
            "cron",
            "six-fields",
            cron("*/15 0,30 8-18 1,15 JAN-DEC MON-FRI", true),
        ),
        ("cron", "steps-ranges", cron("5/10 */2 L * SUN#2", false)),
        ("cron", "seconds-refused", cron("0 0 0 * * *", false)),
        ("cron", "bad", cron("61 25 32 13 8", false)),
        ("cron", "empty-list", cron("0 , * * * *", true)),
        (
            "pdf",
            "two-pages.pdf",
            crate::common::fixtures::pdf(
                None,
                &[
                    "Refunds are issued within 30 days.",
                    "Contact support@example.com",
                ],
            ),
        ),
        (
            "pdf",
            "one-page.pdf",
            crate::common::fixtures::pdf(None, &["Hello (PDF) \\ world"]),
        ),
        (
            "pdf",
            "header-only.pdf",
            s(
                "%PDF-1.5\n1 0 obj\n<< /Type /Catalog >>\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n",
            ),
        ),
        (
            "docx",
            "stored.docx",
            docx_fixture(&["Opening hours: 9 to 5.", "Caf&#233; &amp; bar"], false),
        ),
        (
            "docx",
            "deflated.docx",
            docx_fixture(&["Returns within 30 days."], true),
        ),
        (
            "docx",
            "not-a-zip.docx",
            s("PK\x03\x04 this is not really a zip"),
        ),
        (
            "html",
            "page.html",
            s(
                r#"<!doctype html><html><head><title>Help  Centre</title><style>p{}</style></head><body><nav><a href="/nav">Nav</a></nav><h1>FAQ</h1><p>Refunds &amp; returns: <a href="refunds?x=1#top">here</a>.</p><ul><li>One</li><li>Two<br>lines</li></ul><table><tr><td>a</td></tr></table><script>var x = "<p>";</script><a href="mailto:a@b.c">m</a><a href="javascript:alert(1)">j</a><a href="//other.example/x">o</a></body></html>"#,
            ),
        ),
        (
            "html",
            "fragment.html",
            s("<p>Unclosed <b>bold <i>italic</p><div><a href=\"../up\">up</a></div>"),
        ),
        (
            "html",
            "latin1.html",
            b"<html><body><p>caf\xe9 cr\xe8me</p></body></html>".to_vec(),
        ),
        // Hostile shapes (issue #14): smaller instances of tests/it/hostile_documents.rs's
        // inputs, so every mutation still runs in milliseconds.
        ("html", "deep-divs.html", hostile::deep_html(1_000, "deep")),
        ("html", "unclosed.html", hostile::unclosed_html(700, "open")),
        (
            "html",
            "many-attributes.html",
            hostile::many_attributes_html(300, "attrs"),
        ),
        ("docx", "deep.docx", hostile::deep_docx(1_000, "deep")),
        ("docx", "laughs.docx", hostile::laughs_docx("laughs")),
        ("docx", "ratio-bomb.docx", hostile::bomb_docx(1)),
        ("pdf", "deep-objects.pdf", hostile::deep_pdf(1_000, "deep")),
        (
            "pdf",
            "deep-content.pdf",
            hostile::deep_content_pdf(1_000, "deep"),
        ),
        (
            "envelope",
            "deep-nesting.json",
            format!(
                r#"{{"resource":"genies","action":"create","data":{{"x":{}1{}}}}}"#,
                "[".repeat(5_000),
                "]".repeat(5_000)
            )
            .into_bytes(),
        ),
    ]
}

#[test]
fn typed_seeds_decode_to_the_values_they_were_built_from() {
    let bytes = Typed::default()
        .sized(b"a=1")
        .sized(b"{}")
        .opt(Some("create"))
        .opt(Some("id-1"))
        .bytes();
    let got = targets::RestInput::arbitrary_take_rest(Unstructured::new(&bytes)).unwrap();
    assert_eq!(
        got,
        (
            "a=1",
            &b"{}"[..],
            Some("create".into()),
            Some("id-1".into())
        )
    );
    let bytes = Typed::default().sized(b"k").sized(b"").flag(true).bytes();
    let got = targets::CredentialInput::arbitrary_take_rest(Unstructured::new(&bytes)).unwrap();
    assert_eq!(got, (&b"k"[..], &b""[..], true));
    let bytes = Typed::default().sized(b"0 9 * * 1-5").flag(false).bytes();
    let got = targets::CronInput::arbitrary_take_rest(Unstructured::new(&bytes)).unwrap();
    assert_eq!(got, ("0 9 * * 1-5", false));
}

/// Rewrites `tests/fuzz/corpus` from `seed_corpus()`:
/// `cargo test --test it fuzz_smoke::write_seed_corpus -- --ignored`.
#[test]
#[ignore = "writes the checked-in seed corpus"]
fn write_seed_corpus() {
    for (target, name, bytes) in seed_corpus() {
        let dir = corpus_dir(target);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), bytes).unwrap();
    }
}
