//! `create` and `delete`: provider failures leave nothing behind, a failed provider delete
//! queues a durable clean-up, the REST routes, the helpers other resources use, and the local
//! provider's conversations.

use reqwest::Method;
use serde_json::{Value, json};

use super::{create, el_app, external_id, get};
use crate::common::fakes::elevenlabs::{FakeElevenLabs, KEY};
use crate::common::*;

#[tokio::test]
async fn elevenlabs_failures_on_create_and_update_leave_nothing_behind() {
    let fake = FakeElevenLabs::start().await;
    let app = el_app(&fake).await;
    let u = app.standard().await;
    fake.fail("create_agent", 500);
    let r = app
        .call(
            &u.token,
            "genies",
            "create",
            None,
            json!({"genieName": "Nope"}),
        )
        .await;
    r.err(502, "UPSTREAM_ERROR");
    assert!(r.body["error"]["message"].as_str().unwrap().contains("500"));
    assert_eq!(app.count("genies").await, 0);
    assert_eq!(fake.agent_count(), 0);
    fake.heal("create_agent");
    // Phone numbers cannot be bought on ElevenLabs: refused before anything is created.
    let r = app
        .call(
            &u.token,
            "genies",
            "create",
            None,
            json!({"genieName": "Phone", "attachPhoneNumber": true}),
        )
        .await;
    r.err(400, "VALIDATION_ERROR");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cannot provision")
    );
    assert_eq!((app.count("genies").await, fake.agent_count()), (0, 0));

    let g = create(
        &app,
        &u.token,
        json!({"genieName": "Real", "systemPrompt": "p1", "temperature": 0.2}),
    )
    .await;
    let id = g["id"].as_str().unwrap();
    let agent_id = external_id(&app, id).await;
    let created = fake.agent(&agent_id).unwrap();
    assert_eq!(
        created["conversation_config"]["agent"]["prompt"]["prompt"],
        json!("p1")
    );
    assert_eq!(created["name"], json!("Real"));

    let r = app
        .call(
            &u.token,
            "genies",
            "update",
            Some(json!(id)),
            json!({"systemPrompt": "p2"}),
        )
        .await;
    assert_eq!(r.ok(200)["genie"]["system_prompt"], json!("p2"));
    let patch = fake
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.method == "PATCH")
        .unwrap();
    assert_eq!(patch.path, format!("/v1/convai/agents/{agent_id}"));
    assert_eq!(patch.api_key.as_deref(), Some(KEY));
    assert_eq!(
        patch.body["conversation_config"]["agent"]["prompt"]["prompt"],
        json!("p2")
    );
    // A change the provider does not care about is not pushed.
    let before = fake.requests().len();
    app.call(
        &u.token,
        "genies",
        "update",
        Some(json!(id)),
        json!({"description": "d"}),
    )
    .await
    .ok(200);
    assert_eq!(fake.requests().len(), before);
    fake.fail("update_agent", 503);
    app.call(
        &u.token,
        "genies",
        "update",
        Some(json!(id)),
        json!({"systemPrompt": "p3"}),
    )
    .await
    .err(502, "UPSTREAM_ERROR");
    assert_eq!(
        get(&app, &u.token, id).await.ok(200)["genie"]["system_prompt"],
        json!("p2")
    );
}

