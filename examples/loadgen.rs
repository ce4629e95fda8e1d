//! A small closed-loop HTTP load generator: fixed concurrency over keep-alive connections,
//! a warm-up, then a fixed duration (or request count), reporting requests/s and latency
//! percentiles, optionally into a JSON file. Loopback targets only, bounded in time and count.
//!
//! ```sh
//! cargo run --release --example loadgen -- --url http://127.0.0.1:8080/v1 \
//!   --method POST --header "authorization: Bearer $TOKEN" \
//!   --body '{"resource":"leads","action":"get","id":1}' --concurrency 64 --duration-secs 10
//! ```
//! `{n}` in the path or body is replaced by a running request number (unique values);
//! `{id}` by the next line of `--ids FILE` (round robin), e.g. record ids to fetch.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::json;

#[derive(Parser, Debug)]
struct Args {
    /// Target URL; its host must be a loopback address.
    #[arg(long)]
    url: String,
    #[arg(long, default_value = "GET")]
    method: String,
    /// `name: value`, repeatable.
    #[arg(long)]
    header: Vec<String>,
    #[arg(long)]
    body: Option<String>,
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Measured seconds (at most 600).
    #[arg(long, default_value_t = 10)]
    duration_secs: u64,
    /// Stop after this many measured requests instead (whichever comes first).
    #[arg(long)]
    requests: Option<u64>,
    #[arg(long, default_value_t = 2)]
    warmup_secs: u64,
    /// Label written into the result.
    #[arg(long, default_value = "scenario")]
    name: String,
    /// Write the result as JSON here.
    #[arg(long)]
    out: Option<std::path::PathBuf>,
    /// Status codes that count as success (default: any 2xx).
    #[arg(long)]
    expect_status: Option<u16>,
    /// A file of values, one a line, substituted for `{id}` in turn.
    #[arg(long)]
    ids: Option<std::path::PathBuf>,
    /// Print each measured request that took longer than this many milliseconds to stderr,
    /// with the wall-clock time it started (Unix seconds), to line a stall up with the
    /// server's log.
    #[arg(long)]
    slow_ms: Option<u64>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let url = url::Url::parse(&args.url)?;
    let loopback = match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d == "localhost",
        None => false,
    };
    anyhow::ensure!(loopback, "loadgen only targets loopback addresses");
    anyhow::ensure!(
        args.duration_secs <= 600 && args.warmup_secs <= 60,
        "runs are bounded: duration ≤ 600 s, warm-up ≤ 60 s"
    );
    anyhow::ensure!(
        (1..=1024).contains(&args.concurrency),
        "concurrency must be 1..=1024"
    );

    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(args.concurrency)
        .timeout(Duration::from_secs(30))
        .build()?;
    let mut headers = reqwest::header::HeaderMap::new();
    for h in &args.header {
        let (k, v) = h
            .split_once(':')
            .ok_or_else(|| anyhow::anyhow!("header '{h}' is not 'name: value'"))?;
        headers.insert(
            reqwest::header::HeaderName::from_bytes(k.trim().as_bytes())?,
            v.trim().parse()?,
        );
    }
    if args.body.is_some() && !headers.contains_key("content-type") {
        headers.insert("content-type", "application/json".parse()?);
    }
    let method: reqwest::Method = args.method.parse()?;
    let ids: Arc<Vec<String>> = Arc::new(match &args.ids {
        Some(p) => std::fs::read_to_string(p)?
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect(),
        None => Vec::new(),
    });
    let uses_id =
        args.url.contains("{id}") || args.body.as_deref().is_some_and(|b| b.contains("{id}"));
    anyhow::ensure!(
        !uses_id || !ids.is_empty(),
        "{{id}} needs a non-empty --ids file"
    );
    let counter = Arc::new(AtomicU64::new(0));
    let measured = Arc::new(AtomicU64::new(0));
    let limit = args.requests.unwrap_or(u64::MAX);

    let warm_end = Instant::now() + Duration::from_secs(args.warmup_secs);
    let end = warm_end + Duration::from_secs(args.duration_secs);
    let tasks: Vec<_> = (0..args.concurrency)
        .map(|_| {
            let (client, headers, method) = (client.clone(), headers.clone(), method.clone());
            let (url, body, counter, measured) = (
                args.url.clone(),
                args.body.clone(),
                counter.clone(),
                measured.clone(),
            );
            let expect = args.expect_status;
            let slow = args.slow_ms.map(Duration::from_millis);
            let ids = ids.clone();
            tokio::spawn(async move {
                let mut lat = Vec::with_capacity(1 << 16);
                let mut errors = 0u64;
                loop {
                    let now = Instant::now();
                    if now >= end || measured.load(Ordering::Relaxed) >= limit {
                        break;
                    }
                    let k = counter.fetch_add(1, Ordering::Relaxed);
                    let n = k.to_string();
                    let id = ids
                        .get((k as usize) % ids.len().max(1))
                        .map_or("", String::as_str);
                    let fill = |s: &str| s.replace("{n}", &n).replace("{id}", id);
                    let mut req = client
                        .request(method.clone(), fill(&url))
                        .headers(headers.clone());
                    if let Some(b) = &body {
                        req = req.body(fill(b));
                    }
                    let started = Instant::now();
                    let wall = std::time::SystemTime::now();
                    let ok = match req.send().await {
                        Ok(resp) => {
                            let status = resp.status();
                            let read = resp.bytes().await.is_ok();
                            read && expect.map_or(status.is_success(), |e| status.as_u16() == e)
                        }
                        Err(_) => false,
                    };
                    let took = started.elapsed();
                    if started >= warm_end {
                        measured.fetch_add(1, Ordering::Relaxed);
                        if slow.is_some_and(|s| took > s) {
                            let at = wall
                                .duration_since(std::time::UNIX_EPOCH)
                                .unwrap_or_default();
                            eprintln!(
                                "slow: {:.3} ms, started at {}.{:06}",
                                took.as_secs_f64() * 1e3,
                                at.as_secs(),
                                at.subsec_micros()
                            );
                        }
                        if ok {
                            lat.push(took.as_micros() as u32)
                        } else {
                            errors += 1
                        }
                    }
                }
                (lat, errors)
            })
        })
        .collect();
    let mut lat = Vec::new();
    let mut errors = 0;
    for t in tasks {
        let (l, e) = t.await?;
        lat.extend(l);
        errors += e;
    }
    let elapsed = (Instant::now().min(end) - warm_end).as_secs_f64().max(1e-9);
    lat.sort_unstable();
    let pct = |p: f64| {
        lat.get(((lat.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or(0) as f64
            / 1000.0
    };
    let result = json!({
        "name": args.name,
        "concurrency": args.concurrency,
        "requests": lat.len(),
        "errors": errors,
        "seconds": elapsed,
        "rps": lat.len() as f64 / elapsed,
        "p50_ms": pct(0.50),
        "p99_ms": pct(0.99),
        "max_ms": lat.last().copied().unwrap_or(0) as f64 / 1000.0,
    });
    println!("{result}");
    if let Some(out) = args.out {
        std::fs::write(out, serde_json::to_vec_pretty(&result)?)?;
    }
    Ok(())
}
