//! Where uploaded files are turned into text: in a child process, so that no file can take
//! the service down. A parser that overflows its stack aborts the whole process it runs in,
//! whatever thread, and a runaway one can eat the machine's memory or a core; in a child, the
//! crash, the memory limit (`RLIMIT_AS`) and the timeout (a kill from the parent, and
//! `RLIMIT_CPU` behind it) end only that child, and the document fails with a readable error.
//!
//! The child is the genied binary itself, re-executed as `genied extract-worker` (a hidden
//! subcommand): it sets its own limits, reads the file on stdin and writes one JSON object on
//! stdout, `{"text": …}` or `{"error": …}`. Programs that embed the service in-process
//! (integration tests, examples) have no genied binary of their own: they name one with
//! `Config::extract_exe` (the test harness passes Cargo's), or, without it, extraction runs
//! on a thread with a large stack, which bounds time for the caller but not memory.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::config::Config;

/// The hidden subcommand the child runs.
pub const SUBCOMMAND: &str = "extract-worker";
/// Stack of the in-process fallback thread: the parsers are depth-bounded or streaming, and
/// this is margin on top.
const FALLBACK_STACK: usize = 256 * 1024 * 1024;
/// The most text one document may yield (the JSON the child writes is read up to this).
const MAX_OUTPUT: u64 = 512 * 1024 * 1024;

/// Bounds and the executable for extraction, from the configuration.
#[derive(Debug, Clone)]
pub struct Sandbox {
    pub exe: Option<PathBuf>,
    pub timeout: Duration,
    pub memory_mb: u64,
}

impl Sandbox {
    pub fn from_config(c: &Config) -> Sandbox {
        Sandbox {
            exe: c.extract_exe.clone(),
            timeout: Duration::from_secs(c.extract_timeout_seconds.max(1)),
            memory_mb: c.extract_memory_mb.max(64),
        }
    }

    /// The text of a file, by its name's extension (see [`super::file_to_text`]), or why
    /// there is none.
    pub async fn file_to_text(&self, filename: &str, bytes: Vec<u8>) -> Result<String, String> {
        // Plain text is decoded by a loop, not parsed: no process is worth starting for it.
        if matches!(
            super::extension(filename).as_deref(),
            Some("txt" | "md" | "markdown")
        ) {
            let name = filename.to_string();
            return tokio::task::spawn_blocking(move || super::file_to_text(&name, &bytes))
                .await
                .map_err(|_| "text extraction crashed on this file".to_string())?;
        }
        match &self.exe {
            Some(exe) => self.in_child(exe, filename, bytes).await,
            None => self.on_thread(filename, bytes).await,
        }
    }

