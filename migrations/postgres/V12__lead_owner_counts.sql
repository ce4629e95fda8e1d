-- PostgreSQL side of sqlite V34: lead counts per genie owner and status, so that a standard
-- user's `leads stats` and page counts read a few rows instead of a few per genie. A genie's
-- owner never changes; the counts follow the leads, looking the owner up through the genie.
CREATE TABLE lead_owner_counts (
    owner_id TEXT NOT NULL,
    status   TEXT NOT NULL,
    n        BIGINT NOT NULL,
    PRIMARY KEY (owner_id, status)
);

CREATE FUNCTION genied_lead_owner_counted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        UPDATE lead_owner_counts SET n = n - 1
            WHERE owner_id = (SELECT g.user_id FROM genies g WHERE g.id = OLD.agent_id)
              AND status = COALESCE(OLD.status, '');
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO lead_owner_counts (owner_id, status, n)
            SELECT g.user_id, COALESCE(NEW.status, ''), 1 FROM genies g WHERE g.id = NEW.agent_id
            ON CONFLICT (owner_id, status) DO UPDATE SET n = lead_owner_counts.n + 1;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER leads_owner_counted_aid AFTER INSERT OR DELETE ON leads
    FOR EACH ROW EXECUTE FUNCTION genied_lead_owner_counted();
CREATE TRIGGER leads_owner_counted_au AFTER UPDATE OF agent_id, status ON leads
    FOR EACH ROW EXECUTE FUNCTION genied_lead_owner_counted();

-- A genie's leads go before the genie does, while its owner can still be looked up (the
-- foreign key's cascade runs after the genie row is gone).
CREATE FUNCTION genied_genie_delete_leads() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM leads WHERE agent_id = OLD.id;
    RETURN OLD;
END $$;
CREATE TRIGGER genies_delete_leads BEFORE DELETE ON genies
    FOR EACH ROW EXECUTE FUNCTION genied_genie_delete_leads();

INSERT INTO lead_owner_counts (owner_id, status, n)
    SELECT g.user_id, s.status, SUM(s.n) FROM lead_status_counts s JOIN genies g ON g.id = s.agent_id
    GROUP BY 1, 2;

-- Only the leads an analysis made have a conversation; the lookups (and the foreign key's
-- ON DELETE SET NULL) are `conversation_ref = $1`, which a partial index serves.
DROP INDEX leads_conversation_ref;
CREATE INDEX leads_conversation_ref ON leads(conversation_ref) WHERE conversation_ref IS NOT NULL;
