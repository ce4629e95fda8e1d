-- The schema of SQLite's V21..V25 (campaigns, imported phone numbers, document copies at
-- other platforms, genie moves, drift columns), BIGINT / TEXT / BYTEA mirroring SQLite's
-- values as V1 does.

CREATE TABLE campaigns (
    id                  TEXT PRIMARY KEY,
    user_id             TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    genie_id            TEXT NOT NULL REFERENCES genies(id) ON DELETE CASCADE,
    name                TEXT NOT NULL,
    status              TEXT NOT NULL,
    filters             TEXT NOT NULL,
    concurrency         BIGINT NOT NULL,
    calls_per_minute    BIGINT NOT NULL,
    hours_start         TEXT NOT NULL,
    hours_end           TEXT NOT NULL,
    timezone            TEXT NOT NULL,
    max_attempts        BIGINT NOT NULL,
    retry_delay_seconds BIGINT NOT NULL,
    persona             TEXT,
    variables           TEXT NOT NULL,
    waiting             TEXT,
    tick_seq            BIGINT NOT NULL DEFAULT 0,
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL,
    started_at          TEXT,
    finished_at         TEXT
);
CREATE INDEX campaigns_user ON campaigns (user_id, id);
CREATE INDEX campaigns_genie ON campaigns (genie_id);

CREATE TABLE campaign_targets (
    campaign_id TEXT NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
    lead_id     BIGINT NOT NULL,
    phone       TEXT,
    timezone    TEXT NOT NULL,
    status      TEXT NOT NULL,
    attempts    BIGINT NOT NULL DEFAULT 0,
    next_at     TEXT NOT NULL,
    outcome     TEXT,
    PRIMARY KEY (campaign_id, lead_id)
);
CREATE INDEX campaign_targets_due ON campaign_targets (campaign_id, status, next_at);

CREATE TABLE campaign_calls (
    id               TEXT PRIMARY KEY,
    campaign_id      TEXT NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
    lead_id          BIGINT NOT NULL,
    attempt          BIGINT NOT NULL,
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

CREATE TABLE phone_imports (
    phone_id    TEXT PRIMARY KEY REFERENCES genie_phone_numbers(id) ON DELETE CASCADE,
    kind        TEXT NOT NULL,
    account     TEXT NOT NULL,
    nonce       BYTEA NOT NULL,
    ciphertext  BYTEA NOT NULL,
    created_at  TEXT NOT NULL
);

CREATE TABLE provider_documents (
    document_id  TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    provider     TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    external_id  TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    PRIMARY KEY (document_id, provider)
);

CREATE TABLE genie_moves (
    genie_id          TEXT PRIMARY KEY REFERENCES genies(id) ON DELETE CASCADE,
    from_provider     TEXT NOT NULL,
    to_provider       TEXT NOT NULL,
    new_agent_id      TEXT,
    created_documents TEXT NOT NULL DEFAULT '[]',
    created_numbers   TEXT NOT NULL DEFAULT '[]',
    started_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL
);

ALTER TABLE genie_providers ADD COLUMN drift TEXT;
ALTER TABLE genie_providers ADD COLUMN drift_checked_at TEXT;
