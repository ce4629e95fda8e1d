//! Local stand-ins for third-party services; each records and checks what it receives.

pub mod transcripts;
pub mod website;
