//! `update` and settings: partial updates, deep merges, groups, concurrent updates, and the
//! knowledge-base push to the provider.

use serde_json::{Value, json};

use super::{create, el_app, external_id, get, local_agent};
use crate::common::fakes::elevenlabs::FakeElevenLabs;
use crate::common::*;

#[tokio::test]
async fn update_is_partial_and_deep_merges_settings_and_branding() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let g = create(
        &app,
        &u.token,
        json!({
            "genieName": "Bot", "systemPrompt": "old", "firstMessage": "hi", "voiceStability": 0.5,
            "settings": {"custom": {"a": 1}, "conversation_config": {"tts": {"speed": 1.0}}},
            "branding": {"colors": {"primary": "#000"}, "logo": "l.png"}
        }),
    )
    .await;
    let id = g["id"].as_str().unwrap();
    let mut events = app.state.bus.subscribe();
    let r = app
        .call(&u.token, "genies", "update", Some(json!(id)), json!({
            "description": "new description",
            "settings": {
                "custom": {"b": 2},
                "conversation_config": {"agent": {"prompt": {"prompt": "new prompt", "temperature": 1.5, "max_tokens": 99}, "first_message": "hey"},
                                        "tts": {"voice_id": "pNInz6obpgDQGcFmaJgB", "similarity_boost": 0.9}}
            },
            "branding": {"colors": {"secondary": "#fff"}}
        }))
        .await;
    let u2 = r.ok(200)["genie"].clone();
    assert_eq!(u2["name"], json!("Bot"));
    assert_eq!(u2["description"], json!("new description"));
    assert_eq!(u2["system_prompt"], json!("new prompt"));
    assert_eq!(u2["first_message"], json!("hey"));
    assert_eq!(u2["temperature"], json!(1.5));
    assert_eq!(u2["max_tokens"], json!(99));
    assert_eq!(u2["voice_id"], json!("pNInz6obpgDQGcFmaJgB"));
    assert_eq!(u2["settings"]["custom"], json!({"a": 1, "b": 2}));
    let tts = &u2["settings"]["conversation_config"]["tts"];
    assert_eq!(
        (
            tts["stability"].clone(),
            tts["similarity_boost"].clone(),
            tts["speed"].clone()
        ),
        (json!(0.5), json!(0.9), json!(1.0))
    );
    assert_eq!(
        u2["branding"],
        json!({"colors": {"primary": "#000", "secondary": "#fff"}, "logo": "l.png"})
    );
    assert_ne!(u2["updated_at"], g["updated_at"]);
    let ev = events.recv().await.unwrap();
    assert_eq!(ev.kind, "genie.updated");
    // Pushed to the provider.
    let agent = local_agent(&app, &external_id(&app, id).await)
        .await
        .unwrap();
    assert_eq!(agent["spec"]["system_prompt"], json!("new prompt"));
    assert_eq!(agent["spec"]["similarity_boost"], json!(0.9));
    assert_eq!(agent["spec"]["voice_id"], json!("pNInz6obpgDQGcFmaJgB"));

    // Bad updates change nothing.
    for data in [
        json!({"settings": {"conversation_config": {"agent": {"prompt": {"temperature": 3}}}}}),
        json!({"settings": {"conversation_config": {"tts": {"stability": 2}}}}),
        json!({"settings": {"conversation_config": {"agent": {"prompt": {"max_tokens": 1.5}}}}}),
        json!({"settings": {"conversation_config": {"agent": {"prompt": {"prompt": 5}}}}}),
        json!({"temperature": 9}),
        json!({"name": ""}),
        json!({"maxDurationSeconds": -5}),
        json!({"unknownField": 1}),
        json!({"branding": [1]}),
        json!({"group_id": "not-a-uuid"}),
        json!({"group_id": "0190d5a8-0000-7000-8000-000000000000"}),
    ] {
        app.call(&u.token, "genies", "update", Some(json!(id)), data)
            .await
            .err(400, "VALIDATION_ERROR");
    }
    assert_eq!(get(&app, &u.token, id).await.ok(200)["genie"], u2);

    // Groups: own group joins, another user's group is refused, null ungroups.
    let grp = app
        .call(
            &u.token,
            "genie-groups",
            "create",
            None,
            json!({"name": "Sales"}),
        )
        .await
        .ok(201)["group"]
        .clone();
    let other = app.standard().await;
    let foreign = app
        .call(
            &other.token,
            "genie-groups",
            "create",
            None,
            json!({"name": "Theirs"}),
        )
        .await
        .ok(201)["group"]
        .clone();
    app.call(
        &u.token,
        "genies",
        "update",
        Some(json!(id)),
        json!({"group_id": foreign["id"]}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    let joined = app
        .call(
            &u.token,
            "genies",
            "update",
            Some(json!(id)),
            json!({"group_id": grp["id"]}),
        )
        .await
        .ok(200)["genie"]
        .clone();
    assert_eq!(joined["group"]["id"], grp["id"]);
    assert_eq!(joined["group"]["name"], json!("Sales"));
    let left = app
        .call(
            &u.token,
            "genies",
            "update",
            Some(json!(id)),
            json!({"group_id": null}),
        )
        .await
        .ok(200)["genie"]
        .clone();
    assert_eq!(left["group"], Value::Null);
    assert_eq!(left["system_prompt"], json!("new prompt"));
}

#[tokio::test]
async fn document_sync_reaches_elevenlabs() {
    let fake = FakeElevenLabs::start().await;
    let app = el_app(&fake).await;
    let u = app.standard().await;
    let g = create(&app, &u.token, json!({"genieName": "Docs"})).await;
    let id = g["id"].as_str().unwrap().to_string();
    let agent_id = external_id(&app, &id).await;
    let (uid, gid) = (u.id.clone(), id.clone());
    app.state
        .db
        .write(move |c| {
            let now = genied::db::now();
            for (n, (doc_id, ext, ty, active)) in [
                ("0190d5a8-0000-7000-8000-0000000000e1", "ext00000000000000001", "website", true),
                ("0190d5a8-0000-7000-8000-0000000000e2", "ext00000000000000002", "pdf_upload", true),
                ("0190d5a8-0000-7000-8000-0000000000e3", "ext00000000000000003", "text", false),
            ]
            .into_iter()
            .enumerate()
            {
                c.execute(
                    "INSERT INTO documents (id, user_id, external_id, name, type, status, is_active, created_at, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, 'completed', ?6, ?7, ?7)",
                    rusqlite::params![doc_id, uid, ext, format!("Doc {n}"), ty, active, now],
                )?;
                c.execute(
                    "INSERT INTO genie_documents (genie_id, document_id, created_at) VALUES (?1, ?2, ?3)",
                    rusqlite::params![gid, doc_id, format!("{now}{n}")],
                )?;
            }
            Ok(())
        })
        .await
        .unwrap();
    genied::knowledge::agents::sync_agent_documents(&app.state, &id)
        .await
        .unwrap();
    let patch = fake
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.method == "PATCH")
        .unwrap();
    assert_eq!(patch.path, format!("/v1/convai/agents/{agent_id}"));
    assert_eq!(
        patch.body,
        json!({"conversation_config": {"agent": {"prompt": {"knowledge_base": [
            {"id": "ext00000000000000001", "name": "Doc 0", "type": "url"},
            {"id": "ext00000000000000002", "name": "Doc 1", "type": "file"}
        ]}}}})
    );
    let r = app
        .call(&u.token, "genies", "get", Some(json!(id)), json!({}))
        .await;
    let docs = r.ok(200)["genie"]["documents"].as_array().unwrap().clone();
    assert_eq!(docs.len(), 3);
    assert_eq!(docs[2]["is_active"], json!(false));
    fake.fail("update_agent", 500);
    let e = genied::knowledge::agents::sync_agent_documents(&app.state, &id)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "UPSTREAM_ERROR");
}

