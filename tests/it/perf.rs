//! What the performance work must not change: authentication results are cached, yet every
//! change this process makes to keys, sessions and roles is seen by the very next request;
//! and writes committed together (group commit) still succeed or fail one by one.

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

#[tokio::test]
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
    let kept: Vec<i64> = db
        .read(|c| {
            let mut st = c.prepare("SELECT n FROM perf_probe ORDER BY n")?;
            let v = st
                .query_map([], |r| r.get(0))?
                .collect::<rusqlite::Result<Vec<i64>>>()?;
            Ok(v)
        })
        .await
        .unwrap();
    let expected: Vec<i64> = (0..60).filter(|i| i % 3 == 0).collect();
    assert_eq!(kept, expected);
}

#[tokio::test]
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
