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

/// A service whose default provider is the local one, with Vapi (a fake) configured beside it.
async fn local_beside_vapi() -> (FakeVapi, TestApp) {
    let fake = FakeVapi::start().await;
    let base = fake.base.clone();
    let app = TestApp::spawn_with(move |c| {
        c.vapi_base_url = base;
        c.vapi_api_key = Some(genied::config::Secret(vapi::KEY.into()));
        c.provider_retry_base_ms = 5;
    })
    .await;
    (fake, app)
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
    let (fake, app) = local_beside_vapi().await;
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

async fn lead(app: &TestApp, token: &str, genie: &str, phone: &str, dnc: bool) -> i64 {
    let r = app
        .call(
            token,
            "leads",
            "create",
            None,
            json!({"agent_id": genie, "name": "Ada", "phone": phone, "do_not_call": dnc}),
        )
        .await;
    r.ok(201)["lead"]["id"].as_i64().unwrap()
}

#[tokio::test]
async fn outbound_calls_go_through_the_genies_platform_and_respect_do_not_call() {
    let fake = FakeVapi::start().await;
    let app = vapi_app(&fake).await;
    let u = app.standard().await;
    let id = create(
        &app,
        &u.token,
        json!({"genieName": "Caller", "attachPhoneNumber": true}),
    )
    .await;
    let agent = external_id(&app, &id).await;
    let call = |data: Value| {
        let (app, token, id) = (&app, u.token.clone(), id.clone());
        async move {
            app.call(&token, "genies", "call", Some(json!(id)), data)
                .await
        }
    };
    call(json!({"to": "4155550123"}))
        .await
        .err(400, "VALIDATION_ERROR");
    call(json!({"to": "+14155550123", "extra": 1}))
        .await
        .err(400, "VALIDATION_ERROR");

    let ok_lead = lead(&app, &u.token, &id, "+14155550123", false).await;
    let r =
        call(json!({"to": "+14155550123", "leadId": ok_lead, "variables": {"first_name": "Ada"}}))
            .await;
    let c = r.ok(200)["call"].clone();
    assert_eq!(c["provider"], json!("vapi"));
    let req = fake
        .requests()
        .into_iter()
        .find(|r| r.method == "POST" && r.path == "/call")
        .expect("POST /call reached Vapi");
    assert_eq!(req.body["assistantId"], json!(agent));
    assert_eq!(req.body["customer"], json!({"number": "+14155550123"}));
    assert_eq!(
        req.body["assistantOverrides"],
        json!({"variableValues": {"first_name": "Ada"}})
    );
    assert!(
        fake.phone(req.body["phoneNumberId"].as_str().unwrap())
            .is_some()
    );
    // The lead's activity log has the call.
    let logs = app
        .call(
            &u.token,
            "leads",
            "getLogs",
            Some(json!(ok_lead)),
            json!({}),
        )
        .await;
    let text = logs.ok(200).to_string();
    assert!(
        text.contains(c["id"].as_str().unwrap()) && text.contains("outbound call"),
        "{text}"
    );

    // do_not_call, by lead and by number: refused, nothing reaches Vapi.
    let before = fake.call_count();
    let dnc = lead(&app, &u.token, &id, "+1 (415) 555-0199", true).await;
    let r = call(json!({"to": "+14155550100", "leadId": dnc})).await;
    r.err(409, "CONFLICT");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("do_not_call")
    );
    call(json!({"to": "+14155550199"}))
        .await
        .err(409, "CONFLICT");
    assert_eq!(fake.call_count(), before);

    // Another user's lead is not theirs to name.
    let other = app.standard().await;
    let og = create(&app, &other.token, json!({"genieName": "Other"})).await;
    let their = lead(&app, &other.token, &og, "+14155550111", false).await;
    call(json!({"to": "+14155550111", "leadId": their}))
        .await
        .err(404, "NOT_FOUND");

    // A platform refusal is the platform's words.
    fake.fail("create_call", 400, 1);
    call(json!({"to": "+14155550123"}))
        .await
        .err(502, "UPSTREAM_ERROR");
}

