//! The Retell adapter against its fake: an agent is a Retell LLM plus an agent made, changed
//! and removed together; documents are knowledge bases sent as multipart; numbers, voices and
//! calls; Retell's errors in its own words; 429 retried with backoff, a failed agent create
//! leaving no LLM behind.

use std::time::Duration;

use genied::config::Secret;
use genied::voice::retell::Retell;
use genied::voice::{KbDocRef, VoiceProvider};
use serde_json::json;

use crate::common::fakes::retell::{FakeRetell, KEY};
use crate::voice_vapi::spec;

fn retell(fake: &FakeRetell) -> Retell {
    Retell::new(
        &fake.base,
        Secret(KEY.into()),
        Some("https://genied.example/v1/hooks/retell".into()),
        Duration::from_millis(5),
    )
    .unwrap()
}

#[tokio::test]
async fn agent_lifecycle_sends_the_documented_requests() {
    let fake = FakeRetell::start().await;
    let r = retell(&fake);
    let kb = r
        .create_document("Opening hours and prices of the shop", "Open 9-5.")
        .await
        .unwrap();
    let req = fake.requests()[0].clone();
    assert_eq!(
        (req.method.as_str(), req.path.as_str()),
        ("POST", "/create-knowledge-base")
    );
    assert_eq!(
        req.authorization.as_deref(),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(
        req.parts,
        vec![
            (
                "knowledge_base_name".into(),
                "Opening hours and prices of the shop".into()
            ),
            (
                "knowledge_base_texts".into(),
                json!([{"title": "Opening hours and prices of the shop", "text": "Open 9-5."}])
                    .to_string()
            ),
        ]
    );
    assert!(fake.knowledge_base(&kb).is_some());

    let mut s = spec();
    s.knowledge_base = vec![KbDocRef {
        id: kb.clone(),
        name: "Hours".into(),
        doc_type: "text".into(),
    }];
    s.temperature = Some(1.5);
    fake.clear_requests();
    let id = r.create_agent(&s).await.unwrap();
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].path, "/create-retell-llm");
    assert_eq!(
        reqs[0].body,
        json!({"general_prompt": "You help.", "start_speaker": "agent", "begin_message": "Hi!",
               "model": "gpt-4o", "model_temperature": 1.0, "knowledge_base_ids": [kb],
               "general_tools": []})
    );
    let llm_id = fake.agent(&id).unwrap()["response_engine"]["llm_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(reqs[1].path, "/create-agent");
    assert_eq!(
        reqs[1].body,
        json!({"agent_name": "Support bot", "voice_id": "11labs-Rachel", "voice_speed": 1.1,
               "language": "multi", "max_call_duration_ms": 600000,
               "end_call_after_silence_ms": 20000, "reminder_trigger_ms": 7000,
               "webhook_url": "https://genied.example/v1/hooks/retell",
               "response_engine": {"type": "retell-llm", "llm_id": llm_id}})
    );

    fake.clear_requests();
    let mut s2 = s.clone();
    s2.system_prompt = Some("Be brief.".into());
    s2.first_message = None;
    s2.multilingual = false;
    r.update_agent(&id, &s2).await.unwrap();
    let paths: Vec<String> = fake
        .requests()
        .iter()
        .map(|q| format!("{} {}", q.method, q.path))
        .collect();
    assert_eq!(
        paths,
        vec![
            format!("GET /get-agent/{id}"),
            format!("PATCH /update-retell-llm/{llm_id}"),
            format!("PATCH /update-agent/{id}"),
        ]
    );
    let llm = fake.llm(&llm_id).unwrap();
    assert_eq!(llm["general_prompt"], json!("Be brief."));
    assert_eq!(llm["start_speaker"], json!("user"));
    assert_eq!(fake.agent(&id).unwrap()["language"], json!("de-DE"));

    r.set_agent_documents(&id, &[]).await.unwrap();
    assert_eq!(fake.llm(&llm_id).unwrap()["knowledge_base_ids"], json!([]));

    r.delete_agent(&id).await.unwrap();
    assert_eq!(fake.counts(), (0, 0), "the agent and its LLM are gone");
    r.delete_agent(&id).await.unwrap();
    r.delete_document(&kb).await.unwrap();
    assert!(fake.knowledge_base(&kb).is_none());
    r.delete_document(&kb).await.unwrap();
}

