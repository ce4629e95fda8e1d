//! OpenID Connect sign-in (#21). The happy path runs against a real, certified provider
//! (`oidc-provider` on Node, see common/oidc_provider.rs) with an HTTP client that follows
//! the redirects and keeps cookies like a browser: authorize → the provider's login form →
//! genied's callback → genied's own token pair. Accounts are linked by (issuer, subject);
//! a claim maps to a role; an unknown person is refused when creation is off; a replayed
//! callback or code and a wrong state are refused. Tokens the provider will not produce (bad
//! signature, wrong audience, expired) come from a hand-rolled issuer.

use crate::common::fakes::oidc_issuer::{FakeIssuer, Mode};
use crate::common::oidc_provider::{CLIENT_ID, CLIENT_SECRET, OpenIdProvider};
use crate::common::process::free_port;
use crate::common::*;
use genied::config::Secret;
use genied::db::users::Role;
use reqwest::Method;
use reqwest::redirect::Policy;
use serde_json::{Value, json};

fn browser(stop_at_callback: bool) -> reqwest::Client {
    let policy = if stop_at_callback {
        Policy::custom(|a| {
            if a.url().path() == "/v1/auth/oidc/callback" {
                a.stop()
            } else if a.previous().len() > 10 {
                a.error("too many redirects")
            } else {
                a.follow()
            }
        })
    } else {
        Policy::limited(10)
    };
    reqwest::Client::builder()
        .cookie_store(true)
        .redirect(policy)
        .build()
        .unwrap()
}

