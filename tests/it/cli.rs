//! The real binary: admin commands print only their result and refuse a data directory that
//! is not there; `serve` on an empty directory bootstraps an admin who can sign in, without
//! logging the password; role changes and revocations made by `genied admin` reach a running
//! service's next request; backups are consistent while serving; `vacuum` gives back free
//! pages only with the service stopped; every flag has help. With
//! `GENIED_TEST_DATABASE=postgres` the binary runs on PostgreSQL (`own_database`), but for
//! the data-directory checks, which are about the SQLite file.

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output};

use crate::auth::wait_keys_used;
use crate::common::documents::{create_text, settle};
use crate::common::process::{self, DEADLINE, Proc, free_port, wait_ready};
use crate::common::*;
use nix::sys::signal::Signal;
use reqwest::Method;
use serde_json::{Value, json};

fn genied(dir: &std::path::Path, args: &[&str]) -> Output {
    process::output(
        Command::new(env!("CARGO_BIN_EXE_genied"))
            .arg("--data-dir")
            .arg(dir)
            .args(args)
            .envs(cli_env(dir))
            .env_remove("GENIED_DATA_DIR")
            .env_remove("GENIED_CREATE_DATA_DIR"),
    )
}

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "failed: {}\nstderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

#[tokio::test]
async fn admin_commands_print_only_their_result() {
    let dir = tempfile::tempdir().unwrap();
    own_database(dir.path());
    let migrate = stdout(&genied(dir.path(), &["migrate"]));
    assert!(
        migrate.lines().all(|l| l.parse::<u32>().is_ok()) && migrate.lines().next() == Some("1"),
        "{migrate}"
    );

    let out = stdout(&genied(
        dir.path(),
        &[
            "admin",
            "create-user",
            "--email",
            "ops@example.test",
            "--name",
            "Ops",
            "--role",
            "internal_admin",
        ],
    ));
    let v: Value = serde_json::from_str(out.trim()).expect("one JSON object");
    assert_eq!(v.as_object().unwrap().len(), 3);
    assert_eq!(
        (v["email"].clone(), v["role"].clone()),
        (json!("ops@example.test"), json!("internal_admin"))
    );
    uuid::Uuid::parse_str(v["id"].as_str().unwrap()).unwrap();

    let out = stdout(&genied(
        dir.path(),
        &["admin", "create-user", "--email", "dev@example.test"],
    ));
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["role"], json!("standard_user"));

    let key = stdout(&genied(
        dir.path(),
        &[
            "admin",
            "create-key",
            "--email",
            "dev@example.test",
            "--name",
            "ci",
        ],
    ));
    assert_eq!(key.lines().count(), 1);
    assert!(key.trim().starts_with("svc_live_"));
    let admin_key = stdout(&genied(
        dir.path(),
        &[
            "admin",
            "create-key",
            "--email",
            "ops@example.test",
            "--name",
            "ops",
            "--admin",
        ],
    ));
    assert!(admin_key.trim().starts_with("svc_admin_"));
    let refused = genied(
        dir.path(),
        &[
            "admin",
            "create-key",
            "--email",
            "dev@example.test",
            "--name",
            "x",
            "--admin",
        ],
    );
    assert_eq!(refused.status.code(), Some(1));
    assert!(refused.stdout.is_empty());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("internal_admin") && err.trim().lines().count() == 1,
        "{err}"
    );

    let token = stdout(&genied(
        dir.path(),
        &[
            "admin",
            "issue-token",
            "--email",
            "dev@example.test",
            "--ttl-seconds",
            "120",
        ],
    ));
    assert_eq!(token.trim().split('.').count(), 3);

    let users: Value = serde_json::from_str(&stdout(&genied(
        dir.path(),
        &["admin", "list-users", "--json"],
    )))
    .unwrap();
    assert_eq!(users.as_array().unwrap().len(), 2);
    let set = stdout(&genied(
        dir.path(),
        &[
            "admin",
            "set-role",
            "--email",
            "dev@example.test",
            "--role",
            "consumer",
            "--json",
        ],
    ));
    assert_eq!(
        serde_json::from_str::<Value>(&set).unwrap()["role"],
        json!("consumer")
    );

    let keys: Value = serde_json::from_str(&stdout(&genied(
        dir.path(),
        &[
            "admin",
            "list-keys",
            "--email",
            "dev@example.test",
            "--json",
        ],
    )))
    .unwrap();
    let key_id = keys[0]["id"].as_str().unwrap().to_string();
    assert!(
        !keys.to_string().contains(key.trim()),
        "list-keys must not print secrets"
    );
    stdout(&genied(
        dir.path(),
        &["admin", "revoke-key", "--id", &key_id],
    ));

    // Usage errors exit 2; other failures exit 1 with one line on stderr.
    assert_eq!(
        genied(dir.path(), &["admin", "create-user"]).status.code(),
        Some(2)
    );
    let dup = genied(
        dir.path(),
        &["admin", "create-user", "--email", "dev@example.test"],
    );
    assert_eq!(dup.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&dup.stderr).contains("already exists"));
}

