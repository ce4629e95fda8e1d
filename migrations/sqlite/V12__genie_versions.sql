-- Issue #18: every change of what a genie says and does is an immutable numbered version.
-- `config` is the version's configuration JSON, deflate-compressed: whole every 32nd version,
-- otherwise as the edit from the version before (db/genie_versions.rs; README, "Genie
-- versions", for what it costs). Live is the newest version; a draft and a traffic split are
-- one row each beside the genie, so `genies get` reads none of this.
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

-- `traffic`: JSON `[{version, weight}]`, weights summing to 100.
CREATE TABLE genie_traffic (
    genie_id    TEXT PRIMARY KEY REFERENCES genies(id) ON DELETE CASCADE,
    traffic     TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);

-- The version that served a conversation (public page chats split by `genie_traffic`).
ALTER TABLE conversations ADD COLUMN version INTEGER;
CREATE INDEX conversations_genie_version ON conversations(genie_id, version);

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
CREATE INDEX genie_tests_genie ON genie_tests(genie_id, created_at);

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
CREATE INDEX genie_test_runs_test ON genie_test_runs(test_id, created_at);
CREATE INDEX genie_test_runs_genie ON genie_test_runs(genie_id, created_at);
