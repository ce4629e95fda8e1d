//! Hostile search terms against every free-text search of every resource, through the
//! envelope and the REST routes: never a 5xx; control characters and over-long terms are a
//! 400 `VALIDATION_ERROR` naming the member; everything else is literal text (FTS5 syntax,
//! LIKE wildcards, quotes, SQL), so a term finds exactly the records that contain it.

use std::collections::BTreeSet;

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::*;

/// Terms that must be matched literally. Each becomes part of one record's name.
const LITERAL: &[&str] = &[
    "%",
    "_",
    "\\",
    "%_\\",
    "100%",
    "a_b",
    "\"",
    "\"\"",
    "'",
    "''",
    "*",
    "ab*",
    "^x",
    "a:b",
    "name:zz",
    "NEAR(xy zw)",
    "AND",
    "OR",
    "NOT",
    "x OR y",
    "(p)",
    ")",
    "-minus",
    "+plus",
    "{c}",
    "[d]",
    "a.b",
    ";DROP TABLE leads;--",
    "日本語",
    "😀",
    "ÄÖ",
];

/// Terms refused with 400 (control characters, NUL first among them).
const REFUSED: &[&str] = &[
    "\0",
    "a\0b",
    "abc\0",
    "\u{1}",
    "x\u{7f}y",
    "\u{9b}",
    "tab\there",
];

fn record_name(i: usize, term: &str) -> String {
    format!("rec{i} {term} end")
}

/// The names (of `names`) a literal search for `term` must return: ASCII letters fold case.
fn expected(names: &[String], term: &str) -> BTreeSet<String> {
    let fold = |s: &str| s.to_ascii_lowercase();
    names
        .iter()
        .filter(|n| fold(n).contains(&fold(term)))
        .cloned()
        .collect()
}

fn names_of(items: &Value, key: &str) -> BTreeSet<String> {
    items
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {items}"))
        .iter()
        .map(|i| i[key].as_str().unwrap().to_string())
        .collect()
}

/// One search surface: how to ask for `term`, and where the names are in the answer.
struct Surface {
    label: &'static str,
    /// Envelope resource, action and where the term goes in `data`.
    resource: &'static str,
    action: &'static str,
    data: fn(&str) -> Value,
    /// The member the 400 must name.
    field: &'static str,
    /// REST list route and its query member (None: no REST list for this search).
    rest: Option<(&'static str, &'static str)>,
    items: &'static str,
    name: &'static str,
}

const SURFACES: &[Surface] = &[
    Surface {
        label: "leads all",
        resource: "leads",
        action: "all",
        data: |t| json!({"filters": {"searchTerm": t}, "limit": 500}),
        field: "data.filters.searchTerm",
        rest: Some(("/v1/leads", "searchTerm")),
        items: "leads",
        name: "name",
    },
    Surface {
        label: "leads list",
        resource: "leads",
        action: "list",
        data: |t| json!({"filters": {"searchTerm": t}, "limit": 500}),
        field: "data.filters.searchTerm",
        rest: None,
        items: "leads",
        name: "name",
    },
    Surface {
        label: "genies list (data.searchTerm)",
        resource: "genies",
        action: "list",
        data: |t| json!({"searchTerm": t, "limit": 500}),
        field: "data.searchTerm",
        rest: Some(("/v1/genies", "searchTerm")),
        items: "genies",
        name: "name",
    },
    Surface {
        label: "genies all (filters)",
        resource: "genies",
        action: "all",
        data: |t| json!({"filters": {"searchTerm": t}, "limit": 500}),
        field: "data.filters.searchTerm",
        rest: None,
        items: "genies",
        name: "name",
    },
    Surface {
        label: "knowledge-base all",
        resource: "knowledge-base",
        action: "all",
        data: |t| json!({"filters": {"searchTerm": t}, "limit": 500}),
        field: "data.filters.searchTerm",
        rest: Some(("/v1/knowledge-base", "searchTerm")),
        items: "documents",
        name: "name",
    },
    Surface {
        label: "marketplace search",
        resource: "marketplace",
        action: "search",
        data: |t| json!({"search": t, "mine": true, "limit": 200}),
        field: "data.search",
        rest: Some(("/v1/marketplace?mine=true&limit=200", "searchTerm")),
        items: "listings",
        name: "name",
    },
];

fn rest_path(base: &str, member: &str, term: &str) -> String {
    let sep = if base.contains('?') { '&' } else { '?' };
    let q: String = url::form_urlencoded::byte_serialize(term.as_bytes()).collect();
    format!("{base}{sep}{member}={q}")
}

