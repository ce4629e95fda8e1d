//! `GET /v1/openapi.json`: served without auth, complete (every action, every REST route),
//! internally consistent (every `$ref` resolves), and in step with the dispatcher.

use std::collections::BTreeSet;

use genied::api::action::Id;
use genied::http::openapi::ERROR_CODES;
use reqwest::Method;
use serde_json::{Value, json};

use crate::common::*;

/// One row of the action tables, with its resource.
struct Row {
    resource: &'static str,
    action: &'static str,
    id: Id,
}

/// Every action of every table, in the order the document lists them (resources by name).
fn actions() -> Vec<Row> {
    let mut tables = genied::api::RESOURCES.to_vec();
    tables.sort_by_key(|r| r.name);
    tables
        .into_iter()
        .flat_map(|r| {
            r.actions.iter().map(|a| Row {
                resource: r.name,
                action: a.name,
                id: a.id,
            })
        })
        .collect()
}

fn resource_names() -> Vec<&'static str> {
    genied::api::RESOURCES.iter().map(|r| r.name).collect()
}

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
    assert_eq!(res_enum, &json!(resource_names()));

    // One envelope per table row, and every resource has some.
    let one_of = doc["components"]["schemas"]["Envelope"]["oneOf"]
        .as_array()
        .unwrap();
    let rows = actions();
    assert_eq!(one_of.len(), rows.len());
    let mut seen = BTreeSet::new();
    for (env, act) in one_of.iter().zip(&rows) {
        let env = resolve(doc, env);
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
        assert!(!r.actions.is_empty(), "no actions for {}", r.name);
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
            .map(|e| resolve(doc, e))
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

/// Every row of the action tables reaches a handler that knows the action: dispatch answers
/// anything but `INVALID_ACTION` (which now comes only from a handler's own fallback), and
/// names outside the tables are refused before any handler runs.
#[tokio::test]
async fn every_table_row_reaches_its_handler() {
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
    let probe = |resource: &'static str, action: &str| genied::api::ActionRequest {
        resource,
        action: action.to_string(),
        id: None,
        data: json!({}),
    };
    let mut refused = Vec::new();
    for row in actions() {
        if let Err(e) = genied::api::dispatch(&ctx, &probe(row.resource, row.action)).await
            && e.code() == "INVALID_ACTION"
        {
            refused.push(format!("{} {}", row.resource, row.action));
        }
    }
    assert!(
        refused.is_empty(),
        "table rows without a handler: {refused:?}"
    );
    for r in genied::api::RESOURCES {
        let e = genied::api::dispatch(&ctx, &probe(r.name, "no-such-action"))
            .await
            .unwrap_err();
        assert_eq!(e.code(), "INVALID_ACTION", "{}", r.name);
    }
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
        .zip(actions())
    {
        let data = resolve(doc, &resolve(doc, env)["properties"]["data"]);
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

/// Checks `value` against `schema` (the subset of JSON Schema the document uses: `$ref`,
/// `type`, `const`, `enum`, `required`, `properties`, `items`, `oneOf`/`anyOf`).
fn conforms(doc: &Value, schema: &Value, value: &Value, at: &str) -> Result<(), String> {
    let schema = resolve(doc, schema);
    if let Some(c) = schema.get("const")
        && c != value
    {
        return Err(format!("{at}: {value} is not the const {c}"));
    }
    if let Some(e) = schema["enum"].as_array()
        && !e.contains(value)
    {
        return Err(format!("{at}: {value} is not one of {e:?}"));
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(alts) = schema[key].as_array() {
            let errs: Vec<String> = alts
                .iter()
                .filter_map(|a| conforms(doc, a, value, at).err())
                .collect();
            if errs.len() == alts.len() {
                return Err(format!("{at}: no {key} alternative fits: {errs:?}"));
            }
        }
    }
    let fits = |ty: &str| match ty {
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        _ => false,
    };
    let ok = match &schema["type"] {
        Value::String(t) => fits(t),
        Value::Array(ts) => ts.iter().any(|t| fits(t.as_str().unwrap())),
        _ => true,
    };
    if !ok {
        return Err(format!("{at}: {value} is not of type {}", schema["type"]));
    }
    if let Some(obj) = value.as_object() {
        for r in schema["required"].as_array().into_iter().flatten() {
            let r = r.as_str().unwrap();
            if !obj.contains_key(r) {
                return Err(format!("{at}: required member {r} missing"));
            }
        }
        for (k, s) in schema["properties"].as_object().into_iter().flatten() {
            if let Some(v) = obj.get(k) {
                conforms(doc, s, v, &format!("{at}.{k}"))?;
            }
        }
    }
    if let (Some(items), Some(arr)) = (schema.get("items"), value.as_array()) {
        for (i, v) in arr.iter().enumerate() {
            conforms(doc, items, v, &format!("{at}[{i}]"))?;
        }
    }
    Ok(())
}

/// The REST operation of an action: (path, method).
fn operation<'a>(doc: &'a Value, path: &str, method: &str) -> &'a Value {
    let op = &doc["paths"][path][method];
    assert!(op.is_object(), "no {method} {path}");
    op
}

