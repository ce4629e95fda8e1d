//! genied: a self-hosted service for managing voice AI agents ("genies") and everything
//! around them, in one binary with SQLite inside. `build_app` + `serve` start it; `cli`
//! holds the command line.

pub mod analysis;
pub mod api;
pub mod app;
pub mod auth;
pub mod cli;
pub mod config;
pub mod db;
pub mod dispatch;
pub mod doc_index;
pub mod document_store;
pub mod error;
pub mod events;
pub mod http;
pub mod jobs;
pub mod knowledge;
pub mod limits;
pub mod llm;
pub mod mail;
pub mod malloc;
pub mod net;
pub mod outbox;
pub mod prices;
pub mod secrets;
pub mod service;
pub mod state;
pub mod storage_migration;
pub mod tasks;
pub mod telemetry;
pub mod voice;
pub mod webhooks;
pub mod worker_pool;
pub mod workers;

pub use app::{App, AppState, build_app, serve};
pub use config::Config;
