//! `clone` and `reorder`.

use serde_json::{Value, json};

use super::{create, external_id, local_agent};
use crate::common::*;

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
    genied::knowledge::agents::sync_agent_documents(&app.state, &id)
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
