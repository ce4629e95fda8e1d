//! One integration-test binary (one link step) with a module per resource. Every test boots
//! the real router on 127.0.0.1 over a temporary data directory and speaks HTTP to it.

mod common;

mod activities;
mod api_keys;
mod architecture;
mod auth;
mod cli;
mod console;
mod conversations;
mod document_folders;
mod documents;
mod durability;
mod envelope;
mod fuzz_smoke;
mod genie_groups;
mod genies;
mod harness;
mod hostile_documents;
mod hostile_input;
mod isolation;
mod lead_notes;
mod leads;
mod marketplace;
mod notifications;
mod observability;
mod openapi;
mod perf;
mod profiles;
mod provider_hooks;
mod public_page;
mod qr_codes;
mod rate_limit;
mod secrets;
mod slow_clients;
mod ssrf;
mod teams;
mod voice_collections;
mod voice_elevenlabs;
mod voices;
mod webhooks;
mod worker_genies;
