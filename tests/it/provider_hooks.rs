//! Post-call webhooks from the voice platform: signature, staleness and replay checks, and
//! exactly one conversation per provider conversation id.

use hmac::{Hmac, Mac};
use reqwest::Method;
use serde_json::{Value, json};
use sha2::Sha256;

use crate::common::*;

const SECRET: &str = "wsec_test_0123456789";

fn sign(secret: &str, t: i64, body: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("{t}.{body}").as_bytes());
    format!("t={t},v0={}", hex::encode(mac.finalize().into_bytes()))
}

async fn post(app: &TestApp, signature: Option<&str>, body: &str) -> Resp {
    let mut h = vec![("content-type", "application/json")];
    if let Some(s) = signature {
        h.push(("elevenlabs-signature", s));
    }
    app.raw(Method::POST, "/v1/hooks/elevenlabs", &h, body.to_string())
        .await
}

async fn genie_with_agent(app: &TestApp, user: &User) -> (String, String) {
    let r = app
        .call(
            &user.token,
            "genies",
            "create",
            None,
            json!({"genieName": "Front desk"}),
        )
        .await;
    let id = r.ok(201)["genie"]["id"].as_str().unwrap().to_string();
    let gid = id.clone();
    let agent: String = app
        .state
        .db
        .read(move |c| {
            Ok(c.query_row(
                "SELECT external_agent_id FROM genies WHERE id = ?1",
                [&gid],
                |r| r.get(0),
            )?)
        })
        .await
        .unwrap();
    (id, agent)
}

fn post_call(agent: &str, conversation: &str) -> String {
    json!({
        "type": "post_call_transcription",
        "event_timestamp": 1_790_000_000,
        "data": {
            "agent_id": agent,
            "conversation_id": conversation,
            "status": "done",
            "transcript": [
                {"role": "agent", "message": "Hello, how can I help?", "time_in_call_secs": 0},
                {"role": "user", "message": "Hi, my name is Grace Hopper, email grace@example.test", "time_in_call_secs": 3},
            ],
            "metadata": {"start_time_unix_secs": 1_790_000_000, "call_duration_secs": 42},
            "analysis": {"transcript_summary": "Grace asked for a callback."}
        }
    })
    .to_string()
}

async fn conversations(app: &TestApp, user: &User) -> Vec<Value> {
    let r = app
        .call(&user.token, "conversations", "all", None, json!({}))
        .await;
    let d = r.ok(200).clone();
    d["conversations"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn a_valid_call_creates_exactly_one_conversation() {
    let app = TestApp::spawn_with(|c| {
        c.elevenlabs_webhook_secret = Some(genied::config::Secret(SECRET.into()))
    })
    .await;
    let u = app.standard().await;
    let (genie, agent) = genie_with_agent(&app, &u).await;
    let body = post_call(&agent, "conv_abc123");
    let now = chrono::Utc::now().timestamp();
    let mut events = app.state.bus.subscribe();

    let r = post(&app, Some(&sign(SECRET, now, &body)), &body).await;
    let d = r.ok(200).clone();
    assert_eq!(d["created"], json!(true));
    // conversation.completed carries the transcript, the analysis and the linked lead.
    let ev = loop {
        let e = tokio::time::timeout(std::time::Duration::from_secs(5), events.recv())
            .await
            .unwrap()
            .unwrap();
        if e.kind == "conversation.completed" {
            break e;
        }
    };
    assert_eq!(ev.user_id, u.id);
    assert_eq!(ev.data["id"], d["conversation_id"]);
    assert_eq!(ev.data["transcript"].as_array().unwrap().len(), 2);
    assert!(ev.data["analysis"].is_object(), "{}", ev.data);
    assert_eq!(ev.data["lead"]["email"], json!("grace@example.test"));
    // The platform retries with a fresh signature: accepted, still one conversation.
    let r = post(&app, Some(&sign(SECRET, now + 1, &body)), &body).await;
    assert_eq!(r.ok(200)["created"], json!(false));
    assert_eq!(r.data()["conversation_id"], d["conversation_id"]);

    let list = conversations(&app, &u).await;
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["genie_id"], json!(genie));
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
    assert_eq!(conv["transcript"].as_array().unwrap().len(), 2);
    // Analysis ran for the owner and captured the caller as a lead.
    let leads = app.call(&u.token, "leads", "all", None, json!({})).await;
    let leads = leads.ok(200)["leads"].clone();
    assert_eq!(leads.as_array().unwrap().len(), 1, "{leads}");
    assert_eq!(leads[0]["email"], json!("grace@example.test"));
    // Another user sees nothing of it.
    let other = app.standard().await;
    assert!(conversations(&app, &other).await.is_empty());
}

#[tokio::test]
async fn forged_stale_replayed_and_unsigned_calls_are_refused() {
    let app = TestApp::spawn_with(|c| {
        c.elevenlabs_webhook_secret = Some(genied::config::Secret(SECRET.into()))
    })
    .await;
    let u = app.standard().await;
    let (_, agent) = genie_with_agent(&app, &u).await;
    let body = post_call(&agent, "conv_forged");
    let now = chrono::Utc::now().timestamp();
    post(&app, None, &body).await.err(401, "UNAUTHORIZED");
    post(&app, Some(&sign("not the secret", now, &body)), &body)
        .await
        .err(401, "UNAUTHORIZED");
    post(&app, Some(&sign(SECRET, now - 31 * 60, &body)), &body)
        .await
        .err(401, "UNAUTHORIZED");
    post(
        &app,
        Some(&sign(SECRET, now, &body.replace("done", "failed"))),
        &body,
    )
    .await
    .err(401, "UNAUTHORIZED");
    assert!(conversations(&app, &u).await.is_empty());

    let sig = sign(SECRET, now, &body);
    post(&app, Some(&sig), &body).await.ok(200);
    let r = post(&app, Some(&sig), &body).await;
    r.err(401, "UNAUTHORIZED");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("replay")
    );
    assert_eq!(conversations(&app, &u).await.len(), 1);
}

#[tokio::test]
async fn unknown_agents_and_other_events_are_acknowledged_and_ignored() {
    let app = TestApp::spawn_with(|c| {
        c.elevenlabs_webhook_secret = Some(genied::config::Secret(SECRET.into()))
    })
    .await;
    let now = chrono::Utc::now().timestamp();
    let body = post_call("agent_nobody_has", "conv_x");
    let r = post(&app, Some(&sign(SECRET, now, &body)), &body).await;
    assert!(
        r.ok(200)["ignored"]
            .as_str()
            .unwrap()
            .contains("agent_nobody_has")
    );
    let audio = json!({"type": "post_call_audio", "data": {}}).to_string();
    let r = post(&app, Some(&sign(SECRET, now, &audio)), &audio).await;
    assert!(r.ok(200)["ignored"].is_string());
    assert_eq!(app.count("conversations").await, 0);
}

#[tokio::test]
async fn the_endpoint_is_off_without_a_secret() {
    let app = TestApp::spawn().await;
    let body = post_call("a", "c");
    post(
        &app,
        Some(&sign(SECRET, chrono::Utc::now().timestamp(), &body)),
        &body,
    )
    .await
    .err(404, "NOT_FOUND");
}
