-- Knowledge base: where a document's bytes live in the content-addressed store, what its
-- source needs to be processed again, and the chunks retrieval searches through FTS5.

ALTER TABLE documents ADD COLUMN original_hash TEXT;     -- upload or typed text, in documents/
ALTER TABLE documents ADD COLUMN content_hash TEXT;      -- extracted, then optimised text
ALTER TABLE documents ADD COLUMN filename TEXT;          -- upload file name
ALTER TABLE documents ADD COLUMN options TEXT NOT NULL DEFAULT '{}'; -- crawl bounds etc.

CREATE INDEX documents_original_hash ON documents(original_hash);
CREATE INDEX documents_content_hash ON documents(content_hash);
CREATE INDEX documents_user_type ON documents(user_id, type);
CREATE INDEX documents_status ON documents(status);

CREATE TABLE document_chunks (
    id          INTEGER PRIMARY KEY,
    document_id TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,
    content     TEXT NOT NULL
);
CREATE INDEX document_chunks_document ON document_chunks(document_id, seq);

-- External-content FTS5 index over the chunks, kept in step by triggers.
CREATE VIRTUAL TABLE document_chunks_fts USING fts5(
    content,
    content = 'document_chunks',
    content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2'
);

CREATE TRIGGER document_chunks_ai AFTER INSERT ON document_chunks BEGIN
    INSERT INTO document_chunks_fts(rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER document_chunks_ad AFTER DELETE ON document_chunks BEGIN
    INSERT INTO document_chunks_fts(document_chunks_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;

CREATE INDEX document_folders_parent ON document_folders(parent_id);
