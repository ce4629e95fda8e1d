//! The api-keys resource: shapes, the once-only secret, the five-key limit under races.

use crate::common::*;
use serde_json::json;

#[tokio::test]
async fn create_list_revoke_delete() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let r = app
        .call(
            &u.token,
            "api-keys",
            "create",
            None,
            json!({"name": "zapier"}),
        )
        .await;
    let k = r.ok(201)["api_key"].clone();
    for m in [
        "id",
        "name",
        "key_prefix",
        "status",
        "created_at",
        "last_used_at",
        "revoked_at",
        "key",
    ] {
        assert!(k.get(m).is_some(), "missing {m} in {k}");
    }
    assert_eq!(k["status"], json!("active"));
    let secret = k["key"].as_str().unwrap();
    assert!(secret.starts_with(k["key_prefix"].as_str().unwrap()));
    assert!(k["created_at"].as_str().unwrap().ends_with('Z'));

    // The secret is never shown again.
    let list = app.call(&u.token, "api-keys", "all", None, json!({})).await;
    let d = list.ok(200);
    assert_eq!(d["count"], json!(1));
    assert!(d["api_keys"][0].get("key").is_none());
    assert!(!d.to_string().contains(secret));
    let list2 = app
        .call(&u.token, "api-keys", "list", None, json!({}))
        .await;
    assert_eq!(list2.ok(200), d);

    // Using the key records last_used_at.
    let id = k["id"].clone();
    app.raw(
        reqwest::Method::POST,
        "/v1",
        &[("x-api-key", secret)],
        json!({"resource": "profiles", "action": "get"}).to_string(),
    )
    .await
    .ok(200);
    let mut used = json!(null);
    for _ in 0..100 {
        let l = app
            .call(&u.token, "api-keys", "list", None, json!({}))
            .await;
        used = l.ok(200)["api_keys"][0]["last_used_at"].clone();
        if !used.is_null() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(used.is_string(), "last_used_at was not recorded");

    let r = app
        .call(&u.token, "api-keys", "revoke", Some(id.clone()), json!({}))
        .await;
    let revoked = r.ok(200)["api_key"].clone();
    assert_eq!(revoked["status"], json!("revoked"));
    assert!(revoked["revoked_at"].is_string());
    assert!(revoked.get("key").is_none());

    let r = app
        .call(&u.token, "api-keys", "delete", Some(id.clone()), json!({}))
        .await;
    assert_eq!(r.ok(200), &json!({"id": id, "deleted": true}));
    assert_eq!(app.count("api_keys").await, 0);
}

#[tokio::test]
async fn name_is_required() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    app.call(&u.token, "api-keys", "create", None, json!({}))
        .await
        .err(400, "VALIDATION_ERROR");
    app.call(&u.token, "api-keys", "create", None, json!({"name": "  "}))
        .await
        .err(400, "VALIDATION_ERROR");
    app.call(
        &u.token,
        "api-keys",
        "create",
        None,
        json!({"name": "x".repeat(101)}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    assert_eq!(app.count("api_keys").await, 0);
}

#[tokio::test]
async fn keys_of_other_users_are_absent() {
    let app = TestApp::spawn().await;
    let (a, b) = (app.standard().await, app.standard().await);
    let r = app
        .call(&a.token, "api-keys", "create", None, json!({"name": "a"}))
        .await;
    let id = r.ok(201)["api_key"]["id"].clone();
    app.call(&b.token, "api-keys", "revoke", Some(id.clone()), json!({}))
        .await
        .err(404, "NOT_FOUND");
    app.call(&b.token, "api-keys", "delete", Some(id.clone()), json!({}))
        .await
        .err(404, "NOT_FOUND");
    assert_eq!(
        app.call(&b.token, "api-keys", "list", None, json!({}))
            .await
            .ok(200)["count"],
        json!(0)
    );
    let l = app
        .call(&a.token, "api-keys", "list", None, json!({}))
        .await;
    assert_eq!(l.ok(200)["api_keys"][0]["status"], json!("active"));
}

#[tokio::test]
async fn at_most_five_active_keys_and_revoking_frees_a_slot() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let mut ids = vec![];
    for i in 0..5 {
        let r = app
            .call(
                &u.token,
                "api-keys",
                "create",
                None,
                json!({"name": format!("k{i}")}),
            )
            .await;
        ids.push(r.ok(201)["api_key"]["id"].clone());
    }
    app.call(
        &u.token,
        "api-keys",
        "create",
        None,
        json!({"name": "sixth"}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    app.call(
        &u.token,
        "api-keys",
        "revoke",
        Some(ids[0].clone()),
        json!({}),
    )
    .await
    .ok(200);
    app.call(
        &u.token,
        "api-keys",
        "create",
        None,
        json!({"name": "sixth"}),
    )
    .await
    .ok(201);
    let l = app
        .call(&u.token, "api-keys", "list", None, json!({}))
        .await;
    assert_eq!(l.ok(200)["count"], json!(6));
}

#[tokio::test]
async fn twenty_concurrent_creates_make_exactly_five() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let calls = (0..20).map(|i| {
        app.call(
            &u.token,
            "api-keys",
            "create",
            None,
            json!({"name": format!("race{i}")}),
        )
    });
    let results = futures::future::join_all(calls).await;
    let created = results.iter().filter(|r| r.status == 201).count();
    let refused = results
        .iter()
        .filter(|r| r.status == 400 && r.code() == "VALIDATION_ERROR")
        .count();
    assert_eq!((created, refused), (5, 15));
    assert_eq!(app.count("api_keys").await, 5);
}
