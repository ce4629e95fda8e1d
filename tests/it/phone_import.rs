//! Importing a number the team owns (issue #23): `attach-phone` with `data.number` and its
//! Twilio or SIP-trunk credentials sends the platform's documented import request (checked
//! by the fakes), attaches the number to the genie's agent, keeps the secret only sealed in
//! the database and never shows it again.

use serde_json::{Value, json};

use crate::common::fakes::retell::FakeRetell;
use crate::common::fakes::vapi::FakeVapi;
use crate::common::*;
use crate::providers::{retell_app, vapi_app};

const SID: &str = "AC0123456789abcdef0123456789abcdef";
const TOKEN: &str = "twilio-auth-token-do-not-show";
const SIP_PASSWORD: &str = "sip-password-do-not-show";

async fn genie(app: &TestApp, u: &User) -> (String, String) {
    let r = app
        .call(
            &u.token,
            "genies",
            "create",
            None,
            json!({"genieName": "Line"}),
        )
        .await;
    let id = r.ok(201)["genie"]["id"].as_str().unwrap().to_string();
    let i2 = id.clone();
    let agent: String = app
        .state
        .db
        .read(move |c| {
            Ok(c.query_row(
                "SELECT external_agent_id FROM genies WHERE id = ?1",
                [&i2],
                |r| r.get(0),
            )?)
        })
        .await
        .unwrap();
    (id, agent)
}

async fn attach(app: &TestApp, u: &User, id: &str, data: Value) -> Resp {
    app.call(&u.token, "genies", "attach-phone", Some(json!(id)), data)
        .await
}

/// The stored import of a genie's number: (phone id, kind, account, nonce, ciphertext).
type Stored = (String, String, String, Vec<u8>, Vec<u8>);

async fn stored(app: &TestApp, genie: &str) -> Option<Stored> {
    let g = genie.to_string();
    app.state
        .db
        .read(move |c| {
            let mut st = c.prepare(
                "SELECT i.phone_id, i.kind, i.account, i.nonce, i.ciphertext FROM phone_imports i
                 JOIN genie_phone_numbers p ON p.id = i.phone_id WHERE p.genie_id = ?1",
            )?;
            let rows: Vec<_> = st
                .query_map([&g], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
                })?
                .collect::<Result<_, _>>()?;
            Ok(rows.into_iter().next())
        })
        .await
        .unwrap()
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[tokio::test]
async fn a_twilio_number_is_imported_into_vapi_and_its_token_stays_sealed() {
    let fake = FakeVapi::start().await;
    let app = vapi_app(&fake).await;
    let u = app.standard().await;
    let (id, agent) = genie(&app, &u).await;
    let imports = || {
        fake.requests()
            .into_iter()
            .filter(|r| r.method == "POST" && r.path == "/phone-number")
            .count()
    };

    // Refused before anything reaches Vapi.
    for (data, needle) in [
        (json!({"number": "+14155550150"}), "data.twilio or data.sip"),
        (
            json!({"twilio": {"account_sid": SID, "auth_token": TOKEN}}),
            "data.number",
        ),
        (
            json!({"number": "4155550150", "twilio": {"account_sid": SID, "auth_token": TOKEN}}),
            "E.164",
        ),
        (
            json!({"number": "+14155550150", "twilio": {"account_sid": "AC12", "auth_token": TOKEN}}),
            "account_sid",
        ),
        (
            json!({"number": "+14155550150", "twilio": {"account_sid": SID, "auth_token": TOKEN, "region": "us"}}),
            "region",
        ),
    ] {
        let r = attach(&app, &u, &id, data.clone()).await;
        r.err(400, "VALIDATION_ERROR");
        assert!(
            r.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains(needle),
            "{data}: {}",
            r.body
        );
        assert!(!r.body.to_string().contains(TOKEN));
    }
    assert_eq!(imports(), 0);

    let r = attach(
        &app,
        &u,
        &id,
        json!({"number": "+14155550150", "twilio": {"account_sid": SID, "auth_token": TOKEN}}),
    )
    .await;
    let g = r.ok(200)["genie"].clone();
    assert_eq!(g["phone"]["number"], json!("+14155550150"));
    assert!(!r.body.to_string().contains(TOKEN), "{}", r.body);
    let req = fake
        .requests()
        .into_iter()
        .find(|r| r.method == "POST" && r.path == "/phone-number")
        .expect("the import reached Vapi");
    assert_eq!(req.body["provider"], json!("twilio"));
    assert_eq!(req.body["number"], json!("+14155550150"));
    assert_eq!(req.body["twilioAccountSid"], json!(SID));
    assert_eq!(req.body["twilioAuthToken"], json!(TOKEN));
    assert_eq!(req.body["assistantId"], json!(agent));
    assert_eq!(req.body["name"], json!("Line"));

    // At rest: the SID in clear, the token only as ciphertext that opens with the master key.
    let (phone_id, kind, account, nonce, ct) = stored(&app, &id).await.expect("stored import");
    assert_eq!(kind, "twilio");
    assert!(account.contains(SID) && !account.contains(TOKEN));
    assert!(!contains(&ct, TOKEN));
    let plain = genied::workers::credentials::open_live(&app.state, &phone_id, &nonce, &ct)
        .expect("opens with the master key");
    assert!(contains(&plain, TOKEN));
    let db = stored_bytes(&app);
    assert!(
        !contains(&db, TOKEN),
        "the token is nowhere in the database file in clear"
    );
    let r = app
        .call(&u.token, "genies", "get", Some(json!(id)), json!({}))
        .await;
    assert!(!r.ok(200).to_string().contains(TOKEN));

    // A second number: 409, nothing imported.
    attach(
        &app,
        &u,
        &id,
        json!({"number": "+14155550151", "twilio": {"account_sid": SID, "auth_token": TOKEN}}),
    )
    .await
    .err(409, "CONFLICT");
    assert_eq!(imports(), 1);

    // Released: removed at Vapi, and its sealed credentials go with it.
    app.call(
        &u.token,
        "genies",
        "release-phone",
        Some(json!(id)),
        json!({}),
    )
    .await
    .ok(200);
    let ext = req_id(&fake);
    assert!(fake.phone(&ext).is_none(), "deleted at Vapi");
    assert!(stored(&app, &id).await.is_none());
}

