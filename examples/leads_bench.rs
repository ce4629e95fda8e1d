//! Seeds 1,000,000 leads (one user, five agents, a year of history; batched inserts in one
//! transaction) into a temporary data directory, starts genied on 127.0.0.1, and prints how
//! long `leads stats` and filtered `leads all` pages take over HTTP.
//!
//!     cargo run --example leads_bench [-- <lead count>]

use std::time::Instant;

use genied::db::sql::params_from_iter;
use genied::db::{self, users::Role};
use rusqlite::types::Value as SqlValue;
use serde_json::{Value, json};

const BATCH: usize = 500;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let total: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir()?;
    let mut config = genied::Config::new(dir.path());
    config.rate_limit_per_minute = 0;
    config.session_rate_limit_per_minute = 0;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let app = genied::build_app(config)?;
    let state = app.state.clone();

    let user = state
        .db
        .write(|c| {
            Ok(db::users::insert(
                c,
                "bench@example.test",
                Some("Bench"),
                Role::StandardUser,
                None,
            )?)
        })
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let uid = user.id.clone();
    let agents: Vec<String> = (0..5).map(|_| db::new_id()).collect();

    let seed_start = Instant::now();
    let (a2, u2) = (agents.clone(), uid.clone());
    state
        .db
        .write(move |c| {
            let ts = db::now();
            for (i, a) in a2.iter().enumerate() {
                c.execute(
                    "INSERT INTO genies (id, user_id, name, name_lower, llm_model, created_at, updated_at)
                     VALUES (?1, ?2, ?3, lower(?3), 'bench', ?4, ?4)",
                    rusqlite::params![a, u2, format!("Agent {i}"), ts],
                )?;
            }
            let statuses: [Option<&str>; 6] =
                [Some("new"), Some("contacted"), Some("qualified"), Some("converted"), None, Some("archived")];
            let priorities = ["low", "medium", "high"];
            let start = chrono::Utc::now() - chrono::Duration::days(365);
            let step_ms = 365.0 * 24.0 * 3600.0 * 1000.0 / total as f64;
            let row = "(?, ?, ?, ?, ?, ?, ?, ?, ?)";
            let full_sql = format!(
                "INSERT INTO leads (agent_id, user_id, name, email, phone, status, priority, created_at, updated_at) VALUES {}",
                vec![row; BATCH].join(", ")
            );
            let mut full = c.prepare(&full_sql)?;
            let mut i = 0usize;
            while i < total {
                let n = BATCH.min(total - i);
                let mut vals: Vec<SqlValue> = Vec::with_capacity(n * 9);
                for k in i..i + n {
                    // Milliseconds since the epoch (V40).
                    let at = (start + chrono::Duration::milliseconds((k as f64 * step_ms) as i64)).timestamp_millis();
                    // A lead keeps its genie's and user's keys (V41).
                    vals.push(db::keys::value(&a2[k % a2.len()]));
                    vals.push(db::keys::value(&u2));
                    vals.push(format!("Lead {k}").into());
                    vals.push(format!("lead{k}@example.test").into());
                    vals.push(format!("+1555{k:07}").into());
                    vals.push(statuses[k % statuses.len()].map(|s| SqlValue::from(s.to_string())).unwrap_or(SqlValue::Null));
                    vals.push(priorities[k % priorities.len()].to_string().into());
                    vals.push(at.into());
                    vals.push(at.into());
                }
                if n == BATCH {
                    full.execute(params_from_iter(vals))?;
                } else {
                    let sql = format!(
                        "INSERT INTO leads (agent_id, user_id, name, email, phone, status, priority, created_at, updated_at) VALUES {}",
                        vec![row; n].join(", ")
                    );
                    c.execute(&sql, params_from_iter(vals))?;
                }
                i += n;
            }
            Ok(())
        })
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    println!(
        "seeded {total} leads in {:.1} s",
        seed_start.elapsed().as_secs_f64()
    );

    let c = &state.config;
    let token = genied::auth::sessions::open(
        &state.db,
        &state.secrets.jwt_key,
        &uid,
        Role::StandardUser,
        c.session_ttl_seconds,
        c.refresh_ttl_seconds,
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e}"))?
    .access_token;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(genied::serve(app, listener, async move {
        let _ = rx.await;
    }));
    let client = reqwest::Client::new();
    let base = format!("http://{addr}/v1");
    let call = |action: &'static str, data: Value| {
        let (client, base, token) = (client.clone(), base.clone(), token.clone());
        async move {
            let t = Instant::now();
            let resp = client
                .post(&base)
                .bearer_auth(&token)
                .json(&json!({"resource": "leads", "action": action, "data": data}))
                .send()
                .await?;
            let status = resp.status();
            let body: Value = resp.json().await?;
            anyhow::ensure!(status.is_success(), "{action} failed: {body}");
            Ok::<_, anyhow::Error>((t.elapsed(), body))
        }
    };

    let cases: Vec<(&str, &str, Value)> = vec![
        ("stats (all agents)", "stats", json!({})),
        (
            "stats (one agent)",
            "stats",
            json!({"filters": {"agentId": agents[0]}}),
        ),
        (
            "stats (priority high, 30d)",
            "stats",
            json!({"filters": {"priority": "high", "dateRange": "30d"}}),
        ),
        ("all page 1 (no filter)", "all", json!({"limit": 50})),
        (
            "all page (agent + status)",
            "all",
            json!({"limit": 50, "filters": {"agentId": agents[1], "status": "qualified"}}),
        ),
        (
            "all page (agents + priority, offset 1000)",
            "all",
            json!({"limit": 50, "offset": 1000, "filters": {"agentIds": [agents[2], agents[3]], "priority": "low"}}),
        ),
        (
            "all page (status, 7d)",
            "all",
            json!({"limit": 50, "filters": {"status": "new", "dateRange": "7d"}}),
        ),
        (
            "all page (searchTerm)",
            "all",
            json!({"limit": 50, "filters": {"searchTerm": "lead99999"}}),
        ),
        (
            "list page (agent)",
            "list",
            json!({"limit": 50, "filters": {"agentId": agents[4]}}),
        ),
    ];
    println!(
        "{:<45} {:>10} {:>10}  result",
        "request", "first ms", "warm ms"
    );
    for (label, action, data) in cases {
        let (first, body) = call(action, data.clone()).await?;
        let (warm, _) = call(action, data).await?;
        let result = match action {
            "stats" => body["data"]["stats"].to_string(),
            _ => format!(
                "count {} / page {}",
                body["data"]["count"],
                body["data"]["leads"].as_array().map(Vec::len).unwrap_or(0)
            ),
        };
        println!(
            "{label:<45} {:>10.1} {:>10.1}  {result}",
            first.as_secs_f64() * 1000.0,
            warm.as_secs_f64() * 1000.0
        );
    }
    let _ = tx.send(());
    server.await??;
    Ok(())
}