#[tokio::test]
async fn hostile_search_terms_are_literal_or_refused_never_a_5xx() {
    let app = TestApp::spawn_with(|c| c.job_poll_ms = 3_600_000).await;
    let u = app.standard().await;
    let names: Vec<String> = LITERAL
        .iter()
        .enumerate()
        .map(|(i, t)| record_name(i, t))
        .chain(["plain decoy".to_string()])
        .collect();

    let agent = insert_genie(&app, &u, "lead agent").await;
    for n in &names {
        app.call(
            &u.token,
            "leads",
            "create",
            None,
            json!({"agent_id": agent, "name": n}),
        )
        .await
        .ok(201);
        // As the API stores it (SQL's lower() folds ASCII only).
        let g = insert_genie_with(&app, &u, n, json!({"name_lower": n.to_lowercase()})).await;
        app.call(
            &u.token,
            "marketplace",
            "publish",
            None,
            json!({"genie_id": g, "name": n, "tags": [n]}),
        )
        .await
        .ok(201);
        app.call(
            &u.token,
            "knowledge-base",
            "create",
            None,
            json!({"title": n, "content": "neutral body text"}),
        )
        .await
        .ok(201);
    }
    app.run_jobs().await;
    // Genie names: every record name, plus the leads' agent.
    let mut genie_names = names.clone();
    genie_names.push("lead agent".into());
    let (before_leads, before_docs) = (app.count("leads").await, app.count("documents").await);

    for s in SURFACES {
        let universe = if s.resource == "genies" {
            &genie_names
        } else {
            &names
        };
        for term in LITERAL {
            let want = expected(universe, term);
            assert!(!want.is_empty(), "{term:?} finds nothing in the fixture");
            let r = app
                .call(&u.token, s.resource, s.action, None, (s.data)(term))
                .await;
            let got = names_of(&r.ok(200)[s.items], s.name);
            assert_eq!(got, want, "{} {term:?}", s.label);
            if let Some((base, member)) = s.rest {
                let path = rest_path(base, member, term);
                let r = app.request(Method::GET, &path, Some(&u.token), None).await;
                let got = names_of(&r.ok(200)[s.items], s.name);
                assert_eq!(got, want, "REST {} {term:?}", s.label);
            }
        }
        let long = "x".repeat(201);
        for term in REFUSED.iter().copied().chain([long.as_str()]) {
            let r = app
                .call(&u.token, s.resource, s.action, None, (s.data)(term))
                .await;
            r.err(400, "VALIDATION_ERROR");
            let msg = r.body["error"]["message"].as_str().unwrap();
            assert!(msg.contains(s.field), "{} {term:?}: {msg}", s.label);
            if let Some((base, member)) = s.rest {
                let r = app
                    .request(
                        Method::GET,
                        &rest_path(base, member, term),
                        Some(&u.token),
                        None,
                    )
                    .await;
                r.err(400, "VALIDATION_ERROR");
            }
        }
    }

    // stats counts what all finds.
    for term in LITERAL {
        let r = app
            .call(
                &u.token,
                "leads",
                "stats",
                None,
                json!({"filters": {"searchTerm": term}}),
            )
            .await;
        assert_eq!(
            r.ok(200)["stats"]["total"],
            json!(expected(&names, term).len()),
            "stats {term:?}"
        );
    }
    for term in REFUSED {
        app.call(
            &u.token,
            "leads",
            "stats",
            None,
            json!({"filters": {"searchTerm": term}}),
        )
        .await
        .err(400, "VALIDATION_ERROR");
    }
    assert_eq!(app.count("leads").await, before_leads);
    assert_eq!(app.count("documents").await, before_docs);
}

