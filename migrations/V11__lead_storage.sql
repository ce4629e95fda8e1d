-- Smaller leads (issue #16): what each lead costs on disk and in the WAL of every create.
--
-- Lead search keeps which trigrams each lead has, not where (detail=none), and no column
-- sizes (nothing ranks by them): about 40 instead of 220 bytes per lead. A search matches
-- every trigram of the term in the index and then checks the row for the term itself
-- (db::leads), so its results are the same.
DROP TRIGGER leads_search_ai;
DROP TRIGGER leads_search_ad;
DROP TRIGGER leads_search_au;
DROP TABLE leads_search;
CREATE VIRTUAL TABLE leads_search USING fts5(name, email, phone, content='leads', content_rowid='id', tokenize='trigram', detail='none', columnsize=0);
CREATE TRIGGER leads_search_ai AFTER INSERT ON leads BEGIN
    INSERT INTO leads_search(rowid, name, email, phone) VALUES (new.id, new.name, new.email, new.phone);
END;
CREATE TRIGGER leads_search_ad AFTER DELETE ON leads BEGIN
    INSERT INTO leads_search(leads_search, rowid, name, email, phone) VALUES ('delete', old.id, old.name, old.email, old.phone);
END;
CREATE TRIGGER leads_search_au AFTER UPDATE OF name, email, phone ON leads BEGIN
    INSERT INTO leads_search(leads_search, rowid, name, email, phone) VALUES ('delete', old.id, old.name, old.email, old.phone);
    INSERT INTO leads_search(rowid, name, email, phone) VALUES (new.id, new.name, new.email, new.phone);
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