/// The schema an operation documents for `status`.
fn response_schema(op: &Value, status: u16) -> &Value {
    let r = &op["responses"][status.to_string()];
    assert!(
        r.is_object(),
        "status {status} not documented on {}",
        op["operationId"]
    );
    &r["content"]["application/json"]["schema"]
}

/// Real answers of the main actions fit the response schema their REST operation documents,
/// with the documented success status; the typed records carry their members.
#[tokio::test]
async fn responses_match_their_documented_schemas() {
    let app = TestApp::spawn_with(|c| c.job_poll_ms = 3_600_000).await;
    let u = app.standard().await;
    let doc = genied::http::openapi::document();
    let t = &u.token;
    let mut checked = 0;
    let mut check = |label: &str, op: &Value, resp: &Resp| {
        let schema = response_schema(op, resp.status);
        if let Err(e) = conforms(doc, schema, &resp.body, "$") {
            panic!("{label}: {e}\nbody: {}", resp.body);
        }
        assert_ne!(
            schema["$ref"], "#/components/schemas/Success",
            "{label}: answer not typed"
        );
        checked += 1;
    };
    let post = |p: &str| operation(doc, p, "post");

    let r = app
        .call(
            t,
            "genies",
            "create",
            None,
            json!({"genieName": "Typed", "category": "Sales"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    check("genies create", post("/v1/genies"), &r);
    let gid = r.body["data"]["genie"]["id"].as_str().unwrap().to_string();
    let r = app
        .request(Method::GET, &format!("/v1/genies/{gid}"), Some(t), None)
        .await;
    check("genies get", operation(doc, "/v1/genies/{id}", "get"), &r);
    let r = app.request(Method::GET, "/v1/genies", Some(t), None).await;
    check("genies list", operation(doc, "/v1/genies", "get"), &r);
    let r = app.call(t, "genies", "all", None, json!({})).await;
    check("genies all", post("/v1/genies"), &r);

    let r = app
        .call(
            t,
            "knowledge-base",
            "create",
            None,
            json!({"title": "Doc", "content": "Body text."}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    check("documents create", post("/v1/knowledge-base"), &r);
    let did = r.body["data"]["document"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    app.run_jobs().await;
    let r = app
        .request(
            Method::GET,
            &format!("/v1/knowledge-base/{did}"),
            Some(t),
            None,
        )
        .await;
    check(
        "documents get",
        operation(doc, "/v1/knowledge-base/{id}", "get"),
        &r,
    );
    let r = app
        .request(Method::GET, "/v1/knowledge-base", Some(t), None)
        .await;
    check(
        "documents list",
        operation(doc, "/v1/knowledge-base", "get"),
        &r,
    );

    let r = app
        .call(
            t,
            "leads",
            "create",
            None,
            json!({"agent_id": gid, "name": "Ann", "address": {"city": "Rome"}}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    check("leads create", post("/v1/leads"), &r);
    let lid = r.body["data"]["lead"]["id"].as_i64().unwrap();
    for action in ["all", "list", "stats"] {
        let r = app.call(t, "leads", action, None, json!({})).await;
        check(&format!("leads {action}"), post("/v1/leads"), &r);
    }
    let r = app
        .request(Method::GET, &format!("/v1/leads/{lid}"), Some(t), None)
        .await;
    check("leads get", operation(doc, "/v1/leads/{id}", "get"), &r);
    let r = app
        .call(
            t,
            "leads",
            "log",
            Some(json!(lid)),
            json!({"type": "call", "description": "rang"}),
        )
        .await;
    check("leads log", post("/v1/leads/{id}/log"), &r);
    let r = app
        .call(t, "leads", "getLogs", Some(json!(lid)), json!({}))
        .await;
    check("leads getLogs", post("/v1/leads/{id}/getLogs"), &r);

    let r = app
        .call(t, "api-keys", "create", None, json!({"name": "k"}))
        .await;
    check("api-keys create", post("/v1/api-keys"), &r);
    let kid = r.body["data"]["api_key"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = app
        .request(Method::GET, "/v1/api-keys", Some(t), None)
        .await;
    check("api-keys list", operation(doc, "/v1/api-keys", "get"), &r);
    let r = app
        .request(
            Method::PATCH,
            &format!("/v1/api-keys/{kid}"),
            Some(t),
            Some(json!({})),
        )
        .await;
    check(
        "api-keys revoke",
        operation(doc, "/v1/api-keys/{id}", "patch"),
        &r,
    );

    let r = app
        .call(
            t,
            "worker-genies",
            "create",
            None,
            json!({"name": "W", "soul_prompt": "Summarise."}),
        )
        .await;
    check("worker-genies create", post("/v1/worker-genies"), &r);
    let wid = r.body["data"]["worker_genie"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = app
        .call(t, "worker-genies", "run", Some(json!(wid)), json!({}))
        .await;
    assert_eq!(r.status, 202, "{}", r.body);
    check("worker-genies run", post("/v1/worker-genies/{id}/run"), &r);
    let r = app
        .request(Method::GET, "/v1/worker-genies", Some(t), None)
        .await;
    check(
        "worker-genies list",
        operation(doc, "/v1/worker-genies", "get"),
        &r,
    );
    let r = app.call(t, "worker-genies", "runs", None, json!({})).await;
    check("worker-genies runs", post("/v1/worker-genies"), &r);
    let r = app
        .call(
            t,
            "worker-genies",
            "store-credential",
            None,
            json!({"name": "crm", "credential_type": "bearer_token", "value": "s3cr3t-value"}),
        )
        .await;
    check("store-credential", post("/v1/worker-genies"), &r);
    let r = app
        .call(t, "worker-genies", "list-credentials", None, json!({}))
        .await;
    check("list-credentials", post("/v1/worker-genies"), &r);

    let r = app
        .call(t, "qr-code", "create", None, json!({"genie_id": gid}))
        .await;
    check("qr-code create", post("/v1/qr-code"), &r);
    let r = app.request(Method::GET, "/v1/qr-code", Some(t), None).await;
    check("qr-code list", operation(doc, "/v1/qr-code", "get"), &r);

    let r = app
        .call(
            t,
            "conversations",
            "create",
            None,
            json!({"genieId": gid, "transcript": [{"role": "user", "message": "hi"}]}),
        )
        .await;
    check("conversations create", post("/v1/conversations"), &r);
    let cid = r.body["data"]["conversation"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = app
        .request(
            Method::GET,
            &format!("/v1/conversations/{cid}"),
            Some(t),
            None,
        )
        .await;
    check(
        "conversations get",
        operation(doc, "/v1/conversations/{id}", "get"),
        &r,
    );

    let r = app
        .request(
            Method::DELETE,
            &format!("/v1/knowledge-base/{did}"),
            Some(t),
            None,
        )
        .await;
    check(
        "documents delete",
        operation(doc, "/v1/knowledge-base/{id}", "delete"),
        &r,
    );
    let r = app
        .request(Method::DELETE, &format!("/v1/genies/{gid}"), Some(t), None)
        .await;
    check(
        "genies delete",
        operation(doc, "/v1/genies/{id}", "delete"),
        &r,
    );
    assert_eq!(checked, 29, "answers checked");
}

/// The statuses an operation really answers are documented on it: login's 401, the 201 of a
/// create, the 202 of a queued run, 404 of an absent record, 413 of an oversized body.
#[tokio::test]
async fn operations_document_the_statuses_they_answer() {
    let app = TestApp::spawn_with(|c| c.job_poll_ms = 3_600_000).await;
    let u = app.standard().await;
    let doc = genied::http::openapi::document();
    let documented = |path: &str, method: &str, resp: &Resp| {
        let op = operation(doc, path, method);
        let schema = response_schema(op, resp.status);
        conforms(doc, schema, &resp.body, "$")
            .unwrap_or_else(|e| panic!("{method} {path} {}: {e}", resp.status));
    };

    let r = app
        .request(
            Method::POST,
            "/v1/auth/login",
            None,
            Some(json!({"email": u.email, "password": "not the password"})),
        )
        .await;
    r.err(401, "INVALID_CREDENTIALS");
    documented("/v1/auth/login", "post", &r);
    let r = app
        .request(
            Method::POST,
            "/v1/auth/login",
            None,
            Some(json!({"email": 1})),
        )
        .await;
    assert_eq!(r.status, 400);
    documented("/v1/auth/login", "post", &r);
    let r = app
        .request(
            Method::POST,
            "/v1/auth/refresh",
            None,
            Some(json!({"refresh_token": "nope"})),
        )
        .await;
    assert_eq!(r.status, 401);
    documented("/v1/auth/refresh", "post", &r);
    let r = app
        .request(Method::POST, "/v1/auth/logout", None, None)
        .await;
    assert_eq!(r.status, 401);
    documented("/v1/auth/logout", "post", &r);

    let absent = "/v1/genies/00000000-0000-4000-8000-000000000000";
    let r = app.request(Method::GET, absent, Some(&u.token), None).await;
    assert_eq!(r.status, 404);
    documented("/v1/genies/{id}", "get", &r);
    let r = app
        .request(Method::GET, "/v1/genies/not-a-uuid", Some(&u.token), None)
        .await;
    r.err(400, "VALIDATION_ERROR");
    documented("/v1/genies/{id}", "get", &r);
    let r = app.request(Method::GET, "/v1/genies", None, None).await;
    r.err(401, "UNAUTHORIZED");
    documented("/v1/genies", "get", &r);
    let big = "x".repeat(app.state.config.max_body_bytes + 1);
    let r = app
        .request(
            Method::POST,
            "/v1/genies",
            Some(&u.token),
            Some(json!({"action": "create", "data": {"genieName": big}})),
        )
        .await;
    r.err(413, "PAYLOAD_TOO_LARGE");
    documented("/v1/genies", "post", &r);
    let r = app
        .call(&u.token, "leads", "all", None, json!({"adminMode": true}))
        .await;
    r.err(403, "FORBIDDEN");
    documented("/v1/leads", "post", &r);

    // Every REST operation of an action documents the common errors, and its success status
    // agrees with what the table says the action answers.
    let mut ops = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        if !path.starts_with("/v1/")
            || path.contains("{resource}")
            || path.starts_with("/v1/auth")
            || path == "/v1/openapi.json"
        {
            continue;
        }
        for (method, op) in item.as_object().unwrap() {
            for s in ["400", "401", "403", "404", "429", "500"] {
                assert!(op["responses"][s].is_object(), "{method} {path} lacks {s}");
            }
            let body = op.get("requestBody").is_some();
            assert_eq!(
                op["responses"]["413"].is_object(),
                body,
                "{method} {path} 413"
            );
            ops += 1;
        }
    }
    assert!(ops > 100, "only {ops} REST operations");
    assert!(doc["paths"]["/v1/worker-genies/{id}/run"]["post"]["responses"]["202"].is_object());
    assert!(doc["paths"]["/v1/api-keys"]["post"]["responses"]["201"].is_object());
}

/// What typed-client generators need: no boolean schemas, unique model and operation names.
#[tokio::test]
async fn document_suits_typed_client_generators() {
    let doc = genied::http::openapi::document();
    fn walk(v: &Value, at: &str, bad: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    let schema_list =
                        matches!(k.as_str(), "oneOf" | "anyOf" | "allOf" | "prefixItems");
                    let schema_slot = matches!(k.as_str(), "items" | "not" | "contains");
                    if schema_slot && x.is_boolean() {
                        bad.push(format!("{at}.{k}"));
                    }
                    if schema_list {
                        for (i, a) in x.as_array().into_iter().flatten().enumerate() {
                            if a.is_boolean() {
                                bad.push(format!("{at}.{k}[{i}]"));
                            }
                        }
                    }
                    if k == "properties" || k == "$defs" || k == "patternProperties" {
                        for (p, s) in x.as_object().into_iter().flatten() {
                            if s.is_boolean() {
                                bad.push(format!("{at}.{k}.{p}"));
                            }
                        }
                    }
                    walk(x, &format!("{at}.{k}"), bad);
                }
            }
            Value::Array(a) => a
                .iter()
                .enumerate()
                .for_each(|(i, x)| walk(x, &format!("{at}[{i}]"), bad)),
            _ => {}
        }
    }
    let mut bad = Vec::new();
    walk(doc, "$", &mut bad);
    for (name, s) in doc["components"]["schemas"].as_object().unwrap() {
        if s.is_boolean() {
            bad.push(name.clone());
        }
    }
    assert!(bad.is_empty(), "boolean schemas at {bad:?}");

    // Generators fold names to identifiers: two names that fold alike are one model.
    let fold = |s: &str| {
        s.chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_lowercase()
    };
    let mut models = BTreeSet::new();
    for name in doc["components"]["schemas"].as_object().unwrap().keys() {
        assert!(models.insert(fold(name)), "model name {name} collides");
        assert!(
            !name.chars().last().unwrap().is_ascii_digit(),
            "numbered duplicate {name}"
        );
    }
    let mut op_ids = BTreeSet::new();
    for item in doc["paths"].as_object().unwrap().values() {
        for op in item
            .as_object()
            .unwrap()
            .values()
            .filter(|o| o.get("operationId").is_some())
        {
            let id = op["operationId"].as_str().unwrap();
            assert!(op_ids.insert(fold(id)), "operationId {id} twice");
        }
    }
    // The main records are described, and answers are wrapped in {success, data}.
    for rec in [
        "Genie",
        "GenieSummary",
        "Document",
        "Lead",
        "Conversation",
        "ApiKey",
        "WorkerGenie",
        "WorkerRun",
        "Credential",
        "QrCode",
    ] {
        assert!(
            doc["components"]["schemas"][rec]["properties"].is_object(),
            "no {rec}"
        );
    }
    let create = &doc["components"]["schemas"]["GeniesCreateResponse"];
    assert_eq!(create["required"], json!(["success", "data"]));
    assert_eq!(
        create["properties"]["data"]["properties"]["genie"]["$ref"],
        "#/components/schemas/Genie"
    );
}

/// The `users` answers (#21) match the schemas the document gives them.
#[tokio::test]
async fn users_answers_match_their_documented_schemas() {
    let app = TestApp::spawn().await;
    let admin = app.admin().await;
    let other = app.standard().await;
    let doc = genied::http::openapi::document();
    let t = &admin.token;
    let check = |label: &str, op: &Value, resp: &Resp| {
        let schema = response_schema(op, resp.status);
        assert_ne!(
            schema["$ref"], "#/components/schemas/Success",
            "{label}: answer not typed"
        );
        if let Err(e) = conforms(doc, schema, &resp.body, "$") {
            panic!("{label}: {e}\nbody: {}", resp.body);
        }
    };
    let r = app.request(Method::GET, "/v1/users", Some(t), None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    check("users list", operation(doc, "/v1/users", "get"), &r);
    let r = app
        .request(
            Method::GET,
            &format!("/v1/users/{}", other.id),
            Some(t),
            None,
        )
        .await;
    check("users get", operation(doc, "/v1/users/{id}", "get"), &r);
    let r = app
        .call(
            t,
            "users",
            "invite",
            None,
            json!({"email": "typed@example.test"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    check("users invite", operation(doc, "/v1/users", "post"), &r);
    let r = app
        .request(
            Method::DELETE,
            &format!("/v1/users/{}", other.id),
            Some(t),
            None,
        )
        .await;
    check(
        "users delete",
        operation(doc, "/v1/users/{id}", "delete"),
        &r,
    );
}
