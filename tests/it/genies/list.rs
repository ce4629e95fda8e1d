//! `list`, `all` and `get` in the caller's scope: search, paging, the keyset cursor, and
//! admin mode with owners and impersonation.

use reqwest::Method;
use serde_json::{Value, json};

use super::{create, get};
use crate::common::*;

#[tokio::test]
async fn list_searches_case_insensitively_and_pages() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    for n in ["Alpha Sales", "beta SUPPORT", "Gamma support desk", "Delta"] {
        create(
            &app,
            &u.token,
            json!({"genieName": n, "category": "Support"}),
        )
        .await;
    }
    let r = app
        .call(
            &u.token,
            "genies",
            "list",
            None,
            json!({"filters": {"searchTerm": "SuPPort"}}),
        )
        .await;
    let d = r.ok(200);
    assert_eq!(d["total"], json!(2));
    let names: Vec<&str> = d["genies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["beta SUPPORT", "Gamma support desk"]);
    let s = &d["genies"][0];
    for k in ["id", "name", "is_active", "category", "created_at"] {
        assert!(s.get(k).is_some(), "summary lacks {k}");
    }
    let r = app
        .call(
            &u.token,
            "genies",
            "list",
            None,
            json!({"searchTerm": "alpha"}),
        )
        .await;
    assert_eq!(r.ok(200)["total"], json!(1));
    let r = app
        .call(
            &u.token,
            "genies",
            "list",
            None,
            json!({"limit": 2, "offset": 1}),
        )
        .await;
    let d = r.ok(200);
    assert_eq!(
        (d["total"].clone(), d["limit"].clone(), d["offset"].clone()),
        (json!(4), json!(2), json!(1))
    );
    assert_eq!(d["genies"][0]["name"], json!("beta SUPPORT"));
    app.call(&u.token, "genies", "list", None, json!({"limit": 501}))
        .await
        .err(400, "VALIDATION_ERROR");
    app.call(&u.token, "genies", "list", None, json!({"offset": -1}))
        .await
        .err(400, "VALIDATION_ERROR");
    app.call(&u.token, "genies", "list", None, json!({"limit": "ten"}))
        .await
        .err(400, "VALIDATION_ERROR");
    // REST form: GET /v1/genies?searchTerm=...
    let r = app
        .request(
            Method::GET,
            "/v1/genies?searchTerm=DELTA&limit=5",
            Some(&u.token),
            None,
        )
        .await;
    let d = r.ok(200);
    assert_eq!(
        (d["total"].clone(), d["limit"].clone()),
        (json!(1), json!(5))
    );
}

