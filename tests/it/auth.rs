//! Authentication: every 401 code in exactly its condition, both key headers, sessions.

use crate::common::*;
use genied::auth::sessions;
use reqwest::Method;
use serde_json::{Value, json};

async fn profile_with(app: &TestApp, headers: &[(&str, &str)]) -> Resp {
    let body = json!({"resource": "profiles", "action": "get"}).to_string();
    let mut h = vec![("content-type", "application/json")];
    h.extend_from_slice(headers);
    app.raw(Method::POST, "/v1", &h, body).await
}

#[tokio::test]
async fn missing_header_is_unauthorized_and_names_both_methods() {
    let app = TestApp::spawn().await;
    let r = profile_with(&app, &[]).await;
    r.err(401, "UNAUTHORIZED");
    let msg = r.body["error"]["message"].as_str().unwrap();
    assert!(msg.contains("Bearer") && msg.contains("X-API-Key"), "{msg}");
    profile_with(&app, &[("authorization", "Basic dXNlcjpwdw==")])
        .await
        .err(401, "UNAUTHORIZED");
    profile_with(&app, &[("authorization", "Bearer ")])
        .await
        .err(401, "UNAUTHORIZED");
}

#[tokio::test]
async fn api_key_by_bearer_and_by_x_api_key() {
    let app = TestApp::spawn().await;
    let user = app.standard().await;
    let key = app.api_key(&user).await;
    assert!(key.starts_with("svc_live_") && key.len() >= 9 + 43, "{key}");
    let bearer = format!("Bearer {key}");
    let a = profile_with(&app, &[("authorization", &bearer)]).await;
    assert_eq!(a.ok(200)["profile"]["id"], json!(user.id));
    let b = profile_with(&app, &[("x-api-key", &key)]).await;
    assert_eq!(b.ok(200)["profile"]["id"], json!(user.id));
}

#[tokio::test]
async fn wrong_prefix_unknown_and_revoked_keys() {
    let app = TestApp::spawn().await;
    let user = app.standard().await;
    profile_with(&app, &[("x-api-key", "sk_live_abcdef")])
        .await
        .err(401, "INVALID_KEY_PREFIX");
    profile_with(&app, &[("authorization", "Bearer not-a-key")])
        .await
        .err(401, "INVALID_KEY_PREFIX");
    profile_with(&app, &[("x-api-key", "svc_live_doesnotexist")])
        .await
        .err(401, "KEY_NOT_FOUND");
    profile_with(&app, &[("x-api-key", "svc_admin_doesnotexist")])
        .await
        .err(401, "KEY_NOT_FOUND");

    let created = app
        .call(
            &user.token,
            "api-keys",
            "create",
            None,
            json!({"name": "ci"}),
        )
        .await;
    let key = created.ok(201)["api_key"]["key"]
        .as_str()
        .unwrap()
        .to_string();
    let id = created.data()["api_key"]["id"].clone();
    profile_with(&app, &[("x-api-key", &key)]).await.ok(200);
    app.call(&user.token, "api-keys", "revoke", Some(id), json!({}))
        .await
        .ok(200);
    profile_with(&app, &[("x-api-key", &key)])
        .await
        .err(401, "KEY_NOT_FOUND");
}

#[tokio::test]
async fn api_keys_resource_refuses_api_keys_with_invalid_token() {
    let app = TestApp::spawn().await;
    let user = app.standard().await;
    let key = app.api_key(&user).await;
    let r = app
        .request(
            Method::POST,
            "/v1",
            Some(&key),
            Some(json!({"resource": "api-keys", "action": "list"})),
        )
        .await;
    r.err(401, "INVALID_TOKEN");
    // Also for unknown keys and on the REST path.
    let r = app
        .request(Method::GET, "/v1/api-keys", Some("svc_live_unknown"), None)
        .await;
    r.err(401, "INVALID_TOKEN");
}

