//! The test harness: `TestApp::spawn()` starts genied in-process on a free port over a temp
//! data directory; helpers create users, tokens and keys and make envelope calls. Child
//! processes (the real binary, Chromium) start through `process::Proc`, which kills them when
//! the test ends, however it ends; `browser` drives headless Chromium.

#![allow(dead_code)]

pub mod browser;
pub mod documents;
pub mod fakes;
pub mod fixtures;
pub mod oidc_provider;
pub mod postgres;
pub mod process;
pub mod s3;

use genied::Config;
use genied::app::AppState;
use genied::auth::sessions;
use genied::db::{self, users::Role};
use reqwest::Method;
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub struct TestApp {
    pub base: String,
    pub state: AppState,
    pub dir: TempDir,
    pub client: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<()>>,
}

#[derive(Debug, Clone)]
pub struct User {
    pub id: String,
    pub email: String,
    pub role: Role,
    pub token: String,
}

#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub body: Value,
    pub headers: reqwest::header::HeaderMap,
}

impl Resp {
    pub fn data(&self) -> &Value {
        &self.body["data"]
    }
    pub fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("")
    }
    /// Asserts success with `status` and returns `data`.
    #[track_caller]
    pub fn ok(&self, status: u16) -> &Value {
        assert_eq!(
            self.status, status,
            "unexpected status; body: {}",
            self.body
        );
        assert_eq!(self.body["success"], json!(true), "body: {}", self.body);
        &self.body["data"]
    }
    /// Asserts a failure envelope with this status and code.
    #[track_caller]
    pub fn err(&self, status: u16, code: &str) {
        assert_eq!(
            self.status, status,
            "unexpected status; body: {}",
            self.body
        );
        assert_eq!(self.body["success"], json!(false), "body: {}", self.body);
        assert_eq!(
            self.body["error"]["code"],
            json!(code),
            "body: {}",
            self.body
        );
        assert_eq!(
            self.body["error"]["status"],
            json!(status),
            "body: {}",
            self.body
        );
        assert!(
            self.body["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "body: {}",
            self.body
        );
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// Configuration every test starts from: fast job polling, loopback allowed for fakes.
pub fn test_config(dir: &std::path::Path) -> Config {
    log_if_asked();
    let mut c = Config::new(dir);
    c.listen = "127.0.0.1:0".into();
    c.job_poll_ms = 20;
    // One id per data directory: a restarted TestApp is the same instance, and takes back
    // its own running jobs at once, also on PostgreSQL (where others' wait for their lease).
    c.instance_id = Some(format!(
        "test-{}",
        dir.file_name().unwrap_or_default().to_string_lossy()
    ));
    c.allow_private_outbound = true;
    // Voice platforms' fakes answer at once; a retried failure need not wait half a second.
    c.provider_retry_base_ms = 5;
    // The service runs in this test process; uploaded files are read by the real genied
    // binary in a child process, as under `genied serve`.
    c.extract_exe = Some(env!("CARGO_BIN_EXE_genied").into());
    // And a rebuild of the documents search index at a start, too.
    c.index_exe = Some(env!("CARGO_BIN_EXE_genied").into());
    // The second run of the document tests keeps document files in a real S3-compatible
    // server (see `s3`).
    if s3::enabled() {
        s3::use_s3(&mut c);
    }
    // `GENIED_TEST_DATABASE=postgres`: every app gets a database of its own on the test
    // process's PostgreSQL cluster (not yet part of .ci/run: docs/reliability.md says which
    // tests pass there).
    if postgres::enabled() {
        let url = postgres::database();
        DATABASES
            .lock()
            .unwrap()
            .insert(dir.to_path_buf(), url.clone());
        c.database_url = Some(genied::config::DatabaseUrl::Postgres(url));
    }
    c
}

/// The PostgreSQL database of each data directory `test_config` was given, for the real
/// binary's commands run on that directory (`cli_env`).
static DATABASES: std::sync::Mutex<std::collections::BTreeMap<std::path::PathBuf, String>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// The environment that points the real binary's `migrate` and `admin` commands run on
/// `data_dir` at the records of the app started there: its PostgreSQL database when the
/// run uses PostgreSQL; nothing on SQLite, where the data directory says it all.
pub fn cli_env(data_dir: &std::path::Path) -> Vec<(&'static str, String)> {
    DATABASES
        .lock()
        .unwrap()
        .get(data_dir)
        .map(|u| vec![("GENIED_DATABASE_URL", u.clone())])
        .unwrap_or_default()
}

/// For a test that runs the real binary on a data directory of its own (not a `TestApp`'s):
/// with `GENIED_TEST_DATABASE=postgres` a fresh database of the test cluster for that
/// directory, made on the first call and the same on every later one, so `serve`, `migrate`
/// and `admin` run there on PostgreSQL as the in-process apps do; with SQLite nothing (the
/// directory holds the database). Returns the environment to give each such command.
pub fn own_database(data_dir: &std::path::Path) -> Vec<(&'static str, String)> {
    let known = DATABASES.lock().unwrap().contains_key(data_dir);
    if postgres::enabled() && !known {
        let url = postgres::database();
        DATABASES
            .lock()
            .unwrap()
            .insert(data_dir.to_path_buf(), url);
    }
    cli_env(data_dir)
}

/// Rows of `sql` (`$1`… text parameters; every column read as text, so cast non-text ones
/// with `CAST(… AS TEXT)`) on the records of `data_dir`: its PostgreSQL database when it has
/// one (`own_database`, `test_config`), else its SQLite file. For checks below the API in
/// tests that run on either engine.
pub fn query(data_dir: &std::path::Path, sql: &str, params: &[&str]) -> Vec<Vec<Option<String>>> {
    let url = DATABASES.lock().unwrap().get(data_dir).cloned();
    if let Some(url) = url {
        return postgres::query(&url, sql, params);
    }
    let c = rusqlite::Connection::open(data_dir.join("genied.db")).expect("the database file");
    let mut st = c.prepare(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let n = st.column_count();
    st.query_map(rusqlite::params_from_iter(params), |r| {
        (0..n)
            .map(|i| {
                use rusqlite::types::ValueRef;
                Ok(match r.get_ref(i)? {
                    ValueRef::Null => None,
                    ValueRef::Integer(v) => Some(v.to_string()),
                    ValueRef::Real(v) => Some(v.to_string()),
                    ValueRef::Text(t) | ValueRef::Blob(t) => {
                        Some(String::from_utf8_lossy(t).into_owned())
                    }
                })
            })
            .collect()
    })
    .unwrap()
    .collect::<rusqlite::Result<_>>()
    .unwrap()
}

/// Every byte the app's records occupy at rest: SQLite's file and its WAL, or the files of
/// its PostgreSQL database (`postgres::stored_bytes`); for "no secret in plaintext" checks.
pub fn stored_bytes(app: &TestApp) -> Vec<u8> {
    match app.state.config.postgres_url() {
        Some(url) => postgres::stored_bytes(url),
        None => {
            let db = app.state.config.db_path();
            let mut bytes = std::fs::read(&db).expect("the database file");
            bytes.extend(std::fs::read(format!("{}-wal", db.display())).unwrap_or_default());
            bytes
        }
    }
}

/// Polls `probe` until it gives a value, for what a background task brings about (never a
/// fixed sleep); fails naming `what` after 60 s, a deadline a busy machine still meets.
pub async fn wait_until<T>(what: &str, mut probe: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// `GENIED_TEST_LOG=1`: the service's own log (genied's targets, debug and up) in each
/// test's captured output, which says why an answer was a 500.
fn log_if_asked() {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    if std::env::var_os("GENIED_TEST_LOG").is_some() {
        let filter =
            tracing_subscriber::filter::Targets::new().with_target("genied", tracing::Level::DEBUG);
        let _ = tracing_subscriber::registry()
            .with(tracing_subscriber::fmt::layer().with_test_writer())
            .with(filter)
            .try_init();
    }
}

impl TestApp {
    pub async fn spawn() -> TestApp {
        Self::spawn_with(|_| {}).await
    }

    pub async fn spawn_with(tweak: impl FnOnce(&mut Config)) -> TestApp {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = test_config(dir.path());
        tweak(&mut config);
        Self::start(dir, config).await
    }

    /// Starts the service on `dir`, which may hold a data directory already (a database
    /// and secrets copied from another test app).
    pub async fn spawn_in(dir: TempDir, tweak: impl FnOnce(&mut Config)) -> TestApp {
        let mut config = test_config(dir.path());
        tweak(&mut config);
        Self::start(dir, config).await
    }

    async fn start(dir: TempDir, config: Config) -> TestApp {
        Self::start_with(dir, config, None).await
    }

    /// Starts the service with another voice provider (a test fake of the voice platform).
    pub async fn spawn_with_voice(
        voice: genied::voice::DynVoice,
        tweak: impl FnOnce(&mut Config),
    ) -> TestApp {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = test_config(dir.path());
        tweak(&mut config);
        Self::start_with(dir, config, Some(voice)).await
    }

    /// Returns once the server answers `/readyz`: by then `serve` has subscribed its
    /// background tasks to the event bus, so an event a test emits reaches them.
    async fn start_with(
        dir: TempDir,
        mut config: Config,
        voice: Option<genied::voice::DynVoice>,
    ) -> TestApp {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().unwrap();
        config.public_url = Some(format!("http://{addr}"));
        let app = match voice {
            Some(v) => genied::app::build_app_with_voice(config, v).expect("build_app_with_voice"),
            None => genied::build_app(config).expect("build_app"),
        };
        let state = app.state.clone();
        let (tx, rx) = oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            genied::serve(app, listener, async move {
                let _ = rx.await;
            })
            .await
            .expect("serve");
        });
        let t = TestApp {
            base: format!("http://{addr}"),
            state,
            dir,
            client: reqwest::Client::new(),
            stop: Some(tx),
            server: Some(server),
        };
        // Its own client, keeping no idle connection: a pooled one would hold a slot of the
        // server's connection bound that the slow-client tests count on.
        let probe = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .expect("client");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            match probe.get(format!("{}/readyz", t.base)).send().await {
                Ok(r) if r.status().is_success() => break,
                _ if std::time::Instant::now() > deadline => panic!("the service never got ready"),
                _ => tokio::time::sleep(std::time::Duration::from_millis(5)).await,
            }
        }
        t
    }

    /// Stops the server (graceful) and starts a new one on the same data directory.
    pub async fn restart(self) -> TestApp {
        self.restart_with(|_| {}).await
    }

    /// [`TestApp::restart`] with the configuration changed first.
    pub async fn restart_with(mut self, tweak: impl FnOnce(&mut Config)) -> TestApp {
        self.shutdown().await;
        let config = {
            let mut c = self.state.config.clone();
            c.listen = "127.0.0.1:0".into();
            tweak(&mut c);
            c
        };
        let dir = std::mem::replace(&mut self.dir, tempfile::tempdir().unwrap());
        drop(self);
        Self::start(dir, config).await
    }

    pub async fn shutdown(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(h) = self.server.take() {
            let _ = h.await;
        }
    }

    /// A user of `role` with a live session token (no HTTP sign-in needed).
    pub async fn user(&self, role: Role) -> User {
        let email = format!("{}@example.test", uuid::Uuid::new_v4().simple());
        self.user_with_email(role, &email).await
    }

    pub async fn user_with_email(&self, role: Role, email: &str) -> User {
        let e = email.to_string();
        let u = self
            .state
            .db
            .write(move |c| Ok(db::users::insert(c, &e, Some("Test User"), role, None)?))
            .await
            .expect("insert user");
        let c = &self.state.config;
        let pair = sessions::open(
            &self.state.db,
            &self.state.secrets.jwt_key,
            &u.id,
            role,
            c.session_ttl_seconds,
            c.refresh_ttl_seconds,
        )
        .await
        .expect("session");
        User {
            id: u.id,
            email: u.email,
            role,
            token: pair.access_token,
        }
    }

    pub async fn standard(&self) -> User {
        self.user(Role::StandardUser).await
    }
    pub async fn admin(&self) -> User {
        self.user(Role::InternalAdmin).await
    }
    pub async fn consumer(&self) -> User {
        self.user(Role::Consumer).await
    }

    /// Creates an API key for `user` through the API and returns the secret.
    pub async fn api_key(&self, user: &User) -> String {
        let r = self
            .call(
                &user.token,
                "api-keys",
                "create",
                None,
                json!({"name": "test key"}),
            )
            .await;
        r.ok(201)["api_key"]["key"].as_str().unwrap().to_string()
    }

    /// `POST /v1` with the envelope.
    pub async fn call(
        &self,
        token: &str,
        resource: &str,
        action: &str,
        id: Option<Value>,
        data: Value,
    ) -> Resp {
        let mut body = json!({"resource": resource, "action": action, "data": data});
        if let Some(id) = id {
            body["id"] = id;
        }
        self.request(Method::POST, "/v1", Some(token), Some(body))
            .await
    }

    /// Any request; `token` goes in `Authorization: Bearer`.
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> Resp {
        let mut req = self.client.request(method, format!("{}{path}", self.base));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        Self::finish(req).await
    }

    /// A request with raw headers and body, for malformed input.
    pub async fn raw(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<reqwest::Body>,
    ) -> Resp {
        let mut req = self
            .client
            .request(method, format!("{}{path}", self.base))
            .body(body);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        Self::finish(req).await
    }

    pub async fn finish(req: reqwest::RequestBuilder) -> Resp {
        let resp = req.send().await.expect("request");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let text = resp.text().await.expect("body");
        let body = serde_json::from_str(&text)
            .unwrap_or_else(|_| panic!("response is not JSON (status {status}): {text:?}"));
        Resp {
            status,
            body,
            headers,
        }
    }

    /// Runs every due job now, as the worker would.
    pub async fn run_jobs(&self) -> usize {
        genied::dispatch::run_due(&self.state).await.expect("jobs")
    }

    /// Raises `event` as the service does: recorded in the outbox in a transaction of its
    /// own, then emitted, which wakes the dispatcher (webhook fan-out, worker triggers).
    pub async fn raise(&self, event: genied::events::Event) {
        let recorded = self
            .state
            .db
            .write(move |c| Ok(genied::events::record(c, event)?))
            .await
            .expect("record the event");
        self.state.bus.emit(recorded);
    }

    /// On SQLite, FTS5's own `integrity-check` of the full-text index `table`: it fails when
    /// the index does not hold exactly what its content says (an external-content index
    /// told the wrong old values when a row leaves keeps ghosts). PostgreSQL keeps its
    /// indexes with the table: nothing to check there.
    pub async fn fts_index_is_whole(&self, table: &'static str) {
        if self.state.config.postgres_url().is_some() {
            return;
        }
        self.state
            .db
            .write(move |c| {
                Ok(c.execute(
                    &format!("INSERT INTO {table} ({table}, rank) VALUES ('integrity-check', 1)"),
                    [],
                )?)
            })
            .await
            .unwrap_or_else(|e| {
                panic!("the full-text index {table} does not match its content: {e}")
            });
    }

    /// Counts rows of a table (test assertions on "nothing changed").
    pub async fn count(&self, table: &'static str) -> i64 {
        self.state
            .db
            .read(move |c| {
                Ok(c.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))?)
            })
            .await
            .unwrap()
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}

