//! Benchmark of the genies listing at scale: seeds 100,000 genies straight through the db
//! layer into a temporary data directory, then walks `all` over HTTP page by page (keyset
//! cursor, 500 a page) and prints per-page timings, and times a `list` name search.
//! Nothing here asserts on time; it shows that no page is slower than the first because
//! `all` seeks on (user_id, id) instead of skipping with OFFSET.
//!
//! Run: `cargo run --example genies_bench [-- COUNT]` (default 100000).

use std::time::{Duration, Instant};

use genied::db::genies::{self, GenieRow};
use genied::db::users::Role;
use genied::{Config, build_app, serve};
use serde_json::{Value, json};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let count: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(100_000);
    let dir = tempfile::tempdir()?;
    let mut config = Config::new(dir.path());
    config.listen = "127.0.0.1:0".into();
    config.session_rate_limit_per_minute = 0;
    let app = build_app(config)?;
    let state = app.state.clone();

    let user = state
        .db
        .write(|c| {
            Ok(genied::db::users::insert(
                c,
                "bench@example.test",
                Some("Bench"),
                Role::StandardUser,
                None,
            )?)
        })
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let seeded = Instant::now();
    let batch = 5_000;
    let mut made = 0;
    while made < count {
        let n = batch.min(count - made);
        let uid = user.id.clone();
        let start = made;
        state
            .db
            .write(move |c| {
                for i in start..start + n {
                    genies::insert(c, &row(&uid, i))?;
                }
                Ok(())
            })
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        made += n;
    }
    println!("seeded {count} genies in {:?}", seeded.elapsed());

    let c = &state.config;
    let pair = genied::auth::sessions::open(
        &state.db,
        &state.secrets.jwt_key,
        &user.id,
        Role::StandardUser,
        c.session_ttl_seconds,
        c.refresh_ttl_seconds,
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}/v1", listener.local_addr()?);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(app, listener, async move {
        let _ = stop_rx.await;
    }));
    let client = reqwest::Client::new();
    let call = |data: Value, action: &'static str| {
        let req = client
            .post(&base)
            .bearer_auth(&pair.access_token)
            .json(&json!({"resource": "genies", "action": action, "data": data}));
        async move {
            let t = Instant::now();
            let v: Value = req.send().await?.json().await?;
            anyhow::ensure!(v["success"] == json!(true), "request failed: {v}");
            Ok::<_, anyhow::Error>((t.elapsed(), v))
        }
    };

    let mut times: Vec<Duration> = Vec::new();
    let mut cursor: Option<String> = None;
    let mut seen = 0usize;
    loop {
        let mut data = json!({"limit": 500});
        if let Some(c) = &cursor {
            data["cursor"] = json!(c);
        }
        let (t, v) = call(data, "all").await?;
        times.push(t);
        seen += v["data"]["genies"].as_array().map_or(0, Vec::len);
        match v["data"]["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    let mut sorted = times.clone();
    sorted.sort();
    println!(
        "`all` walked {seen} genies in {} pages of up to 500",
        times.len()
    );
    println!(
        "  first {:?}  median {:?}  last {:?}  max {:?}  (slowest page #{})",
        times[0],
        sorted[sorted.len() / 2],
        times[times.len() - 1],
        sorted[sorted.len() - 1],
        times
            .iter()
            .enumerate()
            .max_by_key(|(_, t)| **t)
            .map_or(0, |(i, _)| i + 1)
    );

    for term in ["bench genie 4242", "GENIE 9999", "no such name"] {
        let (t, v) = call(json!({"searchTerm": term, "limit": 50}), "list").await?;
        println!(
            "`list` search {term:?}: {} matches in {t:?}",
            v["data"]["total"]
        );
    }
    let plan = state
        .db
        .read(|c| {
            let mut st = c.prepare(
                "EXPLAIN QUERY PLAN SELECT COUNT(*) FROM genies g WHERE g.user_id = ?1 AND instr(g.name_lower, ?2) > 0",
            )?;
            let rows = st.query_map(["x", "y"], |r| r.get::<_, String>(3))?.collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(rows)
        })
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    println!("search plan: {}", plan.join(" | "));

    let _ = stop_tx.send(());
    server.await??;
    Ok(())
}

fn row(user_id: &str, i: usize) -> GenieRow {
    let now = genied::db::now();
    GenieRow {
        id: genied::db::new_id(),
        user_id: user_id.to_string(),
        external_agent_id: Some(format!("agent_bench{i:014}")),
        name: format!("Bench Genie {i}"),
        description: None,
        use_case: Some("benchmark".into()),
        category: Some(
            if i.is_multiple_of(2) {
                "Support"
            } else {
                "Sales"
            }
            .into(),
        ),
        brand: None,
        system_prompt: Some("You are a benchmark genie.".into()),
        first_message: Some("Hello".into()),
        voice_id: Some(genied::voice::DEFAULT_VOICE_ID.into()),
        llm_model: "gemini-3-flash-preview".into(),
        temperature: Some(0.5),
        max_tokens: None,
        is_active: true,
        setup_completed: true,
        send_conversation_reports: false,
        voice_disabled: false,
        multilingual: false,
        max_duration_seconds: Some(600),
        turn_timeout_seconds: None,
        silence_end_seconds: None,
        turn_mode: "silence".into(),
        max_calls: None,
        max_calls_per_minute: None,
        settings: json!({}),
        branding: json!({}),
        support_emails: json!([]),
        tools: json!([]),
        allowed_origins: json!([]),
        page_slug: Some(format!("bench-genie-{i}")),
        web_welcome_message: None,
        group_id: None,
        sort_order: i as i64,
        created_at: now.clone(),
        updated_at: now,
    }
}
