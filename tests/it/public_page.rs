//! The public genie page: HTML rendering, HTML 404, headless Chromium rendering the welcome
//! and first messages, and the text chat recording a `web` conversation (with and without an
//! LLM): the genie's model, temperature, max_tokens and first message, and answers from its
//! attached documents with the passages cited.

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::browser::{Browser, dump_dom};
use crate::common::fakes::openai::{Completion, Expect, FakeOpenAi, Turn};
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
    // The visitor reads a plain sentence, nothing meant for the operator.
    assert_eq!(d["reply"], json!("This assistant can't chat right now."));
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

    // The owner is told why, and what the operator can do.
    let g = app
        .call(&owner.token, "genies", "get", Some(json!(gid)), json!({}))
        .await;
    let page = &g.ok(200)["genie"]["page"];
    assert_eq!(page["status"], json!("chat_unavailable"), "{page}");
    assert!(
        page["warning"]
            .as_str()
            .is_some_and(|w| w.contains("--llm-base-url")),
        "{page}"
    );
}

/// Posts one message to the page chat of `slug`.
async fn say(app: &TestApp, slug: &str, conversation: Option<&str>, message: &str) -> Resp {
    let body = json!({"conversation_id": conversation, "message": message}).to_string();
    app.raw(
        Method::POST,
        &format!("/g/{slug}/chat"),
        &[("content-type", "application/json")],
        body,
    )
    .await
}

/// Creates a text document through the API, attached to `genie` when given, and waits
/// (bounded) for the pipeline to complete it.
async fn document(
    app: &TestApp,
    owner: &User,
    title: &str,
    content: &str,
    genie: Option<&str>,
) -> String {
    let mut data = json!({"title": title, "content": content});
    if let Some(g) = genie {
        data["agentId"] = json!(g);
    }
    let r = app
        .call(&owner.token, "knowledge-base", "create", None, data)
        .await;
    let id = r.ok(201)["document"]["id"].as_str().unwrap().to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        app.run_jobs().await;
        let r = app
            .call(
                &owner.token,
                "knowledge-base",
                "get",
                Some(json!(id)),
                json!({}),
            )
            .await;
        let status = r.ok(200)["document"]["status"].clone();
        if status == json!("completed") {
            return id;
        }
        assert!(
            status != json!("failed") && std::time::Instant::now() < deadline,
            "document {title}: {}",
            r.body
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

fn turns(transcript: &Value) -> Vec<(String, String)> {
    transcript
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["role"].as_str().unwrap().into(),
                t["message"].as_str().unwrap().into(),
            )
        })
        .collect()
}

const GREETING: &str = "Welcome to Sunny Bakery! Ask me about our bread.";
const PRICE: &str = "Our sourdough loaf costs 6 euros and is baked at dawn.";

