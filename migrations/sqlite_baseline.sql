-- The schema and rows of a new database as migrations V1 to V46 make them,
-- applied in one step on an empty database (src/db/baseline.rs). Generated from the
-- migrations by `GENIED_WRITE_BASELINE=1 cargo test --lib db::baseline`; do not edit.

-- Tables
CREATE TABLE refinery_schema_history(
             version int4 PRIMARY KEY,
             name VARCHAR(255),
             applied_on VARCHAR(255),
             checksum VARCHAR(255));
CREATE TABLE sessions (
    id                 TEXT PRIMARY KEY,
    user_id            TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    refresh_hash       TEXT UNIQUE,
    refresh_expires_at TEXT,
    created_at         TEXT NOT NULL,
    revoked_at         TEXT
);
CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    user_id      TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    key_prefix   TEXT NOT NULL,
    key_hash     TEXT NOT NULL UNIQUE,
    status       TEXT NOT NULL CHECK (status IN ('active', 'revoked')),
    created_at   TEXT NOT NULL,
    last_used_at TEXT,
    revoked_at   TEXT
);
CREATE TABLE jobs (
    id         INTEGER PRIMARY KEY,
    kind       TEXT NOT NULL,
    payload    TEXT NOT NULL,
    status     TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'running', 'done', 'dead')),
    attempts   INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER,
    run_at     TEXT NOT NULL,
    last_error TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
