-- See migrations/sqlite/V30__genie_call_rate.sql: a genie's call rate and the ledger of the
-- calls it started that enforces it.
ALTER TABLE genies ADD COLUMN max_calls_per_minute BIGINT;

CREATE TABLE genie_call_starts (
    id          TEXT PRIMARY KEY,
    genie_id    TEXT NOT NULL REFERENCES genies(id) ON DELETE CASCADE,
    campaign_id TEXT,
    started_at  TEXT NOT NULL
);
CREATE INDEX genie_call_starts_genie ON genie_call_starts (genie_id, started_at);
