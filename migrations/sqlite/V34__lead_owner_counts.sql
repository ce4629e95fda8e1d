-- Lead counts per genie owner and status, and a partial conversation index (issue #16, a
-- million records). A standard user's `leads stats` and page counts cover the leads of
-- every genie they own or are assigned to; summed from lead_status_counts that is a few
-- rows per genie, so with 10,000 genies one `stats` read 40,000 rows. Here it is a few rows
-- per owner. A genie's owner never changes, so a lead's owner changes only with its genie
-- (`update` moving it) and the counts follow the leads alone: each trigger looks the owner
-- up through the lead's genie.
CREATE TABLE lead_owner_counts (
    owner_id TEXT NOT NULL,
    status   TEXT NOT NULL,
    n        INTEGER NOT NULL,
    PRIMARY KEY (owner_id, status)
) WITHOUT ROWID;

CREATE TRIGGER lead_owner_counts_ai AFTER INSERT ON leads BEGIN
    INSERT INTO lead_owner_counts (owner_id, status, n)
        SELECT g.user_id, COALESCE(new.status, ''), 1 FROM genies g WHERE g.id = new.agent_id
        ON CONFLICT (owner_id, status) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER lead_owner_counts_ad AFTER DELETE ON leads BEGIN
    UPDATE lead_owner_counts SET n = n - 1
        WHERE owner_id = (SELECT g.user_id FROM genies g WHERE g.id = old.agent_id)
          AND status = COALESCE(old.status, '');
END;
CREATE TRIGGER lead_owner_counts_au AFTER UPDATE OF agent_id, status ON leads BEGIN
    UPDATE lead_owner_counts SET n = n - 1
        WHERE owner_id = (SELECT g.user_id FROM genies g WHERE g.id = old.agent_id)
          AND status = COALESCE(old.status, '');
    INSERT INTO lead_owner_counts (owner_id, status, n)
        SELECT g.user_id, COALESCE(new.status, ''), 1 FROM genies g WHERE g.id = new.agent_id
        ON CONFLICT (owner_id, status) DO UPDATE SET n = n + 1;
END;
-- A genie's leads go before the genie does, while its owner can still be looked up: the
-- foreign key's cascade deletes them after the genie row is gone, when the trigger above
-- would find no owner to count them off.
CREATE TRIGGER genies_delete_leads BEFORE DELETE ON genies BEGIN
    DELETE FROM leads WHERE agent_id = old.id;
END;

INSERT INTO lead_owner_counts (owner_id, status, n)
    SELECT g.user_id, s.status, SUM(s.n) FROM lead_status_counts s JOIN genies g ON g.id = s.agent_id
    WHERE true GROUP BY 1, 2;

-- Only the leads an analysis made have a conversation: the index of the rest (every lead,
-- keyed NULL) cost a page write per create and 9 bytes a lead, and no query looks for NULL
-- (the lookups are `conversation_ref = ?`, which the partial index serves, as does the
-- foreign key's ON DELETE SET NULL).
DROP INDEX leads_conversation_ref;
CREATE INDEX leads_conversation_ref ON leads(conversation_ref) WHERE conversation_ref IS NOT NULL;
