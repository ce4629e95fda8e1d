-- One `conversations sync` run in the background: its progress (counts, errors) and the
-- position it has reached (`{genie_id, cursor}`), so a run interrupted by a restart or a
-- provider error resumes where it stopped instead of paging from the start.
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
CREATE INDEX sync_runs_user ON sync_runs(user_id, created_at);
