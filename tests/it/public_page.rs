//! The public genie page: HTML rendering, HTML 404, headless Chromium rendering the welcome
//! message, and the text chat recording a `web` conversation (with and without an LLM).

use axum::routing::post;
use axum::{Json, Router};
use reqwest::Method;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

use crate::common::browser::{Browser, dump_dom};
use crate::common::*;

/// The recorded conversation as its owner reads it through the conversations resource.
async fn conversation(app: &TestApp, owner: &User, id: &str) -> (String, String, String, Value) {
    let r = app
        .call(
            &owner.token,
            "conversations",
            "get",
            Some(json!(id)),
            json!({}),
        )
        .await;
    let c = r.ok(200)["conversation"].clone();
    let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
    (
        s("user_id"),
        s("genie_id"),
        s("channel"),
        c["transcript"].clone(),
    )
}

#[tokio::test]
async fn page_renders_in_chromium_and_unknown_pages_are_html_404() {
    let app = TestApp::spawn().await;
    let owner = app.standard().await;
    insert_genie_with(&app, &owner, "Sunny Bakery", json!({"page_slug": "sunny-bakery", "web_welcome_message": "Fresh bread & a friendly chat <today>!", "branding": {"primary_color": "#b45309", "logo_url": "https://example.com/logo.png"}}))
    .await;
    insert_genie_with(
        &app,
        &owner,
        "Closed",
        json!({"page_slug": "closed-shop", "is_active": false}),
    )
    .await;

    let resp = app
        .client
        .get(format!("{}/g/sunny-bakery", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let body = resp.text().await.unwrap();
    assert!(body.contains("Fresh bread &amp; a friendly chat &lt;today&gt;!"));
    assert!(body.contains("--accent: #b45309"));
    assert!(body.contains(r#"<label for="message">Your message</label>"#));

    for path in ["/g/closed-shop", "/g/no-such-genie"] {
        let resp = app
            .client
            .get(format!("{}{path}", app.base))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 404, "{path}");
        assert!(
            resp.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/html"),
            "{path}"
        );
        assert!(resp.text().await.unwrap().contains("Page not found"));
    }
    // API paths keep the JSON envelope.
    app.request(Method::GET, "/v1/nothing/here/at/all", None, None)
        .await
        .err(404, "NOT_FOUND");

    let css = app
        .client
        .get(format!("{}/page-assets/page.css", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(css.status(), 200);

    // A real browser: the welcome message and the start control are in the rendered DOM.
    let url = format!("{}/g/sunny-bakery", app.base);
    let dom = tokio::task::spawn_blocking(move || dump_dom(&url))
        .await
        .unwrap();
    assert!(
        dom.contains("Fresh bread &amp; a friendly chat &lt;today&gt;!"),
        "{dom}"
    );
    assert!(
        dom.contains("<h1 id=\"genie-name\">Sunny Bakery</h1>"),
        "{dom}"
    );
    assert!(dom.contains("Start conversation"), "{dom}");
}

#[tokio::test]
async fn chat_without_llm_records_the_conversation_and_says_so() {
    let app = TestApp::spawn().await;
    let owner = app.standard().await;
    let gid = insert_genie_with(&app, &owner, "Helper", json!({"page_slug": "helper"})).await;

    let bad = app
        .raw(
            Method::POST,
            "/g/helper/chat",
            &[("content-type", "application/json")],
            r#"{"message": "  "}"#,
        )
        .await;
    bad.err(400, "VALIDATION_ERROR");
    let bad = app
        .raw(
            Method::POST,
            "/g/nobody/chat",
            &[("content-type", "application/json")],
            r#"{"message": "hi"}"#,
        )
        .await;
    bad.err(404, "AGENT_NOT_FOUND");
    assert_eq!(app.count("conversations").await, 0);

    let r = app
        .raw(
            Method::POST,
            "/g/helper/chat",
            &[("content-type", "application/json")],
            r#"{"message": "Hello?"}"#,
        )
        .await;
    let d = r.ok(200).clone();
    assert_eq!(d["configured"], json!(false));
    assert!(
        d["reply"]
            .as_str()
            .unwrap()
            .contains("Voice is not configured")
    );
    let cid = d["conversation_id"].as_str().unwrap().to_string();
    let (user, genie, channel, transcript) = conversation(&app, &owner, &cid).await;
    assert_eq!(
        (user.as_str(), genie.as_str(), channel.as_str()),
        (owner.id.as_str(), gid.as_str(), "web")
    );
    assert_eq!(transcript.as_array().unwrap().len(), 1);
    assert_eq!(transcript[0]["role"], json!("user"));
    assert_eq!(transcript[0]["message"], json!("Hello?"));
    assert!(transcript[0]["time_in_call_secs"].is_number());
}

#[derive(Clone, Default)]
struct FakeLlm {
    seen: Arc<Mutex<Vec<Value>>>,
}

async fn fake_llm() -> (String, FakeLlm) {
    let fake = FakeLlm::default();
    let f2 = fake.clone();
    let router = Router::new().route(
        "/v1/chat/completions",
        post(move |headers: axum::http::HeaderMap, Json(body): Json<Value>| {
            let f = f2.clone();
            async move {
                assert_eq!(headers.get("authorization").and_then(|v| v.to_str().ok()), Some("Bearer llm-test-key"));
                let last = body["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap().to_string();
                f.seen.lock().unwrap().push(body);
                Json(json!({"choices": [{"message": {"role": "assistant", "content": format!("You said: {last}")}, "finish_reason": "stop"}]}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (format!("http://{addr}/v1"), fake)
}

#[tokio::test]
async fn chat_with_llm_replies_and_appends_to_the_same_conversation() {
    let (llm_url, fake) = fake_llm().await;
    let app = TestApp::spawn_with(|c| {
        c.llm_base_url = Some(llm_url.clone());
        c.llm_api_key = Some(genied::config::Secret("llm-test-key".into()));
    })
    .await;
    let owner = app.standard().await;
    insert_genie_with(
        &app,
        &owner,
        "Chef",
        json!({"page_slug": "chef", "system_prompt": "You are a chef."}),
    )
    .await;

    let r = app
        .raw(
            Method::POST,
            "/g/chef/chat",
            &[("content-type", "application/json")],
            r#"{"message": "Soup?"}"#,
        )
        .await;
    let d = r.ok(200).clone();
    assert_eq!(d["configured"], json!(true));
    assert_eq!(d["reply"], json!("You said: Soup?"));
    let cid = d["conversation_id"].as_str().unwrap().to_string();
    let body = json!({"conversation_id": cid, "message": "Salt?"}).to_string();
    let r = app
        .raw(
            Method::POST,
            "/g/chef/chat",
            &[("content-type", "application/json")],
            body,
        )
        .await;
    assert_eq!(r.ok(200)["conversation_id"], json!(cid));

    let (_, _, channel, transcript) = conversation(&app, &owner, &cid).await;
    assert_eq!(channel, "web");
    let turns: Vec<(String, String)> = transcript
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["role"].as_str().unwrap().into(),
                t["message"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        turns,
        vec![
            ("user".into(), "Soup?".into()),
            ("agent".into(), "You said: Soup?".into()),
            ("user".into(), "Salt?".into()),
            ("agent".into(), "You said: Salt?".into()),
        ]
    );
    let seen = fake.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert_eq!(
        seen[1]["messages"][0],
        json!({"role": "system", "content": "You are a chef."})
    );
    assert_eq!(seen[1]["messages"].as_array().unwrap().len(), 4);
    assert_eq!(app.count("conversations").await, 1);

    // An unknown conversation id is refused and records nothing.
    let body = json!({"conversation_id": genied::db::new_id(), "message": "x"}).to_string();
    app.raw(
        Method::POST,
        "/g/chef/chat",
        &[("content-type", "application/json")],
        body,
    )
    .await
    .err(404, "NOT_FOUND");
    assert_eq!(app.count("conversations").await, 1);
}

#[tokio::test]
async fn the_public_chat_is_rate_limited_per_address() {
    let app = TestApp::spawn_with(|c| c.public_chat_rate_limit_per_minute = 2).await;
    let owner = app.standard().await;
    insert_genie_with(&app, &owner, "Helper", json!({"page_slug": "helper"})).await;
    let send = || {
        app.raw(
            Method::POST,
            "/g/helper/chat",
            &[("content-type", "application/json")],
            r#"{"message": "Hello?"}"#,
        )
    };
    send().await.ok(200);
    send().await.ok(200);
    let before = app.count("conversations").await;
    assert!(before >= 1);
    let r = send().await;
    r.err(429, "RATE_LIMIT_EXCEEDED");
    assert!(r.header("retry-after").is_some());
    // The refused message was not recorded.
    assert_eq!(app.count("conversations").await, before);
}

/// Drives the page in a real headless Chromium over the DevTools protocol: open the page,
/// press "Start conversation", type a message, send it; the reply shows in the page and the
/// conversation is visible to the genie's owner through the conversations resource.
#[tokio::test]
async fn the_text_chat_works_in_a_real_browser() {
    let app = TestApp::spawn().await;
    let owner = app.standard().await;
    insert_genie_with(
        &app,
        &owner,
        "Helper",
        json!({"page_slug": "helper", "web_welcome_message": "Ask me anything"}),
    )
    .await;
    let page_url = format!("{}/g/helper", app.base);
    let browser = Browser::launch(&page_url).await;
    let mut page = browser.page(&page_url).await;
    let script = r#"(async () => {
        const wait = (ms) => new Promise(r => setTimeout(r, ms));
        // The target can exist before the navigation commits: wait for our page, fully loaded.
        // Each wait is for a condition, up to 50 s (the machine may be busy).
        for (let i = 0; i < 2000 && !(document.getElementById('start') && document.readyState === 'complete'); i++) await wait(25);
        document.getElementById('start').click();
        document.getElementById('message').value = 'Hello from a real browser';
        document.getElementById('chat-form').requestSubmit();
        for (let i = 0; i < 2000 && document.getElementById('log').children.length < 2; i++) await wait(25);
        return document.getElementById('log').textContent + ' | ' + document.getElementById('status').textContent;
    })()"#;
    let log = page.evaluate(script).await;
    let log = log
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| format!("no string in {log}"));
    drop(browser);
    assert!(log.contains("Hello from a real browser"), "page log: {log}");
    assert!(
        log.to_lowercase().contains("not configured"),
        "the page shows the reply: {log}"
    );

    // The owner sees the conversation through the conversations resource.
    let r = app
        .call(
            &owner.token,
            "conversations",
            "all",
            None,
            json!({"channel": "web"}),
        )
        .await;
    let convs = r.ok(200)["conversations"].as_array().cloned().unwrap();
    assert_eq!(convs.len(), 1, "{convs:?}");
    let (_, _, channel, transcript) =
        conversation(&app, &owner, convs[0]["id"].as_str().unwrap()).await;
    assert_eq!(channel, "web");
    assert_eq!(transcript[0]["message"], json!("Hello from a real browser"));
}
