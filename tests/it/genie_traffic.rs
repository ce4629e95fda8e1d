//! The A/B traffic split of issue #18 over real HTTP: new conversations on a genie's public
//! page are split between versions by `set-traffic`, each records the version that served
//! it and is answered with that version's prompt (checked by the fake LLM), and
//! `version-stats` counts them.

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::fakes::openai::{Completion, Expect, FakeOpenAi, Turn};
use crate::common::*;

async fn say(app: &TestApp, slug: &str, conversation: Option<&str>, message: &str) -> Resp {
    let body = json!({"conversation_id": conversation, "message": message}).to_string();
    app.raw(
        Method::POST,
        &format!("/g/{slug}/chat"),
        &[("content-type", "application/json")],
        body,
    )
    .await
}

/// A genie with versions 1 (`p1`) and 2 (`p2`, live); returns its id and page slug.
async fn two_versions(app: &TestApp, u: &User, p1: &str, p2: &str) -> (String, String) {
    let g = app
        .call(
            &u.token,
            "genies",
            "create",
            None,
            json!({"genieName": "Split", "systemPrompt": p1, "llmModel": "split-model", "temperature": 0.4, "maxTokens": 100}),
        )
        .await
        .ok(201)["genie"]
        .clone();
    let id = g["id"].as_str().unwrap().to_string();
    app.call(
        &u.token,
        "genies",
        "update",
        Some(json!(id)),
        json!({"system_prompt": p2}),
    )
    .await
    .ok(200);
    let i2 = id.clone();
    let slug: String = app
        .state
        .db
        .read(move |c| {
            Ok(
                c.query_row("SELECT page_slug FROM genies WHERE id = ?1", [&i2], |r| {
                    r.get(0)
                })?,
            )
        })
        .await
        .unwrap();
    (id, slug)
}

