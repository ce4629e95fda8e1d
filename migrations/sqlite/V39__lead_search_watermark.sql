-- A lead create no longer writes to leads_search_pending (issue #16, round ten;
-- docs/performance.md): that was one more page, and so one more WAL frame, in every create.
-- New leads are those past a watermark instead: leads_search_state.indexed_to is the highest
-- lead id the indexer (service::leads::search_indexer) has taken in, and every lead above it
-- waits for the next batch, which indexes the leads after the watermark in id order and moves
-- it on. Lead ids only grow (AUTOINCREMENT), so a new lead is always past it. A search
-- checks leads past the watermark row by row, as it does pending ones.
--
-- leads_search_pending keeps what only it can say: an indexed lead that was renamed (taken
-- out of the index with its old values, to go back in with its new ones), and the leads that
-- were pending when this migration ran.
--
-- Written so that a second run changes nothing (tests put older schemas back and migrate
-- again).
CREATE TABLE IF NOT EXISTS leads_search_state (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    indexed_to INTEGER NOT NULL
);
INSERT OR IGNORE INTO leads_search_state (id, indexed_to) SELECT 1, COALESCE(MAX(id), 0) FROM leads;
DROP TRIGGER IF EXISTS leads_search_ai;
-- A lead past the watermark was never in the index: nothing to take out.
DROP TRIGGER IF EXISTS leads_search_ad;
CREATE TRIGGER leads_search_ad AFTER DELETE ON leads BEGIN
    INSERT INTO leads_search(leads_search, rowid, name, email, phone)
        SELECT 'delete', old.id, old.name, old.email, old.phone
        WHERE old.id <= (SELECT indexed_to FROM leads_search_state WHERE id = 1)
          AND NOT EXISTS (SELECT 1 FROM leads_search_pending WHERE lead_id = old.id);
    DELETE FROM leads_search_pending WHERE lead_id = old.id;
END;
-- Renaming a lead past the watermark changes nothing here: the batch that takes it in reads
-- its values then.
DROP TRIGGER IF EXISTS leads_search_au;
CREATE TRIGGER leads_search_au AFTER UPDATE OF name, email, phone ON leads
WHEN old.id <= (SELECT indexed_to FROM leads_search_state WHERE id = 1) BEGIN
    INSERT INTO leads_search(leads_search, rowid, name, email, phone)
        SELECT 'delete', old.id, old.name, old.email, old.phone
        WHERE NOT EXISTS (SELECT 1 FROM leads_search_pending WHERE lead_id = old.id);
    INSERT OR IGNORE INTO leads_search_pending (lead_id) VALUES (new.id);
END;
