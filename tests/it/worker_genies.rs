//! worker-genies over real HTTP: CRUD and validation, credentials (encrypted, never shown,
//! injected into a fake API), the LLM tool loop against a scripted fake OpenAI endpoint,
//! memory across runs and restarts, query_data isolation, schedule and event triggers,
//! crash recovery, step limit, timeout, cancel, plaintext absence and key rotation.

use std::time::Duration;

use genied::events::Event;
use reqwest::Method;
use serde_json::{Value, json};

use crate::common::fakes::http_api::FakeApi;
use crate::common::fakes::openai::{Expect, FakeOpenAi, Turn};
use crate::common::*;

const R: &str = "worker-genies";

async fn create(app: &TestApp, u: &User, data: Value) -> Value {
    app.call(&u.token, R, "create", None, data).await.ok(201)["worker_genie"].clone()
}

fn basic(name: &str) -> Value {
    json!({"name": name, "soul_prompt": "You watch things.", "trigger_type": "manual"})
}

async fn runs_of(app: &TestApp, u: &User, genie: &str) -> Vec<Value> {
    let r = app
        .call(&u.token, R, "runs", Some(json!(genie)), json!({}))
        .await;
    r.ok(200)["items"].as_array().unwrap().clone()
}

/// Polls until the run has ended (bounded).
async fn wait_run(app: &TestApp, u: &User, genie: &str, run: &str) -> Value {
    for _ in 0..500 {
        let items = runs_of(app, u, genie).await;
        let r = items
            .iter()
            .find(|r| r["id"] == run)
            .expect("run listed")
            .clone();
        if !matches!(r["status"].as_str(), Some("queued" | "running")) {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("run {run} did not end");
}

async fn wait_runs(app: &TestApp, u: &User, genie: &str, n: usize) -> Vec<Value> {
    for _ in 0..500 {
        let items = runs_of(app, u, genie).await;
        if items.len() >= n {
            return items;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("fewer than {n} runs of {genie}");
}

async fn start_run(app: &TestApp, u: &User, genie: &str, data: Value) -> String {
    let r = app.call(&u.token, R, "run", Some(json!(genie)), data).await;
    let run = &r.ok(202)["run"];
    assert_eq!(run["status"], "queued");
    assert_eq!(run["worker_genie_id"], json!(genie));
    assert_eq!(run["trigger"], "manual");
    run["id"].as_str().unwrap().to_string()
}

async fn store(app: &TestApp, u: &User, data: Value) -> Value {
    app.call(&u.token, R, "store-credential", None, data)
        .await
        .ok(201)["credential"]
        .clone()
}

/// The tool steps of a finished run, in order.
fn tool_steps(run: &Value) -> Vec<Value> {
    run["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["type"] == "tool")
        .cloned()
        .collect()
}

#[tokio::test]
async fn crud_validation_and_ownership() {
    let app = TestApp::spawn().await;
    let (a, b) = (app.standard().await, app.standard().await);

    let g = create(
        &app,
        &a,
        json!({"name": "Daily digest", "soul_prompt": "Summarise.", "trigger_type": "schedule",
               "schedule": "0 9 * * 1-5", "timezone": "Europe/Berlin", "max_steps": 5, "llm_model": "m1"}),
    )
    .await;
    let id = g["id"].as_str().unwrap().to_string();
    assert_eq!(g["name"], "Daily digest");
    assert_eq!(g["trigger_type"], "schedule");
    assert_eq!(g["schedule"], "0 9 * * 1-5");
    assert_eq!(g["timezone"], "Europe/Berlin");
    assert_eq!(g["credential_refs"], json!([]));
    assert_eq!(g["is_active"], true);
    assert_eq!(g["max_steps"], 5);
    assert_eq!(g["llm_model"], "m1");
    assert!(g.get("user_id").is_none());

    // Bad input: 400 naming the field, nothing created.
    for (data, field) in [
        (json!({"soul_prompt": "x"}), "data"),
        (
            json!({"name": "x", "soul_prompt": "x", "trigger_type": "sometimes"}),
            "data.trigger_type",
        ),
        (
            json!({"name": "x", "soul_prompt": "x", "trigger_type": "schedule"}),
            "data.schedule",
        ),
        (
            json!({"name": "x", "soul_prompt": "x", "trigger_type": "schedule", "schedule": "61 * * * *"}),
            "data.schedule",
        ),
        (
            json!({"name": "x", "soul_prompt": "x", "trigger_type": "schedule", "schedule": "*/5 * * * * *"}),
            "data.schedule",
        ),
        (
            json!({"name": "x", "soul_prompt": "x", "timezone": "Mars/Olympus"}),
            "data.timezone",
        ),
        (
            json!({"name": "x", "soul_prompt": "x", "trigger_type": "event", "event_type": "lead.exploded"}),
            "data.event_type",
        ),
        (
            json!({"name": "x", "soul_prompt": "x", "credential_refs": ["nope"]}),
            "data.credential_refs",
        ),
        (
            json!({"name": "x", "soul_prompt": "x", "max_steps": 0}),
            "data.max_steps",
        ),
        (
            json!({"name": "x", "soul_prompt": "x", "colour": "red"}),
            "data",
        ),
    ] {
        let r = app.call(&a.token, R, "create", None, data.clone()).await;
        r.err(400, "VALIDATION_ERROR");
        let msg = r.body["error"]["message"].as_str().unwrap();
        assert!(msg.contains(field), "{data} -> {msg}");
    }
    assert_eq!(app.count("worker_genies").await, 1);

    // get adds recent_runs; list/all are {items, count}; REST routes too.
    let got = app
        .call(&a.token, R, "get", Some(json!(id)), json!({}))
        .await;
    let d = got.ok(200);
    assert_eq!(d["worker_genie"]["id"], json!(id));
    assert_eq!(d["recent_runs"], json!([]));
    for action in ["all", "list"] {
        let d = app
            .call(&a.token, R, action, None, json!({}))
            .await
            .ok(200)
            .clone();
        assert_eq!(d["count"], 1);
        assert_eq!(d["items"][0]["id"], json!(id));
    }
    let d = app
        .request(Method::GET, "/v1/worker-genies", Some(&a.token), None)
        .await
        .ok(200)
        .clone();
    assert_eq!(d["count"], 1);
    let d = app
        .request(
            Method::GET,
            &format!("/v1/worker-genies/{id}"),
            Some(&a.token),
            None,
        )
        .await
        .ok(200)
        .clone();
    assert_eq!(d["worker_genie"]["name"], "Daily digest");

    // Update: partial; switching to manual clears the schedule; invalid changes nothing.
    let r = app
        .call(
            &a.token,
            R,
            "update",
            Some(json!(id)),
            json!({"schedule": "bad"}),
        )
        .await;
    r.err(400, "VALIDATION_ERROR");
    let r = app
        .call(
            &a.token,
            R,
            "update",
            Some(json!(id)),
            json!({"owner": "x"}),
        )
        .await;
    r.err(400, "VALIDATION_ERROR");
    let u = app
        .call(
            &a.token,
            R,
            "update",
            Some(json!(id)),
            json!({"name": "Digest", "trigger_type": "manual"}),
        )
        .await;
    let w = &u.ok(200)["worker_genie"];
    assert_eq!(w["name"], "Digest");
    assert_eq!(w["trigger_type"], "manual");
    assert_eq!(w["schedule"], Value::Null);
    assert_eq!(w["soul_prompt"], "Summarise.");
    assert_eq!(w["max_steps"], 5);

    // Another user's genie is absent.
    for action in ["get", "update", "delete", "run", "runs"] {
        let data = if action == "update" {
            json!({"name": "stolen"})
        } else {
            json!({})
        };
        app.call(&b.token, R, action, Some(json!(id)), data)
            .await
            .err(404, "NOT_FOUND");
    }
    assert_eq!(
        app.call(&b.token, R, "list", None, json!({})).await.ok(200)["count"],
        0
    );
    app.call(&a.token, R, "get", Some(json!("not-a-uuid")), json!({}))
        .await
        .err(400, "VALIDATION_ERROR");
    app.call(&a.token, R, "explode", None, json!({}))
        .await
        .err(400, "INVALID_ACTION");
    let c = app.consumer().await;
    app.call(&c.token, R, "create", None, basic("x"))
        .await
        .err(403, "FORBIDDEN");

    // Delete removes the run history.
    let run = start_run(&app, &a, &id, json!({})).await;
    wait_run(&app, &a, &id, &run).await;
    assert_eq!(app.count("worker_runs").await, 1);
    let d = app
        .call(&a.token, R, "delete", Some(json!(id)), json!({}))
        .await
        .ok(200)
        .clone();
    assert_eq!(d, json!({"id": id, "deleted": true}));
    assert_eq!(app.count("worker_runs").await, 0);
    app.call(&a.token, R, "get", Some(json!(id)), json!({}))
        .await
        .err(404, "NOT_FOUND");
}

#[tokio::test]
async fn run_without_llm_fails_with_how_to_configure() {
    let app = TestApp::spawn().await;
    let a = app.standard().await;
    let g = create(&app, &a, basic("w")).await;
    let gid = g["id"].as_str().unwrap();
    let run = start_run(&app, &a, gid, json!({"topic": "x"})).await;
    let r = wait_run(&app, &a, gid, &run).await;
    assert_eq!(r["status"], "failed");
    assert!(
        r["error"].as_str().unwrap().contains("--llm-base-url"),
        "{r}"
    );
    assert_eq!(r["input"]["data"]["topic"], "x");
    assert!(r["finished_at"].is_string() && r["started_at"].is_string());
    // Listing all runs of the user, and a finished run cannot be cancelled.
    let all = app
        .call(&a.token, R, "runs", None, json!({}))
        .await
        .ok(200)
        .clone();
    assert_eq!(all["count"], 1);
    app.call(&a.token, R, "cancel", Some(json!(run)), json!({}))
        .await
        .err(409, "CONFLICT");
    app.call(
        &a.token,
        R,
        "cancel",
        Some(json!(genied::db::new_id())),
        json!({}),
    )
    .await
    .err(404, "NOT_FOUND");
    let got = app
        .call(&a.token, R, "get", Some(json!(gid)), json!({}))
        .await;
    assert_eq!(got.ok(200)["recent_runs"][0]["id"], json!(run));
}

#[tokio::test]
async fn credentials_store_list_test_delete() {
    let api = FakeApi::start().await;
    api.expect("/bearer", "authorization", "Bearer tok-123");
    let app = TestApp::spawn().await;
    let (a, b) = (app.standard().await, app.standard().await);

    let c = store(&app, &a, json!({"name": "svc", "credential_type": "bearer_token", "value": "tok-123", "url_prefix": format!("{}/bearer", api.base)})).await;
    assert_eq!(c["name"], "svc");
    assert_eq!(c["credential_type"], "bearer_token");
    assert!(c["id"].is_string() && c["created_at"].is_string());
    assert!(c.get("value").is_none());
    assert!(!c.to_string().contains("tok-123"));

    // REST style: members at the top level of the body.
    let r = app
        .request(Method::POST, "/v1/worker-genies", Some(&a.token),
            Some(json!({"action": "store-credential", "name": "k2", "credential_type": "api_key", "value": "key-456", "header_name": "X-Token"})))
        .await;
    assert_eq!(r.ok(201)["credential"]["name"], "k2");

    // Bad input and duplicates change nothing.
    for data in [
        json!({"name": "x", "credential_type": "password", "value": "v"}),
        json!({"name": "x", "credential_type": "basic_auth", "value": "no-colon"}),
        json!({"name": "", "credential_type": "api_key", "value": "v"}),
        json!({"name": "x", "credential_type": "api_key"}),
        json!({"name": "x", "credential_type": "bearer_token", "value": "v", "url_prefix": "ftp://x"}),
    ] {
        app.call(&a.token, R, "store-credential", None, data)
            .await
            .err(400, "VALIDATION_ERROR");
    }
    app.call(
        &a.token,
        R,
        "store-credential",
        None,
        json!({"name": "svc", "credential_type": "api_key", "value": "v"}),
    )
    .await
    .err(409, "CONFLICT");
    assert_eq!(app.count("credentials").await, 2);

    let list = app
        .call(&a.token, R, "list-credentials", None, json!({}))
        .await;
    let d = list.ok(200);
    assert_eq!(d["count"], 2);
    assert!(!d.to_string().contains("tok-123") && !d.to_string().contains("key-456"));
    assert_eq!(
        app.call(&b.token, R, "list-credentials", None, json!({}))
            .await
            .ok(200)["count"],
        0
    );

    // test-credential: stored by name, with and without a request; a new value; wrong value.
    let t = app
        .call(&a.token, R, "test-credential", None, json!({"name": "svc"}))
        .await;
    assert_eq!(t.ok(200)["status"], "ok");
    let t = app
        .call(
            &a.token,
            R,
            "test-credential",
            None,
            json!({"name": "svc", "url": format!("{}/bearer/me", api.base)}),
        )
        .await;
    let d = t.ok(200);
    assert_eq!(d["status"], "ok", "{d}");
    assert_eq!(d["request"]["status_code"], 200);
    assert!(!d.to_string().contains("tok-123"), "{d}");
    let seen = api.seen();
    assert_eq!(
        seen.last().unwrap().header("authorization"),
        Some("Bearer tok-123")
    );
    let t = app
        .call(
            &a.token,
            R,
            "test-credential",
            None,
            json!({"credential_type": "bearer_token", "value": "wrong", "url": format!("{}/bearer/me", api.base)}),
        )
        .await;
    let d = t.ok(200);
    assert_eq!(d["status"], "failed");
    assert_eq!(d["request"]["status_code"], 401);
    assert_eq!(d["credential"]["source"], "new");
    // The credential is bound to its prefix: a URL outside it is refused.
    app.call(
        &a.token,
        R,
        "test-credential",
        None,
        json!({"name": "svc", "url": format!("{}/other", api.base)}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    app.call(&b.token, R, "test-credential", None, json!({"name": "svc"}))
        .await
        .err(404, "NOT_FOUND");
    assert_eq!(app.count("credentials").await, 2);

    // A referenced credential cannot be deleted; another user's reads as absent.
    let g = create(
        &app,
        &a,
        json!({"name": "w", "soul_prompt": "x", "credential_refs": ["svc"]}),
    )
    .await;
    assert_eq!(g["credential_refs"], json!(["svc"]));
    let cid = c["id"].as_str().unwrap();
    app.call(
        &a.token,
        R,
        "delete-credential",
        Some(json!(cid)),
        json!({}),
    )
    .await
    .err(409, "CONFLICT");
    app.call(
        &b.token,
        R,
        "delete-credential",
        Some(json!(cid)),
        json!({}),
    )
    .await
    .err(404, "NOT_FOUND");
    app.call(
        &a.token,
        R,
        "update",
        Some(g["id"].clone()),
        json!({"credential_refs": []}),
    )
    .await
    .ok(200);
    let d = app
        .call(
            &a.token,
            R,
            "delete-credential",
            Some(json!(cid)),
            json!({}),
        )
        .await
        .ok(200)
        .clone();
    assert_eq!(d, json!({"id": cid, "deleted": true}));
    assert_eq!(app.count("credentials").await, 1);
}

async fn insert_genie_and_lead(app: &TestApp, user: &str, lead_name: &str) {
    let (u, n) = (user.to_string(), lead_name.to_string());
    app.state
        .db
        .write(move |c| {
            let gid = genied::db::new_id();
            let now = genied::db::now();
            c.execute(
                "INSERT INTO genies (id, user_id, name, name_lower, llm_model, created_at, updated_at) VALUES (?1, ?2, 'Agent', 'agent', 'm', ?3, ?3)",
                rusqlite::params![gid, u, now],
            )?;
            c.execute(
                "INSERT INTO leads (agent_id, user_id, name, email, status, created_at)
                 VALUES (genied_key(?1), genied_key(?2), ?3, 'x@example.test', 'new', ?4)",
                rusqlite::params![gid, u, n, genied::db::now_ms()],
            )?;
            Ok(())
        })
        .await
        .unwrap();
}

#[tokio::test]
async fn tool_loop_calls_every_tool_with_credentials_injected() {
    let llm = FakeOpenAi::start(Expect::Worker).await;
    let api = FakeApi::start().await;
    let marker = format!("MARKER-{}", uuid::Uuid::new_v4().simple());
    api.expect("/secure", "authorization", &format!("Bearer {marker}"));
    api.expect("/keyed", "x-api-key", "k-789");
    let app = TestApp::spawn_with(|c| llm.configure(c)).await;
    let (a, b) = (app.standard().await, app.standard().await);
    insert_genie_and_lead(&app, &a.id, "Alice Lead").await;
    insert_genie_and_lead(&app, &b.id, "Bob Lead").await;
    let mut events = app.state.bus.subscribe();

    store(&app, &a, json!({"name": "crm", "credential_type": "bearer_token", "value": marker, "url_prefix": format!("{}/secure", api.base)})).await;
    store(&app, &a, json!({"name": "k", "credential_type": "api_key", "value": "k-789", "url_prefix": format!("{}/keyed", api.base)})).await;
    let g = create(
        &app,
        &a,
        json!({"name": "Agent 7", "soul_prompt": "SOUL-PROMPT-7", "credential_refs": ["crm", "k"], "max_steps": 8}),
    )
    .await;
    let gid = g["id"].as_str().unwrap().to_string();

    llm.push([
        Turn::Tools(vec![
            ("web_fetch", json!({"url": format!("{}/secure/items", api.base), "method": "POST", "body": {"q": 1}})),
            ("web_fetch", json!({"url": format!("{}/keyed/x", api.base)})),
            ("web_fetch", json!({"url": format!("{}/open", api.base), "method": "DELETE"})),
        ]),
        Turn::Tools(vec![("memory_write", json!({"key": "seen", "value": {"n": 3}}))]),
        Turn::Tools(vec![("memory_read", json!({"key": "seen"}))]),
        Turn::Tools(vec![("query_data", json!({"table": "leads", "filters": {"status": "new"}}))]),
        Turn::Tools(vec![("query_data", json!({"table": "leads", "filters": {"user_id": "x"}}))]),
        Turn::Tools(vec![("notify_owner", json!({"title": "Found leads", "body": "1 new lead"}))]),
        Turn::Answer("All done: 1 lead."),
    ]);
    let run = start_run(&app, &a, &gid, json!({"hint": "go"})).await;
    let r = wait_run(&app, &a, &gid, &run).await;
    assert_eq!(llm.problems(), Vec::<String>::new());
    assert_eq!(r["status"], "succeeded", "{r}");
    assert_eq!(r["output"], "All done: 1 lead.");
    assert_eq!(r["error"], Value::Null);
    assert_eq!(r["usage"]["total_tokens"], 7 * 15);
    assert!(r["duration_ms"].is_i64());

    // The model saw the soul prompt, the input, and tool results in order.
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 7);
    assert!(
        reqs[0].body["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("SOUL-PROMPT-7")
    );
    assert!(
        reqs[0].body["messages"][1]["content"]
            .as_str()
            .unwrap()
            .contains("\"hint\": \"go\"")
    );
    assert_eq!(reqs[0].body["model"], "fake-model");

    let steps = r["steps"].as_array().unwrap();
    let tools: Vec<&Value> = steps.iter().filter(|s| s["type"] == "tool").collect();
    assert_eq!(steps.iter().filter(|s| s["type"] == "llm").count(), 7);
    assert_eq!(tools.len(), 8);
    // web_fetch: credentials injected by prefix only.
    assert_eq!(tools[0]["tool"], "web_fetch");
    assert_eq!(tools[0]["result"]["status"], 200, "{}", tools[0]);
    assert_eq!(tools[0]["result"]["credentials_injected"], json!(["crm"]));
    assert_eq!(tools[1]["result"]["status"], 200);
    assert_eq!(tools[1]["result"]["credentials_injected"], json!(["k"]));
    assert_eq!(tools[2]["result"]["status"], 200);
    assert_eq!(tools[2]["result"]["credentials_injected"], json!([]));
    let seen = api.seen();
    assert_eq!(seen.len(), 3);
    assert_eq!(
        (seen[0].method.as_str(), seen[0].path.as_str()),
        ("POST", "/secure/items")
    );
    assert_eq!(
        seen[0].header("authorization"),
        Some(format!("Bearer {marker}").as_str())
    );
    assert_eq!(seen[0].header("content-type"), Some("application/json"));
    assert_eq!(seen[0].body, r#"{"q":1}"#);
    assert_eq!(seen[1].header("x-api-key"), Some("k-789"));
    assert_eq!(seen[1].header("authorization"), None);
    assert_eq!(seen[2].method, "DELETE");
    assert_eq!(seen[2].header("authorization"), None);
    assert_eq!(seen[2].header("x-api-key"), None);
    // The fake echoed the headers back; the secret is redacted before the model sees it.
    assert!(!r.to_string().contains(&marker));
    assert!(
        !llm.requests()
            .iter()
            .any(|q| q.body.to_string().contains(&marker))
    );
    // memory
    assert_eq!(tools[3]["result"]["written"], true);
    assert_eq!(tools[4]["result"]["value"], json!({"n": 3}));
    // query_data: only the owner's rows; unknown columns refused.
    assert_eq!(tools[5]["ok"], true);
    assert_eq!(tools[5]["result"]["count"], 1);
    assert_eq!(tools[5]["result"]["rows"][0]["name"], "Alice Lead");
    assert_eq!(tools[6]["ok"], false);
    assert!(
        tools[6]["result"]["error"]
            .as_str()
            .unwrap()
            .contains("not a column")
    );
    // notify_owner
    assert_eq!(tools[7]["result"]["dashboard"], true);
    let (uid, n) = (a.id.clone(), 0);
    let notes: i64 = app
        .state
        .db
        .read(move |c| {
            Ok(c.query_row(
                "SELECT COUNT(*) FROM notifications WHERE user_id = ?1 AND title = 'Found leads'",
                [uid],
                |r| r.get(0),
            )?)
        })
        .await
        .unwrap();
    assert_eq!(notes, 1 + n);

    // The run's event.
    let ev = loop {
        let e = tokio::time::timeout(Duration::from_secs(5), events.recv())
            .await
            .unwrap()
            .unwrap();
        if e.kind.starts_with("worker_run.") {
            break e;
        }
    };
    assert_eq!(ev.kind, "worker_run.succeeded");
    assert_eq!(ev.data["id"], json!(run));

    // The plaintext secret is nowhere in the database files.
    let bytes = stored_bytes(&app);
    assert!(
        !bytes.windows(marker.len()).any(|w| w == marker.as_bytes()),
        "plaintext secret in the database"
    );
}

#[tokio::test]
async fn query_data_never_sees_another_users_rows() {
    let llm = FakeOpenAi::start(Expect::Worker).await;
    let app = TestApp::spawn_with(|c| llm.configure(c)).await;
    let (a, b) = (app.standard().await, app.standard().await);
    insert_genie_and_lead(&app, &b.id, "Bob Lead").await;
    let g = create(&app, &a, basic("q")).await;
    let gid = g["id"].as_str().unwrap();
    llm.push([
        Turn::Tools(vec![
            ("query_data", json!({"table": "leads"})),
            ("query_data", json!({"table": "agents"})),
            ("query_data", json!({"table": "lead_activities"})),
            ("query_data", json!({"table": "call_logs", "limit": 5})),
            ("query_data", json!({"table": "users"})),
        ]),
        Turn::Answer("ok"),
    ]);
    let run = start_run(&app, &a, gid, json!({})).await;
    let r = wait_run(&app, &a, gid, &run).await;
    assert_eq!(r["status"], "succeeded");
    let tools = tool_steps(&r);
    for t in &tools[..4] {
        assert_eq!(t["ok"], true, "{t}");
        assert_eq!(t["result"]["count"], 0, "{t}");
    }
    assert_eq!(tools[4]["ok"], false);
    assert!(
        tools[4]["result"]["error"]
            .as_str()
            .unwrap()
            .contains("unknown table")
    );
}

/// `lead_activities` in `query_data` lists a lead's "created" entry, kept on the lead row, as
/// getLogs answers it, and another user's entries not at all.
#[tokio::test]
async fn query_data_lists_lead_activities_as_get_logs_answers_them() {
    let llm = FakeOpenAi::start(Expect::Worker).await;
    let app = TestApp::spawn_with(|c| llm.configure(c)).await;
    let (a, b) = (app.standard().await, app.standard().await);
    let mut logs = Vec::new();
    for u in [&a, &b] {
        let g = insert_genie(&app, u, "G").await;
        let lead = app
            .call(&u.token, "leads", "create", None, json!({"agent_id": g}))
            .await
            .ok(201)["lead"]["id"]
            .clone();
        app.call(
            &u.token,
            "leads",
            "log",
            Some(lead.clone()),
            json!({"type": "call"}),
        )
        .await
        .ok(201);
        logs.push(
            app.call(&u.token, "leads", "getLogs", Some(lead), json!({}))
                .await
                .ok(200)["activities"]
                .clone(),
        );
    }
    let wg = create(&app, &a, basic("q")).await;
    let wg = wg["id"].as_str().unwrap();
    llm.push([
        Turn::Tools(vec![("query_data", json!({"table": "lead_activities"}))]),
        Turn::Answer("ok"),
    ]);
    let run = start_run(&app, &a, wg, json!({})).await;
    let r = wait_run(&app, &a, wg, &run).await;
    assert_eq!(r["status"], "succeeded");
    let step = r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["type"] == "tool")
        .unwrap()
        .clone();
    assert_eq!(step["ok"], true, "{step}");
    // getLogs' entries without user_id, which query_data does not list.
    let want: Vec<Value> = logs[0]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let mut e = e.clone();
            e.as_object_mut().unwrap().remove("user_id");
            e
        })
        .collect();
    assert_eq!(want.len(), 2);
    assert_eq!(want[1]["type"], json!("created"));
    assert_eq!(step["result"]["total"], json!(2), "{step}");
    let mut got = step["result"]["rows"].as_array().unwrap().clone();
    got.sort_by_key(|e| std::cmp::Reverse(e["id"].as_i64()));
    assert_eq!(got, want);
}

/// A lead's times are stored as milliseconds (V40): `query_data` answers them as RFC 3339
/// text, filters by the instant whatever form the time is written in, and refuses a filter
/// value on them that is not a time.
#[tokio::test]
async fn query_data_compares_lead_times_as_instants() {
    let llm = FakeOpenAi::start(Expect::Worker).await;
    let app = TestApp::spawn_with(|c| llm.configure(c)).await;
    let a = app.standard().await;
    let g = insert_genie(&app, &a, "G").await;
    let mut leads = Vec::new();
    for name in ["one", "two"] {
        let l = app
            .call(
                &a.token,
                "leads",
                "create",
                None,
                json!({"agent_id": g, "name": name}),
            )
            .await;
        leads.push(l.ok(201)["lead"].clone());
    }
    let at = leads[0]["created_at"].as_str().unwrap().to_string();
    let ms = chrono::DateTime::parse_from_rfc3339(&at)
        .unwrap()
        .timestamp_millis();
    let next_ms = genied::db::ms_text(ms + 1);
    // The leads made in that millisecond (the second may share it).
    let mut want: Vec<Value> = leads
        .iter()
        .filter(|l| l["created_at"] == json!(at))
        .map(|l| l["id"].clone())
        .collect();
    want.sort_by_key(|v| v.as_i64());
    let wg = create(&app, &a, basic("q")).await;
    let wg = wg["id"].as_str().unwrap();
    llm.push([
        Turn::Tools(vec![
            (
                "query_data",
                json!({"table": "leads", "filters": {"created_at": at.replace('Z', "+00:00")}}),
            ),
            (
                "query_data",
                json!({"table": "leads", "created_after": at, "created_before": next_ms}),
            ),
            (
                "query_data",
                json!({"table": "leads", "filters": {"updated_at": "yesterday"}}),
            ),
        ]),
        Turn::Answer("ok"),
    ]);
    let run = start_run(&app, &a, wg, json!({})).await;
    let r = wait_run(&app, &a, wg, &run).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    let steps = tool_steps(&r);
    assert_eq!(steps.len(), 3, "{r}");
    for step in &steps[..2] {
        assert_eq!(step["ok"], true, "{step}");
        let rows = step["result"]["rows"].as_array().unwrap();
        let mut ids: Vec<Value> = rows.iter().map(|l| l["id"].clone()).collect();
        ids.sort_by_key(|v| v.as_i64());
        assert_eq!(ids, want, "{step}");
        assert!(rows.iter().all(|l| l["created_at"] == json!(at)), "{step}");
    }
    assert_eq!(steps[2]["ok"], false, "{}", steps[2]);
    assert!(
        steps[2]
            .to_string()
            .contains("'updated_at' must be an RFC 3339 timestamp"),
        "{}",
        steps[2]
    );
}

#[tokio::test]
async fn memory_persists_across_runs_and_restarts() {
    let llm = FakeOpenAi::start(Expect::Worker).await;
    let app = TestApp::spawn_with(|c| llm.configure(c)).await;
    let a = app.standard().await;
    let g1 = create(&app, &a, basic("one")).await;
    let g2 = create(&app, &a, basic("two")).await;
    let (g1, g2) = (
        g1["id"].as_str().unwrap().to_string(),
        g2["id"].as_str().unwrap().to_string(),
    );
    llm.push([
        Turn::Tools(vec![
            ("memory_write", json!({"key": "last", "value": "v1"})),
            (
                "memory_write",
                json!({"key": "shared", "value": [1, 2], "scope": "account"}),
            ),
        ]),
        Turn::Answer("stored"),
    ]);
    let run = start_run(&app, &a, &g1, json!({})).await;
    assert_eq!(wait_run(&app, &a, &g1, &run).await["status"], "succeeded");

    let app = app.restart().await;
    llm.push([
        Turn::Tools(vec![
            ("memory_read", json!({"key": "last"})),
            ("memory_read", json!({"key": "shared", "scope": "account"})),
            ("memory_read", json!({})),
        ]),
        Turn::Answer("read"),
    ]);
    let run = start_run(&app, &a, &g1, json!({})).await;
    let r = wait_run(&app, &a, &g1, &run).await;
    let tools = tool_steps(&r);
    assert_eq!(tools[0]["result"]["value"], "v1");
    assert_eq!(tools[1]["result"]["value"], json!([1, 2]));
    assert_eq!(tools[2]["result"]["keys"], json!(["last"]));
    // Genie scope is per genie; account scope is shared.
    llm.push([
        Turn::Tools(vec![
            ("memory_read", json!({"key": "last"})),
            ("memory_read", json!({"key": "shared", "scope": "account"})),
        ]),
        Turn::Answer("read"),
    ]);
    let run = start_run(&app, &a, &g2, json!({})).await;
    let r = wait_run(&app, &a, &g2, &run).await;
    let tools = tool_steps(&r);
    assert_eq!(tools[0]["result"]["found"], false);
    assert_eq!(tools[1]["result"]["value"], json!([1, 2]));
    assert_eq!(llm.problems(), Vec::<String>::new());
}

#[tokio::test]
async fn schedule_fires_and_enqueues_runs() {
    let app = TestApp::spawn_with(|c| c.worker_allow_seconds_cron = true).await;
    let a = app.standard().await;
    let g = create(
        &app,
        &a,
        json!({"name": "tick", "soul_prompt": "x", "trigger_type": "schedule", "schedule": "* * * * * *"}),
    )
    .await;
    let gid = g["id"].as_str().unwrap().to_string();
    let runs = wait_runs(&app, &a, &gid, 1).await;
    assert_eq!(runs[0]["trigger"], "schedule");
    assert_eq!(runs[0]["input"]["schedule"], "* * * * * *");
    // Deactivated: the job is removed; runs already queued finish, no new ones appear.
    app.call(
        &a.token,
        R,
        "update",
        Some(json!(gid)),
        json!({"is_active": false}),
    )
    .await
    .ok(200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let settled = runs_of(&app, &a, &gid).await.len();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        runs_of(&app, &a, &gid).await.len(),
        settled,
        "an inactive schedule must not fire"
    );
    // A restarted service registers schedules again.
    app.call(
        &a.token,
        R,
        "update",
        Some(json!(gid)),
        json!({"is_active": true}),
    )
    .await
    .ok(200);
    let app = app.restart().await;
    let before = runs_of(&app, &a, &gid).await.len();
    wait_runs(&app, &a, &gid, before + 1).await;
}

#[tokio::test]
async fn event_trigger_fires_on_lead_created_for_the_owner_only() {
    let app = TestApp::spawn().await;
    let (a, b) = (app.standard().await, app.standard().await);
    let g = create(
        &app,
        &a,
        json!({"name": "on lead", "soul_prompt": "x", "trigger_type": "event", "event_type": "lead.created"}),
    )
    .await;
    let gid = g["id"].as_str().unwrap().to_string();
    assert_eq!(g["event_type"], "lead.created");
    app.raise(Event::new(
        "lead.created",
        &b.id,
        json!({"id": 1, "name": "Not yours"}),
    ))
    .await;
    app.raise(Event::new(
        "lead.updated",
        &a.id,
        json!({"id": 2, "name": "Other event"}),
    ))
    .await;
    app.raise(Event::new(
        "lead.created",
        &a.id,
        json!({"id": 3, "name": "Ann"}),
    ))
    .await;
    let runs = wait_runs(&app, &a, &gid, 1).await;
    let run = wait_run(&app, &a, &gid, runs[0]["id"].as_str().unwrap()).await;
    assert_eq!(run["trigger"], "event");
    assert_eq!(run["input"]["event"]["type"], "lead.created");
    assert_eq!(run["input"]["event"]["data"]["name"], "Ann");
    // Its own failure event does not trigger more runs, and nothing else matched.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(runs_of(&app, &a, &gid).await.len(), 1);
}

#[tokio::test]
async fn run_events_trigger_one_hop_and_never_loop() {
    let app = TestApp::spawn().await;
    let a = app.standard().await;
    let src = create(&app, &a, basic("source")).await;
    let sid = src["id"].as_str().unwrap().to_string();
    let mut watchers = Vec::new();
    for n in ["w1", "w2"] {
        let w = create(
            &app,
            &a,
            json!({"name": n, "soul_prompt": "x", "trigger_type": "event", "event_type": "worker_run.failed"}),
        )
        .await;
        watchers.push(w["id"].as_str().unwrap().to_string());
    }
    // The source run fails (no LLM); each watcher runs once for it, and their own failures
    // trigger nothing more (neither themselves nor each other).
    let run = start_run(&app, &a, &sid, json!({})).await;
    wait_run(&app, &a, &sid, &run).await;
    for w in &watchers {
        let runs = wait_runs(&app, &a, w, 1).await;
        wait_run(&app, &a, w, runs[0]["id"].as_str().unwrap()).await;
        assert_eq!(
            runs[0]["input"]["event"]["data"]["worker_genie_id"],
            json!(sid)
        );
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    for w in &watchers {
        assert_eq!(runs_of(&app, &a, w).await.len(), 1);
    }
    assert_eq!(app.count("worker_runs").await, 3);
}

#[tokio::test]
async fn running_runs_of_a_crashed_process_are_failed_at_start() {
    let app = TestApp::spawn().await;
    let a = app.standard().await;
    let g = create(&app, &a, basic("crash")).await;
    let gid = g["id"].as_str().unwrap().to_string();
    let (g2, uid) = (gid.clone(), a.id.clone());
    let run_id = app
        .state
        .db
        .write(move |c| {
            let id = genied::db::new_id();
            c.execute(
                "INSERT INTO worker_runs (id, worker_genie_id, user_id, status, trigger, created_at, started_at) VALUES (?1, ?2, ?3, 'running', 'manual', ?4, ?4)",
                rusqlite::params![id, g2, uid, genied::db::now()],
            )?;
            Ok(id)
        })
        .await
        .unwrap();
    let app = app.restart().await;
    let runs = runs_of(&app, &a, &gid).await;
    let r = runs.iter().find(|r| r["id"] == json!(run_id)).unwrap();
    assert_eq!(r["status"], "failed");
    assert!(r["error"].as_str().unwrap().contains("interrupted"), "{r}");
}

#[tokio::test]
async fn step_limit_timeout_and_cancel() {
    let llm = FakeOpenAi::start(Expect::Worker).await;
    let app = TestApp::spawn_with(|c| {
        llm.configure(c);
        c.worker_run_timeout_seconds = 1;
    })
    .await;
    let a = app.standard().await;
    let g = create(
        &app,
        &a,
        json!({"name": "loop", "soul_prompt": "x", "max_steps": 2}),
    )
    .await;
    let gid = g["id"].as_str().unwrap().to_string();

    // Step limit: the model keeps calling tools.
    let call = || Turn::Tools(vec![("memory_read", json!({}))]);
    llm.push([call(), call(), call()]);
    let run = start_run(&app, &a, &gid, json!({})).await;
    let r = wait_run(&app, &a, &gid, &run).await;
    assert_eq!(r["status"], "failed");
    assert!(r["error"].as_str().unwrap().contains("step limit"), "{r}");
    assert_eq!(
        r["steps"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["type"] == "llm")
            .count(),
        2
    );

    // Timeout: the model answers too late.
    let _ = llm.requests();
    llm.push([Turn::Slow(
        Duration::from_secs(3),
        Box::new(Turn::Answer("late")),
    )]);
    let run = start_run(&app, &a, &gid, json!({})).await;
    let r = wait_run(&app, &a, &gid, &run).await;
    assert_eq!(r["status"], "failed");
    assert!(r["error"].as_str().unwrap().contains("timed out"), "{r}");
    assert_eq!(r["output"], Value::Null);
}

#[tokio::test]
async fn cancel_a_running_run() {
    let llm = FakeOpenAi::start(Expect::Worker).await;
    let app = TestApp::spawn_with(|c| llm.configure(c)).await;
    let a = app.standard().await;
    let g = create(&app, &a, basic("slow")).await;
    let gid = g["id"].as_str().unwrap().to_string();
    llm.push([Turn::Slow(
        Duration::from_secs(5),
        Box::new(Turn::Answer("late")),
    )]);
    let run = start_run(&app, &a, &gid, json!({})).await;
    for _ in 0..250 {
        if llm.requests().len() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let c = app
        .call(&a.token, R, "cancel", Some(json!(run)), json!({}))
        .await;
    let d = c.ok(200);
    assert_eq!(d["run"]["status"], "cancelled");
    assert_eq!(d["run"]["id"], json!(run));
    let b = app.standard().await;
    let r = app
        .call(&b.token, R, "cancel", Some(json!(run)), json!({}))
        .await;
    r.err(404, "NOT_FOUND");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let r = runs_of(&app, &a, &gid).await;
    assert_eq!(r[0]["status"], "cancelled");
    assert_eq!(r[0]["error"], "cancelled by the owner");
}

#[tokio::test]
async fn master_key_rotation_keeps_every_credential_readable() {
    let api = FakeApi::start().await;
    api.expect("/a", "authorization", "Bearer secret-a");
    api.expect("/b", "x-api-key", "secret-b");
    let app = TestApp::spawn().await;
    let a = app.standard().await;
    store(
        &app,
        &a,
        json!({"name": "a", "credential_type": "bearer_token", "value": "secret-a"}),
    )
    .await;
    store(
        &app,
        &a,
        json!({"name": "b", "credential_type": "api_key", "value": "secret-b"}),
    )
    .await;
    let key_path = app.dir.path().join("secrets").join("master.key");
    let old = std::fs::read_to_string(&key_path).unwrap();

    async fn readable(app: &TestApp, a: &User, base: &str) {
        for (name, path) in [("a", "/a/x"), ("b", "/b/x")] {
            let t = app
                .call(
                    &a.token,
                    R,
                    "test-credential",
                    None,
                    json!({"name": name, "url": format!("{base}{path}")}),
                )
                .await;
            let d = t.ok(200);
            assert_eq!(d["status"], "ok", "{name}: {d}");
        }
    }
    readable(&app, &a, &api.base).await;

    let db = app.state.db.clone();
    let kp = key_path.clone();
    let n = tokio::task::spawn_blocking(move || {
        genied::workers::credentials::rotate_master_key(&db, &kp)
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(n, 2);
    let new = std::fs::read_to_string(&key_path).unwrap();
    assert_ne!(old, new);
    assert!(!key_path.with_file_name("master.key.new").exists());
    // The running service picks up the new key; so does a restarted one.
    readable(&app, &a, &api.base).await;
    let app = app.restart().await;
    readable(&app, &a, &api.base).await;

    // A rotation that died before its transaction committed leaves a stale `.new`, which
    // the next start discards.
    std::fs::write(
        key_path.with_file_name("master.key.new"),
        hex::encode([7u8; 32]),
    )
    .unwrap();
    let app = app.restart().await;
    assert!(!key_path.with_file_name("master.key.new").exists());
    assert_eq!(std::fs::read_to_string(&key_path).unwrap(), new);
    readable(&app, &a, &api.base).await;

    // The operator command, on the stopped data directory.
    let mut app = app;
    app.shutdown().await;
    let out = crate::common::process::output(
        std::process::Command::new(env!("CARGO_BIN_EXE_genied"))
            .args(["admin", "rotate-master-key", "--json", "--data-dir"])
            .arg(app.dir.path())
            .envs(cli_env(app.dir.path())),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed["credentials_reencrypted"], 2);
    assert_ne!(std::fs::read_to_string(&key_path).unwrap(), new);
    let mut app = app.restart().await;
    readable(&app, &a, &api.base).await;

    // Started with a key that does not open the credentials (e.g. a lost key file replaced by
    // a new one), the service refuses to start instead of mixing keys.
    app.shutdown().await;
    let good = std::fs::read_to_string(&key_path).unwrap();
    std::fs::write(&key_path, hex::encode([9u8; 32])).unwrap();
    let err = genied::build_app(app.state.config.clone())
        .err()
        .expect("must refuse");
    assert!(
        err.to_string()
            .contains("does not open the stored credentials"),
        "{err}"
    );
    let other = app.dir.path().join("elsewhere.key");
    let mut config = app.state.config.clone();
    config.master_key_file = Some(other.clone());
    let err = genied::build_app(config).err().expect("must refuse");
    assert!(err.to_string().contains("does not exist"), "{err}");
    assert!(!other.exists());
    std::fs::write(&key_path, good).unwrap();
    let app = app.restart().await;
    readable(&app, &a, &api.base).await;
}

#[tokio::test]
async fn notify_owner_also_mails_the_owner_when_smtp_is_configured() {
    let llm = FakeOpenAi::start(Expect::Worker).await;
    let smtp = crate::common::fakes::smtp::FakeSmtp::start().await;
    let app = TestApp::spawn_with(|c| {
        llm.configure(c);
        c.smtp_url = Some(genied::config::Secret(smtp.url.clone()));
    })
    .await;
    let a = app.standard().await;
    let g = create(
        &app,
        &a,
        json!({"name": "Mailer", "soul_prompt": "Tell me things."}),
    )
    .await;
    let gid = g["id"].as_str().unwrap().to_string();
    llm.push([
        Turn::Tools(vec![(
            "notify_owner",
            json!({"title": "Weekly digest", "body": "3 new leads"}),
        )]),
        Turn::Answer("Sent."),
    ]);
    let run = start_run(&app, &a, &gid, json!({})).await;
    let r = wait_run(&app, &a, &gid, &run).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    let mails = smtp.mails();
    assert_eq!(mails.len(), 1);
    assert_eq!(mails[0].to, vec![a.email.clone()]);
    assert!(mails[0].data.contains("Weekly digest") && mails[0].data.contains("3 new leads"));
    // The dashboard notification is there as well, and the mail is logged.
    let n = app
        .call(&a.token, "notifications", "list", None, json!({}))
        .await;
    assert_eq!(
        n.ok(200)["notifications"][0]["title"],
        json!("Weekly digest")
    );
    assert_eq!(app.count("email_logs").await, 1);
}
