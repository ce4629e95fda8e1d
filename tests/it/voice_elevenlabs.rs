//! The ElevenLabs adapter against its fake: every call's method, path, key and body, and
//! the provider's errors mapped to `ProviderError` with its own message.

use genied::config::Secret;
use genied::voice::elevenlabs::ElevenLabs;
use genied::voice::{AgentSpec, KbDocRef, VoiceProvider};
use serde_json::json;

use crate::common::fakes::elevenlabs::{FakeElevenLabs, KEY};

fn spec() -> AgentSpec {
    AgentSpec {
        name: "Support bot".into(),
        system_prompt: Some("You help.".into()),
        first_message: Some("Hi!".into()),
        language: Some("de".into()),
        multilingual: true,
        voice_id: Some("21m00Tcm4TlvDq8ikWAM".into()),
        llm_model: "gemini-3-flash-preview".into(),
        temperature: Some(0.4),
        max_tokens: Some(300),
        stability: Some(0.5),
        similarity_boost: Some(0.75),
        speed: Some(1.1),
        max_duration_seconds: Some(600),
        turn_timeout_seconds: Some(7.0),
        silence_end_seconds: Some(20.0),
        turn_mode: Some("silence".into()),
        knowledge_base: vec![],
        tools: vec![],
    }
}

#[tokio::test]
async fn agent_lifecycle_sends_the_documented_requests() {
    let fake = FakeElevenLabs::start().await;
    let el = ElevenLabs::new(
        &format!("{}/", fake.base),
        Secret(KEY.into()),
        std::time::Duration::from_millis(1),
    )
    .unwrap();
    let id = el.create_agent(&spec()).await.unwrap();
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert_eq!(
        (r.method.as_str(), r.path.as_str(), r.api_key.as_deref()),
        ("POST", "/v1/convai/agents/create", Some(KEY))
    );
    assert_eq!(r.body["name"], json!("Support bot"));
    let cc = &r.body["conversation_config"];
    assert_eq!(cc["agent"]["first_message"], json!("Hi!"));
    assert_eq!(cc["agent"]["language"], json!("de"));
    assert_eq!(
        cc["agent"]["prompt"],
        json!({"prompt": "You help.", "llm": "gemini-3-flash-preview", "temperature": 0.4, "max_tokens": 300, "knowledge_base": [], "tools": []})
    );
    assert_eq!(cc["tts"]["voice_id"], json!("21m00Tcm4TlvDq8ikWAM"));
    assert_eq!(cc["tts"]["stability"], json!(0.5));
    assert_eq!(cc["tts"]["similarity_boost"], json!(0.75));
    assert_eq!(cc["tts"]["speed"], json!(1.1));
    assert_eq!(
        cc["turn"],
        json!({"turn_timeout": 7.0, "silence_end_call_timeout": 20.0, "mode": "silence"})
    );
    assert_eq!(cc["conversation"], json!({"max_duration_seconds": 600}));
    assert!(fake.agent(&id).is_some());

    let mut s2 = spec();
    s2.system_prompt = Some("Be brief.".into());
    el.update_agent(&id, &s2).await.unwrap();
    let docs = vec![KbDocRef {
        id: "abcdefghij0123456789".into(),
        name: "FAQ".into(),
        doc_type: "text".into(),
    }];
    el.set_agent_documents(&id, &docs).await.unwrap();
    let reqs = fake.requests();
    assert_eq!(
        (reqs[1].method.as_str(), reqs[1].path.as_str()),
        ("PATCH", format!("/v1/convai/agents/{id}").as_str())
    );
    assert_eq!(
        reqs[1].body["conversation_config"]["agent"]["prompt"]["prompt"],
        json!("Be brief.")
    );
    assert_eq!(
        reqs[2].body,
        json!({"conversation_config": {"agent": {"prompt": {"knowledge_base": [{"id": "abcdefghij0123456789", "name": "FAQ", "type": "text"}]}}}})
    );
    let stored = fake.agent(&id).unwrap();
    assert_eq!(
        stored["conversation_config"]["agent"]["prompt"]["knowledge_base"][0]["id"],
        json!("abcdefghij0123456789")
    );
    assert_eq!(
        stored["conversation_config"]["agent"]["prompt"]["prompt"],
        json!("Be brief.")
    );

    el.delete_agent(&id).await.unwrap();
    assert!(fake.agent(&id).is_none());
    // Deleting again: the provider answers 404, which counts as done.
    el.delete_agent(&id).await.unwrap();
    let last = fake.requests().pop().unwrap();
    assert_eq!(
        (last.method.as_str(), last.path.as_str()),
        ("DELETE", format!("/v1/convai/agents/{id}").as_str())
    );
}

#[tokio::test]
async fn provider_errors_carry_status_and_message() {
    let fake = FakeElevenLabs::start().await;
    let el = ElevenLabs::new(
        &fake.base,
        Secret(KEY.into()),
        std::time::Duration::from_millis(1),
    )
    .unwrap();
    let mut bad = spec();
    bad.temperature = Some(3.0);
    let e = el.create_agent(&bad).await.unwrap_err();
    assert_eq!(e.status, Some(422));
    assert!(
        e.message
            .contains("conversation_config.agent.prompt.temperature"),
        "{}",
        e.message
    );
    assert_eq!(fake.agent_count(), 0);

    let wrong = ElevenLabs::new(
        &fake.base,
        Secret("wrong".into()),
        std::time::Duration::from_millis(1),
    )
    .unwrap();
    let e = wrong.create_agent(&spec()).await.unwrap_err();
    assert_eq!(
        (e.status, e.message.as_str()),
        (Some(401), "Invalid API key")
    );
    assert_eq!(
        fake.requests().last().unwrap().api_key.as_deref(),
        Some("wrong")
    );

    let e = el.update_agent("agent_missing", &spec()).await.unwrap_err();
    assert_eq!(e.status, Some(404));
    assert!(e.message.contains("not found"));

    fake.fail("create_agent", 500);
    let e = el.create_agent(&spec()).await.unwrap_err();
    assert_eq!(e.status, Some(500));
    assert!(e.to_string().contains("create_agent failed in the fake"));
    assert!(!e.to_string().contains(KEY));
}

