-- Mirrors migrations/sqlite/V33: the schedules version, bumped by triggers in the
-- transaction that changes a scheduled worker genie; every instance polls it.
CREATE TABLE schedules_version (
    id      BIGINT PRIMARY KEY CHECK (id = 1),
    version BIGINT NOT NULL
);

CREATE FUNCTION genied_bump_schedules() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO schedules_version (id, version) VALUES (1, 1)
        ON CONFLICT (id) DO UPDATE SET version = schedules_version.version + 1;
    RETURN NULL;
END $$;

CREATE TRIGGER schedules_version_ai AFTER INSERT ON worker_genies
    FOR EACH ROW WHEN (NEW.trigger_type = 'schedule')
    EXECUTE FUNCTION genied_bump_schedules();
CREATE TRIGGER schedules_version_au AFTER UPDATE ON worker_genies
    FOR EACH ROW WHEN ((OLD.trigger_type = 'schedule' OR NEW.trigger_type = 'schedule')
        AND (OLD.schedule IS DISTINCT FROM NEW.schedule OR OLD.timezone IS DISTINCT FROM NEW.timezone
             OR OLD.is_active IS DISTINCT FROM NEW.is_active
             OR OLD.trigger_type IS DISTINCT FROM NEW.trigger_type))
    EXECUTE FUNCTION genied_bump_schedules();
CREATE TRIGGER schedules_version_ad AFTER DELETE ON worker_genies
    FOR EACH ROW WHEN (OLD.trigger_type = 'schedule')
    EXECUTE FUNCTION genied_bump_schedules();
