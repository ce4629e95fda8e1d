//! Dashboard notifications: list, unread count, mark read, isolation.

use crate::common::*;
use serde_json::json;

async fn notify(app: &TestApp, user: &User, title: &str) -> String {
    let uid = user.id.clone();
    let t = title.to_string();
    app.state
        .db
        .write(move |c| {
            Ok(genied::db::notifications::insert(
                c,
                &uid,
                "test",
                &t,
                "body",
                &json!({"k": 1}),
            )?)
        })
        .await
        .unwrap()
}

#[tokio::test]
async fn list_count_and_mark_read() {
    let app = TestApp::spawn().await;
    let (u, other) = (app.standard().await, app.standard().await);
    let first = notify(&app, &u, "one").await;
    notify(&app, &u, "two").await;
    notify(&app, &other, "theirs").await;

    let r = app
        .call(&u.token, "notifications", "list", None, json!({}))
        .await;
    let d = r.ok(200).clone();
    assert_eq!(
        (d["count"].clone(), d["unread"].clone()),
        (json!(2), json!(2))
    );
    assert_eq!(d["notifications"][0]["title"], json!("two"));
    assert_eq!(d["notifications"][1]["data"], json!({"k": 1}));

    app.call(
        &other.token,
        "notifications",
        "mark-read",
        Some(json!(first)),
        json!({}),
    )
    .await
    .err(404, "NOT_FOUND");
    let r = app
        .call(
            &u.token,
            "notifications",
            "mark-read",
            Some(json!(first)),
            json!({}),
        )
        .await;
    assert!(r.ok(200)["notification"]["read_at"].is_string());
    assert_eq!(
        app.call(&u.token, "notifications", "unread-count", None, json!({}))
            .await
            .ok(200)["unread"],
        json!(1)
    );
    let r = app
        .call(
            &u.token,
            "notifications",
            "list",
            None,
            json!({"unreadOnly": true}),
        )
        .await;
    assert_eq!(r.ok(200)["notifications"][0]["title"], json!("two"));

    let r = app
        .call(&u.token, "notifications", "mark-all-read", None, json!({}))
        .await;
    assert_eq!(r.ok(200)["updated"], json!(1));
    assert_eq!(
        app.call(&u.token, "notifications", "unread-count", None, json!({}))
            .await
            .ok(200)["unread"],
        json!(0)
    );
    assert_eq!(
        app.call(
            &other.token,
            "notifications",
            "unread-count",
            None,
            json!({})
        )
        .await
        .ok(200)["unread"],
        json!(1)
    );
}