#[tokio::test]
async fn elevenlabs_failure_on_delete_queues_a_durable_cleanup() {
    let fake = FakeElevenLabs::start().await;
    let app = el_app(&fake).await;
    let u = app.standard().await;
    let g = create(&app, &u.token, json!({"genieName": "Doomed"})).await;
    let id = g["id"].as_str().unwrap();
    let agent_id = external_id(&app, id).await;
    fake.fail("delete_agent", 500);
    let r = app
        .call(&u.token, "genies", "delete", Some(json!(id)), json!({}))
        .await;
    assert_eq!(r.ok(200), &json!({"id": id, "deleted": true}));
    get(&app, &u.token, id).await.err(404, "AGENT_NOT_FOUND");
    assert!(
        fake.agent(&agent_id).is_some(),
        "the provider refused, so the agent is still there"
    );
    assert_eq!(app.count("jobs").await, 1);
    let (kind, payload): (String, String) = app
        .state
        .db
        .read(|c| {
            Ok(c.query_row("SELECT kind, payload FROM jobs", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?)
        })
        .await
        .unwrap();
    assert_eq!(kind, "genie.cleanup");
    assert_eq!(
        serde_json::from_str::<Value>(&payload).unwrap()["agent_id"],
        json!(agent_id)
    );

    let make_due = || async {
        app.state
            .db
            .write(|c| Ok(c.execute("UPDATE jobs SET run_at = '2000-01-01T00:00:00.000Z'", [])?))
            .await
            .unwrap();
    };
    // Still failing: the job stays, with its error recorded. The background worker may take
    // the due job before `run_jobs` does, so wait (bounded) until an attempt has ended.
    make_due().await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let (status, attempts, err): (String, i64, Option<String>) = loop {
        app.run_jobs().await;
        let row: (String, i64, Option<String>) = app
            .state
            .db
            .read(|c| {
                Ok(
                    c.query_row("SELECT status, attempts, last_error FROM jobs", [], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                    })?,
                )
            })
            .await
            .unwrap();
        if row.0 != "running" && row.1 >= 1 {
            break row;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no attempt of the clean-up ended: {row:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(status, "pending");
    assert!(attempts >= 1);
    assert!(err.unwrap().contains("500"));
    assert!(fake.agent(&agent_id).is_some());

    fake.heal("delete_agent");
    make_due().await;
    for _ in 0..100 {
        app.run_jobs().await;
        if app.count("jobs").await == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(app.count("jobs").await, 0);
    assert!(
        fake.agent(&agent_id).is_none(),
        "the retried clean-up removed the agent"
    );
}

#[tokio::test]
async fn rest_routes_helpers_and_local_conversations() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    // REST create, PATCH update, DELETE.
    let r = app
        .request(
            Method::POST,
            "/v1/genies",
            Some(&u.token),
            Some(json!({"genieName": "Rest"})),
        )
        .await;
    let id = r.ok(201)["genie"]["id"].as_str().unwrap().to_string();
    let r = app
        .request(
            Method::PATCH,
            &format!("/v1/genies/{id}"),
            Some(&u.token),
            Some(json!({"name": "Rested"})),
        )
        .await;
    assert_eq!(r.ok(200)["genie"]["name"], json!("Rested"));
    let r = app
        .request(
            Method::GET,
            &format!("/v1/genies/{id}"),
            Some(&u.token),
            None,
        )
        .await;
    assert_eq!(r.ok(200)["genie"]["name"], json!("Rested"));
    let r = app
        .request(
            Method::DELETE,
            &format!("/v1/genies/{id}"),
            Some(&u.token),
            None,
        )
        .await;
    assert_eq!(r.ok(200), &json!({"id": id, "deleted": true}));
    assert_eq!(app.count("genies").await, 0);
    assert_eq!(app.count("voice_local_agents").await, 0);

    // The helper the marketplace uses: same rules, same object.
    let g = genied::api::genies::create_genie_for(
        &app.state,
        &u.id,
        json!({"genieName": "Installed", "systemPrompt": "t"}),
    )
    .await
    .unwrap();
    assert_eq!(g["name"], json!("Installed"));
    assert_eq!(g["owner"], Value::Null);
    let e = genied::api::genies::create_genie_for(
        &app.state,
        &u.id,
        json!({"genieName": "x", "temperature": 5}),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), "VALIDATION_ERROR");
    assert_eq!(app.count("genies").await, 1);
    let gid = g["id"].as_str().unwrap().to_string();
    let (uid, g2) = (u.id.clone(), gid.clone());
    let (readable, manageable, consumer_manage) = app
        .state
        .db
        .read(move |c| {
            use genied::db::genies::{can_manage_genie, can_read_genie};
            use genied::db::users::Role;
            Ok((
                can_read_genie(c, &uid, Role::StandardUser, &g2)?,
                can_manage_genie(c, &uid, Role::StandardUser, &g2)?,
                can_manage_genie(c, &uid, Role::Consumer, &g2)?,
            ))
        })
        .await
        .unwrap();
    assert_eq!((readable, manageable, consumer_manage), (true, true, false));

    // Conversations hosted by the service, kept by the local provider.
    use genied::voice::{ConversationDetail, Turn, VoiceProvider, local::LocalProvider};
    let local = LocalProvider::new(app.state.db.clone(), "+15555550100").unwrap();
    let agent = external_id(&app, &gid).await;
    local
        .record_conversation(ConversationDetail {
            conversation_id: "conv_local_1".into(),
            agent_id: agent.clone(),
            status: "done".into(),
            start_time_unix_secs: 1_700_000_000,
            call_duration_secs: 30,
            transcript: vec![Turn {
                role: "agent".into(),
                message: "Hi".into(),
                time_in_call_secs: 0.0,
            }],
            summary: Some("short".into()),
            metadata: json!({"channel": "web"}),
        })
        .await
        .unwrap();
    let page = local.list_conversations(&agent, None).await.unwrap();
    assert_eq!(page.conversations.len(), 1);
    assert_eq!(page.conversations[0].call_duration_secs, 30);
    let c = local.get_conversation("conv_local_1").await.unwrap();
    assert_eq!(c.transcript[0].message, "Hi");
    assert_eq!(
        local.get_conversation("nope").await.unwrap_err().status,
        Some(404)
    );
    assert_eq!(
        local.list_voices().await.unwrap()[0].voice_id,
        genied::voice::DEFAULT_VOICE_ID
    );
}
