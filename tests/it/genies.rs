//! genies over real HTTP: every action, validation with no change, access rules, the local
//! provider's persistence and phone pool, and provider failures against the ElevenLabs fake.

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::fakes::elevenlabs::{FakeElevenLabs, KEY};
use crate::common::*;

async fn create(app: &TestApp, token: &str, data: Value) -> Value {
    app.call(token, "genies", "create", None, data)
        .await
        .ok(201)["genie"]
        .clone()
}

async fn get(app: &TestApp, token: &str, id: &str) -> Resp {
    app.call(token, "genies", "get", Some(json!(id)), json!({}))
        .await
}

async fn local_agent(app: &TestApp, agent_id: &str) -> Option<Value> {
    let id = agent_id.to_string();
    app.state
        .db
        .read(move |c| {
            Ok(c.query_row("SELECT spec, knowledge_base FROM voice_local_agents WHERE agent_id = ?1", [&id], |r| {
                Ok(json!({"spec": serde_json::from_str::<Value>(&r.get::<_, String>(0)?).unwrap(), "kb": serde_json::from_str::<Value>(&r.get::<_, String>(1)?).unwrap()}))
            })
            .ok())
        })
        .await
        .unwrap()
}

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

#[tokio::test]
async fn create_returns_the_full_object_and_provisions_the_agent() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let mut events = app.state.bus.subscribe();
    let r = app
        .call(&u.token, "genies", "create", None, json!({
            "genieName": "Front Desk", "useCase": "support", "systemPrompt": "You are helpful.", "firstMessage": "Hello!",
            "webWelcomeMessage": "Talk to us", "temperature": 0.7, "maxTokens": 256, "brand": "Acme", "category": "Support",
            "description": "Answers calls", "supportEmails": ["help@acme.test"], "sendConversationReports": true,
            "multilingual": true, "voiceStability": 0.4, "voiceSimilarity": 0.8, "maxDurationSeconds": 600,
            "turnTimeoutSeconds": 7, "silenceEndSeconds": 15
        }))
        .await;
    let g = r.ok(201)["genie"].clone();
    let keys: Vec<&str> = g.as_object().unwrap().keys().map(String::as_str).collect();
    for k in [
        "id",
        "name",
        "description",
        "use_case",
        "category",
        "brand",
        "system_prompt",
        "first_message",
        "voice_id",
        "llm_model",
        "temperature",
        "max_tokens",
        "is_active",
        "setup_completed",
        "send_conversation_reports",
        "voice_disabled",
        "max_duration_seconds",
        "turn_timeout_seconds",
        "silence_end_seconds",
        "turn_mode",
        "max_calls",
        "settings",
        "branding",
        "support_emails",
        "phone",
        "page",
        "group",
        "documents",
        "owner",
        "sort_order",
        "created_at",
        "updated_at",
    ] {
        assert!(keys.contains(&k), "missing {k} in {g}");
    }
    assert_eq!(g["name"], json!("Front Desk"));
    assert_eq!(g["llm_model"], json!("gemini-3-flash-preview"));
    assert_eq!(g["voice_id"], json!("21m00Tcm4TlvDq8ikWAM"));
    assert_eq!(g["temperature"], json!(0.7));
    assert_eq!(g["is_active"], json!(true));
    assert_eq!(g["setup_completed"], json!(false));
    assert_eq!(g["turn_mode"], json!("silence"));
    assert_eq!(g["phone"], Value::Null);
    assert_eq!(g["owner"], Value::Null);
    assert_eq!(g["group"], Value::Null);
    assert_eq!(g["documents"], json!([]));
    assert_eq!(g["support_emails"], json!(["help@acme.test"]));
    assert_eq!(g["page"]["welcome_message"], json!("Talk to us"));
    assert!(
        g["page"]["url"]
            .as_str()
            .unwrap()
            .ends_with(g["page"]["slug"].as_str().unwrap())
    );
    let cc = &g["settings"]["conversation_config"];
    assert_eq!(cc["agent"]["prompt"]["prompt"], json!("You are helpful."));
    assert_eq!(cc["tts"]["stability"], json!(0.4));
    assert_eq!(cc["tts"]["similarity_boost"], json!(0.8));
    assert_eq!(cc["turn"]["turn_timeout"], json!(7.0));
    assert_eq!(cc["conversation"]["max_duration_seconds"], json!(600));
    assert!(g["created_at"].as_str().unwrap().ends_with('Z'));

    let agent = local_agent(&app, &external_id(&app, g["id"].as_str().unwrap()).await)
        .await
        .expect("agent at the provider");
    assert_eq!(agent["spec"]["system_prompt"], json!("You are helpful."));
    assert_eq!(agent["spec"]["stability"], json!(0.4));
    assert_eq!(agent["spec"]["multilingual"], json!(true));

    let ev = events.recv().await.unwrap();
    assert_eq!(
        (ev.kind.as_str(), ev.user_id.as_str()),
        ("genie.created", u.id.as_str())
    );
    assert_eq!(ev.data["id"], g["id"]);

    let got = get(&app, &u.token, g["id"].as_str().unwrap()).await;
    assert_eq!(got.ok(200)["genie"], g);
}

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
async fn list_searches_case_insensitively_and_pages() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    for n in ["Alpha Sales", "beta SUPPORT", "Gamma support desk", "Delta"] {
        create(
            &app,
            &u.token,
            json!({"genieName": n, "category": "Support"}),
        )
        .await;
    }
    let r = app
        .call(
            &u.token,
            "genies",
            "list",
            None,
            json!({"filters": {"searchTerm": "SuPPort"}}),
        )
        .await;
    let d = r.ok(200);
    assert_eq!(d["total"], json!(2));
    let names: Vec<&str> = d["genies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["beta SUPPORT", "Gamma support desk"]);
    let s = &d["genies"][0];
    for k in ["id", "name", "is_active", "category", "created_at"] {
        assert!(s.get(k).is_some(), "summary lacks {k}");
    }
    let r = app
        .call(
            &u.token,
            "genies",
            "list",
            None,
            json!({"searchTerm": "alpha"}),
        )
        .await;
    assert_eq!(r.ok(200)["total"], json!(1));
    let r = app
        .call(
            &u.token,
            "genies",
            "list",
            None,
            json!({"limit": 2, "offset": 1}),
        )
        .await;
    let d = r.ok(200);
    assert_eq!(
        (d["total"].clone(), d["limit"].clone(), d["offset"].clone()),
        (json!(4), json!(2), json!(1))
    );
    assert_eq!(d["genies"][0]["name"], json!("beta SUPPORT"));
    app.call(&u.token, "genies", "list", None, json!({"limit": 501}))
        .await
        .err(400, "VALIDATION_ERROR");
    app.call(&u.token, "genies", "list", None, json!({"offset": -1}))
        .await
        .err(400, "VALIDATION_ERROR");
    app.call(&u.token, "genies", "list", None, json!({"limit": "ten"}))
        .await
        .err(400, "VALIDATION_ERROR");
    // REST form: GET /v1/genies?searchTerm=...
    let r = app
        .request(
            Method::GET,
            "/v1/genies?searchTerm=DELTA&limit=5",
            Some(&u.token),
            None,
        )
        .await;
    let d = r.ok(200);
    assert_eq!(
        (d["total"].clone(), d["limit"].clone()),
        (json!(1), json!(5))
    );
}

