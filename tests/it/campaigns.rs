//! Campaigns over real HTTP (issue #23, phone calls): the local provider simulates each
//! call with the genie's model talking to a simulated callee (a fake LLM endpoint on
//! loopback that answers by role and measures how many calls are open at once); Vapi
//! campaign calls end through its webhook.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::fakes::call_llm::FakeCallLlm;
use crate::common::fakes::vapi::FakeVapi;
use crate::common::*;
use crate::providers::vapi_app;

const PROMPT: &str = "You are Sunny from Acme Solar. Offer a free rooftop assessment.";
const MODEL: &str = "gpt-4o-mini";
const PERSONA: &str = "A busy homeowner who is curious about solar panels.";

async fn llm_app(llm: &FakeCallLlm) -> TestApp {
    let llm = llm.clone();
    TestApp::spawn_with(move |c| llm.configure(c)).await
}

async fn genie(app: &TestApp, u: &User) -> String {
    let r = app
        .call(
            &u.token,
            "genies",
            "create",
            None,
            json!({"genieName": "Sunny", "systemPrompt": PROMPT, "llmModel": MODEL,
                   "firstMessage": "Hi {{lead_name}}, this is Sunny from Acme Solar."}),
        )
        .await;
    r.ok(201)["genie"]["id"].as_str().unwrap().to_string()
}

async fn lead(
    app: &TestApp,
    u: &User,
    genie: &str,
    name: &str,
    phone: Option<&str>,
    extra: Value,
) -> i64 {
    let mut data = json!({"agent_id": genie, "name": name, "phone": phone});
    for (k, v) in extra.as_object().cloned().unwrap_or_default() {
        data[k] = v;
    }
    let r = app.call(&u.token, "leads", "create", None, data).await;
    r.ok(201)["lead"]["id"].as_i64().unwrap()
}

/// Calling hours open all day but one minute, an hour ago (a window over midnight).
fn all_day() -> Value {
    use chrono::Timelike;
    let h = chrono::Utc::now().hour();
    let (s, e) = ((h + 23) % 24, (h + 22) % 24);
    json!({"start": format!("{s:02}:00"), "end": format!("{e:02}:59"), "timezone": "UTC"})
}

async fn campaign(app: &TestApp, u: &User, data: Value) -> String {
    let r = app.call(&u.token, "campaigns", "create", None, data).await;
    let k = r.ok(201)["campaign"].clone();
    assert_eq!(k["status"], json!("draft"));
    k["id"].as_str().unwrap().to_string()
}

async fn act(app: &TestApp, u: &User, id: &str, action: &str) -> Resp {
    app.call(&u.token, "campaigns", action, Some(json!(id)), json!({}))
        .await
}

async fn get(app: &TestApp, u: &User, id: &str) -> Value {
    act(app, u, id, "get").await.ok(200)["campaign"].clone()
}

async fn calls(app: &TestApp, u: &User, id: &str) -> Vec<Value> {
    let r = app
        .call(
            &u.token,
            "campaigns",
            "calls",
            Some(json!(id)),
            json!({"limit": 1000}),
        )
        .await;
    r.ok(200)["calls"].as_array().cloned().unwrap()
}