#[tokio::test]
async fn expired_tampered_and_foreign_tokens_are_invalid() {
    let app = TestApp::spawn().await;
    let user = app.standard().await;
    let claims: sessions::Claims =
        sessions::decode(&app.state.secrets.jwt_key, &user.token).unwrap();

    let mut expired = claims.clone();
    expired.iat -= 7200;
    expired.exp = expired.iat + 60;
    let t = sessions::encode(&app.state.secrets.jwt_key, &expired);
    let r = app.call(&t, "profiles", "get", None, json!({})).await;
    r.err(401, "INVALID_TOKEN");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("expired")
    );

    // Flip one character of the signature.
    let mut tampered = user.token.clone();
    let last = tampered.pop().unwrap();
    tampered.push(if last == 'A' { 'B' } else { 'A' });
    app.call(&tampered, "profiles", "get", None, json!({}))
        .await
        .err(401, "INVALID_TOKEN");

    // A token signed with another key, and one whose claims were edited.
    let foreign = sessions::encode(b"some other signing key", &claims);
    app.call(&foreign, "profiles", "get", None, json!({}))
        .await
        .err(401, "INVALID_TOKEN");
    app.call("a.b.c", "profiles", "get", None, json!({}))
        .await
        .err(401, "INVALID_TOKEN");
}

async fn login(app: &TestApp, email: &str, password: &str) -> Resp {
    app.request(
        Method::POST,
        "/v1/auth/login",
        None,
        Some(json!({"email": email, "password": password})),
    )
    .await
}

#[tokio::test]
async fn login_refresh_rotation_and_logout() {
    let app = TestApp::spawn().await;
    let hash = genied::auth::passwords::hash("correct horse").unwrap();
    app.state
        .db
        .write(move |c| {
            Ok(genied::db::users::insert(
                c,
                "sam@example.test",
                None,
                genied::db::users::Role::StandardUser,
                Some(&hash),
            )?)
        })
        .await
        .unwrap();

    login(&app, "sam@example.test", "wrong")
        .await
        .err(401, "INVALID_CREDENTIALS");
    login(&app, "nobody@example.test", "correct horse")
        .await
        .err(401, "INVALID_CREDENTIALS");
    app.request(
        Method::POST,
        "/v1/auth/login",
        None,
        Some(json!({"email": "sam@example.test"})),
    )
    .await
    .err(400, "VALIDATION_ERROR");

    let r = login(&app, "sam@example.test", "correct horse").await;
    let d = r.ok(200).clone();
    assert_eq!(d["token_type"], json!("Bearer"));
    assert_eq!(d["expires_in"], json!(3600));
    let access = d["access_token"].as_str().unwrap().to_string();
    let refresh = d["refresh_token"].as_str().unwrap().to_string();
    let claims = sessions::decode(&app.state.secrets.jwt_key, &access).unwrap();
    assert_eq!(claims.exp - claims.iat, 3600);
    assert_eq!(claims.role, genied::db::users::Role::StandardUser);
    app.call(&access, "profiles", "get", None, json!({}))
        .await
        .ok(200);

    // A refresh token works once.
    let r2 = app
        .request(
            Method::POST,
            "/v1/auth/refresh",
            None,
            Some(json!({"refresh_token": refresh})),
        )
        .await;
    let d2 = r2.ok(200).clone();
    assert_ne!(d2["refresh_token"], json!(refresh));
    app.request(
        Method::POST,
        "/v1/auth/refresh",
        None,
        Some(json!({"refresh_token": refresh})),
    )
    .await
    .err(401, "INVALID_TOKEN");
    let access2 = d2["access_token"].as_str().unwrap().to_string();
    app.call(&access2, "profiles", "get", None, json!({}))
        .await
        .ok(200);

    // Logout revokes the session: its access tokens stop working, and so does its refresh token.
    app.request(Method::POST, "/v1/auth/logout", Some(&access2), None)
        .await
        .ok(200);
    app.call(&access2, "profiles", "get", None, json!({}))
        .await
        .err(401, "INVALID_TOKEN");
    app.call(&access, "profiles", "get", None, json!({}))
        .await
        .err(401, "INVALID_TOKEN");
    let again = d2["refresh_token"].clone();
    app.request(
        Method::POST,
        "/v1/auth/refresh",
        None,
        Some(json!({"refresh_token": again})),
    )
    .await
    .err(401, "INVALID_TOKEN");
}

