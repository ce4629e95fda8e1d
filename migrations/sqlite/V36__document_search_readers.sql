-- Who may read a chunk, inside the full-text index: a second FTS5 column `readers` holding
-- the owner's token (`u` and the hex of the owner's id: one token whatever the id's
-- characters) and `pub` for a public document. A search then asks FTS5 for
-- `readers : (owner OR pub) AND content : (words)`, and FTS5 intersects the owner's short
-- list with the words' long ones before anything is ranked, instead of ranking every user's
-- matches and dropping those of others afterwards.
--
-- The tokens are not stored in document_chunks: the index's content is a view joining each
-- chunk to its document, and triggers keep the index in step with chunks and with the two
-- document columns the tokens come from. An external-content FTS5 table must be told a
-- row's old values to remove it, so every removal happens while the document row still
-- exists (BEFORE triggers, and a document's chunks deleted before the document itself).

DROP TRIGGER document_chunks_ai;
DROP TRIGGER document_chunks_ad;
DROP TABLE document_chunks_fts;

CREATE VIEW document_chunks_indexed AS
    SELECT ch.id, ch.content,
           'u' || hex(d.user_id) || CASE WHEN d.is_public = 1 THEN ' pub' ELSE '' END AS readers
    FROM document_chunks ch JOIN documents d ON d.id = ch.document_id;

CREATE VIRTUAL TABLE document_chunks_fts USING fts5(
    content,
    readers,
    content = 'document_chunks_indexed',
    content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2'
);

CREATE TRIGGER document_chunks_ai AFTER INSERT ON document_chunks BEGIN
    INSERT INTO document_chunks_fts(rowid, content, readers)
        SELECT id, content, readers FROM document_chunks_indexed WHERE id = new.id;
END;
CREATE TRIGGER document_chunks_bd BEFORE DELETE ON document_chunks BEGIN
    INSERT INTO document_chunks_fts(document_chunks_fts, rowid, content, readers)
        SELECT 'delete', id, content, readers FROM document_chunks_indexed WHERE id = old.id;
END;
-- A chunk's content never changes in place (a document's chunks are replaced), but if one
-- ever did, the index must follow.
CREATE TRIGGER document_chunks_bu BEFORE UPDATE OF content, document_id ON document_chunks BEGIN
    INSERT INTO document_chunks_fts(document_chunks_fts, rowid, content, readers)
        SELECT 'delete', id, content, readers FROM document_chunks_indexed WHERE id = old.id;
END;
CREATE TRIGGER document_chunks_au AFTER UPDATE OF content, document_id ON document_chunks BEGIN
    INSERT INTO document_chunks_fts(rowid, content, readers)
        SELECT id, content, readers FROM document_chunks_indexed WHERE id = new.id;
END;

-- The cascade from documents would delete the chunks after the document row is gone, when
-- the view can no longer say which tokens to remove.
CREATE TRIGGER documents_chunks_bd BEFORE DELETE ON documents BEGIN
    DELETE FROM document_chunks WHERE document_id = old.id;
END;
CREATE TRIGGER documents_readers_bu BEFORE UPDATE OF user_id, is_public ON documents
WHEN old.user_id IS NOT new.user_id OR old.is_public IS NOT new.is_public BEGIN
    INSERT INTO document_chunks_fts(document_chunks_fts, rowid, content, readers)
        SELECT 'delete', ix.id, ix.content, ix.readers
        FROM document_chunks ch JOIN document_chunks_indexed ix ON ix.id = ch.id
        WHERE ch.document_id = old.id;
END;
CREATE TRIGGER documents_readers_au AFTER UPDATE OF user_id, is_public ON documents
WHEN old.user_id IS NOT new.user_id OR old.is_public IS NOT new.is_public BEGIN
    INSERT INTO document_chunks_fts(rowid, content, readers)
        SELECT ix.id, ix.content, ix.readers
        FROM document_chunks ch JOIN document_chunks_indexed ix ON ix.id = ch.id
        WHERE ch.document_id = new.id;
END;

INSERT INTO document_chunks_fts(document_chunks_fts) VALUES ('rebuild');
