//! Benchmark of a streamed page chat turn (`POST /g/{slug}/chat` with
//! `Accept: text/event-stream`) against a fake OpenAI-compatible endpoint that answers at
//! once: genied in-process on loopback, the fake in the same process, a keep-alive client.
//! It measures
//! - request to first streamed token: from sending the request to reading the first
//!   `token` event (everything genied does for a turn: the page's genie, the conversation
//!   and the visitor's message written, the knowledge-base search, the LLM request, the
//!   stream parsed and passed on), and
//! - per-token forwarding delay: each token the fake sends carries the time it was sent
//!   (one clock, one process); the delay is the time the client read it minus that. The
//!   fake spaces its tokens 1 ms apart so each is forwarded on its own.
//!
//! Nothing here asserts on time. Run:
//! `cargo run --release --example chat_stream_bench [-- REQUESTS [TOKENS]]` (default 300, 20).

use std::convert::Infallible;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::response::Response;
use axum::routing::post;
use futures_util::StreamExt;
use genied::{Config, build_app, serve};
use serde_json::json;

static CLOCK: OnceLock<Instant> = OnceLock::new();

fn now_ns() -> u128 {
    CLOCK.get_or_init(Instant::now).elapsed().as_nanos()
}

/// The fake endpoint: `tokens` content chunks, the first at once, then one a millisecond,
/// each token's text the time it was sent; then the finish, the usage and `[DONE]`.
async fn completions(tokens: usize) -> Response {
    let stream = futures_util::stream::unfold(0usize, move |i| async move {
        if i > tokens + 2 {
            return None;
        }
        if i > 0 && i < tokens {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let data = if i < tokens {
            json!({"choices": [{"index": 0, "delta": {"content": format!("{} ", now_ns())}, "finish_reason": null}]}).to_string()
        } else if i == tokens {
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}).to_string()
        } else if i == tokens + 1 {
            json!({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": tokens, "total_tokens": 10 + tokens}}).to_string()
        } else {
            "[DONE]".to_string()
        };
        Some((Ok::<_, Infallible>(format!("data: {data}\n\n")), i + 1))
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap()
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() - 1) as f64 * p).round() as usize]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let requests: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(300);
    let tokens: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(20);
    CLOCK.get_or_init(Instant::now);

    let fake = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let fake_addr = fake.local_addr()?;
    let fake_app = Router::new().route("/v1/chat/completions", post(move || completions(tokens)));
    // Small writes a millisecond apart: without TCP_NODELAY, Nagle's algorithm would hold
    // them back on the fake's side and the figures would measure that, not genied.
    let fake = axum::serve::ListenerExt::tap_io(fake, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move { axum::serve(fake, fake_app).await });

    let dir = tempfile::tempdir()?;
    let mut config = Config::new(dir.path());
    config.listen = "127.0.0.1:0".into();
    config.public_chat_rate_limit_per_minute = 0;
    config.llm_base_url = Some(format!("http://{fake_addr}/v1"));
    config.llm_model = "bench-model".into();
    let app = build_app(config)?;
    let state = app.state.clone();
    state
        .db
        .write(|c| {
            let u = genied::db::users::insert(
                c,
                "bench@example.test",
                Some("Bench"),
                genied::db::users::Role::StandardUser,
                None,
            )?;
            let at = genied::db::now();
            c.execute(
                "INSERT INTO genies (id, user_id, name, name_lower, llm_model, page_slug, created_at, updated_at)
                 VALUES (?1, ?2, 'Bench', 'bench', 'bench-model', 'bench', ?3, ?3)",
                rusqlite::params![genied::db::new_id(), u.id, at],
            )?;
            Ok(())
        })
        .await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let _ = serve(app, listener, async move {
            let _ = stop_rx.await;
        })
        .await;
    });

    let client = reqwest::Client::new();
    let mut first = Vec::new();
    let mut forward = Vec::new();
    let warmup = 20;
    for n in 0..warmup + requests {
        let t0 = Instant::now();
        let resp = client
            .post(format!("{base}/g/bench/chat"))
            .header("accept", "text/event-stream")
            .json(&json!({"message": "hello, when do you open?"}))
            .send()
            .await?;
        anyhow::ensure!(resp.status() == 200, "status {}", resp.status());
        let mut body = resp.bytes_stream();
        let mut buf = String::new();
        let mut seen_first = false;
        let mut done = false;
        while let Some(chunk) = body.next().await {
            let read_at = now_ns();
            buf.push_str(&String::from_utf8_lossy(&chunk?));
            while let Some(end) = buf.find("\n\n") {
                let block: String = buf.drain(..end + 2).collect();
                if block.starts_with("event: token") {
                    if !seen_first {
                        seen_first = true;
                        if n >= warmup {
                            first.push(t0.elapsed().as_secs_f64() * 1000.0);
                        }
                    }
                    let data = block
                        .lines()
                        .find_map(|l| l.strip_prefix("data: "))
                        .unwrap_or("{}");
                    let v: serde_json::Value = serde_json::from_str(data)?;
                    let sent: u128 = v["text"].as_str().unwrap_or("0").trim().parse()?;
                    if n >= warmup {
                        forward.push((read_at - sent) as f64 / 1e6);
                    }
                } else if block.starts_with("event: done") {
                    done = true;
                } else if block.starts_with("event: error") {
                    anyhow::bail!("error event: {block}");
                }
            }
        }
        anyhow::ensure!(done && seen_first, "incomplete stream");
    }
    let _ = stop_tx.send(());
    let _ = server.await;
    println!("requests: {requests} (after {warmup} warm-up), tokens per reply: {tokens}");
    println!(
        "request to first streamed token, ms: p50 {:.3}  p90 {:.3}  p99 {:.3}",
        pct(&mut first, 0.5),
        pct(&mut first, 0.9),
        pct(&mut first, 0.99)
    );
    println!(
        "per-token forwarding delay, ms: p50 {:.3}  p90 {:.3}  p99 {:.3}  ({} tokens)",
        pct(&mut forward, 0.5),
        pct(&mut forward, 0.9),
        pct(&mut forward, 0.99),
        forward.len()
    );
    Ok(())
}
