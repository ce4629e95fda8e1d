//! Issue #23, drift and moving between platforms, over real HTTP against the platform fakes:
//! a genie edited in a platform's dashboard (the fake's state changed directly) is found by
//! `check-drift` and by the scheduled check, `pull` adopts the platform's values as a new
//! version, `push` restores genied's; `move` re-provisions a genie from ElevenLabs to Vapi
//! (documents, tools), removes the old agent only once the new one answers, leaves the old
//! agent serving when the new platform fails part-way, and a move cut short by a restart is
//! undone. The tool mappings of Vapi and Retell are checked against their fakes.

use std::time::{Duration, Instant};

use genied::config::Secret;
use genied::voice::retell::Retell;
use genied::voice::vapi::Vapi;
use genied::voice::{AgentSpec, AgentTool, VoiceProvider};
use serde_json::{Value, json};

use crate::common::fakes::elevenlabs::{self, FakeElevenLabs};
use crate::common::fakes::retell::{self, FakeRetell};
use crate::common::fakes::vapi::{self, FakeVapi};
use crate::common::*;

/// ElevenLabs is the default; Vapi is configured beside it when `vapi` is given.
async fn app(
    el: &FakeElevenLabs,
    vapi: Option<&FakeVapi>,
    tweak: impl FnOnce(&mut genied::config::Config) + Send + 'static,
) -> TestApp {
    let (eb, vb) = (el.base.clone(), vapi.map(|v| v.base.clone()));
    TestApp::spawn_with(move |c| {
        c.voice_provider = "elevenlabs".into();
        c.elevenlabs_base_url = eb;
        c.elevenlabs_api_key = Some(Secret(elevenlabs::KEY.into()));
        if let Some(vb) = vb {
            c.vapi_base_url = vb;
            c.vapi_api_key = Some(Secret(vapi::KEY.into()));
        }
        c.provider_retry_base_ms = 5;
        tweak(c);
    })
    .await
}

fn lookup_tool() -> Value {
    json!({"type": "webhook", "name": "lookup_order", "description": "Look up an order by its id",
           "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
           "url": "https://shop.example.com/orders", "method": "POST", "timeout_seconds": 5})
}

async fn create(app: &TestApp, token: &str, data: Value) -> String {
    app.call(token, "genies", "create", None, data)
        .await
        .ok(201)["genie"]["id"]
        .as_str()
        .unwrap()
        .to_string()
}

async fn agent_of(app: &TestApp, genie_id: &str) -> String {
    let id = genie_id.to_string();
    app.state
        .db
        .read(move |c| {
            Ok(c.query_row(
                "SELECT external_agent_id FROM genies WHERE id = ?1",
                [&id],
                |r| r.get(0),
            )?)
        })
        .await
        .unwrap()
}

async fn genie(app: &TestApp, token: &str, id: &str) -> Value {
    app.call(token, "genies", "get", Some(json!(id)), json!({}))
        .await
        .ok(200)["genie"]
        .clone()
}

async fn check(app: &TestApp, token: &str, id: &str) -> Value {
    app.call(token, "genies", "check-drift", Some(json!(id)), json!({}))
        .await
        .ok(200)
        .clone()
}