/// Polls `get` until `pred` holds (60 s at most).
async fn wait_for(
    app: &TestApp,
    u: &User,
    id: &str,
    what: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let k = get(app, u, id).await;
        if pred(&k) {
            return k;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {k}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn logs(app: &TestApp, u: &User, lead: i64) -> Vec<Value> {
    let r = app
        .call(
            &u.token,
            "leads",
            "getLogs",
            Some(json!(lead)),
            json!({"limit": 100}),
        )
        .await;
    r.ok(200)["activities"].as_array().cloned().unwrap()
}

/// The most calls whose [started_at, ended_at] overlap at one instant.
fn max_overlap(calls: &[Value]) -> usize {
    let mut edges: Vec<(String, i32)> = Vec::new();
    for c in calls {
        edges.push((c["started_at"].as_str().unwrap().to_string(), 1));
        edges.push((c["ended_at"].as_str().unwrap().to_string(), -1));
    }
    // Ends sort before starts at the same instant: a freed slot is taken in the same ms.
    edges.sort();
    let (mut open, mut max) = (0i32, 0i32);
    for (_, d) in edges {
        open += d;
        max = max.max(open);
    }
    max as usize
}

fn phone(i: usize) -> String {
    format!("+1415555{i:04}")
}

#[tokio::test]
async fn two_hundred_leads_each_get_their_outcome_and_the_limits_hold() {
    let llm = FakeCallLlm::start(PROMPT, MODEL, Some(PERSONA)).await;
    llm.set_delay(Duration::from_millis(10));
    let app = llm_app(&llm).await;
    let u = app.standard().await;
    let g = genie(&app, &u).await;
    let mut leads = Vec::new();
    for i in 0..200 {
        // Every 50th lead from 3 on asked not to be called.
        let dnc = i % 50 == 3;
        let id = lead(
            &app,
            &u,
            &g,
            &format!("Lead {i}"),
            Some(&phone(i)),
            json!({"do_not_call": dnc}),
        )
        .await;
        leads.push((id, phone(i), dnc));
    }
    let no_phone = lead(&app, &u, &g, "Lead without phone", None, json!({})).await;
    // Another genie's lead is outside the filter.
    let g2 = genie(&app, &u).await;
    let other = lead(&app, &u, &g2, "Elsewhere", Some("+14155559990"), json!({})).await;

    let id = campaign(
        &app,
        &u,
        json!({"genie_id": g, "name": "Solar autumn", "filters": {"agentId": g},
               "concurrency": 5, "calls_per_minute": 600, "calling_hours": all_day(),
               "retry": {"max_attempts": 2, "delay_seconds": 0}, "persona": PERSONA}),
    )
    .await;
    let k = act(&app, &u, &id, "start").await.ok(200)["campaign"].clone();
    assert_eq!(k["status"], json!("running"));
    assert_eq!(k["counts"]["targets"], json!(201), "{k}");
    let k = wait_for(&app, &u, &id, "completion", |k| {
        k["status"] == json!("completed")
    })
    .await;
    assert!(llm.problems().is_empty(), "{:?}", llm.problems());

    // Per lead: the calls made and the outcome, by the rule of the simulated numbers.
    let all = calls(&app, &u, &id).await;
    let mut by_lead: HashMap<i64, Vec<&Value>> = HashMap::new();
    for c in &all {
        assert_eq!(c["status"], json!("ended"), "{c}");
        by_lead
            .entry(c["lead_id"].as_i64().unwrap())
            .or_default()
            .push(c);
    }
    let outcome = |c: &Value| c["outcome"].as_str().unwrap().to_string();
    let mut expected_calls = 0;
    for (i, (lid, ph, dnc)) in leads.iter().enumerate() {
        let made: Vec<&Value> = by_lead.get(lid).cloned().unwrap_or_default();
        let last = ph.chars().last().unwrap();
        let want: Vec<&str> = if *dnc {
            vec![]
        } else {
            match last {
                '7' => vec!["no_answer", "no_answer"],
                '8' => vec!["busy", "busy"],
                '9' => vec!["busy", "completed"],
                _ => vec!["completed"],
            }
        };
        expected_calls += want.len();
        let got: Vec<String> = made.iter().map(|c| outcome(c)).collect();
        assert_eq!(got, want, "lead {lid} ({ph})");
        for (n, c) in made.iter().enumerate() {
            assert_eq!(c["attempt"], json!(n + 1));
            assert_eq!(c["phone"], json!(ph));
            assert_eq!(c["provider"], json!("local"));
        }
        let log = logs(&app, &u, *lid).await;
        let campaign_entries: Vec<&Value> = log
            .iter()
            .filter(|a| a["type"] == json!("call") && a["metadata"]["campaign_id"] == json!(id))
            .collect();
        if *dnc {
            assert_eq!(campaign_entries.len(), 1, "{log:?}");
            assert_eq!(
                campaign_entries[0]["metadata"]["outcome"],
                json!("do_not_call")
            );
            continue;
        }
        assert_eq!(
            campaign_entries.len(),
            want.len(),
            "one entry per call: {log:?}"
        );
        // Newest first: the last call's outcome leads.
        assert_eq!(
            campaign_entries[0]["metadata"]["outcome"],
            json!(want.last().unwrap())
        );
        if want.last() == Some(&"completed") {
            let conv = made.last().unwrap()["conversation_id"]
                .as_str()
                .unwrap()
                .to_string();
            let r = app
                .call(
                    &u.token,
                    "conversations",
                    "get",
                    Some(json!(conv)),
                    json!({}),
                )
                .await;
            let c = r.ok(200)["conversation"].clone();
            let text = c["transcript"].to_string();
            assert!(text.contains("this is Sunny from Acme Solar"), "{c}");
            assert!(text.contains(&format!("Hi, this is Lead {i}.")), "{c}");
            assert!(text.contains("Goodbye"), "{c}");
            assert_eq!(c["channel"], json!("phone"));
            assert!(
                c["summary"]
                    .as_str()
                    .is_some_and(|s| s.contains("think about it")),
                "analysed: {c}"
            );
        }
    }
    assert_eq!(all.len(), expected_calls);
    assert!(!by_lead.contains_key(&no_phone) && !by_lead.contains_key(&other));
    assert_eq!(k["counts"]["no_phone"], json!(1));
    assert_eq!(k["counts"]["do_not_call"], json!(4));
    assert_eq!(k["counts"]["completed"], json!(200 - 4 - 20 - 20));
    assert_eq!(k["counts"]["no_answer"], json!(20));
    assert_eq!(k["counts"]["busy"], json!(20));

    // Concurrency never above 5, measured twice: in the fake and from the recorded calls;
    // and the calls did overlap (the limit was used, not a queue of one).
    assert!(llm.max_open_calls() <= 5, "{}", llm.max_open_calls());
    let overlap = max_overlap(&all);
    assert!((2..=5).contains(&overlap), "overlap {overlap}");
    // Each number's callee picked up once: nobody was called again after answering.
    assert!(
        llm.pickups().values().all(|n| *n == 1),
        "{:?}",
        llm.pickups()
    );
    assert_eq!(llm.pickups().len(), 200 - 4 - 20 - 20);
    // Audit rows and the campaign's own view.
    let r = app
        .call(&u.token, "activities", "all", None, json!({"limit": 100}))
        .await;
    let text = r.ok(200).to_string();
    assert!(text.contains("started campaign 'Solar autumn'"), "{text}");
    assert!(k["finished_at"].is_string() && k["waiting"].is_null());
}

#[tokio::test]
async fn calling_hours_follow_the_leads_time_zone_and_cancel_closes_the_rest() {
    let llm = FakeCallLlm::start(PROMPT, MODEL, None).await;
    let app = llm_app(&llm).await;
    let u = app.standard().await;
    let g = genie(&app, &u).await;
    // A window from two to six hours ahead of now in UTC: closed for leads in UTC, open for
    // a lead four hours ahead (Etc/GMT-4 is UTC+4), whatever the hour of the test.
    let h = chrono::Utc::now();
    let start = (h + chrono::Duration::hours(2)).format("%H:00").to_string();
    let end = (h + chrono::Duration::hours(6)).format("%H:00").to_string();
    let utc_leads = [
        lead(&app, &u, &g, "Utc One", Some("+14155550101"), json!({})).await,
        lead(&app, &u, &g, "Utc Two", Some("+14155550102"), json!({})).await,
    ];
    let east = lead(
        &app,
        &u,
        &g,
        "East",
        Some("+14155550103"),
        json!({"metadata": {"timezone": "Etc/GMT-4"}}),
    )
    .await;
    let id = campaign(
        &app,
        &u,
        json!({"genie_id": g, "name": "Hours", "calling_hours": {"start": start, "end": end, "timezone": "UTC"}}),
    )
    .await;
    act(&app, &u, &id, "start").await.ok(200);
    let k = wait_for(&app, &u, &id, "the in-window call and the wait", |k| {
        k["counts"]["completed"] == json!(1)
            && k["waiting"]
                .as_str()
                .is_some_and(|w| w.contains("outside calling hours"))
    })
    .await;
    assert_eq!(k["status"], json!("running"));
    assert_eq!(k["counts"]["pending"], json!(2), "{k}");
    let made = calls(&app, &u, &id).await;
    assert_eq!(made.len(), 1, "{made:?}");
    assert_eq!(made[0]["lead_id"], json!(east));
    assert_eq!(llm.pickups().len(), 1);

    // Bad moves are 409 naming the state; cancel closes what was never called.
    let r = act(&app, &u, &id, "start").await;
    r.err(409, "CONFLICT");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("running")
    );
    act(&app, &u, &id, "resume").await.err(409, "CONFLICT");
    app.call(
        &u.token,
        "campaigns",
        "update",
        Some(json!(id)),
        json!({"concurrency": 2}),
    )
    .await
    .err(409, "CONFLICT");
    app.call(&u.token, "campaigns", "delete", Some(json!(id)), json!({}))
        .await
        .err(409, "CONFLICT");
    let k = act(&app, &u, &id, "cancel").await.ok(200)["campaign"].clone();
    assert_eq!(k["status"], json!("cancelled"));
    assert_eq!(k["counts"]["cancelled"], json!(2));
    for l in utc_leads {
        let log = logs(&app, &u, l).await;
        assert_eq!(log[0]["metadata"]["outcome"], json!("cancelled"), "{log:?}");
    }
    let r = act(&app, &u, &id, "pause").await;
    r.err(409, "CONFLICT");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cancelled")
    );
    assert_eq!(calls(&app, &u, &id).await.len(), 1);
    app.call(&u.token, "campaigns", "delete", Some(json!(id)), json!({}))
        .await
        .ok(200);
    act(&app, &u, &id, "get").await.err(404, "NOT_FOUND");
}