#[tokio::test]
async fn concurrent_updates_do_not_lose_changes() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let g = create(&app, &u.token, json!({"genieName": "Busy"})).await;
    let id = g["id"].clone();
    // Most change what genied keeps alone (one write each, committed together); every third
    // also changes the prompt, which the provider must hear of first (the exclusive path).
    let calls = (0..12).map(|i| {
        let mut data = json!({"settings": {"custom": {format!("k{i}"): i}}});
        if i % 3 == 0 {
            data["systemPrompt"] = json!(format!("prompt {i}"));
        }
        app.call(&u.token, "genies", "update", Some(id.clone()), data)
    });
    for r in futures::future::join_all(calls).await {
        r.ok(200);
    }
    let r = app
        .call(&u.token, "genies", "get", Some(id.clone()), json!({}))
        .await;
    let genie = r.ok(200)["genie"].clone();
    let custom = genie["settings"]["custom"].as_object().unwrap().clone();
    assert_eq!(custom.len(), 12, "{custom:?}");
    // The provider holds what genied holds: the prompt pushed last is the one stored.
    let agent = local_agent(&app, &external_id(&app, id.as_str().unwrap()).await)
        .await
        .unwrap();
    assert_eq!(agent["spec"]["system_prompt"], genie["system_prompt"]);
    assert!(
        genie["system_prompt"]
            .as_str()
            .is_some_and(|p| p.starts_with("prompt ")),
        "{genie}"
    );
    // One version per prompt change (custom settings are not versioned), besides the first.
    let versions = app
        .call(&u.token, "genies", "versions", Some(id), json!({}))
        .await;
    assert_eq!(versions.ok(200)["count"], json!(5));
}

