//! The event outbox (#22): an event is recorded in the transaction of the change that
//! raises it and fanned out from there. An event whose process died between the commit and
//! the fan-out is delivered, once, after a restart; a change that rolls back raises nothing;
//! events of one user reach receivers in the order they were raised. On both engines. (Several
//! instances on one PostgreSQL database: `multi_instance`.)

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::fakes::receivers::Receivers;
use crate::common::process::{self, DEADLINE, Proc, free_port, wait_ready};
use crate::common::*;

/// The test's database, reached from outside the service (as `sqlite3` or `psql` would).
enum Store {
    Sqlite(PathBuf),
    Postgres(String),
}

impl Store {
    fn execute(&self, sql: &str) {
        match self {
            Store::Sqlite(file) => {
                let c = rusqlite::Connection::open(file).unwrap();
                c.busy_timeout(Duration::from_secs(30)).unwrap();
                c.execute_batch(sql).unwrap();
            }
            Store::Postgres(url) => {
                for stmt in sql.split(";;").filter(|s| !s.trim().is_empty()) {
                    postgres::execute(url, stmt, &[]);
                }
            }
        }
    }

    /// The first column of every row, as text.
    fn column(&self, sql: &str) -> Vec<Option<String>> {
        match self {
            Store::Sqlite(file) => {
                let c = rusqlite::Connection::open(file).unwrap();
                c.busy_timeout(Duration::from_secs(30)).unwrap();
                let mut st = c.prepare(sql).unwrap();
                st.query_map([], |r| {
                    Ok(match r.get_ref(0)? {
                        rusqlite::types::ValueRef::Null => None,
                        rusqlite::types::ValueRef::Integer(i) => Some(i.to_string()),
                        v => Some(v.as_str().unwrap().to_string()),
                    })
                })
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
            }
            Store::Postgres(url) => {
                let (url, sql) = (url.clone(), sql.to_string());
                std::thread::spawn(move || {
                    let mut c = ::postgres::Client::connect(&url, ::postgres::NoTls).unwrap();
                    c.query(&format!("SELECT (q.v)::text FROM ({sql}) AS q(v)"), &[])
                        .unwrap()
                        .iter()
                        .map(|r| r.get::<_, Option<String>>(0))
                        .collect()
                })
                .join()
                .unwrap()
            }
        }
    }

    fn count(&self, sql: &str) -> i64 {
        self.column(sql)[0].as_deref().unwrap().parse().unwrap()
    }
}

/// Every transaction that marks an event dispatched fails (the fan-out cannot commit), as if
/// the process always died before it; `;;` separates PostgreSQL's statements.
fn stall_dispatch(store: &Store) {
    store.execute(match store {
        Store::Sqlite(_) => {
            "CREATE TRIGGER outbox_stalled BEFORE UPDATE OF dispatched_at ON event_outbox
             BEGIN SELECT RAISE(ABORT, 'test: the fan-out never commits'); END;"
        }
        Store::Postgres(_) => {
            "CREATE FUNCTION outbox_stalled() RETURNS trigger LANGUAGE plpgsql AS
             $$ BEGIN RAISE EXCEPTION 'test: the fan-out never commits'; END $$;;
             CREATE TRIGGER outbox_stalled BEFORE UPDATE OF dispatched_at ON event_outbox
             FOR EACH ROW EXECUTE FUNCTION outbox_stalled()"
        }
    });
}

fn unstall_dispatch(store: &Store) {
    store.execute(match store {
        Store::Sqlite(_) => "DROP TRIGGER outbox_stalled",
        Store::Postgres(_) => "DROP TRIGGER outbox_stalled ON event_outbox",
    });
}

fn genied(data: &Path, db_url: Option<&str>, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_genied"));
    cmd.arg("--data-dir").arg(data).args(args);
    if let Some(url) = db_url {
        cmd.env("GENIED_DATABASE_URL", url);
    }
    cmd
}

