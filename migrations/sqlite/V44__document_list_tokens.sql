-- V43 gave a chunk its reader tokens only while its document is completed and active, for
-- the search; but the list's content search (`all` with `searchTerm`) reads the same tokens,
-- so a user's list no longer found a switched-off document by its words, as it did before
-- V43 and as it does on PostgreSQL and in an admin's list. A chunk that may not be searched
-- now has the same tokens with an `x` in front (`xu<owner hex>`, `xpub`): the search asks
-- for `u…`/`pub`, the list for both kinds, and neither reads a document row per match.
--
-- The tokens change on the same updates as V43's, so its triggers stay as they are; they
-- read this view by name when they run.

DROP VIEW document_chunks_indexed;

CREATE VIEW document_chunks_indexed AS
    SELECT ch.id, ch.content,
           CASE WHEN d.status = 'completed' AND d.is_active = 1
                THEN 'u' || hex(d.user_id) || CASE WHEN d.is_public = 1 THEN ' pub' ELSE '' END
                ELSE 'xu' || hex(d.user_id) || CASE WHEN d.is_public = 1 THEN ' xpub' ELSE '' END
                END AS readers
    FROM document_chunks ch JOIN documents d ON d.id = ch.document_id;

INSERT INTO document_chunks_fts(document_chunks_fts) VALUES ('rebuild');
