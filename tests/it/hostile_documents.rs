//! Hostile documents (issue #14, item 1): inputs built to crash or exhaust a parser, imported
//! the ways a user can (`extract-document`, `upload-pdf`, `upload-website` of a single page,
//! `scrape-website` of a site, all from a local fake site on 127.0.0.1); each document ends
//! `completed` with its text or `failed` with a readable error, and the service keeps
//! answering. The extraction process's own bounds (a crash, the timeout, the memory limit)
//! are tested with a stand-in executable and a tight limit. The last test runs the real
//! binary: a job the process dies in is run again at most three times, then `dead`, its
//! document `failed`, and `admin check` reports it.

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::documents::{b64, chunks, settle};
use crate::common::process::{self, Proc, free_port, wait_ready};
use crate::common::*;

const KB: &str = "knowledge-base";
const DEADLINE: Duration = Duration::from_secs(60);

/// The hostile inputs; the fuzz seed corpus takes smaller instances of the same shapes.
pub mod inputs {
    use std::io::Write;

    /// `<div>` nested `depth` levels (20,000 is 220 KB: the finding), `marker`
    /// innermost.
    pub fn deep_html(depth: usize, marker: &str) -> Vec<u8> {
        format!(
            "<html><body>{}<p>{marker}</p>{}</body></html>",
            "<div>".repeat(depth),
            "</div>".repeat(depth)
        )
        .into_bytes()
    }

    /// Elements opened and never closed, of several kinds (a tree builder nests them all).
    pub fn unclosed_html(depth: usize, marker: &str) -> Vec<u8> {
        format!(
            "<html><body><p>{marker}</p>{}",
            "<div><span><b><i><table><tr><td>".repeat(depth / 7)
        )
        .into_bytes()
    }

    /// One element with `n` attributes, and `n` links.
    pub fn many_attributes_html(n: usize, marker: &str) -> Vec<u8> {
        let attrs: String = (0..n).map(|i| format!(" a{i}=\"v{i}\"")).collect();
        let links: String = (0..n).map(|i| format!("<a href=\"/l{i}\">.</a>")).collect();
        format!("<html><body><p{attrs}>{marker}</p>{links}</body></html>").into_bytes()
    }

    fn docx_with(document_xml: &[u8], declared_deflate: bool) -> Vec<u8> {
        let mut buf = std::io::Cursor::new(Vec::new());
        {
            let mut z = zip::ZipWriter::new(&mut buf);
            let opt =
                zip::write::SimpleFileOptions::default().compression_method(if declared_deflate {
                    zip::CompressionMethod::Deflated
                } else {
                    zip::CompressionMethod::Stored
                });
            z.start_file("word/document.xml", opt).unwrap();
            z.write_all(document_xml).unwrap();
            z.finish().unwrap();
        }
        buf.into_inner()
    }

    /// DOCX whose XML nests `depth` elements around the text.
    pub fn deep_docx(depth: usize, marker: &str) -> Vec<u8> {
        docx_with(
            format!(
                "<w:document xmlns:w=\"w\"><w:body>{}<w:p><w:r><w:t>{marker}</w:t></w:r></w:p>{}</w:body></w:document>",
                "<w:sdt><w:sdtContent>".repeat(depth),
                "</w:sdtContent></w:sdt>".repeat(depth)
            )
            .as_bytes(),
            true,
        )
    }

    /// The billion-laughs DTD: `&lol9;` would expand to 10^9 "lol"s if entities were expanded.
    pub fn laughs_docx(marker: &str) -> Vec<u8> {
        let mut dtd = String::from("<!ENTITY lol0 \"lol\">");
        for i in 1..10 {
            dtd.push_str(&format!(
                "<!ENTITY lol{i} \"{}\">",
                format!("&lol{};", i - 1).repeat(10)
            ));
        }
        docx_with(
            format!(
                "<?xml version=\"1.0\"?><!DOCTYPE lolz [{dtd}]><w:document xmlns:w=\"w\"><w:body>\
                 <w:p><w:r><w:t>&lol9;</w:t></w:r></w:p><w:p><w:r><w:t>{marker}</w:t></w:r></w:p></w:body></w:document>"
            )
            .as_bytes(),
            false,
        )
    }

