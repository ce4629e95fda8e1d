//! The process around a build of the documents' search index (a start's, or a backlog's of
//! more than a batch): the genied binary re-executed as `genied index-worker` (a hidden
//! subcommand), which rebuilds the index from the database if it is not whole, indexes the
//! queue until it is empty (`search_index::child_main`), prints what it did as one JSON
//! object and exits. Here: how the server runs it, and how the child ends with its server
//! and reports.
//!
//! Why a process: what tantivy's writer and SQLite's page caches leave behind after a build
//! is freed memory between live blocks in glibc's arenas, which no trim gives back. At
//! 1,000,000 leads and 10,000 documents a server that built the index itself sat at 34 MB
//! idle, one that found it in step at 27 MB (docs/performance.md, rounds thirty-seven and
//! thirty-eight). A build that fails or crashes here also ends only the child; the server
//! then builds the index itself (`search_index::start`).
//!
//! The server holds the child's stdin open and never writes to it: its end means the server
//! is gone (killed; a stop kills the child itself), and the child exits rather than keep the
//! index's writer lock from the next start. Programs that embed the service in-process name
//! the executable with `Config::index_exe` (the test harness passes Cargo's) or build in
//! their own process.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// The hidden subcommand the child runs.
pub const SUBCOMMAND: &str = "index-worker";

/// What the child did, from its output.
#[derive(Debug, Serialize, Deserialize)]
pub struct Built {
    pub documents: usize,
    pub chunks: u64,
    /// The child's peak resident memory (`VmHWM`), in KiB; 0 where `/proc` cannot tell.
    pub peak_rss_kb: u64,
}

/// Runs the build in `exe`'s child process and waits for it; dropped (the server stopping),
/// the child is killed.
pub async fn in_child(exe: &Path, database: &Path, index: &Path) -> Result<Built, String> {
    use std::process::Stdio;
    let mut child = tokio::process::Command::new(exe)
        .arg(SUBCOMMAND)
        .arg("--database")
        .arg(database)
        .arg("--index")
        .arg(index)
        // Nothing of the service's environment (keys, URLs) is the child's business.
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    // Held, unwritten, until the child is done (`wait_with_output` would close it first).
    let stdin = child.stdin.take();
    let out = child
        .wait_with_output()
        .await
        .map_err(|e| format!("waiting for the build process: {e}"))?;
    drop(stdin);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let err = err.trim();
        // Its last lines say why; the log before them can be long.
        let from = err.char_indices().rev().nth(1999).map_or(0, |(i, _)| i);
        let tail = &err[from..];
        return Err(match tail {
            "" => out.status.to_string(),
            tail => format!("{}: {tail}", out.status),
        });
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("its output: {e}"))
}

/// The child's first step (`search_index::child_main`): ends the process when the server
/// is gone, which the end of its stdin says.
pub fn exit_with_the_server() {
    std::thread::spawn(|| {
        use std::io::Read;
        let mut stdin = std::io::stdin();
        let mut byte = [0u8; 1];
        // A read returns at the pipe's end (0 bytes) or on an error; a byte, which the
        // server never writes, is passed over.
        while matches!(stdin.read(&mut byte), Ok(1)) {}
        // Nothing printed: the server read the other end of stderr too (a write there
        // would fail, and `eprintln!` panic this thread instead of ending the process).
        std::process::exit(2);
    });
}

/// The child's last step: what it did, as the one line of its stdout.
pub fn report(documents: usize, chunks: u64) -> anyhow::Result<()> {
    let built = Built {
        documents,
        chunks,
        peak_rss_kb: peak_rss_kb(),
    };
    println!("{}", serde_json::to_string(&built)?);
    Ok(())
}

/// `VmHWM` of `/proc/self/status`, in KiB.
fn peak_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
            line.split_whitespace().nth(1)?.parse().ok()
        })
        .unwrap_or(0)
}
