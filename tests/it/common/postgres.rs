//! A real PostgreSQL server for the tests that run on it (`GENIED_TEST_DATABASE=postgres`):
//! one cluster per test process, started on first use from Debian's `postgresql` package
//! (installed with apt-get when missing, as `browser` installs Chromium), in a temp
//! directory, as the unprivileged `postgres` user when the tests run as root, on a free
//! loopback port, with fsync off. Each caller of [`database`] gets a database of its own,
//! a copy of one template database migrated once per process.
//!
//! PostgreSQL has no "die with your parent" option, and a test process ends without running
//! destructors of statics, so a small watcher process outlives us by design: it polls our
//! pid and, once we are gone (pass, fail or SIGKILL), kills the server's process group and
//! removes its directory. No server outlives the test run.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Whether this test run uses PostgreSQL (`GENIED_TEST_DATABASE=postgres`).
pub fn enabled() -> bool {
    std::env::var("GENIED_TEST_DATABASE").is_ok_and(|v| v == "postgres")
}

/// Prints why a test does not run on PostgreSQL and says whether to skip it.
pub fn skip(reason: &str) -> bool {
    if enabled() {
        eprintln!("skipped on PostgreSQL: {reason}");
    }
    enabled()
}

struct Cluster {
    port: u16,
    /// The server's data directory.
    data: PathBuf,
}

static CLUSTER: OnceLock<Result<Cluster, String>> = OnceLock::new();
static NEXT_DB: AtomicU32 = AtomicU32::new(0);
/// The migrated database every test database is copied from (its name).
static TEMPLATE: OnceLock<Result<String, String>> = OnceLock::new();

/// A fresh, empty database on the test cluster: its `postgres://` URL.
pub fn database() -> String {
    // The sync client drives a runtime of its own, which tokio refuses inside a test's.
    std::thread::spawn(create_database)
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
}

fn create_database() -> String {
    let cluster = CLUSTER
        .get_or_init(start)
        .as_ref()
        .unwrap_or_else(|e| panic!("{e}"));
    let name = format!(
        "t{}_{}",
        std::process::id(),
        NEXT_DB.fetch_add(1, Ordering::SeqCst)
    );
    let admin = format!("postgres://genied@127.0.0.1:{}/postgres", cluster.port);
    let template = TEMPLATE
        .get_or_init(|| migrated_template(cluster.port, &admin))
        .as_ref()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut c =
        postgres::Client::connect(&admin, postgres::NoTls).expect("connect to the test cluster");
    // A copy of the migrated template: a file copy, where applying the migrations to each
    // new database would run every CREATE of the schema again for every test.
    c.batch_execute(&format!("CREATE DATABASE {name} TEMPLATE {template}"))
        .expect("create a test database");
    format!("postgres://genied@127.0.0.1:{}/{name}", cluster.port)
}

/// Creates the template database and applies genied's PostgreSQL migrations to it (as
/// `serve` would), once per test process; every app then finds nothing left to apply.
fn migrated_template(port: u16, admin: &str) -> Result<String, String> {
    let name = format!("tmpl{}", std::process::id());
    let mut c = postgres::Client::connect(admin, postgres::NoTls).map_err(|e| e.to_string())?;
    c.batch_execute(&format!("CREATE DATABASE {name}"))
        .map_err(|e| format!("create the template database: {e}"))?;
    drop(c);
    genied::db::Db::migrate_postgres(&format!("postgres://genied@127.0.0.1:{port}/{name}"))
        .map_err(|e| format!("migrate the template database: {e:#}"))?;
    Ok(name)
}

/// Runs one statement with text parameters (`$1`, …) on the database at `url` from a
/// connection of its own: another client than the service's pool, as `psql` would be.
pub fn execute(url: &str, sql: &str, params: &[&str]) -> u64 {
    on_own_connection(url, sql, params, |c, sql, p| {
        c.execute(sql, p).unwrap_or_else(|e| panic!("{sql}: {e}"))
    })
}

