-- Observability (#20). The `genied_conversations_active` gauge counts conversations under
-- way on every scrape: a partial index keeps that a count of the few open ones.
CREATE INDEX conversations_active ON conversations(status) WHERE status IN ('initiated', 'in-progress');

-- The job worker's last sign of life, written at most every few seconds by the service, so
-- that `admin check` (another process) can tell a stalled worker from a stopped one.
CREATE TABLE worker_heartbeat (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    beat_at TEXT NOT NULL,
    stopped INTEGER NOT NULL DEFAULT 0
);
