//! Input validation: bad create input and bad ids are refused and change nothing; another
//! user's genies read as absent.

use serde_json::json;

use super::{create, get};
use crate::common::*;

#[tokio::test]
async fn bad_create_input_is_refused_and_changes_nothing() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let cases = [
        (json!({}), "genieName"),
        (json!({"genieName": "   "}), "genieName"),
        (json!({"genieName": "x", "temperature": 2.5}), "temperature"),
        (
            json!({"genieName": "x", "temperature": -0.1}),
            "temperature",
        ),
        (
            json!({"genieName": "x", "voiceStability": 1.5}),
            "voiceStability",
        ),
        (
            json!({"genieName": "x", "voiceSimilarity": -0.1}),
            "voiceSimilarity",
        ),
        (
            json!({"genieName": "x", "maxDurationSeconds": 0}),
            "maxDurationSeconds",
        ),
        (
            json!({"genieName": "x", "turnTimeoutSeconds": -1}),
            "turnTimeoutSeconds",
        ),
        (
            json!({"genieName": "x", "silenceEndSeconds": 0}),
            "silenceEndSeconds",
        ),
        (json!({"genieName": "x", "maxTokens": 0}), "maxTokens"),
        (json!({"genieName": "x", "maxTokens": "many"}), "maxTokens"),
        (
            json!({"genieName": "x", "temperature": "hot"}),
            "temperature",
        ),
        (
            json!({"genieName": "x", "supportEmails": ["not-an-email"]}),
            "supportEmails",
        ),
        (
            json!({"genieName": "x", "groupId": "not-a-uuid"}),
            "groupId",
        ),
        (
            json!({"genieName": "x", "groupId": "0190d5a8-0000-7000-8000-000000000000"}),
            "groupId",
        ),
        (json!({"genieName": "x", "settings": "flat"}), "settings"),
    ];
    for (data, field) in cases {
        let r = app
            .call(&u.token, "genies", "create", None, data.clone())
            .await;
        r.err(400, "VALIDATION_ERROR");
        assert!(
            r.body["error"]["message"].as_str().unwrap().contains(field),
            "{data} -> {}",
            r.body
        );
    }
    assert_eq!(app.count("genies").await, 0);
    assert_eq!(app.count("voice_local_agents").await, 0);
}

#[tokio::test]
async fn ids_are_checked_and_other_users_genies_read_as_absent() {
    let app = TestApp::spawn().await;
    let (a, b) = (app.standard().await, app.standard().await);
    let g = create(
        &app,
        &a.token,
        json!({"genieName": "Mine", "systemPrompt": "secret"}),
    )
    .await;
    let id = g["id"].as_str().unwrap();
    get(&app, &a.token, "not-a-uuid")
        .await
        .err(400, "VALIDATION_ERROR");
    get(&app, &a.token, "0190d5a8-0000-7000-8000-000000000000")
        .await
        .err(404, "AGENT_NOT_FOUND");
    get(&app, &b.token, id).await.err(404, "AGENT_NOT_FOUND");
    app.call(
        &b.token,
        "genies",
        "update",
        Some(json!(id)),
        json!({"name": "stolen"}),
    )
    .await
    .err(404, "AGENT_NOT_FOUND");
    app.call(&b.token, "genies", "delete", Some(json!(id)), json!({}))
        .await
        .err(404, "AGENT_NOT_FOUND");
    app.call(&b.token, "genies", "clone", Some(json!(id)), json!({}))
        .await
        .err(404, "AGENT_NOT_FOUND");
    app.call(
        &b.token,
        "genies",
        "reorder",
        None,
        json!({"sort": {id: 3}}),
    )
    .await
    .err(404, "AGENT_NOT_FOUND");
    app.call(
        &b.token,
        "genies",
        "attach-phone",
        Some(json!(id)),
        json!({}),
    )
    .await
    .err(404, "AGENT_NOT_FOUND");
    let list = app.call(&b.token, "genies", "list", None, json!({})).await;
    assert_eq!(list.ok(200)["total"], json!(0));
    let all = app.call(&b.token, "genies", "all", None, json!({})).await;
    assert_eq!(all.ok(200)["genies"], json!([]));
    assert_eq!(get(&app, &a.token, id).await.ok(200)["genie"], g);
    app.call(&a.token, "genies", "fly", Some(json!(id)), json!({}))
        .await
        .err(400, "INVALID_ACTION");
}
