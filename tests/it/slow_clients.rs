//! Slow clients cannot exhaust the server: connections that send nothing, send part of a
//! header, dribble a header or idle after a response are closed after their timeouts, and
//! connections over `--max-connections` wait in the backlog while the server keeps serving.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::*;

/// Generous: on a busy 2-core machine a timeout of 1–2 s may fire late, never early.
const DEADLINE: Duration = Duration::from_secs(60);

fn addr(app: &TestApp) -> String {
    app.base.trim_start_matches("http://").to_string()
}

/// Reads until the server closes the connection (EOF or reset); returns when that happened,
/// or `None` when it did not within [`DEADLINE`].
async fn closed_by_server(s: &mut TcpStream) -> Option<Instant> {
    let mut buf = [0u8; 4096];
    tokio::time::timeout(DEADLINE, async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return Instant::now(),
                Ok(_) => {}
            }
        }
    })
    .await
    .ok()
}

/// Sends `GET /healthz` on `s` and reads one response (head and its `content-length` body).
async fn healthz_on(s: &mut TcpStream) -> String {
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = s.read(&mut buf).await.expect("read response");
        assert!(n > 0, "closed before a full response: {got:?}");
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).to_string();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len: usize = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().ok())?
                })
                .expect("content-length");
            if body.len() >= len {
                return text;
            }
        }
    }
}

#[tokio::test]
async fn idle_partial_and_dribbling_connections_are_closed_after_their_timeouts() {
    let app = TestApp::spawn_with(|c| {
        c.idle_timeout_seconds = 1;
        c.header_read_timeout_seconds = 2;
    })
    .await;
    let a = addr(&app);

    // Connects and sends nothing: the idle timeout.
    let silent = async {
        let mut s = TcpStream::connect(&a).await.unwrap();
        let t0 = Instant::now();
        let at = closed_by_server(&mut s)
            .await
            .expect("silent connection left open");
        assert!(at - t0 >= Duration::from_millis(900), "closed too early");
    };
    // Part of a head, then nothing: the header-read timeout, from the first byte.
    let partial = async {
        let mut s = TcpStream::connect(&a).await.unwrap();
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost").await.unwrap();
        let t0 = Instant::now();
        let at = closed_by_server(&mut s)
            .await
            .expect("partial head left open");
        assert!(at - t0 >= Duration::from_millis(1900), "closed too early");
    };
    // A header line every 200 ms: never idle, but the head is not done within 2 s.
    let dribble = async {
        let s = TcpStream::connect(&a).await.unwrap();
        let (mut rd, mut wr) = s.into_split();
        wr.write_all(b"GET /healthz HTTP/1.1\r\n").await.unwrap();
        let t0 = Instant::now();
        let writer = async move {
            let mut ticks = tokio::time::interval(Duration::from_millis(200));
            loop {
                ticks.tick().await;
                if wr.write_all(b"X-Slow: yes\r\n").await.is_err() {
                    return;
                }
            }
        };
        let closed = async {
            let mut buf = [0u8; 1024];
            tokio::time::timeout(DEADLINE, async {
                loop {
                    match rd.read(&mut buf).await {
                        Ok(0) | Err(_) => return Instant::now(),
                        Ok(_) => {}
                    }
                }
            })
            .await
            .expect("dribbling connection left open")
        };
        tokio::pin!(closed);
        // The writer stops only when a write fails, which is after the server closed: the
        // read side then says when (on a busy machine both are ready in the same poll).
        let at = tokio::select! {
            biased;
            at = &mut closed => at,
            () = writer => closed.await,
        };
        assert!(at - t0 >= Duration::from_millis(1900), "closed too early");
    };
    // A full request, then idle on the kept-alive connection: the idle timeout again.
    let kept_alive = async {
        let mut s = TcpStream::connect(&a).await.unwrap();
        let resp = healthz_on(&mut s).await;
        assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
        let t0 = Instant::now();
        let at = closed_by_server(&mut s)
            .await
            .expect("kept-alive connection left open");
        assert!(at - t0 >= Duration::from_millis(900), "closed too early");
    };
    tokio::join!(silent, partial, dribble, kept_alive);

    // The service itself is untouched.
    let r = app
        .request(reqwest::Method::GET, "/healthz", None, None)
        .await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn connections_over_the_bound_wait_in_the_backlog() {
    let app = TestApp::spawn_with(|c| {
        c.max_connections = Some(4);
        c.idle_timeout_seconds = 600;
        c.header_read_timeout_seconds = 600;
    })
    .await;
    let a = addr(&app);
    // Four silent connections take every slot (the backlog is first in, first out, so they
    // are accepted before anything connected after them).
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(TcpStream::connect(&a).await.unwrap());
    }
    let mut fifth = TcpStream::connect(&a).await.unwrap();
    fifth
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    // Not served while the four are open. (This can only pass wrongly on a slow machine,
    // never fail wrongly: with the bound in force no answer can come.)
    let mut buf = [0u8; 64];
    let early = tokio::time::timeout(Duration::from_secs(1), fifth.read(&mut buf)).await;
    assert!(early.is_err(), "a fifth connection was served: {early:?}");
    // One slot frees: the fifth is accepted and answered.
    drop(held.pop());
    let mut got = Vec::new();
    tokio::time::timeout(DEADLINE, async {
        while !String::from_utf8_lossy(&got).contains("{\"status\":\"ok\"}") {
            let n = fifth.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed without an answer");
            got.extend_from_slice(&buf[..n]);
        }
    })
    .await
    .expect("the fifth connection was never served");
    assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200"));
}