fn stats_of(stats: &Value, version: i64) -> Value {
    stats["stats"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["version"] == json!(version))
        .cloned()
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn a_70_30_split_over_1000_new_conversations_is_within_the_binomial_bound() {
    // Every simulated visitor comes from 127.0.0.1: lift the per-address chat limit.
    let app = TestApp::spawn_with(|c| c.public_chat_rate_limit_per_minute = 100_000).await;
    let u = app.standard().await;
    let (id, slug) = two_versions(&app, &u, "one", "two").await;
    let set = |traffic: Value| {
        let app = &app;
        let u = &u;
        let id = id.clone();
        async move {
            app.call(
                &u.token,
                "genies",
                "set-traffic",
                Some(json!(id)),
                json!({"traffic": traffic}),
            )
            .await
        }
    };
    for bad in [
        json!([{"version": 2, "weight": 70}, {"version": 1, "weight": 20}]),
        json!([{"version": 2, "weight": 70}, {"version": 9, "weight": 30}]),
        json!([{"version": 2, "weight": 50}, {"version": 2, "weight": 50}]),
        json!([{"version": 2, "weight": 101}]),
        json!([{"version": 2, "weight": 100, "extra": 1}]),
    ] {
        set(bad).await.err(400, "VALIDATION_ERROR");
    }
    let v = app
        .call(&u.token, "genies", "versions", Some(json!(id)), json!({}))
        .await;
    assert_eq!(v.ok(200)["traffic"], Value::Null);
    let r = set(json!([{"version": 2, "weight": 70}, {"version": 1, "weight": 30}])).await;
    assert_eq!(
        r.ok(200)["traffic"],
        json!([{"version": 2, "weight": 70}, {"version": 1, "weight": 30}])
    );

    // 1,000 new conversations through the public page (no LLM configured: each is still
    // recorded, with the version that would have served it).
    let mut first = None;
    for i in 0..1000 {
        let r = say(&app, &slug, None, &format!("hello {i}")).await;
        let cid = r.ok(200)["conversation_id"].as_str().unwrap().to_string();
        first.get_or_insert(cid);
    }
    let stats = app
        .call(
            &u.token,
            "genies",
            "version-stats",
            Some(json!(id)),
            json!({}),
        )
        .await
        .ok(200)
        .clone();
    let n2 = stats_of(&stats, 2)["conversations"].as_i64().unwrap_or(0);
    let n1 = stats_of(&stats, 1)["conversations"].as_i64().unwrap_or(0);
    assert_eq!(n1 + n2, 1000, "{stats}");
    // Binomial(1000, 0.7): mean 700, standard deviation sqrt(1000 * 0.7 * 0.3) = 14.5; five
    // of them is 72. A correct split lands outside that about once in 1.7 million runs.
    assert!(
        (n2 - 700).abs() <= 72,
        "version 2 served {n2} of 1000: {stats}"
    );
    assert_eq!(stats_of(&stats, 2)["analysed"], json!(0));
    assert_eq!(stats_of(&stats, 2)["successful_share"], Value::Null);

    // The conversation object names its version.
    let cid = first.unwrap();
    let conv = app
        .call(
            &u.token,
            "conversations",
            "get",
            Some(json!(cid)),
            json!({}),
        )
        .await;
    let version = conv.ok(200)["conversation"]["version"].as_i64().unwrap();
    assert!(version == 1 || version == 2);

    // The share analysed as successful, per version.
    let gid = id.clone();
    app.state
        .db
        .write(move |c| {
            // Ten conversations of version 1 analysed: five positive purchases, five negative.
            for (n, analysis) in [
                (10, r#"{"sentiment":"positive","intent":"purchase"}"#),
                (5, r#"{"sentiment":"negative","intent":"other"}"#),
            ] {
                c.execute(
                    "UPDATE conversations SET analysis = ?2, duration_seconds = 10
                     WHERE id IN (SELECT id FROM conversations WHERE genie_id = ?1 AND version = 1
                                  ORDER BY id LIMIT ?3)",
                    rusqlite::params![gid, analysis, n],
                )?;
            }
            Ok(())
        })
        .await
        .unwrap();
    let stats = app
        .call(
            &u.token,
            "genies",
            "version-stats",
            Some(json!(id)),
            json!({}),
        )
        .await
        .ok(200)
        .clone();
    let one = stats_of(&stats, 1);
    assert_eq!(one["analysed"], json!(10));
    assert_eq!(one["successful_share"], json!(0.5));
    let avg = one["average_duration_seconds"].as_f64().unwrap();
    assert!((avg - 100.0 / n1 as f64).abs() < 1e-9, "{one}");

    // Without a split, the live version serves every new conversation.
    set(json!([])).await.ok(200);
    for _ in 0..20 {
        let r = say(&app, &slug, None, "again").await;
        let cid = r.ok(200)["conversation_id"].as_str().unwrap().to_string();
        let conv = app
            .call(
                &u.token,
                "conversations",
                "get",
                Some(json!(cid)),
                json!({}),
            )
            .await;
        assert_eq!(conv.ok(200)["conversation"]["version"], json!(2));
    }
}

#[tokio::test]
async fn each_conversation_is_answered_with_its_versions_prompt_to_the_end() {
    let llm = FakeOpenAi::start(Expect::Any).await;
    let l2 = llm.clone();
    let app = TestApp::spawn_with(move |c| {
        l2.configure(c);
        c.public_chat_rate_limit_per_minute = 100_000;
    })
    .await;
    let u = app.standard().await;
    let (p1, p2) = ("PROMPT ONE: you sell bread.", "PROMPT TWO: you sell cakes.");
    let (id, slug) = two_versions(&app, &u, p1, p2).await;
    app.call(
        &u.token,
        "genies",
        "set-traffic",
        Some(json!(id)),
        json!({"traffic": [{"version": 1, "weight": 50}, {"version": 2, "weight": 50}]}),
    )
    .await
    .ok(200);
    let expect = |p: &str| Completion {
        model: "split-model".into(),
        temperature: Some(0.4),
        max_tokens: Some(100),
        system_contains: vec![p.into()],
        select: Some(p.into()),
        ..Default::default()
    };
    llm.expect_completions(vec![expect(p1), expect(p2)]);
    let mut seen = [0, 0];
    for i in 0..20 {
        llm.push([Turn::Answer("first answer"), Turn::Answer("second answer")]);
        let r = say(&app, &slug, None, &format!("hi {i}")).await;
        let cid = r.ok(200)["conversation_id"].as_str().unwrap().to_string();
        say(&app, &slug, Some(&cid), "and more?").await.ok(200);
        let conv = app
            .call(
                &u.token,
                "conversations",
                "get",
                Some(json!(cid)),
                json!({}),
            )
            .await;
        let version = conv.ok(200)["conversation"]["version"].as_i64().unwrap();
        let prompt = if version == 1 { p1 } else { p2 };
        seen[(version - 1) as usize] += 1;
        let reqs = llm.requests();
        for req in &reqs[reqs.len() - 2..] {
            let system = req.body["messages"][0]["content"].as_str().unwrap();
            assert!(
                system.contains(prompt),
                "conversation of version {version} asked with {system:?}"
            );
        }
    }
    assert_eq!(llm.problems(), Vec::<String>::new());
    // 20 fair coin flips all the same way: about 2 in a million.
    assert!(seen[0] > 0 && seen[1] > 0, "{seen:?}");
}