#[tokio::test]
async fn all_walks_a_keyset_cursor_without_duplicates_or_gaps_while_records_are_added() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let mut originals = Vec::new();
    for i in 0..7 {
        originals.push(
            create(&app, &u.token, json!({"genieName": format!("G{i}")})).await["id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    let mut seen: Vec<String> = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut data = json!({"limit": 3});
        if let Some(c) = &cursor {
            data["cursor"] = json!(c);
        }
        let r = app.call(&u.token, "genies", "all", None, data).await;
        let d = r.ok(200).clone();
        let ids: Vec<String> = d["genies"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["id"].as_str().unwrap().to_string())
            .collect();
        assert!(d["genies"][0].get("settings").is_some(), "full objects");
        seen.extend(ids);
        pages += 1;
        // Inserts between pages must not disturb the walk.
        if pages <= 2 {
            create(
                &app,
                &u.token,
                json!({"genieName": format!("added {pages}")}),
            )
            .await;
        }
        assert_eq!(d["hasMore"].as_bool().unwrap(), d["nextCursor"].is_string());
        match d["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
        assert!(pages < 10);
    }
    let mut dedup = seen.clone();
    dedup.sort();
    dedup.dedup();
    assert_eq!(dedup.len(), seen.len(), "duplicates in {seen:?}");
    for o in &originals {
        assert!(seen.contains(o), "gap: {o} missing");
    }
    assert_eq!(
        seen.len(),
        9,
        "records added during the walk come at its end"
    );
    let mut sorted = seen.clone();
    sorted.sort();
    assert_eq!(sorted, seen);
    for bad in [
        json!({"limit": 0}),
        json!({"limit": 501}),
        json!({"cursor": "garbage!"}),
        json!({"cursor": "Zm9vYmFy"}),
    ] {
        app.call(&u.token, "genies", "all", None, bad)
            .await
            .err(400, "VALIDATION_ERROR");
    }
}

#[tokio::test]
async fn admins_see_all_with_owner_and_impersonate_others_cannot() {
    let app = TestApp::spawn().await;
    let (admin, u) = (app.admin().await, app.standard().await);
    let g = create(&app, &u.token, json!({"genieName": "User's"})).await;
    create(&app, &admin.token, json!({"genieName": "Admin's"})).await;
    // Without adminMode an admin sees their own, owner null.
    let r = app
        .call(&admin.token, "genies", "all", None, json!({}))
        .await;
    let d = r.ok(200);
    assert_eq!(d["genies"].as_array().unwrap().len(), 1);
    assert_eq!(d["genies"][0]["owner"], Value::Null);
    let r = app
        .call(
            &admin.token,
            "genies",
            "all",
            None,
            json!({"adminMode": true}),
        )
        .await;
    let d = r.ok(200);
    assert_eq!(d["genies"].as_array().unwrap().len(), 2);
    let theirs = d["genies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["id"] == g["id"])
        .unwrap();
    assert_eq!(
        theirs["owner"],
        json!({"id": u.id, "full_name": "Test User", "email": u.email})
    );
    let r = app
        .call(
            &admin.token,
            "genies",
            "all",
            None,
            json!({"adminMode": true, "ownerId": u.id}),
        )
        .await;
    let d = r.ok(200);
    assert_eq!(d["genies"].as_array().unwrap().len(), 1);
    assert_eq!(d["genies"][0]["id"], g["id"]);
    let r = app
        .call(
            &admin.token,
            "genies",
            "get",
            Some(g["id"].clone()),
            json!({"adminMode": true}),
        )
        .await;
    assert_eq!(r.ok(200)["genie"]["owner"]["id"], json!(u.id));
    let r = app
        .call(
            &admin.token,
            "genies",
            "list",
            None,
            json!({"adminMode": true}),
        )
        .await;
    assert_eq!(r.ok(200)["total"], json!(2));
    // Non-admins may not use admin options.
    app.call(&u.token, "genies", "all", None, json!({"adminMode": true}))
        .await
        .err(403, "FORBIDDEN");
    app.call(
        &u.token,
        "genies",
        "all",
        None,
        json!({"ownerId": admin.id}),
    )
    .await
    .err(403, "FORBIDDEN");
    app.call(
        &u.token,
        "genies",
        "get",
        Some(g["id"].clone()),
        json!({"adminMode": true}),
    )
    .await
    .err(403, "FORBIDDEN");
    app.call(
        &u.token,
        "genies",
        "create",
        None,
        json!({"genieName": "x", "impersonatedUserId": admin.id}),
    )
    .await
    .err(403, "FORBIDDEN");
    assert_eq!(app.count("genies").await, 2);
    // Impersonation.
    let r = app
        .call(
            &admin.token,
            "genies",
            "create",
            None,
            json!({"genieName": "For user", "impersonatedUserId": u.id}),
        )
        .await;
    let made = r.ok(201)["genie"].clone();
    get(&app, &u.token, made["id"].as_str().unwrap())
        .await
        .ok(200);
    app.call(
        &admin.token,
        "genies",
        "create",
        None,
        json!({"genieName": "x", "impersonatedUserId": "0190d5a8-0000-7000-8000-000000000000"}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    assert_eq!(app.count("genies").await, 3);
}
