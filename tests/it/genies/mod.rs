//! genies over real HTTP: every action, validation with no change, access rules, the local
//! provider's persistence and phone pool, and provider failures against the ElevenLabs fake.
//! One file per action group, as in `src/api/genies/`; here only the helpers they share.

mod assign;
mod clone;
mod input;
mod lifecycle;
mod list;
mod phone;
mod update;
mod view;

use serde_json::{Value, json};

use crate::common::fakes::elevenlabs::{FakeElevenLabs, KEY};
use crate::common::*;

async fn create(app: &TestApp, token: &str, data: Value) -> Value {
    app.call(token, "genies", "create", None, data)
        .await
        .ok(201)["genie"]
        .clone()
}

async fn get(app: &TestApp, token: &str, id: &str) -> Resp {
    app.call(token, "genies", "get", Some(json!(id)), json!({}))
        .await
}

async fn local_agent(app: &TestApp, agent_id: &str) -> Option<Value> {
    let id = agent_id.to_string();
    app.state
        .db
        .read(move |c| {
            Ok(c.query_row("SELECT spec, knowledge_base FROM voice_local_agents WHERE agent_id = ?1", [&id], |r| {
                Ok(json!({"spec": serde_json::from_str::<Value>(&r.get::<_, String>(0)?).unwrap(), "kb": serde_json::from_str::<Value>(&r.get::<_, String>(1)?).unwrap()}))
            })
            .ok())
        })
        .await
        .unwrap()
}

async fn external_id(app: &TestApp, genie_id: &str) -> String {
    let id = genie_id.to_string();
    app.state
        .db
        .read(move |c| {
            Ok(c.query_row(
                "SELECT external_agent_id FROM genies WHERE id = ?1",
                [&id],
                |r| r.get(0),
            )?)
        })
        .await
        .unwrap()
}

async fn el_app(fake: &FakeElevenLabs) -> TestApp {
    let base = fake.base.clone();
    TestApp::spawn_with(move |c| {
        c.voice_provider = "elevenlabs".into();
        c.elevenlabs_base_url = base;
        c.elevenlabs_api_key = Some(genied::config::Secret(KEY.into()));
    })
    .await
}
