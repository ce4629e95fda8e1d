-- Genies: list ordering and the embedded ("local") voice provider's own state.

-- `list` orders by the user's manual order; `all` walks (user_id, id) keyset pages.
CREATE INDEX genies_user_sort ON genies(user_id, sort_order, id);
CREATE INDEX genie_groups_user_sort ON genie_groups(user_id, sort_order, id);

-- The local provider keeps its agents here, so they survive restarts.
CREATE TABLE voice_local_agents (
    agent_id       TEXT PRIMARY KEY,
    spec           TEXT NOT NULL,
    knowledge_base TEXT NOT NULL DEFAULT '[]',
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL
);

-- Numbers handed out from the configured pool. The primary key makes a double allocation
-- impossible; a released number is deleted and returns to the pool.
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

-- Conversations the service hosts itself (web pages); recorded by the page/QR feature.
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
CREATE INDEX voice_local_conversations_agent ON voice_local_conversations(agent_id, start_time_unix, conversation_id);
