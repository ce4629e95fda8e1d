//! `Authorization` / `X-API-Key` header parsing and the API-key prefix check.
#![no_main]
use axum::http::{HeaderMap, HeaderValue};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (&[u8], &[u8], bool)| {
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
});
