//! The audit log: one row per mutating action, filters, admin mode.

use crate::common::*;
use serde_json::{Value, json};

#[tokio::test]
async fn mutations_are_logged_reads_are_not() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let r = app
        .call(
            &u.token,
            "api-keys",
            "create",
            None,
            json!({"name": "audited"}),
        )
        .await;
    let id = r.ok(201)["api_key"]["id"].clone();
    app.call(&u.token, "api-keys", "list", None, json!({}))
        .await
        .ok(200);
    app.call(
        &u.token,
        "profiles",
        "update",
        None,
        json!({"full_name": "Z"}),
    )
    .await
    .ok(200);
    // A failed mutation leaves no row.
    app.call(&u.token, "api-keys", "create", None, json!({}))
        .await
        .err(400, "VALIDATION_ERROR");

    let r = app
        .call(&u.token, "activities", "list", None, json!({}))
        .await;
    let d = r.ok(200);
    assert_eq!(d["count"], json!(2));
    let rows = d["activities"].as_array().unwrap();
    // Most recent first.
    assert_eq!(
        (rows[0]["resource"].clone(), rows[0]["action"].clone()),
        (json!("profiles"), json!("update"))
    );
    let key_row = &rows[1];
    assert_eq!(key_row["record_id"], id);
    assert_eq!(key_row["user_id"], json!(u.id));
    assert_eq!(key_row["ip"], json!("127.0.0.1"));
    assert!(key_row["summary"].as_str().unwrap().contains("audited"));
    for m in ["id", "created_at"] {
        assert!(key_row[m].is_string());
    }
}