/// The chunk search and the in-memory voice search take the same terms: FTS5 operators are
/// words, not syntax; control characters are refused.
#[tokio::test]
async fn chunk_and_voice_search_take_hostile_terms() {
    let app = TestApp::spawn_with(|c| c.job_poll_ms = 3_600_000).await;
    let u = app.standard().await;
    app.call(
        &u.token,
        "knowledge-base",
        "create",
        None,
        json!({"title": "Garden", "content": "Prune the roses NEAR the wall AND water them."}),
    )
    .await
    .ok(201);
    app.run_jobs().await;
    for term in LITERAL {
        let r = app
            .call(
                &u.token,
                "knowledge-base",
                "search",
                None,
                json!({"query": term}),
            )
            .await;
        assert!(
            r.status == 200 || (r.status == 400 && r.code() == "VALIDATION_ERROR"),
            "search {term:?}: {} {}",
            r.status,
            r.body
        );
        let r = app
            .call(&u.token, "voices", "list", None, json!({"search": term}))
            .await;
        r.ok(200);
    }
    // Operators are plain words: `NEAR(roses wall)` and `roses AND` find the chunk.
    for q in ["NEAR(roses wall)", "roses AND", "\"roses\"*", "roses:wall"] {
        let r = app
            .call(
                &u.token,
                "knowledge-base",
                "search",
                None,
                json!({"query": q}),
            )
            .await;
        assert_eq!(r.ok(200)["count"], 1, "{q}");
    }
    for term in REFUSED {
        let r = app
            .call(
                &u.token,
                "knowledge-base",
                "search",
                None,
                json!({"query": term}),
            )
            .await;
        r.err(400, "VALIDATION_ERROR");
        assert!(
            r.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("data.query")
        );
        app.call(&u.token, "voices", "list", None, json!({"search": term}))
            .await
            .err(400, "VALIDATION_ERROR");
    }
}

/// A REST query string whose bytes are not UTF-8 is refused, naming the member, rather than
/// searched for as U+FFFD; raw NUL (`%00`) is refused like any control character.
#[tokio::test]
async fn rest_query_strings_that_are_not_utf8_are_refused() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    for path in [
        "/v1/leads?searchTerm=%FF",
        "/v1/genies?searchTerm=ab%C3",
        "/v1/knowledge-base?searchTerm=%80abc",
        "/v1/marketplace?searchTerm=%FE%FF",
    ] {
        let r = app.request(Method::GET, path, Some(&u.token), None).await;
        r.err(400, "VALIDATION_ERROR");
        let msg = r.body["error"]["message"].as_str().unwrap();
        assert!(
            msg.contains("searchTerm") && msg.contains("UTF-8"),
            "{path}: {msg}"
        );
    }
    for path in ["/v1/leads?searchTerm=%00", "/v1/genies?searchTerm=a%00b"] {
        app.request(Method::GET, path, Some(&u.token), None)
            .await
            .err(400, "VALIDATION_ERROR");
    }
}

