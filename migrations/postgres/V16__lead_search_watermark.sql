-- The counterpart of SQLite's V39 (issue #16, round ten): the table that holds SQLite's lead
-- search watermark, so that both engines have the same tables (a move copies every table
-- they share). PostgreSQL searches leads through its trigram indexes, which follow each
-- write; nothing here reads or writes this table, and it stays empty.
CREATE TABLE IF NOT EXISTS leads_search_state (
    id         BIGINT PRIMARY KEY CHECK (id = 1),
    indexed_to BIGINT NOT NULL
);
