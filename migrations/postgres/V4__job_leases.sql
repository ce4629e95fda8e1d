-- Mirrors migrations/sqlite/V26: job leases, scheduled runs keyed by due time, and the
-- per-key rate limit counters shared by every instance.
ALTER TABLE jobs ADD COLUMN owner TEXT;
ALTER TABLE jobs ADD COLUMN lease_until TEXT;

ALTER TABLE worker_runs ADD COLUMN due_at TEXT;
ALTER TABLE worker_runs ADD COLUMN owner TEXT;
CREATE UNIQUE INDEX worker_runs_due ON worker_runs(worker_genie_id, due_at) WHERE due_at IS NOT NULL;

CREATE TABLE rate_counters (
    key          TEXT NOT NULL,
    window_start BIGINT NOT NULL,
    n            BIGINT NOT NULL,
    PRIMARY KEY (key, window_start)
);
