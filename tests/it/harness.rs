//! The test harness itself: a test that fails leaves no process behind (not the child, not
//! the child's children, not one that ignores SIGTERM), and a browser that cannot be installed
//! fails with a message that says what to do.

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common::browser::{self, Browser};
use crate::common::process::{
    DEADLINE, Proc, descendants, free_port, group_members, is_running, marked, wait_ready,
};

/// Runs `body` on its own thread (as the test runner runs a test), expects it to panic, and
/// returns what it sent before panicking.
fn failing_test<T: Send + 'static>(body: impl FnOnce(mpsc::Sender<T>) + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let outcome = std::thread::spawn(move || body(tx)).join();
    assert!(outcome.is_err(), "the test body was meant to panic");
    rx.try_recv().expect("the body reported before panicking")
}

/// Same, for an async body on a runtime of its own, like `#[tokio::test]`.
fn failing_async_test<T: Send + 'static, F: Future<Output = ()>>(
    body: impl FnOnce(mpsc::Sender<T>) -> F + Send + 'static,
) -> T {
    failing_test(|tx| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(body(tx))
    })
}

/// Waits until none of `pids` is running; fails naming the survivors.
fn assert_all_gone(pids: &[i32]) {
    let end = Instant::now() + DEADLINE;
    loop {
        let alive: Vec<i32> = pids.iter().copied().filter(|p| is_running(*p)).collect();
        if alive.is_empty() {
            return;
        }
        assert!(
            Instant::now() < end,
            "still running after their test failed: {alive:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_child_that_ignores_sigterm_dies_with_its_failing_test_and_so_do_its_children() {
    let pids = failing_test(|tx| {
        // A shell that ignores SIGTERM (so does its `sleep` child, which inherits that) and
        // prints its child's pid.
        let mut p = Proc::spawn(
            Command::new("sh")
                .args(["-c", "trap '' TERM; sleep 600 & echo $!; wait"])
                .stdout(Stdio::piped()),
        );
        let mut line = String::new();
        std::io::BufReader::new(p.take_stdout().unwrap())
            .read_line(&mut line)
            .unwrap();
        let pids = vec![p.id() as i32, line.trim().parse().unwrap()];
        assert!(pids.iter().all(|p| is_running(*p)), "{pids:?}");
        tx.send(pids).unwrap();
        panic!("an assertion fails while the child runs");
    });
    assert_all_gone(&pids);
}

#[test]
fn a_genied_server_dies_with_its_failing_async_test() {
    let pid = failing_async_test(|tx| async move {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let mut p = Proc::spawn(
            Command::new(env!("CARGO_BIN_EXE_genied"))
                .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
                .arg("--data-dir")
                .arg(dir.path())
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        );
        wait_ready(&mut p, &format!("http://127.0.0.1:{port}")).await;
        tx.send(p.id() as i32).unwrap();
        panic!("an assertion fails while genied serves");
    });
    assert_all_gone(&[pid]);
}

#[test]
fn chromium_and_every_helper_it_started_die_with_their_failing_test() {
    let pids = failing_async_test(|tx| async move {
        let browser = Browser::launch("about:blank").await;
        let _page = browser.page("about:blank").await;
        let pid = browser.pid() as i32;
        let tree = descendants(pid);
        assert!(!tree.is_empty(), "chromium started no helper");
        // Everything chromium started, in its process group or not (its crash handlers start
        // sessions of their own and are adopted by init), names the browser's marker.
        let family = marked(&browser.marker());
        assert!(
            tree.iter().all(|p| family.contains(p)) && family.contains(&pid),
            "helpers without the marker: tree {tree:?}, marked {family:?}"
        );
        let outside: Vec<i32> = family
            .iter()
            .copied()
            .filter(|p| !group_members(pid).contains(p))
            .collect();
        eprintln!(
            "chromium: {} processes, {outside:?} outside its process group",
            family.len()
        );
        tx.send(family).unwrap();
        panic!("an assertion fails while the browser runs");
    });
    assert!(pids.len() > 1);
    assert_all_gone(&pids);
}

#[test]
fn a_browser_that_cannot_be_installed_says_what_to_do() {
    let err = browser::install_chromium(std::path::Path::new("/nonexistent/apt-get"), || None)
        .expect_err("there is no apt-get to install with");
    for part in [
        "need Chromium",
        "could not start /nonexistent/apt-get",
        "apt-get install -y chromium",
    ] {
        assert!(err.contains(part), "{part:?} missing from: {err}");
    }
}