/// Goes from genied's authorize route through the provider's login form as `login`; returns
/// the final response (genied's callback answer, or the provider's redirect to it).
async fn sign_in(app: &TestApp, login: &str, stop_at_callback: bool) -> reqwest::Response {
    let b = browser(stop_at_callback);
    let form = b
        .get(format!("{}/v1/auth/oidc/authorize", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(form.status(), 200, "the provider's login form");
    let html = form.text().await.unwrap();
    let action = regex::Regex::new(r#"<form[^>]*action="([^"]+)""#)
        .unwrap()
        .captures(&html)
        .unwrap_or_else(|| panic!("no form in {html}"))[1]
        .to_string();
    b.post(action)
        .form(&[("prompt", "login"), ("login", login), ("password", "any")])
        .send()
        .await
        .unwrap()
}

async fn json_of(r: reqwest::Response) -> (u16, Value) {
    let s = r.status().as_u16();
    (s, r.json().await.unwrap())
}

fn callback_url(r: &reqwest::Response) -> String {
    assert_eq!(r.status(), 303, "the provider redirects to the callback");
    r.headers()["location"].to_str().unwrap().to_string()
}

async fn sessions(app: &TestApp) -> i64 {
    app.count("sessions").await
}

#[tokio::test]
async fn sign_in_through_a_real_provider_links_by_subject_maps_roles_and_refuses_strangers() {
    let op_port = free_port();
    let app = TestApp::spawn_with(|c| {
        c.oidc_issuer = Some(format!("http://127.0.0.1:{op_port}"));
        c.oidc_client_id = Some(CLIENT_ID.into());
        c.oidc_client_secret = Some(Secret(CLIENT_SECRET.into()));
        c.oidc_scopes = "email profile groups".into();
        c.oidc_role_map = "genied-admins=internal_admin, staff=standard_user".into();
        c.oidc_link_by_email = true;
        c.oidc_create_users = false;
    })
    .await;
    let _op = OpenIdProvider::start(
        op_port,
        &app.base,
        json!({
            "alice": {"email": "alice@example.test", "email_verified": true, "name": "Alice",
                      "groups": ["genied-admins", "staff"]},
            "bob": {"email": "bob@example.test", "email_verified": true, "groups": ["staff"]},
            "mallory": {"email": "carol@example.test", "email_verified": false},
        }),
    );
    let cfg = app
        .request(Method::GET, "/v1/auth/config", None, None)
        .await;
    assert_eq!(cfg.ok(200)["oidc"]["enabled"], json!(true));
    let alice = app
        .user_with_email(Role::StandardUser, "alice@example.test")
        .await;
    let carol = app
        .user_with_email(Role::StandardUser, "carol@example.test")
        .await;

    // Alice: linked by her verified email at the first sign-in, role from her groups.
    let r = sign_in(&app, "alice", false).await;
    let callback = r.url().to_string();
    assert!(callback.starts_with(&format!("{}/v1/auth/oidc/callback?", app.base)));
    let (status, body) = json_of(r).await;
    assert_eq!(status, 200, "{body}");
    let access = body["data"]["access_token"].as_str().unwrap().to_string();
    let refresh = body["data"]["refresh_token"].as_str().unwrap().to_string();
    let me = app.call(&access, "profiles", "get", None, json!({})).await;
    let me = me.ok(200)["profile"].clone();
    assert_eq!(me["id"], json!(alice.id));
    assert_eq!(me["role"], json!("internal_admin"));
    let r = app
        .request(
            Method::POST,
            "/v1/auth/refresh",
            None,
            Some(json!({"refresh_token": refresh})),
        )
        .await;
    r.ok(200);
    let u = app
        .call(&access, "users", "get", Some(json!(alice.id)), json!({}))
        .await;
    let ids = u.ok(200)["user"]["identities"].clone();
    assert_eq!(
        ids[0]["issuer"],
        json!(format!("http://127.0.0.1:{op_port}"))
    );
    assert_eq!(ids[0]["subject"], json!("alice"));

    // The same callback again: its state is spent, no session is opened.
    let before = sessions(&app).await;
    let (status, body) = json_of(browser(false).get(&callback).send().await.unwrap()).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], json!("VALIDATION_ERROR"));
    assert_eq!(sessions(&app).await, before);

    // A second sign-in lands in the same account, by (issuer, subject).
    let (status, _) = json_of(sign_in(&app, "alice", false).await).await;
    assert_eq!(status, 200);
    assert_eq!(app.count("user_identities").await, 1);

    // A wrong state is refused and leaves the real one usable: with it, the same code
    // reaches the account check.
    let to_callback = callback_url(&sign_in(&app, "bob", true).await);
    let wrong = regex::Regex::new("state=[^&]+")
        .unwrap()
        .replace(&to_callback, "state=forged-state")
        .into_owned();
    let (status, body) = json_of(browser(false).get(&wrong).send().await.unwrap()).await;
    assert_eq!(status, 400, "{body}");
    // Bob has no account and creation is off: refused, nothing created.
    let users = app.count("users").await;
    let (status, body) = json_of(browser(false).get(&to_callback).send().await.unwrap()).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], json!("FORBIDDEN"));
    assert_eq!(app.count("users").await, users);

    // An unverified email does not link to the account that has it.
    let (status, body) = json_of(sign_in(&app, "mallory", false).await).await;
    assert_eq!(status, 403, "{body}");
    let u = app
        .call(&access, "users", "get", Some(json!(carol.id)), json!({}))
        .await;
    assert_eq!(u.ok(200)["user"]["identities"], json!([]));

    // A code already exchanged, presented with a fresh state: the provider refuses it.
    let first = callback_url(&sign_in(&app, "alice", true).await);
    let (status, _) = json_of(browser(false).get(&first).send().await.unwrap()).await;
    assert_eq!(status, 200);
    let fresh = callback_url(&sign_in(&app, "alice", true).await);
    let code = |u: &str| {
        regex::Regex::new("code=([^&]+)")
            .unwrap()
            .captures(u)
            .unwrap()[1]
            .to_string()
    };
    let replay = fresh.replace(&code(&fresh), &code(&first));
    let (status, body) = json_of(browser(false).get(&replay).send().await.unwrap()).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"]["code"], json!("INVALID_CREDENTIALS"));

    // A disabled account is refused at the callback.
    let admin = app.admin().await;
    app.call(
        &admin.token,
        "users",
        "disable",
        Some(json!(alice.id)),
        json!({}),
    )
    .await
    .ok(200);
    let (status, _) = json_of(sign_in(&app, "alice", false).await).await;
    assert_eq!(status, 403);
}