fn paths(report: &Value) -> Vec<String> {
    report["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["path"].as_str().unwrap().to_string())
        .collect()
}

/// A text document attached to the genie, once the pipeline has finished it.
async fn document(app: &TestApp, token: &str, genie: &str, content: &str) -> String {
    let r = app
        .call(
            token,
            "knowledge-base",
            "create",
            None,
            json!({"title": "Opening hours", "content": content, "agentId": genie}),
        )
        .await;
    let id = r.ok(201)["document"]["id"].as_str().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        app.run_jobs().await;
        let r = app
            .call(token, "knowledge-base", "get", Some(json!(id)), json!({}))
            .await;
        let status = r.ok(200)["document"]["status"].clone();
        if status == json!("completed") {
            return id;
        }
        assert!(
            status != json!("failed") && Instant::now() < deadline,
            "{}",
            r.body
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the ElevenLabs agent lists `n` documents. A document's genies are pushed
/// after it is marked completed (under the genie's lock), so a test that goes on at
/// `completed` can see the agent without it, or have a move overtaken by the push, which
/// then records `in_sync` over the move's outcome.
async fn pushed_to_elevenlabs(el: &FakeElevenLabs, agent: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let listed = el.agent(agent).and_then(|a| {
            a["conversation_config"]["agent"]["prompt"]["knowledge_base"]
                .as_array()
                .map(Vec::len)
        });
        if listed == Some(n) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the agent lists {n} documents: {listed:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn drift_at_elevenlabs_is_found_pulled_and_pushed() {
    let el = FakeElevenLabs::start().await;
    let app = app(&el, None, |_| {}).await;
    let u = app.standard().await;
    let id = create(
        &app,
        &u.token,
        json!({"genieName": "Desk", "systemPrompt": "Answer briefly.", "temperature": 0.5,
               "tools": [lookup_tool(), {"type": "end_conversation"}]}),
    )
    .await;
    let agent = agent_of(&app, &id).await;
    let r = check(&app, &u.token, &id).await;
    assert_eq!(r["drift"], json!(false), "{r}");
    assert_eq!(r["provider"], json!("elevenlabs"));
    let got = el.requests();
    let last = got.last().unwrap();
    assert_eq!(
        (
            last.method.as_str(),
            last.path.clone(),
            last.api_key.as_deref()
        ),
        (
            "GET",
            format!("/v1/convai/agents/{agent}"),
            Some(elevenlabs::KEY)
        )
    );

    // Edited in the dashboard: prompt and temperature changed, the tools removed.
    el.edit_agent(&agent, |a| {
        let p = &mut a["conversation_config"]["agent"]["prompt"];
        p["prompt"] = json!("Edited in the dashboard.");
        p["temperature"] = json!(0.9);
        p["tools"] = json!([]);
    });
    let r = check(&app, &u.token, &id).await;
    assert_eq!(r["drift"], json!(true));
    assert_eq!(paths(&r), vec!["system_prompt", "temperature", "tools"]);
    assert_eq!(
        r["changes"][0],
        json!({"path": "system_prompt", "genied": "Answer briefly.", "platform": "Edited in the dashboard."})
    );
    assert_eq!(
        r["changes"][2],
        json!({"path": "tools", "genied": ["end_conversation", "lookup_order"], "platform": []})
    );
    let g = genie(&app, &u.token, &id).await;
    assert_eq!(g["provider_drift"]["changes"], r["changes"]);

    // push: genied's live version is the platform's again.
    let p = app
        .call(&u.token, "genies", "push", Some(json!(id)), json!({}))
        .await;
    assert_eq!(p.ok(200)["pushed"], json!(true));
    let a = el.agent(&agent).unwrap();
    let prompt = &a["conversation_config"]["agent"]["prompt"];
    assert_eq!(prompt["prompt"], json!("Answer briefly."));
    assert_eq!(prompt["temperature"], json!(0.5));
    assert_eq!(prompt["tools"].as_array().unwrap().len(), 2);
    assert_eq!(check(&app, &u.token, &id).await["drift"], json!(false));
    assert!(genie(&app, &u.token, &id).await["provider_drift"]["changes"].is_null());

    // pull: the platform's prompt becomes a new version; the tools genied keeps go back.
    el.edit_agent(&agent, |a| {
        let p = &mut a["conversation_config"]["agent"]["prompt"];
        p["prompt"] = json!("Pulled from the dashboard.");
        p["tools"] = json!([]);
    });
    let versions_before = app
        .call(&u.token, "genies", "versions", Some(json!(id)), json!({}))
        .await
        .ok(200)["count"]
        .as_i64()
        .unwrap();
    let r = app
        .call(&u.token, "genies", "pull", Some(json!(id)), json!({}))
        .await;
    let d = r.ok(200);
    assert_eq!(d["adopted"], json!(["system_prompt"]));
    assert_eq!(
        d["genie"]["system_prompt"],
        json!("Pulled from the dashboard.")
    );
    let v = app
        .call(&u.token, "genies", "versions", Some(json!(id)), json!({}))
        .await;
    let v = v.ok(200);
    assert_eq!(v["count"].as_i64().unwrap(), versions_before + 1);
    assert_eq!(v["versions"][0]["version"], d["version"]);
    assert_eq!(
        v["versions"][0]["summary"],
        json!("pulled from elevenlabs: system_prompt")
    );
    let a = el.agent(&agent).unwrap();
    assert_eq!(
        a["conversation_config"]["agent"]["prompt"]["tools"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(check(&app, &u.token, &id).await["drift"], json!(false));

    // Another user can neither check nor pull this genie.
    let other = app.standard().await;
    app.call(&other.token, "genies", "pull", Some(json!(id)), json!({}))
        .await
        .err(404, "AGENT_NOT_FOUND");
}

#[tokio::test]
async fn the_scheduled_check_records_drift_and_raises_an_event() {
    let el = FakeElevenLabs::start().await;
    let app = app(&el, None, |c| c.drift_check_interval_seconds = 1).await;
    let mut events = app.state.bus.subscribe();
    let u = app.standard().await;
    let id = create(
        &app,
        &u.token,
        json!({"genieName": "Desk", "systemPrompt": "Answer briefly."}),
    )
    .await;
    let agent = agent_of(&app, &id).await;
    el.edit_agent(&agent, |a| {
        a["conversation_config"]["agent"]["first_message"] = json!("Yo!");
        a["conversation_config"]["agent"]["prompt"]["prompt"] = json!("Be rude.");
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let event = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let e = tokio::time::timeout(left, events.recv())
            .await
            .expect("a genie.drift_detected event within 60 s")
            .unwrap();
        if e.kind == "genie.drift_detected" {
            break e;
        }
    };
    assert_eq!(event.user_id, u.id);
    assert_eq!(event.data["genie_id"], json!(id));
    let ps: Vec<&str> = event.data["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        ps,
        vec!["system_prompt"],
        "first_message was never set in genied, so the platform's stands"
    );
    let g = genie(&app, &u.token, &id).await;
    assert_eq!(g["provider_drift"]["changes"], event.data["changes"]);
    assert!(g["provider_drift"]["checked_at"].is_string());
    // The same drift found again raises no second event.
    let checked = g["provider_drift"]["checked_at"].clone();
    loop {
        let g = genie(&app, &u.token, &id).await;
        if g["provider_drift"]["checked_at"] != checked {
            break;
        }
        assert!(Instant::now() < deadline + Duration::from_secs(30));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    while let Ok(e) = events.try_recv() {
        assert_ne!(e.kind, "genie.drift_detected", "{:?}", e.data);
    }
}

#[tokio::test]
async fn a_genie_moves_from_elevenlabs_to_vapi() {
    let el = FakeElevenLabs::start().await;
    let vf = FakeVapi::start().await;
    let app = app(&el, Some(&vf), |_| {}).await;
    let u = app.standard().await;
    app.call(
        &u.token,
        "worker-genies",
        "store-credential",
        None,
        json!({"name": "stripe", "credential_type": "bearer_token", "value": "sk-never-at-a-platform"}),
    )
    .await
    .ok(201);
    let mut secret_tool = lookup_tool();
    secret_tool["name"] = json!("charge_card");
    secret_tool["credential_ref"] = json!("stripe");
    let id = create(
        &app,
        &u.token,
        json!({"genieName": "Desk", "systemPrompt": "Answer briefly.", "firstMessage": "Hello!",
               "temperature": 0.4,
               "tools": [lookup_tool(), secret_tool, {"type": "end_conversation"}, {"type": "capture_lead"}]}),
    )
    .await;
    document(&app, &u.token, &id, "We open at nine.").await;
    let old_agent = agent_of(&app, &id).await;
    pushed_to_elevenlabs(&el, &old_agent, 1).await;

    // Vapi's rate limit once: the call is retried.
    vf.fail("create_assistant", 429, 1);
    let r = app
        .call(
            &u.token,
            "genies",
            "move",
            Some(json!(id)),
            json!({"provider": "vapi"}),
        )
        .await;
    let d = r.ok(200);
    assert_eq!(d["move"]["from"], json!("elevenlabs"));
    assert_eq!(d["move"]["to"], json!("vapi"));
    assert_eq!(d["genie"]["provider"], json!("vapi"));
    assert_eq!(d["genie"]["provider_state"], json!("in_sync"));
    let new_agent = agent_of(&app, &id).await;
    assert_eq!(d["move"]["agent_id"], json!(new_agent));
    let a = vf.assistant(&new_agent).expect("the assistant at Vapi");
    assert_eq!(a["name"], json!("Desk"));
    assert_eq!(a["firstMessage"], json!("Hello!"));
    assert_eq!(
        a["model"]["messages"][0],
        json!({"role": "system", "content": "Answer briefly."})
    );
    assert_eq!(a["model"]["temperature"], json!(0.4));
    // Tools: the webhook without a credential as an API request, hang-up as endCall; the
    // credentialed one is not handed over; capture_lead as structured data.
    let tools = a["model"]["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 2, "{tools:?}");
    assert_eq!(tools[0]["type"], json!("apiRequest"));
    assert_eq!(tools[0]["name"], json!("lookup_order"));
    assert_eq!(tools[0]["url"], json!("https://shop.example.com/orders"));
    assert_eq!(
        tools[0]["body"]["properties"]["order_id"],
        json!({"type": "string"})
    );
    assert_eq!(tools[1], json!({"type": "endCall"}));
    assert!(!a.to_string().contains("charge_card"));
    assert!(
        !vf.requests()
            .iter()
            .any(|r| r.body.to_string().contains("sk-never-at-a-platform"))
    );
    assert!(
        a["analysisPlan"]["structuredDataPlan"]["schema"]["properties"]["lead_email"].is_object()
    );
    // The document: copied to a Vapi file, joined in the knowledge tool.
    let tool_id = a["model"]["toolIds"][0].as_str().unwrap();
    let kb = vf.tool(tool_id).unwrap();
    let file_id = kb["knowledgeBases"][0]["fileIds"][0].as_str().unwrap();
    let text = vf.file(file_id).unwrap()["text"].clone();
    assert!(
        text.as_str().unwrap().contains("We open at nine."),
        "{text}"
    );
    // Only now is the old agent gone.
    assert!(el.agent(&old_agent).is_none());
    assert!(
        el.requests()
            .iter()
            .any(|r| r.method == "DELETE" && r.path == format!("/v1/convai/agents/{old_agent}"))
    );
    assert!(
        vf.requests()
            .iter()
            .all(|r| r.authorization.as_deref() == Some(&format!("Bearer {}", vapi::KEY)))
    );
    // The genie at Vapi reads back as genied holds it, and Vapi's dashboard edits show.
    assert_eq!(check(&app, &u.token, &id).await["drift"], json!(false));
    vf.edit_assistant(&new_agent, |a| a["firstMessage"] = json!("Howdy"));
    let r = check(&app, &u.token, &id).await;
    assert_eq!(
        r["changes"],
        json!([{"path": "first_message", "genied": "Hello!", "platform": "Howdy"}])
    );
    // Moving again to where it lives is refused, as is an unconfigured platform.
    app.call(
        &u.token,
        "genies",
        "move",
        Some(json!(id)),
        json!({"provider": "vapi"}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    let r = app
        .call(
            &u.token,
            "genies",
            "move",
            Some(json!(id)),
            json!({"provider": "retell"}),
        )
        .await;
    r.err(400, "VALIDATION_ERROR");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("retell")
    );
}

#[tokio::test]
async fn a_move_that_fails_part_way_leaves_the_old_agent_serving() {
    let el = FakeElevenLabs::start().await;
    let vf = FakeVapi::start().await;
    let app = app(&el, Some(&vf), |_| {}).await;
    let u = app.standard().await;
    let id = create(
        &app,
        &u.token,
        json!({"genieName": "Desk", "systemPrompt": "Answer briefly."}),
    )
    .await;
    document(&app, &u.token, &id, "We open at nine.").await;
    let old_agent = agent_of(&app, &id).await;
    pushed_to_elevenlabs(&el, &old_agent, 1).await;
    let mv = || {
        app.call(
            &u.token,
            "genies",
            "move",
            Some(json!(id)),
            json!({"provider": "vapi"}),
        )
    };

    // Rate-limited beyond the retries (1 attempt + 4 retries): nothing is made.
    vf.fail("create_assistant", 429, 5);
    let r = mv().await;
    r.err(502, "UPSTREAM_ERROR");
    let msg = r.body["error"]["message"].as_str().unwrap().to_string();
    assert!(msg.contains("creating the agent"), "{msg}");
    assert!(msg.contains("still runs on 'elevenlabs'"), "{msg}");
    assert_eq!(vf.assistant_count(), 0);
    assert_eq!(
        vf.file_count(),
        0,
        "the document copy made for the move is removed"
    );
    let g = genie(&app, &u.token, &id).await;
    assert_eq!(g["provider"], json!("elevenlabs"));
    assert_eq!(g["provider_state"], json!("failed"));
    assert_eq!(g["provider_error"], json!(msg));
    assert!(el.agent(&old_agent).is_some());

    // The new agent is made but does not answer when read back: it is removed again.
    vf.fail("get_assistant", 500, 5);
    let r = mv().await;
    r.err(502, "UPSTREAM_ERROR");
    let msg = r.body["error"]["message"].as_str().unwrap();
    assert!(msg.contains("reading the new agent back"), "{msg}");
    assert_eq!(vf.assistant_count(), 0);
    assert_eq!(vf.tool_count(), 0);
    assert_eq!(vf.file_count(), 0);
    assert!(el.agent(&old_agent).is_some());
    assert_eq!(agent_of(&app, &id).await, old_agent);
    assert_eq!(app.count("genie_moves").await, 0);
    assert_eq!(
        genie(&app, &u.token, &id).await["provider"],
        json!("elevenlabs")
    );

    // Once Vapi answers, the move goes through.
    mv().await.ok(200);
    assert!(el.agent(&old_agent).is_none());
    assert_eq!(vf.assistant_count(), 1);
}

#[tokio::test]
async fn a_move_cut_short_is_undone_after_a_restart() {
    let el = FakeElevenLabs::start().await;
    let vf = FakeVapi::start().await;
    let app = app(&el, Some(&vf), |_| {}).await;
    let u = app.standard().await;
    let id = create(
        &app,
        &u.token,
        json!({"genieName": "Desk", "systemPrompt": "Answer briefly."}),
    )
    .await;
    let old_agent = agent_of(&app, &id).await;
    // What a service that stopped right after creating the Vapi assistant leaves: the
    // assistant, the move's row naming it, and its resolve job.
    let orphan = vf.add_assistant(json!({"name": "Desk", "metadata": {"managedBy": "genied"}}));
    let (gid, oa) = (id.clone(), orphan.clone());
    app.state
        .db
        .write(move |c| {
            c.execute(
                "INSERT INTO genie_moves (genie_id, from_provider, to_provider, new_agent_id, started_at, updated_at)
                 VALUES (?1, 'elevenlabs', 'vapi', ?2, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')",
                [&gid, &oa],
            )?;
            genied::jobs::enqueue(
                c,
                genied::service::moving::RESOLVE_JOB,
                &json!({"genie_id": gid}),
                Duration::ZERO,
                None,
            )?;
            Ok(())
        })
        .await
        .unwrap();
    let app = app.restart().await;
    let deadline = Instant::now() + Duration::from_secs(60);
    // The resolve job deletes the assistant at the platform and then the move's row: wait
    // for both, as the platform's delete is seen before the job's last write commits.
    while vf.assistant(&orphan).is_some() || app.count("genie_moves").await != 0 {
        assert!(
            Instant::now() < deadline,
            "the cut-short move was never undone"
        );
        app.run_jobs().await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let g = genie(&app, &u.token, &id).await;
    assert_eq!(g["provider"], json!("elevenlabs"));
    assert_eq!(g["provider_state"], json!("failed"));
    assert!(
        g["provider_error"]
            .as_str()
            .unwrap()
            .contains("interrupted")
    );
    assert!(el.agent(&old_agent).is_some());
    assert!(
        vf.requests()
            .iter()
            .any(|r| r.method == "DELETE" && r.path == format!("/assistant/{orphan}"))
    );
}

fn tool_spec() -> AgentSpec {
    AgentSpec {
        name: "Desk".into(),
        system_prompt: Some("Answer briefly.".into()),
        first_message: Some("Hi!".into()),
        llm_model: "gpt-4.1".into(),
        temperature: Some(0.3),
        max_duration_seconds: Some(600),
        silence_end_seconds: Some(30.0),
        turn_timeout_seconds: Some(8.0),
        tools: vec![
            AgentTool::Webhook {
                name: "lookup_order".into(),
                description: "Look up an order".into(),
                parameters: json!({"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}),
                url: "https://shop.example.com/orders".into(),
                method: "POST".into(),
                timeout_seconds: 5,
                needs_credential: false,
            },
            AgentTool::Webhook {
                name: "charge_card".into(),
                description: "Charge".into(),
                parameters: json!({"type": "object"}),
                url: "https://pay.example.com".into(),
                method: "POST".into(),
                timeout_seconds: 5,
                needs_credential: true,
            },
            AgentTool::Builtin {
                name: "end_conversation".into(),
            },
        ],
        ..AgentSpec::default()
    }
}

#[tokio::test]
async fn retell_gets_the_tools_as_general_tools_and_reads_them_back() {
    let fake = FakeRetell::start().await;
    let r = Retell::new(
        &fake.base,
        Secret(retell::KEY.into()),
        None,
        Duration::from_millis(5),
    )
    .unwrap();
    let spec = tool_spec();
    let id = r.create_agent(&spec).await.unwrap();
    let agent = fake.agent(&id).unwrap();
    let llm_id = agent["response_engine"]["llm_id"]
        .as_str()
        .unwrap()
        .to_string();
    let tools = fake.llm(&llm_id).unwrap()["general_tools"].clone();
    assert_eq!(
        tools,
        json!([
            {"type": "custom", "name": "lookup_order", "description": "Look up an order",
             "url": "https://shop.example.com/orders", "method": "POST",
             "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
             "args_at_root": true, "speak_during_execution": false, "speak_after_execution": true,
             "timeout_ms": 5000},
            {"type": "end_call", "name": "end_call",
             "description": "End the call once the caller is done (after saying goodbye)."},
        ])
    );
    // Read back, the agent is what genied sent (as Retell holds it).
    fake.clear_requests();
    let back = r.get_agent(&id).await.unwrap();
    let reqs: Vec<(String, String)> = fake
        .requests()
        .iter()
        .map(|q| (q.method.clone(), q.path.clone()))
        .collect();
    assert_eq!(
        reqs,
        vec![
            ("GET".to_string(), format!("/get-agent/{id}")),
            ("GET".to_string(), format!("/get-retell-llm/{llm_id}")),
        ]
    );
    let held = r.as_held(&spec);
    let view = genied::service::drift::view;
    assert_eq!(view(&back), view(&held));
    assert_eq!(back.system_prompt.as_deref(), Some("Answer briefly."));
    assert_eq!(back.silence_end_seconds, Some(30.0));
    assert_eq!(held.tools.len(), 2);
    // A change in Retell's dashboard shows.
    fake.edit_llm(&llm_id, |l| l["general_prompt"] = json!("Other"));
    let back = r.get_agent(&id).await.unwrap();
    let changes = genied::service::drift::compare(&view(&held), &view(&back));
    assert_eq!(
        changes,
        vec![json!({"path": "system_prompt", "genied": "Answer briefly.", "platform": "Other"})]
    );
}

#[tokio::test]
async fn vapi_reads_its_assistants_back_as_genied_sent_them() {
    let fake = FakeVapi::start().await;
    let v = Vapi::new(
        &fake.base,
        Secret(vapi::KEY.into()),
        None,
        Duration::from_millis(5),
    )
    .unwrap();
    let spec = tool_spec();
    let id = v.create_agent(&spec).await.unwrap();
    let back = v.get_agent(&id).await.unwrap();
    let view = genied::service::drift::view;
    assert_eq!(view(&back), view(&v.as_held(&spec)));
    assert_eq!(back.turn_timeout_seconds, Some(8.0));
    assert_eq!(
        back.tools.iter().map(|t| t.label()).collect::<Vec<_>>(),
        vec!["lookup_order", "end_conversation"]
    );
}

#[tokio::test]
async fn elevenlabs_gets_the_traffic_split_only_when_asked() {
    let el = FakeElevenLabs::start().await;
    let app = app(&el, None, |_| {}).await;
    let u = app.standard().await;
    let id = create(
        &app,
        &u.token,
        json!({"genieName": "Desk", "systemPrompt": "Version one."}),
    )
    .await;
    app.call(
        &u.token,
        "genies",
        "update",
        Some(json!(id)),
        json!({"systemPrompt": "Version two."}),
    )
    .await
    .ok(200);
    let agent = agent_of(&app, &id).await;
    let split = json!([{"version": 1, "weight": 30}, {"version": 2, "weight": 70}]);

    // Without the opt-in only genied splits: the agent's versioning stays off.
    let r = app
        .call(
            &u.token,
            "genies",
            "set-traffic",
            Some(json!(id)),
            json!({"traffic": split}),
        )
        .await;
    assert!(r.ok(200)["provider_split"].is_null());
    assert!(el.agent(&agent).unwrap().get("version_id").is_none());
    assert!(el.requests().iter().all(|q| !q.query.contains("versioning")
        && !q.path.ends_with("/branches")
        && !q.path.ends_with("/deployments")));

    // A platform failure while mirroring changes nothing in genied.
    el.fail("branches", 500);
    let r = app
        .call(
            &u.token,
            "genies",
            "set-traffic",
            Some(json!(id)),
            json!({"traffic": [{"version": 2, "weight": 100}], "mirror_at_provider": true}),
        )
        .await;
    r.err(502, "UPSTREAM_ERROR");
    el.heal("branches");
    let v = app
        .call(&u.token, "genies", "versions", Some(json!(id)), json!({}))
        .await;
    assert_eq!(v.ok(200)["traffic"], split);

    // With it: a branch per version from that version's configuration, and the split.
    let r = app
        .call(
            &u.token,
            "genies",
            "set-traffic",
            Some(json!(id)),
            json!({"traffic": split, "mirror_at_provider": true}),
        )
        .await;
    let d = r.ok(200).clone();
    assert!(el.agent(&agent).unwrap()["version_id"].is_string());
    let branches = el.branches(&agent);
    let named = |n: &str| {
        branches
            .iter()
            .find(|b| b["name"] == json!(n))
            .unwrap_or_else(|| panic!("branch {n} in {branches:?}"))
            .clone()
    };
    let (b1, b2) = (named("genied-v1"), named("genied-v2"));
    assert_eq!(
        b1["conversation_config"]["agent"]["prompt"]["prompt"],
        json!("Version one.")
    );
    assert_eq!(
        b2["conversation_config"]["agent"]["prompt"]["prompt"],
        json!("Version two.")
    );
    let map = json!({b1["id"].as_str().unwrap(): 0.3, b2["id"].as_str().unwrap(): 0.7});
    assert_eq!(el.deployment(&agent).unwrap(), map);
    assert_eq!(d["provider_split"], map);
    // Again: the branches are reused, not made twice.
    app.call(
        &u.token,
        "genies",
        "set-traffic",
        Some(json!(id)),
        json!({"traffic": [{"version": 2, "weight": 100}], "mirror_at_provider": true}),
    )
    .await
    .ok(200);
    assert_eq!(el.branches(&agent).len(), 3);
    assert_eq!(
        el.deployment(&agent).unwrap(),
        json!({b2["id"].as_str().unwrap(): 1.0})
    );
    // No split: the Main branch takes all traffic again.
    app.call(
        &u.token,
        "genies",
        "set-traffic",
        Some(json!(id)),
        json!({"traffic": [], "mirror_at_provider": true}),
    )
    .await
    .ok(200);
    let main = named("Main");
    assert_eq!(
        el.deployment(&agent).unwrap(),
        json!({main["id"].as_str().unwrap(): 1.0})
    );
}

#[tokio::test]
async fn only_elevenlabs_takes_a_mirrored_split() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let id = create(&app, &u.token, json!({"genieName": "Desk"})).await;
    let r = app
        .call(
            &u.token,
            "genies",
            "set-traffic",
            Some(json!(id)),
            json!({"traffic": [{"version": 1, "weight": 100}], "mirror_at_provider": true}),
        )
        .await;
    r.err(400, "VALIDATION_ERROR");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("mirror_at_provider")
    );
    let v = app
        .call(&u.token, "genies", "versions", Some(json!(id)), json!({}))
        .await;
    assert!(v.ok(200)["traffic"].is_null());
}

#[tokio::test]
async fn a_genie_at_a_non_default_platform_gets_copies_of_its_documents() {
    let el = FakeElevenLabs::start().await;
    let vf = FakeVapi::start().await;
    let app = app(&el, Some(&vf), |_| {}).await;
    let u = app.standard().await;
    let id = create(
        &app,
        &u.token,
        json!({"genieName": "Desk", "systemPrompt": "Answer briefly.", "provider": "vapi"}),
    )
    .await;
    let doc = document(&app, &u.token, &id, "We close at six.").await;
    let agent = agent_of(&app, &id).await;
    // The genies using a document are pushed after it is marked completed: wait for it.
    let deadline = Instant::now() + Duration::from_secs(60);
    let tool = loop {
        let a = vf.assistant(&agent).unwrap();
        let g = genie(&app, &u.token, &id).await;
        if let Some(t) = a["model"]["toolIds"][0].as_str()
            && g["provider_state"] == json!("in_sync")
        {
            break t.to_string();
        }
        assert!(Instant::now() < deadline, "the knowledge tool is attached");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let tool = tool.as_str();
    let file = vf.tool(tool).unwrap()["knowledgeBases"][0]["fileIds"][0]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        vf.file(&file).unwrap()["text"]
            .as_str()
            .unwrap()
            .contains("We close at six.")
    );
    let g = genie(&app, &u.token, &id).await;
    assert_eq!(g["provider_state"], json!("in_sync"), "{g}");
    // The document itself lives at the default platform; the copy is Vapi's own.
    let ext = app
        .call(
            &u.token,
            "knowledge-base",
            "get",
            Some(json!(doc)),
            json!({}),
        )
        .await
        .ok(200)["document"]["external_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(ext, file);
    assert_eq!(check(&app, &u.token, &id).await["drift"], json!(false));
    // Pushed again, the same copy is reused rather than uploaded twice.
    app.call(&u.token, "genies", "push", Some(json!(id)), json!({}))
        .await
        .ok(200);
    assert_eq!(vf.file_count(), 1);
    // Deleting the document removes the copy too, and the agent's knowledge tool.
    app.call(
        &u.token,
        "knowledge-base",
        "delete",
        Some(json!(doc)),
        json!({}),
    )
    .await
    .ok(200);
    assert_eq!(vf.file_count(), 0);
    assert_eq!(vf.tool_count(), 0);
    assert_eq!(app.count("provider_documents").await, 0);
}