#[tokio::test]
async fn pause_holds_new_calls_resume_continues_and_do_not_call_set_late_is_respected() {
    let llm = FakeCallLlm::start(PROMPT, MODEL, None).await;
    llm.set_delay(Duration::from_millis(150));
    let app = llm_app(&llm).await;
    let u = app.standard().await;
    let g = genie(&app, &u).await;
    let mut leads = Vec::new();
    for i in 0..8 {
        leads.push(
            lead(
                &app,
                &u,
                &g,
                &format!("Lead {i}"),
                Some(&phone(i * 10 + 1)),
                json!({}),
            )
            .await,
        );
    }
    let id = campaign(
        &app,
        &u,
        json!({"genie_id": g, "name": "Paced", "calling_hours": all_day(), "concurrency": 1}),
    )
    .await;
    act(&app, &u, &id, "start").await.ok(200);
    wait_for(&app, &u, &id, "a first finished call", |k| {
        k["counts"]["completed"] == json!(1)
    })
    .await;
    let k = act(&app, &u, &id, "pause").await.ok(200)["campaign"].clone();
    assert_eq!(k["status"], json!("paused"));
    let at_pause = calls(&app, &u, &id).await.len();
    // The last lead asks not to be called while the campaign runs.
    app.call(
        &u.token,
        "leads",
        "update",
        Some(json!(leads[7])),
        json!({"do_not_call": true}),
    )
    .await
    .ok(200);
    // The call in progress ends; no new one starts while paused.
    let k = wait_for(&app, &u, &id, "the call in progress to end", |k| {
        k["calls_in_progress"] == json!(0)
    })
    .await;
    assert_eq!(k["status"], json!("paused"));
    assert_eq!(calls(&app, &u, &id).await.len(), at_pause);
    assert!(at_pause < 7, "paused early: {at_pause}");
    act(&app, &u, &id, "pause").await.err(409, "CONFLICT");
    // A paused campaign can change its pace, not its leads.
    app.call(
        &u.token,
        "campaigns",
        "update",
        Some(json!(id)),
        json!({"concurrency": 3}),
    )
    .await
    .ok(200);
    app.call(
        &u.token,
        "campaigns",
        "update",
        Some(json!(id)),
        json!({"filters": {"status": "new"}}),
    )
    .await
    .err(409, "CONFLICT");
    act(&app, &u, &id, "resume").await.ok(200);
    let k = wait_for(&app, &u, &id, "completion", |k| {
        k["status"] == json!("completed")
    })
    .await;
    assert_eq!(k["counts"]["completed"], json!(7));
    assert_eq!(k["counts"]["do_not_call"], json!(1));
    let made = calls(&app, &u, &id).await;
    assert_eq!(made.len(), 7);
    assert!(made.iter().all(|c| c["lead_id"] != json!(leads[7])));
    assert!(llm.pickups().values().all(|n| *n == 1));
    assert!(llm.problems().is_empty(), "{:?}", llm.problems());
}

