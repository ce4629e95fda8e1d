-- Smaller leads (issue #16): what each lead costs on disk and in the WAL of every create.
--
-- Lead search keeps which trigrams each lead has, not where (detail=none), and no column
-- sizes (nothing ranks by them): about 40 instead of 220 bytes per lead. A search matches
-- every trigram of the term in the index and then checks the row for the term itself
-- (db::leads), so its results are the same.
--
-- New and renamed leads are not indexed inside the write that makes them: FTS5 writes a new
-- segment (and merges) for every transaction that touches it, which was a fifth of the work
-- of a lead create. They are listed in leads_search_pending, in the same transaction, and
-- indexed in batches by a background task (service::leads::search_indexer); a search checks
-- pending leads row by row, so it finds them at once all the same.
DROP TRIGGER leads_search_ai;
DROP TRIGGER leads_search_ad;
DROP TRIGGER leads_search_au;
DROP TABLE leads_search;
CREATE VIRTUAL TABLE leads_search USING fts5(name, email, phone, content='leads', content_rowid='id', tokenize='trigram', detail='none', columnsize=0);
CREATE TABLE leads_search_pending (lead_id INTEGER PRIMARY KEY);
CREATE TRIGGER leads_search_ai AFTER INSERT ON leads BEGIN
    INSERT OR IGNORE INTO leads_search_pending (lead_id) VALUES (new.id);
END;
-- An indexed lead leaves the index with the values it was indexed with (still in `old`); a
-- pending one was never in it.
CREATE TRIGGER leads_search_ad AFTER DELETE ON leads BEGIN
    INSERT INTO leads_search(leads_search, rowid, name, email, phone)
        SELECT 'delete', old.id, old.name, old.email, old.phone
        WHERE NOT EXISTS (SELECT 1 FROM leads_search_pending WHERE lead_id = old.id);
    DELETE FROM leads_search_pending WHERE lead_id = old.id;
END;
CREATE TRIGGER leads_search_au AFTER UPDATE OF name, email, phone ON leads BEGIN
    INSERT INTO leads_search(leads_search, rowid, name, email, phone)
        SELECT 'delete', old.id, old.name, old.email, old.phone
        WHERE NOT EXISTS (SELECT 1 FROM leads_search_pending WHERE lead_id = old.id);
    INSERT OR IGNORE INTO leads_search_pending (lead_id) VALUES (new.id);
END;
INSERT INTO leads_search(leads_search) VALUES ('rebuild');

-- A priority filter walks the scope's index in time order and checks the row: priority is
-- one of four values, so a page of 50 is found after about 200 rows. Two indexes of about
-- 87 bytes per lead each are not worth that. The same holds for an admin's listing of one
-- user's leads by status (leads_user_status); the owner's own listing by status keeps
-- leads_agent_status_time, and every user's by status keeps leads_status_time.
DROP INDEX leads_agent_priority_time;
DROP INDEX leads_user_priority_time;
DROP INDEX leads_user_status;

-- lead_activities_lead (lead_id, created_at) serves the activity log and the cascade;
-- (lead_id, id) served no query.
DROP INDEX lead_activities_lead_id;