/// An update that needs nothing of the genie beforehand checks access in its own write
/// (`Changes::manager`): a user who may not manage the genie gets `AGENT_NOT_FOUND`, as for
/// a genie that does not exist, and nothing happens: no change, no audit row, no event, and
/// the provider hears nothing, on the path that writes at once and on the one that pushes
/// first.
#[tokio::test]
async fn an_update_by_someone_who_may_not_manage_the_genie_changes_nothing() {
    let fake = FakeElevenLabs::start().await;
    let app = el_app(&fake).await;
    let (owner, stranger) = (app.standard().await, app.standard().await);
    let consumer = app.user(genied::db::users::Role::Consumer).await;
    let g = create(
        &app,
        &owner.token,
        json!({"genieName": "Mine", "systemPrompt": "p"}),
    )
    .await;
    let id = g["id"].as_str().unwrap().to_string();
    let before = get(&app, &owner.token, &id).await.ok(200).clone();
    let provider_calls = fake.requests().len();
    let audit = app.count("activities").await;
    let mut events = app.state.bus.subscribe();
    // A description is not told to the agent (written at once); a prompt is (pushed first).
    for data in [
        json!({"description": "d"}),
        json!({"systemPrompt": "stolen"}),
    ] {
        app.call(
            &stranger.token,
            "genies",
            "update",
            Some(json!(id)),
            data.clone(),
        )
        .await
        .err(404, "AGENT_NOT_FOUND");
        // Consumers write nothing at all (refused before any action runs).
        app.call(
            &consumer.token,
            "genies",
            "update",
            Some(json!(id)),
            data.clone(),
        )
        .await
        .err(403, "FORBIDDEN");
        // Validation still comes after access: a bad field does not reveal the genie.
        app.call(
            &stranger.token,
            "genies",
            "update",
            Some(json!(id)),
            json!({"name": ""}),
        )
        .await
        .err(404, "AGENT_NOT_FOUND");
    }
    app.call(
        &owner.token,
        "genies",
        "update",
        Some(json!("0190d5a8-0000-7000-8000-000000000000")),
        json!({"description": "d"}),
    )
    .await
    .err(404, "AGENT_NOT_FOUND");
    assert_eq!(get(&app, &owner.token, &id).await.ok(200), &before);
    assert_eq!(fake.requests().len(), provider_calls);
    assert_eq!(app.count("activities").await, audit);
    assert!(events.try_recv().is_err(), "no event");

    // The owner's update of both kinds goes through, and the push reaches the provider.
    for (data, field, value) in [
        (json!({"description": "d"}), "description", json!("d")),
        (
            json!({"systemPrompt": "new"}),
            "system_prompt",
            json!("new"),
        ),
    ] {
        let r = app
            .call(&owner.token, "genies", "update", Some(json!(id)), data)
            .await;
        assert_eq!(r.ok(200)["genie"][field], value);
    }
    assert!(
        fake.requests()[provider_calls..]
            .iter()
            .any(|r| r.method == "PATCH")
    );
    assert_eq!(app.count("activities").await, audit + 2);
}
