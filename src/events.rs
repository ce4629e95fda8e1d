//! Events: what changed, for webhooks and event-triggered worker genies. Code that changes
//! data [`record`]s its event in the same transaction (the durable outbox, `event_outbox`),
//! so there is no commit without its event and no event without its commit; after the commit
//! it [`Bus::emit`]s the recorded event, which wakes this instance's outbox dispatcher
//! (`crate::outbox`, which does the fan-out, exactly once across instances) and tells the
//! in-process observers. Those observers (tests watching what a change raised) get no
//! durability: nothing that must happen listens there.

use serde::Serialize;
use serde_json::Value;
use tokio::sync::{Notify, broadcast};

use crate::db::{self, sql::Connection};

/// Every event type the service emits; webhooks and worker-genie triggers subscribe to these.
pub const EVENT_TYPES: &[&str] = &[
    "genie.created",
    "genie.updated",
    "genie.deleted",
    "genie.version_published",
    "genie.rolled_back",
    "genie.drift_detected",
    "genie.moved",
    "genie_test.completed",
    "document.completed",
    "document.failed",
    "lead.created",
    "lead.updated",
    "lead.status_changed",
    "conversation.completed",
    "conversation.analyzed",
    "worker_run.succeeded",
    "worker_run.failed",
    "api_key.created",
    "api_key.revoked",
    "campaign.started",
    "campaign.paused",
    "campaign.resumed",
    "campaign.cancelled",
    "campaign.completed",
    "call.completed",
];

#[derive(Debug, Clone, Serialize)]
pub struct Event {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub created_at: String,
    pub user_id: String,
    pub data: Value,
}

impl Event {
    pub fn new(kind: &str, user_id: &str, data: Value) -> Event {
        Event {
            id: crate::db::new_id(),
            kind: kind.to_string(),
            created_at: crate::db::now(),
            user_id: user_id.to_string(),
            data,
        }
    }
}

/// An event written to the outbox, inside the transaction of its change; only [`record`]
/// makes one, so what is emitted after the commit is always durable.
#[derive(Debug, Clone)]
pub struct Recorded(Event);

impl Recorded {
    pub fn event(&self) -> &Event {
        &self.0
    }
}

/// Writes `event` to the outbox; call it inside the `app.db.write(..)` closure of the change
/// that raises it, and emit what it returns after the commit.
pub fn record(c: &Connection, event: Event) -> rusqlite::Result<Recorded> {
    db::events::insert(
        c,
        &event.id,
        &event.kind,
        &event.user_id,
        &event.data,
        &event.created_at,
    )?;
    Ok(Recorded(event))
}

/// After the commit: wakes the outbox dispatcher and tells in-process observers.
pub struct Bus {
    tx: broadcast::Sender<Event>,
    /// Wakes this instance's outbox dispatcher.
    pub dispatch: Notify,
}

impl Default for Bus {
    fn default() -> Self {
        Bus {
            tx: broadcast::channel(1024).0,
            dispatch: Notify::new(),
        }
    }
}

impl Bus {
    /// Never blocks and never fails. The event is already durable ([`record`]): this only
    /// makes its fan-out start now rather than at the dispatcher's next poll.
    pub fn emit(&self, event: Recorded) {
        tracing::debug!(event = %event.0.kind, id = %event.0.id, "event");
        self.dispatch.notify_one();
        let _ = self.tx.send(event.0);
    }
    pub fn emit_all(&self, events: impl IntoIterator<Item = Recorded>) {
        for e in events {
            self.emit(e);
        }
    }
    /// Every event this instance emits from now on, in-process and without durability (a
    /// lagging receiver misses events): for observers, never for work that must happen.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.tx.subscribe()
    }
}
