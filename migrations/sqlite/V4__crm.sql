-- CRM: notes on leads, the link from a lead to the conversation it came from, and the
-- indexes that keep lead stats and filtered pages fast with millions of rows.

CREATE TABLE lead_notes (
    id         TEXT PRIMARY KEY,
    lead_id    INTEGER NOT NULL REFERENCES leads(id) ON DELETE CASCADE,
    user_id    TEXT REFERENCES users(id) ON DELETE SET NULL,
    content    TEXT NOT NULL,
    is_pinned  INTEGER NOT NULL DEFAULT 0,
    sort_order INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX lead_notes_lead ON lead_notes(lead_id, is_pinned, sort_order);

-- leads.conversation_id is the spec's integer; conversations have UUID ids, so the link a
-- conversation analysis makes is kept here (and cleared when the conversation is deleted).
ALTER TABLE leads ADD COLUMN conversation_ref TEXT REFERENCES conversations(id) ON DELETE SET NULL;
CREATE INDEX leads_conversation_ref ON leads(conversation_ref);

-- Filters of stats / all / list: status and priority per agent, in time order; the
-- admin-wide listing in time order. leads_agent_status is a prefix of the new index.
DROP INDEX IF EXISTS leads_agent_status;
CREATE INDEX leads_agent_status_time ON leads(agent_id, status, created_at);
CREATE INDEX leads_agent_priority_time ON leads(agent_id, priority, created_at);
CREATE INDEX leads_user_priority_time ON leads(user_id, priority, created_at);
CREATE INDEX leads_time ON leads(created_at);
CREATE INDEX lead_activities_lead_id ON lead_activities(lead_id, id);

-- Conversation filters: status per user in time order; sync looks conversations up by
-- external_id (already UNIQUE).
CREATE INDEX conversations_user_status_time ON conversations(user_id, status, started_at);
-- Admin-wide stats and listings by status.
CREATE INDEX leads_status_time ON leads(status, created_at);

-- searchTerm: substring search across name, email and phone through a trigram index, kept
-- in step with `leads` by triggers (terms shorter than 3 characters fall back to LIKE).
CREATE VIRTUAL TABLE leads_search USING fts5(name, email, phone, content='leads', content_rowid='id', tokenize='trigram');
CREATE TRIGGER leads_search_ai AFTER INSERT ON leads BEGIN
    INSERT INTO leads_search(rowid, name, email, phone) VALUES (new.id, new.name, new.email, new.phone);
END;
CREATE TRIGGER leads_search_ad AFTER DELETE ON leads BEGIN
    INSERT INTO leads_search(leads_search, rowid, name, email, phone) VALUES ('delete', old.id, old.name, old.email, old.phone);
END;
CREATE TRIGGER leads_search_au AFTER UPDATE OF name, email, phone ON leads BEGIN
    INSERT INTO leads_search(leads_search, rowid, name, email, phone) VALUES ('delete', old.id, old.name, old.email, old.phone);
    INSERT INTO leads_search(rowid, name, email, phone) VALUES (new.id, new.name, new.email, new.phone);
END;
INSERT INTO leads_search(leads_search) VALUES ('rebuild');

-- Lead counts per (agent, owner, status), kept by triggers, so that `stats` without
-- priority, search or date filters sums a handful of rows instead of counting leads.
-- A null status is counted under ''.
CREATE TABLE lead_status_counts (
    agent_id TEXT NOT NULL,
    user_id  TEXT NOT NULL,
    status   TEXT NOT NULL,
    n        INTEGER NOT NULL,
    PRIMARY KEY (agent_id, user_id, status)
) WITHOUT ROWID;
CREATE INDEX lead_status_counts_user ON lead_status_counts(user_id);
CREATE TRIGGER lead_counts_ai AFTER INSERT ON leads BEGIN
    INSERT INTO lead_status_counts (agent_id, user_id, status, n)
        VALUES (new.agent_id, new.user_id, COALESCE(new.status, ''), 1)
        ON CONFLICT (agent_id, user_id, status) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER lead_counts_ad AFTER DELETE ON leads BEGIN
    UPDATE lead_status_counts SET n = n - 1
        WHERE agent_id = old.agent_id AND user_id = old.user_id AND status = COALESCE(old.status, '');
END;
CREATE TRIGGER lead_counts_au AFTER UPDATE OF agent_id, user_id, status ON leads BEGIN
    UPDATE lead_status_counts SET n = n - 1
        WHERE agent_id = old.agent_id AND user_id = old.user_id AND status = COALESCE(old.status, '');
    INSERT INTO lead_status_counts (agent_id, user_id, status, n)
        VALUES (new.agent_id, new.user_id, COALESCE(new.status, ''), 1)
        ON CONFLICT (agent_id, user_id, status) DO UPDATE SET n = n + 1;
END;
INSERT INTO lead_status_counts (agent_id, user_id, status, n)
    SELECT agent_id, user_id, COALESCE(status, ''), COUNT(*) FROM leads WHERE true GROUP BY 1, 2, 3;
