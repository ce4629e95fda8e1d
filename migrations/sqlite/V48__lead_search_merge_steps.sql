-- The lead search index (a trigram FTS5 table) merges its segments in steps the search
-- indexer takes, each a transaction of its own, instead of FTS5's automatic merges.
--
-- Automatic merging works inside whichever transaction writes the index: every 64 leaf
-- pages written, it merges 64 pages a level in that transaction's commit. Those commits were
-- the slowest in a run of one client's lead creates (34-47 ms, docs/performance.md, round
-- thirty-two), and they held the one writer every other request waits for. A lead's delete or
-- rename writes the index in the request's own transaction, so it could pay for them too.
--
-- With `automerge` at 0 nothing merges unless asked; the indexer asks in steps of 16 pages
-- after each batch and every half second (service::leads::search_indexer), and a step
-- merges a level once it holds four segments. Should the steps fall behind, `crisismerge`
-- still merges a level of 64 segments in the commit that writes it (FTS5's default is 16).
INSERT INTO leads_search(leads_search, rank) VALUES ('automerge', 0);
INSERT INTO leads_search(leads_search, rank) VALUES ('crisismerge', 64);
