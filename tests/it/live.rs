//! Live conversations on a genie's page: genie `tools` (validation, the full object, clone,
//! marketplace without credentials), tool calls during a chat (a webhook tool with an
//! injected credential, the built-ins, failures the model sees), the conversation's end
//! (visitor, genie, idle) and its durable follow-up, SSE streaming, and the ElevenLabs
//! mapping of the tools.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::fakes::elevenlabs::{FakeElevenLabs, KEY};
use crate::common::fakes::http_api::FakeApi;
use crate::common::fakes::openai::{Completion, Expect, FakeOpenAi, Turn};
use crate::common::*;

const SECRET: &str = "tool-secret-4711-xyz";

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

async fn store_credential(app: &TestApp, owner: &User, name: &str) {
    app.call(
        &owner.token,
        "worker-genies",
        "store-credential",
        None,
        json!({"name": name, "credential_type": "api_key", "value": SECRET, "header_name": "X-Shop-Key"}),
    )
    .await
    .ok(201);
}

async fn get_conversation(app: &TestApp, owner: &User, id: &str) -> Value {
    app.call(
        &owner.token,
        "conversations",
        "get",
        Some(json!(id)),
        json!({}),
    )
    .await
    .ok(200)["conversation"]
        .clone()
}

/// Waits (up to 60 s) until `f` holds for the conversation.
async fn wait_conversation(
    app: &TestApp,
    owner: &User,
    id: &str,
    what: &str,
    f: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let c = get_conversation(app, owner, id).await;
        if f(&c) {
            return c;
        }
        assert!(Instant::now() < deadline, "{what}: {c}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn webhook_tool(url: &str) -> Value {
    json!({"type": "webhook", "name": "lookup_order", "description": "Look up an order by its id",
           "parameters": {"type": "object", "properties": {"order_id": {"type": "string", "pattern": "^[A-Z][0-9]+$"}},
                          "required": ["order_id"], "additionalProperties": false},
           "url": url, "method": "POST", "credential_ref": "shop", "timeout_seconds": 5})
}

#[tokio::test]
async fn tools_are_validated_kept_cloned_and_published_without_credentials() {
    let app = TestApp::spawn().await;
    let owner = app.standard().await;
    store_credential(&app, &owner, "shop").await;
    let tools = json!([webhook_tool("https://shop.example.com/orders"), {"type": "search_knowledge_base"},
                       {"type": "capture_lead"}, {"type": "end_conversation"}, {"type": "transfer_to_human"}]);
    let r = app
        .call(
            &owner.token,
            "genies",
            "create",
            None,
            json!({"genieName": "Shop helper", "tools": tools, "allowedOrigins": ["https://shop.example.com/"]}),
        )
        .await;
    let g = r.ok(201)["genie"].clone();
    let gid = g["id"].as_str().unwrap().to_string();
    assert_eq!(g["tools"].as_array().unwrap().len(), 5, "{g}");
    assert_eq!(g["tools"][0]["credential_ref"], "shop");
    assert_eq!(g["tools"][0]["method"], "POST");
    assert_eq!(g["allowed_origins"], json!(["https://shop.example.com"]));

    // Bad tools are refused with the tool named, and change nothing.
    let before = app.count("genies").await;
    for (bad, needle) in [
        (
            json!([{"type": "webhook", "name": "x", "description": "d", "url": "ftp://a.b", "parameters": {"type": "object"}}]),
            "data.tools[0] (x): url",
        ),
        (
            json!([{"type": "capture_lead"}, {"type": "webhook", "name": "y", "description": "d", "url": "https://a.example", "parameters": {"type": "object", "properties": {"a": {"type": 5}}}}]),
            "data.tools[1] (y): parameters",
        ),
        (
            json!([{"type": "teleport"}]),
            "data.tools[0]: type 'teleport'",
        ),
        (
            json!([{"type": "webhook", "name": "z", "description": "d", "url": "https://a.example", "credential_ref": "nope"}]),
            "data.tools[0] (z): credential_ref 'nope'",
        ),
        (
            json!([{"type": "webhook", "name": "t", "description": "d", "url": "https://a.example", "timeout_seconds": 99}]),
            "data.tools[0] (t): timeout_seconds",
        ),
    ] {
        let r = app
            .call(
                &owner.token,
                "genies",
                "create",
                None,
                json!({"genieName": "Bad", "tools": bad}),
            )
            .await;
        r.err(400, "VALIDATION_ERROR");
        let msg = r.body["error"]["message"].as_str().unwrap();
        assert!(msg.contains(needle), "{msg} should contain {needle}");
    }
    assert_eq!(app.count("genies").await, before);
    let r = app
        .call(
            &owner.token,
            "genies",
            "update",
            Some(json!(gid)),
            json!({"tools": [{"type": "webhook"}]}),
        )
        .await;
    r.err(400, "VALIDATION_ERROR");
    let r = app
        .call(&owner.token, "genies", "get", Some(json!(gid)), json!({}))
        .await;
    assert_eq!(r.ok(200)["genie"]["tools"].as_array().unwrap().len(), 5);
    let r = app
        .call(
            &owner.token,
            "genies",
            "update",
            Some(json!(gid)),
            json!({"allowed_origins": ["https://a.example/path"]}),
        )
        .await;
    r.err(400, "VALIDATION_ERROR");

    // A clone keeps the tools.
    let r = app
        .call(&owner.token, "genies", "clone", Some(json!(gid)), json!({}))
        .await;
    assert_eq!(r.ok(201)["genie"]["tools"], g["tools"]);

    // A marketplace template carries the tools but never the credential reference.
    let r = app
        .call(
            &owner.token,
            "marketplace",
            "publish",
            None,
            json!({"genieId": gid}),
        )
        .await;
    let listing = r.ok(201)["listing"].clone();
    let other = app.standard().await;
    let r = app
        .call(
            &other.token,
            "marketplace",
            "install",
            Some(listing["id"].clone()),
            json!({}),
        )
        .await;
    let installed = r.body["data"]["genie"].clone();
    assert_eq!(
        installed["tools"].as_array().map(Vec::len),
        Some(5),
        "{}",
        r.body
    );
    assert!(
        installed["tools"][0].get("credential_ref").is_none(),
        "{installed}"
    );
    assert_eq!(
        installed["tools"][0]["url"],
        "https://shop.example.com/orders"
    );
}

#[tokio::test]
async fn a_webhook_tool_at_an_internal_address_is_refused() {
    let app = TestApp::spawn_with(|c| c.allow_private_outbound = false).await;
    let owner = app.standard().await;
    for url in [
        "http://127.0.0.1:9/x",
        "http://169.254.169.254/latest",
        "http://10.1.2.3/",
    ] {
        let r = app
            .call(
                &owner.token,
                "genies",
                "create",
                None,
                json!({"genieName": "Nosy", "tools": [{"type": "webhook", "name": "peek", "description": "d", "url": url}]}),
            )
            .await;
        r.err(400, "VALIDATION_ERROR");
        let msg = r.body["error"]["message"].as_str().unwrap();
        assert!(
            msg.contains("data.tools[0] (peek): url") && msg.contains("not allowed"),
            "{msg}"
        );
    }
    assert_eq!(app.count("genies").await, 0);

    // A tool stored before (or by a name that resolves inside) is refused at call time: the
    // model reads the refusal, the conversation goes on.
    let api = FakeApi::start().await;
    let llm = FakeOpenAi::start(Expect::Any).await;
    let app = app
        .restart_with(|c| {
            llm.configure(c);
            c.allow_private_outbound = false;
        })
        .await;
    let owner = app.standard().await;
    llm.expect_page_tools(&["peek"]);
    let tools = json!([{"type": "webhook", "name": "peek", "description": "d", "url": format!("{}/x", api.base),
                        "method": "POST", "timeout_seconds": 5, "parameters": {"type": "object"}}]);
    insert_genie_with(
        &app,
        &owner,
        "Nosy",
        json!({"page_slug": "nosy", "tools": tools}),
    )
    .await;
    llm.push([
        Turn::Tools(vec![("peek", json!({}))]),
        Turn::Answer("I cannot look that up."),
    ]);
    let r = say(&app, "nosy", None, "peek please").await;
    assert_eq!(r.ok(200)["reply"], "I cannot look that up.");
    assert_eq!(
        r.data()["tool_steps"],
        json!([{"name": "peek", "ok": false}])
    );
    assert!(api.seen().is_empty(), "the internal endpoint was reached");
    let reqs = llm.requests();
    let tool_msg = reqs[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(tool_msg["role"], "tool");
    assert!(
        tool_msg["content"]
            .as_str()
            .unwrap()
            .contains("not allowed"),
        "{tool_msg}"
    );
    assert!(llm.problems().is_empty(), "{:?}", llm.problems());
}

#[tokio::test]
async fn the_page_chat_calls_webhook_and_built_in_tools_and_records_each_call() {
    let llm = FakeOpenAi::start(Expect::Any).await;
    let api = FakeApi::start().await;
    api.expect("/orders", "x-shop-key", SECRET);
    let app = TestApp::spawn_with(|c| llm.configure(c)).await;
    let owner = app.standard().await;
    store_credential(&app, &owner, "shop").await;
    let tools = json!([webhook_tool(&format!("{}/orders", api.base)), {"type": "search_knowledge_base"},
                       {"type": "capture_lead"}, {"type": "transfer_to_human"}]);
    let gid = insert_genie_with(
        &app,
        &owner,
        "Shop",
        json!({"page_slug": "shop", "tools": tools, "llm_model": "shop-model", "temperature": 0.2}),
    )
    .await;
    let doc = app
        .call(&owner.token, "knowledge-base", "create", None,
              json!({"title": "Shipping", "content": "Parcels leave the warehouse every Tuesday.", "agentId": gid}))
        .await;
    let doc_id = doc.ok(201)["document"]["id"].as_str().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        app.run_jobs().await;
        let r = app
            .call(
                &owner.token,
                "knowledge-base",
                "get",
                Some(json!(doc_id)),
                json!({}),
            )
            .await;
        if r.ok(200)["document"]["status"] == "completed" {
            break;
        }
        assert!(Instant::now() < deadline, "{}", r.body);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    llm.expect_page_tools(&[
        "lookup_order",
        "search_knowledge_base",
        "capture_lead",
        "transfer_to_human",
    ]);
    llm.expect_completion(Completion {
        model: "shop-model".into(),
        temperature: Some(0.2),
        max_tokens: None,
        system_contains: vec![],
        nowhere: vec![SECRET.into()],
        select: None,
    });
    llm.push([
        Turn::Tools(vec![
            ("lookup_order", json!({"order_id": "A17"})),
            (
                "search_knowledge_base",
                json!({"query": "when do parcels leave the warehouse"}),
            ),
        ]),
        // Arguments that break the schema: the endpoint is not called.
        Turn::Tools(vec![("lookup_order", json!({"order_id": "bad id"}))]),
        Turn::Tools(vec![
            (
                "capture_lead",
                json!({"name": "Ann Lee", "email": "ann@example.com"}),
            ),
            ("transfer_to_human", json!({"reason": "wants a refund"})),
        ]),
        Turn::Answer("Order A17 leaves on Tuesday; a colleague will call you."),
    ]);
    let r = say(&app, "shop", None, "Where is my order A17?").await;
    let d = r.ok(200).clone();
    assert_eq!(
        d["reply"],
        "Order A17 leaves on Tuesday; a colleague will call you."
    );
    assert_eq!(
        d["tool_steps"],
        json!([{"name": "lookup_order", "ok": true}, {"name": "search_knowledge_base", "ok": true},
               {"name": "lookup_order", "ok": false}, {"name": "capture_lead", "ok": true},
               {"name": "transfer_to_human", "ok": true}])
    );
    assert!(llm.problems().is_empty(), "{:?}", llm.problems());

    // The endpoint got one call: the arguments as the JSON body, the credential injected.
    let seen = api.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(
        (seen[0].method.as_str(), seen[0].path.as_str()),
        ("POST", "/orders")
    );
    assert_eq!(
        serde_json::from_str::<Value>(&seen[0].body).unwrap(),
        json!({"order_id": "A17"})
    );
    assert_eq!(seen[0].header("x-shop-key"), Some(SECRET));
    assert!(
        seen[0]
            .header("content-type")
            .is_some_and(|c| c.starts_with("application/json"))
    );

    // The model read the results: the endpoint's echo redacted, the passage with its document.
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 4);
    let msgs = reqs[1].body["messages"].as_array().unwrap();
    let results: Vec<&str> = msgs
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert!(
        results[0].contains("[redacted]") && !results[0].contains(SECRET),
        "{}",
        results[0]
    );
    assert!(
        results[1].contains("every Tuesday") && results[1].contains("Shipping"),
        "{}",
        results[1]
    );
    let msgs = reqs[2].body["messages"].as_array().unwrap();
    assert!(
        msgs.last().unwrap()["content"]
            .as_str()
            .unwrap()
            .contains("invalid arguments"),
        "{msgs:?}"
    );
    for r in &reqs {
        assert!(
            !r.body.to_string().contains(SECRET),
            "a credential reached the model"
        );
    }

    // Every call is recorded on the conversation, never the credential.
    let cid = d["conversation_id"].as_str().unwrap();
    let c = get_conversation(&app, &owner, cid).await;
    let text = c.to_string();
    assert!(
        !text.contains(SECRET),
        "a credential in the transcript: {text}"
    );
    let agent = c["transcript"].as_array().unwrap().last().unwrap().clone();
    let calls = agent["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 5, "{agent}");
    assert_eq!(calls[0]["name"], "lookup_order");
    assert_eq!(calls[0]["arguments"], json!({"order_id": "A17"}));
    assert_eq!(calls[0]["result"]["ok"], true);
    assert!(calls[0]["duration_ms"].is_u64());
    assert!(
        calls[2]["error"]
            .as_str()
            .unwrap()
            .contains("invalid arguments")
    );
    assert!(calls[2].get("result").is_none());
    assert_eq!(
        c["metadata"]["transfer_requested"]["reason"],
        "wants a refund"
    );
    assert_eq!(c["status"], "in-progress");

    // capture_lead made the conversation's lead; transfer_to_human notified the owner.
    let r = app
        .call(&owner.token, "leads", "all", None, json!({}))
        .await;
    let leads = r.ok(200)["leads"].as_array().unwrap().clone();
    assert_eq!(leads.len(), 1, "{leads:?}");
    assert_eq!(leads[0]["email"], "ann@example.com");
    assert_eq!(leads[0]["name"], "Ann Lee");
    let r = app
        .call(&owner.token, "notifications", "all", None, json!({}))
        .await;
    let notes = r.ok(200).to_string();
    assert!(notes.contains("wants a refund"), "{notes}");
}

#[tokio::test]
async fn a_slow_tool_is_cut_at_its_timeout_and_the_model_hears_it() {
    let llm = FakeOpenAi::start(Expect::Any).await;
    let api = FakeApi::start().await;
    let app = TestApp::spawn_with(|c| llm.configure(c)).await;
    let owner = app.standard().await;
    let tools = json!([{"type": "webhook", "name": "slow", "description": "d", "url": format!("{}/slow", api.base),
                        "method": "GET", "timeout_seconds": 1, "parameters": {"type": "object"}}]);
    insert_genie_with(
        &app,
        &owner,
        "Slow",
        json!({"page_slug": "slowpoke", "tools": tools}),
    )
    .await;
    llm.expect_page_tools(&["slow"]);
    llm.push([
        Turn::Tools(vec![("slow", json!({"q": "x"}))]),
        Turn::Answer("It took too long."),
    ]);
    let t = Instant::now();
    let r = say(&app, "slowpoke", None, "try it").await;
    assert_eq!(r.ok(200)["reply"], "It took too long.");
    assert!(t.elapsed() < Duration::from_secs(15), "{:?}", t.elapsed());
    assert_eq!(api.seen()[0].path, "/slow");
    let reqs = llm.requests();
    let last = reqs[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(
        last["content"]
            .as_str()
            .unwrap()
            .contains("did not answer within 1 s"),
        "{last}"
    );
}

#[tokio::test]
async fn conversations_end_by_visitor_genie_or_idleness_and_are_followed_up() {
    let llm = FakeOpenAi::start(Expect::Any).await;
    let app = TestApp::spawn_with(|c| {
        llm.configure(c);
        c.conversation_idle_timeout_seconds = 2;
    })
    .await;
    let owner = app.standard().await;
    let mut events = app.state.bus.subscribe();
    insert_genie_with(
        &app,
        &owner,
        "Ender",
        json!({"page_slug": "ender", "tools": [{"type": "end_conversation"}],
               "send_conversation_reports": true, "support_emails": ["boss@example.com"]}),
    )
    .await;
    llm.expect_page_tools(&["end_conversation"]);

    // The visitor ends it.
    llm.push([Turn::Answer("Hello!")]);
    let r = say(&app, "ender", None, "hi, I am ann@example.com").await;
    let cid = r.ok(200)["conversation_id"].as_str().unwrap().to_string();
    let end = |id: &str| {
        app.raw(
            Method::POST,
            "/g/ender/chat/end",
            &[("content-type", "application/json")],
            json!({"conversation_id": id}).to_string(),
        )
    };
    end("not-a-uuid").await.err(400, "VALIDATION_ERROR");
    end(&genied::db::new_id()).await.err(404, "NOT_FOUND");
    let r = end(&cid).await;
    assert_eq!(r.ok(200)["already_ended"], false);
    assert_eq!(end(&cid).await.ok(200)["already_ended"], true);
    let c = wait_conversation(&app, &owner, &cid, "analysed", |c| !c["analysis"].is_null()).await;
    assert_eq!(c["status"], "done");
    assert_eq!(c["metadata"]["ended_by"], "visitor");
    // A message to an ended conversation does not reopen it.
    say(&app, "ender", Some(&cid), "still there?")
        .await
        .err(404, "NOT_FOUND");
    let deadline = Instant::now() + Duration::from_secs(60);
    let completed = loop {
        let e = tokio::time::timeout(Duration::from_secs(60), events.recv())
            .await
            .unwrap()
            .unwrap();
        if e.kind == "conversation.completed" {
            break e;
        }
        assert!(Instant::now() < deadline);
    };
    assert_eq!(completed.data["id"], json!(cid));
    assert_eq!(
        completed.data["lead"]["email"], "ann@example.com",
        "{}",
        completed.data
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while app.count("email_logs").await < 1 {
        assert!(Instant::now() < deadline, "the report was never sent");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // The genie ends it.
    llm.push([
        Turn::Tools(vec![("end_conversation", json!({"reason": "done"}))]),
        Turn::Answer("Goodbye!"),
    ]);
    let r = say(&app, "ender", None, "that's all, bye").await;
    let d = r.ok(200).clone();
    assert_eq!(d["ended"], true);
    let cid2 = d["conversation_id"].as_str().unwrap();
    let c = wait_conversation(&app, &owner, cid2, "analysed", |c| !c["analysis"].is_null()).await;
    assert_eq!(
        (c["status"].as_str(), c["metadata"]["ended_by"].as_str()),
        (Some("done"), Some("genie"))
    );

    // Idleness ends it (2 s here).
    llm.push([Turn::Answer("Hi!")]);
    let r = say(&app, "ender", None, "hello").await;
    let cid3 = r.ok(200)["conversation_id"].as_str().unwrap().to_string();
    let c = wait_conversation(&app, &owner, &cid3, "ended when idle", |c| {
        c["status"] == "done" && !c["analysis"].is_null()
    })
    .await;
    assert_eq!(c["metadata"]["ended_by"], "idle");
    assert!(c["duration_seconds"].as_i64().unwrap() >= 0);
    assert!(llm.problems().is_empty(), "{:?}", llm.problems());
}

#[tokio::test]
async fn an_ending_survives_a_crash_before_its_follow_up() {
    // The worker never polls on its own here; the first instance stops before it runs.
    let app = TestApp::spawn_with(|c| c.job_poll_ms = 3_600_000).await;
    let owner = app.standard().await;
    insert_genie_with(
        &app,
        &owner,
        "Crashy",
        json!({"page_slug": "crashy", "send_conversation_reports": true, "support_emails": ["boss@example.com"]}),
    )
    .await;
    let r = say(&app, "crashy", None, "my email is bob@example.com").await;
    let cid = r.ok(200)["conversation_id"].as_str().unwrap().to_string();
    // The ending commits, and the process stops before anything follows it up.
    let c2 = cid.clone();
    let ended = app
        .state
        .db
        .write(move |c| genied::service::page_chat::end_in(c, &c2, "visitor"))
        .await
        .unwrap();
    assert!(ended);
    let c = get_conversation(&app, &owner, &cid).await;
    assert!(c["analysis"].is_null());
    assert_eq!(app.count("email_logs").await, 0);
    let app = app.restart_with(|c| c.job_poll_ms = 20).await;
    let c = wait_conversation(&app, &owner, &cid, "followed up after the restart", |c| {
        !c["analysis"].is_null()
    })
    .await;
    assert_eq!(c["status"], "done");
    let deadline = Instant::now() + Duration::from_secs(60);
    while app.count("email_logs").await < 1 {
        assert!(Instant::now() < deadline, "the report was never sent");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let r = app
        .call(&owner.token, "leads", "all", None, json!({}))
        .await;
    assert_eq!(r.ok(200)["leads"][0]["email"], "bob@example.com");
}

/// Reads a whole SSE answer: (event, data, ms since the request) per event.
async fn sse(
    app: &TestApp,
    slug: &str,
    conversation: Option<&str>,
    message: &str,
) -> Vec<(String, Value, u128)> {
    use futures::StreamExt;
    let t = Instant::now();
    let resp = app
        .client
        .post(format!("{}/g/{slug}/chat", app.base))
        .header("accept", "text/event-stream")
        .json(&json!({"conversation_id": conversation, "message": message}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let mut body = resp.bytes_stream();
    let mut buf = String::new();
    let mut out = Vec::new();
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(60), body.next())
        .await
        .unwrap()
    {
        buf.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        while let Some(end) = buf.find("\n\n") {
            let block: String = buf.drain(..end + 2).collect();
            let mut event = "message".to_string();
            let mut data = String::new();
            for line in block.lines() {
                if let Some(e) = line.strip_prefix("event: ") {
                    event = e.to_string();
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data.push_str(d);
                }
            }
            if !data.is_empty() {
                out.push((
                    event,
                    serde_json::from_str(&data).unwrap(),
                    t.elapsed().as_millis(),
                ));
            }
        }
    }
    out
}

#[tokio::test]
async fn replies_stream_as_server_sent_events_with_tool_steps() {
    let llm = FakeOpenAi::start(Expect::Any).await;
    let app = TestApp::spawn_with(|c| llm.configure(c)).await;
    let owner = app.standard().await;
    insert_genie_with(
        &app,
        &owner,
        "Streamy",
        json!({"page_slug": "streamy", "tools": [{"type": "capture_lead"}]}),
    )
    .await;
    llm.expect_page_tools(&["capture_lead"]);
    llm.push([
        Turn::Tools(vec![(
            "capture_lead",
            json!({"name": "Cy", "phone": "+15550100"}),
        )]),
        Turn::Paced(
            Duration::from_millis(400),
            vec!["Thanks ", "Cy, ", "noted."],
        ),
    ]);
    let evs = sse(&app, "streamy", None, "I'm Cy, call +15550100").await;
    let kinds: Vec<&str> = evs.iter().map(|(e, _, _)| e.as_str()).collect();
    assert_eq!(
        kinds,
        ["tool", "tool", "token", "token", "token", "done"],
        "{evs:?}"
    );
    assert_eq!(
        evs[0].1,
        json!({"name": "capture_lead", "status": "running"})
    );
    assert_eq!(evs[1].1["status"], "done");
    let tokens: Vec<&str> = evs[2..5]
        .iter()
        .map(|(_, d, _)| d["text"].as_str().unwrap())
        .collect();
    assert_eq!(tokens, ["Thanks ", "Cy, ", "noted."]);
    // Each token was passed on as it came, not when the answer was complete: the first
    // reached the client well before the last was even sent (800 ms later).
    assert!(evs[4].2 >= evs[2].2 + 500, "{evs:?}");
    let done = &evs[5].1;
    assert_eq!(done["reply"], "Thanks Cy, noted.");
    assert_eq!(
        done["tool_steps"],
        json!([{"name": "capture_lead", "ok": true}])
    );
    for r in llm.requests() {
        assert_eq!(r.body["stream"], true);
    }
    assert!(llm.problems().is_empty(), "{:?}", llm.problems());
    let cid = done["conversation_id"].as_str().unwrap();
    let c = get_conversation(&app, &owner, cid).await;
    let last = c["transcript"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["message"], "Thanks Cy, noted.");
    assert_eq!(last["tool_calls"][0]["name"], "capture_lead");

    // Without the Accept header: today's JSON.
    llm.push([Turn::Answer("Plain.")]);
    let r = say(&app, "streamy", Some(cid), "and now?").await;
    assert_eq!(r.ok(200)["reply"], "Plain.");
    assert!(llm.requests().last().unwrap().body.get("stream").is_none());

    // A failure is one `error` event with the envelope's error.
    llm.push([Turn::Raw(500, json!({"error": "down"}))]);
    let evs = sse(&app, "streamy", Some(cid), "again").await;
    assert_eq!(evs.len(), 1, "{evs:?}");
    assert_eq!(evs[0].0, "error");
    assert_eq!(evs[0].1["code"], "UPSTREAM_ERROR");
    assert_eq!(evs[0].1["status"], 502);
}

#[tokio::test]
async fn streams_count_against_the_per_address_chat_limit() {
    let app = TestApp::spawn_with(|c| c.public_chat_rate_limit_per_minute = 1).await;
    let owner = app.standard().await;
    insert_genie_with(&app, &owner, "Limited", json!({"page_slug": "limited"})).await;
    let evs = sse(&app, "limited", None, "one").await;
    assert_eq!(evs.last().unwrap().0, "done");
    let r = app
        .raw(
            Method::POST,
            "/g/limited/chat",
            &[
                ("content-type", "application/json"),
                ("accept", "text/event-stream"),
            ],
            r#"{"message": "two"}"#,
        )
        .await;
    r.err(429, "RATE_LIMIT_EXCEEDED");
}

#[tokio::test]
async fn elevenlabs_gets_webhook_tools_as_server_tools_and_built_ins_as_equivalents() {
    let fake = FakeElevenLabs::start().await;
    let voice: genied::voice::DynVoice = std::sync::Arc::new(
        genied::voice::elevenlabs::ElevenLabs::new(
            &format!("{}/", fake.base),
            genied::config::Secret(KEY.into()),
            std::time::Duration::from_millis(1),
        )
        .unwrap(),
    );
    let app = TestApp::spawn_with_voice(voice, |_| {}).await;
    let owner = app.standard().await;
    store_credential(&app, &owner, "shop").await;
    let tools = json!([
        {"type": "webhook", "name": "book_slot", "description": "Book a slot", "url": "https://cal.example.com/book",
         "method": "POST", "parameters": {"type": "object", "properties": {"day": {"type": "string"}}, "required": ["day"]}},
        {"type": "webhook", "name": "find_slot", "description": "Find free slots", "url": "https://cal.example.com/free",
         "method": "GET", "timeout_seconds": 7, "parameters": {"type": "object", "properties": {"day": {"type": "string"}}}},
        webhook_tool("https://shop.example.com/orders"),
        {"type": "search_knowledge_base"}, {"type": "capture_lead"}, {"type": "end_conversation"}, {"type": "transfer_to_human"}
    ]);
    let r = app
        .call(
            &owner.token,
            "genies",
            "create",
            None,
            json!({"genieName": "Cal", "tools": tools}),
        )
        .await;
    let gid = r.ok(201)["genie"]["id"].as_str().unwrap().to_string();
    let create = fake
        .requests()
        .into_iter()
        .find(|r| r.path == "/v1/convai/agents/create")
        .unwrap();
    let prompt = &create.body["conversation_config"]["agent"]["prompt"];
    assert_eq!(
        prompt["tools"],
        json!([
            {"type": "webhook", "name": "book_slot", "description": "Book a slot", "response_timeout_secs": 10,
             "api_schema": {"url": "https://cal.example.com/book", "method": "POST",
                            "request_body_schema": {"type": "object", "description": "Book a slot",
                                                    "properties": {"day": {"type": "string"}}, "required": ["day"]}}},
            {"type": "webhook", "name": "find_slot", "description": "Find free slots", "response_timeout_secs": 7,
             "api_schema": {"url": "https://cal.example.com/free", "method": "GET",
                            "query_params_schema": {"properties": {"day": {"type": "string"}}, "required": []}}},
            {"type": "system", "name": "end_call", "description": "End the call once the caller is done (after saying goodbye)."}
        ]),
        "the tool with a credential is not pushed: {prompt}"
    );
    assert_eq!(prompt["rag"], json!({"enabled": true}));
    let dc = &create.body["platform_settings"]["data_collection"];
    assert_eq!(dc["lead_email"]["type"], "string");
    assert_eq!(dc["transfer_to_human"]["type"], "boolean");
    assert!(!create.body.to_string().contains(SECRET));

    // Removing the tools removes them at the provider too.
    let r = app
        .call(
            &owner.token,
            "genies",
            "update",
            Some(json!(gid)),
            json!({"tools": []}),
        )
        .await;
    r.ok(200);
    let agent_id = fake
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.method == "PATCH")
        .unwrap()
        .path;
    let agent = fake.agent(agent_id.rsplit('/').next().unwrap()).unwrap();
    assert_eq!(
        agent["conversation_config"]["agent"]["prompt"]["tools"],
        json!([])
    );
}

/// Opens the page of `slug` in headless Chromium with `stub` run before the page's own
/// scripts (it must set `window.__stubbed = true`), and waits for the page to be ready.
async fn stubbed_page(
    app: &TestApp,
    slug: &str,
    stub: &str,
) -> (
    crate::common::browser::Browser,
    crate::common::browser::Page,
) {
    let url = format!("{}/g/{slug}", app.base);
    let browser = crate::common::browser::Browser::launch(&url).await;
    let mut page = browser.page(&url).await;
    let r = page.call("Page.enable", json!({})).await;
    assert!(r["error"].is_null(), "{r}");
    let r = page
        .call(
            "Page.addScriptToEvaluateOnNewDocument",
            json!({"source": stub}),
        )
        .await;
    assert!(r["error"].is_null(), "{r}");
    let r = page.call("Page.navigate", json!({"url": url})).await;
    assert!(r["error"].is_null(), "{r}");
    let ready = page
        .evaluate(
            r#"(async () => {
                const wait = (ms) => new Promise(r => setTimeout(r, ms));
                for (let i = 0; i < 2000 && !(window.__stubbed && document.readyState === 'complete' && document.getElementById('start')); i++) await wait(25);
                return !!window.__stubbed;
            })()"#,
        )
        .await;
    assert_eq!(ready, json!(true), "the stub never ran");
    (browser, page)
}

#[tokio::test]
async fn the_page_streams_shows_tool_steps_and_ends_in_a_real_browser() {
    let llm = FakeOpenAi::start(Expect::Any).await;
    let app = TestApp::spawn_with(|c| llm.configure(c)).await;
    let owner = app.standard().await;
    insert_genie_with(&app, &owner, "Booker",
        json!({"page_slug": "booker", "tools": [{"type": "capture_lead"}, {"type": "end_conversation"}]})).await;
    llm.expect_page_tools(&["capture_lead", "end_conversation"]);
    llm.push([
        Turn::Tools(vec![(
            "capture_lead",
            json!({"name": "Dee", "email": "dee@example.com"}),
        )]),
        Turn::Paced(
            Duration::from_millis(300),
            vec!["Saved, ", "Dee. ", "Anything else?"],
        ),
    ]);
    let (browser, mut page) = stubbed_page(&app, "booker", "window.__stubbed = true;").await;
    let script = r#"(async () => {
        const wait = (ms) => new Promise(r => setTimeout(r, ms));
        document.getElementById('start').click();
        const log = document.getElementById('log');
        document.getElementById('message').value = 'I am Dee, dee@example.com';
        document.getElementById('chat-form').requestSubmit();
        // The reply grows token by token: record the partial texts seen.
        const seen = [];
        for (let i = 0; i < 2400; i++) {
            const agent = log.querySelector('li.agent');
            const t = agent ? agent.textContent : '';
            if (t && seen[seen.length - 1] !== t) seen.push(t);
            if (t.endsWith('Anything else?') && !document.getElementById('send').disabled) break;
            await wait(10);
        }
        const steps = Array.from(log.querySelectorAll('li.step')).map(li => li.textContent);
        document.getElementById('end').click();
        for (let i = 0; i < 2400 && !log.textContent.includes('You ended the conversation.'); i++) await wait(25);
        return JSON.stringify({seen, steps, log: log.textContent, status: document.getElementById('status').textContent});
    })()"#;
    let out = page.evaluate(script).await;
    drop(browser);
    let out: Value = serde_json::from_str(out.as_str().unwrap()).unwrap();
    let seen: Vec<String> = serde_json::from_value(out["seen"].clone()).unwrap();
    assert!(
        seen.len() >= 2 && !seen[0].ends_with("Anything else?"),
        "the reply did not grow piece by piece: {out}"
    );
    assert!(
        seen.last().unwrap().ends_with("Saved, Dee. Anything else?"),
        "{out}"
    );
    assert_eq!(out["steps"], json!(["Looked up capture lead"]), "{out}");
    assert!(
        out["log"]
            .as_str()
            .unwrap()
            .contains("You ended the conversation."),
        "{out}"
    );
    assert_eq!(out["status"], "", "{out}");
    assert!(llm.problems().is_empty(), "{:?}", llm.problems());
    let r = app
        .call(
            &owner.token,
            "conversations",
            "all",
            None,
            json!({"channel": "web"}),
        )
        .await;
    let id = r.ok(200)["conversations"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let c = wait_conversation(&app, &owner, &id, "ended", |c| c["status"] == "done").await;
    assert_eq!(c["metadata"]["ended_by"], "visitor");
    let r = app
        .call(&owner.token, "leads", "all", None, json!({}))
        .await;
    assert_eq!(r.ok(200)["leads"][0]["email"], "dee@example.com");
}

/// Chromium here has no microphone: the speech APIs are stubbed in the page. The stub
/// records what is handed to speech synthesis and lets the test deliver a recognition result.
const SPEECH_STUB: &str = r#"
    window.__spoken = [];
    function FakeRecognition() { window.__recognition = this; this.started = 0; }
    FakeRecognition.prototype.start = function () { this.started++; window.__listening = this.lang; };
    FakeRecognition.prototype.abort = function () {};
    FakeRecognition.prototype.stop = function () {};
    Object.defineProperty(window, 'SpeechRecognition', {value: FakeRecognition, configurable: true});
    Object.defineProperty(window, 'webkitSpeechRecognition', {value: FakeRecognition, configurable: true});
    function FakeUtterance(text) { this.text = text; }
    Object.defineProperty(window, 'SpeechSynthesisUtterance', {value: FakeUtterance, configurable: true});
    Object.defineProperty(window, 'speechSynthesis', {configurable: true, value: {
        speak: function (u) { window.__spoken.push({text: u.text, lang: u.lang, rate: u.rate}); },
        cancel: function () {}
    }});
    window.__stubbed = true;
"#;

#[tokio::test]
async fn talk_mode_sends_what_was_heard_and_speaks_the_reply_in_the_genies_voice() {
    let llm = FakeOpenAi::start(Expect::Any).await;
    let app = TestApp::spawn_with(|c| llm.configure(c)).await;
    let owner = app.standard().await;
    insert_genie_with(
        &app,
        &owner,
        "Sprecher",
        json!({"page_slug": "sprecher",
        "settings": {"conversation_config": {"agent": {"language": "de"}, "tts": {"speed": 1.2}}}}),
    )
    .await;
    llm.push([Turn::Answer("Wir öffnen um neun Uhr.")]);
    let (browser, mut page) = stubbed_page(&app, "sprecher", SPEECH_STUB).await;
    let script = r#"(async () => {
        const wait = (ms) => new Promise(r => setTimeout(r, ms));
        document.getElementById('start').click();
        const talk = document.getElementById('talk');
        const note = document.getElementById('talk-note');
        talk.click();
        for (let i = 0; i < 2000 && !window.__listening; i++) await wait(25);
        const listening = window.__listening;
        window.__recognition.onresult({results: [[{transcript: ' Wann öffnet ihr? '}]]});
        for (let i = 0; i < 2400 && window.__spoken.length < 1; i++) await wait(25);
        return JSON.stringify({listening, pressed: talk.getAttribute('aria-pressed'), noteHidden: note.hidden,
            spoken: window.__spoken, log: document.getElementById('log').textContent});
    })()"#;
    let out = page.evaluate(script).await;
    drop(browser);
    let out: Value = serde_json::from_str(out.as_str().unwrap()).unwrap();
    assert_eq!(
        out["listening"], "de",
        "recognition in the genie's language: {out}"
    );
    assert_eq!(out["pressed"], "true");
    assert_eq!(out["noteHidden"], true);
    assert_eq!(
        out["spoken"],
        json!([{"text": "Wir öffnen um neun Uhr.", "lang": "de", "rate": 1.2}]),
        "the reply goes to speech synthesis in the genie's language and speed: {out}"
    );
    assert!(
        out["log"].as_str().unwrap().contains("Wann öffnet ihr?"),
        "{out}"
    );
    // The recognised text is what the model was asked.
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 1);
    let last = reqs[0].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last, json!({"role": "user", "content": "Wann öffnet ihr?"}));
}

