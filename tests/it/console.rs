//! The web console (`/console`): served from the binary with a strict CSP and small assets,
//! and driven end to end in headless Chromium against the real service: the first admin signs
//! in (a wrong password first), creates a genie (a validation message next to its field
//! first), uploads a PDF by drag and drop and sees it reach `completed`, attaches it, creates
//! a lead and changes its status (the stats chart follows), creates an API key (shown once,
//! then gone), revokes it (a request with it is refused), and signs out. A second run
//! reaches each page's smaller actions and checks their effect through the API.
//!
//! `GENIED_CONSOLE_SCREENSHOTS=1 cargo test console` also writes the screenshots under
//! `docs/console/` (1280 and 390 px wide).

use std::path::Path;

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::browser::{Browser, Page};
use crate::common::documents::b64;
use crate::common::fixtures;
use crate::common::*;

const ASSETS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/console");

/// Helpers every script starts with. `until` polls a condition (25 ms apart) up to a
/// deadline, and fails with the page's text; nothing waits for a fixed time.
const PRELUDE: &str = r#"
const wait = (ms) => new Promise(r => setTimeout(r, ms));
const until = async (fn, what, ms = 60000) => {
  const end = Date.now() + ms;
  for (;;) {
    let v = null;
    try { v = fn(); } catch (e) { v = null; }
    if (v) return v;
    if (Date.now() > end) throw new Error('timed out waiting for ' + what + '; page: ' + (document.body ? document.body.innerText.slice(0, 3000) : ''));
    await wait(25);
  }
};
const $ = (s) => document.querySelector(s);
const $$ = (s) => [...document.querySelectorAll(s)];
const set = (el, v) => { el.value = v; el.dispatchEvent(new Event('input', {bubbles: true})); el.dispatchEvent(new Event('change', {bubbles: true})); };
const ready = () => $('#main') && $('#main').dataset.ready;
const settle = async (act, what) => { const b = ready(); await act(); return until(() => ready() && ready() !== b, what); };
const go = (page) => settle(() => $('a[data-page="' + page + '"]').click(), 'the ' + page + ' page');
const text = () => document.getElementById('main').innerText;
const visit = (path) => settle(() => { history.pushState(null, '', '/console/' + path); dispatchEvent(new PopStateEvent('popstate')); }, path);
"#;

async fn run(page: &mut Page, body: &str) -> Value {
    page.evaluate(&format!("(async () => {{ {PRELUDE}\n{body} }})()"))
        .await
}

async fn run_str(page: &mut Page, body: &str) -> String {
    let v = run(page, body).await;
    v.as_str()
        .map(str::to_string)
        .unwrap_or_else(|| panic!("the script returned no string: {v}"))
}

fn asset_files() -> Vec<(String, u64)> {
    let mut files: Vec<(String, u64)> = std::fs::read_dir(ASSETS)
        .expect("assets/console")
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().unwrap().len(),
            )
        })
        .collect();
    files.sort();
    files
}

#[test]
fn console_files_stay_under_300_kb() {
    let files = asset_files();
    let total: u64 = files.iter().map(|(_, n)| n).sum();
    eprintln!("console assets: {total} bytes in {} files", files.len());
    assert!(
        total < 300 * 1024,
        "the console's files are {total} bytes, over the 300 KB budget: {files:?}"
    );
}