#[tokio::test]
async fn a_restart_mid_campaign_loses_nothing_and_calls_no_one_twice() {
    let llm = FakeCallLlm::start(PROMPT, MODEL, None).await;
    llm.set_delay(Duration::from_millis(60));
    let app = llm_app(&llm).await;
    let u = app.standard().await;
    let g = genie(&app, &u).await;
    let mut leads = Vec::new();
    for i in 0..24 {
        leads.push(
            lead(
                &app,
                &u,
                &g,
                &format!("Lead {i}"),
                Some(&phone(i * 10 + 2)),
                json!({}),
            )
            .await,
        );
    }
    let id = campaign(
        &app,
        &u,
        json!({"genie_id": g, "name": "Durable", "calling_hours": all_day(), "concurrency": 3, "calls_per_minute": 600}),
    )
    .await;
    act(&app, &u, &id, "start").await.ok(200);
    wait_for(&app, &u, &id, "some finished calls", |k| {
        k["counts"]["completed"].as_i64().unwrap() >= 4
    })
    .await;
    let app = app.restart().await;
    let k = wait_for(&app, &u, &id, "completion after the restart", |k| {
        k["status"] == json!("completed")
    })
    .await;
    let made = calls(&app, &u, &id).await;
    // One call per lead, never a second attempt; a call the stop cut short is closed as
    // failed (interrupted), not placed again.
    let mut per_lead: HashMap<i64, usize> = HashMap::new();
    for c in &made {
        *per_lead.entry(c["lead_id"].as_i64().unwrap()).or_default() += 1;
        assert_eq!(c["attempt"], json!(1));
        match c["outcome"].as_str().unwrap() {
            "completed" => {}
            "failed" => assert!(c["error"].as_str().unwrap().contains("interrupted"), "{c}"),
            other => panic!("unexpected outcome {other}: {c}"),
        }
    }
    assert_eq!(per_lead.len(), 24);
    assert!(per_lead.values().all(|n| *n == 1));
    assert!(
        llm.pickups().values().all(|n| *n == 1),
        "{:?}",
        llm.pickups()
    );
    let done = k["counts"]["completed"].as_i64().unwrap() + k["counts"]["failed"].as_i64().unwrap();
    assert_eq!(done, 24, "{k}");
    assert!(
        k["counts"]["failed"].as_i64().unwrap() <= 3,
        "at most the calls in flight: {k}"
    );
    for l in leads {
        assert!(
            logs(&app, &u, l)
                .await
                .iter()
                .any(|a| a["metadata"]["campaign_id"] == json!(id)),
            "lead {l} has its outcome"
        );
    }
}

