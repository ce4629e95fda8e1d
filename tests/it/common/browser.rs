//! Headless Chromium for the tests of the pages genied serves (the public genie page now, the
//! console later). `cargo test` must pass on a fresh Debian machine with nothing installed by
//! hand, so the first test that needs the browser installs Debian's `chromium` package when it
//! is missing: once per test process (a `OnceLock`) and once across concurrent test processes
//! (an exclusive `flock` on a file in the temp directory; apt's own lock is waited for too).
//! Every Chromium runs under a [`Proc`] guard: its whole process group (the browser and the
//! helpers it starts) is SIGKILLed when the test ends, however it ends. Its crash handlers
//! leave the group (a session of their own, adopted by init), so each Chromium also gets a
//! temp directory as profile and `HOME`, which every process it starts names on its command
//! line; whatever still names it is killed as well.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use nix::fcntl::{Flock, FlockArg};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use super::process::{self, DEADLINE, Drain, Proc};

/// Where Debian's package puts the browser.
const DEBIAN_CHROMIUM: &str = "/usr/bin/chromium";

/// apt-get update and install download and unpack a few hundred MB: minutes, not seconds.
const INSTALL_LIMIT: Duration = Duration::from_secs(20 * 60);

/// How long one DevTools command may take: an evaluation may wait for the page's own
/// conditions, each up to [`DEADLINE`].
const CALL_LIMIT: Duration = Duration::from_secs(120);

/// Flags for a browser in a container, as root, without a display: no sandbox (it needs user
/// namespaces), no GPU, `/tmp` instead of a small `/dev/shm`, and nothing that phones home.
const FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
];

/// The Chromium binary, installed first if it is missing. Fails the test with a message that
/// says why and what to do when it cannot be installed.
pub fn chromium() -> PathBuf {
    static CHROMIUM: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    CHROMIUM
        .get_or_init(|| match find_chromium() {
            Some(p) => Ok(p),
            None => install_chromium(Path::new("apt-get"), find_chromium),
        })
        .clone()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// `chromium` on the PATH, or Debian's path.
fn find_chromium() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("chromium"))
            .find(|p| p.is_file())
    });
    on_path.or_else(|| Some(PathBuf::from(DEBIAN_CHROMIUM)).filter(|p| p.is_file()))
}

/// Installs Debian's `chromium` with `apt_get` under an exclusive lock shared by every test
/// process on the machine; `find` is asked again once the lock is held, so the processes that
/// waited for another's install do not repeat it.
pub fn install_chromium(
    apt_get: &Path,
    find: impl Fn() -> Option<PathBuf>,
) -> Result<PathBuf, String> {
    let failed = |why: String| {
        format!(
            "the browser tests need Chromium, which is not installed, and installing Debian's \
             chromium package failed: {why}\nInstall it by hand (as root: apt-get update && \
             apt-get install -y chromium) and run the tests again."
        )
    };
    if !nix::unistd::geteuid().is_root() {
        return Err(failed(
            "installing packages needs root and these tests do not run as root".into(),
        ));
    }
    let lock_path = std::env::temp_dir().join("genied-tests-chromium-install.lock");
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| failed(format!("could not open {}: {e}", lock_path.display())))?;
    let _lock = Flock::lock(file, FlockArg::LockExclusive)
        .map_err(|(_, e)| failed(format!("could not lock {}: {e}", lock_path.display())))?;
    if let Some(p) = find() {
        return Ok(p);
    }
    eprintln!(
        "test harness: Chromium is missing; installing Debian's chromium package with {} \
         (update, install -y chromium), once",
        apt_get.display()
    );
    for args in [
        &["update", "-qq"][..],
        &["install", "-y", "-qq", "chromium"],
    ] {
        let out = process::output_within(
            Command::new(apt_get)
                .args(["-o", "DPkg::Lock::Timeout=600"])
                .args(args)
                .env("DEBIAN_FRONTEND", "noninteractive"),
            INSTALL_LIMIT,
        )
        .map_err(failed)?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            return Err(failed(format!(
                "`{} {}` exited with {}: {}",
                apt_get.display(),
                args.join(" "),
                out.status,
                stderr.trim()
            )));
        }
    }
    find().ok_or_else(|| {
        failed(format!(
            "apt-get succeeded but there is no chromium on the PATH or at {DEBIAN_CHROMIUM}"
        ))
    })
}

async fn chromium_async() -> PathBuf {
    tokio::task::spawn_blocking(chromium)
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
}

/// A Chromium command with its own profile directory, also its `HOME` (see the module doc)
/// and its `TMPDIR`, so the temporary directories it makes go when the profile does.
fn chromium_command(bin: PathBuf, profile: &Path) -> Command {
    let mut cmd = Command::new(bin);
    cmd.args(FLAGS)
        .arg(format!("--user-data-dir={}", profile.display()))
        .env("HOME", profile)
        .env("TMPDIR", profile);
    cmd
}

