//! genie-groups over real HTTP: CRUD, agent counts, reorder, ungrouping on delete, isolation.

use serde_json::{Value, json};

use crate::common::*;

#[tokio::test]
async fn groups_crud_counts_reorder_and_delete_ungroups() {
    let app = TestApp::spawn().await;
    let (u, other) = (app.standard().await, app.standard().await);
    let r = app
        .call(
            &u.token,
            "genie-groups",
            "create",
            None,
            json!({"name": "Sales", "description": "Outbound"}),
        )
        .await;
    let sales = r.ok(201)["group"].clone();
    assert_eq!(sales["name"], json!("Sales"));
    assert_eq!(sales["description"], json!("Outbound"));
    assert_eq!(sales["agent_count"], json!(0));
    assert_eq!(sales["sort_order"], json!(0));
    let support = app
        .call(
            &u.token,
            "genie-groups",
            "create",
            None,
            json!({"name": "Support"}),
        )
        .await
        .ok(201)["group"]
        .clone();
    assert_eq!(support["sort_order"], json!(1));
    for bad in [
        json!({}),
        json!({"name": ""}),
        json!({"name": 5}),
        json!({"name": "x", "color": "red"}),
    ] {
        app.call(&u.token, "genie-groups", "create", None, bad)
            .await
            .err(400, "VALIDATION_ERROR");
    }
    assert_eq!(app.count("genie_groups").await, 2);

    let sid = sales["id"].as_str().unwrap();
    for n in ["A", "B"] {
        let g = app
            .call(
                &u.token,
                "genies",
                "create",
                None,
                json!({"genieName": n, "groupId": sid}),
            )
            .await;
        assert_eq!(g.ok(201)["genie"]["group"]["id"], json!(sid));
    }
    let r = app
        .call(&u.token, "genie-groups", "get", Some(json!(sid)), json!({}))
        .await;
    assert_eq!(r.ok(200)["group"]["agent_count"], json!(2));
    let r = app
        .call(&u.token, "genie-groups", "list", None, json!({}))
        .await;
    let d = r.ok(200);
    assert_eq!(d["count"], json!(2));
    assert_eq!(d["groups"][0]["agent_count"], json!(2));
    assert_eq!(d["groups"][1]["agent_count"], json!(0));

    let r = app
        .call(
            &u.token,
            "genie-groups",
            "update",
            Some(json!(sid)),
            json!({"name": "Sales EU"}),
        )
        .await;
    let up = r.ok(200)["group"].clone();
    assert_eq!(
        (up["name"].clone(), up["description"].clone()),
        (json!("Sales EU"), json!("Outbound"))
    );
    app.call(
        &u.token,
        "genie-groups",
        "update",
        Some(json!(sid)),
        json!({"name": ""}),
    )
    .await
    .err(400, "VALIDATION_ERROR");

    let r = app
        .call(
            &u.token,
            "genie-groups",
            "reorder",
            None,
            json!({"sort": {sid: 1, support["id"].as_str().unwrap(): 0}}),
        )
        .await;
    assert_eq!(r.ok(200), &json!({"updated": 2}));
    let r = app
        .call(&u.token, "genie-groups", "all", None, json!({}))
        .await;
    assert_eq!(r.ok(200)["groups"][0]["name"], json!("Support"));

    // Another user sees none of it.
    app.call(
        &other.token,
        "genie-groups",
        "get",
        Some(json!(sid)),
        json!({}),
    )
    .await
    .err(404, "NOT_FOUND");
    app.call(
        &other.token,
        "genie-groups",
        "update",
        Some(json!(sid)),
        json!({"name": "x"}),
    )
    .await
    .err(404, "NOT_FOUND");
    app.call(
        &other.token,
        "genie-groups",
        "delete",
        Some(json!(sid)),
        json!({}),
    )
    .await
    .err(404, "NOT_FOUND");
    app.call(
        &other.token,
        "genie-groups",
        "reorder",
        None,
        json!({"sort": {sid: 5}}),
    )
    .await
    .err(404, "NOT_FOUND");
    assert_eq!(
        app.call(&other.token, "genie-groups", "list", None, json!({}))
            .await
            .ok(200)["count"],
        json!(0)
    );
    app.call(
        &u.token,
        "genie-groups",
        "get",
        Some(json!("bad-id")),
        json!({}),
    )
    .await
    .err(400, "VALIDATION_ERROR");

    let r = app
        .call(
            &u.token,
            "genie-groups",
            "delete",
            Some(json!(sid)),
            json!({}),
        )
        .await;
    assert_eq!(
        r.ok(200),
        &json!({"id": sid, "deleted": true, "ungrouped": 2})
    );
    app.call(&u.token, "genie-groups", "get", Some(json!(sid)), json!({}))
        .await
        .err(404, "NOT_FOUND");
    let r = app.call(&u.token, "genies", "all", None, json!({})).await;
    let genies = r.ok(200)["genies"].as_array().unwrap().clone();
    assert_eq!(genies.len(), 2, "genies survive their group");
    assert!(genies.iter().all(|g| g["group"] == Value::Null));
}
