//! What the performance work must not change: authentication results are cached, yet every
//! change this process makes to keys, sessions and roles is seen by the very next request;
//! and writes committed together (group commit) still succeed or fail one by one.

use std::time::Duration;

use genied::db::{self, users::Role};
use genied::error::ApiError;
use reqwest::Method;
use serde_json::{Value, json};

use crate::common::*;

async fn profile_with_key(app: &TestApp, key: &str) -> Resp {
    let body = json!({"resource": "profiles", "action": "get"}).to_string();
    app.raw(
        Method::POST,
        "/v1",
        &[("content-type", "application/json"), ("x-api-key", key)],
        body,
    )
    .await
}

#[tokio::test]
async fn deleting_a_cached_key_takes_effect_on_the_next_request() {
    let app = TestApp::spawn().await;
    let user = app.standard().await;
    let created = app
        .call(
            &user.token,
            "api-keys",
            "create",
            None,
            json!({"name": "k"}),
        )
        .await;
    let key = created.ok(201)["api_key"]["key"]
        .as_str()
        .unwrap()
        .to_string();
    let id = created.data()["api_key"]["id"].clone();
    // Twice, so the second answer comes from the cache.
    for _ in 0..2 {
        let me = profile_with_key(&app, &key).await;
        assert_eq!(me.ok(200)["profile"]["id"], json!(user.id));
    }
    app.call(&user.token, "api-keys", "delete", Some(id), json!({}))
        .await
        .ok(200);
    profile_with_key(&app, &key).await.err(401, "KEY_NOT_FOUND");
}

#[tokio::test]
async fn a_role_change_reaches_cached_sessions_and_keys_at_once() {
    let app = TestApp::spawn().await;
    let user = app.standard().await;
    let key = app.api_key(&user).await;
    let lead_list = json!({"limit": 1});
    // Cached as a standard user, who may write.
    app.call(&user.token, "leads", "list", None, lead_list.clone())
        .await
        .ok(200);
    profile_with_key(&app, &key).await.ok(200);
    let uid = user.id.clone();
    app.state
        .db
        .write(move |c| Ok(db::users::set_role(c, &uid, Role::Consumer)?))
        .await
        .unwrap();
    // Consumers are read-only: the cached standard role must not be used any more.
    let r = app
        .call(
            &user.token,
            "api-keys",
            "create",
            None,
            json!({"name": "x"}),
        )
        .await;
    r.err(403, "FORBIDDEN");
    let me = profile_with_key(&app, &key).await;
    assert_eq!(me.ok(200)["profile"]["role"], json!("consumer"));
    assert_eq!(app.count("api_keys").await, 1);
}

/// The writer must make the cache stale before it answers the revoking write, not after:
/// otherwise the revoker's next request can slip in between and still be let in. The window
/// is short, so the check is repeated.
#[tokio::test]
async fn a_revocation_is_seen_by_the_next_request_every_time() {
    let app = TestApp::spawn().await;
    let user = app.standard().await;
    let c = &app.state.config;
    for i in 0..400 {
        let pair = genied::auth::sessions::open(
            &app.state.db,
            &app.state.secrets.jwt_key,
            &user.id,
            Role::StandardUser,
            c.session_ttl_seconds,
            c.refresh_ttl_seconds,
        )
        .await
        .unwrap();
        let token = pair.access_token;
        app.call(&token, "profiles", "get", None, json!({}))
            .await
            .ok(200);
        let uid = user.id.clone();
        app.state
            .db
            .write(move |c| {
                c.execute(
                    "UPDATE sessions SET revoked_at = ?2 WHERE user_id = ?1 AND revoked_at IS NULL",
                    [uid, db::now()],
                )?;
                Ok(())
            })
            .await
            .unwrap();
        let r = app.call(&token, "profiles", "get", None, json!({})).await;
        assert_eq!(r.status, 401, "round {i}: a revoked session was let in");
    }
}

/// Column `n` of a test table, in order.
async fn column_n(db: &db::Db, table: &'static str) -> Vec<i64> {
    db.read(move |c| {
        let mut st = c.prepare(&format!("SELECT n FROM {table} ORDER BY n"))?;
        let v = st
            .query_map([], |r| r.get(0))?
            .collect::<rusqlite::Result<Vec<i64>>>()?;
        Ok(v)
    })
    .await
    .unwrap()
}

// Multi-threaded, so that writes run both in place (while the writer is idle) and queued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writes_fail_and_roll_back_one_by_one() {
    let app = TestApp::spawn().await;
    let db = app.state.db.clone();
    db.write(|c| {
        c.execute_batch("CREATE TABLE perf_probe (n INTEGER NOT NULL UNIQUE)")?;
        Ok(())
    })
    .await
    .unwrap();
    // 60 writes at once, so many share a transaction: every third fails after inserting,
    // every third inserts a duplicate of a value (a constraint error), the rest succeed.
    let writes = (0..60i64).map(|i| {
        let db = db.clone();
        tokio::spawn(async move {
            db.write(move |c| {
                c.execute("INSERT INTO perf_probe (n) VALUES (?1)", [i])?;
                match i % 3 {
                    0 => Ok(i),
                    1 => Err(ApiError::validation(format!("write {i} refused"))),
                    _ => {
                        c.execute("INSERT INTO perf_probe (n) VALUES (?1)", [i])?;
                        Ok(i)
                    }
                }
            })
            .await
        })
    });
    let results = futures::future::join_all(writes).await;
    for (i, r) in results.into_iter().enumerate() {
        let r = r.unwrap();
        match i % 3 {
            0 => assert_eq!(r.unwrap(), i as i64),
            1 => assert!(r.unwrap_err().to_string().contains("refused"), "{i}"),
            _ => assert!(r.is_err(), "write {i} inserted a duplicate"),
        }
    }
    let kept = column_n(&db, "perf_probe").await;
    let expected: Vec<i64> = (0..60).filter(|i| i % 3 == 0).collect();
    assert_eq!(kept, expected);
}