    /// A zip bomb: `mib` MiB of text deflated to about a thousandth of that.
    pub fn bomb_docx(mib: usize) -> Vec<u8> {
        let mut xml = b"<w:document><w:body><w:p><w:r><w:t>".to_vec();
        xml.resize(xml.len() + mib * 1024 * 1024, b'a');
        xml.extend_from_slice(b"</w:t></w:r></w:p></w:body></w:document>");
        docx_with(&xml, true)
    }

    /// A PDF whose page says `marker` and whose page dictionary also holds arrays and
    /// dictionaries nested `depth` deep (lopdf's parser recurses on both); the cross-reference
    /// table is correct, so the file is otherwise well formed.
    pub fn deep_pdf(depth: usize, marker: &str) -> Vec<u8> {
        pdf_with(depth, &format!("BT /F1 12 Tf 50 600 Td ({marker}) Tj ET"))
    }

    /// A PDF whose page's content stream holds an operand nested `depth` deep.
    pub fn deep_content_pdf(depth: usize, marker: &str) -> Vec<u8> {
        pdf_with(
            1,
            &format!(
                "BT /F1 12 Tf 50 600 Td ({marker}) Tj {}{} Tj ET",
                "[".repeat(depth),
                "]".repeat(depth)
            ),
        )
    }

