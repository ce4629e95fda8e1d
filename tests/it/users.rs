//! The admin `users` resource (#21): list, invite (the account is created on acceptance,
//! with a password that passes the policy), disable (refused at sign-in and on every request,
//! API keys included), role change, delete with everything the user owned; team invitations
//! to an address with no account create it too. Non-admins are refused.

use crate::accounts::{GOOD, GOOD2, login, mails, post, token_in, user_with_password};
use crate::common::fakes::smtp::FakeSmtp;
use crate::common::*;
use genied::db::users::Role;
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn invitation_creates_the_account_on_acceptance() {
    let smtp = FakeSmtp::start().await;
    let app = TestApp::spawn_with(|c| {
        c.smtp_url = Some(genied::config::Secret(smtp.url.clone()));
    })
    .await;
    let admin = app.admin().await;
    let std = app.standard().await;
    app.call(
        &std.token,
        "users",
        "invite",
        None,
        json!({"email": "x@example.test"}),
    )
    .await
    .err(403, "FORBIDDEN");
    app.call(
        &admin.token,
        "users",
        "invite",
        None,
        json!({"email": "nope"}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    app.call(
        &admin.token,
        "users",
        "invite",
        None,
        json!({"email": std.email}),
    )
    .await
    .err(409, "CONFLICT");
    let r = app
        .call(
            &admin.token,
            "users",
            "invite",
            None,
            json!({"email": "New.Person@Example.test", "role": "consumer", "full_name": "New Person"}),
        )
        .await;
    let d = r.ok(201);
    assert_eq!(d["invitation"]["email"], json!("new.person@example.test"));
    assert_eq!(d["invitation"]["status"], json!("pending"));
    assert_eq!(d["mail"], json!("sent"));
    let token = d["token"].as_str().unwrap().to_string();
    let m = mails(&smtp, 1).await;
    assert_eq!(m[0].to, vec!["new.person@example.test".to_string()]);
    assert_eq!(token_in(&m[0], "accept-invitation"), token);
    // Listed without the token.
    let l = app
        .call(&admin.token, "users", "invitations", None, json!({}))
        .await;
    let l = l.ok(200);
    assert_eq!(l["count"], json!(1));
    assert!(!l.to_string().contains(&token));

    // A weak password is refused and the invitation stays usable.
    post(
        &app,
        "/v1/auth/accept-invitation",
        json!({"token": token, "password": "password1234"}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    let r = post(
        &app,
        "/v1/auth/accept-invitation",
        json!({"token": token, "password": GOOD}),
    )
    .await;
    let d = r.ok(201);
    assert_eq!(d["profile"]["email"], json!("new.person@example.test"));
    assert_eq!(d["profile"]["role"], json!("consumer"));
    assert_eq!(d["profile"]["full_name"], json!("New Person"));
    let t = d["access_token"].as_str().unwrap();
    app.call(t, "profiles", "get", None, json!({}))
        .await
        .ok(200);
    login(&app, "new.person@example.test", GOOD).await.ok(200);
    // Once only.
    post(
        &app,
        "/v1/auth/accept-invitation",
        json!({"token": token, "password": GOOD2}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    let l = app
        .call(
            &admin.token,
            "users",
            "invitations",
            None,
            json!({"status": "accepted"}),
        )
        .await;
    assert_eq!(l.ok(200)["invitations"][0]["user_id"], d["profile"]["id"]);
}

#[tokio::test]
async fn a_team_invitation_to_a_new_address_creates_the_account_and_joins() {
    let app = TestApp::spawn().await;
    let owner = app.standard().await;
    let team = app
        .call(
            &owner.token,
            "teams",
            "create",
            None,
            json!({"name": "Crew"}),
        )
        .await;
    let team_id = team.ok(201)["team"]["id"].as_str().unwrap().to_string();
    let inv = app
        .call(
            &owner.token,
            "teams",
            "invite",
            Some(json!(team_id)),
            json!({"email": "fresh@example.test"}),
        )
        .await;
    let token = inv.ok(201)["token"].as_str().unwrap().to_string();
    let r = post(
        &app,
        "/v1/auth/accept-invitation",
        json!({"token": token, "password": GOOD, "full_name": "Fresh"}),
    )
    .await;
    let d = r.ok(201);
    assert_eq!(d["team_id"], json!(team_id));
    assert_eq!(d["profile"]["role"], json!("standard_user"));
    let members = app
        .call(
            &owner.token,
            "teams",
            "members",
            Some(json!(team_id)),
            json!({}),
        )
        .await;
    assert!(members.ok(200).to_string().contains("fresh@example.test"));
}

#[tokio::test]
async fn disabled_users_are_refused_everywhere_until_enabled() {
    let app = TestApp::spawn().await;
    let admin = app.admin().await;
    let (uid, email) = user_with_password(&app, Role::StandardUser, GOOD).await;
    let t = login(&app, &email, GOOD).await.ok(200)["access_token"]
        .as_str()
        .unwrap()
        .to_string();
    let u = User {
        id: uid.clone(),
        email: email.clone(),
        role: Role::StandardUser,
        token: t.clone(),
    };
    let key = app.api_key(&u).await;
    app.call(&key, "genies", "list", None, json!({}))
        .await
        .ok(200);

    app.call(
        &admin.token,
        "users",
        "disable",
        Some(json!(admin.id)),
        json!({}),
    )
    .await
    .err(409, "CONFLICT");
    let r = app
        .call(
            &admin.token,
            "users",
            "disable",
            Some(json!(uid)),
            json!({}),
        )
        .await;
    assert_eq!(r.ok(200)["user"]["status"], json!("disabled"));
    app.call(&t, "profiles", "get", None, json!({}))
        .await
        .err(401, "INVALID_TOKEN");
    app.call(&key, "genies", "list", None, json!({}))
        .await
        .err(401, "KEY_NOT_FOUND");
    login(&app, &email, GOOD).await.err(403, "FORBIDDEN");
    // A wrong password still says only that the credentials are wrong.
    login(&app, &email, GOOD2)
        .await
        .err(401, "INVALID_CREDENTIALS");

    let l = app
        .call(
            &admin.token,
            "users",
            "list",
            None,
            json!({"status": "disabled"}),
        )
        .await;
    let l = l.ok(200);
    assert_eq!(l["count"], json!(1));
    assert_eq!(l["users"][0]["id"], json!(uid));
    assert!(!l.to_string().contains("password_hash"));

    app.call(&admin.token, "users", "enable", Some(json!(uid)), json!({}))
        .await
        .ok(200);
    login(&app, &email, GOOD).await.ok(200);
    app.call(&key, "genies", "list", None, json!({}))
        .await
        .ok(200);
}

#[tokio::test]
async fn role_change_and_delete_with_the_users_data() {
    let app = TestApp::spawn().await;
    let admin = app.admin().await;
    let u = app.standard().await;
    insert_genie(&app, &u, "Theirs").await;
    app.call(&u.token, "users", "list", None, json!({}))
        .await
        .err(403, "FORBIDDEN");
    app.call(
        &admin.token,
        "users",
        "set-role",
        Some(json!(u.id)),
        json!({"role": "root"}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    let r = app
        .call(
            &admin.token,
            "users",
            "set-role",
            Some(json!(u.id)),
            json!({"role": "consumer"}),
        )
        .await;
    assert_eq!(r.ok(200)["user"]["role"], json!("consumer"));
    // The running session sees the new role at once: consumers cannot write.
    app.call(
        &u.token,
        "genie-groups",
        "create",
        None,
        json!({"name": "g"}),
    )
    .await
    .err(403, "FORBIDDEN");

    let g = app.count("genies").await;
    let r = app
        .request(
            Method::DELETE,
            &format!("/v1/users/{}", u.id),
            Some(&admin.token),
            None,
        )
        .await;
    assert_eq!(
        r.ok(200),
        &json!({"id": u.id, "deleted": true, "status": "deleted"})
    );
    assert_eq!(app.count("genies").await, g - 1);
    app.call(&u.token, "profiles", "get", None, json!({}))
        .await
        .err(401, "INVALID_TOKEN");
    app.call(&admin.token, "users", "get", Some(json!(u.id)), json!({}))
        .await
        .err(404, "NOT_FOUND");
    app.call(
        &admin.token,
        "users",
        "delete",
        Some(json!(admin.id)),
        json!({}),
    )
    .await
    .err(409, "CONFLICT");
}

/// Rows of `sql` (one `?1`, the user's id), counted.
async fn count_of(app: &TestApp, sql: &'static str, user: &str) -> i64 {
    let user = user.to_string();
    app.state
        .db
        .read(move |c| Ok(c.query_row(sql, [&user], |r| r.get(0))?))
        .await
        .unwrap()
}

/// An account with more than a batch of leads and of conversations: its delete goes batch by
/// batch, each batch a transaction of its own, and takes all of it and nothing of anyone
/// else's. A delete cut short leaves the account disabled with part of its records; here one
/// batch is run by hand on a disabled account, and the delete repeated over it finishes.
#[tokio::test]
async fn delete_in_batches_takes_everything_of_the_user_and_nothing_else() {
    use genied::db::accounts::{OWNED_BATCH, delete_owned_batch};
    let app = TestApp::spawn().await;
    let admin = app.admin().await;
    let u = app.standard().await;
    let other = app.standard().await;
    let theirs = insert_genie(&app, &u, "Theirs").await;
    let others = insert_genie(&app, &other, "Other's").await;
    // The user's own leads; another user's leads on the user's genie (they go with it); that
    // user's leads on their own genie (they stay).
    seed_leads(&app, &theirs, &u.id, 1_100).await;
    seed_leads(&app, &theirs, &other.id, 3).await;
    seed_leads(&app, &others, &other.id, 7).await;
    let (uid, gu) = (u.id.clone(), theirs.clone());
    app.state
        .db
        .write(move |c| {
            for i in 0..520 {
                c.execute(
                    "INSERT INTO conversations (id, user_id, genie_id, channel, status, started_at, created_at, updated_at)
                     VALUES (?1, ?2, ?3, 'web', 'completed', ?4, ?4, ?4)",
                    rusqlite::params![genied::db::new_id(), uid, gu, format!("2026-01-01T00:00:{:02}Z", i % 60)],
                )?;
            }
            Ok(())
        })
        .await
        .unwrap();
    // Into the search index, so the deletes take the leads out of it as well.
    let index = || {
        app.state.db.write(|c| {
            while genied::db::leads::index_pending(c, 100)? > 0 {}
            Ok(())
        })
    };
    index().await.unwrap();
    let stats = app
        .call(&other.token, "leads", "stats", None, json!({}))
        .await
        .ok(200)
        .clone();
    let (lead_rows, convo_rows) = (app.count("leads").await, app.count("conversations").await);

    app.call(
        &admin.token,
        "users",
        "disable",
        Some(json!(u.id)),
        json!({}),
    )
    .await
    .ok(200);
    let id = u.id.clone();
    let n = app
        .state
        .db
        .write(move |c| Ok(delete_owned_batch(c, &id)?))
        .await
        .unwrap();
    assert_eq!(n, OWNED_BATCH as usize, "one batch deletes at most a batch");
    assert_eq!(app.count("leads").await, lead_rows - OWNED_BATCH);

    let r = app
        .call(
            &admin.token,
            "users",
            "delete",
            Some(json!(u.id)),
            json!({}),
        )
        .await;
    assert_eq!(r.ok(200)["deleted"], json!(true));
    let mine = "SELECT COUNT(*) FROM leads WHERE user_id = genied_key(?1)";
    assert_eq!(count_of(&app, mine, &u.id).await, 0);
    assert_eq!(count_of(&app, mine, &other.id).await, 7);
    assert_eq!(app.count("leads").await, lead_rows - 1_103);
    let convos = "SELECT COUNT(*) FROM conversations WHERE user_id = ?1";
    assert_eq!(count_of(&app, convos, &u.id).await, 0);
    assert_eq!(app.count("conversations").await, convo_rows - 520);
    let genies = "SELECT COUNT(*) FROM genies WHERE user_id = ?1";
    assert_eq!(count_of(&app, genies, &u.id).await, 0);
    assert_eq!(count_of(&app, genies, &other.id).await, 1);
    // The other user's counters and search index are as they were.
    let after = app
        .call(&other.token, "leads", "stats", None, json!({}))
        .await;
    assert_eq!(after.ok(200), &stats);
    index().await.unwrap();
    app.fts_index_is_whole("leads_search").await;
    app.call(&admin.token, "users", "get", Some(json!(u.id)), json!({}))
        .await
        .err(404, "NOT_FOUND");
    app.call(
        &admin.token,
        "users",
        "delete",
        Some(json!(u.id)),
        json!({}),
    )
    .await
    .err(404, "NOT_FOUND");
}

/// `n` leads of `user` on `genie`, half `new` and half `qualified`, written straight to the
/// database (the API's creates would take the test seconds).
async fn seed_leads(app: &TestApp, genie: &str, user: &str, n: usize) {
    let (genie, user) = (genie.to_string(), user.to_string());
    app.state
        .db
        .write(move |c| {
            for i in 0..n {
                c.execute(
                    "INSERT INTO leads (agent_id, user_id, name, status, created_at)
                     VALUES (genied_key(?1), genied_key(?2), ?3, ?4, ?5)",
                    rusqlite::params![
                        genie,
                        user,
                        format!("L{i}"),
                        ["new", "qualified"][i % 2],
                        1_767_225_600_000i64 + i as i64
                    ],
                )?;
            }
            Ok(())
        })
        .await
        .unwrap();
}

/// An admin, a user with a genie and 250 leads (more than two batches), and another user
/// with a genie and 5 leads: `(admin, user, other)`.
async fn an_account_to_delete(app: &TestApp) -> (User, User, User) {
    let admin = app.admin().await;
    let u = app.standard().await;
    let other = app.standard().await;
    let theirs = insert_genie(app, &u, "Theirs").await;
    let others = insert_genie(app, &other, "Other's").await;
    seed_leads(app, &theirs, &u.id, 250).await;
    seed_leads(app, &others, &other.id, 5).await;
    (admin, u, other)
}

/// Waits until `users get` answers 404 for `u`, then checks that `u`'s leads and genies are
/// gone and `other`'s are not.
async fn wait_gone(app: &TestApp, admin: &User, u: &User, other: &User) {
    wait_until("the account's delete to finish", async || {
        let r = app
            .call(&admin.token, "users", "get", Some(json!(u.id)), json!({}))
            .await;
        (r.status == 404).then_some(())
    })
    .await;
    let leads = "SELECT COUNT(*) FROM leads WHERE user_id = genied_key(?1)";
    assert_eq!(count_of(app, leads, &u.id).await, 0);
    assert_eq!(count_of(app, leads, &other.id).await, 5);
    let genies = "SELECT COUNT(*) FROM genies WHERE user_id = ?1";
    assert_eq!(count_of(app, genies, &u.id).await, 0);
    assert_eq!(count_of(app, genies, &other.id).await, 1);
}

/// The ids `users all` lists with `status`.
async fn listed(app: &TestApp, admin: &User, status: &str) -> Vec<String> {
    let r = app
        .call(
            &admin.token,
            "users",
            "all",
            None,
            json!({"status": status}),
        )
        .await;
    r.ok(200)["users"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["id"].as_str().unwrap().to_string())
        .collect()
}

/// A delete that outlasts `--account-delete-wait-seconds` (here 0) answers 202 with the
/// account `deleting`, and goes on: the account and its records are gone a little later,
/// another user's are not.
#[tokio::test]
async fn a_delete_longer_than_its_wait_answers_202_and_goes_on() {
    let app = TestApp::spawn_with(|c| c.account_delete_wait_seconds = 0).await;
    let (admin, u, other) = an_account_to_delete(&app).await;
    let r = app
        .call(
            &admin.token,
            "users",
            "delete",
            Some(json!(u.id)),
            json!({}),
        )
        .await;
    assert_eq!(
        r.ok(202),
        &json!({"id": u.id, "deleted": false, "status": "deleting"})
    );
    // Disabled from the answer on, whether or not the records are gone yet.
    app.call(&u.token, "profiles", "get", None, json!({}))
        .await
        .err(401, "INVALID_TOKEN");
    wait_gone(&app, &admin, &u, &other).await;
}

/// A delete cut short (here: marked by hand, as the delete's first transaction leaves it,
/// with no drain running) shows as `deleting`, cannot be undone by `enable`, and is finished
/// by the next start.
#[tokio::test]
async fn a_start_finishes_the_deletes_a_stop_cut_short() {
    use genied::db::accounts::{mark_deleting, set_disabled};
    let app = TestApp::spawn().await;
    let (admin, u, other) = an_account_to_delete(&app).await;
    let id = u.id.clone();
    app.state
        .db
        .write(move |c| {
            set_disabled(c, &id, true)?;
            mark_deleting(c, &id)?;
            Ok(())
        })
        .await
        .unwrap();

    let r = app
        .call(&admin.token, "users", "get", Some(json!(u.id)), json!({}))
        .await;
    let user = &r.ok(200)["user"];
    assert_eq!(user["status"], json!("deleting"));
    assert!(user["deleting_at"].is_string(), "{user}");
    assert_eq!(listed(&app, &admin, "deleting").await, vec![u.id.clone()]);
    assert!(!listed(&app, &admin, "disabled").await.contains(&u.id));
    app.call(
        &admin.token,
        "users",
        "enable",
        Some(json!(u.id)),
        json!({}),
    )
    .await
    .err(409, "CONFLICT");
    app.call(
        &admin.token,
        "users",
        "all",
        None,
        json!({"status": "gone"}),
    )
    .await
    .err(400, "VALIDATION_ERROR");

    let app = app.restart().await;
    wait_gone(&app, &admin, &u, &other).await;
    assert!(listed(&app, &admin, "deleting").await.is_empty());
}
