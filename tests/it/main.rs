//! One integration-test binary (one link step) with a module per resource. Every test boots
//! the real router on 127.0.0.1 over a temporary data directory and speaks HTTP to it.

mod common;

mod activities;
mod api_keys;
mod auth;
mod cli;
mod conversations;
mod envelope;
mod lead_notes;
mod leads;
mod profiles;
mod rate_limit;
