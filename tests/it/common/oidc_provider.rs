//! A real, certified OpenID provider for the sign-in tests: `oidc-provider` from the npm
//! registry (a pinned version), run by Node on loopback. The first test that needs it
//! installs the package with npm into a directory under the target directory, once per test
//! process (a `OnceLock`) and once across concurrent test processes (an exclusive `flock`);
//! later runs find it there. Each provider runs under a [`Proc`] guard: its process group is
//! SIGKILLed when the test ends, however it ends.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use nix::fcntl::{Flock, FlockArg};
use serde_json::{Value, json};

use super::process::{self, DEADLINE, Drain, Proc};

/// The provider's npm package and version; bump both together.
const PACKAGE: &str = "oidc-provider@8.8.1";
const SCRIPT: &str = include_str!("oidc_provider.mjs");
const INSTALL_LIMIT: Duration = Duration::from_secs(10 * 60);

/// The directory holding `node_modules/oidc-provider`, installed first if missing.
pub fn install_dir() -> PathBuf {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DIR.get_or_init(install)
        .clone()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn installed(dir: &Path) -> bool {
    dir.join("node_modules/oidc-provider/package.json")
        .is_file()
}

fn install() -> Result<PathBuf, String> {
    let failed = |why: String| {
        format!(
            "the OpenID Connect tests need Node (v18 or later) and npm to install {PACKAGE} from \
             the npm registry; that failed: {why}"
        )
    };
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(PACKAGE.replace('@', "-"));
    std::fs::create_dir_all(&dir).map_err(|e| failed(e.to_string()))?;
    let lock_path = dir.join(".install.lock");
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| failed(format!("could not open {}: {e}", lock_path.display())))?;
    let _lock = Flock::lock(file, FlockArg::LockExclusive)
        .map_err(|(_, e)| failed(format!("could not lock {}: {e}", lock_path.display())))?;
    if !installed(&dir) {
        eprintln!(
            "test harness: installing {PACKAGE} with npm into {}, once",
            dir.display()
        );
        std::fs::write(
            dir.join("package.json"),
            r#"{"name": "genied-test-openid-provider", "private": true, "type": "module"}"#,
        )
        .map_err(|e| failed(e.to_string()))?;
        let out = process::output_within(
            Command::new("npm")
                .args([
                    "install",
                    "--no-audit",
                    "--no-fund",
                    "--loglevel=error",
                    "--save-exact",
                    PACKAGE,
                ])
                .current_dir(&dir),
            INSTALL_LIMIT,
        )
        .map_err(failed)?;
        if !out.status.success() || !installed(&dir) {
            return Err(failed(format!(
                "npm install exited with {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )));
        }
    }
    // The script sits next to node_modules so that `import 'oidc-provider'` resolves.
    std::fs::write(dir.join("provider.mjs"), SCRIPT).map_err(|e| failed(e.to_string()))?;
    Ok(dir)
}

pub const CLIENT_ID: &str = "genied-test";
pub const CLIENT_SECRET: &str = "test-client-secret-9f2c41d7e8b3a6055c1e";

/// A running provider.
pub struct OpenIdProvider {
    pub issuer: String,
    _proc: Proc,
    _out: (Drain, Drain),
}

impl OpenIdProvider {
    /// Starts the provider on `port`, with genied's callback at `genied_base` registered and
    /// `accounts` (`{"alice": {"email": …, "groups": […]}}`) as the people who can sign in.
    pub fn start(port: u16, genied_base: &str, accounts: Value) -> OpenIdProvider {
        let dir = install_dir();
        let issuer = format!("http://127.0.0.1:{port}");
        let cfg = json!({
            "port": port, "issuer": issuer, "client_id": CLIENT_ID,
            "client_secret": CLIENT_SECRET,
            "redirect_uri": format!("{genied_base}/v1/auth/oidc/callback"),
            "accounts": accounts,
        });
        let mut proc = Proc::spawn(
            Command::new("node")
                .arg("provider.mjs")
                .current_dir(&dir)
                .env("OP_CONFIG", cfg.to_string())
                .env("NODE_ENV", "test")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
        );
        let out = proc.drain_stdout();
        let err = proc.drain_stderr();
        let deadline = Instant::now() + DEADLINE;
        while !out.text().contains("ready") {
            if let Some(status) = proc.try_wait() {
                panic!(
                    "the OpenID provider exited ({status}): {}{}",
                    out.text(),
                    err.text()
                );
            }
            assert!(
                Instant::now() < deadline,
                "the OpenID provider did not start: {}{}",
                out.text(),
                err.text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        OpenIdProvider {
            issuer,
            _proc: proc,
            _out: (out, err),
        }
    }
}