#[tokio::test]
async fn without_speech_recognition_the_page_says_so_and_text_still_works() {
    let app = TestApp::spawn().await;
    let owner = app.standard().await;
    insert_genie_with(&app, &owner, "Quiet", json!({"page_slug": "quiet"})).await;
    let stub = r#"
        Object.defineProperty(window, 'SpeechRecognition', {value: undefined, configurable: true});
        Object.defineProperty(window, 'webkitSpeechRecognition', {value: undefined, configurable: true});
        window.__stubbed = true;
    "#;
    let (browser, mut page) = stubbed_page(&app, "quiet", stub).await;
    let script = r#"(async () => {
        const wait = (ms) => new Promise(r => setTimeout(r, ms));
        document.getElementById('start').click();
        const note = document.getElementById('talk-note');
        document.getElementById('message').value = 'typed';
        document.getElementById('chat-form').requestSubmit();
        const log = document.getElementById('log');
        for (let i = 0; i < 2400 && log.children.length < 2; i++) await wait(25);
        return JSON.stringify({disabled: document.getElementById('talk').disabled, hidden: note.hidden,
            note: note.textContent, log: log.textContent});
    })()"#;
    let out = page.evaluate(script).await;
    drop(browser);
    let out: Value = serde_json::from_str(out.as_str().unwrap()).unwrap();
    assert_eq!(
        (out["disabled"].clone(), out["hidden"].clone()),
        (json!(true), json!(false)),
        "{out}"
    );
    assert!(
        out["note"]
            .as_str()
            .unwrap()
            .contains("no speech recognition"),
        "{out}"
    );
    assert!(
        out["log"]
            .as_str()
            .unwrap()
            .contains("This assistant can't chat right now."),
        "{out}"
    );
}

