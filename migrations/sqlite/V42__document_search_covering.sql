-- A knowledge-base search ranks every chunk its words match and asks, for each, which
-- document the chunk belongs to and whether the caller may read that document. Through the
-- tables, each answer reads the chunk's row (its text: hundreds of bytes) and the document's
-- row, pages that a connection's small cache keeps reading again at thousands of documents.
-- These two indexes hold just what those questions need, a few dozen bytes an entry;
-- `db::documents::search` names them (INDEXED BY) and reads the answer's rows for the best few.
CREATE INDEX IF NOT EXISTS document_chunks_document_of ON document_chunks(id, document_id);
CREATE INDEX IF NOT EXISTS documents_readable
    ON documents(id, user_id, is_public, status, is_active);