/// A group's first write runs without a savepoint of its own: when it fails, the whole
/// transaction is rolled back, and the writes queued behind it run in the next one. Pinned
/// by holding the writer thread inside one write while three more queue up, so that they
/// are taken as one group: the first fails after inserting, the second succeeds, the third
/// fails after inserting (rolled back alone, by its savepoint, in the second group).
#[tokio::test]
async fn a_failing_first_write_of_a_group_takes_only_itself_back() {
    if postgres::skip("the writer thread and its groups are SQLite's") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = db::Db::open_with(&dir.path().join("genied.db"), Some(1)).unwrap();
    db.write(|c| {
        c.execute_batch("CREATE TABLE perf_group (n INTEGER NOT NULL)")?;
        Ok(())
    })
    .await
    .unwrap();
    // On a current-thread runtime every write is queued for the writer thread
    // (`a_write_from_a_single_threaded_runtime_goes_to_the_writer_thread`), where this one
    // waits until released.
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let mut holder = Box::pin(db.write(move |c| {
        c.execute("INSERT INTO perf_group (n) VALUES (0)", [])?;
        held_tx.send(()).unwrap();
        release_rx.recv().unwrap();
        Ok(())
    }));
    assert!(
        tokio::time::timeout(Duration::ZERO, &mut holder)
            .await
            .is_err()
    );
    held_rx.recv_timeout(Duration::from_secs(60)).unwrap();
    let insert = |n: i64, fail: bool| {
        db.write(move |c| {
            c.execute("INSERT INTO perf_group (n) VALUES (?1)", [n])?;
            if fail {
                return Err(ApiError::validation(format!("write {n} refused")));
            }
            Ok(n)
        })
    };
    let mut queued = [
        Box::pin(insert(1, true)),
        Box::pin(insert(2, false)),
        Box::pin(insert(3, true)),
    ];
    // One poll each queues them, in this order, behind the held write.
    for w in queued.iter_mut() {
        assert!(tokio::time::timeout(Duration::ZERO, w).await.is_err());
    }
    release_tx.send(()).unwrap();
    holder.await.unwrap();
    let [first, second, third] = queued;
    let refused = first.await.unwrap_err();
    assert!(refused.to_string().contains("write 1 refused"), "{refused}");
    assert_eq!(second.await.unwrap(), 2);
    let refused = third.await.unwrap_err();
    assert!(refused.to_string().contains("write 3 refused"), "{refused}");
    let kept = column_n(&db, "perf_group").await;
    assert_eq!(kept, vec![0, 2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_point_read_runs_on_the_callers_thread_and_other_reads_on_a_read_thread() {
    if postgres::skip("read threads are SQLite's; PostgreSQL reads on pooled connections") {
        return;
    }
    let app = TestApp::spawn().await;
    let here = std::thread::current().id();
    let point = app
        .state
        .db
        .read_point(|_| Ok(std::thread::current().id()))
        .await
        .unwrap();
    assert_eq!(
        point, here,
        "a point read with a connection idle hopped threads"
    );
    let read = app
        .state
        .db
        .read(|_| Ok(std::thread::current().name().map(str::to_string)))
        .await
        .unwrap();
    assert_eq!(read.as_deref(), Some("genied-read"));
}

/// With every read connection taken, a point read does not wait for one on the async
/// thread: it queues for a read thread like any read, and is answered there once the
/// connection is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_point_read_with_every_read_connection_busy_queues_for_a_read_thread() {
    if postgres::skip("read threads are SQLite's; PostgreSQL reads on pooled connections") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = db::Db::open_with(&dir.path().join("genied.db"), Some(1)).unwrap();
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let holder = {
        let db = db.clone();
        tokio::spawn(async move {
            db.read(move |_| {
                held_tx.send(()).unwrap();
                release_rx.recv().unwrap();
                Ok(())
            })
            .await
        })
    };
    tokio::task::spawn_blocking(move || held_rx.recv().unwrap())
        .await
        .unwrap();
    let mut point =
        Box::pin(db.read_point(|_| Ok(std::thread::current().name().map(str::to_string))));
    // The first poll looks for an idle connection while the only one is held (a zero
    // timeout still polls the future once before it gives up on it).
    assert!(
        tokio::time::timeout(Duration::ZERO, &mut point)
            .await
            .is_err(),
        "a point read answered while the only read connection was held"
    );
    release_tx.send(()).unwrap();
    holder.await.unwrap().unwrap();
    let name = point.await.unwrap();
    assert_eq!(name.as_deref(), Some("genied-read"));
}

/// Where a write ran: a runtime worker's thread, or the writer thread.
async fn writer_thread_name(db: &db::Db) -> Option<String> {
    db.write(|_| Ok(std::thread::current().name().map(str::to_string)))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_while_the_writer_is_idle_runs_on_the_callers_thread() {
    if postgres::skip("the writer thread is SQLite's; PostgreSQL writes on pooled connections") {
        return;
    }
    let app = TestApp::spawn().await;
    // Background work of the start-up may still be writing: one of a few writes in a row
    // finds the writer idle.
    let mut places = Vec::new();
    for _ in 0..20 {
        places.push(writer_thread_name(&app.state.db).await);
    }
    assert!(
        places.iter().any(|n| n.as_deref() != Some("genied-writer")),
        "every write went through the writer thread: {places:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_in_turn_always_goes_to_the_writer_thread() {
    if postgres::skip("the writer thread is SQLite's; PostgreSQL writes on pooled connections") {
        return;
    }
    let app = TestApp::spawn().await;
    for _ in 0..20 {
        let name = app
            .state
            .db
            .write_in_turn(|_| Ok(std::thread::current().name().map(str::to_string)))
            .await
            .unwrap();
        assert_eq!(name.as_deref(), Some("genied-writer"));
    }
}

/// Background work that writes in a loop (the lead search index's merge steps) gives its
/// runtime thread back at each of its writes, so a request ready meanwhile runs before the
/// loop's next write. Run on the calling thread, each of the loop's writes was done by the
/// time it was awaited, so the loop kept the thread until Tokio's budget of 128 made it
/// yield: a lead create waited out seventeen merge steps, 62 ms. One runtime thread here,
/// so that no other thread can steal the request away from the loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_write_waits_for_one_write_of_a_background_loop_at_most() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    if postgres::skip("the writer thread is SQLite's; PostgreSQL writes on pooled connections") {
        return;
    }
    let app = TestApp::spawn().await;
    let (turns, stop) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let background = {
        let (db, turns, stop) = (app.state.db.clone(), turns.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Acquire) {
                let turns = turns.clone();
                db.write_in_turn(move |_| {
                    turns.fetch_add(1, Ordering::AcqRel);
                    std::thread::sleep(Duration::from_millis(1));
                    Ok(())
                })
                .await
                .unwrap();
            }
        })
    };
    wait_until("the background loop's first writes", async || {
        (turns.load(Ordering::Acquire) >= 2).then_some(())
    })
    .await;
    let mut waited = Vec::new();
    for _ in 0..10 {
        let before = turns.load(Ordering::Acquire);
        let (db, turns) = (app.state.db.clone(), turns.clone());
        // A task of its own, as a request is, queued behind the loop's.
        let during = tokio::spawn(async move {
            db.write(move |_| Ok(turns.load(Ordering::Acquire)))
                .await
                .unwrap()
        })
        .await
        .unwrap();
        waited.push(during - before);
    }
    stop.store(true, Ordering::Release);
    background.await.unwrap();
    assert!(
        waited.iter().all(|&n| n <= 2),
        "the background loop's writes before each request's: {waited:?}"
    );
}