/// Exact-match filters, ids, dates and sort keys of every list take the same hostile values:
/// each is either a bound parameter that matches nothing (200, no records) or refused with
/// 400 `VALIDATION_ERROR`; never a 5xx, through the envelope and the REST query string.
#[tokio::test]
async fn hostile_filter_values_never_reach_sql_as_syntax() {
    let app = TestApp::spawn_with(|c| c.job_poll_ms = 3_600_000).await;
    let u = app.standard().await;
    let agent = insert_genie(&app, &u, "filter agent").await;
    app.call(
        &u.token,
        "leads",
        "create",
        None,
        json!({"agent_id": agent, "name": "Bo"}),
    )
    .await
    .ok(201);
    // (resource, action, member path under data, REST route, key of the records).
    let filters: &[(&str, &str, &[&str], &str, &str)] = &[
        ("leads", "all", &["filters", "status"], "/v1/leads", "leads"),
        (
            "leads",
            "all",
            &["filters", "priority"],
            "/v1/leads",
            "leads",
        ),
        (
            "leads",
            "all",
            &["filters", "agentId"],
            "/v1/leads",
            "leads",
        ),
        (
            "leads",
            "stats",
            &["filters", "dateRange"],
            "/v1/leads",
            "stats",
        ),
        (
            "genies",
            "list",
            &["filters", "category"],
            "/v1/genies",
            "genies",
        ),
        (
            "genies",
            "list",
            &["filters", "groupId"],
            "/v1/genies",
            "genies",
        ),
        (
            "knowledge-base",
            "all",
            &["filters", "selectedPrivacy"],
            "/v1/knowledge-base",
            "documents",
        ),
        (
            "knowledge-base",
            "all",
            &["filters", "selectedType"],
            "/v1/knowledge-base",
            "documents",
        ),
        (
            "knowledge-base",
            "all",
            &["filters", "folderId"],
            "/v1/knowledge-base",
            "documents",
        ),
        (
            "marketplace",
            "all",
            &["category"],
            "/v1/marketplace",
            "listings",
        ),
        (
            "marketplace",
            "all",
            &["sort"],
            "/v1/marketplace",
            "listings",
        ),
        (
            "conversations",
            "all",
            &["status"],
            "/v1/conversations",
            "conversations",
        ),
        (
            "conversations",
            "all",
            &["channel"],
            "/v1/conversations",
            "conversations",
        ),
        (
            "conversations",
            "all",
            &["genieId"],
            "/v1/conversations",
            "conversations",
        ),
        (
            "conversations",
            "all",
            &["from"],
            "/v1/conversations",
            "conversations",
        ),
        (
            "activities",
            "all",
            &["filters", "resource"],
            "/v1/activities",
            "activities",
        ),
        (
            "activities",
            "all",
            &["filters", "action"],
            "/v1/activities",
            "activities",
        ),
        (
            "activities",
            "all",
            &["filters", "to"],
            "/v1/activities",
            "activities",
        ),
        ("voices", "list", &["language"], "/v1/voices", "voices"),
        ("qr-code", "all", &["genie_id"], "/v1/qr-code", "qr_codes"),
    ];
    let long = "y".repeat(5000);
    let values: Vec<&str> = LITERAL
        .iter()
        .chain(REFUSED)
        .copied()
        .chain([long.as_str(), "new' OR '1'='1", "1; DELETE FROM leads"])
        .collect();
    let before = app.count("leads").await;
    for (resource, action, path, route, key) in filters {
        let member = path.last().unwrap();
        for v in &values {
            let mut data = json!({});
            let mut at = &mut data;
            for p in &path[..path.len() - 1] {
                at = &mut at[*p];
                *at = json!({});
            }
            at[*member] = json!(v);
            let envelope = app.call(&u.token, resource, action, None, data).await;
            let rest = app
                .request(
                    Method::GET,
                    &rest_path(route, member, v),
                    Some(&u.token),
                    None,
                )
                .await;
            for (how, r) in [("envelope", &envelope), ("REST", &rest)] {
                match r.status {
                    200 => {
                        // A value no record has finds nothing (stats: counts nothing).
                        let found = &r.body["data"][*key];
                        let none = found.as_array().is_some_and(|a| a.is_empty())
                            || found["total"] == 0
                            || *key == "voices";
                        assert!(none, "{how} {resource} {member}={v:?} found {found}");
                    }
                    400 => assert_eq!(r.code(), "VALIDATION_ERROR", "{how} {resource} {member}"),
                    s => panic!("{how} {resource} {action} {member}={v:?}: {s} {}", r.body),
                }
            }
        }
    }
    assert_eq!(app.count("leads").await, before);
}

/// A NUL anywhere in a request (a value, a nested value, a member name, a REST body or query
/// parameter) is a 400 `VALIDATION_ERROR` naming where, on both database engines, and writes
/// nothing; the same request without it is taken.
#[tokio::test]
async fn a_nul_anywhere_in_a_request_is_refused_naming_the_member() {
    let app = TestApp::spawn().await;
    let u = app.standard().await;
    let g = insert_genie(&app, &u, "Desk").await;
    let before = app.count("leads").await;
    let refused = |r: &Resp, named: &str| {
        r.err(400, "VALIDATION_ERROR");
        let msg = r.body["error"]["message"].as_str().unwrap();
        assert_eq!(msg, format!("{named} must not contain NUL (U+0000)"));
    };
    let cases = [
        (
            json!({"agent_id": g, "name": "ok", "notes": "x\u{0}y"}),
            "data.notes",
        ),
        (
            json!({"agent_id": g, "name": "ok", "metadata": {"tags": ["fine", "ba\u{0}d"]}}),
            "data.metadata.tags[1]",
        ),
        (
            json!({"agent_id": g, "name": "ok", "n\u{0}tes": "x"}),
            "data.n\\0tes",
        ),
    ];
    for (data, named) in cases {
        let r = app.call(&u.token, "leads", "create", None, data).await;
        refused(&r, named);
    }
    let r = app
        .request(
            Method::POST,
            "/v1/leads",
            Some(&u.token),
            Some(json!({"agent_id": g, "name": "\u{0}"})),
        )
        .await;
    refused(&r, "name");
    let r = app
        .request(Method::GET, "/v1/leads?status=new%00", Some(&u.token), None)
        .await;
    refused(&r, "query string: status");
    assert_eq!(app.count("leads").await, before, "nothing written");
    app.call(
        &u.token,
        "leads",
        "create",
        None,
        json!({"agent_id": g, "name": "ok", "notes": "xy"}),
    )
    .await
    .ok(201);
    assert_eq!(app.count("leads").await, before + 1);
}
