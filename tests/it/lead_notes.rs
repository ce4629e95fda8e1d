use serde_json::json;

use crate::common::*;
use crate::leads::new_lead;

fn note_ids(r: &Resp) -> Vec<String> {
    r.ok(200)["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn notes_crud_pin_and_order() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let g = insert_genie(&app, &u, "G").await;
    let lead = new_lead(&app, &u, json!({"agent_id": g})).await;
    let lid = lead["id"].clone();
    let mut ids = vec![];
    for i in 0..3 {
        let r = app
            .call(
                &u.token,
                "lead-notes",
                "create",
                None,
                json!({"leadId": lid, "content": format!("note {i}")}),
            )
            .await;
        let n = &r.ok(201)["note"];
        assert_eq!(n["lead_id"], lid);
        assert_eq!(n["user_id"], json!(u.id));
        assert_eq!(n["is_pinned"], json!(false));
        assert_eq!(n["content"], json!(format!("note {i}")));
        ids.push(n["id"].as_str().unwrap().to_string());
    }
    let r = app
        .call(&u.token, "lead-notes", "list", None, json!({"leadId": lid}))
        .await;
    assert_eq!(
        note_ids(&r),
        vec![ids[2].clone(), ids[1].clone(), ids[0].clone()],
        "newest first"
    );
    assert_eq!(r.ok(200)["count"], json!(3));

    // Pin the oldest: it comes first.
    let p = app
        .call(
            &u.token,
            "lead-notes",
            "pin",
            Some(json!(ids[0])),
            json!({}),
        )
        .await;
    assert_eq!(p.ok(200)["note"]["is_pinned"], json!(true));
    let r = app
        .call(&u.token, "lead-notes", "list", None, json!({"leadId": lid}))
        .await;
    assert_eq!(
        note_ids(&r),
        vec![ids[0].clone(), ids[2].clone(), ids[1].clone()]
    );

    // Reorder the unpinned ones.
    let ro = app
        .call(
            &u.token,
            "lead-notes",
            "reorder",
            None,
            json!({"leadId": lid, "sort": {ids[1].clone(): 0, ids[2].clone(): 1}}),
        )
        .await;
    assert_eq!(ro.ok(200)["updated"], json!(2));
    let r = app
        .call(&u.token, "lead-notes", "list", None, json!({"leadId": lid}))
        .await;
    assert_eq!(
        note_ids(&r),
        vec![ids[0].clone(), ids[1].clone(), ids[2].clone()]
    );

    // Unpin: back among the others by position.
    app.call(
        &u.token,
        "lead-notes",
        "unpin",
        Some(json!(ids[0])),
        json!({}),
    )
    .await
    .ok(200);
    app.call(
        &u.token,
        "lead-notes",
        "reorder",
        None,
        json!({"leadId": lid, "sort": {ids[0].clone(): 5}}),
    )
    .await
    .ok(200);
    let r = app
        .call(&u.token, "lead-notes", "list", None, json!({"leadId": lid}))
        .await;
    assert_eq!(
        note_ids(&r),
        vec![ids[1].clone(), ids[2].clone(), ids[0].clone()]
    );

    // get / update / delete.
    let gt = app
        .call(
            &u.token,
            "lead-notes",
            "get",
            Some(json!(ids[1])),
            json!({}),
        )
        .await;
    assert_eq!(gt.ok(200)["note"]["content"], json!("note 1"));
    let up = app
        .call(
            &u.token,
            "lead-notes",
            "update",
            Some(json!(ids[1])),
            json!({"content": " edited "}),
        )
        .await;
    assert_eq!(up.ok(200)["note"]["content"], json!("edited"));
    app.call(
        &u.token,
        "lead-notes",
        "update",
        Some(json!(ids[1])),
        json!({"content": "  "}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    let del = app
        .call(
            &u.token,
            "lead-notes",
            "delete",
            Some(json!(ids[2])),
            json!({}),
        )
        .await;
    assert_eq!(del.ok(200), &json!({"id": ids[2], "deleted": true}));
    app.call(
        &u.token,
        "lead-notes",
        "get",
        Some(json!(ids[2])),
        json!({}),
    )
    .await
    .err(404, "NOT_FOUND");
    assert_eq!(app.count("lead_notes").await, 2);

    // Bad input changes nothing.
    app.call(
        &u.token,
        "lead-notes",
        "create",
        None,
        json!({"content": "no lead"}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    app.call(
        &u.token,
        "lead-notes",
        "create",
        None,
        json!({"leadId": lid}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    app.call(
        &u.token,
        "lead-notes",
        "create",
        None,
        json!({"leadId": 99999, "content": "x"}),
    )
    .await
    .err(404, "NOT_FOUND");
    app.call(
        &u.token,
        "lead-notes",
        "reorder",
        None,
        json!({"leadId": lid, "sort": {uuid::Uuid::new_v4().to_string(): 0}}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    app.call(
        &u.token,
        "lead-notes",
        "get",
        Some(json!("not-a-uuid")),
        json!({}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    assert_eq!(app.count("lead_notes").await, 2);

    // Deleting the lead removes its notes.
    app.call(&u.token, "leads", "delete", Some(lid.clone()), json!({}))
        .await
        .ok(200);
    assert_eq!(app.count("lead_notes").await, 0);
}

#[tokio::test]
async fn only_people_with_access_to_the_lead_reach_its_notes() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let other = app.standard().await;
    let admin = app.admin().await;
    let g = insert_genie(&app, &u, "G").await;
    let lid = new_lead(&app, &u, json!({"agent_id": g})).await["id"].clone();
    let n = app
        .call(
            &u.token,
            "lead-notes",
            "create",
            None,
            json!({"leadId": lid, "content": "secret"}),
        )
        .await;
    let nid = n.ok(201)["note"]["id"].clone();
    app.call(
        &other.token,
        "lead-notes",
        "list",
        None,
        json!({"leadId": lid}),
    )
    .await
    .err(403, "FORBIDDEN");
    app.call(
        &other.token,
        "lead-notes",
        "get",
        Some(nid.clone()),
        json!({}),
    )
    .await
    .err(403, "FORBIDDEN");
    app.call(
        &other.token,
        "lead-notes",
        "create",
        None,
        json!({"leadId": lid, "content": "x"}),
    )
    .await
    .err(403, "FORBIDDEN");
    app.call(
        &other.token,
        "lead-notes",
        "update",
        Some(nid.clone()),
        json!({"content": "x"}),
    )
    .await
    .err(403, "FORBIDDEN");
    app.call(
        &other.token,
        "lead-notes",
        "pin",
        Some(nid.clone()),
        json!({}),
    )
    .await
    .err(403, "FORBIDDEN");
    app.call(
        &other.token,
        "lead-notes",
        "delete",
        Some(nid.clone()),
        json!({}),
    )
    .await
    .err(403, "FORBIDDEN");
    app.call(
        &other.token,
        "lead-notes",
        "reorder",
        None,
        json!({"leadId": lid, "sort": {}}),
    )
    .await
    .err(403, "FORBIDDEN");
    let r = app
        .call(
            &admin.token,
            "lead-notes",
            "list",
            None,
            json!({"leadId": lid.to_string()}),
        )
        .await;
    assert_eq!(r.ok(200)["count"], json!(1));
    let got = app
        .call(&u.token, "lead-notes", "get", Some(nid), json!({}))
        .await;
    assert_eq!(got.ok(200)["note"]["content"], json!("secret"));
    assert_eq!(got.ok(200)["note"]["is_pinned"], json!(false));
}
