-- Several instances on one database (PostgreSQL): a claimed job names the instance that runs
-- it and until when that instance holds it (renewed while it runs). A job whose lease has
-- run out belonged to an instance that died: another takes it over (src/jobs.rs). SQLite has
-- one instance, but the same code path runs on it.
ALTER TABLE jobs ADD COLUMN owner TEXT;
ALTER TABLE jobs ADD COLUMN lease_until TEXT;

-- A running worker run names its instance too (`owner`), so that a starting instance fails
-- only the runs of a dead one.
-- A scheduled worker run is keyed by its genie and the due time the schedule computed, so
-- that when every instance's scheduler fires for the same due time only one run is made.
ALTER TABLE worker_runs ADD COLUMN due_at TEXT;
ALTER TABLE worker_runs ADD COLUMN owner TEXT;
CREATE UNIQUE INDEX worker_runs_due ON worker_runs(worker_genie_id, due_at) WHERE due_at IS NOT NULL;

-- The per-key rate limit counted in the database (PostgreSQL only; SQLite keeps its
-- in-memory buckets): one row per key per fixed window.
CREATE TABLE rate_counters (
    key          TEXT NOT NULL,
    window_start INTEGER NOT NULL,
    n            INTEGER NOT NULL,
    PRIMARY KEY (key, window_start)
);
