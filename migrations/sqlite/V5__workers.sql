-- Worker genies: background LLM agents with tools, their durable runs, encrypted
-- credentials and durable key-value memory.

CREATE TABLE worker_genies (
    id              TEXT PRIMARY KEY,
    user_id         TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name            TEXT NOT NULL,
    soul_prompt     TEXT NOT NULL,
    trigger_type    TEXT NOT NULL CHECK (trigger_type IN ('manual', 'schedule', 'event')),
    schedule        TEXT,
    timezone        TEXT NOT NULL DEFAULT 'UTC',
    event_type      TEXT,
    credential_refs TEXT NOT NULL DEFAULT '[]',
    is_active       INTEGER NOT NULL DEFAULT 1,
    llm_model       TEXT,
    max_steps       INTEGER NOT NULL DEFAULT 10,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
CREATE INDEX worker_genies_user ON worker_genies(user_id, created_at);
CREATE INDEX worker_genies_trigger ON worker_genies(trigger_type, is_active);

CREATE TABLE worker_runs (
    id                TEXT PRIMARY KEY,
    worker_genie_id   TEXT NOT NULL REFERENCES worker_genies(id) ON DELETE CASCADE,
    user_id           TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    status            TEXT NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    trigger           TEXT NOT NULL,
    input             TEXT NOT NULL DEFAULT '{}',
    output            TEXT,
    error             TEXT,
    steps             TEXT NOT NULL DEFAULT '[]',
    prompt_tokens     INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    total_tokens      INTEGER NOT NULL DEFAULT 0,
    created_at        TEXT NOT NULL,
    started_at        TEXT,
    finished_at       TEXT,
    duration_ms       INTEGER
);
CREATE INDEX worker_runs_genie ON worker_runs(worker_genie_id, created_at);
CREATE INDEX worker_runs_user ON worker_runs(user_id, created_at);
CREATE INDEX worker_runs_status ON worker_runs(status, created_at);

-- The secret is AES-256-GCM ciphertext (nonce kept beside it); the record id is the
-- associated data, so a ciphertext moved to another row does not decrypt.
CREATE TABLE credentials (
    id              TEXT PRIMARY KEY,
    user_id         TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name            TEXT NOT NULL,
    credential_type TEXT NOT NULL CHECK (credential_type IN ('bearer_token', 'api_key', 'basic_auth')),
    url_prefix      TEXT,
    header_name     TEXT,
    nonce           BLOB NOT NULL,
    ciphertext      BLOB NOT NULL,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    UNIQUE (user_id, name)
);

-- Durable memory: genie_id '' is the account scope.
CREATE TABLE worker_memory (
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    genie_id   TEXT NOT NULL,
    key        TEXT NOT NULL,
    value      TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (user_id, genie_id, key)
);