#[tokio::test]
async fn issued_tokens_and_keys_authenticate_against_a_running_service() {
    let app = TestApp::spawn().await;
    let dir = app.dir.path().to_path_buf();
    stdout(&genied(
        &dir,
        &["admin", "create-user", "--email", "cli@example.test"],
    ));
    let token = stdout(&genied(
        &dir,
        &["admin", "issue-token", "--email", "cli@example.test"],
    ))
    .trim()
    .to_string();
    let r = app.call(&token, "profiles", "get", None, json!({})).await;
    assert_eq!(r.ok(200)["profile"]["email"], json!("cli@example.test"));
    let key = stdout(&genied(
        &dir,
        &[
            "admin",
            "create-key",
            "--email",
            "cli@example.test",
            "--name",
            "n",
        ],
    ))
    .trim()
    .to_string();
    let r = app
        .raw(
            Method::POST,
            "/v1",
            &[("x-api-key", &key)],
            json!({"resource": "profiles", "action": "get"}).to_string(),
        )
        .await;
    r.ok(200);

    // A backup taken while serving holds everything written so far. PostgreSQL is backed up
    // with its own tools, which the command says instead.
    let out = dir.join("backup.db");
    if app.state.db.is_postgres() {
        let o = genied(&dir, &["admin", "backup", "--out", out.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&o.stderr).contains("pg_dump"));
        assert!(!out.exists());
        return;
    }
    stdout(&genied(
        &dir,
        &["admin", "backup", "--out", out.to_str().unwrap()],
    ));
    let conn = rusqlite::Connection::open(&out).unwrap();
    let n: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM users WHERE email = 'cli@example.test'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(n, 1);
    let ok: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
    assert_eq!(
        genied(&dir, &["admin", "backup", "--out", out.to_str().unwrap()])
            .status
            .code(),
        Some(1)
    );
}

/// A `genied serve` child under the process guard (killed with its group when dropped).
struct Served {
    child: Proc,
    base: String,
}

impl Served {
    /// Starts `serve` on a free port over `data`, its stdout and stderr going to `log_to`
    /// (stdout, stderr), and waits until it answers.
    async fn start(data: &std::path::Path, log_to: (&std::path::Path, &std::path::Path)) -> Served {
        let port = free_port();
        let mut child = Proc::spawn(
            Command::new(env!("CARGO_BIN_EXE_genied"))
                .args([
                    "serve",
                    "--listen",
                    &format!("127.0.0.1:{port}"),
                    "--data-dir",
                ])
                .arg(data)
                .envs(own_database(data))
                .env_remove("GENIED_DATA_DIR")
                .stdout(std::fs::File::create(log_to.0).unwrap())
                .stderr(std::fs::File::create(log_to.1).unwrap()),
        );
        let base = format!("http://127.0.0.1:{port}");
        wait_ready(&mut child, &base).await;
        Served { child, base }
    }

    /// SIGTERM, then the exit status.
    fn stop(&mut self) -> std::process::ExitStatus {
        self.child.signal(Signal::SIGTERM);
        self.child.wait(DEADLINE)
    }
}

