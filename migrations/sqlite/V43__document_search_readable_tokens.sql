-- V36's reader tokens say whose a chunk is and whether it is public; a search still joined
-- every match to its document to check that the document is completed and active, about a
-- third of the time of a search over thousands of matches (docs/performance.md, round
-- sixteen). Now a chunk has its tokens only while its document is completed and active, so
-- a user's search ranks what its `readers :` clause matches and reads no row for it; the
-- rows of the few answered are still checked (db::documents::search_sql).
--
-- The tokens now depend on the document's status and `is_active` as well, so the triggers
-- that re-index a document's chunks when its owner or visibility changes also run when it
-- becomes readable or stops being so. A status change that keeps it unreadable (one
-- pending step to the next) leaves the index alone: both sides have no token. A document
-- completes before its chunks are written (knowledge::pipeline), so a new document's chunks
-- are indexed once.

DROP TRIGGER documents_readers_bu;
DROP TRIGGER documents_readers_au;
DROP VIEW document_chunks_indexed;

CREATE VIEW document_chunks_indexed AS
    SELECT ch.id, ch.content,
           CASE WHEN d.status = 'completed' AND d.is_active = 1
                THEN 'u' || hex(d.user_id) || CASE WHEN d.is_public = 1 THEN ' pub' ELSE '' END
                ELSE '' END AS readers
    FROM document_chunks ch JOIN documents d ON d.id = ch.document_id;

CREATE TRIGGER documents_readers_bu
BEFORE UPDATE OF user_id, is_public, status, is_active ON documents
WHEN old.user_id IS NOT new.user_id OR old.is_public IS NOT new.is_public
  OR (old.status = 'completed' AND old.is_active = 1) IS NOT (new.status = 'completed' AND new.is_active = 1)
BEGIN
    INSERT INTO document_chunks_fts(document_chunks_fts, rowid, content, readers)
        SELECT 'delete', ix.id, ix.content, ix.readers
        FROM document_chunks ch JOIN document_chunks_indexed ix ON ix.id = ch.id
        WHERE ch.document_id = old.id;
END;
CREATE TRIGGER documents_readers_au
AFTER UPDATE OF user_id, is_public, status, is_active ON documents
WHEN old.user_id IS NOT new.user_id OR old.is_public IS NOT new.is_public
  OR (old.status = 'completed' AND old.is_active = 1) IS NOT (new.status = 'completed' AND new.is_active = 1)
BEGIN
    INSERT INTO document_chunks_fts(rowid, content, readers)
        SELECT ix.id, ix.content, ix.readers
        FROM document_chunks ch JOIN document_chunks_indexed ix ON ix.id = ch.id
        WHERE ch.document_id = new.id;
END;

INSERT INTO document_chunks_fts(document_chunks_fts) VALUES ('rebuild');

-- V42's covering indexes answered that per-match check; no search makes it now.
DROP INDEX IF EXISTS document_chunks_document_of;
DROP INDEX IF EXISTS documents_readable;