#[tokio::test]
async fn errors_rate_limits_and_clean_up() {
    let fake = FakeRetell::start().await;
    let bad = Retell::new(
        &fake.base,
        Secret("nope".into()),
        None,
        Duration::from_millis(5),
    )
    .unwrap();
    let e = bad.create_agent(&spec()).await.unwrap_err();
    assert_eq!(e.status, Some(401));
    assert_eq!(e.message, "Unauthorized: API key is invalid.");

    let r = retell(&fake);
    // The agent fails after its LLM was made: the LLM is deleted again.
    fake.fail("create_agent", 500, 1);
    let e = r.create_agent(&spec()).await.unwrap_err();
    assert_eq!(
        (e.status, e.message.as_str()),
        (Some(500), "create_agent failed in the fake")
    );
    assert_eq!(fake.counts(), (0, 0));

    fake.clear_requests();
    fake.fail("create_llm", 429, 2);
    fake.fail("create_agent", 429, 1);
    let id = r.create_agent(&spec()).await.unwrap();
    let n = |p: &str| fake.requests().iter().filter(|q| q.path == p).count();
    assert_eq!(n("/create-retell-llm"), 3);
    assert_eq!(n("/create-agent"), 2);
    assert_eq!(fake.counts(), (1, 1));

    // An update of an agent deleted at Retell says so.
    r.delete_agent(&id).await.unwrap();
    let e = r.update_agent(&id, &spec()).await.unwrap_err();
    assert_eq!(e.status, Some(422));
    assert!(e.message.contains("Cannot find requested asset"));

    fake.fail("list_voices", 429, 10);
    let e = r.list_voices().await.unwrap_err();
    assert_eq!(
        e.message,
        "Account rate limited, please throttle your requests."
    );
    assert_eq!(n("/list-voices"), 5);
}

#[tokio::test]
async fn numbers_voices_and_calls() {
    let fake = FakeRetell::start().await;
    let r = retell(&fake);
    let id = r.create_agent(&spec()).await.unwrap();
    let n = r.provision_number(&id, "Front desk").await.unwrap();
    let req = fake.requests().last().unwrap().clone();
    assert_eq!(req.path, "/create-phone-number");
    assert_eq!(
        req.body,
        json!({"nickname": "Front desk",
               "inbound_agents": [{"agent_id": id, "weight": 1}],
               "outbound_agents": [{"agent_id": id, "weight": 1}]})
    );
    assert!(n.number.starts_with('+'));
    assert_eq!(n.external_id, n.number);
    r.release_number(&n.external_id).await.unwrap();
    let req = fake.requests().last().unwrap().clone();
    assert_eq!(req.method, "DELETE");
    assert!(
        req.path
            .ends_with(&format!("/delete-phone-number/%2B{}", &n.number[1..])),
        "{}",
        req.path
    );
    assert!(fake.phone(&n.number).is_none());

    let voices = r.list_voices().await.unwrap();
    assert_eq!(voices.len(), 2);
    assert_eq!(voices[0].voice_id, "11labs-Adrian");
    assert_eq!(voices[0].labels["gender"], json!("male"));
    assert_eq!(
        voices[0].preview_url.as_deref(),
        Some("https://retell.example/adrian.mp3")
    );

    for i in 0..150i64 {
        fake.add_call(json!({
            "call_id": format!("call_{i:03}"), "agent_id": id, "call_type": "phone_call",
            "call_status": "ended", "start_timestamp": 1_700_000_000_000i64 + i * 1000,
            "end_timestamp": 1_700_000_060_000i64 + i * 1000, "duration_ms": 60_000,
            "transcript_object": [{"role": "agent", "content": "Hello", "words": [{"word": "Hello", "start": 0.1, "end": 0.5}]}],
            "call_analysis": {"call_summary": "Short call."},
            "disconnection_reason": "user_hangup"
        }));
    }
    fake.add_call(json!({"call_id": "foreign", "agent_id": "agent_other", "start_timestamp": 1}));
    let p1 = r.list_conversations(&id, None).await.unwrap();
    assert_eq!(p1.conversations.len(), 100);
    assert_eq!(p1.conversations[0].conversation_id, "call_149");
    assert_eq!(p1.conversations[0].call_duration_secs, 60);
    let body = fake.requests().last().unwrap().body.clone();
    assert_eq!(
        body,
        json!({"filter_criteria": {"agent": [{"agent_id": id}]}, "limit": 100, "sort_order": "descending"})
    );
    let p2 = r
        .list_conversations(&id, p1.next_cursor.as_deref())
        .await
        .unwrap();
    assert_eq!(p2.conversations.len(), 50);
    assert!(p2.next_cursor.is_none());
    assert!(
        p2.conversations
            .iter()
            .all(|c| c.conversation_id != "foreign")
    );

    let d = r.get_conversation("call_007").await.unwrap();
    assert_eq!(d.transcript[0].message, "Hello");
    assert_eq!(d.summary.as_deref(), Some("Short call."));
    assert_eq!(d.metadata["disconnection_reason"], json!("user_hangup"));
}
