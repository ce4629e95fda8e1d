-- See migrations/sqlite/V31__early_call_outcomes.sql: end-of-call events that arrived before
-- the platform's answer to the call request, kept by the platform's call id.
CREATE TABLE early_call_outcomes (
    provider_call_id TEXT PRIMARY KEY,
    outcome          TEXT NOT NULL,
    conversation_id  TEXT,
    error            TEXT,
    received_at      TEXT NOT NULL
);
CREATE INDEX early_call_outcomes_received ON early_call_outcomes (received_at);
