//! document-folders: create, rename, nest without cycles, list with counts, delete moving
//! documents to the root, and isolation between users.

use serde_json::json;

use crate::common::*;

const F: &str = "document-folders";

#[tokio::test]
async fn folders_nest_rename_count_and_delete_to_root() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let r = app
        .call(&u.token, F, "create", None, json!({"name": "Policies"}))
        .await;
    let top = r.ok(201)["folder"].clone();
    assert_eq!(top["name"], "Policies");
    assert_eq!(top["parent_id"], serde_json::Value::Null);
    assert_eq!(top["document_count"], 0);
    let top_id = top["id"].as_str().unwrap().to_string();
    let r = app
        .call(
            &u.token,
            F,
            "create",
            None,
            json!({"name": "HR", "parent_id": top_id}),
        )
        .await;
    let child_id = r.ok(201)["folder"]["id"].as_str().unwrap().to_string();
    assert_eq!(r.data()["folder"]["parent_id"], json!(top_id));
    // no cycles, and nothing changed
    app.call(
        &u.token,
        F,
        "update",
        Some(json!(top_id)),
        json!({"parent_id": child_id}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    app.call(
        &u.token,
        F,
        "update",
        Some(json!(top_id)),
        json!({"parent_id": top_id}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    let r = app
        .call(&u.token, F, "get", Some(json!(top_id)), json!({}))
        .await;
    assert_eq!(r.ok(200)["folder"]["parent_id"], serde_json::Value::Null);
    // rename
    let r = app
        .call(
            &u.token,
            F,
            "update",
            Some(json!(child_id)),
            json!({"name": "People"}),
        )
        .await;
    assert_eq!(r.ok(200)["folder"]["name"], "People");
    assert_eq!(r.data()["folder"]["parent_id"], json!(top_id));
    app.call(
        &u.token,
        F,
        "update",
        Some(json!(child_id)),
        json!({"name": " "}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    // a document in the folder
    let r = app
        .call(
            &u.token,
            "knowledge-base",
            "create",
            None,
            json!({"title": "Leave", "content": "Ten days.", "folder_id": child_id}),
        )
        .await;
    let doc = r.ok(201)["document"].clone();
    assert_eq!(doc["folder"], json!({"id": child_id, "name": "People"}));
    let r = app.call(&u.token, F, "all", None, json!({})).await;
    let list = r.ok(200);
    assert_eq!(list["count"], 2);
    let people = list["folders"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == json!(child_id))
        .unwrap()
        .clone();
    assert_eq!(people["document_count"], 1);
    let r = app
        .call(
            &u.token,
            "knowledge-base",
            "all",
            None,
            json!({"filters": {"folderId": child_id}}),
        )
        .await;
    assert_eq!(r.ok(200)["total"], 1);
    // another user sees none of it and cannot use the folder
    let other = app.standard().await;
    assert_eq!(
        app.call(&other.token, F, "all", None, json!({}))
            .await
            .ok(200)["count"],
        0
    );
    app.call(&other.token, F, "delete", Some(json!(child_id)), json!({}))
        .await
        .err(404, "NOT_FOUND");
    app.call(
        &other.token,
        F,
        "create",
        None,
        json!({"name": "x", "parent_id": top_id}),
    )
    .await
    .err(404, "NOT_FOUND");
    app.call(
        &other.token,
        "knowledge-base",
        "create",
        None,
        json!({"title": "t", "content": "c", "folder_id": child_id}),
    )
    .await
    .err(404, "NOT_FOUND");
    // delete: the document moves to the root and survives
    let r = app
        .call(&u.token, F, "delete", Some(json!(child_id)), json!({}))
        .await;
    assert_eq!(r.ok(200)["deleted"], true);
    assert_eq!(r.data()["documents_moved_to_root"], 1);
    let r = app
        .call(
            &u.token,
            "knowledge-base",
            "get",
            Some(doc["id"].clone()),
            json!({}),
        )
        .await;
    let d = &r.ok(200)["document"];
    assert_eq!(d["folder_id"], serde_json::Value::Null);
    assert_eq!(d["folder"], serde_json::Value::Null);
    assert_eq!(app.count("document_folders").await, 1);
    app.call(&u.token, F, "rename", Some(json!(top_id)), json!({}))
        .await
        .err(400, "INVALID_ACTION");
}
