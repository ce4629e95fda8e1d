//! The REST adapter: query strings become `data`, bodies become envelopes.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (&str, &[u8], Option<String>, Option<String>)| {
    let (query, body, action, id) = input;
    if let Ok(v) = genied::http::rest::query_to_data(Some(query)) {
        assert!(v.is_object());
    }
    let id = id.map(serde_json::Value::String);
    if let Ok(env) = genied::http::rest::parse_body(body, "genies", action, id) {
        assert!(env.data.is_object());
    }
});
