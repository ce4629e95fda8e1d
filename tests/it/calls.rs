//! `genies call` on the local provider (issue #23): the call is simulated as campaign calls
//! are (the genie's model talks with a simulated callee played by the fake LLM endpoint,
//! which checks every request), the number's last digit decides who picks up, and an
//! answered call becomes a conversation stored under the call's id.

use serde_json::{Value, json};

use crate::common::fakes::call_llm::FakeCallLlm;
use crate::common::*;

const PROMPT: &str = "You are Sunny from Acme Solar. Offer a free rooftop assessment.";
const MODEL: &str = "gpt-4o-mini";

async fn llm_app(llm: &FakeCallLlm) -> TestApp {
    let llm = llm.clone();
    TestApp::spawn_with(move |c| llm.configure(c)).await
}

async fn genie(app: &TestApp, u: &User, extra: Value) -> String {
    let mut data = json!({"genieName": "Sunny", "systemPrompt": PROMPT, "llmModel": MODEL,
                          "firstMessage": "Hi {{lead_name}}, this is Sunny from Acme Solar."});
    for (k, v) in extra.as_object().cloned().unwrap_or_default() {
        data[k] = v;
    }
    let r = app.call(&u.token, "genies", "create", None, data).await;
    r.ok(201)["genie"]["id"].as_str().unwrap().to_string()
}

