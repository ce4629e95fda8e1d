//! Tasks the service starts on its own and must stop when it stops (campaign calls): the
//! server's shutdown aborts them, so a stopped service leaves nothing running behind it, and
//! what they left half-done is found by the next start's recovery.

use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::task::JoinSet;

#[derive(Default)]
pub struct Tasks {
    set: Mutex<JoinSet<()>>,
    stopped: AtomicBool,
}

impl Tasks {
    /// Runs `f` on its own task; after [`Tasks::abort_all`] nothing starts any more.
    pub fn spawn(&self, f: impl Future<Output = ()> + Send + 'static) {
        let mut set = self.set.lock().unwrap_or_else(|p| p.into_inner());
        if self.stopped.load(Ordering::SeqCst) {
            return;
        }
        // Finished tasks are reaped here, so the set holds only the running ones.
        while set.try_join_next().is_some() {}
        set.spawn(f);
    }

    /// How many are still running.
    pub fn running(&self) -> usize {
        let mut set = self.set.lock().unwrap_or_else(|p| p.into_inner());
        while set.try_join_next().is_some() {}
        set.len()
    }

    pub fn abort_all(&self) {
        let mut set = self.set.lock().unwrap_or_else(|p| p.into_inner());
        self.stopped.store(true, Ordering::SeqCst);
        set.abort_all();
    }
}