#[tokio::test]
async fn login_attempts_are_rate_limited_per_address() {
    let app = TestApp::spawn_with(|c| c.login_rate_limit_per_minute = 3).await;
    for _ in 0..3 {
        login(&app, "x@example.test", "nope")
            .await
            .err(401, "INVALID_CREDENTIALS");
    }
    let r = login(&app, "x@example.test", "nope").await;
    r.err(429, "RATE_LIMIT_EXCEEDED");
    assert!(r.header("retry-after").is_some());
}

#[tokio::test]
async fn restart_keeps_users_keys_and_sessions() {
    let app = TestApp::spawn().await;
    let user = app.standard().await;
    let key = app.api_key(&user).await;
    let app = app.restart().await;
    let r = app
        .call(&user.token, "profiles", "get", None, json!({}))
        .await;
    assert_eq!(r.ok(200)["profile"]["email"], json!(user.email));
    let r = app
        .raw(
            Method::POST,
            "/v1",
            &[("x-api-key", &key)],
            json!({"resource": "profiles", "action": "get"}).to_string(),
        )
        .await;
    assert_eq!(r.ok(200)["profile"]["id"], Value::String(user.id.clone()));
    let keys = app
        .call(&user.token, "api-keys", "list", None, json!({}))
        .await;
    assert_eq!(keys.ok(200)["count"], json!(1));
}

#[tokio::test]
async fn consumers_are_read_only() {
    let app = TestApp::spawn().await;
    let consumer = app.consumer().await;
    app.call(
        &consumer.token,
        "api-keys",
        "create",
        None,
        json!({"name": "k"}),
    )
    .await
    .err(403, "FORBIDDEN");
    app.call(&consumer.token, "api-keys", "list", None, json!({}))
        .await
        .ok(200);
    // Their own profile is the one thing they may change.
    app.call(
        &consumer.token,
        "profiles",
        "update",
        None,
        json!({"full_name": "Cora"}),
    )
    .await
    .ok(200);
    assert_eq!(app.count("api_keys").await, 0);
}

