//! knowledge-base: every source against local fixtures, the pipeline's status transitions
//! (including failures and a restart in the middle), links to genies, access rules, search,
//! uploads and the outbound guard.

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::documents::{b64, chunks, create_text, search_index_caught_up, stored_files};
use crate::common::fakes::transcripts::{self, Transcripts};
use crate::common::fakes::website::Website;
use crate::common::*;

const KB: &str = "knowledge-base";

/// Inserts a genie row directly (the genies resource is another issue's work).
async fn genie(app: &TestApp, owner: &User, name: &str, external: Option<&str>) -> String {
    let (uid, name, ext) = (
        owner.id.clone(),
        name.to_string(),
        external.map(str::to_string),
    );
    let id = genied::db::new_id();
    let id2 = id.clone();
    app.state
        .db
        .write(move |c| {
            let now = genied::db::now();
            c.execute(
                "INSERT INTO genies (id, user_id, external_agent_id, name, name_lower, llm_model, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, lower(?4), 'gemini-3-flash-preview', ?5, ?5)",
                rusqlite::params![id2, uid, ext, name, now],
            )?;
            Ok(())
        })
        .await
        .unwrap();
    id
}

/// Polls `get` until the pipeline settles (bounded).
async fn settle(app: &TestApp, token: &str, id: &str) -> Value {
    for _ in 0..400 {
        let r = app.call(token, KB, "get", Some(json!(id)), json!({})).await;
        let d = r.ok(200)["document"].clone();
        if d["status"] == "completed" || d["status"] == "failed" {
            return d;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("document {id} did not settle");
}

/// A PDF with one page per entry, each starting with the same running header.
fn pdf(pages: &[&str]) -> Vec<u8> {
    crate::common::fixtures::pdf(Some("Globex Internal Handbook"), pages)
}

fn docx(paragraphs: &[&str]) -> Vec<u8> {
    use std::io::Write;
    let mut buf = std::io::Cursor::new(Vec::new());
    {
        let mut z = zip::ZipWriter::new(&mut buf);
        let opt = zip::write::SimpleFileOptions::default();
        z.start_file("[Content_Types].xml", opt).unwrap();
        z.write_all(
            br#"<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>"#,
        )
        .unwrap();
        z.start_file("word/document.xml", opt).unwrap();
        let body: String = paragraphs
            .iter()
            .map(|p| format!("<w:p><w:r><w:t xml:space=\"preserve\">{p}</w:t></w:r></w:p>"))
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

#[tokio::test]
async fn text_document_moves_through_the_pipeline_and_gets_an_external_id() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let mut events = app.state.bus.subscribe();
    let r = app.call(&u.token, KB, "create", None, json!({"title": "Returns policy", "content": "Refunds  are\tissued within 30 days.\n\n\n\nKeep the receipt."})).await;
    let d = &r.ok(201)["document"];
    assert_eq!(d["status"], "pending_extraction");
    assert_eq!(d["type"], "text");
    assert_eq!(d["name"], "Returns policy");
    assert_eq!(d["external_id"], Value::Null);
    assert_eq!(d["dependent_agents"], json!([]));
    let id = d["id"].as_str().unwrap().to_string();
    let done = settle(&app, &u.token, &id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["error"], Value::Null);
    let ext = done["external_id"].as_str().unwrap();
    assert_eq!(ext.chars().count(), 20);
    assert_eq!(done["el_doc_id"], done["external_id"]);
    assert_eq!(
        chunks(&app, &id).await,
        "Refunds are issued within 30 days.\n\nKeep the receipt."
    );
    // get by the external id works too
    let by_ext = app
        .call(&u.token, KB, "get", Some(json!(ext)), json!({}))
        .await;
    assert_eq!(by_ext.ok(200)["document"]["id"], json!(id));
    // the event was emitted
    let mut kinds = vec![];
    while let Ok(e) = events.try_recv() {
        kinds.push(e.kind);
    }
    assert!(
        kinds.contains(&"document.completed".to_string()),
        "{kinds:?}"
    );
    // the original and the text are in the store, hash-named
    assert!(stored_files(&app).await >= 1);
}

#[tokio::test]
async fn rest_create_flattens_title_content_and_agent_id() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let g = genie(&app, &u, "Helper", Some("agent_0123456789abcd")).await;
    let r = app
        .request(
            Method::POST,
            "/v1/knowledge-base",
            Some(&u.token),
            Some(json!({"title": "Hours", "content": "Open 9 to 5.", "agentId": g})),
        )
        .await;
    let d = &r.ok(201)["document"];
    assert_eq!(d["name"], "Hours");
    assert_eq!(d["dependent_agents"], json!([{"id": g, "name": "Helper"}]));
    let done = settle(&app, &u.token, d["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "completed");
    // a genie of someone else cannot be attached at creation, and nothing is stored
    let other = app.standard().await;
    let before = app.count("documents").await;
    let r = app
        .call(
            &other.token,
            KB,
            "create",
            None,
            json!({"title": "x", "content": "y", "agentId": g}),
        )
        .await;
    r.err(404, "AGENT_NOT_FOUND");
    assert_eq!(app.count("documents").await, before);
    // missing content
    app.call(&u.token, KB, "create", None, json!({"title": "x"}))
        .await
        .err(400, "VALIDATION_ERROR");
    app.call(&u.token, KB, "frobnicate", None, json!({}))
        .await
        .err(400, "INVALID_ACTION");
    app.call(
        &u.token,
        KB,
        "create",
        None,
        json!({"action": "upload-fax", "data": {}}),
    )
    .await
    .err(400, "INVALID_ACTION");
    assert_eq!(app.count("documents").await, before);
}

#[tokio::test]
async fn pdf_upload_extracts_text_drops_running_headers_and_corrupt_pdf_fails() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let bytes = pdf(&[
        "Chapter one covers onboarding.",
        "Chapter two covers payroll.",
        "Chapter three covers holidays.",
    ]);
    let r = app
        .call(
            &u.token,
            KB,
            "create",
            None,
            json!({"action": "upload-pdf", "data": {"filename": "handbook.pdf", "content_base64": b64(&bytes)}}),
        )
        .await;
    let d = &r.ok(201)["document"];
    assert_eq!(d["type"], "pdf_upload");
    assert_eq!(d["name"], "handbook.pdf");
    assert_eq!(d["size_bytes"], json!(bytes.len()));
    let done = settle(&app, &u.token, d["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "completed", "{done}");
    let text = chunks(&app, d["id"].as_str().unwrap()).await;
    for want in ["onboarding", "payroll", "holidays"] {
        assert!(text.contains(want), "{text}");
    }
    assert!(
        !text.contains("Globex Internal Handbook"),
        "running header kept: {text}"
    );

    let mut events = app.state.bus.subscribe();
    let r = app
        .call(&u.token, KB, "create", None, json!({"action": "upload-pdf", "data": {"filename": "broken.pdf", "content_base64": b64(b"%PDF-1.4\nthis is not really a pdf\n%%EOF")}}))
        .await;
    let id = r.ok(201)["document"]["id"].as_str().unwrap().to_string();
    let failed = settle(&app, &u.token, &id).await;
    assert_eq!(failed["status"], "failed");
    assert!(
        failed["error"].as_str().unwrap().contains("PDF"),
        "{failed}"
    );
    assert_eq!(failed["external_id"], Value::Null);
    let e = events.recv().await.unwrap();
    assert_eq!(e.kind, "document.failed");
    assert_eq!(e.data["id"], json!(id));

    // bad base64 changes nothing
    let before = app.count("documents").await;
    app.call(
        &u.token,
        KB,
        "create",
        None,
        json!({"action": "upload-pdf", "data": {"filename": "a.pdf", "content_base64": "!!!"}}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    assert_eq!(app.count("documents").await, before);
}

#[tokio::test]
async fn extract_document_reads_docx_markdown_and_html_and_refuses_unknown_formats() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "notes.docx",
            docx(&["Ferrets need daily play.", "Feed them twice &amp; brush weekly."]),
            "Feed them twice & brush weekly.",
        ),
        ("readme.md", b"# Title\n\nLlamas hum when content.".to_vec(), "Llamas hum when content."),
        (
            "page.html",
            b"<html><body><nav>Menu</nav><p>Otters hold hands.</p><script>x()</script></body></html>".to_vec(),
            "Otters hold hands.",
        ),
    ];
    for (name, bytes, want) in cases {
        let r = app
            .call(
                &u.token,
                KB,
                "create",
                None,
                json!({"action": "extract-document", "data": {"filename": name, "content_base64": b64(&bytes)}}),
            )
            .await;
        let d = &r.ok(201)["document"];
        assert_eq!(d["type"], "file_upload");
        let done = settle(&app, &u.token, d["id"].as_str().unwrap()).await;
        assert_eq!(done["status"], "completed", "{name}: {done}");
        let text = chunks(&app, d["id"].as_str().unwrap()).await;
        assert!(text.contains(want), "{name}: {text}");
        assert!(
            !text.contains("Menu") && !text.contains("x()"),
            "{name}: {text}"
        );
    }
    let docx_text = chunks(&app, &{
        let r = app
            .call(
                &u.token,
                KB,
                "all",
                None,
                json!({"filters": {"searchTerm": "ferrets"}}),
            )
            .await;
        r.ok(200)["documents"][0]["id"]
            .as_str()
            .unwrap()
            .to_string()
    })
    .await;
    assert!(
        docx_text.contains("Ferrets need daily play.\nFeed them twice"),
        "{docx_text}"
    );
    let before = app.count("documents").await;
    let r = app
        .call(
            &u.token,
            KB,
            "create",
            None,
            json!({"action": "extract-document", "data": {"filename": "sheet.xlsx", "content_base64": b64(b"PK")}}),
        )
        .await;
    r.err(400, "VALIDATION_ERROR");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unsupported document format 'xlsx'")
    );
    assert_eq!(app.count("documents").await, before);
}

#[tokio::test]
async fn single_page_and_same_site_crawl_respect_robots_loops_and_bounds() {
    let app = TestApp::spawn().await;
    let site = Website::start().await;
    let u = app.standard().await;
    // one page
    let r = app
        .call(
            &u.token,
            KB,
            "create",
            None,
            json!({"action": "upload-website", "data": {"url": site.url("/a")}}),
        )
        .await;
    let d = &r.ok(201)["document"];
    assert_eq!(d["type"], "url");
    assert_eq!(d["source_url"], json!(site.url("/a")));
    let done = settle(&app, &u.token, d["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "completed", "{done}");
    let text = chunks(&app, d["id"].as_str().unwrap()).await;
    assert!(text.contains("quartz gearbox"), "{text}");
    assert!(
        !text.contains("Navigation menu")
            && !text.contains("Copyright footer")
            && !text.contains("tracking"),
        "{text}"
    );

    // crawl
    let r = app
        .call(
            &u.token,
            KB,
            "create",
            None,
            json!({"action": "scrape-website", "data": {"url": site.url("/"), "max_pages": 10, "max_depth": 2}}),
        )
        .await;
    let id = r.ok(201)["document"]["id"].as_str().unwrap().to_string();
    assert_eq!(r.data()["document"]["type"], "website");
    let done = settle(&app, &u.token, &id).await;
    assert_eq!(done["status"], "completed", "{done}");
    let text = chunks(&app, &id).await;
    for want in [
        "Zephyr widgets",
        "quartz gearbox",
        "cobalt springs",
        "obsidian levers",
    ] {
        assert!(text.contains(want), "missing {want}: {text}");
    }
    assert!(!text.contains("plutonium"), "robots.txt ignored");
    assert!(!text.contains("Too deep"), "max_depth ignored");
    assert_eq!(site.hit_count("/private/secret"), 0);
    assert_eq!(site.hit_count("/a/deep/deeper"), 0);
    assert!(site.hit_count("/robots.txt") >= 1);
    // loop-safe: each page once in this crawl (plus the single-page import of /a)
    assert_eq!(site.hit_count("/"), 1);
    assert_eq!(site.hit_count("/a"), 2, "{:?}", site.hits());
    assert_eq!(site.hit_count("/b"), 1);
    assert!(site.problems().is_empty(), "{:?}", site.problems());

    // max_pages bounds the fetches
    let before = site.hits().iter().filter(|p| *p != "/robots.txt").count();
    let r = app
        .call(
            &u.token,
            KB,
            "create",
            None,
            json!({"action": "scrape-website", "data": {"url": site.url("/"), "max_pages": 2, "max_depth": 3}}),
        )
        .await;
    let id = r.ok(201)["document"]["id"].as_str().unwrap().to_string();
    assert_eq!(settle(&app, &u.token, &id).await["status"], "completed");
    let after = site.hits().iter().filter(|p| *p != "/robots.txt").count();
    assert_eq!(after - before, 2);

    // bounds are validated
    app.call(
        &u.token,
        KB,
        "create",
        None,
        json!({"action": "scrape-website", "data": {"url": site.url("/"), "max_pages": 0}}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    // robots.txt forbids the start page: failed with a reason
    let r = app
        .call(
            &u.token,
            KB,
            "create",
            None,
            json!({"action": "scrape-website", "data": {"url": site.url("/private/secret")}}),
        )
        .await;
    let failed = settle(
        &app,
        &u.token,
        r.ok(201)["document"]["id"].as_str().unwrap(),
    )
    .await;
    assert_eq!(failed["status"], "failed");
    assert!(
        failed["error"].as_str().unwrap().contains("robots.txt"),
        "{failed}"
    );
    // a 404 page fails the single-page import
    let r = app
        .call(
            &u.token,
            KB,
            "create",
            None,
            json!({"action": "upload-website", "data": {"url": site.url("/missing")}}),
        )
        .await;
    let failed = settle(
        &app,
        &u.token,
        r.ok(201)["document"]["id"].as_str().unwrap(),
    )
    .await;
    assert_eq!(failed["status"], "failed");
    assert!(
        failed["error"].as_str().unwrap().contains("404"),
        "{failed}"
    );
}

#[tokio::test]
async fn youtube_transcripts_come_from_the_configured_source() {
    let tr = Transcripts::start().await;
    let template = tr.template();
    let app = TestApp::spawn_with(|c| c.youtube_transcript_url = template).await;
    let u = app.standard().await;
    let url = format!("https://www.youtube.com/watch?v={}", transcripts::VIDEO_ID);
    let r = app
        .call(
            &u.token,
            KB,
            "create",
            None,
            json!({"action": "extract-youtube", "data": {"url": url}}),
        )
        .await;
    let d = &r.ok(201)["document"];
    assert_eq!(d["type"], "youtube");
    let done = settle(&app, &u.token, d["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "completed", "{done}");
    let text = chunks(&app, d["id"].as_str().unwrap()).await;
    assert_eq!(
        text,
        "Never gonna give you up\nit's about the marmalade & toast"
    );
    assert_eq!(
        tr.state.queries.lock().unwrap().clone(),
        vec![(transcripts::VIDEO_ID.to_string(), "en".to_string())]
    );
    assert!(tr.state.problems.lock().unwrap().is_empty());
    // a video without a transcript fails readably
    let r = app
        .call(
            &u.token,
            KB,
            "create",
            None,
            json!({"action": "extract-youtube", "data": {"url": "https://youtu.be/AAAAAAAAAAA"}}),
        )
        .await;
    let failed = settle(
        &app,
        &u.token,
        r.ok(201)["document"]["id"].as_str().unwrap(),
    )
    .await;
    assert_eq!(failed["status"], "failed");
    assert!(
        failed["error"].as_str().unwrap().contains("no transcript"),
        "{failed}"
    );
    // not a YouTube URL
    let before = app.count("documents").await;
    app.call(
        &u.token,
        KB,
        "create",
        None,
        json!({"action": "extract-youtube", "data": {"url": "https://example.com/watch?v=AAAAAAAAAAA"}}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    assert_eq!(app.count("documents").await, before);
}

#[tokio::test]
async fn a_restart_in_the_middle_of_the_pipeline_resumes_it() {
    let app = TestApp::spawn().await;
    let site = Website::start().await;
    site.fail_flaky(1);
    let u = app.standard().await;
    let r = app
        .call(
            &u.token,
            KB,
            "create",
            None,
            json!({"action": "upload-website", "data": {"url": site.url("/flaky")}}),
        )
        .await;
    let id = r.ok(201)["document"]["id"].as_str().unwrap().to_string();
    // the first attempt meets a 503: the job is rescheduled, the document waits
    for _ in 0..400 {
        if site.hit_count("/flaky") >= 1 && app.count("jobs").await == 1 {
            let attempts: i64 = app
                .state
                .db
                .read(|c| Ok(c.query_row("SELECT attempts FROM jobs", [], |r| r.get(0))?))
                .await
                .unwrap();
            if attempts == 1 {
                break;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    let d = app
        .call(&u.token, KB, "get", Some(json!(id)), json!({}))
        .await;
    assert_eq!(d.ok(200)["document"]["status"], "pending_extraction");
    // simulate a crash while the job was claimed, then restart
    app.state
        .db
        .write(|c| Ok(c.execute("UPDATE jobs SET status = 'running'", [])?))
        .await
        .unwrap();
    let app = app.restart().await;
    app.state
        .db
        .write(|c| Ok(c.execute("UPDATE jobs SET run_at = '2000-01-01T00:00:00.000Z'", [])?))
        .await
        .unwrap();
    app.state.wake_jobs();
    let done = settle(&app, &u.token, &id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert!(chunks(&app, &id).await.contains("tangerine dreams"));
    assert_eq!(site.hit_count("/flaky"), 2);
    // The status commits before the worker deletes the finished job's row: wait for it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while app.count("jobs").await != 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "a job is left after the pipeline completed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn attach_detach_replace_count_and_content_update_relinks_genies() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let g1 = genie(&app, &u, "Front desk", Some("agent_aaaaaaaaaaaaaa")).await;
    let g2 = genie(&app, &u, "Back office", Some("agent_bbbbbbbbbbbbbb")).await;
    let a = create_text(&app, &u, "Doc A", "Alpha facts about apples.").await;
    let b = create_text(&app, &u, "Doc B", "Beta facts about bananas.").await;
    let c = create_text(&app, &u, "Doc C", "Gamma facts about cherries.").await;
    for id in [&a, &b, &c] {
        assert_eq!(settle(&app, &u.token, id).await["status"], "completed");
    }
    let docs = |ids: &[&String]| {
        json!(
            ids.iter()
                .map(|i| json!({"id": i, "name": "n", "type": "file"}))
                .collect::<Vec<_>>()
        )
    };
    let r = app
        .call(
            &u.token,
            KB,
            "attach",
            None,
            json!({"agentId": g1, "documents": docs(&[&a, &b])}),
        )
        .await;
    assert_eq!(r.ok(200)["attachedCount"], 2);
    assert!(r.data()["message"].is_string());
    let r = app
        .call(
            &u.token,
            KB,
            "attach",
            None,
            json!({"agentId": g1, "documents": docs(&[&a, &c])}),
        )
        .await;
    assert_eq!(r.ok(200)["attachedCount"], 1, "duplicates are skipped");
    app.call(
        &u.token,
        KB,
        "attach",
        None,
        json!({"agentId": g2, "documents": docs(&[&a])}),
    )
    .await
    .ok(200);
    let r = app
        .call(
            &u.token,
            KB,
            "detach",
            None,
            json!({"agentId": g1, "documentIds": [b, genied::db::new_id()]}),
        )
        .await;
    assert_eq!(r.ok(200)["detachedCount"], 1);
    let r = app
        .call(
            &u.token,
            KB,
            "replace",
            None,
            json!({"agentId": g1, "documents": docs(&[&b, &c])}),
        )
        .await;
    assert_eq!(r.ok(200)["replacedCount"], 2);
    let linked: Vec<String> = {
        let g = g1.clone();
        app.state
            .db
            .read(move |c| {
                let mut st =
                    c.prepare("SELECT document_id FROM genie_documents WHERE genie_id = ?1 ORDER BY document_id")?;
                Ok(st.query_map([g], |r| r.get(0))?.collect::<rusqlite::Result<Vec<String>>>()?)
            })
            .await
            .unwrap()
    };
    let mut want = vec![b.clone(), c.clone()];
    want.sort();
    assert_eq!(linked, want);

    // another user's genie: AGENT_NOT_FOUND and nothing changes
    let other = app.standard().await;
    let links = app.count("genie_documents").await;
    app.call(
        &other.token,
        KB,
        "attach",
        None,
        json!({"agentId": g1, "documents": docs(&[&a])}),
    )
    .await
    .err(404, "AGENT_NOT_FOUND");
    // unknown document: NOT_FOUND and nothing changes
    app.call(
        &u.token,
        KB,
        "attach",
        None,
        json!({"agentId": g2, "documents": docs(&[&b, &genied::db::new_id()])}),
    )
    .await
    .err(404, "NOT_FOUND");
    assert_eq!(app.count("genie_documents").await, links);

    // content update: new external id, the genies keep the document
    let before = app
        .call(&u.token, KB, "get", Some(json!(a)), json!({}))
        .await
        .ok(200)["document"]
        .clone();
    assert_eq!(
        before["dependent_agents"],
        json!([{"id": g2, "name": "Back office"}])
    );
    let r = app
        .call(
            &u.token,
            KB,
            "update",
            Some(json!(a)),
            json!({"mode": "content", "content": "Alpha   facts, revised: apples are red."}),
        )
        .await;
    let after = &r.ok(200)["document"];
    assert_eq!(after["status"], "completed");
    assert_ne!(after["external_id"], before["external_id"]);
    assert_eq!(after["external_id"].as_str().unwrap().len(), 20);
    assert_eq!(
        after["dependent_agents"].as_array().unwrap().len(),
        1,
        "{after}"
    );
    assert_eq!(after["dependent_agents"][0]["id"], json!(g2));
    assert_eq!(
        chunks(&app, &a).await,
        "Alpha facts, revised: apples are red."
    );
    // the old external id no longer finds it, the new one does
    app.call(
        &u.token,
        KB,
        "get",
        Some(before["external_id"].clone()),
        json!({}),
    )
    .await
    .err(404, "NOT_FOUND");
    app.call(
        &u.token,
        KB,
        "get",
        Some(after["external_id"].clone()),
        json!({}),
    )
    .await
    .ok(200);

    // sync-with-agent moves the genies of the old document to the new one
    let r = app
        .call(
            &u.token,
            KB,
            "sync-with-agent",
            None,
            json!({"oldDocId": after["external_id"], "newDocId": b, "preventDeletion": true}),
        )
        .await;
    assert_eq!(r.ok(200)["syncedCount"], 1);
    let a_now = app
        .call(&u.token, KB, "get", Some(json!(a)), json!({}))
        .await;
    assert_eq!(a_now.ok(200)["document"]["dependent_agents"], json!([]));

    // delete removes the links
    let r = app
        .call(&u.token, KB, "delete", Some(json!(b)), json!({}))
        .await;
    assert_eq!(r.ok(200), &json!({"id": b, "deleted": true}));
    let g = g1.clone();
    let n: i64 = app
        .state
        .db
        .read(move |c| {
            Ok(c.query_row(
                "SELECT COUNT(*) FROM genie_documents WHERE genie_id = ?1",
                [g],
                |r| r.get(0),
            )?)
        })
        .await
        .unwrap();
    assert_eq!(n, 1);
    app.call(&u.token, KB, "get", Some(json!(b)), json!({}))
        .await
        .err(404, "NOT_FOUND");
}

#[tokio::test]
async fn public_private_isolation_admin_mode_and_bulk_update() {
    let app = TestApp::spawn().await;
    let alice = app.standard().await;
    let bob = app.standard().await;
    let admin = app.admin().await;
    let private = create_text(&app, &alice, "Alice private", "secret sauce").await;
    let public = create_text(&app, &alice, "Alice public", "public recipe").await;
    set_public(&app, &alice, &public, true).await;
    // bob sees only the public one, cannot change it, cannot see the private one
    let r = app.call(&bob.token, KB, "all", None, json!({})).await;
    let list = r.ok(200);
    assert_eq!(list["total"], 1);
    assert_eq!(list["documents"][0]["id"], json!(public));
    assert_eq!(list["limit"], 50);
    assert_eq!(list["offset"], 0);
    app.call(&bob.token, KB, "get", Some(json!(private)), json!({}))
        .await
        .err(404, "NOT_FOUND");
    app.call(
        &bob.token,
        KB,
        "update",
        Some(json!(public)),
        json!({"mode": "data", "name": "mine"}),
    )
    .await
    .err(403, "FORBIDDEN");
    app.call(&bob.token, KB, "delete", Some(json!(private)), json!({}))
        .await
        .err(404, "NOT_FOUND");
    app.call(&bob.token, KB, "all", None, json!({"adminMode": true}))
        .await
        .err(403, "FORBIDDEN");
    // alice's filters
    let r = app
        .call(
            &alice.token,
            KB,
            "all",
            None,
            json!({"filters": {"selectedPrivacy": "public"}}),
        )
        .await;
    assert_eq!(r.ok(200)["total"], 1);
    let r = app
        .call(
            &alice.token,
            KB,
            "all",
            None,
            json!({"filters": {"selectedType": "pdf_upload"}}),
        )
        .await;
    assert_eq!(r.ok(200)["total"], 0);
    app.call(
        &alice.token,
        KB,
        "all",
        None,
        json!({"filters": {"selectedType": "exe"}}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    // admin mode: everything with owner information
    let mine = create_text(&app, &bob, "Bob notes", "bob things").await;
    let r = app
        .call(&admin.token, KB, "all", None, json!({"adminMode": true}))
        .await;
    let list = r.ok(200);
    assert_eq!(list["total"], 3);
    assert!(
        list["documents"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["owner"]["email"].is_string())
    );
    let r = app
        .call(
            &admin.token,
            KB,
            "all",
            None,
            json!({"adminMode": true, "ownerId": bob.id}),
        )
        .await;
    assert_eq!(r.ok(200)["documents"][0]["id"], json!(mine));
    let r = app.call(&alice.token, KB, "all", None, json!({})).await;
    assert!(r.ok(200)["documents"][0].get("owner").is_none());
    // bulk update: metadata only, all or nothing
    let r = app
        .call(
            &alice.token,
            KB,
            "bulk-update",
            None,
            json!({"documentIds": [private, public], "updates": {"is_active": false}}),
        )
        .await;
    assert_eq!(
        r.ok(200),
        &json!({"success": true, "message": "Updated 2 document(s)", "updatedCount": 2})
    );
    app.call(
        &alice.token,
        KB,
        "bulk-update",
        None,
        json!({"documentIds": [private], "updates": {"content": "x"}}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    app.call(
        &alice.token,
        KB,
        "bulk-update",
        None,
        json!({"documentIds": [private, mine], "updates": {"is_active": true}}),
    )
    .await
    .err(404, "NOT_FOUND");
    let r = app
        .call(&alice.token, KB, "get", Some(json!(private)), json!({}))
        .await;
    assert_eq!(
        r.ok(200)["document"]["is_active"],
        false,
        "a failed bulk update changed nothing"
    );
    // bad ids
    app.call(&alice.token, KB, "get", Some(json!("nope")), json!({}))
        .await
        .err(400, "VALIDATION_ERROR");
}

/// The two search tests' documents: `u`'s "Roses" (the word five times, with "pruning")
/// and "Tulips" (once), and `other`'s private "Other roses", all completed; `g` a genie of
/// `u`'s with no documents yet.
struct Garden {
    u: User,
    other: User,
    g: String,
    roses: String,
    tulips: String,
    hidden: String,
}

const ROSES_TEXT: &str =
    "Roses need pruning in spring. Pruning roses keeps roses healthy; prune roses hard.";

async fn garden(app: &TestApp) -> Garden {
    let u = app.standard().await;
    let other = app.standard().await;
    let g = genie(app, &u, "Gardener", None).await;
    let roses = create_text(app, &u, "Roses", ROSES_TEXT).await;
    let tulips = create_text(
        app,
        &u,
        "Tulips",
        "Tulips are bulbs. Plant bulbs in autumn; roses are mentioned once.",
    )
    .await;
    let hidden = create_text(app, &other, "Other roses", "roses roses roses roses roses").await;
    for (t, id) in [
        (&u.token, &roses),
        (&u.token, &tulips),
        (&other.token, &hidden),
    ] {
        assert_eq!(settle(app, t, id).await["status"], "completed");
    }
    Garden {
        u,
        other,
        g,
        roses,
        tulips,
        hidden,
    }
}

#[tokio::test]
async fn search_term_and_search_action_rank_chunks_with_fts5() {
    let app = TestApp::spawn().await;
    // The other user's "Other roses" is in none of `u`'s answers.
    let Garden {
        u,
        other,
        g,
        roses,
        tulips,
        ..
    } = garden(&app).await;
    // searchTerm: title or content
    let r = app
        .call(
            &u.token,
            KB,
            "all",
            None,
            json!({"filters": {"searchTerm": "bulbs"}}),
        )
        .await;
    let list = r.ok(200);
    assert_eq!(list["total"], 1);
    assert_eq!(list["documents"][0]["id"], json!(tulips));
    let r = app
        .call(
            &u.token,
            KB,
            "all",
            None,
            json!({"filters": {"searchTerm": "Tulip"}}),
        )
        .await;
    assert_eq!(r.ok(200)["total"], 1, "title substring");
    let r = app
        .request(
            Method::GET,
            "/v1/knowledge-base?searchTerm=pruning",
            Some(&u.token),
            None,
        )
        .await;
    assert_eq!(r.ok(200)["documents"][0]["id"], json!(roses));
    // search: ranked, own documents only
    let r = app
        .call(
            &u.token,
            KB,
            "search",
            None,
            json!({"query": "roses pruning"}),
        )
        .await;
    let hits = r.ok(200)["results"].as_array().unwrap().clone();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0]["document_id"], json!(roses));
    assert!(
        hits[0]["snippet"].as_str().unwrap().contains("[Pruning]")
            || hits[0]["snippet"].as_str().unwrap().contains("[pruning]")
    );
    let r = app
        .call(&u.token, KB, "search", None, json!({"query": "roses"}))
        .await;
    let hits = r.ok(200)["results"].as_array().unwrap().clone();
    assert_eq!(
        hits.iter()
            .map(|h| h["document_id"].clone())
            .collect::<Vec<_>>(),
        vec![json!(roses), json!(tulips)]
    );
    assert!(hits[0]["score"].as_f64().unwrap() > hits[1]["score"].as_f64().unwrap());
    // by genie: only its documents
    let r = app
        .call(
            &u.token,
            KB,
            "search",
            None,
            json!({"query": "roses", "agentId": g}),
        )
        .await;
    assert_eq!(r.ok(200)["count"], 0);
    app.call(
        &u.token,
        KB,
        "attach",
        None,
        json!({"agentId": g, "documents": [{"id": tulips, "name": "Tulips", "type": "file"}]}),
    )
    .await
    .ok(200);
    let r = app
        .call(
            &u.token,
            KB,
            "search",
            None,
            json!({"query": "roses", "agentId": g, "limit": 5}),
        )
        .await;
    assert_eq!(r.ok(200)["results"][0]["document_id"], json!(tulips));
    app.call(
        &other.token,
        KB,
        "search",
        None,
        json!({"query": "roses", "agentId": g}),
    )
    .await
    .err(404, "AGENT_NOT_FOUND");
    app.call(&u.token, KB, "search", None, json!({"query": "  "}))
        .await
        .err(400, "VALIDATION_ERROR");
}

/// The ids `search` answers `u` for `query`, sorted: asked at once (on SQLite FTS5 answers
/// while a change waits for the documents' search index), then again once the index has
/// caught up (it answers then), and both must be the same.
async fn found(app: &TestApp, u: &User, query: &str) -> Vec<String> {
    let now = found_now(app, u, query).await;
    search_index_caught_up(app).await;
    assert_eq!(
        found_now(app, u, query).await,
        now,
        "the search index answers {query:?} as the search did before it caught up"
    );
    now
}

async fn found_now(app: &TestApp, u: &User, query: &str) -> Vec<String> {
    let r = app
        .call(
            &u.token,
            KB,
            "search",
            None,
            json!({"query": query, "limit": 50}),
        )
        .await;
    // A document answers with each of its chunks that matches: one id each.
    let mut ids = sorted_ids(&r.ok(200)["results"], "document_id");
    ids.dedup();
    ids
}

/// The `key` member of each item of `items`, sorted.
fn sorted_ids(items: &Value, key: &str) -> Vec<String> {
    let mut ids: Vec<String> = items
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d[key].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

/// The ids of the documents `u`'s list finds by `term` (title or content), sorted.
async fn listed(app: &TestApp, u: &User, term: &str) -> Vec<String> {
    let r = app
        .call(
            &u.token,
            KB,
            "all",
            None,
            json!({"filters": {"searchTerm": term}}),
        )
        .await;
    sorted_ids(&r.ok(200)["documents"], "id")
}

async fn set_public(app: &TestApp, u: &User, id: &str, public: bool) {
    app.call(
        &u.token,
        KB,
        "update",
        Some(json!(id)),
        json!({"mode": "data", "is_public": public}),
    )
    .await
    .ok(200);
}

fn sorted(ids: &[&String]) -> Vec<String> {
    let mut v: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

#[tokio::test]
async fn search_follows_who_may_read_as_documents_turn_public_private_and_go() {
    let app = TestApp::spawn().await;
    let alice = app.standard().await;
    let bob = app.standard().await;
    let admin = app.admin().await;
    let mine = create_text(
        &app,
        &alice,
        "Care",
        "Zebracorn care: brush the mane daily.",
    )
    .await;
    let shared = create_text(&app, &bob, "Facts", "Zebracorn facts for everyone.").await;
    let secret = create_text(&app, &bob, "Secrets", "Zebracorn secrets, bob's only.").await;
    set_public(&app, &bob, &shared, true).await;
    for (u, id) in [(&alice, &mine), (&bob, &shared), (&bob, &secret)] {
        assert_eq!(settle(&app, &u.token, id).await["status"], "completed");
    }
    assert_eq!(
        found(&app, &alice, "zebracorn").await,
        sorted(&[&mine, &shared])
    );
    assert_eq!(
        found(&app, &bob, "zebracorn").await,
        sorted(&[&shared, &secret])
    );
    // The index's reader tokens are not words of any document: neither `pub` nor the
    // owner's token (as V36 spells it) finds anything.
    assert!(found(&app, &alice, "pub").await.is_empty());
    let bob_token: String = format!(
        "u{}",
        bob.id
            .bytes()
            .map(|b| format!("{b:02X}"))
            .collect::<String>()
    );
    assert!(found(&app, &alice, &bob_token).await.is_empty());
    assert!(found(&app, &bob, &bob_token).await.is_empty());

    // Bob opens the secret and closes the facts: alice's search follows both.
    set_public(&app, &bob, &secret, true).await;
    set_public(&app, &bob, &shared, false).await;
    assert_eq!(
        found(&app, &alice, "zebracorn").await,
        sorted(&[&mine, &secret])
    );
    let r = app
        .call(
            &alice.token,
            KB,
            "all",
            None,
            json!({"filters": {"searchTerm": "secrets"}}),
        )
        .await;
    assert_eq!(r.ok(200)["documents"][0]["id"], json!(secret));
    // A change that is not about readers leaves the index alone (and the search right).
    app.call(
        &bob.token,
        KB,
        "update",
        Some(json!(secret)),
        json!({"mode": "data", "name": "Open secrets"}),
    )
    .await
    .ok(200);
    assert_eq!(
        found(&app, &alice, "zebracorn").await,
        sorted(&[&mine, &secret])
    );
    app.fts_index_is_whole("document_chunks_fts").await;

    // Bob switches the open secret off: no one's search finds it, not even an admin's (whose
    // search, too, is of their own and public documents); on again, it is back (V43: the
    // tokens follow `is_active`).
    let active = |on: bool| json!({"documentIds": [secret.clone()], "updates": {"is_active": on}});
    app.call(&bob.token, KB, "bulk-update", None, active(false))
        .await
        .ok(200);
    assert_eq!(found(&app, &alice, "zebracorn").await, vec![mine.clone()]);
    assert_eq!(found(&app, &bob, "zebracorn").await, vec![shared.clone()]);
    assert!(found(&app, &admin, "zebracorn").await.is_empty());
    // The list still finds it by its words, as it lists it: a switched-off document is its
    // owner's, and a public one everyone's, to find and switch on again (V44).
    assert_eq!(
        listed(&app, &bob, "secrets bob").await,
        vec![secret.clone()]
    );
    assert_eq!(
        listed(&app, &alice, "zebracorn").await,
        sorted(&[&mine, &secret])
    );
    app.fts_index_is_whole("document_chunks_fts").await;
    app.call(&bob.token, KB, "bulk-update", None, active(true))
        .await
        .ok(200);
    assert_eq!(
        found(&app, &alice, "zebracorn").await,
        sorted(&[&mine, &secret])
    );
    assert_eq!(
        found(&app, &bob, "zebracorn").await,
        sorted(&[&shared, &secret])
    );
    assert_eq!(found(&app, &admin, "zebracorn").await, vec![secret.clone()]);
    app.fts_index_is_whole("document_chunks_fts").await;

    // Alice deletes hers; the admin deletes bob with all he owns.
    app.call(&alice.token, KB, "delete", Some(json!(mine)), json!({}))
        .await
        .ok(200);
    assert_eq!(found(&app, &alice, "zebracorn").await, vec![secret.clone()]);
    app.call(
        &admin.token,
        "users",
        "delete",
        Some(json!(bob.id)),
        json!({}),
    )
    .await
    .ok(200);
    assert!(found(&app, &alice, "zebracorn").await.is_empty());
    assert_eq!(app.count("document_chunks").await, 0);
    app.fts_index_is_whole("document_chunks_fts").await;
}

#[tokio::test]
async fn the_search_index_answers_once_caught_up_ranked_and_cut_as_the_api_says() {
    if postgres::skip("the documents search index is SQLite's") {
        return;
    }
    let app = TestApp::spawn().await;
    let Garden {
        u,
        other,
        g,
        roses,
        tulips,
        hidden,
    } = garden(&app).await;
    search_index_caught_up(&app).await;
    let ix = app.state.doc_index.clone().unwrap();
    // Every chunk of the three completed documents, nothing else.
    assert_eq!(ix.chunks() as i64, app.count("document_chunks").await);

    let search = async |q: Value| {
        app.call(&u.token, KB, "search", None, q).await.ok(200)["results"]
            .as_array()
            .unwrap()
            .clone()
    };
    let hits = search(json!({"query": "roses"})).await;
    let ids: Vec<&Value> = hits.iter().map(|h| &h["document_id"]).collect();
    assert_eq!(ids, vec![&json!(roses), &json!(tulips)], "{hits:?}");
    // The scores are the index's own: the index answered, not FTS5.
    let words = vec!["roses".to_string()];
    let owner: String = u.id.bytes().map(|b| format!("{b:02X}")).collect();
    let readers = vec![format!("u{owner}"), "pub".to_string()];
    let direct = ix
        .search(&genied::doc_index::Asked {
            words: &words,
            any: false,
            readers: &readers,
            documents: None,
            limit: 5,
        })
        .unwrap();
    let scores: Vec<f64> = hits.iter().map(|h| h["score"].as_f64().unwrap()).collect();
    let expected: Vec<f64> = direct.hits.iter().map(|h| f64::from(h.1)).collect();
    assert_eq!(scores, expected);
    assert!(scores[0] > scores[1], "{scores:?}");
    // All the words; the snippet marks them in the chunk's own spelling.
    let hits = search(json!({"query": "roses pruning"})).await;
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0]["document_id"], json!(roses));
    assert_eq!(hits[0]["chunk_index"], 0);
    let snippet = hits[0]["snippet"].as_str().unwrap();
    assert!(
        snippet.contains("[Pruning]") && snippet.contains("[Roses]"),
        "{snippet}"
    );
    assert_eq!(hits[0]["content"], ROSES_TEXT);
    // A genie's documents only, through the same index.
    let hits = search(json!({"query": "roses", "agentId": g})).await;
    assert!(hits.is_empty(), "{hits:?}");
    app.call(
        &u.token,
        KB,
        "attach",
        None,
        json!({"agentId": g, "documents": [{"id": tulips, "name": "Tulips", "type": "file"}]}),
    )
    .await
    .ok(200);
    let hits = search(json!({"query": "roses", "agentId": g})).await;
    let ids: Vec<&Value> = hits.iter().map(|h| &h["document_id"]).collect();
    assert_eq!(ids, vec![&json!(tulips)]);
    // The other user's document turns public: found at once (FTS5, while queued), and
    // ranked first once the index has it (five roses in five words).
    set_public(&app, &other, &hidden, true).await;
    assert_eq!(found(&app, &u, "roses").await.len(), 3);
    let hits = search(json!({"query": "roses"})).await;
    assert_eq!(hits[0]["document_id"], json!(hidden));
    // Private again, or deleted: gone at once, before the index has caught up.
    set_public(&app, &other, &hidden, false).await;
    assert_eq!(
        found_now(&app, &u, "roses").await,
        sorted(&[&roses, &tulips])
    );
    app.call(&u.token, KB, "delete", Some(json!(roses)), json!({}))
        .await
        .ok(200);
    assert!(found_now(&app, &u, "pruning").await.is_empty());
    assert!(found(&app, &u, "pruning").await.is_empty());
    assert_eq!(ix.chunks() as i64, app.count("document_chunks").await);
}

#[tokio::test]
async fn the_search_index_is_rebuilt_when_missing_or_newer_than_its_database() {
    if postgres::skip("the documents search index is SQLite's") {
        return;
    }
    let app = TestApp::spawn().await;
    let alice = app.standard().await;
    let first = create_text(&app, &alice, "Kayaks", "Kayak paddles and spray decks.").await;
    assert_eq!(
        settle(&app, &alice.token, &first).await["status"],
        "completed"
    );
    search_index_caught_up(&app).await;
    let backup = app.state.config.data_dir.join("backup.db");
    app.state.db.backup_to(&backup).unwrap();
    let second = create_text(&app, &alice, "Canoes", "Kayak or canoe: a comparison.").await;
    assert_eq!(
        settle(&app, &alice.token, &second).await["status"],
        "completed"
    );
    assert_eq!(
        found(&app, &alice, "kayak").await,
        sorted(&[&first, &second])
    );
    let dir = app.state.config.doc_index_dir();
    assert!(dir.join("meta.json").is_file(), "{}", dir.display());

    // The backup restored: the index holds a document its database never had, and is made
    // again from the database.
    let mut app = app;
    app.shutdown().await;
    {
        let mut c = rusqlite::Connection::open(app.state.config.db_path()).unwrap();
        c.restore(
            rusqlite::MAIN_DB,
            &backup,
            None::<fn(rusqlite::backup::Progress)>,
        )
        .unwrap();
    }
    let app = app.restart().await;
    search_index_caught_up(&app).await;
    let ix = app.state.doc_index.clone().unwrap();
    assert_eq!(ix.chunks(), 1);
    assert_eq!(found(&app, &alice, "kayak").await, vec![first.clone()]);

    // The index removed: made again, and the search answers from it.
    let mut app = app;
    app.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();
    let app = app.restart().await;
    search_index_caught_up(&app).await;
    assert!(dir.join("meta.json").is_file());
    assert_eq!(app.state.doc_index.clone().unwrap().chunks(), 1);
    assert_eq!(found(&app, &alice, "kayak").await, vec![first.clone()]);

    // Removed again, and the build process fails: the server builds the index itself.
    let mut app = app;
    app.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();
    let app = app
        .restart_with(|c| c.index_exe = Some("/bin/false".into()))
        .await;
    search_index_caught_up(&app).await;
    assert_eq!(app.state.doc_index.clone().unwrap().chunks(), 1);
    assert_eq!(found(&app, &alice, "kayak").await, vec![first]);
}

#[tokio::test]
async fn documents_stored_before_the_readers_index_are_found_after_it() {
    if postgres::skip("the readers column is in SQLite's full-text index only") {
        return;
    }
    let app = TestApp::spawn().await;
    let alice = app.standard().await;
    let bob = app.standard().await;
    let mine = create_text(&app, &alice, "Care", "Zebracorn care.").await;
    let his = create_text(&app, &bob, "Facts", "Zebracorn facts.").await;
    for (u, id) in [(&alice, &mine), (&bob, &his)] {
        assert_eq!(settle(&app, &u.token, id).await["status"], "completed");
    }
    let mut app = app;
    app.shutdown().await;
    {
        let c = rusqlite::Connection::open(app.state.config.db_path()).unwrap();
        c.execute_batch(&format!(
            "PRAGMA busy_timeout = 10000; BEGIN; {UNAPPLY_DOCUMENT_SEARCH_READERS} COMMIT;"
        ))
        .unwrap();
    }
    let app = app.restart().await;
    assert_eq!(found(&app, &alice, "zebracorn").await, vec![mine]);
    assert_eq!(found(&app, &bob, "zebracorn").await, vec![his]);
    app.fts_index_is_whole("document_chunks_fts").await;
}

/// Puts SQLite's documents index back as it was before V36 (one column, content straight
/// from the chunks) and marks V36 and the migrations after it unapplied, for tests that
/// start from an older schema.
pub const UNAPPLY_DOCUMENT_SEARCH_READERS: &str = "
    DROP TRIGGER document_chunks_ai; DROP TRIGGER document_chunks_bd;
    DROP TRIGGER document_chunks_bu; DROP TRIGGER document_chunks_au;
    DROP TRIGGER documents_chunks_bd; DROP TRIGGER documents_readers_bu;
    DROP TRIGGER documents_readers_au;
    DROP TABLE document_chunks_fts; DROP VIEW document_chunks_indexed;
    CREATE VIRTUAL TABLE document_chunks_fts USING fts5(
        content, content = 'document_chunks', content_rowid = 'id',
        tokenize = 'porter unicode61 remove_diacritics 2');
    CREATE TRIGGER document_chunks_ai AFTER INSERT ON document_chunks BEGIN
        INSERT INTO document_chunks_fts(rowid, content) VALUES (new.id, new.content);
    END;
    CREATE TRIGGER document_chunks_ad AFTER DELETE ON document_chunks BEGIN
        INSERT INTO document_chunks_fts(document_chunks_fts, rowid, content)
            VALUES ('delete', old.id, old.content);
    END;
    INSERT INTO document_chunks_fts(document_chunks_fts) VALUES ('rebuild');
    -- V36 and every migration after it: refinery refuses a gap in the applied ones, so the
    -- later ones run again on the next start (V37 and V38 keep what they already converted).
    DELETE FROM refinery_schema_history WHERE version >= 36;
";

fn multipart(filename: &str, bytes: &[u8], extra: &[(&str, &str)]) -> (String, Vec<u8>) {
    let boundary = "XyZboundary42";
    let mut body = Vec::new();
    for (k, v) in extra {
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{v}\r\n")
                .as_bytes(),
        );
    }
    body.extend_from_slice(
        format!("--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{filename}\"\r\nContent-Type: application/octet-stream\r\n\r\n").as_bytes(),
    );
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

#[tokio::test]
async fn multipart_upload_authenticates_creates_and_enforces_the_size_limit() {
    let app = TestApp::spawn_with(|c| c.max_upload_bytes = 4096).await;
    let u = app.standard().await;
    let (ct, body) = multipart(
        "guide.pdf",
        &pdf(&["Multipart pages talk about kayaks."]),
        &[("name", "Kayak guide")],
    );
    let auth = format!("Bearer {}", u.token);
    let r = app
        .raw(
            Method::POST,
            "/v1/knowledge-base/upload",
            &[("content-type", &ct), ("authorization", &auth)],
            body.clone(),
        )
        .await;
    let d = &r.ok(201)["document"];
    assert_eq!(d["type"], "pdf_upload");
    assert_eq!(d["name"], "Kayak guide");
    let done = settle(&app, &u.token, d["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert!(
        chunks(&app, d["id"].as_str().unwrap())
            .await
            .contains("kayaks")
    );
    // without credentials
    app.raw(
        Method::POST,
        "/v1/knowledge-base/upload",
        &[("content-type", &ct)],
        body,
    )
    .await
    .err(401, "UNAUTHORIZED");
    // too large, and nothing stored
    let before = app.count("documents").await;
    let (ct, big) = multipart("big.txt", &vec![b'a'; 5000], &[]);
    let r = app
        .raw(
            Method::POST,
            "/v1/knowledge-base/upload",
            &[("content-type", &ct), ("authorization", &auth)],
            big,
        )
        .await;
    r.err(413, "PAYLOAD_TOO_LARGE");
    let r = app
        .call(&u.token, KB, "create", None, json!({"action": "extract-document", "data": {"filename": "big.txt", "content_base64": b64(&vec![b'a'; 5000])}}))
        .await;
    r.err(413, "PAYLOAD_TOO_LARGE");
    assert_eq!(app.count("documents").await, before);
    // consumers cannot upload
    let cons = app.consumer().await;
    let (ct, body) = multipart("a.txt", b"hello", &[]);
    let auth = format!("Bearer {}", cons.token);
    app.raw(
        Method::POST,
        "/v1/knowledge-base/upload",
        &[("content-type", &ct), ("authorization", &auth)],
        body,
    )
    .await
    .err(403, "FORBIDDEN");
}

#[tokio::test]
async fn deleting_removes_stored_files_once_unused() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let a = create_text(&app, &u, "Same 1", "identical bytes").await;
    let b = create_text(&app, &u, "Same 2", "identical bytes").await;
    settle(&app, &u.token, &a).await;
    settle(&app, &u.token, &b).await;
    let n = stored_files(&app).await;
    assert!(n >= 1);
    app.call(&u.token, KB, "delete", Some(json!(a)), json!({}))
        .await
        .ok(200);
    assert_eq!(
        stored_files(&app).await,
        n,
        "still used by the other record"
    );
    app.call(&u.token, KB, "delete", Some(json!(b)), json!({}))
        .await
        .ok(200);
    assert_eq!(stored_files(&app).await, 0);
    assert_eq!(app.count("document_chunks").await, 0);
}

#[tokio::test]
async fn outbound_guard_refuses_internal_addresses() {
    let app = TestApp::spawn_with(|c| c.allow_private_outbound = false).await;
    let u = app.standard().await;
    for url in [
        "http://127.0.0.1/",
        "http://[::1]/",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
        "http://2130706433/",
        "http://localhost/",
    ] {
        for sub in ["upload-website", "scrape-website"] {
            let before = app.count("documents").await;
            let r = app
                .call(
                    &u.token,
                    KB,
                    "create",
                    None,
                    json!({"action": sub, "data": {"url": url}}),
                )
                .await;
            // Names (localhost) are resolved and refused at once, like the addresses.
            r.err(400, "VALIDATION_ERROR");
            let msg = r.body["error"]["message"].as_str().unwrap();
            assert!(
                msg.starts_with("data.data.url: ")
                    && msg.contains("not allowed")
                    && msg.contains("--allow-private-outbound"),
                "{url}: {msg}"
            );
            assert_eq!(app.count("documents").await, before, "{url}");
        }
    }
    assert_eq!(app.count("documents").await, 0);
    // The guarded client itself, used directly: the loopback site is refused before any
    // request. (A redirect from a public host to loopback cannot be staged here without DNS
    // for a public-looking name; the redirect policy runs the same `check_url` on every hop.)
    let site = Website::start().await;
    let guarded = genied::net::Guarded::new(false);
    let err = guarded
        .get(&site.url("/to-loopback"), genied::net::Limits::default())
        .await
        .unwrap_err();
    assert!(matches!(err, genied::net::NetError::Refused(_)), "{err:?}");
    assert!(site.hits().is_empty(), "nothing reached the site");
}

/// Runs due jobs and polls until the document leaves `from` (bounded, 60 s).
async fn leaves(app: &TestApp, token: &str, id: &str, from: &str) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        app.run_jobs().await;
        let r = app.call(token, KB, "get", Some(json!(id)), json!({})).await;
        let d = r.ok(200)["document"].clone();
        if d["status"] != json!(from) {
            return d;
        }
        assert!(std::time::Instant::now() < deadline, "{id} stayed {from}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_failed_document_is_retried_from_the_step_that_failed() {
    let app = TestApp::spawn_with(|c| c.job_backoff_base_ms = 5).await;
    let site = Website::start().await;
    let u = app.standard().await;
    let retry = |id: &str| app.call(&u.token, KB, "retry", Some(json!(id)), json!({}));

    // Extraction fails: the source answers 503 more often than the pipeline tries.
    let attempts = genied::knowledge::pipeline::MAX_FETCH_ATTEMPTS as u32;
    site.fail_flaky(attempts);
    let r = app
        .call(
            &u.token,
            KB,
            "create",
            None,
            json!({"action": "upload-website", "data": {"url": site.url("/flaky")}}),
        )
        .await;
    let id = r.ok(201)["document"]["id"].as_str().unwrap().to_string();
    let failed = settle(&app, &u.token, &id).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert!(
        failed["error"].as_str().unwrap().contains("503"),
        "{failed}"
    );
    assert_eq!(site.hit_count("/flaky") as u32, attempts);

    // Retried, it goes back to extraction (the source is fetched again) and completes.
    let r = retry(&id).await;
    let d = r.ok(202)["document"].clone();
    assert_eq!(
        (d["id"].clone(), d["status"].clone(), d["error"].clone()),
        (json!(id), json!("pending_extraction"), Value::Null)
    );
    let done = settle(&app, &u.token, &id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert!(chunks(&app, &id).await.contains("tangerine dreams"));
    assert_eq!(site.hit_count("/flaky") as u32, attempts + 1);

    // Only failed documents: a completed one is a conflict and stays as it is.
    retry(&id).await.err(409, "CONFLICT");
    let same = app
        .call(&u.token, KB, "get", Some(json!(id)), json!({}))
        .await;
    assert_eq!(same.ok(200)["document"]["status"], "completed");

    // Cleaning up fails (nothing but zero-width characters): the extracted text is kept, so a
    // retry resumes at optimization and does not extract again.
    let text = create_text(&app, &u, "Invisible", "\u{200b}\u{200b}\u{200b}").await;
    let failed = settle(&app, &u.token, &text).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert!(
        failed["error"]
            .as_str()
            .unwrap()
            .contains("no text was left"),
        "{failed}"
    );
    let r = retry(&text).await;
    assert_eq!(r.ok(202)["document"]["status"], "pending_optimization");
    let again = leaves(&app, &u.token, &text, "pending_optimization").await;
    assert_eq!(again["status"], "failed", "{again}");
    assert!(
        again["error"]
            .as_str()
            .unwrap()
            .contains("no text was left")
    );

    // The retries are audited like other writes.
    let acts = app
        .call(
            &u.token,
            "activities",
            "list",
            None,
            json!({"filters": {"action": "retry"}}),
        )
        .await;
    let rows = acts.ok(200)["activities"].as_array().cloned().unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(
        rows.iter()
            .all(|a| a["resource"] == json!("knowledge-base"))
    );
    assert_eq!(rows[1]["record_id"], json!(id));

    // Bad and unknown ids; a consumer is refused.
    retry("nope").await.err(400, "VALIDATION_ERROR");
    retry(&genied::db::new_id()).await.err(404, "NOT_FOUND");
    let consumer = app.consumer().await;
    app.call(&consumer.token, KB, "retry", Some(json!(text)), json!({}))
        .await
        .err(403, "FORBIDDEN");
}