fn req_id(fake: &FakeVapi) -> String {
    let r = fake
        .requests()
        .into_iter()
        .find(|r| r.method == "DELETE" && r.path.starts_with("/phone-number/"))
        .expect("DELETE /phone-number/{id}");
    r.path.trim_start_matches("/phone-number/").to_string()
}

#[tokio::test]
async fn a_sip_trunk_number_is_imported_into_retell() {
    let fake = FakeRetell::start().await;
    let app = retell_app(&fake).await;
    let u = app.standard().await;
    let (id, agent) = genie(&app, &u).await;
    let r = attach(
        &app,
        &u,
        &id,
        json!({"number": "+14155550160", "twilio": {"account_sid": SID, "auth_token": TOKEN}}),
    )
    .await;
    r.err(400, "VALIDATION_ERROR");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("imports sip numbers")
    );
    let r = attach(
        &app,
        &u,
        &id,
        json!({"number": "+14155550160", "sip": {"termination_uri": "acme.pstn.twilio.com",
               "username": "acme", "password": SIP_PASSWORD}}),
    )
    .await;
    assert_eq!(r.ok(200)["genie"]["phone"]["number"], json!("+14155550160"));
    assert!(!r.body.to_string().contains(SIP_PASSWORD));
    let req = fake
        .requests()
        .into_iter()
        .find(|r| r.method == "POST" && r.path == "/import-phone-number")
        .expect("the import reached Retell");
    assert_eq!(req.body["phone_number"], json!("+14155550160"));
    assert_eq!(req.body["termination_uri"], json!("acme.pstn.twilio.com"));
    assert_eq!(req.body["sip_trunk_auth_username"], json!("acme"));
    assert_eq!(req.body["sip_trunk_auth_password"], json!(SIP_PASSWORD));
    let binding = json!([{"agent_id": agent, "weight": 1}]);
    assert_eq!(req.body["inbound_agents"], binding);
    assert_eq!(req.body["outbound_agents"], binding);
    assert_eq!(
        req.authorization.as_deref(),
        Some(format!("Bearer {}", crate::common::fakes::retell::KEY).as_str())
    );
    let (_, kind, account, _, ct) = stored(&app, &id).await.expect("stored import");
    assert_eq!(kind, "sip");
    assert!(account.contains("acme.pstn.twilio.com") && !account.contains(SIP_PASSWORD));
    assert!(!contains(&ct, SIP_PASSWORD));
    // Calls go out from the imported number.
    assert!(fake.phone("+14155550160").is_some());
}

