//! The audit log: one row per mutating action, filters, admin mode.

use crate::common::*;
use serde_json::json;

#[tokio::test]
async fn mutations_are_logged_reads_are_not() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let r = app
        .call(
            &u.token,
            "api-keys",
            "create",
            None,
            json!({"name": "audited"}),
        )
        .await;
    let id = r.ok(201)["api_key"]["id"].clone();
    app.call(&u.token, "api-keys", "list", None, json!({}))
        .await
        .ok(200);
    app.call(
        &u.token,
        "profiles",
        "update",
        None,
        json!({"full_name": "Z"}),
    )
    .await
    .ok(200);
    // A failed mutation leaves no row.
    app.call(&u.token, "api-keys", "create", None, json!({}))
        .await
        .err(400, "VALIDATION_ERROR");

    let r = app
        .call(&u.token, "activities", "list", None, json!({}))
        .await;
    let d = r.ok(200);
    assert_eq!(d["count"], json!(2));
    let rows = d["activities"].as_array().unwrap();
    // Most recent first.
    assert_eq!(
        (rows[0]["resource"].clone(), rows[0]["action"].clone()),
        (json!("profiles"), json!("update"))
    );
    let key_row = &rows[1];
    assert_eq!(key_row["record_id"], id);
    assert_eq!(key_row["user_id"], json!(u.id));
    assert_eq!(key_row["ip"], json!("127.0.0.1"));
    assert!(key_row["summary"].as_str().unwrap().contains("audited"));
    for m in ["id", "created_at"] {
        assert!(key_row[m].is_string());
    }
}

#[tokio::test]
async fn filters_and_pagination() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    for i in 0..3 {
        app.call(
            &u.token,
            "api-keys",
            "create",
            None,
            json!({"name": format!("k{i}")}),
        )
        .await
        .ok(201);
    }
    app.call(
        &u.token,
        "profiles",
        "update",
        None,
        json!({"full_name": "Z"}),
    )
    .await
    .ok(200);
    let r = app
        .call(
            &u.token,
            "activities",
            "all",
            None,
            json!({"filters": {"resource": "api-keys"}, "limit": 2, "offset": 1}),
        )
        .await;
    let d = r.ok(200);
    assert_eq!(
        (d["count"].clone(), d["limit"].clone(), d["offset"].clone()),
        (json!(3), json!(2), json!(1))
    );
    assert_eq!(d["activities"].as_array().unwrap().len(), 2);
    let r = app
        .call(
            &u.token,
            "activities",
            "all",
            None,
            json!({"filters": {"action": "update"}}),
        )
        .await;
    assert_eq!(r.ok(200)["count"], json!(1));
    let r = app
        .call(
            &u.token,
            "activities",
            "all",
            None,
            json!({"filters": {"dateRange": "7d"}}),
        )
        .await;
    assert_eq!(r.ok(200)["count"], json!(4));
    let r = app
        .call(
            &u.token,
            "activities",
            "all",
            None,
            json!({"filters": {"from": "2999-01-01T00:00:00Z"}}),
        )
        .await;
    assert_eq!(r.ok(200)["count"], json!(0));
    app.call(
        &u.token,
        "activities",
        "all",
        None,
        json!({"filters": {"dateRange": "2w"}}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    app.call(&u.token, "activities", "all", None, json!({"limit": 0}))
        .await
        .err(400, "VALIDATION_ERROR");
    app.call(&u.token, "activities", "all", None, json!({"limit": 501}))
        .await
        .err(400, "VALIDATION_ERROR");
    app.call(&u.token, "activities", "create", None, json!({}))
        .await
        .err(400, "INVALID_ACTION");
}

#[tokio::test]
async fn users_see_their_own_admins_see_all_with_admin_mode() {
    let app = TestApp::spawn().await;
    let (a, b, admin) = (
        app.standard().await,
        app.standard().await,
        app.admin().await,
    );
    app.call(&a.token, "api-keys", "create", None, json!({"name": "a"}))
        .await
        .ok(201);
    app.call(&b.token, "api-keys", "create", None, json!({"name": "b"}))
        .await
        .ok(201);
    assert_eq!(
        app.call(&a.token, "activities", "list", None, json!({}))
            .await
            .ok(200)["count"],
        json!(1)
    );
    app.call(
        &a.token,
        "activities",
        "list",
        None,
        json!({"adminMode": true}),
    )
    .await
    .err(403, "FORBIDDEN");
    app.call(
        &a.token,
        "activities",
        "list",
        None,
        json!({"userId": b.id}),
    )
    .await
    .err(403, "FORBIDDEN");
    assert_eq!(
        app.call(&admin.token, "activities", "list", None, json!({}))
            .await
            .ok(200)["count"],
        json!(0)
    );
    assert_eq!(
        app.call(
            &admin.token,
            "activities",
            "list",
            None,
            json!({"adminMode": true})
        )
        .await
        .ok(200)["count"],
        json!(2)
    );
    let r = app
        .call(
            &admin.token,
            "activities",
            "list",
            None,
            json!({"adminMode": true, "userId": b.id}),
        )
        .await;
    let d = r.ok(200);
    assert_eq!(d["count"], json!(1));
    assert_eq!(d["activities"][0]["user_id"], json!(b.id));
}
