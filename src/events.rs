//! The in-process event bus. Code that changes data emits an `Event`; subscribers (worker
//! genie triggers, webhook delivery) receive every event emitted after they subscribed.

use serde::Serialize;
use serde_json::Value;
use tokio::sync::broadcast;

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

#[derive(Clone)]
pub struct Bus {
    tx: broadcast::Sender<Event>,
}

impl Default for Bus {
    fn default() -> Self {
        Bus {
            tx: broadcast::channel(1024).0,
        }
    }
}

impl Bus {
    /// Never blocks and never fails: with no subscriber the event is simply dropped.
    pub fn emit(&self, event: Event) {
        tracing::debug!(event = %event.kind, id = %event.id, "event");
        let _ = self.tx.send(event);
    }
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.tx.subscribe()
    }
}