/// The event outbox's dispatcher is such a loop when a backlog waits (a start after a crash,
/// a burst of events): batches of 64 events, a write each. A request's write waits for a few
/// of them (counted from before its task is spawned, so the batches written while it is being
/// scheduled count too: at most 5 with a release build running beside the test), not for the
/// backlog. With the batches on `write`, single requests waited for up to 118 batches (7,552
/// events), and ten of them in a row for the whole backlog of 400. One runtime thread, as
/// above.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_write_waits_for_a_few_batches_of_an_outbox_backlog_at_most() {
    if postgres::skip("the writer thread is SQLite's; PostgreSQL writes on pooled connections") {
        return;
    }
    const BATCH: i64 = 64;
    const BACKLOG: i64 = 400 * BATCH;
    const DISPATCHED: &str = "SELECT COUNT(*) FROM event_outbox \
        WHERE id LIKE 'evt_backlog_%' AND dispatched_at IS NOT NULL";
    let app = TestApp::spawn().await;
    let user = app.standard().await;
    // Counted on a connection of the test's own, so that no count waits for the runtime.
    let count = {
        let c = rusqlite::Connection::open(app.dir.path().join("genied.db")).unwrap();
        move || c.query_row(DISPATCHED, [], |r| r.get::<_, i64>(0)).unwrap()
    };
    let owner = user.id.clone();
    app.state
        .db
        .write(move |c| {
            let (now, data) = (db::now(), json!({"id": "lead_backlog"}));
            for i in 0..BACKLOG {
                let id = format!("evt_backlog_{i}");
                db::events::insert(c, &id, "lead.created", &owner, &data, &now)?;
            }
            Ok(())
        })
        .await
        .unwrap();
    app.state.bus.dispatch.notify_one();
    wait_until("the backlog's first batch", async || {
        (count() >= BATCH).then_some(())
    })
    .await;
    let mut waited = Vec::new();
    for _ in 0..10 {
        let before = count();
        assert!(
            before + 2 * BATCH < BACKLOG,
            "the backlog was all dispatched before a request could be made: {before} of {BACKLOG}"
        );
        let db = app.state.db.clone();
        // A task of its own, as a request is, on the runtime thread the dispatcher uses.
        let during = tokio::spawn(async move {
            db.write(|c| Ok(c.query_row(DISPATCHED, [], |r| r.get::<_, i64>(0))?))
                .await
                .unwrap()
        })
        .await
        .unwrap();
        waited.push(during - before);
    }
    assert!(
        waited.iter().all(|&n| n <= 16 * BATCH),
        "events the dispatcher fanned out before each request's write: {waited:?}"
    );
    // And the whole backlog goes out.
    wait_until("the whole backlog dispatched", async || {
        (count() == BACKLOG).then_some(())
    })
    .await;
}

/// A background write is committed in a group of its own. Grouped with a request's write,
/// the request heard back only at the group's commit, after the background write had run
/// too: one client's create waited out a merge step of the lead search index that way even
/// when its own write had run first. Here a background write queued right behind a request's
/// blocks until the request's write has been answered; committed together, the request
/// would never be answered first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_write_is_never_committed_with_a_requests() {
    use std::sync::mpsc;
    if postgres::skip("the writer thread is SQLite's; PostgreSQL writes on pooled connections") {
        return;
    }
    const LONG: Duration = Duration::from_secs(60);
    let app = TestApp::spawn().await;
    let db = app.state.db.clone();
    // The writer thread busy with a background write until released, so that the next two
    // wait in its queue, in order.
    let (started_tx, started) = mpsc::channel::<()>();
    let (release_first, first_rx) = mpsc::channel::<()>();
    let first = tokio::spawn({
        let db = db.clone();
        async move {
            db.write_in_turn(move |_| {
                started_tx.send(()).unwrap();
                first_rx.recv_timeout(LONG).ok();
                Ok(())
            })
            .await
        }
    });
    started
        .recv_timeout(LONG)
        .expect("the first write never started");
    // Each polled once, which queues it (the writer's connection is held).
    let mut request = Box::pin(db.write(|_| Ok(())));
    assert!(
        tokio::time::timeout(Duration::ZERO, &mut request)
            .await
            .is_err()
    );
    let (release_background, background_rx) = mpsc::channel::<()>();
    let mut background = Box::pin(db.write_in_turn(move |_| {
        background_rx.recv_timeout(LONG).ok();
        Ok(())
    }));
    assert!(
        tokio::time::timeout(Duration::ZERO, &mut background)
            .await
            .is_err()
    );
    release_first.send(()).unwrap();
    first.await.unwrap().unwrap();
    let answered = tokio::time::timeout(Duration::from_secs(30), &mut request).await;
    release_background.send(()).ok();
    background.await.unwrap();
    answered
        .expect("the request's write was answered only with the background write's")
        .unwrap();
}

