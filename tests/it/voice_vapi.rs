//! The Vapi adapter against its fake: every call's method, path, key and body, the mapping of
//! genie settings onto assistant fields, the knowledge tool kept in step with the documents,
//! errors in Vapi's own words, and retries: 429 always, 5xx only where repeating is safe.

use std::time::Duration;

use genied::config::Secret;
use genied::voice::vapi::{ServerUrl, Vapi};
use genied::voice::{AgentSpec, KbDocRef, VoiceProvider};
use serde_json::json;

use crate::common::fakes::vapi::{FakeVapi, KEY};

pub fn spec() -> AgentSpec {
    AgentSpec {
        name: "Support bot".into(),
        system_prompt: Some("You help.".into()),
        first_message: Some("Hi!".into()),
        language: Some("de".into()),
        multilingual: true,
        voice_id: Some("21m00Tcm4TlvDq8ikWAM".into()),
        llm_model: "gpt-4o".into(),
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

fn vapi(fake: &FakeVapi) -> Vapi {
    Vapi::new(
        &format!("{}/", fake.base),
        Secret(KEY.into()),
        Some(ServerUrl {
            url: "https://genied.example/v1/hooks/vapi".into(),
            secret: Secret("hook-secret-1".into()),
        }),
        Duration::from_millis(5),
    )
    .unwrap()
}

#[tokio::test]
async fn assistant_lifecycle_sends_the_documented_requests() {
    let fake = FakeVapi::start().await;
    let v = vapi(&fake);
    let file = v
        .create_document("FAQ", "Opening hours: 9-5.")
        .await
        .unwrap();
    let r = &fake.requests()[0];
    assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/file"));
    assert_eq!(
        r.authorization.as_deref(),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert!(
        r.content_type
            .as_deref()
            .unwrap()
            .starts_with("multipart/form-data")
    );
    assert_eq!(
        r.parts,
        vec![(
            "file".into(),
            Some("FAQ.txt".into()),
            "Opening hours: 9-5.".into()
        )]
    );
    assert!(fake.file(&file).is_some());

    let mut s = spec();
    s.knowledge_base = vec![KbDocRef {
        id: file.clone(),
        name: "FAQ".into(),
        doc_type: "text".into(),
    }];
    fake.clear_requests();
    let id = v.create_agent(&s).await.unwrap();
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2, "{reqs:?}");
    assert_eq!(
        (reqs[0].method.as_str(), reqs[0].path.as_str()),
        ("POST", "/tool")
    );
    assert_eq!(reqs[0].body["type"], json!("query"));
    assert_eq!(reqs[0].body["knowledgeBases"][0]["fileIds"], json!([file]));
    let tool = fake.tool_count();
    assert_eq!(tool, 1);
    assert_eq!(
        (reqs[1].method.as_str(), reqs[1].path.as_str()),
        ("POST", "/assistant")
    );
    let b = &reqs[1].body;
    assert_eq!(b["name"], json!("Support bot"));
    assert_eq!(b["firstMessage"], json!("Hi!"));
    let tool_id = b["model"]["toolIds"][0].as_str().unwrap().to_string();
    assert_eq!(
        b["model"],
        json!({"provider": "openai", "model": "gpt-4o", "temperature": 0.4, "maxTokens": 300,
               "messages": [{"role": "system", "content": "You help."}], "toolIds": [tool_id]})
    );
    assert_eq!(
        b["voice"],
        json!({"provider": "11labs", "voiceId": "21m00Tcm4TlvDq8ikWAM", "stability": 0.5,
               "similarityBoost": 0.75, "speed": 1.1, "model": "eleven_turbo_v2_5", "language": "de"})
    );
    assert_eq!(
        b["transcriber"],
        json!({"provider": "deepgram", "model": "nova-3", "language": "multi"})
    );
    assert_eq!(b["maxDurationSeconds"], json!(600));
    assert_eq!(b["silenceTimeoutSeconds"], json!(20.0));
    assert_eq!(b["hooks"][0]["on"], json!("customer.speech.timeout"));
    assert_eq!(b["hooks"][0]["options"]["timeoutSeconds"], json!(7.0));
    assert_eq!(
        b["server"],
        json!({"url": "https://genied.example/v1/hooks/vapi", "headers": {"X-Vapi-Secret": "hook-secret-1"}})
    );
    assert_eq!(b["metadata"]["geniedKbToolId"], json!(tool_id));
    assert!(fake.assistant(&id).is_some());

    // An update reads the assistant, keeps its tool, and resends the whole model.
    fake.clear_requests();
    let mut s2 = s.clone();
    s2.system_prompt = Some("Be brief.".into());
    s2.first_message = None;
    v.update_agent(&id, &s2).await.unwrap();
    let reqs = fake.requests();
    let calls: Vec<(String, String)> = reqs
        .iter()
        .map(|r| (r.method.clone(), r.path.clone()))
        .collect();
    assert_eq!(
        calls,
        vec![
            ("GET".into(), format!("/assistant/{id}")),
            ("PATCH".into(), format!("/tool/{tool_id}")),
            ("PATCH".into(), format!("/assistant/{id}")),
        ]
    );
    let a = fake.assistant(&id).unwrap();
    assert_eq!(a["model"]["messages"][0]["content"], json!("Be brief."));
    assert_eq!(a["model"]["toolIds"], json!([tool_id]));
    assert_eq!(a["firstMessageMode"], json!("assistant-waits-for-user"));

    // Detaching every document removes the tool and the tool id.
    fake.clear_requests();
    v.set_agent_documents(&id, &[]).await.unwrap();
    assert!(fake.tool(&tool_id).is_none());
    let a = fake.assistant(&id).unwrap();
    assert_eq!(a["model"]["toolIds"], json!([]));
    assert!(a["metadata"].get("geniedKbToolId").is_none());
    assert_eq!(
        a["model"]["model"],
        json!("gpt-4o"),
        "the model was resent whole"
    );

    // Attaching again makes a new tool.
    v.set_agent_documents(&id, &s.knowledge_base).await.unwrap();
    let a = fake.assistant(&id).unwrap();
    let t2 = a["metadata"]["geniedKbToolId"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(a["model"]["toolIds"], json!([t2]));
    assert!(fake.tool(&t2).is_some());

    v.delete_agent(&id).await.unwrap();
    assert!(fake.assistant(&id).is_none());
    assert!(fake.tool(&t2).is_none(), "the knowledge tool goes with it");
    // Deleting again is fine: it is gone.
    v.delete_agent(&id).await.unwrap();
    v.delete_document(&file).await.unwrap();
    assert!(fake.file(&file).is_none());
    v.delete_document(&file).await.unwrap();
}

#[tokio::test]
async fn errors_come_back_in_vapis_words_and_nothing_is_left_half_made() {
    let fake = FakeVapi::start().await;
    let bad_key = Vapi::new(
        &fake.base,
        Secret("wrong".into()),
        None,
        Duration::from_millis(5),
    )
    .unwrap();
    let e = bad_key.create_agent(&spec()).await.unwrap_err();
    assert_eq!(e.status, Some(401));
    assert!(e.message.starts_with("Invalid Key"), "{}", e.message);
    assert!(
        !e.to_string().contains("wrong"),
        "the key never appears in an error"
    );

    let v = vapi(&fake);
    let mut s = spec();
    s.temperature = Some(2.5);
    let e = v.create_agent(&s).await.unwrap_err();
    assert_eq!(e.status, Some(400));
    assert_eq!(e.message, "model.temperature must not be greater than 2");
    assert_eq!(fake.assistant_count(), 0);

    // The assistant fails after its knowledge tool was made: the tool is removed again.
    let file = v.create_document("FAQ", "x").await.unwrap();
    s.temperature = Some(0.5);
    s.knowledge_base = vec![KbDocRef {
        id: file,
        name: "FAQ".into(),
        doc_type: "text".into(),
    }];
    fake.fail("create_assistant", 500, 1);
    fake.clear_requests();
    let e = v.create_agent(&s).await.unwrap_err();
    assert_eq!(e.status, Some(500));
    assert_eq!(fake.tool_count(), 0);
    assert_eq!(fake.assistant_count(), 0);
    let posts = fake
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path == "/assistant")
        .count();
    assert_eq!(
        posts, 1,
        "a create that failed with 500 is not repeated blindly"
    );
}

#[tokio::test]
async fn rate_limits_and_transient_failures_are_retried_with_backoff() {
    let fake = FakeVapi::start().await;
    let v = vapi(&fake);
    fake.fail("create_assistant", 429, 2);
    let id = v.create_agent(&spec()).await.unwrap();
    let posts = fake
        .requests()
        .iter()
        .filter(|r| r.path == "/assistant" && r.method == "POST")
        .count();
    assert_eq!(posts, 3, "two 429s, then the create");
    assert_eq!(fake.assistant_count(), 1);

    // Reads and updates are idempotent: a 503 is repeated.
    fake.fail("get_assistant", 503, 2);
    fake.fail("update_assistant", 502, 1);
    v.update_agent(&id, &spec()).await.unwrap();
    let n = |m: &str| {
        fake.requests()
            .iter()
            .filter(|r| r.method == m && r.path == format!("/assistant/{id}"))
            .count()
    };
    assert_eq!((n("GET"), n("PATCH")), (3, 2));

    // A limit that outlasts every retry ends in the platform's error.
    fake.fail("get_call", 429, 100);
    let e = v.get_conversation("c1").await.unwrap_err();
    assert_eq!(e.status, Some(429));
    assert_eq!(e.message, "Rate limit exceeded");
    let tries = fake
        .requests()
        .iter()
        .filter(|r| r.path == "/call/c1")
        .count();
    assert_eq!(tries, 5, "one call and four retries");
}

#[tokio::test]
async fn numbers_calls_and_voices() {
    let fake = FakeVapi::start().await;
    let v = vapi(&fake);
    assert!(v.supports_phone_provisioning());
    let id = v.create_agent(&spec()).await.unwrap();
    let n = v.provision_number(&id, "Front desk").await.unwrap();
    let r = fake.requests().last().unwrap().clone();
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/phone-number")
    );
    assert_eq!(
        r.body,
        json!({"provider": "vapi", "assistantId": id, "name": "Front desk"})
    );
    assert!(n.number.starts_with("+1"));
    assert!(fake.phone(&n.external_id).is_some());
    v.release_number(&n.external_id).await.unwrap();
    assert!(fake.phone(&n.external_id).is_none());

    for i in 0..3 {
        fake.add_call(json!({
            "id": format!("call-{i}"), "assistantId": id, "type": "inboundPhoneCall",
            "status": "ended", "endedReason": "customer-ended-call",
            "createdAt": format!("2026-11-0{}T10:00:00.000Z", i + 1),
            "startedAt": format!("2026-11-0{}T10:00:00.000Z", i + 1),
            "endedAt": format!("2026-11-0{}T10:01:30.000Z", i + 1),
            "artifact": {"messages": [
                {"role": "system", "message": "You help."},
                {"role": "bot", "message": "Hi!", "secondsFromStart": 0.4},
                {"role": "user", "message": "When are you open?", "secondsFromStart": 2.1}]},
            "analysis": {"summary": "Asked for opening hours."}
        }));
    }
    fake.add_call(json!({"id": "other", "assistantId": "someone-else", "createdAt": "2026-11-01T00:00:00.000Z"}));
    let page = v.list_conversations(&id, None).await.unwrap();
    let ids: Vec<&str> = page
        .conversations
        .iter()
        .map(|c| c.conversation_id.as_str())
        .collect();
    assert_eq!(ids, vec!["call-2", "call-1", "call-0"]);
    assert_eq!(page.conversations[0].call_duration_secs, 90);
    assert_eq!(page.conversations[0].status, "done");
    assert!(page.next_cursor.is_none());
    let q = fake.requests().last().unwrap().query.clone();
    assert!(
        q.contains(&format!("assistantId={id}")) && q.contains("limit=100"),
        "{q}"
    );

    let d = v.get_conversation("call-1").await.unwrap();
    assert_eq!(d.transcript.len(), 2);
    assert_eq!(d.transcript[0].role, "agent");
    assert_eq!(d.transcript[1].message, "When are you open?");
    assert_eq!(d.summary.as_deref(), Some("Asked for opening hours."));
    assert_eq!(d.metadata["endedReason"], json!("customer-ended-call"));

    // Vapi speaks with ElevenLabs voices: the catalog is the list, and no request is made.
    let before = fake.requests().len();
    let voices = v.list_voices().await.unwrap();
    assert!(voices.iter().any(|v| v.voice_id == "21m00Tcm4TlvDq8ikWAM"));
    assert_eq!(fake.requests().len(), before);
}
