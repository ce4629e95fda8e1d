//! `genie-tests` over real HTTP (issue #18): test conversations played against a genie's
//! live, draft or numbered configuration through the fake LLM (which checks every request:
//! the tested version's prompt, model, temperature and max_tokens, the judge's and the
//! simulated user's requests, and the tools offered), criteria with reasons, tokens, the
//! `genie_test.completed` event, and `publish` refusing a draft that fails its tests.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::fakes::openai::{Completion, Expect, FakeOpenAi, Turn};
use crate::common::*;

const PROMPT: &str = "You are the bakery's assistant.";
const JUDGE: &str = "You judge a conversation";

async fn llm_app() -> (TestApp, FakeOpenAi) {
    let llm = FakeOpenAi::start(Expect::Any).await;
    let l2 = llm.clone();
    let app = TestApp::spawn_with(move |c| l2.configure(c)).await;
    (app, llm)
}

async fn genie(app: &TestApp, u: &User) -> String {
    app.call(
        &u.token,
        "genies",
        "create",
        None,
        json!({"genieName": "Sunny", "systemPrompt": PROMPT, "firstMessage": "Hi!",
               "llmModel": "bakery-model", "temperature": 0.3, "maxTokens": 200}),
    )
    .await
    .ok(201)["genie"]["id"]
        .as_str()
        .unwrap()
        .to_string()
}

fn agent(prompt: &str, temperature: f64) -> Completion {
    Completion {
        model: "bakery-model".into(),
        temperature: Some(temperature),
        max_tokens: Some(200),
        system_contains: vec![prompt.into()],
        select: Some(prompt.into()),
        ..Default::default()
    }
}

fn judge() -> Completion {
    Completion {
        model: "fake-model".into(),
        temperature: Some(0.0),
        system_contains: vec![JUDGE.into()],
        select: Some(JUDGE.into()),
        ..Default::default()
    }
}