#[tokio::test]
async fn the_widget_follows_the_genies_allowed_origins() {
    let app = TestApp::spawn().await;
    let owner = app.standard().await;
    insert_genie_with(
        &app,
        &owner,
        "Widget",
        json!({"page_slug": "widget",
        "allowed_origins": ["https://shop.example.com"]}),
    )
    .await;
    // The script, for an allowed site, with the list it checks in the page.
    let r = app
        .client
        .get(format!("{}/g/widget/embed.js", app.base))
        .header("referer", "https://shop.example.com/products/1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/javascript")
    );
    let js = r.text().await.unwrap();
    assert!(
        js.contains(r#"ALLOWED = ["https://shop.example.com"], REFUSED = false"#),
        "{js}"
    );
    assert!(js.contains(&format!("BASE = \"{}\"", app.base)), "{js}");
    // A site not allowed gets a script that only says why.
    let r = app
        .client
        .get(format!("{}/g/widget/embed.js", app.base))
        .header("referer", "https://evil.example.net/")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert!(r.text().await.unwrap().contains("REFUSED = true"));
    let r = app
        .client
        .get(format!("{}/g/nope/embed.js", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    assert!(r.text().await.unwrap().contains("no active genie 'nope'"));

    // Frames: genied's own pages and the allowed sites only.
    let r = app
        .client
        .get(format!("{}/g/widget", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.headers()["content-security-policy"].to_str().unwrap(),
        "frame-ancestors 'self' https://shop.example.com"
    );

    // CORS on the chat: the allowed site is answered with its origin, others refused.
    let pre = app
        .client
        .request(Method::OPTIONS, format!("{}/g/widget/chat", app.base))
        .header("origin", "https://shop.example.com")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert_eq!(pre.status(), 204);
    assert_eq!(
        pre.headers()["access-control-allow-origin"],
        "https://shop.example.com"
    );
    let r = app
        .raw(
            Method::POST,
            "/g/widget/chat",
            &[
                ("content-type", "application/json"),
                ("origin", "https://shop.example.com"),
            ],
            r#"{"message": "hi"}"#,
        )
        .await;
    r.ok(200);
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("https://shop.example.com")
    );
    let before = app.count("conversations").await;
    let r = app
        .raw(
            Method::POST,
            "/g/widget/chat",
            &[
                ("content-type", "application/json"),
                ("origin", "https://evil.example.net"),
            ],
            r#"{"message": "hi"}"#,
        )
        .await;
    r.err(403, "FORBIDDEN");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("https://evil.example.net")
    );
    assert!(r.header("access-control-allow-origin").is_none());
    assert_eq!(app.count("conversations").await, before);
    // The page's own requests (same origin) pass.
    let r = app
        .raw(
            Method::POST,
            "/g/widget/chat",
            &[("content-type", "application/json"), ("origin", &app.base)],
            r#"{"message": "hi"}"#,
        )
        .await;
    r.ok(200);

    // In a real browser: the widget mounts on genied's own page (always allowed) and opens
    // the genie's page in its frame.
    let host = format!("{}/g/widget", app.base);
    let browser = crate::common::browser::Browser::launch(&host).await;
    let mut page = browser.page(&host).await;
    let script = format!(
        r#"(async () => {{
        const wait = (ms) => new Promise(r => setTimeout(r, ms));
        for (let i = 0; i < 2000 && document.readyState !== 'complete'; i++) await wait(25);
        const s = document.createElement('script');
        s.src = '{}/g/widget/embed.js';
        document.head.appendChild(s);
        for (let i = 0; i < 2000 && !document.getElementById('genied-bubble'); i++) await wait(25);
        document.getElementById('genied-bubble').click();
        const f = document.getElementById('genied-frame');
        for (let i = 0; i < 2000 && !(f.contentDocument && f.contentDocument.getElementById('start')); i++) await wait(25);
        return f.getAttribute('src') + ' ' + !!f.contentDocument.getElementById('start');
    }})()"#,
        app.base
    );
    let out = page.evaluate(&script).await;
    drop(browser);
    assert_eq!(out, json!(format!("{}/g/widget?embed=1 true", app.base)));
}