/// Starts a sign-in at genied and returns (state, nonce) from the redirect to the issuer.
async fn authorize(app: &TestApp, query: &str) -> (String, String) {
    let b = reqwest::Client::builder()
        .redirect(Policy::none())
        .build()
        .unwrap();
    let r = b
        .get(format!("{}/v1/auth/oidc/authorize{query}", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    let to = url::Url::parse(r.headers()["location"].to_str().unwrap()).unwrap();
    let q: std::collections::HashMap<String, String> = to.query_pairs().into_owned().collect();
    assert_eq!(q["response_type"], "code");
    assert_eq!(q["client_id"], CLIENT_ID);
    assert_eq!(q["code_challenge_method"], "S256");
    assert!(q["scope"].split(' ').any(|s| s == "openid"));
    (q["state"].clone(), q["nonce"].clone())
}

async fn callback(app: &TestApp, code: &str, state: &str) -> reqwest::Response {
    reqwest::Client::builder()
        .redirect(Policy::none())
        .build()
        .unwrap()
        .get(format!(
            "{}/v1/auth/oidc/callback?code={code}&state={state}",
            app.base
        ))
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn forged_tokens_are_refused_and_unknown_users_created_when_allowed() {
    let issuer = FakeIssuer::start(CLIENT_ID, CLIENT_SECRET).await;
    let secret_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(secret_file.path(), format!("{CLIENT_SECRET}\n")).unwrap();
    let app = TestApp::spawn_with(|c| {
        c.oidc_issuer = Some(issuer.issuer.clone());
        c.oidc_client_id = Some(CLIENT_ID.into());
        c.oidc_client_secret_file = Some(secret_file.path().into());
        c.oidc_create_users = true;
        c.oidc_default_role = "consumer".into();
    })
    .await;
    let users = app.count("users").await;
    for (i, mode) in [Mode::BadSignature, Mode::WrongAudience, Mode::Expired]
        .into_iter()
        .enumerate()
    {
        let (state, nonce) = authorize(&app, "").await;
        issuer.next(mode, &nonce);
        let (status, body) = json_of(callback(&app, &format!("code-{i}"), &state).await).await;
        assert_eq!(status, 401, "{mode:?}: {body}");
        assert_eq!(
            body["error"]["code"],
            json!("INVALID_CREDENTIALS"),
            "{mode:?}"
        );
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("ID token"),
            "{mode:?}: {body}"
        );
    }
    // A token for another sign-in's nonce is refused too.
    let (state, _) = authorize(&app, "").await;
    issuer.next(Mode::Valid, "some-other-nonce");
    let (status, _) = json_of(callback(&app, "code-n", &state).await).await;
    assert_eq!(status, 401);
    assert_eq!(app.count("users").await, users);
    assert_eq!(app.count("sessions").await, 0);

    // A valid token for someone unknown: created (creation is on) with the default role;
    // started from the console, the callback hands over a one-time code, not tokens.
    let (state, nonce) = authorize(&app, "?console=1").await;
    issuer.next(Mode::Valid, &nonce);
    let r = callback(&app, "code-ok", &state).await;
    assert_eq!(r.status(), 303);
    let to = r.headers()["location"].to_str().unwrap().to_string();
    let code = to
        .strip_prefix("/console#oidc=")
        .unwrap_or_else(|| panic!("{to}"))
        .to_string();
    let ex = app
        .request(
            Method::POST,
            "/v1/auth/oidc/exchange",
            None,
            Some(json!({"code": code})),
        )
        .await;
    let t = ex.ok(200)["access_token"].as_str().unwrap().to_string();
    let me = app.call(&t, "profiles", "get", None, json!({})).await;
    let me = me.ok(200)["profile"].clone();
    assert_eq!(me["email"], json!("fake@example.test"));
    assert_eq!(me["role"], json!("consumer"));
    app.request(
        Method::POST,
        "/v1/auth/oidc/exchange",
        None,
        Some(json!({"code": code})),
    )
    .await
    .err(400, "VALIDATION_ERROR");
    assert!(issuer.errors().is_empty(), "{:?}", issuer.errors());
    assert_eq!(issuer.seen().len(), 5);
    // The client secret is nowhere in the database.
    let dump = stored_bytes(&app);
    assert!(
        !dump
            .windows(CLIENT_SECRET.len())
            .any(|w| w == CLIENT_SECRET.as_bytes())
    );
}

#[tokio::test]
async fn without_configuration_the_routes_say_so() {
    let app = TestApp::spawn().await;
    let cfg = app
        .request(Method::GET, "/v1/auth/config", None, None)
        .await;
    let cfg = cfg.ok(200);
    assert_eq!(cfg["oidc"]["enabled"], json!(false));
    assert_eq!(cfg["password_min_length"], json!(12));
    app.request(Method::GET, "/v1/auth/oidc/authorize", None, None)
        .await
        .err(404, "NOT_FOUND");
}
