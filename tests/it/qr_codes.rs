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

/// The QR record and its image carry the public URL of the run that serves them: a restart
/// with another public URL (here, another port) moves the same record along.
#[tokio::test]
async fn qr_codes_follow_the_public_url_after_a_restart() {
    let app = TestApp::spawn().await;
    let alice = app.standard().await;
    let genie = insert_genie(&app, &alice, "Front Desk").await;
    let r = app
        .call(
            &alice.token,
            "qr-code",
            "create",
            None,
            json!({"genie_id": genie}),
        )
        .await;
    let qr = r.ok(201)["qr_code"].clone();
    let id = qr["id"].as_str().unwrap().to_string();
    let first = qr["url"].as_str().unwrap().to_string();
    let slug = first
        .strip_prefix(&format!("{}/g/", app.base))
        .unwrap_or_else(|| panic!("{first} is not under {}", app.base))
        .to_string();

    let old_base = app.base.clone();
    let app = app.restart().await;
    assert_ne!(app.base, old_base, "the restart must change the public URL");
    let want = format!("{}/g/{slug}", app.base);
    let got = app
        .call(&alice.token, "qr-code", "get", Some(json!(id)), json!({}))
        .await;
    assert_eq!(got.ok(200)["qr_code"]["url"], json!(want));
    let all = app
        .call(&alice.token, "qr-code", "all", None, json!({}))
        .await;
    assert_eq!(all.ok(200)["qr_codes"][0]["url"], json!(want));
    let inc = app
        .call(
            &alice.token,
            "qr-code",
            "increment-download",
            Some(json!(id)),
            json!({}),
        )
        .await;
    assert_eq!(inc.ok(200)["qr_code"]["url"], json!(want));
    // The image encodes the new link too.
    let png = app
        .client
        .get(format!("{}/v1/qr-code/{id}/image.png", app.base))
        .bearer_auth(&alice.token)
        .send()
        .await
        .unwrap();
    assert_eq!(png.status(), 200);
    let img = image::load_from_memory(&png.bytes().await.unwrap())
        .unwrap()
        .to_luma8();
    let mut prepared = rqrr::PreparedImage::prepare(img);
    let grids = prepared.detect_grids();
    assert_eq!(grids.len(), 1);
    assert_eq!(grids[0].decode().unwrap().1, want);
}

/// Starts the real binary and returns what it logged before it said it was listening.
async fn log_until_listening(listen: &str, public_url: &str) -> String {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    // Under the process guard: killed when the test ends, pass or fail.
    let mut served = crate::common::process::Proc::spawn(
        std::process::Command::new(env!("CARGO_BIN_EXE_genied"))
            .args(["serve", "--listen", listen, "--public-url", public_url])
            .arg("--data-dir")
            .arg(dir.path())
            .env("GENIED_LOG_FORMAT", "text")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null()),
    );
    let out = served.take_stdout().unwrap();
    let reader = tokio::task::spawn_blocking(move || {
        let mut seen = String::new();
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if line.contains("listening") {
                return Some(seen);
            }
            seen.push_str(&line);
            seen.push('\n');
        }
        None
    });
    let seen = tokio::time::timeout(std::time::Duration::from_secs(60), reader)
        .await
        .expect("genied did not start listening within 60 s")
        .unwrap()
        .expect("genied exited before listening");
    drop(served);
    seen
}

#[tokio::test]
async fn a_loopback_public_url_on_a_public_listener_is_warned_about_at_start() {
    let warned = log_until_listening("0.0.0.0:0", "http://127.0.0.1:8080").await;
    assert!(
        warned.contains("WARN")
            && warned.contains("the public URL http://127.0.0.1:8080 names this machine only")
            && warned.contains("--public-url"),
        "{warned}"
    );
    // Control: listening on loopback itself, the same public URL is right.
    let quiet = log_until_listening("127.0.0.1:0", "http://127.0.0.1:8080").await;
    assert!(!quiet.contains("names this machine only"), "{quiet}");
}
