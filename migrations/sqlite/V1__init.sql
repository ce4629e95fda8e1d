-- Foundation: accounts, sessions, API keys, the audit log and the durable job queue.
-- Timestamps are RFC 3339 UTC strings with milliseconds, so text order is time order.

CREATE TABLE users (
    id            TEXT PRIMARY KEY,
    email         TEXT NOT NULL UNIQUE COLLATE NOCASE,
    full_name     TEXT,
    role          TEXT NOT NULL CHECK (role IN ('internal_admin', 'standard_user', 'consumer')),
    password_hash TEXT,
    avatar_url    TEXT,
    timezone      TEXT,
    preferences   TEXT NOT NULL DEFAULT '{}',
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL
);

CREATE TABLE sessions (
    id                 TEXT PRIMARY KEY,
    user_id            TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    refresh_hash       TEXT UNIQUE,
    refresh_expires_at TEXT,
    created_at         TEXT NOT NULL,
    revoked_at         TEXT
);
CREATE INDEX sessions_user ON sessions(user_id);

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
CREATE INDEX api_keys_user ON api_keys(user_id, status);

CREATE TABLE activities (
    id         TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL,
    resource   TEXT NOT NULL,
    action     TEXT NOT NULL,
    record_id  TEXT,
    summary    TEXT NOT NULL,
    ip         TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX activities_user_time ON activities(user_id, created_at);
CREATE INDEX activities_time ON activities(created_at);

-- Durable background work: a job survives restarts; failures are retried with backoff.
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
);
CREATE INDEX jobs_due ON jobs(status, run_at);

-- Genies live here from the start because almost every other resource points at them.
CREATE TABLE genie_groups (
    id         TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    description TEXT,
    sort_order INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX genie_groups_user ON genie_groups(user_id, sort_order);

CREATE TABLE genies (
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
    updated_at                TEXT NOT NULL
);
CREATE INDEX genies_user_id ON genies(user_id, id);
CREATE INDEX genies_user_name ON genies(user_id, name_lower);
CREATE INDEX genies_group ON genies(group_id);

CREATE TABLE genie_phone_numbers (
    id              TEXT PRIMARY KEY,
    genie_id        TEXT NOT NULL REFERENCES genies(id) ON DELETE CASCADE,
    number          TEXT NOT NULL UNIQUE,
    external_id     TEXT,
    status          TEXT NOT NULL,
    created_at      TEXT NOT NULL
);
CREATE INDEX genie_phone_genie ON genie_phone_numbers(genie_id);

-- Consumers see only the genies assigned to them.
CREATE TABLE genie_assignments (
    genie_id   TEXT NOT NULL REFERENCES genies(id) ON DELETE CASCADE,
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at TEXT NOT NULL,
    PRIMARY KEY (genie_id, user_id)
);
CREATE INDEX genie_assignments_user ON genie_assignments(user_id);

-- Cross-cutting tables several resources read (genie objects list their documents,
-- worker genies query leads and conversations). Resource migrations extend them.
CREATE TABLE document_folders (
    id         TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    parent_id  TEXT REFERENCES document_folders(id) ON DELETE SET NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX document_folders_user ON document_folders(user_id);

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
);
CREATE INDEX documents_user ON documents(user_id, created_at);
CREATE INDEX documents_public ON documents(is_public);
CREATE INDEX documents_folder ON documents(folder_id);

CREATE TABLE genie_documents (
    genie_id    TEXT NOT NULL REFERENCES genies(id) ON DELETE CASCADE,
    document_id TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (genie_id, document_id)
);
CREATE INDEX genie_documents_document ON genie_documents(document_id);

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
);
CREATE INDEX conversations_user_time ON conversations(user_id, started_at);
CREATE INDEX conversations_genie ON conversations(genie_id, started_at);

-- Calls are the phone-channel conversations.
CREATE VIEW call_logs AS
    SELECT id, user_id, genie_id, external_id, status, started_at, duration_seconds, summary, created_at
    FROM conversations WHERE channel = 'phone';

-- Leads keep the integer ids of the spec.
CREATE TABLE leads (
    id                       INTEGER PRIMARY KEY AUTOINCREMENT,
    agent_id                 TEXT NOT NULL REFERENCES genies(id) ON DELETE CASCADE,
    user_id                  TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
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
    created_at               TEXT NOT NULL,
    updated_at               TEXT
);
CREATE INDEX leads_user_time ON leads(user_id, created_at);
CREATE INDEX leads_agent_time ON leads(agent_id, created_at);
CREATE INDEX leads_user_status ON leads(user_id, status, created_at);
CREATE INDEX leads_agent_status ON leads(agent_id, status);

CREATE TABLE lead_activities (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    lead_id     INTEGER NOT NULL REFERENCES leads(id) ON DELETE CASCADE,
    user_id     TEXT,
    type        TEXT NOT NULL,
    description TEXT,
    metadata    TEXT,
    created_at  TEXT NOT NULL
);
CREATE INDEX lead_activities_lead ON lead_activities(lead_id, created_at);

-- Mail the service sent or tried to send (conversation reports, worker notifications).
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
CREATE INDEX email_logs_user ON email_logs(user_id, created_at);

-- Dashboard notifications for a user (worker genies, reports, failing webhooks).
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
CREATE INDEX notifications_user ON notifications(user_id, read_at, created_at);
