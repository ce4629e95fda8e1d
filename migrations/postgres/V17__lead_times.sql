-- The counterpart of SQLite's V40 (issue #16, round twelve; docs/storage.md): a lead's times
-- (`leads.created_at`, `leads.updated_at`, `lead_activities.created_at`) as milliseconds
-- since the Unix epoch, so that db::leads reads and writes the same values on both engines
-- and a move between them copies the rows as they are. The indexes are rebuilt by the type
-- change. PostgreSQL refuses to change the type of a column a trigger's `UPDATE OF` names,
-- so that trigger is dropped and made again; the rollups' hour and day stay text.
--
-- Written so that a second run changes nothing (tests unapply a migration before this one
-- and run every later one again): a value that is already a number of milliseconds, as
-- text, is kept as it is.
DROP TRIGGER leads_counted_au ON leads;

ALTER TABLE leads
    ALTER COLUMN created_at TYPE bigint USING (
        CASE WHEN created_at::text ~ '^-?[0-9]+$' THEN created_at::text::bigint
             ELSE floor(extract(epoch FROM created_at::text::timestamptz) * 1000)::bigint END),
    ALTER COLUMN updated_at TYPE bigint USING (
        CASE WHEN updated_at::text ~ '^-?[0-9]+$' THEN updated_at::text::bigint
             ELSE floor(extract(epoch FROM updated_at::text::timestamptz) * 1000)::bigint END);
ALTER TABLE lead_activities
    ALTER COLUMN created_at TYPE bigint USING (
        CASE WHEN created_at::text ~ '^-?[0-9]+$' THEN created_at::text::bigint
             ELSE floor(extract(epoch FROM created_at::text::timestamptz) * 1000)::bigint END);

-- genied_lead_count takes the time as text and keeps its first 13 (hour) and 10 (day)
-- characters.
CREATE OR REPLACE FUNCTION genied_leads_counted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        PERFORM genied_lead_count(OLD.agent_id, OLD.user_id, OLD.status,
            to_char(to_timestamp(OLD.created_at / 1000) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24'), -1);
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        PERFORM genied_lead_count(NEW.agent_id, NEW.user_id, NEW.status,
            to_char(to_timestamp(NEW.created_at / 1000) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24'), 1);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER leads_counted_au AFTER UPDATE OF agent_id, user_id, status, created_at ON leads
    FOR EACH ROW EXECUTE FUNCTION genied_leads_counted();