#[tokio::test]
async fn console_is_served_with_a_strict_csp_and_no_inline_script() {
    let app = TestApp::spawn().await;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();

    let r = client.get(format!("{}/", app.base)).send().await.unwrap();
    assert!(r.status().is_redirection(), "{}", r.status());
    assert_eq!(r.headers()["location"], "/console");

    for path in [
        "/console",
        "/console/",
        "/console/leads/42",
        "/console/genies",
    ] {
        let r = client
            .get(format!("{}{path}", app.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{path}");
        let csp = r.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .to_string();
        assert!(
            r.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/html")
        );
        for part in [
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self'",
            "connect-src 'self'",
            "frame-ancestors 'none'",
        ] {
            assert!(csp.contains(part), "{path}: {csp}");
        }
        assert!(!csp.contains("unsafe"), "{path}: {csp}");
        let html = r.text().await.unwrap();
        // Every script is a file of this origin: no inline code, no handler attributes.
        for tag in html.split("<script").skip(1) {
            let tag = tag.split('>').next().unwrap();
            assert!(
                tag.contains("src=\"/console/static/"),
                "inline script in {html}"
            );
        }
        assert!(
            !html.contains("onclick=") && !html.contains("onload="),
            "{html}"
        );
    }

    // Every file of assets/console is served (a file left out of the list fails here).
    for (name, len) in asset_files() {
        if name == "index.html" {
            continue;
        }
        let r = client
            .get(format!("{}/console/static/{name}", app.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{name}");
        assert!(
            r.headers().contains_key("content-security-policy"),
            "{name}"
        );
        assert_eq!(r.bytes().await.unwrap().len() as u64, len, "{name}");
    }
    let r = app
        .request(Method::GET, "/console/static/nope.js", None, None)
        .await;
    r.err(404, "NOT_FOUND");
}

#[tokio::test]
async fn the_first_admin_runs_genied_from_the_console_in_chromium() {
    let app = TestApp::spawn().await;
    // A fresh data directory, as `genied serve` starts it: the first admin's password is in
    // secrets/initial-admin.txt.
    genied::app::bootstrap_first_admin(&app.state)
        .unwrap()
        .expect("a fresh data directory gets a first admin");
    let file = std::fs::read_to_string(app.dir.path().join("secrets/initial-admin.txt")).unwrap();
    let password = file
        .lines()
        .find_map(|l| l.trim().strip_prefix("password:"))
        .unwrap()
        .trim()
        .to_string();

    let browser = Browser::launch(&format!("{}/", app.base)).await;
    let mut page = browser.page(&app.base).await;

    // Wrong password: a clear message, still on the sign-in form.
    let msg = run_str(&mut page, r#"
        await until(() => location.pathname.startsWith('/console') && $('#signin'), 'the sign-in form');
        set($('#signin [name=email]'), 'admin@localhost');
        set($('#signin [name=password]'), 'not the password');
        $('#signin').requestSubmit();
        return await until(() => $('#signin-status').innerText.trim(), 'the sign-in error');
    "#).await;
    assert!(msg.contains("Wrong email or password"), "{msg}");

    let signed_in = run(&mut page, &format!(r#"
        set($('#signin [name=password]'), {password});
        $('#signin').requestSubmit();
        await until(() => ready() && $('#main h1') && $('#main h1').innerText === 'Genies', 'the genies page');
        return {{ keys: Object.keys(localStorage), who: $('.who').innerText, empty: text() }};
    "#, password = json!(password))).await;
    assert_eq!(
        signed_in["keys"],
        json!(["genied.refresh_token"]),
        "only the refresh token is stored: {signed_in}"
    );
    assert!(
        signed_in["who"].as_str().unwrap().contains("Administrator"),
        "{signed_in}"
    );
    assert!(
        signed_in["empty"]
            .as_str()
            .unwrap()
            .contains("No genies yet"),
        "{signed_in}"
    );

    // A reload keeps the session (refresh token) and shows the page again: its
    // time-to-interactive is printed, not asserted.
    run(
        &mut page,
        "window.__old = true; setTimeout(() => location.reload(), 0); return true;",
    )
    .await;
    let timing = run(&mut page, r#"
        await until(() => !window.__old && ready() && $('#main h1').innerText === 'Genies', 'the genies page after a reload');
        const nav = performance.getEntriesByType('navigation')[0];
        return { interactive: window.__consoleInteractive, dcl: Math.round(nav.domContentLoadedEventEnd) };
    "#).await;
    eprintln!(
        "console: genies page interactive {} ms after navigation start (DOMContentLoaded {} ms)",
        timing["interactive"], timing["dcl"]
    );

    // Create a genie: an empty name is refused by the API, its message next to the field.
    let genie = run(&mut page, r#"
        $('#new-genie').click();
        const f = await until(() => $('#genie-create'), 'the new genie form');
        f.requestSubmit();
        const err = await until(() => f.querySelector('[name=genieName]').closest('.field').querySelector('.field-error'), 'the name error');
        const errText = err.innerText;
        set(f.querySelector('[name=genieName]'), 'Front desk');
        set(f.querySelector('[name=systemPrompt]'), 'You answer questions about our bakery.');
        set(f.querySelector('[name=firstMessage]'), 'Hello! How can I help?');
        f.requestSubmit();
        await until(() => /^\/console\/genies\/[0-9a-f-]{36}$/.test(location.pathname) && ready() && $('#main h1').innerText === 'Front desk', 'the new genie page');
        await until(() => $('img.qr') && $('img.qr').src.startsWith('blob:') && $('img.qr').complete && $('img.qr').naturalWidth > 0, 'the QR code');
        return { id: location.pathname.split('/').pop(), errText, link: $('#page-link').href };
    "#).await;
    assert!(
        genie["errText"]
            .as_str()
            .unwrap()
            .contains("data.genieName"),
        "{genie}"
    );
    assert!(
        genie["link"].as_str().unwrap().contains("/g/front-desk-"),
        "{genie}"
    );
    let genie_id = genie["id"].as_str().unwrap().to_string();

    // Upload a PDF by drag and drop; its status refreshes by itself until `completed`.
    let pdf = fixtures::pdf(None, &["Our bakery opens at seven. Sourdough on Fridays."]);
    let status = run_str(&mut page, &format!(r#"
        await go('documents');
        const bytes = Uint8Array.from(atob({pdf}), c => c.charCodeAt(0));
        const dt = new DataTransfer();
        dt.items.add(new File([bytes], 'menu.pdf', {{ type: 'application/pdf' }}));
        $('#drop').dispatchEvent(new DragEvent('drop', {{ dataTransfer: dt, bubbles: true, cancelable: true }}));
        const cell = () => $('.doc-status[data-name="menu.pdf"]');
        await until(() => cell() && ['completed', 'failed'].includes(cell().dataset.status), 'menu.pdf to be processed', 100000);
        return cell().dataset.status + ' ' + cell().innerText;
    "#, pdf = json!(b64(&pdf)))).await;
    assert!(status.starts_with("completed"), "{status}");

    // Attach it to the genie.
    let attached = run_str(&mut page, r#"
        await go('genies');
        await settle(() => [...$$('#main a')].find(a => a.innerText === 'Front desk').click(), 'the genie page');
        const sel = await until(() => $('#attach-doc'), 'the document picker');
        set(sel, [...sel.options].find(o => o.text.startsWith('menu.pdf')).value);
        $('#attach-btn').click();
        return await until(() => !$('#attach-doc option:not([value=""])') && text().includes('Detach') && text(), 'the attached document');
    "#).await;
    assert!(attached.contains("menu.pdf"), "{attached}");
    let r = app
        .call(
            &admin_token(&app).await,
            "genies",
            "get",
            Some(json!(genie_id)),
            json!({}),
        )
        .await;
    assert_eq!(r.ok(200)["genie"]["documents"][0]["name"], "menu.pdf");

    // A lead: created, its status changed, and the chart by status follows.
    let chart = run(&mut page, r#"
        await go('leads');
        const count = (s) => Number($('#lead-stats g[data-status="' + s + '"]').dataset.count);
        await until(() => $('#lead-stats g'), 'the chart');
        const before = [count('new'), count('contacted')];
        $('#new-lead').click();
        const f = await until(() => $('#lead-create'), 'the new lead form');
        set(f.querySelector('[name=agent_id]'), [...f.querySelector('[name=agent_id]').options].find(o => o.text === 'Front desk').value);
        set(f.querySelector('[name=name]'), 'Ada Lovelace');
        set(f.querySelector('[name=email]'), 'ada@example.com');
        await settle(() => f.requestSubmit(), 'the lead page');
        await until(() => $('#main h1').innerText === 'Ada Lovelace', 'the lead page');
        set($('#lead-status'), 'contacted');
        await until(() => $('#lead-log').innerText.includes('status_change'), 'the status change in the activity log');
        await go('leads');
        await until(() => $('#lead-stats g') && count('contacted') === 1, 'the chart to show one contacted lead');
        return { before, after: [count('new'), count('contacted')], table: text() };
    "#).await;
    assert_eq!(chart["before"], json!([0, 0]), "{chart}");
    assert_eq!(chart["after"], json!([0, 1]), "{chart}");
    assert!(
        chart["table"].as_str().unwrap().contains("Ada Lovelace"),
        "{chart}"
    );

    // An API key: shown once, works, cleared from the page, revoked, then refused.
    let key = run_str(&mut page, r#"
        await go('keys');
        set($('#key-form [name=name]'), 'CRM');
        $('#key-form').requestSubmit();
        const box = await until(() => $('#new-key-value') && $('#new-key-value').value.startsWith('svc_live_') && $('#new-key-value'), 'the new key');
        const key = box.value;
        $('#copy-key').click();
        $('#key-done').click();
        await until(() => !$('#new-key-value') && !document.body.innerHTML.includes(key), 'the key to leave the page');
        return key;
    "#).await;
    let r = app
        .request(Method::GET, "/v1/genies", Some(&key), None)
        .await;
    r.ok(200);
    let revoked = run_str(&mut page, r#"
        await until(() => $('button[data-key="CRM"]'), 'the revoke button');
        $('button[data-key="CRM"]').click();
        (await until(() => $('dialog[open] button.danger'), 'the confirmation')).click();
        await until(() => !$('button[data-key="CRM"]') && text().includes('revoked'), 'the revoked key');
        return text();
    "#).await;
    assert!(revoked.contains("revoked"), "{revoked}");
    let r = app
        .request(Method::GET, "/v1/genies", Some(&key), None)
        .await;
    r.err(401, "KEY_NOT_FOUND");

    if std::env::var_os("GENIED_CONSOLE_SCREENSHOTS").is_some() {
        screenshots(&mut page, &genie_id).await;
    }

    // Sign out: back to the sign-in form, nothing left in localStorage, the session ended.
    let refresh = run_str(
        &mut page,
        "return localStorage.getItem('genied.refresh_token');",
    )
    .await;
    let out = run(
        &mut page,
        r#"
        $('#signout').click();
        await until(() => $('#signin'), 'the sign-in form');
        return Object.keys(localStorage);
    "#,
    )
    .await;
    assert_eq!(out, json!([]));
    let r = app
        .request(
            Method::POST,
            "/v1/auth/refresh",
            None,
            Some(json!({"refresh_token": refresh})),
        )
        .await;
    r.err(401, "INVALID_TOKEN");
    let log = browser.log();
    assert!(
        !log.contains(&key) && !log.contains(&password),
        "a secret reached the browser log"
    );
}

/// A session token of the first admin, for checks through the API.
async fn admin_token(app: &TestApp) -> String {
    let file = std::fs::read_to_string(app.dir.path().join("secrets/initial-admin.txt")).unwrap();
    let password = file
        .lines()
        .find_map(|l| l.trim().strip_prefix("password:"))
        .unwrap()
        .trim()
        .to_string();
    let r = app
        .request(
            Method::POST,
            "/v1/auth/login",
            None,
            Some(json!({"email": "admin@localhost", "password": password})),
        )
        .await;
    r.ok(200)["access_token"].as_str().unwrap().to_string()
}

/// PNGs of the main pages at 1280 and 390 px under docs/console/.
async fn screenshots(page: &mut Page, genie_id: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/console");
    std::fs::create_dir_all(&dir).unwrap();
    let pages = [
        ("genies", "genies".to_string()),
        ("genie", format!("genies/{genie_id}")),
        ("documents", "documents".to_string()),
        ("leads", "leads".to_string()),
        ("lead", "leads/1".to_string()),
        ("keys", "keys".to_string()),
        ("conversations", "conversations".to_string()),
    ];
    for (width, height, mobile) in [(1280, 860, false), (390, 844, true)] {
        page.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile}),
        )
        .await;
        for (name, path) in &pages {
            run(
                page,
                &format!(
                    r#"
                const b = ready();
                history.pushState(null, '', '/console/{path}');
                dispatchEvent(new PopStateEvent('popstate'));
                await until(() => ready() && ready() !== b && !$('.loading'), 'the {name} page');
                await until(() => !$('img.qr') || $('img.qr').complete, 'images');
                if ($('#toasts')) $('#toasts').replaceChildren();
                window.scrollTo(0, 0);
                return true;
            "#
                ),
            )
            .await;
            let shot = page
                .call("Page.captureScreenshot", json!({"format": "png"}))
                .await;
            let data = shot["result"]["data"].as_str().expect("a screenshot");
            use base64::Engine;
            let png = base64::engine::general_purpose::STANDARD
                .decode(data)
                .unwrap();
            std::fs::write(dir.join(format!("{name}-{width}.png")), png).unwrap();
        }
    }
    page.call("Emulation.clearDeviceMetricsOverride", json!({}))
        .await;
}

/// Signs the first admin in through the console's form and waits for the genies page.
async fn sign_in(page: &mut Page, password: &str) {
    run(&mut *page, &format!(r#"
        await until(() => location.pathname.startsWith('/console') && $('#signin'), 'the sign-in form');
        set($('#signin [name=email]'), 'admin@localhost');
        set($('#signin [name=password]'), {password});
        $('#signin').requestSubmit();
        await until(() => ready() && $('#main h1') && $('#main h1').innerText === 'Genies', 'the genies page');
        return true;
    "#, password = json!(password))).await;
}

/// The pages' smaller tools, each checked through the API afterwards: documents moved in bulk
/// and passages searched, a conversation's tags and metadata, a webhook's secret rotated, a
/// team member's role changed and the member removed, a genie added to a team and shared with
/// a consumer, a marketplace listing edited and featured, notifications read.
#[tokio::test]
async fn the_console_reaches_the_smaller_actions_of_each_page() {
    let app = TestApp::spawn().await;
    genied::app::bootstrap_first_admin(&app.state)
        .unwrap()
        .expect("a fresh data directory gets a first admin");
    let file = std::fs::read_to_string(app.dir.path().join("secrets/initial-admin.txt")).unwrap();
    let password = file
        .lines()
        .find_map(|l| l.trim().strip_prefix("password:"))
        .unwrap()
        .trim()
        .to_string();
    let admin = admin_token(&app).await;
    let call = |resource: &'static str, action: &'static str, id: Option<Value>, data: Value| {
        let (app, admin) = (&app, admin.clone());
        async move { app.call(&admin, resource, action, id, data).await }
    };

    // Seeded through the API: a folder, two notes, a genie that mails conversation reports
    // (no SMTP here, so the report becomes a notification), a conversation, a webhook, a team
    // with a member, and a consumer.
    let folder = call("document-folders", "create", None, json!({"name": "Menus"})).await;
    let folder = folder.ok(201)["folder"]["id"].as_str().unwrap().to_string();
    let mut notes = vec![];
    for (title, content) in [
        ("Opening hours", "We open at seven every morning."),
        ("Prices", "A sourdough loaf costs five euros."),
    ] {
        let r = call(
            "knowledge-base",
            "create",
            None,
            json!({"title": title, "content": content}),
        )
        .await;
        notes.push(r.ok(201)["document"]["id"].as_str().unwrap().to_string());
    }
    let genie = call(
        "genies",
        "create",
        None,
        json!({"genieName": "Front desk", "systemPrompt": "You answer questions.",
               "sendConversationReports": true, "supportEmails": ["desk@example.test"]}),
    )
    .await;
    let genie_id = genie.ok(201)["genie"]["id"].as_str().unwrap().to_string();
    let conv = call(
        "conversations",
        "create",
        None,
        json!({"genieId": genie_id, "transcript": [
            {"role": "user", "message": "When do you open?", "time_in_call_secs": 0},
            {"role": "agent", "message": "At seven.", "time_in_call_secs": 2}]}),
    )
    .await;
    let conv_id = conv.ok(201)["conversation"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let hook = call(
        "webhooks",
        "create",
        None,
        json!({"url": "https://hooks.example.com/genied", "event_types": ["*"]}),
    )
    .await;
    let first_secret = hook.ok(201)["webhook"]["secret"]
        .as_str()
        .unwrap()
        .to_string();
    let team = call("teams", "create", None, json!({"name": "Bakers"})).await;
    let team_id = team.ok(201)["team"]["id"].as_str().unwrap().to_string();
    let baker = app.standard().await;
    let inv = call(
        "teams",
        "invite",
        Some(json!(team_id)),
        json!({"email": baker.email, "role": "member"}),
    )
    .await;
    let token = inv.ok(201)["token"].as_str().unwrap().to_string();
    app.call(
        &baker.token,
        "teams",
        "accept",
        None,
        json!({"token": token}),
    )
    .await
    .ok(200);
    let consumer = app.consumer().await;
    let listing = call(
        "marketplace",
        "publish",
        None,
        json!({"genie_id": genie_id, "tags": ["bakery"]}),
    )
    .await;
    let listing_id = listing.ok(201)["listing"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    // The report job runs in the background; wait (bounded) for its notification.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let n = call("notifications", "unread-count", None, json!({})).await;
        if n.ok(200)["unread"].as_i64() >= Some(1) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no report notification"
        );
        app.run_jobs().await;
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }

    let browser = Browser::launch(&format!("{}/", app.base)).await;
    let mut page = browser.page(&app.base).await;
    sign_in(&mut page, &password).await;

    // Knowledge base: both notes selected and moved into "Menus"; a passage search.
    let moved = run_str(&mut page, r#"
        await go('documents');
        await until(() => $$('input.pick').length === 2, 'two selectable documents');
        for (const name of ['Opening hours', 'Prices']) {
            const box = $('input[aria-label="Select ' + name + '"]');
            box.click();
        }
        const target = await until(() => $('#bulk select'), 'the bulk bar');
        set(target, [...target.options].find(o => o.text === 'Menus').value);
        [...$$('#bulk button')].find(b => b.innerText === 'Move').click();
        await until(() => !$('#bulk select') && document.body.innerText.includes('2 documents moved'), 'the move');
        set($('#passage-form [name=query]'), 'sourdough');
        $('#passage-form').requestSubmit();
        return await until(() => $('#passages li') && $('#passages').innerText, 'the passages');
    "#).await;
    assert!(
        moved.contains("Prices") && moved.contains("sourdough"),
        "{moved}"
    );
    assert!(!moved.contains("Opening hours"), "{moved}");
    for id in &notes {
        let d = call("knowledge-base", "get", Some(json!(id)), json!({})).await;
        assert_eq!(d.ok(200)["document"]["folder_id"], json!(folder), "{id}");
    }

    // A conversation's tags and metadata.
    run(
        &mut page,
        &format!(
            r#"
        await visit('conversations/{conv_id}');
        const f = await until(() => $('#labels-form'), 'the tags form');
        set(f.querySelector('[name=tags]'), 'vip, callback');
        const keys = f.querySelectorAll('[name=key]');
        const vals = f.querySelectorAll('[name=value]');
        set(keys[keys.length - 1], 'crm_id');
        set(vals[vals.length - 1], '42');
        f.requestSubmit();
        await until(() => document.body.innerText.includes('Saved.'), 'the save');
        return true;
    "#
        ),
    )
    .await;
    let c = call("conversations", "get", Some(json!(conv_id)), json!({})).await;
    let c = &c.ok(200)["conversation"];
    assert_eq!(c["tags"], json!(["vip", "callback"]), "{c}");
    assert_eq!(c["metadata"]["crm_id"], "42", "{c}");

    // A webhook's secret rotated: the new one is shown once and differs from the first.
    let rotated = run_str(&mut page, r#"
        await go('webhooks');
        const b = await until(() => [...$$('#main button')].find(x => x.innerText === 'Rotate secret'), 'the rotate button');
        b.click();
        (await until(() => $('dialog[open] button.danger'), 'the confirmation')).click();
        const box = await until(() => $('input[aria-label="New signing secret"]'), 'the new secret');
        return box.value;
    "#).await;
    assert!(!rotated.is_empty() && rotated != first_secret, "{rotated}");

    // Teams: the member becomes an admin, the genie joins the team, then the member goes.
    run(&mut page, &format!(r#"
        await go('teams');
        const open = () => [...$$('#main button.link')].find(x => x.innerText === 'Bakers').click();
        open();
        const role = await until(() => $('select[aria-label="Role of {email}"]'), 'the role picker');
        set(role, 'admin');
        await until(() => document.body.innerText.includes('Role changed.'), 'the role change');
        const pick = await until(() => $('#main select[name=genie_id]'), 'the genie picker');
        set(pick, [...pick.options].find(o => o.text === 'Front desk').value);
        [...$$('#main button')].find(x => x.innerText === 'Add').click();
        await until(() => $('button[aria-label="Remove Front desk from the team"]'), 'the team genie');
        return true;
    "#, email = baker.email)).await;
    let members = call("teams", "members", Some(json!(team_id)), json!({})).await;
    let members = members.ok(200)["members"].as_array().unwrap().clone();
    let baker_row = members.iter().find(|m| m["user_id"] == json!(baker.id));
    assert_eq!(baker_row.unwrap()["role"], "admin", "{members:?}");
    let t = call("teams", "get", Some(json!(team_id)), json!({})).await;
    assert_eq!(t.ok(200)["team"]["genies"][0]["id"], json!(genie_id));
    run(&mut page, &format!(r#"
        $('button[aria-label="Remove {email}"]').click();
        (await until(() => $('dialog[open] button.danger'), 'the confirmation')).click();
        await until(() => !$('button[aria-label="Remove {email}"]') && $('#main').innerText.includes('Members'), 'the removal');
        return true;
    "#, email = baker.email)).await;
    let members = call("teams", "members", Some(json!(team_id)), json!({})).await;
    assert_eq!(members.ok(200)["count"], 1);

    // The genie shared with a consumer, who can then read it.
    run(
        &mut page,
        &format!(
            r#"
        await visit('genies/{genie_id}');
        const f = await until(() => $('#assign-form'), 'the sharing form');
        set(f.querySelector('[name=userId]'), {consumer});
        f.requestSubmit();
        await until(() => document.body.innerText.includes('Shared with'), 'the assignment');
        return true;
    "#,
            consumer = json!(consumer.id)
        ),
    )
    .await;
    app.call(
        &consumer.token,
        "genies",
        "get",
        Some(json!(genie_id)),
        json!({}),
    )
    .await
    .ok(200);

    // Marketplace: the listing edited by its publisher and featured by the admin.
    run(&mut page, r#"
        await go('marketplace');
        const edit = await until(() => [...$$('#main button')].find(x => x.innerText === 'Edit'), 'the edit button');
        edit.click();
        const f = await until(() => $('dialog[open] form'), 'the listing form');
        set(f.querySelector('[name=name]'), 'Bakery front desk');
        f.requestSubmit();
        await until(() => !$('dialog[open]') && $('#main').innerText.includes('Bakery front desk'), 'the edited listing');
        [...$$('#main button')].find(x => x.innerText === 'Feature').click();
        await until(() => [...$$('#main button')].find(x => x.innerText === 'Unfeature'), 'the featured listing');
        return true;
    "#).await;
    let l = call("marketplace", "get", Some(json!(listing_id)), json!({})).await;
    let l = &l.ok(200)["listing"];
    assert_eq!(l["name"], "Bakery front desk", "{l}");
    assert_eq!(l["is_featured"], true, "{l}");

    // Voices: a collection gets a voice from the list, then loses it again.
    let col = call(
        "voice-collections",
        "create",
        None,
        json!({"name": "Warm voices"}),
    )
    .await;
    let col_id = col.ok(201)["collection"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let added = run_str(&mut page, r#"
        await go('voices');
        const sel = await until(() => $('select[name=collection]'), 'an "Add to" picker');
        const voice = sel.getAttribute('aria-label').replace(/^Add /, '').replace(/ to a collection$/, '');
        set(sel, [...sel.options].find(o => o.text === 'Warm voices').value);
        await until(() => $('button[aria-label="Remove ' + voice + ' from Warm voices"]'), 'the voice in the collection');
        return voice;
    "#).await;
    let c = call("voice-collections", "get", Some(json!(col_id)), json!({})).await;
    assert_eq!(c.ok(200)["collection"]["voice_count"], 1, "{added}");
    run(&mut page, &format!(r#"
        $('button[aria-label="Remove {added} from Warm voices"]').click();
        await until(() => !$('button[aria-label="Remove {added} from Warm voices"]'), 'the removal');
        return true;
    "#)).await;
    let c = call("voice-collections", "get", Some(json!(col_id)), json!({})).await;
    assert_eq!(c.ok(200)["collection"]["voice_count"], 0);

    // Notifications: the report is there, and "mark all as read" reads it.
    let shown = run_str(&mut page, r#"
        await go('notifications');
        await until(() => $('#notifications .unread'), 'an unread notification');
        const shown = $('#notifications').innerText;
        $('#mark-all-read').click();
        await until(() => !$('#notifications .unread') && $('#unread-count').innerText === '0 unread', 'everything read');
        return shown;
    "#).await;
    assert!(shown.contains("Conversation report"), "{shown}");
    let n = call("notifications", "unread-count", None, json!({})).await;
    assert_eq!(n.ok(200)["unread"], 0);
}

/// #21: the sign-in page offers single sign-on when an OpenID provider is configured, and a
/// mailed reset link opens a page that sets the new password, after which the user signs in
/// with it.
#[tokio::test]
async fn the_console_offers_single_sign_on_and_opens_reset_links() {
    let issuer = crate::common::fakes::oidc_issuer::FakeIssuer::start("console", "secret").await;
    let app = TestApp::spawn_with(|c| {
        c.oidc_issuer = Some(issuer.issuer.clone());
        c.oidc_client_id = Some("console".into());
    })
    .await;
    let email = "reset.me@example.test";
    let hash = genied::auth::passwords::hash("first-Secret-481-walnut").unwrap();
    let uid = app
        .state
        .db
        .write(move |c| {
            Ok(genied::db::users::insert(
                c,
                email,
                None,
                genied::db::users::Role::StandardUser,
                Some(&hash),
            )?
            .id)
        })
        .await
        .unwrap();
    let token = app
        .state
        .db
        .write(move |c| {
            Ok(genied::service::accounts::create_token(
                c,
                &uid,
                genied::db::accounts::PASSWORD_RESET,
                None,
                60,
            )?)
        })
        .await
        .unwrap();

    let browser = Browser::launch(&format!("{}/console", app.base)).await;
    let mut page = browser.page(&format!("{}/console", app.base)).await;
    let href = run_str(
        &mut page,
        r#"
        await until(() => $('#signin-oidc'), 'the single sign-on button');
        return $('#signin-oidc').getAttribute('href');
    "#,
    )
    .await;
    assert_eq!(href, "/v1/auth/oidc/authorize?console=1");

    drop(page);
    drop(browser);
    // A mailed link opens a new browser window at the link.
    let link = format!("{}/console#reset-password={token}", app.base);
    let browser = Browser::launch(&link).await;
    let mut page = browser.page(&link).await;
    let notice = run_str(
        &mut page,
        r#"
        await until(() => $('#account-form'), 'the reset form');
        if (location.hash) throw new Error('the token stayed in the address: ' + location.href);
        set($('#account-form [name=password]'), 'second-Secret-907-chestnut');
        $('#account-form').requestSubmit();
        await until(() => $('#signin'), 'the sign-in form');
        return $('#signin .notice').innerText;
    "#,
    )
    .await;
    assert!(notice.contains("password is changed"), "{notice}");
    let signed_in = run_str(&mut page, &format!(r#"
        set($('#signin [name=email]'), {email});
        set($('#signin [name=password]'), 'second-Secret-907-chestnut');
        $('#signin').requestSubmit();
        await until(() => ready() && $('#main h1') && $('#main h1').innerText === 'Genies', 'the genies page');
        return $('.who').innerText;
    "#, email = json!(email))).await;
    assert!(signed_in.contains("reset.me@example.test"), "{signed_in}");
}

/// A consumer signs in to the console and sees read-only pages: the genie assigned to them,
/// its settings disabled, and none of the controls that change something (the API refuses
/// those writes anyway: `isolation`).
#[tokio::test]
async fn a_consumer_sees_read_only_pages() {
    let app = TestApp::spawn().await;
    let owner = app.standard().await;
    let genie = app
        .call(
            &owner.token,
            "genies",
            "create",
            None,
            json!({"genieName": "Front desk", "systemPrompt": "You answer questions."}),
        )
        .await;
    let genie_id = genie.ok(201)["genie"]["id"].as_str().unwrap().to_string();
    let email = "viewer@example.test";
    let password = "viewer-Secret-623-maple";
    let hash = genied::auth::passwords::hash(password).unwrap();
    let viewer = app
        .state
        .db
        .write(move |c| {
            Ok(genied::db::users::insert(
                c,
                email,
                Some("Viewer"),
                genied::db::users::Role::Consumer,
                Some(&hash),
            )?)
        })
        .await
        .unwrap();
    app.call(
        &owner.token,
        "genies",
        "assign",
        Some(json!(genie_id)),
        json!({"userId": viewer.id}),
    )
    .await
    .ok(200);

    let browser = Browser::launch(&format!("{}/", app.base)).await;
    let mut page = browser.page(&app.base).await;
    let seen = run(&mut page, &format!(r#"
        await until(() => location.pathname.startsWith('/console') && $('#signin'), 'the sign-in form');
        set($('#signin [name=email]'), {email});
        set($('#signin [name=password]'), {password});
        $('#signin').requestSubmit();
        await until(() => ready() && $('#main h1') && $('#main h1').innerText === 'Genies', 'the genies page');
        const list = text();
        const newGenie = !!$('#new-genie');
        await settle(() => [...$$('#main a')].find(a => a.innerText === 'Front desk').click(), 'the genie page');
        const form = await until(() => $('#genie-form'), 'the settings form');
        const enabled = [...form.elements].filter(e => !e.disabled).map(e => e.name || e.type);
        const buttons = [...$$('#main button')].map(b => b.innerText);
        await go('documents');
        const upload = !!$('#drop');
        return {{ list, newGenie, enabled, buttons, upload, who: $('.who').innerText }};
    "#, email = json!(email), password = json!(password))).await;
    assert!(
        seen["list"].as_str().unwrap().contains("Front desk"),
        "{seen}"
    );
    assert_eq!(seen["newGenie"], false, "{seen}");
    assert_eq!(
        seen["enabled"],
        json!([]),
        "every settings control is disabled: {seen}"
    );
    for b in seen["buttons"].as_array().unwrap() {
        let b = b.as_str().unwrap();
        assert!(
            !["Delete", "Clone", "Share", "Attach", "Get a phone number"].contains(&b),
            "a consumer sees the {b} button: {seen}"
        );
    }
    assert_eq!(seen["upload"], false, "{seen}");
    assert!(seen["who"].as_str().unwrap().contains("consumer"), "{seen}");
}

/// Versions, traffic and tests on a genie's page, and the analytics page: a prompt change
/// staged as a draft and compared with live, a test created in the page, the draft published
/// only after that test passed against it (the fake LLM answers the draft's prompt), a
/// rollback to version 1, a 70/30 split; then the analytics page shows the conversation.
/// Each step is checked through the API.
#[tokio::test]
async fn the_console_manages_versions_traffic_and_tests_and_shows_analytics() {
    use crate::common::fakes::openai::{Expect, FakeOpenAi, Turn};
    let llm = FakeOpenAi::start(Expect::Any).await;
    let l2 = llm.clone();
    let app = TestApp::spawn_with(move |c| l2.configure(c)).await;
    genied::app::bootstrap_first_admin(&app.state)
        .unwrap()
        .expect("a fresh data directory gets a first admin");
    let file = std::fs::read_to_string(app.dir.path().join("secrets/initial-admin.txt")).unwrap();
    let password = file
        .lines()
        .find_map(|l| l.trim().strip_prefix("password:"))
        .unwrap()
        .trim()
        .to_string();
    let admin = admin_token(&app).await;
    let call = |resource: &'static str, action: &'static str, id: Option<Value>, data: Value| {
        let (app, admin) = (&app, admin.clone());
        async move { app.call(&admin, resource, action, id, data).await }
    };
    let genie = call(
        "genies",
        "create",
        None,
        json!({"genieName": "Front desk", "systemPrompt": "You answer questions."}),
    )
    .await;
    let genie_id = genie.ok(201)["genie"]["id"].as_str().unwrap().to_string();
    call(
        "conversations",
        "create",
        None,
        json!({"genieId": genie_id, "transcript": [
            {"role": "user", "message": "When do you open?", "time_in_call_secs": 0},
            {"role": "agent", "message": "At seven.", "time_in_call_secs": 2}]}),
    )
    .await
    .ok(201);

    let browser = Browser::launch(&format!("{}/", app.base)).await;
    let mut page = browser.page(&app.base).await;
    sign_in(&mut page, &password).await;

    // A draft, and its difference from live.
    let diff = run_str(
        &mut page,
        &format!(
            r#"
        await visit('genies/{genie_id}');
        const f = await until(() => $('#draft-form'), 'the draft form');
        f.closest('details').open = true;
        set(f.querySelector('[name=system_prompt]'), 'You welcome every guest warmly.');
        f.requestSubmit();
        await until(() => $('#draft-box'), 'the staged draft');
        [...$$('#draft-box button')].find(b => b.innerText === 'Compare with live').click();
        const d = await until(() => $('dialog[open] table'), 'the changes');
        const t = d.innerText;
        $('dialog[open] button[aria-label=Close]').click();
        return t;
    "#
        ),
    )
    .await;
    assert!(
        diff.contains("system_prompt") && diff.contains("You welcome every guest warmly."),
        "{diff}"
    );
    let v = call("genies", "versions", Some(json!(genie_id)), json!({})).await;
    assert_eq!(v.ok(200)["draft"]["base_version"], 1);
    let g = call("genies", "get", Some(json!(genie_id)), json!({})).await;
    assert_eq!(g.ok(200)["genie"]["system_prompt"], "You answer questions.");

    // A test made in the page; publishing with tests required plays it against the draft.
    run(&mut page, r#"
        const f = await until(() => $('#test-form'), 'the test form');
        f.closest('details').open = true;
        set(f.querySelector('[name=name]'), 'greets');
        set(f.querySelector('[name=turns]'), 'Hello');
        set(f.querySelector('[name=contains]'), 'welcome');
        f.requestSubmit();
        await until(() => $('#genie-tests table') && $('#genie-tests').innerText.includes('greets'), 'the new test');
        return true;
    "#).await;
    let tests = call("genie-tests", "all", None, json!({"genie_id": genie_id})).await;
    let test = tests.ok(200)["tests"][0].clone();
    assert_eq!(test["turns"], json!(["Hello"]), "{test}");
    assert_eq!(
        test["criteria"],
        json!([{"type": "contains", "value": "welcome"}])
    );
    llm.push([Turn::Answer("Welcome to the bakery!")]);
    run(&mut page, r#"
        $('#publish-draft').click();
        const f = await until(() => $('#publish-form'), 'the publish form');
        set(f.querySelector('[name=note]'), 'warmer greeting');
        f.querySelector('[name=require_tests]').click();
        f.requestSubmit();
        await until(() => !$('#draft-box') && $('#versions').innerText.includes('warmer greeting'), 'the published version');
        return true;
    "#).await;
    assert_eq!(llm.problems(), Vec::<String>::new());
    let sent = llm.requests();
    assert!(
        sent.iter().any(|r| r
            .body
            .to_string()
            .contains("You welcome every guest warmly.")),
        "the test ran against the draft's prompt"
    );
    let g = call("genies", "get", Some(json!(genie_id)), json!({})).await;
    assert_eq!(
        g.ok(200)["genie"]["system_prompt"],
        "You welcome every guest warmly."
    );

    // Roll back to version 1: live again, recorded as version 3.
    run(&mut page, r#"
        (await until(() => $('button[aria-label="Roll back to version 1"]'), 'the rollback button')).click();
        (await until(() => $('dialog[open] button.danger'), 'the confirmation')).click();
        await until(() => $('#versions') && $('#versions').innerText.includes('rollback to version 1'), 'the rollback');
        return true;
    "#).await;
    let v = call("genies", "versions", Some(json!(genie_id)), json!({})).await;
    let v = v.ok(200).clone();
    assert_eq!(v["count"], 3, "{v}");
    let g = call("genies", "get", Some(json!(genie_id)), json!({})).await;
    assert_eq!(g.ok(200)["genie"]["system_prompt"], "You answer questions.");

    // 70% to version 1, 30% to version 2.
    run(
        &mut page,
        r#"
        const f = await until(() => $('#traffic-form'), 'the traffic form');
        set(f.querySelector('[name=a]'), '1');
        set(f.querySelector('[name=weight]'), '70');
        set(f.querySelector('[name=b]'), '2');
        f.requestSubmit();
        await until(() => $('#traffic-now').innerText.includes('version 1 70%'), 'the split');
        return true;
    "#,
    )
    .await;
    let v = call("genies", "versions", Some(json!(genie_id)), json!({})).await;
    assert_eq!(
        v.ok(200)["traffic"],
        json!([{"version": 1, "weight": 70}, {"version": 2, "weight": 30}])
    );

    // Analytics: the one conversation of today, in the figures and on the chart.
    let shown = run_str(&mut page, r#"
        await go('analytics');
        await until(() => $('#stat-conversations') && $('#series-chart'), 'the figures and the chart');
        return $('#stat-conversations').innerText + ' | ' + $('#series-chart').getAttribute('aria-label');
    "#).await;
    let o = call("analytics", "overview", None, json!({"dateRange": "30d"})).await;
    let n = o.ok(200)["overview"]["conversations"].as_i64().unwrap();
    assert_eq!(n, 1);
    assert!(
        shown.contains("Conversations\n1") && shown.contains("by day"),
        "{shown}"
    );
}
