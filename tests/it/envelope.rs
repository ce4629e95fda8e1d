//! The envelope and the REST adapter: malformed input, unknown names, errors as JSON.

use crate::common::*;
use reqwest::Method;
use serde_json::json;

fn auth(token: &str) -> String {
    format!("Bearer {token}")
}

#[tokio::test]
async fn malformed_bodies_get_validation_errors() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let a = auth(&u.token);
    let h = [
        ("authorization", a.as_str()),
        ("content-type", "application/json"),
    ];
    for body in [
        "not json",
        "[1,2,3]",
        "\"a string\"",
        "{}",
        "{\"resource\": \"profiles\"}",
        "{\"action\": \"get\"}",
        "{\"resource\": 5, \"action\": \"get\"}",
        "{\"resource\": \"profiles\", \"action\": [\"get\"]}",
        "{\"resource\": \"profiles\", \"action\": \"get\", \"data\": 7}",
        "{\"resource\": \"profiles\", \"action\": \"get\", \"id\": {\"x\": 1}}",
        "",
    ] {
        let r = app.raw(Method::POST, "/v1", &h, body).await;
        r.err(400, "VALIDATION_ERROR");
    }
}

#[tokio::test]
async fn unknown_resource_and_action() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    app.call(&u.token, "spaceships", "list", None, json!({}))
        .await
        .err(400, "INVALID_RESOURCE");
    app.call(&u.token, "api-keys", "explode", None, json!({}))
        .await
        .err(400, "INVALID_ACTION");
    app.call(&u.token, "documents", "explode", None, json!({}))
        .await
        .err(400, "INVALID_ACTION");
}

#[tokio::test]
async fn single_record_actions_check_the_id() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    app.call(&u.token, "api-keys", "revoke", None, json!({}))
        .await
        .err(400, "VALIDATION_ERROR");
    app.call(
        &u.token,
        "api-keys",
        "revoke",
        Some(json!("not-a-uuid")),
        json!({}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    app.call(&u.token, "api-keys", "delete", Some(json!(42)), json!({}))
        .await
        .err(400, "VALIDATION_ERROR");
    let absent = json!(uuid::Uuid::new_v4().to_string());
    app.call(&u.token, "api-keys", "delete", Some(absent), json!({}))
        .await
        .err(404, "NOT_FOUND");
}

#[tokio::test]
async fn wrong_member_types_name_the_member() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let r = app
        .call(&u.token, "api-keys", "create", None, json!({"name": 12}))
        .await;
    r.err(400, "VALIDATION_ERROR");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("data.name"),
        "{}",
        r.body
    );
    let r = app
        .call(
            &u.token,
            "profiles",
            "update",
            None,
            json!({"timezone": "Mars/Olympus"}),
        )
        .await;
    r.err(400, "VALIDATION_ERROR");
    assert_eq!(app.count("api_keys").await, 0);
}

#[tokio::test]
async fn unknown_paths_wrong_methods_and_huge_bodies_are_envelopes() {
    let app = TestApp::spawn_with(|c| c.max_body_bytes = 64 * 1024).await;
    let u = app.standard().await;
    app.request(Method::GET, "/nowhere", None, None)
        .await
        .err(404, "NOT_FOUND");
    app.request(Method::GET, "/v1/spaceships", Some(&u.token), None)
        .await
        .err(404, "NOT_FOUND");
    app.request(Method::PUT, "/v1", Some(&u.token), None)
        .await
        .err(405, "METHOD_NOT_ALLOWED");
    app.request(Method::GET, "/v1", Some(&u.token), None)
        .await
        .err(405, "METHOD_NOT_ALLOWED");
    let a = auth(&u.token);
    let big = format!(
        "{{\"resource\":\"profiles\",\"action\":\"get\",\"data\":{{\"x\":\"{}\"}}}}",
        "a".repeat(200 * 1024)
    );
    let r = app
        .raw(
            Method::POST,
            "/v1",
            &[("authorization", &a), ("content-type", "application/json")],
            big,
        )
        .await;
    r.err(413, "PAYLOAD_TOO_LARGE");
}

#[tokio::test]
async fn deep_nesting_is_refused_not_crashed() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let a = auth(&u.token);
    let deep = format!(
        "{{\"resource\":\"profiles\",\"action\":\"update\",\"data\":{{\"preferences\":{}1{}}}}}",
        "[".repeat(5000),
        "]".repeat(5000)
    );
    let r = app
        .raw(
            Method::POST,
            "/v1",
            &[("authorization", &a), ("content-type", "application/json")],
            deep,
        )
        .await;
    r.err(400, "VALIDATION_ERROR");
    // The service is still fine.
    app.call(&u.token, "profiles", "get", None, json!({}))
        .await
        .ok(200);
}