/// The DOM of `url` after Chromium has loaded it and run its scripts (`--dump-dom`, with 3 s
/// of virtual time for timers).
pub fn dump_dom(url: &str) -> String {
    let profile = tempfile::tempdir().unwrap();
    let marker = profile.path().to_string_lossy().into_owned();
    let out = process::output_within(
        chromium_command(chromium(), profile.path())
            .arg("--virtual-time-budget=3000")
            .arg("--dump-dom")
            .arg(url),
        DEADLINE,
    );
    process::kill_marked(&marker);
    let out = out.unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "chromium failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A headless Chromium with the DevTools protocol on, killed (with its helpers) on drop.
pub struct Browser {
    proc: Proc,
    stderr: Drain,
    /// `host:port` of the DevTools HTTP and WebSocket endpoints.
    pub devtools: String,
    profile: tempfile::TempDir,
}

impl Browser {
    /// Starts Chromium on `url` and waits until it reports its DevTools address.
    pub async fn launch(url: &str) -> Browser {
        let bin = chromium_async().await;
        let profile = tempfile::tempdir().unwrap();
        let mut proc = Proc::spawn(
            chromium_command(bin, profile.path())
                .arg("--remote-debugging-port=0")
                .arg(url)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped()),
        );
        // Chromium prints `DevTools listening on ws://host:port/...` on stderr; the rest of
        // its stderr is kept for failure messages.
        let stderr = proc.drain_stderr();
        let end = Instant::now() + DEADLINE;
        let devtools = loop {
            let text = stderr.text();
            if let Some(rest) = text.split("DevTools listening on ws://").nth(1) {
                break rest.split('/').next().unwrap_or_default().to_string();
            }
            if let Some(s) = proc.try_wait() {
                panic!("chromium exited ({s}) before DevTools was up: {text}");
            }
            assert!(
                Instant::now() < end,
                "chromium did not report its DevTools address within {DEADLINE:?}: {text}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        Browser {
            proc,
            stderr,
            devtools,
            profile,
        }
    }

    /// The pid of the browser process (the leader of its process group).
    pub fn pid(&self) -> u32 {
        self.proc.id()
    }

    /// The unique path every process of this browser names on its command line.
    pub fn marker(&self) -> String {
        self.profile.path().to_string_lossy().into_owned()
    }

    /// What Chromium printed on stderr so far.
    pub fn log(&self) -> String {
        self.stderr.text()
    }

    /// A DevTools session with the page target whose URL starts with `url`, once it exists.
    pub async fn page(&self, url: &str) -> Page {
        let end = Instant::now() + DEADLINE;
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        let ws_url = loop {
            let targets: Value = match client
                .get(format!("http://{}/json/list", self.devtools))
                .send()
                .await
            {
                Ok(r) => r.json().await.unwrap_or(Value::Null),
                Err(_) => Value::Null,
            };
            let found = targets.as_array().and_then(|ts| {
                ts.iter()
                    .find(|t| {
                        t["type"] == "page" && t["url"].as_str().is_some_and(|u| u.starts_with(url))
                    })
                    .and_then(|t| t["webSocketDebuggerUrl"].as_str().map(str::to_string))
            });
            if let Some(u) = found {
                break u;
            }
            assert!(
                Instant::now() < end,
                "no page target for {url} within {DEADLINE:?}; targets: {targets}; chromium: {}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let (ws, _) = tokio_tungstenite::connect_async(ws_url)
            .await
            .expect("DevTools WebSocket");
        Page { ws, next_id: 0 }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Before the fields drop: the browser and all its helpers die before the profile
        // directory is removed.
        self.proc.kill();
        process::kill_marked(&self.marker());
    }
}

/// One DevTools protocol session with a page.
pub struct Page {
    ws: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
    next_id: u64,
}

impl Page {
    /// Sends one command and returns its answer (`{"id", "result"}` or `{"id", "error"}`);
    /// events that arrive meanwhile are skipped.
    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let msg = json!({"id": id, "method": method, "params": params});
        self.ws
            .send(Message::Text(msg.to_string().into()))
            .await
            .expect("send to DevTools");
        let end = tokio::time::Instant::now() + CALL_LIMIT;
        loop {
            let msg = tokio::time::timeout_at(end, self.ws.next())
                .await
                .unwrap_or_else(|_| panic!("no DevTools answer to {method} within {CALL_LIMIT:?}"))
                .expect("the DevTools connection closed")
                .expect("DevTools message");
            let v: Value = serde_json::from_str(msg.to_text().unwrap_or("{}")).unwrap_or_default();
            if v["id"] == json!(id) {
                return v;
            }
        }
    }

    /// Evaluates `expression` (awaiting it when it is a promise) and returns its value. The
    /// page may still be navigating when the session attaches (or when the expression started a
    /// navigation), which destroys the evaluation's context: the expression is evaluated again
    /// until it runs in the loaded page.
    pub async fn evaluate(&mut self, expression: &str) -> Value {
        let end = Instant::now() + DEADLINE;
        loop {
            let v = self
                .call(
                    "Runtime.evaluate",
                    json!({"expression": expression, "awaitPromise": true, "returnByValue": true}),
                )
                .await;
            let navigating = v["error"]["message"].as_str().is_some_and(|m| {
                m.contains("context was destroyed") || m.contains("target navigated or closed")
            });
            if navigating && Instant::now() < end {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            assert!(
                v["error"].is_null() && v["result"]["exceptionDetails"].is_null(),
                "the script failed in the page: {v}"
            );
            return v["result"]["result"]["value"].clone();
        }
    }
}
