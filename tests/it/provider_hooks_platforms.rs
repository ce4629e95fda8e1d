//! Vapi's server-URL events and Retell's signed webhooks over real HTTP: a valid finished
//! call becomes the genie's conversation (analysed, with its lead) exactly once; a wrong or
//! missing secret or signature, a stale timestamp and a replay are 401 and store nothing.

use hmac::{Hmac, Mac};
use reqwest::Method;
use serde_json::{Value, json};
use sha2::Sha256;

use crate::common::fakes::retell::{self, FakeRetell};
use crate::common::fakes::vapi::FakeVapi;
use crate::common::*;
use crate::providers::{retell_app, vapi_app};

async fn genie(app: &TestApp, user: &User) -> String {
    let r = app
        .call(
            &user.token,
            "genies",
            "create",
            None,
            json!({"genieName": "Desk"}),
        )
        .await;
    let id = r.ok(201)["genie"]["id"].as_str().unwrap().to_string();
    app.state
        .db
        .read(move |c| {
            Ok(c.query_row(
                "SELECT external_agent_id FROM genies WHERE id = ?1",
                [&id],
                |r| r.get(0),
            )?)
        })
        .await
        .unwrap()
}

async fn conversations(app: &TestApp, user: &User) -> Vec<Value> {
    let r = app
        .call(&user.token, "conversations", "all", None, json!({}))
        .await;
    r.ok(200)["conversations"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn vapi_report(assistant: &str, call: &str, ts_ms: i64) -> String {
    json!({"message": {
        "type": "end-of-call-report", "timestamp": ts_ms, "endedReason": "customer-ended-call",
        "startedAt": "2026-11-20T10:00:00.000Z", "endedAt": "2026-11-20T10:00:42.000Z",
        "artifact": {"messages": [
            {"role": "system", "message": "You help."},
            {"role": "bot", "message": "Hello, how can I help?", "secondsFromStart": 0.3},
            {"role": "user", "message": "I am Grace Hopper, email grace@example.test", "secondsFromStart": 3.0}]},
        "analysis": {"summary": "Grace asked for a callback."},
        "call": {"id": call, "assistantId": assistant, "type": "inboundPhoneCall", "status": "in-progress"}
    }})
    .to_string()
}

async fn post_vapi(app: &TestApp, secret: Option<&str>, body: &str) -> Resp {
    let mut h = vec![("content-type", "application/json")];
    if let Some(s) = secret {
        h.push(("x-vapi-secret", s));
    }
    app.raw(Method::POST, "/v1/hooks/vapi", &h, body.to_string())
        .await
}

#[tokio::test]
async fn vapi_end_of_call_reports_become_conversations() {
    let fake = FakeVapi::start().await;
    let app = vapi_app(&fake).await;
    let u = app.standard().await;
    let agent = genie(&app, &u).await;
    let now = chrono::Utc::now().timestamp_millis();
    let body = vapi_report(&agent, "call-1", now);

    // Refused: no secret, a wrong one, a stale or future timestamp. Nothing is stored.
    post_vapi(&app, None, &body).await.err(401, "UNAUTHORIZED");
    post_vapi(&app, Some("guess"), &body)
        .await
        .err(401, "UNAUTHORIZED");
    let stale = vapi_report(&agent, "call-1", now - 31 * 60 * 1000);
    post_vapi(&app, Some("vapi-hook-secret"), &stale)
        .await
        .err(401, "UNAUTHORIZED");
    let future = vapi_report(&agent, "call-1", now + 6 * 60 * 1000);
    post_vapi(&app, Some("vapi-hook-secret"), &future)
        .await
        .err(401, "UNAUTHORIZED");
    assert_eq!(app.count("conversations").await, 0);

    let r = post_vapi(&app, Some("vapi-hook-secret"), &body).await;
    let d = r.ok(200).clone();
    assert_eq!(d["created"], json!(true));
    // The same request again is a replay.
    let r = post_vapi(&app, Some("vapi-hook-secret"), &body).await;
    r.err(401, "UNAUTHORIZED");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("replay")
    );
    // A later report of the same call updates the one conversation.
    let again = vapi_report(&agent, "call-1", now + 1);
    assert_eq!(
        post_vapi(&app, Some("vapi-hook-secret"), &again)
            .await
            .ok(200)["created"],
        json!(false)
    );

    let list = conversations(&app, &u).await;
    assert_eq!(list.len(), 1);
    let got = app
        .call(
            &u.token,
            "conversations",
            "get",
            Some(d["conversation_id"].clone()),
            json!({}),
        )
        .await;
    let conv = got.ok(200)["conversation"].clone();
    assert_eq!(conv["status"], json!("done"));
    assert_eq!(conv["duration_seconds"], json!(42));
    let t = conv["transcript"].as_array().unwrap();
    assert_eq!(t.len(), 2);
    assert_eq!(t[0]["role"], json!("agent"));
    let leads = app.call(&u.token, "leads", "all", None, json!({})).await;
    assert_eq!(
        leads.ok(200)["leads"][0]["email"],
        json!("grace@example.test")
    );

    // Other events and other assistants are acknowledged and ignored.
    let status = json!({"message": {"type": "status-update", "status": "ringing", "timestamp": now + 2, "call": {"id": "call-1", "assistantId": agent}}}).to_string();
    assert!(
        post_vapi(&app, Some("vapi-hook-secret"), &status)
            .await
            .ok(200)["ignored"]
            .is_string()
    );
    let foreign = vapi_report("someone-else", "call-9", now + 3);
    assert!(
        post_vapi(&app, Some("vapi-hook-secret"), &foreign)
            .await
            .ok(200)["ignored"]
            .is_string()
    );
    assert_eq!(app.count("conversations").await, 1);
}

fn retell_sign(key: &str, body: &str, ts_ms: i64) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key.as_bytes()).unwrap();
    mac.update(body.as_bytes());
    mac.update(ts_ms.to_string().as_bytes());
    format!("v={ts_ms},d={}", hex::encode(mac.finalize().into_bytes()))
}

