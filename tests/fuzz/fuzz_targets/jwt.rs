//! Session tokens: any string is decoded or refused, never a panic; a forged token never
//! decodes.
#![no_main]
use libfuzzer_sys::fuzz_target;

const KEY: &[u8] = b"fuzz-jwt-key-0123456789abcdef0123456789abcdef";

fuzz_target!(|token: &str| {
    // Nothing the fuzzer makes up carries a valid HMAC for KEY.
    assert!(genied::auth::sessions::decode(KEY, token).is_err());
});
