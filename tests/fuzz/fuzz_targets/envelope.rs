//! `POST /v1` body parsing: any bytes give an envelope or an ApiError, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(env) = genied::http::envelope::Envelope::parse(data) {
        // A parsed envelope always has an object `data`.
        assert!(env.data.is_object());
        let _ = genied::api::canonical_resource(&env.resource);
    }
    let _ = genied::http::envelope::body_object(data, true);
});
