//! HTML to text, link discovery and the file dispatcher. The body is in `../targets.rs`, shared with the
//! deterministic smoke in `tests/it/fuzz_smoke.rs`.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "../targets.rs"]
mod targets;

fuzz_target!(|input: &[u8]| targets::html(input));
