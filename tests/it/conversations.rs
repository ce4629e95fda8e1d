use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use genied::voice::*;
use serde_json::{Value, json};

use crate::common::fakes::openai::{Expect, FakeOpenAi, Turn as LlmTurn};
use crate::common::*;
use crate::leads::assign;

/// A fake voice platform: conversations per agent, served two a page; records calls.
#[derive(Default)]
struct FakeVoice {
    convs: Mutex<HashMap<String, Vec<ConversationDetail>>>,
    listed: Mutex<Vec<(String, Option<String>)>>,
    fetched: Mutex<Vec<String>>,
    /// Listing with this cursor fails once (a provider hiccup mid-run).
    fail_once_at: Mutex<Option<String>>,
}

impl FakeVoice {
    fn put(&self, agent: &str, id: &str, status: &str, duration: i64, turns: &[(&str, &str)]) {
        let detail = ConversationDetail {
            conversation_id: id.into(),
            agent_id: agent.into(),
            status: status.into(),
            start_time_unix_secs: 1_760_000_000 + duration,
            call_duration_secs: duration,
            transcript: turns
                .iter()
                .enumerate()
                .map(|(i, (r, m))| Turn {
                    role: r.to_string(),
                    message: m.to_string(),
                    time_in_call_secs: i as f64 * 2.5,
                })
                .collect(),
            summary: None,
            metadata: json!({"cost": duration}),
        };
        let mut m = self.convs.lock().unwrap();
        let list = m.entry(agent.into()).or_default();
        list.retain(|c| c.conversation_id != id);
        list.push(detail);
    }
}

