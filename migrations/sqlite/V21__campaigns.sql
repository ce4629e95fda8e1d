-- Campaigns: a genie calls a list of leads. The leads a campaign targets are copied into
-- campaign_targets when it starts (a filter is evaluated once, so later leads do not join a
-- running campaign); every dial attempt is a campaign_calls row, written before the call is
-- placed, so a restart never dials an attempt twice.
CREATE TABLE campaigns (
    id                  TEXT PRIMARY KEY,
    user_id             TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    genie_id            TEXT NOT NULL REFERENCES genies(id) ON DELETE CASCADE,
    name                TEXT NOT NULL,
    status              TEXT NOT NULL,
    filters             TEXT NOT NULL,
    concurrency         INTEGER NOT NULL,
    calls_per_minute    INTEGER NOT NULL,
    hours_start         TEXT NOT NULL,
    hours_end           TEXT NOT NULL,
    timezone            TEXT NOT NULL,
    max_attempts        INTEGER NOT NULL,
    retry_delay_seconds INTEGER NOT NULL,
    persona             TEXT,
    variables           TEXT NOT NULL,
    waiting             TEXT,
    tick_seq            INTEGER NOT NULL DEFAULT 0,
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL,
    started_at          TEXT,
    finished_at         TEXT
);
CREATE INDEX campaigns_user ON campaigns (user_id, id);
CREATE INDEX campaigns_genie ON campaigns (genie_id);

CREATE TABLE campaign_targets (
    campaign_id TEXT NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
    lead_id     INTEGER NOT NULL,
    phone       TEXT,
    timezone    TEXT NOT NULL,
    status      TEXT NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0,
    next_at     TEXT NOT NULL,
    outcome     TEXT,
    PRIMARY KEY (campaign_id, lead_id)
);
CREATE INDEX campaign_targets_due ON campaign_targets (campaign_id, status, next_at);

CREATE TABLE campaign_calls (
    id               TEXT PRIMARY KEY,
    campaign_id      TEXT NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
    lead_id          INTEGER NOT NULL,
    attempt          INTEGER NOT NULL,
    phone            TEXT NOT NULL,
    provider         TEXT NOT NULL,
    provider_call_id TEXT,
    status           TEXT NOT NULL,
    outcome          TEXT,
    conversation_id  TEXT,
    error            TEXT,
    started_at       TEXT NOT NULL,
    ended_at         TEXT,
    UNIQUE (campaign_id, lead_id, attempt)
);
CREATE INDEX campaign_calls_open ON campaign_calls (campaign_id, status);
CREATE INDEX campaign_calls_provider ON campaign_calls (provider_call_id);