async fn lead(app: &TestApp, u: &User, genie: &str, name: &str, phone: &str) -> i64 {
    let r = app
        .call(
            &u.token,
            "leads",
            "create",
            None,
            json!({"agent_id": genie, "name": name, "phone": phone}),
        )
        .await;
    r.ok(201)["lead"]["id"].as_i64().unwrap()
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

/// The lead's activity entry that reports the end of call `call_id`.
async fn outcome_entry(app: &TestApp, u: &User, lead: i64, call_id: &str) -> Value {
    wait_until("the call's outcome in the lead's log", || async {
        logs(app, u, lead).await.into_iter().find(|a| {
            a["metadata"]["call_id"] == json!(call_id) && a["metadata"]["outcome"].is_string()
        })
    })
    .await
}

async fn place(app: &TestApp, u: &User, genie: &str, data: Value) -> Resp {
    app.call(&u.token, "genies", "call", Some(json!(genie)), data)
        .await
}

#[tokio::test]
async fn a_local_call_is_simulated_and_becomes_a_conversation() {
    let llm = FakeCallLlm::start(PROMPT, MODEL, None).await;
    let app = llm_app(&llm).await;
    let u = app.standard().await;
    let g = genie(&app, &u, json!({})).await;
    let ada = lead(&app, &u, &g, "Ada", "+14155550123").await;

    let r = place(
        &app,
        &u,
        &g,
        json!({"to": "+14155550123", "leadId": ada, "variables": {"offer": "solar"}}),
    )
    .await;
    let call = r.ok(200)["call"].clone();
    let id = call["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("sim_"), "{call}");
    assert_eq!(
        call,
        json!({"id": id, "provider": "local", "from": null, "to": "+14155550123",
               "lead_id": ada, "status": "queued"})
    );

    // The answered call is a conversation under the call's id, analysed, linked to the lead.
    let conv = wait_until("the call's conversation", || async {
        let r = app
            .call(
                &u.token,
                "conversations",
                "all",
                None,
                json!({"limit": 100}),
            )
            .await;
        r.ok(200)["conversations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["external_id"] == json!(id) && c["summary"].is_string())
            .cloned()
    })
    .await;
    let r = app
        .call(
            &u.token,
            "conversations",
            "get",
            Some(conv["id"].clone()),
            json!({}),
        )
        .await;
    let c = r.ok(200)["conversation"].clone();
    let text = c["transcript"].to_string();
    assert!(
        text.contains("Hi Ada, this is Sunny from Acme Solar."),
        "{c}"
    );
    assert!(text.contains("Hi, this is Ada. Who is calling?"), "{c}");
    assert!(text.contains("Goodbye"), "{c}");
    assert_eq!(c["channel"], json!("phone"));
    assert_eq!(c["genie_id"], json!(g), "{c}");

    let end = outcome_entry(&app, &u, ada, &id).await;
    assert_eq!(end["type"], json!("call"));
    assert_eq!(end["metadata"]["outcome"], json!("completed"));
    assert_eq!(end["metadata"]["conversation_id"], conv["id"]);
    let log = logs(&app, &u, ada).await;
    assert!(
        log.iter().any(|a| a["metadata"]["call_id"] == json!(id)
            && a["description"]
                .as_str()
                .unwrap()
                .contains("outbound call to +14155550123 started")),
        "{log:?}"
    );
    assert_eq!(llm.pickups().get("+14155550123"), Some(&1));
    assert!(llm.problems().is_empty(), "{:?}", llm.problems());
}

#[tokio::test]
async fn who_picks_up_follows_the_numbers_last_digit() {
    let llm = FakeCallLlm::start(PROMPT, MODEL, None).await;
    let app = llm_app(&llm).await;
    let u = app.standard().await;
    let g = genie(&app, &u, json!({})).await;
    for (name, phone, want) in [
        ("Nobody", "+14155550127", "no_answer"),
        ("Engaged", "+14155550128", "busy"),
        // A 9 is busy on a first attempt; `genies call` is always one.
        ("Later", "+14155550129", "busy"),
    ] {
        let l = lead(&app, &u, &g, name, phone).await;
        let r = place(&app, &u, &g, json!({"to": phone, "leadId": l})).await;
        let id = r.ok(200)["call"]["id"].as_str().unwrap().to_string();
        let end = outcome_entry(&app, &u, l, &id).await;
        assert_eq!(end["metadata"]["outcome"], json!(want), "{phone}: {end}");
        assert!(end["metadata"]["conversation_id"].is_null());
    }
    // Nobody picked up, so the callee never spoke and nothing was stored.
    assert!(llm.pickups().is_empty(), "{:?}", llm.pickups());
    assert_eq!(app.count("conversations").await, 0);
}

#[tokio::test]
async fn a_local_call_needs_a_model_and_is_refused_like_a_platform_call() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let g = genie(&app, &u, json!({})).await;
    let r = place(&app, &u, &g, json!({"to": "+14155550123"})).await;
    r.err(400, "VALIDATION_ERROR");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--llm-base-url"),
        "{}",
        r.body
    );

    let llm = FakeCallLlm::start(PROMPT, MODEL, None).await;
    let app = llm_app(&llm).await;
    let u = app.standard().await;
    let g = genie(&app, &u, json!({})).await;
    let other = app.standard().await;
    place(&app, &other, &g, json!({"to": "+14155550123"}))
        .await
        .err(404, "AGENT_NOT_FOUND");
    let r = app
        .call(
            &u.token,
            "leads",
            "create",
            None,
            json!({"agent_id": g, "name": "No", "phone": "+14155550150", "do_not_call": true}),
        )
        .await;
    r.ok(201);
    place(&app, &u, &g, json!({"to": "+14155550150"}))
        .await
        .err(409, "CONFLICT");
    place(&app, &u, &g, json!({"to": "14155550150"}))
        .await
        .err(400, "VALIDATION_ERROR");
    // Nothing reached the model: no call was simulated.
    assert_eq!(llm.requests(), 0);
}

async fn genie_get(app: &TestApp, u: &User, g: &str) -> Value {
    let r = app
        .call(&u.token, "genies", "get", Some(json!(g)), json!({}))
        .await;
    r.ok(200)["genie"].clone()
}

#[tokio::test]
async fn the_genies_call_rate_refuses_with_429_and_survives_a_restart() {
    let llm = FakeCallLlm::start(PROMPT, MODEL, None).await;
    let app = llm_app(&llm).await;
    let u = app.standard().await;
    for bad in [json!(0), json!(601), json!("ten")] {
        let r = app
            .call(
                &u.token,
                "genies",
                "create",
                None,
                json!({"genieName": "Bad", "maxCallsPerMinute": bad}),
            )
            .await;
        r.err(400, "VALIDATION_ERROR");
        assert!(
            r.body.to_string().contains("axCallsPerMinute"),
            "{}",
            r.body
        );
    }
    let g = genie(&app, &u, json!({"maxCallsPerMinute": 2})).await;
    assert_eq!(
        genie_get(&app, &u, &g).await["max_calls_per_minute"],
        json!(2)
    );
    // Numbers ending in 7 never answer: the calls end at once, and still count.
    for i in 0..2 {
        place(&app, &u, &g, json!({"to": format!("+1415555010{i}7")}))
            .await
            .ok(200);
    }
    let refused = |r: &Resp| {
        r.err(429, "CALL_RATE_LIMIT_EXCEEDED");
        let msg = r.body["error"]["message"].as_str().unwrap();
        assert!(msg.contains("max_calls_per_minute"), "{msg}");
        let wait: u64 = r.header("retry-after").unwrap().parse().unwrap();
        assert!((1..=60).contains(&wait), "Retry-After {wait}");
    };
    let r = place(&app, &u, &g, json!({"to": "+14155550207"})).await;
    refused(&r);

    // Counted in the database: a restart does not give the minute back.
    let app = app.restart().await;
    let r = place(&app, &u, &g, json!({"to": "+14155550207"})).await;
    refused(&r);
    // Another genie of the same owner has its own rate.
    let other = genie(&app, &u, json!({"maxCallsPerMinute": 1})).await;
    place(&app, &u, &other, json!({"to": "+14155550307"}))
        .await
        .ok(200);
    // Lifting the limit lets the call through.
    app.call(
        &u.token,
        "genies",
        "update",
        Some(json!(g)),
        json!({"max_calls_per_minute": null}),
    )
    .await
    .ok(200);
    assert!(genie_get(&app, &u, &g).await["max_calls_per_minute"].is_null());
    place(&app, &u, &g, json!({"to": "+14155550207"}))
        .await
        .ok(200);
}

#[tokio::test]
async fn campaign_calls_wait_for_the_genies_call_rate_and_share_it_with_genies_call() {
    use chrono::Timelike;
    let llm = FakeCallLlm::start(PROMPT, MODEL, None).await;
    let app = llm_app(&llm).await;
    let u = app.standard().await;
    let g = genie(&app, &u, json!({"maxCallsPerMinute": 2})).await;
    for i in 0..4 {
        lead(
            &app,
            &u,
            &g,
            &format!("Lead {i}"),
            &format!("+1415555040{i}"),
        )
        .await;
    }
    // Calling hours open all day but one minute, an hour ago (a window over midnight).
    let h = chrono::Utc::now().hour();
    let hours = json!({"start": format!("{:02}:00", (h + 23) % 24),
                       "end": format!("{:02}:59", (h + 22) % 24), "timezone": "UTC"});
    let r = app
        .call(
            &u.token,
            "campaigns",
            "create",
            None,
            json!({"genie_id": g, "name": "Rated", "calling_hours": hours,
                   "concurrency": 4, "calls_per_minute": 600}),
        )
        .await;
    let id = r.ok(201)["campaign"]["id"].as_str().unwrap().to_string();
    let get = || async {
        app.call(&u.token, "campaigns", "get", Some(json!(id)), json!({}))
            .await
            .ok(200)["campaign"]
            .clone()
    };
    app.call(&u.token, "campaigns", "start", Some(json!(id)), json!({}))
        .await
        .ok(200);
    let k = wait_until("two calls, then the genie's rate", || async {
        let k = get().await;
        (k["counts"]["completed"] == json!(2)
            && k["waiting"]
                .as_str()
                .is_some_and(|w| w.contains("2 calls a minute (max_calls_per_minute)")))
        .then_some(k)
    })
    .await;
    // The other two wait: pending, not dropped.
    assert_eq!(k["counts"]["pending"], json!(2), "{k}");
    assert_eq!(k["status"], json!("running"));
    // The campaign's calls used the genie's minute, so `genies call` is refused too.
    place(&app, &u, &g, json!({"to": "+14155550407"}))
        .await
        .err(429, "CALL_RATE_LIMIT_EXCEEDED");
    assert_eq!(llm.pickups().len(), 2);

    // With a higher limit the waiting calls go out (resume starts a fresh pass at once).
    app.call(
        &u.token,
        "genies",
        "update",
        Some(json!(g)),
        json!({"maxCallsPerMinute": 10}),
    )
    .await
    .ok(200);
    for action in ["pause", "resume"] {
        app.call(&u.token, "campaigns", action, Some(json!(id)), json!({}))
            .await
            .ok(200);
    }
    let k = wait_until("completion", || async {
        let k = get().await;
        (k["status"] == json!("completed")).then_some(k)
    })
    .await;
    assert_eq!(k["counts"]["completed"], json!(4), "{k}");
    assert_eq!(llm.pickups().len(), 4);
    assert!(llm.problems().is_empty(), "{:?}", llm.problems());
}
