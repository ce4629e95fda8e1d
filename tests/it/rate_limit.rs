//! Per-key rate limiting: the 61st request in a minute is refused, other keys are not.

use crate::common::*;
use reqwest::Method;
use serde_json::json;

async fn with_key(app: &TestApp, key: &str) -> Resp {
    app.raw(
        Method::POST,
        "/v1",
        &[("x-api-key", key)],
        json!({"resource": "profiles", "action": "get"}).to_string(),
    )
    .await
}

#[tokio::test]
async fn sixty_first_request_is_refused_and_other_keys_are_unaffected() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let (k1, k2) = (app.api_key(&u).await, app.api_key(&u).await);
    // The bucket holds 60 and refills one a second (60 a minute), so the request after the
    // 60th is refused unless a second passed, which only lets in one more per second.
    let started = std::time::Instant::now();
    let mut accepted = 0u64;
    let r = loop {
        let r = with_key(&app, &k1).await;
        if r.status == 429 {
            break r;
        }
        r.ok(200);
        assert_eq!(r.header("x-ratelimit-limit"), Some("60"));
        if accepted == 0 {
            assert_eq!(r.header("x-ratelimit-remaining"), Some("59"));
        }
        accepted += 1;
        assert!(accepted <= 120, "the limit never applied");
    };
    let refilled = started.elapsed().as_secs() + 1;
    assert!(
        (60..=60 + refilled).contains(&accepted),
        "{accepted} requests accepted in {refilled} s"
    );
    r.err(429, "RATE_LIMIT_EXCEEDED");
    let retry: u64 = r
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry));
    assert_eq!(r.header("x-ratelimit-remaining"), Some("0"));
    // A different key of the same user has its own bucket.
    let r = with_key(&app, &k2).await;
    r.ok(200);
    assert_eq!(r.header("x-ratelimit-remaining"), Some("59"));
}

#[tokio::test]
async fn limit_is_configurable_and_can_be_lifted() {
    let app = TestApp::spawn_with(|c| c.rate_limit_per_minute = 2).await;
    let u = app.standard().await;
    let k = app.api_key(&u).await;
    with_key(&app, &k).await.ok(200);
    with_key(&app, &k).await.ok(200);
    with_key(&app, &k).await.err(429, "RATE_LIMIT_EXCEEDED");

    let app = TestApp::spawn_with(|c| c.rate_limit_per_minute = 0).await;
    let u = app.standard().await;
    let k = app.api_key(&u).await;
    for _ in 0..80 {
        let r = with_key(&app, &k).await;
        r.ok(200);
        assert!(r.header("x-ratelimit-limit").is_none());
    }
}

#[tokio::test]
async fn session_callers_have_their_own_per_user_limit() {
    let app = TestApp::spawn_with(|c| c.session_rate_limit_per_minute = 3).await;
    let u = app.standard().await;
    for _ in 0..3 {
        app.call(&u.token, "profiles", "get", None, json!({}))
            .await
            .ok(200);
    }
    app.call(&u.token, "profiles", "get", None, json!({}))
        .await
        .err(429, "RATE_LIMIT_EXCEEDED");
    let other = app.standard().await;
    app.call(&other.token, "profiles", "get", None, json!({}))
        .await
        .ok(200);
}