fn cli(data: &Path, db_url: Option<&str>, args: &[&str]) -> String {
    let out = process::output(&mut genied(data, db_url, args));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

async fn serve(data: &Path, db_url: Option<&str>) -> (Proc, String) {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut child = Proc::spawn(
        genied(data, db_url, &["serve", "--listen", &listen])
            .args(["--allow-private-outbound", "--job-poll-ms", "50"])
            .args(["--job-backoff-base-ms", "50"])
            .env("GENIED_LOG_LEVEL", "error")
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    let base = format!("http://{listen}");
    wait_ready(&mut child, &base).await;
    (child, base)
}

async fn envelope(base: &str, token: &str, body: Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(format!("{base}/v1"))
        .bearer_auth(token)
        .json(&body)
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let end = Instant::now() + DEADLINE;
    while !done() {
        assert!(Instant::now() < end, "waited {DEADLINE:?} for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Nothing left to fan out or deliver: every event dispatched, every job done.
fn settled(store: &Store) -> bool {
    store.count("SELECT COUNT(*) FROM event_outbox WHERE dispatched_at IS NULL") == 0
        && store.count("SELECT COUNT(*) FROM jobs") == 0
}

// Multi-threaded: the receiver keeps answering while the test blocks on the child.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_whose_process_died_before_its_fan_out_is_delivered_once_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let url = postgres::enabled().then(postgres::database);
    let url = url.as_deref();
    let create = ["admin", "create-user", "--create-data-dir"];
    cli(
        &data,
        url,
        &[&create[..], &["--email", "o@example.test"]].concat(),
    );
    let token = cli(
        &data,
        url,
        &["admin", "issue-token", "--email", "o@example.test"],
    );
    let store = match url {
        Some(u) => Store::Postgres(u.to_string()),
        None => Store::Sqlite(data.join("genied.db")),
    };
    let rx = Receivers::start().await;
    stall_dispatch(&store);

    let (mut first, base) = serve(&data, url).await;
    let (status, hook) = envelope(
        &base,
        &token,
        json!({"resource": "webhooks", "action": "create",
               "data": {"url": rx.url(0), "event_types": ["api_key.created"]}}),
    )
    .await;
    assert_eq!(status, 201, "{hook}");
    rx.set_secret(0, hook["data"]["webhook"]["secret"].as_str().unwrap());
    let (status, key) = envelope(
        &base,
        &token,
        json!({"resource": "api-keys", "action": "create", "data": {"name": "outboxed"}}),
    )
    .await;
    assert_eq!(status, 201, "{key}");
    let secret = key["data"]["api_key"]["key"].as_str().unwrap().to_string();
    // Committed with the key, and not fanned out: the process dies now.
    let recorded = store.column(
        "SELECT id FROM event_outbox WHERE kind = 'api_key.created' AND dispatched_at IS NULL",
    );
    assert_eq!(recorded.len(), 1, "the event is recorded with the key");
    let event_id = recorded[0].clone().unwrap();
    assert_eq!(store.count("SELECT COUNT(*) FROM webhook_deliveries"), 0);
    first.kill();

    unstall_dispatch(&store);
    let (_second, _) = serve(&data, url).await;
    until("the delivery after the restart", || {
        !rx.delivered().is_empty() && settled(&store)
    })
    .await;
    rx.assert_no_problems();
    let got = rx.delivered();
    assert_eq!(got.len(), 1, "delivered exactly once: {got:?}");
    let e = &got[0].event;
    assert_eq!(e["id"], json!(event_id), "the recorded event, by its id");
    assert_eq!(e["type"], json!("api_key.created"));
    assert_eq!(e["data"]["name"], json!("outboxed"));
    assert!(!e.to_string().contains(&secret), "no key secret in events");
    assert_eq!(store.count("SELECT COUNT(*) FROM webhook_deliveries"), 1);
}

#[tokio::test]
async fn a_change_that_rolls_back_raises_no_event_and_events_keep_their_order() {
    let app = TestApp::spawn_with(|c| {
        c.job_poll_ms = 10;
        c.job_backoff_base_ms = 10;
    })
    .await;
    let u = app.standard().await;
    let store = match app.state.config.postgres_url() {
        Some(url) => Store::Postgres(url.to_string()),
        None => Store::Sqlite(app.state.config.db_path()),
    };
    let rx = Receivers::start().await;
    let hook = app
        .call(
            &u.token,
            "webhooks",
            "create",
            None,
            json!({"url": rx.url(0), "event_types": ["lead.*"]}),
        )
        .await;
    rx.set_secret(0, hook.ok(201)["webhook"]["secret"].as_str().unwrap());
    let worker = app
        .call(
            &u.token,
            "worker-genies",
            "create",
            None,
            json!({"name": "on update", "soul_prompt": "x", "trigger_type": "event",
                   "event_type": "lead.updated"}),
        )
        .await;
    let wid = worker.ok(201)["worker_genie"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let runs = || {
        store.count(&format!(
            "SELECT COUNT(*) FROM worker_runs WHERE worker_genie_id = '{wid}'"
        ))
    };
    let g = insert_genie(&app, &u, "Sales").await;
    let lead = app
        .call(
            &u.token,
            "leads",
            "create",
            None,
            json!({"agent_id": g, "name": "Ann"}),
        )
        .await;
    let lid = lead.ok(201)["lead"]["id"].clone();

    // The status change's second event fails to record, after the first was: the update,
    // its log and its first event go back together.
    store.execute(match &store {
        Store::Sqlite(_) => {
            "CREATE TRIGGER refuse_status BEFORE INSERT ON event_outbox
             WHEN NEW.kind = 'lead.status_changed'
             BEGIN SELECT RAISE(ABORT, 'test: the write fails after recording'); END;"
        }
        Store::Postgres(_) => {
            "CREATE FUNCTION refuse_status() RETURNS trigger LANGUAGE plpgsql AS
             $$ BEGIN RAISE EXCEPTION 'test: the write fails after recording'; END $$;;
             CREATE TRIGGER refuse_status BEFORE INSERT ON event_outbox FOR EACH ROW
             WHEN (NEW.kind = 'lead.status_changed') EXECUTE FUNCTION refuse_status()"
        }
    });
    app.call(
        &u.token,
        "leads",
        "update",
        Some(lid.clone()),
        json!({"status": "contacted", "name": "Rolled back"}),
    )
    .await
    .err(500, "INTERNAL_ERROR");
    let l = app
        .call(&u.token, "leads", "get", Some(lid.clone()), json!({}))
        .await;
    assert_eq!(l.ok(200)["lead"]["name"], json!("Ann"), "nothing changed");
    assert_eq!(
        store.column("SELECT kind FROM event_outbox"),
        vec![Some("lead.created".to_string())],
        "no event of the rolled-back update"
    );
    store.execute(match &store {
        Store::Sqlite(_) => "DROP TRIGGER refuse_status",
        Store::Postgres(_) => "DROP TRIGGER refuse_status ON event_outbox",
    });

    // The same update again, committed: both its events follow the lead's creation, in
    // order, and nothing of the failed attempt went out.
    app.call(
        &u.token,
        "leads",
        "update",
        Some(lid.clone()),
        json!({"status": "contacted", "name": "Ann B."}),
    )
    .await
    .ok(200);
    until("the three deliveries and the run", || {
        rx.delivered().len() >= 3 && runs() >= 1 && settled(&store)
    })
    .await;
    rx.assert_no_problems();
    let kinds: Vec<Value> = rx
        .delivered()
        .iter()
        .map(|d| d.event["type"].clone())
        .collect();
    assert_eq!(
        kinds,
        vec![
            json!("lead.created"),
            json!("lead.updated"),
            json!("lead.status_changed")
        ]
    );
    assert_eq!(rx.delivered()[1].event["data"]["name"], json!("Ann B."));
    assert_eq!(runs(), 1, "one run for the one committed lead.updated");
}

/// The leads created so far whose `lead.created` is in the outbox, by name.
fn outboxed_leads(store: &Store) -> Vec<Option<String>> {
    let mut names = store.column(match store {
        Store::Sqlite(_) => {
            "SELECT json_extract(data, '$.name') FROM event_outbox WHERE kind = 'lead.created'"
        }
        Store::Postgres(_) => {
            "SELECT (data::jsonb)->>'name' FROM event_outbox WHERE kind = 'lead.created'"
        }
    });
    names.sort();
    names
}

#[tokio::test]
async fn only_an_event_something_subscribes_to_is_written_to_the_outbox() {
    let app = TestApp::spawn_with(|c| {
        c.job_poll_ms = 10;
        c.job_backoff_base_ms = 10;
    })
    .await;
    let (u, other) = (app.standard().await, app.standard().await);
    let store = match app.state.config.postgres_url() {
        Some(url) => Store::Postgres(url.to_string()),
        None => Store::Sqlite(app.state.config.db_path()),
    };
    let rx = Receivers::start().await;
    let g = insert_genie(&app, &u, "Sales").await;
    let create = |name: &str| {
        app.call(
            &u.token,
            "leads",
            "create",
            None,
            json!({"agent_id": g, "name": name}),
        )
    };
    let hook = |token: String, types: Value, active: bool| {
        let url = rx.url(0);
        let app = &app;
        async move {
            let r = app
                .call(
                    &token,
                    "webhooks",
                    "create",
                    None,
                    json!({"url": url, "event_types": types}),
                )
                .await;
            let hook = r.ok(201)["webhook"].clone();
            if !active {
                app.call(
                    &token,
                    "webhooks",
                    "update",
                    Some(hook["id"].clone()),
                    json!({"is_active": false}),
                )
                .await
                .ok(200);
            }
            hook["secret"].as_str().unwrap().to_string()
        }
    };

    // An event-triggered worker genie of `u`'s on `event_type`.
    let worker = |event_type: &str| {
        let data = json!({"name": format!("on {event_type}"), "soul_prompt": "x",
                          "trigger_type": "event", "event_type": event_type});
        let (app, token) = (&app, u.token.clone());
        async move {
            app.call(&token, "worker-genies", "create", None, data)
                .await
                .ok(201);
        }
    };

    // Nothing listens: the change commits and in-process observers see its event, but no
    // outbox row is written.
    let mut events = app.state.bus.subscribe();
    create("nobody").await.ok(201);
    let seen = events.recv().await.unwrap();
    assert_eq!(
        (seen.kind.as_str(), seen.data["name"].clone()),
        ("lead.created", json!("nobody"))
    );
    // From here on no one observes in-process either: what is queued below must still carry
    // its data (a lead create makes the event only when someone will read it).
    drop(events);
    // Subscriptions that do not select it: another family, an inactive webhook, another
    // user's webhook, a worker genie on another type.
    hook(u.token.clone(), json!(["genie.*"]), true).await;
    hook(u.token.clone(), json!(["lead.created"]), false).await;
    hook(other.token.clone(), json!(["lead.*"]), true).await;
    worker("lead.updated").await;
    create("still nobody").await.ok(201);
    assert_eq!(outboxed_leads(&store), Vec::<Option<String>>::new());

    // A worker genie triggered by the type: recorded, and its run queued.
    worker("lead.created").await;
    create("for the worker").await.ok(201);
    assert_eq!(outboxed_leads(&store), vec![Some("for the worker".into())]);
    // Fanned out before the webhook below exists (the fan-out goes to whoever subscribes
    // when it runs).
    until("the worker's event dispatched", || settled(&store)).await;

    // A matching webhook of the lead's user: recorded and delivered, and the events before
    // it subscribed are not sent to it.
    let secret = hook(u.token.clone(), json!(["lead.*"]), true).await;
    rx.set_secret(0, &secret);
    create("for the hook").await.ok(201);
    assert_eq!(
        outboxed_leads(&store),
        vec![Some("for the hook".into()), Some("for the worker".into())]
    );
    until("the delivery", || {
        !rx.delivered().is_empty() && settled(&store)
    })
    .await;
    rx.assert_no_problems();
    let names: Vec<Value> = rx
        .delivered()
        .iter()
        .map(|d| d.event["data"]["name"].clone())
        .collect();
    assert_eq!(names, vec![json!("for the hook")]);
}

/// A lead's event is made only when someone will read it (`events::record_lazy`): with no
/// subscription and no in-process observer, its data is never built and there is nothing
/// to emit; with an observer it is made and emitted, and still not queued.
#[tokio::test]
async fn an_event_no_one_hears_is_not_made() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let store = match app.state.config.postgres_url() {
        Some(url) => Store::Postgres(url.to_string()),
        None => Store::Sqlite(app.state.config.db_path()),
    };
    let made = Arc::new(AtomicUsize::new(0));
    let raise = || {
        let (uid, made, observed) = (u.id.clone(), made.clone(), app.state.bus.observed());
        app.state.db.write(move |c| {
            Ok(genied::events::record_lazy(
                c,
                observed,
                "lead.created",
                &uid,
                || {
                    made.fetch_add(1, Ordering::SeqCst);
                    json!({"name": "heard"})
                },
            )?)
        })
    };

    assert!(raise().await.unwrap().is_none(), "nothing to emit");
    assert_eq!(made.load(Ordering::SeqCst), 0, "made for no one");

    let mut events = app.state.bus.subscribe();
    let heard = raise().await.unwrap().expect("an observer hears it");
    assert_eq!(made.load(Ordering::SeqCst), 1);
    app.state.bus.emit(heard);
    let seen = events.recv().await.unwrap();
    assert_eq!(
        (seen.kind.as_str(), seen.data),
        ("lead.created", json!({"name": "heard"}))
    );
    assert_eq!(store.count("SELECT COUNT(*) FROM event_outbox"), 0);
}