#[tokio::test]
async fn retell_calls_and_providers_that_cannot_call() {
    let fake = FakeRetell::start().await;
    let app = retell_app(&fake).await;
    let u = app.standard().await;
    let id = create(&app, &u.token, json!({"genieName": "Caller"})).await;
    let r = app
        .call(
            &u.token,
            "genies",
            "call",
            Some(json!(id)),
            json!({"to": "+14155550123"}),
        )
        .await;
    r.err(400, "VALIDATION_ERROR");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no phone number")
    );
    app.call(
        &u.token,
        "genies",
        "attach-phone",
        Some(json!(id)),
        json!({}),
    )
    .await
    .ok(200);
    let r = app
        .call(
            &u.token,
            "genies",
            "call",
            Some(json!(id)),
            json!({"to": "+14155550123", "variables": {"plan": "gold"}}),
        )
        .await;
    let cid = r.ok(200)["call"]["id"].as_str().unwrap().to_string();
    let c = fake.call(&cid).unwrap();
    assert_eq!(c["to_number"], json!("+14155550123"));
    assert_eq!(c["agent_id"], json!(external_id(&app, &id).await));
    assert_eq!(c["retell_llm_dynamic_variables"], json!({"plan": "gold"}));
    assert_eq!(c["metadata"]["genie_id"], json!(id));

    let local = TestApp::spawn().await;
    let lu = local.standard().await;
    let lg = create(
        &local,
        &lu.token,
        json!({"genieName": "L", "attachPhoneNumber": true}),
    )
    .await;
    let r = local
        .call(
            &lu.token,
            "genies",
            "call",
            Some(json!(lg)),
            json!({"to": "+14155550123"}),
        )
        .await;
    r.err(400, "VALIDATION_ERROR");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--llm-base-url"),
        "the local provider simulates calls with the model, and has none: {}",
        r.body
    );
}

/// A genie stored before genies had provider rows is pinned, at the next start, to the
/// provider that start has as its default (in the background, beside the start), so a later
/// change of the default does not move it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_genie_without_a_provider_row_is_pinned_to_the_default_at_the_next_start() {
    let (fake, app) = local_beside_vapi().await;
    let u = app.standard().await;
    let old = create(&app, &u.token, json!({"genieName": "Old"})).await;
    let id = old.clone();
    let rows = move |app: &TestApp| {
        let id = id.clone();
        let db = app.state.db.clone();
        async move {
            db.read(move |c| {
                Ok(c.query_row(
                    "SELECT COUNT(*) FROM genie_providers WHERE genie_id = ?1 AND provider = 'local'",
                    [&id],
                    |r| r.get::<_, i64>(0),
                )?)
            })
            .await
            .unwrap()
        }
    };
    assert_eq!(rows(&app).await, 1);
    // As if written before provider rows existed.
    let id = old.clone();
    app.state
        .db
        .write(move |c| Ok(c.execute("DELETE FROM genie_providers WHERE genie_id = ?1", [&id])?))
        .await
        .unwrap();
    assert_eq!(rows(&app).await, 0);

    let app = app.restart().await;
    let end = std::time::Instant::now() + process::DEADLINE;
    while rows(&app).await == 0 {
        assert!(
            std::time::Instant::now() < end,
            "the genie was not pinned after the start"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // The default moves to Vapi: the pinned genie stays local.
    let app = app.restart_with(|c| c.voice_provider = "vapi".into()).await;
    let g = app
        .call(&u.token, "genies", "get", Some(json!(old)), json!({}))
        .await;
    assert_eq!(g.ok(200)["genie"]["provider"], json!("local"));
    assert_eq!(fake.assistant_count(), 0, "nothing went to Vapi");
}