#[tokio::test]
async fn input_is_checked_and_campaigns_are_private() {
    let llm = FakeCallLlm::start(PROMPT, MODEL, None).await;
    let app = llm_app(&llm).await;
    let u = app.standard().await;
    let g = genie(&app, &u).await;
    let other = app.standard().await;
    let og = genie(&app, &other).await;
    let create = |data: Value| {
        let (app, token) = (&app, u.token.clone());
        async move { app.call(&token, "campaigns", "create", None, data).await }
    };
    for (data, needle) in [
        (json!({"name": "x"}), "genie_id"),
        (json!({"genie_id": g, "name": " "}), "data.name"),
        (
            json!({"genie_id": g, "name": "x", "concurrency": 0}),
            "data.concurrency",
        ),
        (
            json!({"genie_id": g, "name": "x", "calls_per_minute": 601}),
            "data.calls_per_minute",
        ),
        (
            json!({"genie_id": g, "name": "x", "calling_hours": {"start": "25:00"}}),
            "calling_hours.start",
        ),
        (
            json!({"genie_id": g, "name": "x", "calling_hours": {"start": "09:00", "end": "09:00"}}),
            "differ",
        ),
        (
            json!({"genie_id": g, "name": "x", "calling_hours": {"timezone": "Mars/Base"}}),
            "timezone",
        ),
        (
            json!({"genie_id": g, "name": "x", "retry": {"max_attempts": 11}}),
            "max_attempts",
        ),
        (
            json!({"genie_id": g, "name": "x", "filters": {"status": "hot"}}),
            "filters.status",
        ),
        (
            json!({"genie_id": g, "name": "x", "surprise": 1}),
            "surprise",
        ),
    ] {
        let r = create(data.clone()).await;
        r.err(400, "VALIDATION_ERROR");
        assert!(
            r.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains(needle),
            "{data}: {}",
            r.body
        );
    }
    create(json!({"genie_id": og, "name": "x"}))
        .await
        .err(404, "AGENT_NOT_FOUND");
    create(json!({"genie_id": g, "name": "x", "filters": {"agentId": og}}))
        .await
        .err(404, "AGENT_NOT_FOUND");
    assert_eq!(app.count("campaigns").await, 0);

    let id = campaign(&app, &u, json!({"genie_id": g, "name": "Mine"})).await;
    let k = get(&app, &u, &id).await;
    assert_eq!(
        k["calling_hours"],
        json!({"start": "09:00", "end": "20:00", "timezone": "UTC"})
    );
    assert_eq!(
        k["retry"],
        json!({"max_attempts": 3, "delay_seconds": 3600})
    );
    for action in ["get", "start", "pause", "cancel", "calls", "delete"] {
        act(&app, &other, &id, action).await.err(404, "NOT_FOUND");
    }
    let r = app
        .call(&other.token, "campaigns", "all", None, json!({}))
        .await;
    assert_eq!(r.ok(200)["count"], json!(0));
    let r = app
        .request(Method::GET, "/v1/campaigns", Some(&u.token), None)
        .await;
    assert_eq!(r.ok(200)["campaigns"][0]["id"], json!(id));
    act(&app, &u, &id, "pause").await.err(409, "CONFLICT");
    let consumer = app.consumer().await;
    act(&app, &consumer, &id, "start")
        .await
        .err(403, "FORBIDDEN");
    assert_eq!(get(&app, &u, &id).await["status"], json!("draft"));
}

#[tokio::test]
async fn without_a_language_model_a_local_campaign_does_not_start() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let g = genie(&app, &u).await;
    lead(&app, &u, &g, "Ada", Some("+14155550123"), json!({})).await;
    let id = campaign(&app, &u, json!({"genie_id": g, "name": "No model"})).await;
    let r = act(&app, &u, &id, "start").await;
    r.err(400, "VALIDATION_ERROR");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--llm-base-url")
    );
    let k = get(&app, &u, &id).await;
    assert_eq!(k["status"], json!("draft"));
    assert_eq!(k["counts"]["targets"], json!(0));
}