/// Rows of a query with text parameters on the database at `url` from a connection of its
/// own, every column read as text (cast the others in the query).
pub fn query(url: &str, sql: &str, params: &[&str]) -> Vec<Vec<Option<String>>> {
    on_own_connection(url, sql, params, |c, sql, p| {
        c.query(sql, p)
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .iter()
            .map(|r| {
                (0..r.len())
                    .map(|i| r.get::<_, Option<String>>(i))
                    .collect()
            })
            .collect()
    })
}

/// `f` on a fresh connection to `url`, on a thread of its own: the sync client drives a
/// runtime of its own, which tokio refuses inside a test's runtime.
fn on_own_connection<T: Send + 'static>(
    url: &str,
    sql: &str,
    params: &[&str],
    f: impl FnOnce(&mut postgres::Client, &str, &[&(dyn postgres::types::ToSql + Sync)]) -> T
    + Send
    + 'static,
) -> T {
    let (url, sql) = (url.to_owned(), sql.to_owned());
    let params: Vec<String> = params.iter().map(|p| p.to_string()).collect();
    std::thread::spawn(move || {
        let mut c = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
        let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
            params.iter().map(|p| p as _).collect();
        f(&mut c, &sql, &refs)
    })
    .join()
    .unwrap_or_else(|p| std::panic::resume_unwind(p))
}

