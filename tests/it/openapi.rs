//! `GET /v1/openapi.json`: served without auth, complete (every action, every REST route),
//! internally consistent (every `$ref` resolves), and in step with the dispatcher.

use std::collections::BTreeSet;

use genied::http::openapi::{ACTIONS, ERROR_CODES, Id};
use reqwest::Method;
use serde_json::{Value, json};

use crate::common::*;

fn refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("$ref", Value::String(s)) => out.push(s.clone()),
                    _ => refs(x, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
        _ => {}
    }
}

fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema["$ref"].as_str() {
        Some(r) => doc
            .pointer(r.trim_start_matches('#'))
            .unwrap_or_else(|| panic!("unresolved {r}")),
        None => schema,
    }
}

#[tokio::test]
async fn document_is_served_without_auth_and_is_complete() {
    let app = TestApp::spawn().await;
    let resp = app
        .request(Method::GET, "/v1/openapi.json", None, None)
        .await;
    assert_eq!(resp.status, 200, "{}", resp.body);
    let doc = &resp.body;
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc, genied::http::openapi::document());

    for path in [
        "/v1",
        "/v1/{resource}",
        "/v1/{resource}/{id}",
        "/v1/{resource}/{id}/{action}",
        "/v1/auth/login",
        "/v1/auth/refresh",
        "/v1/auth/logout",
        "/healthz",
        "/readyz",
    ] {
        assert!(doc["paths"][path].is_object(), "no path {path}");
    }
    for (path, method) in [
        ("/v1/{resource}", "get"),
        ("/v1/{resource}", "post"),
        ("/v1/{resource}/{id}", "get"),
        ("/v1/{resource}/{id}", "patch"),
        ("/v1/{resource}/{id}", "delete"),
        ("/v1/{resource}/{id}/{action}", "post"),
    ] {
        let op = &doc["paths"][path][method];
        assert!(op["responses"]["200"].is_object(), "{method} {path}");
        for s in ["400", "401", "404", "429", "500"] {
            assert_eq!(
                op["responses"][s]["content"]["application/json"]["schema"]["$ref"],
                "#/components/schemas/Error",
                "{method} {path} {s}"
            );
        }
    }
    // The resource parameter lists exactly the dispatcher's resources.
    let res_enum = &doc["paths"]["/v1/{resource}"]["parameters"][0]["schema"]["enum"];
    assert_eq!(res_enum, &json!(genied::api::RESOURCES));

    // One envelope per table row, and every resource has some.
    let one_of = doc["components"]["schemas"]["Envelope"]["oneOf"]
        .as_array()
        .unwrap();
    assert_eq!(one_of.len(), ACTIONS.len());
    let mut seen = BTreeSet::new();
    for (env, act) in one_of.iter().zip(ACTIONS) {
        assert_eq!(env["properties"]["resource"]["const"], act.resource);
        assert_eq!(env["properties"]["action"]["const"], act.action);
        let required: Vec<&str> = env["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(required.contains(&"id"), act.id == Id::Required);
        assert!(
            seen.insert((act.resource, act.action)),
            "duplicate row {} {}",
            act.resource,
            act.action
        );
    }
    for r in genied::api::RESOURCES {
        assert!(
            ACTIONS.iter().any(|a| a.resource == *r),
            "no actions for {r}"
        );
    }

    // Every $ref resolves inside the document.
    let mut all = Vec::new();
    refs(doc, &mut all);
    assert!(all.len() > 100, "too few refs: {}", all.len());
    for r in &all {
        assert!(r.starts_with("#/components/schemas/"), "{r}");
        assert!(
            doc.pointer(r.trim_start_matches('#')).is_some(),
            "unresolved {r}"
        );
    }

    // Typed requests carry their members: a few spot checks against the code's structs.
    let data_of = |res: &str, act: &str| {
        let env = one_of
            .iter()
            .find(|e| {
                e["properties"]["resource"]["const"] == res
                    && e["properties"]["action"]["const"] == act
            })
            .unwrap();
        resolve(doc, &env["properties"]["data"]).clone()
    };
    let key = data_of("api-keys", "create");
    assert!(key["properties"]["name"].is_object(), "{key}");
    let note = data_of("lead-notes", "create");
    assert!(note["properties"]["content"].is_object(), "{note}");
    let lead = data_of("leads", "create");
    assert_eq!(
        lead["properties"]["priority"]["enum"],
        json!(["low", "medium", "high", null])
    );
}