#[tokio::test]
async fn a_twilio_number_is_imported_into_elevenlabs_and_assigned_to_the_agent() {
    use crate::common::fakes::elevenlabs::{FakeElevenLabs, KEY};
    let fake = FakeElevenLabs::start().await;
    let base = fake.base.clone();
    let app = TestApp::spawn_with(move |c| {
        c.voice_provider = "elevenlabs".into();
        c.elevenlabs_base_url = base;
        c.elevenlabs_api_key = Some(genied::config::Secret(KEY.into()));
    })
    .await;
    let u = app.standard().await;
    let (id, agent) = genie(&app, &u).await;
    // Without import data ElevenLabs still hands out no number.
    attach(&app, &u, &id, json!({}))
        .await
        .err(400, "VALIDATION_ERROR");
    let r = attach(
        &app,
        &u,
        &id,
        json!({"number": "+14155550180", "twilio": {"account_sid": SID, "auth_token": TOKEN}}),
    )
    .await;
    assert_eq!(r.ok(200)["genie"]["phone"]["number"], json!("+14155550180"));
    assert!(!r.body.to_string().contains(TOKEN));
    let reqs = fake.requests();
    let create = reqs
        .iter()
        .find(|r| r.method == "POST" && r.path == "/v1/convai/phone-numbers")
        .expect("the import reached ElevenLabs");
    assert_eq!(
        create.body,
        json!({"provider": "twilio", "phone_number": "+14155550180", "label": "Line", "sid": SID, "token": TOKEN})
    );
    assert_eq!(create.api_key.as_deref(), Some(KEY));
    let assign = reqs
        .iter()
        .find(|r| r.method == "PATCH" && r.path.starts_with("/v1/convai/phone-numbers/"))
        .expect("the number was assigned");
    assert_eq!(assign.body, json!({"agent_id": agent}));
    let pid = assign.path.trim_start_matches("/v1/convai/phone-numbers/");
    assert_eq!(fake.phone(pid).unwrap()["assigned_agent"], json!(agent));
    let (_, kind, _, _, ct) = stored(&app, &id).await.expect("stored import");
    assert_eq!(kind, "twilio");
    assert!(!contains(&ct, TOKEN));
}

#[tokio::test]
async fn the_local_provider_imports_nothing() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let (id, _) = genie(&app, &u).await;
    let r = attach(
        &app,
        &u,
        &id,
        json!({"number": "+14155550170", "twilio": {"account_sid": SID, "auth_token": TOKEN}}),
    )
    .await;
    r.err(400, "VALIDATION_ERROR");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cannot import")
    );
    assert_eq!(app.count("phone_imports").await, 0);
    // Without import data, attach-phone still takes a number from the pool.
    attach(&app, &u, &id, json!({})).await.ok(200);
}

#[tokio::test]
async fn a_sip_trunk_number_is_imported_into_vapi_through_its_own_trunk_credential() {
    let fake = FakeVapi::start().await;
    let app = vapi_app(&fake).await;
    let u = app.standard().await;
    let (id, agent) = genie(&app, &u).await;
    let sip = json!({"number": "+14155550190", "sip": {"termination_uri": "sip:acme.pstn.twilio.com:5060",
                     "username": "acme", "password": SIP_PASSWORD}});

    // The number cannot be made: the credential made for it is deleted again, nothing stored.
    fake.fail("create_phone_number", 400, 1);
    attach(&app, &u, &id, sip.clone())
        .await
        .err(502, "UPSTREAM_ERROR");
    assert_eq!(fake.credential_count(), 0);
    assert!(stored(&app, &id).await.is_none());
    fake.clear_requests();

    let r = attach(&app, &u, &id, sip).await;
    assert_eq!(r.ok(200)["genie"]["phone"]["number"], json!("+14155550190"));
    assert!(!r.body.to_string().contains(SIP_PASSWORD), "{}", r.body);
    let reqs = fake.requests();
    let cred = reqs
        .iter()
        .find(|r| r.method == "POST" && r.path == "/credential")
        .expect("a byo-sip-trunk credential was made");
    assert_eq!(
        cred.body,
        json!({"provider": "byo-sip-trunk", "name": "Line",
               "gateways": [{"ip": "acme.pstn.twilio.com", "port": 5060, "inboundEnabled": true, "outboundEnabled": true}],
               "outboundAuthenticationPlan": {"authUsername": "acme", "authPassword": SIP_PASSWORD}})
    );
    assert_eq!(
        cred.authorization.as_deref(),
        Some(format!("Bearer {}", crate::common::fakes::vapi::KEY).as_str())
    );
    let number = reqs
        .iter()
        .find(|r| r.method == "POST" && r.path == "/phone-number")
        .expect("the number was made on the credential");
    let cid = number.body["credentialId"].as_str().unwrap().to_string();
    assert_eq!(
        number.body,
        json!({"provider": "byo-phone-number", "number": "+14155550190", "credentialId": cid,
               "numberE164CheckEnabled": true, "assistantId": agent, "name": "Line"})
    );
    assert!(fake.credential(&cid).is_some());
    let (_, kind, account, _, ct) = stored(&app, &id).await.expect("stored import");
    assert_eq!(kind, "sip");
    assert!(account.contains("acme.pstn.twilio.com") && !account.contains(SIP_PASSWORD));
    assert!(!contains(&ct, SIP_PASSWORD));

    // Released: the number, then the credential made for it.
    app.call(
        &u.token,
        "genies",
        "release-phone",
        Some(json!(id)),
        json!({}),
    )
    .await
    .ok(200);
    let ext = req_id(&fake);
    assert!(fake.phone(&ext).is_none());
    assert!(
        fake.credential(&cid).is_none(),
        "the trunk credential went with it"
    );
    let order: Vec<String> = fake
        .requests()
        .into_iter()
        .filter(|r| r.method == "DELETE")
        .map(|r| r.path)
        .collect();
    assert_eq!(
        order,
        vec![format!("/phone-number/{ext}"), format!("/credential/{cid}")]
    );
}

