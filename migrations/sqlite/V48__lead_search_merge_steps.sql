-- The lead search index (a trigram FTS5 table) merges its segments in steps the search
-- indexer takes, each a transaction of its own, instead of FTS5's automatic merges.
--
-- Automatic merging works inside whichever transaction writes the index: every 64 leaf
-- pages written, it merges 64 pages a level in that transaction's commit. Those commits were
-- the slowest in a run of one client's lead creates (34-47 ms, docs/performance.md, round
-- thirty-two), and they held the one writer every other request waits for. A lead's delete or
-- rename writes the index in the request's own transaction, so it could pay for them too.
--
-- With `automerge` at 0 nothing merges unless asked; the indexer asks in steps of a few
-- pages after each batch and every half second (service::leads::search_indexer). Should it
-- fall behind, `crisismerge` still merges a level of 64 segments when it is written (FTS5's
-- default is 16; the indexer's steps start at 4).
INSERT INTO leads_search(leads_search, rank) VALUES ('automerge', 0);
INSERT INTO leads_search(leads_search, rank) VALUES ('crisismerge', 64);
