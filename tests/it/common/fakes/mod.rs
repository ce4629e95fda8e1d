//! Local stand-ins for third-party services; each checks and records what it receives.

pub mod llm;
pub mod smtp;
