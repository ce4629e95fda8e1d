//! A real S3-compatible server for the tests of `--document-store s3://…`: moto in server
//! mode, from PyPI (pinned), installed by the first test that needs it into a venv under the
//! target directory, once per machine (an exclusive `flock`, as the Chromium install).
//!
//! One server per test process, on a free loopback port, with one bucket; each test gets a
//! prefix of its own (`s3://genied-tests/<uuid>`), so tests never see each other's objects.
//! The server is started by a thread that lives as long as the test process, and asks the
//! kernel to SIGKILL it when that thread goes (`PR_SET_PDEATHSIG`, set by a two-line Python
//! wrapper before it execs moto): so it ends with the test binary, however that ends, and it
//! is not paid for again by every test (moto takes seconds to import on a busy machine).

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use nix::fcntl::{Flock, FlockArg};

use super::process::{self, DEADLINE, Proc};

/// Pinned: a new moto release must not turn the suite red on its own.
const MOTO: &str = "moto[server]==5.1.17";
pub const BUCKET: &str = "genied-tests";
/// moto accepts any credentials; genied must send some (it signs every request).
pub const ACCESS_KEY_ID: &str = "genied-test-key-id";
pub const SECRET_ACCESS_KEY: &str = "genied-test-secret-key-do-not-log";

const INSTALL_LIMIT: Duration = Duration::from_secs(15 * 60);

/// The target directory: the test binary's genied is `<target>/<profile>/genied`.
fn target_dir() -> PathBuf {
    let bin = Path::new(env!("CARGO_BIN_EXE_genied"));
    bin.parent()
        .and_then(Path::parent)
        .expect("the genied binary lives under the target directory")
        .to_path_buf()
}

