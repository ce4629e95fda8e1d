//! The worker schedule validation (`trigger_type: schedule`).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (&str, bool)| {
    let (expr, seconds) = input;
    if let Ok(c) = genied::workers::scheduler::to_cron(expr, seconds) {
        // What passes validation is accepted again unchanged (6 fields).
        assert_eq!(genied::workers::scheduler::to_cron(&c, true), Ok(c));
    }
});
