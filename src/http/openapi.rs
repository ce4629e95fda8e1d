//! The OpenAPI 3.1 document of the whole API, served without auth at `GET /v1/openapi.json`.
//!
//! Request schemas come from the handlers' own typed requests (`#[derive(JsonSchema)]` next
//! to `#[derive(Deserialize)]`), so a changed member changes the document. The operations,
//! their `id`, their request and the errors they may answer come from the resources' action
//! tables (`api::RESOURCES`, see `api::action`), which dispatch reads too. Answers are described in
//! `records` (written by hand, since replies are built with `json!`) and checked against real
//! answers by the tests and by the generated client of `tests/client/check.sh`; the document
//! is shaped for typed-client generators: no boolean schemas, one name per model, one
//! operation per REST route and action.

use std::sync::OnceLock;

use axum::Json;
use axum::response::{IntoResponse, Response};
use schemars::generate::{SchemaGenerator, SchemaSettings};
use schemars::transform::ReplaceBoolSchemas;

use serde_json::{Map, Value, json};

mod records;

use crate::api::action::{Action, Id};
use crate::api::{self};

/// One row of an action table, with its resource.
#[derive(Clone, Copy)]
struct Act {
    resource: &'static str,
    action: &'static str,
    spec: &'static Action,
}

/// Every action of every table: resources by name, actions in table order.
fn actions() -> impl Iterator<Item = Act> {
    let mut tables = api::RESOURCES.to_vec();
    tables.sort_by_key(|r| r.name);
    tables.into_iter().flat_map(|r| {
        r.actions.iter().map(move |spec| Act {
            resource: r.name,
            action: spec.name,
            spec,
        })
    })
}

/// Every error code the server sends (docs/api.md's error table, plus `AGENT_NOT_FOUND`).
pub const ERROR_CODES: &[&str] = &[
    "VALIDATION_ERROR",
    "INVALID_RESOURCE",
    "INVALID_ACTION",
    "UNAUTHORIZED",
    "INVALID_TOKEN",
    "INVALID_CREDENTIALS",
    "INVALID_KEY_PREFIX",
    "KEY_NOT_FOUND",
    "FORBIDDEN",
    "NOT_FOUND",
    "AGENT_NOT_FOUND",
    "METHOD_NOT_ALLOWED",
    "REQUEST_TIMEOUT",
    "CONFLICT",
    "PAYLOAD_TOO_LARGE",
    "RATE_LIMIT_EXCEEDED",
    "INTERNAL_ERROR",
    "UPSTREAM_ERROR",
];

const ERROR_STATUSES: &[(&str, &str)] = &[
    (
        "400",
        "Invalid input (VALIDATION_ERROR, INVALID_RESOURCE, INVALID_ACTION)",
    ),
    ("401", "Missing or invalid credentials"),
    ("403", "Not allowed"),
    ("404", "Record or route absent"),
    ("405", "Method not allowed"),
    ("408", "Request timed out"),
    ("409", "Conflict"),
    ("413", "Payload too large"),
    ("429", "Rate limit exceeded (see Retry-After)"),
    ("500", "Internal error"),
    ("502", "Upstream service failed"),
    (
        "503",
        "A storage backend (the S3 document store) cannot be reached right now; nothing was changed (SERVICE_UNAVAILABLE)",
    ),
];

