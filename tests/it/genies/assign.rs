//! `assign` and `unassign`: consumers read assigned genies only.

use serde_json::json;

use super::{create, get};
use crate::common::*;

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