/// Inserts a genie row for `owner` directly, skipping provisioning (creating one through the
/// API calls the voice provider), for tests that only need a genie to exist.
pub async fn insert_genie(app: &TestApp, owner: &User, name: &str) -> String {
    insert_genie_with(app, owner, name, json!({})).await
}

/// [`insert_genie`] with further columns set from `extra` (`{"column": value}`); arrays and
/// objects are stored as JSON text, `null` as NULL.
pub async fn insert_genie_with(app: &TestApp, owner: &User, name: &str, extra: Value) -> String {
    let (uid, name) = (owner.id.clone(), name.to_string());
    let id = db::new_id();
    let gid = id.clone();
    app.state
        .db
        .write(move |c| {
            let at = db::now();
            c.execute(
                "INSERT INTO genies (id, user_id, name, name_lower, llm_model, created_at, updated_at)
                 VALUES (?1, ?2, ?3, lower(?3), 'gpt-4o-mini', ?4, ?4)",
                rusqlite::params![gid, uid, name, at],
            )?;
            for (k, v) in extra.as_object().cloned().unwrap_or_default() {
                let v: Box<dyn rusqlite::ToSql> = match v {
                    Value::Null => Box::new(rusqlite::types::Null),
                    Value::String(s) => Box::new(s),
                    Value::Bool(b) => Box::new(b),
                    Value::Number(n) if n.is_i64() => Box::new(n.as_i64()),
                    Value::Number(n) => Box::new(n.as_f64()),
                    other => Box::new(other.to_string()),
                };
                c.execute(
                    &format!("UPDATE genies SET {k} = ?2 WHERE id = ?1"),
                    rusqlite::params![gid, v],
                )?;
            }
            Ok(())
        })
        .await
        .unwrap();
    id
}
