//! Profiles: one's own, updates, admins reading others.

use crate::common::*;
use serde_json::json;

#[tokio::test]
async fn get_and_update_own_profile() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let r = app.call(&u.token, "profiles", "get", None, json!({})).await;
    let p = r.ok(200)["profile"].clone();
    assert_eq!(p["email"], json!(u.email));
    assert_eq!(p["role"], json!("standard_user"));
    assert!(p.get("password_hash").is_none());

    let r = app
        .call(
            &u.token,
            "profiles",
            "update",
            None,
            json!({"full_name": "Ada L.", "avatar_url": "https://img.example/a.png", "timezone": "Europe/Berlin", "preferences": {"theme": "dark"}}),
        )
        .await;
    let p = r.ok(200)["profile"].clone();
    assert_eq!(p["full_name"], json!("Ada L."));
    assert_eq!(p["timezone"], json!("Europe/Berlin"));
    assert_eq!(p["preferences"], json!({"theme": "dark"}));

    // Partial: absent members stay, null clears.
    let r = app
        .call(
            &u.token,
            "profiles",
            "update",
            None,
            json!({"avatar_url": null}),
        )
        .await;
    let p = r.ok(200)["profile"].clone();
    assert_eq!(p["avatar_url"], json!(null));
    assert_eq!(p["full_name"], json!("Ada L."));
}

#[tokio::test]
async fn bad_updates_change_nothing() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    for bad in [
        json!({"timezone": "Nowhere/Land"}),
        json!({"avatar_url": "javascript:alert(1)"}),
        json!({"preferences": [1, 2]}),
        json!({"full_name": 5}),
        json!({"role": "internal_admin"}),
        json!({"email": "new@example.test"}),
    ] {
        app.call(&u.token, "profiles", "update", None, bad)
            .await
            .err(400, "VALIDATION_ERROR");
    }
    let p = app.call(&u.token, "profiles", "get", None, json!({})).await;
    let p = p.ok(200)["profile"].clone();
    assert_eq!(
        (p["timezone"].clone(), p["role"].clone(), p["email"].clone()),
        (json!(null), json!("standard_user"), json!(u.email))
    );
}

#[tokio::test]
async fn only_admins_read_other_profiles() {
    let app = TestApp::spawn().await;
    let (a, b, admin) = (
        app.standard().await,
        app.standard().await,
        app.admin().await,
    );
    app.call(&b.token, "profiles", "get", Some(json!(a.id)), json!({}))
        .await
        .err(404, "NOT_FOUND");
    let r = app
        .call(
            &admin.token,
            "profiles",
            "get",
            Some(json!(a.id)),
            json!({}),
        )
        .await;
    assert_eq!(r.ok(200)["profile"]["email"], json!(a.email));
    app.call(
        &b.token,
        "profiles",
        "update",
        Some(json!(a.id)),
        json!({"full_name": "x"}),
    )
    .await
    .err(403, "FORBIDDEN");
    app.call(&b.token, "profiles", "list", None, json!({}))
        .await
        .err(403, "FORBIDDEN");
    let r = app
        .call(&admin.token, "profiles", "list", None, json!({}))
        .await;
    assert_eq!(r.ok(200)["count"], json!(3));
}
