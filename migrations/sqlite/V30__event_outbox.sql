-- Issue #22: the durable event outbox. An event is written in the transaction of the change
-- that raises it and fanned out (webhook deliveries, event-triggered worker runs) by whichever
-- instance's dispatcher takes it next, in the transaction that marks it dispatched; see
-- docs/reliability.md. `seq` is the dispatch order.
CREATE TABLE event_outbox (
    seq           INTEGER PRIMARY KEY,
    id            TEXT NOT NULL UNIQUE,
    kind          TEXT NOT NULL,
    user_id       TEXT NOT NULL,
    data          TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    dispatched_at TEXT
);
CREATE INDEX event_outbox_pending ON event_outbox(seq) WHERE dispatched_at IS NULL;
CREATE INDEX event_outbox_dispatched ON event_outbox(dispatched_at);
