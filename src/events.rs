//! Events: what changed, for webhooks and event-triggered worker genies. Code that changes
//! data [`record`]s its event in the same transaction (the durable outbox, `event_outbox`),
//! so there is no commit without its event and no event without its commit; after the commit
//! it [`Bus::emit`]s the recorded event, which wakes this instance's outbox dispatcher
//! (`crate::outbox`, which does the fan-out, exactly once across instances) and tells the
//! in-process observers. Those observers (tests watching what a change raised) get no
//! durability: nothing that must happen listens there.
//!
//! An event nothing subscribes to when it is raised (no active webhook of its user whose
//! patterns match, no active worker genie of its user triggered by its type) is not written
//! to the outbox: its fan-out would reach no one. The check runs in the change's
//! transaction, which on either engine is serialised with every other write, so a
//! subscription is either committed before the change (and the event is recorded) or after
//! it (and it is not owed the event). This keeps the common write (no webhooks) to one
//! transaction and one row.

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

/// An event recorded inside the transaction of its change; only [`record`] makes one, so
/// what is emitted after the commit is always durable (or had no one to go to).
#[derive(Debug, Clone)]
pub struct Recorded {
    event: Event,
    /// Written to the outbox (something subscribes to it): the dispatcher has work.
    queued: bool,
}

impl Recorded {
    pub fn event(&self) -> &Event {
        &self.event
    }
}

/// Whether `patterns` (a webhook's `event_types`) select `event_type`: `*`, the type itself,
/// or its family as `lead.*`.
pub fn matches(patterns: &[String], event_type: &str) -> bool {
    patterns.iter().any(|p| {
        p == "*"
            || p == event_type
            || p.strip_suffix(".*")
                .is_some_and(|fam| event_type.split('.').next() == Some(fam))
    })
}

/// Whether the fan-out of an event of `kind` for `user_id` would reach anyone now.
fn subscribed(c: &Connection, user_id: &str, kind: &str) -> rusqlite::Result<bool> {
    let hooked = db::webhooks::active_for_user(c, user_id)?
        .iter()
        .any(|(_, patterns)| matches(patterns, kind));
    Ok(hooked || db::workers::has_event_genie(c, user_id, kind)?)
}

/// Writes `event` to the outbox when something subscribes to it; call it inside the
/// `app.db.write(..)` closure of the change that raises it, and emit what it returns after
/// the commit.
pub fn record(c: &Connection, event: Event) -> rusqlite::Result<Recorded> {
    let queued = subscribed(c, &event.user_id, &event.kind)?;
    queue(c, event, queued)
}

/// [`record`] for the hot writes (a lead's create and update): the event is made, its
/// `data` included, only when something subscribes to it or `observed` (what
/// [`Bus::observed`] said before the write). Otherwise there is nothing to emit: most
/// writes raise an event no one hears, and making it (the lead as a JSON tree, its id and
/// time) and dropping it was a tenth of a lead create's instructions in the writer
/// (docs/performance.md, round twenty-one).
pub fn record_lazy(
    c: &Connection,
    observed: bool,
    kind: &str,
    user_id: &str,
    data: impl FnOnce() -> Value,
) -> rusqlite::Result<Option<Recorded>> {
    let queued = subscribed(c, user_id, kind)?;
    if !queued && !observed {
        return Ok(None);
    }
    queue(c, Event::new(kind, user_id, data()), queued).map(Some)
}

fn queue(c: &Connection, event: Event, queued: bool) -> rusqlite::Result<Recorded> {
    if queued {
        db::events::insert(
            c,
            &event.id,
            &event.kind,
            &event.user_id,
            &event.data,
            &event.created_at,
        )?;
    }
    Ok(Recorded { event, queued })
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
    pub fn emit(&self, recorded: Recorded) {
        let Recorded { event, queued } = recorded;
        tracing::debug!(event = %event.kind, id = %event.id, queued, "event");
        if queued {
            self.dispatch.notify_one();
        }
        let _ = self.tx.send(event);
    }
    pub fn emit_all(&self, events: impl IntoIterator<Item = Recorded>) {
        for e in events {
            self.emit(e);
        }
    }
    /// Whether anything in-process is subscribed now ([`Bus::subscribe`]; only tests are).
    /// Asked before a write that uses [`record_lazy`]: an observer subscribing during that
    /// write misses its event, as it would had it subscribed just after.
    pub fn observed(&self) -> bool {
        self.tx.receiver_count() > 0
    }
    /// Every event this instance emits from now on, in-process and without durability (a
    /// lagging receiver misses events): for observers, never for work that must happen.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.tx.subscribe()
    }
}