#[tokio::test]
async fn hundreds_of_slow_connections_do_not_stop_the_server() {
    let app = TestApp::spawn_with(|c| {
        c.max_connections = Some(40);
        c.idle_timeout_seconds = 1;
        c.header_read_timeout_seconds = 1;
    })
    .await;
    let a = addr(&app);
    // 120 silent and 120 with half a head: six times the bound.
    let mut slow = Vec::new();
    for i in 0..240 {
        let mut s = TcpStream::connect(&a).await.unwrap();
        if i % 2 == 1 {
            s.write_all(b"POST /v1 HTTP/1.1\r\nHost: t\r\nX-Slow")
                .await
                .unwrap();
        }
        slow.push(s);
    }
    // A client behind them all is served once timeouts free slots.
    let mut late = TcpStream::connect(&a).await.unwrap();
    let resp = tokio::time::timeout(DEADLINE, healthz_on(&mut late))
        .await
        .expect("/healthz did not answer behind the slow connections");
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert!(resp.ends_with("{\"status\":\"ok\"}"), "{resp}");
    // Every slow connection was closed by the server.
    let closed = futures::future::join_all(slow.iter_mut().map(closed_by_server)).await;
    let open = closed.iter().filter(|c| c.is_none()).count();
    assert_eq!(open, 0, "{open} slow connections were never closed");
    // And the service answers normally, with authentication and the database.
    let u = app.standard().await;
    for _ in 0..20 {
        app.call(&u.token, "profiles", "get", None, serde_json::json!({}))
            .await
            .ok(200);
    }
}

#[test]
fn the_binary_raises_its_open_file_limit_and_derives_the_bound_from_it() {
    use std::io::BufRead;
    let (_, hard) = rlimit::getrlimit(rlimit::Resource::NOFILE).unwrap();
    // What the service can raise its soft limit to (see `http::server`).
    let reachable = hard.min(1 << 20);
    assert!(
        reachable > 64,
        "the hard open-file limit ({hard}) leaves nothing to raise"
    );
    let dir = tempfile::tempdir().unwrap();
    // Started with a soft limit of 64: a bound derived without raising it would be 32.
    // Under the process guard: killed when the test ends, pass or fail.
    let mut child = crate::common::process::Proc::spawn(
        std::process::Command::new("sh")
            .args(["-c", "ulimit -Sn 64 && exec \"$0\" \"$@\""])
            .arg(env!("CARGO_BIN_EXE_genied"))
            .arg("--data-dir")
            .arg(dir.path())
            .args(["serve", "--listen", "127.0.0.1:0"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null()),
    );
    let stdout = child.take_stdout().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if line.contains("connection limits") {
                let _ = tx.send(line);
                return;
            }
        }
    });
    let line = rx
        .recv_timeout(DEADLINE)
        .expect("serve never logged its connection limits");
    let got: u64 = line
        .split("max_connections=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no max_connections in {line:?}"));
    assert_eq!(
        got,
        genied::http::server::derived_max_connections(reachable),
        "{line}"
    );
    assert!(got > 32, "{line}");
}

#[test]
fn a_zero_connection_bound_or_timeout_is_refused() {
    for flag in [
        "--max-connections",
        "--idle-timeout-seconds",
        "--header-read-timeout-seconds",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_genied"))
            .arg("--data-dir")
            .arg(dir.path())
            .args(["serve", "--listen", "127.0.0.1:0", flag, "0"])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{flag} 0 was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(flag), "{flag}: {err}");
        assert!(
            !dir.path().join("genied.db").exists(),
            "{flag} 0 still created the database"
        );
    }
}