/// Starts a background sync (202, with where to read its progress) and waits (up to 60 s)
/// for the run to finish; returns the finished run.
async fn sync_done(app: &TestApp, token: &str, data: Value) -> Value {
    let r = app.call(token, "conversations", "sync", None, data).await;
    let d = r.ok(202).clone();
    assert_eq!(d["sync"]["status"], json!("queued"), "{d}");
    assert_eq!(d["progress"]["action"], json!("sync-status"));
    let id = d["progress"]["id"].clone();
    assert_eq!(id, d["sync"]["id"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let r = app
            .call(
                token,
                "conversations",
                "sync-status",
                Some(id.clone()),
                json!({}),
            )
            .await;
        let run = r.ok(200)["sync"].clone();
        if run["status"] == json!("succeeded") || run["status"] == json!("failed") {
            return run;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "sync never finished: {run}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// The counts of a finished run, as the synchronous sync used to answer them.
fn counts(run: &Value) -> Value {
    json!({"genies": run["genies"], "created": run["created"], "updated": run["updated"],
           "unchanged": run["unchanged"], "errors": run["errors"]})
}

fn err<T>() -> ProviderResult<T> {
    Err(ProviderError::new("not used by this test"))
}

#[async_trait]
impl VoiceProvider for FakeVoice {
    fn name(&self) -> &'static str {
        "fake"
    }
    async fn create_agent(&self, _s: &AgentSpec) -> ProviderResult<String> {
        err()
    }
    async fn update_agent(&self, _a: &str, _s: &AgentSpec) -> ProviderResult<()> {
        err()
    }
    async fn delete_agent(&self, _a: &str) -> ProviderResult<()> {
        err()
    }
    async fn set_agent_documents(&self, _a: &str, _d: &[KbDocRef]) -> ProviderResult<()> {
        err()
    }
    async fn create_document(&self, _n: &str, _t: &str) -> ProviderResult<String> {
        err()
    }
    async fn delete_document(&self, _d: &str) -> ProviderResult<()> {
        err()
    }
    async fn provision_number(&self, _a: &str, _l: &str) -> ProviderResult<ProvisionedNumber> {
        err()
    }
    async fn release_number(&self, _e: &str) -> ProviderResult<()> {
        err()
    }
    async fn list_voices(&self) -> ProviderResult<Vec<Voice>> {
        err()
    }
    async fn list_conversations(
        &self,
        agent_id: &str,
        cursor: Option<&str>,
    ) -> ProviderResult<ConversationPage> {
        self.listed
            .lock()
            .unwrap()
            .push((agent_id.into(), cursor.map(str::to_string)));
        let hiccup = {
            let mut f = self.fail_once_at.lock().unwrap();
            let hit = f.is_some() && f.as_deref() == cursor;
            if hit {
                *f = None;
            }
            hit
        };
        if hiccup {
            return Err(ProviderError {
                message: "try again later".into(),
                status: Some(429),
            });
        }
        if agent_id == "agent_broken" {
            return Err(ProviderError {
                message: "agent unavailable".into(),
                status: Some(503),
            });
        }
        let all = self
            .convs
            .lock()
            .unwrap()
            .get(agent_id)
            .cloned()
            .unwrap_or_default();
        let start: usize = cursor
            .map(|c| c.parse().expect("cursor we issued"))
            .unwrap_or(0);
        let page: Vec<ConversationSummary> = all
            .iter()
            .skip(start)
            .take(2)
            .map(|d| ConversationSummary {
                conversation_id: d.conversation_id.clone(),
                agent_id: d.agent_id.clone(),
                start_time_unix_secs: d.start_time_unix_secs,
                call_duration_secs: d.call_duration_secs,
                status: d.status.clone(),
            })
            .collect();
        let next = (start + 2 < all.len()).then(|| (start + 2).to_string());
        Ok(ConversationPage {
            conversations: page,
            next_cursor: next,
        })
    }
    async fn get_conversation(&self, id: &str) -> ProviderResult<ConversationDetail> {
        self.fetched.lock().unwrap().push(id.into());
        let m = self.convs.lock().unwrap();
        m.values()
            .flatten()
            .find(|c| c.conversation_id == id)
            .cloned()
            .ok_or(ProviderError {
                message: format!("{id} not found"),
                status: Some(404),
            })
    }
}

#[tokio::test]
async fn sync_twice_creates_no_duplicates_and_picks_up_changes() {
    let voice = Arc::new(FakeVoice::default());
    let app = TestApp::spawn_with_voice(voice.clone(), |_| {}).await;
    let u = app.standard().await;
    let other = app.standard().await;
    let g = insert_genie_with(
        &app,
        &u,
        "Phone Genie",
        json!({"external_agent_id": "agent_a"}),
    )
    .await;
    insert_genie(&app, &u, "Unprovisioned").await;
    insert_genie_with(
        &app,
        &other,
        "Other",
        json!({"external_agent_id": "agent_other"}),
    )
    .await;
    voice.put(
        "agent_a",
        "conv_1",
        "done",
        30,
        &[("agent", "Hello"), ("user", "Hi there")],
    );
    voice.put("agent_a", "conv_2", "done", 40, &[("user", "Question")]);
    voice.put(
        "agent_a",
        "conv_3",
        "in-progress",
        5,
        &[("user", "Still talking")],
    );
    voice.put("agent_other", "conv_x", "done", 10, &[]);
    let mut events = app.state.bus.subscribe();

    let run = sync_done(&app, &u.token, json!({})).await;
    assert_eq!(run["status"], json!("succeeded"));
    assert_eq!(
        counts(&run),
        json!({"genies": 1, "created": 3, "updated": 0, "unchanged": 0, "errors": []})
    );
    assert_eq!(app.count("conversations").await, 3);
    // Paged with the cursor, only the user's provisioned genie.
    assert_eq!(
        *voice.listed.lock().unwrap(),
        vec![
            ("agent_a".to_string(), None),
            ("agent_a".to_string(), Some("2".to_string()))
        ]
    );
    let completed: Vec<String> = std::iter::from_fn(|| events.try_recv().ok())
        .map(|e| e.kind)
        .collect();
    assert_eq!(
        completed,
        vec!["conversation.completed", "conversation.completed"]
    );

    // Second run: nothing new; the unfinished one is fetched again.
    voice.fetched.lock().unwrap().clear();
    let run = sync_done(&app, &u.token, json!({})).await;
    assert_eq!(
        counts(&run),
        json!({"genies": 1, "created": 0, "updated": 1, "unchanged": 2, "errors": []})
    );
    assert_eq!(*voice.fetched.lock().unwrap(), vec!["conv_3".to_string()]);
    assert_eq!(app.count("conversations").await, 3);

    // It finishes on the platform; a new one appears.
    voice.put(
        "agent_a",
        "conv_3",
        "done",
        65,
        &[("user", "Still talking"), ("agent", "Bye")],
    );
    voice.put("agent_a", "conv_4", "failed", 0, &[]);
    let run = sync_done(&app, &u.token, json!({"genieId": g})).await;
    assert_eq!(
        counts(&run),
        json!({"genies": 1, "created": 1, "updated": 1, "unchanged": 2, "errors": []})
    );
    assert_eq!(app.count("conversations").await, 4);

    let r = app
        .call(
            &u.token,
            "conversations",
            "all",
            None,
            json!({"status": "done"}),
        )
        .await;
    let data = r.ok(200);
    assert_eq!(data["count"], json!(3));
    let c3 = data["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["external_id"] == json!("conv_3"))
        .unwrap()
        .clone();
    assert_eq!(c3["duration_seconds"], json!(65));
    assert_eq!(c3["genie"], json!({"id": g, "name": "Phone Genie"}));
    assert_eq!(c3["channel"], json!("phone"));
    assert_eq!(c3["metadata"], json!({"provider": {"cost": 65}}));
    assert!(
        c3.get("transcript").is_none(),
        "listings carry no transcript"
    );
    let got = app
        .call(
            &u.token,
            "conversations",
            "get",
            Some(c3["id"].clone()),
            json!({}),
        )
        .await;
    let conv = &got.ok(200)["conversation"];
    assert_eq!(
        conv["transcript"],
        json!([
            {"role": "user", "message": "Still talking", "text": "Still talking", "time_in_call_secs": 0.0},
            {"role": "agent", "message": "Bye", "text": "Bye", "time_in_call_secs": 2.5}
        ])
    );
    assert_eq!(conv["started_at"], json!("2025-10-09T08:54:25.000Z"));
    // The other user's conversation was never pulled; theirs is not ours.
    let theirs = app
        .call(&other.token, "conversations", "all", None, json!({}))
        .await;
    assert_eq!(theirs.ok(200)["count"], json!(0));
    app.call(
        &other.token,
        "conversations",
        "get",
        Some(c3["id"].clone()),
        json!({}),
    )
    .await
    .err(404, "NOT_FOUND");
}

#[tokio::test]
async fn sync_reports_provider_failures() {
    let voice = Arc::new(FakeVoice::default());
    let app = TestApp::spawn_with_voice(voice.clone(), |c| c.job_backoff_base_ms = 5).await;
    let u = app.standard().await;
    let g = insert_genie_with(
        &app,
        &u,
        "Broken",
        json!({"external_agent_id": "agent_broken"}),
    )
    .await;
    // A provider that keeps failing: retried, then the run fails with its words.
    let run = sync_done(&app, &u.token, json!({})).await;
    assert_eq!(run["status"], json!("failed"), "{run}");
    assert_eq!(run["errors"][0]["genie_id"], json!(g));
    assert!(
        run["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("agent unavailable"),
        "{run}"
    );
    let tries = voice
        .listed
        .lock()
        .unwrap()
        .iter()
        .filter(|(a, _)| a == "agent_broken")
        .count();
    assert_eq!(tries, 3, "one list call per attempt");
    let plain = insert_genie(&app, &u, "Plain").await;
    app.call(
        &u.token,
        "conversations",
        "sync",
        None,
        json!({"genieId": plain}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    app.call(
        &u.token,
        "conversations",
        "sync",
        None,
        json!({"genieId": uuid::Uuid::new_v4().to_string()}),
    )
    .await
    .err(404, "AGENT_NOT_FOUND");
    // One good genie and one broken: partial success with the error listed.
    insert_genie_with(&app, &u, "Good", json!({"external_agent_id": "agent_good"})).await;
    voice.put("agent_good", "c1", "done", 3, &[]);
    let d = sync_done(&app, &u.token, json!({})).await;
    assert_eq!(d["status"], json!("succeeded"));
    assert_eq!(d["created"], json!(1));
    assert_eq!(d["errors"][0]["genie_id"], json!(g));
    // With nothing to sync, sync succeeds with zero.
    let lone = app.standard().await;
    let run = sync_done(&app, &lone.token, json!({})).await;
    assert_eq!(
        (run["genies"].clone(), run["status"].clone()),
        (json!(0), json!("succeeded"))
    );
    // Another user's run reads as absent.
    app.call(
        &u.token,
        "conversations",
        "sync-status",
        Some(run["id"].clone()),
        json!({}),
    )
    .await
    .err(404, "NOT_FOUND");
}

fn transcript() -> Value {
    json!([
        {"role": "agent", "message": "Hello! How can I help?", "time_in_call_secs": 0},
        {"role": "user", "text": "Hi, my name is Maria Garcia. I'd like a quote for solar panels, it's great.", "time_in_call_secs": 3.5},
        {"role": "user", "message": "Email me at maria@example.test or call +1 555 010 0199. Budget is $12,000 and we want it next month.", "time_in_call_secs": 9}
    ])
}

#[tokio::test]
async fn create_list_get_update_delete() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let other = app.standard().await;
    let admin = app.admin().await;
    let g = insert_genie(&app, &u, "Web Genie").await;
    let g2 = insert_genie(&app, &u, "Second").await;
    let og = insert_genie(&app, &other, "Theirs").await;
    let r = app
        .call(
            &u.token,
            "conversations",
            "create",
            None,
            json!({"genieId": g, "transcript": transcript(), "tags": ["vip", "vip"], "metadata": {"page": "/"}}),
        )
        .await;
    let c = r.ok(201)["conversation"].clone();
    assert_eq!(c["channel"], json!("web"));
    assert_eq!(c["status"], json!("done"));
    assert_eq!(c["duration_seconds"], json!(9));
    assert_eq!(c["turn_count"], json!(3));
    assert_eq!(c["tags"], json!(["vip"]));
    assert_eq!(c["transcript"][1]["message"], c["transcript"][1]["text"]);
    assert_eq!(c["transcript"][1]["time_in_call_secs"], json!(3.5));
    let id = c["id"].clone();
    let old = app
        .call(&u.token, "conversations", "create", None, json!({"genieId": g2, "channel": "phone", "status": "failed", "startedAt": "2020-02-01T10:00:00Z", "transcript": []}))
        .await;
    let old_id = old.ok(201)["conversation"]["id"].clone();
    // Bad input changes nothing.
    for bad in [
        json!({"genieId": og}),
        json!({"genieId": g, "channel": "fax"}),
        json!({"genieId": g, "status": "over"}),
        json!({"genieId": g, "transcript": [{"role": "robot", "message": "x"}]}),
        json!({"genieId": g, "transcript": [{"role": "user"}]}),
        json!({"genieId": g, "startedAt": "yesterday"}),
        json!({"genieId": g, "metadata": []}),
    ] {
        let r = app
            .call(&u.token, "conversations", "create", None, bad.clone())
            .await;
        assert!(r.status == 400 || r.status == 404, "{bad}: {}", r.body);
    }
    assert_eq!(app.count("conversations").await, 2);

    let ids = |r: &Resp| -> Vec<Value> {
        r.ok(200)["conversations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].clone())
            .collect()
    };
    let list = |d: Value| app.call(&u.token, "conversations", "list", None, d);
    assert_eq!(
        ids(&list(json!({})).await),
        vec![id.clone(), old_id.clone()]
    );
    assert_eq!(
        ids(&list(json!({"genieId": g2})).await),
        vec![old_id.clone()]
    );
    assert_eq!(
        ids(&list(json!({"status": "failed"})).await),
        vec![old_id.clone()]
    );
    assert_eq!(
        ids(&list(json!({"channel": "web"})).await),
        vec![id.clone()]
    );
    assert_eq!(
        ids(&list(json!({"filters": {"genieId": g2, "status": "failed"}})).await),
        vec![old_id.clone()]
    );
    let r = app
        .request(
            reqwest::Method::GET,
            "/v1/conversations?status=failed&limit=5",
            Some(&u.token),
            None,
        )
        .await;
    assert_eq!(r.ok(200)["count"], json!(1));
    assert_eq!(
        ids(&list(json!({"dateRange": "30d"})).await),
        vec![id.clone()]
    );
    assert_eq!(
        ids(&list(json!({"from": "2020-01-01T00:00:00Z", "to": "2020-03-01T00:00:00Z"})).await),
        vec![old_id.clone()]
    );
    let r = list(json!({"limit": 1, "offset": 1})).await;
    assert_eq!(ids(&r), vec![old_id.clone()]);
    assert_eq!(
        (
            r.ok(200)["count"].clone(),
            r.ok(200)["limit"].clone(),
            r.ok(200)["offset"].clone()
        ),
        (json!(2), json!(1), json!(1))
    );
    list(json!({"status": "nope"}))
        .await
        .err(400, "VALIDATION_ERROR");
    list(json!({"dateRange": "2d"}))
        .await
        .err(400, "VALIDATION_ERROR");
    list(json!({"adminMode": true})).await.err(403, "FORBIDDEN");
    let r = app
        .call(
            &admin.token,
            "conversations",
            "all",
            None,
            json!({"adminMode": true}),
        )
        .await;
    assert_eq!(r.ok(200)["count"], json!(2));

    // update: metadata merged (null removes), tags replaced.
    let r = app
        .call(
            &u.token,
            "conversations",
            "update",
            Some(id.clone()),
            json!({"metadata": {"crm": "x", "page": null}, "tags": ["hot"]}),
        )
        .await;
    let c = &r.ok(200)["conversation"];
    assert_eq!(c["metadata"], json!({"crm": "x"}));
    assert_eq!(c["tags"], json!(["hot"]));
    app.call(
        &u.token,
        "conversations",
        "update",
        Some(id.clone()),
        json!({"status": "done"}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    app.call(
        &u.token,
        "conversations",
        "update",
        Some(id.clone()),
        json!({"tags": [""]}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    app.call(
        &other.token,
        "conversations",
        "update",
        Some(id.clone()),
        json!({"tags": []}),
    )
    .await
    .err(404, "NOT_FOUND");
    app.call(
        &other.token,
        "conversations",
        "delete",
        Some(id.clone()),
        json!({}),
    )
    .await
    .err(404, "NOT_FOUND");
    let d = app
        .call(
            &u.token,
            "conversations",
            "delete",
            Some(id.clone()),
            json!({}),
        )
        .await;
    assert_eq!(d.ok(200), &json!({"id": id, "deleted": true}));
    app.call(
        &u.token,
        "conversations",
        "get",
        Some(id.clone()),
        json!({}),
    )
    .await
    .err(404, "NOT_FOUND");
    assert_eq!(app.count("conversations").await, 1);

    // Consumers read the conversations of assigned genies, and cannot change them.
    let consumer = app.consumer().await;
    assign(&app, &g2, &consumer).await;
    let r = app
        .call(&consumer.token, "conversations", "all", None, json!({}))
        .await;
    assert_eq!(r.ok(200)["count"], json!(1));
    app.call(
        &consumer.token,
        "conversations",
        "get",
        Some(old_id.clone()),
        json!({}),
    )
    .await
    .ok(200);
    app.call(
        &consumer.token,
        "conversations",
        "delete",
        Some(old_id),
        json!({}),
    )
    .await
    .err(403, "FORBIDDEN");
}

#[tokio::test]
async fn analyze_without_llm_extracts_deterministically_and_creates_the_lead() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let g = insert_genie(&app, &u, "Solar").await;
    let c = app
        .call(
            &u.token,
            "conversations",
            "create",
            None,
            json!({"genieId": g, "transcript": transcript()}),
        )
        .await;
    let cid = c.ok(201)["conversation"]["id"].clone();
    let mut events = app.state.bus.subscribe();
    let r = app
        .call(
            &u.token,
            "conversations",
            "analyze",
            Some(cid.clone()),
            json!({}),
        )
        .await;
    let d = r.ok(200);
    assert_eq!(d["method"], json!("deterministic"));
    let a = &d["analysis"];
    assert_eq!(a["method"], json!("deterministic"));
    assert_eq!(a["intent"], json!("purchase"));
    assert_eq!(a["sentiment"], json!("positive"));
    assert_eq!(
        a["contact"],
        json!({"name": "Maria Garcia", "email": "maria@example.test", "phone": "+15550100199", "budget": "$12,000", "timeline": "next month"})
    );
    assert!(
        a["summary"]
            .as_str()
            .unwrap()
            .contains("quote for solar panels")
    );
    assert_eq!(d["lead_action"], json!("created"));
    let lead = &d["lead"];
    assert_eq!(lead["name"], json!("Maria Garcia"));
    assert_eq!(lead["email"], json!("maria@example.test"));
    assert_eq!(lead["budget"], json!("$12,000"));
    assert_eq!(lead["agent_id"], json!(g));
    assert_eq!(lead["user_id"], json!(u.id));
    assert_eq!(lead["status"], json!("new"));
    assert_eq!(lead["conversation_ref"], cid);
    assert_eq!(d["conversation"]["analysis"], *a);
    assert_eq!(d["conversation"]["summary"], a["summary"]);
    let kinds: Vec<String> = std::iter::from_fn(|| events.try_recv().ok())
        .map(|e| e.kind)
        .collect();
    assert_eq!(kinds, vec!["conversation.analyzed", "lead.created"]);

    // Again: the same lead; a field a person edited is kept, an emptied one is filled.
    let lid = lead["id"].clone();
    app.call(
        &u.token,
        "leads",
        "update",
        Some(lid.clone()),
        json!({"name": "Maria G.", "phone": null}),
    )
    .await
    .ok(200);
    let r = app
        .call(
            &u.token,
            "conversations",
            "analyze",
            Some(cid.clone()),
            json!({}),
        )
        .await;
    let d = r.ok(200);
    assert_eq!(d["lead_action"], json!("updated"));
    assert_eq!(d["lead"]["id"], lid);
    assert_eq!(d["lead"]["name"], json!("Maria G."));
    assert_eq!(d["lead"]["phone"], json!("+15550100199"));
    assert_eq!(app.count("leads").await, 1);
    // createLead false leaves leads alone; nobody else can analyze.
    let r = app
        .call(
            &u.token,
            "conversations",
            "analyze",
            Some(cid.clone()),
            json!({"createLead": false}),
        )
        .await;
    assert_eq!(r.ok(200)["lead_action"], json!("none"));
    let other = app.standard().await;
    app.call(
        &other.token,
        "conversations",
        "analyze",
        Some(cid.clone()),
        json!({}),
    )
    .await
    .err(404, "NOT_FOUND");
    // Deleting the conversation keeps the lead and clears its link.
    app.call(
        &u.token,
        "conversations",
        "delete",
        Some(cid.clone()),
        json!({}),
    )
    .await
    .ok(200);
    let l = app
        .call(&u.token, "leads", "get", Some(lid), json!({}))
        .await;
    assert_eq!(l.ok(200)["lead"]["conversation_ref"], Value::Null);
}

#[tokio::test]
async fn analyze_with_llm_sends_the_transcript_and_uses_the_answer() {
    let llm = FakeOpenAi::start(Expect::Any).await;
    let app = TestApp::spawn_with(|c| {
        llm.configure(c);
        c.llm_model = "analysis-model".into();
    })
    .await;
    let u = app.standard().await;
    let g = insert_genie(&app, &u, "Solar").await;
    let c = app
        .call(
            &u.token,
            "conversations",
            "create",
            None,
            json!({"genieId": g, "transcript": transcript()}),
        )
        .await;
    let cid = c.ok(201)["conversation"]["id"].clone();
    llm.push([LlmTurn::Answer(
        "```json\n{\"summary\": \"Maria wants solar panels.\", \"intent\": \"purchase\", \"sentiment\": \"positive\", \
         \"contact\": {\"name\": \"Maria Garcia\", \"email\": \"maria@example.test\", \"phone\": null, \"budget\": \"12000 USD\", \"timeline\": \"June\"}}\n```",
    )]);
    let r = app
        .call(
            &u.token,
            "conversations",
            "analyze",
            Some(cid.clone()),
            json!({}),
        )
        .await;
    let d = r.ok(200);
    assert_eq!(d["method"], json!("llm"));
    assert_eq!(d["analysis"]["summary"], json!("Maria wants solar panels."));
    assert_eq!(d["analysis"]["model"], json!("analysis-model"));
    assert_eq!(d["analysis"]["contact"]["budget"], json!("12000 USD"));
    assert_eq!(d["analysis"]["contact"]["phone"], Value::Null);
    assert_eq!(d["lead"]["timeline"], json!("June"));
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 1);
    assert!(reqs[0].problems.is_empty(), "{:?}", reqs[0].problems);
    let body = &reqs[0].body;
    assert_eq!(body["model"], json!("analysis-model"));
    assert_eq!(body["messages"][0]["role"], json!("system"));
    assert!(
        body["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("JSON")
    );
    let user_msg = body["messages"][1]["content"].as_str().unwrap();
    assert!(
        user_msg.contains("user: Hi, my name is Maria Garcia"),
        "{user_msg}"
    );
    assert!(user_msg.contains("agent: Hello! How can I help?"));

    // Garbage from the model: fall back to deterministic extraction, and say why.
    llm.push([LlmTurn::Answer("Sorry, I can't help with that.")]);
    let r = app
        .call(
            &u.token,
            "conversations",
            "analyze",
            Some(cid.clone()),
            json!({}),
        )
        .await;
    let d = r.ok(200);
    assert_eq!(d["method"], json!("deterministic"));
    assert!(
        d["analysis"]["llm_error"]
            .as_str()
            .unwrap()
            .contains("JSON")
    );
    assert_eq!(
        d["analysis"]["contact"]["email"],
        json!("maria@example.test")
    );
    // The endpoint failing: the same fallback.
    llm.push([LlmTurn::Raw(500, json!({"error": "down"}))]);
    let r = app
        .call(&u.token, "conversations", "analyze", Some(cid), json!({}))
        .await;
    assert_eq!(r.ok(200)["method"], json!("deterministic"));
    assert_eq!(llm.requests().len(), 3);
    assert_eq!(llm.problems(), Vec::<String>::new());
}

#[tokio::test]
async fn finished_conversation_report_becomes_a_dashboard_notification_without_smtp() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let g = insert_genie_with(&app, &u, "Reporter", json!({"send_conversation_reports": true, "support_emails": ["support@example.test", "ops@example.test"]}))
    .await;
    let quiet = insert_genie_with(
        &app,
        &u,
        "Quiet",
        json!({"support_emails": ["support@example.test"]}),
    )
    .await;
    app.call(
        &u.token,
        "conversations",
        "create",
        None,
        json!({"genieId": quiet, "transcript": transcript()}),
    )
    .await
    .ok(201);
    app.call(
        &u.token,
        "conversations",
        "create",
        None,
        json!({"genieId": g, "status": "in-progress"}),
    )
    .await
    .ok(201);
    app.call(
        &u.token,
        "conversations",
        "create",
        None,
        json!({"genieId": g, "transcript": transcript()}),
    )
    .await
    .ok(201);
    // The worker runs the report job; poll for it (bounded).
    for _ in 0..200 {
        if app.count("email_logs").await >= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    app.run_jobs().await;
    let uid = u.id.clone();
    let (logs, notes) = app
        .state
        .db
        .read(move |c| {
            let mut st = c.prepare(
                "SELECT recipient, status, subject, body FROM email_logs WHERE user_id = ?1 ORDER BY recipient",
            )?;
            let logs: Vec<(String, String, String, String)> = st
                .query_map([&uid], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
                .collect::<Result<_, _>>()?;
            let mut st = c.prepare("SELECT kind, title, data FROM notifications WHERE user_id = ?1")?;
            let notes: Vec<(String, String, String)> =
                st.query_map([&uid], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect::<Result<_, _>>()?;
            Ok((logs, notes))
        })
        .await
        .unwrap();
    assert_eq!(logs.len(), 2, "{logs:?}");
    assert_eq!(logs[0].0, "ops@example.test");
    assert_eq!(logs[1].0, "support@example.test");
    assert!(logs.iter().all(|l| l.1 == "notified"));
    assert!(logs[0].2.starts_with("Conversation report: Reporter"));
    assert!(logs[0].3.contains("user: Hi, my name is Maria Garcia"));
    assert_eq!(notes.len(), 1);
    assert_eq!(notes[0].0, "conversation_report");
    let data: Value = serde_json::from_str(&notes[0].2).unwrap();
    assert_eq!(data["genie_id"], json!(g));
    assert_eq!(
        data["recipients"],
        json!(["support@example.test", "ops@example.test"])
    );
}

async fn report_logs(
    app: &TestApp,
    user: &User,
    want: usize,
) -> Vec<(String, String, Option<String>)> {
    for _ in 0..250 {
        if app.count("email_logs").await >= want as i64 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let uid = user.id.clone();
    app.state
        .db
        .read(move |c| {
            let mut st =
                c.prepare("SELECT recipient, status, error FROM email_logs WHERE user_id = ?1 ORDER BY recipient")?;
            let rows =
                st.query_map([&uid], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
        .await
        .unwrap()
}

#[tokio::test]
async fn finished_conversation_report_is_mailed_over_smtp() {
    let smtp = crate::common::fakes::smtp::FakeSmtp::start().await;
    let url = smtp.url.clone();
    let app = TestApp::spawn_with(|c| {
        c.smtp_url = Some(genied::config::Secret(url));
        c.smtp_from = "Genied Reports <reports@genied.test>".into();
    })
    .await;
    let u = app.standard().await;
    let g = insert_genie_with(
        &app,
        &u,
        "Mailer",
        json!({"send_conversation_reports": true, "support_emails": ["support@example.test"]}),
    )
    .await;
    app.call(
        &u.token,
        "conversations",
        "create",
        None,
        json!({"genieId": g, "transcript": transcript()}),
    )
    .await
    .ok(201);
    let logs = report_logs(&app, &u, 1).await;
    assert_eq!(
        logs,
        vec![("support@example.test".to_string(), "sent".to_string(), None)]
    );
    let mails = smtp.mails();
    assert_eq!(mails.len(), 1);
    assert_eq!(mails[0].from, "reports@genied.test");
    assert_eq!(mails[0].to, vec!["support@example.test".to_string()]);
    assert!(
        mails[0]
            .data
            .contains("Subject: Conversation report: Mailer"),
        "{}",
        mails[0].data
    );
    assert!(
        mails[0].data.contains("my name is Maria Garcia"),
        "{}",
        mails[0].data
    );
    assert_eq!(
        app.count("notifications").await,
        0,
        "delivered mail makes no notification"
    );
}

#[tokio::test]
async fn smtp_failure_is_logged_and_kept_as_a_notification() {
    // A port nobody listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let app = TestApp::spawn_with(|c| {
        c.smtp_url = Some(genied::config::Secret(format!("smtp://{closed}")))
    })
    .await;
    let u = app.standard().await;
    let g = insert_genie_with(
        &app,
        &u,
        "Mailer",
        json!({"send_conversation_reports": true, "support_emails": ["support@example.test"]}),
    )
    .await;
    app.call(
        &u.token,
        "conversations",
        "create",
        None,
        json!({"genieId": g, "transcript": transcript()}),
    )
    .await
    .ok(201);
    let logs = report_logs(&app, &u, 1).await;
    assert_eq!(logs.len(), 1);
    assert_eq!(logs[0].1, "failed");
    assert!(
        logs[0].2.as_deref().unwrap_or("").contains("SMTP"),
        "{logs:?}"
    );
    assert_eq!(app.count("notifications").await, 1);
}

#[tokio::test]
async fn a_sync_interrupted_mid_way_resumes_from_its_saved_position() {
    let voice = Arc::new(FakeVoice::default());
    let app = TestApp::spawn_with_voice(voice.clone(), |c| c.job_backoff_base_ms = 5).await;
    let u = app.standard().await;
    insert_genie_with(&app, &u, "Phone", json!({"external_agent_id": "agent_r"})).await;
    for i in 1..=5 {
        voice.put("agent_r", &format!("r{i}"), "done", i, &[("user", "hi")]);
    }
    // The provider fails once on the second page: the job stops there and its retry goes on
    // from the saved cursor, not from the first page.
    *voice.fail_once_at.lock().unwrap() = Some("2".into());
    let run = sync_done(&app, &u.token, json!({})).await;
    assert_eq!(
        counts(&run),
        json!({"genies": 1, "created": 5, "updated": 0, "unchanged": 0, "errors": []})
    );
    assert_eq!(run["genies_done"], json!(1));
    let s = |c: Option<&str>| ("agent_r".to_string(), c.map(str::to_string));
    assert_eq!(
        *voice.listed.lock().unwrap(),
        vec![s(None), s(Some("2")), s(Some("2")), s(Some("4"))]
    );
    let mut fetched = voice.fetched.lock().unwrap().clone();
    fetched.sort();
    assert_eq!(fetched, ["r1", "r2", "r3", "r4", "r5"], "each fetched once");
    assert_eq!(app.count("conversations").await, 5);
}

/// What a user's `conversations all` covers, counted row by row (the oracle for the kept
/// counts): their own, and those of genies assigned to them that they do not own.
async fn conversations_counted(app: &TestApp, user: &User, status: Option<&str>) -> i64 {
    let u = user.id.clone();
    let by_status = status.map_or(String::new(), |s| format!(" AND c.status = '{s}'"));
    app.state
        .db
        .read(move |c| {
            Ok(c.query_row(
                &format!(
                    "SELECT COUNT(*) FROM conversations c
                     WHERE (c.user_id = ?1 OR c.genie_id IN (SELECT genie_id FROM genie_assignments WHERE user_id = ?1)){by_status}"
                ),
                [&u],
                |r| r.get(0),
            )?)
        })
        .await
        .unwrap()
}

#[tokio::test]
async fn conversation_counts_follow_creates_status_changes_and_deletes() {
    let app = TestApp::spawn().await;
    let (u, other, admin) = (
        app.standard().await,
        app.standard().await,
        app.admin().await,
    );
    let g = insert_genie(&app, &u, "Mine").await;
    let og = insert_genie(&app, &other, "Theirs").await;
    assign(&app, &og, &u).await;
    let make = |who: &User, genie: &str, status: &str| {
        let (token, data) = (
            who.token.clone(),
            json!({"genieId": genie, "status": status, "transcript": []}),
        );
        let app = &app;
        async move {
            app.call(&token, "conversations", "create", None, data)
                .await
                .ok(201)["conversation"]["id"]
                .clone()
        }
    };
    let mine = [
        make(&u, &g, "done").await,
        make(&u, &g, "done").await,
        make(&u, &g, "failed").await,
    ];
    make(&other, &og, "done").await;
    make(&other, &og, "failed").await;
    let check = |step: &'static str| {
        let app = &app;
        let (u, other, admin) = (&u, &other, &admin);
        async move {
            for who in [u, other] {
                for status in [None, Some("done"), Some("failed")] {
                    let mut data = json!({"limit": 1});
                    if let Some(s) = status {
                        data["status"] = json!(s);
                    }
                    let r = app
                        .call(&who.token, "conversations", "all", None, data)
                        .await;
                    assert_eq!(
                        r.ok(200)["count"],
                        json!(conversations_counted(app, who, status).await),
                        "{step}: {status:?}"
                    );
                }
            }
            let r = app
                .call(
                    &admin.token,
                    "conversations",
                    "all",
                    None,
                    json!({"adminMode": true}),
                )
                .await;
            assert_eq!(
                r.ok(200)["count"],
                json!(app.count("conversations").await),
                "{step}: admin"
            );
        }
    };
    check("the creates").await;
    // A status change (as a provider sync makes it) and a delete.
    let id = mine[0].as_str().unwrap().to_string();
    app.state
        .db
        .write(move |c| {
            Ok(c.execute(
                "UPDATE conversations SET status = 'failed' WHERE id = ?1",
                [&id],
            )?)
        })
        .await
        .unwrap();
    app.call(
        &u.token,
        "conversations",
        "delete",
        Some(mine[1].clone()),
        json!({}),
    )
    .await
    .ok(200);
    check("a status change and a delete").await;
    assert_eq!(conversations_counted(&app, &u, Some("done")).await, 1);
}
