use serde_json::{Value, json};

use crate::common::*;

pub async fn assign(app: &TestApp, genie: &str, user: &User) {
    let (g, u) = (genie.to_string(), user.id.clone());
    app.state
        .db
        .write(move |c| {
            c.execute(
                "INSERT INTO genie_assignments (genie_id, user_id, created_at) VALUES (?1, ?2, ?3)",
                rusqlite::params![g, u, genied::db::now()],
            )?;
            Ok(())
        })
        .await
        .unwrap();
}

pub async fn sql(app: &TestApp, stmt: &str) {
    let s = stmt.to_string();
    app.state
        .db
        .write(move |c| Ok(c.execute_batch(&s)?))
        .await
        .unwrap();
}

/// Every lead log entry: the stored ones and the "created" entries kept on lead rows.
const LOG_ENTRIES: &str = "(SELECT id FROM lead_activities
    UNION ALL SELECT created_log_id FROM leads WHERE created_log_id IS NOT NULL) e";

pub async fn new_lead(app: &TestApp, user: &User, data: Value) -> Value {
    app.call(&user.token, "leads", "create", None, data)
        .await
        .ok(201)["lead"]
        .clone()
}

#[tokio::test]
async fn create_returns_the_full_lead_object() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let g = insert_genie(&app, &u, "Sales Genie").await;
    let r = app
        .call(
            &u.token,
            "leads",
            "create",
            None,
            json!({"agent_id": g, "name": "Ann", "email": "ann@example.test", "phone": "+15550100",
                   "priority": "high", "budget": "10k", "timeline": "Q3", "address": {"city": "Berlin"},
                   "notes": "n", "assigned_to": "bob", "conversation_id": 7, "is_decision_maker": true,
                   "preferred_contact_method": "sms", "preferred_contact_time": "mornings", "metadata": {"src": "web"}}),
        )
        .await;
    let lead = &r.ok(201)["lead"];
    assert!(lead["id"].is_i64());
    assert_eq!(lead["agent_id"], json!(g));
    assert_eq!(lead["user_id"], json!(u.id));
    assert_eq!(lead["status"], json!("new"), "status defaults to new");
    assert_eq!(lead["priority"], json!("high"));
    assert_eq!(lead["address"], json!({"city": "Berlin"}));
    assert_eq!(lead["metadata"], json!({"src": "web"}));
    assert_eq!(lead["conversation_id"], json!(7));
    assert_eq!(lead["is_decision_maker"], json!(true));
    assert_eq!(lead["preferred_contact_method"], json!("sms"));
    assert_eq!(lead["primary_lead_id"], Value::Null);
    assert_eq!(lead["agent"], json!({"id": g, "name": "Sales Genie"}));
    assert!(lead["created_at"].as_str().unwrap().ends_with('Z'));
    assert!(lead["updated_at"].is_string());
    for k in [
        "id",
        "agent_id",
        "user_id",
        "name",
        "email",
        "phone",
        "status",
        "priority",
        "budget",
        "timeline",
        "address",
        "notes",
        "assigned_to",
        "conversation_id",
        "primary_lead_id",
        "is_decision_maker",
        "preferred_contact_method",
        "preferred_contact_time",
        "metadata",
        "created_at",
        "updated_at",
        "agent",
    ] {
        assert!(lead.get(k).is_some(), "member {k} missing: {lead}");
    }
    // Minimal lead: nullable fields are null.
    let l2 = new_lead(&app, &u, json!({"agent_id": g})).await;
    for k in [
        "name",
        "email",
        "phone",
        "priority",
        "budget",
        "address",
        "metadata",
        "is_decision_maker",
    ] {
        assert_eq!(l2[k], Value::Null, "{k}");
    }
    // get answers the same object.
    let got = app
        .call(
            &u.token,
            "leads",
            "get",
            Some(json!(lead["id"].to_string())),
            json!({}),
        )
        .await;
    assert_eq!(got.ok(200)["lead"], *lead);
    // A "created" activity was written (on the lead row).
    assert_eq!(app.count(LOG_ENTRIES).await, 2);
}

