//! Every process a test starts runs under a [`Proc`] guard. The child leads a process group of
//! its own, and dropping the guard (the test passed, an assertion failed, a helper panicked,
//! the test returned early) SIGKILLs the whole group and reaps the leader. SIGKILL, because a
//! child may ignore SIGTERM (a `genied serve` draining a job backlog did, at 86% CPU, after
//! its test had failed); the group, because browsers start helpers of their own.
//! `std::process::Child` on its own kills nothing when dropped.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStderr, ChildStdout, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::sys::signal::{self, Signal};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
use nix::unistd::Pid;

/// How long a test waits for a condition before it fails: generous, because the machine may
/// be busy with other builds and tests (conditions are polled, so a fast machine never waits
/// this long).
pub const DEADLINE: Duration = Duration::from_secs(60);

/// How often a wait looks at its condition again.
const POLL: Duration = Duration::from_millis(10);

/// A running child process (and its process group) that is killed when the guard drops.
pub struct Proc {
    child: Child,
    name: String,
    /// Set once the leader is reaped (and its group killed); `None` inside if reaping failed.
    reaped: Option<Option<ExitStatus>>,
}

impl Proc {
    /// Starts `cmd` as the leader of a new process group. Its standard input is closed unless
    /// `cmd` says otherwise.
    #[track_caller]
    pub fn spawn(cmd: &mut Command) -> Proc {
        Self::try_spawn(cmd).unwrap_or_else(|e| panic!("{e}"))
    }

    pub fn try_spawn(cmd: &mut Command) -> Result<Proc, String> {
        let name = cmd.get_program().to_string_lossy().into_owned();
        cmd.process_group(0);
        let child = cmd
            .spawn()
            .map_err(|e| format!("could not start {name}: {e}"))?;
        Ok(Proc {
            child,
            name,
            reaped: None,
        })
    }

    pub fn id(&self) -> u32 {
        self.child.id()
    }

    fn pgid(&self) -> Pid {
        Pid::from_raw(self.child.id() as i32)
    }

    /// The child's piped standard output, drained on a thread from now on.
    pub fn drain_stdout(&mut self) -> Drain {
        Drain::new(self.child.stdout.take().expect("stdout is piped"))
    }

    /// The child's piped standard error, drained on a thread from now on.
    pub fn drain_stderr(&mut self) -> Drain {
        Drain::new(self.child.stderr.take().expect("stderr is piped"))
    }

    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.child.stdout.take()
    }

    pub fn take_stderr(&mut self) -> Option<ChildStderr> {
        self.child.stderr.take()
    }

    /// Sends `sig` to the leader only, e.g. SIGTERM to test a graceful stop (then [`wait`]).
    ///
    /// [`wait`]: Proc::wait
    pub fn signal(&self, sig: Signal) {
        if self.reaped.is_none() {
            signal::kill(self.pgid(), sig)
                .unwrap_or_else(|e| panic!("could not send {sig} to {}: {e}", self.name));
        }
    }

    /// The leader's exit status if it has exited (whatever it left behind in its group is
    /// killed then).
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        if self.reaped.is_none() {
            // Look without reaping: the exited leader stays a zombie, so its pid (the group
            // id) cannot be reused before the group is killed.
            let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
            match waitid(Id::Pid(self.pgid()), flags) {
                Ok(WaitStatus::StillAlive) => {}
                _ => self.reap(),
            }
        }
        self.reaped.flatten()
    }

    /// Waits for the leader to exit. Past `limit` the group is killed and the test fails.
    #[track_caller]
    pub fn wait(&mut self, limit: Duration) -> ExitStatus {
        let end = Instant::now() + limit;
        loop {
            if let Some(s) = self.try_wait() {
                return s;
            }
            if Instant::now() >= end {
                self.kill();
                panic!("{} did not exit within {limit:?}; killed it", self.name);
            }
            std::thread::sleep(POLL);
        }
    }

    /// SIGKILLs the whole group, reaps the leader and waits (bounded) until no member of the
    /// group is left running. Safe to call more than once.
    pub fn kill(&mut self) {
        if self.reaped.is_none() {
            self.reap();
        }
    }

    /// Kills the group while the unreaped leader still reserves its id (so the signal cannot
    /// reach a group that reused the number), then reaps the leader and waits for the rest.
    fn reap(&mut self) {
        let pgid = self.pgid();
        let _ = signal::killpg(pgid, Signal::SIGKILL);
        self.reaped = Some(self.child.wait().ok());
        // Members other than the leader are not our children: whoever adopts them reaps them,
        // so wait until none is running (a zombie is dead already).
        let end = Instant::now() + Duration::from_secs(10);
        while !group_members(pgid.as_raw()).is_empty() {
            if Instant::now() >= end {
                eprintln!(
                    "test harness: members of {}'s process group {pgid} survived SIGKILL: {:?}",
                    self.name,
                    group_members(pgid.as_raw())
                );
                break;
            }
            std::thread::sleep(POLL);
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The pids of the processes of group `pgid` that are not dead (zombies count as dead), from
/// `/proc`.
pub fn group_members(pgid: i32) -> Vec<i32> {
    all_processes()
        .into_iter()
        .filter(|(_, s)| s.pgrp == pgid && !s.dead())
        .map(|(pid, _)| pid)
        .collect()
}

/// The living descendants of `pid` (children, their children, ...), from `/proc`.
pub fn descendants(pid: i32) -> Vec<i32> {
    let all = all_processes();
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            all.iter()
                .filter(|(_, s)| s.ppid == parent && !s.dead())
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    found.remove(0);
    found
}

/// The living processes whose command line contains `marker` (a unique temp path given to
/// a child and everything it starts): a way to find helpers that left the process group
/// and were adopted by init, as Chromium's crash handlers do.
pub fn marked(marker: &str) -> Vec<i32> {
    all_processes()
        .into_iter()
        .filter(|(pid, s)| {
            !s.dead()
                && std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
        })
        .map(|(pid, _)| pid)
        .collect()
}

/// SIGKILLs every process [`marked`] with `marker` and waits (bounded) until none runs.
pub fn kill_marked(marker: &str) {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let left = marked(marker);
        if left.is_empty() {
            return;
        }
        if Instant::now() >= end {
            eprintln!("test harness: processes marked {marker} survived SIGKILL: {left:?}");
            return;
        }
        for pid in left {
            let _ = signal::kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        std::thread::sleep(POLL);
    }
}

/// Whether process `pid` is still running: it exists in `/proc` and is not a zombie.
pub fn is_running(pid: i32) -> bool {
    stat(pid).is_some_and(|s| !s.dead())
}

struct Stat {
    state: char,
    ppid: i32,
    pgrp: i32,
}

impl Stat {
    fn dead(&self) -> bool {
        matches!(self.state, 'Z' | 'X' | 'x')
    }
}

fn all_processes() -> Vec<(i32, Stat)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| Some((pid, stat(pid)?)))
        .collect()
}

