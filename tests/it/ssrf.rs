//! SSRF: the guarded client (`genied::net::Guarded`) and every API path that fetches a
//! user-supplied URL refuse loopback, private, link-local and metadata addresses in every
//! spelling, names that resolve to them, and redirects into them, with a clear error, and the
//! target is never contacted.
//!
//! A target server listens on 127.0.0.1 and counts requests: a spelling that slipped through
//! would reach it. Redirect tests need an allowed first hop, so they use
//! `Guarded::with_allowed([exact ip:port])` with a redirecting server on 127.0.0.2.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use genied::net::{Guarded, Limits, NetError};
use serde_json::json;

use crate::common::*;

/// A server that counts every request; `/redirect?to=URL` answers 302 to `URL`.
struct Target {
    addr: SocketAddr,
    hits: Arc<AtomicUsize>,
}

#[derive(serde::Deserialize)]
struct To {
    to: String,
}

async fn start(ip: &str) -> Target {
    let hits = Arc::new(AtomicUsize::new(0));
    let app = Router::new()
        .route(
            "/redirect",
            get(
                |State(h): State<Arc<AtomicUsize>>, Query(q): Query<To>| async move {
                    h.fetch_add(1, Ordering::SeqCst);
                    (StatusCode::FOUND, [(header::LOCATION, q.to)], "")
                },
            ),
        )
        .fallback(|State(h): State<Arc<AtomicUsize>>| async move {
            h.fetch_add(1, Ordering::SeqCst);
            (
                [(header::CONTENT_TYPE, "text/html")],
                "<html><body><p>internal secret page</p></body></html>",
            )
                .into_response()
        })
        .with_state(hits.clone());
    let listener = tokio::net::TcpListener::bind(format!("{ip}:0"))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Target { addr, hits }
}

/// Every spelling of an internal address, pointed at port `port` where one applies.
fn internal_urls(port: u16) -> Vec<String> {
    let hosts = [
        // IPv4 loopback
        "127.0.0.1",
        "127.1",
        "127.0.1",
        "2130706433",
        "0x7f000001",
        "0x7f.0.0.1",
        "0x7f.1",
        "0177.0.0.1",
        "017700000001",
        "0177.1",
        "%31%32%37.0.0.1",
        "\u{ff11}\u{ff12}\u{ff17}.\u{ff10}.\u{ff10}.\u{ff11}", // full-width digits
        "127.255.255.254",
        // unspecified ("this host")
        "0",
        "0.0.0.0",
        "[::]",
        // IPv6 loopback, IPv4-mapped, IPv4-compatible, NAT64
        "[::1]",
        "[0:0:0:0:0:0:0:1]",
        "[::ffff:127.0.0.1]",
        "[::ffff:7f00:1]",
        "[::127.0.0.1]",
        "[64:ff9b::127.0.0.1]",
        "[64:ff9b::7f00:1]",
        "[::ffff:10.0.0.1]",
        // private ranges
        "10.0.0.1",
        "10.255.255.255",
        "172.16.0.1",
        "172.31.255.254",
        "192.168.0.1",
        "0xc0a80001",
        "3232235521",
        "100.64.0.1",
        "[fc00::1]",
        "[fd12:3456::1]",
        "[fe80::1]",
        // metadata services
        "169.254.169.254",
        "0xa9fea9fe",
        "2852039166",
        "[::ffff:169.254.169.254]",
        "[::ffff:a9fe:a9fe]",
        "[fd00:ec2::254]",
        "100.100.100.200",
        "192.0.0.192",
        // names
        "localhost",
        "LOCALHOST",
        "localhost.",
        "anything.localhost",
        "a.b.localhost",
    ];
    hosts
        .iter()
        .map(|h| format!("http://{h}:{port}/latest/meta-data/"))
        .chain([
            "http://169.254.169.254/latest/meta-data/".to_string(),
            "http://[fd00:ec2::254]/latest/meta-data/".to_string(),
            format!("https://127.0.0.1:{port}/"),
        ])
        .collect()
}

fn assert_refused(url: &str, r: Result<genied::net::Fetched, NetError>) {
    match r {
        Err(NetError::Refused(m)) => assert!(
            m.contains("not allowed") || m.contains("refused"),
            "{url}: unclear message {m:?}"
        ),
        other => panic!("{url} was not refused: {other:?}"),
    }
}