/// A session of its own on the database at `url` holding `key` as an advisory lock until
/// the returned guard is dropped (what another instance's long write would do).
pub struct HeldLock {
    release: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

pub fn hold_advisory_lock(url: &str, key: i64) -> HeldLock {
    let url = url.to_owned();
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let (release, release_rx) = std::sync::mpsc::channel::<()>();
    let thread = std::thread::spawn(move || {
        let mut c = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
        c.execute("SELECT pg_advisory_lock($1)", &[&key])
            .expect("take the lock");
        let _ = held_tx.send(());
        // Held until the guard is dropped (or the test ends and drops it).
        let _ = release_rx.recv();
    });
    held_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the advisory lock is held");
    HeldLock {
        release: Some(release),
        thread: Some(thread),
    }
}

impl Drop for HeldLock {
    fn drop(&mut self) {
        drop(self.release.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Every byte the database at `url` holds at rest: after a checkpoint (which writes every
/// committed change into the data files), the files of that database in the cluster's
/// data directory. The PostgreSQL counterpart of reading SQLite's file and its WAL.
pub fn stored_bytes(url: &str) -> Vec<u8> {
    let url = url.to_owned();
    std::thread::spawn(move || {
        let mut c = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
        c.batch_execute("CHECKPOINT").expect("checkpoint");
        let oid: u32 = c
            .query_one(
                "SELECT oid FROM pg_database WHERE datname = current_database()",
                &[],
            )
            .expect("the database's oid")
            .get(0);
        let cluster = CLUSTER
            .get()
            .and_then(|c| c.as_ref().ok())
            .expect("cluster");
        let mut bytes = Vec::new();
        let dir = cluster.data.join("base").join(oid.to_string());
        for f in std::fs::read_dir(&dir)
            .expect("the database's directory")
            .flatten()
        {
            bytes.extend(std::fs::read(f.path()).unwrap_or_default());
        }
        assert!(!bytes.is_empty(), "no files under {}", dir.display());
        bytes
    })
    .join()
    .unwrap_or_else(|p| std::panic::resume_unwind(p))
}

/// The directory of Debian's PostgreSQL binaries (the newest version installed).
fn bin_dir() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("initdb").exists() && p.join("postgres").exists())
        .collect();
    dirs.sort_by_key(|p| {
        p.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    dirs.pop()
}

fn install() -> Result<PathBuf, String> {
    if let Some(b) = bin_dir() {
        return Ok(b);
    }
    eprintln!("installing Debian's postgresql package for the PostgreSQL test run (apt-get)");
    for args in [
        &["-o", "DPkg::Lock::Timeout=600", "update"][..],
        &[
            "-o",
            "DPkg::Lock::Timeout=600",
            "install",
            "-y",
            "--no-install-recommends",
            "postgresql",
        ][..],
    ] {
        let out = Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
            .map_err(|e| format!("apt-get: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "apt-get {args:?} failed: {}\nInstall it by hand (as root: apt-get install -y postgresql).",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    bin_dir().ok_or_else(|| "postgresql installed, but no initdb under /usr/lib/postgresql".into())
}

/// The uid and gid to run the server as: `postgres` when we are root (the server refuses
/// to run as root), else ourselves.
fn run_as() -> Option<(u32, u32)> {
    if nix::unistd::Uid::effective().is_root() {
        let id = |flag: &str| -> Option<u32> {
            let out = Command::new("id").args([flag, "postgres"]).output().ok()?;
            String::from_utf8(out.stdout).ok()?.trim().parse().ok()
        };
        Some((id("-u")?, id("-g")?))
    } else {
        None
    }
}

fn as_server_user(cmd: &mut Command, who: Option<(u32, u32)>) -> &mut Command {
    if let Some((uid, gid)) = who {
        cmd.uid(uid).gid(gid);
    }
    cmd
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().unwrap().port()
}

fn start() -> Result<Cluster, String> {
    let bin = install()?;
    let who = run_as();
    let dir = tempfile::Builder::new()
        .prefix("genied-pg-")
        .tempdir()
        .map_err(|e| e.to_string())?
        .keep();
    let data = dir.join("data");
    if let Some((uid, gid)) = who {
        nix::unistd::chown(&dir, Some(uid.into()), Some(gid.into())).map_err(|e| e.to_string())?;
    }
    let out = as_server_user(&mut Command::new(bin.join("initdb")), who)
        .args([
            "-A",
            "trust",
            "-U",
            "genied",
            "--no-sync",
            "-E",
            "UTF8",
            "--locale=C.UTF-8",
        ])
        .arg("-D")
        .arg(&data)
        .output()
        .map_err(|e| format!("initdb: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let port = free_port();
    // The server's log (failed statements with their SQL) goes with the cluster, unless
    // GENIED_TEST_PG_LOG names a file to keep it in.
    let log_path = std::env::var_os("GENIED_TEST_PG_LOG")
        .map(PathBuf::from)
        .unwrap_or_else(|| dir.join("server.log"));
    let log = std::fs::File::create(&log_path).map_err(|e| e.to_string())?;
    let server = as_server_user(&mut Command::new(bin.join("postgres")), who)
        .arg("-D")
        .arg(&data)
        .args(["-p", &port.to_string(), "-c", "listen_addresses=127.0.0.1"])
        .arg("-c")
        .arg(format!("unix_socket_directories={}", dir.display()))
        .args([
            "-c",
            "fsync=off",
            "-c",
            "synchronous_commit=off",
            "-c",
            "full_page_writes=off",
        ])
        .args(["-c", "max_connections=400", "-c", "shared_buffers=32MB"])
        // Every test makes a database (~8 MB, copied through the WAL): keep the WAL small
        // on a disk shared with builds.
        .args(["-c", "max_wal_size=64MB", "-c", "min_wal_size=32MB"])
        .args(["-c", "wal_level=minimal", "-c", "max_wal_senders=0"])
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
        .stderr(log)
        .process_group(0)
        .spawn()
        .map_err(|e| format!("postgres: {e}"))?;
    watch(server.id(), &dir);
    let deadline = Instant::now() + Duration::from_secs(60);
    let url = format!("postgres://genied@127.0.0.1:{port}/postgres");
    loop {
        match postgres::Client::connect(&url, postgres::NoTls) {
            Ok(_) => return Ok(Cluster { port, data }),
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                return Err(format!("the test PostgreSQL never answered: {e}\n{log}"));
            }
        }
    }
}

/// Starts the watcher that stops the server (its whole process group) and removes its
/// directory once this test process is gone.
// Never waited for on purpose: the watcher must outlive this process (init reaps it).
#[allow(clippy::zombie_processes)]
fn watch(server: u32, dir: &Path) {
    let me = std::process::id();
    let script = format!(
        "while kill -0 {me} 2>/dev/null; do sleep 0.5; done; kill -KILL -{server} 2>/dev/null; \
         sleep 0.5; rm -rf '{}'",
        dir.display()
    );
    Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("start the PostgreSQL watcher");
}
