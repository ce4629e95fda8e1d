//! The full genie object `create` returns: every member contract.md pins, the page, the
//! settings overlay, the agent at the provider and the event.

use serde_json::{Value, json};

use super::{external_id, get, local_agent};
use crate::common::*;

#[tokio::test]
async fn create_returns_the_full_object_and_provisions_the_agent() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let mut events = app.state.bus.subscribe();
    let r = app
        .call(&u.token, "genies", "create", None, json!({
            "genieName": "Front Desk", "useCase": "support", "systemPrompt": "You are helpful.", "firstMessage": "Hello!",
            "webWelcomeMessage": "Talk to us", "temperature": 0.7, "maxTokens": 256, "brand": "Acme", "category": "Support",
            "description": "Answers calls", "supportEmails": ["help@acme.test"], "sendConversationReports": true,
            "multilingual": true, "voiceStability": 0.4, "voiceSimilarity": 0.8, "maxDurationSeconds": 600,
            "turnTimeoutSeconds": 7, "silenceEndSeconds": 15
        }))
        .await;
    let g = r.ok(201)["genie"].clone();
    let keys: Vec<&str> = g.as_object().unwrap().keys().map(String::as_str).collect();
    for k in [
        "id",
        "name",
        "description",
        "use_case",
        "category",
        "brand",
        "system_prompt",
        "first_message",
        "voice_id",
        "llm_model",
        "temperature",
        "max_tokens",
        "is_active",
        "setup_completed",
        "send_conversation_reports",
        "voice_disabled",
        "max_duration_seconds",
        "turn_timeout_seconds",
        "silence_end_seconds",
        "turn_mode",
        "max_calls",
        "settings",
        "branding",
        "support_emails",
        "phone",
        "page",
        "group",
        "documents",
        "owner",
        "sort_order",
        "created_at",
        "updated_at",
    ] {
        assert!(keys.contains(&k), "missing {k} in {g}");
    }
    assert_eq!(g["name"], json!("Front Desk"));
    assert_eq!(g["llm_model"], json!("gemini-3-flash-preview"));
    assert_eq!(g["voice_id"], json!("21m00Tcm4TlvDq8ikWAM"));
    assert_eq!(g["temperature"], json!(0.7));
    assert_eq!(g["is_active"], json!(true));
    assert_eq!(g["setup_completed"], json!(false));
    assert_eq!(g["turn_mode"], json!("silence"));
    assert_eq!(g["phone"], Value::Null);
    assert_eq!(g["owner"], Value::Null);
    assert_eq!(g["group"], Value::Null);
    assert_eq!(g["documents"], json!([]));
    assert_eq!(g["support_emails"], json!(["help@acme.test"]));
    assert_eq!(g["page"]["welcome_message"], json!("Talk to us"));
    assert!(
        g["page"]["url"]
            .as_str()
            .unwrap()
            .ends_with(g["page"]["slug"].as_str().unwrap())
    );
    let cc = &g["settings"]["conversation_config"];
    assert_eq!(cc["agent"]["prompt"]["prompt"], json!("You are helpful."));
    assert_eq!(cc["tts"]["stability"], json!(0.4));
    assert_eq!(cc["tts"]["similarity_boost"], json!(0.8));
    assert_eq!(cc["turn"]["turn_timeout"], json!(7.0));
    assert_eq!(cc["conversation"]["max_duration_seconds"], json!(600));
    assert!(g["created_at"].as_str().unwrap().ends_with('Z'));

    let agent = local_agent(&app, &external_id(&app, g["id"].as_str().unwrap()).await)
        .await
        .expect("agent at the provider");
    assert_eq!(agent["spec"]["system_prompt"], json!("You are helpful."));
    assert_eq!(agent["spec"]["stability"], json!(0.4));
    assert_eq!(agent["spec"]["multilingual"], json!(true));

    let ev = events.recv().await.unwrap();
    assert_eq!(
        (ev.kind.as_str(), ev.user_id.as_str()),
        ("genie.created", u.id.as_str())
    );
    assert_eq!(ev.data["id"], g["id"]);

    let got = get(&app, &u.token, g["id"].as_str().unwrap()).await;
    assert_eq!(got.ok(200)["genie"], g);
}
