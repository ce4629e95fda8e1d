//! Helper of `examples/bench/compare.sh`, the genied-vs-PocketBase comparison. Loopback only.
//!
//! - `start --ready-url URL --log FILE -- CMD ARGS...`: starts a server in the background
//!   and prints `{"pid", "ready_ms"}`: the time from exec until `URL` answered 200.
//! - `genied-setup --url URL --email E --password P`: signs in, creates one genie through
//!   the API, prints `{"token", "genie_id"}`.
//! - `genied-seed --data-dir D --email E --genie ID --leads N --ids-out F`: inserts N leads
//!   through genied's own db layer (`db::leads::insert`, the triggers and indexes included),
//!   and writes their ids, shuffled, one a line.
//! - `scale-seed --data-dir D --email E --users U --leads N --conversations C --genies G
//!   --documents K --ids-out F`: the scale mode's data (`SCALE=1 compare.sh`): U users (the
//!   one of `E` and U-1 more), G genies, N leads, C conversations with transcripts and K
//!   completed documents of text chained from the project's guides (three chunks of 80 to 160
//!   words each, indexed for full-text search; each with its two files in the file store, the
//!   original as typed and the extracted text, as the service keeps them),
//!   shared out round robin between the users; through genied's db layer in transactions of
//!   20,000 rows; then the leads' search index, as the service's indexer would build it.
//!   Writes the ids of `E`'s leads to F and prints `{"genie_id", "search", "search_common"}`
//!   (two searches of the documents: words rarely and often found together).
//! - `pocketbase-setup --url URL ... --leads N --ids-out F`: creates the user, the `genies`
//!   and `leads` collections (owner-only rules, the spec's lead fields) and the `lead_stats`
//!   view through the superuser API, seeds N leads through the batch API, signs the user in,
//!   and prints `{"token", "user_id", "genie_id"}`.
//!
//! Build: `cargo build --release --examples`; run through compare.sh.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use clap::{Parser, Subcommand};
use rand::seq::SliceRandom;
use rusqlite::types::Value as SqlValue;
use serde_json::{Value, json};

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    Start {
        #[arg(long)]
        ready_url: String,
        #[arg(long)]
        log: PathBuf,
        /// Working directory of the server.
        #[arg(long)]
        cwd: Option<PathBuf>,
        #[arg(last = true, required = true)]
        cmd: Vec<String>,
    },
    GeniedSetup {
        #[arg(long)]
        url: String,
        #[arg(long)]
        email: String,
        #[arg(long)]
        password: String,
    },
    GeniedSeed {
        #[arg(long)]
        data_dir: PathBuf,
        #[arg(long)]
        email: String,
        #[arg(long)]
        genie: String,
        #[arg(long, default_value_t = 100_000)]
        leads: usize,
        #[arg(long)]
        ids_out: PathBuf,
    },
    ScaleSeed {
        #[arg(long)]
        data_dir: PathBuf,
        #[arg(long)]
        email: String,
        #[arg(long, default_value_t = 1)]
        users: usize,
        #[arg(long, default_value_t = 1_000_000)]
        leads: usize,
        #[arg(long, default_value_t = 100_000)]
        conversations: usize,
        #[arg(long, default_value_t = 10_000)]
        genies: usize,
        #[arg(long, default_value_t = 10_000)]
        documents: usize,
        #[arg(long)]
        ids_out: PathBuf,
    },
    PocketbaseSetup {
        #[arg(long)]
        url: String,
        #[arg(long)]
        su_email: String,
        #[arg(long)]
        su_password: String,
        #[arg(long)]
        email: String,
        #[arg(long)]
        password: String,
        #[arg(long, default_value_t = 100_000)]
        leads: usize,
        #[arg(long)]
        ids_out: PathBuf,
    },
}

const STATUSES: [&str; 4] = ["new", "contacted", "qualified", "converted"];
const PRIORITIES: [&str; 3] = ["low", "medium", "high"];

fn loopback(url: &str) -> anyhow::Result<url::Url> {
    let u = url::Url::parse(url)?;
    let ok = match u.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d == "localhost",
        None => false,
    };
    ensure!(ok, "{url}: loopback addresses only");
    Ok(u)
}

