//! `attach-phone` and `release-phone`: the local phone pool, and ElevenLabs' refusal.

use serde_json::{Value, json};

use super::{create, el_app, get};
use crate::common::fakes::elevenlabs::FakeElevenLabs;
use crate::common::*;

#[tokio::test]
async fn local_phone_pool_never_hands_out_a_number_twice_and_survives_restarts() {
    let app = TestApp::spawn_with(|c| c.phone_pool = "+15555550100-+15555550101".into()).await;
    let u = app.standard().await;
    let g1 = create(
        &app,
        &u.token,
        json!({"genieName": "One", "attachPhoneNumber": true}),
    )
    .await;
    assert_eq!(
        g1["phone"],
        json!({"number": "+15555550100", "status": "active"})
    );
    let g2 = create(&app, &u.token, json!({"genieName": "Two"})).await;
    let id2 = g2["id"].as_str().unwrap().to_string();
    let r = app
        .call(
            &u.token,
            "genies",
            "attach-phone",
            Some(json!(id2)),
            json!({}),
        )
        .await;
    assert_eq!(r.ok(200)["genie"]["phone"]["number"], json!("+15555550101"));
    app.call(
        &u.token,
        "genies",
        "attach-phone",
        Some(json!(id2)),
        json!({}),
    )
    .await
    .err(409, "CONFLICT");
    // Pool exhausted: the provider refuses, so the genie is not created (all-or-nothing).
    let r = app
        .call(
            &u.token,
            "genies",
            "create",
            None,
            json!({"genieName": "Three", "attachPhoneNumber": true}),
        )
        .await;
    r.err(502, "UPSTREAM_ERROR");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("exhausted")
    );
    assert_eq!(app.count("genies").await, 2);
    assert_eq!(app.count("voice_local_agents").await, 2);

    let app = app.restart().await;
    let r = app
        .call(&u.token, "genies", "get", Some(json!(id2)), json!({}))
        .await;
    assert_eq!(r.ok(200)["genie"]["phone"]["number"], json!("+15555550101"));
    assert_eq!(app.count("voice_local_agents").await, 2);
    let r = app
        .call(
            &u.token,
            "genies",
            "release-phone",
            Some(json!(id2)),
            json!({}),
        )
        .await;
    assert_eq!(r.ok(200)["genie"]["phone"], Value::Null);
    app.call(
        &u.token,
        "genies",
        "release-phone",
        Some(json!(id2)),
        json!({}),
    )
    .await
    .err(404, "NOT_FOUND");
    assert_eq!(app.count("voice_local_numbers").await, 1);
    // The released number goes back to the pool.
    let g3 = create(
        &app,
        &u.token,
        json!({"genieName": "Three", "attachPhoneNumber": true}),
    )
    .await;
    assert_eq!(g3["phone"]["number"], json!("+15555550101"));
    // Delete releases the number and removes the agent.
    let mut events = app.state.bus.subscribe();
    let r = app
        .call(
            &u.token,
            "genies",
            "delete",
            Some(g1["id"].clone()),
            json!({}),
        )
        .await;
    assert_eq!(r.ok(200), &json!({"id": g1["id"], "deleted": true}));
    assert_eq!(events.recv().await.unwrap().kind, "genie.deleted");
    get(&app, &u.token, g1["id"].as_str().unwrap())
        .await
        .err(404, "AGENT_NOT_FOUND");
    assert_eq!(app.count("voice_local_numbers").await, 1);
    assert_eq!(app.count("voice_local_agents").await, 2);
    assert_eq!(app.count("jobs").await, 0);
}

#[tokio::test]
async fn elevenlabs_attach_phone_is_refused_honestly() {
    let fake = FakeElevenLabs::start().await;
    let app = el_app(&fake).await;
    let u = app.standard().await;
    let g = create(&app, &u.token, json!({"genieName": "No phone"})).await;
    let before = fake.requests().len();
    let r = app
        .call(
            &u.token,
            "genies",
            "attach-phone",
            Some(g["id"].clone()),
            json!({}),
        )
        .await;
    r.err(400, "VALIDATION_ERROR");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("imported")
    );
    assert_eq!(fake.requests().len(), before);
    assert_eq!(app.count("genie_phone_numbers").await, 0);
}