#[tokio::test]
async fn a_vapi_campaign_call_ends_through_the_vapi_webhook() {
    let fake = FakeVapi::start().await;
    let app = vapi_app(&fake).await;
    let u = app.standard().await;
    let r = app
        .call(
            &u.token,
            "genies",
            "create",
            None,
            json!({"genieName": "Caller", "attachPhoneNumber": true}),
        )
        .await;
    let g = r.ok(201)["genie"]["id"].as_str().unwrap().to_string();
    let answered = lead(&app, &u, &g, "Ada", Some("+14155550123"), json!({})).await;
    let missed = lead(&app, &u, &g, "Bob", Some("+14155550124"), json!({})).await;
    let id = campaign(
        &app,
        &u,
        json!({"genie_id": g, "name": "Platform", "calling_hours": all_day(), "concurrency": 2,
               "retry": {"max_attempts": 2, "delay_seconds": 0}, "variables": {"offer": "solar"}}),
    )
    .await;
    act(&app, &u, &id, "start").await.ok(200);
    let k = wait_for(&app, &u, &id, "both calls placed", |k| {
        k["calls_in_progress"] == json!(2)
    })
    .await;
    assert_eq!(k["counts"]["calling"], json!(2));
    let placed = || {
        fake.requests()
            .into_iter()
            .filter(|r| r.method == "POST" && r.path == "/call")
            .collect::<Vec<_>>()
    };
    // Wait until both calls carry Vapi's id (written once Vapi answered).
    let deadline = Instant::now() + Duration::from_secs(60);
    let made = loop {
        let made = calls(&app, &u, &id).await;
        if made.iter().all(|c| c["provider_call_id"].is_string()) {
            break made;
        }
        assert!(Instant::now() < deadline, "{made:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let reqs = placed();
    assert_eq!(reqs.len(), 2);
    for r in &reqs {
        assert!(
            r.body["customer"]["number"] == json!("+14155550123")
                || r.body["customer"]["number"] == json!("+14155550124")
        );
        assert_eq!(
            r.body["assistantOverrides"]["variableValues"]["offer"],
            json!("solar")
        );
        assert!(r.body["phoneNumberId"].is_string());
    }
    let pid = |lead: i64| {
        made.iter().find(|c| c["lead_id"] == json!(lead)).unwrap()["provider_call_id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let assistant: String = {
        let g = g.clone();
        app.state
            .db
            .read(move |c| {
                Ok(c.query_row(
                    "SELECT external_agent_id FROM genies WHERE id = ?1",
                    [&g],
                    |r| r.get(0),
                )?)
            })
            .await
            .unwrap()
    };
    let report = |call: &str, reason: &str| {
        json!({"message": {
            "type": "end-of-call-report", "timestamp": chrono::Utc::now().timestamp_millis(),
            "endedReason": reason,
            "startedAt": "2026-11-20T10:00:00.000Z", "endedAt": "2026-11-20T10:00:42.000Z",
            "artifact": {"messages": [{"role": "bot", "message": "Hello Ada", "secondsFromStart": 0.3}]},
            "call": {"id": call, "assistantId": assistant, "type": "outboundPhoneCall", "status": "ended"}
        }})
        .to_string()
    };
    let hook = |body: String| {
        let app = &app;
        async move {
            app.raw(
                Method::POST,
                "/v1/hooks/vapi",
                &[
                    ("content-type", "application/json"),
                    ("x-vapi-secret", "vapi-hook-secret"),
                ],
                body,
            )
            .await
        }
    };
    hook(report(&pid(answered), "customer-ended-call"))
        .await
        .ok(200);
    hook(report(&pid(missed), "customer-did-not-answer"))
        .await
        .ok(200);
    // The missed call is retried: a second POST /call for Bob.
    let deadline = Instant::now() + Duration::from_secs(60);
    let retry = loop {
        let made = calls(&app, &u, &id).await;
        if let Some(c) = made.iter().find(|c| {
            c["lead_id"] == json!(missed)
                && c["attempt"] == json!(2)
                && c["provider_call_id"].is_string()
        }) {
            break c["provider_call_id"].as_str().unwrap().to_string();
        }
        assert!(Instant::now() < deadline, "{made:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(placed().len(), 3);
    let busy = report(&retry, "customer-busy");
    hook(busy.clone()).await.ok(200);
    let k = wait_for(&app, &u, &id, "completion", |k| {
        k["status"] == json!("completed")
    })
    .await;
    assert_eq!(k["counts"]["completed"], json!(1));
    assert_eq!(k["counts"]["busy"], json!(1));
    let made = calls(&app, &u, &id).await;
    let outcomes: Vec<(i64, i64, String)> = made
        .iter()
        .map(|c| {
            (
                c["lead_id"].as_i64().unwrap(),
                c["attempt"].as_i64().unwrap(),
                c["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(
        outcomes.contains(&(answered, 1, "completed".into())),
        "{outcomes:?}"
    );
    assert!(
        outcomes.contains(&(missed, 1, "no_answer".into())),
        "{outcomes:?}"
    );
    assert!(
        outcomes.contains(&(missed, 2, "busy".into())),
        "{outcomes:?}"
    );
    let conv = made
        .iter()
        .find(|c| c["lead_id"] == json!(answered))
        .unwrap()["conversation_id"]
        .clone();
    assert!(
        conv.is_string(),
        "the report became the call's conversation: {made:?}"
    );
    let log = logs(&app, &u, missed).await;
    assert_eq!(log[0]["metadata"]["outcome"], json!("busy"));
    assert!(
        log[1]["description"]
            .as_str()
            .unwrap()
            .contains("calling again"),
        "{log:?}"
    );
    // A replayed report changes nothing.
    hook(busy).await.err(401, "UNAUTHORIZED");
}

#[tokio::test]
async fn the_call_rate_caps_the_calls_started_in_a_minute() {
    let llm = FakeCallLlm::start(PROMPT, MODEL, None).await;
    let app = llm_app(&llm).await;
    let u = app.standard().await;
    let g = genie(&app, &u).await;
    for i in 0..5 {
        lead(
            &app,
            &u,
            &g,
            &format!("Lead {i}"),
            Some(&phone(i * 10 + 4)),
            json!({}),
        )
        .await;
    }
    let id = campaign(
        &app,
        &u,
        json!({"genie_id": g, "name": "Slow", "calling_hours": all_day(), "concurrency": 5, "calls_per_minute": 2}),
    )
    .await;
    act(&app, &u, &id, "start").await.ok(200);
    let k = wait_for(&app, &u, &id, "the rate limit", |k| {
        k["counts"]["completed"] == json!(2)
            && k["waiting"]
                .as_str()
                .is_some_and(|w| w.contains("rate limit (2 a minute)"))
    })
    .await;
    assert_eq!(k["counts"]["pending"], json!(3), "{k}");
    assert_eq!(calls(&app, &u, &id).await.len(), 2);
    assert_eq!(llm.pickups().len(), 2);
    act(&app, &u, &id, "cancel").await.ok(200);
}

#[tokio::test]
async fn the_genies_max_calls_holds_across_its_campaigns() {
    let llm = FakeCallLlm::start(PROMPT, MODEL, None).await;
    llm.set_delay(Duration::from_millis(40));
    let app = llm_app(&llm).await;
    let u = app.standard().await;
    let r = app
        .call(
            &u.token,
            "genies",
            "create",
            None,
            json!({"genieName": "Sunny", "systemPrompt": PROMPT, "llmModel": MODEL, "maxCalls": 2}),
        )
        .await;
    let g = r.ok(201)["genie"]["id"].as_str().unwrap().to_string();
    for i in 0..12 {
        let status = if i % 2 == 0 { "new" } else { "contacted" };
        lead(
            &app,
            &u,
            &g,
            &format!("Lead {i}"),
            Some(&phone(i * 10 + 5)),
            json!({"status": status}),
        )
        .await;
    }
    let mut ids = Vec::new();
    for status in ["new", "contacted"] {
        let id = campaign(
            &app,
            &u,
            json!({"genie_id": g, "name": status, "filters": {"status": status}, "calling_hours": all_day(),
                   "concurrency": 3, "calls_per_minute": 600}),
        )
        .await;
        ids.push(id);
    }
    for id in &ids {
        act(&app, &u, id, "start").await.ok(200);
    }
    let mut all = Vec::new();
    for id in &ids {
        let k = wait_for(&app, &u, id, "completion", |k| {
            k["status"] == json!("completed")
        })
        .await;
        assert_eq!(k["counts"]["completed"], json!(6), "{k}");
        all.extend(calls(&app, &u, id).await);
    }
    assert_eq!(all.len(), 12);
    assert!(llm.max_open_calls() <= 2, "{}", llm.max_open_calls());
    assert!(max_overlap(&all) <= 2, "{}", max_overlap(&all));
    assert!(llm.problems().is_empty(), "{:?}", llm.problems());
}

#[tokio::test]
async fn an_end_of_call_event_before_the_call_requests_answer_still_ends_the_call() {
    let fake = FakeVapi::start().await;
    let app = vapi_app(&fake).await;
    let u = app.standard().await;
    let r = app
        .call(
            &u.token,
            "genies",
            "create",
            None,
            json!({"genieName": "Caller", "attachPhoneNumber": true}),
        )
        .await;
    let g = r.ok(201)["genie"]["id"].as_str().unwrap().to_string();
    let ada = lead(&app, &u, &g, "Ada", Some("+14155550123"), json!({})).await;
    let assistant: String = {
        let g = g.clone();
        app.state
            .db
            .read(move |c| {
                Ok(c.query_row(
                    "SELECT external_agent_id FROM genies WHERE id = ?1",
                    [&g],
                    |r| r.get(0),
                )?)
            })
            .await
            .unwrap()
    };
    // Vapi makes the call and sends its end before it answers the request that made it.
    fake.hold_calls();
    let id = campaign(
        &app,
        &u,
        json!({"genie_id": g, "name": "Early", "calling_hours": all_day()}),
    )
    .await;
    act(&app, &u, &id, "start").await.ok(200);
    let deadline = Instant::now() + Duration::from_secs(60);
    let pid = loop {
        if let Some(p) = fake.call_ids().pop() {
            break p;
        }
        assert!(Instant::now() < deadline, "Vapi never got the call");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let report = json!({"message": {
        "type": "end-of-call-report", "timestamp": chrono::Utc::now().timestamp_millis(),
        "endedReason": "customer-ended-call",
        "startedAt": "2026-11-20T10:00:00.000Z", "endedAt": "2026-11-20T10:00:30.000Z",
        "artifact": {"messages": [{"role": "bot", "message": "Hello Ada", "secondsFromStart": 0.3}]},
        "call": {"id": pid, "assistantId": assistant, "type": "outboundPhoneCall", "status": "ended"}
    }});
    app.raw(
        Method::POST,
        "/v1/hooks/vapi",
        &[
            ("content-type", "application/json"),
            ("x-vapi-secret", "vapi-hook-secret"),
        ],
        report.to_string(),
    )
    .await
    .ok(200);
    // The call does not know Vapi's id yet: still dialing.
    let made = calls(&app, &u, &id).await;
    assert_eq!(made.len(), 1);
    assert_eq!(made[0]["status"], json!("dialing"), "{made:?}");
    fake.release_calls();
    let k = wait_for(&app, &u, &id, "the call ended by the early event", |k| {
        k["status"] == json!("completed")
    })
    .await;
    assert_eq!(k["counts"]["completed"], json!(1), "{k}");
    let made = calls(&app, &u, &id).await;
    assert_eq!(made[0]["provider_call_id"], json!(pid));
    assert_eq!(made[0]["outcome"], json!("completed"));
    assert!(made[0]["conversation_id"].is_string(), "{made:?}");
    let log = logs(&app, &u, ada).await;
    assert_eq!(log[0]["metadata"]["outcome"], json!("completed"), "{log:?}");
    // Nothing is left waiting for a call that has ended.
    assert_eq!(app.count("early_call_outcomes").await, 0);
}

/// `Db::read_snapshot` (the campaign view's read) answers every statement from one snapshot
/// on both engines, while a plain `read` sees a write committed between two statements: the
/// torn view a campaign `get` gave while dialing went on (counts from before a dial, open
/// calls from after it). The write commits from inside the read, so the interleaving is
/// certain rather than left to timing.
#[tokio::test]
async fn a_snapshot_read_does_not_see_a_write_committed_during_it() {
    let app = TestApp::spawn().await;
    app.state
        .db
        .write(|w| Ok(w.execute("CREATE TABLE snapshot_probe (n INTEGER)", [])?))
        .await
        .unwrap();
    let count = |c: &genied::db::Connection<'_>| -> genied::error::ApiResult<i64> {
        Ok(c.query_row("SELECT COUNT(*) FROM snapshot_probe", [], |r| r.get(0))?)
    };
    let read_around_a_write = |snapshot: bool| {
        let (db, writer) = (app.state.db.clone(), app.state.db.clone());
        let f = move |c: &genied::db::Connection<'_>| {
            let before = count(c)?;
            writer.write_blocking(|w| {
                Ok(w.execute("INSERT INTO snapshot_probe (n) VALUES (1)", [])?)
            })?;
            Ok((before, count(c)?))
        };
        async move {
            if snapshot {
                db.read_snapshot(f).await.unwrap()
            } else {
                db.read(f).await.unwrap()
            }
        }
    };
    let (before, after) = read_around_a_write(true).await;
    assert_eq!(
        after, before,
        "the snapshot saw a write committed after it began"
    );
    let (before, after) = read_around_a_write(false).await;
    assert_eq!(
        after,
        before + 1,
        "each statement of a plain read sees the latest commit"
    );
}