/// A lead may name another as its primary (a duplicate's original); deleting the primary
/// leaves the duplicate with none, through the foreign key's `SET NULL` (which since V46 and
/// PostgreSQL V19 finds the duplicates by an index instead of reading every lead).
#[tokio::test]
async fn deleting_a_primary_lead_unsets_it_on_its_duplicates() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let g = insert_genie(&app, &u, "G").await;
    let primary = new_lead(&app, &u, json!({"agent_id": g, "name": "Ann"})).await["id"].clone();
    let dup = new_lead(
        &app,
        &u,
        json!({"agent_id": g, "name": "Ann again", "primary_lead_id": primary}),
    )
    .await;
    assert_eq!(dup["primary_lead_id"], primary);
    let other = new_lead(&app, &u, json!({"agent_id": g, "name": "Bo"})).await;
    let dup_id = dup["id"].as_i64().unwrap();

    app.call(
        &u.token,
        "leads",
        "update",
        Some(json!(dup_id)),
        json!({"primary_lead_id": dup_id}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    app.call(
        &u.token,
        "leads",
        "create",
        None,
        json!({"agent_id": g, "primary_lead_id": 999_999}),
    )
    .await
    .err(400, "VALIDATION_ERROR");

    app.call(
        &u.token,
        "leads",
        "delete",
        Some(primary.clone()),
        json!({}),
    )
    .await
    .ok(200);
    let got = app
        .call(&u.token, "leads", "get", Some(json!(dup_id)), json!({}))
        .await;
    let got = &got.ok(200)["lead"];
    assert_eq!(got["primary_lead_id"], Value::Null, "{got}");
    assert_eq!(got["name"], json!("Ann again"));
    // A lead that named no primary is untouched.
    let got = app
        .call(
            &u.token,
            "leads",
            "get",
            Some(other["id"].clone()),
            json!({}),
        )
        .await;
    assert_eq!(got.ok(200)["lead"], other);
}

#[tokio::test]
async fn user_id_is_resolved_supplied_then_agent_owner_then_caller() {
    let app = TestApp::spawn().await;
    let owner = app.standard().await;
    let other = app.standard().await;
    let admin = app.admin().await;
    let g = insert_genie(&app, &owner, "G").await;
    // 1. supplied (admin, for another user; both spellings)
    let l = new_lead(&app, &admin, json!({"agent_id": g, "user_id": other.id})).await;
    assert_eq!(l["user_id"], json!(other.id));
    let l = new_lead(&app, &admin, json!({"agent_id": g, "userId": other.id})).await;
    assert_eq!(l["user_id"], json!(other.id));
    // 2. the agent's owner (admin creating under someone else's agent)
    let l = new_lead(&app, &admin, json!({"agent_id": g})).await;
    assert_eq!(l["user_id"], json!(owner.id));
    // 3. the caller, who owns the agent; supplying oneself is allowed
    let l = new_lead(&app, &owner, json!({"agent_id": g})).await;
    assert_eq!(l["user_id"], json!(owner.id));
    let l = new_lead(&app, &owner, json!({"agent_id": g, "userId": owner.id})).await;
    assert_eq!(l["user_id"], json!(owner.id));
    let before = app.count("leads").await;
    // A regular user naming another user: 403.
    app.call(
        &owner.token,
        "leads",
        "create",
        None,
        json!({"agent_id": g, "user_id": other.id}),
    )
    .await
    .err(403, "FORBIDDEN");
    // An unknown user: 400.
    app.call(
        &admin.token,
        "leads",
        "create",
        None,
        json!({"agent_id": g, "user_id": uuid::Uuid::new_v4().to_string()}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    assert_eq!(app.count("leads").await, before);
}

#[tokio::test]
async fn create_checks_agent_and_enumerations() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let other = app.standard().await;
    let g = insert_genie(&app, &u, "Mine").await;
    let theirs = insert_genie(&app, &other, "Theirs").await;
    app.call(
        &u.token,
        "leads",
        "create",
        None,
        json!({"agent_id": theirs}),
    )
    .await
    .err(403, "FORBIDDEN");
    app.call(
        &u.token,
        "leads",
        "create",
        None,
        json!({"agent_id": uuid::Uuid::new_v4().to_string()}),
    )
    .await
    .err(404, "AGENT_NOT_FOUND");
    let r = app
        .call(&u.token, "leads", "create", None, json!({"name": "x"}))
        .await;
    r.err(400, "VALIDATION_ERROR");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("agent_id")
    );
    for (field, bad) in [
        ("status", "won"),
        ("priority", "urgent"),
        ("preferred_contact_method", "fax"),
    ] {
        let r = app
            .call(
                &u.token,
                "leads",
                "create",
                None,
                json!({"agent_id": g, field: bad}),
            )
            .await;
        r.err(400, "VALIDATION_ERROR");
        assert!(
            r.body["error"]["message"].as_str().unwrap().contains(field),
            "{}",
            r.body
        );
    }
    for v in ["new", "contacted", "qualified", "converted"] {
        assert_eq!(
            new_lead(&app, &u, json!({"agent_id": g, "status": v})).await["status"],
            json!(v)
        );
    }
    for v in ["low", "medium", "high"] {
        assert_eq!(
            new_lead(&app, &u, json!({"agent_id": g, "priority": v})).await["priority"],
            json!(v)
        );
    }
    for v in ["email", "phone", "sms"] {
        assert_eq!(
            new_lead(
                &app,
                &u,
                json!({"agent_id": g, "preferred_contact_method": v})
            )
            .await["preferred_contact_method"],
            json!(v)
        );
    }
    // Explicit null status is kept null.
    assert_eq!(
        new_lead(&app, &u, json!({"agent_id": g, "status": null})).await["status"],
        Value::Null
    );
    app.call(
        &u.token,
        "leads",
        "create",
        None,
        json!({"agent_id": g, "address": "street"}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    app.call(
        &u.token,
        "leads",
        "create",
        None,
        json!({"agent_id": g, "bogus": 1}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    assert_eq!(app.count("leads").await, 11);
}

#[tokio::test]
async fn get_update_delete_and_access() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let other = app.standard().await;
    let admin = app.admin().await;
    let g = insert_genie(&app, &u, "G").await;
    let g2 = insert_genie(&app, &u, "G2").await;
    let theirs = insert_genie(&app, &other, "T").await;
    let lead = new_lead(&app, &u, json!({"agent_id": g, "name": "Ann"})).await;
    let id = lead["id"].as_i64().unwrap();
    let mut events = app.state.bus.subscribe();

    // 404 for a missing lead; 403 for another's; admin reaches it.
    app.call(&u.token, "leads", "get", Some(json!(999999)), json!({}))
        .await
        .err(404, "NOT_FOUND");
    app.call(&other.token, "leads", "get", Some(json!(id)), json!({}))
        .await
        .err(403, "FORBIDDEN");
    app.call(&admin.token, "leads", "get", Some(json!(id)), json!({}))
        .await
        .ok(200);
    app.call(&u.token, "leads", "get", Some(json!("abc")), json!({}))
        .await
        .err(400, "VALIDATION_ERROR");

    // update: partial, null clears, status change logged.
    let r = app
        .call(
            &u.token,
            "leads",
            "update",
            Some(json!(id)),
            json!({"status": "contacted", "email": "a@b.test", "name": null, "agent_id": g2}),
        )
        .await;
    let l = &r.ok(200)["lead"];
    assert_eq!(l["status"], json!("contacted"));
    assert_eq!(l["email"], json!("a@b.test"));
    assert_eq!(l["name"], Value::Null);
    assert_eq!(l["agent"], json!({"id": g2, "name": "G2"}));
    assert_eq!(l["created_at"], lead["created_at"]);
    let logs = app
        .call(&u.token, "leads", "getLogs", Some(json!(id)), json!({}))
        .await;
    let acts = logs.ok(200)["activities"].as_array().unwrap().clone();
    assert_eq!(acts[0]["type"], json!("status_change"));
    assert_eq!(
        acts[0]["metadata"],
        json!({"from": "new", "to": "contacted", "changed_by": u.id})
    );
    assert_eq!(acts[0]["user_id"], json!(u.id));
    assert_eq!(
        acts[0]["description"],
        json!("Status changed from new to contacted")
    );

    // Events: updated and status_changed.
    let mut kinds = vec![];
    while let Ok(e) = events.try_recv() {
        kinds.push(e.kind);
    }
    assert_eq!(kinds, vec!["lead.updated", "lead.status_changed"]);

    // An update without a status change writes no activity.
    let n = app.count("lead_activities").await;
    app.call(
        &u.token,
        "leads",
        "update",
        Some(json!(id)),
        json!({"budget": "5k"}),
    )
    .await
    .ok(200);
    assert_eq!(app.count("lead_activities").await, n);

    // Bad updates change nothing.
    for data in [
        json!({"id": 5}),
        json!({"created_at": "2020-01-01T00:00:00.000Z"}),
        json!({"status": "lost"}),
        json!({"priority": "p1", "name": "X"}),
        json!({"preferred_contact_method": "pigeon"}),
    ] {
        app.call(&u.token, "leads", "update", Some(json!(id)), data)
            .await
            .err(400, "VALIDATION_ERROR");
    }
    app.call(
        &u.token,
        "leads",
        "update",
        Some(json!(id)),
        json!({"agent_id": theirs}),
    )
    .await
    .err(403, "FORBIDDEN");
    app.call(
        &other.token,
        "leads",
        "update",
        Some(json!(id)),
        json!({"name": "Hijack"}),
    )
    .await
    .err(403, "FORBIDDEN");
    app.call(
        &u.token,
        "leads",
        "update",
        Some(json!(id)),
        json!({"user_id": other.id}),
    )
    .await
    .err(403, "FORBIDDEN");
    app.call(
        &u.token,
        "leads",
        "update",
        Some(json!(424242)),
        json!({"name": "x"}),
    )
    .await
    .err(404, "NOT_FOUND");
    let now = app
        .call(&u.token, "leads", "get", Some(json!(id)), json!({}))
        .await
        .ok(200)["lead"]
        .clone();
    assert_eq!(now["name"], Value::Null);
    assert_eq!(now["status"], json!("contacted"));
    assert_eq!(now["agent_id"], json!(g2));

    // delete: another's is 403; own is hard.
    app.call(&other.token, "leads", "delete", Some(json!(id)), json!({}))
        .await
        .err(403, "FORBIDDEN");
    let d = app
        .call(&u.token, "leads", "delete", Some(json!(id)), json!({}))
        .await;
    assert!(
        d.ok(200)["message"]
            .as_str()
            .unwrap()
            .contains(&id.to_string())
    );
    app.call(&u.token, "leads", "get", Some(json!(id)), json!({}))
        .await
        .err(404, "NOT_FOUND");
    app.call(&u.token, "leads", "delete", Some(json!(id)), json!({}))
        .await
        .err(404, "NOT_FOUND");
    assert_eq!(
        app.count(LOG_ENTRIES).await,
        0,
        "activities go with the lead"
    );
    app.call(&u.token, "leads", "frobnicate", None, json!({}))
        .await
        .err(400, "INVALID_ACTION");
}

#[tokio::test]
async fn log_and_get_logs_most_recent_first_with_limit() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let other = app.standard().await;
    let g = insert_genie(&app, &u, "G").await;
    let id = new_lead(&app, &u, json!({"agent_id": g})).await["id"]
        .as_i64()
        .unwrap();
    for i in 0..5 {
        let r = app
            .call(
                &u.token,
                "leads",
                "log",
                Some(json!(id)),
                json!({"type": "call", "description": format!("call {i}"), "metadata": {"n": i}}),
            )
            .await;
        let a = &r.ok(201)["activity"];
        assert_eq!(a["type"], json!("call"));
        assert_eq!(a["lead_id"], json!(id));
        assert_eq!(a["metadata"], json!({"n": i}));
    }
    let r = app
        .call(
            &u.token,
            "leads",
            "getLogs",
            Some(json!(id)),
            json!({"limit": 3}),
        )
        .await;
    let acts = r.ok(200)["activities"].as_array().unwrap().clone();
    let d: Vec<&str> = acts
        .iter()
        .map(|a| a["description"].as_str().unwrap())
        .collect();
    assert_eq!(d, vec!["call 4", "call 3", "call 2"]);
    let all = app
        .call(&u.token, "leads", "getLogs", Some(json!(id)), json!({}))
        .await;
    let all = all.ok(200)["activities"].as_array().unwrap().clone();
    assert_eq!(all.len(), 6);
    assert_eq!(all.last().unwrap()["type"], json!("created"));
    app.call(
        &u.token,
        "leads",
        "getLogs",
        Some(json!(id)),
        json!({"limit": 0}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    app.call(
        &u.token,
        "leads",
        "log",
        Some(json!(id)),
        json!({"description": "no type"}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    app.call(
        &u.token,
        "leads",
        "log",
        Some(json!(id)),
        json!({"type": "x", "metadata": [1]}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    app.call(
        &other.token,
        "leads",
        "log",
        Some(json!(id)),
        json!({"type": "x"}),
    )
    .await
    .err(403, "FORBIDDEN");
    app.call(&other.token, "leads", "getLogs", Some(json!(id)), json!({}))
        .await
        .err(403, "FORBIDDEN");
    app.call(&u.token, "leads", "getLogs", Some(json!(777)), json!({}))
        .await
        .err(404, "NOT_FOUND");
    assert_eq!(app.count(LOG_ENTRIES).await, 6);
}

#[tokio::test]
async fn stats_counts_null_and_non_standard_statuses_in_total_only() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let other = app.standard().await;
    let admin = app.admin().await;
    let g = insert_genie(&app, &u, "G").await;
    let g2 = insert_genie(&app, &u, "G2").await;
    let og = insert_genie(&app, &other, "O").await;
    for s in [
        "new",
        "new",
        "contacted",
        "qualified",
        "converted",
        "converted",
        "converted",
    ] {
        new_lead(
            &app,
            &u,
            json!({"agent_id": g, "status": s, "priority": "low"}),
        )
        .await;
    }
    new_lead(&app, &u, json!({"agent_id": g2, "status": null})).await;
    let weird = new_lead(&app, &u, json!({"agent_id": g2, "priority": "high"})).await;
    sql(
        &app,
        &format!(
            "UPDATE leads SET status = 'archived' WHERE id = {}",
            weird["id"]
        ),
    )
    .await;
    new_lead(&app, &other, json!({"agent_id": og})).await;

    let stats = |r: &Resp| r.ok(200)["stats"].clone();
    let s = stats(&app.call(&u.token, "leads", "stats", None, json!({})).await);
    assert_eq!(
        s,
        json!({"total": 9, "by_status": {"new": 2, "contacted": 1, "qualified": 1, "converted": 3}})
    );
    // Filters apply; status is not a stats filter and is ignored.
    let s = stats(
        &app.call(
            &u.token,
            "leads",
            "stats",
            None,
            json!({"filters": {"agentId": g2}}),
        )
        .await,
    );
    assert_eq!(
        s,
        json!({"total": 2, "by_status": {"new": 0, "contacted": 0, "qualified": 0, "converted": 0}})
    );
    let s = stats(
        &app.call(
            &u.token,
            "leads",
            "stats",
            None,
            json!({"filters": {"priority": "low", "status": "new"}}),
        )
        .await,
    );
    assert_eq!(s["total"], json!(7));
    // The counters follow updates and deletes (and agree with the counting path).
    let l = new_lead(
        &app,
        &u,
        json!({"agent_id": g2, "status": "qualified", "priority": "medium"}),
    )
    .await;
    app.call(
        &u.token,
        "leads",
        "update",
        Some(l["id"].clone()),
        json!({"status": "converted", "agent_id": g}),
    )
    .await
    .ok(200);
    let s = stats(&app.call(&u.token, "leads", "stats", None, json!({})).await);
    assert_eq!(
        s,
        json!({"total": 10, "by_status": {"new": 2, "contacted": 1, "qualified": 1, "converted": 4}})
    );
    let s = stats(
        &app.call(
            &u.token,
            "leads",
            "stats",
            None,
            json!({"filters": {"dateRange": "all", "priority": "medium"}}),
        )
        .await,
    );
    assert_eq!(
        s,
        json!({"total": 1, "by_status": {"new": 0, "contacted": 0, "qualified": 0, "converted": 1}})
    );
    app.call(
        &u.token,
        "leads",
        "delete",
        Some(l["id"].clone()),
        json!({}),
    )
    .await
    .ok(200);
    let s = stats(
        &app.call(
            &u.token,
            "leads",
            "stats",
            None,
            json!({"filters": {"agentIds": [g, g2]}}),
        )
        .await,
    );
    assert_eq!(
        s,
        json!({"total": 9, "by_status": {"new": 2, "contacted": 1, "qualified": 1, "converted": 3}})
    );
    // Admin: adminMode sees all users; userId scopes to one.
    let s = stats(
        &app.call(
            &admin.token,
            "leads",
            "stats",
            None,
            json!({"adminMode": true}),
        )
        .await,
    );
    assert_eq!(s["total"], json!(10));
    let s = stats(
        &app.call(
            &admin.token,
            "leads",
            "stats",
            None,
            json!({"userId": other.id}),
        )
        .await,
    );
    assert_eq!(s["total"], json!(1));
    let s = stats(
        &app.call(&admin.token, "leads", "stats", None, json!({}))
            .await,
    );
    assert_eq!(
        s["total"],
        json!(0),
        "without adminMode an admin sees the leads of their own agents"
    );
    // Admin options are 403 for others.
    app.call(&u.token, "leads", "stats", None, json!({"adminMode": true}))
        .await
        .err(403, "FORBIDDEN");
    app.call(&u.token, "leads", "stats", None, json!({"userId": u.id}))
        .await
        .err(403, "FORBIDDEN");
    app.call(&u.token, "leads", "all", None, json!({"adminMode": true}))
        .await
        .err(403, "FORBIDDEN");
    app.call(&u.token, "leads", "list", None, json!({"userId": other.id}))
        .await
        .err(403, "FORBIDDEN");
    // Another's agent in a filter: 403; an unknown agent: 404.
    app.call(
        &u.token,
        "leads",
        "stats",
        None,
        json!({"filters": {"agentId": og}}),
    )
    .await
    .err(403, "FORBIDDEN");
    app.call(
        &u.token,
        "leads",
        "all",
        None,
        json!({"filters": {"agentIds": [g, og]}}),
    )
    .await
    .err(403, "FORBIDDEN");
    app.call(
        &u.token,
        "leads",
        "all",
        None,
        json!({"filters": {"agentId": uuid::Uuid::new_v4().to_string()}}),
    )
    .await
    .err(404, "AGENT_NOT_FOUND");
}

#[tokio::test]
async fn all_and_list_filters_and_pagination() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let other = app.standard().await;
    let g = insert_genie(&app, &u, "G").await;
    let g2 = insert_genie(&app, &u, "G2").await;
    let g3 = insert_genie(&app, &u, "G3").await;
    let og = insert_genie(&app, &other, "O").await;
    let a = new_lead(&app, &u, json!({"agent_id": g, "name": "Alice Smith", "email": "alice@acme.test", "status": "qualified", "priority": "high"})).await;
    let b = new_lead(
        &app,
        &u,
        json!({"agent_id": g, "name": "Bob", "phone": "+49 30 1234", "priority": "low"}),
    )
    .await;
    let c = new_lead(
        &app,
        &u,
        json!({"agent_id": g2, "name": "Carol", "email": "carol@smith.test"}),
    )
    .await;
    let d = new_lead(&app, &u, json!({"agent_id": g3, "name": "Dan"})).await;
    new_lead(&app, &other, json!({"agent_id": og, "name": "Alice Other"})).await;
    // Age some leads.
    sql(
        &app,
        &format!(
            "UPDATE leads SET created_at = {} WHERE id = {}",
            chrono::DateTime::parse_from_rfc3339("2020-01-01T00:00:00.000Z")
                .unwrap()
                .timestamp_millis(),
            d["id"]
        ),
    )
    .await;
    // Lead times are stored as milliseconds (V40).
    let ten_days = (chrono::Utc::now() - chrono::Duration::days(10)).timestamp_millis();
    let sixty_days = (chrono::Utc::now() - chrono::Duration::days(60)).timestamp_millis();
    sql(
        &app,
        &format!(
            "UPDATE leads SET created_at = {ten_days} WHERE id = {}",
            c["id"]
        ),
    )
    .await;
    sql(
        &app,
        &format!(
            "UPDATE leads SET created_at = {sixty_days} WHERE id = {}",
            b["id"]
        ),
    )
    .await;

    let ids = |r: &Resp| -> Vec<i64> {
        r.ok(200)["leads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["id"].as_i64().unwrap())
            .collect()
    };
    let (ia, ib, ic, id) = (
        a["id"].as_i64().unwrap(),
        b["id"].as_i64().unwrap(),
        c["id"].as_i64().unwrap(),
        d["id"].as_i64().unwrap(),
    );
    let all = |f: Value| app.call(&u.token, "leads", "all", None, json!({"filters": f}));
    assert_eq!(
        ids(&all(json!({})).await),
        vec![ia, ic, ib, id],
        "most recent first, own agents only"
    );
    assert_eq!(ids(&all(json!({"agentId": g})).await), vec![ia, ib]);
    assert_eq!(ids(&all(json!({"agentIds": [g2, g3]})).await), vec![ic, id]);
    assert_eq!(ids(&all(json!({"status": "qualified"})).await), vec![ia]);
    assert_eq!(ids(&all(json!({"priority": "low"})).await), vec![ib]);
    assert_eq!(
        ids(&all(json!({"searchTerm": "smith"})).await),
        vec![ia, ic],
        "name or email"
    );
    assert_eq!(
        ids(&all(json!({"searchTerm": "30 12"})).await),
        vec![ib],
        "phone"
    );
    assert_eq!(
        ids(&all(json!({"searchTerm": "%"})).await),
        Vec::<i64>::new(),
        "wildcards are literal"
    );
    assert_eq!(
        ids(&all(json!({"searchTerm": "bO"})).await),
        vec![ib],
        "short terms, case-insensitive"
    );
    assert_eq!(ids(&all(json!({"searchTerm": "ALICE"})).await), vec![ia]);
    // The search index follows updates and deletes.
    app.call(
        &u.token,
        "leads",
        "update",
        Some(json!(id)),
        json!({"name": "Danielle Smith"}),
    )
    .await
    .ok(200);
    assert_eq!(
        ids(&all(json!({"searchTerm": "smith"})).await),
        vec![ia, ic, id]
    );
    app.call(
        &u.token,
        "leads",
        "update",
        Some(json!(id)),
        json!({"name": "Dan"}),
    )
    .await
    .ok(200);
    assert_eq!(
        ids(&all(json!({"searchTerm": "smith"})).await),
        vec![ia, ic]
    );
    assert_eq!(ids(&all(json!({"dateRange": "7d"})).await), vec![ia]);
    assert_eq!(ids(&all(json!({"dateRange": "30d"})).await), vec![ia, ic]);
    assert_eq!(
        ids(&all(json!({"dateRange": "90d"})).await),
        vec![ia, ic, ib]
    );
    assert_eq!(
        ids(&all(json!({"dateRange": "all"})).await),
        vec![ia, ic, ib, id]
    );
    assert_eq!(
        ids(&all(
            json!({"agentId": g, "priority": "high", "searchTerm": "ali", "dateRange": "7d"})
        )
        .await),
        vec![ia]
    );
    for bad in [
        json!({"dateRange": "1y"}),
        json!({"status": "lost"}),
        json!({"priority": "p0"}),
        json!({"agentId": "nope"}),
        json!({"agentIds": "x"}),
    ] {
        let r = all(bad.clone()).await;
        r.err(400, "VALIDATION_ERROR");
        let field = bad.as_object().unwrap().keys().next().unwrap().clone();
        assert!(
            r.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains(&field),
            "{}",
            r.body
        );
    }
    // count: from the counters (scope/agent/status) and from the index scan (other filters).
    assert_eq!(
        all(json!({"status": "qualified"})).await.ok(200)["count"],
        json!(1)
    );
    assert_eq!(
        all(json!({"agentIds": [g, g2], "status": "new"}))
            .await
            .ok(200)["count"],
        json!(2)
    );
    assert_eq!(
        all(json!({"dateRange": "30d"})).await.ok(200)["count"],
        json!(2)
    );
    assert_eq!(
        all(json!({"searchTerm": "smith", "status": "new"}))
            .await
            .ok(200)["count"],
        json!(1)
    );
    // Pagination.
    let r = app
        .call(
            &u.token,
            "leads",
            "all",
            None,
            json!({"limit": 2, "offset": 1}),
        )
        .await;
    let data = r.ok(200);
    assert_eq!(
        (
            data["count"].clone(),
            data["limit"].clone(),
            data["offset"].clone()
        ),
        (json!(4), json!(2), json!(1))
    );
    assert_eq!(ids(&r), vec![ic, ib]);
    assert_eq!(data["leads"][0]["agent"], json!({"id": g2, "name": "G2"}));
    app.call(&u.token, "leads", "all", None, json!({"limit": 0}))
        .await
        .err(400, "VALIDATION_ERROR");
    app.call(&u.token, "leads", "all", None, json!({"offset": -1}))
        .await
        .err(400, "VALIDATION_ERROR");
    // list: summaries with count, same filters.
    let r = app
        .call(
            &u.token,
            "leads",
            "list",
            None,
            json!({"filters": {"agentId": g}, "limit": 1}),
        )
        .await;
    let data = r.ok(200);
    assert_eq!(data["count"], json!(2));
    assert_eq!(
        data.as_object().unwrap().len(),
        2,
        "list data is {{leads, count}}"
    );
    let s = data["leads"][0].as_object().unwrap();
    let mut keys: Vec<&str> = s.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(
        keys,
        vec![
            "agent_id",
            "created_at",
            "email",
            "id",
            "name",
            "phone",
            "priority",
            "status"
        ]
    );
    // REST: GET /v1/leads runs list.
    let r = app
        .request(reqwest::Method::GET, "/v1/leads", Some(&u.token), None)
        .await;
    assert_eq!(r.ok(200)["count"], json!(4));
}

#[tokio::test]
async fn consumers_read_leads_of_assigned_genies_only() {
    let app = TestApp::spawn().await;
    let owner = app.standard().await;
    let consumer = app.consumer().await;
    let g = insert_genie(&app, &owner, "G").await;
    let g2 = insert_genie(&app, &owner, "G2").await;
    assign(&app, &g, &consumer).await;
    let l = new_lead(&app, &owner, json!({"agent_id": g})).await;
    let l2 = new_lead(&app, &owner, json!({"agent_id": g2})).await;
    let r = app
        .call(&consumer.token, "leads", "all", None, json!({}))
        .await;
    assert_eq!(r.ok(200)["count"], json!(1));
    app.call(
        &consumer.token,
        "leads",
        "get",
        Some(l["id"].clone()),
        json!({}),
    )
    .await
    .ok(200);
    app.call(
        &consumer.token,
        "leads",
        "get",
        Some(l2["id"].clone()),
        json!({}),
    )
    .await
    .err(403, "FORBIDDEN");
    app.call(
        &consumer.token,
        "leads",
        "create",
        None,
        json!({"agent_id": g}),
    )
    .await
    .err(403, "FORBIDDEN");
    app.call(
        &consumer.token,
        "leads",
        "update",
        Some(l["id"].clone()),
        json!({"name": "x"}),
    )
    .await
    .err(403, "FORBIDDEN");
    assert_eq!(app.count("leads").await, 2);
}

#[tokio::test]
async fn create_emits_lead_created_and_is_audited() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let g = insert_genie(&app, &u, "G").await;
    let mut events = app.state.bus.subscribe();
    let l = new_lead(&app, &u, json!({"agent_id": g, "name": "Eve"})).await;
    let e = events.try_recv().unwrap();
    assert_eq!(e.kind, "lead.created");
    assert_eq!(e.user_id, u.id);
    assert_eq!(e.data["id"], l["id"]);
    let r = app
        .call(&u.token, "activities", "list", None, json!({}))
        .await;
    let acts = r.ok(200).to_string();
    assert!(acts.contains("created lead Eve"), "{acts}");
}

/// The ids of the user's leads that `leads all` finds by `term`.
async fn searched(app: &TestApp, user: &User, term: &str) -> Vec<i64> {
    app.call(
        &user.token,
        "leads",
        "all",
        None,
        json!({"filters": {"searchTerm": term}}),
    )
    .await
    .ok(200)["leads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["id"].as_i64().unwrap())
        .collect()
}

/// New leads wait past the search watermark (V39) until the indexer's next batch: a lead
/// made, renamed and deleted before that batch leaves nothing behind in the index, and is
/// found by what it is called when the batch runs; once indexed, a rename takes it out of
/// the index with its old values and lists it for the next batch.
#[tokio::test]
async fn leads_changed_before_the_indexer_takes_them_in_are_indexed_as_they_are() {
    if postgres::skip("the lead search index and its watermark are SQLite's") {
        return;
    }
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let g = insert_genie(&app, &u, "G").await;
    let (uid, gid) = (u.id.clone(), g.clone());
    // One write, so the background indexer cannot take them in between: the rename and the
    // delete happen past the watermark.
    let kept = app
        .state
        .db
        .write(move |c| {
            let fields = |name: &str| -> genied::db::leads::Fields {
                vec![
                    ("agent_id", gid.clone().into()),
                    ("user_id", uid.clone().into()),
                    ("name", name.to_string().into()),
                ]
            };
            let kept = genied::db::leads::insert(c, &fields("Quentin Vale"))?;
            let gone = genied::db::leads::insert(c, &fields("Rowena Pike"))?;
            genied::db::leads::update(
                c,
                kept,
                &vec![("name", "Quentin Marsh".to_string().into())],
            )?;
            genied::db::leads::delete(c, gone)?;
            Ok(kept)
        })
        .await
        .unwrap();
    let found = |t: &'static str| searched(&app, &u, t);
    let index = || {
        app.state.db.write(|c| {
            while genied::db::leads::index_pending(c, 1)? > 0 {}
            Ok(())
        })
    };
    let expect = async |renamed: &'static str, old: &[&'static str]| {
        assert_eq!(found(renamed).await, vec![kept], "{renamed}");
        for t in old {
            assert!(found(t).await.is_empty(), "{t}");
        }
    };
    expect("marsh", &["vale", "rowena"]).await;
    index().await.unwrap();
    let backlog = app
        .state
        .db
        .read(|c| Ok(genied::db::leads::search_backlog(c)?))
        .await
        .unwrap();
    assert_eq!(backlog, 0);
    expect("marsh", &["vale", "rowena"]).await;
    app.fts_index_is_whole("leads_search").await;

    // Indexed now: a rename takes it out with "Marsh" and lists it until the next batch.
    app.call(
        &u.token,
        "leads",
        "update",
        Some(json!(kept)),
        json!({"name": "Quentin Thorne"}),
    )
    .await
    .ok(200);
    expect("thorne", &["marsh", "vale"]).await;
    index().await.unwrap();
    expect("thorne", &["marsh", "vale"]).await;
    app.fts_index_is_whole("leads_search").await;
}

/// Segments of the lead search index: FTS5 keys each segment's pages by the segment's id
/// shifted 37 bits (its `FTS5_SEGMENT_ROWID`); the rows below are its structure and totals.
const SEARCH_SEGMENTS: &str =
    "SELECT COUNT(DISTINCT id >> 37) FROM leads_search_data WHERE id >> 37 > 0";

async fn search_segments(app: &TestApp) -> i64 {
    app.state
        .db
        .read(|c| Ok(c.query_row(SEARCH_SEGMENTS, [], |r| r.get(0))?))
        .await
        .unwrap()
}

/// FTS5 merges the lead search index only in the indexer's bounded steps, each a write of
/// its own, never in the commit of whatever wrote the index (V48): a step merges segments
/// and says so, says when nothing is left to merge, and the indexer takes the steps by
/// itself for the segments deletes leave behind.
#[tokio::test]
async fn the_lead_search_index_is_merged_in_the_indexers_steps() {
    if postgres::skip("the lead search index is SQLite's FTS5") {
        return;
    }
    let app = TestApp::spawn().await;
    let settings: Vec<(String, i64)> = app
        .state
        .db
        .read(|c| {
            let mut st = c.prepare(
                "SELECT k, v FROM leads_search_config WHERE k IN ('automerge', 'crisismerge') ORDER BY k",
            )?;
            let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            Ok(rows.collect::<Result<_, _>>()?)
        })
        .await
        .unwrap();
    assert_eq!(
        settings,
        vec![
            ("automerge".to_string(), 0),
            ("crisismerge".to_string(), 64)
        ]
    );

    let u = app.standard().await;
    let g = insert_genie(&app, &u, "G").await;
    let names = [
        "Ada Quill",
        "Bram Oster",
        "Cleo Varga",
        "Dov Pernell",
        "Edda Stroud",
        "Fitz Mallory",
        "Gia Thorncastle",
        "Hugo Brennan",
        "Ines Calloway",
        "Jory Wexford",
        "Kit Lachance",
        "Lior Ashdown",
    ];
    let mut ids = Vec::new();
    for name in names {
        ids.push(
            new_lead(&app, &u, json!({"agent_id": g, "name": name})).await["id"]
                .as_i64()
                .unwrap(),
        );
    }
    wait_until("the leads indexed for search", async || {
        let pending = app
            .state
            .db
            .read(|c| Ok(genied::db::leads::search_pending(c)?))
            .await
            .unwrap();
        (!pending).then_some(())
    })
    .await;

    // Five deletes in one write, each in a savepoint as a group's later writes are: FTS5
    // writes out what it holds when a savepoint opens, one segment each, and merges none of
    // them. The write's own steps then merge them, and the indexer cannot come in between.
    let gone = ids[..5].to_vec();
    let (before, steps, after) = app
        .state
        .db
        .write(move |c| {
            let segments = |c: &genied::db::Connection| -> rusqlite::Result<i64> {
                c.query_row(SEARCH_SEGMENTS, [], |r| r.get(0))
            };
            for id in gone {
                c.execute_batch("SAVEPOINT one_delete")?;
                assert!(genied::db::leads::delete(c, id)?);
                c.execute_batch("RELEASE one_delete")?;
            }
            c.execute_batch("SAVEPOINT flush; RELEASE flush")?;
            let before = segments(c)?;
            let mut steps = 0;
            while genied::db::leads::merge_search_step(c, 16)? {
                steps += 1;
                assert!(steps < 100, "merge steps that never end");
            }
            Ok((before, steps, segments(c)?))
        })
        .await
        .unwrap();
    assert!(before >= 5, "each delete's own segment, unmerged: {before}");
    assert!(steps >= 1, "no step merged {before} segments");
    assert!(after < 4, "{after} segments left after {steps} steps");

    // The indexer merges what request transactions leave: one segment a delete.
    for id in &ids[5..10] {
        app.call(&u.token, "leads", "delete", Some(json!(id)), json!({}))
            .await
            .ok(200);
    }
    wait_until("the indexer merging the deletes' segments", async || {
        (search_segments(&app).await < 4).then_some(())
    })
    .await;
    let more = app
        .state
        .db
        .write(|c| Ok(genied::db::leads::merge_search_step(c, 16)?))
        .await
        .unwrap();
    assert!(!more, "a step found work after the indexer's");

    let found = |t: &'static str| searched(&app, &u, t);
    assert_eq!(found("lachance").await, vec![ids[10]]);
    assert_eq!(found("ashdown").await, vec![ids[11]]);
    for t in ["quill", "stroud", "mallory", "wexford"] {
        assert!(found(t).await.is_empty(), "{t}: deleted, still found");
    }
    app.fts_index_is_whole("leads_search").await;
}

/// The search index keeps only which trigrams a lead has (not where), so a search must still
/// find the whole term: a lead that has every trigram of it apart, or spread over two fields,
/// is not a match; case folds beyond ASCII as the index does.
#[tokio::test]
async fn search_matches_the_whole_term_not_its_trigrams_apart() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let g = insert_genie(&app, &u, "G").await;
    let whole = new_lead(&app, &u, json!({"agent_id": g, "name": "Jo Lovejoy"})).await;
    // "lov" and "ove" but not "love".
    new_lead(&app, &u, json!({"agent_id": g, "name": "Alov Bove"})).await;
    // "lov" in the name, "ove" in the email.
    new_lead(
        &app,
        &u,
        json!({"agent_id": g, "name": "Lov", "email": "ove@x.test"}),
    )
    .await;
    let unicode = new_lead(
        &app,
        &u,
        json!({"agent_id": g, "name": "Özlem Çelik", "email": "ozlem@x.test"}),
    )
    .await;
    let ids = |r: &Resp| -> Vec<i64> {
        r.ok(200)["leads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["id"].as_i64().unwrap())
            .collect()
    };
    let search = |t: &str| {
        app.call(
            &u.token,
            "leads",
            "all",
            None,
            json!({"filters": {"searchTerm": t}}),
        )
    };
    assert_eq!(
        ids(&search("love").await),
        vec![whole["id"].as_i64().unwrap()]
    );
    assert_eq!(
        ids(&search("LOVEJOY").await),
        vec![whole["id"].as_i64().unwrap()]
    );
    assert_eq!(
        ids(&search("özlem çel").await),
        vec![unicode["id"].as_i64().unwrap()],
        "case folds beyond ASCII"
    );
    let stats = app
        .call(
            &u.token,
            "leads",
            "stats",
            None,
            json!({"filters": {"searchTerm": "love"}}),
        )
        .await;
    assert_eq!(stats.ok(200)["stats"]["total"], 1, "{:?}", stats.data());

    // The same answers once the background indexer has taken the pending leads in (run here
    // by hand so the test does not wait for it), and after a rename and a delete of indexed
    // leads; the index stays consistent with the table.
    let index = || {
        app.state.db.write(|c| {
            while genied::db::leads::index_pending(c, 2)? > 0 {}
            Ok(())
        })
    };
    index().await.unwrap();
    let pending = || {
        app.state
            .db
            .read(|c| Ok(genied::db::leads::search_pending(c)?))
    };
    assert!(!pending().await.unwrap());
    assert_eq!(
        ids(&search("love").await),
        vec![whole["id"].as_i64().unwrap()]
    );
    assert_eq!(
        ids(&search("ÖZLEM").await),
        vec![unicode["id"].as_i64().unwrap()]
    );
    app.call(
        &u.token,
        "leads",
        "update",
        Some(whole["id"].clone()),
        json!({"name": "Jo Smithers"}),
    )
    .await
    .ok(200);
    // SQLite's FTS5 index is filled in by the background indexer; PostgreSQL's trigram
    // indexes follow each write, so nothing ever waits there.
    let pg = app.state.db.is_postgres();
    assert_eq!(
        pending().await.unwrap(),
        !pg,
        "a renamed lead waits to be indexed again (on SQLite)"
    );
    assert!(ids(&search("love").await).is_empty());
    assert_eq!(
        ids(&search("smither").await),
        vec![whole["id"].as_i64().unwrap()]
    );
    app.call(
        &u.token,
        "leads",
        "delete",
        Some(unicode["id"].clone()),
        json!({}),
    )
    .await
    .ok(200);
    index().await.unwrap();
    assert!(ids(&search("love").await).is_empty());
    assert_eq!(
        ids(&search("smither").await),
        vec![whole["id"].as_i64().unwrap()]
    );
    assert!(ids(&search("özlem").await).is_empty());
    app.fts_index_is_whole("leads_search").await;
}

async fn logs_of(app: &TestApp, u: &User, id: i64) -> Value {
    app.call(&u.token, "leads", "getLogs", Some(json!(id)), json!({}))
        .await
        .ok(200)["activities"]
        .clone()
}

/// A lead's creator is stored only when it is not the lead's user (V38): NULL otherwise. The
/// "created" entry names the creator all the same, and still does after the lead moves to
/// another user.
#[tokio::test]
async fn the_creator_is_stored_only_when_another_user_and_survives_a_move() {
    let app = TestApp::spawn().await;
    let (u, v, admin) = (
        app.standard().await,
        app.standard().await,
        app.admin().await,
    );
    let g = insert_genie(&app, &u, "G").await;
    let own = new_lead(&app, &u, json!({"agent_id": g, "name": "Own"})).await;
    let by_admin = new_lead(&app, &admin, json!({"agent_id": g, "name": "Admin's"})).await;
    let ids = [
        own["id"].as_i64().unwrap(),
        by_admin["id"].as_i64().unwrap(),
    ];
    let stored = |app: &TestApp| {
        let db = app.state.db.clone();
        async move {
            db.read(move |c| {
                let mut st =
                    c.prepare("SELECT created_by FROM leads WHERE id IN (?1, ?2) ORDER BY id")?;
                Ok(st
                    .query_map(ids, |r| r.get(0))?
                    .collect::<rusqlite::Result<Vec<Option<String>>>>()?)
            })
            .await
            .unwrap()
        }
    };
    assert_eq!(stored(&app).await, [None, Some(admin.id.clone())]);
    let creator = |logs: Value| logs.as_array().unwrap().last().unwrap()["user_id"].clone();
    assert_eq!(creator(logs_of(&app, &u, ids[0]).await), json!(u.id));
    assert_eq!(creator(logs_of(&app, &u, ids[1]).await), json!(admin.id));

    // Both leads move to v: each "created" entry still names who created the lead.
    for id in ids {
        app.call(
            &admin.token,
            "leads",
            "update",
            Some(json!(id)),
            json!({"user_id": v.id}),
        )
        .await
        .ok(200);
    }
    assert_eq!(
        stored(&app).await,
        [Some(u.id.clone()), Some(admin.id.clone())]
    );
    for (id, by) in [(ids[0], &u.id), (ids[1], &admin.id)] {
        let logs = logs_of(&app, &admin, id).await;
        assert_eq!(creator(logs.clone()), json!(by), "{logs}");
        assert_eq!(
            logs.as_array().unwrap().last().unwrap()["type"],
            json!("created")
        );
    }
}

/// The "created" entry is kept on the lead row (created_log_id, created_by) and answered as a
/// stored one was: its id from the log's own sequence, the creator (not the lead's user), the
/// lead's time; a database with stored entries answers the same after the migration that
/// folds them (SQLite: the test puts the previous schema back and migrates again).
#[tokio::test]
async fn the_created_entry_answers_from_the_lead_row_and_survives_its_migration() {
    let app = TestApp::spawn().await;
    let (u, admin) = (app.standard().await, app.admin().await);
    let g = insert_genie(&app, &u, "G").await;
    let l1 = new_lead(&app, &u, json!({"agent_id": g, "name": "One"})).await;
    let id1 = l1["id"].as_i64().unwrap();
    for i in 0..2 {
        app.call(
            &u.token,
            "leads",
            "log",
            Some(json!(id1)),
            json!({"type": "call", "description": format!("call {i}")}),
        )
        .await
        .ok(201);
    }
    // An admin creates under u's genie: the lead is u's, its creator the admin.
    let l2 = new_lead(&app, &admin, json!({"agent_id": g, "name": "Two"})).await;
    let id2 = l2["id"].as_i64().unwrap();
    assert_eq!(l2["user_id"], json!(u.id));
    let l3 = new_lead(&app, &u, json!({"agent_id": g, "name": "Three"})).await;
    let id3 = l3["id"].as_i64().unwrap();
    let logged = app
        .call(
            &u.token,
            "leads",
            "log",
            Some(json!(id3)),
            json!({"type": "note"}),
        )
        .await
        .ok(201)["activity"]
        .clone();

    let before = [
        logs_of(&app, &u, id1).await,
        logs_of(&app, &u, id2).await,
        logs_of(&app, &u, id3).await,
    ];
    let created = |logs: &Value| logs.as_array().unwrap().last().unwrap().clone();
    for (logs, lead, by) in [
        (&before[0], &l1, &u.id),
        (&before[1], &l2, &admin.id),
        (&before[2], &l3, &u.id),
    ] {
        let c = created(logs);
        let keys: Vec<&String> = c.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "created_at",
                "description",
                "id",
                "lead_id",
                "metadata",
                "type",
                "user_id"
            ]
        );
        assert_eq!(c["type"], json!("created"));
        assert_eq!(c["description"], json!("Lead created"));
        assert_eq!(c["metadata"], Value::Null);
        assert_eq!(c["lead_id"], lead["id"]);
        assert_eq!(c["user_id"], json!(by));
        assert_eq!(c["created_at"], lead["created_at"]);
    }
    // Ids come from the log's one sequence, in the order things happened: each lead's
    // "created" entry precedes its later entries, and the next lead's follows them.
    let id_of = |v: &Value| v["id"].as_i64().unwrap();
    let l1_logs = before[0].as_array().unwrap();
    assert!(
        l1_logs.windows(2).all(|w| id_of(&w[0]) > id_of(&w[1])),
        "{l1_logs:?}"
    );
    assert!(id_of(&created(&before[1])) > id_of(&l1_logs[0]));
    assert!(id_of(&created(&before[2])) > id_of(&created(&before[1])));
    assert!(id_of(&logged) > id_of(&created(&before[2])));
    assert_eq!(before[2][0], logged);

    if app.state.config.postgres_url().is_some() {
        return;
    }
    // The previous schema: the entries stored, the two columns gone, the migration (and the
    // ones after it) unapplied.
    // Lead 3's entry is a millisecond off its lead (the create read the clock twice): the
    // migration must leave that one stored.
    let mut app = app;
    app.shutdown().await;
    let path = app.state.config.db_path();
    let off = "2000-01-01T00:00:00.000Z";
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        // The lead's user is stored as its key (V41); the log's user as text.
        genied::db::keys::register_functions(&c).unwrap();
        c.execute_batch(&format!(
            "PRAGMA busy_timeout = 10000; BEGIN;
             INSERT INTO lead_activities (id, lead_id, user_id, type, description, metadata, created_at)
               SELECT created_log_id, id, COALESCE(created_by, genied_key_text(user_id)), 'created', 'Lead created', NULL,
                      CASE WHEN id = {id3} THEN '{off}' ELSE created_at END
               FROM leads WHERE created_log_id IS NOT NULL;
             ALTER TABLE leads DROP COLUMN created_log_id;
             ALTER TABLE leads DROP COLUMN created_by;
             DELETE FROM refinery_schema_history WHERE name = 'lead_created_entry';
             -- V34 to V38, which came after, unapplied too (refinery refuses a gap).
             DROP TRIGGER lead_owner_counts_ai; DROP TRIGGER lead_owner_counts_ad;
             DROP TRIGGER lead_owner_counts_au; DROP TRIGGER genies_delete_leads;
             DROP TABLE lead_owner_counts;
             DROP TRIGGER conversation_counts_ai; DROP TRIGGER conversation_counts_ad;
             DROP TRIGGER conversation_counts_au; DROP TABLE conversation_counts;
             DELETE FROM refinery_schema_history WHERE name IN ('lead_owner_counts', 'conversation_counts');
             -- V36 and after: UNAPPLY_DOCUMENT_SEARCH_READERS.
             {}
             COMMIT;",
            crate::documents::UNAPPLY_DOCUMENT_SEARCH_READERS
        ))
        .unwrap();
        assert_eq!(
            c.query_row("SELECT COUNT(*) FROM lead_activities", [], |r| r
                .get::<_, i64>(0))
                .unwrap(),
            6
        );
    }
    let app = app.restart().await;
    let mut expected = before.clone();
    let last = expected[2].as_array().unwrap().len() - 1;
    expected[2][last]["created_at"] = json!(off);
    assert_eq!(logs_of(&app, &u, id1).await, expected[0]);
    assert_eq!(logs_of(&app, &u, id2).await, expected[1]);
    assert_eq!(logs_of(&app, &u, id3).await, expected[2]);
    // Two entries folded into their leads, lead 3's kept; nothing lost or doubled.
    assert_eq!(app.count("lead_activities").await, 4);
    assert_eq!(app.count(LOG_ENTRIES).await, 6);
    // New ids still come after every id handed out before.
    let next = app
        .call(
            &u.token,
            "leads",
            "log",
            Some(json!(id2)),
            json!({"type": "x"}),
        )
        .await
        .ok(201)["activity"]["id"]
        .as_i64()
        .unwrap();
    assert!(next > id_of(&logged));
    let l4 = new_lead(&app, &u, json!({"agent_id": g})).await;
    let l4_logs = logs_of(&app, &u, l4["id"].as_i64().unwrap()).await;
    assert!(id_of(&created(&l4_logs)) > next);
}

/// A user's own scope (leads of the genies they own or are assigned to) counted row by row:
/// the oracle for the maintained counts.
async fn counted(app: &TestApp, user: &User) -> Value {
    let u = user.id.clone();
    let rows: Vec<(String, i64)> = app
        .state
        .db
        .read(move |c| {
            let mut st = c.prepare_cached(
                "SELECT COALESCE(l.status, ''), COUNT(*) FROM leads l
                 WHERE l.agent_id IN (SELECT key FROM genies WHERE user_id = ?1
                                      UNION SELECT g.key FROM genie_assignments a
                                            JOIN genies g ON g.id = a.genie_id WHERE a.user_id = ?1)
                 GROUP BY 1",
            )?;
            let rows = st
                .query_map([&u], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
        .await
        .unwrap();
    let of = |s: &str| rows.iter().find(|r| r.0 == s).map_or(0, |r| r.1);
    json!({"total": rows.iter().map(|r| r.1).sum::<i64>(),
           "by_status": {"new": of("new"), "contacted": of("contacted"),
                         "qualified": of("qualified"), "converted": of("converted")}})
}

/// `stats`, and the `all` counts by status, of the user's own scope agree with `counted`.
async fn check_counts(app: &TestApp, user: &User, step: &str) {
    let want = counted(app, user).await;
    let got = app
        .call(&user.token, "leads", "stats", None, json!({}))
        .await;
    assert_eq!(got.ok(200)["stats"], want, "stats after {step}");
    let all = app
        .call(&user.token, "leads", "all", None, json!({"limit": 1}))
        .await;
    assert_eq!(all.ok(200)["count"], want["total"], "count after {step}");
    for s in ["new", "converted"] {
        let all = app
            .call(
                &user.token,
                "leads",
                "all",
                None,
                json!({"filters": {"status": s}, "limit": 500}),
            )
            .await;
        let body = all.ok(200);
        assert_eq!(
            body["count"], want["by_status"][s],
            "count by {s} after {step}"
        );
        assert_eq!(
            body["leads"].as_array().unwrap().len() as i64,
            want["by_status"][s].as_i64().unwrap(),
            "the page by {s} after {step}"
        );
    }
}

#[tokio::test]
async fn a_users_own_counts_follow_leads_across_owners_assignments_and_deletions() {
    let app = TestApp::spawn().await;
    let (u, other, admin) = (
        app.standard().await,
        app.standard().await,
        app.admin().await,
    );
    let g1 = insert_genie(&app, &u, "G1").await;
    let g2 = insert_genie(&app, &u, "G2").await;
    let og = insert_genie(&app, &other, "OG").await;
    let og2 = insert_genie(&app, &other, "OG2").await;
    assign(&app, &og, &u).await;
    let mut mine = Vec::new();
    for (g, s) in [
        (&g1, json!("new")),
        (&g1, json!("contacted")),
        (&g2, json!("qualified")),
        (&g2, json!(null)),
        (&g2, json!("new")),
    ] {
        mine.push(new_lead(&app, &u, json!({"agent_id": g, "status": s})).await["id"].clone());
    }
    for (g, s) in [(&og, "new"), (&og, "converted"), (&og2, "new")] {
        new_lead(&app, &other, json!({"agent_id": g, "status": s})).await;
    }
    // An admin's lead under another user's genie, for u.
    new_lead(
        &app,
        &admin,
        json!({"agent_id": og, "user_id": u.id, "status": "converted"}),
    )
    .await;
    for who in [&u, &other] {
        check_counts(&app, who, "the creates").await;
    }
    // An admin moves one of u's leads to a genie of other's that u is not assigned to.
    app.call(
        &admin.token,
        "leads",
        "update",
        Some(mine[0].clone()),
        json!({"agent_id": og2, "status": "converted"}),
    )
    .await
    .ok(200);
    // A status change, and a delete.
    app.call(
        &u.token,
        "leads",
        "update",
        Some(mine[2].clone()),
        json!({"status": "new"}),
    )
    .await
    .ok(200);
    app.call(
        &u.token,
        "leads",
        "delete",
        Some(mine[1].clone()),
        json!({}),
    )
    .await
    .ok(200);
    for who in [&u, &other] {
        check_counts(&app, who, "moves, updates and a delete").await;
    }
    // Genies deleted with their leads: one u is assigned to, one u owns.
    app.call(&other.token, "genies", "delete", Some(json!(og)), json!({}))
        .await
        .ok(200);
    app.call(&u.token, "genies", "delete", Some(json!(g2)), json!({}))
        .await
        .ok(200);
    for who in [&u, &other] {
        check_counts(&app, who, "the genies' deletes").await;
    }
    assert_eq!(
        counted(&app, &u).await,
        json!({"total": 0, "by_status": {"new": 0, "contacted": 0, "qualified": 0, "converted": 0}}),
        "u's remaining genie has no leads left"
    );
}

#[tokio::test]
async fn a_user_with_many_genies_lists_and_counts_the_same_leads() {
    // Past db::leads' GENIE_SET_MAX (500) genies, the listing asks each row whether its
    // genie is the user's instead of testing it against the set of their genies.
    let app = TestApp::spawn().await;
    let (u, other) = (app.standard().await, app.standard().await);
    let g = insert_genie(&app, &u, "Busy").await;
    let og = insert_genie(&app, &other, "Shared").await;
    let og2 = insert_genie(&app, &other, "Not shared").await;
    assign(&app, &og, &u).await;
    let uid = u.id.clone();
    app.state
        .db
        .write(move |c| {
            let at = genied::db::now();
            for i in 0..510 {
                c.execute(
                    "INSERT INTO genies (id, user_id, name, name_lower, llm_model, created_at, updated_at)
                     VALUES (?1, ?2, ?3, lower(?3), 'gpt-4o-mini', ?4, ?4)",
                    rusqlite::params![genied::db::new_id(), uid, format!("Idle {i}"), at],
                )?;
            }
            Ok(())
        })
        .await
        .unwrap();
    for (who, genie, status) in [
        (&u, &g, "new"),
        (&u, &g, "converted"),
        (&u, &g, "new"),
        (&other, &og, "new"),
        (&other, &og, "converted"),
        (&other, &og2, "new"),
    ] {
        new_lead(&app, who, json!({"agent_id": genie, "status": status})).await;
    }
    for who in [&u, &other] {
        check_counts(&app, who, "many genies").await;
    }
    let mine = app
        .call(&u.token, "leads", "all", None, json!({"limit": 500}))
        .await;
    assert_eq!(mine.ok(200)["leads"].as_array().unwrap().len(), 5);
}

/// A stored time in milliseconds (`x`) as the text the service wrote before V40, in SQL.
macro_rules! ms_as_text {
    (sqlite, $x:literal) => {
        concat!(
            "strftime('%Y-%m-%dT%H:%M:%S', ",
            $x,
            " / 1000, 'unixepoch') || '.' || printf('%03d', ",
            $x,
            " % 1000) || 'Z'"
        )
    };
    (postgres, $x:literal) => {
        concat!(
            "to_char(to_timestamp(",
            $x,
            " / 1000) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS') \
             || '.' || lpad((",
            $x,
            " % 1000)::text, 3, '0') || 'Z'"
        )
    };
}

/// A lead's times as they were stored before migration V40 (PostgreSQL V17): RFC 3339 text
/// columns. Each engine's SQL turns the millisecond columns back into text and unapplies the
/// migration and those after it, which run again on the next start. `{aged}` is a lead whose
/// time is then written in another form of the same instant (an offset instead of `Z`),
/// which the migration must read as the same millisecond.
const UNDO_LEAD_TIMES_SQLITE: &str = concat!(
    "DROP INDEX leads_user_time; DROP INDEX leads_agent_time; DROP INDEX leads_time;
     DROP INDEX leads_status_time; DROP INDEX lead_activities_lead;
     DROP TRIGGER lead_rollup_ai; DROP TRIGGER lead_rollup_ad; DROP TRIGGER lead_rollup_au;
     ALTER TABLE leads ADD COLUMN created_text TEXT NOT NULL DEFAULT '';
     ALTER TABLE leads ADD COLUMN updated_text TEXT;
     UPDATE leads SET created_text = ",
    ms_as_text!(sqlite, "created_at"),
    ", updated_text = CASE WHEN updated_at IS NULL THEN NULL ELSE ",
    ms_as_text!(sqlite, "updated_at"),
    " END;
     ALTER TABLE leads DROP COLUMN created_at; ALTER TABLE leads DROP COLUMN updated_at;
     ALTER TABLE leads RENAME COLUMN created_text TO created_at;
     ALTER TABLE leads RENAME COLUMN updated_text TO updated_at;
     ALTER TABLE lead_activities ADD COLUMN created_text TEXT NOT NULL DEFAULT '';
     UPDATE lead_activities SET created_text = ",
    ms_as_text!(sqlite, "created_at"),
    ";
     ALTER TABLE lead_activities DROP COLUMN created_at;
     ALTER TABLE lead_activities RENAME COLUMN created_text TO created_at;
     CREATE INDEX leads_user_time ON leads(user_id, created_at);
     CREATE INDEX leads_agent_time ON leads(agent_id, created_at);
     CREATE INDEX leads_time ON leads(created_at);
     CREATE INDEX leads_status_time ON leads(status, created_at);
     CREATE INDEX lead_activities_lead ON lead_activities(lead_id, created_at);
     UPDATE leads SET created_at = replace(created_at, 'Z', '+00:00') WHERE id = {aged};
     -- Stand-ins for the rollup triggers, which V40 drops first and makes again.
     CREATE TRIGGER lead_rollup_ai AFTER INSERT ON leads BEGIN SELECT 1; END;
     CREATE TRIGGER lead_rollup_ad AFTER DELETE ON leads BEGIN SELECT 1; END;
     CREATE TRIGGER lead_rollup_au AFTER UPDATE ON leads BEGIN SELECT 1; END;
     DELETE FROM refinery_schema_history WHERE version >= 40;"
);
const UNDO_LEAD_TIMES_POSTGRES: &str = concat!(
    "DROP TRIGGER leads_counted_au ON leads;
     ALTER TABLE leads ALTER COLUMN created_at TYPE text USING ",
    ms_as_text!(postgres, "created_at"),
    ", ALTER COLUMN updated_at TYPE text USING ",
    ms_as_text!(postgres, "updated_at"),
    ";
     ALTER TABLE lead_activities ALTER COLUMN created_at TYPE text USING ",
    ms_as_text!(postgres, "created_at"),
    ";
     UPDATE leads SET created_at = replace(created_at, 'Z', '+00:00') WHERE id = {aged};
     CREATE TRIGGER leads_counted_au AFTER UPDATE OF agent_id, user_id, status, created_at ON leads
         FOR EACH ROW EXECUTE FUNCTION genied_leads_counted();
     DELETE FROM refinery_schema_history WHERE version >= 17;"
);

/// A lead's times are stored as milliseconds (V40): 6 bytes instead of 24 in the row and in
/// each time-ordered index. Every answer that shows or orders by them is the one the text
/// columns gave: the leads, their order and cursor pages, a date filter, the activity log,
/// `query_data`'s view; a database with text times answers the same after the migration
/// (the test puts the text columns back and migrates again, on both engines); and the
/// hourly rollup of a lead made afterwards is keyed by the hour of its time.
#[tokio::test]
async fn lead_times_in_milliseconds_answer_as_text_did_and_survive_their_migration() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let g = insert_genie(&app, &u, "G").await;
    let mut ids = Vec::new();
    for name in ["One", "Two", "Three"] {
        let l = new_lead(&app, &u, json!({"agent_id": g, "name": name})).await;
        ids.push(l["id"].as_i64().unwrap());
    }
    app.call(
        &u.token,
        "leads",
        "update",
        Some(json!(ids[0])),
        json!({"status": "contacted"}),
    )
    .await
    .ok(200);
    app.call(
        &u.token,
        "leads",
        "log",
        Some(json!(ids[1])),
        json!({"type": "call", "description": "first call"}),
    )
    .await
    .ok(201);

    async fn answers(app: &TestApp, u: &User, ids: &[i64]) -> Value {
        let mut out = json!({});
        for id in ids {
            let got = app
                .call(&u.token, "leads", "get", Some(json!(id)), json!({}))
                .await;
            out[format!("get {id}")] = got.ok(200)["lead"].clone();
            out[format!("logs {id}")] = logs_of(app, u, *id).await;
        }
        let all = app
            .call(&u.token, "leads", "all", None, json!({"limit": 50}))
            .await;
        out["all"] = all.ok(200).clone();
        let week = json!({"filters": {"dateRange": "7d"}, "limit": 50});
        let week = app.call(&u.token, "leads", "all", None, week).await;
        out["all 7d"] = week.ok(200).clone();
        // Cursor pages of one lead each, to the end.
        let mut pages = Vec::new();
        let mut data = json!({"limit": 1});
        loop {
            let page = app.call(&u.token, "leads", "all", None, data.clone()).await;
            let page = page.ok(200).clone();
            let next = page["nextCursor"].clone();
            pages.push(page["leads"].clone());
            if next.is_null() || pages.len() > 10 {
                break;
            }
            data = json!({"limit": 1, "cursor": next});
        }
        out["pages"] = json!(pages);
        out["stats"] = app
            .call(&u.token, "leads", "stats", None, json!({}))
            .await
            .ok(200)
            .clone();
        out
    }
    let before = answers(&app, &u, &ids).await;
    assert_eq!(before["pages"].as_array().unwrap().len(), 3, "{before}");
    assert_eq!(before["all 7d"]["count"], json!(3), "{before}");
    let updated = &before[format!("get {}", ids[0])];
    assert_ne!(updated["updated_at"], updated["created_at"], "{updated}");

    // Stored as integers, the API's text to the millisecond.
    let stored: Vec<(i64, i64, i64)> = app
        .state
        .db
        .read(|c| {
            let mut st = c.prepare("SELECT id, created_at, updated_at FROM leads ORDER BY id")?;
            Ok(st
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                .collect::<rusqlite::Result<Vec<_>>>()?)
        })
        .await
        .unwrap();
    let ms = |v: &Value| {
        chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap())
            .unwrap()
            .timestamp_millis()
    };
    for (id, created, updated) in &stored {
        let lead = &before[format!("get {id}")];
        assert_eq!(
            (ms(&lead["created_at"]), ms(&lead["updated_at"])),
            (*created, *updated)
        );
    }
    let entry: i64 = app
        .state
        .db
        .read(|c| {
            let sql = "SELECT created_at FROM lead_activities WHERE type = 'call'";
            Ok(c.query_row(sql, [], |r| r.get(0))?)
        })
        .await
        .unwrap();
    assert_eq!(
        entry,
        ms(&before[format!("logs {}", ids[1])][0]["created_at"])
    );

    // Back to text columns, one time written with an offset, the migration unapplied.
    let undo = if app.state.config.postgres_url().is_some() {
        UNDO_LEAD_TIMES_POSTGRES
    } else {
        UNDO_LEAD_TIMES_SQLITE
    };
    let undo = undo.replace("{aged}", &ids[2].to_string());
    app.state
        .db
        .write(move |c| Ok(c.execute_batch(&undo)?))
        .await
        .unwrap();
    let kinds: Vec<String> = app
        .state
        .db
        .read(|c| {
            let mut st = c.prepare("SELECT created_at FROM leads ORDER BY id")?;
            Ok(st
                .query_map([], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<_>>>()?)
        })
        .await
        .unwrap();
    assert!(kinds[2].ends_with("+00:00"), "{kinds:?}");
    let app = app.restart().await;
    assert_eq!(answers(&app, &u, &ids).await, before);

    // A lead made afterwards: newest first, and counted in the hour of its time.
    let l4 = new_lead(&app, &u, json!({"agent_id": g, "name": "Four"})).await;
    let all = app
        .call(&u.token, "leads", "all", None, json!({"limit": 1}))
        .await;
    assert_eq!(all.ok(200)["leads"][0]["id"], l4["id"]);
    let hour = l4["created_at"].as_str().unwrap()[..13].to_string();
    let day = hour[..10].to_string();
    let (hour_of_l4, day_of_l4) = (hour.clone(), day.clone());
    let uid = u.id.clone();
    let (in_hour, in_day): (i64, i64) = app
        .state
        .db
        .read(move |c| {
            Ok(c.query_row(
                // The rollups keep the user's key (V41).
                "SELECT (SELECT SUM(n) FROM lead_rollup WHERE user_id = genied_key(?1) AND hour = ?2),
                        (SELECT SUM(n) FROM lead_rollup_daily WHERE user_id = genied_key(?1) AND day = ?3)",
                genied::db::sql::params![uid, hour, day],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?)
        })
        .await
        .unwrap();
    // Every lead is counted in the hour and day its time names (three made under the first
    // run of the migration's triggers, one after the second).
    let times: Vec<String> = ids
        .iter()
        .map(|id| {
            before[format!("get {id}")]["created_at"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .chain([l4["created_at"].as_str().unwrap().to_string()])
        .collect();
    let of = |p: &str| times.iter().filter(|t| t.starts_with(p)).count() as i64;
    assert_eq!((in_hour, in_day), (of(&hour_of_l4), of(&day_of_l4)));
    let rollup_total: i64 = app
        .state
        .db
        .read(|c| Ok(c.query_row("SELECT SUM(n) FROM lead_rollup", [], |r| r.get(0))?))
        .await
        .unwrap();
    assert_eq!(rollup_total, 4);
}

/// The keys of a lead's genie and user as they were stored before migration V41 (PostgreSQL
/// V18): the ids' text. Each engine's SQL turns the stored keys back into text (the triggers
/// that would count the change dropped first; V41 and V18 make them again) and unapplies the
/// migration, which runs again on the next start over text keys, as on a database that never
/// had it.
const UNDO_LEAD_KEYS_SQLITE: &str = "
     DROP TRIGGER lead_counts_au; DROP TRIGGER lead_owner_counts_au; DROP TRIGGER lead_rollup_au;
     UPDATE leads SET agent_id = genied_key_text(agent_id), user_id = genied_key_text(user_id);
     UPDATE lead_status_counts SET agent_id = genied_key_text(agent_id), user_id = genied_key_text(user_id);
     UPDATE lead_rollup SET agent_id = genied_key_text(agent_id), user_id = genied_key_text(user_id);
     UPDATE lead_rollup_daily SET agent_id = genied_key_text(agent_id), user_id = genied_key_text(user_id);
     DELETE FROM lead_owner_counts;
     DELETE FROM refinery_schema_history WHERE version >= 41;";
pub const UNDO_LEAD_KEYS_POSTGRES: &str = "
     DROP TRIGGER leads_counted_au ON leads; DROP TRIGGER leads_owner_counted_au ON leads;
     ALTER TABLE leads DROP CONSTRAINT leads_agent_id_fkey, DROP CONSTRAINT leads_user_id_fkey;
     ALTER TABLE leads ALTER COLUMN agent_id TYPE text USING genied_key_text(agent_id),
                       ALTER COLUMN user_id TYPE text USING genied_key_text(user_id);
     ALTER TABLE leads ADD FOREIGN KEY (agent_id) REFERENCES genies(id) ON DELETE CASCADE,
                       ADD FOREIGN KEY (user_id) REFERENCES users(id) ON DELETE CASCADE;
     CREATE TRIGGER leads_counted_au AFTER UPDATE OF agent_id, user_id, status, created_at ON leads
         FOR EACH ROW EXECUTE FUNCTION genied_leads_counted();
     CREATE TRIGGER leads_owner_counted_au AFTER UPDATE OF agent_id, status ON leads
         FOR EACH ROW EXECUTE FUNCTION genied_lead_owner_counted();
     ALTER TABLE lead_status_counts ALTER COLUMN agent_id TYPE text USING genied_key_text(agent_id),
                                    ALTER COLUMN user_id TYPE text USING genied_key_text(user_id);
     ALTER TABLE lead_rollup ALTER COLUMN agent_id TYPE text USING genied_key_text(agent_id),
                             ALTER COLUMN user_id TYPE text USING genied_key_text(user_id);
     ALTER TABLE lead_rollup_daily ALTER COLUMN agent_id TYPE text USING genied_key_text(agent_id),
                                   ALTER COLUMN user_id TYPE text USING genied_key_text(user_id);
     DELETE FROM lead_owner_counts;
     DELETE FROM refinery_schema_history WHERE version >= 18;";

/// How the leads' keys are stored: `(typeof or pg type, length)` of each distinct form.
async fn stored_keys(app: &TestApp) -> Vec<(String, i64)> {
    let pg = app.state.config.postgres_url().is_some();
    app.state
        .db
        .read(move |c| {
            let sql = if pg {
                "SELECT DISTINCT pg_typeof(agent_id)::text, octet_length(agent_id)::bigint FROM leads
                 UNION SELECT DISTINCT pg_typeof(user_id)::text, octet_length(user_id)::bigint FROM leads"
            } else {
                "SELECT DISTINCT typeof(agent_id), length(agent_id) FROM leads
                 UNION SELECT DISTINCT typeof(user_id), length(user_id) FROM leads"
            };
            let mut st = c.prepare(sql)?;
            Ok(st
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<rusqlite::Result<Vec<_>>>()?)
        })
        .await
        .unwrap()
}

/// A lead keeps its genie's and user's ids as 16-byte keys (V41, PostgreSQL V18), about 80
/// bytes a lead fewer. What the API answers is what the text ids gave: leads, pages, stats
/// (own and assigned genies), the activity log with its "created" entry, notes, analytics; a
/// database with text keys answers the same after the migration, which keeps every lead's
/// notes and log (the rebuild of `leads` must not cascade) and never gives a deleted lead's id
/// again; and the foreign keys still cascade: a genie's and a user's deletion take their leads
/// and their counts.
#[tokio::test]
async fn lead_keys_in_bytes_answer_as_text_did_and_survive_their_migration() {
    let app = TestApp::spawn().await;
    let admin = app.admin().await;
    let u = app.standard().await;
    let other = app.standard().await;
    let g = insert_genie(&app, &u, "G").await;
    let og = insert_genie(&app, &other, "Other's").await;
    let mut ids = Vec::new();
    for name in ["One", "Two", "Three"] {
        let l = new_lead(&app, &u, json!({"agent_id": g, "name": name})).await;
        ids.push(l["id"].as_i64().unwrap());
    }
    // A lead the admin made for `u` (its creator is not its user), and one of `other`'s.
    let by_admin = new_lead(
        &app,
        &admin,
        json!({"agent_id": g, "user_id": u.id, "name": "Four"}),
    )
    .await;
    ids.push(by_admin["id"].as_i64().unwrap());
    let others = new_lead(&app, &other, json!({"agent_id": og, "name": "Theirs"})).await;
    app.call(
        &u.token,
        "genies",
        "assign",
        Some(json!(g)),
        json!({"userId": other.id}),
    )
    .await
    .ok(200);
    app.call(
        &u.token,
        "leads",
        "update",
        Some(json!(ids[0])),
        json!({"status": "qualified"}),
    )
    .await
    .ok(200);
    app.call(
        &u.token,
        "leads",
        "log",
        Some(json!(ids[1])),
        json!({"type": "call", "description": "first call"}),
    )
    .await
    .ok(201);
    app.call(
        &u.token,
        "lead-notes",
        "create",
        None,
        json!({"leadId": ids[1], "content": "call back on Monday"}),
    )
    .await
    .ok(201);
    // The newest lead goes: its id must never come back.
    let newest = new_lead(&app, &u, json!({"agent_id": g, "name": "Gone"})).await;
    let newest = newest["id"].as_i64().unwrap();
    app.call(&u.token, "leads", "delete", Some(json!(newest)), json!({}))
        .await
        .ok(200);

    async fn answers(app: &TestApp, u: &User, ids: &[i64]) -> Value {
        let mut out = json!({});
        for id in ids {
            let got = app
                .call(&u.token, "leads", "get", Some(json!(id)), json!({}))
                .await;
            out[format!("get {id}")] = got.ok(200)["lead"].clone();
            out[format!("logs {id}")] = logs_of(app, u, *id).await;
        }
        for data in [
            json!({"limit": 50}),
            json!({"limit": 50, "filters": {"status": "new"}}),
            json!({"limit": 50, "filters": {"priority": "medium"}}),
        ] {
            let all = app.call(&u.token, "leads", "all", None, data.clone()).await;
            out[format!("all {data}")] = all.ok(200).clone();
        }
        out["stats"] = app
            .call(&u.token, "leads", "stats", None, json!({}))
            .await
            .ok(200)
            .clone();
        out["notes"] = app
            .call(
                &u.token,
                "lead-notes",
                "all",
                None,
                json!({"leadId": ids[1]}),
            )
            .await
            .ok(200)
            .clone();
        out["analytics"] = app
            .call(
                &u.token,
                "analytics",
                "overview",
                None,
                json!({"dateRange": "7d"}),
            )
            .await
            .ok(200)
            .clone();
        out
    }
    let before = answers(&app, &u, &ids).await;
    assert_eq!(before["stats"]["stats"]["total"], json!(4), "{before}");
    let four = &before[format!("get {}", ids[3])];
    assert_eq!(
        (&four["user_id"], &four["agent_id"]),
        (&json!(u.id), &json!(g))
    );
    let created = &before[format!("logs {}", ids[3])];
    let created = created.as_array().unwrap().last().unwrap();
    assert_eq!(created["user_id"], json!(admin.id), "{created}");
    // A user assigned to a genie counts and lists its leads with their own.
    assert_eq!(other_sees_assigned(&app, &other).await, (5, 5));

    let log_entries = app.count("lead_activities").await;
    assert!(log_entries >= 1);
    let pg = app.state.config.postgres_url().is_some();
    let bytes = if pg { "bytea" } else { "blob" };
    assert_eq!(stored_keys(&app).await, vec![(bytes.to_string(), 16)]);

    // Back to text keys, the migration unapplied; the next start runs it again.
    let undo = if pg {
        UNDO_LEAD_KEYS_POSTGRES
    } else {
        UNDO_LEAD_KEYS_SQLITE
    };
    if pg {
        app.state
            .db
            .write(move |c| Ok(c.execute_batch(undo)?))
            .await
            .unwrap();
    } else {
        // On a connection of its own: the rewrite needs foreign keys off, as the migration
        // runner has them, which a transaction cannot change.
        let c = rusqlite::Connection::open(app.dir.path().join("genied.db")).unwrap();
        genied::db::keys::register_functions(&c).unwrap();
        c.execute_batch(&format!(
            "PRAGMA busy_timeout = 10000; PRAGMA foreign_keys = OFF; BEGIN IMMEDIATE; {undo} COMMIT;"
        ))
        .unwrap();
    }
    assert_eq!(stored_keys(&app).await, vec![("text".to_string(), 36)]);
    let app = app.restart().await;
    assert_eq!(stored_keys(&app).await, vec![(bytes.to_string(), 16)]);
    assert_eq!(answers(&app, &u, &ids).await, before);
    assert_eq!(other_sees_assigned(&app, &other).await, (5, 5));
    assert_eq!(app.count("lead_notes").await, 1);
    assert_eq!(app.count("lead_activities").await, log_entries);

    // A new lead gets an id past the deleted newest one.
    let next = new_lead(&app, &u, json!({"agent_id": g, "name": "Next"})).await;
    assert!(
        next["id"].as_i64().unwrap() > newest,
        "{next} after {newest}"
    );

    // Deleting a user takes their leads by the user's key: their own genie's, and one on
    // `u`'s genie (the foreign key's cascade, not the genie's trigger).
    let on_g = new_lead(
        &app,
        &admin,
        json!({"agent_id": g, "user_id": other.id, "name": "Other's on G"}),
    )
    .await;
    let leads_before = app.count("leads").await;
    app.call(
        &admin.token,
        "users",
        "delete",
        Some(json!(other.id)),
        json!({}),
    )
    .await
    .ok(200);
    assert_eq!(app.count("leads").await, leads_before - 2);
    for gone in [&others["id"], &on_g["id"]] {
        app.call(&admin.token, "leads", "get", Some(gone.clone()), json!({}))
            .await
            .err(404, "NOT_FOUND");
    }
    // Deleting the genie takes its leads, their notes and log, and their counts.
    app.call(&u.token, "genies", "delete", Some(json!(g)), json!({}))
        .await
        .ok(200);
    let stats = app.call(&u.token, "leads", "stats", None, json!({})).await;
    assert_eq!(stats.ok(200)["stats"]["total"], json!(0));
    assert_eq!(app.count("leads").await, 0);
    assert_eq!(app.count("lead_notes").await, 0);
    assert_eq!(app.count("lead_activities").await, 0);
    let left: f64 = app
        .state
        .db
        .read(|c| {
            let sql = "SELECT (SELECT TOTAL(n) FROM lead_status_counts)
                            + (SELECT TOTAL(n) FROM lead_owner_counts)
                            + (SELECT TOTAL(n) FROM lead_rollup)";
            Ok(c.query_row(sql, [], |r| r.get(0))?)
        })
        .await
        .unwrap();
    assert_eq!(left, 0.0);
}

/// How many leads `other` counts and lists (their own genie's and the one assigned to them).
async fn other_sees_assigned(app: &TestApp, other: &User) -> (i64, i64) {
    let stats = app
        .call(&other.token, "leads", "stats", None, json!({}))
        .await;
    let all = app
        .call(&other.token, "leads", "all", None, json!({"limit": 50}))
        .await;
    (
        stats.ok(200)["stats"]["total"].as_i64().unwrap(),
        all.ok(200)["leads"].as_array().unwrap().len() as i64,
    )
}