/// Waits (60 s at most) until every API key of `token`'s user has its first use recorded.
/// That write runs in the background after a key's first request; a test that needs the
/// authentication cache warm waits for it and then uses its credentials once more, so that
/// no write of its own is still on the way when it makes the change under test.
pub(crate) async fn wait_keys_used(app: &TestApp, token: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let list = app.call(token, "api-keys", "list", None, json!({})).await;
        let keys = list.ok(200)["api_keys"].as_array().unwrap().clone();
        if keys.iter().all(|k| !k["last_used_at"].is_null()) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "last_used_at never set: {keys:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// What the service caches about a caller is dropped by any writer's change, not only its
/// own: here a second connection to the database (what a sqlite3 shell or another tool
/// would be) revokes a session and removes a user.
#[tokio::test]
async fn changes_made_by_another_connection_reach_the_next_request() {
    let app = TestApp::spawn_with(|c| c.rate_limit_per_minute = 0).await;
    let (a, b) = (app.standard().await, app.standard().await);
    let b_key = app.api_key(&b).await;
    profile_with(&app, &[("x-api-key", &b_key)]).await.ok(200);
    wait_keys_used(&app, &b.token).await;
    app.call(&a.token, "profiles", "get", None, json!({}))
        .await
        .ok(200);
    app.call(&b.token, "profiles", "get", None, json!({}))
        .await
        .ok(200);
    profile_with(&app, &[("x-api-key", &b_key)]).await.ok(200);
    let other = another_writer(&app);

    other(
        "UPDATE sessions SET revoked_at = '2026-01-01T00:00:00.000Z' WHERE user_id = ?1",
        &a.id,
    );
    let r = app.call(&a.token, "profiles", "get", None, json!({})).await;
    r.err(401, "INVALID_TOKEN");
    // b is untouched so far.
    app.call(&b.token, "profiles", "get", None, json!({}))
        .await
        .ok(200);

    other("DELETE FROM users WHERE id = ?1", &b.id);
    app.call(&b.token, "profiles", "get", None, json!({}))
        .await
        .err(401, "INVALID_TOKEN");
    profile_with(&app, &[("x-api-key", &b_key)])
        .await
        .err(401, "KEY_NOT_FOUND");
}

/// Runs a statement with one parameter (`?1`) as another writer would, a sqlite3 shell or
/// another instance: on SQLite through a connection to the file of its own, on PostgreSQL
/// through a client session of its own.
fn another_writer(app: &TestApp) -> impl Fn(&str, &str) {
    let pg = app.state.config.postgres_url().map(str::to_owned);
    let conn = pg.is_none().then(|| {
        let conn = rusqlite::Connection::open(app.state.config.db_path()).unwrap();
        conn.execute_batch("PRAGMA busy_timeout = 10000; PRAGMA foreign_keys = ON;")
            .unwrap();
        conn
    });
    move |sql: &str, id: &str| match (&conn, &pg) {
        (Some(conn), _) => {
            conn.execute(sql, [id]).unwrap();
        }
        (None, Some(url)) => {
            crate::common::postgres::execute(url, &sql.replace("?1", "$1"), &[id]);
        }
        (None, None) => unreachable!("one engine or the other"),
    }
}

/// `leads get` of lead `id` with `token`.
async fn get_lead(app: &TestApp, token: &str, id: &Value) -> Resp {
    app.call(token, "leads", "get", Some(id.clone()), json!({}))
        .await
}

/// The busiest actions (`leads` get, all, stats, create, update; `genies` get, update) take a
/// cached caller without reading the authentication epoch first: their first database
/// operation reads it in its own transaction, and does nothing when it moved; the request is
/// then authenticated again and run again. So a change made elsewhere still reaches the next
/// request, a change that does not concern the caller costs it nothing but the second run
/// (one lead made, not two), and a refusal made before any database operation (an admin
/// option) is checked against the epoch afterwards.
#[tokio::test]
async fn a_cached_caller_is_checked_by_the_first_database_operation_of_its_request() {
    let app = TestApp::spawn_with(|c| c.rate_limit_per_minute = 0).await;
    let (a, b, c) = (
        app.standard().await,
        app.standard().await,
        app.standard().await,
    );
    let g = insert_genie(&app, &a, "G").await;
    let a_key = app.api_key(&a).await;
    let create = json!({"agent_id": g, "name": "Lead"});
    // Warm: each credential once through the database, once from the cache.
    for cred in [&a.token, &a_key] {
        for _ in 0..2 {
            app.call(cred, "leads", "all", None, json!({}))
                .await
                .ok(200);
        }
    }
    wait_keys_used(&app, &a.token).await;
    app.call(&a_key, "leads", "all", None, json!({}))
        .await
        .ok(200);
    let other = another_writer(&app);

    // A change that is not a's moves the epoch: a's cached create runs again, once.
    other(
        "UPDATE sessions SET revoked_at = '2026-01-01T00:00:00.000Z' WHERE user_id = ?1",
        &b.id,
    );
    let before = app.count("leads").await;
    let lead = app
        .call(&a_key, "leads", "create", None, create.clone())
        .await;
    let lead = lead.ok(201)["lead"].clone();
    assert_eq!(app.count("leads").await, before + 1);
    let got = get_lead(&app, &a.token, &lead["id"]).await;
    assert_eq!(got.ok(200)["lead"]["id"], lead["id"]);

    // Revoked elsewhere: the next write through the cached key is refused and writes nothing.
    other(
        "UPDATE api_keys SET status = 'revoked' WHERE user_id = ?1",
        &a.id,
    );
    let r = app
        .call(&a_key, "leads", "create", None, create.clone())
        .await;
    r.err(401, "KEY_NOT_FOUND");
    assert_eq!(app.count("leads").await, before + 1);
    // And the next read through the cached session, once its session is revoked.
    other(
        "UPDATE sessions SET revoked_at = '2026-01-01T00:00:00.000Z' WHERE user_id = ?1",
        &a.id,
    );
    let r = get_lead(&app, &a.token, &lead["id"]).await;
    r.err(401, "INVALID_TOKEN");

    // Refused before any database operation by a stale role: c, cached as a standard user,
    // made an admin elsewhere, may list every user's leads at once.
    let everyone = json!({"adminMode": true});
    for _ in 0..2 {
        app.call(&c.token, "leads", "all", None, json!({}))
            .await
            .ok(200);
    }
    other(
        "UPDATE users SET role = 'internal_admin' WHERE id = ?1",
        &c.id,
    );
    let all = app
        .call(&c.token, "leads", "all", None, everyone.clone())
        .await;
    assert_eq!(all.ok(200)["count"], json!(before + 1));
    // And allowed by a stale role, refused by the check: made a standard user again.
    app.call(&c.token, "leads", "all", None, everyone.clone())
        .await
        .ok(200);
    other(
        "UPDATE users SET role = 'standard_user' WHERE id = ?1",
        &c.id,
    );
    app.call(&c.token, "leads", "all", None, everyone)
        .await
        .err(403, "FORBIDDEN");
}

/// The epoch moves only for changes a cached authentication depends on: signing in, making
/// keys, using them and rotating refresh tokens leave it (and so the cache) alone, while a
/// revocation moves it before the revoking request is answered.
#[tokio::test]
async fn only_changes_of_who_may_do_what_move_the_auth_epoch() {
    let app = TestApp::spawn().await;
    let hash = genied::auth::passwords::hash("correct horse").unwrap();
    app.state
        .db
        .write(move |c| {
            Ok(genied::db::users::insert(
                c,
                "epoch@example.test",
                None,
                genied::db::users::Role::StandardUser,
                Some(&hash),
            )?)
        })
        .await
        .unwrap();
    let before = epoch(&app).await;
    let d = login(&app, "epoch@example.test", "correct horse")
        .await
        .ok(200)
        .clone();
    let access = d["access_token"].as_str().unwrap().to_string();
    let created = app
        .call(&access, "api-keys", "create", None, json!({"name": "k"}))
        .await;
    let key = created.ok(201)["api_key"]["key"]
        .as_str()
        .unwrap()
        .to_string();
    let key_id = created.data()["api_key"]["id"].clone();
    profile_with(&app, &[("x-api-key", &key)]).await.ok(200);
    wait_keys_used(&app, &access).await;
    app.request(
        Method::POST,
        "/v1/auth/refresh",
        None,
        Some(json!({"refresh_token": d["refresh_token"]})),
    )
    .await
    .ok(200);
    assert_eq!(epoch(&app).await, before);

    app.call(&access, "api-keys", "revoke", Some(key_id), json!({}))
        .await
        .ok(200);
    assert!(epoch(&app).await > before);
}

/// The committed authentication epoch: read without waiting on SQLite; on PostgreSQL, where
/// `auth_epoch()` need not answer at once (any instance may move it), read from the table.
async fn epoch(app: &TestApp) -> i64 {
    match app.state.db.auth_epoch() {
        Some(e) => e,
        None if app.state.db.is_postgres() => app
            .state
            .db
            .read(|c| {
                Ok(
                    c.query_row("SELECT epoch FROM auth_epoch WHERE id = 1", [], |r| {
                        r.get(0)
                    })?,
                )
            })
            .await
            .unwrap(),
        None => panic!("the epoch answers"),
    }
}
