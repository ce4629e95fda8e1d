//! marketplace: publish (private data stripped), browse, get, update/unpublish, install
//! (a working genie with a page), moderation by admins only.

use reqwest::Method;
use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn publish_browse_install_and_moderate() {
    let app = TestApp::spawn().await;
    let alice = app.standard().await;
    let bob = app.standard().await;
    let admin = app.admin().await;
    let genie = insert_genie_with(&app, &alice, "Dental Receptionist", json!({"page_slug": "alice-dental", 
            "system_prompt": "You book dental appointments.",
            "first_message": "Hello, dental office!",
            "web_welcome_message": "Book your check-up here.",
            "voice_id": "cat_olivia",
            "category": "Support",
            "description": "Books appointments",
            "settings": {"conversation_config": {"agent": {"prompt": {"prompt": "x", "knowledge_base": [{"id": "secretdoc"}]}}, "tts": {"voice_id": "cat_olivia"}}, "phone_number": "+15550100"},
        }))
    .await;
    let other = insert_genie_with(&app, &alice, "Sales Bot", json!({"category": "Sales"})).await;

    app.call(
        &bob.token,
        "marketplace",
        "publish",
        Some(json!(null)),
        json!({"genie_id": genie}),
    )
    .await
    .err(404, "AGENT_NOT_FOUND");
    app.call(
        &alice.token,
        "marketplace",
        "publish",
        None,
        json!({"genie_id": genie, "tags": [""]}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    assert_eq!(app.count("marketplace_listings").await, 0);

    let r = app
        .call(
            &alice.token,
            "marketplace",
            "publish",
            None,
            json!({"genie_id": genie, "tags": ["dental", "booking"]}),
        )
        .await;
    let l = r.ok(201)["listing"].clone();
    let lid = l["id"].as_str().unwrap().to_string();
    assert_eq!(l["system_prompt"], json!("You book dental appointments."));
    assert_eq!(l["voice_id"], json!("cat_olivia"));
    assert_eq!(l["status"], json!("published"));
    let s = l["settings"].to_string();
    assert!(!s.contains("secretdoc") && !s.contains("+15550100"), "{s}");
    assert_eq!(
        l["settings"]["conversation_config"]["tts"]["voice_id"],
        json!("cat_olivia")
    );
    let r = app
        .request(
            Method::POST,
            "/v1/marketplace",
            Some(&alice.token),
            Some(json!({"genie_id": other})),
        )
        .await;
    let lid2 = r.ok(201)["listing"]["id"].as_str().unwrap().to_string();

    // Browse as bob.
    let r = app
        .call(
            &bob.token,
            "marketplace",
            "all",
            None,
            json!({"search": "dental"}),
        )
        .await;
    assert_eq!(r.ok(200)["total"], json!(1));
    assert!(r.data()["listings"][0].get("source_genie_id").is_none());
    let r = app
        .call(
            &bob.token,
            "marketplace",
            "all",
            None,
            json!({"category": "sales"}),
        )
        .await;
    assert_eq!(r.ok(200)["listings"][0]["id"], json!(lid2));
    app.call(
        &bob.token,
        "marketplace",
        "all",
        None,
        json!({"sort": "random"}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    app.call(
        &bob.token,
        "marketplace",
        "all",
        None,
        json!({"adminMode": true}),
    )
    .await
    .err(403, "FORBIDDEN");

    // Install by bob: a new genie of bob's with the template, provisioned and with a page.
    let r = app
        .call(
            &bob.token,
            "marketplace",
            "install",
            Some(json!(lid)),
            json!({"name": "My Dentist"}),
        )
        .await;
    let d = r.ok(201).clone();
    assert_eq!(d["install_count"], json!(1));
    let gid = d["genie"]["id"].as_str().unwrap().to_string();
    let g2 = gid.clone();
    let (owner, prompt, voice, ext, slug): (String, String, String, String, String) = app
        .state
        .db
        .read(move |c| {
            Ok(c.query_row(
                "SELECT user_id, system_prompt, voice_id, external_agent_id, page_slug FROM genies WHERE id = ?1",
                [&g2],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
            )?)
        })
        .await
        .unwrap();
    assert_eq!(owner, bob.id);
    assert_eq!(prompt, "You book dental appointments.");
    assert_eq!(voice, "cat_olivia");
    assert!(ext.starts_with("agent_"));
    assert_eq!(app.count("genie_phone_numbers").await, 0);
    let page = app
        .client
        .get(format!("{}/g/{slug}", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    assert!(
        page.text()
            .await
            .unwrap()
            .contains("Book your check-up here.")
    );
    let r = app
        .call(
            &bob.token,
            "marketplace",
            "install",
            Some(json!(lid2)),
            json!({}),
        )
        .await;
    r.ok(201);
    app.call(
        &bob.token,
        "marketplace",
        "install",
        Some(json!(lid)),
        json!({}),
    )
    .await
    .ok(201);
    let r = app
        .call(
            &bob.token,
            "marketplace",
            "all",
            None,
            json!({"sort": "installs"}),
        )
        .await;
    let counts: Vec<i64> = r.ok(200)["listings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["install_count"].as_i64().unwrap())
        .collect();
    assert_eq!(counts, vec![2, 1]);

    // Only the publisher updates / unpublishes.
    app.call(
        &bob.token,
        "marketplace",
        "update",
        Some(json!(lid)),
        json!({"name": "Mine"}),
    )
    .await
    .err(404, "NOT_FOUND");
    app.call(
        &alice.token,
        "marketplace",
        "update",
        Some(json!(lid)),
        json!({"status": "gone"}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    let r = app
        .call(
            &alice.token,
            "marketplace",
            "update",
            Some(json!(lid)),
            json!({"description": "Updated"}),
        )
        .await;
    assert_eq!(r.ok(200)["listing"]["description"], json!("Updated"));
    let r = app
        .call(
            &alice.token,
            "marketplace",
            "unpublish",
            Some(json!(lid)),
            json!({}),
        )
        .await;
    assert_eq!(r.ok(200)["listing"]["status"], json!("unpublished"));
    app.call(
        &bob.token,
        "marketplace",
        "get",
        Some(json!(lid)),
        json!({}),
    )
    .await
    .err(404, "NOT_FOUND");
    app.call(
        &bob.token,
        "marketplace",
        "install",
        Some(json!(lid)),
        json!({}),
    )
    .await
    .err(404, "NOT_FOUND");
    let mine = app
        .call(
            &alice.token,
            "marketplace",
            "all",
            None,
            json!({"mine": true}),
        )
        .await;
    assert_eq!(mine.ok(200)["total"], json!(2));

    // Moderation.
    app.call(
        &bob.token,
        "marketplace",
        "hide",
        Some(json!(lid2)),
        json!({}),
    )
    .await
    .err(403, "FORBIDDEN");
    app.call(
        &alice.token,
        "marketplace",
        "feature",
        Some(json!(lid2)),
        json!({}),
    )
    .await
    .err(403, "FORBIDDEN");
    let r = app
        .call(
            &admin.token,
            "marketplace",
            "feature",
            Some(json!(lid2)),
            json!({}),
        )
        .await;
    assert_eq!(r.ok(200)["listing"]["is_featured"], json!(true));
    app.call(
        &admin.token,
        "marketplace",
        "hide",
        Some(json!(lid2)),
        json!({}),
    )
    .await
    .ok(200);
    assert_eq!(
        app.call(&bob.token, "marketplace", "all", None, json!({}))
            .await
            .ok(200)["total"],
        json!(0)
    );
    assert_eq!(
        app.call(
            &admin.token,
            "marketplace",
            "all",
            None,
            json!({"adminMode": true})
        )
        .await
        .ok(200)["total"],
        json!(2)
    );

    let r = app
        .call(
            &alice.token,
            "marketplace",
            "delete",
            Some(json!(lid)),
            json!({}),
        )
        .await;
    assert_eq!(r.ok(200), &json!({"id": lid, "deleted": true}));
    app.call(
        &alice.token,
        "marketplace",
        "get",
        Some(json!(lid)),
        json!({}),
    )
    .await
    .err(404, "NOT_FOUND");
}