fn r(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

/// Error responses for the given statuses.
fn errors(statuses: &[&str]) -> Map<String, Value> {
    ERROR_STATUSES
        .iter()
        .filter(|(s, _)| statuses.contains(s))
        .map(|(s, desc)| {
            (
                s.to_string(),
                json!({"description": desc, "content": {"application/json": {"schema": r("Error")}}}),
            )
        })
        .collect()
}

/// The generic routes answer every documented status.
fn responses(success: &[&str]) -> Value {
    let mut m = Map::new();
    for s in success {
        m.insert(
            s.to_string(),
            json!({"description": "Success envelope",
                   "content": {"application/json": {"schema": r("Success")}}}),
        );
    }
    let all: Vec<&str> = ERROR_STATUSES.iter().map(|(s, _)| *s).collect();
    m.extend(errors(&all));
    Value::Object(m)
}

/// The error statuses one action really answers: every authenticated action can meet
/// 400 (input), 401 (credentials), 403 (role, admin options, consumers writing), 404 (the
/// record or a record it names), 408 (request timeout), 429 (per-key rate limit) and 500;
/// 413 needs a body; 409 and 502 only where a uniqueness/state rule or a provider is involved.
fn action_errors(act: &Act, body: bool) -> Vec<&'static str> {
    let mut out = vec!["400", "401", "403", "404", "408", "429", "500"];
    if body {
        out.push("413");
    }
    if act.spec.conflict {
        out.push("409");
    }
    if act.spec.upstream {
        out.push("502");
    }
    if act.spec.unavailable {
        out.push("503");
    }
    out.sort_unstable();
    out
}

fn pascal(s: &str) -> String {
    s.split(['-', '_'])
        .map(|w| {
            let mut c = w.chars();
            match c.next() {
                Some(f) => f.to_uppercase().chain(c).collect(),
                None => String::new(),
            }
        })
        .collect()
}

fn snake(s: &str) -> String {
    let mut out = String::new();
    for ch in s.chars() {
        match ch {
            '-' => out.push('_'),
            c if c.is_ascii_uppercase() => {
                out.push('_');
                out.push(c.to_ascii_lowercase());
            }
            c => out.push(c),
        }
    }
    out
}

/// `{Resource}{Act}` in PascalCase, the stem of an action's component names.
fn stem(act: &Act) -> String {
    format!("{}{}", pascal(act.resource), pascal(act.action))
}

fn json_body(schema: Value, required: bool) -> Value {
    json!({"required": required, "content": {"application/json": {"schema": schema}}})
}

/// Follows one `$ref` (and an `anyOf` of a ref and null, how schemars writes `Option<T>`).
fn resolve<'a>(schemas: &'a Map<String, Value>, v: &'a Value) -> &'a Value {
    if let Some(name) = v["$ref"]
        .as_str()
        .and_then(|r| r.strip_prefix("#/components/schemas/"))
    {
        return schemas.get(name).unwrap_or(v);
    }
    if let Some(inner) = v["anyOf"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x.get("$ref").is_some()))
    {
        return resolve(schemas, inner);
    }
    v
}

/// Query parameters of a REST `GET`: the scalar (and scalar-array) members of the action's
/// data and of its `filters`, which the REST adapter fills from the query string.
fn query_params(schemas: &Map<String, Value>, data: &Value) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    let mut add = |props: &Map<String, Value>| {
        for (name, p) in props {
            let p = resolve(schemas, p);
            let ty = |v: &Value| match &v["type"] {
                Value::String(t) => Some(t.clone()),
                Value::Array(ts) => ts
                    .iter()
                    .filter_map(Value::as_str)
                    .find(|t| *t != "null")
                    .map(str::to_string),
                _ => None,
            };
            let schema = match ty(p).as_deref() {
                Some(t @ ("string" | "integer" | "number" | "boolean")) => json!({"type": t}),
                Some("array") => match ty(&p["items"]).as_deref() {
                    Some(t @ ("string" | "integer")) => {
                        json!({"type": "array", "items": {"type": t}})
                    }
                    _ => continue,
                },
                _ => continue,
            };
            if out.iter().any(|q| q["name"] == name.as_str()) {
                continue;
            }
            out.push(json!({"name": name, "in": "query", "required": false, "schema": schema}));
        }
    };
    let data = resolve(schemas, data);
    if let Some(props) = data["properties"].as_object() {
        add(props);
        if let Some(f) = props.get("filters")
            && let Some(fp) = resolve(schemas, f)["properties"].as_object()
        {
            add(fp);
        }
    }
    out
}

