//! Accounts (#21): the password policy wherever a password is set; change-password and
//! reset revoke every session; forgot-password answers the same whether or not the address
//! has an account and mails a one-time, expiring, hashed token; the admin CLI prints a
//! one-time link; email changes; per-address and per-account rate limits.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::fakes::smtp::{FakeSmtp, Mail};
use crate::common::process;
use crate::common::*;
use genied::db::{self, users::Role};
use reqwest::Method;
use serde_json::{Value, json};

pub const GOOD: &str = "violet-Kettle-93-orbit-Plum";
pub const GOOD2: &str = "quartz-Lantern-58-meadow-Fig";

/// A user with `password`, inserted with the service's own hash.
pub async fn user_with_password(app: &TestApp, role: Role, password: &str) -> (String, String) {
    let email = format!("{}@example.test", uuid::Uuid::new_v4().simple());
    let hash = genied::auth::passwords::hash(password).unwrap();
    let e = email.clone();
    let u = app
        .state
        .db
        .write(move |c| {
            Ok(db::users::insert(
                c,
                &e,
                Some("Pat Doe"),
                role,
                Some(&hash),
            )?)
        })
        .await
        .unwrap();
    (u.id, email)
}

pub async fn login(app: &TestApp, email: &str, password: &str) -> Resp {
    app.request(
        Method::POST,
        "/v1/auth/login",
        None,
        Some(json!({"email": email, "password": password})),
    )
    .await
}

pub async fn post(app: &TestApp, path: &str, body: Value) -> Resp {
    app.request(Method::POST, path, None, Some(body)).await
}

/// The body as sent, quoted-printable undone (lettre encodes long lines and `=` that way).
pub fn body_text(mail: &Mail) -> String {
    let soft = mail.data.replace("=\r\n", "");
    let re = regex::Regex::new("=([0-9A-F]{2})").unwrap();
    re.replace_all(&soft, |c: &regex::Captures| {
        char::from(u8::from_str_radix(&c[1], 16).unwrap()).to_string()
    })
    .into_owned()
}

pub fn token_in(mail: &Mail, what: &str) -> String {
    let re = regex::Regex::new(&format!("{what}=([A-Za-z0-9_-]{{43}})")).unwrap();
    re.captures(&body_text(mail))
        .unwrap_or_else(|| panic!("no {what} link in {}", mail.data))[1]
        .to_string()
}