#[tokio::test]
async fn filters_and_pagination() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    for i in 0..3 {
        app.call(
            &u.token,
            "api-keys",
            "create",
            None,
            json!({"name": format!("k{i}")}),
        )
        .await
        .ok(201);
    }
    app.call(
        &u.token,
        "profiles",
        "update",
        None,
        json!({"full_name": "Z"}),
    )
    .await
    .ok(200);
    let r = app
        .call(
            &u.token,
            "activities",
            "all",
            None,
            json!({"filters": {"resource": "api-keys"}, "limit": 2, "offset": 1}),
        )
        .await;
    let d = r.ok(200);
    assert_eq!(
        (d["count"].clone(), d["limit"].clone(), d["offset"].clone()),
        (json!(3), json!(2), json!(1))
    );
    assert_eq!(d["activities"].as_array().unwrap().len(), 2);
    let r = app
        .call(
            &u.token,
            "activities",
            "all",
            None,
            json!({"filters": {"action": "update"}}),
        )
        .await;
    assert_eq!(r.ok(200)["count"], json!(1));
    let r = app
        .call(
            &u.token,
            "activities",
            "all",
            None,
            json!({"filters": {"dateRange": "7d"}}),
        )
        .await;
    assert_eq!(r.ok(200)["count"], json!(4));
    let r = app
        .call(
            &u.token,
            "activities",
            "all",
            None,
            json!({"filters": {"from": "2999-01-01T00:00:00Z"}}),
        )
        .await;
    assert_eq!(r.ok(200)["count"], json!(0));
    app.call(
        &u.token,
        "activities",
        "all",
        None,
        json!({"filters": {"dateRange": "2w"}}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    app.call(&u.token, "activities", "all", None, json!({"limit": 0}))
        .await
        .err(400, "VALIDATION_ERROR");
    app.call(&u.token, "activities", "all", None, json!({"limit": 501}))
        .await
        .err(400, "VALIDATION_ERROR");
    app.call(&u.token, "activities", "create", None, json!({}))
        .await
        .err(400, "INVALID_ACTION");
}

#[tokio::test]
async fn users_see_their_own_admins_see_all_with_admin_mode() {
    let app = TestApp::spawn().await;
    let (a, b, admin) = (
        app.standard().await,
        app.standard().await,
        app.admin().await,
    );
    app.call(&a.token, "api-keys", "create", None, json!({"name": "a"}))
        .await
        .ok(201);
    app.call(&b.token, "api-keys", "create", None, json!({"name": "b"}))
        .await
        .ok(201);
    assert_eq!(
        app.call(&a.token, "activities", "list", None, json!({}))
            .await
            .ok(200)["count"],
        json!(1)
    );
    app.call(
        &a.token,
        "activities",
        "list",
        None,
        json!({"adminMode": true}),
    )
    .await
    .err(403, "FORBIDDEN");
    app.call(
        &a.token,
        "activities",
        "list",
        None,
        json!({"userId": b.id}),
    )
    .await
    .err(403, "FORBIDDEN");
    assert_eq!(
        app.call(&admin.token, "activities", "list", None, json!({}))
            .await
            .ok(200)["count"],
        json!(0)
    );
    assert_eq!(
        app.call(
            &admin.token,
            "activities",
            "list",
            None,
            json!({"adminMode": true})
        )
        .await
        .ok(200)["count"],
        json!(2)
    );
    let r = app
        .call(
            &admin.token,
            "activities",
            "list",
            None,
            json!({"adminMode": true, "userId": b.id}),
        )
        .await;
    let d = r.ok(200);
    assert_eq!(d["count"], json!(1));
    assert_eq!(d["activities"][0]["user_id"], json!(b.id));
}

/// The audit log as it was stored before migration V37 (PostgreSQL V14): ids and times as
/// text. Each engine's SQL turns the compact columns back into that form and unapplies the
/// migration and those after it, which run again on the next start; `OLDER_ROW` then adds a
/// row of a kind the service never made (ids that are not UUIDs).
const UNDO_COMPACT_AUDIT_SQLITE: &str = "
    CREATE TABLE activities_text (id TEXT NOT NULL, user_id TEXT NOT NULL,
        resource TEXT NOT NULL, action TEXT NOT NULL, record_id TEXT, summary TEXT NOT NULL,
        ip TEXT, created_at TEXT NOT NULL);
    INSERT INTO activities_text SELECT
        lower(substr(hex(id), 1, 8) || '-' || substr(hex(id), 9, 4) || '-' || substr(hex(id), 13, 4)
              || '-' || substr(hex(id), 17, 4) || '-' || substr(hex(id), 21)),
        lower(substr(hex(user_id), 1, 8) || '-' || substr(hex(user_id), 9, 4) || '-'
              || substr(hex(user_id), 13, 4) || '-' || substr(hex(user_id), 17, 4) || '-'
              || substr(hex(user_id), 21)),
        resource, action, record_id, summary, ip,
        strftime('%Y-%m-%dT%H:%M:%S', created_at / 1000, 'unixepoch') || '.'
            || printf('%03d', created_at % 1000) || 'Z'
        FROM activities ORDER BY rowid;
    DROP TABLE activities;
    ALTER TABLE activities_text RENAME TO activities;
    CREATE INDEX activities_user_time ON activities(user_id, created_at);
    CREATE INDEX activities_time ON activities(created_at);
    -- V37 and every migration after it (refinery refuses a gap); each runs again as a no-op.
    DELETE FROM refinery_schema_history WHERE version >= 37;
";
const UNDO_COMPACT_AUDIT_POSTGRES: &str = "
    ALTER TABLE activities
        ALTER COLUMN id TYPE text USING regexp_replace(encode(id, 'hex'),
            '(.{8})(.{4})(.{4})(.{4})(.{12})', '\\1-\\2-\\3-\\4-\\5'),
        ALTER COLUMN user_id TYPE text USING regexp_replace(encode(user_id, 'hex'),
            '(.{8})(.{4})(.{4})(.{4})(.{12})', '\\1-\\2-\\3-\\4-\\5'),
        ALTER COLUMN created_at TYPE text USING
            to_char(to_timestamp(created_at / 1000) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS')
            || '.' || lpad((created_at % 1000)::text, 3, '0') || 'Z';
    -- V14 and every migration after it (refinery refuses a gap); each runs again as a no-op.
    DELETE FROM refinery_schema_history WHERE version >= 14;
";
const OLDER_ROW: &str = "
    INSERT INTO activities (id, user_id, resource, action, record_id, summary, ip, created_at)
        VALUES ('legacy-1', 'Legacy-User', 'auth', 'sign-in', NULL, 'an older row',
                NULL, '2001-02-03T04:05:06.789Z');
";

#[tokio::test]
async fn the_compact_audit_log_answers_as_the_text_one_did_and_survives_its_migration() {
    let app = TestApp::spawn().await;
    let (u, admin) = (app.standard().await, app.admin().await);
    for name in ["one", "two", "three"] {
        app.call(&u.token, "api-keys", "create", None, json!({"name": name}))
            .await
            .ok(201);
    }
    app.call(
        &admin.token,
        "profiles",
        "update",
        None,
        json!({"full_name": "A"}),
    )
    .await
    .ok(200);
    let everyone = json!({"adminMode": true, "limit": 500});
    async fn listed(app: &TestApp, token: &str, data: Value) -> Value {
        app.call(token, "activities", "list", None, data)
            .await
            .ok(200)
            .clone()
    }
    let before = listed(&app, &admin.token, everyone.clone()).await;
    let rows = before["activities"].as_array().unwrap().clone();
    assert_eq!(rows.len(), 4, "{before}");
    // Bounds compare to the millisecond, inclusive at both ends: the middle key's row alone.
    let middle = rows[2]["created_at"].as_str().unwrap().to_string();
    let bounded = json!({"userId": u.id, "filters": {"from": middle, "to": middle}});
    let only_middle = listed(&app, &admin.token, bounded.clone()).await;
    assert!(
        only_middle["activities"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["created_at"] == json!(middle)),
        "{only_middle}"
    );
    assert!(only_middle["count"].as_i64().unwrap() >= 1);

    // Stored compactly: 16 bytes an id, an integer time (the same on both engines).
    let stored: Vec<(Vec<u8>, Vec<u8>, i64)> = app
        .state
        .db
        .read(|c| {
            let mut st = c.prepare("SELECT id, user_id, created_at FROM activities")?;
            Ok(st
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                .collect::<rusqlite::Result<Vec<_>>>()?)
        })
        .await
        .unwrap();
    assert_eq!(stored.len(), 4);
    for (id, user_id, at) in &stored {
        assert_eq!((id.len(), user_id.len()), (16, 16));
        let text = rows
            .iter()
            .find(|r| r["id"] == json!(uuid::Uuid::from_slice(id).unwrap().to_string()));
        let text = text.expect("every stored id is listed");
        assert_eq!(
            text["user_id"],
            json!(uuid::Uuid::from_slice(user_id).unwrap().to_string())
        );
        let ms = chrono::DateTime::parse_from_rfc3339(text["created_at"].as_str().unwrap())
            .unwrap()
            .timestamp_millis();
        assert_eq!(ms, *at);
    }

    // Back to the text columns, one older row added, the migration unapplied: it runs again.
    // On PostgreSQL the lead keys of V18 go back to text first: V15, which runs again,
    // compares a lead's creator with its user as text.
    let undo = if app.state.config.postgres_url().is_some() {
        format!(
            "{}{UNDO_COMPACT_AUDIT_POSTGRES}",
            crate::leads::UNDO_LEAD_KEYS_POSTGRES
        )
    } else {
        UNDO_COMPACT_AUDIT_SQLITE.to_string()
    };
    app.state
        .db
        .write(move |c| Ok(c.execute_batch(&format!("{undo}{OLDER_ROW}"))?))
        .await
        .unwrap();
    let app = app.restart().await;

    let after = listed(&app, &admin.token, everyone).await;
    let mut expected = rows.clone();
    expected.push(json!({
        "id": "legacy-1", "user_id": "Legacy-User", "resource": "auth", "action": "sign-in",
        "record_id": null, "summary": "an older row", "ip": null,
        "created_at": "2001-02-03T04:05:06.789Z",
    }));
    assert_eq!(after["activities"], json!(expected));
    assert_eq!(after["count"], json!(5));
    assert_eq!(listed(&app, &admin.token, bounded).await, only_middle);
    // A row that was not a UUID keeps its bytes; the rest are 16 bytes again.
    let lengths: Vec<i64> = app
        .state
        .db
        .read(|c| {
            let mut st = c.prepare("SELECT length(id) FROM activities ORDER BY created_at")?;
            Ok(st
                .query_map([], |r| r.get(0))?
                .collect::<rusqlite::Result<Vec<_>>>()?)
        })
        .await
        .unwrap();
    assert_eq!(lengths, vec![8, 16, 16, 16, 16]);

    // New rows come after every older one.
    app.call(
        &u.token,
        "api-keys",
        "create",
        None,
        json!({"name": "four"}),
    )
    .await
    .ok(201);
    let newest = listed(&app, &admin.token, json!({"adminMode": true, "limit": 1})).await;
    assert_eq!(newest["activities"][0]["action"], json!("create"));
    assert!(newest["activities"][0]["created_at"].as_str() >= rows[0]["created_at"].as_str());
    assert_ne!(newest["activities"][0]["id"], rows[0]["id"]);
}