#[tokio::test]
async fn chat_answers_from_the_genies_documents_with_its_own_model_and_greeting() {
    let llm = FakeOpenAi::start(Expect::Any).await;
    let app = TestApp::spawn_with(|c| llm.configure(c)).await;
    let owner = app.standard().await;
    let gid = insert_genie_with(
        &app,
        &owner,
        "Sunny",
        json!({"page_slug": "sunny", "system_prompt": "You are the bakery's assistant.",
               "llm_model": "bakery-model-7", "temperature": 0.3, "max_tokens": 321,
               "first_message": GREETING}),
    )
    .await;
    let price = document(&app, &owner, "Price list", PRICE, Some(&gid)).await;
    document(
        &app,
        &owner,
        "Parking",
        "Parking is behind the old church.",
        Some(&gid),
    )
    .await;
    // The same words, in a document of the owner that is NOT attached to this genie.
    document(
        &app,
        &owner,
        "Other shop",
        "The sourdough loaf at the other shop costs 9 marks.",
        None,
    )
    .await;

    // The page greets with the first message.
    let html = app
        .client
        .get(format!("{}/g/sunny", app.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        html.contains(r#"<li class="agent"><span class="visually-hidden">Sunny: </span>Welcome to Sunny Bakery! Ask me about our bread.</li>"#),
        "{html}"
    );

    llm.expect_completion(Completion {
        model: "bakery-model-7".into(),
        temperature: Some(0.3),
        max_tokens: Some(321),
        system_contains: vec!["You are the bakery's assistant.".into(), PRICE.into()],
        nowhere: vec!["9 marks".into()],
        ..Default::default()
    });
    llm.push([
        Turn::Answer("It costs 6 euros."),
        Turn::Answer("Behind the old church."),
    ]);
    let r = say(&app, "sunny", None, "How much is the sourdough loaf?").await;
    assert_eq!(llm.problems(), Vec::<String>::new());
    let d = r.ok(200).clone();
    assert_eq!(d["configured"], json!(true));
    assert_eq!(d["reply"], json!("It costs 6 euros."));
    let cited = d["citations"].as_array().unwrap();
    assert_eq!(cited.len(), 1, "{d}");
    assert_eq!(
        cited[0],
        json!({"document_id": price, "name": "Price list", "passage": PRICE})
    );
    let cid = d["conversation_id"].as_str().unwrap().to_string();
    // The next message retrieves for its own words.
    llm.expect_completion(Completion {
        model: "bakery-model-7".into(),
        temperature: Some(0.3),
        max_tokens: Some(321),
        system_contains: vec!["Parking is behind the old church.".into()],
        nowhere: vec!["9 marks".into()],
        ..Default::default()
    });
    let r = say(&app, "sunny", Some(&cid), "Where can I park the car?").await;
    assert_eq!(llm.problems(), Vec::<String>::new());
    let d = r.ok(200).clone();
    assert_eq!(d["citations"][0]["name"], json!("Parking"), "{d}");

    assert_eq!(llm.problems(), Vec::<String>::new());
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 2);
    // The model saw the greeting as its own first turn.
    assert_eq!(
        reqs[0].body["messages"][1],
        json!({"role": "assistant", "content": GREETING})
    );
    assert_eq!(reqs[1].body["messages"].as_array().unwrap().len(), 5);

    // The record opens with the greeting; each answer keeps the passages it was given.
    let (_, genie, channel, transcript) = conversation(&app, &owner, &cid).await;
    assert_eq!((genie.as_str(), channel.as_str()), (gid.as_str(), "web"));
    assert_eq!(
        turns(&transcript),
        vec![
            ("agent".into(), GREETING.into()),
            ("user".into(), "How much is the sourdough loaf?".into()),
            ("agent".into(), "It costs 6 euros.".into()),
            ("user".into(), "Where can I park the car?".into()),
            ("agent".into(), "Behind the old church.".into()),
        ]
    );
    assert_eq!(
        transcript[2]["citations"],
        json!([{"document_id": price, "name": "Price list", "passage": PRICE}])
    );
    assert!(transcript[1].get("citations").is_none(), "{transcript}");

    // The owner's view of the genie: the page can chat.
    let g = app
        .call(&owner.token, "genies", "get", Some(json!(gid)), json!({}))
        .await;
    let page = &g.ok(200)["genie"]["page"];
    assert_eq!(
        (page["status"].clone(), page["warning"].clone()),
        (json!("ready"), Value::Null),
        "{page}"
    );

    // An unknown conversation id is refused and records nothing.
    say(&app, "sunny", Some(&genied::db::new_id()), "x")
        .await
        .err(404, "NOT_FOUND");
    assert_eq!(app.count("conversations").await, 1);
    assert_eq!(llm.requests().len(), 2);
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
        json!({"page_slug": "helper", "web_welcome_message": "Ask me anything",
               "first_message": "Hi, I am Helper & glad you came."}),
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
        const log = document.getElementById('log');
        // The greeting is there, and visible, before anything is sent.
        const first = log.children.length + ':' + (log.offsetParent !== null) + ':' + (log.children[0] ? log.children[0].className + ':' + log.children[0].textContent : '');
        document.getElementById('message').value = 'Hello from a real browser';
        document.getElementById('chat-form').requestSubmit();
        for (let i = 0; i < 2400 && log.children.length < 3; i++) await wait(25);
        return first + ' | ' + log.textContent + ' | ' + document.getElementById('status').textContent;
    })()"#;
    let log = page.evaluate(script).await;
    let log = log
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| format!("no string in {log}"));
    drop(browser);
    assert!(
        log.starts_with("1:true:agent:Helper: Hi, I am Helper & glad you came. | "),
        "the greeting opens the visible chat log: {log}"
    );
    assert!(log.contains("Hello from a real browser"), "page log: {log}");
    assert!(
        log.contains("This assistant can't chat right now."),
        "the page shows the reply: {log}"
    );
    assert!(!log.contains("--llm-base-url"), "{log}");

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
    assert_eq!(
        turns(&transcript),
        vec![
            ("agent".into(), "Hi, I am Helper & glad you came.".into()),
            ("user".into(), "Hello from a real browser".into()),
        ]
    );
}