fn limits() -> Limits {
    Limits {
        max_bytes: 64 * 1024,
        timeout: std::time::Duration::from_secs(5),
    }
}

#[tokio::test]
async fn guarded_client_refuses_internal_addresses_in_every_spelling() {
    let target = start("127.0.0.1").await;
    let net = Guarded::new(false);
    for url in internal_urls(target.addr.port()) {
        assert_refused(&url, net.get(&url, limits()).await);
    }
    assert_eq!(
        target.hits.load(Ordering::SeqCst),
        0,
        "the target was reached"
    );
    // Control: the same target is reachable when private addresses are allowed, so a
    // refusal above is the guard's doing and not a dead server.
    let open = Guarded::new(true);
    let ok = open
        .get(
            &format!("http://127.0.0.1:{}/", target.addr.port()),
            limits(),
        )
        .await
        .unwrap();
    assert_eq!(ok.status, 200);
    assert_eq!(target.hits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn redirects_into_internal_addresses_are_refused() {
    let target = start("127.0.0.1").await;
    let hop = start("127.0.0.2").await;
    let net = Guarded::with_allowed(vec![hop.addr]);
    let tp = target.addr.port();
    // Control: the allowed first hop works, also through a redirect to itself.
    let hop_base = format!("http://{}", hop.addr);
    let ok = net
        .get(&format!("{hop_base}/page"), limits())
        .await
        .unwrap();
    assert_eq!(ok.status, 200);
    let self_redirect = format!("{hop_base}/redirect?to={hop_base}/page");
    let ok = net.get(&self_redirect, limits()).await.unwrap();
    assert_eq!(ok.status, 200);
    assert_eq!(ok.url.path(), "/page");
    let before = hop.hits.load(Ordering::SeqCst);
    assert_eq!(before, 3);

    let mut into: Vec<String> = internal_urls(tp);
    // The same host as the allowed hop, another port: not the allowed pair.
    into.push(format!("http://127.0.0.2:{tp}/"));
    into.push(format!("http://127.0.0.2:{}/", hop.addr.port() ^ 1));
    for to in &into {
        let url = format!("{hop_base}/redirect?to={}", urlencode(to));
        let h0 = hop.hits.load(Ordering::SeqCst);
        let r = net.get(&url, limits()).await;
        assert_eq!(
            hop.hits.load(Ordering::SeqCst),
            h0 + 1,
            "{to}: the hop was not asked"
        );
        match r {
            Err(NetError::Refused(m)) => assert!(
                m.contains("redirect refused") || m.contains("not allowed"),
                "redirect to {to}: unclear message {m:?}"
            ),
            other => panic!("redirect to {to} was followed: {other:?}"),
        }
    }
    // Schemes other than http(s) are never followed: refused, or the 302 itself is the answer.
    for to in ["file:///etc/passwd", "gopher://127.0.0.1:6379/_INFO"] {
        let url = format!("{hop_base}/redirect?to={}", urlencode(to));
        match net.get(&url, limits()).await {
            Err(NetError::Refused(m)) => assert!(m.contains("only http and https"), "{to}: {m}"),
            Ok(r) => {
                assert_eq!(r.status, 302, "{to}");
                assert_eq!(r.url.path(), "/redirect", "{to}");
                assert!(r.body.is_empty());
            }
            Err(e) => panic!("{to}: {e:?}"),
        }
    }
    assert_eq!(
        target.hits.load(Ordering::SeqCst),
        0,
        "a redirect reached the target"
    );
    assert_eq!(hop.hits.load(Ordering::SeqCst), before + into.len() + 2);
    // The hook is exact: the hop's address on another port, or another loopback, is refused.
    assert_refused(
        "target",
        net.get(&format!("http://{}/", target.addr), limits()).await,
    );
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A strict service (the production default: no private outbound).
async fn strict_app() -> TestApp {
    TestApp::spawn_with(|c| c.allow_private_outbound = false).await
}

/// Asserts a 400 refusal that names the field, and, when it is the address guard's, the
/// flag that opens it.
#[track_caller]
fn assert_field_refused(r: &Resp, field: &str, url: &str) {
    r.err(400, "VALIDATION_ERROR");
    let msg = r.body["error"]["message"].as_str().unwrap();
    assert!(msg.starts_with(&format!("{field}: ")), "{url}: {msg}");
    if !msg.contains("not a valid URL") {
        assert!(
            msg.contains("not allowed") && msg.contains("--allow-private-outbound"),
            "{url}: {msg}"
        );
    }
}

#[tokio::test]
async fn knowledge_base_and_webhooks_refuse_internal_urls() {
    let target = start("127.0.0.1").await;
    let app = strict_app().await;
    let u = app.standard().await;
    // Every spelling, names for loopback included, is refused when the request is made:
    // 400 naming the field and the address, nothing stored.
    for url in &internal_urls(target.addr.port()) {
        for (sub, extra) in [
            ("upload-website", json!({})),
            ("scrape-website", json!({"max_pages": 2})),
        ] {
            let mut data = json!({"url": url});
            data.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            let r = app
                .call(
                    &u.token,
                    "knowledge-base",
                    "create",
                    None,
                    json!({"action": sub, "data": data}),
                )
                .await;
            assert_field_refused(&r, "data.data.url", url);
        }
        let r = app
            .call(&u.token, "webhooks", "create", None, json!({"url": url}))
            .await;
        assert_field_refused(&r, "data.url", url);
    }
    // A name is refused with the address it resolves to.
    let r = app
        .call(
            &u.token,
            "webhooks",
            "create",
            None,
            json!({"url": format!("http://intranet.localhost:{}/hook", target.addr.port())}),
        )
        .await;
    assert_field_refused(&r, "data.url", "intranet.localhost");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("intranet.localhost resolves to 127.0.0.1"),
        "{}",
        r.body
    );
    assert_eq!(app.count("documents").await, 0);
    assert_eq!(app.count("webhooks").await, 0);

    // Updating a webhook to an internal address is refused and changes nothing.
    let ok = app
        .call(
            &u.token,
            "webhooks",
            "create",
            None,
            json!({"url": "https://example.com/hook"}),
        )
        .await;
    let id = ok.ok(201)["webhook"]["id"].clone();
    for url in [
        "http://169.254.169.254/",
        "http://[::ffff:127.0.0.1]/",
        "http://2130706433/",
        "http://localhost./",
        "http://db.localhost/",
    ] {
        let r = app
            .call(
                &u.token,
                "webhooks",
                "update",
                Some(id.clone()),
                json!({"url": url}),
            )
            .await;
        assert_field_refused(&r, "data.url", url);
    }
    let got = app
        .call(&u.token, "webhooks", "get", Some(id), json!({}))
        .await;
    assert_eq!(
        got.ok(200)["webhook"]["url"],
        json!("https://example.com/hook")
    );
    assert_eq!(target.hits.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn worker_web_fetch_refuses_internal_urls() {
    let target = start("127.0.0.1").await;
    let app = strict_app().await;
    let u = app.standard().await;
    let base = json!({"credential_type": "bearer_token", "value": "marker-token"});
    for url in internal_urls(target.addr.port()) {
        let mut data = base.clone();
        data["url"] = json!(url);
        let r = app
            .call(&u.token, "worker-genies", "test-credential", None, data)
            .await;
        if r.status == 400 {
            r.err(400, "VALIDATION_ERROR");
            let msg = r.body["error"]["message"].as_str().unwrap();
            assert!(msg.contains("not allowed"), "{url}: {msg}");
        } else {
            // Names resolving to loopback: the request is attempted and refused at resolution.
            let d = r.ok(200);
            assert_eq!(d["status"], json!("failed"), "{url}: {d}");
            assert!(
                d["message"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("not allowed"),
                "{url}: {d}"
            );
        }
    }
    assert_eq!(target.hits.load(Ordering::SeqCst), 0);
}

// ---- DNS names that resolve to internal addresses ------------------------------------------
//
// The guarded client asks the fake nameserver (`--dns-server`, `Guarded::with_dns_server`) of
// `fakes::dns`, whose zone maps names under `genied.test` to loopback, private, metadata and
// other internal addresses. Each name must be refused with a message naming the address it
// resolved to, the fake must have received the query (so the refusal came from a real
// resolution, not from a guess about the name), and the target on 127.0.0.1 is never reached.

use crate::common::fakes::dns::{self, FakeDns};

fn shown(addr: &str) -> String {
    addr.parse::<std::net::IpAddr>().unwrap().to_string()
}

#[tokio::test]
async fn names_resolving_to_internal_addresses_are_refused() {
    let fake = FakeDns::start().await;
    let target = start("127.0.0.1").await;
    let port = target.addr.port();
    let net = Guarded::with_dns_server(false, Some(fake.addr));
    for (label, _, bad) in dns::FORBIDDEN {
        let name = dns::fqdn(label);
        for url in [
            format!("http://{name}:{port}/latest/meta-data/"),
            // Upper case and a trailing dot are the same name.
            format!("http://{}.:{port}/", name.to_uppercase()),
        ] {
            match net.get(&url, limits()).await {
                Err(NetError::Refused(m)) => {
                    // The name as asked (a trailing dot stays), then the address.
                    let m = m
                        .to_lowercase()
                        .replace(&format!("{name}. "), &format!("{name} "));
                    let want = format!("{name} resolves to {}", shown(bad));
                    assert!(
                        m.contains(&want) && m.contains("not allowed"),
                        "{url}: the message should say '{want} … not allowed': {m}"
                    );
                }
                other => panic!("{url} was not refused: {other:?}"),
            }
        }
        assert!(fake.asked(&name), "{name} was never resolved");
    }
    // A truncated UDP answer: the resolver asked again over TCP, saw every address, and the
    // one private address among 40 public ones is named.
    let many = dns::fqdn(dns::MANY.0);
    match net.get(&format!("http://{many}:{port}/"), limits()).await {
        Err(NetError::Refused(m)) => assert!(
            m.contains(&format!("{many} resolves to {}", dns::MANY.1)),
            "{m}"
        ),
        other => panic!("{many} was not refused: {other:?}"),
    }
    assert!(
        fake.seen().iter().any(|s| s.name == many && s.tcp),
        "{many} was not asked over TCP: {:?}",
        fake.seen()
    );
    // The alias was followed to its target inside the zone.
    assert!(fake.asked("alias.genied.test"));
    assert_eq!(
        target.hits.load(Ordering::SeqCst),
        0,
        "the target was reached"
    );
    assert_eq!(fake.problems(), Vec::<String>::new());
    // Both address families were asked for (the guard sees every answer).
    let seen = fake.seen();
    for t in [
        hickory_proto::rr::RecordType::A,
        hickory_proto::rr::RecordType::AAAA,
    ] {
        assert!(seen.iter().any(|s| s.qtype == t), "no {t} query: {seen:?}");
    }

    // Control: with private addresses allowed, the same resolver's answer is what gets
    // connected to, so the refusals above are the guard's and not a broken lookup.
    let open = Guarded::with_dns_server(true, Some(fake.addr));
    let ok = open
        .get(&format!("http://loop.genied.test:{port}/"), limits())
        .await
        .unwrap();
    assert_eq!(ok.status, 200);
    assert_eq!(target.hits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn public_answers_and_unknown_names_are_not_refusals() {
    let fake = FakeDns::start().await;
    let net = Guarded::with_dns_server(false, Some(fake.addr));
    // Public answers pass the guard: whatever happens next (this machine may have no route
    // to the address, so a short timeout bounds the attempt) is a connection outcome, never
    // a refusal. Port 9 (discard) is not expected to answer HTTP.
    let quick = Limits {
        max_bytes: 1024,
        timeout: std::time::Duration::from_millis(800),
    };
    for (label, _) in dns::PUBLIC {
        let name = dns::fqdn(label);
        let url = format!("http://{name}:9/");
        match net.get(&url, quick).await {
            Err(NetError::Refused(m)) => panic!("{url} was refused: {m}"),
            Err(NetError::Failed(m)) => assert!(!m.contains("not allowed"), "{url}: {m}"),
            Ok(_) => {}
        }
        assert!(fake.asked(&name), "{name} was never resolved");
    }
    // `dual` has a public A and a loopback AAAA: only the A was asked for, so the loopback
    // address was never learned (and could not be connected to).
    assert!(
        !fake
            .seen()
            .iter()
            .any(|s| s.name == "dual.genied.test" && s.qtype == hickory_proto::rr::RecordType::AAAA),
        "{:?}",
        fake.seen()
    );
    // A name the zone does not have: NXDOMAIN is a failure to fetch, not a refusal.
    let url = "http://nowhere.genied.test/";
    match net.get(url, limits()).await {
        Err(NetError::Failed(m)) => {
            assert!(m.contains("dns error") || m.contains("no record"), "{m}")
        }
        other => panic!("{url}: {other:?}"),
    }
    assert!(fake.asked("nowhere.genied.test"));
    assert_eq!(fake.problems(), Vec::<String>::new());
}

#[tokio::test]
async fn api_paths_refuse_names_resolving_to_internal_addresses() {
    let fake = FakeDns::start().await;
    let target = start("127.0.0.1").await;
    let port = target.addr.port();
    let dns_addr = fake.addr;
    let app = TestApp::spawn_with(|c| {
        c.allow_private_outbound = false;
        c.dns_server = Some(dns_addr);
    })
    .await;
    let u = app.standard().await;

    // Knowledge base: the name is resolved when the document is created, through the same
    // nameserver the fetch would ask; refused at once, naming the field and the address.
    for (sub, label, bad) in [
        ("upload-website", "loop", "127.0.0.1"),
        ("upload-website", "mapped", "::ffff:127.0.0.1"),
        ("scrape-website", "meta", "169.254.169.254"),
        ("scrape-website", "internal", "10.1.2.3"),
        ("upload-website", "alias", "169.254.169.254"),
        ("scrape-website", "mixed", "10.0.0.7"),
    ] {
        let name = dns::fqdn(label);
        let url = format!("http://{name}:{port}/");
        let r = app
            .call(
                &u.token,
                "knowledge-base",
                "create",
                None,
                json!({"action": sub, "data": {"url": url}}),
            )
            .await;
        r.err(400, "VALIDATION_ERROR");
        let msg = r.body["error"]["message"].as_str().unwrap();
        let want = format!("data.data.url: {name} resolves to {}", shown(bad));
        assert!(
            msg.starts_with(&want)
                && msg.contains("not allowed")
                && msg.contains("--allow-private-outbound"),
            "{sub} {url}: {msg}"
        );
        assert!(fake.asked(&name), "{name} was never resolved");
    }
    assert_eq!(app.count("documents").await, 0);

    // Webhooks: create and update resolve the name too, so a receiver on an internal address
    // is refused at once rather than retried for hours.
    let w = app
        .call(
            &u.token,
            "webhooks",
            "create",
            None,
            json!({"url": format!("http://internal.genied.test:{port}/hook")}),
        )
        .await;
    w.err(400, "VALIDATION_ERROR");
    let msg = w.body["error"]["message"].as_str().unwrap();
    assert!(
        msg.starts_with("data.url: internal.genied.test resolves to 10.1.2.3")
            && msg.contains("--allow-private-outbound"),
        "{msg}"
    );
    assert_eq!(app.count("webhooks").await, 0);
    // Controls: a public answer is accepted, and so is a name that does not resolve yet
    // (not a refusal: the delivery checks again whatever DNS says then).
    let public = format!("http://{}:{port}/hook", dns::fqdn("public"));
    let w = app
        .call(&u.token, "webhooks", "create", None, json!({"url": public}))
        .await;
    let id = w.ok(201)["webhook"]["id"].clone();
    let nowhere = "http://nowhere.genied.test/hook";
    app.call(
        &u.token,
        "webhooks",
        "create",
        None,
        json!({"url": nowhere}),
    )
    .await
    .ok(201);
    assert!(fake.asked("nowhere.genied.test"));
    let r = app
        .call(
            &u.token,
            "webhooks",
            "update",
            Some(id.clone()),
            json!({"url": format!("http://{}:{port}/hook", dns::fqdn("v6loop"))}),
        )
        .await;
    r.err(400, "VALIDATION_ERROR");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("v6loop.genied.test resolves to ::1"),
        "{}",
        r.body
    );
    let got = app
        .call(&u.token, "webhooks", "get", Some(id), json!({}))
        .await;
    assert_eq!(got.ok(200)["webhook"]["url"], json!(public));

    // Worker `web_fetch` (through `test-credential`, which makes the same request).
    let r = app
        .call(
            &u.token,
            "worker-genies",
            "test-credential",
            None,
            json!({"credential_type": "bearer_token", "value": "marker-token",
                   "url": format!("http://v6loop.genied.test:{port}/")}),
        )
        .await;
    let d = r.ok(200);
    assert_eq!(d["status"], json!("failed"), "{d}");
    let msg = d["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("v6loop.genied.test resolves to ::1") && msg.contains("not allowed"),
        "{d}"
    );

    for name in [
        "internal.genied.test",
        "v6loop.genied.test",
        "public.genied.test",
    ] {
        assert!(fake.asked(name), "{name} was never resolved");
    }
    assert_eq!(
        target.hits.load(Ordering::SeqCst),
        0,
        "the target was reached"
    );
    assert_eq!(fake.problems(), Vec::<String>::new());
}
