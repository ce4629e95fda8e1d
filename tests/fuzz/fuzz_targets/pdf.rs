//! PDF text extraction on arbitrary bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = genied::knowledge::extract::pdf::extract(data);
});