, crash_retries INTEGER NOT NULL DEFAULT 0, owner TEXT, lease_until TEXT);
CREATE TABLE genie_groups (
    id         TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    description TEXT,
    sort_order INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE genie_phone_numbers (
    id              TEXT PRIMARY KEY,
    genie_id        TEXT NOT NULL REFERENCES genies(id) ON DELETE CASCADE,
    number          TEXT NOT NULL UNIQUE,
    external_id     TEXT,
    status          TEXT NOT NULL,
    created_at      TEXT NOT NULL
);
CREATE TABLE genie_assignments (
    genie_id   TEXT NOT NULL REFERENCES genies(id) ON DELETE CASCADE,
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at TEXT NOT NULL,
    PRIMARY KEY (genie_id, user_id)
);
CREATE TABLE document_folders (
    id         TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    parent_id  TEXT REFERENCES document_folders(id) ON DELETE SET NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE documents (
    id           TEXT PRIMARY KEY,
    user_id      TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    external_id  TEXT UNIQUE,
    name         TEXT NOT NULL,
    type         TEXT NOT NULL,
    status       TEXT NOT NULL,
    error        TEXT,
    is_active    INTEGER NOT NULL DEFAULT 1,
    is_public    INTEGER NOT NULL DEFAULT 0,
    folder_id    TEXT REFERENCES document_folders(id) ON DELETE SET NULL,
    size_bytes   INTEGER NOT NULL DEFAULT 0,
    source_url   TEXT,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL
, original_hash TEXT, content_hash TEXT, filename TEXT, options TEXT NOT NULL DEFAULT '{}');
CREATE TABLE genie_documents (
    genie_id    TEXT NOT NULL REFERENCES genies(id) ON DELETE CASCADE,
    document_id TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (genie_id, document_id)
);
CREATE TABLE conversations (
    id                    TEXT PRIMARY KEY,
    user_id               TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    genie_id              TEXT REFERENCES genies(id) ON DELETE SET NULL,
    external_id           TEXT UNIQUE,
    channel               TEXT NOT NULL DEFAULT 'phone',
    status                TEXT NOT NULL,
    started_at            TEXT NOT NULL,
    duration_seconds      INTEGER NOT NULL DEFAULT 0,
    transcript            TEXT NOT NULL DEFAULT '[]',
    summary               TEXT,
    analysis              TEXT,
    metadata              TEXT NOT NULL DEFAULT '{}',
    tags                  TEXT NOT NULL DEFAULT '[]',
    created_at            TEXT NOT NULL,
    updated_at            TEXT NOT NULL
, version INTEGER, llm_turns TEXT NOT NULL DEFAULT '[]', tokens_in INTEGER NOT NULL DEFAULT 0, tokens_out INTEGER NOT NULL DEFAULT 0, tool_calls INTEGER NOT NULL DEFAULT 0, cost_micros INTEGER NOT NULL DEFAULT 0, unpriced_turns INTEGER NOT NULL DEFAULT 0);
CREATE TABLE lead_activities (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    lead_id     INTEGER NOT NULL REFERENCES leads(id) ON DELETE CASCADE,
    user_id     TEXT,
    type        TEXT NOT NULL,
    description TEXT,
    metadata    TEXT,
    created_at INTEGER NOT NULL DEFAULT 0);
CREATE TABLE email_logs (
    id         TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    recipient  TEXT NOT NULL,
    subject    TEXT NOT NULL,
    body       TEXT NOT NULL,
    status     TEXT NOT NULL,
    error      TEXT,
    created_at TEXT NOT NULL
);
CREATE TABLE notifications (
    id         TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    kind       TEXT NOT NULL,
    title      TEXT NOT NULL,
    body       TEXT NOT NULL DEFAULT '',
    data       TEXT NOT NULL DEFAULT '{}',
    read_at    TEXT,
    created_at TEXT NOT NULL
);
CREATE TABLE voice_local_agents (
    agent_id       TEXT PRIMARY KEY,
    spec           TEXT NOT NULL,
    knowledge_base TEXT NOT NULL DEFAULT '[]',
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL
);
CREATE TABLE voice_local_numbers (
    number      TEXT PRIMARY KEY,
    external_id TEXT NOT NULL UNIQUE,
    agent_id    TEXT NOT NULL,
    label       TEXT NOT NULL,
    created_at  TEXT NOT NULL
);
CREATE TABLE voice_local_documents (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    text       TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE voice_local_conversations (
    conversation_id   TEXT PRIMARY KEY,
    agent_id          TEXT NOT NULL,
    status            TEXT NOT NULL,
    start_time_unix   INTEGER NOT NULL,
    duration_secs     INTEGER NOT NULL DEFAULT 0,
    transcript        TEXT NOT NULL DEFAULT '[]',
    summary           TEXT,
    metadata          TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE document_chunks (
    id          INTEGER PRIMARY KEY,
    document_id TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,
    content     TEXT NOT NULL
);
CREATE TABLE lead_notes (
    id         TEXT PRIMARY KEY,
    lead_id    INTEGER NOT NULL REFERENCES leads(id) ON DELETE CASCADE,
    user_id    TEXT REFERENCES users(id) ON DELETE SET NULL,
    content    TEXT NOT NULL,
    is_pinned  INTEGER NOT NULL DEFAULT 0,
    sort_order INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
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
, due_at TEXT, owner TEXT);
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
CREATE TABLE worker_memory (
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    genie_id   TEXT NOT NULL,
    key        TEXT NOT NULL,
    value      TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (user_id, genie_id, key)
);
CREATE TABLE voice_favorites (
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    voice_id   TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (user_id, voice_id)
);
CREATE TABLE voice_collections (
    id          TEXT PRIMARY KEY,
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    description TEXT,
    sort_order  INTEGER NOT NULL DEFAULT 0,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);
CREATE TABLE voice_collection_items (
    collection_id TEXT NOT NULL REFERENCES voice_collections(id) ON DELETE CASCADE,
    voice_id      TEXT NOT NULL,
    position      INTEGER NOT NULL,
    added_at      TEXT NOT NULL,
    PRIMARY KEY (collection_id, voice_id)
);
CREATE TABLE marketplace_listings (
    id              TEXT PRIMARY KEY,
    user_id         TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    source_genie_id TEXT REFERENCES genies(id) ON DELETE SET NULL,
    name            TEXT NOT NULL,
    description     TEXT,
    category        TEXT,
    tags            TEXT NOT NULL DEFAULT '[]',
    system_prompt   TEXT,
    first_message   TEXT,
    web_welcome_message TEXT,
    voice_id        TEXT,
    llm_model       TEXT NOT NULL,
    temperature     REAL,
    max_tokens      INTEGER,
    settings        TEXT NOT NULL DEFAULT '{}',
    status          TEXT NOT NULL DEFAULT 'published' CHECK (status IN ('published', 'unpublished')),
    is_hidden       INTEGER NOT NULL DEFAULT 0,
    is_featured     INTEGER NOT NULL DEFAULT 0,
    install_count   INTEGER NOT NULL DEFAULT 0,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
, tools TEXT NOT NULL DEFAULT '[]');
CREATE TABLE marketplace_installs (
    id         TEXT PRIMARY KEY,
    listing_id TEXT NOT NULL REFERENCES marketplace_listings(id) ON DELETE CASCADE,
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    genie_id   TEXT REFERENCES genies(id) ON DELETE SET NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE teams (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    owner_id   TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE team_members (
    team_id   TEXT NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
    user_id   TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    role      TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
    joined_at TEXT NOT NULL,
    PRIMARY KEY (team_id, user_id)
);
CREATE TABLE team_invitations (
    id           TEXT PRIMARY KEY,
    team_id      TEXT NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
    email        TEXT NOT NULL COLLATE NOCASE,
    role         TEXT NOT NULL CHECK (role IN ('admin', 'member')),
    token_hash   TEXT NOT NULL UNIQUE,
    status       TEXT NOT NULL CHECK (status IN ('pending', 'accepted', 'declined', 'revoked')),
    invited_by   TEXT NOT NULL,
    expires_at   TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    responded_at TEXT
);
CREATE TABLE team_genies (
    genie_id   TEXT PRIMARY KEY REFERENCES genies(id) ON DELETE CASCADE,
    team_id    TEXT NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
    added_by   TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE qr_codes (
    id             TEXT PRIMARY KEY,
    user_id        TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    genie_id       TEXT NOT NULL REFERENCES genies(id) ON DELETE CASCADE,
    label          TEXT,
    url            TEXT NOT NULL,
    download_count INTEGER NOT NULL DEFAULT 0,
    is_deleted     INTEGER NOT NULL DEFAULT 0,
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL
);
CREATE TABLE webhooks (
    id              TEXT PRIMARY KEY,
    user_id         TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    url             TEXT NOT NULL,
    description     TEXT,
    event_types     TEXT NOT NULL DEFAULT '["*"]',
    is_active       INTEGER NOT NULL DEFAULT 1,
    -- The signing secret, AES-256-GCM sealed with the master key (record id as associated data).
    secret_sealed   BLOB NOT NULL,
    secret_prefix   TEXT NOT NULL,
    disabled_reason TEXT,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
CREATE TABLE webhook_deliveries (
    id               TEXT PRIMARY KEY,
    webhook_id       TEXT NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
    event_id         TEXT NOT NULL,
    event_type       TEXT NOT NULL,
    body             TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    last_status_code INTEGER,
    last_error       TEXT,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL
);
CREATE TABLE webhook_attempts (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    delivery_id      TEXT NOT NULL REFERENCES webhook_deliveries(id) ON DELETE CASCADE,
    status_code      INTEGER,
    latency_ms       INTEGER NOT NULL,
    response_excerpt TEXT,
    error            TEXT,
    created_at       TEXT NOT NULL
);
CREATE TABLE provider_hook_receipts (
    signature_hash TEXT PRIMARY KEY,
    received_at    TEXT NOT NULL
);
CREATE TABLE auth_epoch (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    epoch INTEGER NOT NULL
);
CREATE VIRTUAL TABLE leads_search USING fts5(name, email, phone, content='leads', content_rowid='id', tokenize='trigram', detail='none', columnsize=0);
CREATE TABLE leads_search_pending (lead_id INTEGER PRIMARY KEY);
CREATE TABLE genie_versions (
    genie_id    TEXT NOT NULL REFERENCES genies(id) ON DELETE CASCADE,
    version     INTEGER NOT NULL,
    config      BLOB NOT NULL,
    created_by  TEXT,
    created_at  TEXT NOT NULL,
    summary     TEXT NOT NULL,
    PRIMARY KEY (genie_id, version)
) WITHOUT ROWID;
CREATE TABLE genie_drafts (
    genie_id    TEXT PRIMARY KEY REFERENCES genies(id) ON DELETE CASCADE,
    config      TEXT NOT NULL,
    base_version INTEGER,
    created_by  TEXT,
    updated_at  TEXT NOT NULL
);
CREATE TABLE genie_traffic (
    genie_id    TEXT PRIMARY KEY REFERENCES genies(id) ON DELETE CASCADE,
    traffic     TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);
CREATE TABLE genie_tests (
    id              TEXT PRIMARY KEY,
    genie_id        TEXT NOT NULL REFERENCES genies(id) ON DELETE CASCADE,
    user_id         TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name            TEXT NOT NULL,
    turns           TEXT,
    simulated_user  TEXT,
    criteria        TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
CREATE TABLE genie_test_runs (
    id          TEXT PRIMARY KEY,
    test_id     TEXT NOT NULL REFERENCES genie_tests(id) ON DELETE CASCADE,
    genie_id    TEXT NOT NULL REFERENCES genies(id) ON DELETE CASCADE,
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    -- `draft`, or the version number as text.
    target      TEXT NOT NULL,
    config      TEXT NOT NULL,
    status      TEXT NOT NULL,
    passed      INTEGER,
    transcript  TEXT NOT NULL DEFAULT '[]',
    results     TEXT NOT NULL DEFAULT '[]',
    tokens      INTEGER NOT NULL DEFAULT 0,
    error       TEXT,
    created_at  TEXT NOT NULL,
    finished_at TEXT
);
CREATE TABLE account_tokens (
    token_hash TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    purpose    TEXT NOT NULL CHECK (purpose IN ('password_reset', 'email_change')),
    new_email  TEXT,
    expires_at TEXT NOT NULL,
    used_at    TEXT,
    created_at TEXT NOT NULL
);
CREATE TABLE account_invitations (
    id           TEXT PRIMARY KEY,
    email        TEXT NOT NULL COLLATE NOCASE,
    role         TEXT NOT NULL CHECK (role IN ('internal_admin', 'standard_user', 'consumer')),
    full_name    TEXT,
    token_hash   TEXT NOT NULL UNIQUE,
    status       TEXT NOT NULL CHECK (status IN ('pending', 'accepted', 'revoked')),
    invited_by   TEXT NOT NULL,
    expires_at   TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    responded_at TEXT,
    user_id      TEXT
);
CREATE TABLE user_identities (
    issuer        TEXT NOT NULL,
    subject       TEXT NOT NULL,
    user_id       TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    email         TEXT,
    created_at    TEXT NOT NULL,
    last_login_at TEXT,
    PRIMARY KEY (issuer, subject)
);
CREATE TABLE worker_heartbeat (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    beat_at TEXT NOT NULL,
    stopped INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE conversation_rollup (
    user_id       TEXT NOT NULL,
    hour          TEXT NOT NULL,
    genie_id      TEXT NOT NULL,
    conversations INTEGER NOT NULL,
    duration_sum  INTEGER NOT NULL,
    analyzed      INTEGER NOT NULL,
    successes     INTEGER NOT NULL,
    tokens_in     INTEGER NOT NULL,
    tokens_out    INTEGER NOT NULL,
    cost_micros   INTEGER NOT NULL,
    PRIMARY KEY (user_id, hour, genie_id)
) WITHOUT ROWID;
CREATE TABLE conversation_rollup_daily (
    user_id       TEXT NOT NULL,
    day           TEXT NOT NULL,
    genie_id      TEXT NOT NULL,
    conversations INTEGER NOT NULL,
    duration_sum  INTEGER NOT NULL,
    analyzed      INTEGER NOT NULL,
    successes     INTEGER NOT NULL,
    tokens_in     INTEGER NOT NULL,
    tokens_out    INTEGER NOT NULL,
    cost_micros   INTEGER NOT NULL,
    PRIMARY KEY (user_id, day, genie_id)
) WITHOUT ROWID;
CREATE TABLE sync_runs (
    id          TEXT PRIMARY KEY,
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    genie_id    TEXT,
    status      TEXT NOT NULL,
    genies      INTEGER NOT NULL DEFAULT 0,
    genies_done INTEGER NOT NULL DEFAULT 0,
    created     INTEGER NOT NULL DEFAULT 0,
    updated     INTEGER NOT NULL DEFAULT 0,
    unchanged   INTEGER NOT NULL DEFAULT 0,
    errors      TEXT NOT NULL DEFAULT '[]',
    position    TEXT NOT NULL DEFAULT '{}',
    started_at  TEXT,
    finished_at TEXT,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);
CREATE TABLE genie_providers (
    genie_id   TEXT PRIMARY KEY REFERENCES genies(id) ON DELETE CASCADE,
    provider   TEXT NOT NULL,
    state      TEXT NOT NULL DEFAULT 'in_sync' CHECK (state IN ('in_sync', 'pending', 'failed')),
    error      TEXT,
    updated_at TEXT NOT NULL
, drift TEXT, drift_checked_at TEXT);
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
    ended_at         TEXT, owner TEXT, lease_until TEXT,
    UNIQUE (campaign_id, lead_id, attempt)
);
CREATE TABLE phone_imports (
    phone_id    TEXT PRIMARY KEY REFERENCES genie_phone_numbers(id) ON DELETE CASCADE,
    kind        TEXT NOT NULL,
    account     TEXT NOT NULL,
    nonce       BLOB NOT NULL,
    ciphertext  BLOB NOT NULL,
    created_at  TEXT NOT NULL
);
CREATE TABLE provider_documents (
    document_id TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    provider TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    external_id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (document_id, provider)
);
CREATE TABLE genie_moves (
    genie_id TEXT PRIMARY KEY REFERENCES genies(id) ON DELETE CASCADE,
    from_provider TEXT NOT NULL,
    to_provider TEXT NOT NULL,
    new_agent_id TEXT,
    created_documents TEXT NOT NULL DEFAULT '[]',
    created_numbers TEXT NOT NULL DEFAULT '[]',
    started_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE rate_counters (
    key          TEXT NOT NULL,
    window_start INTEGER NOT NULL,
    n            INTEGER NOT NULL,
    PRIMARY KEY (key, window_start)
);
CREATE TABLE genie_call_starts (
    id          TEXT PRIMARY KEY,
    genie_id    TEXT NOT NULL REFERENCES genies(id) ON DELETE CASCADE,
    campaign_id TEXT,
    started_at  TEXT NOT NULL
);
CREATE TABLE early_call_outcomes (
    provider_call_id TEXT PRIMARY KEY,
    outcome          TEXT NOT NULL,
    conversation_id  TEXT,
    error            TEXT,
    received_at      TEXT NOT NULL
);
CREATE TABLE event_outbox (
    seq           INTEGER PRIMARY KEY,
    id            TEXT NOT NULL UNIQUE,
    kind          TEXT NOT NULL,
    user_id       TEXT NOT NULL,
    data          TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    dispatched_at TEXT
);
CREATE TABLE schedules_version (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
);
CREATE TABLE lead_owner_counts (
    owner_id TEXT NOT NULL,
    status   TEXT NOT NULL,
    n        INTEGER NOT NULL,
    PRIMARY KEY (owner_id, status)
) WITHOUT ROWID;
CREATE TABLE conversation_counts (
    user_id TEXT NOT NULL,
    status  TEXT NOT NULL,
    n       INTEGER NOT NULL,
    PRIMARY KEY (user_id, status)
) WITHOUT ROWID;
CREATE VIRTUAL TABLE document_chunks_fts USING fts5(
    content,
    readers,
    content = 'document_chunks_indexed',
    content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TABLE "activities" (
    id         BLOB NOT NULL,
    user_id    BLOB NOT NULL,
    resource   TEXT NOT NULL,
    action     TEXT NOT NULL,
    record_id  TEXT,
    summary    TEXT NOT NULL,
    ip         TEXT,
    created_at INTEGER NOT NULL
);
CREATE TABLE leads_search_state (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    indexed_to INTEGER NOT NULL
);
CREATE TABLE "users" (
    id            TEXT PRIMARY KEY,
    email         TEXT NOT NULL UNIQUE COLLATE NOCASE,
    full_name     TEXT,
    role          TEXT NOT NULL CHECK (role IN ('internal_admin', 'standard_user', 'consumer')),
    password_hash TEXT,
    avatar_url    TEXT,
    timezone      TEXT,
    preferences   TEXT NOT NULL DEFAULT '{}',
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    disabled_at   TEXT,
    key           BLOB GENERATED ALWAYS AS (
        CASE WHEN id GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]' THEN unhex(replace(id, '-', '')) ELSE CAST(id AS BLOB) END) VIRTUAL
);
CREATE TABLE "genies" (
    id                        TEXT PRIMARY KEY,
    user_id                   TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    external_agent_id         TEXT,
    name                      TEXT NOT NULL,
    name_lower                TEXT NOT NULL,
    description               TEXT,
    use_case                  TEXT,
    category                  TEXT,
    brand                     TEXT,
    system_prompt             TEXT,
    first_message             TEXT,
    voice_id                  TEXT,
    llm_model                 TEXT NOT NULL,
    temperature               REAL,
    max_tokens                INTEGER,
    is_active                 INTEGER NOT NULL DEFAULT 1,
    setup_completed           INTEGER NOT NULL DEFAULT 0,
    send_conversation_reports INTEGER NOT NULL DEFAULT 0,
    voice_disabled            INTEGER NOT NULL DEFAULT 0,
    multilingual              INTEGER NOT NULL DEFAULT 0,
    max_duration_seconds      INTEGER,
    turn_timeout_seconds      REAL,
    silence_end_seconds       REAL,
    turn_mode                 TEXT NOT NULL DEFAULT 'silence',
    max_calls                 INTEGER,
    settings                  TEXT NOT NULL DEFAULT '{}',
    branding                  TEXT NOT NULL DEFAULT '{}',
    support_emails            TEXT NOT NULL DEFAULT '[]',
    page_slug                 TEXT UNIQUE,
    web_welcome_message       TEXT,
    group_id                  TEXT REFERENCES genie_groups(id) ON DELETE SET NULL,
    sort_order                INTEGER NOT NULL DEFAULT 0,
    created_at                TEXT NOT NULL,
    updated_at                TEXT NOT NULL,
    tools                     TEXT NOT NULL DEFAULT '[]',
    allowed_origins           TEXT NOT NULL DEFAULT '[]',
    max_calls_per_minute      INTEGER,
    key                       BLOB GENERATED ALWAYS AS (
        CASE WHEN id GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]' THEN unhex(replace(id, '-', '')) ELSE CAST(id AS BLOB) END) VIRTUAL
);
CREATE TABLE "leads" (
    id                       INTEGER PRIMARY KEY AUTOINCREMENT,
    agent_id                 BLOB NOT NULL REFERENCES genies(key) ON DELETE CASCADE,
    user_id                  BLOB NOT NULL REFERENCES users(key) ON DELETE CASCADE,
    name                     TEXT,
    email                    TEXT,
    phone                    TEXT,
    status                   TEXT,
    priority                 TEXT,
    budget                   TEXT,
    timeline                 TEXT,
    address                  TEXT,
    notes                    TEXT,
    assigned_to              TEXT,
    conversation_id          INTEGER,
    primary_lead_id          INTEGER REFERENCES leads(id) ON DELETE SET NULL,
    is_decision_maker        INTEGER,
    preferred_contact_method TEXT,
    preferred_contact_time   TEXT,
    metadata                 TEXT,
    conversation_ref         TEXT REFERENCES conversations(id) ON DELETE SET NULL,
    do_not_call              INTEGER NOT NULL DEFAULT 0,
    created_log_id           INTEGER,
    created_by               TEXT,
    created_at               INTEGER NOT NULL DEFAULT 0,
    updated_at               INTEGER
);
CREATE TABLE "lead_status_counts" (
    agent_id BLOB NOT NULL,
    user_id  BLOB NOT NULL,
    status   TEXT NOT NULL,
    n        INTEGER NOT NULL,
    PRIMARY KEY (agent_id, user_id, status)
) WITHOUT ROWID;
CREATE TABLE "lead_rollup" (
    user_id  BLOB NOT NULL,
    hour     TEXT NOT NULL,
    agent_id BLOB NOT NULL,
    status   TEXT NOT NULL,
    n        INTEGER NOT NULL,
    PRIMARY KEY (user_id, hour, agent_id, status)
) WITHOUT ROWID;
CREATE TABLE "lead_rollup_daily" (
    user_id  BLOB NOT NULL,
    day      TEXT NOT NULL,
    agent_id BLOB NOT NULL,
    status   TEXT NOT NULL,
    n        INTEGER NOT NULL,
    PRIMARY KEY (user_id, day, agent_id, status)
) WITHOUT ROWID;

-- Rows
INSERT INTO "auth_epoch" VALUES(1,0);
INSERT INTO "leads_search_state" VALUES(1,0);
INSERT INTO "sqlite_sequence" VALUES('leads',0);

-- Indexes
CREATE INDEX sessions_user ON sessions(user_id);
CREATE INDEX api_keys_user ON api_keys(user_id, status);
CREATE INDEX jobs_due ON jobs(status, run_at);
CREATE INDEX genie_groups_user ON genie_groups(user_id, sort_order);
CREATE INDEX genie_phone_genie ON genie_phone_numbers(genie_id);
CREATE INDEX genie_assignments_user ON genie_assignments(user_id);
CREATE INDEX document_folders_user ON document_folders(user_id);
CREATE INDEX documents_user ON documents(user_id, created_at);
CREATE INDEX documents_public ON documents(is_public);
CREATE INDEX documents_folder ON documents(folder_id);
CREATE INDEX genie_documents_document ON genie_documents(document_id);
CREATE INDEX conversations_user_time ON conversations(user_id, started_at);
CREATE INDEX conversations_genie ON conversations(genie_id, started_at);
CREATE INDEX email_logs_user ON email_logs(user_id, created_at);
CREATE INDEX notifications_user ON notifications(user_id, read_at, created_at);
CREATE INDEX genie_groups_user_sort ON genie_groups(user_id, sort_order, id);
CREATE INDEX voice_local_conversations_agent ON voice_local_conversations(agent_id, start_time_unix, conversation_id);
CREATE INDEX documents_original_hash ON documents(original_hash);
CREATE INDEX documents_content_hash ON documents(content_hash);
CREATE INDEX documents_user_type ON documents(user_id, type);
CREATE INDEX documents_status ON documents(status);
CREATE INDEX document_chunks_document ON document_chunks(document_id, seq);
CREATE INDEX document_folders_parent ON document_folders(parent_id);
CREATE INDEX lead_notes_lead ON lead_notes(lead_id, is_pinned, sort_order);
CREATE INDEX conversations_user_status_time ON conversations(user_id, status, started_at);
CREATE INDEX worker_genies_user ON worker_genies(user_id, created_at);
CREATE INDEX worker_genies_trigger ON worker_genies(trigger_type, is_active);
CREATE INDEX worker_runs_genie ON worker_runs(worker_genie_id, created_at);
CREATE INDEX worker_runs_user ON worker_runs(user_id, created_at);
CREATE INDEX worker_runs_status ON worker_runs(status, created_at);
CREATE INDEX voice_collections_user ON voice_collections(user_id, sort_order);
CREATE INDEX marketplace_public ON marketplace_listings(status, is_hidden, install_count);
CREATE INDEX marketplace_user ON marketplace_listings(user_id);
CREATE INDEX marketplace_category ON marketplace_listings(category);
CREATE INDEX marketplace_installs_listing ON marketplace_installs(listing_id);
CREATE INDEX team_members_user ON team_members(user_id);
CREATE INDEX team_invitations_team ON team_invitations(team_id, status);
CREATE INDEX team_genies_team ON team_genies(team_id);
CREATE INDEX qr_codes_user ON qr_codes(user_id, is_deleted, created_at);
CREATE INDEX webhooks_user ON webhooks(user_id, is_active);
CREATE INDEX webhook_deliveries_hook ON webhook_deliveries(webhook_id, created_at);
CREATE INDEX webhook_attempts_delivery ON webhook_attempts(delivery_id, id);
CREATE INDEX provider_hook_receipts_time ON provider_hook_receipts(received_at);
CREATE INDEX conversations_genie_version ON conversations(genie_id, version);
CREATE INDEX genie_tests_genie ON genie_tests(genie_id, created_at);
CREATE INDEX genie_test_runs_test ON genie_test_runs(test_id, created_at);
CREATE INDEX genie_test_runs_genie ON genie_test_runs(genie_id, created_at);
CREATE INDEX account_tokens_user ON account_tokens(user_id, purpose);
CREATE INDEX account_invitations_email ON account_invitations(email, status);
CREATE INDEX user_identities_user ON user_identities(user_id);
CREATE INDEX conversations_active ON conversations(status) WHERE status IN ('initiated', 'in-progress');
CREATE INDEX conversation_rollup_hour ON conversation_rollup(hour);
CREATE INDEX conversation_rollup_daily_day ON conversation_rollup_daily(day);
CREATE INDEX sync_runs_user ON sync_runs(user_id, created_at);
CREATE INDEX genie_providers_provider ON genie_providers(provider);
CREATE INDEX campaigns_user ON campaigns (user_id, id);
CREATE INDEX campaigns_genie ON campaigns (genie_id);
CREATE INDEX campaign_targets_due ON campaign_targets (campaign_id, status, next_at);
CREATE INDEX campaign_calls_open ON campaign_calls (campaign_id, status);
CREATE INDEX campaign_calls_provider ON campaign_calls (provider_call_id);
CREATE UNIQUE INDEX worker_runs_due ON worker_runs(worker_genie_id, due_at) WHERE due_at IS NOT NULL;
CREATE INDEX genie_call_starts_genie ON genie_call_starts (genie_id, started_at);
CREATE INDEX early_call_outcomes_received ON early_call_outcomes (received_at);
CREATE INDEX event_outbox_pending ON event_outbox(seq) WHERE dispatched_at IS NULL;
CREATE INDEX event_outbox_dispatched ON event_outbox(dispatched_at);
CREATE INDEX campaign_calls_held ON campaign_calls (owner, lease_until) WHERE status <> 'ended';
CREATE INDEX activities_user_time ON activities(user_id, created_at);
CREATE INDEX activities_time ON activities(created_at);
CREATE INDEX lead_activities_lead ON lead_activities(lead_id, created_at);
CREATE UNIQUE INDEX users_key ON users(key);
CREATE UNIQUE INDEX genies_key ON genies(key);
CREATE INDEX genies_user_id ON genies(user_id, id);
CREATE INDEX genies_user_name ON genies(user_id, name_lower);
CREATE INDEX genies_group ON genies(group_id);
CREATE INDEX genies_user_sort ON genies(user_id, sort_order, id);
CREATE INDEX lead_status_counts_user ON lead_status_counts(user_id);
CREATE INDEX lead_rollup_hour ON lead_rollup(hour);
CREATE INDEX lead_rollup_daily_day ON lead_rollup_daily(day);
CREATE INDEX leads_user_time ON leads(user_id, created_at);
CREATE INDEX leads_agent_time ON leads(agent_id, created_at);
CREATE INDEX leads_time ON leads(created_at);
CREATE INDEX leads_conversation_ref ON leads(conversation_ref) WHERE conversation_ref IS NOT NULL;
CREATE INDEX leads_status_time ON leads(status, created_at, agent_id);
CREATE INDEX leads_primary_lead ON leads(primary_lead_id) WHERE primary_lead_id IS NOT NULL;
CREATE INDEX lead_notes_user ON lead_notes(user_id) WHERE user_id IS NOT NULL;
CREATE INDEX marketplace_listings_source ON marketplace_listings(source_genie_id) WHERE source_genie_id IS NOT NULL;
CREATE INDEX marketplace_installs_genie ON marketplace_installs(genie_id) WHERE genie_id IS NOT NULL;
CREATE INDEX marketplace_installs_user ON marketplace_installs(user_id);
CREATE INDEX qr_codes_genie ON qr_codes(genie_id);
CREATE INDEX teams_owner ON teams(owner_id);
CREATE INDEX genie_tests_user ON genie_tests(user_id);
CREATE INDEX genie_test_runs_user ON genie_test_runs(user_id);

-- Views
CREATE VIEW call_logs AS
    SELECT id, user_id, genie_id, external_id, status, started_at, duration_seconds, summary, created_at
    FROM conversations WHERE channel = 'phone';
CREATE VIEW document_chunks_indexed AS
    SELECT ch.id, ch.content,
           CASE WHEN d.status = 'completed' AND d.is_active = 1
                THEN 'u' || hex(d.user_id) || CASE WHEN d.is_public = 1 THEN ' pub' ELSE '' END
                ELSE 'xu' || hex(d.user_id) || CASE WHEN d.is_public = 1 THEN ' xpub' ELSE '' END
                END AS readers
    FROM document_chunks ch JOIN documents d ON d.id = ch.document_id;

-- Full-text indexes
INSERT INTO "leads_search"("leads_search") VALUES('rebuild');
INSERT INTO "document_chunks_fts"("document_chunks_fts") VALUES('rebuild');

-- Triggers
CREATE TRIGGER auth_epoch_api_keys_au AFTER UPDATE OF id, user_id, key_hash, status ON api_keys BEGIN
    UPDATE auth_epoch SET epoch = epoch + 1 WHERE id = 1;
END;
CREATE TRIGGER auth_epoch_api_keys_ad AFTER DELETE ON api_keys BEGIN
    UPDATE auth_epoch SET epoch = epoch + 1 WHERE id = 1;
END;
CREATE TRIGGER auth_epoch_sessions_au AFTER UPDATE OF id, user_id, revoked_at ON sessions BEGIN
    UPDATE auth_epoch SET epoch = epoch + 1 WHERE id = 1;
END;
CREATE TRIGGER auth_epoch_sessions_ad AFTER DELETE ON sessions BEGIN
    UPDATE auth_epoch SET epoch = epoch + 1 WHERE id = 1;
END;
CREATE TRIGGER conversation_rollup_ai AFTER INSERT ON conversations BEGIN
    INSERT INTO conversation_rollup (user_id, hour, genie_id, conversations, duration_sum, analyzed, successes, tokens_in, tokens_out, cost_micros)
    VALUES (new.user_id, substr(new.started_at, 1, 13), COALESCE(new.genie_id, ''), 1, new.duration_seconds,
            (new.analysis IS NOT NULL), (new.analysis IS NOT NULL AND json_valid(new.analysis) AND COALESCE(json_extract(new.analysis, '$.sentiment'), '') <> 'negative' AND COALESCE(json_extract(new.analysis, '$.intent'), '') <> 'complaint'), new.tokens_in, new.tokens_out, new.cost_micros)
    ON CONFLICT (user_id, hour, genie_id) DO UPDATE SET
        conversations = conversations + excluded.conversations, duration_sum = duration_sum + excluded.duration_sum,
        analyzed = analyzed + excluded.analyzed, successes = successes + excluded.successes,
        tokens_in = tokens_in + excluded.tokens_in, tokens_out = tokens_out + excluded.tokens_out,
        cost_micros = cost_micros + excluded.cost_micros;
    INSERT INTO conversation_rollup_daily (user_id, day, genie_id, conversations, duration_sum, analyzed, successes, tokens_in, tokens_out, cost_micros)
    VALUES (new.user_id, substr(new.started_at, 1, 10), COALESCE(new.genie_id, ''), 1, new.duration_seconds,
            (new.analysis IS NOT NULL), (new.analysis IS NOT NULL AND json_valid(new.analysis) AND COALESCE(json_extract(new.analysis, '$.sentiment'), '') <> 'negative' AND COALESCE(json_extract(new.analysis, '$.intent'), '') <> 'complaint'), new.tokens_in, new.tokens_out, new.cost_micros)
    ON CONFLICT (user_id, day, genie_id) DO UPDATE SET
        conversations = conversations + excluded.conversations, duration_sum = duration_sum + excluded.duration_sum,
        analyzed = analyzed + excluded.analyzed, successes = successes + excluded.successes,
        tokens_in = tokens_in + excluded.tokens_in, tokens_out = tokens_out + excluded.tokens_out,
        cost_micros = cost_micros + excluded.cost_micros;
END;
CREATE TRIGGER conversation_rollup_ad AFTER DELETE ON conversations BEGIN
    INSERT INTO conversation_rollup (user_id, hour, genie_id, conversations, duration_sum, analyzed, successes, tokens_in, tokens_out, cost_micros)
    VALUES (old.user_id, substr(old.started_at, 1, 13), COALESCE(old.genie_id, ''), -1, -old.duration_seconds,
            -(old.analysis IS NOT NULL), -(old.analysis IS NOT NULL AND json_valid(old.analysis) AND COALESCE(json_extract(old.analysis, '$.sentiment'), '') <> 'negative' AND COALESCE(json_extract(old.analysis, '$.intent'), '') <> 'complaint'), -old.tokens_in, -old.tokens_out, -old.cost_micros)
    ON CONFLICT (user_id, hour, genie_id) DO UPDATE SET
        conversations = conversations + excluded.conversations, duration_sum = duration_sum + excluded.duration_sum,
        analyzed = analyzed + excluded.analyzed, successes = successes + excluded.successes,
        tokens_in = tokens_in + excluded.tokens_in, tokens_out = tokens_out + excluded.tokens_out,
        cost_micros = cost_micros + excluded.cost_micros;
    INSERT INTO conversation_rollup_daily (user_id, day, genie_id, conversations, duration_sum, analyzed, successes, tokens_in, tokens_out, cost_micros)
    VALUES (old.user_id, substr(old.started_at, 1, 10), COALESCE(old.genie_id, ''), -1, -old.duration_seconds,
            -(old.analysis IS NOT NULL), -(old.analysis IS NOT NULL AND json_valid(old.analysis) AND COALESCE(json_extract(old.analysis, '$.sentiment'), '') <> 'negative' AND COALESCE(json_extract(old.analysis, '$.intent'), '') <> 'complaint'), -old.tokens_in, -old.tokens_out, -old.cost_micros)
    ON CONFLICT (user_id, day, genie_id) DO UPDATE SET
        conversations = conversations + excluded.conversations, duration_sum = duration_sum + excluded.duration_sum,
        analyzed = analyzed + excluded.analyzed, successes = successes + excluded.successes,
        tokens_in = tokens_in + excluded.tokens_in, tokens_out = tokens_out + excluded.tokens_out,
        cost_micros = cost_micros + excluded.cost_micros;
END;
CREATE TRIGGER conversation_rollup_au AFTER UPDATE OF user_id, genie_id, started_at, duration_seconds, analysis, tokens_in, tokens_out, cost_micros ON conversations BEGIN
    INSERT INTO conversation_rollup (user_id, hour, genie_id, conversations, duration_sum, analyzed, successes, tokens_in, tokens_out, cost_micros)
    VALUES (old.user_id, substr(old.started_at, 1, 13), COALESCE(old.genie_id, ''), -1, -old.duration_seconds,
            -(old.analysis IS NOT NULL), -(old.analysis IS NOT NULL AND json_valid(old.analysis) AND COALESCE(json_extract(old.analysis, '$.sentiment'), '') <> 'negative' AND COALESCE(json_extract(old.analysis, '$.intent'), '') <> 'complaint'), -old.tokens_in, -old.tokens_out, -old.cost_micros)
    ON CONFLICT (user_id, hour, genie_id) DO UPDATE SET
        conversations = conversations + excluded.conversations, duration_sum = duration_sum + excluded.duration_sum,
        analyzed = analyzed + excluded.analyzed, successes = successes + excluded.successes,
        tokens_in = tokens_in + excluded.tokens_in, tokens_out = tokens_out + excluded.tokens_out,
        cost_micros = cost_micros + excluded.cost_micros;
    INSERT INTO conversation_rollup_daily (user_id, day, genie_id, conversations, duration_sum, analyzed, successes, tokens_in, tokens_out, cost_micros)
    VALUES (old.user_id, substr(old.started_at, 1, 10), COALESCE(old.genie_id, ''), -1, -old.duration_seconds,
            -(old.analysis IS NOT NULL), -(old.analysis IS NOT NULL AND json_valid(old.analysis) AND COALESCE(json_extract(old.analysis, '$.sentiment'), '') <> 'negative' AND COALESCE(json_extract(old.analysis, '$.intent'), '') <> 'complaint'), -old.tokens_in, -old.tokens_out, -old.cost_micros)
    ON CONFLICT (user_id, day, genie_id) DO UPDATE SET
        conversations = conversations + excluded.conversations, duration_sum = duration_sum + excluded.duration_sum,
        analyzed = analyzed + excluded.analyzed, successes = successes + excluded.successes,
        tokens_in = tokens_in + excluded.tokens_in, tokens_out = tokens_out + excluded.tokens_out,
        cost_micros = cost_micros + excluded.cost_micros;
    INSERT INTO conversation_rollup (user_id, hour, genie_id, conversations, duration_sum, analyzed, successes, tokens_in, tokens_out, cost_micros)
    VALUES (new.user_id, substr(new.started_at, 1, 13), COALESCE(new.genie_id, ''), 1, new.duration_seconds,
            (new.analysis IS NOT NULL), (new.analysis IS NOT NULL AND json_valid(new.analysis) AND COALESCE(json_extract(new.analysis, '$.sentiment'), '') <> 'negative' AND COALESCE(json_extract(new.analysis, '$.intent'), '') <> 'complaint'), new.tokens_in, new.tokens_out, new.cost_micros)
    ON CONFLICT (user_id, hour, genie_id) DO UPDATE SET
        conversations = conversations + excluded.conversations, duration_sum = duration_sum + excluded.duration_sum,
        analyzed = analyzed + excluded.analyzed, successes = successes + excluded.successes,
        tokens_in = tokens_in + excluded.tokens_in, tokens_out = tokens_out + excluded.tokens_out,
        cost_micros = cost_micros + excluded.cost_micros;
    INSERT INTO conversation_rollup_daily (user_id, day, genie_id, conversations, duration_sum, analyzed, successes, tokens_in, tokens_out, cost_micros)
    VALUES (new.user_id, substr(new.started_at, 1, 10), COALESCE(new.genie_id, ''), 1, new.duration_seconds,
            (new.analysis IS NOT NULL), (new.analysis IS NOT NULL AND json_valid(new.analysis) AND COALESCE(json_extract(new.analysis, '$.sentiment'), '') <> 'negative' AND COALESCE(json_extract(new.analysis, '$.intent'), '') <> 'complaint'), new.tokens_in, new.tokens_out, new.cost_micros)
    ON CONFLICT (user_id, day, genie_id) DO UPDATE SET
        conversations = conversations + excluded.conversations, duration_sum = duration_sum + excluded.duration_sum,
        analyzed = analyzed + excluded.analyzed, successes = successes + excluded.successes,
        tokens_in = tokens_in + excluded.tokens_in, tokens_out = tokens_out + excluded.tokens_out,
        cost_micros = cost_micros + excluded.cost_micros;
END;
CREATE TRIGGER schedules_version_ai AFTER INSERT ON worker_genies
WHEN NEW.trigger_type = 'schedule' BEGIN
    INSERT INTO schedules_version (id, version) VALUES (1, 1)
        ON CONFLICT (id) DO UPDATE SET version = version + 1;
END;
CREATE TRIGGER schedules_version_au AFTER UPDATE ON worker_genies
WHEN (OLD.trigger_type = 'schedule' OR NEW.trigger_type = 'schedule')
 AND (OLD.schedule IS NOT NEW.schedule OR OLD.timezone IS NOT NEW.timezone
      OR OLD.is_active IS NOT NEW.is_active OR OLD.trigger_type IS NOT NEW.trigger_type) BEGIN
    INSERT INTO schedules_version (id, version) VALUES (1, 1)
        ON CONFLICT (id) DO UPDATE SET version = version + 1;
END;
CREATE TRIGGER schedules_version_ad AFTER DELETE ON worker_genies
WHEN OLD.trigger_type = 'schedule' BEGIN
    INSERT INTO schedules_version (id, version) VALUES (1, 1)
        ON CONFLICT (id) DO UPDATE SET version = version + 1;
END;
CREATE TRIGGER conversation_counts_ai AFTER INSERT ON conversations BEGIN
    INSERT INTO conversation_counts (user_id, status, n) VALUES (new.user_id, new.status, 1)
        ON CONFLICT (user_id, status) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER conversation_counts_ad AFTER DELETE ON conversations BEGIN
    UPDATE conversation_counts SET n = n - 1 WHERE user_id = old.user_id AND status = old.status;
END;
CREATE TRIGGER conversation_counts_au AFTER UPDATE OF user_id, status ON conversations BEGIN
    UPDATE conversation_counts SET n = n - 1 WHERE user_id = old.user_id AND status = old.status;
    INSERT INTO conversation_counts (user_id, status, n) VALUES (new.user_id, new.status, 1)
        ON CONFLICT (user_id, status) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER document_chunks_ai AFTER INSERT ON document_chunks BEGIN
    INSERT INTO document_chunks_fts(rowid, content, readers)
        SELECT id, content, readers FROM document_chunks_indexed WHERE id = new.id;
END;
CREATE TRIGGER document_chunks_bd BEFORE DELETE ON document_chunks BEGIN
    INSERT INTO document_chunks_fts(document_chunks_fts, rowid, content, readers)
        SELECT 'delete', id, content, readers FROM document_chunks_indexed WHERE id = old.id;
END;
CREATE TRIGGER document_chunks_bu BEFORE UPDATE OF content, document_id ON document_chunks BEGIN
    INSERT INTO document_chunks_fts(document_chunks_fts, rowid, content, readers)
        SELECT 'delete', id, content, readers FROM document_chunks_indexed WHERE id = old.id;
END;
CREATE TRIGGER document_chunks_au AFTER UPDATE OF content, document_id ON document_chunks BEGIN
    INSERT INTO document_chunks_fts(rowid, content, readers)
        SELECT id, content, readers FROM document_chunks_indexed WHERE id = new.id;
END;
CREATE TRIGGER documents_chunks_bd BEFORE DELETE ON documents BEGIN
    DELETE FROM document_chunks WHERE document_id = old.id;
END;
CREATE TRIGGER auth_epoch_users_au AFTER UPDATE OF id, role ON users BEGIN
    UPDATE auth_epoch SET epoch = epoch + 1 WHERE id = 1;
END;
CREATE TRIGGER auth_epoch_users_ad AFTER DELETE ON users BEGIN
    UPDATE auth_epoch SET epoch = epoch + 1 WHERE id = 1;
END;
CREATE TRIGGER auth_epoch_users_disabled_au AFTER UPDATE OF disabled_at ON users BEGIN
    UPDATE auth_epoch SET epoch = epoch + 1 WHERE id = 1;
END;
CREATE TRIGGER genies_delete_leads BEFORE DELETE ON genies BEGIN
    DELETE FROM leads WHERE agent_id = old.key;
END;
CREATE TRIGGER lead_counts_ai AFTER INSERT ON leads BEGIN
    INSERT INTO lead_status_counts (agent_id, user_id, status, n)
        VALUES (new.agent_id, new.user_id, COALESCE(new.status, ''), 1)
        ON CONFLICT (agent_id, user_id, status) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER lead_counts_ad AFTER DELETE ON leads BEGIN
    UPDATE lead_status_counts SET n = n - 1
        WHERE agent_id = old.agent_id AND user_id = old.user_id AND status = COALESCE(old.status, '');
END;
CREATE TRIGGER lead_counts_au AFTER UPDATE OF agent_id, user_id, status ON leads BEGIN
    UPDATE lead_status_counts SET n = n - 1
        WHERE agent_id = old.agent_id AND user_id = old.user_id AND status = COALESCE(old.status, '');
    INSERT INTO lead_status_counts (agent_id, user_id, status, n)
        VALUES (new.agent_id, new.user_id, COALESCE(new.status, ''), 1)
        ON CONFLICT (agent_id, user_id, status) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER lead_owner_counts_ai AFTER INSERT ON leads BEGIN
    INSERT INTO lead_owner_counts (owner_id, status, n)
        SELECT g.user_id, COALESCE(new.status, ''), 1 FROM genies g WHERE g.key = new.agent_id
        ON CONFLICT (owner_id, status) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER lead_owner_counts_ad AFTER DELETE ON leads BEGIN
    UPDATE lead_owner_counts SET n = n - 1
        WHERE owner_id = (SELECT g.user_id FROM genies g WHERE g.key = old.agent_id)
          AND status = COALESCE(old.status, '');
END;
CREATE TRIGGER lead_owner_counts_au AFTER UPDATE OF agent_id, status ON leads BEGIN
    UPDATE lead_owner_counts SET n = n - 1
        WHERE owner_id = (SELECT g.user_id FROM genies g WHERE g.key = old.agent_id)
          AND status = COALESCE(old.status, '');
    INSERT INTO lead_owner_counts (owner_id, status, n)
        SELECT g.user_id, COALESCE(new.status, ''), 1 FROM genies g WHERE g.key = new.agent_id
        ON CONFLICT (owner_id, status) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER leads_search_ad AFTER DELETE ON leads BEGIN
    INSERT INTO leads_search(leads_search, rowid, name, email, phone)
        SELECT 'delete', old.id, old.name, old.email, old.phone
        WHERE old.id <= (SELECT indexed_to FROM leads_search_state WHERE id = 1)
          AND NOT EXISTS (SELECT 1 FROM leads_search_pending WHERE lead_id = old.id);
    DELETE FROM leads_search_pending WHERE lead_id = old.id;
END;
CREATE TRIGGER leads_search_au AFTER UPDATE OF name, email, phone ON leads
WHEN old.id <= (SELECT indexed_to FROM leads_search_state WHERE id = 1) BEGIN
    INSERT INTO leads_search(leads_search, rowid, name, email, phone)
        SELECT 'delete', old.id, old.name, old.email, old.phone
        WHERE NOT EXISTS (SELECT 1 FROM leads_search_pending WHERE lead_id = old.id);
    INSERT OR IGNORE INTO leads_search_pending (lead_id) VALUES (new.id);
END;
CREATE TRIGGER lead_rollup_ai AFTER INSERT ON leads BEGIN
    INSERT INTO lead_rollup (user_id, hour, agent_id, status, n)
    VALUES (new.user_id, strftime('%Y-%m-%dT%H', new.created_at / 1000, 'unixepoch'), new.agent_id, COALESCE(new.status, ''), 1)
    ON CONFLICT (user_id, hour, agent_id, status) DO UPDATE SET n = n + excluded.n;
    INSERT INTO lead_rollup_daily (user_id, day, agent_id, status, n)
    VALUES (new.user_id, strftime('%Y-%m-%d', new.created_at / 1000, 'unixepoch'), new.agent_id, COALESCE(new.status, ''), 1)
    ON CONFLICT (user_id, day, agent_id, status) DO UPDATE SET n = n + excluded.n;
END;
CREATE TRIGGER lead_rollup_ad AFTER DELETE ON leads BEGIN
    INSERT INTO lead_rollup (user_id, hour, agent_id, status, n)
    VALUES (old.user_id, strftime('%Y-%m-%dT%H', old.created_at / 1000, 'unixepoch'), old.agent_id, COALESCE(old.status, ''), -1)
    ON CONFLICT (user_id, hour, agent_id, status) DO UPDATE SET n = n + excluded.n;
    INSERT INTO lead_rollup_daily (user_id, day, agent_id, status, n)
    VALUES (old.user_id, strftime('%Y-%m-%d', old.created_at / 1000, 'unixepoch'), old.agent_id, COALESCE(old.status, ''), -1)
    ON CONFLICT (user_id, day, agent_id, status) DO UPDATE SET n = n + excluded.n;
END;
CREATE TRIGGER lead_rollup_au AFTER UPDATE OF user_id, agent_id, status, created_at ON leads BEGIN
    INSERT INTO lead_rollup (user_id, hour, agent_id, status, n)
    VALUES (old.user_id, strftime('%Y-%m-%dT%H', old.created_at / 1000, 'unixepoch'), old.agent_id, COALESCE(old.status, ''), -1)
    ON CONFLICT (user_id, hour, agent_id, status) DO UPDATE SET n = n + excluded.n;
    INSERT INTO lead_rollup_daily (user_id, day, agent_id, status, n)
    VALUES (old.user_id, strftime('%Y-%m-%d', old.created_at / 1000, 'unixepoch'), old.agent_id, COALESCE(old.status, ''), -1)
    ON CONFLICT (user_id, day, agent_id, status) DO UPDATE SET n = n + excluded.n;
    INSERT INTO lead_rollup (user_id, hour, agent_id, status, n)
    VALUES (new.user_id, strftime('%Y-%m-%dT%H', new.created_at / 1000, 'unixepoch'), new.agent_id, COALESCE(new.status, ''), 1)
    ON CONFLICT (user_id, hour, agent_id, status) DO UPDATE SET n = n + excluded.n;
    INSERT INTO lead_rollup_daily (user_id, day, agent_id, status, n)
    VALUES (new.user_id, strftime('%Y-%m-%d', new.created_at / 1000, 'unixepoch'), new.agent_id, COALESCE(new.status, ''), 1)
    ON CONFLICT (user_id, day, agent_id, status) DO UPDATE SET n = n + excluded.n;
END;
CREATE TRIGGER documents_readers_bu
BEFORE UPDATE OF user_id, is_public, status, is_active ON documents
WHEN old.user_id IS NOT new.user_id OR old.is_public IS NOT new.is_public
  OR (old.status = 'completed' AND old.is_active = 1) IS NOT (new.status = 'completed' AND new.is_active = 1)
BEGIN
    INSERT INTO document_chunks_fts(document_chunks_fts, rowid, content, readers)
        SELECT 'delete', ix.id, ix.content, ix.readers
        FROM document_chunks ch JOIN document_chunks_indexed ix ON ix.id = ch.id
        WHERE ch.document_id = old.id;
END;
CREATE TRIGGER documents_readers_au
AFTER UPDATE OF user_id, is_public, status, is_active ON documents
WHEN old.user_id IS NOT new.user_id OR old.is_public IS NOT new.is_public
  OR (old.status = 'completed' AND old.is_active = 1) IS NOT (new.status = 'completed' AND new.is_active = 1)
BEGIN
    INSERT INTO document_chunks_fts(rowid, content, readers)
        SELECT ix.id, ix.content, ix.readers
        FROM document_chunks ch JOIN document_chunks_indexed ix ON ix.id = ch.id
        WHERE ch.document_id = new.id;
END;