fn retell_event(event: &str, agent: &str, analysed: bool) -> String {
    let mut call = json!({
        "call_id": "call_abc", "agent_id": agent, "call_type": "phone_call", "call_status": "ended",
        "direction": "inbound", "from_number": "+14155550123", "to_number": "+14155550100",
        "start_timestamp": 1_790_000_000_000i64, "end_timestamp": 1_790_000_042_000i64, "duration_ms": 42_000,
        "disconnection_reason": "user_hangup",
        "transcript_object": [
            {"role": "agent", "content": "Hello, how can I help?", "words": [{"word": "Hello", "start": 0.2, "end": 0.5}]},
            {"role": "user", "content": "I am Grace Hopper, email grace@example.test", "words": [{"word": "I", "start": 3.0, "end": 3.1}]}]
    });
    if analysed {
        call["call_analysis"] = json!({"call_summary": "Grace asked for a callback.", "call_successful": true, "user_sentiment": "Positive"});
    }
    json!({"event": event, "call": call}).to_string()
}

async fn post_retell(app: &TestApp, sig: Option<&str>, body: &str) -> Resp {
    let mut h = vec![("content-type", "application/json")];
    if let Some(s) = sig {
        h.push(("x-retell-signature", s));
    }
    app.raw(Method::POST, "/v1/hooks/retell", &h, body.to_string())
        .await
}

#[tokio::test]
async fn retell_signed_webhooks_become_conversations() {
    let fake = FakeRetell::start().await;
    let app = retell_app(&fake).await;
    let u = app.standard().await;
    let agent = genie(&app, &u).await;
    let now = chrono::Utc::now().timestamp_millis();
    let ended = retell_event("call_ended", &agent, false);

    post_retell(&app, None, &ended)
        .await
        .err(401, "UNAUTHORIZED");
    post_retell(&app, Some(&retell_sign("another_key", &ended, now)), &ended)
        .await
        .err(401, "UNAUTHORIZED");
    post_retell(
        &app,
        Some(&retell_sign(retell::KEY, &ended, now - 6 * 60 * 1000)),
        &ended,
    )
    .await
    .err(401, "UNAUTHORIZED");
    post_retell(&app, Some("v=1,d=zz"), &ended)
        .await
        .err(401, "UNAUTHORIZED");
    assert_eq!(app.count("conversations").await, 0);

    let sig = retell_sign(retell::KEY, &ended, now);
    let d = post_retell(&app, Some(&sig), &ended).await.ok(200).clone();
    assert_eq!(d["created"], json!(true));
    let r = post_retell(&app, Some(&sig), &ended).await;
    r.err(401, "UNAUTHORIZED");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("replay")
    );

    // call_analyzed brings the summary to the same conversation.
    let analysed = retell_event("call_analyzed", &agent, true);
    let r = post_retell(
        &app,
        Some(&retell_sign(retell::KEY, &analysed, now + 1)),
        &analysed,
    )
    .await;
    assert_eq!(r.ok(200)["created"], json!(false));
    assert_eq!(r.data()["conversation_id"], d["conversation_id"]);
    let list = conversations(&app, &u).await;
    assert_eq!(list.len(), 1);
    let got = app
        .call(
            &u.token,
            "conversations",
            "get",
            Some(d["conversation_id"].clone()),
            json!({}),
        )
        .await;
    let conv = got.ok(200)["conversation"].clone();
    assert_eq!(conv["duration_seconds"], json!(42));
    assert_eq!(conv["transcript"].as_array().unwrap().len(), 2);
    let leads = app.call(&u.token, "leads", "all", None, json!({})).await;
    assert_eq!(
        leads.ok(200)["leads"][0]["email"],
        json!("grace@example.test")
    );

    let started =
        json!({"event": "call_started", "call": {"call_id": "x", "agent_id": agent}}).to_string();
    let r = post_retell(
        &app,
        Some(&retell_sign(retell::KEY, &started, now + 2)),
        &started,
    )
    .await;
    assert!(r.ok(200)["ignored"].is_string());
}

#[tokio::test]
async fn platform_hooks_are_off_without_their_secret() {
    let app = TestApp::spawn().await;
    for path in ["/v1/hooks/vapi", "/v1/hooks/retell"] {
        app.raw(
            Method::POST,
            path,
            &[("content-type", "application/json")],
            "{}".to_string(),
        )
        .await
        .err(404, "NOT_FOUND");
    }
}
