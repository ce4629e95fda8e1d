-- The documents' search index outside SQLite (src/doc_index.rs, a tantivy index under the
-- data directory) is kept in step from this queue: every change to a document's chunks or
-- to who may search them queues the document, in the change's own transaction, and the
-- indexer (knowledge::search_index) re-indexes queued documents whole, then deletes the
-- rows it did. AUTOINCREMENT: a row's number is never given out again, so the index's
-- commit can name the last row it covers, and a start can tell an index that is behind or
-- ahead of this database (sqlite_sequence keeps the highest number given).
--
-- The changes are V43's: a chunk added, removed or rewritten; a document's owner, its
-- public flag, or whether it is completed and active. A document deleted removes its
-- chunks first (V36's documents_chunks_bd), which queues it.
--
-- `IF NOT EXISTS`: a test puts the documents index back as it was before V36 and runs the
-- migrations from there again (tests/it/documents.rs).

CREATE TABLE IF NOT EXISTS document_search_queue (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    document_id TEXT NOT NULL
);

CREATE TRIGGER IF NOT EXISTS document_chunks_queue_ai AFTER INSERT ON document_chunks BEGIN
    INSERT INTO document_search_queue(document_id) VALUES (new.document_id);
END;
CREATE TRIGGER IF NOT EXISTS document_chunks_queue_ad AFTER DELETE ON document_chunks BEGIN
    INSERT INTO document_search_queue(document_id) VALUES (old.document_id);
END;
CREATE TRIGGER IF NOT EXISTS document_chunks_queue_au
AFTER UPDATE OF content, document_id ON document_chunks BEGIN
    INSERT INTO document_search_queue(document_id) VALUES (old.document_id);
    INSERT INTO document_search_queue(document_id)
        SELECT new.document_id WHERE new.document_id IS NOT old.document_id;
END;
CREATE TRIGGER IF NOT EXISTS documents_queue_au
AFTER UPDATE OF user_id, is_public, status, is_active ON documents
WHEN old.user_id IS NOT new.user_id OR old.is_public IS NOT new.is_public
  OR (old.status = 'completed' AND old.is_active = 1) IS NOT (new.status = 'completed' AND new.is_active = 1)
BEGIN
    INSERT INTO document_search_queue(document_id) VALUES (new.id);
END;