/// Waits until the fake SMTP server holds `n` messages.
pub async fn mails(smtp: &FakeSmtp, n: usize) -> Vec<Mail> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let m = smtp.mails();
        if m.len() >= n {
            return m;
        }
        assert!(
            Instant::now() < deadline,
            "{} mails of {n} arrived",
            m.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn activity_actions(app: &TestApp, user_id: &str) -> Vec<String> {
    let uid = user_id.to_string();
    app.state
        .db
        .read(move |c| {
            let mut st = c.prepare(
                "SELECT resource || ' ' || action FROM activities WHERE user_id = ?1 ORDER BY created_at",
            )?;
            Ok(st
                .query_map([db::activities::Key::of(&uid)], |r| r.get(0))?
                .collect::<rusqlite::Result<Vec<String>>>()?)
        })
        .await
        .unwrap()
}

#[tokio::test]
async fn change_password_checks_the_policy_and_revokes_every_session() {
    let app = TestApp::spawn().await;
    let (uid, email) = user_with_password(&app, Role::StandardUser, GOOD).await;
    let a = login(&app, &email, GOOD).await;
    let b = login(&app, &email, GOOD).await;
    let (ta, tb) = (
        a.ok(200)["access_token"].as_str().unwrap().to_string(),
        b.ok(200)["access_token"].as_str().unwrap().to_string(),
    );
    let refresh_b = b.data()["refresh_token"].as_str().unwrap().to_string();

    let change =
        |current: &str, new: &str| json!({"current_password": current, "new_password": new});
    // Wrong current password, then weak new ones: refused, nothing changes.
    let r = app
        .call(
            &ta,
            "profiles",
            "change-password",
            None,
            change("not it at all!", GOOD2),
        )
        .await;
    r.err(400, "VALIDATION_ERROR");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("current_password")
    );
    for weak in [
        "short1!",
        "password123456",
        "qwertyuiopasdf",
        &format!("{email}1"),
    ] {
        let r = app
            .call(&ta, "profiles", "change-password", None, change(GOOD, weak))
            .await;
        r.err(400, "VALIDATION_ERROR");
        assert!(
            r.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("new_password"),
            "{weak}: {}",
            r.body
        );
        assert!(
            !r.body.to_string().contains(weak),
            "the error echoes the password"
        );
    }
    app.call(&tb, "profiles", "get", None, json!({}))
        .await
        .ok(200);

    let r = app
        .call(
            &ta,
            "profiles",
            "change-password",
            None,
            change(GOOD, GOOD2),
        )
        .await;
    let d = r.ok(200);
    assert_eq!(d["sessions_revoked"], json!(2));
    let fresh = d["session"]["access_token"].as_str().unwrap().to_string();
    // Both earlier sessions are dead, their refresh tokens too; the new one works.
    for t in [&ta, &tb] {
        app.call(t, "profiles", "get", None, json!({}))
            .await
            .err(401, "INVALID_TOKEN");
    }
    post(
        &app,
        "/v1/auth/refresh",
        json!({"refresh_token": refresh_b}),
    )
    .await
    .err(401, "INVALID_TOKEN");
    app.call(&fresh, "profiles", "get", None, json!({}))
        .await
        .ok(200);
    login(&app, &email, GOOD)
        .await
        .err(401, "INVALID_CREDENTIALS");
    login(&app, &email, GOOD2).await.ok(200);
    assert!(
        activity_actions(&app, &uid)
            .await
            .contains(&"profiles change-password".to_string())
    );
}

