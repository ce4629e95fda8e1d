-- A platform's end-of-call event can arrive before its answer to the call request, so before
-- the campaign call knows the platform's call id. Such an event is kept here by that id and
-- applied when the answer is saved; rows no call claimed are forgotten after two hours (the
-- platform-call timeout).
CREATE TABLE early_call_outcomes (
    provider_call_id TEXT PRIMARY KEY,
    outcome          TEXT NOT NULL,
    conversation_id  TEXT,
    error            TEXT,
    received_at      TEXT NOT NULL
);
CREATE INDEX early_call_outcomes_received ON early_call_outcomes (received_at);