/// The success and error responses of one action, typed where `records::response` knows
/// its data.
fn action_responses(act: &Act, body: bool) -> Value {
    let mut m = Map::new();
    match records::response(act.resource, act.action) {
        Some((status, _)) => {
            let schema = r(&format!("{}Response", stem(act)));
            m.insert(
                status.into(),
                json!({"description": "Success",
                       "content": {"application/json": {"schema": schema.clone()}}}),
            );
            // The one action with two success answers: done, or going on after its wait.
            if (act.resource, act.action) == ("users", "delete") {
                m.insert(
                    "202".into(),
                    json!({"description": "Accepted: the delete goes on",
                           "content": {"application/json": {"schema": schema}}}),
                );
            }
        }
        None => {
            m.insert(
                records::success_status(act.resource, act.action).into(),
                json!({"description": "Success",
                       "content": {"application/json": {"schema": r("Success")}}}),
            );
        }
    }
    m.extend(errors(&action_errors(act, body)));
    Value::Object(m)
}

/// One action's REST body: its `data` under `data` (the REST adapter's explicit form, so a
/// data member named `action` or `id` stays data).
fn rest_body(act: &Act, data: &Value, with_action: bool) -> Value {
    let mut props = Map::new();
    let mut required = vec!["data"];
    if with_action {
        props.insert("action".into(), json!({"const": act.action}));
        required.insert(0, "action");
    }
    props.insert("data".into(), data.clone());
    json!({"title": format!("{}Body", stem(act)), "type": "object",
           "required": required, "properties": props})
}

