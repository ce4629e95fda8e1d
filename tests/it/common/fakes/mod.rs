//! Local stand-ins for third-party services, bound to 127.0.0.1. Each checks what it
//! receives and records it so tests can assert.

pub mod call_llm;
pub mod dns;
pub mod elevenlabs;
pub mod form;
pub mod http_api;
pub mod oidc_issuer;
pub mod openai;
pub mod otlp;
pub mod receivers;
pub mod retell;
pub mod smtp;
pub mod transcripts;
pub mod vapi;
pub mod website;