    async fn in_child(
        &self,
        exe: &std::path::Path,
        filename: &str,
        bytes: Vec<u8>,
    ) -> Result<String, String> {
        let cpu = self.timeout.as_secs() + 1;
        let mut child = tokio::process::Command::new(exe)
            .arg(SUBCOMMAND)
            .arg("--filename")
            .arg(filename)
            .arg("--memory-mb")
            .arg(self.memory_mb.to_string())
            .arg("--cpu-seconds")
            .arg(cpu.to_string())
            // Nothing of the service's environment (keys, URLs) is the child's business.
            .env_clear()
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                tracing::error!(exe = %exe.display(), error = %e, "cannot start the extraction process");
                "text extraction could not be started".to_string()
            })?;
        let (mut stdin, stdout, stderr) = (
            child.stdin.take().expect("piped"),
            child.stdout.take().expect("piped"),
            child.stderr.take().expect("piped"),
        );
        let io = async {
            let feed = async move {
                // A child that stops reading (it failed early) is not an error here; its
                // answer or exit status says what happened.
                let _ = stdin.write_all(&bytes).await;
                let _ = stdin.shutdown().await;
            };
            let mut out = Vec::new();
            let mut err = Vec::new();
            let (mut stdout, mut stderr) = (stdout.take(MAX_OUTPUT), stderr.take(64 * 1024));
            let read_out = stdout.read_to_end(&mut out);
            let read_err = stderr.read_to_end(&mut err);
            let (_, o, e) = tokio::join!(feed, read_out, read_err);
            o.and(e).map(|_| (out, err))
        };
        let outcome = tokio::time::timeout(self.timeout, async {
            let (out, err) = io.await?;
            let status = child.wait().await?;
            Ok::<_, std::io::Error>((status, out, err))
        })
        .await;
        let (status, out, err) = match outcome {
            Err(_) => {
                let _ = child.start_kill();
                let _ = child.wait().await;
                return Err(format!(
                    "text extraction took longer than {} s and was stopped",
                    self.timeout.as_secs()
                ));
            }
            Ok(Err(e)) => {
                let _ = child.start_kill();
                let _ = child.wait().await;
                tracing::error!(error = %e, "extraction process I/O failed");
                return Err("text extraction failed".into());
            }
            Ok(Ok(x)) => x,
        };
        if status.success()
            && let Ok(v) = serde_json::from_slice::<serde_json::Value>(&out)
        {
            if let Some(t) = v["text"].as_str() {
                return Ok(t.to_string());
            }
            if let Some(e) = v["error"].as_str() {
                return Err(e.to_string());
            }
        }
        let err = String::from_utf8_lossy(&err);
        tracing::warn!(%status, stderr = %err.trim(), file = filename, "extraction process failed");
        Err(crash_message(&err, self.memory_mb))
    }

    async fn on_thread(&self, filename: &str, bytes: Vec<u8>) -> Result<String, String> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let name = filename.to_string();
        std::thread::Builder::new()
            .name("extract".into())
            .stack_size(FALLBACK_STACK)
            .spawn(move || {
                let r = std::panic::catch_unwind(|| super::file_to_text(&name, &bytes));
                let _ = tx.send(r);
            })
            .map_err(|e| format!("text extraction could not be started: {e}"))?;
        match tokio::time::timeout(self.timeout, rx).await {
            Err(_) => Err(format!(
                "text extraction took longer than {} s and was stopped",
                self.timeout.as_secs()
            )),
            Ok(Ok(Ok(r))) => r,
            Ok(_) => Err("text extraction crashed on this file".into()),
        }
    }
}

/// A readable reason for a child that died instead of answering.
fn crash_message(stderr: &str, memory_mb: u64) -> String {
    if stderr.contains("overflowed its stack") {
        "the document is nested too deeply to read".into()
    } else if stderr.contains("memory allocation") || stderr.contains("capacity overflow") {
        format!("the document needs more memory than extraction may use ({memory_mb} MiB)")
    } else {
        "text extraction crashed on this file".into()
    }
}

/// The child's side: limits first, then the file from stdin, the answer on stdout.
pub fn child_main(filename: &str, memory_mb: u64, cpu_seconds: u64) -> anyhow::Result<()> {
    use rlimit::Resource;
    let bytes = memory_mb.saturating_mul(1024 * 1024);
    Resource::AS.set(bytes, bytes)?;
    Resource::CPU.set(cpu_seconds, cpu_seconds + 1)?;
    // No core dumps of user content.
    Resource::CORE.set(0, 0)?;
    let mut input = Vec::new();
    std::io::stdin().lock().read_to_end(&mut input)?;
    let answer = match std::panic::catch_unwind(|| super::file_to_text(filename, &input)) {
        Ok(Ok(text)) => json!({ "text": text }),
        Ok(Err(e)) => json!({ "error": e }),
        Err(_) => json!({ "error": "text extraction crashed on this file" }),
    };
    drop(input);
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, &answer)?;
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crash_messages_name_the_cause() {
        assert_eq!(
            crash_message(
                "\nthread 'main' has overflowed its stack\nfatal runtime error",
                512
            ),
            "the document is nested too deeply to read"
        );
        assert!(crash_message("memory allocation of 99 bytes failed", 512).contains("(512 MiB)"));
        assert_eq!(
            crash_message("", 512),
            "text extraction crashed on this file"
        );
    }
}