#[tokio::test]
async fn a_write_from_a_single_threaded_runtime_goes_to_the_writer_thread() {
    if postgres::skip("the writer thread is SQLite's; PostgreSQL writes on pooled connections") {
        return;
    }
    // A worker of a current-thread runtime may not block: the write is queued.
    let app = TestApp::spawn().await;
    let name = writer_thread_name(&app.state.db).await;
    assert_eq!(name.as_deref(), Some("genied-writer"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_write_changes_nothing_and_the_writer_goes_on() {
    let app = TestApp::spawn().await;
    let user = app.standard().await;
    let d2 = app.state.db.clone();
    let panicked = tokio::spawn(async move {
        d2.write(|c| -> genied::error::ApiResult<()> {
            c.execute("DELETE FROM users", [])?;
            panic!("boom inside a write");
        })
        .await
    })
    .await;
    assert!(panicked.unwrap_err().is_panic());
    let me = app
        .call(&user.token, "profiles", "get", None, json!({}))
        .await;
    assert_eq!(me.ok(200)["profile"]["id"], Value::String(user.id.clone()));
    assert_eq!(app.count("users").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wal_starts_over_under_steady_writes_beside_a_reader() {
    if postgres::skip("the WAL is SQLite's") {
        return;
    }
    let app = TestApp::spawn().await;
    let db = app.state.db.clone();
    db.write(|c| {
        c.execute_batch("CREATE TABLE perf_wal (pad BLOB NOT NULL)")?;
        Ok(())
    })
    .await
    .unwrap();
    // A reader inside a read transaction half of the time (300 µs each, a slow page of a
    // list), most begun while the WAL has frames still to copy.
    let path = app.dir.path().join("genied.db");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let c = rusqlite::Connection::open(&path).unwrap();
            let mut reads = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                c.execute_batch("BEGIN").unwrap();
                let _: Option<i64> = c
                    .query_row("SELECT MAX(rowid) FROM perf_wal", [], |r| r.get(0))
                    .unwrap();
                std::thread::sleep(Duration::from_micros(300));
                c.execute_batch("COMMIT").unwrap();
                reads += 1;
                std::thread::sleep(Duration::from_micros(300));
            }
            reads
        })
    };
    // Each write adds a page of its own: some 3 frames (the row's page and the b-tree's
    // above it), 12 KB of WAL. A WAL that starts over gets new salts in its header
    // (https://www.sqlite.org/fileformat2.html#walformat, bytes 16 to 23): the writes go on
    // until it has started over three times, or until 30,000 of them (some 370 MB) have
    // gone through a WAL that never did.
    let wal = app.dir.path().join("genied.db-wal");
    let salts = || {
        use std::io::Read;
        let mut head = [0u8; 24];
        std::fs::File::open(&wal)
            .and_then(|mut f| f.read_exact(&mut head))
            .map(|()| head[16..24].to_vec())
            .ok()
    };
    let (mut largest, mut last, mut restarts, mut writes) = (0u64, salts(), 0, 0);
    while restarts < 3 && writes < 30_000 {
        db.write(|c| {
            c.execute("INSERT INTO perf_wal (pad) VALUES (zeroblob(3500))", [])?;
            Ok(())
        })
        .await
        .unwrap();
        writes += 1;
        largest = largest.max(std::fs::metadata(&wal).map_or(0, |m| m.len()));
        let now = salts();
        if now.is_some() && now != last {
            if last.is_some() {
                restarts += 1;
            }
            last = now;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let reads = reader.join().unwrap();
    assert!(reads > 0, "the reader never read");
    // The checkpointer starts the WAL over once it passes 8,000 frames (32 MB); without
    // its second pass it never did while writes went on.
    assert_eq!(
        restarts, 3,
        "the WAL started over {restarts} times in {writes} writes; it grew to {largest} bytes"
    );
}

async fn exec(app: &TestApp, sql: &'static str) {
    app.state
        .db
        .write(move |c| Ok(c.execute_batch(sql)?))
        .await
        .unwrap();
}

/// The audit rows of `resource` `action`, as `(record_id, summary)`.
async fn audit_rows(
    app: &TestApp,
    resource: &'static str,
    action: &'static str,
) -> Vec<(String, String)> {
    app.state
        .db
        .read(move |c| {
            let mut st = c.prepare(
                "SELECT record_id, summary FROM activities WHERE resource = ?1 AND action = ?2 ORDER BY created_at",
            )?;
            let rows = st
                .query_map([resource, action], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(rows)
        })
        .await
        .unwrap()
}

/// The hot writes (lead create, update, delete; genie update) write their audit row in their
/// own transaction: when the audit row cannot be written, the change is not made either (and
/// the client hears so), where a second transaction would have kept the change unaudited.
#[tokio::test]
async fn the_audit_row_commits_with_the_write_it_records() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let g = insert_genie(&app, &u, "Before").await;
    let made = app
        .call(
            &u.token,
            "leads",
            "create",
            None,
            json!({"agent_id": g, "name": "Kept"}),
        )
        .await;
    let kept = made.ok(201)["lead"]["id"].as_i64().unwrap();
    assert_eq!(
        audit_rows(&app, "leads", "create").await,
        vec![(kept.to_string(), "created lead Kept".to_string())]
    );

    let pg = app.state.db.is_postgres();
    exec(
        &app,
        if pg {
            "CREATE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS
             $$ BEGIN RAISE EXCEPTION 'audit refused'; END $$;
             CREATE TRIGGER refuse_audit BEFORE INSERT ON activities
             FOR EACH ROW EXECUTE FUNCTION refuse_audit();"
        } else {
            "CREATE TRIGGER refuse_audit BEFORE INSERT ON activities
             BEGIN SELECT RAISE(ABORT, 'audit refused'); END;"
        },
    )
    .await;
    let (leads, logs) = (app.count("leads").await, app.count("lead_activities").await);
    app.call(
        &u.token,
        "leads",
        "create",
        None,
        json!({"agent_id": g, "name": "Lost"}),
    )
    .await
    .err(500, "INTERNAL_ERROR");
    app.call(
        &u.token,
        "leads",
        "update",
        Some(json!(kept)),
        json!({"status": "qualified"}),
    )
    .await
    .err(500, "INTERNAL_ERROR");
    app.call(&u.token, "leads", "delete", Some(json!(kept)), json!({}))
        .await
        .err(500, "INTERNAL_ERROR");
    app.call(
        &u.token,
        "genies",
        "update",
        Some(json!(g)),
        json!({"name": "After"}),
    )
    .await
    .err(500, "INTERNAL_ERROR");
    assert_eq!(app.count("leads").await, leads, "no lead made or deleted");
    assert_eq!(
        app.count("lead_activities").await,
        logs,
        "no lead log written"
    );
    let lead = app
        .call(&u.token, "leads", "get", Some(json!(kept)), json!({}))
        .await;
    assert_eq!(
        lead.ok(200)["lead"]["status"],
        "new",
        "the update was rolled back"
    );
    let genie = app
        .call(&u.token, "genies", "get", Some(json!(g)), json!({}))
        .await;
    assert_eq!(
        genie.ok(200)["genie"]["name"],
        "Before",
        "the genie update was rolled back"
    );

    exec(
        &app,
        if pg {
            "DROP TRIGGER refuse_audit ON activities;"
        } else {
            "DROP TRIGGER refuse_audit;"
        },
    )
    .await;
    app.call(
        &u.token,
        "leads",
        "update",
        Some(json!(kept)),
        json!({"status": "qualified"}),
    )
    .await
    .ok(200);
    app.call(
        &u.token,
        "genies",
        "update",
        Some(json!(g)),
        json!({"name": "After"}),
    )
    .await
    .ok(200);
    app.call(&u.token, "leads", "delete", Some(json!(kept)), json!({}))
        .await
        .ok(200);
    assert_eq!(
        audit_rows(&app, "leads", "update").await,
        vec![(kept.to_string(), format!("updated lead #{kept}"))]
    );
    assert_eq!(
        audit_rows(&app, "leads", "delete").await,
        vec![(kept.to_string(), "deleted lead Kept".to_string())]
    );
    assert_eq!(
        audit_rows(&app, "genies", "update").await,
        vec![(g.clone(), "updated genie 'After' (version 1)".to_string())]
    );
    // Every other write action still leaves its row after the fact, as before.
    let key = app
        .call(&u.token, "api-keys", "create", None, json!({"name": "k"}))
        .await;
    let key_id = key.ok(201)["api_key"]["id"].as_str().unwrap().to_string();
    assert_eq!(audit_rows(&app, "api-keys", "create").await.len(), 1);
    assert_eq!(audit_rows(&app, "api-keys", "create").await[0].0, key_id);
}

/// `leads all` with `data.cursor` (keyset pagination) walks every match exactly once in the
/// offset order, also through leads of the same millisecond, is not shifted by a lead made
/// meanwhile, and leaves the offset form as it was; a foreign or mixed request is refused.
#[tokio::test]
async fn leads_cursor_pages_walk_every_match_once() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let g = insert_genie(&app, &u, "G").await;
    let (uid, gid) = (u.id.clone(), g.clone());
    // Nine qualified leads over three milliseconds (three apiece), and others between.
    app.state
        .db
        .write(move |c| {
            for k in 0..12 {
                let status = if k % 4 == 3 { "new" } else { "qualified" };
                // 2026-01-01T00:00:00.00{k / 4}Z, stored as milliseconds (V40).
                let at: i64 = 1_767_225_600_000 + k / 4;
                c.execute(
                    "INSERT INTO leads (agent_id, user_id, name, status, created_at, updated_at)
                     VALUES (genied_key(?1), genied_key(?2), ?3, ?4, ?5, ?5)",
                    rusqlite::params![gid, uid, format!("L{k}"), status, at],
                )?;
            }
            Ok(())
        })
        .await
        .unwrap();
    let all = |data: Value| app.call(&u.token, "leads", "all", None, data);
    let ids = |r: &Value| -> Vec<i64> {
        r["leads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["id"].as_i64().unwrap())
            .collect()
    };
    let by_offset = all(json!({"filters": {"status": "qualified"}, "limit": 500})).await;
    let expected = ids(by_offset.ok(200));
    assert_eq!(expected.len(), 9);
    // Latest first, and within a millisecond the larger id first: ids were handed out in
    // time order, so the page is in falling id order throughout.
    assert!(expected.windows(2).all(|w| w[0] > w[1]), "{expected:?}");
    assert_eq!(by_offset.data()["nextCursor"], Value::Null);

    let mut walked = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut data = json!({"filters": {"status": "qualified"}, "limit": 4});
        if let Some(c) = &cursor {
            data["cursor"] = json!(c);
        }
        let page = all(data).await;
        let d = page.ok(200).clone();
        // Of every match, on every page: the lead made after the first page counts too.
        let matches = if pages == 0 { 9 } else { 10 };
        assert_eq!(d["count"], matches);
        assert_eq!(d["limit"], 4);
        walked.extend(ids(&d));
        pages += 1;
        if pages == 1 {
            // Made after the first page was read: newer than everything, so not in the walk.
            app.call(
                &u.token,
                "leads",
                "create",
                None,
                json!({"agent_id": g, "status": "qualified"}),
            )
            .await
            .ok(201);
        }
        match d["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
        assert!(pages < 10, "the walk ends");
    }
    assert_eq!(walked, expected, "every match once, in the offset order");
    assert_eq!(pages, 3, "4 + 4 + 1");

    // The offset form is unchanged, and says where the next page starts.
    let second = all(json!({"filters": {"status": "qualified"}, "limit": 4, "offset": 6})).await;
    let d = second.ok(200).clone();
    assert_eq!(d["offset"], 6);
    assert_eq!(ids(&d), expected[5..9].to_vec(), "the new lead comes first");
    assert_eq!(d["nextCursor"], Value::Null, "the last page");
    all(json!({"cursor": "bm90IGEgY3Vyc29y"}))
        .await
        .err(400, "VALIDATION_ERROR");
    all(json!({"cursor": "!!"}))
        .await
        .err(400, "VALIDATION_ERROR");
    let c = cursor_of(&all(json!({"limit": 1})).await);
    all(json!({"cursor": c, "offset": 2}))
        .await
        .err(400, "VALIDATION_ERROR");
}

fn cursor_of(r: &Resp) -> String {
    r.ok(200)["nextCursor"]
        .as_str()
        .expect("a next page")
        .to_string()
}

/// `conversations all` with `data.cursor` walks every conversation the caller may read
/// exactly once, latest first (ties by id), through conversations of the same millisecond:
/// their own, and those of a genie assigned to them (once, also when they own the record);
/// never another user's. The count is of every match on every page; filters hold along the
/// walk; a foreign cursor or one beside an offset is refused.
#[tokio::test]
async fn conversations_cursor_pages_walk_every_readable_one_once() {
    let app = TestApp::spawn().await;
    let me = app.standard().await;
    let other = app.standard().await;
    let stranger = app.standard().await;
    let mine = insert_genie(&app, &me, "Mine").await;
    let theirs = insert_genie(&app, &other, "Theirs").await;
    let foreign = insert_genie(&app, &stranger, "Foreign").await;
    crate::leads::assign(&app, &theirs, &me).await;
    // (owner, genie, started_at, status): four milliseconds, three or four apiece.
    let mut rows = Vec::new();
    for k in 0..15 {
        let at = format!("2026-01-01T00:00:00.00{}Z", k / 4);
        let status = if k % 3 == 0 { "failed" } else { "done" };
        let (owner, genie) = match k % 5 {
            0 | 1 => (&me, &mine),
            2 => (&other, &theirs),
            // Mine, on a genie assigned to me: both arms match it; it must come once.
            3 => (&me, &theirs),
            _ => (&stranger, &foreign),
        };
        rows.push((db::new_id(), owner.id.clone(), genie.clone(), at, status));
    }
    let seeded = rows.clone();
    app.state
        .db
        .write(move |c| {
            for (id, user, genie, at, status) in &seeded {
                c.execute(
                    "INSERT INTO conversations (id, user_id, genie_id, channel, status, started_at, created_at, updated_at)
                     VALUES (?1, ?2, ?3, 'web', ?4, ?5, ?5, ?5)",
                    rusqlite::params![id, user, genie, status, at],
                )?;
            }
            Ok(())
        })
        .await
        .unwrap();
    // What I may read, in the listing order, worked out here rather than asked of the server.
    let expect = |status: Option<&str>| -> Vec<String> {
        let mut v: Vec<_> = rows
            .iter()
            .filter(|r| r.1 != stranger.id && status.is_none_or(|s| r.4 == s))
            .map(|r| (r.3.clone(), r.0.clone()))
            .collect();
        v.sort_by(|a, b| b.cmp(a));
        v.into_iter().map(|(_, id)| id).collect()
    };
    let all = |data: Value| app.call(&me.token, "conversations", "all", None, data);
    let ids = |d: &Value| -> Vec<String> {
        d["conversations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_str().unwrap().to_string())
            .collect()
    };
    for (filter, page_size) in [(json!({}), 4), (json!({"status": "done"}), 3)] {
        let status = filter["status"].as_str();
        let expected = expect(status);
        assert!(expected.len() >= 7, "several pages");
        let by_offset = all(json!({"status": status, "limit": 500})).await;
        assert_eq!(ids(by_offset.ok(200)), expected, "the offset form's order");
        assert_eq!(by_offset.data()["nextCursor"], Value::Null);
        let (mut walked, mut cursor, mut pages) = (Vec::new(), None::<String>, 0);
        loop {
            let mut data = filter.clone();
            data["limit"] = json!(page_size);
            if let Some(c) = &cursor {
                data["cursor"] = json!(c);
            }
            let page = all(data).await;
            let d = page.ok(200).clone();
            assert_eq!(d["count"], expected.len(), "of every match, on every page");
            walked.extend(ids(&d));
            pages += 1;
            match d["nextCursor"].as_str() {
                Some(c) => cursor = Some(c.to_string()),
                None => break,
            }
            assert!(pages <= expected.len(), "the walk ends");
        }
        assert_eq!(
            walked, expected,
            "every readable conversation once, in order"
        );
        assert_eq!(
            pages,
            expected.len().div_ceil(page_size),
            "no empty last page"
        );
    }
    // An offset page still says where the next one starts.
    let d = all(json!({"limit": 2, "offset": 2})).await.ok(200).clone();
    assert_eq!(ids(&d), expect(None)[2..4].to_vec());
    let next = d["nextCursor"].as_str().unwrap().to_string();
    let d = all(json!({"limit": 2, "cursor": next}))
        .await
        .ok(200)
        .clone();
    assert_eq!(ids(&d), expect(None)[4..6].to_vec());

    all(json!({"cursor": "bm90IGEgY3Vyc29y"}))
        .await
        .err(400, "VALIDATION_ERROR");
    all(json!({"cursor": "!!"}))
        .await
        .err(400, "VALIDATION_ERROR");
    let c = all(json!({"limit": 1})).await.ok(200)["nextCursor"]
        .as_str()
        .unwrap()
        .to_string();
    all(json!({"cursor": c, "offset": 2}))
        .await
        .err(400, "VALIDATION_ERROR");
}

/// Every row of `sql` with `params` bound, each made by `row`.
fn rows<T>(
    c: &rusqlite::Connection,
    sql: &str,
    params: impl rusqlite::Params,
    row: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Vec<T> {
    c.prepare(sql)
        .unwrap()
        .query_map(params, row)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// SQLite's plan for `sql` with `params` bound: the detail of each step, in order.
fn query_plan(c: &rusqlite::Connection, sql: &str, params: impl rusqlite::Params) -> Vec<String> {
    rows(c, &format!("EXPLAIN QUERY PLAN {sql}"), params, |r| {
        r.get(3)
    })
}

/// The search indexer's batch walks the pending leads and looks each lead up by id, and the
/// new leads as a range of ids past the watermark; it never walks `leads` itself, whose size
/// it would then cost on every batch (a join's range on the pending ids was carried over to
/// `leads`: a scan of the whole table each half second of writes). A search looks its
/// candidates up by id too. The plans are SQLite's, on the service's own schema, without
/// statistics (the service never runs `ANALYZE`); and the batch still indexes what it should.
#[tokio::test]
async fn the_search_indexer_looks_leads_up_by_id_instead_of_walking_the_table() {
    if postgres::skip("the lead search index and its pending rows are SQLite's") {
        return;
    }
    let app = TestApp::spawn().await;
    let user = app.standard().await;
    let genie = insert_genie(&app, &user, "Indexed").await;
    for name in ["Quillon Marsh", "Orla Finch"] {
        app.call(
            &user.token,
            "leads",
            "create",
            None,
            json!({"agent_id": genie, "name": name, "status": "new"}),
        )
        .await
        .ok(201);
    }
    let c = rusqlite::Connection::open(app.state.config.db_path()).unwrap();
    let plan = query_plan(&c, db::leads::INDEX_PENDING, [i64::MAX]);
    assert!(
        plan.iter()
            .any(|s| s == "SEARCH l USING INTEGER PRIMARY KEY (rowid=?)"),
        "{plan:?}"
    );
    assert!(
        plan.iter()
            .any(|s| s.starts_with("SEARCH leads_search_pending USING INTEGER PRIMARY KEY (rowid<")),
        "{plan:?}"
    );
    assert!(
        !plan
            .iter()
            .any(|s| s.starts_with("SCAN l") || s.contains("l USING INTEGER PRIMARY KEY (rowid<")),
        "{plan:?}"
    );
    // A search of every lead (an admin's listing) looks its candidates up by id, new and
    // renamed ones included, rather than walking the leads in time order and asking each.
    db::leads::register_functions(&c).unwrap();
    let plan = query_plan(
        &c,
        &format!(
            "SELECT l.id FROM leads l WHERE {}
             AND genied_icontains(l.name, ?) ORDER BY l.created_at DESC, l.id DESC LIMIT 50",
            db::leads::SEARCH_CANDIDATES
        ),
        ["\"uil\"", "uil"],
    );
    assert_eq!(
        plan.first().map(String::as_str),
        Some("MULTI-INDEX OR"),
        "{plan:?}"
    );
    assert!(
        !plan
            .iter()
            .any(|s| s == "SCAN l" || s.starts_with("SCAN l ")),
        "{plan:?}"
    );
    // New leads (V39): the range past the watermark, never the table before it.
    let plan = query_plan(&c, db::leads::INDEX_NEW, [0, i64::MAX]);
    assert_eq!(
        plan,
        ["SEARCH leads USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)"],
        "{plan:?}"
    );
    // Whatever the indexer has not taken yet, one batch by hand indexes: both leads are found
    // through the index itself (not through the pending rows a search also reads), each by
    // a trigram of its name.
    app.state
        .db
        .write(|c| Ok(db::leads::index_pending(c, 1000)?))
        .await
        .unwrap();
    let found: i64 = c
        .query_row(
            "SELECT COUNT(*) FROM leads_search WHERE leads_search MATCH 'uil OR nch'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(found, 2);
}

/// A knowledge-base search ranks every chunk its words match. Which matches count, the
/// index's reader tokens decide (V43): the ranking statement reads the full-text index and,
/// for a genie's search, lists the genie's chunk ids once, and reads no row per match (nor
/// hands the list to FTS5, which would run the query once per id); a second statement reads
/// each of the best few by its primary keys. Plans on the service's own schema, without
/// statistics.
#[tokio::test]
async fn a_document_search_reads_no_row_per_match() {
    if postgres::skip("the full-text index and these plans are SQLite's") {
        return;
    }
    let app = TestApp::spawn().await;
    let user = app.standard().await;
    let c = rusqlite::Connection::open(app.state.config.db_path()).unwrap();
    db::fts_rank::register(&c).unwrap();
    for genie in [false, true] {
        let sql = db::documents::search_sql(false, genie);
        let mut params: Vec<rusqlite::types::Value> =
            vec!["content : (\"refund\")".to_string().into()];
        if genie {
            params.push("g".to_string().into());
        }
        params.push(10i64.into());
        let plan = query_plan(&c, &sql, rusqlite::params_from_iter(params));
        // `INDEX 0:M2`: the MATCH alone goes to FTS5; `0:=M2` would be a rowid with it.
        assert_eq!(
            plan[0], "SCAN document_chunks_fts VIRTUAL TABLE INDEX 0:M2",
            "{plan:?}"
        );
        let mut expected = vec![plan[0].clone()];
        if genie {
            expected.extend([
                "LIST SUBQUERY 1".to_string(),
                "SEARCH gd USING COVERING INDEX sqlite_autoindex_genie_documents_1 (genie_id=?)"
                    .to_string(),
                "SEARCH ch USING COVERING INDEX document_chunks_document (document_id=?)"
                    .to_string(),
                "CREATE BLOOM FILTER".to_string(),
            ]);
        }
        expected.push("USE TEMP B-TREE FOR ORDER BY".to_string());
        assert_eq!(plan, expected, "a match reads a row");
    }
    let plan = query_plan(
        &c,
        db::documents::search_row_sql(),
        rusqlite::params![1i64, user.id],
    );
    assert_eq!(
        plan,
        [
            "SEARCH ch USING INTEGER PRIMARY KEY (rowid=?)",
            "SEARCH d USING INDEX sqlite_autoindex_documents_1 (id=?)",
        ],
        "{plan:?}"
    );
}

/// A standard user's listing by status walks `leads_status_time` in time order and tests
/// each lead's genie from the index entry itself (V45): among many users most leads it
/// passes are someone else's, and none of them is read from the table. Only the page's
/// rows are. The same for a cursor's page and an admin's listing by status. Plans on the
/// service's own schema, without statistics; the listings' answers are the API tests'.
#[tokio::test]
async fn a_users_listing_by_status_reads_no_row_of_another_users_lead() {
    if postgres::skip("these plans are SQLite's") {
        return;
    }
    let app = TestApp::spawn().await;
    let user = app.standard().await;
    let raw = rusqlite::Connection::open(app.state.config.db_path()).unwrap();
    let c = db::sql::Connection::sqlite(&raw);
    let filter = |scope: db::leads::Scope, after: Option<(String, i64)>| db::leads::Filter {
        scope,
        agent_ids: Vec::new(),
        status: Some("qualified".into()),
        priority: None,
        search: None,
        since: None,
        after,
    };
    let cursor = Some(("2026-01-01T00:00:00.000Z".to_string(), 7));
    for f in [
        filter(db::leads::Scope::AgentsOf(user.id.clone()), None),
        filter(db::leads::Scope::AgentsOf(user.id.clone()), cursor.clone()),
        filter(db::leads::Scope::All, cursor),
    ] {
        let (sql, params) = db::leads::list_statement(&c, &f, 51, 0).unwrap();
        let plan = query_plan(&raw, &sql, rusqlite::params_from_iter(params));
        // The page's rows by id, and the walk, which reads the index alone.
        let reads: Vec<&str> = plan
            .iter()
            .map(String::as_str)
            .filter(|s| s.starts_with("SEARCH l ") || s.starts_with("SCAN l"))
            .collect();
        assert_eq!(reads.len(), 2, "{plan:?}");
        assert_eq!(reads[0], "SEARCH l USING INTEGER PRIMARY KEY (rowid=?)");
        assert!(
            reads[1].starts_with("SEARCH l USING COVERING INDEX leads_status_time (status=?"),
            "{plan:?}"
        );
    }
}

/// The server is linked with its relative relocations packed (`DT_RELR`, src/build.rs).
/// Unpacked, they were 2 MB of `.rela.dyn` that the loader reads at every start and that
/// stayed resident, 4–5 MB of idle RSS in all (docs/performance.md, round sixteen).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn the_server_binary_packs_its_relative_relocations() {
    use object::{Object, ObjectSection};
    if option_env!("GENIED_LINK_RELR") == Some("0") {
        eprintln!("skipped: built with GENIED_LINK_RELR=0");
        return;
    }
    let file = std::fs::File::open(env!("CARGO_BIN_EXE_genied")).unwrap();
    let cache = object::ReadCache::new(file);
    let elf = object::File::parse(&cache).unwrap();
    let size = |name: &str| elf.section_by_name(name).map_or(0, |s| s.size());
    assert!(
        size(".relr.dyn") > 0,
        "no .relr.dyn: the binary was linked without -z pack-relative-relocs"
    );
    // What is left unpacked is the few relocations against symbols (the C library's).
    assert!(
        size(".rela.dyn") < 64 * 1024,
        ".rela.dyn holds {} bytes: relative relocations were not packed",
        size(".rela.dyn")
    );
}

/// Every foreign key's referencing columns lead an index (or the primary key). Deleting a
/// parent row runs the key's action (`CASCADE`, `SET NULL`) as a query on the referencing
/// table by those columns, and without an index that query reads the whole table, while the
/// writer waits: a lead's delete read every lead for `primary_lead_id` until V46 (278 ms a
/// delete at 1,000,000 leads). A partial index serves when all it leaves out is NULL, which
/// the key's `column = ?` never matches. The service's own schema, on either engine.
#[tokio::test]
async fn every_foreign_key_has_an_index_for_its_parents_deletes() {
    let app = TestApp::spawn().await;
    let (keys, unindexed) = match &app.state.config.database_url {
        Some(genied::config::DatabaseUrl::Postgres(url)) => postgres_foreign_keys(url),
        _ => sqlite_foreign_keys(&app.state.config.db_path()),
    };
    assert!(keys > 50, "the check saw {keys} foreign keys");
    assert!(
        unindexed.is_empty(),
        "foreign keys whose columns lead no index: {unindexed:#?}"
    );
}

/// The number of foreign keys in the SQLite database at `path`, and those no index serves.
fn sqlite_foreign_keys(path: &std::path::Path) -> (usize, Vec<String>) {
    let c = rusqlite::Connection::open(path).unwrap();
    // An expression's column in an index has no name.
    let columns = |sql: &str| -> Vec<Option<String>> { rows(&c, sql, [], |r| r.get(0)) };
    let (mut keys, mut unindexed) = (0, Vec::new());
    let tables: Vec<String> = rows(
        &c,
        "SELECT name FROM sqlite_schema WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%'",
        [],
        |r| r.get(0),
    );
    for table in tables {
        // The columns of each usable index, in order, and the primary key's.
        let mut indexes: Vec<Vec<Option<String>>> = Vec::new();
        let listed: Vec<(String, Option<String>)> = rows(
            &c,
            &format!(
                "SELECT l.name, CASE WHEN l.partial THEN s.sql END
                   FROM pragma_index_list('{table}') l
                   LEFT JOIN sqlite_schema s ON s.type = 'index' AND s.name = l.name"
            ),
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        );
        for (index, partial_sql) in listed {
            let cols = columns(&format!(
                "SELECT name FROM pragma_index_info('{index}') ORDER BY seqno"
            ));
            if let Some(sql) = partial_sql {
                let first = cols.first().cloned().flatten().unwrap_or_default();
                if !sql.ends_with(&format!("WHERE {first} IS NOT NULL")) {
                    continue;
                }
            }
            indexes.push(cols);
        }
        indexes.push(columns(&format!(
            "SELECT name FROM pragma_table_info('{table}') WHERE pk > 0 ORDER BY pk"
        )));
        let mut by_key: std::collections::BTreeMap<i64, Vec<Option<String>>> = Default::default();
        let key_columns: Vec<(i64, String)> = rows(
            &c,
            &format!(
                "SELECT id, \"from\" FROM pragma_foreign_key_list('{table}') ORDER BY id, seq"
            ),
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        );
        for (id, from) in key_columns {
            by_key.entry(id).or_default().push(Some(from));
        }
        for key in by_key.into_values() {
            keys += 1;
            if !indexes.iter().any(|ix| ix.starts_with(&key)) {
                let names: Vec<String> = key.into_iter().flatten().collect();
                unindexed.push(format!("{table}({})", names.join(", ")));
            }
        }
    }
    (keys, unindexed)
}

/// The same from PostgreSQL's catalog, for the database at `url`.
fn postgres_foreign_keys(url: &str) -> (usize, Vec<String>) {
    let rows = postgres::query(
        url,
        "SELECT k.conrelid::regclass::text || '(' || cols.names || ')',
                EXISTS (SELECT 1 FROM pg_index x
                         WHERE x.indrelid = k.conrelid
                           AND (x.indkey::int2[])[0:array_length(k.conkey, 1) - 1] = k.conkey
                           AND (x.indpred IS NULL
                                OR pg_get_expr(x.indpred, x.indrelid) = '(' || cols.first || ' IS NOT NULL)'))::text
           FROM pg_constraint k,
                LATERAL (SELECT string_agg(a.attname, ', ' ORDER BY c.i) AS names,
                                (array_agg(a.attname ORDER BY c.i))[1] AS first
                           FROM unnest(k.conkey) WITH ORDINALITY c(n, i)
                           JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = c.n) cols
          WHERE k.contype = 'f'",
        &[],
    );
    let unindexed = rows
        .iter()
        .filter(|r| r[1].as_deref() != Some("true"))
        .map(|r| r[0].clone().unwrap_or_default())
        .collect();
    (rows.len(), unindexed)
}