/// The REST-style operations of every resource, each with its typed request and response:
/// `GET /v1/{r}` (list), `POST /v1/{r}` (create and the other actions without an id),
/// `GET|PATCH|DELETE /v1/{r}/{id}` and `POST /v1/{r}/{id}/{action}`.
fn rest_paths(
    paths: &mut Map<String, Value>,
    schemas: &mut Map<String, Value>,
    data: &[(Act, Value)],
) {
    for table in api::RESOURCES {
        let resource = &table.name;
        let acts: Vec<&(Act, Value)> = data
            .iter()
            .filter(|(a, _)| a.resource == *resource)
            .collect();
        let find = |name: &str| acts.iter().find(|(a, _)| a.action == name).copied();
        let tag = json!([resource]);
        let ep = |a: &Act| snake(&format!("{}_{}", a.resource, a.action));
        let id_param = json!({"name": "id", "in": "path", "required": true,
                              "schema": {"type": "string"}});

        // GET /v1/{r}
        let mut collection = Map::new();
        if let Some((act, d)) = find(table.list_action) {
            collection.insert(
                "get".into(),
                json!({"operationId": ep(act), "tags": tag,
                       "summary": format!("`{}` {}", resource, act.action),
                       "parameters": query_params(schemas, d),
                       "responses": action_responses(act, false)}),
            );
        }
        // POST /v1/{r}: every action without an id; the body's `action` picks it.
        let no_id: Vec<&&(Act, Value)> = acts
            .iter()
            .filter(|(a, _)| a.spec.id != Id::Required)
            .collect();
        if !no_id.is_empty() {
            let mut variants = Vec::new();
            let mut ok: Map<String, Value> = Map::new();
            let mut ok_variants: Vec<(usize, String, Value)> = Vec::new();
            for (act, d) in &no_id {
                let name = format!("{}Body", stem(act));
                schemas.insert(name.clone(), rest_body(act, d, true));
                variants.push(r(&name));
                let (status, schema) = match records::response(act.resource, act.action) {
                    Some((s, _)) => (s, r(&format!("{}Response", stem(act)))),
                    None => (
                        records::success_status(act.resource, act.action),
                        r("Success"),
                    ),
                };
                let weight = match records::response(act.resource, act.action) {
                    Some((_, d)) => d["required"].as_array().map_or(0, Vec::len) + 1,
                    None => 0,
                };
                ok_variants.push((weight, status.to_string(), schema));
            }
            // Most specific answer first: a client decoding a union tries them in order.
            ok_variants.sort_by_key(|v| std::cmp::Reverse(v.0));
            for (_, status, schema) in ok_variants {
                let entry = ok.entry(status).or_insert_with(|| json!({"oneOf": []}));
                let list = entry["oneOf"].as_array_mut().expect("oneOf");
                if !list.contains(&schema) {
                    list.push(schema);
                }
            }
            let mut resp = Map::new();
            for (status, v) in ok {
                let schema = match v["oneOf"].as_array() {
                    Some(a) if a.len() == 1 => a[0].clone(),
                    _ => v,
                };
                resp.insert(
                    status,
                    json!({"description": "Success",
                    "content": {"application/json": {"schema": schema}}}),
                );
            }
            let mut errs = std::collections::BTreeSet::new();
            for (act, _) in &no_id {
                errs.extend(action_errors(act, true));
            }
            let errs: Vec<&str> = errs.into_iter().collect();
            resp.extend(errors(&errs));
            let body = if variants.len() == 1 {
                variants.remove(0)
            } else {
                json!({"oneOf": variants})
            };
            let names: Vec<&str> = no_id.iter().map(|(a, _)| a.action).collect();
            collection.insert(
                "post".into(),
                json!({"operationId": snake(&format!("{resource}_post")), "tags": tag,
                       "summary": format!("`{resource}` {}: the body's `action` picks one", names.join(", ")),
                       "requestBody": json_body(body, true),
                       "responses": resp}),
            );
        }
        if !collection.is_empty() {
            paths.insert(format!("/v1/{resource}"), Value::Object(collection));
        }

        // /v1/{r}/{id}
        let mut record = Map::new();
        if let Some((act, d)) = find("get").filter(|(a, _)| a.spec.id != Id::No) {
            let mut params = vec![id_param.clone()];
            params.extend(query_params(schemas, d));
            record.insert(
                "get".into(),
                json!({"operationId": ep(act), "tags": tag, "parameters": params,
                       "responses": action_responses(act, false)}),
            );
        }
        let patch = if *resource == "api-keys" {
            "revoke"
        } else {
            "update"
        };
        if let Some((act, d)) = find(patch).filter(|(a, _)| a.spec.id != Id::No) {
            let body = rest_body(act, d, false);
            record.insert(
                "patch".into(),
                json!({"operationId": ep(act), "tags": tag, "parameters": [id_param.clone()],
                       "requestBody": json_body(body, act.spec.data.is_some()),
                       "responses": action_responses(act, true)}),
            );
        }
        if let Some((act, _)) = find("delete").filter(|(a, _)| a.spec.id != Id::No) {
            record.insert(
                "delete".into(),
                json!({"operationId": ep(act), "tags": tag, "parameters": [id_param.clone()],
                       "responses": action_responses(act, false)}),
            );
        }
        if !record.is_empty() {
            paths.insert(format!("/v1/{resource}/{{id}}"), Value::Object(record));
        }

        // POST /v1/{r}/{id}/{action}
        for (act, d) in &acts {
            if act.spec.id == Id::No || ["get", "delete", patch].contains(&act.action) {
                continue;
            }
            let mut op = json!({"operationId": ep(act), "tags": tag,
                                "parameters": [id_param.clone()],
                                "responses": action_responses(act, act.spec.data.is_some())});
            if act.spec.data.is_some() {
                op["requestBody"] = json_body(rest_body(act, d, false), false);
            }
            paths.insert(
                format!("/v1/{resource}/{{id}}/{}", act.action),
                json!({"post": op}),
            );
        }
    }
}

