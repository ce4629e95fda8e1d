-- A lead's "created" activity is answered from the lead row (issue #16, round four;
-- docs/storage.md): every lead made through the API had a stored entry of 96 bytes plus 41 of
-- index, all of it known to the lead but two facts: the entry's id (from lead_activities'
-- own sequence, which orders it among the lead's other entries and which the API returns)
-- and who created the lead (the caller, not necessarily the lead's user). Those two move to
-- the lead row; getLogs and query_data put the entry back, byte for byte.
ALTER TABLE leads ADD COLUMN created_log_id INTEGER;
ALTER TABLE leads ADD COLUMN created_by TEXT;

-- Existing entries are folded only when the lead row can say them exactly: the create's own
-- text, no metadata, and the lead's created_at to the millisecond (the two were stamped by
-- separate clock reads, so an entry a millisecond later stays stored as it is).
UPDATE leads SET created_log_id = (
    SELECT MIN(a.id) FROM lead_activities a
    WHERE a.lead_id = leads.id AND a.type = 'created' AND a.description = 'Lead created'
      AND a.metadata IS NULL AND a.created_at = leads.created_at
);
UPDATE leads SET created_by = (SELECT a.user_id FROM lead_activities a WHERE a.id = leads.created_log_id)
    WHERE created_log_id IS NOT NULL;
DELETE FROM lead_activities WHERE id IN (SELECT created_log_id FROM leads WHERE created_log_id IS NOT NULL);