/// One plain HTTP/1.0 GET; true on a 200. Cheap enough to poll every millisecond.
fn probe(host: &str, port: u16, path: &str) -> bool {
    let Ok(mut s) = TcpStream::connect((host, port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    if s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").as_bytes())
        .is_err()
    {
        return false;
    }
    let mut buf = [0u8; 16];
    let mut got = 0;
    while got < 12 {
        match s.read(&mut buf[got..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    got >= 12 && &buf[9..12] == b"200"
}

fn start(
    ready_url: &str,
    log: &PathBuf,
    cwd: Option<&PathBuf>,
    cmd: &[String],
) -> anyhow::Result<()> {
    let u = loopback(ready_url)?;
    let host = u.host_str().context("host")?.to_string();
    let port = u.port_or_known_default().context("port")?;
    let out = std::fs::File::create(log)?;
    let mut c = Command::new(&cmd[0]);
    c.args(&cmd[1..])
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out);
    if let Some(d) = cwd {
        c.current_dir(d);
    }
    let t = Instant::now();
    let mut child = c.spawn().with_context(|| format!("starting {}", cmd[0]))?;
    let deadline = t + Duration::from_secs(30);
    loop {
        if probe(&host, port, u.path()) {
            break;
        }
        if let Some(status) = child.try_wait()? {
            bail!("{} exited before it was ready: {status}", cmd[0]);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            bail!("{} was not ready within 30 s", cmd[0]);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let ready_ms = t.elapsed().as_secs_f64() * 1000.0;
    // The server keeps running after this helper exits; the script stops it by pid.
    println!("{}", json!({"pid": child.id(), "ready_ms": ready_ms}));
    std::mem::forget(child);
    Ok(())
}

async fn call(req: reqwest::RequestBuilder) -> anyhow::Result<Value> {
    let resp = req.send().await?;
    let status = resp.status();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    ensure!(status.is_success(), "{status}: {body}");
    Ok(body)
}

async fn genied_setup(url: &str, email: &str, password: &str) -> anyhow::Result<()> {
    loopback(url)?;
    let http = reqwest::Client::new();
    let login = call(
        http.post(format!("{url}/v1/auth/login"))
            .json(&json!({"email": email, "password": password})),
    )
    .await?;
    let token = login["data"]["access_token"]
        .as_str()
        .context("access_token")?
        .to_string();
    let genie = call(http.post(format!("{url}/v1")).bearer_auth(&token).json(&json!({
        "resource": "genies", "action": "create",
        "data": {"genieName": "Bench genie", "category": "Sales", "description": "benchmark"}
    })))
    .await?;
    let genie_id = genie["data"]["genie"]["id"].as_str().context("genie id")?;
    println!("{}", json!({"token": token, "genie_id": genie_id}));
    Ok(())
}

fn lead_values(k: usize) -> (String, String, String, &'static str, &'static str) {
    (
        format!("Lead {k}"),
        format!("lead{k}@example.test"),
        format!("+1555{:07}", k % 10_000_000),
        STATUSES[k % STATUSES.len()],
        PRIORITIES[k % PRIORITIES.len()],
    )
}

fn write_ids(path: &PathBuf, mut ids: Vec<String>) -> anyhow::Result<()> {
    ids.shuffle(&mut rand::thread_rng());
    std::fs::write(path, ids.join("\n") + "\n")?;
    Ok(())
}

fn genied_seed(
    data_dir: PathBuf,
    email: &str,
    genie: &str,
    leads: usize,
    ids_out: &PathBuf,
) -> anyhow::Result<()> {
    let config = genied::Config::new(data_dir);
    let db = genied::db::Db::open(&config.db_path())?;
    let e = email.to_string();
    let user = db
        .read_blocking(move |c| Ok(genied::db::users::by_email(c, &e)?))
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .context("no such user")?;
    let t = Instant::now();
    let mut made = 0;
    while made < leads {
        let n = 5_000.min(leads - made);
        let (uid, gid, from) = (user.id.clone(), genie.to_string(), made);
        db.write_blocking(move |c| {
            for k in from..from + n {
                let (name, email, phone, status, priority) = lead_values(k);
                let fields: genied::db::leads::Fields = vec![
                    ("agent_id", SqlValue::from(gid.clone())),
                    ("user_id", SqlValue::from(uid.clone())),
                    ("name", name.into()),
                    ("email", email.into()),
                    ("phone", phone.into()),
                    ("status", status.to_string().into()),
                    ("priority", priority.to_string().into()),
                ];
                genied::db::leads::insert(c, &fields)?;
            }
            Ok(())
        })
        .map_err(|e| anyhow::anyhow!("{e}"))?;
        made += n;
    }
    index_leads(&db)?;
    let uid = user.id.clone();
    let ids: Vec<String> = db
        .read_blocking(move |c| {
            let mut st = c.prepare("SELECT id FROM leads WHERE user_id = genied_key(?1)")?;
            let ids = st
                .query_map([&uid], |r| r.get::<_, i64>(0))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(ids.into_iter().map(|i| i.to_string()).collect())
        })
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    write_ids(ids_out, ids)?;
    eprintln!(
        "genied: seeded {leads} leads in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Words of the generated documents and transcripts: varied enough that a two-word search
/// matches some documents, not all.
const WORDS: &[&str] = &[
    "account",
    "address",
    "agent",
    "answer",
    "appointment",
    "available",
    "balance",
    "billing",
    "booking",
    "budget",
    "business",
    "callback",
    "cancel",
    "card",
    "change",
    "charge",
    "check",
    "clinic",
    "coverage",
    "customer",
    "delivery",
    "deposit",
    "detail",
    "discount",
    "doctor",
    "document",
    "email",
    "estimate",
    "evening",
    "exchange",
    "feature",
    "fee",
    "follow",
    "garden",
    "guarantee",
    "holiday",
    "insurance",
    "invoice",
    "kitchen",
    "language",
    "lease",
    "licence",
    "location",
    "loyalty",
    "maintenance",
    "manager",
    "meeting",
    "membership",
    "menu",
    "monthly",
    "morning",
    "number",
    "offer",
    "opening",
    "order",
    "package",
    "parking",
    "partner",
    "payment",
    "permit",
    "phone",
    "plan",
    "policy",
    "premium",
    "price",
    "pricing",
    "product",
    "promotion",
    "property",
    "quote",
    "refund",
    "renewal",
    "repair",
    "reservation",
    "return",
    "room",
    "schedule",
    "season",
    "service",
    "shipping",
    "size",
    "standard",
    "storage",
    "subscription",
    "support",
    "table",
    "tax",
    "team",
    "ticket",
    "trial",
    "upgrade",
    "vehicle",
    "visit",
    "warranty",
    "weekend",
    "window",
    "year",
    "the",
    "a",
    "of",
    "for",
    "with",
    "and",
    "our",
    "your",
    "is",
    "are",
    "can",
    "will",
    "be",
    "on",
    "in",
    "to",
    "please",
    "ask",
    "about",
];

fn sentence(rng: &mut impl rand::Rng, words: usize) -> String {
    let mut s = String::new();
    for i in 0..words {
        if i > 0 {
            s.push(' ');
        }
        s.push_str(WORDS[rng.gen_range(0..WORDS.len())]);
    }
    s.push('.');
    s
}

fn paragraph(rng: &mut impl rand::Rng, sentences: usize) -> String {
    (0..sentences)
        .map(|_| {
            let n = rng.gen_range(6..18);
            sentence(rng, n)
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The prose the documents' text is drawn from: the project's own guides, as written in this
/// checkout (the text of a seed follows them, so compare sizes within one run).
const PROSE: [&str; 4] = [
    include_str!("../../docs/api.md"),
    include_str!("../../docs/storage.md"),
    include_str!("../../docs/reliability.md"),
    include_str!("../../docs/architecture.md"),
];

/// Real text for the seeded documents, so that a search's words are as rare or as common as
/// in prose (the issue asks for it): a word chain over [`PROSE`], each word followed by one
/// that follows it somewhere in the guides. Their vocabulary is some 3,300 words, with
/// English's skew: a few words in most passages, most words in few.
struct Prose {
    words: Vec<&'static str>,
    /// Where each word occurs, but at the very end: the places its next word may come from.
    at: std::collections::HashMap<&'static str, Vec<u32>>,
}

impl Prose {
    fn new() -> Prose {
        let mut words = Vec::new();
        for text in PROSE {
            let mut code = false;
            for line in text.lines() {
                if line.starts_with("```") {
                    code = !code;
                }
                // Prose only: no code, tables or headings.
                if code || line.starts_with(['`', '|', '#']) {
                    continue;
                }
                words.extend(line.split_whitespace().filter_map(|w| {
                    let w = w.trim_start_matches(|c: char| !c.is_alphabetic());
                    let w =
                        w.trim_end_matches(|c: char| !c.is_alphanumeric() && !".,;:".contains(c));
                    (!w.is_empty()).then_some(w)
                }));
            }
        }
        let mut at: std::collections::HashMap<&str, Vec<u32>> = Default::default();
        for (i, w) in words[..words.len() - 1].iter().enumerate() {
            at.entry(*w).or_default().push(i as u32);
        }
        Prose { words, at }
    }

    /// A passage of `n` words.
    fn passage(&self, rng: &mut impl rand::Rng, n: usize) -> String {
        let mut i = rng.gen_range(0..self.words.len());
        let mut s = String::from(self.words[i]);
        for _ in 1..n {
            i = match self.at.get(self.words[i]) {
                Some(places) => places[rng.gen_range(0..places.len())] as usize + 1,
                None => rng.gen_range(0..self.words.len()),
            };
            s.push(' ');
            s.push_str(self.words[i]);
        }
        s
    }
}

/// The seeded documents' searches: two words rarely together, and two often.
const SEARCH_RARE: &str = "webhook signature";
const SEARCH_COMMON: &str = "session token";

/// Rows per seeding transaction.
const SEED_TX: usize = 20_000;

fn seed_in_batches(
    db: &genied::db::Db,
    total: usize,
    what: &str,
    f: impl Fn(&genied::db::Connection, usize) -> anyhow::Result<()> + Sync,
) -> anyhow::Result<()> {
    let t = Instant::now();
    let mut made = 0;
    while made < total {
        let n = SEED_TX.min(total - made);
        db.write_blocking(|c| {
            for k in made..made + n {
                f(c, k).map_err(|e| genied::error::ApiError::internal(e.to_string()))?;
            }
            Ok(())
        })
        .map_err(|e| anyhow::anyhow!("{what}: {e}"))?;
        made += n;
    }
    eprintln!("  {total} {what} in {:.1} s", t.elapsed().as_secs_f64());
    Ok(())
}

/// Builds the seeded leads' search index, as the service's indexer would after the next
/// start: measured reads must not share the machine with that backlog (left to the service,
/// a million pending leads kept its indexer writing while the scale run measured).
fn index_leads(db: &genied::db::Db) -> anyhow::Result<()> {
    let t = Instant::now();
    while db
        .write_blocking(|c| Ok(genied::db::leads::index_pending(c, SEED_TX as i64)?))
        .map_err(|e| anyhow::anyhow!("lead search index: {e}"))?
        > 0
    {}
    // And merged, as the indexer's steps would (V48), in larger ones: nothing waits on them.
    while db
        .write_blocking(|c| Ok(genied::db::leads::merge_search_step(c, 1024)?))
        .map_err(|e| anyhow::anyhow!("lead search index merge: {e}"))?
    {}
    eprintln!("  lead search index in {:.1} s", t.elapsed().as_secs_f64());
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn scale_seed(
    data_dir: PathBuf,
    email: &str,
    users: usize,
    leads: usize,
    conversations: usize,
    genies: usize,
    documents: usize,
    ids_out: &PathBuf,
) -> anyhow::Result<()> {
    use genied::db;
    use rand::{Rng, SeedableRng};
    ensure!(
        users >= 1 && genies >= users,
        "need a genie per user at least"
    );
    let config = genied::Config::new(data_dir);
    let db = db::Db::open(&config.db_path())?;
    let e = email.to_string();
    let me = db
        .read_blocking(move |c| Ok(db::users::by_email(c, &e)?))
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .context("no such user")?;
    let t = Instant::now();
    let mut user_ids = vec![me.id.clone()];
    let more = db
        .write_blocking(|c| {
            (1..users)
                .map(|u| {
                    Ok(db::users::insert(
                        c,
                        &format!("scale{u}@example.test"),
                        Some("Scale"),
                        db::users::Role::StandardUser,
                        None,
                    )?
                    .id)
                })
                .collect::<genied::error::ApiResult<Vec<String>>>()
        })
        .map_err(|e| anyhow::anyhow!("users: {e}"))?;
    user_ids.extend(more);
    // Genie g belongs to user g % users; a user's records go to its genies in turn.
    let genie_ids: Vec<String> = (0..genies).map(|_| db::new_id()).collect();
    seed_in_batches(&db, genies, "genies", |c, g| {
        let at = db::now();
        c.prepare_cached(
            "INSERT INTO genies (id, user_id, name, name_lower, category, description, llm_model, created_at, updated_at)
             VALUES (?1, ?2, ?3, lower(?3), ?4, ?5, 'gpt-4o-mini', ?6, ?6)",
        )?
        .execute(rusqlite::params![
            genie_ids[g],
            user_ids[g % users],
            format!("Genie {g}"),
            ["Sales", "Support", "Booking", "Other"][g % 4],
            "generated by the scale benchmark",
            at
        ])?;
        // As the service's create does: without the row, the first start after the seed
        // would pin every genie to the default provider (`adopt_unassigned`) and the
        // start-up figures would measure that one-off work.
        db::genie_providers::set_provider(c, &genie_ids[g], "local", &at)?;
        Ok(())
    })?;
    let genie_of = |k: usize| {
        let u = k % users;
        let per_user = genies / users;
        &genie_ids[u + users * ((k / users) % per_user)]
    };
    seed_in_batches(&db, leads, "leads", |c, k| {
        let (name, email, phone, _, priority) = lead_values(k);
        // Statuses in turn within each user's leads: taken from `k` itself, a user's leads
        // (every `users`-th) would all have one status when `users` is a multiple of four.
        let status = STATUSES[(k / users) % STATUSES.len()];
        let fields: db::leads::Fields = vec![
            ("agent_id", SqlValue::from(genie_of(k).clone())),
            ("user_id", SqlValue::from(user_ids[k % users].clone())),
            ("name", name.into()),
            ("email", email.into()),
            ("phone", phone.into()),
            ("status", status.to_string().into()),
            ("priority", priority.to_string().into()),
        ];
        db::leads::insert(c, &fields)?;
        Ok(())
    })?;
    seed_in_batches(&db, conversations, "conversations", |c, k| {
        let mut rng = rand::rngs::StdRng::seed_from_u64(k as u64);
        let transcript: Vec<db::conversations::Turn> = (0..6)
            .map(|i| db::conversations::Turn {
                role: if i % 2 == 0 { "agent" } else { "user" }.into(),
                message: paragraph(&mut rng, 1),
                time_in_call_secs: i as f64 * 7.5,
            })
            .collect();
        let started = db::fmt_time(
            chrono::Utc::now() - chrono::Duration::seconds((conversations - k) as i64 * 60),
        );
        db::conversations::insert(
            c,
            &db::conversations::NewConversation {
                user_id: &user_ids[k % users],
                genie_id: Some(genie_of(k)),
                external_id: None,
                channel: "web",
                status: "done",
                started_at: &started,
                duration_seconds: rng.gen_range(20..600),
                transcript: &transcript,
                summary: Some(&sentence(&mut rng, 12)),
                metadata: &json!({}),
                tags: &json!([]),
            },
        )?;
        Ok(())
    })?;
    let prose = Prose::new();
    let files = config.documents_dir();
    // The file store's layout (`DocumentStore::key_of`); written without the service's
    // fsyncs, which a seed does not need.
    let store = |bytes: &[u8]| -> anyhow::Result<String> {
        let hash = genied::document_store::DocumentStore::hash(bytes);
        let path = files.join(genied::document_store::DocumentStore::key_of(&hash));
        std::fs::create_dir_all(path.parent().context("a file store path has a parent")?)?;
        std::fs::write(&path, bytes)?;
        Ok(hash)
    };
    seed_in_batches(&db, documents, "documents", |c, k| {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1_000_000 + k as u64);
        let chunks: Vec<String> = (0..3)
            .map(|_| {
                let n = rng.gen_range(80..160);
                prose.passage(&mut rng, n)
            })
            .collect();
        let title = format!("{} {} {k}", WORDS[k % 97], WORDS[(k / 97) % 97]);
        let text = chunks.join("\n\n");
        let original = store(format!("{title}\n\n{text}").as_bytes())?;
        let content = store(text.as_bytes())?;
        let id = db::documents::insert(
            c,
            &db::documents::NewDocument {
                user_id: &user_ids[k % users],
                name: &title,
                doc_type: "text",
                status: "completed",
                folder_id: None,
                is_public: false,
                size_bytes: text.len() as i64,
                source_url: None,
                original_hash: Some(&original),
                filename: None,
                options: &json!({}),
            },
        )?;
        db::documents::set_content_hash(c, &id, &content)?;
        db::documents::replace_chunks(c, &id, &chunks)?;
        Ok(())
    })?;
    index_leads(&db)?;
    let uid = me.id.clone();
    let ids: Vec<String> = db
        .read_blocking(move |c| {
            let mut st = c.prepare("SELECT id FROM leads WHERE user_id = genied_key(?1)")?;
            let ids = st
                .query_map([&uid], |r| r.get::<_, i64>(0))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(ids.into_iter().map(|i| i.to_string()).collect())
        })
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    write_ids(ids_out, ids)?;
    eprintln!("scale seed: {:.1} s in all", t.elapsed().as_secs_f64());
    println!(
        "{}",
        json!({"genie_id": genie_ids[0], "search": SEARCH_RARE, "search_common": SEARCH_COMMON})
    );
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn pocketbase_setup(
    url: &str,
    su_email: &str,
    su_password: &str,
    email: &str,
    password: &str,
    leads: usize,
    ids_out: &PathBuf,
) -> anyhow::Result<()> {
    loopback(url)?;
    let http = reqwest::Client::new();
    let su = call(
        http.post(format!(
            "{url}/api/collections/_superusers/auth-with-password"
        ))
        .json(&json!({"identity": su_email, "password": su_password})),
    )
    .await?;
    let su = su["token"].as_str().context("superuser token")?.to_string();
    let auth = |r: reqwest::RequestBuilder| r.header("authorization", su.clone());

    // Batch requests are off by default; the seeding uses them. The rate limiter is off by
    // default and stays off.
    call(
        auth(http.patch(format!("{url}/api/settings"))).json(&json!({
            "batch": {"enabled": true, "maxRequests": 1000, "timeout": 120, "maxBodySize": 0}
        })),
    )
    .await?;
    let settings = call(auth(http.get(format!("{url}/api/settings")))).await?;
    ensure!(
        settings["rateLimits"]["enabled"] != json!(true),
        "PocketBase rate limits are enabled"
    );

    let user = call(
        auth(http.post(format!("{url}/api/collections/users/records"))).json(&json!({
            "email": email, "password": password, "passwordConfirm": password, "name": "Bench"
        })),
    )
    .await?;
    let user_id = user["id"].as_str().context("user id")?.to_string();

    let owner = "user = @request.auth.id";
    let rules = json!({"listRule": owner, "viewRule": owner, "createRule": owner,
        "updateRule": owner, "deleteRule": owner});
    let mut genies = json!({
        "name": "genies", "type": "base",
        "fields": [
            {"name": "user", "type": "relation", "collectionId": "_pb_users_auth_", "maxSelect": 1, "required": true, "cascadeDelete": true},
            {"name": "name", "type": "text", "required": true, "max": 200},
            {"name": "category", "type": "text"},
            {"name": "description", "type": "text"},
            {"name": "active", "type": "bool"},
            {"name": "settings", "type": "json"},
            {"name": "created", "type": "autodate", "onCreate": true, "onUpdate": false},
            {"name": "updated", "type": "autodate", "onCreate": true, "onUpdate": true}
        ],
        "indexes": ["CREATE INDEX idx_genies_user ON genies (user)"]
    });
    merge(&mut genies, &rules);
    let genies = call(auth(http.post(format!("{url}/api/collections"))).json(&genies)).await?;
    let genies_id = genies["id"]
        .as_str()
        .context("genies collection id")?
        .to_string();

    let select = |name: &str, values: &[&str]| json!({"name": name, "type": "select", "maxSelect": 1, "values": values});
    let text = |name: &str, max: u32| json!({"name": name, "type": "text", "max": max});
    let mut leads_c = json!({
        "name": "leads", "type": "base",
        "fields": [
            {"name": "agent", "type": "relation", "collectionId": genies_id, "maxSelect": 1, "required": true, "cascadeDelete": true},
            {"name": "user", "type": "relation", "collectionId": "_pb_users_auth_", "maxSelect": 1, "required": true, "cascadeDelete": true},
            text("name", 500), text("email", 320), text("phone", 50),
            select("status", &STATUSES), select("priority", &PRIORITIES),
            text("budget", 200), text("timeline", 200),
            {"name": "address", "type": "json"},
            text("notes", 20_000), text("assigned_to", 500),
            {"name": "conversation_id", "type": "number", "onlyInt": true},
            {"name": "primary_lead_id", "type": "number", "onlyInt": true},
            {"name": "is_decision_maker", "type": "bool"},
            select("preferred_contact_method", &["email", "phone", "sms"]),
            text("preferred_contact_time", 200),
            {"name": "metadata", "type": "json"},
            {"name": "created", "type": "autodate", "onCreate": true, "onUpdate": false},
            {"name": "updated", "type": "autodate", "onCreate": true, "onUpdate": true}
        ],
        "indexes": [
            "CREATE INDEX idx_leads_user_status ON leads (user, status, created)",
            "CREATE INDEX idx_leads_user_created ON leads (user, created)",
            "CREATE INDEX idx_leads_agent ON leads (agent, created)"
        ]
    });
    merge(&mut leads_c, &rules);
    call(auth(http.post(format!("{url}/api/collections"))).json(&leads_c)).await?;

    // Counts by status, the way a PocketBase application gets aggregates: a view collection.
    let mut stats = json!({
        "name": "lead_stats", "type": "view",
        "viewQuery": "SELECT l.user AS id, l.user AS user, COUNT(*) AS total, \
            SUM(l.status = 'new') AS new, SUM(l.status = 'contacted') AS contacted, \
            SUM(l.status = 'qualified') AS qualified, SUM(l.status = 'converted') AS converted \
            FROM leads l GROUP BY l.user"
    });
    merge(&mut stats, &json!({"listRule": owner, "viewRule": owner}));
    call(auth(http.post(format!("{url}/api/collections"))).json(&stats)).await?;

    let genie = call(
        auth(http.post(format!("{url}/api/collections/genies/records"))).json(&json!({
            "user": user_id, "name": "Bench genie", "category": "Sales",
            "description": "benchmark", "active": true,
            "settings": {"conversation_config": {"agent": {"first_message": "Hello"}}}
        })),
    )
    .await?;
    let genie_id = genie["id"].as_str().context("genie id")?.to_string();

    let t = Instant::now();
    let mut ids = Vec::with_capacity(leads);
    let mut made = 0;
    while made < leads {
        let n = 1000.min(leads - made);
        let requests: Vec<Value> = (made..made + n)
            .map(|k| {
                let (name, email, phone, status, priority) = lead_values(k);
                json!({"method": "POST", "url": "/api/collections/leads/records", "body": {
                    "agent": genie_id, "user": user_id, "name": name, "email": email,
                    "phone": phone, "status": status, "priority": priority
                }})
            })
            .collect();
        let out =
            call(auth(http.post(format!("{url}/api/batch"))).json(&json!({"requests": requests})))
                .await?;
        for r in out.as_array().context("batch answer")? {
            ids.push(
                r["body"]["id"]
                    .as_str()
                    .context("batch item id")?
                    .to_string(),
            );
        }
        made += n;
    }
    write_ids(ids_out, ids)?;
    eprintln!(
        "pocketbase: seeded {leads} leads in {:.1} s",
        t.elapsed().as_secs_f64()
    );

    let login = call(
        http.post(format!("{url}/api/collections/users/auth-with-password"))
            .json(&json!({"identity": email, "password": password})),
    )
    .await?;
    let token = login["token"].as_str().context("user token")?;
    println!(
        "{}",
        json!({"token": token, "user_id": user_id, "genie_id": genie_id})
    );
    Ok(())
}

fn merge(into: &mut Value, from: &Value) {
    if let (Some(a), Some(b)) = (into.as_object_mut(), from.as_object()) {
        for (k, v) in b {
            a.insert(k.clone(), v.clone());
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().cmd {
        Cmd::Start {
            ready_url,
            log,
            cwd,
            cmd,
        } => start(&ready_url, &log, cwd.as_ref(), &cmd),
        Cmd::GeniedSetup {
            url,
            email,
            password,
        } => genied_setup(&url, &email, &password).await,
        Cmd::GeniedSeed {
            data_dir,
            email,
            genie,
            leads,
            ids_out,
        } => genied_seed(data_dir, &email, &genie, leads, &ids_out),
        Cmd::ScaleSeed {
            data_dir,
            email,
            users,
            leads,
            conversations,
            genies,
            documents,
            ids_out,
        } => scale_seed(
            data_dir,
            &email,
            users,
            leads,
            conversations,
            genies,
            documents,
            &ids_out,
        ),
        Cmd::PocketbaseSetup {
            url,
            su_email,
            su_password,
            email,
            password,
            leads,
            ids_out,
        } => {
            pocketbase_setup(
                &url,
                &su_email,
                &su_password,
                &email,
                &password,
                leads,
                &ids_out,
            )
            .await
        }
    }
}