async fn new_test(app: &TestApp, u: &User, data: Value) -> String {
    app.call(&u.token, "genie-tests", "create", None, data)
        .await
        .ok(201)["test"]["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Waits (60 s at most) until the newest run of the test has finished; returns it.
async fn finished_run(app: &TestApp, u: &User, test: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = app
            .call(
                &u.token,
                "genie-tests",
                "runs",
                Some(json!(test)),
                json!({}),
            )
            .await;
        let run = r.ok(200)["runs"][0].clone();
        if !["queued", "running"].contains(&run["status"].as_str().unwrap_or("queued")) {
            return run;
        }
        assert!(Instant::now() < deadline, "the run never finished: {run}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_scripted_test_runs_against_live_and_reports_each_criterion() {
    let (app, llm) = llm_app().await;
    let u = app.standard().await;
    let g = genie(&app, &u).await;
    let t = new_test(
        &app,
        &u,
        json!({"genie_id": g, "name": "bread", "turns": ["Do you sell bread?", "Thanks"],
        "criteria": [
            {"type": "contains", "value": "SOURDOUGH"},
            {"type": "not_contains", "value": "pizza"},
            {"type": "llm_judge", "value": "The agent is polite"},
            {"type": "tool_called", "value": "book_table"},
            {"type": "lead_captured"}
        ]}),
    )
    .await;
    llm.expect_completions(vec![agent(PROMPT, 0.3), judge()]);
    llm.push([
        Turn::Answer("We bake sourdough daily."),
        Turn::Answer("You're welcome!"),
        Turn::Answer(r#"{"passed": true, "reason": "polite throughout"}"#),
    ]);
    let mut events = app.state.bus.subscribe();
    let r = app
        .call(&u.token, "genie-tests", "run", Some(json!(t)), json!({}))
        .await;
    let queued = r.ok(202)["run"].clone();
    assert_eq!(queued["status"], json!("queued"));
    assert_eq!(queued["target"], json!("live"));
    let run = finished_run(&app, &u, &t).await;
    assert_eq!(llm.problems(), Vec::<String>::new());
    assert_eq!(run["id"], queued["id"]);
    assert_eq!(run["status"], json!("failed"));
    assert_eq!(run["passed"], json!(false));
    assert_eq!(run["tokens"], json!(45));
    assert_eq!(
        run["transcript"],
        json!([
            {"role": "agent", "message": "Hi!"},
            {"role": "user", "message": "Do you sell bread?"},
            {"role": "agent", "message": "We bake sourdough daily."},
            {"role": "user", "message": "Thanks"},
            {"role": "agent", "message": "You're welcome!"}
        ])
    );
    let res = run["results"].as_array().unwrap();
    let passed: Vec<bool> = res.iter().map(|r| r["passed"].as_bool().unwrap()).collect();
    assert_eq!(passed, [true, true, true, false, false]);
    assert_eq!(res[2]["reason"], json!("polite throughout"));
    assert_eq!(
        res[3]["reason"],
        json!("the genie has no tool named 'book_table'")
    );
    assert!(
        res[4]["reason"]
            .as_str()
            .unwrap()
            .contains("no capture_lead tool")
    );
    // The second agent turn carried the whole conversation, greeting included.
    let reqs = llm.requests();
    let roles: Vec<&str> = reqs[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "assistant", "user", "assistant", "user"]);
    assert!(
        reqs[2].body["messages"][1]["content"]
            .as_str()
            .unwrap()
            .contains("agent: We bake sourdough daily.")
    );
    let ev = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let e = events.recv().await.unwrap();
            if e.kind == "genie_test.completed" {
                return e;
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(ev.data["run"]["id"], queued["id"]);
    assert_eq!(ev.user_id, u.id);
    // Runs are listed per genie too, and the run is in the activity log.
    let all = app
        .call(
            &u.token,
            "genie-tests",
            "runs",
            None,
            json!({"genie_id": g}),
        )
        .await;
    assert_eq!(all.ok(200)["count"], json!(1));
    let acts = app
        .call(&u.token, "activities", "list", None, json!({}))
        .await;
    assert!(
        acts.ok(200)["activities"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["resource"] == "genie-tests" && a["action"] == "run")
    );
}

#[tokio::test]
async fn tools_of_the_tested_version_are_offered_and_their_calls_judged() {
    let (app, llm) = llm_app().await;
    let u = app.standard().await;
    let g = genie(&app, &u).await;
    // A draft whose configuration has tools (the genie field `tools` of issue #19).
    app.call(
        &u.token,
        "genies",
        "update",
        Some(json!(g)),
        json!({"draft": true, "temperature": 0.7}),
    )
    .await
    .ok(200);
    let gid = g.clone();
    app.state
        .db
        .write(move |c| {
            c.execute(
                "UPDATE genie_drafts SET config = json_set(config, '$.tools', json(?2)) WHERE genie_id = ?1",
                rusqlite::params![gid, json!([
                    {"type": "capture_lead", "description": "Save the caller's contact"},
                    {"type": "webhook", "name": "book_table", "description": "Book a table",
                     "parameters": {"type": "object", "properties": {"when": {"type": "string"}}}}
                ]).to_string()],
            )?;
            Ok(())
        })
        .await
        .unwrap();
    let t = new_test(
        &app,
        &u,
        json!({"genie_id": g, "name": "booking", "turns": ["A table at 8 please, I'm Ann"],
               "criteria": [{"type": "tool_called", "value": "book_table"},
                            {"type": "lead_captured"},
                            {"type": "contains", "value": "booked"}]}),
    )
    .await;
    llm.expect_agent_tools(&["capture_lead", "book_table"]);
    llm.expect_completions(vec![agent(PROMPT, 0.7)]);
    llm.push([
        Turn::Tools(vec![
            ("book_table", json!({"when": "20:00"})),
            ("capture_lead", json!({"name": "Ann"})),
        ]),
        Turn::Answer("You're booked for 8."),
    ]);
    // No version given: the draft is tested.
    let r = app
        .call(&u.token, "genie-tests", "run", Some(json!(t)), json!({}))
        .await;
    assert_eq!(r.ok(202)["run"]["target"], json!("draft"));
    let run = finished_run(&app, &u, &t).await;
    assert_eq!(llm.problems(), Vec::<String>::new());
    assert_eq!(run["status"], json!("passed"), "{run}");
    assert_eq!(run["passed"], json!(true));
    let res = run["results"].as_array().unwrap();
    assert!(res.iter().all(|r| r["passed"] == json!(true)), "{run}");
    let calls: Vec<&Value> = run["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["role"] == "tool_call")
        .collect();
    assert_eq!(calls.len(), 2);
    // The answer after the tool calls was asked with their results.
    let second = &llm.requests()[1].body;
    let msgs = second["messages"].as_array().unwrap();
    assert_eq!(msgs.last().unwrap()["role"], json!("tool"));

    // Version 1 (live, no tools) is tested when named.
    llm.expect_agent_tools(&[]);
    llm.expect_completions(vec![agent(PROMPT, 0.3)]);
    llm.push([Turn::Answer("Sorry, I cannot book.")]);
    let r = app
        .call(
            &u.token,
            "genie-tests",
            "run",
            Some(json!(t)),
            json!({"version": 1}),
        )
        .await;
    assert_eq!(r.ok(202)["run"]["target"], json!("1"));
    let run = finished_run(&app, &u, &t).await;
    assert_eq!(llm.problems(), Vec::<String>::new());
    assert_eq!(run["status"], json!("failed"));
    assert!(llm.requests().last().unwrap().body.get("tools").is_none());
}

#[tokio::test]
async fn a_simulated_user_is_played_by_the_llm() {
    let (app, llm) = llm_app().await;
    let u = app.standard().await;
    let g = genie(&app, &u).await;
    let t = new_test(
        &app,
        &u,
        json!({"genie_id": g, "name": "sim",
               "simulated_user": {"prompt": "You want rye bread.", "max_turns": 2},
               "criteria": [{"type": "contains", "value": "rye"}]}),
    )
    .await;
    let sim = Completion {
        model: "fake-model".into(),
        system_contains: vec!["You want rye bread.".into(), "You play the USER".into()],
        select: Some("You play the USER".into()),
        ..Default::default()
    };
    llm.expect_completions(vec![agent(PROMPT, 0.3), sim]);
    llm.push([
        Turn::Answer("Do you have rye?"),
        Turn::Answer("Yes, rye on Tuesdays."),
        Turn::Answer("Great, thanks."),
        Turn::Answer("Bye!"),
    ]);
    app.call(&u.token, "genie-tests", "run", Some(json!(t)), json!({}))
        .await
        .ok(202);
    let run = finished_run(&app, &u, &t).await;
    assert_eq!(llm.problems(), Vec::<String>::new());
    assert_eq!(run["status"], json!("passed"), "{run}");
    let users: Vec<&str> = run["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["role"] == "user")
        .map(|t| t["message"].as_str().unwrap())
        .collect();
    assert_eq!(users, ["Do you have rye?", "Great, thanks."]);
    // The simulator saw the conversation from the user's side: the agent's words as `user`.
    let third = &llm.requests()[2].body["messages"];
    assert_eq!(third[1], json!({"role": "user", "content": "Hi!"}));
    assert_eq!(third[2]["role"], json!("assistant"));
    assert_eq!(run["tokens"], json!(60));
}

#[tokio::test]
async fn publish_with_required_tests_refuses_a_failing_draft() {
    let (app, llm) = llm_app().await;
    let u = app.standard().await;
    let g = genie(&app, &u).await;
    new_test(
        &app,
        &u,
        json!({"genie_id": g, "name": "refund policy", "turns": ["Can I get a refund?"],
               "criteria": [{"type": "contains", "value": "refund"}]}),
    )
    .await;
    let draft = "DRAFT: You are the bakery's assistant.";
    app.call(
        &u.token,
        "genies",
        "update",
        Some(json!(g)),
        json!({"draft": true, "system_prompt": draft}),
    )
    .await
    .ok(200);
    llm.expect_completions(vec![agent(draft, 0.3)]);
    llm.push([Turn::Answer("No idea.")]);
    let r = app
        .call(
            &u.token,
            "genies",
            "publish",
            Some(json!(g)),
            json!({"require_tests": true}),
        )
        .await;
    r.err(409, "CONFLICT");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("refund policy")
    );
    assert_eq!(llm.problems(), Vec::<String>::new());
    let live = app
        .call(&u.token, "genies", "get", Some(json!(g)), json!({}))
        .await;
    assert_eq!(live.ok(200)["genie"]["system_prompt"], json!(PROMPT));
    let v = app
        .call(&u.token, "genies", "versions", Some(json!(g)), json!({}))
        .await;
    assert_eq!(v.ok(200)["count"], json!(1));
    assert!(!v.data()["draft"].is_null());

    llm.push([Turn::Answer("Yes, a refund within 14 days.")]);
    let r = app
        .call(
            &u.token,
            "genies",
            "publish",
            Some(json!(g)),
            json!({"require_tests": true}),
        )
        .await;
    assert_eq!(r.ok(200)["version"], json!(2));
    assert_eq!(r.data()["genie"]["system_prompt"], json!(draft));
    assert_eq!(llm.problems(), Vec::<String>::new());
    let runs = app
        .call(
            &u.token,
            "genie-tests",
            "runs",
            None,
            json!({"genie_id": g}),
        )
        .await;
    let statuses: Vec<Value> = runs.ok(200)["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].clone())
        .collect();
    assert_eq!(statuses, [json!("passed"), json!("failed")]);
}

#[tokio::test]
async fn bad_tests_are_refused_and_tests_follow_their_genie() {
    let app = TestApp::spawn().await;
    let (u, other, consumer) = (
        app.standard().await,
        app.standard().await,
        app.consumer().await,
    );
    let g = genie(&app, &u).await;
    let ok = json!({"genie_id": g, "name": "t", "turns": ["hi"], "criteria": [{"type": "contains", "value": "x"}]});
    for (patch, what) in [
        (
            json!({"criteria": [{"type": "sounds_nice", "value": "x"}]}),
            "data.criteria[0].type",
        ),
        (json!({"criteria": []}), "data.criteria"),
        (
            json!({"criteria": [{"type": "contains"}]}),
            "data.criteria[0].value",
        ),
        (
            json!({"simulated_user": {"prompt": "p", "max_turns": 2}}),
            "either turns",
        ),
        (json!({"turns": []}), "data.turns"),
        (json!({"turns": [""]}), "data.turns[0]"),
        (json!({"name": " "}), "data.name"),
        (
            json!({"turns": null, "simulated_user": {"prompt": "p", "max_turns": 99}}),
            "max_turns",
        ),
        (json!({"genie_id": "nope"}), "genie_id"),
    ] {
        let mut data = ok.clone();
        for (k, v) in patch.as_object().unwrap() {
            data[k] = v.clone();
        }
        let r = app
            .call(&u.token, "genie-tests", "create", None, data)
            .await;
        r.err(400, "VALIDATION_ERROR");
        assert!(
            r.body["error"]["message"].as_str().unwrap().contains(what),
            "{what}: {}",
            r.body
        );
    }
    assert_eq!(app.count("genie_tests").await, 0);
    app.call(&other.token, "genie-tests", "create", None, ok.clone())
        .await
        .err(404, "AGENT_NOT_FOUND");
    app.call(&consumer.token, "genie-tests", "create", None, ok.clone())
        .await
        .err(403, "FORBIDDEN");
    let t = new_test(&app, &u, ok.clone()).await;
    let r = app
        .call(
            &u.token,
            "genie-tests",
            "update",
            Some(json!(t)),
            json!({"name": "renamed"}),
        )
        .await;
    assert_eq!(r.ok(200)["test"]["name"], json!("renamed"));
    app.call(
        &other.token,
        "genie-tests",
        "get",
        Some(json!(t)),
        json!({}),
    )
    .await
    .err(404, "NOT_FOUND");
    // No language model: a run is refused, nothing queued.
    let r = app
        .call(&u.token, "genie-tests", "run", Some(json!(t)), json!({}))
        .await;
    r.err(400, "VALIDATION_ERROR");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--llm-base-url")
    );
    assert_eq!(app.count("genie_test_runs").await, 0);
    let all = app
        .call(&u.token, "genie-tests", "all", None, json!({"genie_id": g}))
        .await;
    assert_eq!(all.ok(200)["count"], json!(1));
    app.call(&u.token, "genie-tests", "delete", Some(json!(t)), json!({}))
        .await
        .ok(200);
    assert_eq!(app.count("genie_tests").await, 0);
}