    fn pdf_with(depth: usize, content: &str) -> Vec<u8> {
        let objects = [
            "<< /Type /Catalog /Pages 2 0 R >>".to_string(),
            "<< /Type /Pages /Kids [3 0 R] /Count 1 /MediaBox [0 0 595 842] >>".to_string(),
            "<< /Type /Page /Parent 2 0 R /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> /Deep 6 0 R >>".to_string(),
            format!("<< /Length {} >>\nstream\n{content}\nendstream", content.len()),
            "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_string(),
            format!(
                "[ {}{} {}{} ]",
                "[".repeat(depth),
                "]".repeat(depth),
                "<< /A ".repeat(depth),
                ">>".repeat(depth)
            ),
        ];
        let mut out = b"%PDF-1.4\n".to_vec();
        let mut offsets = Vec::new();
        for (i, o) in objects.iter().enumerate() {
            offsets.push(out.len());
            write!(out, "{} 0 obj\n{o}\nendobj\n", i + 1).unwrap();
        }
        let xref = out.len();
        write!(out, "xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).unwrap();
        for off in offsets {
            writeln!(out, "{off:010} 00000 n ").unwrap();
        }
        write!(
            out,
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .unwrap();
        out
    }

    /// Markdown nested `depth` levels (block quotes and lists); it is imported as text.
    pub fn deep_markdown(depth: usize, marker: &str) -> Vec<u8> {
        format!(
            "{}{marker}\n\n{}\n{}\n",
            "> ".repeat(depth),
            "- ".repeat(depth),
            "[".repeat(depth)
        )
        .into_bytes()
    }
}

async fn still_answers(app: &TestApp, token: &str) {
    let r = app
        .request(reqwest::Method::GET, "/healthz", None, None)
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    app.call(token, KB, "all", None, json!({})).await.ok(200);
}

/// What a document must end as.
#[derive(Debug)]
enum Want {
    /// `completed`, its text containing this and not "lollol" (no entity expansion).
    Text(&'static str),
    /// `failed`, its error containing this.
    Error(&'static str),
}

async fn import(app: &TestApp, u: &User, action: &str, filename: &str, bytes: &[u8]) -> String {
    let r = app
        .call(
            &u.token,
            KB,
            "create",
            None,
            json!({"action": action, "data": {"filename": filename, "content_base64": b64(bytes)}}),
        )
        .await;
    r.ok(201)["document"]["id"].as_str().unwrap().to_string()
}

async fn expect(app: &TestApp, u: &User, id: &str, label: &str, want: &Want) {
    let d = settle(app, &u.token, id).await;
    match want {
        Want::Text(marker) => {
            assert_eq!(d["status"], "completed", "{label}: {d}");
            let text = chunks(app, id).await;
            assert!(text.contains(marker), "{label}: {marker} not in the text");
            assert!(!text.contains("lollol"), "{label}: entities were expanded");
        }
        Want::Error(part) => {
            assert_eq!(d["status"], "failed", "{label}: {d}");
            let e = d["error"].as_str().unwrap_or_default();
            assert!(e.contains(part), "{label}: error {e:?} lacks {part:?}");
        }
    }
    still_answers(app, &u.token).await;
}

#[tokio::test]
async fn hostile_uploads_end_completed_or_failed_and_the_service_keeps_answering() {
    use inputs::*;
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let cases: Vec<(&str, &str, Vec<u8>, Want)> = vec![
        // The finding: 220 KB, 20,000 levels. A recursive walk (or a recursive drop of the
        // parsed tree) overflows the stack and aborts the process, test binary included.
        (
            "deep.html",
            "extract-document",
            deep_html(20_000, "marigold deep"),
            Want::Text("marigold deep"),
        ),
        (
            "deeper.htm",
            "extract-document",
            deep_html(200_000, "saffron deeper"),
            Want::Text("saffron deeper"),
        ),
        (
            "unclosed.html",
            "extract-document",
            unclosed_html(140_000, "juniper open"),
            Want::Text("juniper open"),
        ),
        (
            "attrs.html",
            "extract-document",
            many_attributes_html(50_000, "basil attrs"),
            Want::Text("basil attrs"),
        ),
        (
            "deep.docx",
            "extract-document",
            deep_docx(100_000, "clover nested"),
            Want::Text("clover nested"),
        ),
        (
            "laughs.docx",
            "extract-document",
            laughs_docx("thistle laughs"),
            Want::Text("thistle laughs"),
        ),
        (
            "bomb.docx",
            "extract-document",
            bomb_docx(65),
            Want::Error("the DOCX text part is too large"),
        ),
        (
            "deep.md",
            "extract-document",
            deep_markdown(100_000, "fennel quoted"),
            Want::Text("fennel quoted"),
        ),
        // lopdf refuses objects nested past 100 levels (the deep entry is dropped, the page
        // is read) ...
        (
            "deep.pdf",
            "extract-document",
            deep_pdf(20_000, "nutmeg pdf"),
            Want::Text("nutmeg pdf"),
        ),
        (
            "deep-upload.pdf",
            "upload-pdf",
            deep_pdf(20_000, "cumin pdf"),
            Want::Text("cumin pdf"),
        ),
        // ... and a page whose content nests that deep cannot be read.
        (
            "deep-content.pdf",
            "upload-pdf",
            deep_content_pdf(20_000, "anise"),
            Want::Error("text extraction failed on page 1"),
        ),
    ];
    let mut ids = Vec::new();
    for (name, action, bytes, _) in &cases {
        ids.push(import(&app, &u, action, name, bytes).await);
    }
    for ((name, _, _, want), id) in cases.iter().zip(&ids) {
        expect(&app, &u, id, name, want).await;
    }
    // Deeply nested JSON in a request is refused (serde_json's recursion limit), not parsed.
    let deep_json = format!(
        "{{\"resource\":\"knowledge-base\",\"action\":\"create\",\"data\":{{\"title\":\"t\",\"content\":\"c\",\"x\":{}1{}}}}}",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let before = app.count("documents").await;
    let r = app
        .raw(
            reqwest::Method::POST,
            "/v1",
            &[
                ("authorization", &format!("Bearer {}", u.token)),
                ("content-type", "application/json"),
            ],
            deep_json,
        )
        .await;
    r.err(400, "VALIDATION_ERROR");
    assert_eq!(app.count("documents").await, before);
    still_answers(&app, &u.token).await;
}

/// An extraction process that dies by a signal or never answers fails the document with a
/// readable error; the process is killed at the timeout. A stand-in executable plays the
/// crash (the real one no longer has an input that crashes it, which is the point).
#[tokio::test]
async fn a_crashing_or_hanging_extraction_process_fails_only_its_document() {
    let bin = tempfile::tempdir().unwrap();
    let pid_file = bin.path().join("pid");
    let script = |name: &str, body: &str| {
        let p = bin.path().join(name);
        let mut f = std::fs::File::create(&p).unwrap();
        writeln!(f, "#!/bin/sh\necho $$ > '{}'\n{body}", pid_file.display()).unwrap();
        drop(f);
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    };
    let crash = script("crash", "cat > /dev/null\nkill -SEGV $$");
    let hang = script("hang", "exec sleep 600");
    let app = TestApp::spawn_with(|c| {
        c.extract_exe = Some(crash.clone());
        c.extract_timeout_seconds = 2;
    })
    .await;
    let u = app.standard().await;
    let id = import(&app, &u, "extract-document", "a.html", b"<p>x</p>").await;
    expect(
        &app,
        &u,
        &id,
        "crash",
        &Want::Error("text extraction crashed on this file"),
    )
    .await;

    let app = TestApp::spawn_with(|c| {
        c.extract_exe = Some(hang.clone());
        c.extract_timeout_seconds = 2;
    })
    .await;
    let u = app.standard().await;
    let started = Instant::now();
    let id = import(&app, &u, "extract-document", "b.docx", b"PK").await;
    expect(
        &app,
        &u,
        &id,
        "hang",
        &Want::Error("took longer than 2 s and was stopped"),
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(30));
    // The hanging process was killed, not left behind.
    let pid = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .to_string();
    let gone = Instant::now();
    while std::path::Path::new(&format!("/proc/{pid}")).exists()
        && std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
    {
        assert!(
            gone.elapsed() < DEADLINE,
            "extraction process {pid} still runs"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The memory bound holds: a DOCX that inflates to 40 MiB cannot be read in 96 MiB (the
/// process is stopped by its address-space limit, the document fails saying so), and is
/// read with the default limit.
#[tokio::test]
async fn the_memory_limit_stops_a_file_that_needs_more() {
    let bomb = inputs::bomb_docx(40);
    let app = TestApp::spawn_with(|c| c.extract_memory_mb = 96).await;
    let u = app.standard().await;
    let id = import(&app, &u, "extract-document", "big.docx", &bomb).await;
    expect(
        &app,
        &u,
        &id,
        "96 MiB",
        &Want::Error("more memory than extraction may use"),
    )
    .await;
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let id = import(&app, &u, "extract-document", "big.docx", &bomb).await;
    let d = settle(&app, &u.token, &id).await;
    assert_eq!(d["status"], "completed", "{d}");
}

/// A site of hostile pages on 127.0.0.1; records each request and checks it is a GET.
struct HostileSite {
    base: String,
    hits: Arc<Mutex<Vec<String>>>,
    problems: Arc<Mutex<Vec<String>>>,
}

impl HostileSite {
    async fn start() -> HostileSite {
        use axum::extract::Request;
        use axum::http::{StatusCode, header};
        use axum::response::IntoResponse;
        let hits = Arc::new(Mutex::new(Vec::new()));
        let problems = Arc::new(Mutex::new(Vec::new()));
        let (h, p) = (hits.clone(), problems.clone());
        let app = axum::Router::new().fallback(move |req: Request| {
            let (h, p) = (h.clone(), p.clone());
            async move {
                let path = req.uri().path().to_string();
                if req.method() != axum::http::Method::GET {
                    p.lock().unwrap().push(format!("{} {path}", req.method()));
                }
                h.lock().unwrap().push(path.clone());
                let html = |b: Vec<u8>| {
                    ([(header::CONTENT_TYPE, "text/html")], b).into_response()
                };
                match path.as_str() {
                    "/deep" => {
                        let mut page = b"<a href=\"/unclosed\">next</a><a href=\"/attrs\">a</a><a href=\"/deep.pdf\">p</a>".to_vec();
                        page.extend(inputs::deep_html(20_000, "lavender crawled"));
                        html(page)
                    }
                    "/unclosed" => html(inputs::unclosed_html(140_000, "rosemary unclosed")),
                    "/attrs" => html(inputs::many_attributes_html(20_000, "sorrel attrs")),
                    "/deep.pdf" => (
                        [(header::CONTENT_TYPE, "application/pdf")],
                        inputs::deep_pdf(20_000, "pdf page"),
                    )
                        .into_response(),
                    _ => (StatusCode::NOT_FOUND, "not found").into_response(),
                }
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        HostileSite {
            base,
            hits,
            problems,
        }
    }
}

#[tokio::test]
async fn hostile_pages_from_a_website_and_a_crawl_are_read_and_the_service_keeps_answering() {
    let site = HostileSite::start().await;
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let url = |p: &str| format!("{}{p}", site.base);
    let cases = [
        (
            "upload-website",
            json!({"url": url("/deep")}),
            Want::Text("lavender crawled"),
        ),
        (
            "upload-website",
            json!({"url": url("/unclosed")}),
            Want::Text("rosemary unclosed"),
        ),
        (
            "upload-website",
            json!({"url": url("/deep.pdf")}),
            Want::Text("pdf page"),
        ),
        (
            "scrape-website",
            json!({"url": url("/deep"), "max_pages": 10, "max_depth": 2}),
            Want::Text("sorrel attrs"),
        ),
    ];
    for (action, data, want) in &cases {
        let r = app
            .call(
                &u.token,
                KB,
                "create",
                None,
                json!({"action": action, "data": data}),
            )
            .await;
        let id = r.ok(201)["document"]["id"].as_str().unwrap().to_string();
        expect(&app, &u, &id, &format!("{action} {data}"), want).await;
    }
    // The crawl read every page: the deep start page, the unclosed and the attribute pages it
    // links to (the PDF is fetched and skipped: a crawl keeps HTML and plain text).
    let hits = site.hits.lock().unwrap().clone();
    for p in ["/deep", "/unclosed", "/attrs", "/deep.pdf"] {
        assert!(hits.iter().any(|h| h == p), "{p} not fetched: {hits:?}");
    }
    assert!(site.problems.lock().unwrap().is_empty());
}

// ---- the real binary: a job the process dies in is retried a bounded number of times ----

fn genied(data: &std::path::Path, args: &[&str]) -> std::process::Output {
    process::output(
        Command::new(env!("CARGO_BIN_EXE_genied"))
            .arg("--data-dir")
            .arg(data)
            .args(args)
            .envs(crate::common::own_database(data)),
    )
}

/// The service under the process guard: SIGKILLed with its process group (extraction
/// children included) when dropped, pass or fail.
fn start(data: &std::path::Path, port: u16) -> Proc {
    Proc::spawn(
        Command::new(env!("CARGO_BIN_EXE_genied"))
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--allow-private-outbound", "--job-poll-ms", "20"])
            // One instance, restarted under the same id: on PostgreSQL too its start takes
            // back the job its previous life was running, as a SQLite start takes back all.
            .args(["--instance-id", "crash-test"])
            .arg("--data-dir")
            .arg(data)
            .envs(crate::common::own_database(data))
            .env("GENIED_LOG_LEVEL", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    )
}

/// The job row of the document, read from the binary's own database (either engine).
fn job_row(data: &std::path::Path) -> Option<(String, i64, i64, Option<String>)> {
    let row = crate::common::query(
        data,
        "SELECT status, CAST(attempts AS TEXT), CAST(crash_retries AS TEXT), last_error
         FROM jobs WHERE kind = 'document.extract'",
        &[],
    )
    .into_iter()
    .next()?;
    let int = |v: &Option<String>| v.as_deref().and_then(|s| s.parse().ok());
    Some((
        row[0].clone()?,
        int(&row[1])?,
        int(&row[2])?,
        row[3].clone(),
    ))
}

fn admin_check(data: &std::path::Path) -> (bool, Value) {
    let out = genied(data, &["admin", "check", "--json"]);
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
    (out.status.success(), report)
}

#[tokio::test]
async fn a_job_the_process_dies_in_is_retried_three_times_then_dead_and_reported() {
    // A page that never answers keeps the extraction job `running` until the kill.
    let hung = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let page = format!("http://{}/slow", hung.local_addr().unwrap());
    let requests = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = requests.clone();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        loop {
            let (mut s, _) = hung.accept().await.unwrap();
            let mut buf = vec![0u8; 4096];
            let n = tokio::io::AsyncReadExt::read(&mut s, &mut buf)
                .await
                .unwrap_or(0);
            let head = String::from_utf8_lossy(&buf[..n])
                .lines()
                .next()
                .unwrap_or("")
                .to_string();
            // A connection that sends nothing is not a request.
            if n > 0 {
                seen.lock().unwrap().push(head);
            }
            open.push(s);
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let out = genied(data, &["migrate"]);
    assert!(out.status.success());
    let out = genied(
        data,
        &["admin", "create-user", "--email", "crash@example.test"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let key = String::from_utf8(
        genied(
            data,
            &[
                "admin",
                "create-key",
                "--email",
                "crash@example.test",
                "--name",
                "k",
            ],
        )
        .stdout,
    )
    .unwrap()
    .trim()
    .to_string();
    let client = reqwest::Client::new();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut doc_id = String::new();
    // The first run and three crash retries: each time the job is claimed (committed
    // `running`) and the process is killed while it runs.
    for round in 0..=3 {
        let mut proc = start(data, port);
        wait_ready(&mut proc, &base).await;
        if round == 0 {
            let r: Value = client
                .post(format!("{base}/v1"))
                .header("x-api-key", &key)
                .json(&json!({"resource": KB, "action": "create", "data": {"action": "upload-website", "data": {"url": page}}}))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            doc_id = r["data"]["document"]["id"]
                .as_str()
                .unwrap_or_else(|| panic!("{r}"))
                .to_string();
        }
        // Running, and really at work: its request reached the page.
        let (status, attempts, crashes, _) = wait_until("the job to run", async || {
            let asked = requests.lock().unwrap().len();
            job_row(data)
                .filter(|j| j.0 == "running" && j.1 as usize == round + 1 && asked == round + 1)
        })
        .await;
        assert_eq!((status.as_str(), crashes), ("running", round as i64));
        assert_eq!(attempts, round as i64 + 1);
        if round == 1 {
            // While the retried job runs, `admin check` lists it and is not alarmed.
            let (ok, report) = admin_check(data);
            assert!(ok, "{report}");
            assert_eq!(report["crash_retried_jobs"], 1, "{report}");
            assert_eq!(report["jobs"][0]["crash_retries"], 1, "{report}");
            assert_eq!(
                report["jobs"][0]["document_id"],
                doc_id.as_str(),
                "{report}"
            );
        }
        drop(proc); // SIGKILL while the job runs
    }
    // The fourth death: the next start makes the job dead and the document failed.
    let mut proc = start(data, port);
    wait_ready(&mut proc, &base).await;
    let (status, attempts, crashes, error) = job_row(data).unwrap();
    assert_eq!(status, "dead");
    assert_eq!((attempts, crashes), (4, 4));
    assert_eq!(
        error.as_deref(),
        Some("the service stopped while running this job")
    );
    let d: Value = client
        .get(format!("{base}/v1/{KB}/{doc_id}"))
        .header("x-api-key", &key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let d = &d["data"]["document"];
    assert_eq!(d["status"], "failed", "{d}");
    assert!(
        d["error"]
            .as_str()
            .unwrap()
            .contains("the service stopped every time it processed this document"),
        "{d}"
    );
    // Not run a fifth time: the page was asked for exactly four times.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let reqs = requests.lock().unwrap().clone();
    assert_eq!(reqs.len(), 4, "{reqs:?}");
    assert!(reqs.iter().all(|r| r.starts_with("GET /slow ")), "{reqs:?}");
    let (ok, report) = admin_check(data);
    assert!(!ok, "admin check must fail: {report}");
    assert_eq!(report["crash_dead_jobs"], 1, "{report}");
    assert_eq!(report["dead_jobs"], 1, "{report}");
    assert_eq!(report["jobs"][0]["status"], "dead", "{report}");
    assert_eq!(report["jobs"][0]["crash_retries"], 4, "{report}");
    assert!(
        report["problems"][0]
            .as_str()
            .unwrap()
            .contains("1 jobs dead after the service stopped"),
        "{report}"
    );
    let text = String::from_utf8(genied(data, &["admin", "check"]).stdout).unwrap();
    assert!(
        text.contains("dead jobs: 1 (1 after the service stopped while running them)"),
        "{text}"
    );
    assert!(text.contains(&format!("document.extract dead (attempts 4, service stops 4) document {doc_id}: the service stopped while running this job")), "{text}");
    held.abort();
}