#[tokio::test]
async fn a_sip_trunk_number_is_imported_into_elevenlabs_with_its_outbound_trunk() {
    use crate::common::fakes::elevenlabs::{FakeElevenLabs, KEY};
    let fake = FakeElevenLabs::start().await;
    let base = fake.base.clone();
    let app = TestApp::spawn_with(move |c| {
        c.voice_provider = "elevenlabs".into();
        c.elevenlabs_base_url = base;
        c.elevenlabs_api_key = Some(genied::config::Secret(KEY.into()));
    })
    .await;
    let u = app.standard().await;
    let (id, agent) = genie(&app, &u).await;
    let r = attach(
        &app,
        &u,
        &id,
        json!({"number": "+14155550185", "sip": {"termination_uri": "acme.pstn.twilio.com",
               "username": "acme", "password": SIP_PASSWORD}}),
    )
    .await;
    assert_eq!(r.ok(200)["genie"]["phone"]["number"], json!("+14155550185"));
    assert!(!r.body.to_string().contains(SIP_PASSWORD));
    let reqs = fake.requests();
    let create = reqs
        .iter()
        .find(|r| r.method == "POST" && r.path == "/v1/convai/phone-numbers")
        .expect("the import reached ElevenLabs");
    assert_eq!(
        create.body,
        json!({"provider": "sip_trunk", "phone_number": "+14155550185", "label": "Line",
               "supports_inbound": true, "supports_outbound": true,
               "outbound_trunk_config": {"address": "acme.pstn.twilio.com",
                   "credentials": {"username": "acme", "password": SIP_PASSWORD}}})
    );
    assert_eq!(create.api_key.as_deref(), Some(KEY));
    let assign = reqs
        .iter()
        .find(|r| r.method == "PATCH" && r.path.starts_with("/v1/convai/phone-numbers/"))
        .expect("the number was assigned");
    assert_eq!(assign.body, json!({"agent_id": agent}));
    let pid = assign.path.trim_start_matches("/v1/convai/phone-numbers/");
    let held = fake.phone(pid).unwrap();
    assert_eq!(held["assigned_agent"], json!(agent));
    assert_eq!(held["provider"], json!("sip_trunk"));
    assert!(!held.to_string().contains(SIP_PASSWORD));
    let (_, kind, _, _, ct) = stored(&app, &id).await.expect("stored import");
    assert_eq!(kind, "sip");
    assert!(!contains(&ct, SIP_PASSWORD));

    // Without credentials the trunk is taken by address (ACL), and the body says no more.
    let (id2, _) = genie(&app, &u).await;
    attach(
        &app,
        &u,
        &id2,
        json!({"number": "+14155550186", "sip": {"termination_uri": "10.0.0.5"}}),
    )
    .await
    .ok(200);
    let create = fake
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path == "/v1/convai/phone-numbers")
        .nth(1)
        .unwrap();
    assert_eq!(
        create.body["outbound_trunk_config"],
        json!({"address": "10.0.0.5"})
    );
}
