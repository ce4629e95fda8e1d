//! Webhooks: signed deliveries to a local receiver, retries, disabling, redelivery,
//! durability across restarts, isolation and the address guard.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::HeaderMap;
use axum::routing::post;
use genied::events::Event;
use serde_json::{Value, json};

use crate::common::*;

#[derive(Clone, Copy, Debug)]
enum Behaviour {
    Status(u16),
    Sleep(Duration),
}

#[derive(Debug, Clone)]
struct Hit {
    headers: HeaderMap,
    body: String,
}

/// A webhook receiver on 127.0.0.1 that records every request, answers from a script (then
/// the default), and notes any request that breaks the delivery contract.
#[derive(Clone)]
struct Receiver {
    url: String,
    hits: Arc<Mutex<Vec<Hit>>>,
    script: Arc<Mutex<VecDeque<Behaviour>>>,
    default: Arc<Mutex<Behaviour>>,
    violations: Arc<Mutex<Vec<String>>>,
}

impl Receiver {
    async fn start(script: &[Behaviour], default: Behaviour) -> Receiver {
        let r = Receiver {
            url: String::new(),
            hits: Arc::default(),
            script: Arc::new(Mutex::new(script.iter().copied().collect())),
            default: Arc::new(Mutex::new(default)),
            violations: Arc::default(),
        };
        let state = r.clone();
        let app = axum::Router::new().route(
            "/hook",
            post(move |headers: HeaderMap, body: String| {
                let s = state.clone();
                async move {
                    for h in ["genied-signature", "genied-event", "genied-delivery"] {
                        if headers.get(h).is_none() {
                            s.violations
                                .lock()
                                .unwrap()
                                .push(format!("missing header {h}"));
                        }
                    }
                    if headers.get("content-type").and_then(|v| v.to_str().ok())
                        != Some("application/json")
                    {
                        s.violations
                            .lock()
                            .unwrap()
                            .push("content-type is not application/json".into());
                    }
                    if serde_json::from_str::<Value>(&body).is_err() {
                        s.violations
                            .lock()
                            .unwrap()
                            .push(format!("body is not JSON: {body}"));
                    }
                    s.hits.lock().unwrap().push(Hit { headers, body });
                    let b = s
                        .script
                        .lock()
                        .unwrap()
                        .pop_front()
                        .unwrap_or(*s.default.lock().unwrap());
                    match b {
                        Behaviour::Status(code) => (
                            axum::http::StatusCode::from_u16(code).unwrap(),
                            "receiver says hi",
                        ),
                        Behaviour::Sleep(d) => {
                            tokio::time::sleep(d).await;
                            (axum::http::StatusCode::OK, "too late")
                        }
                    }
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Receiver { url, ..r }
    }

    fn hits(&self) -> Vec<Hit> {
        self.hits.lock().unwrap().clone()
    }

    /// Waits (bounded) until at least `n` requests arrived.
    async fn wait_for(&self, n: usize) -> Vec<Hit> {
        for _ in 0..500 {
            if self.hits.lock().unwrap().len() >= n {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let hits = self.hits();
        assert!(
            hits.len() >= n,
            "receiver got {} requests, expected {n}",
            hits.len()
        );
        assert!(
            self.violations.lock().unwrap().is_empty(),
            "{:?}",
            self.violations.lock().unwrap()
        );
        hits
    }
}

/// A delivery verified by the receivers' verifier.
fn verify(hit: &Hit, secret: &str) -> bool {
    let header = hit
        .headers
        .get("genied-signature")
        .unwrap()
        .to_str()
        .unwrap();
    crate::common::fakes::receivers::verify(header, secret, &hit.body)
}

async fn create_hook(app: &TestApp, user: &User, url: &str, types: Value) -> (String, String) {
    let r = app
        .call(
            &user.token,
            "webhooks",
            "create",
            None,
            json!({"url": url, "event_types": types, "description": "crm"}),
        )
        .await;
    let w = r.ok(201)["webhook"].clone();
    (
        w["id"].as_str().unwrap().to_string(),
        w["secret"].as_str().unwrap().to_string(),
    )
}

fn fast(c: &mut genied::Config) {
    c.job_backoff_base_ms = 10;
    c.job_poll_ms = 10;
}

#[tokio::test]
async fn create_shows_the_secret_once_and_validates() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let rx = Receiver::start(&[], Behaviour::Status(200)).await;
    let r = app
        .call(&u.token, "webhooks", "create", None, json!({"url": rx.url}))
        .await;
    let w = r.ok(201)["webhook"].clone();
    let secret = w["secret"].as_str().unwrap().to_string();
    assert!(secret.starts_with("whsec_") && secret.len() > 40);
    assert_eq!(w["event_types"], json!(["*"]));
    assert_eq!(w["is_active"], json!(true));
    let list = app
        .call(&u.token, "webhooks", "list", None, json!({}))
        .await;
    let d = list.ok(200).clone();
    assert_eq!(d["count"], json!(1));
    assert!(!d.to_string().contains(&secret));
    let got = app
        .call(
            &u.token,
            "webhooks",
            "get",
            Some(w["id"].clone()),
            json!({}),
        )
        .await;
    assert!(!got.ok(200).to_string().contains(&secret));

    for bad in [
        json!({"url": "ftp://example.com/x"}),
        json!({"url": "not a url"}),
        json!({"url": rx.url, "event_types": ["lead.exploded"]}),
        json!({"url": rx.url, "event_types": []}),
        json!({"url": rx.url, "event_types": "lead.*"}),
        json!({"url": rx.url, "secret": "mine"}),
        json!({}),
    ] {
        app.call(&u.token, "webhooks", "create", None, bad)
            .await
            .err(400, "VALIDATION_ERROR");
    }
    assert_eq!(app.count("webhooks").await, 1);

    // Rotation gives a new secret, once.
    let r = app
        .call(
            &u.token,
            "webhooks",
            "rotate-secret",
            Some(w["id"].clone()),
            json!({}),
        )
        .await;
    let new_secret = r.ok(200)["secret"].as_str().unwrap().to_string();
    assert_ne!(new_secret, secret);
    let bytes = stored_bytes(&app);
    assert!(
        !bytes
            .windows(new_secret.len())
            .any(|w| w == new_secret.as_bytes()),
        "secret stored in plaintext"
    );
}

#[tokio::test]
async fn events_are_delivered_signed_and_filtered_by_type() {
    let app = TestApp::spawn_with(fast).await;
    let u = app.standard().await;
    let rx = Receiver::start(&[], Behaviour::Status(200)).await;
    let (_, secret) = create_hook(&app, &u, &rx.url, json!(["api_key.*", "lead.created"])).await;

    // A real event from the API: creating a key.
    let key = app
        .call(
            &u.token,
            "api-keys",
            "create",
            None,
            json!({"name": "hooked"}),
        )
        .await;
    let key_secret = key.ok(201)["api_key"]["key"].as_str().unwrap().to_string();
    // Events of other types, and of other users, do not go out.
    app.raise(Event::new("genie.created", &u.id, json!({"id": "g"})))
        .await;
    let other = app.standard().await;
    app.raise(Event::new("lead.created", &other.id, json!({"id": 1})))
        .await;
    app.raise(Event::new(
        "lead.created",
        &u.id,
        json!({"id": 2, "name": "Ada"}),
    ))
    .await;

    let hits = rx.wait_for(2).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        rx.hits().len(),
        2,
        "only matching events of this user are delivered"
    );
    let first: Value = serde_json::from_str(&hits[0].body).unwrap();
    assert_eq!(first["type"], json!("api_key.created"));
    assert_eq!(first["user_id"], json!(u.id));
    assert_eq!(first["data"]["name"], json!("hooked"));
    assert!(
        !hits[0].body.contains(&key_secret),
        "the API key secret must not leave in events"
    );
    for m in ["id", "created_at"] {
        assert!(first[m].is_string());
    }
    assert_eq!(hits[0].headers["genied-event"], "api_key.created");
    let second: Value = serde_json::from_str(&hits[1].body).unwrap();
    assert_eq!(second["data"], json!({"id": 2, "name": "Ada"}));
    for h in &hits {
        assert!(verify(h, &secret), "signature does not verify");
        assert!(!verify(h, "whsec_wrong"));
        // The verifier also refuses a changed body and a stale timestamp.
        let header = h.headers["genied-signature"].to_str().unwrap();
        let check = crate::common::fakes::receivers::verify;
        assert!(!check(header, &secret, &format!("{} ", h.body)));
        let now = chrono::Utc::now().timestamp();
        let signed_at = |t: i64| {
            format!(
                "t={t},v1={}",
                genied::webhooks::signature(&secret, t, &h.body)
            )
        };
        assert!(!check(&signed_at(now - 600), &secret, &h.body));
        assert!(check(&signed_at(now), &secret, &h.body));
    }
}

#[tokio::test]
async fn failures_are_retried_until_success() {
    let app = TestApp::spawn_with(|c| {
        fast(c);
        c.webhook_timeout_seconds = 1;
    })
    .await;
    let u = app.standard().await;
    let rx = Receiver::start(
        &[
            Behaviour::Status(500),
            Behaviour::Sleep(Duration::from_millis(1500)),
        ],
        Behaviour::Status(204),
    )
    .await;
    let (hook, secret) = create_hook(&app, &u, &rx.url, json!(["lead.*"])).await;
    app.raise(Event::new("lead.updated", &u.id, json!({"id": 7})))
        .await;
    let hits = rx.wait_for(3).await;
    // Every attempt carries the same delivery id and event body.
    assert!(hits.iter().all(|h| h.body == hits[0].body
        && h.headers["genied-delivery"] == hits[0].headers["genied-delivery"]));
    assert!(hits.iter().all(|h| verify(h, &secret)));

    let mut d = json!(null);
    for _ in 0..200 {
        let r = app
            .call(
                &u.token,
                "webhooks",
                "deliveries",
                Some(json!(hook)),
                json!({}),
            )
            .await;
        d = r.ok(200)["deliveries"][0].clone();
        if d["status"] == json!("succeeded") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(d["status"], json!("succeeded"), "{d}");
    assert_eq!(d["attempts"], json!(3));
    let codes: Vec<Value> = d["attempt_log"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["status_code"].clone())
        .collect();
    assert_eq!(codes, vec![json!(500), json!(null), json!(204)]);
    assert!(
        d["attempt_log"][1]["error"]
            .as_str()
            .unwrap()
            .contains("timed out"),
        "{d}"
    );
    assert_eq!(
        d["attempt_log"][0]["response_excerpt"],
        json!("receiver says hi")
    );
}

#[tokio::test]
async fn an_endpoint_that_keeps_failing_is_disabled_and_its_owner_notified() {
    let app = TestApp::spawn_with(|c| {
        fast(c);
        c.webhook_max_attempts = 3;
    })
    .await;
    let u = app.standard().await;
    let rx = Receiver::start(&[], Behaviour::Status(500)).await;
    let (hook, _) = create_hook(&app, &u, &rx.url, json!(["*"])).await;
    app.raise(Event::new("lead.created", &u.id, json!({"id": 1})))
        .await;
    rx.wait_for(3).await;
    let mut w = json!(null);
    for _ in 0..200 {
        w = app
            .call(&u.token, "webhooks", "get", Some(json!(hook)), json!({}))
            .await
            .ok(200)["webhook"]
            .clone();
        if w["is_active"] == json!(false) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(w["is_active"], json!(false));
    assert!(w["disabled_reason"].as_str().unwrap().contains('3'));
    let d = app
        .call(
            &u.token,
            "webhooks",
            "deliveries",
            Some(json!(hook)),
            json!({}),
        )
        .await;
    assert_eq!(d.ok(200)["deliveries"][0]["status"], json!("failed"));
    let n = app
        .call(
            &u.token,
            "notifications",
            "list",
            None,
            json!({"unreadOnly": true}),
        )
        .await;
    let n = n.ok(200).clone();
    assert_eq!(n["count"], json!(1));
    assert_eq!(n["notifications"][0]["kind"], json!("webhook.disabled"));
    assert_eq!(n["notifications"][0]["data"]["webhook_id"], json!(hook));

    // Disabled endpoints get nothing more; turning one back on resumes deliveries.
    app.raise(Event::new("lead.created", &u.id, json!({"id": 2})))
        .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(rx.hits().len(), 3);
    *rx.default.lock().unwrap() = Behaviour::Status(200);
    let r = app
        .call(
            &u.token,
            "webhooks",
            "update",
            Some(json!(hook)),
            json!({"is_active": true}),
        )
        .await;
    assert_eq!(r.ok(200)["webhook"]["disabled_reason"], json!(null));
    app.raise(Event::new("lead.created", &u.id, json!({"id": 3})))
        .await;
    let hits = rx.wait_for(4).await;
    assert!(hits[3].body.contains("\"id\":3"));
}

#[tokio::test]
async fn redeliver_replays_the_same_event() {
    let app = TestApp::spawn_with(fast).await;
    let u = app.standard().await;
    let rx = Receiver::start(&[], Behaviour::Status(200)).await;
    let (hook, _) = create_hook(&app, &u, &rx.url, json!(["*"])).await;
    app.raise(Event::new("lead.created", &u.id, json!({"id": 9})))
        .await;
    rx.wait_for(1).await;
    let d = app
        .call(
            &u.token,
            "webhooks",
            "deliveries",
            Some(json!(hook)),
            json!({}),
        )
        .await;
    let first = d.ok(200)["deliveries"][0].clone();
    let r = app
        .call(
            &u.token,
            "webhooks",
            "redeliver",
            Some(first["id"].clone()),
            json!({}),
        )
        .await;
    let again = r.ok(202)["delivery"].clone();
    assert_ne!(again["id"], first["id"]);
    assert_eq!(again["event_id"], first["event_id"]);
    let hits = rx.wait_for(2).await;
    assert_eq!(hits[0].body, hits[1].body);
    assert_ne!(
        hits[0].headers["genied-delivery"],
        hits[1].headers["genied-delivery"]
    );
}

#[tokio::test]
async fn pending_deliveries_survive_a_restart() {
    let app = TestApp::spawn_with(|c| {
        c.job_backoff_base_ms = 200;
        c.job_poll_ms = 10;
    })
    .await;
    let u = app.standard().await;
    let rx = Receiver::start(&[], Behaviour::Status(503)).await;
    let (hook, _) = create_hook(&app, &u, &rx.url, json!(["*"])).await;
    app.raise(Event::new("lead.created", &u.id, json!({"id": 11})))
        .await;
    rx.wait_for(1).await;
    let app = app.restart().await;
    *rx.default.lock().unwrap() = Behaviour::Status(200);
    let mut status = json!(null);
    for _ in 0..500 {
        let d = app
            .call(
                &u.token,
                "webhooks",
                "deliveries",
                Some(json!(hook)),
                json!({}),
            )
            .await;
        status = d.ok(200)["deliveries"][0]["status"].clone();
        if status == json!("succeeded") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(status, json!("succeeded"));
    let hits = rx.hits();
    assert!(hits.len() >= 2 && hits.iter().all(|h| h.body == hits[0].body));
}

#[tokio::test]
async fn test_action_reports_the_receivers_answer() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let rx = Receiver::start(&[Behaviour::Status(418)], Behaviour::Status(200)).await;
    let (hook, secret) = create_hook(&app, &u, &rx.url, json!(["lead.created"])).await;
    let r = app
        .call(&u.token, "webhooks", "test", Some(json!(hook)), json!({}))
        .await;
    let d = r.ok(200).clone();
    assert_eq!(
        (
            d["result"]["status_code"].clone(),
            d["result"]["succeeded"].clone()
        ),
        (json!(418), json!(false))
    );
    assert_eq!(d["delivery"]["status"], json!("failed"));
    let r = app
        .call(&u.token, "webhooks", "test", Some(json!(hook)), json!({}))
        .await;
    assert_eq!(r.ok(200)["result"]["succeeded"], json!(true));
    let hits = rx.wait_for(2).await;
    assert_eq!(hits[1].headers["genied-event"], "webhook.test");
    assert!(verify(&hits[1], &secret));
}

#[tokio::test]
async fn other_users_cannot_touch_a_webhook() {
    let app = TestApp::spawn().await;
    let (a, b) = (app.standard().await, app.standard().await);
    let rx = Receiver::start(&[], Behaviour::Status(200)).await;
    let (hook, _) = create_hook(&app, &a, &rx.url, json!(["*"])).await;
    for action in [
        "get",
        "update",
        "delete",
        "rotate-secret",
        "test",
        "deliveries",
        "redeliver",
    ] {
        let data = if action == "update" {
            json!({"url": "http://127.0.0.1:1/x"})
        } else {
            json!({})
        };
        app.call(&b.token, "webhooks", action, Some(json!(hook)), data)
            .await
            .err(404, "NOT_FOUND");
    }
    assert!(rx.hits().is_empty());
    let w = app
        .call(&a.token, "webhooks", "get", Some(json!(hook)), json!({}))
        .await;
    assert_eq!(w.ok(200)["webhook"]["url"], json!(rx.url));
    let consumer = app.consumer().await;
    app.call(
        &consumer.token,
        "webhooks",
        "create",
        None,
        json!({"url": rx.url}),
    )
    .await
    .err(403, "FORBIDDEN");
}

#[tokio::test]
async fn private_addresses_are_refused_unless_configured() {
    let app = TestApp::spawn_with(|c| c.allow_private_outbound = false).await;
    let u = app.standard().await;
    let rx = Receiver::start(&[], Behaviour::Status(200)).await;
    for url in [
        "http://127.0.0.1:9/x",
        "http://[::1]/x",
        "http://169.254.169.254/latest",
        "http://10.0.0.1/",
        "http://2130706433/",
    ] {
        let r = app
            .call(&u.token, "webhooks", "create", None, json!({"url": url}))
            .await;
        r.err(400, "VALIDATION_ERROR");
        assert!(
            r.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("not allowed"),
            "{}",
            r.body
        );
    }
    // A name that resolves to loopback is resolved at create and refused there too, rather
    // than accepted and retried for hours by the delivery job.
    let port = rx.url.split(':').nth(2).unwrap().split('/').next().unwrap();
    let r = app
        .call(
            &u.token,
            "webhooks",
            "create",
            None,
            json!({"url": format!("http://localhost:{port}/hook")}),
        )
        .await;
    r.err(400, "VALIDATION_ERROR");
    let msg = r.body["error"]["message"].as_str().unwrap();
    assert!(
        msg.starts_with("data.url: localhost resolves to 127.0.0.1")
            && msg.contains("--allow-private-outbound"),
        "{msg}"
    );
    assert_eq!(app.count("webhooks").await, 0);
    assert!(rx.hits().is_empty());
}

#[tokio::test]
async fn signing_secrets_survive_master_key_rotation() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let rx = Receiver::start(&[], Behaviour::Status(200)).await;
    let (hook, secret) = create_hook(&app, &u, &rx.url, json!(["*"])).await;
    let key_file = app.dir.path().join("secrets/master.key");
    let before = std::fs::read_to_string(&key_file).unwrap();
    let n = genied::workers::credentials::rotate_master_key(&app.state.db, &key_file).unwrap();
    assert_eq!(n, 1, "the webhook secret is re-encrypted with the new key");
    assert_ne!(std::fs::read_to_string(&key_file).unwrap(), before);
    // The running service picks up the new key and still signs with the same secret.
    let r = app
        .call(&u.token, "webhooks", "test", Some(json!(hook)), json!({}))
        .await;
    assert_eq!(r.ok(200)["result"]["succeeded"], json!(true));
    assert!(verify(&rx.wait_for(1).await[0], &secret));
    // And after a restart.
    let app = app.restart().await;
    let r = app
        .call(&u.token, "webhooks", "test", Some(json!(hook)), json!({}))
        .await;
    assert_eq!(r.ok(200)["result"]["succeeded"], json!(true));
    assert!(verify(&rx.wait_for(2).await[1], &secret));

    // With no worker credential stored, the webhook's secret is what a start probes: a key
    // that does not open it is refused, as it is for a credential.
    let mut app = app;
    app.shutdown().await;
    let good = std::fs::read_to_string(&key_file).unwrap();
    std::fs::write(&key_file, hex::encode([9u8; 32])).unwrap();
    let err = genied::build_app(app.state.config.clone())
        .err()
        .expect("must refuse");
    assert!(
        err.to_string()
            .contains("does not open the stored credentials"),
        "{err}"
    );
    std::fs::write(&key_file, good).unwrap();
    let app = app.restart().await;
    let r = app
        .call(&u.token, "webhooks", "test", Some(json!(hook)), json!({}))
        .await;
    assert_eq!(r.ok(200)["result"]["succeeded"], json!(true));
}

#[tokio::test]
async fn graceful_shutdown_finishes_in_flight_requests() {
    let mut app = TestApp::spawn().await;
    let u = app.standard().await;
    // A receiver that takes a while makes `test` a slow request.
    let rx = Receiver::start(&[], Behaviour::Sleep(Duration::from_millis(600))).await;
    let (hook, _) = create_hook(&app, &u, &rx.url, json!(["*"])).await;
    let (client, url, token) = (
        app.client.clone(),
        format!("{}/v1", app.base),
        u.token.clone(),
    );
    let in_flight = tokio::spawn(async move {
        let body = json!({"resource": "webhooks", "action": "test", "id": hook});
        TestApp::finish(client.post(url).bearer_auth(token).json(&body)).await
    });
    rx.wait_for(1).await; // the request is being served
    app.shutdown().await; // returns once the server has drained
    let r = in_flight.await.unwrap();
    assert_eq!(r.ok(200)["result"]["succeeded"], json!(true));
    // New connections are refused after shutdown.
    assert!(reqwest::get(format!("{}/healthz", app.base)).await.is_err());
}

/// A receiver the address guard refuses at delivery (stored before the check at create
/// existed, or the operator turned the guard on since) is given up on the first attempt, not
/// retried for hours: the delivery fails, the endpoint is disabled, the owner is told why.
#[tokio::test]
async fn a_receiver_refused_at_delivery_is_disabled_at_once() {
    let app = TestApp::spawn_with(|c| {
        fast(c);
        c.allow_private_outbound = false;
    })
    .await;
    let u = app.standard().await;
    let rx = Receiver::start(&[], Behaviour::Status(200)).await;
    // Stored as an older version stored it: no check at create.
    let hook = genied::db::new_id();
    let (h2, uid, url, st) = (
        hook.clone(),
        u.id.clone(),
        rx.url.clone(),
        app.state.clone(),
    );
    app.state
        .db
        .write(move |c| {
            let sealed = genied::webhooks::seal_secret(&st, c, &h2, "whsec_legacy")?;
            genied::db::webhooks::insert(
                c,
                &genied::db::webhooks::NewWebhook {
                    id: &h2,
                    user_id: &uid,
                    url: &url,
                    description: None,
                    event_types: &["*".to_string()],
                    sealed: &sealed,
                    secret_prefix: "whsec_legac",
                },
            )?;
            Ok(())
        })
        .await
        .unwrap();
    app.raise(Event::new("lead.created", &u.id, json!({"id": 1})))
        .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let w = loop {
        let w = app
            .call(&u.token, "webhooks", "get", Some(json!(hook)), json!({}))
            .await
            .ok(200)["webhook"]
            .clone();
        if w["is_active"] == json!(false) {
            break w;
        }
        if std::time::Instant::now() > deadline {
            let d = app
                .call(
                    &u.token,
                    "webhooks",
                    "deliveries",
                    Some(json!(hook)),
                    json!({}),
                )
                .await;
            panic!("never disabled: {w}\ndeliveries: {}", d.body);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let reason = w["disabled_reason"].as_str().unwrap();
    assert!(
        reason.contains("refused") && reason.contains("not allowed"),
        "{reason}"
    );
    let d = app
        .call(
            &u.token,
            "webhooks",
            "deliveries",
            Some(json!(hook)),
            json!({}),
        )
        .await;
    let d = d.ok(200)["deliveries"][0].clone();
    assert_eq!(
        (d["status"].clone(), d["attempts"].clone()),
        (json!("failed"), json!(1)),
        "{d}"
    );
    let n = app
        .call(&u.token, "notifications", "list", None, json!({}))
        .await;
    assert_eq!(
        n.ok(200)["notifications"][0]["kind"],
        json!("webhook.disabled")
    );
    assert_eq!(app.count("jobs").await, 0, "no retry is queued");
    assert!(rx.hits().is_empty());
}