#[tokio::test]
async fn documents_voices_numbers_and_conversations() {
    let fake = FakeElevenLabs::start().await;
    let el = ElevenLabs::new(
        &fake.base,
        Secret(KEY.into()),
        std::time::Duration::from_millis(1),
    )
    .unwrap();
    let doc = el
        .create_document("FAQ", "Opening hours: 9-5")
        .await
        .unwrap();
    assert_eq!(doc.len(), 20);
    let r = fake.requests().pop().unwrap();
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v1/convai/knowledge-base/text")
    );
    assert_eq!(r.body, json!({"text": "Opening hours: 9-5", "name": "FAQ"}));
    el.delete_document(&doc).await.unwrap();
    let r = fake.requests().pop().unwrap();
    assert_eq!(
        (r.method.as_str(), r.path.as_str(), r.query.as_str()),
        (
            "DELETE",
            format!("/v1/convai/knowledge-base/{doc}").as_str(),
            "force=true"
        )
    );
    el.delete_document(&doc).await.unwrap(); // already gone: fine

    let voices = el.list_voices().await.unwrap();
    assert_eq!(
        voices
            .iter()
            .map(|v| v.voice_id.as_str())
            .collect::<Vec<_>>(),
        ["v1", "v2", "v3"]
    );
    let pages: Vec<String> = fake
        .requests()
        .iter()
        .filter(|r| r.path == "/v2/voices")
        .map(|r| r.query.clone())
        .collect();
    assert_eq!(pages, ["page_size=100", "page_size=100&next_page_token=p2"]);

    assert!(!el.supports_phone_provisioning());
    let e = el.provision_number("agent_x", "x").await.unwrap_err();
    assert!(e.message.contains("imported"), "{}", e.message);
    fake.add_phone_number("phnum_1", "+15555550123");
    el.release_number("phnum_1").await.unwrap();
    let r = fake.requests().pop().unwrap();
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("PATCH", "/v1/convai/phone-numbers/phnum_1")
    );
    assert_eq!(r.body, json!({"agent_id": null}));

    fake.add_conversation(json!({
        "agent_id": "agent_a", "conversation_id": "conv_1", "status": "done",
        "transcript": [{"role": "agent", "message": "Hi!", "time_in_call_secs": 0}, {"role": "user", "message": "Hello", "time_in_call_secs": 2}],
        "metadata": {"start_time_unix_secs": 1700000000, "call_duration_secs": 42},
        "analysis": {"transcript_summary": "Greeting only.", "call_successful": "success"}
    }));
    let page = el.list_conversations("agent_a", None).await.unwrap();
    assert_eq!(page.conversations.len(), 1);
    assert_eq!(page.conversations[0].call_duration_secs, 42);
    assert!(page.next_cursor.is_none());
    assert!(
        fake.requests()
            .last()
            .unwrap()
            .query
            .contains("agent_id=agent_a")
    );
    let c = el.get_conversation("conv_1").await.unwrap();
    assert_eq!(c.transcript.len(), 2);
    assert_eq!(c.transcript[1].message, "Hello");
    assert_eq!(c.summary.as_deref(), Some("Greeting only."));
    assert_eq!(c.start_time_unix_secs, 1700000000);
    assert_eq!(
        el.get_conversation("nope").await.unwrap_err().status,
        Some(404)
    );
}

/// What is safe to repeat is repeated: a 429 (ElevenLabs did nothing) whatever the method, a
/// 5xx on an update; a 5xx on a create is not repeated (it may have made the agent), and a
/// failure that outlasts the retries comes back with the platform's status.
#[tokio::test]
async fn rate_limits_and_server_errors_are_retried_where_safe() {
    let fake = FakeElevenLabs::start().await;
    let el = ElevenLabs::new(
        &fake.base,
        Secret(KEY.into()),
        std::time::Duration::from_millis(1),
    )
    .unwrap();
    let count = |m: &str| fake.requests().iter().filter(|r| r.method == m).count();

    fake.fail_times("create_agent", 429, 2);
    let id = el.create_agent(&spec()).await.unwrap();
    assert_eq!(count("POST"), 3, "two 429s, then the create");
    assert_eq!(fake.agent_count(), 1);

    fake.fail_times("update_agent", 503, 2);
    el.update_agent(&id, &spec()).await.unwrap();
    assert_eq!(count("PATCH"), 3, "two 503s, then the update");

    fake.fail_times("create_agent", 500, 1);
    let e = el.create_agent(&spec()).await.unwrap_err();
    assert_eq!(e.status, Some(500));
    assert_eq!(count("POST"), 4, "a failed create is not repeated");
    assert_eq!(fake.agent_count(), 1);

    fake.fail("update_agent", 502);
    let e = el.update_agent(&id, &spec()).await.unwrap_err();
    assert_eq!(e.status, Some(502));
    assert_eq!(count("PATCH"), 3 + 5, "the first attempt and four retries");
}
