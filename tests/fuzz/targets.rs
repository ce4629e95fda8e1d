//! The fuzz target bodies, shared by the cargo-fuzz binaries (`fuzz_targets/*.rs`, coverage-
//! guided, documented command) and the deterministic smoke in the integration tests
//! (`tests/it/fuzz_smoke.rs`, in CI), so both exercise the very same code and assertions.
//!
//! Each function takes the input type its `fuzz_target!` declares; libFuzzer's bytes become
//! that type through `arbitrary::Arbitrary::arbitrary_take_rest`, in both harnesses.
// Each cargo-fuzz binary uses one of these functions.
#![allow(dead_code)]

use axum::http::{HeaderMap, HeaderValue};

/// `POST /v1` body parsing: any bytes give an envelope or an ApiError, never a panic.
pub fn envelope(data: &[u8]) {
    if let Ok(env) = genied::http::envelope::Envelope::parse(data) {
        // A parsed envelope always has an object `data`.
        assert!(env.data.is_object());
        let _ = genied::api::canonical_resource(&env.resource);
    }
    let _ = genied::http::envelope::body_object(data, true);
}

pub type RestInput<'a> = (&'a str, &'a [u8], Option<String>, Option<String>);

/// The REST adapter: query strings become `data`, bodies become envelopes.
pub fn rest(input: RestInput<'_>) {
    let (query, body, action, id) = input;
    if let Ok(v) = genied::http::rest::query_to_data(Some(query)) {
        assert!(v.is_object());
    }
    let id = id.map(serde_json::Value::String);
    if let Ok(env) = genied::http::rest::parse_body(body, "genies", action, id) {
        assert!(env.data.is_object());
    }
}

pub const JWT_KEY: &[u8] = b"fuzz-jwt-key-0123456789abcdef0123456789abcdef";

/// Session tokens: any string is decoded or refused, never a panic; a forged token never
/// decodes.
pub fn jwt(token: &str) {
    // Nothing the fuzzer makes up carries a valid HMAC for JWT_KEY.
    assert!(genied::auth::sessions::decode(JWT_KEY, token).is_err());
}

pub type CredentialInput<'a> = (&'a [u8], &'a [u8], bool);

/// `Authorization` / `X-API-Key` header parsing and the API-key prefix check.
pub fn credential(input: CredentialInput<'_>) {
    let (auth, key, with_key) = input;
    let mut h = HeaderMap::new();
    if let Ok(v) = HeaderValue::from_bytes(auth) {
        h.insert("authorization", v);
    }
    if with_key && let Ok(v) = HeaderValue::from_bytes(key) {
        h.insert("x-api-key", v);
    }
    let _ = genied::auth::Credential::from_headers(&h);
    if let Ok(s) = std::str::from_utf8(key) {
        let _ = genied::auth::keys::has_valid_prefix(s);
        let _ = genied::auth::keys::hash(s);
    }
}

pub type CronInput<'a> = (&'a str, bool);

/// The worker schedule validation (`trigger_type: schedule`).
pub fn cron(input: CronInput<'_>) {
    let (expr, seconds) = input;
    if let Ok(c) = genied::workers::scheduler::to_cron(expr, seconds) {
        // What passes validation is accepted again unchanged (6 fields).
        assert_eq!(genied::workers::scheduler::to_cron(&c, true), Ok(c));
    }
}

/// PDF text extraction on arbitrary bytes.
pub fn pdf(data: &[u8]) {
    let _ = genied::knowledge::extract::pdf::extract(data);
}

/// DOCX (zip + XML) text extraction on arbitrary bytes.
pub fn docx(data: &[u8]) {
    let _ = genied::knowledge::extract::docx::extract(data);
}

/// HTML → text, link discovery, and the file dispatcher on arbitrary input.
pub fn html(data: &[u8]) {
    let s = String::from_utf8_lossy(data);
    let _ = genied::knowledge::extract::html::to_text(&s);
    let base = url::Url::parse("https://example.com/a/b").unwrap();
    for l in genied::knowledge::extract::html::links(&s, &base) {
        assert!(matches!(l.scheme(), "http" | "https"), "{l}");
    }
    let _ = genied::knowledge::extract::html::is_html("text/html", data);
    let _ = genied::knowledge::extract::file_to_text("f.html", data);
    let _ = genied::knowledge::extract::file_to_text("f.txt", data);
}