#[tokio::test]
async fn error_envelope_matches_the_documented_schema() {
    let app = TestApp::spawn().await;
    let user = app.standard().await;
    let doc = genied::http::openapi::document();
    let err = &doc["components"]["schemas"]["Error"];
    assert_eq!(
        err["properties"]["error"]["properties"]["code"]["enum"],
        json!(ERROR_CODES)
    );
    let cases = [
        app.call(&user.token, "nope", "all", None, json!({})).await,
        app.call(&user.token, "genies", "nope", None, json!({}))
            .await,
        app.request(Method::GET, "/v1/genies", None, None).await,
        app.request(Method::PUT, "/v1/genies", Some(&user.token), None)
            .await,
    ];
    for resp in cases {
        assert!(resp.status >= 400, "{}", resp.body);
        assert_eq!(resp.body["success"], false);
        assert!(
            ERROR_CODES.contains(&resp.code()),
            "undocumented code {}",
            resp.code()
        );
        assert_eq!(resp.body["error"]["status"], resp.status);
        assert!(resp.body["error"]["message"].is_string());
        let documented = doc["paths"]["/v1"]["post"]["responses"]
            .get(resp.status.to_string())
            .is_some();
        assert!(documented, "status {} not documented", resp.status);
    }
}

/// Every action the dispatcher accepts has a row in `openapi::ACTIONS`, and every row names an
/// action the resource accepts (same probe as `isolation::table_covers_every_action`).
#[tokio::test]
async fn table_covers_every_action() {
    let app = TestApp::spawn_with(|c| c.job_poll_ms = 3_600_000).await;
    let prober = app.standard().await;
    let ctx = genied::api::Ctx {
        app: app.state.clone(),
        principal: genied::auth::Principal {
            user_id: prober.id.clone(),
            role: prober.role,
            via: genied::auth::Via::Session {
                session_id: "probe".into(),
            },
        },
        ip: None,
    };
    let mut candidates = crate::isolation::candidate_actions();
    candidates.extend(ACTIONS.iter().map(|a| a.action.to_string()));
    let (mut missing, mut stale) = (Vec::new(), Vec::new());
    for resource in genied::api::RESOURCES {
        let covered: BTreeSet<&str> = ACTIONS
            .iter()
            .filter(|a| a.resource == *resource)
            .map(|a| a.action)
            .collect();
        for action in &candidates {
            let req = genied::api::ActionRequest {
                resource,
                action: action.clone(),
                id: None,
                data: json!({}),
            };
            let accepted = !matches!(
                genied::api::dispatch(&ctx, req).await,
                Err(e) if e.code == "INVALID_ACTION"
            );
            match (accepted, covered.contains(action.as_str())) {
                (true, false) => missing.push(format!("{resource} {action}")),
                (false, true) => stale.push(format!("{resource} {action}")),
                _ => {}
            }
        }
    }
    assert!(
        missing.is_empty(),
        "actions not in the document: {missing:?}"
    );
    assert!(stale.is_empty(), "documented actions refused: {stale:?}");
}

/// Where the document says a request admits no other members (`additionalProperties: false`),
/// the server refuses an unknown member with 400 `VALIDATION_ERROR`, and creates nothing.
#[tokio::test]
async fn closed_request_schemas_are_enforced() {
    let app = TestApp::spawn_with(|c| c.job_poll_ms = 3_600_000).await;
    let user = app.standard().await;
    let doc = genied::http::openapi::document();
    let before = app.count("activities").await;
    let mut checked = 0;
    for (env, act) in doc["components"]["schemas"]["Envelope"]["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .zip(ACTIONS)
    {
        let data = resolve(doc, &env["properties"]["data"]);
        if act.id != Id::No || data["additionalProperties"] != false {
            continue;
        }
        let resp = app
            .call(
                &user.token,
                act.resource,
                act.action,
                None,
                json!({"zzUnknownMember": 1}),
            )
            .await;
        resp.err(400, "VALIDATION_ERROR");
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} closed schemas checked");
    assert_eq!(app.count("activities").await, before);
}