#[tokio::test]
async fn first_serve_bootstraps_an_admin_who_can_sign_in() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("fresh");
    let (out_log, err_log) = (dir.path().join("stdout.log"), dir.path().join("stderr.log"));
    let mut served = Served::start(&data, (&out_log, &err_log)).await;
    let base = served.base.clone();
    let client = reqwest::Client::new();

    for f in ["jwt.key", "master.key", "initial-admin.txt"] {
        let mode = std::fs::metadata(data.join("secrets").join(f))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600, "{f}");
    }
    let file = data.join("secrets/initial-admin.txt");
    let text = std::fs::read_to_string(&file).unwrap();
    let password = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("password:"))
        .unwrap()
        .trim()
        .to_string();
    assert_eq!(password.len(), 24, "{text}");
    let r = client
        .post(format!("{base}/v1/auth/login"))
        .json(&json!({"email": "admin@localhost", "password": password}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    let token = body["data"]["access_token"].as_str().unwrap();
    let me: Value = client
        .post(format!("{base}/v1"))
        .bearer_auth(token)
        .json(&json!({"resource": "profiles", "action": "get"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(me["data"]["profile"]["role"], json!("internal_admin"));

    // SIGTERM stops it cleanly. The operator was told once where the password is, and the
    // password itself is in neither stream (logs outlive the file and reach more people).
    let status = served.stop();
    assert!(status.success(), "exit: {status}");
    let output =
        std::fs::read_to_string(&out_log).unwrap() + &std::fs::read_to_string(&err_log).unwrap();
    assert_eq!(
        output.matches("created the first user").count(),
        1,
        "{output}"
    );
    assert!(output.contains(&file.display().to_string()), "{output}");
    assert!(
        !output.contains(&password),
        "the password is in the output: {output}"
    );
    assert!(!output.contains(&std::fs::read_to_string(data.join("secrets/jwt.key")).unwrap()));
}

/// The failing run of an admin command: exit 1, nothing on stdout, and stderr's one line.
fn refused(o: &Output) -> String {
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        o.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    err
}

/// SQLite only, whatever `GENIED_TEST_DATABASE` says: what it checks is how the commands find
/// (or create) the SQLite file in the data directory.
#[test]
fn admin_commands_refuse_a_data_directory_that_is_not_there() {
    let dir = tempfile::tempdir().unwrap();
    // Run from an unrelated directory with the default `./genied-data`: refused, named (as an
    // absolute path, since the operator's idea of "." is what went wrong), nothing created.
    let o = Command::new(env!("CARGO_BIN_EXE_genied"))
        .current_dir(dir.path())
        .env_remove("GENIED_DATA_DIR")
        .env_remove("GENIED_CREATE_DATA_DIR")
        .args(["admin", "create-user", "--email", "a@example.test"])
        .output()
        .unwrap();
    let err = refused(&o);
    let default = dir.path().canonicalize().unwrap().join("genied-data");
    assert!(err.contains(&default.display().to_string()), "{err}");
    assert!(
        err.contains("--create-data-dir") && err.contains("--data-dir"),
        "{err}"
    );
    assert!(!default.exists());

    // The same for an explicit directory, whatever the command, reads and writes alike.
    let missing = dir.path().join("nowhere");
    let out = dir.path().join("b.db");
    for args in [
        &["admin", "list-users"][..],
        &["admin", "create-user", "--email", "a@example.test"],
        &[
            "admin",
            "set-role",
            "--email",
            "a@example.test",
            "--role",
            "consumer",
        ],
        &["admin", "backup", "--out", out.to_str().unwrap()],
    ] {
        let err = refused(&genied(&missing, args));
        assert!(
            err.contains(&missing.display().to_string()),
            "{args:?}: {err}"
        );
        assert!(
            !missing.exists() && !out.exists(),
            "{args:?} created something"
        );
    }
    // A directory that exists but holds no database is not a data directory either.
    std::fs::create_dir(&missing).unwrap();
    refused(&genied(&missing, &["admin", "list-users"]));
    assert_eq!(std::fs::read_dir(&missing).unwrap().count(), 0);

    // Asked to, it creates one (the flag also goes after the subcommand), and from then on
    // the directory is found without it.
    let created = dir.path().join("new");
    stdout(&genied(
        &created,
        &[
            "admin",
            "create-user",
            "--email",
            "a@example.test",
            "--create-data-dir",
        ],
    ));
    assert!(created.join("genied.db").is_file());
    let users: Value = serde_json::from_str(&stdout(&genied(
        &created,
        &["admin", "list-users", "--json"],
    )))
    .unwrap();
    assert_eq!(users[0]["email"], json!("a@example.test"));
    // `migrate` (like `serve`) still creates its directory.
    let migrated = dir.path().join("migrated");
    stdout(&genied(&migrated, &["migrate"]));
    assert!(migrated.join("genied.db").is_file());
}

/// `profiles list` and `leads list` with `adminMode` are for internal admins; creating a
/// record is for anyone but a consumer. Returns the three statuses for `cred`.
async fn admin_read_admin_mode_write(app: &TestApp, cred: &str) -> [u16; 3] {
    let list = app.call(cred, "profiles", "list", None, json!({})).await;
    let leads = app
        .call(cred, "leads", "list", None, json!({"adminMode": true}))
        .await;
    let create = app
        .call(cred, "genie-groups", "create", None, json!({"name": "g"}))
        .await;
    for r in [&list, &leads, &create] {
        if r.status == 403 {
            r.err(403, "FORBIDDEN");
        }
    }
    [list.status, leads.status, create.status]
}

#[tokio::test]
async fn role_changes_by_the_cli_reach_the_running_service_at_once() {
    let app = TestApp::spawn_with(|c| c.rate_limit_per_minute = 0).await;
    let dir = app.dir.path().to_path_buf();
    let admin = app.admin().await;
    let admin_key = app.api_key(&admin).await;
    let user = app.standard().await;
    let user_key = app.api_key(&user).await;
    // Used just before the change, so the service has them cached (the second round, once
    // the keys' first-use writes are done, is the one the change must invalidate).
    for cred in [&admin_key, &user_key] {
        app.call(cred, "profiles", "get", None, json!({}))
            .await
            .ok(200);
    }
    wait_keys_used(&app, &admin.token).await;
    wait_keys_used(&app, &user.token).await;
    for cred in [&admin.token, &admin_key] {
        assert_eq!(
            admin_read_admin_mode_write(&app, cred).await,
            [200, 200, 201]
        );
    }
    for cred in [&user.token, &user_key] {
        assert_eq!(
            admin_read_admin_mode_write(&app, cred).await,
            [403, 403, 201]
        );
    }
    let groups = app.count("genie_groups").await;

    let set_role = |email: &str, role: &str| {
        stdout(&genied(
            &dir,
            &["admin", "set-role", "--email", email, "--role", role],
        ))
    };
    set_role(&admin.email, "consumer");
    set_role(&user.email, "internal_admin");
    // The very next request of each, with the same token or key, has the new role: the
    // demoted admin can neither use admin options nor write; the promoted user can.
    for cred in [&admin.token, &admin_key] {
        assert_eq!(
            admin_read_admin_mode_write(&app, cred).await,
            [403, 403, 403]
        );
    }
    assert_eq!(app.count("genie_groups").await, groups);
    for cred in [&user.token, &user_key] {
        assert_eq!(
            admin_read_admin_mode_write(&app, cred).await,
            [200, 200, 201]
        );
    }
}

#[tokio::test]
async fn a_key_revoked_by_the_cli_is_refused_by_the_next_request() {
    let app = TestApp::spawn_with(|c| c.rate_limit_per_minute = 0).await;
    let dir = app.dir.path().to_path_buf();
    let user = app.standard().await;
    let key = app.api_key(&user).await;
    let other_key = app.api_key(&user).await;
    let profile = |key: String| {
        let app = &app;
        async move {
            app.raw(
                Method::POST,
                "/v1",
                &[("x-api-key", &key)],
                json!({"resource": "profiles", "action": "get"}).to_string(),
            )
            .await
        }
    };
    profile(key.clone()).await.ok(200);
    profile(other_key.clone()).await.ok(200);
    // Once the first-use writes are done, use both again: these entries are the cached ones.
    wait_keys_used(&app, &user.token).await;
    profile(key.clone()).await.ok(200);
    profile(other_key.clone()).await.ok(200);
    let keys: Value = serde_json::from_str(&stdout(&genied(
        &dir,
        &["admin", "list-keys", "--email", &user.email, "--json"],
    )))
    .unwrap();
    // Keys are listed newest first; find the one whose prefix `key` starts with.
    let id = keys
        .as_array()
        .unwrap()
        .iter()
        .find(|k| key.starts_with(k["key_prefix"].as_str().unwrap()))
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    stdout(&genied(&dir, &["admin", "revoke-key", "--id", &id]));
    profile(key).await.err(401, "KEY_NOT_FOUND");
    // Only that key: the user's other key still works.
    profile(other_key).await.ok(200);
}

#[test]
fn every_flag_and_subcommand_has_help() {
    use clap::CommandFactory;
    fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
        for arg in cmd.get_arguments() {
            if arg.get_help().is_none() && arg.get_long_help().is_none() {
                missing.push(format!("{path} --{}", arg.get_id()));
            }
        }
        for sub in cmd.get_subcommands() {
            let path = format!("{path} {}", sub.get_name());
            if sub.get_about().is_none() && sub.get_long_about().is_none() {
                missing.push(path.clone());
            }
            walk(sub, &path, missing);
        }
    }
    let mut cmd = genied::cli::Cli::command();
    cmd.build();
    let mut missing = Vec::new();
    walk(&cmd, "genied", &mut missing);
    assert!(missing.is_empty(), "no help text: {missing:#?}");
    // And the binary shows it: `--help` of a subcommand names and explains its flags.
    let o = Command::new(env!("CARGO_BIN_EXE_genied"))
        .args(["admin", "create-user", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(o.stdout).unwrap();
    assert!(o.status.success(), "{help}");
    assert!(
        help.contains("--email") && help.contains("email address"),
        "{help}"
    );
}

/// `admin vacuum` gives back the pages a deleted document's chunks and search index left on
/// the free list, refuses while a service runs on the data directory, and keeps every record.
#[tokio::test]
async fn vacuum_gives_back_what_deleted_rows_left_and_keeps_the_rest() {
    let mut app = TestApp::spawn().await;
    let dir = app.dir.path().to_path_buf();
    let u = app.standard().await;
    if app.state.db.is_postgres() {
        app.shutdown().await;
        let o = genied(&dir, &["admin", "vacuum"]);
        assert_eq!(o.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&o.stderr).contains("autovacuum"));
        return;
    }
    // About 600 KB of text in many distinct words: chunks and their full-text index fill
    // a few hundred pages, which the delete puts on the free list.
    let text: String = (0..60_000).map(|i| format!("word{i} ")).collect();
    let kept = create_text(&app, &u, "kept", "a short note that stays").await;
    let big = create_text(&app, &u, "big", &text).await;
    for id in [&kept, &big] {
        assert_eq!(settle(&app, &u.token, id).await["status"], "completed");
    }
    app.call(
        &u.token,
        "knowledge-base",
        "delete",
        Some(json!(big)),
        json!({}),
    )
    .await
    .ok(200);

    let o = genied(&dir, &["admin", "vacuum"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("stop it first"));
    app.shutdown().await;

    let db = dir.join("genied.db");
    let pages = |sql: &str| -> u64 {
        let c = rusqlite::Connection::open(&db).unwrap();
        c.query_row(sql, [], |r| r.get(0)).unwrap()
    };
    let free_before = pages("PRAGMA freelist_count") * 4096;
    assert!(free_before > 300_000, "free bytes before: {free_before}");
    let out: Value =
        serde_json::from_str(&stdout(&genied(&dir, &["admin", "vacuum", "--json"]))).unwrap();
    let (before, free, after) = (
        out["bytes_before"].as_u64().unwrap(),
        out["free_bytes_before"].as_u64().unwrap(),
        out["bytes_after"].as_u64().unwrap(),
    );
    assert!(free >= free_before, "{out}");
    // VACUUM writes every b-tree again, the schema table's own too, in its own order, so the
    // new file's pages may be packed a little differently from the old file's used ones: on
    // a new database of V46's schema its schema table takes 21 pages against the baseline's
    // 20. What counts is that the free pages went.
    let repacked = 4 * 4096;
    assert!(after <= before - free + repacked, "{out}");
    assert_eq!(std::fs::metadata(&db).unwrap().len(), after);
    assert_eq!(pages("PRAGMA freelist_count"), 0);
    assert_eq!(
        query(&dir, "PRAGMA integrity_check", &[]),
        vec![vec![Some("ok".to_string())]]
    );

    // The service starts on the vacuumed file and answers as before.
    let app = app.restart().await;
    let r = app
        .call(
            &u.token,
            "knowledge-base",
            "search",
            None,
            json!({"query": "short note"}),
        )
        .await;
    assert_eq!(
        r.ok(200)["results"][0]["document_id"],
        kept,
        "{:?}",
        r.data()
    );
}
