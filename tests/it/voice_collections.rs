//! voice-collections: create, rename, add/remove voices, ordering, delete, isolation.

use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn collections_lifecycle() {
    let app = TestApp::spawn().await;
    let alice = app.standard().await;
    let bob = app.standard().await;

    app.call(
        &alice.token,
        "voice-collections",
        "create",
        None,
        json!({"name": ""}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    app.call(
        &alice.token,
        "voice-collections",
        "create",
        None,
        json!({"name": "X", "voice_ids": ["nope"]}),
    )
    .await
    .err(404, "NOT_FOUND");
    assert_eq!(app.count("voice_collections").await, 0);

    let r = app
        .call(
            &alice.token,
            "voice-collections",
            "create",
            None,
            json!({"name": "Support", "voiceIds": ["cat_aria", "cat_liam"]}),
        )
        .await;
    let col = r.ok(201)["collection"].clone();
    let id = col["id"].as_str().unwrap().to_string();
    assert_eq!(col["voice_ids"], json!(["cat_aria", "cat_liam"]));
    assert_eq!(col["voices"][1]["name"], json!("Liam"));
    let r2 = app
        .call(
            &alice.token,
            "voice-collections",
            "create",
            None,
            json!({"name": "Sales"}),
        )
        .await;
    let id2 = r2.ok(201)["collection"]["id"].as_str().unwrap().to_string();

    app.call(
        &bob.token,
        "voice-collections",
        "get",
        Some(json!(id)),
        json!({}),
    )
    .await
    .err(404, "NOT_FOUND");
    app.call(
        &bob.token,
        "voice-collections",
        "add-voice",
        Some(json!(id)),
        json!({"voice_id": "cat_sam"}),
    )
    .await
    .err(404, "NOT_FOUND");
    assert_eq!(
        app.call(&bob.token, "voice-collections", "all", None, json!({}))
            .await
            .ok(200)["count"],
        json!(0)
    );

    let r = app
        .call(
            &alice.token,
            "voice-collections",
            "update",
            Some(json!(id)),
            json!({"name": "Front desk"}),
        )
        .await;
    assert_eq!(r.ok(200)["collection"]["name"], json!("Front desk"));
    app.call(
        &alice.token,
        "voice-collections",
        "update",
        Some(json!(id)),
        json!({}),
    )
    .await
    .err(400, "VALIDATION_ERROR");

    let r = app
        .call(
            &alice.token,
            "voice-collections",
            "add-voice",
            Some(json!(id)),
            json!({"voice_id": "cat_sam"}),
        )
        .await;
    assert_eq!(
        r.ok(200)["collection"]["voice_ids"],
        json!(["cat_aria", "cat_liam", "cat_sam"])
    );
    app.call(
        &alice.token,
        "voice-collections",
        "add-voice",
        Some(json!(id)),
        json!({"voice_id": "bogus"}),
    )
    .await
    .err(404, "NOT_FOUND");

    let r = app
        .call(
            &alice.token,
            "voice-collections",
            "reorder",
            Some(json!(id)),
            json!({"voice_ids": ["cat_sam", "cat_aria", "cat_liam"]}),
        )
        .await;
    assert_eq!(
        r.ok(200)["collection"]["voice_ids"],
        json!(["cat_sam", "cat_aria", "cat_liam"])
    );
    app.call(
        &alice.token,
        "voice-collections",
        "reorder",
        Some(json!(id)),
        json!({"voice_ids": ["cat_sam"]}),
    )
    .await
    .err(400, "VALIDATION_ERROR");

    let r = app
        .call(
            &alice.token,
            "voice-collections",
            "remove-voice",
            Some(json!(id)),
            json!({"voiceId": "cat_aria"}),
        )
        .await;
    assert_eq!(
        r.ok(200)["collection"]["voice_ids"],
        json!(["cat_sam", "cat_liam"])
    );
    app.call(
        &alice.token,
        "voice-collections",
        "remove-voice",
        Some(json!(id)),
        json!({"voice_id": "cat_aria"}),
    )
    .await
    .err(404, "NOT_FOUND");

    // Order of collections.
    let r = app
        .call(
            &alice.token,
            "voice-collections",
            "reorder",
            None,
            json!({"sort": {id2.clone(): 0, id.clone(): 1}}),
        )
        .await;
    assert_eq!(r.ok(200)["updated"], json!(2));
    let all = app
        .call(&alice.token, "voice-collections", "all", None, json!({}))
        .await;
    let order: Vec<&str> = all.ok(200)["collections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(order, vec![id2.as_str(), id.as_str()]);
    app.call(
        &bob.token,
        "voice-collections",
        "reorder",
        None,
        json!({"sort": {id.clone(): 0}}),
    )
    .await
    .err(404, "NOT_FOUND");

    app.call(
        &bob.token,
        "voice-collections",
        "delete",
        Some(json!(id)),
        json!({}),
    )
    .await
    .err(404, "NOT_FOUND");
    let r = app
        .call(
            &alice.token,
            "voice-collections",
            "delete",
            Some(json!(id)),
            json!({}),
        )
        .await;
    assert_eq!(r.ok(200), &json!({"id": id, "deleted": true}));
    assert_eq!(app.count("voice_collection_items").await, 0);
    assert_eq!(app.count("voice_collections").await, 1);
}