#[tokio::test]
async fn all_walks_a_keyset_cursor_without_duplicates_or_gaps_while_records_are_added() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let mut originals = Vec::new();
    for i in 0..7 {
        originals.push(
            create(&app, &u.token, json!({"genieName": format!("G{i}")})).await["id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    let mut seen: Vec<String> = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut data = json!({"limit": 3});
        if let Some(c) = &cursor {
            data["cursor"] = json!(c);
        }
        let r = app.call(&u.token, "genies", "all", None, data).await;
        let d = r.ok(200).clone();
        let ids: Vec<String> = d["genies"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["id"].as_str().unwrap().to_string())
            .collect();
        assert!(d["genies"][0].get("settings").is_some(), "full objects");
        seen.extend(ids);
        pages += 1;
        // Inserts between pages must not disturb the walk.
        if pages <= 2 {
            create(
                &app,
                &u.token,
                json!({"genieName": format!("added {pages}")}),
            )
            .await;
        }
        assert_eq!(d["hasMore"].as_bool().unwrap(), d["nextCursor"].is_string());
        match d["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
        assert!(pages < 10);
    }
    let mut dedup = seen.clone();
    dedup.sort();
    dedup.dedup();
    assert_eq!(dedup.len(), seen.len(), "duplicates in {seen:?}");
    for o in &originals {
        assert!(seen.contains(o), "gap: {o} missing");
    }
    assert_eq!(
        seen.len(),
        9,
        "records added during the walk come at its end"
    );
    let mut sorted = seen.clone();
    sorted.sort();
    assert_eq!(sorted, seen);
    for bad in [
        json!({"limit": 0}),
        json!({"limit": 501}),
        json!({"cursor": "garbage!"}),
        json!({"cursor": "Zm9vYmFy"}),
    ] {
        app.call(&u.token, "genies", "all", None, bad)
            .await
            .err(400, "VALIDATION_ERROR");
    }
}

#[tokio::test]
async fn admins_see_all_with_owner_and_impersonate_others_cannot() {
    let app = TestApp::spawn().await;
    let (admin, u) = (app.admin().await, app.standard().await);
    let g = create(&app, &u.token, json!({"genieName": "User's"})).await;
    create(&app, &admin.token, json!({"genieName": "Admin's"})).await;
    // Without adminMode an admin sees their own, owner null.
    let r = app
        .call(&admin.token, "genies", "all", None, json!({}))
        .await;
    let d = r.ok(200);
    assert_eq!(d["genies"].as_array().unwrap().len(), 1);
    assert_eq!(d["genies"][0]["owner"], Value::Null);
    let r = app
        .call(
            &admin.token,
            "genies",
            "all",
            None,
            json!({"adminMode": true}),
        )
        .await;
    let d = r.ok(200);
    assert_eq!(d["genies"].as_array().unwrap().len(), 2);
    let theirs = d["genies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["id"] == g["id"])
        .unwrap();
    assert_eq!(
        theirs["owner"],
        json!({"id": u.id, "full_name": "Test User", "email": u.email})
    );
    let r = app
        .call(
            &admin.token,
            "genies",
            "all",
            None,
            json!({"adminMode": true, "ownerId": u.id}),
        )
        .await;
    let d = r.ok(200);
    assert_eq!(d["genies"].as_array().unwrap().len(), 1);
    assert_eq!(d["genies"][0]["id"], g["id"]);
    let r = app
        .call(
            &admin.token,
            "genies",
            "get",
            Some(g["id"].clone()),
            json!({"adminMode": true}),
        )
        .await;
    assert_eq!(r.ok(200)["genie"]["owner"]["id"], json!(u.id));
    let r = app
        .call(
            &admin.token,
            "genies",
            "list",
            None,
            json!({"adminMode": true}),
        )
        .await;
    assert_eq!(r.ok(200)["total"], json!(2));
    // Non-admins may not use admin options.
    app.call(&u.token, "genies", "all", None, json!({"adminMode": true}))
        .await
        .err(403, "FORBIDDEN");
    app.call(
        &u.token,
        "genies",
        "all",
        None,
        json!({"ownerId": admin.id}),
    )
    .await
    .err(403, "FORBIDDEN");
    app.call(
        &u.token,
        "genies",
        "get",
        Some(g["id"].clone()),
        json!({"adminMode": true}),
    )
    .await
    .err(403, "FORBIDDEN");
    app.call(
        &u.token,
        "genies",
        "create",
        None,
        json!({"genieName": "x", "impersonatedUserId": admin.id}),
    )
    .await
    .err(403, "FORBIDDEN");
    assert_eq!(app.count("genies").await, 2);
    // Impersonation.
    let r = app
        .call(
            &admin.token,
            "genies",
            "create",
            None,
            json!({"genieName": "For user", "impersonatedUserId": u.id}),
        )
        .await;
    let made = r.ok(201)["genie"].clone();
    get(&app, &u.token, made["id"].as_str().unwrap())
        .await
        .ok(200);
    app.call(
        &admin.token,
        "genies",
        "create",
        None,
        json!({"genieName": "x", "impersonatedUserId": "0190d5a8-0000-7000-8000-000000000000"}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    assert_eq!(app.count("genies").await, 3);
}

#[tokio::test]
async fn consumers_read_assigned_genies_only() {
    let app = TestApp::spawn().await;
    let (owner, consumer, stranger) = (
        app.standard().await,
        app.consumer().await,
        app.standard().await,
    );
    let g = create(&app, &owner.token, json!({"genieName": "Shared"})).await;
    let id = g["id"].as_str().unwrap();
    get(&app, &consumer.token, id)
        .await
        .err(404, "AGENT_NOT_FOUND");
    app.call(
        &stranger.token,
        "genies",
        "assign",
        Some(json!(id)),
        json!({"userId": consumer.id}),
    )
    .await
    .err(404, "AGENT_NOT_FOUND");
    app.call(
        &owner.token,
        "genies",
        "assign",
        Some(json!(id)),
        json!({"userId": "0190d5a8-0000-7000-8000-000000000000"}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    app.call(&owner.token, "genies", "assign", Some(json!(id)), json!({}))
        .await
        .err(400, "VALIDATION_ERROR");
    assert_eq!(app.count("genie_assignments").await, 0);
    let r = app
        .call(
            &owner.token,
            "genies",
            "assign",
            Some(json!(id)),
            json!({"userId": consumer.id}),
        )
        .await;
    assert_eq!(
        r.ok(200),
        &json!({"genie_id": id, "user_id": consumer.id, "assigned": true})
    );
    assert_eq!(
        get(&app, &consumer.token, id).await.ok(200)["genie"]["id"],
        json!(id)
    );
    let r = app
        .call(&consumer.token, "genies", "list", None, json!({}))
        .await;
    assert_eq!(r.ok(200)["total"], json!(1));
    let r = app
        .call(&consumer.token, "genies", "all", None, json!({}))
        .await;
    assert_eq!(r.ok(200)["genies"][0]["id"], json!(id));
    // Read-only.
    app.call(
        &consumer.token,
        "genies",
        "update",
        Some(json!(id)),
        json!({"name": "mine now"}),
    )
    .await
    .err(403, "FORBIDDEN");
    app.call(
        &consumer.token,
        "genies",
        "create",
        None,
        json!({"genieName": "x"}),
    )
    .await
    .err(403, "FORBIDDEN");
    app.call(
        &consumer.token,
        "genies",
        "delete",
        Some(json!(id)),
        json!({}),
    )
    .await
    .err(403, "FORBIDDEN");
    let r = app
        .call(
            &owner.token,
            "genies",
            "unassign",
            Some(json!(id)),
            json!({"userId": consumer.id}),
        )
        .await;
    assert_eq!(r.ok(200)["assigned"], json!(false));
    get(&app, &consumer.token, id)
        .await
        .err(404, "AGENT_NOT_FOUND");
    app.call(
        &owner.token,
        "genies",
        "unassign",
        Some(json!(id)),
        json!({"userId": consumer.id}),
    )
    .await
    .err(404, "NOT_FOUND");
}

#[tokio::test]
async fn clone_copies_documents_and_group_but_not_the_phone() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let grp = app
        .call(
            &u.token,
            "genie-groups",
            "create",
            None,
            json!({"name": "G"}),
        )
        .await
        .ok(201)["group"]
        .clone();
    let g = create(&app, &u.token, json!({
        "genieName": "Acme Bot", "systemPrompt": "You work for Acme. Acme is great.", "firstMessage": "Welcome to Acme!",
        "attachPhoneNumber": true, "groupId": grp["id"], "temperature": 0.3
    }))
    .await;
    assert!(
        g["phone"]["number"]
            .as_str()
            .unwrap()
            .starts_with("+1555555")
    );
    let id = g["id"].as_str().unwrap().to_string();
    // A document attached to the source (the knowledge-base resource does this normally).
    let (uid, gid) = (u.id.clone(), id.clone());
    app.state
        .db
        .write(move |c| {
            let now = genied::db::now();
            c.execute(
                "INSERT INTO documents (id, user_id, external_id, name, type, status, created_at, updated_at)
                 VALUES ('0190d5a8-0000-7000-8000-0000000000d1', ?1, 'abcdefghij0123456789', 'FAQ', 'text', 'completed', ?2, ?2)",
                rusqlite::params![uid, now],
            )?;
            c.execute("INSERT INTO genie_documents (genie_id, document_id, created_at) VALUES (?1, '0190d5a8-0000-7000-8000-0000000000d1', ?2)", rusqlite::params![gid, now])?;
            Ok(())
        })
        .await
        .unwrap();
    genied::service::genies::sync_agent_documents(&app.state, &id)
        .await
        .unwrap();
    let agent = local_agent(&app, &external_id(&app, &id).await)
        .await
        .unwrap();
    assert_eq!(
        agent["kb"],
        json!([{"id": "abcdefghij0123456789", "name": "FAQ", "type": "text"}])
    );

    let r = app
        .call(
            &u.token,
            "genies",
            "clone",
            Some(json!(id)),
            json!({"promptReplacements": [{"from": "Acme", "to": "Globex"}]}),
        )
        .await;
    let c = r.ok(201)["genie"].clone();
    assert_eq!(c["name"], json!("Copy of Acme Bot"));
    assert_eq!(
        c["system_prompt"],
        json!("You work for Globex. Globex is great.")
    );
    assert_eq!(c["first_message"], json!("Welcome to Globex!"));
    assert_eq!(c["temperature"], json!(0.3));
    assert_eq!(c["group"]["id"], grp["id"]);
    assert_eq!(c["phone"], Value::Null);
    assert_eq!(
        c["documents"],
        json!([{"id": "0190d5a8-0000-7000-8000-0000000000d1", "name": "FAQ", "type": "text", "status": "completed", "external_id": "abcdefghij0123456789", "is_active": true}])
    );
    assert_ne!(c["id"], g["id"]);
    assert_ne!(c["page"]["slug"], g["page"]["slug"]);
    let agent = local_agent(&app, &external_id(&app, c["id"].as_str().unwrap()).await)
        .await
        .unwrap();
    assert_eq!(agent["kb"][0]["id"], json!("abcdefghij0123456789"));
    assert_eq!(
        agent["spec"]["system_prompt"],
        json!("You work for Globex. Globex is great.")
    );
    let named = app
        .call(
            &u.token,
            "genies",
            "clone",
            Some(json!(id)),
            json!({"name": "Second"}),
        )
        .await;
    assert_eq!(named.ok(201)["genie"]["name"], json!("Second"));
    app.call(
        &u.token,
        "genies",
        "clone",
        Some(json!(id)),
        json!({"promptReplacements": [{"from": "", "to": "x"}]}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    app.call(
        &u.token,
        "genies",
        "clone",
        Some(json!(id)),
        json!({"promptReplacements": "Acme"}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    assert_eq!(app.count("genies").await, 3);
}

#[tokio::test]
async fn reorder_sets_positions_and_refuses_foreign_ids_without_change() {
    let app = TestApp::spawn().await;
    let (u, other) = (app.standard().await, app.standard().await);
    let a = create(&app, &u.token, json!({"genieName": "A"})).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let b = create(&app, &u.token, json!({"genieName": "B"})).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let x = create(&app, &other.token, json!({"genieName": "X"})).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = app
        .call(
            &u.token,
            "genies",
            "reorder",
            None,
            json!({"sort": {&a: 1, &b: 0}}),
        )
        .await;
    assert_eq!(r.ok(200), &json!({"updated": 2}));
    let r = app.call(&u.token, "genies", "list", None, json!({})).await;
    let names: Vec<&str> = r.ok(200)["genies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["B", "A"]);
    app.call(
        &u.token,
        "genies",
        "reorder",
        None,
        json!({"sort": {&a: 0, &x: 1}}),
    )
    .await
    .err(404, "AGENT_NOT_FOUND");
    app.call(
        &u.token,
        "genies",
        "reorder",
        None,
        json!({"sort": {&a: -1}}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    app.call(
        &u.token,
        "genies",
        "reorder",
        None,
        json!({"sort": {"nope": 1}}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    app.call(&u.token, "genies", "reorder", None, json!({}))
        .await
        .err(400, "VALIDATION_ERROR");
    let r = app
        .call(&u.token, "genies", "get", Some(json!(a)), json!({}))
        .await;
    assert_eq!(r.ok(200)["genie"]["sort_order"], json!(1));
}

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

async fn el_app(fake: &FakeElevenLabs) -> TestApp {
    let base = fake.base.clone();
    TestApp::spawn_with(move |c| {
        c.voice_provider = "elevenlabs".into();
        c.elevenlabs_base_url = base;
        c.elevenlabs_api_key = Some(genied::config::Secret(KEY.into()));
    })
    .await
}

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
    // Still failing: the job stays, with its error recorded.
    make_due().await;
    app.run_jobs().await;
    let (status, attempts, err): (String, i64, Option<String>) = app
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
    genied::service::genies::sync_agent_documents(&app.state, &id)
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
    let e = genied::service::genies::sync_agent_documents(&app.state, &id)
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
    let calls = (0..12).map(|i| {
        let data = json!({"settings": {"custom": {format!("k{i}"): i}}});
        app.call(&u.token, "genies", "update", Some(id.clone()), data)
    });
    for r in futures::future::join_all(calls).await {
        r.ok(200);
    }
    let r = app
        .call(&u.token, "genies", "get", Some(id), json!({}))
        .await;
    let custom = r.ok(200)["genie"]["settings"]["custom"]
        .as_object()
        .unwrap()
        .clone();
    assert_eq!(custom.len(), 12, "{custom:?}");
}
