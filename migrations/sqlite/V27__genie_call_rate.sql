-- A genie's call rate (`max_calls_per_minute`, NULL: no limit) holds across its campaigns and
-- `genies call` together. Every outbound call a genie starts leaves a row here, committed in
-- the transaction that checked the rate, so the count survives a restart and two requests
-- at once cannot both take the last start of a minute.
ALTER TABLE genies ADD COLUMN max_calls_per_minute INTEGER;

CREATE TABLE genie_call_starts (
    id          TEXT PRIMARY KEY,
    genie_id    TEXT NOT NULL REFERENCES genies(id) ON DELETE CASCADE,
    campaign_id TEXT,
    started_at  TEXT NOT NULL
);
CREATE INDEX genie_call_starts_genie ON genie_call_starts (genie_id, started_at);