/// `moto_server` in the venv, installed first when missing or of another version.
fn moto_server() -> Result<PathBuf, String> {
    let venv = target_dir().join("moto-venv");
    let bin = venv.join("bin").join("moto_server");
    let marker = venv.join("installed.txt");
    let ready = || bin.is_file() && std::fs::read_to_string(&marker).is_ok_and(|m| m == MOTO);
    if ready() {
        return Ok(bin);
    }
    let failed = |why: String| {
        format!(
            "the object-store tests need moto ({MOTO}, from PyPI) and installing it into {} \
             failed: {why}",
            venv.display()
        )
    };
    let lock_path = std::env::temp_dir().join("genied-tests-moto-install.lock");
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| failed(format!("could not open {}: {e}", lock_path.display())))?;
    let _lock = Flock::lock(file, FlockArg::LockExclusive)
        .map_err(|(_, e)| failed(format!("could not lock {}: {e}", lock_path.display())))?;
    if ready() {
        return Ok(bin);
    }
    eprintln!("test harness: installing {MOTO} into {}", venv.display());
    let _ = std::fs::remove_dir_all(&venv);
    let pip = venv.join("bin").join("pip");
    let mut make = Command::new("python3");
    make.arg("-m").arg("venv").arg(&venv);
    let mut install = Command::new(&pip);
    install.args(["install", "--quiet", "--disable-pip-version-check", MOTO]);
    for cmd in [&mut make, &mut install] {
        let out = process::output_within(cmd, INSTALL_LIMIT).map_err(failed)?;
        if !out.status.success() {
            return Err(failed(format!(
                "{:?} exited with {}: {}",
                cmd.get_program(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
    }
    std::fs::write(&marker, MOTO).map_err(|e| failed(e.to_string()))?;
    Ok(bin)
}

/// The shared server's base URL (`http://127.0.0.1:<port>`), its bucket created.
pub fn endpoint() -> String {
    static SERVER: OnceLock<Result<String, String>> = OnceLock::new();
    SERVER
        .get_or_init(start)
        .clone()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn start() -> Result<String, String> {
    let bin = moto_server()?;
    let python = bin.with_file_name("python");
    let port = process::free_port();
    let (tx, rx) = std::sync::mpsc::channel::<Result<(), String>>();
    std::thread::Builder::new()
        .name("moto-server".into())
        .spawn(move || {
            // The death signal belongs to this thread: it must outlive every test.
            let mut p = match Proc::try_spawn(
                Command::new(&python)
                    .arg("-c")
                    .arg(
                        "import ctypes, os, sys\n\
                         ctypes.CDLL(None).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL\n\
                         os.execv(sys.argv[1], sys.argv[1:])",
                    )
                    .arg(&bin)
                    .args(["-H", "127.0.0.1", "-p", &port.to_string()])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped()),
            ) {
                Ok(p) => p,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            let err = p.drain_stderr();
            let end = Instant::now() + DEADLINE;
            let up = loop {
                if let Some(s) = p.try_wait() {
                    break Err(format!("moto exited with {s}: {}", err.text()));
                }
                if request(port, "PUT", &format!("/{BUCKET}")).is_ok_and(|s| s == 200) {
                    break Ok(());
                }
                if Instant::now() > end {
                    break Err(format!(
                        "moto did not answer within {DEADLINE:?}: {}",
                        err.text()
                    ));
                }
                std::thread::sleep(Duration::from_millis(50));
            };
            let failed = up.is_err();
            let _ = tx.send(up);
            if failed {
                return; // `p` drops: killed
            }
            loop {
                std::thread::park();
            }
        })
        .map_err(|e| e.to_string())?;
    rx.recv().map_err(|e| e.to_string())??;
    Ok(format!("http://127.0.0.1:{port}"))
}

/// One plain HTTP/1.1 request without a body; the status code.
fn request(port: u16, method: &str, path: &str) -> std::io::Result<u16> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    let mut head = [0u8; 12];
    s.read_exact(&mut head)?;
    std::str::from_utf8(&head[9..12])
        .ok()
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other("not an HTTP answer"))
}

/// Whether this run keeps documents in S3 (`GENIED_TEST_DOCUMENT_STORE=s3`, set by `.ci/run`
/// for the second run of the document tests).
pub fn enabled() -> bool {
    std::env::var("GENIED_TEST_DOCUMENT_STORE").is_ok_and(|v| v == "s3")
}

/// Points `c` at a fresh prefix of the shared bucket; returns the prefix.
pub fn use_s3(c: &mut genied::Config) -> String {
    let prefix = uuid::Uuid::new_v4().simple().to_string();
    use_prefix(c, &prefix);
    prefix
}

/// Points `c` at `prefix` of the shared bucket.
pub fn use_prefix(c: &mut genied::Config, prefix: &str) {
    c.document_store = format!("s3://{BUCKET}/{prefix}").parse().unwrap();
    c.s3_endpoint = Some(endpoint());
    c.s3_region = "us-east-1".into();
    c.s3_credentials = genied::config::S3Credentials {
        access_key_id: Some(genied::config::Secret(ACCESS_KEY_ID.into())),
        secret_access_key: Some(genied::config::Secret(SECRET_ACCESS_KEY.into())),
        session_token: None,
    };
}

/// A client of the test bucket of its own (objects are private: reading them takes signed
/// requests), to look at what genied stored.
fn client() -> object_store::aws::AmazonS3 {
    object_store::aws::AmazonS3Builder::new()
        .with_bucket_name(BUCKET)
        .with_region("us-east-1")
        .with_endpoint(endpoint())
        .with_allow_http(true)
        .with_access_key_id(ACCESS_KEY_ID)
        .with_secret_access_key(SECRET_ACCESS_KEY)
        .build()
        .expect("S3 test client")
}

/// The keys (relative to `prefix`) and sizes of the objects under `prefix`, listed by the
/// server itself.
pub async fn objects(prefix: &str) -> Vec<(String, u64)> {
    use futures::TryStreamExt;
    use object_store::ObjectStore;
    let root = object_store::path::Path::from(prefix);
    let metas: Vec<object_store::ObjectMeta> = client()
        .list(Some(&root))
        .try_collect()
        .await
        .expect("list objects");
    let mut out: Vec<(String, u64)> = metas
        .into_iter()
        .map(|m| {
            let key = m.location.as_ref();
            let rel = key.strip_prefix(&format!("{prefix}/")).unwrap_or(key);
            (rel.to_string(), m.size)
        })
        .collect();
    out.sort();
    out
}

/// One object's bytes, as the server has them.
pub async fn object(prefix: &str, key: &str) -> Vec<u8> {
    use object_store::ObjectStore;
    let path = object_store::path::Path::from(format!("{prefix}/{key}"));
    let got = client()
        .get(&path)
        .await
        .unwrap_or_else(|e| panic!("object {prefix}/{key}: {e}"));
    got.bytes().await.expect("object bytes").to_vec()
}
