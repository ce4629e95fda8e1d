//! voices: catalog discovery with filters, get, usage by my genies, favorites.

use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn discovery_filters_get_usage_and_favorites() {
    let app = TestApp::spawn().await;
    let alice = app.standard().await;
    let bob = app.standard().await;

    let all = app
        .call(&alice.token, "voices", "all", None, json!({}))
        .await;
    let d = all.ok(200).clone();
    assert!(d["total"].as_u64().unwrap() >= 20);
    // The provider's voices and the shipped catalog are both listed.
    let sources: Vec<&str> = d["voices"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["source"].as_str())
        .collect();
    assert!(
        sources.contains(&"catalog") && sources.contains(&"provider"),
        "{sources:?}"
    );

    let r = app
        .call(
            &alice.token,
            "voices",
            "all",
            None,
            json!({"language": "en", "gender": "female", "accent": "british"}),
        )
        .await;
    let names: Vec<&str> = r.ok(200)["voices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["Olivia"]);
    let r = app
        .call(
            &alice.token,
            "voices",
            "all",
            None,
            json!({"filters": {"useCase": "meditation"}}),
        )
        .await;
    assert_eq!(r.ok(200)["voices"][0]["voice_id"], json!("cat_grace"));
    let r = app
        .request(
            reqwest::Method::GET,
            "/v1/voices?search=parisian",
            Some(&alice.token),
            None,
        )
        .await;
    assert_eq!(r.ok(200)["voices"][0]["voice_id"], json!("cat_camille"));
    assert_eq!(r.data()["total"], json!(1));
    app.call(&alice.token, "voices", "all", None, json!({"limit": 0}))
        .await
        .err(400, "VALIDATION_ERROR");

    let r = app
        .call(
            &alice.token,
            "voices",
            "get",
            Some(json!("cat_aria")),
            json!({}),
        )
        .await;
    let v = r.ok(200)["voice"].clone();
    assert_eq!(v["labels"]["language"], json!("en"));
    assert_eq!(v["usage"]["genie_count"], json!(0));
    app.call(
        &alice.token,
        "voices",
        "get",
        Some(json!("no_such_voice")),
        json!({}),
    )
    .await
    .err(404, "NOT_FOUND");
    app.call(&alice.token, "voices", "get", None, json!({}))
        .await
        .err(400, "VALIDATION_ERROR");

    // Usage: only my genies count.
    let g1 = insert_genie_with(&app, &alice, "One", json!({"voice_id": "cat_aria"})).await;
    insert_genie_with(&app, &alice, "Two", json!({"voice_id": "cat_aria"})).await;
    insert_genie_with(&app, &bob, "Bobs", json!({"voice_id": "cat_aria"})).await;
    let g = g1.clone();
    let uid = alice.id.clone();
    app.state
        .db
        .write(move |c| {
            Ok(c.execute(
                "INSERT INTO conversations (id, user_id, genie_id, channel, status, started_at, created_at, updated_at)
                 VALUES (?1, ?2, ?3, 'web', 'done', '2026-01-02T03:04:05.000Z', '2026-01-02T03:04:05.000Z', '2026-01-02T03:04:05.000Z')",
                rusqlite::params![genied::db::new_id(), uid, g],
            )?)
        })
        .await
        .unwrap();
    let r = app
        .call(
            &alice.token,
            "voices",
            "usage",
            Some(json!("cat_aria")),
            json!({}),
        )
        .await;
    let u = r.ok(200)["usage"].clone();
    assert_eq!(u["genie_count"], json!(2));
    assert_eq!(u["conversation_count"], json!(1));
    assert_eq!(u["last_used_at"], json!("2026-01-02T03:04:05.000Z"));
    let r = app
        .call(&alice.token, "voices", "usage", None, json!({}))
        .await;
    assert_eq!(r.ok(200)["usage"][0]["name"], json!("Aria"));
    assert_eq!(r.data()["count"], json!(1));
    let r = app
        .call(
            &bob.token,
            "voices",
            "usage",
            Some(json!("cat_aria")),
            json!({}),
        )
        .await;
    assert_eq!(r.ok(200)["usage"]["genie_count"], json!(1));

    // Favorites.
    app.call(
        &alice.token,
        "voices",
        "favorite",
        Some(json!("no_such_voice")),
        json!({}),
    )
    .await
    .err(404, "NOT_FOUND");
    assert_eq!(app.count("voice_favorites").await, 0);
    let r = app
        .call(
            &alice.token,
            "voices",
            "favorite",
            Some(json!("cat_liam")),
            json!({}),
        )
        .await;
    assert_eq!(r.ok(200)["is_favorite"], json!(true));
    app.call(
        &alice.token,
        "voices",
        "favorite",
        Some(json!("cat_liam")),
        json!({}),
    )
    .await
    .ok(200);
    let favs = app
        .call(&alice.token, "voices", "favorites", None, json!({}))
        .await;
    assert_eq!(favs.ok(200)["count"], json!(1));
    assert_eq!(favs.data()["voices"][0]["voice_id"], json!("cat_liam"));
    assert_eq!(
        app.call(&bob.token, "voices", "favorites", None, json!({}))
            .await
            .ok(200)["count"],
        json!(0)
    );
    let r = app
        .call(
            &alice.token,
            "voices",
            "all",
            None,
            json!({"favoritesOnly": true}),
        )
        .await;
    assert_eq!(r.ok(200)["total"], json!(1));
    app.call(
        &bob.token,
        "voices",
        "unfavorite",
        Some(json!("cat_liam")),
        json!({}),
    )
    .await
    .err(404, "NOT_FOUND");
    app.call(
        &alice.token,
        "voices",
        "unfavorite",
        Some(json!("cat_liam")),
        json!({}),
    )
    .await
    .ok(200);
    assert_eq!(app.count("voice_favorites").await, 0);
    let consumer = app.consumer().await;
    app.call(
        &consumer.token,
        "voices",
        "favorite",
        Some(json!("cat_liam")),
        json!({}),
    )
    .await
    .err(403, "FORBIDDEN");
    app.call(&alice.token, "voices", "sing", None, json!({}))
        .await
        .err(400, "INVALID_ACTION");
}