fn build() -> Value {
    let mut settings = SchemaSettings::draft2020_12();
    settings.definitions_path = "/components/schemas".into();
    settings.meta_schema = None;
    // `true` schemas (what schemars writes for `serde_json::Value`) are valid JSON Schema but
    // typed-client generators refuse them; `{}` says the same.
    let mut no_bools = ReplaceBoolSchemas::default();
    no_bools.skip_additional_properties = true;
    settings.transforms.push(Box::new(no_bools));
    let mut g = SchemaGenerator::new(settings);

    // One envelope schema per action, and each action's data schema for the REST routes.
    let mut envelopes = Vec::new();
    let mut envelope_schemas = Map::new();
    let mut data_schemas: Vec<(Act, Value)> = Vec::new();
    for act in actions() {
        let data = match act.spec.data {
            Some(f) => f(&mut g).to_value(),
            None => json!({"type": "object"}),
        };
        let mut required = vec!["resource", "action"];
        if act.spec.id == Id::Required {
            required.push("id");
        }
        let name = format!("{}Request", stem(&act));
        envelope_schemas.insert(
            name.clone(),
            json!({
                "title": name,
                "type": "object",
                "properties": {
                    "resource": {"const": act.resource},
                    "action": {"const": act.action},
                    "id": r("RecordId"),
                    "data": data,
                },
                "required": required,
            }),
        );
        envelopes.push(r(&name));
        data_schemas.push((act, data));
    }

    let mut schemas: Map<String, Value> = g.take_definitions(true).into_iter().collect();
    let login = g.subschema_for::<super::auth_routes::Login>().to_value();
    let refresh = g.subschema_for::<super::auth_routes::Refresh>().to_value();
    let forgot = g
        .subschema_for::<super::auth_routes::ForgotPassword>()
        .to_value();
    let reset = g
        .subschema_for::<super::auth_routes::ResetPassword>()
        .to_value();
    let confirm = g
        .subschema_for::<super::auth_routes::ConfirmEmail>()
        .to_value();
    let accept = g
        .subschema_for::<super::auth_routes::AcceptInvitation>()
        .to_value();
    let oidc_exchange = g
        .subschema_for::<super::auth_routes::OidcExchange>()
        .to_value();
    schemas.extend(g.take_definitions(true));
    schemas.extend(envelope_schemas);
    schemas.insert(
        "RecordId".into(),
        json!({"description": "A UUID, or a lead's integer id", "type": ["string", "integer"]}),
    );
    schemas.insert(
        "Success".into(),
        json!({"type": "object", "required": ["success", "data"],
               "properties": {"success": {"const": true}, "data": {"type": "object"}}}),
    );
    schemas.insert(
        "Error".into(),
        json!({"type": "object", "required": ["success", "error"],
               "properties": {"success": {"const": false},
                   "error": {"type": "object", "required": ["code", "message", "status"],
                       "properties": {"code": {"enum": ERROR_CODES},
                                      "message": {"type": "string"},
                                      "status": {"type": "integer"}}}}}),
    );
    schemas.insert(
        "Tokens".into(),
        json!({"type": "object", "required": ["success", "data"], "properties": {
            "success": {"const": true},
            "data": {"type": "object",
                "required": ["access_token", "refresh_token", "token_type", "expires_in"],
                "properties": {"access_token": {"type": "string"},
                               "refresh_token": {"type": "string"},
                               "token_type": {"const": "Bearer"},
                               "expires_in": {"type": "integer"}}}}}),
    );
    schemas.insert("Envelope".into(), json!({"oneOf": envelopes}));
    schemas.extend(records::records());
    for act in actions() {
        if let Some((_, data)) = records::response(act.resource, act.action) {
            schemas.insert(
                format!("{}Response", stem(&act)),
                json!({"type": "object", "required": ["success", "data"],
                       "properties": {"success": {"const": true}, "data": data}}),
            );
        }
    }

    let resources: Vec<&str> = api::RESOURCES.iter().map(|r| r.name).collect();
    let res_param = json!({"name": "resource", "in": "path", "required": true,
                           "schema": {"enum": resources}});
    let id_param =
        json!({"name": "id", "in": "path", "required": true, "schema": {"type": "string"}});
    let mut actions: Vec<&str> = actions().map(|a| a.action).collect();
    actions.sort_unstable();
    actions.dedup();
    let action_param = json!({"name": "action", "in": "path", "required": true,
                              "schema": {"enum": actions}});
    let any_object = json!({"type": "object"});
    let generic = json!(["generic"]);

    let mut paths: Map<String, Value> = serde_json::from_value(json!({
        "/v1": {"post": {
            "operationId": "envelope", "tags": generic,
            "summary": "Run one action on one resource",
            "requestBody": json_body(r("Envelope"), true),
            "responses": responses(&["200", "201", "202"]),
        }},
        "/v1/{resource}": {
            "parameters": [res_param],
            "get": {"operationId": "rest_list", "tags": generic, "summary": "`list` (or `all`)",
                    "responses": responses(&["200"])},
            "post": {"operationId": "rest_create", "tags": generic,
                     "summary": "The body's action (default `create`)",
                     "requestBody": json_body(any_object.clone(), true),
                     "responses": responses(&["200", "201", "202"])},
        },
        "/v1/{resource}/{id}": {
            "parameters": [res_param, id_param],
            "get": {"operationId": "rest_get", "tags": generic, "responses": responses(&["200"])},
            "patch": {"operationId": "rest_update", "tags": generic,
                      "requestBody": json_body(any_object.clone(), true),
                      "responses": responses(&["200"])},
            "delete": {"operationId": "rest_delete", "tags": generic,
                       "responses": responses(&["200"])},
        },
        "/v1/{resource}/{id}/{action}": {
            "parameters": [res_param, id_param, action_param],
            "post": {"operationId": "rest_action", "tags": generic,
                     "requestBody": json_body(any_object, false),
                     "responses": responses(&["200", "201", "202"])},
        },
        "/v1/auth/login": {"post": {
            "operationId": "login", "tags": ["auth"], "security": [],
            "requestBody": json_body(login, true),
            "responses": auth_responses(&["400", "401", "408", "413", "429", "500"]),
        }},
        "/v1/auth/refresh": {"post": {
            "operationId": "refresh", "tags": ["auth"], "security": [],
            "requestBody": json_body(refresh, true),
            "responses": auth_responses(&["400", "401", "408", "413", "500"]),
        }},
        "/v1/auth/logout": {"post": {
            "operationId": "logout", "tags": ["auth"],
            "responses": {
                "200": {"description": "Session revoked",
                        "content": {"application/json": {"schema": r("Success")}}},
                "401": errors(&["401"])["401"],
                "408": errors(&["408"])["408"],
                "500": errors(&["500"])["500"],
            },
        }},
        "/v1/auth/forgot-password": {"post": {
            "operationId": "forgot_password", "tags": ["auth"], "security": [],
            "summary": "Mail a one-time reset link; the same answer whether or not the address has an account",
            "requestBody": json_body(forgot, true),
            "responses": plain_responses("200", &["400", "408", "413", "429", "500"]),
        }},
        "/v1/auth/reset-password": {"post": {
            "operationId": "reset_password", "tags": ["auth"], "security": [],
            "summary": "Set a new password with a reset token; every session of the user is revoked",
            "requestBody": json_body(reset, true),
            "responses": plain_responses("200", &["400", "408", "413", "429", "500"]),
        }},
        "/v1/auth/confirm-email": {"post": {
            "operationId": "confirm_email", "tags": ["auth"], "security": [],
            "summary": "Finish an email change with the token mailed to the new address",
            "requestBody": json_body(confirm, true),
            "responses": plain_responses("200", &["400", "408", "409", "413", "429", "500"]),
        }},
        "/v1/auth/accept-invitation": {"post": {
            "operationId": "accept_invitation", "tags": ["auth"], "security": [],
            "summary": "Create the invited account with a password and sign it in",
            "requestBody": json_body(accept, true),
            "responses": {
                "201": {"description": "The new account's token pair, `profile` and `team_id`",
                        "content": {"application/json": {"schema": r("Tokens")}}},
                "400": errors(&["400"])["400"], "409": errors(&["409"])["409"],
                "429": errors(&["429"])["429"], "500": errors(&["500"])["500"],
            },
        }},
        "/v1/auth/config": {"get": {
            "operationId": "auth_config", "tags": ["auth"], "security": [],
            "summary": "What the sign-in page offers: `{password_min_length, oidc: {enabled, authorize_url}}`",
            "responses": plain_responses("200", &["500"]),
        }},
        "/v1/auth/oidc/authorize": {"get": {
            "operationId": "oidc_authorize", "tags": ["auth"], "security": [],
            "summary": "Redirect to the OpenID provider (PKCE, state, nonce); `?console=1` ends in the console",
            "parameters": [{"name": "console", "in": "query", "required": false, "schema": {"type": "string"}}],
            "responses": {
                "303": {"description": "To the provider's authorization endpoint"},
                "404": errors(&["404"])["404"], "429": errors(&["429"])["429"],
                "502": errors(&["502"])["502"],
            },
        }},
        "/v1/auth/oidc/callback": {"get": {
            "operationId": "oidc_callback", "tags": ["auth"], "security": [],
            "summary": "Where the provider sends the browser back: checks state, exchanges the code, validates the ID token, answers genied's token pair (or redirects to the console)",
            "parameters": [
                {"name": "code", "in": "query", "required": false, "schema": {"type": "string"}},
                {"name": "state", "in": "query", "required": true, "schema": {"type": "string"}},
            ],
            "responses": {
                "200": {"description": "A new token pair",
                        "content": {"application/json": {"schema": r("Tokens")}}},
                "303": {"description": "To `/console#oidc=<one-time code>` (sign-in started with `?console=1`)"},
                "400": errors(&["400"])["400"], "401": errors(&["401"])["401"],
                "403": errors(&["403"])["403"], "404": errors(&["404"])["404"],
                "502": errors(&["502"])["502"],
            },
        }},
        "/v1/auth/oidc/exchange": {"post": {
            "operationId": "oidc_exchange", "tags": ["auth"], "security": [],
            "summary": "Trade the console's one-time code for the token pair",
            "requestBody": json_body(oidc_exchange, true),
            "responses": auth_responses(&["400", "404", "429", "500"]),
        }},
        "/v1/openapi.json": {"get": {
            "operationId": "openapi", "tags": ["meta"], "security": [],
            "responses": {"200": {"description": "This document",
                "content": {"application/json": {"schema": {"type": "object"}}}}},
        }},
        "/healthz": {"get": {"operationId": "healthz", "tags": ["meta"], "security": [],
            "responses": {"200": {"description": "Alive",
                "content": {"application/json": {"schema": {"type": "object",
                    "properties": {"status": {"const": "ok"}}}}}}}}},
        "/readyz": {"get": {"operationId": "readyz", "tags": ["meta"], "security": [],
            "responses": {
                "200": {"description": "Database reachable",
                    "content": {"application/json": {"schema": {"type": "object"}}}},
                "503": {"description": "Database unreachable",
                    "content": {"application/json": {"schema": {"type": "object"}}}}}}},
    }))
    .expect("paths are an object");
    rest_paths(&mut paths, &mut schemas, &data_schemas);

    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "genied",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Self-hosted platform for managing voice AI agents. Every action is \
                `POST /v1` with the envelope `{resource, action, id?, data}` (the `Envelope` \
                union); the REST routes map onto the same actions and are listed per resource \
                with their typed requests and answers. Generated from the server's own request \
                types.",
        },
        "servers": [{"url": "/"}],
        "security": [{"bearer": []}, {"apiKey": []}],
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer",
                           "description": "A session access token or an API key"},
                "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
            },
        },
        "paths": paths,
    })
}

/// Login and refresh: the token pair, or the listed errors.
fn auth_responses(statuses: &[&str]) -> Value {
    let mut m = Map::new();
    m.insert(
        "200".into(),
        json!({"description": "A new token pair",
               "content": {"application/json": {"schema": r("Tokens")}}}),
    );
    m.extend(errors(statuses));
    Value::Object(m)
}

/// A success envelope with `status`, and the given error statuses.
fn plain_responses(status: &str, statuses: &[&str]) -> Value {
    let mut m = Map::new();
    m.insert(
        status.into(),
        json!({"description": "Success envelope",
               "content": {"application/json": {"schema": r("Success")}}}),
    );
    m.extend(errors(statuses));
    Value::Object(m)
}

/// The document, built once.
pub fn document() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(build)
}

pub async fn serve() -> Response {
    Json(document()).into_response()
}
