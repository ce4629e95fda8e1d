//! qr-code: create / all / soft delete / increment-download, owner isolation, and the SVG
//! and PNG images (the PNG decodes back to the genie page URL).

use reqwest::Method;
use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn qr_code_lifecycle_and_isolation() {
    let app = TestApp::spawn().await;
    let alice = app.standard().await;
    let bob = app.standard().await;
    let genie = insert_genie(&app, &alice, "Front Desk").await;

    // Bad input changes nothing.
    app.call(&alice.token, "qr-code", "create", None, json!({}))
        .await
        .err(400, "VALIDATION_ERROR");
    app.call(
        &alice.token,
        "qr-code",
        "create",
        None,
        json!({"genie_id": "nope"}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    app.call(
        &bob.token,
        "qr-code",
        "create",
        None,
        json!({"genie_id": genie}),
    )
    .await
    .err(404, "AGENT_NOT_FOUND");
    assert_eq!(app.count("qr_codes").await, 0);

    let r = app
        .call(
            &alice.token,
            "qr-code",
            "create",
            None,
            json!({"genie_id": genie, "label": "Lobby poster"}),
        )
        .await;
    let qr = r.ok(201)["qr_code"].clone();
    let id = qr["id"].as_str().unwrap().to_string();
    assert_eq!(qr["genie_id"], json!(genie));
    assert_eq!(qr["label"], json!("Lobby poster"));
    assert_eq!(qr["download_count"], json!(0));
    assert_eq!(qr["is_deleted"], json!(false));
    let url = qr["url"].as_str().unwrap().to_string();
    assert!(
        url.starts_with(&format!("{}/g/front-desk-", app.base)),
        "{url}"
    );
    assert!(qr["created_at"].as_str().unwrap().ends_with('Z'));

    // REST create works too, with members at the top level.
    let r = app
        .request(
            Method::POST,
            "/v1/qr-code",
            Some(&alice.token),
            Some(json!({"genie_id": genie})),
        )
        .await;
    let second = r.ok(201)["qr_code"]["id"].as_str().unwrap().to_string();
    assert_eq!(
        r.data()["qr_code"]["url"],
        json!(url),
        "the genie keeps its slug"
    );

    let all = app
        .call(&alice.token, "qr-code", "all", None, json!({}))
        .await;
    assert_eq!(all.ok(200)["qr_codes"].as_array().unwrap().len(), 2);
    let bobs = app
        .call(&bob.token, "qr-code", "all", None, json!({}))
        .await;
    assert_eq!(bobs.ok(200)["qr_codes"], json!([]));

    // increment-download: {} counts one, {count} counts that many; bad counts change nothing.
    let r = app
        .call(
            &alice.token,
            "qr-code",
            "increment-download",
            Some(json!(id)),
            json!({}),
        )
        .await;
    assert_eq!(r.ok(200)["qr_code"]["download_count"], json!(1));
    let r = app
        .call(
            &alice.token,
            "qr-code",
            "increment-download",
            Some(json!(id)),
            json!({"count": 3}),
        )
        .await;
    assert_eq!(r.ok(200)["qr_code"]["download_count"], json!(4));
    app.call(
        &alice.token,
        "qr-code",
        "increment-download",
        Some(json!(id)),
        json!({"count": 0}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    app.call(
        &alice.token,
        "qr-code",
        "increment-download",
        None,
        json!({}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    app.call(
        &bob.token,
        "qr-code",
        "increment-download",
        Some(json!(id)),
        json!({}),
    )
    .await
    .err(404, "NOT_FOUND");
    let r = app
        .request(
            Method::POST,
            &format!("/v1/qr-code/{id}/increment-download"),
            Some(&alice.token),
            Some(json!({})),
        )
        .await;
    assert_eq!(r.ok(200)["qr_code"]["download_count"], json!(5));

    // Images: owner only.
    let svg = app
        .client
        .get(format!("{}/v1/qr-code/{id}/image.svg", app.base))
        .bearer_auth(&alice.token)
        .send()
        .await
        .unwrap();
    assert_eq!(svg.status(), 200);
    assert_eq!(svg.headers()["content-type"], "image/svg+xml");
    assert!(svg.text().await.unwrap().contains("<svg"));
    let png = app
        .client
        .get(format!("{}/v1/qr-code/{id}/image.png", app.base))
        .bearer_auth(&alice.token)
        .send()
        .await
        .unwrap();
    assert_eq!(png.status(), 200);
    assert_eq!(png.headers()["content-type"], "image/png");
    let bytes = png.bytes().await.unwrap();
    let img = image::load_from_memory(&bytes).unwrap().to_luma8();
    let mut prepared = rqrr::PreparedImage::prepare(img);
    let grids = prepared.detect_grids();
    assert_eq!(grids.len(), 1);
    let (_, content) = grids[0].decode().unwrap();
    assert_eq!(content, url);
    let r = app
        .request(
            Method::GET,
            &format!("/v1/qr-code/{id}/image.png"),
            Some(&bob.token),
            None,
        )
        .await;
    r.err(404, "NOT_FOUND");
    let r = app
        .request(
            Method::GET,
            &format!("/v1/qr-code/{id}/image.svg"),
            None,
            None,
        )
        .await;
    r.err(401, "UNAUTHORIZED");

    // Soft delete: gone from all and images, still in the table with is_deleted.
    app.call(&bob.token, "qr-code", "delete", Some(json!(id)), json!({}))
        .await
        .err(404, "NOT_FOUND");
    let r = app
        .call(
            &alice.token,
            "qr-code",
            "delete",
            Some(json!(id)),
            json!({}),
        )
        .await;
    assert_eq!(r.ok(200), &json!({"id": id, "deleted": true}));
    app.call(
        &alice.token,
        "qr-code",
        "delete",
        Some(json!(id)),
        json!({}),
    )
    .await
    .err(404, "NOT_FOUND");
    let all = app
        .call(&alice.token, "qr-code", "all", None, json!({}))
        .await;
    let ids: Vec<&str> = all.ok(200)["qr_codes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![second.as_str()]);
    assert_eq!(app.count("qr_codes").await, 2);
    let iid = id.clone();
    let deleted: bool = app
        .state
        .db
        .read(move |c| {
            Ok(c.query_row(
                "SELECT is_deleted FROM qr_codes WHERE id = ?1",
                [&iid],
                |r| r.get(0),
            )?)
        })
        .await
        .unwrap();
    assert!(deleted);
    app.request(
        Method::GET,
        &format!("/v1/qr-code/{id}/image.svg"),
        Some(&alice.token),
        None,
    )
    .await
    .err(404, "NOT_FOUND");
    app.call(&alice.token, "qr-code", "explode", None, json!({}))
        .await
        .err(400, "INVALID_ACTION");

    // The audit log saw the mutations.
    let acts = app
        .call(&alice.token, "activities", "list", None, json!({}))
        .await;
    let text = acts.ok(200).to_string();
    assert!(text.contains("created QR code for"), "{text}");
}
