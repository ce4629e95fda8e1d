-- A counter that every change to a worker genie's schedule bumps, in the transaction that
-- makes the change, whoever commits it. Each instance's scheduler registers the schedules
-- when it starts; with several instances on one database (PostgreSQL) the others poll this
-- one row every few seconds and register the schedules again when it moved, so a schedule
-- created, changed or removed on one instance is followed by all of them
-- (src/workers/scheduler.rs). No row until the first change: the version is then 0.
--
-- Only what the schedulers register bumps it: a scheduled genie inserted or deleted, or its
-- schedule, time zone, trigger or active flag changed. Runs, names and prompts leave it alone.
CREATE TABLE schedules_version (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
);

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
