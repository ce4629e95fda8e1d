//! The application state every layer below the router is handed: database, configuration,
//! providers, limiters and the event bus. It holds only types from below `api/` and `http/`,
//! so that background code (jobs, workers, the pipeline) can take it without importing them.

use std::sync::Arc;

use tokio::sync::Notify;

use crate::auth;
use crate::config::Config;
use crate::db::Db;
use crate::events::Bus;
use crate::limits::{ChatLimiter, RateLimits};
use crate::llm::Llm;
use crate::net::Guarded;
use crate::secrets::Secrets;
use crate::voice::Voices;

pub struct AppInner {
    pub config: Config,
    pub db: Db,
    pub secrets: Secrets,
    pub limits: RateLimits,
    pub bus: Bus,
    /// Wakes the job worker right after something was queued.
    pub jobs_notify: Notify,
    /// The voice-agent platforms genies are provisioned in: `voice.default()` for genies
    /// that name none, `voice.named(..)` for a genie's own.
    pub voice: Voices,
    /// The only client for user-supplied URLs.
    pub net: Guarded,
    /// The configured OpenAI-compatible endpoint, if any.
    pub llm: Option<Llm>,
    /// Per-address limit on the public genie page's chat.
    pub public_chat: ChatLimiter,
    /// Worker genies: run executor, triggers, credential key.
    pub workers: crate::worker_pool::Workers,
    /// Outgoing mail: SMTP when configured, else dashboard notifications.
    pub mail: crate::mail::Mailer,
    /// Recent authentications (API keys, sessions), so hot callers skip the database.
    pub auth_cache: auth::AuthCache,
    /// OpenID Connect sign-in, when `--oidc-issuer` is set.
    pub oidc: Option<auth::oidc::Oidc>,
    /// The operator's LLM price table (`--llm-prices`); empty without one.
    pub prices: crate::prices::Prices,
    /// The documents' search index on SQLite (`doc_index`); `None` on PostgreSQL, or when
    /// it could not be opened (FTS5 answers every search then).
    pub doc_index: Option<std::sync::Arc<crate::doc_index::DocIndex>>,
    /// Where document files are kept (`--document-store`).
    pub documents: crate::document_store::DocumentStore,
    /// The job worker's last sign of life (see `jobs::Heartbeat`).
    pub worker_beat: crate::jobs::Heartbeat,
    /// Campaign calls in progress; aborted when the service stops.
    pub tasks: crate::tasks::Tasks,
    /// This instance's id and lease length for the jobs it claims (see `jobs::Lease`).
    pub jobs_lease: crate::jobs::Lease,
}

pub type AppState = Arc<AppInner>;

impl AppInner {
    pub fn wake_jobs(&self) {
        self.jobs_notify.notify_one();
    }
}