#[tokio::test]
async fn forgot_password_answers_alike_and_mails_a_one_time_hashed_token() {
    let smtp = FakeSmtp::start().await;
    let app = TestApp::spawn_with(|c| {
        c.smtp_url = Some(genied::config::Secret(smtp.url.clone()));
    })
    .await;
    let (uid, email) = user_with_password(&app, Role::StandardUser, GOOD).await;
    let old = login(&app, &email, GOOD).await;
    let old_token = old.ok(200)["access_token"].as_str().unwrap().to_string();

    let known = post(&app, "/v1/auth/forgot-password", json!({"email": email})).await;
    let unknown = post(
        &app,
        "/v1/auth/forgot-password",
        json!({"email": "nobody-here@example.test"}),
    )
    .await;
    assert_eq!(known.status, 200);
    assert_eq!(
        known.body, unknown.body,
        "the answers tell the addresses apart"
    );
    let m = mails(&smtp, 1).await;
    assert_eq!(m.len(), 1, "a mail went to an address without an account");
    assert_eq!(m[0].to, vec![email.clone()]);
    let token = token_in(&m[0], "reset-password");
    assert!(body_text(&m[0]).contains(&format!("{}/console#reset-password=", app.base)));

    // Only the hash is stored.
    let t2 = token.clone();
    let (stored, plain): (String, i64) = app
        .state
        .db
        .read(move |c| {
            Ok(c.query_row(
                "SELECT token_hash, (SELECT COUNT(*) FROM account_tokens WHERE token_hash = ?1)
                 FROM account_tokens",
                [&t2],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?)
        })
        .await
        .unwrap();
    assert_eq!(plain, 0);
    assert_eq!(stored, genied::auth::keys::hash(&token));
    // The mail log keeps the message without its link. Its row is written after the SMTP
    // server took the mail, so it is waited for (bounded).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let (logged, leaked) = loop {
        let t2 = token.clone();
        let (logged, leaked): (i64, i64) = app
            .state
            .db
            .read(move |c| {
                Ok(c.query_row(
                    "SELECT COUNT(*), SUM(CASE WHEN instr(body, ?1) > 0 THEN 1 ELSE 0 END) FROM email_logs",
                    [&t2],
                    |r| Ok((r.get(0)?, r.get::<_, Option<i64>>(1)?.unwrap_or(0))),
                )?)
            })
            .await
            .unwrap();
        if logged > 0 || std::time::Instant::now() > deadline {
            break (logged, leaked);
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!((logged, leaked), (1, 0));

    // A weak password is refused and leaves the token usable.
    let r = post(
        &app,
        "/v1/auth/reset-password",
        json!({"token": token, "new_password": "letmein"}),
    )
    .await;
    r.err(400, "VALIDATION_ERROR");
    let r = post(
        &app,
        "/v1/auth/reset-password",
        json!({"token": token, "new_password": GOOD2}),
    )
    .await;
    assert_eq!(r.ok(200)["reset"], json!(true));
    // Once only.
    post(
        &app,
        "/v1/auth/reset-password",
        json!({"token": token, "new_password": "another-Strong-77-pass"}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    app.call(&old_token, "profiles", "get", None, json!({}))
        .await
        .err(401, "INVALID_TOKEN");
    login(&app, &email, GOOD)
        .await
        .err(401, "INVALID_CREDENTIALS");
    login(&app, &email, GOOD2).await.ok(200);
    let acts = activity_actions(&app, &uid).await;
    assert!(
        acts.contains(&"auth forgot-password".to_string()),
        "{acts:?}"
    );
    assert!(
        acts.contains(&"auth reset-password".to_string()),
        "{acts:?}"
    );

    // Malformed input: the envelope names the field.
    post(
        &app,
        "/v1/auth/forgot-password",
        json!({"email": "not an address"}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    post(&app, "/v1/auth/reset-password", json!({"token": "x"}))
        .await
        .err(400, "VALIDATION_ERROR");
}

#[tokio::test]
async fn an_expired_reset_token_is_refused() {
    let smtp = FakeSmtp::start().await;
    let app = TestApp::spawn_with(|c| {
        c.smtp_url = Some(genied::config::Secret(smtp.url.clone()));
    })
    .await;
    let (_, email) = user_with_password(&app, Role::StandardUser, GOOD).await;
    post(&app, "/v1/auth/forgot-password", json!({"email": email}))
        .await
        .ok(200);
    let token = token_in(&mails(&smtp, 1).await[0], "reset-password");
    app.state
        .db
        .write(|c| {
            Ok(c.execute(
                "UPDATE account_tokens SET expires_at = '2000-01-01T00:00:00.000Z'",
                [],
            )?)
        })
        .await
        .unwrap();
    let r = post(
        &app,
        "/v1/auth/reset-password",
        json!({"token": token, "new_password": GOOD2}),
    )
    .await;
    r.err(400, "VALIDATION_ERROR");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("expired")
    );
    login(&app, &email, GOOD).await.ok(200);
}

#[tokio::test]
async fn sign_in_and_forgot_password_are_limited_per_address_alike() {
    let app = TestApp::spawn_with(|c| c.account_rate_limit_per_hour = 3).await;
    let (_, email) = user_with_password(&app, Role::StandardUser, GOOD).await;
    let unknown = "ghost@example.test";
    for e in [email.as_str(), unknown] {
        for _ in 0..3 {
            let r = post(&app, "/v1/auth/forgot-password", json!({"email": e})).await;
            r.ok(200);
        }
        let r = post(&app, "/v1/auth/forgot-password", json!({"email": e})).await;
        r.err(429, "RATE_LIMIT_EXCEEDED");
        assert!(r.header("retry-after").is_some());
        // Sign-in counts against the same address.
        login(&app, e, GOOD).await.err(429, "RATE_LIMIT_EXCEEDED");
    }
    // Another address is not affected.
    let (_, other) = user_with_password(&app, Role::StandardUser, GOOD).await;
    login(&app, &other, GOOD).await.ok(200);
}

#[tokio::test]
async fn change_email_at_once_without_smtp_and_by_confirmation_with_it() {
    let app = TestApp::spawn().await;
    let (_, email) = user_with_password(&app, Role::StandardUser, GOOD).await;
    let t = login(&app, &email, GOOD).await.ok(200)["access_token"]
        .as_str()
        .unwrap()
        .to_string();
    let taken = app.standard().await;
    let r = app
        .call(
            &t,
            "profiles",
            "change-email",
            None,
            json!({"new_email": "new@example.test"}),
        )
        .await;
    r.err(400, "VALIDATION_ERROR");
    app.call(
        &t,
        "profiles",
        "change-email",
        None,
        json!({"new_email": taken.email, "current_password": GOOD}),
    )
    .await
    .err(409, "CONFLICT");
    let r = app
        .call(
            &t,
            "profiles",
            "change-email",
            None,
            json!({"new_email": "new@example.test", "current_password": GOOD}),
        )
        .await;
    let d = r.ok(200);
    assert_eq!(d["status"], json!("changed"));
    assert_eq!(d["profile"]["email"], json!("new@example.test"));
    login(&app, "new@example.test", GOOD).await.ok(200);

    let smtp = FakeSmtp::start().await;
    let app = TestApp::spawn_with(|c| {
        c.smtp_url = Some(genied::config::Secret(smtp.url.clone()));
    })
    .await;
    let (_, email) = user_with_password(&app, Role::StandardUser, GOOD).await;
    let t = login(&app, &email, GOOD).await.ok(200)["access_token"]
        .as_str()
        .unwrap()
        .to_string();
    let r = app
        .call(
            &t,
            "profiles",
            "change-email",
            None,
            json!({"new_email": "moved@example.test", "current_password": GOOD}),
        )
        .await;
    assert_eq!(r.ok(200)["status"], json!("confirmation_sent"));
    let m = mails(&smtp, 1).await;
    assert_eq!(m[0].to, vec!["moved@example.test".to_string()]);
    // Not yet changed.
    login(&app, &email, GOOD).await.ok(200);
    let token = token_in(&m[0], "confirm-email");
    let r = post(&app, "/v1/auth/confirm-email", json!({"token": token})).await;
    assert_eq!(r.ok(200)["profile"]["email"], json!("moved@example.test"));
    post(&app, "/v1/auth/confirm-email", json!({"token": token}))
        .await
        .err(400, "VALIDATION_ERROR");
    login(&app, "moved@example.test", GOOD).await.ok(200);
}

#[tokio::test]
async fn the_cli_checks_the_policy_and_prints_a_one_time_reset_link() {
    let app = TestApp::spawn().await;
    let genied = |args: &[&str]| {
        process::output(
            Command::new(env!("CARGO_BIN_EXE_genied"))
                .arg("--data-dir")
                .arg(app.dir.path())
                .args(args)
                .envs(cli_env(app.dir.path()))
                .env_remove("GENIED_DATA_DIR")
                .env_remove("GENIED_PASSWORD_MIN_LENGTH"),
        )
    };
    let weak = genied(&[
        "admin",
        "create-user",
        "--email",
        "cli@example.test",
        "--password",
        "password1",
    ]);
    assert!(!weak.status.success());
    let err = String::from_utf8_lossy(&weak.stderr);
    assert!(err.contains("at least 12"), "{err}");
    assert!(!err.contains("password1"), "{err}");
    assert_eq!(app.count("users").await, 0);

    let ok = genied(&["admin", "create-user", "--email", "cli@example.test"]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let out = genied(&[
        "admin",
        "reset-password",
        "--email",
        "cli@example.test",
        "--public-url",
        &app.base,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let link = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let prefix = format!("{}/console#reset-password=", app.base);
    let token = link
        .strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("{link}"));
    post(
        &app,
        "/v1/auth/reset-password",
        json!({"token": token, "new_password": GOOD}),
    )
    .await
    .ok(200);
    login(&app, "cli@example.test", GOOD).await.ok(200);
    post(
        &app,
        "/v1/auth/reset-password",
        json!({"token": token, "new_password": GOOD2}),
    )
    .await
    .err(400, "VALIDATION_ERROR");
}
