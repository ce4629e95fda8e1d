//! Issue #23 over real HTTP: genied started with `--voice-provider vapi` or `retell`
//! provisions, changes and removes genies at that platform's fake, and refuses to start
//! without the platform's key.

use serde_json::{Value, json};

use crate::common::fakes::retell::{self, FakeRetell};
use crate::common::fakes::vapi::{self, FakeVapi};
use crate::common::*;

async fn external_id(app: &TestApp, genie_id: &str) -> String {
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

pub async fn vapi_app(fake: &FakeVapi) -> TestApp {
    let base = fake.base.clone();
    TestApp::spawn_with(move |c| {
        c.voice_provider = "vapi".into();
        c.vapi_base_url = base;
        c.vapi_api_key = Some(genied::config::Secret(vapi::KEY.into()));
        c.vapi_webhook_secret = Some(genied::config::Secret("vapi-hook-secret".into()));
        c.provider_retry_base_ms = 5;
    })
    .await
}

pub async fn retell_app(fake: &FakeRetell) -> TestApp {
    let base = fake.base.clone();
    TestApp::spawn_with(move |c| {
        c.voice_provider = "retell".into();
        c.retell_base_url = base;
        c.retell_api_key = Some(genied::config::Secret(retell::KEY.into()));
        c.retell_webhook_secret = Some(genied::config::Secret(retell::KEY.into()));
        c.provider_retry_base_ms = 5;
    })
    .await
}

async fn create(app: &TestApp, token: &str, data: Value) -> String {
    app.call(token, "genies", "create", None, data)
        .await
        .ok(201)["genie"]["id"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn genies_live_at_vapi() {
    let fake = FakeVapi::start().await;
    let app = vapi_app(&fake).await;
    let u = app.standard().await;
    fake.fail("create_assistant", 429, 1);
    let id = create(
        &app,
        &u.token,
        json!({"genieName": "Desk", "systemPrompt": "Answer briefly.", "firstMessage": "Hello!"}),
    )
    .await;
    let agent = external_id(&app, &id).await;
    let a = fake
        .assistant(&agent)
        .expect("the assistant exists at Vapi");
    assert_eq!(a["name"], json!("Desk"));
    assert_eq!(a["firstMessage"], json!("Hello!"));
    assert_eq!(
        a["model"]["messages"][0]["content"],
        json!("Answer briefly.")
    );
    assert_eq!(
        a["server"],
        json!({"url": format!("{}/v1/hooks/vapi", app.base), "headers": {"X-Vapi-Secret": "vapi-hook-secret"}})
    );
    let r = app
        .call(&u.token, "genies", "get", Some(json!(id)), json!({}))
        .await;
    let text = r.body.to_string();
    assert!(!text.contains(vapi::KEY) && !text.contains("vapi-hook-secret"));

    app.call(
        &u.token,
        "genies",
        "update",
        Some(json!(id)),
        json!({"systemPrompt": "Answer in German."}),
    )
    .await
    .ok(200);
    let a = fake.assistant(&agent).unwrap();
    assert_eq!(
        a["model"]["messages"][0]["content"],
        json!("Answer in German.")
    );

    app.call(&u.token, "genies", "delete", Some(json!(id)), json!({}))
        .await
        .ok(200);
    assert!(fake.assistant(&agent).is_none());
    assert!(
        fake.requests()
            .iter()
            .all(|r| r.authorization.as_deref() == Some(&format!("Bearer {}", vapi::KEY)))
    );
}

#[tokio::test]
async fn genies_live_at_retell() {
    let fake = FakeRetell::start().await;
    let app = retell_app(&fake).await;
    let u = app.standard().await;
    let id = create(
        &app,
        &u.token,
        json!({"genieName": "Desk", "systemPrompt": "Answer briefly."}),
    )
    .await;
    let agent = external_id(&app, &id).await;
    let a = fake.agent(&agent).expect("the agent exists at Retell");
    assert_eq!(a["agent_name"], json!("Desk"));
    assert_eq!(
        a["webhook_url"],
        json!(format!("{}/v1/hooks/retell", app.base))
    );
    let llm = a["response_engine"]["llm_id"].as_str().unwrap().to_string();
    assert_eq!(
        fake.llm(&llm).unwrap()["general_prompt"],
        json!("Answer briefly.")
    );

    // Retell refuses the change: the genie keeps its old settings and says why.
    fake.fail("update_llm", 400, 1);
    let r = app
        .call(
            &u.token,
            "genies",
            "update",
            Some(json!(id)),
            json!({"systemPrompt": "Changed"}),
        )
        .await;
    r.err(502, "UPSTREAM_ERROR");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("update_llm failed")
    );
    let g = app
        .call(&u.token, "genies", "get", Some(json!(id)), json!({}))
        .await;
    assert_eq!(
        g.ok(200)["genie"]["system_prompt"],
        json!("Answer briefly.")
    );

    app.call(&u.token, "genies", "delete", Some(json!(id)), json!({}))
        .await
        .ok(200);
    assert_eq!(fake.counts(), (0, 0));
}

#[tokio::test]
async fn a_platform_without_its_key_refuses_to_start() {
    for p in ["vapi", "retell"] {
        let dir = tempfile::tempdir().unwrap();
        let mut c = test_config(dir.path());
        c.voice_provider = p.into();
        let e = genied::build_app(c).err().expect("no key, no start");
        assert!(e.to_string().contains(&format!("--{p}-api-key")), "{e}");
    }
}

#[tokio::test]
async fn genies_choose_their_provider_among_the_configured_ones() {
    let fake = FakeVapi::start().await;
    let base = fake.base.clone();
    // Default local, Vapi configured beside it.
    let app = TestApp::spawn_with(move |c| {
        c.vapi_base_url = base;
        c.vapi_api_key = Some(genied::config::Secret(vapi::KEY.into()));
        c.provider_retry_base_ms = 5;
    })
    .await;
    let u = app.standard().await;

    let r = app
        .call(
            &u.token,
            "genies",
            "create",
            None,
            json!({"genieName": "Nope", "provider": "retell"}),
        )
        .await;
    r.err(400, "VALIDATION_ERROR");
    let msg = r.body["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("data.provider") && msg.contains("local, vapi"),
        "{msg}"
    );
    assert_eq!(app.count("genies").await, 0);

    let local = create(&app, &u.token, json!({"genieName": "Here"})).await;
    let remote = create(
        &app,
        &u.token,
        json!({"genieName": "There", "provider": "vapi", "systemPrompt": "p"}),
    )
    .await;
    assert_eq!(
        fake.assistant_count(),
        1,
        "only the vapi genie went to Vapi"
    );
    let g = app
        .call(&u.token, "genies", "get", Some(json!(local)), json!({}))
        .await;
    let g = g.ok(200)["genie"].clone();
    assert_eq!(
        (g["provider"].clone(), g["provider_state"].clone()),
        (json!("local"), json!("in_sync"))
    );
    let g = app
        .call(&u.token, "genies", "get", Some(json!(remote)), json!({}))
        .await;
    let g = g.ok(200)["genie"].clone();
    assert_eq!(g["provider"], json!("vapi"));
    assert_eq!(g["provider_error"], json!(null));

    // Updates and deletes go to the genie's own platform.
    let agent = external_id(&app, &remote).await;
    app.call(
        &u.token,
        "genies",
        "update",
        Some(json!(remote)),
        json!({"systemPrompt": "q"}),
    )
    .await
    .ok(200);
    assert_eq!(
        fake.assistant(&agent).unwrap()["model"]["messages"][0]["content"],
        json!("q")
    );
    // A clone lives where its original does.
    let c = app
        .call(&u.token, "genies", "clone", Some(json!(remote)), json!({}))
        .await;
    let clone_id = c.ok(201)["genie"]["id"].as_str().unwrap().to_string();
    assert_eq!(fake.assistant_count(), 2);
    app.call(&u.token, "genies", "delete", Some(json!(remote)), json!({}))
        .await
        .ok(200);
    app.call(
        &u.token,
        "genies",
        "delete",
        Some(json!(clone_id)),
        json!({}),
    )
    .await
    .ok(200);
    assert_eq!(fake.assistant_count(), 0);
    app.call(&u.token, "genies", "delete", Some(json!(local)), json!({}))
        .await
        .ok(200);
}
