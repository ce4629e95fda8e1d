//! The run-time handle of worker genies that the application state holds: executor slots,
//! the runs in flight, the cron scheduler and the credential master key in memory. Apart
//! from `workers/` because the executor, triggers and cipher there take the whole state,
//! which holds this.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

use tokio::sync::{Notify, Semaphore};
use tokio::task::AbortHandle;
use tokio_cron_scheduler::JobScheduler;
use uuid::Uuid;

use crate::config::Config;
use crate::secrets::Secrets;

/// Run-time state of worker genies, one per process (a field of `AppInner`).
pub struct Workers {
    /// Wakes the executor after a run was queued or a slot freed.
    pub notify: Notify,
    pub(crate) slots: Arc<Semaphore>,
    pub(crate) running: Mutex<HashMap<String, AbortHandle>>,
    pub(crate) scheduler: tokio::sync::Mutex<Option<Scheduler>>,
    /// The credential master key in use, and where it lives on disk (re-read when a
    /// ciphertext does not open, so a `rotate-master-key` while serving is picked up).
    pub(crate) master_key: RwLock<[u8; 32]>,
    pub key_path: PathBuf,
}

impl Workers {
    /// `key_path`: where the credential master key lives (`workers::credentials::key_path`).
    pub fn new(config: &Config, secrets: &Secrets, key_path: PathBuf) -> Workers {
        Workers {
            notify: Notify::new(),
            slots: Arc::new(Semaphore::new(config.worker_concurrency.max(1))),
            running: Mutex::new(HashMap::new()),
            scheduler: tokio::sync::Mutex::new(None),
            master_key: RwLock::new(secrets.master_key),
            key_path,
        }
    }

    /// Aborts the task of a running run, if this process runs it.
    pub fn abort(&self, run_id: &str) {
        if let Some(h) = self
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(run_id)
        {
            h.abort();
        }
        self.notify.notify_one();
    }
}

/// The running cron scheduler and the job of each scheduled genie (`workers::scheduler`).
pub(crate) struct Scheduler {
    pub(crate) sched: JobScheduler,
    /// By genie: its cron job and what it was registered from (schedule and time zone).
    pub(crate) jobs: HashMap<String, (Uuid, String)>,
    /// The schedules version (`db::workers::schedules_version`) the jobs were last brought
    /// in line with; `None` before the first time.
    pub(crate) version: Option<i64>,
}