#[tokio::test]
async fn unicode_and_sql_metacharacters_are_stored_verbatim() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let name = "Robert'); DROP TABLE users;-- 🎙️ «ключ» \" \\ %_";
    let r = app
        .call(&u.token, "api-keys", "create", None, json!({"name": name}))
        .await;
    assert_eq!(r.ok(201)["api_key"]["name"], json!(name));
    let list = app
        .call(&u.token, "api-keys", "list", None, json!({}))
        .await;
    assert_eq!(list.ok(200)["api_keys"][0]["name"], json!(name));
    let r = app
        .call(
            &u.token,
            "profiles",
            "update",
            None,
            json!({"full_name": name, "preferences": {"ünï": "✓"}}),
        )
        .await;
    assert_eq!(r.ok(200)["profile"]["full_name"], json!(name));
    assert_eq!(r.data()["profile"]["preferences"]["ünï"], json!("✓"));
}

#[tokio::test]
async fn responses_carry_a_request_id() {
    let app = TestApp::spawn().await;
    let r = app.request(Method::GET, "/healthz", None, None).await;
    assert_eq!(r.body, json!({"status": "ok"}));
    assert!(r.header("x-request-id").is_some_and(|v| v.len() >= 32));
    let r = app.request(Method::POST, "/v1", None, None).await;
    r.err(401, "UNAUTHORIZED");
    assert!(r.header("x-request-id").is_some());
    let r = app.request(Method::GET, "/readyz", None, None).await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn rest_routes_map_to_actions() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    // POST /v1/{resource} defaults to create, and the body's members become data.
    let r = app
        .request(
            Method::POST,
            "/v1/api-keys",
            Some(&u.token),
            Some(json!({"name": "rest"})),
        )
        .await;
    let id = r.ok(201)["api_key"]["id"].as_str().unwrap().to_string();
    // GET list, with the record.
    let r = app
        .request(Method::GET, "/v1/api-keys", Some(&u.token), None)
        .await;
    assert_eq!(r.ok(200)["count"], json!(1));
    // PATCH on api-keys is revoke.
    let r = app
        .request(
            Method::PATCH,
            &format!("/v1/api-keys/{id}"),
            Some(&u.token),
            None,
        )
        .await;
    assert_eq!(r.ok(200)["api_key"]["status"], json!("revoked"));
    // POST /v1/{resource}/{id}/{action}.
    let r = app
        .request(
            Method::POST,
            &format!("/v1/api-keys/{id}/revoke"),
            Some(&u.token),
            Some(json!({})),
        )
        .await;
    assert_eq!(r.ok(200)["api_key"]["status"], json!("revoked"));
    // GET /v1/{resource}/{id} runs get.
    let r = app
        .request(
            Method::GET,
            &format!("/v1/profiles/{}", u.id),
            Some(&u.token),
            None,
        )
        .await;
    assert_eq!(r.ok(200)["profile"]["id"], json!(u.id));
    // DELETE.
    let r = app
        .request(
            Method::DELETE,
            &format!("/v1/api-keys/{id}"),
            Some(&u.token),
            None,
        )
        .await;
    assert_eq!(r.ok(200), &json!({"id": id, "deleted": true}));
    // Query parameters become data members.
    let r = app
        .request(
            Method::GET,
            "/v1/activities?limit=1&resource=api-keys",
            Some(&u.token),
            None,
        )
        .await;
    let d = r.ok(200);
    assert_eq!(d["limit"], json!(1));
    assert_eq!(d["activities"].as_array().unwrap().len(), 1);
    assert_eq!(
        d["count"],
        json!(4),
        "create, revoke twice and delete were audited: {d}"
    );
    let r = app
        .request(
            Method::GET,
            "/v1/activities?limit=zero",
            Some(&u.token),
            None,
        )
        .await;
    r.err(400, "VALIDATION_ERROR");
}

#[tokio::test]
async fn a_panicking_handler_answers_500_envelope_and_the_service_lives_on() {
    use axum::routing::get;
    let dir = tempfile::tempdir().unwrap();
    let built = genied::build_app(test_config(dir.path())).unwrap();
    async fn boom() -> &'static str {
        panic!("deliberate test panic")
    }
    let boom = axum::Router::new().route("/boom", get(boom));
    let router = genied::http::router(built.state.clone(), boom);
    let app = genied::App {
        state: built.state,
        router,
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(genied::serve(app, listener, async move {
        let _ = rx.await;
    }));
    let r = TestApp::finish(reqwest::Client::new().get(format!("{base}/boom"))).await;
    r.err(500, "INTERNAL_ERROR");
    assert!(
        !r.body.to_string().contains("deliberate"),
        "panic details must not reach the client"
    );
    let r = TestApp::finish(reqwest::Client::new().get(format!("{base}/healthz"))).await;
    assert_eq!(r.status, 200);
    tx.send(()).unwrap();
    server.await.unwrap().unwrap();
}