/// State, parent and process group of `pid` from `/proc/<pid>/stat` (its command name, in
/// parentheses, may contain spaces: the fields that follow start after the last `)`).
fn stat(pid: i32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut rest = text.get(text.rfind(')')? + 1..)?.split_whitespace();
    Some(Stat {
        state: rest.next()?.chars().next()?,
        ppid: rest.next()?.parse().ok()?,
        pgrp: rest.next()?.parse().ok()?,
    })
}

/// A pipe read to its end on a thread (so a chatty child never blocks on a full pipe), whose
/// bytes so far can be looked at any time.
pub struct Drain {
    buf: Arc<Mutex<Vec<u8>>>,
    thread: Option<JoinHandle<()>>,
}

impl Drain {
    pub fn new(mut pipe: impl Read + Send + 'static) -> Drain {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let b2 = buf.clone();
        let thread = std::thread::spawn(move || {
            let mut chunk = [0u8; 8192];
            while let Ok(n) = pipe.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                b2.lock().unwrap().extend_from_slice(&chunk[..n]);
            }
        });
        Drain {
            buf,
            thread: Some(thread),
        }
    }

    /// What was read so far, as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.buf.lock().unwrap()).into_owned()
    }

    /// Everything, once the pipe is closed (call after the writer exited or was killed).
    pub fn finish(mut self) -> Vec<u8> {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        std::mem::take(&mut self.buf.lock().unwrap())
    }
}

/// Runs `cmd` to completion with its output captured, like `Command::output`, but under a
/// [`Proc`] guard and failing the test if it takes longer than [`DEADLINE`].
#[track_caller]
pub fn output(cmd: &mut Command) -> Output {
    output_within(cmd, DEADLINE).unwrap_or_else(|e| panic!("{e}"))
}

/// [`output`] with another time limit, returning the failure to start or to finish in time.
pub fn output_within(cmd: &mut Command, limit: Duration) -> Result<Output, String> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut p = Proc::try_spawn(cmd)?;
    let (out, err) = (p.drain_stdout(), p.drain_stderr());
    let end = Instant::now() + limit;
    let status = loop {
        if let Some(s) = p.try_wait() {
            break s;
        }
        if Instant::now() >= end {
            p.kill();
            return Err(format!(
                "{} did not finish within {limit:?}; killed it. Its stderr so far:\n{}",
                p.name,
                err.text()
            ));
        }
        std::thread::sleep(POLL);
    };
    // `try_wait` killed what the leader left behind, so nothing holds the pipes open now.
    Ok(Output {
        status,
        stdout: out.finish(),
        stderr: err.finish(),
    })
}

/// A port that was free a moment ago, for a child that must be told where to listen.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Polls `{base}/readyz` until it answers 200. Fails at once (with the exit status) when the
/// server process exits, and after [`DEADLINE`] otherwise.
pub async fn wait_ready(p: &mut Proc, base: &str) {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let end = Instant::now() + DEADLINE;
    loop {
        if client
            .get(format!("{base}/readyz"))
            .send()
            .await
            .is_ok_and(|r| r.status() == 200)
        {
            return;
        }
        if let Some(s) = p.try_wait() {
            panic!("{} exited before it was ready at {base}: {s}", p.name);
        }
        assert!(
            Instant::now() < end,
            "{} was not ready at {base} within {DEADLINE:?}",
            p.name
        );
        tokio::time::sleep(POLL).await;
    }
}
