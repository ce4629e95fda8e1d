//! Genie versions over real HTTP (issue #18): every change of what a genie says and does is
//! a numbered version; diff, rollback (pushed to the provider, checked at the ElevenLabs
//! fake), drafts and publish, access rules, restarts, events and the audit log.

use serde_json::{Value, json};

use crate::common::fakes::elevenlabs::{FakeElevenLabs, KEY};
use crate::common::*;

async fn el_app(fake: &FakeElevenLabs) -> TestApp {
    let base = fake.base.clone();
    TestApp::spawn_with(move |c| {
        c.voice_provider = "elevenlabs".into();
        c.elevenlabs_base_url = base;
        c.elevenlabs_api_key = Some(genied::config::Secret(KEY.into()));
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

async fn call(app: &TestApp, u: &User, action: &str, id: &str, data: Value) -> Resp {
    app.call(&u.token, "genies", action, Some(json!(id)), data)
        .await
}

async fn versions(app: &TestApp, u: &User, id: &str) -> Value {
    call(app, u, "versions", id, json!({}))
        .await
        .ok(200)
        .clone()
}

async fn agent_id(app: &TestApp, id: &str) -> String {
    let id = id.to_string();
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

fn patches(fake: &FakeElevenLabs, agent: &str) -> Vec<Value> {
    fake.requests()
        .into_iter()
        .filter(|r| r.method == "PATCH" && r.path == format!("/v1/convai/agents/{agent}"))
        .map(|r| r.body)
        .collect()
}

#[tokio::test]
async fn changes_are_versions_and_rollback_restores_the_provider_copy() {
    let fake = FakeElevenLabs::start().await;
    let app = el_app(&fake).await;
    let u = app.standard().await;
    let id = create(
        &app,
        &u.token,
        json!({"genieName": "Ver", "systemPrompt": "prompt one", "firstMessage": "hello", "temperature": 0.5}),
    )
    .await;
    let agent = agent_id(&app, &id).await;
    let v = versions(&app, &u, &id).await;
    assert_eq!(v["count"], json!(1));
    assert_eq!(v["versions"][0]["version"], json!(1));
    assert_eq!(v["versions"][0]["summary"], json!("created"));
    assert_eq!(v["versions"][0]["live"], json!(true));
    assert_eq!(v["versions"][0]["created_by"], json!(u.id));

    call(
        &app,
        &u,
        "update",
        &id,
        json!({"system_prompt": "prompt two", "temperature": 0.9}),
    )
    .await
    .ok(200);
    // A rename is not a change of what the genie says or does: no version.
    call(&app, &u, "update", &id, json!({"name": "Renamed"}))
        .await
        .ok(200);
    let v = versions(&app, &u, &id).await;
    assert_eq!(v["count"], json!(2));
    assert_eq!(v["versions"][0]["version"], json!(2));
    assert_eq!(
        v["versions"][0]["summary"],
        json!("changed system_prompt, temperature")
    );
    assert_eq!(
        (
            v["versions"][0]["live"].clone(),
            v["versions"][1]["live"].clone()
        ),
        (json!(true), json!(false))
    );
    assert_eq!(
        fake.agent(&agent).unwrap()["conversation_config"]["agent"]["prompt"]["prompt"],
        json!("prompt two")
    );

    let one = call(&app, &u, "get-version", &id, json!({"version": 1})).await;
    let one = one.ok(200)["version"].clone();
    assert_eq!(one["config"]["system_prompt"], json!("prompt one"));
    assert_eq!(one["config"]["temperature"], json!(0.5));
    assert_eq!(one["config"]["first_message"], json!("hello"));
    assert_eq!(one["live"], json!(false));

    let d = call(&app, &u, "diff", &id, json!({"from": 1, "to": 2})).await;
    assert_eq!(
        d.ok(200)["changes"],
        json!([
            {"path": "system_prompt", "from": "prompt one", "to": "prompt two"},
            {"path": "temperature", "from": 0.5, "to": 0.9}
        ])
    );

    let mut events = app.state.bus.subscribe();
    let patches_before = patches(&fake, &agent).len();
    let r = call(&app, &u, "rollback", &id, json!({"version": 1})).await;
    let r = r.ok(200).clone();
    assert_eq!(r["version"], json!(3));
    assert_eq!(r["genie"]["system_prompt"], json!("prompt one"));
    assert_eq!(r["genie"]["temperature"], json!(0.5));
    assert_eq!(r["genie"]["name"], json!("Renamed"));
    // The provider got the old configuration back, in one PATCH.
    let sent = patches(&fake, &agent);
    assert_eq!(sent.len(), patches_before + 1);
    let last = sent.last().unwrap();
    assert_eq!(
        last["conversation_config"]["agent"]["prompt"]["prompt"],
        json!("prompt one")
    );
    assert_eq!(
        last["conversation_config"]["agent"]["prompt"]["temperature"],
        json!(0.5)
    );
    let stored = fake.agent(&agent).unwrap();
    assert_eq!(
        stored["conversation_config"]["agent"]["prompt"]["prompt"],
        json!("prompt one")
    );
    let ev = events.recv().await.unwrap();
    assert_eq!(ev.kind, "genie.rolled_back");
    assert_eq!(ev.data["to_version"], json!(1));
    assert_eq!(ev.data["version"], json!(3));

    // History is never rewritten: the rollback is version 3, live.
    let v = versions(&app, &u, &id).await;
    assert_eq!(v["count"], json!(3));
    assert_eq!(v["versions"][0]["summary"], json!("rollback to version 1"));
    assert_eq!(v["versions"][0]["live"], json!(true));
    let d = call(&app, &u, "diff", &id, json!({"from": 1, "to": 3})).await;
    assert_eq!(d.ok(200)["changes"], json!([]));

    // Bad requests change nothing.
    call(&app, &u, "rollback", &id, json!({"version": 99}))
        .await
        .err(404, "NOT_FOUND");
    call(&app, &u, "rollback", &id, json!({"version": "one"}))
        .await
        .err(400, "VALIDATION_ERROR");
    call(&app, &u, "get-version", &id, json!({"version": 0}))
        .await
        .err(400, "VALIDATION_ERROR");
    call(&app, &u, "diff", &id, json!({"from": 1}))
        .await
        .err(400, "VALIDATION_ERROR");
    assert_eq!(versions(&app, &u, &id).await["count"], json!(3));

    // A provider failure leaves no version and no change.
    fake.fail("update_agent", 500);
    call(&app, &u, "rollback", &id, json!({"version": 2}))
        .await
        .err(502, "UPSTREAM_ERROR");
    fake.heal("update_agent");
    assert_eq!(versions(&app, &u, &id).await["count"], json!(3));

    // Every action is in the activity log.
    let acts = app
        .call(&u.token, "activities", "list", None, json!({}))
        .await;
    let rows = acts.ok(200)["activities"].as_array().unwrap().clone();
    let rb = rows
        .iter()
        .find(|a| a["action"] == "rollback")
        .expect("rollback audited");
    assert_eq!(rb["record_id"], json!(id));
    assert!(rb["summary"].as_str().unwrap().contains("version 1"));
}

#[tokio::test]
async fn drafts_stage_without_touching_live_and_publish_makes_a_version() {
    let fake = FakeElevenLabs::start().await;
    let app = el_app(&fake).await;
    let u = app.standard().await;
    let id = create(
        &app,
        &u.token,
        json!({"genieName": "Drafty", "systemPrompt": "live prompt"}),
    )
    .await;
    let agent = agent_id(&app, &id).await;
    let sent = patches(&fake, &agent).len();

    let r = call(
        &app,
        &u,
        "update",
        &id,
        json!({"draft": true, "system_prompt": "draft prompt"}),
    )
    .await;
    let r = r.ok(200).clone();
    assert_eq!(r["draft"]["config"]["system_prompt"], json!("draft prompt"));
    assert_eq!(
        r["changes"],
        json!([{"path": "system_prompt", "from": "live prompt", "to": "draft prompt"}])
    );
    // A second draft update stacks on the first.
    call(
        &app,
        &u,
        "update",
        &id,
        json!({"draft": true, "temperature": 1.2}),
    )
    .await
    .ok(200);
    // Live and the provider are untouched.
    let g = call(&app, &u, "get", &id, json!({})).await;
    assert_eq!(g.ok(200)["genie"]["system_prompt"], json!("live prompt"));
    assert_eq!(patches(&fake, &agent).len(), sent);
    let v = versions(&app, &u, &id).await;
    assert_eq!(v["count"], json!(1));
    assert_eq!(v["draft"]["base_version"], json!(1));
    let d = call(&app, &u, "diff", &id, json!({"from": 1, "to": "draft"})).await;
    assert_eq!(d.ok(200)["changes"].as_array().unwrap().len(), 2);
    // A draft holds configuration only; a rename in it is refused and changes nothing.
    call(
        &app,
        &u,
        "update",
        &id,
        json!({"draft": true, "name": "Other"}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    let dv = call(&app, &u, "get-version", &id, json!({"version": "draft"})).await;
    assert_eq!(dv.ok(200)["version"]["config"]["temperature"], json!(1.2));

    let mut events = app.state.bus.subscribe();
    let p = call(&app, &u, "publish", &id, json!({"note": "friendlier"})).await;
    let p = p.ok(200).clone();
    assert_eq!(p["version"], json!(2));
    assert_eq!(p["genie"]["system_prompt"], json!("draft prompt"));
    assert_eq!(p["genie"]["temperature"], json!(1.2));
    assert_eq!(
        fake.agent(&agent).unwrap()["conversation_config"]["agent"]["prompt"]["prompt"],
        json!("draft prompt")
    );
    let ev = events.recv().await.unwrap();
    assert_eq!(ev.kind, "genie.version_published");
    assert_eq!(ev.data["version"], json!(2));
    let v = versions(&app, &u, &id).await;
    assert_eq!(v["versions"][0]["summary"], json!("friendlier"));
    assert_eq!(v["draft"], Value::Null);
    call(&app, &u, "get-version", &id, json!({"version": "draft"}))
        .await
        .err(404, "NOT_FOUND");
    call(&app, &u, "publish", &id, json!({}))
        .await
        .err(409, "CONFLICT");
    call(&app, &u, "discard-draft", &id, json!({}))
        .await
        .err(409, "CONFLICT");

    // Discard drops a draft and leaves live alone.
    call(
        &app,
        &u,
        "update",
        &id,
        json!({"draft": true, "first_message": "yo"}),
    )
    .await
    .ok(200);
    let r = call(&app, &u, "discard-draft", &id, json!({})).await;
    assert_eq!(r.ok(200)["discarded"], json!(true));
    let g = call(&app, &u, "get", &id, json!({})).await;
    assert_eq!(g.ok(200)["genie"]["first_message"], Value::Null);
    assert_eq!(versions(&app, &u, &id).await["count"], json!(2));
}

#[tokio::test]
async fn versions_belong_to_the_genie_owner_and_consumers_only_read() {
    let app = TestApp::spawn().await;
    let (u, other, consumer, admin) = (
        app.standard().await,
        app.standard().await,
        app.consumer().await,
        app.admin().await,
    );
    let id = create(
        &app,
        &u.token,
        json!({"genieName": "Mine", "systemPrompt": "a"}),
    )
    .await;
    call(&app, &u, "update", &id, json!({"system_prompt": "b"}))
        .await
        .ok(200);
    for (action, data) in [
        ("versions", json!({})),
        ("get-version", json!({"version": 1})),
        ("diff", json!({"from": 1, "to": 2})),
        ("version-stats", json!({})),
        ("rollback", json!({"version": 1})),
        ("publish", json!({})),
        ("discard-draft", json!({})),
        (
            "set-traffic",
            json!({"traffic": [{"version": 1, "weight": 100}]}),
        ),
        ("update", json!({"draft": true, "system_prompt": "x"})),
    ] {
        call(&app, &other, action, &id, data)
            .await
            .err(404, "AGENT_NOT_FOUND");
    }
    call(&app, &u, "assign", &id, json!({"userId": consumer.id}))
        .await
        .ok(200);
    assert_eq!(versions(&app, &consumer, &id).await["count"], json!(2));
    call(&app, &consumer, "get-version", &id, json!({"version": 1}))
        .await
        .ok(200);
    for (action, data) in [
        ("rollback", json!({"version": 1})),
        ("set-traffic", json!({"traffic": []})),
        ("update", json!({"draft": true, "system_prompt": "x"})),
    ] {
        call(&app, &consumer, action, &id, data)
            .await
            .err(403, "FORBIDDEN");
    }
    // Admins manage every genie.
    call(&app, &admin, "rollback", &id, json!({"version": 1}))
        .await
        .ok(200);
    let v = versions(&app, &u, &id).await;
    assert_eq!(v["count"], json!(3));
    assert_eq!(v["versions"][0]["created_by"], json!(admin.id));
}

#[tokio::test]
async fn versions_survive_a_restart_and_documents_are_part_of_them() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let id = create(
        &app,
        &u.token,
        json!({"genieName": "Keep", "systemPrompt": "a"}),
    )
    .await;
    let doc = app
        .call(
            &u.token,
            "knowledge-base",
            "create",
            None,
            json!({"title": "Hours", "content": "We open at nine."}),
        )
        .await
        .ok(201)["document"]["id"]
        .clone();
    app.call(
        &u.token,
        "knowledge-base",
        "attach",
        None,
        json!({"agentId": id, "documents": [{"id": doc, "name": "Hours", "type": "file"}]}),
    )
    .await
    .ok(200);
    let v = versions(&app, &u, &id).await;
    assert_eq!(v["count"], json!(2));
    assert_eq!(v["versions"][0]["summary"], json!("changed documents"));
    call(&app, &u, "update", &id, json!({"system_prompt": "b"}))
        .await
        .ok(200);
    let app = app.restart().await;
    let v = versions(&app, &u, &id).await;
    assert_eq!(v["count"], json!(3));
    let two = call(&app, &u, "get-version", &id, json!({"version": 2})).await;
    assert_eq!(
        two.ok(200)["version"]["config"]["documents"],
        json!([{"id": doc, "name": "Hours"}])
    );
    // Rolling back to version 1 detaches the document again.
    call(&app, &u, "rollback", &id, json!({"version": 1}))
        .await
        .ok(200);
    let g = call(&app, &u, "get", &id, json!({})).await;
    let g = g.ok(200)["genie"].clone();
    assert_eq!(g["documents"], json!([]));
    assert_eq!(g["system_prompt"], json!("a"));
}

/// The README's storage figure: 1,000 versions of a genie whose prompt is 10 KB of English
/// (the first 10,240 bytes of docs/api.md), each version a small edit of the one before, as
/// `update` records them. Prints the database growth and holds it under a bound, so the
/// figure cannot silently go stale.
#[tokio::test]
async fn a_thousand_versions_of_a_10_kb_prompt_stay_small_on_disk() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let id = insert_genie(&app, &u, "Big").await;
    let doc = include_str!("../../docs/api.md");
    let base: String = doc.chars().take(10_240).collect();
    let (gid, uid, text_len) = (id.clone(), u.id.clone(), base.len());
    let (before, after, payload) = app
        .state
        .db
        .write(move |c| {
            // SQLite: the whole file; PostgreSQL: the table with its TOAST and indexes.
            let pages = |c: &genied::db::Connection| -> rusqlite::Result<i64> {
                if c.is_postgres() {
                    return c.query_row(
                        "SELECT pg_total_relation_size('genie_versions')",
                        [],
                        |r| r.get(0),
                    );
                }
                c.query_row("PRAGMA page_count", [], |r| r.get::<_, i64>(0))
                    .and_then(|n| {
                        Ok(n * c.query_row("PRAGMA page_size", [], |r| r.get::<_, i64>(0))?)
                    })
            };
            let before = pages(c)?;
            let mut config = genied::service::genie_versions::current(c, &gid)?.unwrap();
            for i in 0..1000 {
                config["system_prompt"] =
                    json!(format!("{base}\nRule {i}: mention offer {i} once."));
                genied::service::genie_versions::record(
                    c,
                    &gid,
                    None,
                    &config,
                    Some(&uid),
                    None,
                    false,
                )?;
            }
            let payload: i64 = c.query_row(
                "SELECT SUM(length(config)) FROM genie_versions WHERE genie_id = ?1",
                [&gid],
                |r| r.get(0),
            )?;
            Ok((before, pages(c)?, payload))
        })
        .await
        .unwrap();
    let grown = after - before;
    println!(
        "1,000 versions, 10 KB prompt: database grew {grown} bytes; compressed configurations {payload} bytes \
         (uncompressed about {} bytes)",
        1000 * (text_len + 300)
    );
    assert_eq!(versions(&app, &u, &id).await["count"], json!(1000));
    // Whole versions, edits right after them and long chains of edits all read back exactly.
    for v in [1, 2, 32, 33, 34, 500, 999, 1000] {
        let r = call(&app, &u, "get-version", &id, json!({"version": v})).await;
        let prompt = r.ok(200)["version"]["config"]["system_prompt"].clone();
        let want = format!(
            "{}\nRule {}: mention offer {} once.",
            doc.chars().take(10_240).collect::<String>(),
            v - 1,
            v - 1
        );
        assert!(prompt == json!(want), "version {v} reads back wrong");
    }
    // Stored as edits, a small fraction of the 10 MB the plain text would take.
    assert!(grown < 1_000_000, "grew {grown} bytes");
    assert!(payload < 500_000, "{payload}");
}
