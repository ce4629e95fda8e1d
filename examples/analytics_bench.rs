//! Seeds 1,000,000 conversations (one user, ten genies, a year of history, a third of them
//! analysed, some with LLM figures; batched inserts, so the rollup triggers run for every
//! row as they do in service) and 100,000 leads into a temporary data directory, starts
//! genied on 127.0.0.1, and prints how long `analytics overview` and `timeseries` take over
//! HTTP, first and warm, with what they answered.
//!
//!     cargo run --release --example analytics_bench [-- <conversation count>]

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
    let genies: Vec<String> = (0..10).map(|_| db::new_id()).collect();

    let seed_start = Instant::now();
    let (g2, u2) = (genies.clone(), uid.clone());
    state
        .db
        .write(move |c| {
            let ts = db::now();
            for (i, g) in g2.iter().enumerate() {
                c.execute(
                    "INSERT INTO genies (id, user_id, name, name_lower, llm_model, created_at, updated_at)
                     VALUES (?1, ?2, ?3, lower(?3), 'bench', ?4, ?4)",
                    rusqlite::params![g, u2, format!("Genie {i}"), ts],
                )?;
            }
            let analyses = [
                Some(r#"{"sentiment":"positive","intent":"purchase"}"#),
                None,
                Some(r#"{"sentiment":"negative","intent":"complaint"}"#),
                None,
                None,
                Some(r#"{"sentiment":"neutral","intent":"booking"}"#),
            ];
            let start = chrono::Utc::now() - chrono::Duration::days(365);
            let step_ms = 365.0 * 24.0 * 3600.0 * 1000.0 / total as f64;
            let row = "(?, ?, ?, 'phone', 'done', ?, ?, ?, ?, ?, ?, ?, ?)";
            let sql = |n: usize| {
                format!(
                    "INSERT INTO conversations (id, user_id, genie_id, channel, status, started_at, duration_seconds,
                         analysis, tokens_in, tokens_out, cost_micros, created_at, updated_at) VALUES {}",
                    vec![row; n].join(", ")
                )
            };
            let mut full = c.prepare(&sql(BATCH))?;
            let mut i = 0usize;
            while i < total {
                let n = BATCH.min(total - i);
                let mut vals: Vec<SqlValue> = Vec::with_capacity(n * 11);
                for k in i..i + n {
                    let at = db::fmt_time(start + chrono::Duration::milliseconds((k as f64 * step_ms) as i64));
                    vals.push(db::new_id().into());
                    vals.push(u2.clone().into());
                    vals.push(g2[k % g2.len()].clone().into());
                    vals.push(at.clone().into());
                    vals.push(((k % 600) as i64).into());
                    vals.push(analyses[k % analyses.len()].map(|a| SqlValue::from(a.to_string())).unwrap_or(SqlValue::Null));
                    let llm = k % 4 == 0;
                    vals.push(if llm { 800i64 } else { 0 }.into());
                    vals.push(if llm { 200i64 } else { 0 }.into());
                    vals.push(if llm { 240i64 } else { 0 }.into());
                    vals.push(at.clone().into());
                    vals.push(at.into());
                }
                if n == BATCH {
                    full.execute(params_from_iter(vals))?;
                } else {
                    c.execute(&sql(n), params_from_iter(vals))?;
                }
                i += n;
            }
            let statuses = ["new", "contacted", "qualified", "converted"];
            for k in 0..total / 10 {
                // Lead times are milliseconds (V40), its genie and user keys (V41).
                let at = (start + chrono::Duration::milliseconds((k as f64 * step_ms * 10.0) as i64)).timestamp_millis();
                c.execute(
                    "INSERT INTO leads (agent_id, user_id, name, status, created_at)
                     VALUES (genied_key(?1), genied_key(?2), 'L', ?3, ?4)",
                    rusqlite::params![g2[k % g2.len()], u2, statuses[k % statuses.len()], at],
                )?;
            }
            Ok(())
        })
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let rollup_rows: i64 = state
        .db
        .read(|c| Ok(c.query_row("SELECT COUNT(*) FROM conversation_rollup", [], |r| r.get(0))?))
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    println!(
        "seeded {total} conversations and {} leads in {:.1} s ({rollup_rows} rollup rows)",
        total / 10,
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
                .json(&json!({"resource": "analytics", "action": action, "data": data}))
                .send()
                .await?;
            let status = resp.status();
            let body: Value = resp.json().await?;
            anyhow::ensure!(status.is_success(), "{action} failed: {body}");
            Ok::<_, anyhow::Error>((t.elapsed(), body))
        }
    };
    let cases: Vec<(&str, &str, Value)> = vec![
        (
            "overview, all time",
            "overview",
            json!({"dateRange": "all"}),
        ),
        ("overview, 30 days", "overview", json!({})),
        (
            "overview, 90 days, one genie",
            "overview",
            json!({"dateRange": "90d", "genie_id": genies[3]}),
        ),
        (
            "timeseries conversations by day, all",
            "timeseries",
            json!({"metric": "conversations", "interval": "day", "dateRange": "all"}),
        ),
        (
            "timeseries cost by hour, 90 days",
            "timeseries",
            json!({"metric": "cost", "interval": "hour", "dateRange": "90d"}),
        ),
        (
            "timeseries success_rate by day, 30d, genie",
            "timeseries",
            json!({"metric": "success_rate", "interval": "day", "genie_id": genies[0]}),
        ),
        (
            "timeseries leads by day, all",
            "timeseries",
            json!({"metric": "leads", "interval": "day", "dateRange": "all"}),
        ),
    ];
    println!(
        "{:<46} {:>9} {:>9}  result",
        "request", "first ms", "warm ms"
    );
    for (label, action, data) in cases {
        let (first, body) = call(action, data.clone()).await?;
        let mut warm = std::time::Duration::MAX;
        for _ in 0..5 {
            warm = warm.min(call(action, data.clone()).await?.0);
        }
        let result = match action {
            "overview" => {
                let o = &body["data"]["overview"];
                format!(
                    "conversations {}, success {}, leads {}, tokens {}+{}",
                    o["conversations"],
                    o["success_rate"],
                    o["leads"]["total"],
                    o["llm"]["tokens_in"],
                    o["llm"]["tokens_out"]
                )
            }
            _ => format!(
                "{} points",
                body["data"]["timeseries"]["points"]
                    .as_array()
                    .map_or(0, Vec::len)
            ),
        };
        println!(
            "{label:<46} {:>9.1} {:>9.1}  {result}",
            first.as_secs_f64() * 1000.0,
            warm.as_secs_f64() * 1000.0
        );
    }
    let _ = tx.send(());
    server.await??;
    Ok(())
}
